//! End to end on the in-memory Kubernetes API with real etcd (3.4 and 3.5, 3 members on
//! loopback): an EtcdCluster points at a fragmented cluster → the etcd controller observes the
//! members itself → submits one automatic MaintenanceTask → the task controller creates its Job
//! → a simulated Job controller and kubelet run it (the runner's library against the real
//! cluster) → the result comes back through the pod's termination message → the task Completed,
//! its outcome in the EtcdCluster's status, conditions, Events → quiet. And tasks asked for by
//! hand, queued with the automatic ones.
//!
//! What plays which part:
//! - the controllers: `groundskeeper_controller::etcd::run` and
//!   `groundskeeper_controller::tasks::controller::run`, unchanged, with the RBAC of
//!   `manifests/`;
//! - the Job controller and kubelet: `groundskeeper_e2e::kubelet::JobSimulator`; each Job's
//!   container runs `groundskeeper-job defrag|compact` in-process with the Job's own arguments,
//!   the mounted TLS Secret files replaced by copies of the Secret's data;
//! - etcd: real clusters from `groundskeeper_e2e::etcd_cluster`, fragmented by churn.
//!
//! A missing etcd binary skips a test with a message, except under `CI=true`. The tests run one
//! at a time (a lock): several 3-member clusters at once on a small machine would starve etcd's
//! heartbeats and cause elections that are nobody's fault.

use groundskeeper_e2e::fixtures;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use groundskeeper_api::EtcdCluster;
use groundskeeper_api::etcd_cluster::{TLS_CA_KEY, TLS_CERT_KEY, TLS_KEY_KEY};
use groundskeeper_api::maintenance_task::{MaintenanceTask, NodeState, TaskState, TaskType};
use groundskeeper_controller::etcd::decide::TLS_MOUNT_DIR;
use groundskeeper_controller::runtime::context::ControllerConfig;
use groundskeeper_e2e::apiserver::rbac::controller_grants;
use groundskeeper_e2e::apiserver::{ApiServer, PatchFormat, ResourceId};
use groundskeeper_e2e::etcd_cluster::{self, ClusterOptions, EtcdVersion, etcd_or_skip};
use groundskeeper_e2e::kubelet::JobSimulator;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::common;
use crate::harness::{
    Controllers, Part, api_server, etcd_clusters, jobs, maintenance_tasks, names, wait_until,
};
use common::etcd_jobs::run_etcd_job;

const NAMESPACE: &str = "etcd";
const CLUSTER: &str = "main";
/// Churned dbs reach this size; most of it is free pages.
const CHURNED_DB: i64 = 6_000_000;
/// Well under the churned size, well over what a defragmented db of this data holds (~2 MB).
const MIN_DEFRAG_BYTES: i64 = 4_000_000;
/// Guards against a scenario that never settles; not a performance bound.
const SETTLE_GUARD: Duration = Duration::from_secs(90);

const PROGRESSING: &str = "DefragControllerProgressing";
const DEGRADED: &str = "DefragControllerDegraded";
const DISABLED: &str = "DefragControllerDisabled";

/// How a scenario is set up.
#[derive(Default)]
struct Setup {
    client_tls: bool,
    /// An endpoint listed in the spec besides the members'.
    extra_endpoint: Option<String>,
    /// `revision` compaction keeping this many revisions; history longer than that is written
    /// after the churn.
    keep_revisions: Option<i64>,
    /// `spec.policy.enabled: false`: the trigger observes but submits no task of its own.
    automatic_off: bool,
}

/// A fragmented etcd cluster, its EtcdCluster, the controller and the Job simulator.
struct Scenario {
    server: Arc<ApiServer>,
    etcd: etcd_cluster::EtcdCluster,
    /// The revision the churn compacted to.
    churned_revision: i64,
    jobs: JobSimulator,
    /// Jobs' containers wait until this is true.
    gate: watch::Sender<bool>,
    controllers: Controllers,
}

