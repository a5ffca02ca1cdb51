//! Copy and Verify tasks end to end on the in-memory Kubernetes API, with real etcd 3.5 (3
//! members on loopback) and a real S3 server (s3s-fs): a snapshot on a claim is copied into a
//! bucket by a Copy task (run twice: the second copies nothing), proven by a Verify task from the
//! bucket (the EtcdCluster's catalog and condition `SnapshotRestorable` say so); then the copy in
//! the bucket is damaged and the next Verify fails, which degrades the cluster, naming the
//! snapshot. Delta tasks (incremental snapshots) follow the newest snapshot or delta on a claim
//! and in a bucket, and fail, naming the revision, once someone else compacted their start away.
//! A backup policy (`spec.backup`) takes fulls and deltas on its own, holds compaction back at
//! them and answers a gap with a full snapshot; one into the bucket with `compression: zstd` and
//! `encryption` is proven with its key, and a Verify given another key fails naming the key id
//! without marking the snapshot unrestorable. Jobs run through the runner itself. A missing etcd 3.5, etcdutl or s3s-fs skips the test with a
//! message, except under `CI=true`.

use groundskeeper_e2e::fixtures;
use std::sync::Arc;
use std::time::Duration;

use groundskeeper_api::EtcdCluster;
use groundskeeper_api::maintenance_task::{MaintenanceTask, TaskState};
use groundskeeper_controller::runtime::context::ControllerConfig;
use groundskeeper_e2e::apiserver::rbac::controller_grants;
use groundskeeper_e2e::apiserver::{ApiServer, PatchFormat, ResourceId};
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

