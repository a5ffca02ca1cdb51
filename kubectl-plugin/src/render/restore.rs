//! A Restore for people: what `task create restore` shows before asking for the confirmation
//! (the snapshot, its proof, the quorum, the revisions lost, the plan), and where a running or
//! stopped restore stands (`task describe`, `--wait`).

use jiff::Timestamp;
use kube::ResourceExt;

use groundskeeper_api::EtcdCluster;
use groundskeeper_api::plan::TaskPlan;
use groundskeeper_api::plan::deltas_up_to;
use groundskeeper_api::restore::{RestoreStatus, RestoreStep, full_at_or_before};
use groundskeeper_api::snapshot_catalog::{SnapshotRecord, newest_proven};

use super::snapshot::{proof_cell, quorum_state, short_sha};
use super::{duration, indent, size, table, when};

/// What a restore of `cluster` from `store` (`object`, else the newest proven snapshot there)
/// is about to do, for the person who confirms it.
pub struct Proposal<'a> {
    pub cluster: &'a EtcdCluster,
    /// `pvc/NAME` or the bucket's URL.
    pub store: &'a str,
    pub object: Option<&'a str>,
    pub override_quorum_check: bool,
    /// To a point in time: the revision.
    pub to_revision: Option<i64>,
    /// The time asked for, when the point was given as one (resolved to `to_revision`).
    pub to_time: Option<Timestamp>,
    pub plan: &'a TaskPlan,
}

/// The snapshot the restore takes (to a point in time: the full snapshot its replay starts
/// from), as the catalog knows it.
fn chosen<'a>(
    cluster: &'a EtcdCluster,
    store: &str,
    object: Option<&str>,
    to_revision: Option<i64>,
) -> Option<&'a SnapshotRecord> {
    let snapshots = &cluster.status.as_ref()?.snapshots;
    match (object, to_revision) {
        (Some(object), _) => snapshots.iter().find(|r| r.store == store && r.object == object),
        (None, Some(revision)) => full_at_or_before(snapshots, store, revision),
        (None, None) => newest_proven(snapshots, store),
    }
}

/// To a point in time: the chain the replay applies and the recovery point it reaches, as the
/// catalog knows them.
fn point_in_time(cluster: &EtcdCluster, store: &str, full: Option<&SnapshotRecord>, to: i64) -> String {
    let Some(from) = full.and_then(|f| f.revision) else {
        return format!("revision {to}: the full snapshot's revision is not recorded; the replay reads it");
    };
    let catalog = cluster.status.as_ref().map(|s| s.snapshots.as_slice()).unwrap_or_default();
    let deltas = deltas_up_to(catalog, store, from, to);
    let reached = deltas.last().and_then(|d| d.revision).unwrap_or(from);
    let spans: Vec<String> = deltas
        .iter()
        .map(|d| format!("{}→{}", d.start_revision.unwrap_or_default(), d.revision.unwrap_or_default()))
        .collect();
    let chain = if spans.is_empty() {
        "no delta".to_owned()
    } else {
        format!("{} delta(s) {}", spans.len(), spans.join(", "))
    };
    if reached >= to {
        format!(
            "revision {to}: the full snapshot (revision {from}) and {chain}; recovery point revision {to}"
        )
    } else {
        format!(
            "revision {to}: the full snapshot (revision {from}) and {chain} reach revision {reached} only (as \
             the catalog knows them): the replay fails unless the store holds the rest"
        )
    }
}