impl Scenario {
    /// `None`: the etcd binary is missing and the test is skipped.
    async fn start(version: EtcdVersion, setup: Setup) -> Option<Scenario> {
        let binary = etcd_or_skip(version)?;
        let _ = rustls::crypto::ring::default_provider().install_default();
        let options = ClusterOptions { client_tls: setup.client_tls, ..ClusterOptions::default() };
        let etcd = etcd_cluster::EtcdCluster::start(&binary, options).await.expect("the etcd cluster starts");
        let churn = etcd.churn(CHURNED_DB).await.expect("churn");

        // The controller acts with what manifests/ grants it, and nothing more.
        let server = api_server(controller_grants()).await;
        let mut spec = json!({
            "endpoints": etcd.client_urls(),
            "policy": {
                "checkInterval": "10s",
                "minDefragBytes": MIN_DEFRAG_BYTES,
                "maxFragmentedPercent": 45.0,
            }
        });
        if let Some(keep) = setup.keep_revisions {
            write_history(&etcd, keep * 3).await;
            spec["policy"]["compaction"] = json!({ "mode": "revision", "retention": keep.to_string() });
        }
        if setup.automatic_off {
            spec["policy"]["enabled"] = json!(false);
        }
        if let Some(extra) = setup.extra_endpoint {
            spec["endpoints"].as_array_mut().unwrap().push(extra.into());
        }
        if let Some(tls) = etcd.tls() {
            server.create_as(&tls_secret(tls)).expect("the TLS Secret");
            spec["tls"] = json!({ "secretName": "etcd-client" });
        }
        let cluster = json!({
            "apiVersion": "groundskeeper.dev/v1alpha1",
            "kind": "EtcdCluster",
            "metadata": { "name": CLUSTER, "namespace": NAMESPACE },
            "spec": spec,
        });
        server.create(&etcd_clusters(), Some(NAMESPACE), cluster).expect("the EtcdCluster");

        let (gate, opened) = watch::channel(false);
        let jobs =
            JobSimulator::builder(server.clone(), move |container| run_etcd_job(container, opened.clone()))
                .spawn();
        let controllers =
            Controllers::start(&server, ControllerConfig::default(), &[Part::Etcd, Part::Tasks]);
        Some(Scenario { server, etcd, churned_revision: churn.compacted_revision, jobs, gate, controllers })
    }

    /// Lets Jobs' containers run (until then they are held, as if their image were pulling).
    fn open_gate(&self) {
        self.gate.send_replace(true);
    }

    fn cluster(&self) -> EtcdCluster {
        self.server.get_as(Some(NAMESPACE), CLUSTER).expect("the EtcdCluster exists")
    }

    fn conditions(&self) -> Vec<Condition> {
        self.cluster().status.map(|s| s.conditions).unwrap_or_default()
    }

    fn condition(&self, type_: &str) -> Option<Condition> {
        self.conditions().into_iter().find(|c| c.type_ == type_)
    }

    fn condition_is(&self, type_: &str, status: &str) -> bool {
        self.condition(type_).is_some_and(|c| c.status == status)
    }

    fn job_names(&self) -> Vec<String> {
        names(&self.server, &jobs(), NAMESPACE).into_iter().collect()
    }

    /// The tasks the trigger submitted (label `groundskeeper.dev/origin: automatic`).
    fn automatic_tasks(&self) -> Vec<MaintenanceTask> {
        self.server
            .list(&maintenance_tasks(), Some(NAMESPACE))
            .into_iter()
            .filter(|t| t["metadata"]["labels"]["groundskeeper.dev/origin"] == "automatic")
            .map(|t| serde_json::from_value(t).expect("a MaintenanceTask"))
            .collect()
    }

    fn events(&self) -> Vec<Value> {
        self.server
            .list(&ResourceId::new("events.k8s.io", "v1", "events"), Some(NAMESPACE))
            .into_iter()
            .filter(|e| e["regarding"]["name"] == CLUSTER)
            .collect()
    }

    fn event_with_reason(&self, reason: &str) -> Option<Value> {
        self.events().into_iter().find(|e| e["reason"] == reason)
    }

    async fn wait_for(&self, what: &str, mut done: impl FnMut(&Scenario) -> bool) {
        wait_until(
            what,
            SETTLE_GUARD,
            Duration::from_millis(50),
            || done(self),
            || {
                format!(
                    "jobs: {:#?}\nstatus: {:#?}\nevents: {:#?}",
                    self.jobs.log(),
                    self.cluster().status,
                    self.events()
                )
            },
        )
        .await;
    }

    /// Changes the spec (a threshold nudged, still met by the members) and waits until the
    /// controller has decided on it: a spec change makes it observe and decide at once.
    async fn change_spec_and_wait_for_a_decision(&self) {
        let generation = self.cluster().metadata.generation;
        let patch = json!({ "spec": { "policy": { "maxFragmentedPercent": 40.0 } } });
        self.server
            .patch(&etcd_clusters(), Some(NAMESPACE), CLUSTER, PatchFormat::Merge, &patch, false)
            .expect("spec patch");
        let changed = self.cluster().metadata.generation;
        assert_ne!(changed, generation, "a spec change bumps the generation");
        self.wait_for("a decision on the changed spec", |s| {
            s.cluster().status.and_then(|st| st.observed_generation) == changed
        })
        .await;
    }

