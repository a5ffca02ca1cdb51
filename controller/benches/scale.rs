//! Scale benchmark of the cleanup trigger's decisions (not a test: figures for the README).
//!
//! 1,000 ScyllaClusters × 9 member Services (3 racks × 3 nodes), half of them just scaled out so
//! their old nodes need cleanup; half of those have their cleanup task running already, the
//! others get one submitted. Measures:
//! * the time to turn cached objects into a snapshot and decide, for all 1,000 clusters;
//! * the memory the controller needs to hold those objects cached (reflector stores of the
//!   ScyllaClusters, their member Services and the Cleanup tasks), counted by a global allocator.
//!
//! Run: `cargo bench -p groundskeeper-controller --bench scale`.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use groundskeeper_api::maintenance_task::MaintenanceTask;
use groundskeeper_api::scylla::ScyllaCluster;
use groundskeeper_controller::scylla::decide::{Action, SecretState, decide};
use groundskeeper_controller::scylla::observe::build_snapshot;
use groundskeeper_protocol::{keys, ring_hash};
use k8s_openapi::api::core::v1::Service;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;
use serde_json::json;

const CLUSTERS: usize = 1_000;
const RACKS: [&str; 3] = ["a", "b", "c"];
const NODES_PER_RACK: usize = 3;
const ROUNDS: usize = 20;

mod common;
use common::{Counting, LIVE, PEAK};

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn hash(seed: usize) -> String {
    let tokens: Vec<String> =
        (0..256).map(|i| ((seed * 7919 + i) as i64 * 36_028_797_018_963).to_string()).collect();
    ring_hash(&tokens).expect("decimal tokens")
}

fn cluster(i: usize) -> ScyllaCluster {
    let racks: Vec<_> = RACKS
        .iter()
        .map(|rack| {
            json!({
                "name": rack, "members": NODES_PER_RACK,
                "storage": {"capacity": "500Gi", "storageClassName": "local-nvme"},
                "resources": {"requests": {"cpu": "4", "memory": "16Gi"}, "limits": {"cpu": "4", "memory": "16Gi"}},
                "placement": {
                    "tolerations": [{"key": "role", "operator": "Equal", "value": "scylla", "effect": "NoSchedule"}],
                    "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": [format!("zone-{rack}")]}]}
                    ]}}
                }
            })
        })
        .collect();
    let condition = |type_: &str, status: &str| {
        json!({"type": type_, "status": status, "reason": "AsExpected", "message": "",
               "observedGeneration": 3, "lastTransitionTime": "2026-11-01T00:00:00Z"})
    };
    serde_json::from_value(json!({
        "apiVersion": "scylla.scylladb.com/v1", "kind": "ScyllaCluster",
        "metadata": {"name": format!("sc-{i:04}"), "namespace": format!("ns-{i:04}"), "uid": format!("uid-{i}"),
                     "generation": 3, "resourceVersion": "1000"},
        "spec": {"version": "6.2.0", "agentVersion": "3.4.0", "developerMode": false,
                 "datacenter": {"name": "dc1", "racks": racks}},
        "status": {"observedGeneration": 3, "conditions": [
            condition("Available", "True"), condition("Progressing", "False"), condition("Degraded", "False"),
            condition("StatefulSetControllerProgressing", "False"), condition("StatefulSetControllerAvailable", "True"),
        ]}
    }))
    .expect("valid ScyllaCluster")
}

/// Member Services of cluster `i`; in odd clusters the ring moved after a scale-out.
fn members(i: usize) -> Vec<Service> {
    let (cluster, namespace) = (format!("sc-{i:04}"), format!("ns-{i:04}"));
    let (old, new) = (hash(i), hash(i + 100_000));
    let ports: Vec<_> = [9042, 9142, 7000, 7001, 9180, 10001, 19042]
        .iter()
        .map(|p| json!({"name": format!("port-{p}"), "port": p, "protocol": "TCP"}))
        .collect();
    let mut services = Vec::new();
    for rack in RACKS {
        for ordinal in 0..NODES_PER_RACK {
            let scaled = i % 2 == 1;
            let current = if scaled { &new } else { &old };
            services.push(
                serde_json::from_value(json!({
                    "apiVersion": "v1", "kind": "Service",
                    "metadata": {
                        "name": format!("{cluster}-dc1-{rack}-{ordinal}"), "namespace": namespace,
                        "uid": format!("svc-{i}-{rack}-{ordinal}"), "resourceVersion": "1000",
                        "labels": {
                            keys::SCYLLA_CLUSTER_LABEL: cluster, keys::SCYLLA_DATACENTER_LABEL: "dc1",
                            keys::SCYLLA_RACK_LABEL: rack, keys::SCYLLA_SERVICE_TYPE_LABEL: keys::SCYLLA_SERVICE_TYPE_MEMBER,
                            "app": "scylla", "app.kubernetes.io/managed-by": "scylla-operator",
                            "statefulset.kubernetes.io/pod-name": format!("{cluster}-dc1-{rack}-{ordinal}"),
                        },
                        "annotations": {
                            keys::CURRENT_TOKEN_RING_HASH: current,
                            keys::LAST_CLEANED_UP_TOKEN_RING_HASH: old,
                        }
                    },
                    "spec": {"type": "ClusterIP", "clusterIP": format!("10.{}.{}.{}", i / 250, i % 250, ordinal + 3),
                             "publishNotReadyAddresses": true,
                             "ports": ports}
                }))
                .expect("valid Service"),
            );
        }
    }
    services
}

