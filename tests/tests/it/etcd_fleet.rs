//! Fleets of etcd clusters on the in-memory Kubernetes API, with the controllers unchanged and
//! the RBAC of `manifests/`:
//!
//! * two EtcdClusters of one fleet (in different namespaces) that claim the same cluster id are
//!   both reported — Degraded naming the other, a Warning Event — and neither gets maintenance;
//!   giving one another id clears it (no etcd needed: a disputed cluster is not even observed);
//! * a fleet of real etcd clusters, all fragmented, is defragmented one cluster at a time (the
//!   default `--fleet-max-concurrent`), checked by watching every Job change throughout; the
//!   clusters held back say who holds the slot; a cluster added while the controllers run is
//!   picked up and takes its turn;
//! * a `Partitioned` cluster whose etcd writes ordinary sequential revisions (real etcd does not
//!   write composite ones): its small revisions decode to 1970 and cluster id 0, so the clock
//!   check reports it (ClockBehind once a write shows the revision is fresh, ClusterIdMismatch
//!   for another id) — exactly what a cluster with the wrong revision scheme looks like. What
//!   this cannot exercise on real etcd: a clock ahead, and compaction to a composite revision
//!   (both are table-tested in the controller's decision tests);
//! * Arktos StorageClusters (`/api/v1/storageclusters`) discovered as Partitioned EtcdClusters,
//!   with the extra RBAC of `manifests/addons/storage-cluster-discovery/`.
//!
//! The scenarios with etcd run one at a time (a lock). A missing etcd binary skips them with a
//! message, except under `CI=true`.

use groundskeeper_e2e::fixtures;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use groundskeeper_api::EtcdCluster;
use groundskeeper_api::maintenance_task::{MaintenanceTask, TaskState};
use groundskeeper_controller::Config;
use groundskeeper_controller::etcd;
use groundskeeper_controller::etcd::config::{Config as EtcdConfig, StorageClusterDiscovery};
use groundskeeper_controller::runtime::context::ControllerConfig;
use groundskeeper_e2e::apiserver::rbac::{
    controller_grants, controller_grants_with_storage_cluster_discovery,
};
use groundskeeper_e2e::apiserver::{ApiServer, PatchFormat, ResourceId};
use groundskeeper_e2e::etcd_cluster::{self, ClusterOptions, EtcdVersion, etcd_or_skip};
use groundskeeper_e2e::kubelet::JobSimulator;
use groundskeeper_protocol::keys;
use k8s_openapi::api::batch::v1::Job;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::common;
use crate::harness::{Controllers, Part, api_server, etcd_clusters, maintenance_tasks, wait_until};
use common::etcd_jobs::run_etcd_job;

/// Guards against a scenario that never converges; not a performance bound.
const GUARD: Duration = Duration::from_secs(60);

fn cluster(namespace: &str, name: &str, cluster_id: i64) -> Value {
    let spec = json!({
        // Nothing listens there: a cluster that is maintained would be reported unhealthy.
        "endpoints": ["http://127.0.0.1:9"],
        "partition": { "fleet": "arktos", "clusterId": cluster_id, "revisionScheme": "Partitioned" },
        "policy": { "compaction": { "mode": "periodic", "retention": "1h" } }
    });
    fixtures::etcd_cluster(namespace, name, spec)
}

fn degraded(server: &ApiServer, namespace: &str, name: &str) -> Option<(String, String)> {
    let object = server.get(&etcd_clusters(), Some(namespace), name)?;
    let conditions = object["status"]["conditions"].as_array()?.clone();
    let c = conditions.iter().find(|c| c["type"] == etcd::decide::DEGRADED && c["status"] == "True")?;
    Some((c["reason"].as_str()?.to_owned(), c["message"].as_str()?.to_owned()))
}

