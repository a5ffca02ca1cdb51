#![allow(clippy::type_complexity)] // tables of cases

use serde_json::json;

use super::*;
use groundskeeper_api::maintenance_suspension::Suspension;
use groundskeeper_api::maintenance_task::TargetKind;

use TaskType::{Compact, Defragment, Snapshot};

const NOW: i64 = 10_000;

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(1_900_000_000 + second).unwrap()
}

fn etcd_main() -> TaskTarget {
    TaskTarget { kind: TargetKind::EtcdCluster, name: "main".into() }
}

/// A valid Pending task created at `second`, kept an hour once finished, no deadline.
fn task(name: &str, second: i64, task_type: TaskType) -> TaskView {
    TaskView {
        name: name.into(),
        created: at(second),
        task_type,
        state: TaskState::Pending,
        started_at: None,
        completed_at: None,
        deadline_seconds: None,
        ttl_seconds_after_finished: 3600,
        ttl_seconds_after_failed: None,
        validation: Ok(()),
        waits_for_window: false,
        approval: Approval::NotRequired,
    }
}

fn running(mut t: TaskView, since: i64) -> TaskView {
    t.state = TaskState::InProgress;
    t.started_at = Some(at(since));
    t
}

fn ended(mut t: TaskView, state: TaskState, second: i64) -> TaskView {
    t.state = state;
    t.completed_at = Some(at(second));
    t
}

fn deadline(mut t: TaskView, seconds: i64) -> TaskView {
    t.deadline_seconds = Some(seconds);
    t
}

fn ttl(mut t: TaskView, seconds: i64) -> TaskView {
    t.ttl_seconds_after_finished = seconds;
    t
}

fn invalid(mut t: TaskView) -> TaskView {
    t.validation = Err(vec![FieldError {
        object: format!("MaintenanceTask etcd/{}", t.name),
        field: "spec.ttlSecondsAfterFinished".into(),
        message: "-1 is negative: give 0 (delete as soon as finished) or more".into(),
    }]);
    t
}

fn ready(tasks: Vec<TaskView>) -> TargetTasks {
    with_facts(TargetFacts::Ready, tasks)
}

fn with_facts(facts: TargetFacts, tasks: Vec<TaskView>) -> TargetTasks {
    TargetTasks { target: etcd_main(), facts, tasks, window: None, suspensions: Vec::new() }
}

fn waiting_for(reason: &str) -> TargetFacts {
    TargetFacts::Waiting { reason: reason.into() }
}

fn queued_behind(task: &str, task_running: bool, ahead: usize) -> Decision {
    Decision::Wait { reason: WaitReason::QueuedBehind { task: task.into(), task_running, ahead } }
}

fn duplicate_of(of: &str, of_state: TaskState) -> Decision {
    Decision::Reject { reason: Rejection::Duplicate { of: of.into(), of_state } }
}

fn target_not_found() -> Decision {
    Decision::Reject { reason: Rejection::TargetNotFound { target: etcd_main() } }
}

fn decisions(input: &TargetTasks) -> Vec<(String, Decision)> {
    decide(input, at(NOW)).decisions.into_iter().map(|d| (d.name, d.decision)).collect()
}

fn named(pairs: Vec<(&str, Decision)>) -> Vec<(String, Decision)> {
    pairs.into_iter().map(|(n, d)| (n.to_owned(), d)).collect()
}