/// The block shown before the confirmation.
pub fn proposal(p: &Proposal, now: Timestamp) -> String {
    let status = p.cluster.status.clone().unwrap_or_default();
    let record = chosen(p.cluster, p.store, p.object, p.to_revision);
    let namespace = p.cluster.namespace().unwrap_or_default();
    let mut out = format!("Restore of EtcdCluster {namespace}/{}\n", p.cluster.name_any());
    let mut field =
        |name: &str, value: String| out.push_str(&format!("  {:<16}{value}\n", format!("{name}:")));
    let object = p.object.map(str::to_owned).or_else(|| record.map(|r| r.object.clone()));
    field("Snapshot", format!("{} in {}", object.as_deref().unwrap_or("?"), p.store));
    if let Some(to) = p.to_revision {
        let asked = match p.to_time {
            Some(time) => format!("as of {time}, the newest backup written by then: "),
            None => String::new(),
        };
        field("Point in time", asked + &point_in_time(p.cluster, p.store, record, to));
    }
    match record {
        Some(r) => {
            let mut what = vec![
                format!("revision {}", r.revision.map_or("-".to_owned(), |n| n.to_string())),
                format!("{} keys", r.keys.map_or("-".to_owned(), |n| n.to_string())),
                size(r.size_bytes),
            ];
            if let Some(sha) = &r.sha256 {
                what.push(format!("sha256 {}", short_sha(sha)));
            }
            if r.encoding.is_some() {
                what.push(format!("stored as {}", super::snapshot::encoding_cell(r)));
            }
            field("Recorded", format!("{}, written {}", what.join(", "), when(now, r.written_at.as_ref())));
            field(
                "Proof",
                match &r.proof {
                    Some(_) => proof_cell(r.proof.as_ref()),
                    None => "never proven: the restore's first step proves it before anything is touched"
                        .to_owned(),
                },
            );
        }
        None => field(
            "Recorded",
            "not in the cluster's catalog (status.snapshots): its revision and keys are read from the \
             snapshot itself, in the first step"
                .to_owned(),
        ),
    }
    let quorum_line = quorum_state(&status, now);
    field(
        "Quorum",
        match (&status.quorum_lost_since, p.override_quorum_check) {
            (_, true) => format!("{quorum_line}; the check is overridden (--override-quorum-check)"),
            (Some(_), false) => quorum_line,
            (None, false) => format!(
                "{quorum_line}: the controller rejects a Restore while the quorum is there, unless \
                 --override-quorum-check"
            ),
        },
    );
    let restored_revision = p.to_revision.or(record.and_then(|r| r.revision));
    let lost = match (restored_revision, status.last_revision_with_quorum) {
        (Some(snapshot), Some(last)) => format!(
            "{} (the snapshot is at revision {snapshot}; the last revision seen with quorum was {last})",
            (last - snapshot).max(0)
        ),
        (Some(snapshot), None) => format!(
            "every revision after {snapshot}, the snapshot's (the last one seen with quorum is not recorded)"
        ),
        _ => "every write after the snapshot (its revision is not recorded)".to_owned(),
    };
    field("Revisions lost", lost);
    out.push_str("\nPlan:\n");
    out.push_str(&indent(&super::plan::plan(p.plan)));
    out
}

/// What to type at the prompt.
pub const CONFIRMATION_WORD: &str = "yes";

/// The prompt (no newline: the answer goes on the same line).
pub fn prompt(cluster: &str, store: &str) -> String {
    format!(
        "Every member's data is replaced by the snapshot's (the old data is kept aside on each volume) and \
         the writes after it are lost.\nType {CONFIRMATION_WORD:?} to restore EtcdCluster {cluster} from {store}: "
    )
}

/// Whether the answer typed confirms.
pub fn confirms(answer: &str) -> bool {
    answer.trim() == CONFIRMATION_WORD
}

/// `task describe`'s restore section: the snapshot, the StatefulSet, the steps, the members, the
/// revisions lost and, when it stopped, how to go on or back.
pub fn describe(restore: &RestoreStatus, now: Timestamp) -> String {
    let mut out = String::new();
    let mut field =
        |name: &str, value: String| out.push_str(&format!("  {:<16}{value}\n", format!("{name}:")));
    field("Phase", restore.phase.to_string());
    let mut snapshot = format!("{} in {}", restore.object, restore.store);
    if let Some(revision) = restore.revision {
        snapshot.push_str(&format!(", revision {revision}"));
    }
    if let Some(keys) = restore.keys {
        snapshot.push_str(&format!(", {keys} keys"));
    }
    if let Some(sha) = &restore.sha256 {
        snapshot.push_str(&format!(", sha256 {}", short_sha(sha)));
    }
    field("Snapshot", snapshot);
    field(
        "StatefulSet",
        match restore.original_replicas {
            Some(replicas) => format!("{} ({replicas} replicas before the restore)", restore.stateful_set),
            None => restore.stateful_set.clone(),
        },
    );
    if !restore.old_data_suffix.is_empty() {
        field(
            "Old data",
            format!("kept beside each member's data folder, suffix {}", restore.old_data_suffix),
        );
    }
    if let Some(lost) = restore.lost_revisions {
        let last = restore
            .last_revision_before_loss
            .map(|r| format!(" (the last revision seen before the loss was {r})"))
            .unwrap_or_default();
        field("Revisions lost", format!("{lost}{last}"));
    }
    out.push_str("\n  Steps:\n");
    if restore.steps.is_empty() {
        out.push_str("    none started yet\n");
    } else {
        out.push_str(&indent(&indent(&steps_table(&restore.steps, now))));
    }
    if !restore.members.is_empty() {
        let rows: Vec<Vec<String>> = restore
            .members
            .iter()
            .map(|m| vec![m.name.clone(), m.peer_url.clone(), m.claim.clone()])
            .collect();
        out.push_str("\n  Members:\n");
        out.push_str(&indent(&indent(&table(&["NAME", "PEER URL", "CLAIM"], &rows))));
    }
    if let Some(recovery) = &restore.recovery {
        out.push_str(&format!("\n  Stopped; to go on or back:\n{}", indent(&indent(recovery))));
    }
    out
}

