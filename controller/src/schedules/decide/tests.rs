use super::*;
use groundskeeper_api::maintenance_schedule::calendar::Calendar;
use groundskeeper_api::maintenance_task::MaintenanceTaskSpec;

fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

fn schedule(policy: ConcurrencyPolicy) -> ValidSchedule {
    ValidSchedule {
        calendar: Calendar::new("0 3 * * *", "UTC").unwrap(),
        suspend: false,
        concurrency_policy: policy,
        starting_deadline: None,
        successful_history: 3,
        failed_history: 1,
        task_spec: serde_json::from_value::<MaintenanceTaskSpec>(serde_json::json!({
            "target": {"kind": "EtcdCluster", "name": "main"}, "type": "Snapshot"
        }))
        .unwrap(),
    }
}

fn task(name: &str, scheduled: &str, state: Option<TaskState>) -> MadeTask {
    MadeTask { name: name.into(), scheduled: at(scheduled), state }
}

const CREATED: &str = "2026-11-20T12:00:00Z";

fn plan(valid: &ValidSchedule, last: Option<&str>, tasks: &[MadeTask], now: &str) -> SchedulePlan {
    let facts = ScheduleFacts { valid, created: at(CREATED), last_schedule_time: last.map(at) };
    decide(&facts, tasks, at(now))
}

#[test]
fn a_due_run_makes_its_task_and_the_next_run_is_known() {
    let valid = schedule(ConcurrencyPolicy::Forbid);
    let early = plan(&valid, None, &[], "2026-11-21T02:59:00Z");
    assert_eq!((early.create, early.skip.clone()), (None, None));
    assert_eq!(early.next_run, Some(at("2026-11-21T03:00:00Z")));
    assert_eq!(early.requeue_after, Some(Duration::from_secs(60)));

    let due = plan(&valid, None, &[], "2026-11-21T03:00:20Z");
    assert_eq!(due.create, Some(at("2026-11-21T03:00:00Z")));
    assert_eq!(due.last_schedule_time, Some(at("2026-11-21T03:00:00Z")));
    assert_eq!(due.next_run, Some(at("2026-11-22T03:00:00Z")));
}

/// (case, policy, the previous run's task state, made, skipped, deleted)
#[test]
#[allow(clippy::type_complexity)] // a table of cases
fn the_concurrency_policy_decides_when_the_previous_task_is_unfinished() {
    use TaskState::*;
    let cases: &[(&str, ConcurrencyPolicy, Option<TaskState>, bool, bool, bool)] = &[
        ("Forbid, previous not yet seen", ConcurrencyPolicy::Forbid, None, false, true, false),
        ("Forbid, previous pending", ConcurrencyPolicy::Forbid, Some(Pending), false, true, false),
        ("Forbid, previous running", ConcurrencyPolicy::Forbid, Some(InProgress), false, true, false),
        ("Forbid, previous finished", ConcurrencyPolicy::Forbid, Some(Completed), true, false, false),
        ("Replace, previous pending: replaced", ConcurrencyPolicy::Replace, Some(Pending), true, false, true),
        (
            "Replace, previous running: left to run",
            ConcurrencyPolicy::Replace,
            Some(InProgress),
            false,
            true,
            false,
        ),
        ("Allow, previous running", ConcurrencyPolicy::Allow, Some(InProgress), true, false, false),
    ];
    for (case, policy, previous, made, skipped, deleted) in cases {
        let valid = schedule(*policy);
        let tasks = [task("prev", "2026-11-21T03:00:00Z", *previous)];
        let plan = plan(&valid, Some("2026-11-21T03:00:00Z"), &tasks, "2026-11-22T03:00:05Z");
        assert_eq!(plan.create.is_some(), *made, "{case}: {plan:?}");
        assert_eq!(plan.skip.is_some(), *skipped, "{case}: {plan:?}");
        assert_eq!(plan.delete.iter().any(|(name, _)| name == "prev"), *deleted, "{case}: {plan:?}");
        assert_eq!(
            plan.last_schedule_time,
            Some(at("2026-11-22T03:00:00Z")),
            "{case}: made or skipped, once"
        );
        if let Some(skip) = &plan.skip {
            assert_eq!(skip.reason, SkipReason::ConcurrencyForbid, "{case}");
            assert!(skip.message.contains("MaintenanceTask prev"), "{case}: {}", skip.message);
        }
    }
}

