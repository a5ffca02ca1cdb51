//! Backups that restore, end to end on the in-memory Kubernetes API: an etcd 3.5 cluster run as
//! a StatefulSet (the stand-in runs each pod as a real etcd process on its claim's folder), a
//! real S3 server (s3s-fs), the EtcdCluster and task controllers unchanged with the RBAC of
//! `manifests/`, and every Job run through the runner itself.
//!
//! A Snapshot task streams a snapshot into the bucket and proves it restores; a Restore while the
//! quorum is there, or without confirmation, is Rejected; then two of three members lose their
//! data for good, and a Restore task brings the cluster back from the proven snapshot, the task
//! controller restarted in the middle of every step: the keys written before the snapshot are
//! there, those written after it are gone and counted, every member's old data is kept. A Restore
//! to a point in time replays a full snapshot and a delta up to a revision between them and brings
//! back exactly the keyspace of that revision. A missing etcd 3.5, etcdutl or s3s-fs skips the
//! test with a message, except under `CI=true`.

use groundskeeper_e2e::fixtures;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Client, ConnectOptions, GetOptions};
use groundskeeper_api::EtcdCluster;
use groundskeeper_api::maintenance_task::{MaintenanceTask, TaskState};
use groundskeeper_api::restore::RestorePhase;
use groundskeeper_controller::runtime::context::ControllerConfig;
use groundskeeper_e2e::apiserver::rbac::controller_grants;
use groundskeeper_e2e::apiserver::{ApiError, ApiServer, ResourceId};
use groundskeeper_e2e::etcd_cluster::{CLUSTER_TURNS, EtcdVersion, etcd_or_skip, restore_tool_or_skip};
use groundskeeper_e2e::kubelet::JobSimulator;
use groundskeeper_e2e::s3_server::{S3Server, s3s_fs_or_skip};
use groundskeeper_e2e::statefulset::{EtcdPods, EtcdStatefulSet};
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::common::etcd_jobs::run_etcd_job;
use crate::common::s3::create_credentials_secret;
use crate::harness::{Controllers, Part, api_server, etcd_clusters, maintenance_tasks, wait_until};

const NAMESPACE: &str = "etcd";
const SET: &str = "main";
const CLUSTER: &str = "main";
const BUCKET: &str = "backups";
/// Guards against a scenario that never settles; not a performance bound.
const GUARD: Duration = Duration::from_secs(180);

struct Scenario {
    server: Arc<ApiServer>,
    set: EtcdStatefulSet,
    s3: S3Server,
    controllers: Controllers,
    // Dropped last: the Jobs' claims' folders are the members' data.
    _jobs: JobSimulator,
    _gate: watch::Sender<bool>,
}

impl Scenario {
    async fn start() -> Option<Scenario> {
        let binary = etcd_or_skip(EtcdVersion::V3_5)?;
        restore_tool_or_skip(EtcdVersion::V3_5, &binary)?;
        let s3s_fs = s3s_fs_or_skip()?;
        let server = api_server(controller_grants()).await;
        let (gate, opened) = watch::channel(true);
        let jobs =
            JobSimulator::builder(server.clone(), move |container| run_etcd_job(container, opened.clone()))
                .start_delay(Duration::from_millis(10))
                .spawn();
        let folders = jobs.claim_folders();
        let pods = EtcdPods::new(&binary, 3).expect("three members' ports");
        let endpoints = pods.client_urls();
        let set = EtcdStatefulSet::start(server.clone(), NAMESPACE, SET, pods, move |namespace, claim| {
            folders.dir(namespace, claim)
        });
        set.create_statefulset(3).expect("the StatefulSet");
        let s3 = S3Server::start(&s3s_fs).expect("s3s-fs starts");
        s3.create_bucket(BUCKET).unwrap();
        create_credentials_secret(&server, NAMESPACE, "s3-credentials", &s3);
        let cluster = json!({
            "apiVersion": "groundskeeper.dev/v1alpha1",
            "kind": "EtcdCluster",
            "metadata": { "name": CLUSTER, "namespace": NAMESPACE },
            // No automatic maintenance; observed every 10 s (the shortest interval).
            "spec": {
                "endpoints": endpoints,
                "policy": { "enabled": false, "checkInterval": "10s" },
                "statefulSet": { "name": SET },
            },
        });
        server.create(&etcd_clusters(), Some(NAMESPACE), cluster).expect("the EtcdCluster");
        let controllers =
            Controllers::start(&server, ControllerConfig::default(), &[Part::Etcd, Part::Tasks]);
        Some(Scenario { server, set, s3, controllers, _jobs: jobs, _gate: gate })
    }