    /// Stops the task controller as a crash would (mid-reconciliation or not).
    async fn kill_task_controller(&mut self) {
        self.controllers.stop(Part::Tasks).await;
    }

    /// Starts the task controller again, with nothing carried over but what the API holds.
    fn start_task_controller(&mut self) {
        self.controllers.spawn(Part::Tasks);
    }

    /// Creates a MaintenanceTask on the cluster, as a person would.
    fn create_task(&self, name: &str, task_type: &str, config: Value) {
        let mut task = fixtures::task(NAMESPACE, name, task_type).target(CLUSTER).origin("manual").json();
        if !config.is_null() {
            task["spec"]["config"] = config;
        }
        self.server.create(&maintenance_tasks(), Some(NAMESPACE), task).expect("the MaintenanceTask");
    }

    fn task(&self, name: &str) -> MaintenanceTask {
        self.server.get_as(Some(NAMESPACE), name).expect("the MaintenanceTask exists")
    }

    fn task_state(&self, name: &str) -> Option<TaskState> {
        self.task(name).status.and_then(|s| s.state)
    }

    fn task_condition(&self, name: &str, type_: &str) -> Option<Condition> {
        self.task(name).status.and_then(|s| s.conditions.into_iter().find(|c| c.type_ == type_))
    }

    /// Waits for the controller's next periodic observation (after `checkInterval`).
    async fn wait_for_next_observation(&self) {
        let last = self.cluster().status.and_then(|s| s.last_observed_time);
        self.wait_for("the next periodic observation", |s| {
            s.cluster().status.and_then(|st| st.last_observed_time) != last
        })
        .await;
    }
}

/// `revisions` small writes: history a compaction can drop.
async fn write_history(etcd: &etcd_cluster::EtcdCluster, revisions: i64) {
    let mut client = etcd.client(None).await.expect("a client");
    for i in 0..revisions {
        client.put("history", i.to_string(), None).await.expect("a history write");
    }
}

fn tls_secret(tls: &etcd_cluster::ClusterTls) -> Secret {
    let read = |path: &std::path::Path| ByteString(std::fs::read(path).expect("a TLS file of the cluster"));
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some("etcd-client".into()),
            namespace: Some(NAMESPACE.into()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([
            (TLS_CA_KEY.to_owned(), read(&tls.ca)),
            (TLS_CERT_KEY.to_owned(), read(&tls.client_cert)),
            (TLS_KEY_KEY.to_owned(), read(&tls.client_key)),
        ])),
        type_: Some("kubernetes.io/tls".into()),
        ..Default::default()
    }
}

