//! `etcd status`: one screen for an EtcdCluster.

use jiff::Timestamp;
use kube::ResourceExt;

use groundskeeper_api::EtcdCluster;
use groundskeeper_api::etcd_cluster::{CompactionMode, EtcdMemberStatus};
use groundskeeper_api::maintenance_task::{MaintenanceTask, TargetKind};

use super::{conditions, indent, mib, relative, size, snapshot, table, task, when};

/// The tasks of `cluster` among `tasks`.
pub fn tasks_of(cluster: &EtcdCluster, tasks: &[MaintenanceTask]) -> Vec<MaintenanceTask> {
    tasks
        .iter()
        .filter(|t| {
            t.spec.target.kind == TargetKind::EtcdCluster
                && t.spec.target.name == cluster.name_any()
                && t.namespace() == cluster.namespace()
        })
        .cloned()
        .collect()
}

/// The whole screen.
pub fn status(cluster: &EtcdCluster, tasks: &[MaintenanceTask], now: Timestamp) -> String {
    let status = cluster.status.clone().unwrap_or_default();
    let policy = &cluster.spec.policy;
    let mut out = format!("EtcdCluster {}/{}\n", cluster.namespace().unwrap_or_default(), cluster.name_any());
    let mut field =
        |name: &str, value: String| out.push_str(&format!("  {:<14}{value}\n", format!("{name}:")));
    field("Endpoints", cluster.spec.endpoints.join(", "));
    field(
        "Members",
        match (status.member_count, status.healthy_members) {
            (Some(count), Some(healthy)) => format!("{count} ({healthy} healthy)"),
            _ => "not observed yet".to_owned(),
        },
    );
    field("Observed", when(now, status.last_observed_time.as_ref()));
    field("Quorum", snapshot::quorum_state(&status, now));
    field("Last proof", snapshot::last_proof(status.last_snapshot_proof.as_ref(), now, &cluster.name_any()));
    if !status.snapshots.is_empty() {
        let mut stores: Vec<&str> = status.snapshots.iter().map(|r| r.store.as_str()).collect();
        stores.sort_unstable();
        stores.dedup();
        field(
            "Snapshots",
            format!(
                "{} recorded in {} store(s): kubectl groundskeeper snapshot list -n {} {}",
                status.snapshots.len(),
                stores.len(),
                cluster.namespace().unwrap_or_default(),
                cluster.name_any()
            ),
        );
    }
    field(
        "Automatic",
        if policy.enabled {
            format!(
                "on: defragment a member at ≥ {} ({}) with ≥ {}% free pages; check every {}",
                mib(policy.min_defrag_bytes),
                policy.min_defrag_bytes,
                policy.max_fragmented_percent,
                policy.check_interval
            )
        } else {
            "off (spec.policy.enabled: false): observed and reported only".to_owned()
        },
    );

    out.push_str("\nMembers:\n");
    if status.members.is_empty() {
        out.push_str("  none observed yet\n");
    } else {
        out.push_str(&indent(&members_table(&status.members, now)));
    }

    out.push_str("\nCompaction:\n");
    let mut field =
        |name: &str, value: String| out.push_str(&format!("  {:<14}{value}\n", format!("{name}:")));
    field(
        "Policy",
        match &policy.compaction {
            Some(c) => match c.mode {
                CompactionMode::Periodic => format!("periodic: keep {} of history", c.retention),
                CompactionMode::Revision => format!("revision: keep the last {} revisions", c.retention),
            },
            None => "none: groundskeeper does not compact (etcd's --auto-compaction-* or the Kubernetes API server may)".to_owned(),
        },
    );
    field("Revision", status.revision.map(|r| r.to_string()).unwrap_or_else(|| "-".to_owned()));
    field(
        "Compacted to",
        match status.last_compacted_revision {
            Some(revision) => format!("{revision} ({})", when(now, status.last_compaction_time.as_ref())),
            None => "never by groundskeeper".to_owned(),
        },
    );
    if let (Some(revision), Some(compacted)) = (status.revision, status.last_compacted_revision) {
        field("History", format!("{} revisions since", revision - compacted));
    }

    out.push_str("\nMaintenance:\n");
    let mut field =
        |name: &str, value: String| out.push_str(&format!("  {:<14}{value}\n", format!("{name}:")));
    field(
        "Last",
        match (&status.last_maintenance_outcome, &status.last_maintenance_time) {
            (Some(outcome), at) => format!(
                "{outcome} {}, task {}: {}",
                at.as_ref().map(|t| relative(now, t.0)).unwrap_or_default(),
                status.last_maintenance_task.clone().unwrap_or_else(|| "-".into()),
                status.last_maintenance_message.clone().unwrap_or_default()
            ),
            (None, _) => "none yet".to_owned(),
        },
    );
    field("Next check", when(now, status.next_check_time.as_ref()));
    field("Active task", status.active_task.clone().unwrap_or_else(|| "none".to_owned()));

    out.push_str("\nTasks:\n");
    let mine = tasks_of(cluster, tasks);
    let open: Vec<MaintenanceTask> = mine.into_iter().filter(|t| !task::state_of(t).is_final()).collect();
    if open.is_empty() {
        out.push_str("  none queued or running\n");
    } else {
        out.push_str(&indent(&task::list(&open, now, false)));
    }

    out.push_str("\nConditions:\n");
    out.push_str(&conditions(now, &status.conditions));
    out
}