/// A Cleanup task running on every other scaled cluster.
fn running_task(i: usize) -> Option<MaintenanceTask> {
    (i % 4 == 1).then(|| {
        serde_json::from_value(json!({
            "apiVersion": "groundskeeper.dev/v1alpha1", "kind": "MaintenanceTask",
            "metadata": {"name": format!("sc-{i:04}-cleanup-1700000000"), "namespace": format!("ns-{i:04}"),
                         "uid": format!("task-{i}"), "resourceVersion": "1000",
                         "creationTimestamp": "2026-11-21T12:00:00Z",
                         "labels": {keys::MANAGED_BY_LABEL: keys::MANAGED_BY, keys::ORIGIN_LABEL: keys::ORIGIN_AUTOMATIC},
                         "annotations": {keys::CLEANUP_TOKEN_RING_HASH: hash(i + 100_000)}},
            "spec": {"target": {"kind": "ScyllaCluster", "name": format!("sc-{i:04}")}, "type": "Cleanup",
                     "config": {"cleanup": {"nodes": RACKS.iter().map(|r| format!("sc-{i:04}-dc1-{r}-0")).collect::<Vec<_>>()}}},
            "status": {"state": "InProgress", "progress": "0/3", "startedAt": "2026-11-21T12:00:00Z"}
        }))
        .expect("valid MaintenanceTask")
    })
}

fn cached<K>(objects: Vec<K>) -> Store<K>
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let (store, mut writer) = reflector::store();
    for object in objects {
        writer.apply_watcher_event(&watcher::Event::Apply(object));
    }
    store
}

fn main() {
    // Everything allocated from here to the stores being filled is what the cache holds: the
    // objects themselves are built, then moved into the stores.
    let before = LIVE.load(Ordering::Relaxed);
    let clusters: Vec<_> = (0..CLUSTERS).map(cluster).collect();
    let services: Vec<_> = (0..CLUSTERS).flat_map(members).collect();
    let tasks: Vec<_> = (0..CLUSTERS).filter_map(running_task).collect();
    let (n_clusters, n_services, n_tasks) = (clusters.len(), services.len(), tasks.len());
    let stores = (cached(clusters), cached(services), cached(tasks));
    let cached_bytes = LIVE.load(Ordering::Relaxed) - before;

    // Group the cached objects per cluster once, as the controller's reads would return them.
    let (cluster_store, service_store, task_store) = &stores;
    let per_cluster: Vec<_> = cluster_store
        .state()
        .into_iter()
        .map(|sc| {
            let name = sc.metadata.name.clone().unwrap_or_default();
            let services: Vec<Service> = service_store
                .state()
                .iter()
                .filter(|s| {
                    s.metadata.labels.as_ref().and_then(|l| l.get(keys::SCYLLA_CLUSTER_LABEL)) == Some(&name)
                })
                .map(|s| (**s).clone())
                .collect();
            let tasks: Vec<MaintenanceTask> = task_store
                .state()
                .iter()
                .filter(|t| t.spec.target.name == name)
                .map(|t| (**t).clone())
                .collect();
            (sc, services, tasks)
        })
        .collect();

    let now = jiff::Timestamp::now();
    let mut rounds = Vec::with_capacity(ROUNDS);
    let mut submitted = 0;
    for _ in 0..ROUNDS {
        let started = Instant::now();
        submitted = 0;
        for (sc, services, tasks) in &per_cluster {
            let snapshot = build_snapshot(sc, services, tasks, SecretState::Present, now);
            let plan = decide(std::hint::black_box(&snapshot));
            submitted +=
                plan.actions.iter().filter(|a| matches!(a, Action::SubmitCleanupTask { .. })).count();
        }
        rounds.push(started.elapsed());
    }
    rounds.sort();
    let median = rounds[ROUNDS / 2];
    let per_cluster_us = median.as_secs_f64() * 1e6 / CLUSTERS as f64;

    println!("cleanup trigger scale benchmark");
    println!(
        "  objects cached: {n_clusters} ScyllaClusters, {n_services} member Services, {n_tasks} Cleanup tasks"
    );
    println!("  memory held by the reflector stores: {:.1} MiB", cached_bytes as f64 / (1024.0 * 1024.0));
    println!(
        "  observe+decide for all {CLUSTERS} clusters: median {} (min {}, max {}) over {ROUNDS} rounds",
        ms(median),
        ms(rounds[0]),
        ms(rounds[ROUNDS - 1])
    );
    println!("  per cluster: {per_cluster_us:.1} µs; Cleanup tasks submitted per round: {submitted}");
    println!(
        "  peak heap of the whole benchmark: {:.1} MiB",
        PEAK.load(Ordering::Relaxed) as f64 / (1024.0 * 1024.0)
    );
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}
