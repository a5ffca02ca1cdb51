use super::*;
use crate::tasks::lifecycle::{Rejection, WaitReason};
use groundskeeper_api::maintenance_task::{NodeState, TargetKind, TaskTarget};

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(1_900_000_000 + second).unwrap()
}

fn t(second: i64) -> Time {
    Time(at(second))
}

fn queued_behind(task: &str) -> Decision {
    Decision::Wait { reason: WaitReason::QueuedBehind { task: task.into(), task_running: true, ahead: 1 } }
}

fn condition<'a>(status: &'a MaintenanceTaskStatus, type_: &str) -> &'a Condition {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("no {type_} condition in {:?}", status.conditions))
}

fn summary(status: &MaintenanceTaskStatus, type_: &str) -> (String, String) {
    let c = condition(status, type_);
    (c.status.clone(), c.reason.clone())
}

fn pair(status: &str, reason: &str) -> (String, String) {
    (status.to_owned(), reason.to_owned())
}

#[test]
fn waiting_marks_the_task_pending_and_queued() {
    let status = apply_decision(MaintenanceTaskStatus::default(), &queued_behind("r"), Some(1), at(5));
    assert_eq!(status.state, Some(TaskState::Pending));
    assert_eq!(status.initiated_at, Some(t(5)));
    assert_eq!(status.observed_generation, Some(1));
    assert_eq!(summary(&status, QUEUED), pair("True", "QueuedBehindTask"));
    assert_eq!(status.waiting_for.as_deref(), Some("QueuedBehindTask"), "for kubectl get");
    assert_eq!(
        condition(&status, QUEUED).message,
        "queued behind MaintenanceTask r (InProgress); 1 task ahead of this one"
    );
    assert_eq!(summary(&status, READY), pair("False", "Pending"));
    let op = status.last_operation.as_ref().unwrap();
    assert_eq!((op.state, op.last_update_time.clone()), (TaskState::Pending, t(5)));
}

#[test]
fn deciding_the_same_again_changes_nothing() {
    let first = apply_decision(MaintenanceTaskStatus::default(), &queued_behind("r"), Some(1), at(5));
    let again = apply_decision(first.clone(), &queued_behind("r"), Some(1), at(99));
    assert_eq!(again, first);
}

#[test]
fn a_new_wait_reason_keeps_the_transition_time_and_moves_the_operation() {
    let first = apply_decision(MaintenanceTaskStatus::default(), &queued_behind("r"), Some(1), at(5));
    let target = Decision::Wait {
        reason: WaitReason::Target {
            target: TaskTarget { kind: TargetKind::EtcdCluster, name: "main".into() },
            reason: "a member is unhealthy".into(),
        },
    };
    let next = apply_decision(first, &target, Some(1), at(50));
    let queued = condition(&next, QUEUED);
    assert_eq!(queued.reason, "WaitingForTarget");
    assert_eq!(next.waiting_for.as_deref(), Some("WaitingForTarget"));
    assert_eq!(queued.message, "waits for EtcdCluster main: a member is unhealthy");
    assert_eq!(queued.last_transition_time, t(5), "still True since 5");
    assert_eq!(next.last_operation.unwrap().last_update_time, t(50));
    assert_eq!(next.initiated_at, Some(t(5)));
}

#[test]
fn starting_records_the_start() {
    let waiting = apply_decision(MaintenanceTaskStatus::default(), &queued_behind("r"), Some(1), at(5));
    let started = apply_decision(waiting, &Decision::Start, Some(1), at(20));
    assert_eq!(started.state, Some(TaskState::InProgress));
    assert_eq!(started.initiated_at, Some(t(5)));
    assert_eq!(started.started_at, Some(t(20)));
    assert_eq!(summary(&started, QUEUED), pair("False", "Started"));
    assert_eq!(started.waiting_for, None, "a started task waits for nothing");
    assert_eq!(condition(&started, QUEUED).last_transition_time, t(20));
    assert_eq!(summary(&started, READY), pair("False", "InProgress"));
    assert_eq!(condition(&started, READY).last_transition_time, t(5), "False since 5");
}

#[test]
fn endings() {
    let target = TaskTarget { kind: TargetKind::EtcdCluster, name: "main".into() };
    let cases: Vec<(Decision, TaskState, &str, &str)> = vec![
        (
            Decision::Reject {
                reason: Rejection::Duplicate { of: "c1".into(), of_state: TaskState::Pending },
            },
            TaskState::Rejected,
            "Duplicate",
            "rejected: duplicate of MaintenanceTask c1 (Pending)",
        ),
        (
            Decision::Reject { reason: Rejection::TargetNotFound { target: target.clone() } },
            TaskState::Rejected,
            "TargetNotFound",
            "rejected: EtcdCluster main does not exist",
        ),
        (
            Decision::FailDeadline { deadline: at(60) },
            TaskState::Failed,
            "DeadlineExceeded",
            "not finished by its deadline 2030-03-17T17:47:40Z",
        ),
        (
            Decision::FailTargetGone { target },
            TaskState::Failed,
            "TargetNotFound",
            "EtcdCluster main was deleted while the task ran",
        ),
    ];
    for (decision, state, code, description) in cases {
        let status = apply_decision(MaintenanceTaskStatus::default(), &decision, Some(2), at(70));
        assert_eq!(status.state, Some(state), "{decision:?}");
        assert_eq!(status.completed_at, Some(t(70)));
        assert_eq!(status.initiated_at, Some(t(70)));
        let error = &status.last_errors[0];
        assert_eq!(error.code, code);
        assert!(error.description.starts_with(description), "{}", error.description);
        assert_eq!(error.observed_at, t(70));
        assert_eq!(summary(&status, QUEUED), pair("False", state.as_str()));
        assert_eq!(summary(&status, READY), pair("False", code));
        assert_eq!(status.last_operation.unwrap().state, state);
        assert_eq!(status.observed_generation, Some(2));
    }
}