/// The whole path for one fragmented cluster: one automatic task (a `Maintenance` task with a
/// `revision` compaction policy, else a `Defragment` task) and its one Job, held while the
/// controller decides again; then run → the task Completed, every member defragmented, the
/// outcome recorded in the EtcdCluster's status and an Event → optionally quiet on the next
/// periodic observation.
async fn defragments_with_one_job(version: EtcdVersion, setup: Setup, check_quiet: bool) {
    let compaction = setup.keep_revisions;
    let Some(scenario) = Scenario::start(version, setup).await else {
        return;
    };
    let before = scenario.etcd.states().await.expect("every member answers");
    assert!(before.iter().all(|m| m.db_size >= CHURNED_DB), "churned: {before:?}");

    scenario
        .wait_for("an automatic task, its Job created and Progressing True", |s| {
            !s.job_names().is_empty() && s.condition_is(PROGRESSING, "True")
        })
        .await;
    let submitted = scenario.automatic_tasks();
    assert_eq!(submitted.len(), 1, "one automatic task: {submitted:#?}");
    let task = submitted[0].clone();
    let task_name = task.metadata.name.clone().unwrap();
    let wanted_type = if compaction.is_some() { TaskType::Maintenance } else { TaskType::Defragment };
    assert_eq!(task.spec.task_type, wanted_type, "{task:#?}");
    assert!(
        task_name.starts_with(&format!("{CLUSTER}-{}-", wanted_type.as_str().to_lowercase())),
        "{task_name}"
    );
    let owner = &task.metadata.owner_references.as_ref().expect("an owner")[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("EtcdCluster", CLUSTER));
    let job = scenario.job_names().remove(0);
    assert_eq!(job, format!("{task_name}-0"), "the task's first step");
    let status = scenario.cluster().status.unwrap();
    assert_eq!(status.active_task.as_deref(), Some(task_name.as_str()));
    assert_eq!(status.member_count, Some(3), "{status:#?}");
    assert_eq!(status.healthy_members, Some(3), "{status:#?}");
    assert!(scenario.condition_is(DEGRADED, "False"));
    assert!(scenario.condition_is(DISABLED, "False"));
    let job_object = scenario.server.get(&jobs(), Some(NAMESPACE), &job).unwrap();
    let args: Vec<String> =
        serde_json::from_value(job_object["spec"]["template"]["spec"]["containers"][0]["args"].clone())
            .unwrap();
    assert_eq!(args[0], "defrag", "{args:?}");
    if scenario.etcd.tls().is_some() {
        let cacert = format!("{TLS_MOUNT_DIR}/{TLS_CA_KEY}");
        assert!(
            args.windows(2).any(|w| w == ["--cacert", cacert.as_str()]),
            "the Job reads the CA from the mounted Secret: {args:?}"
        );
    }

    // While the Job is held, a spec change makes the controller observe and decide again: the
    // members are still over the thresholds, yet a task runs, so no second one.
    scenario.change_spec_and_wait_for_a_decision().await;
    assert_eq!(scenario.job_names(), vec![job.clone()], "never two Jobs at once");
    assert_eq!(scenario.automatic_tasks().len(), 1, "never two tasks at once");
    let progressing = scenario.condition(PROGRESSING).unwrap();
    assert_eq!(progressing.status, "True");
    assert_eq!(progressing.reason, "TaskRunning", "{progressing:?}");
    assert!(progressing.message.contains(&task_name), "{progressing:?}");

    scenario.open_gate();
    scenario
        .wait_for("the result recorded and Progressing back to False", |s| {
            s.cluster().status.is_some_and(|st| st.last_maintenance_time.is_some())
                && s.condition_is(PROGRESSING, "False")
        })
        .await;

    let log = scenario.jobs.log_synced().await;
    assert_eq!(log.created_names().len(), 1, "exactly one Job: {log:#?}");
    assert_eq!(log.finished, vec![(job.clone(), 0)], "{log:#?}");
    assert_eq!(log.max_running_per_group, 1);

    let status = scenario.cluster().status.unwrap();
    assert_eq!(status.last_maintenance_outcome.as_deref(), Some("Succeeded"), "{status:#?}");
    assert_eq!(status.active_task, None);
    assert_eq!(status.last_maintenance_task.as_deref(), Some(task_name.as_str()));
    assert_eq!(scenario.task_state(&task_name), Some(TaskState::Completed));
    assert_eq!(status.members.len(), 3, "{status:#?}");
    for member in &status.members {
        assert!(member.healthy, "{member:#?}");
        assert!(member.last_defrag_time.is_some(), "{member:#?}");
        let reclaimed = member.last_bytes_reclaimed.unwrap_or_default();
        assert!(reclaimed > CHURNED_DB / 3, "{}: bytes reclaimed recorded: {member:#?}", member.name);
        assert!(
            member.db_size.unwrap_or(i64::MAX) < MIN_DEFRAG_BYTES,
            "{}: observed small again after the defrag: {member:#?}",
            member.name
        );
    }
    assert!(scenario.condition_is(DEGRADED, "False"));
    let after = scenario.etcd.states().await.expect("every member answers");
    for (b, a) in before.iter().zip(&after) {
        assert!(a.db_size < b.db_size, "{} shrank: {b:?} → {a:?}", b.name);
    }

    // Events are published after the status is written: wait for them as for the status.
    scenario
        .wait_for("the Events of the submission and the result", |s| {
            s.event_with_reason("MaintenanceTaskCreated").is_some()
                && s.event_with_reason("MaintenanceSucceeded").is_some()
        })
        .await;
    let created =
        scenario.event_with_reason("MaintenanceTaskCreated").expect("an Event for the task's submission");
    assert!(created["note"].as_str().unwrap().contains(&task_name), "{created:#}");
    let succeeded = scenario
        .event_with_reason("MaintenanceSucceeded")
        .unwrap_or_else(|| panic!("an Event for the result: {:#?}", scenario.events()));
    assert_eq!(succeeded["type"], "Normal");
    let note = succeeded["note"].as_str().unwrap();
    assert!(note.contains("defragmented 3 of 3 member(s)"), "{note}");
    assert!(note.contains(&task_name), "{note}");
    if let Some(keep) = compaction {
        let flag = ["--compact-retain-revisions".to_owned(), keep.to_string()];
        assert!(args.windows(2).any(|w| w == flag), "the defrag Job compacts first: {args:?}");
        let compacted = status.last_compacted_revision.expect("the compaction is recorded");
        assert!(
            compacted > scenario.churned_revision,
            "compacted past the churn's compaction ({}): {status:#?}",
            scenario.churned_revision
        );
        assert!(status.last_compaction_time.is_some(), "{status:#?}");
        assert!(note.contains(&format!("compacted to revision {compacted}")), "{note}");
    }

    if check_quiet {
        // Quiet: nothing is over the thresholds any more, so the next observation submits
        // nothing.
        scenario.wait_for_next_observation().await;
        assert_eq!(scenario.job_names(), vec![job], "no Job after the members are defragmented");
        assert_eq!(scenario.automatic_tasks().len(), 1, "no second task");
        assert_eq!(scenario.jobs.log_synced().await.created.len(), 1);
        assert!(scenario.condition_is(PROGRESSING, "False"));
        assert!(scenario.condition_is(DEGRADED, "False"));
    }
}

