//! Against a real Kubernetes cluster, only when `KUBECONFIG` is set (otherwise each test prints
//! "skipped: KUBECONFIG not set" and passes). Small on purpose: the CRDs apply and become
//! Established, and the cleanup controller creates a cleanup Job for a fake ScyllaCluster.
//! Everything is created in a throwaway namespace that is deleted at the end; CRDs stay.

use std::sync::Arc;
use std::time::Duration;

use groundskeeper_controller::runtime::context::{Context, ControllerConfig};
use groundskeeper_controller::runtime::metrics::Metrics;
use groundskeeper_protocol::keys;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Secret, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
    PostParams,
};
use serde_json::{Value, json};

/// Guards against waiting forever on a broken cluster; not a performance bound.
const GUARD: Duration = Duration::from_secs(120);

async fn client_or_skip() -> Option<kube::Client> {
    if std::env::var_os("KUBECONFIG").is_none() {
        println!("skipped: KUBECONFIG not set");
        return None;
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    Some(kube::Client::try_default().await.expect("a client from KUBECONFIG"))
}

fn crd_files() -> Vec<std::path::PathBuf> {
    let ours = concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests/crds");
    let mut files: Vec<_> = std::fs::read_dir(ours)
        .expect("manifests/crds exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml") && !p.ends_with("kustomization.yaml"))
        .collect();
    // scylla-operator's own CRDs, applied only where the cluster has none yet.
    if let Some(scylla) = groundskeeper_e2e::reference::scylla_dir("real_cluster") {
        for name in ["scyllaclusters.crd.yaml", "scylladbdatacenters.crd.yaml"] {
            files.push(scylla.join(name));
        }
    }
    files
}