/// The backup policy on its own (`spec.backup`, deltas every 5 s) beside automatic compaction that
/// keeps one revision: a full snapshot first, then deltas chained from it while a workload
/// writes; groundskeeper's compaction never passes the newest revision backed up (condition
/// `CompactionHeldBack`); a compaction by another client past that point is found by the next
/// delta (condition and Event `BackupGap`, the failed task naming the revision) and answered by a
/// full snapshot at once, which closes the gap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_policy_chains_deltas_holds_compaction_back_and_answers_a_gap_with_a_full_snapshot() {
    let _one = CLUSTER_TURNS.lock().await;
    let Some(scenario) = Scenario::start().await else { return };
    let mut client = scenario.etcd.client(None).await.expect("a client");
    let spec = json!({ "spec": {
        "policy": { "enabled": true, "checkInterval": "10s", "compaction": { "mode": "revision", "retention": "1" } },
        "backup": {
            "fullEvery": "6h", "deltaEvery": "5s",
            "retention": { "keepDeltasFor": "1d", "tiers": [{ "every": "1d", "for": "1w" }] },
        },
    }});
    scenario
        .server
        .patch(&etcd_clusters(), Some(NAMESPACE), CLUSTER, PatchFormat::Merge, &spec, false)
        .expect("the backup policy");
    let backup = |s: &Scenario| s.cluster().status.and_then(|st| st.backup);
    scenario
        .wait_for("the policy's first full snapshot", |s| {
            backup(s).is_some_and(|b| b.recovery_point_revision.is_some())
        })
        .await;
    let first = backup(&scenario).unwrap();
    let full_revision = first.recovery_point_revision.unwrap();
    assert_eq!(first.store, "pvc/main-snapshots");
    let made_by_policy = |s: &Scenario, task_type: &str| {
        s.server
            .list(&maintenance_tasks(), Some(NAMESPACE))
            .into_iter()
            .filter(|t| t["metadata"]["labels"]["groundskeeper.dev/origin"] == "backup-policy")
            .filter(|t| t["spec"]["type"] == task_type)
            .count()
    };
    assert!(made_by_policy(&scenario, "Snapshot") >= 1);

    // A workload writes; deltas follow it, each chained to the one before.
    let mut last = 0;
    for i in 0..30 {
        last =
            client.put(format!("work/{i}"), "v", None).await.expect("a write").header().unwrap().revision();
    }
    scenario
        .wait_for("a delta reaching the last write", |s| {
            backup(s).and_then(|b| b.recovery_point_revision).is_some_and(|r| r >= last)
        })
        .await;
    let status = scenario.cluster().status.unwrap();
    let deltas: Vec<_> = status.snapshots.iter().filter(|r| r.is_delta()).collect();
    assert!(!deltas.is_empty(), "{:#?}", status.snapshots);
    assert!(
        deltas.iter().any(|d| d.start_revision == Some(full_revision)),
        "the first delta starts at the full: {deltas:#?}"
    );
    assert!(made_by_policy(&scenario, "Delta") >= 1);

    // Compaction keeps one revision, but never passes what the backups hold.
    scenario
        .wait_for("an automatic compaction", |s| {
            s.cluster().status.and_then(|st| st.last_compacted_revision).is_some()
        })
        .await;
    let status = scenario.cluster().status.unwrap();
    let point = status.backup.as_ref().and_then(|b| b.recovery_point_revision).unwrap();
    let compacted = status.last_compacted_revision.unwrap();
    assert!(compacted <= point, "compacted to {compacted}, past the recovery point {point}");

    // While the backups are behind (writes not yet in a delta), compaction is held at them: the
    // condition says so when it happens. Someone else compacts past the chain's end instead.
    for i in 0..5 {
        client.put(format!("late/{i}"), "w", None).await.expect("a write");
    }
    let current = client.get("late/4", None).await.expect("a read").header().unwrap().revision();
    client.compact(current, None).await.expect("a compaction by another client");
    scenario
        .wait_for("the gap found, or closed by a full snapshot already", |s| {
            s.condition("BackupGap").is_some_and(|(status, _, _)| status == "True")
                || backup(s).is_some_and(|b| {
                    b.recovery_point_revision.is_some_and(|r| r >= current)
                        && b.gap.is_none()
                        && s.cluster()
                            .status
                            .unwrap()
                            .snapshots
                            .iter()
                            .any(|r| !r.is_delta() && r.revision >= Some(current))
                })
        })
        .await;
    scenario
        .wait_for("a full snapshot past the compaction closing the gap", |s| {
            let status = s.cluster().status.unwrap();
            status.snapshots.iter().any(|r| !r.is_delta() && r.revision.is_some_and(|r| r >= current))
                && s.condition("BackupGap")
                    .is_some_and(|(status, reason, _)| status == "False" && reason == "NoGap")
        })
        .await;
    let failed: Vec<MaintenanceTask> = scenario
        .server
        .list(&maintenance_tasks(), Some(NAMESPACE))
        .into_iter()
        .map(|t| serde_json::from_value(t).unwrap())
        .filter(|t: &MaintenanceTask| t.status.as_ref().is_some_and(|s| s.state == Some(TaskState::Failed)))
        .collect();
    let gap_task = failed
        .iter()
        .find(|t| {
            t.status.as_ref().and_then(|s| s.delta.as_ref()).and_then(|d| d.compacted_to) == Some(current)
        })
        .unwrap_or_else(|| panic!("the delta that found the gap: {failed:#?}"));
    // The Events follow the status write that closed the gap.
    let events = || scenario.server.list(&ResourceId::new("events.k8s.io", "v1", "events"), Some(NAMESPACE));
    scenario
        .wait_for("the Event of the gap closed", |_| {
            events().iter().any(|e| e["reason"] == "BackupGapClosed")
        })
        .await;
    let events = events();
    let gap_event = events.iter().find(|e| e["reason"] == "BackupGap").expect("a BackupGap Event");
    let note = gap_event["note"].as_str().unwrap_or_default();
    assert!(
        note.contains(&current.to_string()) && note.contains(&gap_task.metadata.name.clone().unwrap()),
        "{gap_event:#}"
    );
    let status = scenario.cluster().status.unwrap();
    assert!(
        status.last_compacted_revision.unwrap() <= status.backup.unwrap().recovery_point_revision.unwrap()
    );

    // The policy's retention reached the full snapshots' Jobs: each said what the store keeps
    // (a day of deltas keeps every one written here).
    let fulls: Vec<MaintenanceTask> = scenario
        .server
        .list(&maintenance_tasks(), Some(NAMESPACE))
        .into_iter()
        .map(|t| serde_json::from_value(t).unwrap())
        .filter(|t: &MaintenanceTask| {
            t.status.as_ref().is_some_and(|s| s.state == Some(TaskState::Completed))
        })
        .filter(|t: &MaintenanceTask| t.spec.config.snapshot.is_some())
        .collect();
    assert!(fulls.len() >= 2, "{fulls:#?}");
    for full in &fulls {
        let retention = full.spec.config.snapshot.as_ref().and_then(|s| s.retention.clone()).unwrap();
        assert_eq!(retention.keep_deltas_for.as_deref(), Some("1d"));
        let snapshot = full.status.as_ref().and_then(|s| s.snapshot.clone()).unwrap();
        assert!(snapshot.kept_bytes.is_some_and(|b| b > 0), "{snapshot:#?}");
        assert_eq!(snapshot.deleted_deltas_count, None, "{snapshot:#?}");
    }
}

