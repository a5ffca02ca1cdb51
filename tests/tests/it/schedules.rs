//! MaintenanceSchedules end to end on the in-memory API, on a clock the test moves: days of runs
//! in seconds. The schedule controller runs alone; the test plays the task controller by setting
//! the tasks' states, so that each concurrency policy meets a previous task pending, running or
//! finished exactly when it should.

use std::sync::Arc;
use std::time::Duration;

use groundskeeper_controller::runtime::clock::Clock;
use groundskeeper_controller::runtime::context::ControllerConfig;
use groundskeeper_e2e::apiserver::rbac::controller_grants;
use groundskeeper_e2e::apiserver::{ApiServer, PatchFormat, ResourceId};
use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use crate::harness::{Controllers, Part, api_server, maintenance_schedules, maintenance_tasks, wait_until};

const NAMESPACE: &str = "etcd";
/// Guards against a scenario that never converges; not a performance bound.
const GUARD: Duration = Duration::from_secs(30);
/// Far ahead of the system clock, which stamps the schedules' creation: every run of the
/// scenario comes after its schedule was made.
const START: &str = "2099-11-24T02:30:00Z";

struct Scenario {
    server: Arc<ApiServer>,
    clock: Clock,
    controllers: Controllers,
}

impl Scenario {
    async fn start() -> Scenario {
        let server = api_server(controller_grants()).await;
        let clock = Clock::manual(START.parse().unwrap());
        // The clock jumps by hours: the controller looks again often, whatever the next run.
        let config =
            ControllerConfig { requeue_idle: Duration::from_millis(100), ..ControllerConfig::default() };
        let controllers = Controllers::start_with_clock(&server, config, clock.clone(), &[Part::Schedules]);
        Scenario { server, clock, controllers }
    }

    fn create(&self, name: &str, spec: Value) {
        let mut object = json!({
            "apiVersion": "groundskeeper.dev/v1alpha1",
            "kind": "MaintenanceSchedule",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {
                "schedule": "0 * * * *",
                "taskTemplate": {"spec": {"target": {"kind": "EtcdCluster", "name": "main"}, "type": "Defragment"}}
            }
        });
        for (key, value) in spec.as_object().unwrap() {
            object["spec"][key] = value.clone();
        }
        self.server.create(&maintenance_schedules(), Some(NAMESPACE), object).unwrap();
    }

    fn schedule(&self, name: &str) -> Value {
        self.server.get(&maintenance_schedules(), Some(NAMESPACE), name).unwrap()
    }

