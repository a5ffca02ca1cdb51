//! groundskeeper watched by a real Prometheus (Debian's package, 2.42): the controllers serve
//! `/metrics` on a loopback port as `groundskeeper-controller` does, Prometheus scrapes it every
//! second with `manifests/monitoring/rules.yaml` loaded as it is (evaluated every second), and the
//! scenario makes the system produce every series the rules and the dashboard read:
//!
//! - a MaintenanceTask fails (its Job's container exits 2, bad input, as scripted here): the alert
//!   `GroundskeeperTaskFailed` fires in Prometheus, naming the task; deleted, as the runbook says
//!   a person does once they know why (or its `ttlSecondsAfterFinished` does), the alert
//!   resolves. The rule has no `for:`, so the real file is loaded unchanged;
//! - an etcd cluster (real etcd 3.5, one member) observed by the etcd controller with a policy
//!   stating its quota and a backup policy (a full snapshot every 6 hours: its first at once);
//!   two Defragment tasks one after the other (the second once Prometheus has
//!   scraped the first, so the duration histograms grow between two scrapes and their quantiles
//!   answer); a MaintenanceSchedule of Snapshots on a clock of its own, whose first run is missed
//!   (`MissedDeadline`) and second makes a Snapshot task onto a claim; a Verify task proving that
//!   snapshot;
//! - a ScyllaCluster (agent stand-ins) scaled out: its old node needs a cleanup, the automatic
//!   Cleanup task's Job is held, so the task is InProgress and the node dirty at the end;
//! - failed reconciliations, as an install whose RBAC is older than the controller causes them
//!   (the runbook's first cause of `GroundskeeperReconcileErrors`): the controller's ClusterRole
//!   lacks `delete` on MaintenanceTasks, so the proof's task, finished and past its
//!   `ttlSecondsAfterFinished` (0), cannot be deleted: a 403 at each attempt.
//!
//! Then every query of `manifests/monitoring/dashboard.json` and every recording rule's
//! expression, asked of Prometheus as an instant query, must answer at least one sample with a
//! number (NaN, what a quantile of a histogram that did not grow gives, is no answer); and every
//! series an alert reads (its selectors, the thresholds and joins left out) must have been scraped
//! or recorded during the scenario (`last_over_time` over its length): the alerts should not fire
//! here, and `GroundskeeperTaskFailed`'s Failed task is gone by then, on purpose. Last, `promtool
//! check metrics` lints a live scrape of `/metrics`.
//!
//! Not covered: the Jobs' own metrics (the runner exposes none; it reports through its result);
//! the controller's leader election (the scenario runs the controllers as the leader does, and
//! sets `groundskeeper_leader` as `main.rs` does once it leads).
//!
//! A missing Prometheus, promtool, etcd 3.5 or etcdutl skips the test with a message, except
//! under `CI=true`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use groundskeeper_api::maintenance_task::TaskState;
use groundskeeper_controller::Config;
use groundskeeper_controller::runtime::clock::Clock;
use groundskeeper_controller::runtime::context::ControllerConfig;
use groundskeeper_controller::runtime::http::{Readiness, router};
use groundskeeper_controller::scylla::config::Config as ScyllaConfig;
use groundskeeper_controller::scylla::job::node_address;
use groundskeeper_e2e::apiserver::ApiServer;
use groundskeeper_e2e::apiserver::rbac::{CONTROLLER_SERVICE_ACCOUNT, Grants, load_manifests};
use groundskeeper_e2e::etcd_cluster::{
    self, CLUSTER_TURNS, ClusterOptions, EtcdVersion, etcd_or_skip, restore_tool_or_skip,
};
use groundskeeper_e2e::kubelet::{Container, JobSimulator, Termination};
use groundskeeper_e2e::prometheus::{
    Prometheus, Sample, check_metrics, http_get, prometheus_or_skip, promtool_or_skip, text_format,
};
use groundskeeper_e2e::scylla_agent::{AgentSpec, KeyspaceKind, ScyllaAgent};
use groundskeeper_e2e::scylla_operator::{Racks, ScyllaOperator, ring};
use groundskeeper_job::cli::{Cli, Command};
use groundskeeper_job::run::{Failure, RunClock, exit_code};
use groundskeeper_protocol::result::CompactReport;
use groundskeeper_protocol::{Outcome, Report, keys};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::common::etcd_jobs::run_etcd_job;
use crate::harness::{
    Controllers, Part, api_server, etcd_clusters, maintenance_schedules, maintenance_tasks, wait_until,
};