/// Creates Secret `etcd/name` holding `key` under data key `data_key`, as a person would
/// (`kubectl create secret generic NAME --from-literal=key="$(openssl rand -base64 32)"`).
fn create_key_secret(scenario: &Scenario, name: &str, data_key: &str, key: &str) {
    use base64::Engine;
    let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": { "name": name, "namespace": NAMESPACE },
        "data": { data_key: base64::engine::general_purpose::STANDARD.encode(key) },
    }))
    .expect("a Secret");
    scenario.server.create_as(&secret).expect("the key Secret");
}

/// Encoded backups end to end: a backup policy into the bucket with `compression: zstd` and
/// `encryption` (a base64 key in a Secret) takes a full snapshot and deltas through the runner;
/// the catalog and the tasks say `zstd+aes-256-gcm` and the key id; a Verify to a revision with
/// the key replays the chain, one of the full snapshot proves it (`SnapshotRestorable` True); a
/// Verify given another key (hex, under another data key) fails naming the key id needed, and
/// leaves `SnapshotRestorable` as it was: a wrong key is the Verify's mistake, not a damaged
/// snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_encoded_backup_policy_is_proven_with_its_key_and_another_key_is_named() {
    let _one = CLUSTER_TURNS.lock().await;
    let Some(scenario) = Scenario::start().await else { return };
    create_key_secret(&scenario, "backup-key", "key", "q1lYFvzJgQp3nX8bB0b2a1K0m9G2h4D6e8F0c2A4b6E=");
    create_key_secret(&scenario, "other-key", "aes.key", &"ab".repeat(32));
    let mut client = scenario.etcd.client(None).await.expect("a client");
    for i in 0..20 {
        client.put(format!("kept/{i}"), "v".repeat(200), None).await.expect("a write");
    }
    let mut to = scenario.bucket();
    to["compression"] = json!("zstd");
    to["encryption"] = json!({ "secretName": "backup-key" });
    let spec = json!({ "spec": { "backup": { "to": to, "fullEvery": "6h", "deltaEvery": "5s" } } });
    scenario
        .server
        .patch(&etcd_clusters(), Some(NAMESPACE), CLUSTER, PatchFormat::Merge, &spec, false)
        .expect("the backup policy");
    let backup = |s: &Scenario| s.cluster().status.and_then(|st| st.backup);
    scenario
        .wait_for("the policy's first full snapshot", |s| {
            backup(s).is_some_and(|b| b.recovery_point_revision.is_some())
        })
        .await;
    let mut middle = 0;
    for i in 0..10 {
        middle =
            client.put(format!("later/{i}"), "w", None).await.expect("a write").header().unwrap().revision();
    }
    let keys_at_middle = client
        .get("", Some(etcd_client::GetOptions::new().with_all_keys().with_count_only().with_revision(middle)))
        .await
        .expect("a count")
        .count();
    scenario
        .wait_for("a delta reaching the last write", |s| {
            backup(s).and_then(|b| b.recovery_point_revision).is_some_and(|r| r >= middle)
        })
        .await;

    // The catalog and the tasks: encoded, with the key's id (never the key).
    let status = scenario.cluster().status.unwrap();
    let store = "s3://offsite/etcd/main";
    let full =
        status.snapshots.iter().find(|r| r.store == store && !r.is_delta()).expect("the full snapshot");
    let delta = status.snapshots.iter().find(|r| r.store == store && r.is_delta()).expect("a delta");
    for record in [full, delta] {
        assert_eq!(record.encoding.as_deref(), Some("zstd+aes-256-gcm"), "{record:#?}");
        assert!(record.key_id.as_deref().is_some_and(|id| !id.is_empty()), "{record:#?}");
        assert!(record.content_bytes.is_some_and(|c| Some(c) > record.size_bytes), "compressed: {record:#?}");
    }
    let key_id = full.key_id.clone().unwrap();
    assert_eq!(delta.key_id.as_deref(), Some(key_id.as_str()));
    let policy_tasks: Vec<MaintenanceTask> = scenario
        .server
        .list(&maintenance_tasks(), Some(NAMESPACE))
        .into_iter()
        .map(|t| serde_json::from_value(t).unwrap())
        .collect();
    let full_task =
        policy_tasks.iter().find(|t| t.spec.config.snapshot.is_some()).expect("the policy's Snapshot task");
    let inherited = full_task.spec.config.snapshot.as_ref().unwrap();
    assert_eq!(inherited.encryption.as_ref().map(|e| e.secret_name.as_str()), Some("backup-key"));
    let taken = full_task.status.as_ref().and_then(|s| s.snapshot.clone()).expect("status.snapshot");
    assert_eq!(
        (taken.encoding.as_deref(), taken.key_id.as_deref()),
        (Some("zstd+aes-256-gcm"), Some(key_id.as_str()))
    );
    let mut secrets = String::new();
    for task in &policy_tasks {
        secrets.push_str(&serde_json::to_string(&task.status).unwrap());
    }
    assert!(
        !secrets.contains("q1lYFvzJgQp3nX8bB0b2a1K0m9G2h4D6e8F0c2A4b6E="),
        "a key in a status: {secrets}"
    );

    // Proven with the key: to a revision (the chain replayed), and the full snapshot alone.
    let mut from = scenario.bucket();
    from["encryption"] = json!({ "secretName": "backup-key" });
    let drill = json!({ "from": from, "toRevision": middle });
    let replay = completed(&scenario.run("drill", "Verify", drill).await).replay.expect("status.replay");
    assert!(replay.replayed, "{replay:?}");
    assert_eq!((replay.revision, replay.keys), (Some(middle), Some(keys_at_middle)), "{replay:?}");
    let proof = json!({ "from": from, "object": full.object });
    completed(&scenario.run("proof", "Verify", proof).await);
    scenario
        .wait_for("SnapshotRestorable True", |s| {
            s.condition("SnapshotRestorable").is_some_and(|(status, _, _)| status == "True")
        })
        .await;

    // Another key: the task fails naming the key id needed; the snapshot is not marked.
    let mut wrong = scenario.bucket();
    wrong["encryption"] = json!({ "secretName": "other-key", "key": "aes.key" });
    let failed = scenario.run("wrong-key", "Verify", json!({ "from": wrong, "object": full.object })).await;
    let status = failed.status.unwrap();
    assert_eq!(status.state, Some(TaskState::Failed), "{status:#?}");
    let why = status.last_errors.last().map(|e| e.description.clone()).unwrap_or_default();
    assert!(why.contains(&key_id) && why.contains("another"), "{why}");
    let cluster = scenario.cluster().status.unwrap();
    assert_eq!(
        scenario.condition("SnapshotRestorable").map(|(status, _, _)| status).as_deref(),
        Some("True"),
        "{:#?}",
        cluster.conditions
    );
    let record = cluster.snapshots.iter().find(|r| r.store == store && r.object == full.object).unwrap();
    assert!(record.proof.as_ref().is_some_and(|p| p.proven), "{record:#?}");
    assert!(cluster.last_snapshot_proof.as_ref().is_some_and(|p| p.proven), "{cluster:#?}");
}