    /// The schedule's tasks, oldest run first: (name, scheduled time, state).
    fn tasks(&self, schedule: &str) -> Vec<(String, String, String)> {
        let mut tasks: Vec<(String, String, String)> = self
            .server
            .list(&maintenance_tasks(), Some(NAMESPACE))
            .iter()
            .filter(|t| t["metadata"]["labels"]["groundskeeper.dev/schedule"] == schedule)
            .map(|t| {
                (
                    t["metadata"]["name"].as_str().unwrap().to_owned(),
                    t["metadata"]["annotations"]["groundskeeper.dev/scheduled-time"]
                        .as_str()
                        .unwrap()
                        .to_owned(),
                    t["status"]["state"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect();
        tasks.sort_by(|a, b| a.1.cmp(&b.1));
        tasks
    }

    /// Plays the task controller: `task` is now in `state`.
    fn set_state(&self, task: &str, state: &str) {
        let mut status = json!({"state": state});
        if matches!(state, "Completed" | "Failed") {
            status["completedAt"] = json!(self.clock.now().to_string());
        }
        self.server
            .patch(
                &maintenance_tasks(),
                Some(NAMESPACE),
                task,
                PatchFormat::Merge,
                &json!({"status": status}),
                true,
            )
            .unwrap();
    }

    /// Moves the clock to `time` and waits until the schedule has dealt with the run due then.
    async fn tick(&self, schedule: &str, time: &str) {
        self.clock.set(time.parse().unwrap());
        let due = time.parse::<Timestamp>().unwrap();
        let want = due.to_string();
        wait_until(
            &format!("{schedule} dealt with the run of {time}"),
            GUARD,
            Duration::from_millis(10),
            || {
                self.schedule(schedule)["status"]["lastScheduleTime"].as_str().map(normalized)
                    == Some(want.clone())
            },
            || format!("{:#}", self.schedule(schedule)),
        )
        .await;
    }

    /// Events about `schedule`, as `reason: note`.
    fn events(&self, schedule: &str) -> Vec<String> {
        self.server
            .list(&ResourceId::new("events.k8s.io", "v1", "events"), Some(NAMESPACE))
            .iter()
            .filter(|e| e["regarding"]["name"] == schedule)
            .map(|e| format!("{}: {}", e["reason"].as_str().unwrap_or(""), e["note"].as_str().unwrap_or("")))
            .collect()
    }
}

fn normalized(time: &str) -> String {
    time.parse::<Timestamp>().map(|t| t.to_string()).unwrap_or_default()
}

fn hour(h: u32) -> String {
    format!("2099-11-24T{h:02}:00:00Z")
}

fn states(tasks: &[(String, String, String)]) -> Vec<(String, String)> {
    tasks
        .iter()
        .map(|(_, scheduled, state)| (normalized(scheduled)[11..16].to_owned(), state.clone()))
        .collect()
}

fn owned(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(a, b)| ((*a).to_owned(), (*b).to_owned())).collect()
}

/// Forbid: a run while the previous task is unfinished (not yet seen, or running) is skipped and
/// said so; once it finished, the next run makes its task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forbid_skips_runs_while_the_previous_task_is_unfinished() {
    let s = Scenario::start().await;
    s.create("hourly", json!({"concurrencyPolicy": "Forbid"}));
    s.tick("hourly", &hour(3)).await;
    assert_eq!(states(&s.tasks("hourly")), owned(&[("03:00", "")]));
    s.tick("hourly", &hour(4)).await;
    assert_eq!(states(&s.tasks("hourly")), owned(&[("03:00", "")]), "not seen yet: skipped");
    let status = s.schedule("hourly")["status"].clone();
    assert_eq!(status["lastSkipped"]["reason"], "ConcurrencyForbid", "{status:#}");
    let first = s.tasks("hourly")[0].0.clone();
    s.set_state(&first, "InProgress");
    s.tick("hourly", &hour(5)).await;
    assert_eq!(s.tasks("hourly").len(), 1, "running: skipped");
    s.set_state(&first, "Completed");
    s.tick("hourly", &hour(6)).await;
    assert_eq!(states(&s.tasks("hourly")), owned(&[("03:00", "Completed"), ("06:00", "")]));
    // Repeats of one reason are one Event with a count (the recorder's series); the metric counts each.
    let events = s.events("hourly");
    assert!(
        events.iter().any(|e| e.starts_with("RunSkipped") && e.contains("concurrencyPolicy Forbid")),
        "{events:?}"
    );
    assert!(events.iter().any(|e| e.starts_with("TaskCreated")), "{events:?}");
    let metrics = s.controllers.metrics.encode();
    assert!(
        metrics
            .contains(r#"groundskeeper_schedule_runs_total{result="skipped",reason="ConcurrencyForbid"} 2"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"groundskeeper_schedule_runs_total{result="created",reason="Created"} 2"#),
        "{metrics}"
    );
}

/// Replace: a previous task still Pending is deleted and replaced; a running one is left to run
/// and the run skipped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_replaces_a_pending_task_and_leaves_a_running_one() {
    let s = Scenario::start().await;
    s.create("hourly", json!({"concurrencyPolicy": "Replace"}));
    s.tick("hourly", &hour(3)).await;
    let first = s.tasks("hourly")[0].0.clone();
    s.set_state(&first, "Pending");
    s.tick("hourly", &hour(4)).await;
    assert_eq!(states(&s.tasks("hourly")), owned(&[("04:00", "")]), "the pending 03:00 task replaced");
    let second = s.tasks("hourly")[0].0.clone();
    s.set_state(&second, "InProgress");
    s.tick("hourly", &hour(5)).await;
    assert_eq!(states(&s.tasks("hourly")), owned(&[("04:00", "InProgress")]), "running: left alone");
    assert_eq!(s.schedule("hourly")["status"]["lastSkipped"]["reason"], "ConcurrencyForbid");
}

/// Allow, over a whole day in seconds: a task each hour whatever came before, finished ones
/// beyond the history limit deleted, the newest success recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_makes_a_task_each_run_and_keeps_the_history_it_is_told() {
    let s = Scenario::start().await;
    s.create("hourly", json!({"concurrencyPolicy": "Allow", "successfulTasksHistoryLimit": 2}));
    for h in 3..24 {
        s.tick("hourly", &hour(h)).await;
        let newest = s.tasks("hourly").last().unwrap().0.clone();
        s.set_state(&newest, "Completed");
    }
    s.tick("hourly", "2099-11-25T00:00:00Z").await;
    wait_until(
        "two completed tasks kept",
        GUARD,
        Duration::from_millis(10),
        || s.tasks("hourly").len() == 3,
        || format!("{:?}", s.tasks("hourly")),
    )
    .await;
    assert_eq!(
        states(&s.tasks("hourly")),
        owned(&[("22:00", "Completed"), ("23:00", "Completed"), ("00:00", "")])
    );
    let status = s.schedule("hourly")["status"].clone();
    assert_eq!(status["nextScheduleTime"], "2099-11-25T01:00:00Z", "{status:#}");
    assert!(status["lastSuccessfulTime"].is_string(), "{status:#}");
    assert_eq!(status["conditions"][0]["reason"], "Scheduled");
}

/// Suspended: runs are skipped, nothing is made up for when it is lifted; the next run after
/// that makes its task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_schedule_skips_and_does_not_catch_up() {
    let s = Scenario::start().await;
    s.create("hourly", json!({"suspend": true}));
    s.tick("hourly", &hour(3)).await;
    let status = s.schedule("hourly")["status"].clone();
    assert_eq!(status["lastSkipped"]["reason"], "Suspended", "{status:#}");
    assert_eq!(status["conditions"][0]["status"], "False");
    assert_eq!(status["conditions"][0]["reason"], "Suspended");
    assert!(status.get("nextScheduleTime").is_none_or(Value::is_null), "{status:#}");
    s.server
        .patch(
            &maintenance_schedules(),
            Some(NAMESPACE),
            "hourly",
            PatchFormat::Merge,
            &json!({"spec": {"suspend": false}}),
            false,
        )
        .unwrap();
    s.clock.set("2099-11-24T03:30:00Z".parse().unwrap());
    wait_until(
        "resumed",
        GUARD,
        Duration::from_millis(10),
        || s.schedule("hourly")["status"]["conditions"][0]["reason"] == "Scheduled",
        || format!("{:#}", s.schedule("hourly")),
    )
    .await;
    assert!(s.tasks("hourly").is_empty(), "the 03:00 run is not made up for");
    s.tick("hourly", &hour(4)).await;
    assert_eq!(states(&s.tasks("hourly")), owned(&[("04:00", "")]));
}