#[test]
fn decisions_per_rule() {
    let cases: Vec<(&str, TargetTasks, Vec<(&str, Decision)>)> = vec![
        ("no tasks", ready(vec![]), vec![]),
        (
            "the head starts on a ready target",
            ready(vec![task("a", 0, Compact)]),
            vec![("a", Decision::Start)],
        ),
        (
            "the head waits for its target, saying what for",
            with_facts(waiting_for("condition Available is False"), vec![task("a", 0, Compact)]),
            vec![(
                "a",
                Decision::Wait {
                    reason: WaitReason::Target {
                        target: etcd_main(),
                        reason: "condition Available is False".into(),
                    },
                },
            )],
        ),
        (
            "the others wait behind the head, which waits for the target",
            with_facts(
                waiting_for("a member is unhealthy"),
                vec![task("a", 0, Compact), task("b", 1, Defragment)],
            ),
            vec![
                (
                    "a",
                    Decision::Wait {
                        reason: WaitReason::Target {
                            target: etcd_main(),
                            reason: "a member is unhealthy".into(),
                        },
                    },
                ),
                ("b", queued_behind("a", false, 1)),
            ],
        ),
        (
            "first in, first out: only the oldest starts",
            ready(vec![task("c", 2, Snapshot), task("a", 0, Compact), task("b", 1, Defragment)]),
            vec![
                ("a", Decision::Start),
                ("b", queued_behind("a", true, 1)),
                ("c", queued_behind("a", true, 2)),
            ],
        ),
        (
            "a tie on creation time is broken by name",
            ready(vec![task("b", 5, Compact), task("a", 5, Defragment)]),
            vec![("a", Decision::Start), ("b", queued_behind("a", true, 1))],
        ),
        (
            "a running task keeps running; the pending ones queue behind it",
            ready(vec![running(task("r", 0, Snapshot), 1), task("p", 2, Compact)]),
            vec![("r", Decision::KeepRunning), ("p", queued_behind("r", true, 1))],
        ),
        (
            "a running task keeps running while its target is not ready",
            with_facts(waiting_for("Progressing"), vec![running(task("r", 0, Compact), 1)]),
            vec![("r", Decision::KeepRunning)],
        ),
        (
            "a missing target rejects the pending tasks",
            with_facts(TargetFacts::Missing, vec![task("a", 0, Compact), task("b", 1, Defragment)]),
            vec![("a", target_not_found()), ("b", target_not_found())],
        ),
        (
            "a missing target fails the running task",
            with_facts(TargetFacts::Missing, vec![running(task("r", 0, Compact), 1)]),
            vec![("r", Decision::FailTargetGone { target: etcd_main() })],
        ),
        (
            "an invalid task is rejected for its spec first, target or not",
            with_facts(TargetFacts::Missing, vec![invalid(task("bad", 0, Compact))]),
            vec![(
                "bad",
                Decision::Reject {
                    reason: Rejection::Invalid {
                        errors: invalid(task("bad", 0, Compact)).validation.unwrap_err(),
                    },
                },
            )],
        ),
        (
            "a task rejected in this pass does not block the queue",
            ready(vec![invalid(task("bad", 0, Compact)), task("good", 1, Compact)]),
            vec![
                (
                    "bad",
                    Decision::Reject {
                        reason: Rejection::Invalid {
                            errors: invalid(task("bad", 0, Compact)).validation.unwrap_err(),
                        },
                    },
                ),
                ("good", Decision::Start),
            ],
        ),
        (
            "a duplicate of a pending task is rejected, naming it",
            ready(vec![task("first", 0, Compact), task("second", 1, Compact)]),
            vec![("first", Decision::Start), ("second", duplicate_of("first", TaskState::Pending))],
        ),
        (
            "a duplicate of the running task is rejected, naming it",
            ready(vec![running(task("r", 0, Compact), 1), task("again", 2, Compact)]),
            vec![("r", Decision::KeepRunning), ("again", duplicate_of("r", TaskState::InProgress))],
        ),
        (
            "duplicates are found only among unfinished tasks",
            ready(vec![
                ended(task("done", 0, Compact), TaskState::Completed, NOW - 5),
                ended(task("failed", 1, Compact), TaskState::Failed, NOW - 6),
                ended(task("refused", 2, Compact), TaskState::Rejected, NOW - 2),
                task("new", 3, Compact),
            ]),
            vec![
                ("done", Decision::Nothing),
                ("failed", Decision::Nothing),
                ("refused", Decision::Nothing),
                ("new", Decision::Start),
            ],
        ),
        (
            "a rejected task does not block the queue",
            ready(vec![
                ended(task("refused", 0, Defragment), TaskState::Rejected, NOW),
                task("next", 1, Compact),
            ]),
            vec![("refused", Decision::Nothing), ("next", Decision::Start)],
        ),
        (
            "a later task of the same type than an invalid one is no duplicate",
            ready(vec![invalid(task("bad", 0, Compact)), task("ok", 1, Compact)]),
            vec![
                (
                    "bad",
                    Decision::Reject {
                        reason: Rejection::Invalid {
                            errors: invalid(task("bad", 0, Compact)).validation.unwrap_err(),
                        },
                    },
                ),
                ("ok", Decision::Start),
            ],
        ),
        (
            "past its deadline a pending task fails",
            ready(vec![deadline(task("late", 0, Compact), 60)]),
            vec![("late", Decision::FailDeadline { deadline: at(60) })],
        ),
        (
            "a deadline exactly at now has passed",
            ready(vec![deadline(task("late", NOW - 60, Compact), 60)]),
            vec![("late", Decision::FailDeadline { deadline: at(NOW) })],
        ),
        (
            "a second before its deadline the task still starts",
            ready(vec![deadline(task("ontime", NOW - 59, Compact), 60)]),
            vec![("ontime", Decision::Start)],
        ),
        (
            "past its deadline a running task fails, and the next one starts",
            ready(vec![deadline(running(task("slow", 0, Compact), 1), 60), task("next", 1, Defragment)]),
            vec![("slow", Decision::FailDeadline { deadline: at(60) }), ("next", Decision::Start)],
        ),
        (
            "past its deadline a running Restore goes on: stopped half-way it would leave the cluster down",
            ready(vec![deadline(running(task("restore", 0, TaskType::Restore), 1), 60)]),
            vec![("restore", Decision::KeepRunning)],
        ),
        (
            "past its deadline a Restore not started yet fails",
            ready(vec![deadline(task("restore", 0, TaskType::Restore), 60)]),
            vec![("restore", Decision::FailDeadline { deadline: at(60) })],
        ),
        (
            "a task failed by its deadline is no one's duplicate",
            ready(vec![deadline(task("late", 0, Compact), 60), task("again", 1, Compact)]),
            vec![("late", Decision::FailDeadline { deadline: at(60) }), ("again", Decision::Start)],
        ),
        (
            "a deadline of a running task counts before its missing target",
            with_facts(TargetFacts::Missing, vec![deadline(running(task("r", 0, Compact), 1), 60)]),
            vec![("r", Decision::FailDeadline { deadline: at(60) })],
        ),
        (
            "a finished task is kept until its TTL has passed",
            ready(vec![ended(task("done", 0, Compact), TaskState::Completed, NOW - 3599)]),
            vec![("done", Decision::Nothing)],
        ),
        (
            "a finished task is deleted once its TTL has passed (exactly at now)",
            ready(vec![ended(task("done", 0, Compact), TaskState::Completed, NOW - 3600)]),
            vec![("done", Decision::Delete)],
        ),
        (
            "TTL 0 deletes a finished task at once",
            ready(vec![ttl(ended(task("done", 0, Compact), TaskState::Failed, NOW), 0)]),
            vec![("done", Decision::Delete)],
        ),
        (
            "a Failed task with ttlSecondsAfterFailed outlives its TTL; a Completed one beside it does not",
            ready(vec![
                TaskView {
                    ttl_seconds_after_failed: Some(7200),
                    ..ended(task("failed", 0, Compact), TaskState::Failed, NOW - 3600)
                },
                TaskView {
                    ttl_seconds_after_failed: Some(7200),
                    ..ended(task("done", 1, Compact), TaskState::Completed, NOW - 3600)
                },
                TaskView {
                    ttl_seconds_after_failed: Some(7200),
                    ..ended(task("failed-long-ago", 2, Compact), TaskState::Failed, NOW - 7200)
                },
            ]),
            vec![
                ("failed", Decision::Nothing),
                ("done", Decision::Delete),
                ("failed-long-ago", Decision::Delete),
            ],
        ),
        (
            "a finished task with no finish time counts its TTL from its creation",
            ready(vec![
                TaskView { state: TaskState::Completed, ..task("old", NOW - 3600, Compact) },
                TaskView { state: TaskState::Completed, ..task("young", NOW - 10, Defragment) },
            ]),
            vec![("old", Decision::Delete), ("young", Decision::Nothing)],
        ),
        (
            "a final task never changes: missing target, invalid spec, deadline passed",
            with_facts(
                TargetFacts::Missing,
                vec![
                    deadline(invalid(ended(task("rejected", 0, Compact), TaskState::Rejected, NOW - 5)), 1),
                    deadline(ended(task("failed", 1, Defragment), TaskState::Failed, NOW - 5), 1),
                    deadline(ended(task("completed", 2, Snapshot), TaskState::Completed, NOW - 5), 1),
                ],
            ),
            vec![
                ("rejected", Decision::Nothing),
                ("failed", Decision::Nothing),
                ("completed", Decision::Nothing),
            ],
        ),
        (
            "an unknown type is invalid",
            ready(vec![invalid(task("odd", 0, TaskType::Unknown("Purge".into())))]),
            vec![(
                "odd",
                Decision::Reject {
                    reason: Rejection::Invalid {
                        errors: invalid(task("odd", 0, Compact)).validation.unwrap_err(),
                    },
                },
            )],
        ),
    ];
    for (name, input, wanted) in cases {
        assert_eq!(decisions(&input), named(wanted), "{name}");
    }
}

