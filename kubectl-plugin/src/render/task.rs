//! `task list` and `task describe`.

use std::collections::BTreeMap;

use jiff::Timestamp;
use kube::ResourceExt;

use groundskeeper_api::maintenance_task::{MaintenanceTask, NodeProgress, NodeState, TaskState};
use groundskeeper_protocol::keys;

use super::{age, duration, indent, size, table, when};

/// Where a task stands in its target's queue: `running`, its place among the waiting (`1` is
/// next), or nothing once final.
fn queue_places(tasks: &[&MaintenanceTask]) -> BTreeMap<(String, String), String> {
    let mut places = BTreeMap::new();
    let mut waiting: BTreeMap<(String, String, String), Vec<&MaintenanceTask>> = BTreeMap::new();
    for task in tasks {
        let key = (task.namespace().unwrap_or_default(), task.name_any());
        match state_of(task) {
            TaskState::InProgress => {
                places.insert(key, "running".to_owned());
            }
            TaskState::Pending => waiting.entry(target_key(task)).or_default().push(task),
            _ => {}
        }
    }
    for (_, mut line) in waiting {
        line.sort_by_key(|t| (created(t), t.name_any()));
        for (i, task) in line.iter().enumerate() {
            places.insert((task.namespace().unwrap_or_default(), task.name_any()), (i + 1).to_string());
        }
    }
    places
}

fn target_key(task: &MaintenanceTask) -> (String, String, String) {
    (task.namespace().unwrap_or_default(), task.spec.target.kind.to_string(), task.spec.target.name.clone())
}

fn created(task: &MaintenanceTask) -> Timestamp {
    task.metadata.creation_timestamp.as_ref().map(|t| t.0).unwrap_or(Timestamp::UNIX_EPOCH)
}

pub fn state_of(task: &MaintenanceTask) -> TaskState {
    task.status.as_ref().and_then(|s| s.state).unwrap_or_default()
}

pub fn origin_of(task: &MaintenanceTask) -> String {
    task.labels().get(keys::ORIGIN_LABEL).cloned().unwrap_or_else(|| "-".to_owned())
}

/// Queue order within a target: running, then waiting (oldest first), then finished (newest first).
pub fn sort_in_queue_order(tasks: &mut [&MaintenanceTask]) {
    tasks.sort_by(|a, b| {
        let rank = |t: &MaintenanceTask| match state_of(t) {
            TaskState::InProgress => 0,
            TaskState::Pending => 1,
            _ => 2,
        };
        let finished = |t: &MaintenanceTask| {
            t.status
                .as_ref()
                .and_then(|s| s.completed_at.as_ref())
                .map(|c| c.0)
                .unwrap_or(Timestamp::UNIX_EPOCH)
        };
        target_key(a).cmp(&target_key(b)).then(rank(a).cmp(&rank(b))).then_with(|| match rank(a) {
            2 => finished(b).cmp(&finished(a)),
            _ => (created(a), a.name_any()).cmp(&(created(b), b.name_any())),
        })
    });
}

/// `task list`: one line per task, grouped by target, in queue order.
pub fn list(tasks: &[MaintenanceTask], now: Timestamp, all_namespaces: bool) -> String {
    if tasks.is_empty() {
        return "No MaintenanceTasks found.\n".to_owned();
    }
    let mut sorted: Vec<&MaintenanceTask> = tasks.iter().collect();
    sort_in_queue_order(&mut sorted);
    let places = queue_places(&sorted);
    let rows: Vec<Vec<String>> = sorted
        .iter()
        .map(|task| {
            let namespace = task.namespace().unwrap_or_default();
            let status = task.status.clone().unwrap_or_default();
            let mut row = Vec::new();
            if all_namespaces {
                row.push(namespace.clone());
            }
            row.extend([
                task.name_any(),
                task.spec.task_type.to_string(),
                format!("{}/{}", task.spec.target.kind, task.spec.target.name),
                state_of(task).to_string(),
                places.get(&(namespace, task.name_any())).cloned().unwrap_or_else(|| "-".to_owned()),
                status.progress.unwrap_or_else(|| "-".to_owned()),
                origin_of(task),
                age(now, created(task)),
            ]);
            row
        })
        .collect();
    let mut headers = Vec::new();
    if all_namespaces {
        headers.push("NAMESPACE");
    }
    headers.extend(["NAME", "TYPE", "TARGET", "STATE", "QUEUE", "PROGRESS", "ORIGIN", "AGE"]);
    table(&headers, &rows)
}

