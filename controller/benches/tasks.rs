//! One queue and decision pass of the task controller's pure core (not a test: figures for the
//! README): 1,000 targets, each with one task running and one queued behind it (1,000 queued in
//! all), grouped by target and decided, as the controller does target by target.
//!
//! Run: `cargo bench -p groundskeeper-controller --bench tasks`.

use std::time::{Duration, Instant};

use groundskeeper_api::maintenance_task::MaintenanceTask;
use groundskeeper_controller::tasks::{Decision, TargetFacts, TargetTasks, decide, group_by_target};
use jiff::Timestamp;
use serde_json::json;

const TARGETS: usize = 1_000;
const ROUNDS: usize = 20;

fn task(target: usize, name: &str, task_type: &str, state: Option<&str>) -> MaintenanceTask {
    let mut object = json!({
        "apiVersion": "groundskeeper.dev/v1alpha1",
        "kind": "MaintenanceTask",
        "metadata": {"name": name, "namespace": "etcd", "uid": format!("uid-{name}"),
                     "creationTimestamp": "2026-11-01T10:00:00Z"},
        "spec": {"target": {"kind": "EtcdCluster", "name": format!("cluster-{target}")}, "type": task_type},
    });
    if let Some(state) = state {
        object["status"] = json!({"state": state, "startedAt": "2026-11-01T10:00:05Z"});
    }
    serde_json::from_value(object).expect("a valid task")
}

fn main() {
    let tasks: Vec<MaintenanceTask> = (0..TARGETS)
        .flat_map(|i| {
            [
                task(i, &format!("defrag-{i}"), "Defragment", Some("InProgress")),
                task(i, &format!("compact-{i}"), "Compact", None),
            ]
        })
        .collect();
    let now: Timestamp = "2026-11-01T10:05:00Z".parse().unwrap();
    let mut times = Vec::with_capacity(ROUNDS);
    let mut waiting = 0;
    for _ in 0..ROUNDS {
        let started = Instant::now();
        waiting = 0;
        for (key, views) in group_by_target(&tasks, now) {
            let input = TargetTasks {
                target: key.target,
                facts: TargetFacts::Ready,
                tasks: views,
                window: None,
                suspensions: Vec::new(),
            };
            let plan = decide(&input, now);
            waiting += plan.decisions.iter().filter(|d| matches!(d.decision, Decision::Wait { .. })).count();
        }
        times.push(started.elapsed());
    }
    assert_eq!(waiting, TARGETS, "every queued task waits behind the running one");
    times.sort();
    let median = times[ROUNDS / 2];
    println!(
        "one pass over {TARGETS} targets, {} tasks ({TARGETS} queued): median {} of {ROUNDS} rounds ({:.1} µs per target)",
        tasks.len(),
        format_duration(median),
        median.as_secs_f64() * 1e6 / TARGETS as f64
    );
}

fn format_duration(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}