#[test]
fn requeue_at_the_earliest_deadline_or_expiry() {
    let cases: Vec<(&str, TargetTasks, Option<i64>)> = vec![
        ("nothing due by time", ready(vec![task("a", 0, Compact)]), None),
        (
            "a pending task's deadline",
            ready(vec![task("a", 0, Compact), deadline(task("b", NOW - 10, Defragment), 100)]),
            Some(NOW + 90),
        ),
        (
            "a running task's deadline",
            ready(vec![deadline(running(task("r", NOW - 5, Compact), NOW - 4), 30)]),
            Some(NOW + 25),
        ),
        (
            "a finished task's expiry, the earliest of all",
            ready(vec![
                ended(task("done", 0, Compact), TaskState::Completed, NOW - 3000),
                deadline(task("b", NOW - 10, Defragment), 1000),
            ]),
            Some(NOW + 600),
        ),
        (
            "a task finished in this pass expires its TTL from now",
            with_facts(TargetFacts::Missing, vec![ttl(task("a", 0, Compact), 30)]),
            Some(NOW + 30),
        ),
        (
            "TTL 0 of a task finished in this pass: look again at once",
            ready(vec![ttl(deadline(task("late", 0, Compact), 1), 0)]),
            Some(NOW),
        ),
        (
            "a deleted task is not looked at again",
            ready(vec![ttl(ended(task("gone", 0, Compact), TaskState::Completed, 0), 0)]),
            None,
        ),
    ];
    for (name, input, wanted) in cases {
        assert_eq!(decide(&input, at(NOW)).requeue_at, wanted.map(at), "{name}");
    }
}