async fn wait_for(what: &str, done: impl FnMut() -> bool) {
    wait_until(what, GUARD, Duration::from_millis(50), done, String::new).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clusters_claiming_one_fleet_id_are_both_reported_and_left_alone() {
    let server = api_server(controller_grants()).await;
    server.create(&etcd_clusters(), Some("system"), cluster("system", "system", 0)).unwrap();
    server.create(&etcd_clusters(), Some("system"), cluster("system", "tenant-a", 1)).unwrap();
    server.create(&etcd_clusters(), Some("tenants"), cluster("tenants", "tenant-b", 1)).unwrap();
    let config = ControllerConfig { requeue_busy: Duration::from_secs(1), ..ControllerConfig::default() };
    let _controllers = Controllers::start(&server, config, &[Part::Etcd]);

    let collision = |namespace: &str, name: &str| {
        degraded(&server, namespace, name)
            .filter(|(reason, _)| reason == etcd::decide::PARTITION_ID_COLLISION)
    };
    wait_for("both claimants of id 1 reported", || {
        collision("system", "tenant-a").is_some() && collision("tenants", "tenant-b").is_some()
    })
    .await;
    let (_, message) = collision("system", "tenant-a").unwrap();
    assert!(message.contains("also claimed by EtcdCluster tenants/tenant-b"), "{message}");
    let (_, message) = collision("tenants", "tenant-b").unwrap();
    assert!(message.contains("also claimed by EtcdCluster system/tenant-a"), "{message}");
    wait_for("the cluster with an id of its own is maintained (and finds its endpoint dead)", || {
        degraded(&server, "system", "system")
            .is_some_and(|(reason, _)| reason != etcd::decide::PARTITION_ID_COLLISION)
    })
    .await;
    // Each cluster's Event is written after its status: waited for, not expected at once.
    wait_for("a Warning Event about each claimant", || {
        let events = server.list(&ResourceId::new("events.k8s.io", "v1", "events"), None);
        ["tenant-a", "tenant-b"].iter().all(|name| {
            events.iter().any(|e| {
                e["regarding"]["name"] == *name
                    && e["reason"] == "PartitionIdCollision"
                    && e["type"] == "Warning"
            })
        })
    })
    .await;
    let tasks = server.list(&maintenance_tasks(), None);
    assert!(tasks.is_empty(), "no maintenance while ids collide: {tasks:#?}");

    // tenant-b takes an id of its own: its spec changed, so it is looked at again at once.
    let patch = json!({ "spec": { "partition": { "fleet": "arktos", "clusterId": 2, "revisionScheme": "Partitioned" } } });
    server.patch(&etcd_clusters(), Some("tenants"), "tenant-b", PatchFormat::Merge, &patch, false).unwrap();
    wait_for("tenant-b no longer reports a collision", || {
        collision("tenants", "tenant-b").is_none() && degraded(&server, "tenants", "tenant-b").is_some()
    })
    .await;
}

/// The scenarios with real etcd run one at a time: several clusters at once on a small machine
/// would starve etcd's heartbeats.
static ETCD: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const NAMESPACE: &str = "etcd";
/// Churned dbs reach this size; most of it is free pages.
const CHURNED_DB: i64 = 6_000_000;
/// Well under the churned size, well over what a defragmented db of this data holds (~2 MB).
const MIN_DEFRAG_BYTES: i64 = 4_000_000;

fn storage_clusters() -> ResourceId {
    ResourceId::new("", "v1", "storageclusters")
}

/// A single-member etcd cluster (the smallest that makes the point; `allowSingleMember`).
async fn start_etcd(binary: &std::path::Path) -> etcd_cluster::EtcdCluster {
    etcd_cluster::EtcdCluster::start(binary, ClusterOptions { members: 1, ..ClusterOptions::default() })
        .await
        .expect("the etcd cluster starts")
}

/// The controllers (etcd trigger, task controller) and the Job simulator running the runner
/// (its containers held until `gate` opens).
struct Fleet {
    jobs: JobSimulator,
    gate: watch::Sender<bool>,
    _controllers: Controllers,
}

fn start_controllers(server: &Arc<ApiServer>, config: impl Into<Config>) -> Fleet {
    let (gate, opened) = watch::channel(false);
    let jobs =
        JobSimulator::builder(server.clone(), move |container| run_etcd_job(container, opened.clone()))
            .spawn();
    let config: Config = config.into();
    let config = Config {
        controller: ControllerConfig { requeue_busy: Duration::from_secs(1), ..config.controller },
        ..config
    };
    Fleet { jobs, gate, _controllers: Controllers::start(server, config, &[Part::Etcd, Part::Tasks]) }
}

fn fleet_cluster(name: &str, endpoints: Vec<String>, scheme: &str, cluster_id: i64) -> Value {
    let spec = json!({
        "endpoints": endpoints,
        "partition": { "fleet": "arktos", "clusterId": cluster_id, "revisionScheme": scheme },
        "policy": {
            "checkInterval": "10s",
            "minDefragBytes": MIN_DEFRAG_BYTES,
            "maxFragmentedPercent": 45.0,
            "allowSingleMember": true,
        }
    });
    fixtures::etcd_cluster(NAMESPACE, name, spec)
}

fn cluster_of(server: &ApiServer, namespace: &str, name: &str) -> Option<EtcdCluster> {
    server.get_as(Some(namespace), name)
}

fn tasks_of(server: &ApiServer, cluster: &str) -> Vec<MaintenanceTask> {
    server
        .list(&maintenance_tasks(), Some(NAMESPACE))
        .into_iter()
        .map(|t| serde_json::from_value::<MaintenanceTask>(t).expect("a MaintenanceTask"))
        .filter(|t| t.spec.target.name == cluster)
        .collect()
}

fn state_of(task: &MaintenanceTask) -> TaskState {
    task.status.as_ref().and_then(|s| s.state).unwrap_or_default()
}

/// Watches every Job change from now on: which clusters (Job label `groundskeeper.dev/target`)
/// have an unfinished Job, and the most clusters that had one at the same moment.
#[derive(Default, Debug)]
struct JobWatch {
    unfinished: BTreeMap<String, String>,
    most_clusters_at_once: usize,
    clusters_seen: BTreeSet<String>,
}

fn watch_jobs(server: &ApiServer) -> (Arc<Mutex<JobWatch>>, tokio::task::JoinHandle<()>) {
    let seen = Arc::new(Mutex::new(JobWatch::default()));
    let mut changes = server.subscribe();
    let record = seen.clone();
    let handle = tokio::spawn(async move {
        while let Ok(Some(change)) = changes.next().await {
            if change.resource != ResourceId::of::<Job>() {
                continue;
            }
            let job = &change.object;
            let name = job["metadata"]["name"].as_str().unwrap_or_default().to_owned();
            let cluster =
                job["metadata"]["labels"][keys::TARGET_LABEL].as_str().unwrap_or_default().to_owned();
            let finished = job["status"]["conditions"].as_array().is_some_and(|conditions| {
                conditions
                    .iter()
                    .any(|c| (c["type"] == "Complete" || c["type"] == "Failed") && c["status"] == "True")
            });
            let gone = change.kind == groundskeeper_e2e::apiserver::ChangeKind::Deleted;
            let mut watch = record.lock().unwrap();
            if finished || gone {
                watch.unfinished.remove(&name);
            } else {
                watch.unfinished.insert(name, cluster.clone());
                watch.clusters_seen.insert(cluster);
            }
            let at_once: BTreeSet<&String> = watch.unfinished.values().collect();
            watch.most_clusters_at_once = watch.most_clusters_at_once.max(at_once.len());
        }
    });
    (seen, handle)
}

/// Three fragmented clusters of one fleet, the third added while the controllers run: each gets
/// a defragmentation, never two clusters' Jobs at once; the clusters held back name the one
/// holding the slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_is_maintained_one_cluster_at_a_time_and_a_new_cluster_is_picked_up() {
    let _one_at_a_time = ETCD.lock().await;
    let Some(binary) = etcd_or_skip(EtcdVersion::V3_5) else {
        return;
    };
    let mut members = Vec::new();
    for _ in 0..3 {
        let etcd = start_etcd(&binary).await;
        etcd.churn(CHURNED_DB).await.expect("churn");
        members.push(etcd);
    }
    let server = api_server(controller_grants()).await;
    let (watched, watcher) = watch_jobs(&server);
    for (i, etcd) in members.iter().enumerate().take(2) {
        let name = format!("tenant-{i}");
        server
            .create(
                &etcd_clusters(),
                Some(NAMESPACE),
                fleet_cluster(&name, etcd.client_urls(), "Sequential", i as i64),
            )
            .unwrap();
    }
    let controllers = start_controllers(&server, ControllerConfig::default());

    // Both are due; one holds the fleet's slot (its Job held, as if its image were pulling) and
    // the other's task waits, naming it.
    let server_ref = &server;
    let holder_and_waiter = || {
        let running: Vec<String> = ["tenant-0", "tenant-1"]
            .into_iter()
            .filter(|c| tasks_of(server_ref, c).iter().any(|t| state_of(t) == TaskState::InProgress))
            .map(str::to_owned)
            .collect();
        let [holder] = running.as_slice() else {
            return None;
        };
        let waiter = if holder == "tenant-0" { "tenant-1" } else { "tenant-0" };
        let waits = cluster_of(server_ref, NAMESPACE, waiter)?.status?.active_task_waits_for?;
        waits
            .contains(&format!("taken by EtcdCluster {NAMESPACE}/{holder}"))
            .then(|| (holder.clone(), waiter.to_owned(), waits))
    };
    wait_for("one cluster in maintenance, the other waiting for it", || holder_and_waiter().is_some()).await;
    let (holder, waiter, waits) = holder_and_waiter().unwrap();
    assert!(waits.starts_with("waits for EtcdCluster"), "{waits}");
    assert!(waits.contains("fleet arktos: 1 of 1 maintenance slots taken"), "{waits}");
    let progressing = cluster_of(&server, NAMESPACE, &waiter)
        .unwrap()
        .status
        .unwrap()
        .conditions
        .into_iter()
        .find(|c| c.type_ == etcd::decide::PROGRESSING)
        .unwrap();
    assert!(
        progressing.message.contains(&format!("taken by EtcdCluster {NAMESPACE}/{holder}")),
        "{progressing:?}"
    );

    // A cluster added now is picked up without a restart, and waits its turn too.
    server
        .create(
            &etcd_clusters(),
            Some(NAMESPACE),
            fleet_cluster("tenant-2", members[2].client_urls(), "Sequential", 2),
        )
        .unwrap();
    wait_for("the new cluster observed and its task queued", || {
        cluster_of(&server, NAMESPACE, "tenant-2")
            .and_then(|c| c.status)
            .is_some_and(|s| s.member_count == Some(1) && s.active_task.is_some())
    })
    .await;
    assert_eq!(watched.lock().unwrap().clusters_seen.len(), 1, "{watched:?}");

    controllers.gate.send_replace(true);
    wait_for("every cluster of the fleet defragmented", || {
        (0..3).all(|i| {
            cluster_of(&server, NAMESPACE, &format!("tenant-{i}"))
                .and_then(|c| c.status)
                .is_some_and(|s| s.last_maintenance_outcome.as_deref() == Some("Succeeded"))
        })
    })
    .await;
    // The watch reads the changes behind the API: the last ones may still be on their way.
    wait_for("the watch saw every cluster's Jobs", || watched.lock().unwrap().clusters_seen.len() == 3).await;
    let seen = watched.lock().unwrap();
    assert_eq!(
        seen.clusters_seen,
        BTreeSet::from(["tenant-0".to_owned(), "tenant-1".into(), "tenant-2".into()]),
        "{:?}",
        controllers.jobs.log()
    );
    assert_eq!(
        seen.most_clusters_at_once,
        1,
        "never two clusters of the fleet with maintenance Jobs at once: {:?}",
        controllers.jobs.log()
    );
    drop(seen);
    watcher.abort();
}