async fn fragmented_cluster_is_defragmented_by_one_job_then_quiet(version: EtcdVersion) {
    defragments_with_one_job(version, Setup::default(), true).await
}

/// The controller reads the client certificate from the Secret for its own Status calls; the
/// Job mounts the same Secret and the runner connects with the mounted files.
async fn client_tls_from_a_secret(version: EtcdVersion) {
    let setup = Setup { client_tls: true, ..Setup::default() };
    defragments_with_one_job(version, setup, false).await
}

/// `revision` compaction: an automatic `Maintenance` task (origin automatic, owned by the
/// EtcdCluster) appears, runs one Job whose defrag compacts first (keeping the last revisions),
/// completes, and the EtcdCluster's status records it: the task, the outcome, the compacted
/// revision, each member's defragmentation. No separate compaction follows.
async fn an_automatic_maintenance_task_compacts_defragments_and_is_recorded(version: EtcdVersion) {
    let setup = Setup { keep_revisions: Some(10), ..Setup::default() };
    defragments_with_one_job(version, setup, true).await
}

/// An endpoint that does not answer makes the cluster Degraded, naming it, and no Job is
/// created although the members are over the thresholds; once the spec is fixed, maintenance
/// goes ahead.
async fn an_endpoint_that_does_not_answer_degrades_without_a_task(version: EtcdVersion) {
    // Held for the whole scenario: the etcd members started next pick free ports too.
    let closed = groundskeeper_e2e::net::ClosedPort::new();
    let dead = closed.url();
    let setup = Setup { extra_endpoint: Some(dead.clone()), ..Setup::default() };
    let Some(scenario) = Scenario::start(version, setup).await else {
        return;
    };
    scenario.wait_for("Degraded True", |s| s.condition_is(DEGRADED, "True")).await;
    let degraded = scenario.condition(DEGRADED).unwrap();
    assert_eq!(degraded.reason, "MembersUnhealthy", "{degraded:?}");
    assert!(degraded.message.contains(&dead), "the dead endpoint is named: {degraded:?}");
    assert!(scenario.condition_is(PROGRESSING, "False"));
    let status = scenario.cluster().status.unwrap();
    assert_eq!(status.member_count, Some(4), "{status:#?}");
    assert_eq!(status.healthy_members, Some(3), "{status:#?}");
    let unhealthy: Vec<_> = status.members.iter().filter(|m| !m.healthy).collect();
    assert_eq!(unhealthy.len(), 1, "{status:#?}");
    assert_eq!(unhealthy[0].endpoint, dead);
    assert!(unhealthy[0].message.is_some(), "{status:#?}");
    assert!(
        scenario.job_names().is_empty() && scenario.automatic_tasks().is_empty(),
        "no task while a member is unhealthy"
    );

    // The spec fixed (the dead endpoint dropped): the next decision is made at once.
    let endpoints = scenario.etcd.client_urls();
    scenario
        .server
        .patch(
            &etcd_clusters(),
            Some(NAMESPACE),
            CLUSTER,
            PatchFormat::Merge,
            &json!({ "spec": { "endpoints": endpoints } }),
            false,
        )
        .expect("spec patch");
    scenario
        .wait_for("Degraded False and a task's Job", |s| {
            s.condition_is(DEGRADED, "False") && !s.job_names().is_empty()
        })
        .await;
    assert_eq!(scenario.job_names().len(), 1);
    assert_eq!(scenario.automatic_tasks().len(), 1);
}