const ETCD_NAMESPACE: &str = "etcd";
const CLUSTER: &str = "main";
/// The claim snapshots are written to and proven from (the default name for `main`).
const CLAIM: &str = "main-snapshots";
const SCHEDULE: &str = "snapshots";
const SCYLLA_NAMESPACE: &str = "scylla";
const SCYLLA_CLUSTER: &str = "basic";
const AGENT_TOKEN: &str = "agent-token";
/// The task whose Job fails.
const FAILING_TASK: &str = "compact-fails";
/// The Scylla racks before and after the scale-out.
const BEFORE: &Racks = &[("a", 1)];
const AFTER: &Racks = &[("a", 2)];
/// In a query, stands for the scenario's length so far (a range, e.g. `40s`).
const WINDOW: &str = "$SCENARIO";
/// Guards against a system that never gets there; not a performance bound.
const GUARD: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(200);
/// The finding promtool has on every exposition of the controller's that holds it, known and left
/// (see `controller/tests/it/monitoring_rules.rs`).
const KNOWN_FINDING: &str = "groundskeeper_etcd_partition_clock_skew_milliseconds use base unit \"seconds\" instead of \"milliseconds\"";

fn project() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn monitoring() -> PathBuf {
    project().join("manifests/monitoring")
}

/// What the cluster-wide install grants the controller, less `delete` on MaintenanceTasks: the
/// RBAC of an install older than the controller.
fn grants_without_deleting_tasks() -> Grants {
    let mut manifests = Vec::new();
    for dir in ["base", "install/cluster-wide"] {
        let dir = project().join("manifests").join(dir);
        manifests.extend(load_manifests(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())));
    }
    let mut removed = false;
    for role in manifests.iter_mut().filter(|o| o["kind"] == "ClusterRole") {
        for rule in role["rules"].as_array_mut().into_iter().flatten() {
            if rule["resources"] == json!(["maintenancetasks"]) {
                let verbs = rule["verbs"].as_array_mut().expect("a rule's verbs");
                verbs.retain(|verb| verb != "delete");
                removed = true;
            }
        }
    }
    assert!(removed, "the install's ClusterRole has a rule for maintenancetasks");
    let (namespace, name) = CONTROLLER_SERVICE_ACCOUNT;
    Grants::for_service_account(&manifests, namespace, name)
}

/// A Job's container: the failing task's exits 2 with a bad-input result, as the runner does for
/// input it refuses; a Scylla cleanup is held until its Job is deleted (the node's cleanup never
/// ends here); the etcd Jobs run through the runner itself.
async fn run_container(container: Container, etcd_gate: watch::Receiver<bool>) -> Termination {
    if container.job["metadata"]["labels"][keys::TASK_LABEL] == FAILING_TASK {
        let failure = Failure::bad_input("scripted by the monitoring scenario: this Job's input is refused");
        let result = RunClock::start().finish(
            Report::Compact(CompactReport::default()),
            Outcome::Failed,
            Some(failure),
        );
        return Termination { exit_code: exit_code(&result), message: result.to_termination_message() };
    }
    if let Ok(Cli { command: Command::Cleanup(_), .. }) = Cli::try_parse_args(container.args.clone()) {
        let mut deleted = container.deleted.clone();
        let _ = deleted.wait_for(|gone| *gone).await;
        return Termination::killed();
    }
    run_etcd_job(container, etcd_gate).await
}

/// Where a query or selector comes from, and the PromQL asked.
struct Check {
    place: String,
    promql: String,
}

/// Every query of the dashboard, with its panel and refId.
fn dashboard_checks() -> Vec<Check> {
    let path = monitoring().join("dashboard.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let dashboard: Value = serde_json::from_str(&text).expect("dashboard.json is JSON");
    let mut checks = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().into_iter().flatten() {
            checks.push(Check {
                place: format!(
                    "dashboard {:?} ({})",
                    panel["title"].as_str().unwrap_or_default(),
                    target["refId"].as_str().unwrap_or_default()
                ),
                promql: target["expr"].as_str().expect("a target's expr").to_owned(),
            });
        }
    }
    checks
}

