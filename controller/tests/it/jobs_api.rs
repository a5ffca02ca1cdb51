//! The Job API layer at the HTTP level: method, path, query and body of every call.

use groundskeeper_protocol::OperationKind;
use groundskeeper_protocol::operation::{CompactRequest, CompactTo, EtcdTarget, Operation};

use groundskeeper_controller::jobs::{
    Created, JobState, MaintenanceJob, create_job, delete_job, job_selector, list_job_pods, observe_jobs,
};
use groundskeeper_controller::runtime::context::JobLimits;
use groundskeeper_controller::runtime::error::Error;
use groundskeeper_protocol::result::CompactReport;
use groundskeeper_protocol::{JobResult, Outcome, Report};
use http::{Method, StatusCode};

use crate::mock_api::{Exchange, scripted, status};
use serde_json::{Value, json};

/// A request of `method` on exactly `uri`, and its answer.
fn exchange(method: Method, uri: &str, status: StatusCode, response: Value) -> Exchange {
    Exchange::uri(method, uri, status.as_u16(), response)
}

fn plan() -> MaintenanceJob {
    MaintenanceJob {
        namespace: "etcd".into(),
        name: "compact-main-1".into(),
        owner: Default::default(),
        operation: Operation::Compact(CompactRequest {
            etcd: EtcdTarget::default(),
            to: CompactTo::Revision(1),
            physical: false,
            not_past: None,
        }),
        target: "main".into(),
        image: "img".into(),
        image_pull_policy: "Always".into(),
        limits: JobLimits::default(),
        node: None,
        extra_labels: Default::default(),
        annotations: Default::default(),
        secret_files: Vec::new(),
        claim_volumes: Vec::new(),
        secret_folders: Vec::new(),
        scratch: None,
        scheduling: Default::default(),
        resources: None,
    }
}

fn job_json(name: &str, uid: &str, conditions: Value) -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "etcd", "uid": uid, "resourceVersion": "7"},
        "status": {"conditions": conditions},
    })
}

#[tokio::test]
async fn create_posts_the_built_job() {
    let built = serde_json::to_value(groundskeeper_controller::jobs::build_job(&plan())).unwrap();
    let (client, server) = scripted(vec![
        exchange(
            Method::POST,
            "/apis/batch/v1/namespaces/etcd/jobs?",
            StatusCode::CREATED,
            job_json("compact-main-1", "u1", json!([])),
        )
        .with_body(built),
    ]);
    let created = create_job(&client, &plan()).await.unwrap();
    assert!(created.is_new());
    assert_eq!(created.job().metadata.uid.as_deref(), Some("u1"));
    server.seen().await;
}

#[tokio::test]
async fn create_of_an_existing_job_fetches_it() {
    let (client, server) = scripted(vec![
        exchange(
            Method::POST,
            "/apis/batch/v1/namespaces/etcd/jobs?",
            StatusCode::CONFLICT,
            status(409, "AlreadyExists", "jobs.batch \"compact-main-1\" already exists"),
        ),
        exchange(
            Method::GET,
            "/apis/batch/v1/namespaces/etcd/jobs/compact-main-1",
            StatusCode::OK,
            job_json("compact-main-1", "u-old", json!([])),
        ),
    ]);
    let created = create_job(&client, &plan()).await.unwrap();
    let Created::Existing(job) = created else { panic!("expected the existing Job") };
    assert_eq!(job.metadata.uid.as_deref(), Some("u-old"));
    server.seen().await;
}

#[tokio::test]
async fn create_errors_name_the_job() {
    let (client, server) = scripted(vec![exchange(
        Method::POST,
        "/apis/batch/v1/namespaces/etcd/jobs?",
        StatusCode::FORBIDDEN,
        status(403, "Forbidden", "jobs.batch is forbidden"),
    )]);
    let err = create_job(&client, &plan()).await.unwrap_err();
    assert!(matches!(err, Error::Kube { .. }));
    assert_eq!(err.api_status_code(), Some(403));
    assert!(err.to_string().contains("create Job etcd/compact-main-1"), "{err}");
    assert_eq!(err.metric_label(), "kube");
    server.seen().await;
}

