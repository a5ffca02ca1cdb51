//! `schedule list` and `schedule describe`.

use jiff::Timestamp;
use kube::ResourceExt;

use groundskeeper_api::maintenance_schedule::MaintenanceSchedule;
use groundskeeper_api::maintenance_schedule::validate::validate_schedule;
use groundskeeper_api::maintenance_suspension::{MaintenanceSuspension, in_force};
use groundskeeper_api::maintenance_task::TaskTarget;
use groundskeeper_api::maintenance_window::{WindowState, Windows};
use groundskeeper_api::validate::describe_errors;

use super::{conditions, relative, table, when};

/// One line a schedule: what it runs, when, and where it stands.
pub fn list(schedules: &[MaintenanceSchedule], now: Timestamp) -> String {
    if schedules.is_empty() {
        return "No MaintenanceSchedules.\n".to_owned();
    }
    let rows: Vec<Vec<String>> = schedules
        .iter()
        .map(|schedule| {
            let spec = &schedule.spec;
            let status = schedule.status.clone().unwrap_or_default();
            let target = &spec.task_template.spec.target;
            vec![
                schedule.name_any(),
                format!("{} {}/{}", spec.task_template.spec.task_type, target.kind, target.name),
                spec.schedule.clone(),
                spec.time_zone.clone(),
                state(schedule),
                status.last_schedule_time.map_or("-".to_owned(), |t| relative(now, t.0)),
                next_run(schedule, now),
                status.active.len().to_string(),
            ]
        })
        .collect();
    table(&["NAME", "TASK", "SCHEDULE", "TIME ZONE", "STATE", "LAST RUN", "NEXT RUN", "ACTIVE"], &rows)
}

/// `Scheduled`, `Suspended`, or `Invalid` (the spec's mistakes are in `describe`).
fn state(schedule: &MaintenanceSchedule) -> String {
    if schedule.spec.suspend {
        return "Suspended".to_owned();
    }
    match validate_schedule(schedule) {
        Ok(_) => "Scheduled".to_owned(),
        Err(_) => "Invalid".to_owned(),
    }
}

/// The next run in the schedule's zone and how far off, worked out here from the spec (the
/// status may be older than the spec).
fn next_run(schedule: &MaintenanceSchedule, now: Timestamp) -> String {
    if schedule.spec.suspend {
        return "-".to_owned();
    }
    let Ok(valid) = validate_schedule(schedule) else {
        return "-".to_owned();
    };
    match valid.calendar.next_after(now) {
        Some(next) => format!("{} ({})", local(&valid.calendar, next), relative(now, next)),
        None => "-".to_owned(),
    }
}

fn local(calendar: &groundskeeper_api::maintenance_schedule::calendar::Calendar, at: Timestamp) -> String {
    at.to_zoned(calendar.time_zone().clone()).strftime("%a %Y-%m-%d %H:%M %Z").to_string()
}

/// The schedule in full: spec, the next runs, its tasks, the last skipped run, conditions.
pub fn describe(schedule: &MaintenanceSchedule, now: Timestamp, next: usize) -> String {
    let spec = &schedule.spec;
    let status = schedule.status.clone().unwrap_or_default();
    let target = &spec.task_template.spec.target;
    let mut out = format!(
        "Name:          {}\nNamespace:     {}\nTask:          {} on {}/{}\nSchedule:      {} ({})\nConcurrency:   {}\nDeadline:      {}\nHistory kept:  {} completed, {} failed\nState:         {}\n",
        schedule.name_any(),
        schedule.namespace().unwrap_or_default(),
        spec.task_template.spec.task_type,
        target.kind,
        target.name,
        spec.schedule,
        spec.time_zone,
        spec.concurrency_policy.as_str(),
        spec.starting_deadline_seconds
            .map_or("none: a missed run is made however late, once".to_owned(), |s| {
                format!("{s}s: a run missed by more is skipped")
            }),
        spec.successful_tasks_history_limit,
        spec.failed_tasks_history_limit,
        state(schedule),
    );
    match validate_schedule(schedule) {
        Err(errors) => out.push_str(&format!("\nThe spec cannot be used:\n  {}\n", describe_errors(&errors))),
        Ok(_) if spec.suspend => out.push_str("\nNext runs:     none while suspended (spec.suspend)\n"),
        Ok(valid) => {
            out.push_str("\nNext runs:\n");
            let mut from = now;
            let mut rows = Vec::new();
            for _ in 0..next {
                let Some(run) = valid.calendar.next_after(from) else { break };
                rows.push(vec![local(&valid.calendar, run), run.to_string(), relative(now, run)]);
                from = run;
            }
            out.push_str(&super::indent(&table(&["LOCAL TIME", "UTC", "WHEN"], &rows)));
        }
    }
    out.push_str(&format!(
        "\nLast run:      {}\nLast success:  {}\n",
        when(now, status.last_schedule_time.as_ref()),
        when(now, status.last_successful_time.as_ref())
    ));
    if let Some(skipped) = &status.last_skipped {
        out.push_str(&format!(
            "Last skipped:  {} ({}): {}\n",
            when(now, Some(&skipped.scheduled_time)),
            skipped.reason,
            skipped.message
        ));
    }
    out.push_str("\nTasks (newest first):\n");
    if status.recent_tasks.is_empty() {
        out.push_str("  none yet\n");
    } else {
        let rows: Vec<Vec<String>> = status
            .recent_tasks
            .iter()
            .map(|t| {
                vec![
                    t.name.clone(),
                    when(now, Some(&t.scheduled_time)),
                    t.state.map_or("Pending".to_owned(), |s| s.to_string()),
                ]
            })
            .collect();
        out.push_str(&super::indent(&table(&["NAME", "RUN", "STATE"], &rows)));
    }
    out.push_str("\nConditions:\n");
    out.push_str(&conditions(now, &status.conditions));
    out
}