groundskeeper_e2e::for_each_etcd_version!(
    a_manual_defragment_task_runs_one_job_and_reports_every_member,
    tasks_queue_first_in_first_out_and_a_duplicate_is_rejected,
    a_manual_defragment_queued_behind_the_automatic_task_runs_after_it,
    a_task_past_its_deadline_fails_and_its_job_is_deleted,
    a_finished_task_is_deleted_after_its_ttl,
    a_task_controller_killed_at_each_step_makes_one_job_and_loses_no_result,
    deleting_a_running_task_deletes_its_job,
    fragmented_cluster_is_defragmented_by_one_job_then_quiet,
    client_tls_from_a_secret,
    an_automatic_maintenance_task_compacts_defragments_and_is_recorded,
    an_endpoint_that_does_not_answer_degrades_without_a_task,
);

/// "Defrag now": a person's Defragment task with no thresholds runs one Job, owned by the task,
/// and ends Completed with every member's sizes in its status.
async fn a_manual_defragment_task_runs_one_job_and_reports_every_member(version: EtcdVersion) {
    let setup = Setup { automatic_off: true, ..Setup::default() };
    let Some(scenario) = Scenario::start(version, setup).await else {
        return;
    };
    scenario.create_task("defrag-now", "Defragment", Value::Null);
    scenario
        .wait_for("the task InProgress with its Job", |s| {
            s.task_state("defrag-now") == Some(TaskState::InProgress) && !s.job_names().is_empty()
        })
        .await;
    assert_eq!(scenario.job_names(), vec!["defrag-now-0".to_owned()]);
    let job = scenario.server.get(&jobs(), Some(NAMESPACE), "defrag-now-0").unwrap();
    let owner = &job["metadata"]["ownerReferences"][0];
    assert_eq!(
        (owner["kind"].as_str(), owner["name"].as_str()),
        (Some("MaintenanceTask"), Some("defrag-now"))
    );
    assert_eq!(job["metadata"]["labels"]["groundskeeper.dev/task"], "defrag-now");

    scenario.open_gate();
    scenario
        .wait_for("the task Completed", |s| s.task_state("defrag-now") == Some(TaskState::Completed))
        .await;
    let status = scenario.task("defrag-now").status.unwrap();
    assert_eq!(status.nodes.len(), 3, "{status:#?}");
    for node in &status.nodes {
        assert_eq!(node.state, NodeState::Succeeded, "{node:#?}");
        assert_eq!(node.job.as_deref(), Some("defrag-now-0"));
        assert!(node.bytes_reclaimed.unwrap_or_default() > CHURNED_DB / 3, "{node:#?}");
    }
    assert_eq!(status.progress.as_deref(), Some("3/3"));
    assert!(status.started_at.is_some() && status.completed_at.is_some());
    let ready = scenario.task_condition("defrag-now", "Ready").unwrap();
    assert_eq!(ready.status, "True", "{ready:?}");
    assert!(ready.message.contains("defragmented 3 member(s)"), "{ready:?}");
    assert_eq!(
        scenario.jobs.log_synced().await.created_names(),
        std::collections::BTreeSet::from(["defrag-now-0".to_owned()])
    );
    let after = scenario.etcd.states().await.expect("every member answers");
    assert!(after.iter().all(|m| m.db_size < MIN_DEFRAG_BYTES), "{after:?}");
}

/// Tasks on one cluster run one at a time in the order they were created; a second task of the
/// same type as one queued or running is rejected, naming it.
async fn tasks_queue_first_in_first_out_and_a_duplicate_is_rejected(version: EtcdVersion) {
    let setup = Setup { automatic_off: true, ..Setup::default() };
    let Some(scenario) = Scenario::start(version, setup).await else {
        return;
    };
    scenario.create_task("first", "Defragment", Value::Null);
    scenario
        .wait_for("the first task InProgress", |s| s.task_state("first") == Some(TaskState::InProgress))
        .await;
    // Creation times have a resolution of a second: the later tasks are created a second later.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    scenario.create_task("again", "Defragment", Value::Null);
    scenario.create_task("then-compact", "Compact", json!({"compact": {"retainRevisions": 0}}));
    scenario
        .wait_for("the duplicate rejected, the compaction queued", |s| {
            s.task_state("again") == Some(TaskState::Rejected)
                && s.task_condition("then-compact", "Queued").is_some_and(|c| c.status == "True")
        })
        .await;
    let rejected = scenario.task("again").status.unwrap();
    let why = &rejected.last_errors.last().expect("a lastErrors entry").description;
    assert!(why.contains("first"), "the rejection names the task it duplicates: {why}");
    let queued = scenario.task_condition("then-compact", "Queued").unwrap();
    assert!(queued.message.contains("first"), "{queued:?}");
    assert_eq!(scenario.job_names(), vec!["first-0".to_owned()], "one task at a time");

    scenario.open_gate();
    scenario
        .wait_for("both tasks Completed", |s| {
            s.task_state("first") == Some(TaskState::Completed)
                && s.task_state("then-compact") == Some(TaskState::Completed)
        })
        .await;
    let first = scenario.task("first").status.unwrap();
    let second = scenario.task("then-compact").status.unwrap();
    assert!(
        second.started_at.as_ref().unwrap().0 >= first.completed_at.as_ref().unwrap().0,
        "first in, first out: {first:#?} {second:#?}"
    );
    assert_eq!(scenario.jobs.log_synced().await.max_running_per_group, 1);
    assert!(second.nodes.iter().all(|n| n.compacted_revision.is_some()), "{second:#?}");
}

