//! `task create --wait`: what a task looks like while it runs (a block redrawn in place on a
//! terminal; lines only for what changed otherwise) and how it ended.

use jiff::Timestamp;
use kube::ResourceExt;

use groundskeeper_api::maintenance_task::QUEUED;
use groundskeeper_api::maintenance_task::{MaintenanceTask, NodeState, TaskState};

use super::task::state_of;
use super::{duration, size};

/// Exit codes of `task create --wait`.
pub const EXIT_COMPLETED: i32 = 0;
pub const EXIT_FAILED: i32 = 3;
pub const EXIT_REJECTED: i32 = 4;
pub const EXIT_DELETED: i32 = 5;
pub const EXIT_INTERRUPTED: i32 = 130;

const BAR_WIDTH: usize = 30;

/// What the plain view compares between two looks at the task.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Seen {
    state: Option<TaskState>,
    waiting_for: Option<String>,
    last_operation: Option<String>,
    nodes: Vec<(String, NodeState, Option<String>)>,
    /// A Restore's steps: phase, state, message.
    steps: Vec<(String, String, Option<String>)>,
}

impl Seen {
    pub fn of(task: &MaintenanceTask) -> Seen {
        let status = task.status.clone().unwrap_or_default();
        Seen {
            state: status.state,
            waiting_for: waiting_for(task),
            last_operation: status.last_operation.map(|o| o.description),
            nodes: status.nodes.iter().map(|n| (n.name.clone(), n.state, n.message.clone())).collect(),
            steps: status
                .restore
                .iter()
                .flat_map(|r| &r.steps)
                .map(|s| (s.phase.to_string(), s.state.clone(), s.message.clone()))
                .collect(),
        }
    }
}

/// What a pending task waits for (its `Queued` condition's message).
fn waiting_for(task: &MaintenanceTask) -> Option<String> {
    let status = task.status.as_ref()?;
    if status.state != Some(TaskState::Pending) {
        return None;
    }
    status.conditions.iter().find(|c| c.type_ == QUEUED && c.status == "True").map(|c| c.message.clone())
}

/// Lines for what changed since `before` (everything when `None`), each stamped with `now`.
pub fn changes(before: Option<&Seen>, task: &MaintenanceTask, now: Timestamp) -> Vec<String> {
    let after = Seen::of(task);
    let empty = Seen::default();
    let before = before.unwrap_or(&empty);
    let stamp = now.strftime("%H:%M:%S").to_string();
    let name = task.name_any();
    let mut lines = Vec::new();
    // A final state is said last, after what the nodes did to get there.
    let state_line = (after.state != before.state).then(|| {
        let state = after.state.map(|s| s.to_string()).unwrap_or_else(|| "created".to_owned());
        format!("{stamp} task {name}: {state}")
    });
    let finished = after.state.is_some_and(|s| s.is_final());
    if !finished && let Some(line) = &state_line {
        lines.push(line.clone());
    }
    if after.waiting_for != before.waiting_for
        && let Some(why) = &after.waiting_for
    {
        lines.push(format!("{stamp} task {name}: waiting: {why}"));
    }
    for (node, state, message) in &after.nodes {
        let earlier = before.nodes.iter().find(|(n, _, _)| n == node);
        if earlier.map(|(_, s, m)| (s, m)) == Some((state, message)) {
            continue;
        }
        let mut line = format!("{stamp} {node}: {state:?}");
        if let Some(message) = message {
            line.push_str(&format!(": {message}"));
        }
        lines.push(line);
    }
    for (at, (phase, state, message)) in after.steps.iter().enumerate() {
        // A step is one entry per phase, in order: compared by place.
        if before.steps.get(at) == Some(&(phase.clone(), state.clone(), message.clone())) {
            continue;
        }
        let mut line = format!("{stamp} step {phase}: {state}");
        if let Some(message) = message {
            line.push_str(&format!(": {message}"));
        }
        lines.push(line);
    }
    if after.last_operation != before.last_operation
        && after.state == before.state
        && let Some(operation) = &after.last_operation
    {
        lines.push(format!("{stamp} task {name}: {operation}"));
    }
    if finished && let Some(line) = state_line {
        lines.push(line);
    }
    lines
}