#[test]
fn a_deadline_too_far_away_is_no_deadline() {
    let input = ready(vec![deadline(task("a", 0, Compact), i64::MAX)]);
    let plan = decide(&input, at(NOW));
    assert_eq!(plan.decisions[0].decision, Decision::Start);
    assert_eq!(plan.requeue_at, None);
}

#[test]
fn the_earliest_requeue_of_several_targets() {
    let plans = [
        decide(&ready(vec![deadline(task("a", NOW, Compact), 50)]), at(NOW)),
        decide(&ready(vec![task("b", 0, Compact)]), at(NOW)),
        decide(&ready(vec![deadline(task("c", NOW, Compact), 20)]), at(NOW)),
    ];
    assert_eq!(earliest_requeue(&plans), Some(at(NOW + 20)));
    assert_eq!(earliest_requeue(&[]), None);
}

#[test]
fn reasons_read_as_what_to_do() {
    let queued = WaitReason::QueuedBehind { task: "defrag-1".into(), task_running: true, ahead: 1 };
    assert_eq!(
        queued.to_string(),
        "queued behind MaintenanceTask defrag-1 (InProgress); 1 task ahead of this one"
    );
    assert_eq!(queued.code(), "QueuedBehindTask");
    let target = WaitReason::Target { target: etcd_main(), reason: "member etcd-1 is unhealthy".into() };
    assert_eq!(target.to_string(), "waits for EtcdCluster main: member etcd-1 is unhealthy");
    assert_eq!(target.code(), "WaitingForTarget");
    let missing = Rejection::TargetNotFound { target: etcd_main() };
    assert!(missing.to_string().starts_with("EtcdCluster main does not exist in this namespace"));
    let duplicate = Rejection::Duplicate { of: "compact-1".into(), of_state: TaskState::Pending };
    assert!(duplicate.to_string().starts_with("duplicate of MaintenanceTask compact-1 (Pending)"));
    assert_eq!(duplicate.code(), "Duplicate");
    let invalid = Rejection::Invalid { errors: invalid(task("bad", 0, Compact)).validation.unwrap_err() };
    assert!(
        invalid
            .to_string()
            .contains("MaintenanceTask etcd/bad: spec.ttlSecondsAfterFinished: -1 is negative"),
        "{invalid}"
    );
}