/// The controller is down for three hours: on its return the latest run only is made, and with a
/// starting deadline shorter than its lateness, not even that one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missed_runs_are_not_backfilled_and_respect_the_deadline() {
    let mut s = Scenario::start().await;
    s.create("lenient", json!({"concurrencyPolicy": "Allow"}));
    s.create("strict", json!({"concurrencyPolicy": "Allow", "startingDeadlineSeconds": 600}));
    s.tick("lenient", &hour(3)).await;
    s.tick("strict", &hour(3)).await;
    s.controllers.stop(Part::Schedules).await;
    s.clock.set("2099-11-24T06:20:00Z".parse().unwrap());
    s.controllers.spawn(Part::Schedules);
    wait_until(
        "both dealt with the 06:00 run",
        GUARD,
        Duration::from_millis(10),
        || {
            ["lenient", "strict"].iter().all(|n| {
                s.schedule(n)["status"]["lastScheduleTime"].as_str().map(normalized)
                    == Some(hour(6).parse::<Timestamp>().unwrap().to_string())
            })
        },
        || format!("{:#} {:#}", s.schedule("lenient"), s.schedule("strict")),
    )
    .await;
    assert_eq!(
        states(&s.tasks("lenient")),
        owned(&[("03:00", ""), ("06:00", "")]),
        "04:00 and 05:00 not made"
    );
    assert_eq!(states(&s.tasks("strict")), owned(&[("03:00", "")]));
    assert_eq!(s.schedule("strict")["status"]["lastSkipped"]["reason"], "MissedDeadline");
}

/// A spec that cannot be used: the condition and a Warning Event name the field; nothing is made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_spec_names_the_field_and_makes_nothing() {
    let s = Scenario::start().await;
    s.create("broken", json!({"schedule": "0 3 * *", "timeZone": "Europe/Atlantis"}));
    wait_until(
        "the condition says why",
        GUARD,
        Duration::from_millis(10),
        || s.schedule("broken")["status"]["conditions"][0]["reason"] == "InvalidSpec",
        || format!("{:#}", s.schedule("broken")),
    )
    .await;
    let message = s.schedule("broken")["status"]["conditions"][0]["message"].as_str().unwrap().to_owned();
    assert!(message.contains("MaintenanceSchedule etcd/broken: spec.schedule"), "{message}");
    assert!(message.contains("spec.timeZone"), "{message}");
    s.clock.advance(SignedDuration::from_hours(5));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(s.tasks("broken").is_empty());
    let events = s.events("broken");
    assert_eq!(events.iter().filter(|e| e.starts_with("InvalidSpec")).count(), 1, "{events:?}");
}
