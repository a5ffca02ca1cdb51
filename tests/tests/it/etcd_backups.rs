//! Copy and Verify tasks end to end on the in-memory Kubernetes API, with real etcd 3.5 (3
//! members on loopback) and a real S3 server (s3s-fs): a snapshot on a claim is copied into a
//! bucket by a Copy task (run twice: the second copies nothing), proven by a Verify task from the
//! bucket (the EtcdCluster's catalog and condition `SnapshotRestorable` say so); then the copy in
//! the bucket is damaged and the next Verify fails, which degrades the cluster, naming the
//! snapshot. Delta tasks (incremental snapshots) follow the newest snapshot or delta on a claim
//! and in a bucket, and fail, naming the revision, once someone else compacted their start away.
//! Jobs run through the runner itself. A missing etcd 3.5, etcdutl or s3s-fs skips the test with a
//! message, except under `CI=true`.

use groundskeeper_e2e::fixtures;
use std::sync::Arc;
use std::time::Duration;

use groundskeeper_api::EtcdCluster;
use groundskeeper_api::maintenance_task::{MaintenanceTask, TaskState};
use groundskeeper_controller::runtime::context::ControllerConfig;
use groundskeeper_e2e::apiserver::ApiServer;
use groundskeeper_e2e::apiserver::rbac::controller_grants;
use groundskeeper_e2e::etcd_cluster::{
    self, CLUSTER_TURNS, ClusterOptions, EtcdVersion, etcd_or_skip, restore_tool_or_skip,
};
use groundskeeper_e2e::kubelet::JobSimulator;
use groundskeeper_e2e::s3_server::{REGION, S3Server, s3s_fs_or_skip};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::common::etcd_jobs::run_etcd_job;
use crate::common::s3::create_credentials_secret;
use crate::harness::{Controllers, Part, api_server, etcd_clusters, maintenance_tasks, wait_until};

const NAMESPACE: &str = "etcd";
const CLUSTER: &str = "main";
const CLAIM: &str = "main-snapshots";
/// Guards against a scenario that never settles; not a performance bound.
const GUARD: Duration = Duration::from_secs(120);

struct Scenario {
    server: Arc<ApiServer>,
    etcd: etcd_cluster::EtcdCluster,
    s3: S3Server,
    jobs: JobSimulator,
    _controllers: Controllers,
    _gate: watch::Sender<bool>,
}

impl Scenario {
    async fn start() -> Option<Scenario> {
        let binary = etcd_or_skip(EtcdVersion::V3_5)?;
        restore_tool_or_skip(EtcdVersion::V3_5, &binary)?;
        let s3s_fs = s3s_fs_or_skip()?;
        let etcd = etcd_cluster::EtcdCluster::start(&binary, ClusterOptions::default())
            .await
            .expect("the etcd cluster starts");
        etcd.fill(2_000_000).await.expect("fill");
        let server = api_server(controller_grants()).await;
        let (gate, opened) = watch::channel(true);
        let jobs =
            JobSimulator::builder(server.clone(), move |container| run_etcd_job(container, opened.clone()))
                .spawn();
        let s3 = S3Server::start(&s3s_fs).expect("s3s-fs starts");
        s3.create_bucket("offsite").unwrap();
        create_credentials_secret(&server, NAMESPACE, "offsite-s3", &s3);
        let claim: PersistentVolumeClaim = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": { "name": CLAIM, "namespace": NAMESPACE },
            "spec": { "accessModes": ["ReadWriteOnce"], "resources": { "requests": { "storage": "1Gi" } } },
        }))
        .unwrap();
        server.create_as(&claim).expect("the claim");
        let spec = json!({ "endpoints": etcd.client_urls(), "policy": { "enabled": false, "checkInterval": "10s" } });
        let cluster = fixtures::etcd_cluster(NAMESPACE, CLUSTER, spec);
        server.create(&etcd_clusters(), Some(NAMESPACE), cluster).expect("the EtcdCluster");
        let controllers =
            Controllers::start(&server, ControllerConfig::default(), &[Part::Etcd, Part::Tasks]);
        Some(Scenario { server, etcd, s3, jobs, _controllers: controllers, _gate: gate })
    }

    fn bucket(&self) -> Value {
        json!({ "bucket": {
            "url": "s3://offsite/etcd/main", "endpoint": self.s3.endpoint, "region": REGION,
            "credentialsSecret": "offsite-s3",
        }})
    }

    /// Creates a task and waits until it is final.
    async fn run(&self, name: &str, task_type: &str, config: Value) -> MaintenanceTask {
        let task = fixtures::task(NAMESPACE, name, task_type).target(CLUSTER).config(config).json();
        self.server.create(&maintenance_tasks(), Some(NAMESPACE), task).expect("the MaintenanceTask");
        self.wait_for(&format!("task {name} finished"), |s| {
            s.task(name).status.and_then(|st| st.state).is_some_and(TaskState::is_final)
        })
        .await;
        self.task(name)
    }

    fn task(&self, name: &str) -> MaintenanceTask {
        self.server.get_as(Some(NAMESPACE), name).expect("the MaintenanceTask exists")
    }

    fn cluster(&self) -> EtcdCluster {
        self.server.get_as(Some(NAMESPACE), CLUSTER).expect("the EtcdCluster exists")
    }

    fn condition(&self, type_: &str) -> Option<(String, String, String)> {
        let status = self.cluster().status?;
        let c = status.conditions.iter().find(|c| c.type_ == type_)?;
        Some((c.status.clone(), c.reason.clone(), c.message.clone()))
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
                format!("jobs: {:#?}\ntasks: {tasks:#?}\ncluster: {cluster:#?}", self.jobs.log())
            },
        )
        .await;
    }
}

