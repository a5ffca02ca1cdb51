//! Fleets of partitioned etcd clusters on the in-memory Kubernetes API: two EtcdClusters of one
//! fleet (in different namespaces) that claim the same cluster id are both reported — Degraded
//! naming the other, a Warning Event — and neither gets maintenance; giving one another id clears
//! it. No etcd is needed: a disputed cluster is not even observed.

use std::sync::Arc;
use std::time::Duration;

use groundskeeper_controller::runtime::context::{Context, ControllerConfig};
use groundskeeper_controller::runtime::metrics::Metrics;
use groundskeeper_controller::triggers::etcd;
use groundskeeper_e2e::apiserver::rbac::{CONTROLLER_TOKEN, controller_grants};
use groundskeeper_e2e::apiserver::{ApiServer, PatchFormat, ResourceId};
use serde_json::{Value, json};

/// Guards against a scenario that never converges; not a performance bound.
const GUARD: Duration = Duration::from_secs(60);

fn etcd_clusters() -> ResourceId {
    ResourceId::new("groundskeeper.dev", "v1alpha1", "etcdclusters")
}

fn cluster(namespace: &str, name: &str, cluster_id: i64) -> Value {
    json!({
        "apiVersion": "groundskeeper.dev/v1alpha1", "kind": "EtcdCluster",
        "metadata": { "name": name, "namespace": namespace },
        "spec": {
            // Nothing listens there: a cluster that is maintained would be reported unhealthy.
            "endpoints": ["http://127.0.0.1:9"],
            "partition": { "fleet": "arktos", "clusterId": cluster_id, "revisionScheme": "Partitioned" },
            "policy": { "compaction": { "mode": "periodic", "retention": "1h" } }
        }
    })
}

fn degraded(server: &ApiServer, namespace: &str, name: &str) -> Option<(String, String)> {
    let object = server.get(&etcd_clusters(), Some(namespace), name)?;
    let conditions = object["status"]["conditions"].as_array()?.clone();
    let c = conditions
        .iter()
        .find(|c| c["type"] == etcd::decide::DEGRADED && c["status"] == "True")?;
    Some((
        c["reason"].as_str()?.to_owned(),
        c["message"].as_str()?.to_owned(),
    ))
}

async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let guard = tokio::time::Instant::now() + GUARD;
    while !done() {
        assert!(tokio::time::Instant::now() < guard, "never reached: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clusters_claiming_one_fleet_id_are_both_reported_and_left_alone() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let server = Arc::new(
        ApiServer::builder()
            .authorize(CONTROLLER_TOKEN, controller_grants())
            .start()
            .await
            .unwrap(),
    );
    server
        .create(&etcd_clusters(), Some("system"), cluster("system", "system", 0))
        .unwrap();
    server
        .create(&etcd_clusters(), Some("system"), cluster("system", "tenant-a", 1))
        .unwrap();
    server
        .create(
            &etcd_clusters(),
            Some("tenants"),
            cluster("tenants", "tenant-b", 1),
        )
        .unwrap();
    let ctx = Arc::new(Context::new(
        server.client_with_token(CONTROLLER_TOKEN),
        ControllerConfig {
            requeue_busy: Duration::from_secs(1),
            ..ControllerConfig::default()
        },
        Arc::new(Metrics::new()),
    ));
    let trigger = tokio::spawn(etcd::run(ctx));

    let collision = |namespace: &str, name: &str| {
        degraded(&server, namespace, name)
            .filter(|(reason, _)| reason == etcd::decide::PARTITION_ID_COLLISION)
    };
    wait_for("both claimants of id 1 reported", || {
        collision("system", "tenant-a").is_some() && collision("tenants", "tenant-b").is_some()
    })
    .await;
    let (_, message) = collision("system", "tenant-a").unwrap();
    assert!(
        message.contains("also claimed by EtcdCluster tenants/tenant-b"),
        "{message}"
    );
    let (_, message) = collision("tenants", "tenant-b").unwrap();
    assert!(
        message.contains("also claimed by EtcdCluster system/tenant-a"),
        "{message}"
    );
    wait_for(
        "the cluster with an id of its own is maintained (and finds its endpoint dead)",
        || {
            degraded(&server, "system", "system")
                .is_some_and(|(reason, _)| reason != etcd::decide::PARTITION_ID_COLLISION)
        },
    )
    .await;
    let events = server.list(&ResourceId::new("events.k8s.io", "v1", "events"), None);
    for name in ["tenant-a", "tenant-b"] {
        assert!(
            events.iter().any(|e| e["regarding"]["name"] == name
                && e["reason"] == "PartitionIdCollision"
                && e["type"] == "Warning"),
            "a Warning Event about {name}: {events:#?}"
        );
    }
    let tasks = server.list(
        &ResourceId::new("groundskeeper.dev", "v1alpha1", "maintenancetasks"),
        None,
    );
    assert!(tasks.is_empty(), "no maintenance while ids collide: {tasks:#?}");

    // tenant-b takes an id of its own: its spec changed, so it is looked at again at once.
    let patch = json!({ "spec": { "partition": { "fleet": "arktos", "clusterId": 2, "revisionScheme": "Partitioned" } } });
    server
        .patch(
            &etcd_clusters(),
            Some("tenants"),
            "tenant-b",
            PatchFormat::Merge,
            &patch,
            false,
        )
        .unwrap();
    wait_for("tenant-b no longer reports a collision", || {
        collision("tenants", "tenant-b").is_none() && degraded(&server, "tenants", "tenant-b").is_some()
    })
    .await;
    trigger.abort();
}