/// First in, first out across origins: a person's Defragment task created while the automatic
/// Maintenance task runs is queued behind it, says so, and runs after it; its outcome is what
/// the EtcdCluster's status then records (a defragmentation just done by hand counts), and the
/// trigger submits nothing more.
async fn a_manual_defragment_queued_behind_the_automatic_task_runs_after_it(version: EtcdVersion) {
    let setup = Setup { keep_revisions: Some(10), ..Setup::default() };
    let Some(scenario) = Scenario::start(version, setup).await else {
        return;
    };
    scenario.wait_for("the automatic task's Job created", |s| !s.job_names().is_empty()).await;
    let automatic = scenario.automatic_tasks()[0].metadata.name.clone().unwrap();
    assert_eq!(scenario.task(&automatic).spec.task_type, TaskType::Maintenance);
    assert_eq!(scenario.task_state(&automatic), Some(TaskState::InProgress));
    scenario.create_task("defrag-now", "Defragment", Value::Null);
    scenario
        .wait_for("the manual task queued behind the automatic one", |s| {
            s.task_condition("defrag-now", "Queued")
                .is_some_and(|c| c.status == "True" && c.message.contains(&automatic))
        })
        .await;
    assert_eq!(scenario.task_state("defrag-now"), Some(TaskState::Pending));
    assert_eq!(scenario.job_names(), vec![format!("{automatic}-0")], "one task at a time");

    scenario.open_gate();
    scenario
        .wait_for("both tasks Completed and the manual one recorded", |s| {
            s.task_state(&automatic) == Some(TaskState::Completed)
                && s.task_state("defrag-now") == Some(TaskState::Completed)
                && s.cluster()
                    .status
                    .is_some_and(|st| st.last_maintenance_task.as_deref() == Some("defrag-now"))
        })
        .await;
    let first = scenario.task(&automatic).status.unwrap();
    let second = scenario.task("defrag-now").status.unwrap();
    assert!(
        second.started_at.as_ref().unwrap().0 >= first.completed_at.as_ref().unwrap().0,
        "first in, first out: {first:#?} {second:#?}"
    );
    let log = scenario.jobs.log_synced().await;
    assert_eq!(
        log.created_names(),
        std::collections::BTreeSet::from([format!("{automatic}-0"), "defrag-now-0".to_owned()]),
        "{log:#?}"
    );
    assert_eq!(log.max_running_per_group, 1, "never both at once: {log:#?}");
    let status = scenario.cluster().status.unwrap();
    assert_eq!(status.last_maintenance_outcome.as_deref(), Some("Succeeded"), "{status:#?}");
    assert!(
        status
            .last_maintenance_message
            .as_deref()
            .is_some_and(|m| m.starts_with("MaintenanceTask defrag-now: ")),
        "{status:#?}"
    );

    // The members are small again: the next observation submits nothing.
    scenario.wait_for_next_observation().await;
    assert_eq!(scenario.automatic_tasks().len(), 1, "no second automatic task");
    assert!(scenario.condition_is(PROGRESSING, "False"));
}

/// A task that has not finished by its deadline fails with `DeadlineExceeded` and its running
/// Job is deleted (its pod would get SIGTERM).
async fn a_task_past_its_deadline_fails_and_its_job_is_deleted(version: EtcdVersion) {
    let setup = Setup { automatic_off: true, ..Setup::default() };
    let Some(scenario) = Scenario::start(version, setup).await else {
        return;
    };
    let mut task = json!({"apiVersion": "groundskeeper.dev/v1alpha1", "kind": "MaintenanceTask",
        "metadata": {"name": "too-slow", "namespace": NAMESPACE},
        "spec": {"target": {"kind": "EtcdCluster", "name": CLUSTER}, "type": "Defragment", "deadlineSeconds": 3}});
    scenario.server.create(&maintenance_tasks(), Some(NAMESPACE), task.take()).expect("the task");
    // The gate stays shut: the Job never gets to run.
    scenario
        .wait_for("the task Failed past its deadline", |s| {
            s.task_state("too-slow") == Some(TaskState::Failed)
        })
        .await;
    let status = scenario.task("too-slow").status.unwrap();
    let error = status.last_errors.last().expect("a lastErrors entry");
    assert_eq!(error.code, "DeadlineExceeded", "{status:#?}");
    scenario
        .wait_for("its Job deleted", |s| {
            s.server
                .get(&jobs(), Some(NAMESPACE), "too-slow-0")
                .is_none_or(|job| !job["metadata"]["deletionTimestamp"].is_null())
        })
        .await;
}