    fn bucket(&self) -> Value {
        json!({
            "url": format!("s3://{BUCKET}/etcd"),
            "endpoint": self.s3.endpoint,
            "region": groundskeeper_e2e::s3_server::REGION,
            "credentialsSecret": "s3-credentials",
        })
    }

    fn create_task(&self, name: &str, task_type: &str, config: Value) {
        self.try_create_task(name, task_type, config).expect("the MaintenanceTask");
    }

    fn try_create_task(&self, name: &str, task_type: &str, config: Value) -> Result<Value, ApiError> {
        let task = fixtures::task(NAMESPACE, name, task_type).target(CLUSTER).config(config).json();
        self.server.create(&maintenance_tasks(), Some(NAMESPACE), task)
    }

    fn task(&self, name: &str) -> MaintenanceTask {
        self.server.get_as(Some(NAMESPACE), name).expect("the MaintenanceTask exists")
    }

    fn state(&self, name: &str) -> Option<TaskState> {
        self.task(name).status.and_then(|s| s.state)
    }

    fn cluster(&self) -> EtcdCluster {
        self.server.get_as(Some(NAMESPACE), CLUSTER).expect("the EtcdCluster exists")
    }

    fn ready_pods(&self) -> usize {
        self.server
            .list(&ResourceId::of::<Pod>(), Some(NAMESPACE))
            .into_iter()
            .filter_map(|pod| serde_json::from_value::<Pod>(pod).ok())
            .filter(|pod| {
                pod.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .count()
    }

    async fn wait_for(&self, what: &str, mut done: impl FnMut(&Scenario) -> bool) {
        wait_until(
            what,
            GUARD,
            Duration::from_millis(50),
            || done(self),
            || {
                let tasks = self.server.list(&maintenance_tasks(), Some(NAMESPACE));
                let cluster = self.server.list(&etcd_clusters(), Some(NAMESPACE));
                format!(
                    "tasks: {tasks:#?}\ncluster: {cluster:#?}\npods: {:?}\npod logs:\n{}",
                    self.set.pods(),
                    self.set.logs()
                )
            },
        )
        .await;
    }

    async fn finished(&self, name: &str) -> MaintenanceTask {
        self.wait_for(&format!("task {name} finished"), |s| s.state(name).is_some_and(TaskState::is_final))
            .await;
        self.task(name)
    }

    async fn client(&self, ordinal: usize) -> Client {
        let options = ConnectOptions::new().with_timeout(Duration::from_secs(5));
        Client::connect([self.set.etcd().client_url(ordinal)], Some(options)).await.expect("a client")
    }
}

async fn count(client: &mut Client, prefix: &str) -> usize {
    let options = GetOptions::new().with_prefix().with_count_only();
    client.get(prefix, Some(options)).await.expect("a read").count() as usize
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_task_brings_back_a_cluster_that_lost_its_quorum_for_good() {
    let _one = CLUSTER_TURNS.lock().await;
    let Some(mut scenario) = Scenario::start().await else { return };
    scenario.wait_for("three members Ready", |s| s.ready_pods() == 3).await;
    let mut client = scenario.client(0).await;
    for i in 0..20 {
        client.put(format!("before/{i:02}"), "kept", None).await.expect("a write");
    }

    // A snapshot into the bucket, proven to restore.
    scenario.create_task("backup", "Snapshot", json!({ "bucket": scenario.bucket(), "verify": true }));
    let backup = scenario.finished("backup").await;
    let status = backup.status.clone().unwrap();
    assert_eq!(status.state, Some(TaskState::Completed), "{status:#?}");
    let proof = status.proof.clone().expect("status.proof");
    assert!(proof.proven, "{proof:?}");
    let snapshot_revision = proof.revision.expect("the proven revision");
    let catalog = scenario.cluster().status.unwrap().snapshots;
    let record = catalog.iter().find(|r| r.store == format!("s3://{BUCKET}/etcd")).expect("in the catalog");
    assert!(record.proof.as_ref().is_some_and(|p| p.proven), "{record:?}");
    assert_eq!(record.keys, Some(20));

    // A Restore without confirmation is refused by the API (the CRD's rule); one while the quorum
    // is there is Rejected, saying why.
    let unconfirmed = scenario.try_create_task(
        "unconfirmed",
        "Restore",
        json!({ "from": { "bucket": scenario.bucket() } }),
    );
    let refused = unconfirmed.expect_err("an unconfirmed Restore is refused");
    assert!(refused.message.contains("spec.config.restore: Invalid value: \"object\": a Restore replaces the data of every member: confirm it with config.restore.confirm: true"), "{refused}");
    scenario.create_task(
        "too-soon",
        "Restore",
        json!({ "confirm": true, "from": { "bucket": scenario.bucket() }, "quorumLostForSeconds": 0 }),
    );
    let task = scenario.finished("too-soon").await;
    let status = task.status.unwrap();
    assert_eq!(status.state, Some(TaskState::Rejected), "too-soon: {status:#?}");
    let why = status.last_operation.unwrap().description;
    assert!(why.contains("has its quorum"), "too-soon: {why}");

    // Writes after the snapshot, seen by the controller while the quorum is there: what the
    // restore will lose.
    for i in 0..5 {
        client.put(format!("after/{i}"), "lost", None).await.expect("a write");
    }
    let last = client.get("after/4", None).await.unwrap().header().unwrap().revision();
    scenario
        .wait_for("the last revision with quorum seen", |s| {
            s.cluster().status.and_then(|st| st.last_revision_with_quorum).is_some_and(|r| r >= last)
        })
        .await;

    // Two members lost for good: no quorum, seen by the EtcdCluster controller.
    for ordinal in [1, 2] {
        scenario.set.lose_member(ordinal).expect("the member's data lost");
    }
    scenario
        .wait_for("the quorum loss recorded", |s| {
            s.cluster().status.is_some_and(|st| st.quorum_lost_since.is_some())
        })
        .await;

    scenario.create_task(
        "restore",
        "Restore",
        json!({ "confirm": true, "from": { "bucket": scenario.bucket() }, "quorumLostForSeconds": 4 }),
    );
    // Lost for less than the time asked: it waits, saying until when.
    scenario
        .wait_for("the restore waits for the quorum to be lost long enough", |s| {
            s.task("restore").status.is_some_and(|st| {
                st.state == Some(TaskState::Pending)
                    && st.conditions.iter().any(|c| c.message.contains("the restore waits until"))
            })
        })
        .await;
    // A crash of the task controller in the middle of every step: it goes on from what the API
    // holds.
    let mut seen = Vec::new();
    loop {
        scenario
            .wait_for("the restore's next step, or its end", |s| {
                let status = s.task("restore").status.unwrap_or_default();
                let phase = status.restore.as_ref().map(|r| r.phase);
                status.state.is_some_and(TaskState::is_final) || phase.is_some_and(|p| !seen.contains(&p))
            })
            .await;
        let status = scenario.task("restore").status.unwrap();
        if status.state.is_some_and(TaskState::is_final) {
            break;
        }
        let phase = status.restore.unwrap().phase;
        seen.push(phase);
        scenario.controllers.restart(Part::Tasks).await;
    }
    let status = scenario.task("restore").status.unwrap();
    assert_eq!(status.state, Some(TaskState::Completed), "{status:#?}\n{}", scenario.set.logs());
    assert_eq!(
        seen,
        [
            RestorePhase::CheckingSnapshot,
            RestorePhase::ScalingDown,
            RestorePhase::RestoringMembers,
            RestorePhase::ScalingUp,
            RestorePhase::WaitingForMembers,
        ],
        "every step seen, and the controller restarted in each"
    );
    let restore = status.restore.clone().unwrap();
    assert_eq!(restore.phase, RestorePhase::Done);
    assert_eq!(restore.revision, Some(snapshot_revision));
    assert_eq!(restore.lost_revisions, Some(last - snapshot_revision), "{restore:#?}");
    let states: BTreeMap<String, String> =
        restore.steps.iter().map(|s| (s.phase.to_string(), s.state.clone())).collect();
    assert!(states.values().all(|s| s == "Succeeded"), "{states:?}");
    let line = status.last_operation.unwrap().description;
    assert!(line.contains("revision(s) written after the snapshot are lost"), "{line}");

    // The cluster: back, with the snapshot's keys and without the later ones; writable again.
    scenario.wait_for("three members Ready", |s| s.ready_pods() == 3).await;
    let mut client = scenario.client(2).await;
    assert_eq!(count(&mut client, "before/").await, 20);
    assert_eq!(count(&mut client, "after/").await, 0);
    client.put("after-restore", "written", None).await.expect("a write with quorum");
    // Every member's old data kept beside its data folder, once.
    assert!(restore.old_data_suffix.starts_with(".pre-restore-restore-"), "{}", restore.old_data_suffix);
    for ordinal in 0..3 {
        let data = scenario.set.data_dir(ordinal);
        let old = data.with_file_name(format!("default.etcd{}", restore.old_data_suffix));
        assert!(old.join("member").is_dir(), "{} kept", old.display());
    }
    // One proof Job and one Job per member, none twice despite the restarts.
    let jobs: Vec<String> = crate::harness::names(&scenario.server, &crate::harness::jobs(), NAMESPACE)
        .into_iter()
        .filter(|n| n.starts_with("restore-"))
        .collect();
    assert_eq!(jobs, ["restore-0", "restore-1", "restore-2", "restore-3"]);
}

/// Every key and value at `revision` (a range at that revision, read before anything compacts).
async fn keyspace_at(client: &mut Client, revision: i64) -> BTreeMap<String, String> {
    let options = GetOptions::new().with_all_keys().with_revision(revision);
    let response = client.get(Vec::<u8>::new(), Some(options)).await.expect("a range at the revision");
    response
        .kvs()
        .iter()
        .map(|kv| (kv.key_str().unwrap().to_owned(), kv.value_str().unwrap().to_owned()))
        .collect()
}

/// A Restore to a point in time: a full snapshot and a delta in the bucket, writes and deletes
/// before and after the revision asked for; after the quorum is lost for good, the Restore with
/// `toRevision` replays the full snapshot and the delta up to that revision, saves that member's
/// snapshot (recorded in the catalog) and restores every member from it: the cluster holds exactly
/// the keys and values it had at that revision, nothing of the writes after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_to_a_point_in_time_brings_back_exactly_the_keyspace_of_that_revision() {
    let _one = CLUSTER_TURNS.lock().await;
    let Some(scenario) = Scenario::start().await else { return };
    scenario.wait_for("three members Ready", |s| s.ready_pods() == 3).await;
    let mut client = scenario.client(0).await;
    for i in 0..20 {
        client.put(format!("base/{i:02}"), "full", None).await.expect("a write");
    }
    scenario.create_task("full", "Snapshot", json!({ "bucket": scenario.bucket() }));
    assert_eq!(scenario.finished("full").await.status.unwrap().state, Some(TaskState::Completed));

    // Changes the delta holds, before and after the point in time.
    for i in 0..10 {
        client.put(format!("mid/{i:02}"), "delta", None).await.expect("a write");
    }
    client.delete("base/0", Some(etcd_client::DeleteOptions::new().with_prefix())).await.expect("deletes");
    client.put("base/15", "changed", None).await.expect("a write");
    let point = client.get("base/15", None).await.unwrap().header().unwrap().revision();
    let expected = keyspace_at(&mut client, point).await;
    for i in 0..10 {
        client.put(format!("late/{i:02}"), "after", None).await.expect("a write");
    }
    client.delete("mid/0", Some(etcd_client::DeleteOptions::new().with_prefix())).await.expect("deletes");
    scenario.create_task("delta", "Delta", json!({ "to": { "bucket": scenario.bucket() } }));
    let delta = scenario.finished("delta").await.status.unwrap();
    assert_eq!(delta.state, Some(TaskState::Completed), "{delta:#?}");
    let last = delta.delta.as_ref().unwrap().end_revision;
    assert!(last > point, "the delta reaches past the point: {delta:#?}");
    scenario
        .wait_for("the last revision with quorum seen", |s| {
            s.cluster().status.and_then(|st| st.last_revision_with_quorum).is_some_and(|r| r >= last)
        })
        .await;

    for ordinal in [1, 2] {
        scenario.set.lose_member(ordinal).expect("the member's data lost");
    }
    scenario
        .wait_for("the quorum loss recorded", |s| {
            s.cluster().status.is_some_and(|st| st.quorum_lost_since.is_some())
        })
        .await;
    let restore = json!({ "confirm": true, "from": { "bucket": scenario.bucket() }, "quorumLostForSeconds": 0,
                          "toRevision": point });
    scenario.create_task("to-the-point", "Restore", restore);
    let status = scenario.finished("to-the-point").await.status.unwrap();
    assert_eq!(status.state, Some(TaskState::Completed), "{status:#?}\n{}", scenario.set.logs());
    let restored = status.restore.unwrap();
    assert_eq!((restored.to_revision, restored.revision), (Some(point), Some(point)), "{restored:#?}");
    assert_eq!(restored.replayed_from.as_deref().map(|o| o.ends_with(".db")), Some(true), "{restored:#?}");
    assert_eq!(restored.deltas.len(), 1, "{restored:#?}");
    assert_ne!(Some(&restored.object), restored.replayed_from.as_ref(), "the saved snapshot is restored");
    assert_eq!(restored.lost_revisions, Some(last - point), "{restored:#?}");
    let catalog = scenario.cluster().status.unwrap().snapshots;
    let saved =
        catalog.iter().find(|r| r.object == restored.object).expect("the saved snapshot in the catalog");
    assert_eq!((saved.revision, saved.is_delta()), (Some(point), false), "{saved:?}");

    scenario.wait_for("three members Ready", |s| s.ready_pods() == 3).await;
    let mut client = scenario.client(2).await;
    let now = client.get("base/15", None).await.unwrap().header().unwrap().revision();
    assert_eq!(now, point, "the restored cluster serves the point's revision");
    assert_eq!(keyspace_at(&mut client, point).await, expected, "exactly the keyspace of revision {point}");
    client.put("after-restore", "written", None).await.expect("a write with quorum");
}
