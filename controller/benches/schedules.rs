//! One pass of the schedule controller's pure core over 1,000 schedules (not a test: figures for
//! the docs): each schedule's spec checked (its cron expression parsed, its time zone looked up)
//! and its runs decided against the tasks it made, as the controller does schedule by schedule.
//! Expressions and zones vary (daily in Berlin, every 15 minutes in New York, weekdays in Tokyo,
//! weekly in UTC); each schedule has made 3 tasks, and the pass falls on a minute where some runs
//! are due.
//!
//! Then the maintenance windows of 1,000 targets: checked and evaluated, and (as a Cleanup task
//! does for its pending nodes) 9 nodes per target fitted into the open window from their
//! history.
//!
//! Run: `cargo bench -p groundskeeper-controller --bench schedules`.

use std::time::{Duration, Instant};

use groundskeeper_api::MaintenanceSchedule;
use groundskeeper_api::maintenance_schedule::calendar::Calendars;
use groundskeeper_api::maintenance_schedule::validate::validate_schedule_with;
use groundskeeper_api::maintenance_task::TaskState;
use groundskeeper_api::maintenance_window::{MaintenanceWindowsSpec, WindowState, windows_of};
use groundskeeper_api::plan::{fits_window, node_cleanup_estimate};
use groundskeeper_controller::schedules::decide::{MadeTask, ScheduleFacts, decide};
use jiff::{SignedDuration, Timestamp};
use serde_json::json;

const SCHEDULES: usize = 1_000;
const ROUNDS: usize = 20;
const KINDS: [(&str, &str); 4] = [
    ("0 3 * * *", "Europe/Berlin"),
    ("*/15 * * * *", "America/New_York"),
    ("30 2 * * 1-5", "Asia/Tokyo"),
    ("@weekly", "UTC"),
];

fn schedule(i: usize) -> MaintenanceSchedule {
    let (expression, zone) = KINDS[i % KINDS.len()];
    serde_json::from_value(json!({
        "apiVersion": "groundskeeper.dev/v1alpha1",
        "kind": "MaintenanceSchedule",
        "metadata": {"name": format!("schedule-{i}"), "namespace": "etcd", "uid": format!("uid-{i}")},
        "spec": {
            "schedule": expression,
            "timeZone": zone,
            "taskTemplate": {"spec": {"target": {"kind": "EtcdCluster", "name": format!("cluster-{i}")}, "type": "Snapshot"}}
        }
    }))
    .expect("a valid schedule")
}

