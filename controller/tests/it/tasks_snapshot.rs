//! A Snapshot task through the task controller at the HTTP level: the claim is checked before
//! anything is written; a missing one keeps the task Pending naming it; an existing one gets the
//! Job that mounts it writable (non-root, read-only root file system, no token) and runs the
//! snapshot with the file name rendered from the task's start and retention.

use groundskeeper_e2e::fixtures;
use std::sync::Arc;

use groundskeeper_api::maintenance_task::MaintenanceTask;
use groundskeeper_controller::runtime::context::Context;
use groundskeeper_controller::tasks::controller::reconcile_at;
use http::{Method, StatusCode};
use jiff::Timestamp;
use serde_json::{Value, json};

use crate::mock_api::{Exchange, Server, assert_no_more_requests, scripted_context};

const TASKS: &str = "/apis/groundskeeper.dev/v1alpha1/namespaces/etcd/maintenancetasks";
const TASK_STATUS: &str = "/apis/groundskeeper.dev/v1alpha1/namespaces/etcd/maintenancetasks/snap/status";
const CLUSTER: &str = "/apis/groundskeeper.dev/v1alpha1/namespaces/etcd/etcdclusters/main";
const CLAIM: &str = "/api/v1/namespaces/etcd/persistentvolumeclaims/main-snapshots";
const SUSPENSIONS: &str = "/apis/groundskeeper.dev/v1alpha1/namespaces/etcd/maintenancesuspensions";
const JOBS: &str = "/apis/batch/v1/namespaces/etcd/jobs";

/// Method and path of one request, and the answer it gets.
type Step = (Method, &'static str, StatusCode, Value);

/// A context whose API server answers `script` in order.
fn scripted(script: Vec<Step>) -> (Arc<Context>, Server) {
    scripted_context(
        script
            .into_iter()
            .map(|(method, path, status, response)| Exchange::new(method, path, status.as_u16(), response))
            .collect(),
    )
}

fn now() -> Timestamp {
    "2026-03-01T12:00:00.750Z".parse().unwrap()
}

fn task() -> Value {
    fixtures::task("etcd", "snap", "Snapshot")
        .config(json!({"retain": 2}))
        .metadata("uid", "task-uid")
        .metadata("generation", 1)
        .metadata("creationTimestamp", "2026-03-01T11:59:00Z")
        .json()
}

fn list(items: Vec<Value>) -> Value {
    json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": "1"}, "items": items})
}

fn cluster() -> Value {
    json!({
        "apiVersion": "groundskeeper.dev/v1alpha1",
        "kind": "EtcdCluster",
        "metadata": {"name": "main", "namespace": "etcd", "uid": "cluster-uid"},
        "spec": {"endpoints": ["http://etcd-0:2379", "http://etcd-1:2379"]},
    })
}

fn not_found(what: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404, "reason": "NotFound", "message": format!("{what} not found")})
}

fn task_object() -> MaintenanceTask {
    serde_json::from_value(task()).unwrap()
}

#[tokio::test]
async fn a_missing_claim_keeps_the_task_pending_naming_the_claim_and_makes_no_job() {
    let (ctx, server) = scripted(vec![
        (Method::GET, TASKS, StatusCode::OK, list(vec![task()])),
        (Method::GET, CLUSTER, StatusCode::OK, cluster()),
        (Method::GET, SUSPENSIONS, StatusCode::OK, list(vec![])),
        (Method::GET, CLAIM, StatusCode::NOT_FOUND, not_found("persistentvolumeclaims \"main-snapshots\"")),
        (Method::PATCH, TASK_STATUS, StatusCode::OK, task()),
    ]);
    reconcile_at(&task_object(), &ctx, &groundskeeper_controller::task_targets(), now()).await.unwrap();
    let seen = assert_no_more_requests(ctx, server).await;
    let status = &seen[4].body["status"];
    assert_eq!(status["state"], "Pending");
    let queued = status["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Queued").unwrap();
    assert_eq!(queued["status"], "True");
    assert_eq!(queued["reason"], "WaitingForTarget");
    let message = queued["message"].as_str().unwrap();
    assert!(
        message.contains("PersistentVolumeClaim main-snapshots does not exist in namespace etcd"),
        "{message}"
    );
    assert!(message.contains("Create it"), "{message}");
}

#[tokio::test]
async fn an_existing_claim_gets_the_snapshot_job_mounting_it() {
    let claim = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "main-snapshots", "namespace": "etcd"}});
    let (ctx, server) = scripted(vec![
        (Method::GET, TASKS, StatusCode::OK, list(vec![task()])),
        (Method::GET, CLUSTER, StatusCode::OK, cluster()),
        (Method::GET, SUSPENSIONS, StatusCode::OK, list(vec![])),
        (Method::GET, CLAIM, StatusCode::OK, claim),
        (Method::PATCH, TASK_STATUS, StatusCode::OK, task()),
        (Method::GET, JOBS, StatusCode::OK, list(vec![])),
        (
            Method::POST,
            JOBS,
            StatusCode::CREATED,
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "snap-0", "namespace": "etcd"}}),
        ),
        (Method::PATCH, TASK_STATUS, StatusCode::OK, task()),
    ]);
    reconcile_at(&task_object(), &ctx, &groundskeeper_controller::task_targets(), now()).await.unwrap();
    let seen = assert_no_more_requests(ctx, server).await;
    assert_eq!(seen[4].body["status"]["state"], "InProgress");
    let job = &seen[6].body;
    assert_eq!(job["metadata"]["name"], "snap-0");
    assert_eq!(job["metadata"]["labels"]["groundskeeper.dev/operation"], "snapshot");
    let pod = &job["spec"]["template"]["spec"];
    // Named by the task's start, to the second: a restart renders the same name.
    let args: Vec<&str> =
        pod["containers"][0]["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert_eq!(
        args,
        [
            "snapshot",
            "--endpoints",
            "http://etcd-0:2379,http://etcd-1:2379",
            "--output",
            "/snapshots/main-20260301T120000Z.db",
            "--retain",
            "2",
            "--file-name-template",
            "{cluster}-{time}.db",
            "--cluster",
            "main",
        ]
    );
    let claim_volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v.get("persistentVolumeClaim").is_some())
        .expect("a claim volume");
    assert_eq!(claim_volume["persistentVolumeClaim"]["claimName"], "main-snapshots");
    assert_eq!(claim_volume["persistentVolumeClaim"]["readOnly"], false);
    let mount = pod["containers"][0]["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == claim_volume["name"])
        .expect("the claim is mounted");
    assert_eq!(mount["mountPath"], "/snapshots");
    assert_eq!(mount["readOnly"], false);
    // Hardening as for every Job, and a group the fresh volume is made writable for.
    assert_eq!(pod["automountServiceAccountToken"], false);
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(pod["securityContext"]["fsGroup"], 65532);
    assert_eq!(pod["securityContext"]["fsGroupChangePolicy"], "OnRootMismatch");
    let container = &pod["containers"][0]["securityContext"];
    assert_eq!(container["readOnlyRootFilesystem"], true);
    assert_eq!(container["allowPrivilegeEscalation"], false);
    assert_eq!(container["capabilities"]["drop"], json!(["ALL"]));
    // The task shows where its snapshot goes while the Job runs.
    let snapshot = &seen[7].body["status"]["snapshot"];
    assert_eq!(snapshot["persistentVolumeClaim"], "main-snapshots");
    assert_eq!(snapshot["file"], "main-20260301T120000Z.db");
}
