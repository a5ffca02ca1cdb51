//! Maintenance windows end to end on the in-memory API, on a clock the test moves: the task
//! controller holds an automatic task Pending outside its EtcdCluster's window (its `Queued`
//! condition naming when the window opens) and starts it inside; a task made by hand starts at
//! once unless it asks to wait for the window.

use groundskeeper_e2e::fixtures;
use std::sync::Arc;
use std::time::Duration;

use groundskeeper_controller::runtime::clock::Clock;
use groundskeeper_controller::runtime::context::ControllerConfig;
use groundskeeper_e2e::apiserver::ApiServer;
use groundskeeper_e2e::apiserver::rbac::controller_grants;
use serde_json::{Value, json};

use crate::harness::{Controllers, Part, api_server, etcd_clusters, jobs, maintenance_tasks, wait_until};

const NAMESPACE: &str = "etcd";
const GUARD: Duration = Duration::from_secs(30);

struct Scenario {
    server: Arc<ApiServer>,
    clock: Clock,
    _controllers: Controllers,
}

impl Scenario {
    /// An EtcdCluster `main` whose window is Saturday 22:00 to Sunday 06:00, Berlin time; the
    /// clock on Tuesday 2099-11-24 12:00 UTC (far ahead of the system clock, which stamps the
    /// objects' creation).
    async fn start() -> Scenario {
        Self::start_requeueing(Duration::from_millis(100)).await
    }

    /// [`Scenario::start`] with the controllers looking again after `requeue` at the latest.
    async fn start_requeueing(requeue: Duration) -> Scenario {
        let server = api_server(controller_grants()).await;
        let cluster = json!({
            "apiVersion": "groundskeeper.dev/v1alpha1", "kind": "EtcdCluster",
            "metadata": {"name": "main", "namespace": NAMESPACE},
            "spec": {"endpoints": ["http://127.0.0.1:1"],
                     "maintenanceWindows": {"timeZone": "Europe/Berlin", "windows": ["Sat 22:00-06:00"]}}
        });
        server.create(&etcd_clusters(), Some(NAMESPACE), cluster).unwrap();
        let clock = Clock::manual("2099-11-24T12:00:00Z".parse().unwrap());
        let config =
            ControllerConfig { requeue_idle: requeue, requeue_busy: requeue, ..ControllerConfig::default() };
        let controllers = Controllers::start_with_clock(&server, config, clock.clone(), &[Part::Tasks]);
        Scenario { server, clock, _controllers: controllers }
    }

    fn create_task(&self, name: &str, origin: &str, wait_for_window: bool) {
        let task = fixtures::task(NAMESPACE, name, "Defragment")
            .origin(origin)
            .spec("waitForWindow", wait_for_window)
            .json();
        self.server.create(&maintenance_tasks(), Some(NAMESPACE), task).unwrap();
    }

    fn task(&self, name: &str) -> Value {
        self.server.get(&maintenance_tasks(), Some(NAMESPACE), name).unwrap_or_default()
    }

    fn state(&self, name: &str) -> String {
        self.task(name)["status"]["state"].as_str().unwrap_or_default().to_owned()
    }