fn object(
    namespace: &str,
    name: &str,
    spec: serde_json::Value,
    status: serde_json::Value,
) -> MaintenanceTask {
    serde_json::from_value(json!({
        "apiVersion": "groundskeeper.dev/v1alpha1",
        "kind": "MaintenanceTask",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": "2030-01-01T00:00:00Z"},
        "spec": spec,
        "status": status,
    }))
    .unwrap()
}

#[test]
fn a_view_of_a_task_object() {
    let spec =
        json!({"target": {"kind": "EtcdCluster", "name": "main"}, "type": "Compact", "deadlineSeconds": 60});
    let fresh = TaskView::of(&object("etcd", "t", spec.clone(), json!(null)), at(NOW));
    assert_eq!(fresh.state, TaskState::Pending);
    assert_eq!(fresh.created, "2030-01-01T00:00:00Z".parse::<Timestamp>().unwrap());
    assert_eq!(fresh.deadline_seconds, Some(60));
    assert_eq!(fresh.validation, Ok(()));
    let done = TaskView::of(
        &object(
            "etcd",
            "t",
            spec,
            json!({"state": "Completed", "startedAt": "2030-01-01T00:00:01Z", "completedAt": "2030-01-01T00:00:09Z"}),
        ),
        at(NOW),
    );
    assert_eq!(done.state, TaskState::Completed);
    assert_eq!(done.completed_at, Some("2030-01-01T00:00:09Z".parse().unwrap()));
    let odd = TaskView::of(
        &object(
            "etcd",
            "t",
            json!({"target": {"kind": "EtcdCluster", "name": "main"}, "type": "Purge"}),
            json!(null),
        ),
        at(NOW),
    );
    assert_eq!(odd.task_type, TaskType::Unknown("Purge".into()));
    assert!(odd.validation.is_err());
}

#[test]
fn tasks_group_by_namespace_and_target() {
    let spec = |kind: &str, name: &str| json!({"target": {"kind": kind, "name": name}, "type": "Compact"});
    let tasks = [
        object("a", "t1", spec("EtcdCluster", "main"), json!(null)),
        object("a", "t2", spec("EtcdCluster", "main"), json!(null)),
        object("b", "t3", spec("EtcdCluster", "main"), json!(null)),
        object("a", "t4", spec("EtcdCluster", "other"), json!(null)),
        object("a", "t5", spec("ScyllaCluster", "main"), json!(null)),
    ];
    let groups = group_by_target(&tasks, at(NOW));
    let sizes: Vec<_> = groups
        .iter()
        .map(|(key, views)| {
            (key.namespace.as_str(), key.target.kind.as_str(), key.target.name.as_str(), views.len())
        })
        .collect();
    assert_eq!(
        sizes,
        vec![
            ("a", "ScyllaCluster", "main", 1),
            ("a", "EtcdCluster", "main", 2),
            ("a", "EtcdCluster", "other", 1),
            ("b", "EtcdCluster", "main", 1),
        ]
    );
}