#[test]
fn completing_makes_the_task_ready() {
    let running = apply_decision(MaintenanceTaskStatus::default(), &Decision::Start, Some(1), at(1));
    let done = complete(running, "compacted to revision 1200", Some(1), at(30));
    assert_eq!(done.state, Some(TaskState::Completed));
    assert_eq!(done.completed_at, Some(t(30)));
    assert!(done.last_errors.is_empty());
    assert_eq!(summary(&done, READY), pair("True", "Completed"));
    assert_eq!(condition(&done, READY).message, "compacted to revision 1200");
    assert_eq!(summary(&done, QUEUED), pair("False", "Completed"));
}

#[test]
fn failing_records_the_code() {
    let running = apply_decision(MaintenanceTaskStatus::default(), &Decision::Start, Some(1), at(1));
    let failed =
        fail(running, "JobFailed", "Job defrag-main-3 failed: member etcd-2 timed out", Some(1), at(30));
    assert_eq!(failed.state, Some(TaskState::Failed));
    assert_eq!(failed.last_errors[0].code, "JobFailed");
    assert_eq!(summary(&failed, READY), pair("False", "JobFailed"));
}

#[test]
fn a_final_status_never_changes() {
    let running = apply_decision(MaintenanceTaskStatus::default(), &Decision::Start, Some(1), at(1));
    let finals = [
        complete(running.clone(), "done", Some(1), at(2)),
        fail(running.clone(), "JobFailed", "boom", Some(1), at(2)),
        apply_decision(running, &Decision::FailDeadline { deadline: at(2) }, Some(1), at(2)),
    ];
    for finished in finals {
        let decisions = [
            Decision::Start,
            queued_behind("x"),
            Decision::FailDeadline { deadline: at(9) },
            Decision::Reject {
                reason: Rejection::Duplicate { of: "x".into(), of_state: TaskState::Pending },
            },
            Decision::KeepRunning,
            Decision::Delete,
            Decision::Nothing,
        ];
        for decision in &decisions {
            assert_eq!(apply_decision(finished.clone(), decision, Some(3), at(99)), finished, "{decision:?}");
        }
        assert_eq!(complete(finished.clone(), "again", Some(3), at(99)), finished);
        assert_eq!(fail(finished.clone(), "X", "again", Some(3), at(99)), finished);
    }
}

#[test]
fn decisions_without_a_status_change_leave_it_alone() {
    let running = apply_decision(MaintenanceTaskStatus::default(), &Decision::Start, Some(1), at(1));
    for decision in [Decision::KeepRunning, Decision::Nothing, Decision::Delete] {
        assert_eq!(apply_decision(running.clone(), &decision, Some(1), at(50)), running);
    }
}

#[test]
fn last_errors_keep_the_newest_ten() {
    let mut errors = Vec::new();
    for i in 0..12 {
        push_error(&mut errors, "E", &format!("error {i}"), at(i));
    }
    assert_eq!(errors.len(), MAX_LAST_ERRORS);
    assert_eq!(errors.first().unwrap().description, "error 2");
    assert_eq!(errors.last().unwrap().description, "error 11");
}

#[test]
fn long_messages_are_cut_to_what_a_condition_takes() {
    let long = "é".repeat(MESSAGE_MAX_LEN);
    let status = fail(MaintenanceTaskStatus::default(), "E", &long, None, at(1));
    assert!(condition(&status, READY).message.len() <= MESSAGE_MAX_LEN);
    assert!(status.last_errors[0].description.len() <= MESSAGE_MAX_LEN);
}

#[test]
fn times_are_whole_seconds() {
    let now = at(5).checked_add(jiff::SignedDuration::from_millis(700)).unwrap();
    let status = apply_decision(MaintenanceTaskStatus::default(), &Decision::Start, None, now);
    assert_eq!(status.started_at, Some(t(5)));
    let read_back: MaintenanceTaskStatus =
        serde_json::from_value(serde_json::to_value(&status).unwrap()).unwrap();
    assert_eq!(read_back, status);
}

#[test]
fn progress_counts_finished_nodes() {
    let node = |state| NodeProgress { name: "n".into(), state, ..NodeProgress::default() };
    assert_eq!(progress_of(&[]), None);
    let nodes = [
        node(NodeState::Succeeded),
        node(NodeState::Skipped),
        node(NodeState::Failed),
        node(NodeState::Running),
        node(NodeState::Pending),
        node(NodeState::Succeeded),
    ];
    assert_eq!(progress_of(&nodes).as_deref(), Some("4/6"));
}