fn members_table(members: &[EtcdMemberStatus], now: Timestamp) -> String {
    let mut sorted: Vec<&EtcdMemberStatus> = members.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let rows: Vec<Vec<String>> = sorted
        .into_iter()
        .map(|m| {
            let mut role = if m.leader { "leader" } else { "follower" }.to_owned();
            if m.learner {
                role = "learner".to_owned();
            }
            vec![
                m.name.clone(),
                m.id.clone(),
                m.endpoint.clone(),
                role,
                if m.healthy { "healthy" } else { "unhealthy" }.to_owned(),
                m.version.clone().unwrap_or_else(|| "-".into()),
                m.raft_term.map(|t| t.to_string()).unwrap_or_else(|| "-".into()),
                size(m.db_size),
                size(m.db_size_in_use),
                m.fragmentation_percent.map(|p| format!("{p:.1}%")).unwrap_or_else(|| "-".into()),
                m.last_defrag_time.as_ref().map(|t| relative(now, t.0)).unwrap_or_else(|| "-".into()),
                m.message.clone().unwrap_or_default(),
            ]
        })
        .collect();
    table(
        &[
            "NAME",
            "ID",
            "ENDPOINT",
            "ROLE",
            "HEALTH",
            "VERSION",
            "RAFT TERM",
            "DB SIZE",
            "IN USE",
            "FRAGMENTED",
            "LAST DEFRAG",
            "MESSAGE",
        ],
        &rows,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> Timestamp {
        "2026-11-23T20:10:00Z".parse().unwrap()
    }

    fn cluster() -> EtcdCluster {
        serde_json::from_value(json!({
            "apiVersion": "groundskeeper.dev/v1alpha1",
            "kind": "EtcdCluster",
            "metadata": {"name": "main", "namespace": "etcd"},
            "spec": {"endpoints": ["http://a:2379", "http://b:2379"],
                     "policy": {"compaction": {"mode": "revision", "retention": "10000"}}},
            "status": {
                "lastObservedTime": "2026-11-23T20:08:00Z",
                "nextCheckTime": "2026-11-23T20:18:00Z",
                "memberCount": 2, "healthyMembers": 1,
                "revision": 25000, "lastCompactedRevision": 15000, "lastCompactionTime": "2026-11-23T20:00:00Z",
                "lastMaintenanceTime": "2026-11-23T20:05:00Z", "lastMaintenanceOutcome": "Succeeded",
                "lastMaintenanceTask": "main-maintenance-1", "lastMaintenanceMessage": "defragmented 2 member(s)",
                "activeTask": "manual-2",
                "members": [
                    {"name": "m0", "id": "8e9e05c52164694d", "endpoint": "http://a:2379", "leader": true, "healthy": true,
                     "version": "3.5.17", "raftTerm": 4, "dbSize": 6291456, "dbSizeInUse": 2097152, "fragmentationPercent": 66.7,
                     "lastDefragTime": "2026-11-23T20:05:00Z"},
                    {"name": "m1", "id": "91bc3c398fb3c146", "endpoint": "http://b:2379", "healthy": false,
                     "message": "connection refused"}
                ],
                "conditions": [{"type": "DefragControllerDegraded", "status": "True", "reason": "MemberUnhealthy",
                                "message": "member m1 unhealthy", "lastTransitionTime": "2026-11-23T20:08:00Z"}]
            }
        }))
        .unwrap()
    }

    fn task(name: &str, target: &str, state: &str) -> MaintenanceTask {
        serde_json::from_value(json!({
            "apiVersion": "groundskeeper.dev/v1alpha1",
            "kind": "MaintenanceTask",
            "metadata": {"name": name, "namespace": "etcd", "creationTimestamp": "2026-11-23T20:09:00Z",
                         "labels": {"groundskeeper.dev/origin": "manual"}},
            "spec": {"target": {"kind": "EtcdCluster", "name": target}, "type": "Snapshot"},
            "status": {"state": state},
        }))
        .unwrap()
    }

    #[test]
    fn one_screen_for_a_cluster() {
        let tasks = vec![
            task("manual-2", "main", "InProgress"),
            task("other-cluster", "second", "Pending"),
            task("old", "main", "Completed"),
        ];
        let got = status(&cluster(), &tasks, now());
        for wanted in [
            "EtcdCluster etcd/main\n",
            "  Members:      2 (1 healthy)\n",
            "  Observed:     2026-11-23T20:08:00Z (2m ago)\n",
            "  Automatic:    on: defragment a member at ≥ 95.4 MiB (100000000) with ≥ 45% free pages; check every 10m\n",
            "  NAME   ID                 ENDPOINT        ROLE       HEALTH      VERSION   RAFT TERM   DB SIZE             IN USE              FRAGMENTED   LAST DEFRAG   MESSAGE\n",
            "  m0     8e9e05c52164694d   http://a:2379   leader     healthy     3.5.17    4           6.0 MiB (6291456)   2.0 MiB (2097152)   66.7%        5m ago\n",
            "  m1     91bc3c398fb3c146   http://b:2379   follower   unhealthy   -         -           -                   -                   -            -             connection refused\n",
            "  Policy:       revision: keep the last 10000 revisions\n",
            "  Compacted to: 15000 (2026-11-23T20:00:00Z (10m ago))\n",
            "  History:      10000 revisions since\n",
            "  Last:         Succeeded 5m ago, task main-maintenance-1: defragmented 2 member(s)\n",
            "  Next check:   2026-11-23T20:18:00Z (in 8m)\n",
            "  Active task:  manual-2\n",
            "  manual-2   Snapshot   EtcdCluster/main   InProgress   running",
            "  DefragControllerDegraded   True     MemberUnhealthy   2m    member m1 unhealthy\n",
        ] {
            assert!(got.contains(wanted), "missing {wanted:?} in\n{got}");
        }
        assert!(!got.contains("other-cluster") && !got.contains("old "), "{got}");
    }

    #[test]
    fn a_cluster_not_observed_yet() {
        let mut c = cluster();
        c.status = None;
        let got = status(&c, &[], now());
        assert!(got.contains("  Members:      not observed yet\n"), "{got}");
        assert!(got.contains("Members:\n  none observed yet\n"), "{got}");
        assert!(got.contains("  Compacted to: never by groundskeeper\n"), "{got}");
        assert!(got.contains("Tasks:\n  none queued or running\n"), "{got}");
        assert!(got.contains("Conditions:\n  none\n"), "{got}");
    }

    #[test]
    fn the_screen_says_the_last_proof_and_the_quorum() {
        let mut c = cluster();
        let status = c.status.as_mut().unwrap();
        status.quorum_lost_since = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            "2026-11-23T20:04:00Z".parse().unwrap(),
        ));
        status.last_snapshot_proof = Some(
            serde_json::from_value(json!({"store": "s3://b", "object": "a.db", "proven": true,
                                          "at": "2026-11-23T20:00:00Z", "revision": 24000}))
            .unwrap(),
        );
        status.snapshots = serde_json::from_value(json!([
            {"store": "s3://b", "object": "a.db"}, {"store": "s3://b", "object": "b.db"}, {"store": "pvc/s", "object": "a.db"}
        ]))
        .unwrap();
        let got = status_text(&c);
        for wanted in [
            "  Quorum:       LOST since 2026-11-23T20:04:00Z (6m ago) (1 of 2 members healthy)\n",
            "  Last proof:   last snapshot proven restorable at 2026-11-23T20:00:00Z (10m ago), revision 24000: a.db in s3://b\n",
            "  Snapshots:    3 recorded in 2 store(s): kubectl groundskeeper snapshot list -n etcd main\n",
        ] {
            assert!(got.contains(wanted), "missing {wanted:?} in\n{got}");
        }
        let plain = status_text(&cluster());
        assert!(plain.contains("  Quorum:       held (1 of 2 members healthy)\n"), "{plain}");
        assert!(plain.contains("  Last proof:   no snapshot proven restorable yet"), "{plain}");
        assert!(!plain.contains("Snapshots:"), "{plain}");
    }

    fn status_text(c: &EtcdCluster) -> String {
        status(c, &[], now())
    }
}