fn main() {
    let schedules: Vec<MaintenanceSchedule> = (0..SCHEDULES).map(schedule).collect();
    let now: Timestamp = "2026-11-24T02:00:10Z".parse().unwrap();
    let created = now - SignedDuration::from_hours(24 * 30);
    let tasks: Vec<MadeTask> = (1..=3)
        .map(|d| MadeTask {
            name: format!("t{d}"),
            scheduled: now - SignedDuration::from_hours(24 * d),
            state: Some(TaskState::Completed),
        })
        .collect();
    let last = Some(now - SignedDuration::from_hours(24));
    let (mut checked_and_decided, mut decided_only) = (Vec::new(), Vec::new());
    let mut due = 0;
    // The controller keeps the calendars it built: every pass after the first finds them.
    let calendars = Calendars::default();
    for _ in 0..ROUNDS {
        let started = Instant::now();
        let valid: Vec<_> =
            schedules.iter().map(|s| validate_schedule_with(s, &calendars).expect("valid")).collect();
        let checked = started.elapsed();
        due = 0;
        for schedule in &valid {
            let facts = ScheduleFacts { valid: schedule, created, last_schedule_time: last };
            due += usize::from(decide(&facts, &tasks, now).create.is_some());
        }
        checked_and_decided.push(started.elapsed());
        decided_only.push(started.elapsed() - checked);
    }
    // What checking costs, piece by piece.
    let mut calendars = Vec::new();
    let mut zones = Vec::new();
    for _ in 0..ROUNDS {
        let started = Instant::now();
        for s in &schedules {
            std::hint::black_box(
                groundskeeper_api::maintenance_schedule::calendar::time_zone_named(&s.spec.time_zone).ok(),
            );
        }
        zones.push(started.elapsed());
        let started = Instant::now();
        for s in &schedules {
            std::hint::black_box(
                groundskeeper_api::maintenance_schedule::calendar::Calendar::new(
                    &s.spec.schedule,
                    &s.spec.time_zone,
                )
                .ok(),
            );
        }
        calendars.push(started.elapsed());
    }
    zones.sort();
    calendars.sort();
    println!(
        "  without the controller's calendar cache: time zones looked up {:.2} ms, calendars built (zone, expression, first run) {:.2} ms",
        zones[ROUNDS / 2].as_secs_f64() * 1e3,
        calendars[ROUNDS / 2].as_secs_f64() * 1e3
    );
    // The maintenance windows of 1,000 targets, as the task controller and the triggers read
    // them each pass: the spec checked (zone looked up, every window parsed, overlaps refused)
    // and where the windows stand now; and each target's 9 nodes fitted into the window.
    let windows: Vec<MaintenanceWindowsSpec> = (0..SCHEDULES)
        .map(|i| MaintenanceWindowsSpec {
            time_zone: KINDS[i % KINDS.len()].1.to_owned(),
            windows: vec!["Mon-Fri 01:00-05:00".to_owned(), "Sat 22:00-06:00".to_owned()],
        })
        .collect();
    let history = std::collections::BTreeMap::from([(
        groundskeeper_protocol::keys::CLEANUP_HISTORY.to_owned(),
        "1073741824:600,1073741824:640,2147483648:1300".to_owned(),
    )]);
    let mut windows_read = Vec::new();
    let mut fitted = Vec::new();
    for _ in 0..ROUNDS {
        let started = Instant::now();
        let mut open = 0;
        let mut fits = 0;
        for spec in &windows {
            let Some(Ok(windows)) = windows_of(Some(spec), "EtcdCluster etcd/x", "spec.maintenanceWindows")
            else {
                panic!("valid windows");
            };
            let state = windows.state_at(now);
            open += usize::from(matches!(state, WindowState::Open { .. }));
            for _node in 0..9 {
                let expected = node_cleanup_estimate(&history);
                fits += usize::from(
                    fits_window(&state, now, expected.seconds, |_| false, |t| windows.local(t)).is_ok(),
                );
            }
        }
        std::hint::black_box((open, fits));
        fitted.push(started.elapsed());
    }
    for _ in 0..ROUNDS {
        let started = Instant::now();
        for spec in &windows {
            let windows = windows_of(Some(spec), "EtcdCluster etcd/x", "spec.maintenanceWindows");
            std::hint::black_box(windows.map(|w| w.map(|w| w.state_at(now))));
        }
        windows_read.push(started.elapsed());
    }
    windows_read.sort();
    fitted.sort();
    checked_and_decided.sort();
    decided_only.sort();
    let median = |times: &[Duration]| times[ROUNDS / 2];
    println!(
        "windows of {SCHEDULES} targets (2 windows each, 4 zones) checked and evaluated: median {:.2} ms; with 9 nodes each fitted into the window (estimate from a 3-run history + fit): median {:.2} ms",
        median(&windows_read).as_secs_f64() * 1e3,
        median(&fitted).as_secs_f64() * 1e3,
    );
    println!(
        "schedules and windows together, one pass over {SCHEDULES} targets: median {:.2} ms (goal: under 5 ms)",
        (median(&checked_and_decided) + median(&windows_read)).as_secs_f64() * 1e3,
    );
    println!(
        "one pass over {SCHEDULES} schedules ({due} runs due): specs checked and runs decided: median {:.2} ms; runs decided alone: median {:.2} ms (of {ROUNDS} rounds; goal: under 5 ms)",
        median(&checked_and_decided).as_secs_f64() * 1e3,
        median(&decided_only).as_secs_f64() * 1e3,
    );
}