/// Automatic tasks (and those that ask) wait for the target's maintenance window, saying when it
/// opens, and are looked at again then; others start at once; an open window lets them start.
#[test]
fn tasks_that_wait_for_windows_start_only_inside_one() {
    let automatic = |name: &str, second: i64| {
        let mut t = task(name, second, TaskType::Defragment);
        t.waits_for_window = true;
        t
    };
    let opens = at(7200);
    let closed = WindowGate::Closed { opens, opens_local: "Tue 2026-11-24 03:00 CET".into() };
    let mut input = ready(vec![automatic("auto", 1)]);
    input.window = Some(closed.clone());
    let plan = decide(&input, at(10));
    let window_wait =
        Decision::Wait { reason: WaitReason::Window { target: etcd_main(), gate: closed.clone() } };
    assert_eq!(plan.decisions[0].decision, window_wait);
    assert_eq!(plan.requeue_at, Some(opens), "looked at again when the window opens");
    let message = WaitReason::Window { target: etcd_main(), gate: closed.clone() }.to_string();
    assert!(message.contains("it opens Tue 2026-11-24 03:00 CET"), "{message}");
    // A task made by hand does not wait for the window; the automatic one behind it is queued.
    let mut input = ready(vec![task("by-hand", 0, TaskType::Compact), automatic("auto", 1)]);
    input.window = Some(closed.clone());
    let plan = decide(&input, at(10));
    assert_eq!(plan.decisions[0].decision, Decision::Start);
    assert_eq!(plan.decisions[1].decision, queued_behind("by-hand", true, 1));
    // The window open: it starts.
    let mut input = ready(vec![automatic("auto", 1)]);
    input.window = Some(WindowGate::Open);
    assert_eq!(decide(&input, at(10)).decisions[0].decision, Decision::Start);
    // No windows at all: it starts.
    assert_eq!(decide(&ready(vec![automatic("auto", 1)]), at(10)).decisions[0].decision, Decision::Start);
    // Windows written wrong: it waits, saying what is wrong.
    let mut input = ready(vec![automatic("auto", 1)]);
    input.window = Some(WindowGate::Invalid {
        why: "EtcdCluster etcd/main: spec.maintenanceWindows.windows[0]: ...".into(),
    });
    let decision = &decide(&input, at(10)).decisions[0].decision;
    assert!(
        matches!(decision, Decision::Wait { reason } if reason.to_string().contains("windows cannot be read")),
        "{decision:?}"
    );
}

/// A suspension holds the waiting tasks (saying who, why, until when) except the types it
/// allows; running tasks go on, or stop when it says so; its end is when to look again.
#[test]
fn a_suspension_holds_tasks_and_stops_running_ones_only_when_told() {
    let suspension = |stop_running: bool| Suspension {
        name: "freeze".into(),
        reason: "incident 4711".into(),
        by: "alice".into(),
        until: Some(at(3600)),
        allow: vec![TaskType::Snapshot],
        stop_running,
    };
    let mut input = ready(vec![
        running(task("defrag", 0, TaskType::Defragment), 1),
        task("compact", 2, TaskType::Compact),
    ]);
    input.suspensions = vec![suspension(false)];
    let plan = decide(&input, at(10));
    assert_eq!(plan.decisions[0].decision, Decision::KeepRunning, "Wait: running work goes on");
    assert_eq!(plan.decisions[1].decision, queued_behind("defrag", true, 1));

    input.suspensions = vec![suspension(true)];
    let plan = decide(&input, at(10));
    assert!(
        matches!(&plan.decisions[0].decision, Decision::FailSuspended { by } if by.contains("suspended by alice"))
    );
    match &plan.decisions[1].decision {
        Decision::Wait { reason: reason @ WaitReason::Suspended { .. } } => {
            let text = reason.to_string();
            assert!(text.contains("suspended by alice until") && text.contains("incident 4711"), "{text}");
            assert_eq!(reason.code(), "Suspended");
        }
        other => panic!("{other:?}"),
    }

    // A running Restore is not stopped half-way: it would leave the cluster scaled to zero.
    let mut input = ready(vec![running(task("restore", 0, TaskType::Restore), 1)]);
    input.suspensions = vec![suspension(true)];
    assert_eq!(decide(&input, at(10)).decisions[0].decision, Decision::KeepRunning);

    // A snapshot goes on; a compaction waits and is looked at again when the suspension ends.
    let mut input = ready(vec![task("snap", 0, TaskType::Snapshot)]);
    input.suspensions = vec![suspension(true)];
    assert_eq!(decide(&input, at(10)).decisions[0].decision, Decision::Start);
    let mut input = ready(vec![task("compact", 0, TaskType::Compact)]);
    input.suspensions = vec![suspension(false)];
    assert_eq!(decide(&input, at(10)).requeue_at, Some(at(3600)));
}