#[test]
fn a_suspended_schedule_skips_its_runs_and_does_not_make_them_up() {
    let mut valid = schedule(ConcurrencyPolicy::Forbid);
    valid.suspend = true;
    let suspended = plan(&valid, Some("2026-11-21T03:00:00Z"), &[], "2026-11-22T03:00:05Z");
    assert_eq!(suspended.create, None);
    assert_eq!(suspended.skip.as_ref().map(|s| s.reason), Some(SkipReason::Suspended));
    assert_eq!((suspended.next_run, suspended.requeue_after), (None, None));
    // Lifted an hour later: the skipped run is not made up for.
    valid.suspend = false;
    let lifted = plan(
        &valid,
        suspended.last_schedule_time.map(|t| t.to_string()).as_deref(),
        &[],
        "2026-11-22T04:00:00Z",
    );
    assert_eq!((lifted.create, lifted.skip), (None, None));
    assert_eq!(lifted.next_run, Some(at("2026-11-23T03:00:00Z")));
}

#[test]
fn missed_runs_make_one_task_at_most_and_only_within_the_deadline() {
    let mut valid = schedule(ConcurrencyPolicy::Forbid);
    // Down for three nights, no deadline: the latest run, once.
    let late = plan(&valid, Some("2026-11-21T03:00:00Z"), &[], "2026-11-24T09:00:00Z");
    assert_eq!(late.create, Some(at("2026-11-24T03:00:00Z")));
    valid.starting_deadline = Some(SignedDuration::from_hours(1));
    let missed = plan(&valid, Some("2026-11-21T03:00:00Z"), &[], "2026-11-24T09:00:00Z");
    assert_eq!(missed.create, None);
    let skip = missed.skip.unwrap();
    assert_eq!(skip.reason, SkipReason::MissedDeadline);
    assert!(skip.message.contains("more than spec.startingDeadlineSeconds 3600"), "{}", skip.message);
    let within = plan(&valid, Some("2026-11-21T03:00:00Z"), &[], "2026-11-24T03:59:00Z");
    assert_eq!(within.create, Some(at("2026-11-24T03:00:00Z")));
}

#[test]
fn a_clock_that_goes_back_or_a_restart_makes_nothing_twice() {
    let valid = schedule(ConcurrencyPolicy::Allow);
    let back = plan(&valid, Some("2026-11-22T03:00:00Z"), &[], "2026-11-21T03:30:00Z");
    assert_eq!((back.create, back.skip.clone()), (None, None));
    assert_eq!(back.next_run, Some(at("2026-11-23T03:00:00Z")), "the next run after the last one made");
    // The task of the run exists, the status was never written (a restart in between).
    let tasks = [task("made", "2026-11-22T03:00:00Z", None)];
    let restarted = plan(&valid, Some("2026-11-21T03:00:00Z"), &tasks, "2026-11-22T03:00:30Z");
    assert_eq!(restarted.create, None);
    assert_eq!(restarted.last_schedule_time, Some(at("2026-11-22T03:00:00Z")), "the status catches up");
}

#[test]
fn finished_tasks_beyond_the_history_limits_go_oldest_first() {
    use TaskState::*;
    let valid = schedule(ConcurrencyPolicy::Forbid);
    let day = |d: u32| format!("2026-11-{d:02}T03:00:00Z");
    let tasks = [
        task("c1", &day(1), Some(Completed)),
        task("c2", &day(2), Some(Completed)),
        task("f3", &day(3), Some(Failed)),
        task("c4", &day(4), Some(Completed)),
        task("r5", &day(5), Some(Rejected)),
        task("c6", &day(6), Some(Completed)),
        task("p7", &day(7), Some(Pending)),
    ];
    let plan = plan(&valid, Some(&day(7)), &tasks, "2026-11-07T12:00:00Z");
    let mut deleted: Vec<&str> = plan.delete.iter().map(|(n, _)| n.as_str()).collect();
    deleted.sort();
    assert_eq!(deleted, ["c1", "f3"], "3 completed and 1 failed kept, the pending one untouched");
    assert!(plan.delete.iter().any(|(_, why)| why.contains("successfulTasksHistoryLimit 3")));
}