/// The block a terminal shows: the task, an overall bar, a line per node or member.
pub fn block(task: &MaintenanceTask, now: Timestamp) -> String {
    let status = task.status.clone().unwrap_or_default();
    let state = state_of(task);
    let done = status.nodes.iter().filter(|n| n.state.is_finished()).count();
    let total = status.nodes.len();
    let elapsed = task
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|c| duration(now.duration_since(c.0).as_secs()))
        .unwrap_or_default();
    let mut out = format!(
        "{} {} {}/{}: {state}  {elapsed}\n",
        task.name_any(),
        task.spec.task_type,
        task.spec.target.kind,
        task.spec.target.name
    );
    let fraction = match (state, total) {
        (TaskState::Completed, _) => 1.0,
        (_, 0) => 0.0,
        _ => done as f64 / total as f64,
    };
    let mut bar_line = format!("  [{}]", bar(fraction));
    if total > 0 {
        bar_line.push_str(&format!(" {done}/{total}"));
    }
    out.push_str(&bar_line);
    out.push('\n');
    if let Some(why) = waiting_for(task) {
        out.push_str(&format!("  waiting: {why}\n"));
    }
    let width = status.nodes.iter().map(|n| n.name.len()).max().unwrap_or(0);
    for node in &status.nodes {
        let mut line = format!("  {:<width$}  {:<9}", node.name, format!("{:?}", node.state));
        if let Some(reclaimed) = node.bytes_reclaimed {
            line.push_str(&format!("  reclaimed {}", size(Some(reclaimed))));
        }
        if let Some(message) = &node.message {
            line.push_str(&format!("  {message}"));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    let steps = status.restore.as_ref().map(|r| r.steps.as_slice()).unwrap_or_default();
    let width = steps.iter().map(|s| s.phase.as_str().len()).max().unwrap_or(0);
    for step in steps {
        let mut line = format!("  step {:<width$}  {:<9}", step.phase.as_str(), step.state);
        if let Some(message) = &step.message {
            line.push_str(&format!("  {message}"));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    if let Some(operation) = &status.last_operation {
        out.push_str(&format!("  {}\n", operation.description));
    }
    out
}

fn bar(fraction: f64) -> String {
    let filled = ((fraction.clamp(0.0, 1.0) * BAR_WIDTH as f64).round()) as usize;
    format!("{}{}", "#".repeat(filled), "-".repeat(BAR_WIDTH - filled))
}

/// How the task ended, as an exit code and a line; `None` while it has not.
pub fn outcome(task: &MaintenanceTask) -> Option<(i32, String)> {
    let status = task.status.clone().unwrap_or_default();
    let state = status.state.filter(|s| s.is_final())?;
    let last = status.last_operation.map(|o| o.description).unwrap_or_default();
    let error = status.last_errors.last().map(|e| format!("{}: {}", e.code, e.description));
    let name = task.name_any();
    let (code, mut text) = match state {
        TaskState::Completed => (EXIT_COMPLETED, format!("task {name} Completed: {last}")),
        TaskState::Failed => (EXIT_FAILED, format!("task {name} Failed: {}", error.unwrap_or(last))),
        _ => (EXIT_REJECTED, format!("task {name} Rejected: {}", error.unwrap_or(last))),
    };
    if let Some(restore) = &status.restore {
        if let Some(lost) = restore.lost_revisions {
            text.push_str(&format!("\n  revisions lost: {lost} (written after the snapshot)"));
        }
        if let Some(recovery) = &restore.recovery {
            text.push_str(&format!("\n  to go on or back: {recovery}"));
        }
    }
    Some((code, text))
}

/// What to tell someone who stops waiting: the task goes on.
pub fn interrupted(namespace: &str, name: &str) -> String {
    format!(
        "stopped waiting; task {name} goes on.\n  follow it:  kubectl groundskeeper task wait -n {namespace} {name}\n  see it:     kubectl groundskeeper task describe -n {namespace} {name}\n  cancel it:  kubectl groundskeeper task cancel -n {namespace} {name}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn task(status: serde_json::Value) -> MaintenanceTask {
        serde_json::from_value(json!({
            "apiVersion": "groundskeeper.dev/v1alpha1",
            "kind": "MaintenanceTask",
            "metadata": {"name": "t", "namespace": "etcd", "creationTimestamp": "2026-11-23T20:00:00Z"},
            "spec": {"target": {"kind": "EtcdCluster", "name": "main"}, "type": "Defragment"},
            "status": status,
        }))
        .unwrap()
    }

    fn now() -> Timestamp {
        "2026-11-23T20:00:42Z".parse().unwrap()
    }

    #[test]
    fn plain_lines_only_for_what_changed() {
        let pending = task(
            json!({"state": "Pending", "conditions": [{"type": "Queued", "status": "True", "reason": "QueuedBehindTask", "message": "behind task auto-1", "lastTransitionTime": "2026-11-23T20:00:01Z"}]}),
        );
        let running = task(json!({"state": "InProgress", "nodes": [{"name": "m0", "state": "Running"}]}));
        let one_done = task(
            json!({"state": "InProgress", "nodes": [{"name": "m0", "state": "Succeeded", "message": "4.0 MiB reclaimed"}, {"name": "m1", "state": "Running"}]}),
        );
        let first = changes(None, &pending, now());
        assert_eq!(first, vec!["20:00:42 task t: Pending", "20:00:42 task t: waiting: behind task auto-1"]);
        let seen = Seen::of(&pending);
        assert_eq!(
            changes(Some(&seen), &pending, now()),
            Vec::<String>::new(),
            "nothing changed, nothing printed"
        );
        assert_eq!(
            changes(Some(&seen), &running, now()),
            vec!["20:00:42 task t: InProgress", "20:00:42 m0: Running"]
        );
        assert_eq!(
            changes(Some(&Seen::of(&running)), &one_done, now()),
            vec!["20:00:42 m0: Succeeded: 4.0 MiB reclaimed", "20:00:42 m1: Running"]
        );
    }

    #[test]
    fn the_final_state_comes_after_the_nodes() {
        let running = task(json!({"state": "InProgress"}));
        let done = task(json!({"state": "Completed", "nodes": [{"name": "m0", "state": "Succeeded"}]}));
        assert_eq!(
            changes(Some(&Seen::of(&running)), &done, now()),
            vec!["20:00:42 m0: Succeeded", "20:00:42 task t: Completed"]
        );
    }

    #[test]
    fn the_block_has_a_bar_and_a_line_per_member() {
        let t = task(json!({"state": "InProgress", "progress": "1/2", "nodes": [
            {"name": "m0", "state": "Succeeded", "bytesReclaimed": 4194304},
            {"name": "member-1", "state": "Running"}
        ]}));
        assert_eq!(
            block(&t, now()),
            "t Defragment EtcdCluster/main: InProgress  42s\n  [###############---------------] 1/2\n  m0        Succeeded  reclaimed 4.0 MiB (4194304)\n  member-1  Running\n"
        );
    }

    #[test]
    fn a_task_without_nodes_yet_has_an_empty_bar() {
        let t = task(json!({"state": "Pending"}));
        assert_eq!(
            block(&t, now()),
            "t Defragment EtcdCluster/main: Pending  42s\n  [------------------------------]\n"
        );
    }

    #[test]
    fn outcomes_and_exit_codes() {
        assert_eq!(outcome(&task(json!({"state": "InProgress"}))), None);
        let completed = task(
            json!({"state": "Completed", "lastOperation": {"state": "Completed", "description": "defragmented 3 member(s)", "lastUpdateTime": "2026-11-23T20:00:40Z"}}),
        );
        assert_eq!(outcome(&completed), Some((0, "task t Completed: defragmented 3 member(s)".into())));
        let failed = task(
            json!({"state": "Failed", "lastErrors": [{"code": "JobFailed", "description": "step 1 failed", "observedAt": "2026-11-23T20:00:40Z"}]}),
        );
        assert_eq!(outcome(&failed), Some((3, "task t Failed: JobFailed: step 1 failed".into())));
        let rejected = task(
            json!({"state": "Rejected", "lastErrors": [{"code": "Duplicate", "description": "same as task x", "observedAt": "2026-11-23T20:00:40Z"}]}),
        );
        assert_eq!(outcome(&rejected), Some((4, "task t Rejected: Duplicate: same as task x".into())));
    }

    fn restore(state: &str, steps: serde_json::Value, extra: serde_json::Value) -> MaintenanceTask {
        let mut restore = json!({"phase": "ScalingDown", "store": "s3://b", "object": "a.db", "statefulSet": "etcd",
                                 "clusterToken": "t", "oldDataSuffix": ".old", "steps": steps});
        for (key, value) in extra.as_object().unwrap() {
            restore[key] = value.clone();
        }
        let mut t = task(json!({"state": state, "restore": restore}));
        t.spec.task_type = groundskeeper_api::maintenance_task::TaskType::Restore;
        t
    }

    #[test]
    fn a_restore_shows_a_line_per_step_as_it_changes() {
        let checking =
            restore("InProgress", json!([{"phase": "CheckingSnapshot", "state": "Running"}]), json!({}));
        let scaling = restore(
            "InProgress",
            json!([{"phase": "CheckingSnapshot", "state": "Succeeded", "message": "proven: revision 1100"},
                   {"phase": "ScalingDown", "state": "Running", "message": "3 pods left"}]),
            json!({}),
        );
        let scaled = restore(
            "InProgress",
            json!([{"phase": "CheckingSnapshot", "state": "Succeeded", "message": "proven: revision 1100"},
                   {"phase": "ScalingDown", "state": "Running", "message": "1 pod left"}]),
            json!({}),
        );
        assert_eq!(
            changes(None, &checking, now()),
            vec!["20:00:42 task t: InProgress", "20:00:42 step CheckingSnapshot: Running"]
        );
        let cases = [
            (
                &checking,
                &scaling,
                vec![
                    "20:00:42 step CheckingSnapshot: Succeeded: proven: revision 1100",
                    "20:00:42 step ScalingDown: Running: 3 pods left",
                ],
            ),
            (&scaling, &scaled, vec!["20:00:42 step ScalingDown: Running: 1 pod left"]),
            (&scaled, &scaled, vec![]),
        ];
        for (before, after, wanted) in cases {
            assert_eq!(changes(Some(&Seen::of(before)), after, now()), wanted);
        }
        assert_eq!(
            block(&scaling, now()),
            "t Restore EtcdCluster/main: InProgress  42s\n  [------------------------------]\n  step CheckingSnapshot  Succeeded  proven: revision 1100\n  step ScalingDown       Running    3 pods left\n"
        );
    }

    #[test]
    fn a_restore_ends_saying_what_was_lost_or_how_to_go_on() {
        let failed =
            restore("Failed", json!([]), json!({"recovery": "scale StatefulSet etcd back to 3 replicas"}));
        let (code, text) = outcome(&failed).unwrap();
        assert_eq!(code, EXIT_FAILED);
        assert!(text.ends_with("\n  to go on or back: scale StatefulSet etcd back to 3 replicas"), "{text}");
        let done = restore("Completed", json!([]), json!({"lostRevisions": 250}));
        let (code, text) = outcome(&done).unwrap();
        assert_eq!(code, EXIT_COMPLETED);
        assert!(text.ends_with("\n  revisions lost: 250 (written after the snapshot)"), "{text}");
    }
}