/// A task that asks for approval waits `AwaitingApproval` (before its target, window or queue
/// would let it start) until the approved plan is the plan in its status; a plan approved that
/// has changed since is named; the tasks behind it wait their turn.
#[test]
fn an_approval_gate_holds_a_task_until_its_current_plan_is_approved() {
    let gated = |name: &str, second: i64, approval: Approval| {
        let mut t = task(name, second, TaskType::Defragment);
        t.approval = approval;
        t
    };
    let awaiting = |plan: Option<&str>, approved: Option<&str>| Approval::Awaiting {
        plan: plan.map(Into::into),
        approved: approved.map(Into::into),
    };
    let wait = |plan: Option<&str>, approved: Option<&str>| Decision::Wait {
        reason: WaitReason::Approval { plan: plan.map(Into::into), approved: approved.map(Into::into) },
    };
    let closed = WindowGate::Closed { opens: at(7200), opens_local: "Tue 03:00 CET".into() };
    // (case, approval, facts, window, waits for windows, decision)
    let cases: Vec<(&str, Approval, TargetFacts, Option<WindowGate>, bool, Decision)> = vec![
        (
            "not approved",
            awaiting(Some("abc"), None),
            TargetFacts::Ready,
            None,
            false,
            wait(Some("abc"), None),
        ),
        ("no plan yet", awaiting(None, None), TargetFacts::Ready, None, false, wait(None, None)),
        (
            "an older plan approved",
            awaiting(Some("new"), Some("old")),
            TargetFacts::Ready,
            None,
            false,
            wait(Some("new"), Some("old")),
        ),
        ("approved: starts", Approval::Approved, TargetFacts::Ready, None, false, Decision::Start),
        (
            "the person's part comes before the target's",
            awaiting(Some("abc"), None),
            waiting_for("condition Available is False"),
            None,
            false,
            wait(Some("abc"), None),
        ),
        (
            "approved, the target not ready: waits for it",
            Approval::Approved,
            waiting_for("condition Available is False"),
            None,
            false,
            Decision::Wait {
                reason: WaitReason::Target {
                    target: etcd_main(),
                    reason: "condition Available is False".into(),
                },
            },
        ),
        (
            "approved outside its window: waits for the window",
            Approval::Approved,
            TargetFacts::Ready,
            Some(closed.clone()),
            true,
            Decision::Wait { reason: WaitReason::Window { target: etcd_main(), gate: closed.clone() } },
        ),
        (
            "no target: rejected, not awaiting",
            awaiting(Some("abc"), None),
            TargetFacts::Missing,
            None,
            false,
            target_not_found(),
        ),
    ];
    for (case, approval, facts, window, waits, want) in cases {
        let mut t = gated("t", 1, approval);
        t.waits_for_window = waits;
        let mut input = with_facts(facts, vec![t]);
        input.window = window;
        assert_eq!(decide(&input, at(10)).decisions[0].decision, want, "{case}");
    }
    // Behind an awaiting task: queued behind it, which does not start.
    let input = ready(vec![gated("first", 1, awaiting(Some("abc"), None)), task("second", 2, Compact)]);
    let decided = decisions(&input);
    assert_eq!(decided[1], ("second".to_owned(), queued_behind("first", false, 1)));
    // What it says tells the person what to do, and that an approved plan has changed.
    let message = WaitReason::Approval { plan: Some("new".into()), approved: Some("old".into()) }.to_string();
    assert!(message.contains("plan new") && message.contains("task approve"), "{message}");
    assert!(message.contains("(old) has changed"), "{message}");
    assert_eq!(WaitReason::Approval { plan: None, approved: None }.code(), "AwaitingApproval");
}

/// The gate as read from a task object: spec, status.plan and the approval annotation.
#[test]
fn approval_is_read_from_the_spec_the_plan_and_the_annotation() {
    let spec = |require: bool| json!({"target": {"kind": "EtcdCluster", "name": "main"}, "type": "Defragment", "requireApproval": require});
    let with_plan = json!({"plan": {"id": "0123456789ab", "summary": "s"}});
    let annotated = |mut t: MaintenanceTask, value: &str| {
        t.metadata.annotations =
            Some([(groundskeeper_protocol::keys::APPROVED_PLAN.to_owned(), value.to_owned())].into());
        t
    };
    assert_eq!(Approval::of(&object("etcd", "t", spec(false), json!(null))), Approval::NotRequired);
    assert_eq!(
        Approval::of(&object("etcd", "t", spec(true), json!(null))),
        Approval::Awaiting { plan: None, approved: None }
    );
    assert_eq!(
        Approval::of(&annotated(object("etcd", "t", spec(true), with_plan.clone()), " 0123456789ab ")),
        Approval::Approved
    );
    assert_eq!(
        Approval::of(&annotated(object("etcd", "t", spec(true), with_plan), "ffffffffffff")),
        Approval::Awaiting { plan: Some("0123456789ab".into()), approved: Some("ffffffffffff".into()) }
    );
}