fn completed(task: &MaintenanceTask) -> groundskeeper_api::maintenance_task::MaintenanceTaskStatus {
    let status = task.status.clone().unwrap();
    assert_eq!(status.state, Some(TaskState::Completed), "{status:#?}");
    status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_copied_offsite_is_proven_and_a_damaged_copy_degrades_the_cluster() {
    let _one = CLUSTER_TURNS.lock().await;
    let Some(scenario) = Scenario::start().await else { return };
    let mut client = scenario.etcd.client(None).await.expect("a client");
    for i in 0..10 {
        client.put(format!("kept/{i}"), "v", None).await.expect("a write");
    }
    let snapshot = completed(&scenario.run("on-claim", "Snapshot", json!({})).await).snapshot.unwrap();

    // Copied off the cluster's volume, twice: the second run finds it there.
    let copy = json!({ "from": { "persistentVolumeClaim": CLAIM }, "to": scenario.bucket() });
    let first = completed(&scenario.run("offsite", "Copy", copy.clone()).await).copy.unwrap();
    assert_eq!(first.copied, std::slice::from_ref(&snapshot.file), "{first:?}");
    let again = completed(&scenario.run("offsite-again", "Copy", copy).await).copy.unwrap();
    assert!(again.copied.is_empty() && again.already_there == [snapshot.file.clone()], "{again:?}");
    let object = scenario.s3.object_file("offsite", &format!("etcd/main/{}", snapshot.file));
    let claim_file = scenario.jobs.claim_dir(NAMESPACE, CLAIM).join(&snapshot.file);
    assert_eq!(std::fs::read(&object).unwrap(), std::fs::read(&claim_file).unwrap());
    let catalog = scenario.cluster().status.unwrap().snapshots;
    let stores: Vec<&str> = catalog.iter().map(|r| r.store.as_str()).collect();
    assert_eq!(stores, ["pvc/main-snapshots", "s3://offsite/etcd/main"]);
    assert!(
        catalog.iter().all(|r| r.revision == snapshot.revision && r.keys == snapshot.keys),
        "{catalog:#?}"
    );

    // Proven from the bucket: the catalog and the condition say so.
    let verify = json!({ "from": scenario.bucket() });
    let proof = completed(&scenario.run("prove", "Verify", verify.clone()).await).proof.unwrap();
    assert!(proof.proven && proof.revision == snapshot.revision && proof.keys == snapshot.keys, "{proof:?}");
    scenario
        .wait_for("SnapshotRestorable True", |s| {
            s.condition("SnapshotRestorable").is_some_and(|(status, reason, message)| {
                status == "True" && reason == "Proven" && message.contains("s3://offsite/etcd/main")
            })
        })
        .await;

    // The copy damaged: the next proof fails, and the cluster is degraded, naming it.
    let mut bytes = std::fs::read(&object).unwrap();
    bytes[4096] ^= 0xff;
    std::fs::write(&object, bytes).unwrap();
    let failed = scenario.run("prove-again", "Verify", verify).await;
    let status = failed.status.unwrap();
    assert_eq!(status.state, Some(TaskState::Failed), "{status:#?}");
    assert!(status.proof.is_some_and(|p| !p.proven));
    scenario
        .wait_for("SnapshotRestorable False and Degraded", |s| {
            let restorable = s
                .condition("SnapshotRestorable")
                .is_some_and(|(st, reason, _)| st == "False" && reason == "ProofFailed");
            let degraded = s.condition("DefragControllerDegraded").is_some_and(|(st, reason, message)| {
                st == "True" && reason == "SnapshotNotRestorable" && message.contains(&snapshot.file)
            });
            restorable && degraded
        })
        .await;
}

/// Incremental snapshots as tasks: each Delta holds exactly the changes since the newest full
/// snapshot or delta of its store (the catalog records its span, changes, size and checksum);
/// one in a bucket starts from the full snapshot copied there; a start compacted away by someone
/// else fails the task, naming the revision, and records nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deltas_follow_the_newest_snapshot_and_a_compacted_start_fails_naming_it() {
    let _one = CLUSTER_TURNS.lock().await;
    let Some(scenario) = Scenario::start().await else { return };
    let mut client = scenario.etcd.client(None).await.expect("a client");
    for i in 0..10 {
        client.put(format!("kept/{i}"), "v", None).await.expect("a write");
    }
    let snapshot = completed(&scenario.run("full", "Snapshot", json!({})).await).snapshot.unwrap();
    let full_revision = snapshot.revision.unwrap();

    // 20 puts and 5 deletes since the snapshot: the delta holds those 25 changes.
    for i in 0..20 {
        client.put(format!("changed/{i}"), "w", None).await.expect("a write");
    }
    for i in 0..5 {
        client.delete(format!("kept/{i}"), None).await.expect("a delete");
    }
    let revision = client.get("kept/9", None).await.expect("a read").header().unwrap().revision();
    let delta = completed(&scenario.run("delta-1", "Delta", json!({})).await).delta.unwrap();
    assert_eq!((delta.start_revision, delta.end_revision), (full_revision, revision), "{delta:?}");
    assert_eq!((delta.transactions, delta.changes), (25, 25), "{delta:?}");
    assert_eq!(delta.start_from.as_deref(), Some(snapshot.file.as_str()), "{delta:?}");
    let object = delta.object.clone().expect("a delta written");
    let file = scenario.jobs.claim_dir(NAMESPACE, CLAIM).join(&object);
    let bytes = std::fs::read(&file).expect("the delta on the claim");
    assert_eq!(Some(bytes.len() as i64), delta.size_bytes);
    let catalog = scenario.cluster().status.unwrap().snapshots;
    let entry = catalog.iter().find(|r| r.object == object).expect("the delta in the catalog");
    assert!(entry.is_delta(), "{entry:?}");
    assert_eq!(
        (entry.store.as_str(), entry.start_revision, entry.revision, entry.changes),
        ("pvc/main-snapshots", Some(full_revision), Some(revision), Some(25)),
        "{entry:?}"
    );
    assert_eq!(entry.sha256, delta.sha256);

    // The next one starts where that one ended.
    client.put("changed/late", "x", None).await.expect("a write");
    let next = completed(&scenario.run("delta-2", "Delta", json!({})).await).delta.unwrap();
    assert_eq!(
        (next.start_revision, next.end_revision, next.changes),
        (revision, revision + 1, 1),
        "{next:?}"
    );
    assert_eq!(next.start_from.as_deref(), Some(object.as_str()), "{next:?}");

    // In a bucket: from the full snapshot copied there.
    let copy = json!({ "from": { "persistentVolumeClaim": CLAIM }, "to": scenario.bucket(), "only": [snapshot.file] });
    completed(&scenario.run("offsite", "Copy", copy).await);
    let offsite =
        completed(&scenario.run("delta-offsite", "Delta", json!({ "to": scenario.bucket() })).await)
            .delta
            .unwrap();
    assert_eq!((offsite.start_revision, offsite.end_revision), (full_revision, revision + 1), "{offsite:?}");
    assert_eq!(offsite.store, "s3://offsite/etcd/main");
    let name = offsite.object.clone().unwrap();
    let in_bucket = scenario.s3.object_file("offsite", &format!("etcd/main/{name}"));
    assert_eq!(std::fs::metadata(in_bucket).unwrap().len() as i64, offsite.size_bytes.unwrap());

    // Someone else compacts past where the claim's newest delta ended: the next fails, naming
    // the revision, and the catalog keeps what it had.
    for i in 0..5 {
        client.put(format!("after/{i}"), "y", None).await.expect("a write");
    }
    let compacted = revision + 4;
    client.compact(compacted, None).await.expect("a compaction");
    let before = scenario.cluster().status.unwrap().snapshots;
    let failed = scenario.run("delta-3", "Delta", json!({})).await;
    let status = failed.status.unwrap();
    assert_eq!(status.state, Some(TaskState::Failed), "{status:#?}");
    let reported = status.delta.clone().expect("the delta's report");
    assert_eq!((reported.object.as_deref(), reported.compacted_to), (None, Some(compacted)), "{reported:?}");
    let why = status.last_errors.last().map(|e| e.description.clone()).unwrap_or_default();
    assert!(why.contains(&compacted.to_string()), "names the compacted revision: {why}");
    assert_eq!(scenario.cluster().status.unwrap().snapshots, before);
}