/// One row per step: STEP, STATE, STARTED, DONE, MESSAGE.
pub fn steps_table(steps: &[RestoreStep], now: Timestamp) -> String {
    let rows: Vec<Vec<String>> = steps
        .iter()
        .map(|step| {
            let done = match (&step.started_at, &step.completed_at) {
                (Some(start), Some(end)) => {
                    format!(
                        "{} (took {})",
                        when(now, Some(end)),
                        duration(end.0.duration_since(start.0).as_secs())
                    )
                }
                (_, Some(end)) => when(now, Some(end)),
                _ => "-".to_owned(),
            };
            vec![
                step.phase.to_string(),
                step.state.clone(),
                when(now, step.started_at.as_ref()),
                done,
                step.message.clone().unwrap_or_else(|| "-".to_owned()),
            ]
        })
        .collect();
    table(&["STEP", "STATE", "STARTED", "DONE", "MESSAGE"], &rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use groundskeeper_api::plan::{PlanStep, plan_of};
    use serde_json::json;

    fn now() -> Timestamp {
        "2026-11-23T21:00:00Z".parse().unwrap()
    }

    fn cluster(status: serde_json::Value) -> EtcdCluster {
        serde_json::from_value(json!({
            "apiVersion": "groundskeeper.dev/v1alpha1",
            "kind": "EtcdCluster",
            "metadata": {"name": "main", "namespace": "etcd"},
            "spec": {"endpoints": ["http://a:2379"], "statefulSet": {"name": "etcd"}},
            "status": status,
        }))
        .unwrap()
    }

    fn plan() -> TaskPlan {
        plan_of(
            "restore EtcdCluster etcd/main (3 members of StatefulSet etcd) from a.db in s3://b (revision 1100); the 250 revision(s) written after it are lost".into(),
            vec![PlanStep { name: "etcd".into(), action: "ScaleDown".into(), ..PlanStep::default() }],
        )
    }

    #[test]
    fn the_proposal_says_what_is_restored_and_what_is_lost() {
        let snapshots = json!([
            {"store": "s3://b", "object": "a.db", "writtenAt": "2026-11-23T18:00:00Z", "revision": 1100, "keys": 320,
             "sizeBytes": 1048576, "sha256": "0123456789abcdef",
             "proof": {"store": "s3://b", "object": "a.db", "proven": true, "at": "2026-11-23T18:05:00Z", "revision": 1100}},
            {"store": "s3://b", "object": "b.db", "revision": 1200}
        ]);
        let lost = cluster(
            json!({"lastObservedTime": "2026-11-23T20:59:00Z", "memberCount": 3, "healthyMembers": 1,
                                  "quorumLostSince": "2026-11-23T20:40:00Z", "lastRevisionWithQuorum": 1350,
                                  "snapshots": snapshots}),
        );
        let held = cluster(
            json!({"lastObservedTime": "2026-11-23T20:59:00Z", "memberCount": 3, "healthyMembers": 3,
                                  "snapshots": snapshots}),
        );
        let plan = plan();
        type Case<'a> = (&'a str, Proposal<'a>, &'a [&'a str]);
        let cases: Vec<Case> = vec![
            (
                "the newest proven, quorum lost",
                Proposal {
                    cluster: &lost,
                    store: "s3://b",
                    object: None,
                    override_quorum_check: false,
                    to_revision: None,
                    to_time: None,
                    plan: &plan,
                },
                &[
                    "Restore of EtcdCluster etcd/main\n",
                    "  Snapshot:       a.db in s3://b\n",
                    "  Recorded:       revision 1100, 320 keys, 1.0 MiB (1048576), sha256 0123456789ab, written 2026-11-23T18:00:00Z (3h ago)\n",
                    "  Proof:          proven 2026-11-23T18:05:00Z rev 1100\n",
                    "  Quorum:         LOST since 2026-11-23T20:40:00Z (20m ago) (1 of 3 members healthy)\n",
                    "  Revisions lost: 250 (the snapshot is at revision 1100; the last revision seen with quorum was 1350)\n",
                    "\nPlan:\n  restore EtcdCluster etcd/main",
                    "  plan id: ",
                ],
            ),
            (
                "named, never proven, quorum held",
                Proposal {
                    cluster: &held,
                    store: "s3://b",
                    object: Some("b.db"),
                    override_quorum_check: false,
                    to_revision: None,
                    to_time: None,
                    plan: &plan,
                },
                &[
                    "  Snapshot:       b.db in s3://b\n",
                    "  Proof:          never proven: the restore's first step proves it",
                    "  Quorum:         held (3 of 3 members healthy): the controller rejects a Restore while the quorum is there, unless --override-quorum-check\n",
                    "  Revisions lost: every revision after 1200, the snapshot's",
                ],
            ),
            (
                "not in the catalog, overridden",
                Proposal {
                    cluster: &held,
                    store: "pvc/s",
                    object: Some("x.db"),
                    override_quorum_check: true,
                    to_revision: None,
                    to_time: None,
                    plan: &plan,
                },
                &[
                    "  Snapshot:       x.db in pvc/s\n",
                    "  Recorded:       not in the cluster's catalog",
                    "; the check is overridden (--override-quorum-check)\n",
                    "  Revisions lost: every write after the snapshot (its revision is not recorded)\n",
                ],
            ),
        ];
        for (what, proposal, wanted) in cases {
            let got = super::proposal(&proposal, now());
            for part in wanted {
                assert!(got.contains(part), "{what}: missing {part:?} in\n{got}");
            }
        }
    }

    #[test]
    fn only_yes_confirms() {
        for (answer, wanted) in
            [("yes\n", true), ("  yes  ", true), ("y\n", false), ("YES", false), ("", false)]
        {
            assert_eq!(confirms(answer), wanted, "{answer:?}");
        }
        assert!(
            prompt("etcd/main", "s3://b")
                .ends_with("Type \"yes\" to restore EtcdCluster etcd/main from s3://b: ")
        );
    }

    #[test]
    fn a_stopped_restore_shows_its_steps_and_how_to_go_on() {
        let restore: RestoreStatus = serde_json::from_value(json!({
            "phase": "RestoringMembers", "store": "s3://b", "object": "a.db", "sha256": "0123456789abcdef",
            "revision": 1100, "keys": 320, "statefulSet": "etcd", "originalReplicas": 3,
            "clusterToken": "t", "oldDataSuffix": ".before-restore-x",
            "members": [{"name": "etcd-0", "peerUrl": "http://etcd-0.etcd:2380", "claim": "data-etcd-0"}],
            "steps": [
                {"phase": "CheckingSnapshot", "state": "Succeeded", "startedAt": "2026-11-23T20:50:00Z",
                 "completedAt": "2026-11-23T20:50:40Z", "message": "proven: revision 1100, 320 keys"},
                {"phase": "ScalingDown", "state": "Succeeded", "startedAt": "2026-11-23T20:50:40Z", "completedAt": "2026-11-23T20:51:00Z"},
                {"phase": "RestoringMembers", "state": "Failed", "startedAt": "2026-11-23T20:51:00Z",
                 "message": "member etcd-0: no space left on device"}
            ],
            "recovery": "free space on claim data-etcd-0, then create the task again; or scale StatefulSet etcd back to 3"
        }))
        .unwrap();
        let got = describe(&restore, now());
        for wanted in [
            "  Phase:          RestoringMembers\n",
            "  Snapshot:       a.db in s3://b, revision 1100, 320 keys, sha256 0123456789ab\n",
            "  StatefulSet:    etcd (3 replicas before the restore)\n",
            "  Old data:       kept beside each member's data folder, suffix .before-restore-x\n",
            "    STEP               STATE       STARTED                          DONE                                       MESSAGE\n",
            "    CheckingSnapshot   Succeeded   2026-11-23T20:50:00Z (10m ago)   2026-11-23T20:50:40Z (9m ago) (took 40s)   proven: revision 1100, 320 keys\n",
            "    RestoringMembers   Failed      2026-11-23T20:51:00Z (9m ago)    -                                          member etcd-0: no space left on device\n",
            "    etcd-0   http://etcd-0.etcd:2380   data-etcd-0\n",
            "  Stopped; to go on or back:\n    free space on claim data-etcd-0",
        ] {
            assert!(got.contains(wanted), "missing {wanted:?} in\n{got}");
        }
        assert!(!got.contains("Revisions lost"), "not known before the cluster is back: {got}");
        let mut done = restore.clone();
        done.lost_revisions = Some(250);
        done.last_revision_before_loss = Some(1350);
        assert!(
            describe(&done, now())
                .contains("  Revisions lost: 250 (the last revision seen before the loss was 1350)\n")
        );
        let fresh = RestoreStatus::default();
        assert!(describe(&fresh, now()).contains("  Steps:\n    none started yet\n"));
    }
}