/// `task describe`: what the task is, its timeline, per-node progress, errors.
pub fn describe(task: &MaintenanceTask, now: Timestamp) -> String {
    let namespace = task.namespace().unwrap_or_default();
    let status = task.status.clone().unwrap_or_default();
    let mut out = String::new();
    let mut field = |name: &str, value: String| out.push_str(&format!("{:<11}{value}\n", format!("{name}:")));
    field("Name", task.name_any());
    field("Namespace", namespace.clone());
    field("Type", task.spec.task_type.to_string());
    field("Target", format!("{}/{}", task.spec.target.kind, task.spec.target.name));
    field("Origin", origin_of(task));
    let state = state_of(task);
    field(
        "State",
        match &status.progress {
            Some(progress) => format!("{state} ({progress} done)"),
            None => state.to_string(),
        },
    );
    field(
        "Config",
        if task.spec.config.is_empty() {
            "the type's defaults".to_owned()
        } else {
            serde_json::to_string(&task.spec.config).unwrap_or_default()
        },
    );
    field(
        "Deadline",
        task.spec
            .deadline_seconds
            .map(|s| format!("{} after creation", duration(s)))
            .unwrap_or_else(|| "none".to_owned()),
    );
    if let Some(last) = &status.last_operation {
        field("Last", format!("{} ({})", last.description, when(now, Some(&last.last_update_time))));
    }
    if let Some(plan) = &status.plan {
        out.push_str("\nPlan:\n");
        out.push_str(&indent(&super::plan::plan(plan)));
        if task.spec.require_approval && state == TaskState::Pending && !plan.id.is_empty() {
            let approved = task.annotations().get(keys::APPROVED_PLAN);
            out.push_str(&match approved {
                Some(id) if id.trim() == plan.id => "  approved\n".to_owned(),
                _ => format!(
                    "  awaits approval: kubectl groundskeeper task approve -n {namespace} {} --plan {}\n",
                    task.name_any(),
                    plan.id
                ),
            });
        }
    }
    if let Some(left) = status.left_for_next_window {
        out.push_str(&format!("\n{left} node(s) left for the next maintenance window (their expected cleanup would run past this one's end)\n"));
    }
    out.push_str("\nTimeline:\n");
    out.push_str(&indent(&timeline(task, now)));
    out.push_str("\nProgress:\n");
    if status.nodes.is_empty() {
        out.push_str(match state {
            TaskState::Pending => "  not started\n",
            TaskState::InProgress => "  no node or member finished yet\n",
            _ => "  no node or member was worked on\n",
        });
    } else {
        out.push_str(&indent(&nodes_table(&status.nodes, now)));
    }
    if let Some(restore) = &status.restore {
        out.push_str("\nRestore:\n");
        out.push_str(&super::restore::describe(restore, now));
    }
    if let Some(proof) = &status.proof {
        out.push_str("\nProof:\n");
        out.push_str(&super::snapshot::proof(proof, now));
    }
    if let Some(copy) = &status.copy {
        out.push_str("\nCopy:\n");
        out.push_str(&super::snapshot::copy(copy));
    }
    out.push_str("\nErrors:\n");
    if status.last_errors.is_empty() {
        out.push_str("  none\n");
    } else {
        let rows: Vec<Vec<String>> = status
            .last_errors
            .iter()
            .map(|e| vec![age(now, e.observed_at.0), e.code.clone(), e.description.clone()])
            .collect();
        out.push_str(&indent(&table(&["AGE", "CODE", "DESCRIPTION"], &rows)));
    }
    let failed_jobs: Vec<&str> = status
        .nodes
        .iter()
        .filter(|n| n.state == NodeState::Failed)
        .filter_map(|n| n.job.as_deref())
        .collect();
    for job in failed_jobs {
        out.push_str(&format!("  logs: kubectl logs -n {namespace} job/{job}\n"));
    }
    out
}

/// Every dated thing that happened to the task, oldest first.
fn timeline(task: &MaintenanceTask, now: Timestamp) -> String {
    let status = task.status.clone().unwrap_or_default();
    let mut events: Vec<(Timestamp, String)> = Vec::new();
    events.push((created(task), "created".to_owned()));
    if let Some(at) = &status.initiated_at {
        events.push((at.0, "seen by the controller".to_owned()));
    }
    if let Some(at) = &status.started_at {
        events.push((at.0, "started".to_owned()));
    }
    for node in &status.nodes {
        if let Some(at) = &node.started_at {
            events.push((at.0, format!("{} started", node.name)));
        }
        if let Some(at) = &node.completed_at {
            events.push((at.0, format!("{} {:?}", node.name, node.state)));
        }
    }
    for c in &status.conditions {
        let mut line = format!("{}={} {}", c.type_, c.status, c.reason);
        if !c.message.is_empty() {
            line.push_str(&format!(": {}", c.message));
        }
        events.push((c.last_transition_time.0, line));
    }
    for error in &status.last_errors {
        events.push((error.observed_at.0, format!("error {}: {}", error.code, error.description)));
    }
    if let Some(at) = &status.completed_at {
        events.push((at.0, state_of(task).to_string()));
    }
    // Stable: within one second, the order above (which is the order things happen in).
    events.sort_by_key(|(at, _)| *at);
    let rows: Vec<Vec<String>> = events
        .into_iter()
        .map(|(at, what)| vec![at.round(jiff::Unit::Second).unwrap_or(at).to_string(), age(now, at), what])
        .collect();
    table(&["TIME", "AGE", "EVENT"], &rows)
}