/// A restore drill to a point in time: a Verify with `toRevision` restores the newest full
/// snapshot before it and replays the deltas up to it in a throwaway member, which then holds
/// exactly the keys the cluster had at that revision (counted before anything was compacted);
/// a revision no delta reaches fails, naming what the store holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verify_to_a_revision_replays_the_deltas_up_to_it() {
    let _one = CLUSTER_TURNS.lock().await;
    let Some(scenario) = Scenario::start().await else { return };
    let mut client = scenario.etcd.client(None).await.expect("a client");
    for i in 0..10 {
        client.put(format!("kept/{i}"), "v", None).await.expect("a write");
    }
    completed(&scenario.run("full", "Snapshot", json!({})).await);
    for i in 0..8 {
        client.put(format!("first/{i}"), "w", None).await.expect("a write");
    }
    client.delete("kept/0", None).await.expect("a delete");
    let middle = client.get("kept/1", None).await.expect("a read").header().unwrap().revision();
    let keys_at_middle = client
        .get("", Some(etcd_client::GetOptions::new().with_all_keys().with_count_only().with_revision(middle)))
        .await
        .expect("a count")
        .count();
    for i in 0..6 {
        client.put(format!("second/{i}"), "x", None).await.expect("a write");
    }
    completed(&scenario.run("delta", "Delta", json!({})).await);

    let drill = json!({ "toRevision": middle });
    let replay = completed(&scenario.run("drill", "Verify", drill).await).replay.expect("status.replay");
    assert!(replay.replayed, "{replay:?}");
    assert_eq!((replay.to_revision, replay.revision), (middle, Some(middle)), "{replay:?}");
    assert_eq!(replay.keys, Some(keys_at_middle), "{replay:?}");
    assert_eq!(replay.deltas.len(), 1, "{replay:?}");
    assert_eq!(replay.changes, 9, "8 puts and a delete up to the middle: {replay:?}");

    let beyond = json!({ "toRevision": middle + 1000 });
    let failed = scenario.run("drill-beyond", "Verify", beyond).await;
    let status = failed.status.unwrap();
    assert_eq!(status.state, Some(TaskState::Failed), "{status:#?}");
    let why = status.last_errors.last().map(|e| e.description.clone()).unwrap_or_default();
    assert!(why.contains(&(middle + 1000).to_string()) && why.contains("delta"), "{why}");
}