/// A `Partitioned` cluster on real etcd, whose revisions are sequential: the clock check says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequential_revisions_under_a_partitioned_scheme_are_reported() {
    let _one_at_a_time = ETCD.lock().await;
    let Some(binary) = etcd_or_skip(EtcdVersion::V3_5) else {
        return;
    };
    let etcd = start_etcd(&binary).await;
    let server = api_server(controller_grants()).await;
    let mut cluster = fleet_cluster("system", etcd.client_urls(), "Partitioned", 0);
    cluster["spec"]["policy"]["compaction"] = json!({ "mode": "periodic", "retention": "10m" });
    server.create(&etcd_clusters(), Some(NAMESPACE), cluster).unwrap();
    let _controllers = start_controllers(&server, ControllerConfig::default());
    let clock = |server: &ApiServer| {
        cluster_of(server, NAMESPACE, "system")?
            .status?
            .conditions
            .into_iter()
            .find(|c| c.type_ == "ClockSkewed")
    };
    wait_for("a first observation", || clock(&server).is_some()).await;
    // One observation proves nothing about an old revision: it may just be an idle cluster.
    assert_eq!(clock(&server).unwrap().status, "False");

    // A write, then a spec change so that the cluster is observed again at once: the revision
    // moved since the last observation, yet its time is 1970.
    let mut client = etcd.client(None).await.unwrap();
    client.put("fleet/tick", "1", None).await.unwrap();
    let patch = json!({ "spec": { "partition": { "maxClockSkewMs": 4000 } } });
    server.patch(&etcd_clusters(), Some(NAMESPACE), "system", PatchFormat::Merge, &patch, false).unwrap();
    wait_for("ClockSkewed ClockBehind", || {
        clock(&server).is_some_and(|c| c.status == "True" && c.reason == "ClockBehind")
    })
    .await;
    let message = clock(&server).unwrap().message;
    assert!(
        message.contains("more than spec.partition.maxClockSkewMs 4000") && message.contains("fix its clock"),
        "{message}"
    );
    let status = cluster_of(&server, NAMESPACE, "system").unwrap().status.unwrap();
    let partition = status.partition.expect("status.partition");
    let revision = status.revision.unwrap();
    assert!(revision < 1 << 13, "small sequential revisions: {revision}");
    assert_eq!(partition.revision_timestamp_ms, Some(0));
    assert_eq!(partition.revision_cluster_id, Some(0));
    assert!(partition.clock_skew_ms.unwrap() < -1_700_000_000_000);
    let busiest = partition.busiest_millisecond.unwrap();
    assert_eq!(i64::from(busiest.event_number), revision, "event bits of a small revision");
    // The Event is published after the status is written: wait for it as for the condition.
    let clock_behind = |e: &Value| e["reason"] == "ClockBehind" && e["type"] == "Warning";
    wait_for("the ClockBehind Warning", || {
        server
            .list(&ResourceId::new("events.k8s.io", "v1", "events"), Some(NAMESPACE))
            .iter()
            .any(clock_behind)
    })
    .await;
    let events = server.list(&ResourceId::new("events.k8s.io", "v1", "events"), Some(NAMESPACE));
    let warnings: Vec<&Value> = events.iter().filter(|e| clock_behind(e)).collect();
    assert_eq!(warnings.len(), 1, "{events:#?}");
    // Compaction by time waits while the clock is behind (and its target, 10 minutes ago in
    // composite form, is far beyond these revisions anyway): no task.
    assert!(tasks_of(&server, "system").is_empty());

    // Another id in the spec than the revisions carry: reported as such.
    let patch = json!({ "spec": { "partition": { "clusterId": 5 } } });
    server.patch(&etcd_clusters(), Some(NAMESPACE), "system", PatchFormat::Merge, &patch, false).unwrap();
    wait_for("ClockSkewed ClusterIdMismatch", || {
        clock(&server).is_some_and(|c| c.status == "True" && c.reason == "ClusterIdMismatch")
    })
    .await;
    assert!(
        clock(&server)
            .unwrap()
            .message
            .contains("revision carries cluster id 0, not spec.partition.clusterId 5")
    );
}