    fn queued(&self, name: &str) -> Value {
        self.task(name)["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "Queued")
            .cloned()
            .unwrap_or_default()
    }

    async fn wait_for(&self, what: &str, done: impl Fn(&Scenario) -> bool) {
        wait_until(
            what,
            GUARD,
            Duration::from_millis(10),
            || done(self),
            || format!("{:#}\n{:#}", self.task("automatic"), self.task("by-hand")),
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_automatic_task_waits_for_the_window_and_runs_inside_it() {
    let s = Scenario::start().await;
    s.create_task("automatic", "automatic", false);
    s.wait_for("the automatic task waits for the window", |s| {
        s.queued("automatic")["reason"] == "WaitingForWindow"
    })
    .await;
    let message = s.queued("automatic")["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains("it opens Sat 2099-11-28 22:00 CET (2099-11-28T21:00:00Z)"),
        "the next window, in Berlin time and UTC: {message}"
    );
    assert_eq!(s.state("automatic"), "Pending");
    assert!(s.server.list(&jobs(), Some(NAMESPACE)).is_empty(), "no Job outside the window");

    // Friday evening: still closed. Saturday 22:05 Berlin: open, it starts and its Job is made.
    s.clock.set("2099-11-27T20:00:00Z".parse().unwrap());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(s.state("automatic"), "Pending");
    s.clock.set("2099-11-28T21:05:00Z".parse().unwrap());
    s.wait_for("the automatic task starts inside the window", |s| s.state("automatic") == "InProgress").await;
    s.wait_for("its Job is made", |s| !s.server.list(&jobs(), Some(NAMESPACE)).is_empty()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_by_hand_starts_at_once_unless_it_asks_to_wait() {
    let s = Scenario::start().await;
    s.create_task("patient", "manual", true);
    s.wait_for("the patient task waits", |s| s.queued("patient")["reason"] == "WaitingForWindow").await;
    s.server.delete(&maintenance_tasks(), Some(NAMESPACE), "patient").unwrap();
    s.create_task("by-hand", "manual", false);
    s.wait_for("the task by hand starts outside the window", |s| s.state("by-hand") == "InProgress").await;
}

fn suspensions() -> groundskeeper_e2e::apiserver::ResourceId {
    groundskeeper_e2e::apiserver::ResourceId::new("groundskeeper.dev", "v1alpha1", "maintenancesuspensions")
}

impl Scenario {
    fn suspend(&self, until: &str, running: &str) {
        let suspension = json!({
            "apiVersion": "groundskeeper.dev/v1alpha1", "kind": "MaintenanceSuspension",
            "metadata": {"name": "freeze", "namespace": NAMESPACE,
                         "annotations": {"groundskeeper.dev/suspended-by": "alice"}},
            "spec": {"target": {"kind": "EtcdCluster", "name": "main"}, "reason": "incident 4711",
                     "until": until, "allowTaskTypes": ["Snapshot"], "runningTasks": running}
        });
        self.server.create(&suspensions(), Some(NAMESPACE), suspension).unwrap();
    }
}

/// Suspended with running tasks left to finish: a new task waits, naming who, why and until when;
/// the suspension ends by itself and the task starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspension_holds_new_work_and_ends_by_itself() {
    let s = Scenario::start().await;
    s.suspend("2099-11-24T14:00:00Z", "Wait");
    s.create_task("by-hand", "manual", false);
    s.wait_for("the task waits for the suspension", |s| s.queued("by-hand")["reason"] == "Suspended").await;
    let message = s.queued("by-hand")["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains("suspended by alice until 2099-11-24T14:00:00Z")
            && message.contains("incident 4711"),
        "{message}"
    );
    assert!(message.contains("Snapshot tasks go on"), "{message}");
    s.clock.set("2099-11-24T14:00:01Z".parse().unwrap());
    s.wait_for("the task starts once the suspension has ended", |s| s.state("by-hand") == "InProgress").await;
}

/// Suspended with running tasks stopped: the running task fails (code Suspended) and its Job goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspension_that_stops_running_work_fails_it_and_deletes_its_jobs() {
    let s = Scenario::start().await;
    s.create_task("by-hand", "manual", false);
    s.wait_for("the task runs with its Job", |s| {
        s.state("by-hand") == "InProgress" && !s.server.list(&jobs(), Some(NAMESPACE)).is_empty()
    })
    .await;
    s.suspend("2099-11-24T14:00:00Z", "Stop");
    s.wait_for("the task is stopped", |s| s.state("by-hand") == "Failed").await;
    let error = s.task("by-hand")["status"]["lastErrors"][0].clone();
    assert_eq!(error["code"], "Suspended", "{error:#}");
    assert!(error["description"].as_str().unwrap().contains("suspended by alice"), "{error:#}");
    s.wait_for("its Job is deleted", |s| s.server.list(&jobs(), Some(NAMESPACE)).is_empty()).await;
}

/// A suspension takes effect at once, not at the next look: the task controller watches them. A
/// task waiting for a window days away (and a controller that looks again only hourly) shows the
/// suspension within moments, and again when it is resumed (deleted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspension_takes_effect_at_once_and_so_does_its_end() {
    let s = Scenario::start_requeueing(Duration::from_secs(3600)).await;
    s.create_task("patient", "manual", true);
    s.wait_for("the task waits for the window", |s| s.queued("patient")["reason"] == "WaitingForWindow")
        .await;
    // Quiet: the reconciliation its own status write caused is over; none is due for an hour.
    tokio::time::sleep(Duration::from_millis(500)).await;
    s.suspend("2099-11-25T12:00:00Z", "Wait");
    s.wait_for("the suspension is seen at once", |s| s.queued("patient")["reason"] == "Suspended").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    s.server.delete(&suspensions(), Some(NAMESPACE), "freeze").unwrap();
    s.wait_for("the resume is seen at once", |s| s.queued("patient")["reason"] == "WaitingForWindow").await;
}