/// Per node or member: state, Job, time taken, sizes in MiB beside bytes.
pub fn nodes_table(nodes: &[NodeProgress], now: Timestamp) -> String {
    let rows: Vec<Vec<String>> = nodes
        .iter()
        .map(|n| {
            let took = match (&n.started_at, &n.completed_at) {
                (Some(start), Some(end)) => duration(end.0.duration_since(start.0).as_secs()),
                (Some(start), None) => format!("{} so far", duration(now.duration_since(start.0).as_secs())),
                _ => "-".to_owned(),
            };
            vec![
                n.name.clone(),
                format!("{:?}", n.state),
                n.job.clone().unwrap_or_else(|| "-".to_owned()),
                took,
                size(n.db_size_before),
                size(n.db_size_after),
                size(n.bytes_reclaimed),
                n.compacted_revision.map(|r| r.to_string()).unwrap_or_else(|| "-".to_owned()),
                message_of(n),
            ]
        })
        .collect();
    table(
        &["NAME", "STATE", "JOB", "TOOK", "DB BEFORE", "DB AFTER", "RECLAIMED", "COMPACTED TO", "MESSAGE"],
        &rows,
    )
}

fn message_of(node: &NodeProgress) -> String {
    let mut message = node.message.clone().unwrap_or_default();
    if !node.keyspaces_cleaned.is_empty() {
        if !message.is_empty() {
            message.push_str("; ");
        }
        message.push_str(&format!("keyspaces: {}", node.keyspaces_cleaned.join(", ")));
    }
    if message.is_empty() { "-".to_owned() } else { message }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    pub fn task(name: &str, created: &str, status: serde_json::Value) -> MaintenanceTask {
        serde_json::from_value(json!({
            "apiVersion": "groundskeeper.dev/v1alpha1",
            "kind": "MaintenanceTask",
            "metadata": {
                "name": name, "namespace": "etcd", "creationTimestamp": created,
                "labels": {"groundskeeper.dev/origin": if name.starts_with("auto") { "automatic" } else { "manual" }}
            },
            "spec": {"target": {"kind": "EtcdCluster", "name": "main"}, "type": "Defragment"},
            "status": status,
        }))
        .unwrap()
    }

    fn now() -> Timestamp {
        "2026-11-23T20:10:00Z".parse().unwrap()
    }

    #[test]
    fn the_list_shows_the_queue_order() {
        let tasks = vec![
            task("late", "2026-11-23T20:08:00Z", json!({"state": "Pending"})),
            task(
                "done",
                "2026-11-23T19:00:00Z",
                json!({"state": "Completed", "progress": "3/3", "completedAt": "2026-11-23T19:05:00Z"}),
            ),
            task("auto-1", "2026-11-23T20:05:00Z", json!({"state": "InProgress", "progress": "1/3"})),
            task("early", "2026-11-23T20:07:00Z", json!({"state": "Pending"})),
            task("new", "2026-11-23T20:09:59Z", json!({})),
        ];
        let got = list(&tasks, now(), false);
        assert_eq!(
            got,
            "\
NAME     TYPE         TARGET             STATE        QUEUE     PROGRESS   ORIGIN      AGE
auto-1   Defragment   EtcdCluster/main   InProgress   running   1/3        automatic   5m
early    Defragment   EtcdCluster/main   Pending      1         -          manual      3m
late     Defragment   EtcdCluster/main   Pending      2         -          manual      2m
new      Defragment   EtcdCluster/main   Pending      3         -          manual      1s
done     Defragment   EtcdCluster/main   Completed    -         3/3        manual      70m
"
        );
        assert!(list(&tasks, now(), true).starts_with("NAMESPACE   NAME"));
        assert_eq!(list(&[], now(), false), "No MaintenanceTasks found.\n");
    }

    #[test]
    fn describe_has_a_timeline_nodes_in_mib_and_errors_with_the_logs_hint() {
        let t = task(
            "manual-1",
            "2026-11-23T20:00:00Z",
            json!({
                "state": "Failed",
                "progress": "1/2",
                "initiatedAt": "2026-11-23T20:00:01Z",
                "startedAt": "2026-11-23T20:00:02Z",
                "completedAt": "2026-11-23T20:01:00Z",
                "lastOperation": {"state": "Failed", "description": "step 1 failed", "lastUpdateTime": "2026-11-23T20:01:00Z"},
                "lastErrors": [{"code": "JobFailed", "description": "step 1 (Job manual-1-0) failed: member m1 refused", "observedAt": "2026-11-23T20:01:00Z"}],
                "nodes": [
                    {"name": "m0", "state": "Succeeded", "job": "manual-1-0", "startedAt": "2026-11-23T20:00:02Z",
                     "completedAt": "2026-11-23T20:00:07Z", "dbSizeBefore": 6291456, "dbSizeAfter": 2097152, "bytesReclaimed": 4194304},
                    {"name": "m1", "state": "Failed", "job": "manual-1-0", "message": "refused"}
                ]
            }),
        );
        let got = describe(&t, now());
        for wanted in [
            "Name:      manual-1\n",
            "State:     Failed (1/2 done)\n",
            "Config:    the type's defaults\n",
            "Last:      step 1 failed (2026-11-23T20:01:00Z (9m ago))\n",
            "  2026-11-23T20:00:00Z   10m   created\n",
            "  2026-11-23T20:00:02Z   9m    started\n",
            "  2026-11-23T20:00:07Z   9m    m0 Succeeded\n",
            "  2026-11-23T20:01:00Z   9m    Failed\n",
            "  m0     Succeeded   manual-1-0   5s     6.0 MiB (6291456)   2.0 MiB (2097152)   4.0 MiB (4194304)   -              -\n",
            "  m1     Failed      manual-1-0   -      -                   -                   -                   -              refused\n",
            "  9m    JobFailed   step 1 (Job manual-1-0) failed: member m1 refused\n",
            "  logs: kubectl logs -n etcd job/manual-1-0\n",
        ] {
            assert!(got.contains(wanted), "missing {wanted:?} in\n{got}");
        }
    }

    #[test]
    fn describe_a_task_not_seen_yet() {
        let got = describe(&task("new", "2026-11-23T20:09:00Z", json!(null)), now());
        assert!(got.contains("State:     Pending\n"), "{got}");
        assert!(got.contains("Progress:\n  not started\n"), "{got}");
        assert!(got.contains("Errors:\n  none\n"), "{got}");
    }

    #[test]
    fn describe_shows_a_restore_a_proof_and_a_copy() {
        let cases: &[(&str, serde_json::Value, &[&str])] = &[
            (
                "restore",
                json!({"state": "Failed", "restore": {"phase": "ScalingUp", "store": "s3://b", "object": "a.db",
                    "statefulSet": "etcd", "clusterToken": "t", "oldDataSuffix": ".old",
                    "steps": [{"phase": "ScalingUp", "state": "Failed", "message": "forbidden"}],
                    "recovery": "grant patch on statefulsets, then create the task again"}}),
                &[
                    "\nRestore:\n  Phase:          ScalingUp\n",
                    "    STEP        STATE    STARTED   DONE   MESSAGE\n    ScalingUp   Failed   -         -      forbidden\n",
                    "  Stopped; to go on or back:\n    grant patch on statefulsets, then create the task again\n",
                ],
            ),
            (
                "proof",
                json!({"state": "Completed", "proof": {"store": "pvc/s", "object": "a.db", "proven": true, "revision": 5}}),
                &["\nProof:\n  Snapshot:   a.db in pvc/s\n  Outcome:    proven restorable\n"],
            ),
            (
                "copy",
                json!({"state": "Completed", "copy": {"from": "pvc/s", "to": "s3://b", "failed": ["x.db: checksum differs"]}}),
                &["\nCopy:\n  pvc/s → s3://b\n", "  Failed:        1: x.db: checksum differs\n"],
            ),
            ("none of them", json!({"state": "Completed"}), &[]),
        ];
        for (what, status, wanted) in cases {
            let got = describe(&task("t", "2026-11-23T20:00:00Z", status.clone()), now());
            for part in *wanted {
                assert!(got.contains(part), "{what}: missing {part:?} in\n{got}");
            }
            for section in ["\nRestore:\n", "\nProof:\n", "\nCopy:\n"] {
                let expected = wanted.iter().any(|w| w.contains(section.trim()));
                assert_eq!(got.contains(section), expected, "{what}: {section:?} in\n{got}");
            }
        }
    }
}