#[tokio::test]
async fn observe_jobs_lists_jobs_then_pods_with_the_same_selector() {
    let selector = job_selector(OperationKind::Compact, "main");
    let encoded = "app.kubernetes.io%2Fmanaged-by%3Dgroundskeeper%2Cgroundskeeper.dev%2Foperation%3Dcompact%2Cgroundskeeper.dev%2Ftarget%3Dmain";
    let result = JobResult::new(
        Report::Compact(CompactReport {
            current_revision: 100,
            compacted_revision: 90,
            ..Default::default()
        }),
        Outcome::Succeeded,
        "2026-01-01T00:00:00Z".into(),
        3,
    );
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "compact-main-1-abcde", "namespace": "etcd",
                     "labels": {"batch.kubernetes.io/job-name": "compact-main-1"},
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "compact-main-1", "uid": "u1", "controller": true}]},
        "status": {"containerStatuses": [{"name": "groundskeeper-job", "image": "img", "imageID": "", "ready": false,
            "restartCount": 0, "state": {"terminated": {"exitCode": 0, "message": result.to_termination_message()}}}]},
    });
    let (client, server) = scripted(vec![
        exchange(
            Method::GET,
            &format!("/apis/batch/v1/namespaces/etcd/jobs?&labelSelector={encoded}"),
            StatusCode::OK,
            json!({"apiVersion": "batch/v1", "kind": "JobList", "metadata": {"resourceVersion": "9"}, "items": [
                job_json("compact-main-1", "u1", json!([{"type": "Complete", "status": "True", "reason": "CompletionsReached"}])),
                job_json("compact-main-2", "u2", json!([])),
            ]}),
        ),
        exchange(
            Method::GET,
            &format!("/api/v1/namespaces/etcd/pods?&labelSelector={encoded}"),
            StatusCode::OK,
            json!({"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "9"}, "items": [pod]}),
        ),
    ]);
    let observations = observe_jobs(&client, "etcd", &selector).await.unwrap();
    assert_eq!(observations.len(), 2);
    let JobState::Succeeded(finished) = &observations[0].state else { panic!("{:?}", observations[0]) };
    assert_eq!(finished.result.as_ref().unwrap(), &result);
    assert!(matches!(observations[1].state, JobState::Running(_)));
    server.seen().await;
}

#[tokio::test]
async fn observe_jobs_skips_the_pod_list_when_there_is_no_job() {
    let (client, server) = scripted(vec![exchange(
        Method::GET,
        "/apis/batch/v1/namespaces/etcd/jobs?&labelSelector=a%3Db",
        StatusCode::OK,
        json!({"apiVersion": "batch/v1", "kind": "JobList", "metadata": {}, "items": []}),
    )]);
    assert!(observe_jobs(&client, "etcd", "a=b").await.unwrap().is_empty());
    server.seen().await;
}

#[tokio::test]
async fn job_pods_are_listed_by_the_job_name_label() {
    let (client, server) = scripted(vec![exchange(
        Method::GET,
        "/api/v1/namespaces/etcd/pods?&labelSelector=batch.kubernetes.io%2Fjob-name%3Dcompact-main-1",
        StatusCode::OK,
        json!({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": []}),
    )]);
    assert!(list_job_pods(&client, "etcd", "compact-main-1").await.unwrap().is_empty());
    server.seen().await;
}

#[tokio::test]
async fn delete_propagates_in_the_background_and_tolerates_a_gone_job() {
    let background = json!({"propagationPolicy": "Background"});
    let (client, server) = scripted(vec![
        exchange(
            Method::DELETE,
            "/apis/batch/v1/namespaces/etcd/jobs/compact-main-1?",
            StatusCode::OK,
            job_json("compact-main-1", "u1", json!([])),
        )
        .with_body(background.clone()),
        exchange(
            Method::DELETE,
            "/apis/batch/v1/namespaces/etcd/jobs/compact-main-1?",
            StatusCode::NOT_FOUND,
            status(404, "NotFound", "jobs.batch \"compact-main-1\" not found"),
        )
        .with_body(background),
    ]);
    assert!(delete_job(&client, "etcd", "compact-main-1").await.unwrap());
    assert!(!delete_job(&client, "etcd", "compact-main-1").await.unwrap());
    server.seen().await;
}