fn storage_cluster(name: &str, id: &str, address: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "StorageCluster",
        "metadata": { "name": name },
        "storageClusterId": id, "serviceAddress": address,
    })
}

/// StorageClusters discovered: each becomes a Partitioned EtcdCluster it owns, kept in step,
/// observed; a new one is picked up; a broken one is told; a deleted one takes its EtcdCluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_clusters_are_discovered_as_partitioned_clusters_of_one_fleet() {
    let _one_at_a_time = ETCD.lock().await;
    let Some(binary) = etcd_or_skip(EtcdVersion::V3_5) else {
        return;
    };
    let etcd = start_etcd(&binary).await;
    let address = etcd.client_urls()[0].trim_start_matches("http://").to_owned();
    let server = api_server(controller_grants_with_storage_cluster_discovery()).await;
    server.create(&storage_clusters(), None, storage_cluster("c1", "1", &address)).unwrap();
    server.create(&storage_clusters(), None, storage_cluster("broken", "64", &address)).unwrap();
    let config = Config {
        etcd: EtcdConfig {
            storage_clusters: StorageClusterDiscovery { enabled: true, ..StorageClusterDiscovery::default() },
            ..EtcdConfig::default()
        },
        ..Config::default()
    };
    let _controllers = start_controllers(&server, config);
    let made = |name: &str| cluster_of(&server, "groundskeeper", &format!("storagecluster-{name}"));

    wait_for("c1's EtcdCluster made and observed", || {
        made("c1").and_then(|c| c.status).is_some_and(|s| s.healthy_members == Some(1))
    })
    .await;
    let c1 = made("c1").unwrap();
    assert_eq!(c1.spec.endpoints, vec![format!("http://{address}")]);
    let partition = c1.spec.partition.clone().unwrap();
    assert_eq!((partition.fleet.as_str(), partition.cluster_id), ("arktos", 1));
    assert_eq!(c1.metadata.owner_references.unwrap()[0].kind, "StorageCluster");
    // Real etcd's revisions carry cluster id 0: the check reports the scheme as not Arktos's.
    wait_for("c1's revisions reported", || {
        made("c1").and_then(|c| c.status).is_some_and(|s| {
            s.conditions.iter().any(|c| c.type_ == "ClockSkewed" && c.reason == "ClusterIdMismatch")
        })
    })
    .await;
    assert!(made("broken").is_none());
    wait_for("a Warning about the broken StorageCluster", || {
        server.list(&ResourceId::new("events.k8s.io", "v1", "events"), None).iter().any(|e| {
            e["regarding"]["name"] == "broken"
                && e["reason"] == "InvalidStorageCluster"
                && e["note"]
                    .as_str()
                    .is_some_and(|n| n.contains("storageClusterId \"64\" is not a whole number from 0 to 63"))
        })
    })
    .await;

    // A new StorageCluster is picked up; a moved one is followed; a fixed one is maintained.
    server.create(&storage_clusters(), None, storage_cluster("c2", "2", &address)).unwrap();
    let moved = json!({ "serviceAddress": "127.0.0.1:9" });
    server.patch(&storage_clusters(), None, "c1", PatchFormat::Merge, &moved, false).unwrap();
    let fixed = json!({ "storageClusterId": "3" });
    server.patch(&storage_clusters(), None, "broken", PatchFormat::Merge, &fixed, false).unwrap();
    wait_for("c2 made, c1 moved, broken fixed", || {
        made("c2").is_some_and(|c| c.spec.partition.unwrap().cluster_id == 2)
            && made("c1").is_some_and(|c| c.spec.endpoints == ["http://127.0.0.1:9"])
            && made("broken").is_some_and(|c| c.spec.partition.unwrap().cluster_id == 3)
    })
    .await;

    // Deleting a StorageCluster deletes its EtcdCluster (its dependent).
    server.delete(&storage_clusters(), None, "c2").unwrap();
    wait_for("c2's EtcdCluster gone", || made("c2").is_none()).await;
}