/// The rules of `rules.yaml`.
fn rules() -> Vec<Value> {
    let path = monitoring().join("rules.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let rules: Value = serde_saphyr::from_str(&text).expect("rules.yaml is YAML");
    rules["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|group| group["rules"].as_array().expect("a group's rules").clone())
        .collect()
}

/// The series selectors of `expr` (a name, with its label matchers if any): the names of the
/// project's series and recorded rules all hold `groundskeeper_`, and no label or function does.
fn selectors(expr: &str) -> Vec<String> {
    let chars: Vec<char> = expr.chars().collect();
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut found: Vec<String> = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if is_name(c) && !c.is_ascii_digit() {
            let start = i;
            while i < chars.len() && is_name(chars[i]) {
                i += 1;
            }
            let mut selector: String = chars[start..i].iter().collect();
            if !selector.contains("groundskeeper_") {
                continue;
            }
            let mut j = i;
            while j < chars.len() && chars[j].is_whitespace() {
                j += 1;
            }
            if chars.get(j) == Some(&'{') {
                let mut end = j;
                let mut quoted = false;
                while end < chars.len() && (quoted || chars[end] != '}') {
                    match chars[end] {
                        '\\' if quoted => end += 1,
                        '"' => quoted = !quoted,
                        _ => {}
                    }
                    end += 1;
                }
                assert!(end < chars.len(), "a matcher list that does not end in `{expr}`");
                selector.extend(&chars[j..=end]);
                i = end + 1;
            }
            if !found.contains(&selector) {
                found.push(selector);
            }
        } else {
            i += 1;
        }
    }
    found
}

/// Whether an answer holds data: at least one sample with a number.
fn answers(samples: &[Sample]) -> bool {
    samples.iter().any(|s| s.value.is_finite())
}

struct Scenario {
    server: Arc<ApiServer>,
    prometheus: Prometheus,
    /// Where the controllers serve `/metrics`.
    metrics: SocketAddr,
    /// When Prometheus started: the alerts' series are looked for since then.
    watched_since: Instant,
    /// The clock of the schedule controller.
    schedule_clock: Clock,
    jobs: JobSimulator,
    _controllers: Controllers,
    _schedules: Controllers,
    _agents: Vec<ScyllaAgent>,
    _etcd: etcd_cluster::EtcdCluster,
    _etcd_gate: watch::Sender<bool>,
}

impl Scenario {
    /// `None`: a binary is missing and the test is skipped.
    async fn start() -> Option<Scenario> {
        let prometheus_binary = prometheus_or_skip()?;
        promtool_or_skip()?;
        let etcd_binary = etcd_or_skip(EtcdVersion::V3_5)?;
        restore_tool_or_skip(EtcdVersion::V3_5, &etcd_binary)?;
        let etcd = etcd_cluster::EtcdCluster::start(
            &etcd_binary,
            ClusterOptions { members: 1, ..ClusterOptions::default() },
        )
        .await
        .expect("the etcd cluster starts");
        etcd.fill(1_000_000).await.expect("fill");
        let server = api_server(grants_without_deleting_tasks()).await;

        // The Scylla nodes, as in the cleanup scenarios: one agent stand-in per node after the
        // scale-out, all reporting the new ring.
        let operator = ScyllaOperator {
            namespace: SCYLLA_NAMESPACE.into(),
            cluster: SCYLLA_CLUSTER.into(),
            datacenter: "us-east-1".into(),
            cleanup: None,
        };
        let mut agents = Vec::new();
        let mut addresses = BTreeMap::new();
        for service in operator.member_names(AFTER) {
            let spec = AgentSpec { token: AGENT_TOKEN.into(), ring: ring(2), ..AgentSpec::default() }
                .keyspace("app", KeyspaceKind::Vnodes);
            let agent = ScyllaAgent::start(spec).await;
            addresses.insert(node_address(SCYLLA_NAMESPACE, &service), (agent.host(), agent.port()));
            agents.push(agent);
        }

        let (etcd_gate, opened) = watch::channel(true);
        let jobs =
            JobSimulator::builder(server.clone(), move |container| run_container(container, opened.clone()))
                .spawn();
        let config = Config {
            controller: ControllerConfig {
                requeue_busy: Duration::from_secs(1),
                ..ControllerConfig::default()
            },
            scylla: ScyllaConfig {
                agent_endpoints: addresses,
                cleanup_ring_quiet_period: Duration::ZERO,
                ..ScyllaConfig::default()
            },
            ..Config::default()
        };
        let mut controllers =
            Controllers::start(&server, config.clone(), &[Part::Etcd, Part::Tasks, Part::ScyllaCleanup]);
        // The schedule controller on a clock the test moves, looking again often; its series in
        // the same registry as the others', as in one process.
        let schedule_clock = Clock::manual(Timestamp::now());
        let schedule_config = Config {
            controller: ControllerConfig { requeue_idle: Duration::from_millis(100), ..config.controller },
            ..config
        };
        let mut schedules =
            Controllers::start_with_clock(&server, schedule_config, schedule_clock.clone(), &[]);
        schedules.metrics = controllers.metrics.clone();
        schedules.spawn(Part::Schedules);
        // As `main.rs` does once this replica leads.
        controllers.metrics.set_leader(true);

        // `/metrics` as `groundskeeper-controller` serves it (`runtime::http::serve` binds its
        // address and serves this router), on a free loopback port.
        let readiness = Readiness::default();
        readiness.set_ready();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let metrics = listener.local_addr().expect("its address");
        let app = router(controllers.metrics.clone(), readiness);
        controllers.own(tokio::spawn(async move {
            axum::serve(listener, app).await.expect("/metrics is served");
        }));

        let prometheus =
            Prometheus::start(&prometheus_binary, &metrics.to_string(), &[monitoring().join("rules.yaml")])
                .expect("prometheus starts");
        let scenario = Scenario {
            server,
            prometheus,
            metrics,
            watched_since: Instant::now(),
            schedule_clock,
            jobs,
            _controllers: controllers,
            _schedules: schedules,
            _agents: agents,
            _etcd: etcd,
            _etcd_gate: etcd_gate,
        };
        scenario.until_prometheus("the controller scraped", "up{job=\"groundskeeper\"} == 1", answers).await;
        scenario.create_objects(&operator);
        Some(scenario)
    }

    /// The EtcdCluster, its claim, the schedule, and the ScyllaCluster with its old node clean.
    fn create_objects(&self, operator: &ScyllaOperator) {
        let etcd_endpoints = self._etcd.client_urls();
        let cluster = json!({
            "apiVersion": "groundskeeper.dev/v1alpha1", "kind": "EtcdCluster",
            "metadata": { "name": CLUSTER, "namespace": ETCD_NAMESPACE },
            "spec": { "endpoints": etcd_endpoints, "policy": {
                "quotaBackendBytes": 2147483648_i64, "checkInterval": "10s",
                // One member: its defragmentation blocks it for a moment, which it accepts.
                "allowSingleMember": true,
            }, "backup": { "fullEvery": "6h" } },
        });
        self.server.create(&etcd_clusters(), Some(ETCD_NAMESPACE), cluster).expect("the EtcdCluster");
        let claim: PersistentVolumeClaim = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": { "name": CLAIM, "namespace": ETCD_NAMESPACE },
            "spec": { "accessModes": ["ReadWriteOnce"], "resources": { "requests": { "storage": "1Gi" } } },
        }))
        .unwrap();
        self.server.create_as(&claim).expect("the claim");
        let schedule = json!({
            "apiVersion": "groundskeeper.dev/v1alpha1", "kind": "MaintenanceSchedule",
            "metadata": { "name": SCHEDULE, "namespace": ETCD_NAMESPACE },
            "spec": {
                "schedule": "* * * * *",
                "startingDeadlineSeconds": 10,
                "taskTemplate": { "spec": {
                    "target": { "kind": "EtcdCluster", "name": CLUSTER },
                    "type": "Snapshot",
                    "config": { "snapshot": {} },
                }},
            },
        });
        self.server.create(&maintenance_schedules(), Some(ETCD_NAMESPACE), schedule).expect("the schedule");
        operator.create(&self.server, BEFORE, false, AGENT_TOKEN).expect("the ScyllaCluster");
    }

    fn create_task(&self, name: &str, task_type: &str, config: Value, ttl: Option<i64>) {
        let mut spec = json!({ "target": { "kind": "EtcdCluster", "name": CLUSTER }, "type": task_type });
        if !config.is_null() {
            spec["config"] = config;
        }
        if let Some(ttl) = ttl {
            spec["ttlSecondsAfterFinished"] = json!(ttl);
        }
        let task = json!({
            "apiVersion": "groundskeeper.dev/v1alpha1", "kind": "MaintenanceTask",
            "metadata": { "name": name, "namespace": ETCD_NAMESPACE }, "spec": spec,
        });
        self.server.create(&maintenance_tasks(), Some(ETCD_NAMESPACE), task).expect("the MaintenanceTask");
    }

    fn task_state(&self, namespace: &str, name: &str) -> Option<String> {
        let task = self.server.get(&maintenance_tasks(), Some(namespace), name)?;
        task["status"]["state"].as_str().map(str::to_owned)
    }

    fn tasks(&self, namespace: &str) -> Vec<Value> {
        self.server.list(&maintenance_tasks(), Some(namespace))
    }

    fn schedule(&self) -> Value {
        self.server.get(&maintenance_schedules(), Some(ETCD_NAMESPACE), SCHEDULE).expect("the schedule")
    }

    /// Waits until `done` holds of the API's objects.
    async fn until(&self, what: &str, mut done: impl FnMut(&Scenario) -> bool) {
        wait_until(
            what,
            GUARD,
            POLL,
            || done(self),
            || {
                let tasks: Vec<(String, String)> = [ETCD_NAMESPACE, SCYLLA_NAMESPACE]
                    .iter()
                    .flat_map(|ns| self.tasks(ns))
                    .map(|t| {
                        let name = t["metadata"]["name"].as_str().unwrap_or_default().to_owned();
                        (name, format!("{}", t["status"]))
                    })
                    .collect();
                format!(
                    "jobs: {:#?}\ntasks: {tasks:#?}\nschedule: {:#}",
                    self.jobs.log(),
                    self.schedule()["status"]
                )
            },
        )
        .await;
    }

    /// Waits until `task` in `namespace` is `state`.
    async fn until_task(&self, namespace: &str, task: &str, state: TaskState) {
        let wanted = state.to_string();
        self.until(&format!("task {namespace}/{task} {wanted}"), |s| {
            s.task_state(namespace, task).as_deref() == Some(wanted.as_str())
        })
        .await;
    }

    /// Asks Prometheus `promql` every [`POLL`] until `done` holds of its answer; the answer.
    async fn until_prometheus(
        &self,
        what: &str,
        promql: &str,
        done: impl Fn(&[Sample]) -> bool,
    ) -> Vec<Sample> {
        let deadline = Instant::now() + GUARD;
        loop {
            let answer = self.prometheus.query(promql).await;
            if let Ok(samples) = &answer
                && done(samples)
            {
                return samples.clone();
            }
            if Instant::now() > deadline {
                panic!(
                    "never reached: {what} (`{promql}` answered {answer:?})\n--- prometheus log ---\n{}",
                    self.prometheus.log_text()
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The alerts of `alertname` about `task` pending or firing now.
    async fn task_alerts(&self, alertname: &str, task: &str) -> Vec<Value> {
        let alerts = self.prometheus.alerts().await.expect("the alerts");
        alerts
            .into_iter()
            .filter(|a| a["labels"]["alertname"] == alertname && a["labels"]["task"] == task)
            .collect()
    }

    /// Moves the schedule controller's clock to `time` and waits until the schedule has dealt
    /// with the run due then.
    async fn tick(&self, time: Timestamp, run: Timestamp) {
        self.schedule_clock.set(time);
        let want = run.to_string();
        self.until(&format!("{SCHEDULE} dealt with its run of {want}"), |s| {
            s.schedule()["status"]["lastScheduleTime"]
                .as_str()
                .and_then(|t| t.parse::<Timestamp>().ok())
                .is_some_and(|t| t.to_string() == want)
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_task_fires_its_alert_and_every_rule_and_dashboard_query_answers() {
    // One etcd member, but the Verify task starts another from the snapshot: clusters take turns.
    let _one = CLUSTER_TURNS.lock().await;
    let started = Instant::now();
    let Some(s) = Scenario::start().await else { return };

    // A task fails: its alert fires, naming it; deleted, the alert resolves.
    s.create_task(FAILING_TASK, "Compact", Value::Null, None);
    s.until_task(ETCD_NAMESPACE, FAILING_TASK, TaskState::Failed).await;
    let firing = format!(
        "ALERTS{{alertname=\"GroundskeeperTaskFailed\",alertstate=\"firing\",\
         namespace=\"{ETCD_NAMESPACE}\",task=\"{FAILING_TASK}\"}}"
    );
    s.until_prometheus("GroundskeeperTaskFailed firing for the failed task", &firing, |a| a.len() == 1).await;
    let alerts = s.task_alerts("GroundskeeperTaskFailed", FAILING_TASK).await;
    assert_eq!(alerts.len(), 1, "{alerts:#?}");
    let alert = &alerts[0];
    assert_eq!(alert["state"], "firing", "{alert:#}");
    assert_eq!(
        (&alert["labels"]["type"], &alert["labels"]["target"], &alert["labels"]["severity"]),
        (&json!("Compact"), &json!(CLUSTER), &json!("warning")),
        "{alert:#}"
    );
    assert_eq!(
        alert["annotations"]["summary"],
        format!("MaintenanceTask {ETCD_NAMESPACE}/{FAILING_TASK} failed")
    );
    s.server
        .delete(&maintenance_tasks(), Some(ETCD_NAMESPACE), FAILING_TASK)
        .expect("the failed task deleted");
    s.until_prometheus("GroundskeeperTaskFailed resolved", &firing, <[Sample]>::is_empty).await;
    let deadline = Instant::now() + GUARD;
    while !s.task_alerts("GroundskeeperTaskFailed", FAILING_TASK).await.is_empty() {
        assert!(Instant::now() < deadline, "GroundskeeperTaskFailed still in /api/v1/alerts after {GUARD:?}");
        tokio::time::sleep(POLL).await;
    }

    // A defragmentation, whose end Prometheus scrapes before the second one's: the duration
    // histograms grow between two scrapes.
    s.create_task("defrag-1", "Defragment", Value::Null, None);
    s.until_task(ETCD_NAMESPACE, "defrag-1", TaskState::Completed).await;
    s.until_prometheus(
        "the first defragmentation scraped",
        "groundskeeper_tasks_total{type=\"Defragment\",state=\"Completed\"} == 1 and on () \
         sum(groundskeeper_etcd_defrag_duration_seconds_count) == 1",
        |a| !a.is_empty(),
    )
    .await;

    // The schedule's first run missed, its second made: a snapshot on the claim.
    let created: Timestamp = s.schedule()["metadata"]["creationTimestamp"].as_str().unwrap().parse().unwrap();
    let first_run = Timestamp::from_second((created.as_second() + 1) / 60 * 60 + 60).unwrap();
    let second_run = Timestamp::from_second(first_run.as_second() + 60).unwrap();
    s.tick(Timestamp::from_second(first_run.as_second() + 30).unwrap(), first_run).await;
    assert_eq!(s.schedule()["status"]["lastSkipped"]["reason"], "MissedDeadline", "{:#}", s.schedule());
    s.tick(second_run, second_run).await;
    s.create_task("defrag-2", "Defragment", Value::Null, None);
    s.until("the schedule's snapshot Completed and recorded", |s| {
        s.schedule()["status"]["lastSuccessfulTime"].is_string()
    })
    .await;
    s.until_task(ETCD_NAMESPACE, "defrag-2", TaskState::Completed).await;
    // The proof, the cluster's last task: once finished it is to go at once, which the RBAC does
    // not allow (a failed reconciliation at each attempt; every later reconciliation of this
    // target's tasks stops there, so nothing may queue behind it).
    s.create_task("prove", "Verify", json!({ "verify": {} }), Some(0));
    s.until_task(ETCD_NAMESPACE, "prove", TaskState::Completed).await;
    s.until_prometheus(
        "a failed reconciliation (the task that cannot be deleted)",
        "groundskeeper_reconcile_failures_total{controller=\"tasks\",error=\"kube\"}",
        |a| !a.is_empty(),
    )
    .await;

    // The Scylla cluster scaled out: its Cleanup task runs (held) while its old node is dirty.
    let operator = ScyllaOperator {
        namespace: SCYLLA_NAMESPACE.into(),
        cluster: SCYLLA_CLUSTER.into(),
        datacenter: "us-east-1".into(),
        cleanup: None,
    };
    operator.scale_out(&s.server, BEFORE, AFTER).expect("the scale-out");
    s.until("the automatic Cleanup task InProgress", |s| {
        s.tasks(SCYLLA_NAMESPACE)
            .iter()
            .any(|t| t["spec"]["type"] == "Cleanup" && t["status"]["state"] == "InProgress")
    })
    .await;

    // Every dashboard query and recording rule answers now; every series an alert reads was there.
    let mut checks = dashboard_checks();
    let dashboard = checks.len();
    let rules = rules();
    for rule in rules.iter().filter(|r| r.get("record").is_some()) {
        checks.push(Check {
            place: format!("recording rule {}", rule["record"].as_str().unwrap()),
            promql: rule["expr"].as_str().unwrap().trim().to_owned(),
        });
    }
    let recording = checks.len() - dashboard;
    let alerts: Vec<&Value> = rules.iter().filter(|r| r.get("alert").is_some()).collect();
    for alert in &alerts {
        let name = alert["alert"].as_str().unwrap();
        let read = selectors(alert["expr"].as_str().unwrap());
        assert!(!read.is_empty(), "{name} reads no series of groundskeeper's");
        for selector in read {
            checks.push(Check {
                place: format!("alert {name}: {selector}"),
                promql: format!("last_over_time({selector}[{WINDOW}])"),
            });
        }
    }
    let deadline = Instant::now() + GUARD;
    let silent = loop {
        let mut silent = Vec::new();
        // Since Prometheus started, and a little more.
        let window = format!("{}s", s.watched_since.elapsed().as_secs() + 10);
        for check in &checks {
            let promql = check.promql.replace(WINDOW, &window);
            match s.prometheus.query(&promql).await {
                Ok(samples) if answers(&samples) => {}
                Ok(samples) => silent.push(format!("{}: `{promql}` answered {samples:?}", check.place)),
                Err(why) => silent.push(format!("{}: {why}", check.place)),
            }
        }
        if silent.is_empty() || Instant::now() > deadline {
            break silent;
        }
        tokio::time::sleep(POLL).await;
    };
    assert!(
        silent.is_empty(),
        "{} of {} queries answer nothing:\n{}\n--- /metrics ---\n{}",
        silent.len(),
        checks.len(),
        silent.join("\n"),
        http_get(&s.metrics.to_string(), "/metrics").map(|(_, body)| body).unwrap_or_default()
    );

    // promtool lints a live scrape of the controller.
    let promtool = promtool_or_skip().expect("found at the start");
    let (status, exposition) = http_get(&s.metrics.to_string(), "/metrics").expect("/metrics answers");
    assert_eq!(status, 200, "{exposition}");
    let findings = check_metrics(&promtool, &text_format(&exposition)).expect("promtool runs");
    let findings: Vec<&String> = findings.iter().filter(|f| *f != KNOWN_FINDING).collect();
    assert!(findings.is_empty(), "promtool check metrics on a live scrape: {findings:#?}\n{exposition}");
    println!(
        "monitoring: GroundskeeperTaskFailed fired and resolved; {dashboard} dashboard queries, {recording} \
         recording rules and the series of {} alerts ({} selectors) answered; {:.1} s",
        alerts.len(),
        checks.len() - dashboard - recording,
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn selectors_are_the_series_an_expression_reads() {
    let expr = r#"sum by (job, controller) (groundskeeper_watched_objects) > 0
          unless on (job, controller) job_controller:groundskeeper_reconciles:rate15m > 0
          or label_replace(groundskeeper_etcd_cluster_degraded{reason!="x{y}"} == 1, "kind", "EtcdCluster", "", "")
          or absent(groundskeeper_leader) or groundskeeper_watched_objects"#;
    assert_eq!(
        selectors(expr),
        [
            "groundskeeper_watched_objects",
            "job_controller:groundskeeper_reconciles:rate15m",
            r#"groundskeeper_etcd_cluster_degraded{reason!="x{y}"}"#,
            "groundskeeper_leader",
        ]
    );
}
