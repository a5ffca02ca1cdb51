//! From a MaintenanceTask's creation to its first Job (not a test: figures for the README).
//!
//! The task controller runs against the in-memory Kubernetes API with the RBAC of
//! `manifests/`; 200 EtcdClusters exist, and one task is created on each, one after the
//! other. For each, the time from the create call returning to the task's Job being in the
//! store. The controller's idle requeue is 5 minutes, so only its watch can wake it this fast.
//!
//! Run: `cargo bench -p groundskeeper-e2e --bench task_latency`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use groundskeeper_controller::runtime::context::{Context, ControllerConfig};
use groundskeeper_controller::runtime::metrics::Metrics;
use groundskeeper_e2e::apiserver::rbac::{CONTROLLER_TOKEN, controller_grants};
use groundskeeper_e2e::apiserver::{ApiServer, ResourceId};
use k8s_openapi::api::batch::v1::Job;
use serde_json::json;

const TASKS: usize = 200;
const NAMESPACE: &str = "etcd";

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(measure());
}

async fn measure() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let server = Arc::new(
        ApiServer::builder()
            .authorize(CONTROLLER_TOKEN, controller_grants())
            .start()
            .await
            .expect("the API server"),
    );
    let clusters = ResourceId::new("groundskeeper.dev", "v1alpha1", "etcdclusters");
    let tasks = ResourceId::new("groundskeeper.dev", "v1alpha1", "maintenancetasks");
    for i in 0..TASKS {
        let cluster = json!({"apiVersion": "groundskeeper.dev/v1alpha1", "kind": "EtcdCluster",
            "metadata": {"name": format!("c{i}"), "namespace": NAMESPACE},
            "spec": {"endpoints": ["http://127.0.0.1:1"], "policy": {"enabled": false}}});
        server.create(&clusters, Some(NAMESPACE), cluster).expect("an EtcdCluster");
    }
    let ctx = Arc::new(Context::new(
        server.client_with_token(CONTROLLER_TOKEN),
        ControllerConfig::default(),
        Arc::new(Metrics::new()),
    ));
    let controller = tokio::spawn(groundskeeper_controller::run_task_controller(ctx));
    tokio::time::sleep(Duration::from_millis(500)).await; // its watches are up
    let jobs = ResourceId::of::<Job>();
    let mut latencies = Vec::with_capacity(TASKS);
    for i in 0..TASKS {
        let task = json!({"apiVersion": "groundskeeper.dev/v1alpha1", "kind": "MaintenanceTask",
            "metadata": {"name": format!("t{i}"), "namespace": NAMESPACE},
            "spec": {"target": {"kind": "EtcdCluster", "name": format!("c{i}")}, "type": "Defragment"}});
        server.create(&tasks, Some(NAMESPACE), task).expect("a task");
        let created = Instant::now();
        let job = format!("t{i}-0");
        while server.get(&jobs, Some(NAMESPACE), &job).is_none() {
            assert!(created.elapsed() < Duration::from_secs(30), "no Job for task t{i}");
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        latencies.push(created.elapsed());
    }
    controller.abort();
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
    println!(
        "task created → its first Job, {TASKS} tasks one after the other: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        ms(at(0.5)),
        ms(at(0.99)),
        ms(*latencies.last().unwrap())
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