/// A finished task is deleted once `ttlSecondsAfterFinished` has passed.
async fn a_finished_task_is_deleted_after_its_ttl(version: EtcdVersion) {
    let setup = Setup { automatic_off: true, ..Setup::default() };
    let Some(scenario) = Scenario::start(version, setup).await else {
        return;
    };
    scenario.open_gate();
    let mut task = json!({"apiVersion": "groundskeeper.dev/v1alpha1", "kind": "MaintenanceTask",
        "metadata": {"name": "short-lived", "namespace": NAMESPACE},
        "spec": {"target": {"kind": "EtcdCluster", "name": CLUSTER}, "type": "Compact",
                 "config": {"compact": {"retainRevisions": 0}}, "ttlSecondsAfterFinished": 2}});
    scenario.server.create(&maintenance_tasks(), Some(NAMESPACE), task.take()).expect("the task");
    scenario
        .wait_for("the task Completed", |s| s.task_state("short-lived") == Some(TaskState::Completed))
        .await;
    scenario
        .wait_for("the task deleted after its TTL", |s| {
            s.server.get(&maintenance_tasks(), Some(NAMESPACE), "short-lived").is_none()
        })
        .await;
}

/// The task controller killed and started again at each step of a task: after the task was
/// created (before any decision), after its Job was created (the progress not yet written), and
/// after the Job finished (its result not yet written back). Never two Jobs, no result lost, the
/// task ends Completed with every member's progress.
async fn a_task_controller_killed_at_each_step_makes_one_job_and_loses_no_result(version: EtcdVersion) {
    let setup = Setup { automatic_off: true, ..Setup::default() };
    let Some(mut scenario) = Scenario::start(version, setup).await else {
        return;
    };
    scenario.kill_task_controller().await;
    scenario.create_task("survivor", "Defragment", Value::Null);
    scenario.start_task_controller();
    scenario.wait_for("its Job created", |s| !s.job_names().is_empty()).await;
    scenario.kill_task_controller().await;
    scenario.start_task_controller();
    // Let the restarted controller look at it at least once while the Job still runs.
    scenario
        .wait_for("the task InProgress after the restart", |s| {
            s.task_state("survivor") == Some(TaskState::InProgress)
        })
        .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(scenario.job_names(), vec!["survivor-0".to_owned()], "never two Jobs");

    scenario.kill_task_controller().await;
    scenario.open_gate();
    scenario
        .wait_for("the Job finished while no task controller runs", |s| !s.jobs.log().finished.is_empty())
        .await;
    assert_eq!(scenario.task_state("survivor"), Some(TaskState::InProgress));
    scenario.start_task_controller();
    scenario
        .wait_for("the task Completed from the Job's result", |s| {
            s.task_state("survivor") == Some(TaskState::Completed)
        })
        .await;
    let status = scenario.task("survivor").status.unwrap();
    assert_eq!(status.nodes.len(), 3, "{status:#?}");
    assert!(status.nodes.iter().all(|n| n.state == NodeState::Succeeded), "{status:#?}");
    assert_eq!(
        scenario.jobs.log_synced().await.created_names(),
        std::collections::BTreeSet::from(["survivor-0".to_owned()]),
        "one Job across three restarts"
    );
}

/// Deleting a running task deletes its Job with it (the task owns it): its pod gets SIGTERM.
async fn deleting_a_running_task_deletes_its_job(version: EtcdVersion) {
    let setup = Setup { automatic_off: true, ..Setup::default() };
    let Some(scenario) = Scenario::start(version, setup).await else {
        return;
    };
    scenario.create_task("changed-my-mind", "Defragment", Value::Null);
    scenario.wait_for("its Job created", |s| !s.job_names().is_empty()).await;
    scenario
        .server
        .delete(&maintenance_tasks(), Some(NAMESPACE), "changed-my-mind")
        .expect("the task deleted");
    scenario
        .wait_for("its Job deleted with it", |s| {
            s.server.get(&jobs(), Some(NAMESPACE), "changed-my-mind-0").is_none()
        })
        .await;
}