async fn wait_until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let guard = tokio::time::Instant::now() + GUARD;
    while !check().await {
        assert!(tokio::time::Instant::now() < guard, "never reached: {what}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Applies our CRDs (server-side apply) and scylla-operator's where the cluster has none yet,
/// and waits until each is Established.
async fn ensure_crds(client: &kube::Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for path in crd_files() {
        let text = std::fs::read_to_string(&path).unwrap();
        let crd: Value = serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let name = crd["metadata"]["name"].as_str().unwrap().to_string();
        let ours = path.starts_with(concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests/crds"));
        if ours || crds.get_opt(&name).await.unwrap().is_none() {
            crds.patch(&name, &PatchParams::apply("groundskeeper-e2e").force(), &Patch::Apply(&crd))
                .await
                .unwrap_or_else(|e| panic!("apply CRD {name}: {e}"));
        }
        wait_until(&format!("CRD {name} Established"), || {
            let crds = crds.clone();
            let name = name.clone();
            async move {
                let crd = crds.get(&name).await.unwrap();
                crd.status
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            }
        })
        .await;
    }
}

#[tokio::test]
async fn crds_apply_and_become_established() {
    let Some(client) = client_or_skip().await else {
        return;
    };
    ensure_crds(&client).await;
}

#[tokio::test]
async fn controller_creates_a_cleanup_job_for_a_fake_cluster() {
    let Some(client) = client_or_skip().await else {
        return;
    };
    ensure_crds(&client).await;
    let suffix = std::process::id();
    let ns = format!("groundskeeper-e2e-{suffix}");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace: Namespace = serde_json::from_value(json!({ "metadata": { "name": ns } })).unwrap();
    namespaces.create(&PostParams::default(), &namespace).await.unwrap();

    let outcome = tokio::spawn(create_fake_cluster_and_wait_for_job(client.clone(), ns.clone())).await;
    namespaces.delete(&ns, &DeleteParams::background()).await.unwrap();
    outcome.unwrap();
}

async fn create_fake_cluster_and_wait_for_job(client: kube::Client, ns: String) {
    let (cluster, service) = ("fake", "fake-dc-a-0");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let secret: Secret = serde_json::from_value(json!({
        "metadata": { "name": format!("{cluster}-auth-token") },
        "stringData": { keys::SCYLLA_AGENT_TOKEN_SECRET_KEY: "auth_token: not-a-real-token\n" }
    }))
    .unwrap();
    secrets.create(&PostParams::default(), &secret).await.unwrap();

    let gvk = GroupVersionKind::gvk("scylla.scylladb.com", "v1", "ScyllaCluster");
    let clusters: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &ns, &ApiResource::from_gvk_with_plural(&gvk, "scyllaclusters"));
    let sc: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "scylla.scylladb.com/v1", "kind": "ScyllaCluster",
        "metadata": { "name": cluster },
        "spec": { "version": "6.2.0", "agentVersion": "3.4.0",
                  "datacenter": { "name": "dc", "racks": [{ "name": "a", "members": 1, "storage": { "capacity": "1Gi" } }] } }
    }))
    .unwrap();
    let sc = clusters.create(&PostParams::default(), &sc).await.unwrap();
    let condition = |type_: &str, status: &str| {
        json!({ "type": type_, "status": status, "reason": "AsExpected", "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": sc.metadata.generation })
    };
    let status = json!({ "status": {
        "observedGeneration": sc.metadata.generation,
        "conditions": [condition("Available", "True"), condition("Degraded", "False"),
                       condition("Progressing", "False"), condition("StatefulSetControllerProgressing", "False")]
    }});
    clusters.patch_status(cluster, &PatchParams::default(), &Patch::Merge(status)).await.unwrap();

    let current = groundskeeper_protocol::ring_hash::ring_hash(&["-2", "-1", "0", "1"]).unwrap();
    let last = groundskeeper_protocol::ring_hash::ring_hash(&["-1", "0", "1"]).unwrap();
    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    let svc: Service = serde_json::from_value(json!({
        "metadata": {
            "name": service,
            "labels": { keys::SCYLLA_CLUSTER_LABEL: cluster, keys::SCYLLA_DATACENTER_LABEL: "dc",
                        keys::SCYLLA_RACK_LABEL: "a", keys::SCYLLA_SERVICE_TYPE_LABEL: keys::SCYLLA_SERVICE_TYPE_MEMBER },
            "annotations": { keys::CURRENT_TOKEN_RING_HASH: current, keys::LAST_CLEANED_UP_TOKEN_RING_HASH: last }
        },
        "spec": { "clusterIP": "None", "ports": [{ "name": "agent-api", "port": keys::SCYLLA_AGENT_PORT }] }
    }))
    .unwrap();
    services.create(&PostParams::default(), &svc).await.unwrap();

    let ctx = Arc::new(Context::new(client.clone(), ControllerConfig::default(), Arc::new(Metrics::new())));
    let trigger = tokio::spawn(groundskeeper_controller::scylla::controller::run(ctx.clone()));
    let tasks = tokio::spawn(groundskeeper_controller::run_task_controller(ctx));
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
    let selector = format!("{}={service}", keys::NODE_LABEL);
    wait_until(&format!("a cleanup Job of node {service} created"), || {
        let jobs = jobs.clone();
        let selector = selector.clone();
        async move { !jobs.list(&ListParams::default().labels(&selector)).await.unwrap().items.is_empty() }
    })
    .await;
    trigger.abort();
    tasks.abort();
    let job = jobs.list(&ListParams::default().labels(&selector)).await.unwrap().items.remove(0);
    let annotations = job.metadata.annotations.unwrap_or_default();
    assert_eq!(annotations.get(keys::CLEANUP_TOKEN_RING_HASH), Some(&current));
    let owner = &job.metadata.owner_references.unwrap_or_default()[0];
    assert_eq!(owner.kind, "MaintenanceTask", "a task's Job");
    assert!(owner.name.starts_with(&format!("{cluster}-cleanup-")), "{}", owner.name);
}