/// When a target's work may start and what is scheduled on it: its maintenance windows
/// (`windows_text` as written, `windows` checked), its suspensions in force, and the schedules
/// whose tasks name it.
pub fn target_timing(
    windows_text: Option<String>,
    windows: Option<Result<Windows, String>>,
    suspensions: &[MaintenanceSuspension],
    schedules: &[MaintenanceSchedule],
    target: &TaskTarget,
    now: Timestamp,
) -> String {
    let windows_line = match (windows_text, windows) {
        (_, None) | (None, _) => "any time (no maintenance windows)".to_owned(),
        (Some(text), Some(Err(why))) => format!("{text}: cannot be read, automatic tasks wait: {why}"),
        (Some(text), Some(Ok(windows))) => match windows.state_at(now) {
            WindowState::Open { closes, .. } => format!(
                "{text}: open until {} ({}); automatic tasks start only inside a window",
                windows.local(closes),
                relative(now, closes)
            ),
            WindowState::Closed { opens } => format!(
                "{text}: closed, the next opens {} ({}); automatic tasks start only inside a window",
                windows.local(opens),
                relative(now, opens)
            ),
        },
    };
    let mut out = format!(
        "
When:
  Windows:    {windows_line}
"
    );
    let (suspended, unusable) = in_force(suspensions, target, now);
    if suspended.is_empty() {
        out.push_str("  Suspended:  no\n");
    }
    for suspension in &suspended {
        let left = suspension.until.map(|until| format!(" ({})", relative(now, until))).unwrap_or_default();
        let running = if suspension.stop_running { "running tasks stopped" } else { "running tasks finish" };
        out.push_str(&format!("  Suspended:  {}{left}; {running}\n", suspension.describe()));
    }
    for mistake in &unusable {
        out.push_str(&format!("  Suspension: cannot be used: {mistake}\n"));
    }
    let ours: Vec<&MaintenanceSchedule> =
        schedules.iter().filter(|s| s.spec.task_template.spec.target == *target).collect();
    if ours.is_empty() {
        out.push_str(
            "  Schedules:  none
",
        );
    }
    for schedule in ours {
        out.push_str(&format!(
            "  Schedule:   {} ({}, {} {}): next {}\n",
            schedule.name_any(),
            schedule.spec.task_template.spec.task_type,
            schedule.spec.schedule,
            schedule.spec.time_zone,
            next_run(schedule, now)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schedule(spec: serde_json::Value, status: serde_json::Value) -> MaintenanceSchedule {
        let mut object = json!({
            "apiVersion": "groundskeeper.dev/v1alpha1",
            "kind": "MaintenanceSchedule",
            "metadata": {"name": "nightly", "namespace": "etcd"},
            "spec": {
                "schedule": "30 2 * * *",
                "timeZone": "Europe/Berlin",
                "taskTemplate": {"spec": {"target": {"kind": "EtcdCluster", "name": "main"}, "type": "Snapshot"}}
            },
            "status": status,
        });
        for (key, value) in spec.as_object().unwrap() {
            object["spec"][key] = value.clone();
        }
        serde_json::from_value(object).unwrap()
    }

    fn now() -> Timestamp {
        "2026-03-28T12:00:00Z".parse().unwrap()
    }

    #[test]
    fn the_list_tells_the_next_run_in_the_schedules_own_zone() {
        let text = list(&[schedule(json!({}), json!({"active": ["nightly-1"]}))], now());
        assert!(text.starts_with("NAME"), "{text}");
        assert!(text.contains("Snapshot EtcdCluster/main"), "{text}");
        // The night the clock springs forward: 02:30 does not exist, the run comes at 03:00 CEST.
        assert!(text.contains("Sun 2026-03-29 03:00 CEST (in 13h)"), "{text}");
        assert!(text.contains("Scheduled"), "{text}");
    }

    #[test]
    fn describe_lists_the_next_runs_the_tasks_and_why_a_run_was_skipped() {
        let status = json!({
            "lastScheduleTime": "2026-03-28T01:30:00Z",
            "lastSkipped": {"scheduledTime": "2026-03-27T01:30:00Z", "reason": "ConcurrencyForbid",
                            "message": "MaintenanceTask nightly-1 of the run of … is not finished (concurrencyPolicy Forbid)"},
            "recentTasks": [{"name": "nightly-29539350", "scheduledTime": "2026-03-28T01:30:00Z", "state": "Completed"}]
        });
        let text = describe(&schedule(json!({}), status), now(), 3);
        for want in [
            "Schedule:      30 2 * * * (Europe/Berlin)",
            "Sun 2026-03-29 03:00 CEST   2026-03-29T01:00:00Z   in 13h",
            "Mon 2026-03-30 02:30 CEST   2026-03-30T00:30:00Z",
            "Last skipped:",
            "ConcurrencyForbid",
            "nightly-29539350",
            "Completed",
        ] {
            assert!(text.contains(want), "{want:?} missing:\n{text}");
        }
    }

    #[test]
    fn a_targets_windows_and_schedules_are_told_together() {
        use groundskeeper_api::maintenance_window::{MaintenanceWindowsSpec, Windows};
        let spec = MaintenanceWindowsSpec {
            time_zone: "Europe/Berlin".into(),
            windows: vec!["Sat 22:00-06:00".into()],
        };
        let target: TaskTarget =
            serde_json::from_value(json!({"kind": "EtcdCluster", "name": "main"})).unwrap();
        let freeze: MaintenanceSuspension = serde_json::from_value(json!({
            "apiVersion": "groundskeeper.dev/v1alpha1", "kind": "MaintenanceSuspension",
            "metadata": {"name": "freeze", "namespace": "etcd", "creationTimestamp": "2026-03-28T10:00:00Z",
                         "annotations": {"groundskeeper.dev/suspended-by": "alice"}},
            "spec": {"target": {"kind": "EtcdCluster", "name": "main"}, "reason": "incident 4711",
                     "until": "2026-03-28T15:00:00Z", "allowTaskTypes": ["Snapshot"]}
        }))
        .unwrap();
        let text = target_timing(
            Some(spec.windows.join("; ") + " (Europe/Berlin)"),
            Some(Windows::new(&spec).map_err(|e| format!("{e:?}"))),
            &[freeze],
            &[schedule(json!({}), json!({}))],
            &target,
            now(),
        );
        assert!(
            text.contains(
                "Windows:    Sat 22:00-06:00 (Europe/Berlin): closed, the next opens Sat 2026-03-28 22:00 CET (in 9h)"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "Schedule:   nightly (Snapshot, 30 2 * * * Europe/Berlin): next Sun 2026-03-29 03:00 CEST"
            ),
            "{text}"
        );
        assert!(
            text.contains("Suspended:  maintenance suspended by alice until 2026-03-28T15:00:00Z (MaintenanceSuspension freeze): incident 4711; Snapshot tasks go on (in 3h); running tasks finish"),
            "{text}"
        );
        let other: TaskTarget =
            serde_json::from_value(json!({"kind": "EtcdCluster", "name": "other"})).unwrap();
        let none = target_timing(None, None, &[], &[schedule(json!({}), json!({}))], &other, now());
        assert!(none.contains("any time") && none.contains("Schedules:  none"), "{none}");
        assert!(none.contains("Suspended:  no"), "{none}");
    }

    #[test]
    fn a_suspended_or_invalid_schedule_says_so() {
        let suspended = describe(&schedule(json!({"suspend": true}), json!({})), now(), 3);
        assert!(suspended.contains("none while suspended"), "{suspended}");
        let invalid = describe(&schedule(json!({"timeZone": "Mars/Base"}), json!({})), now(), 3);
        assert!(invalid.contains("spec.timeZone"), "{invalid}");
        assert!(list(&[schedule(json!({"schedule": "nope"}), json!({}))], now()).contains("Invalid"));
    }
}
