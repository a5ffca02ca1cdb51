//! The Job path against the in-memory API server: create (and create again), observe with a pod
//! the kubelet would have written, delete.

use groundskeeper_controller::jobs::{
    JobState, MaintenanceJob, create_job, delete_job, job_selector, observe_jobs,
};
use groundskeeper_controller::runtime::context::JobLimits;
use groundskeeper_e2e::apiserver::{ApiServer, PatchFormat, ResourceId};
use groundskeeper_protocol::OperationKind;
use groundskeeper_protocol::operation::{CompactRequest, CompactTo, EtcdTarget, Operation};
use groundskeeper_protocol::result::CompactReport;
use groundskeeper_protocol::{JobResult, Outcome, Report};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde_json::json;

fn plan() -> MaintenanceJob {
    MaintenanceJob {
        namespace: "etcd".into(),
        name: "compact-main-7".into(),
        owner: OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "owner".into(),
            uid: "owner-uid".into(),
            ..Default::default()
        },
        operation: Operation::Compact(CompactRequest {
            etcd: EtcdTarget::default(),
            to: CompactTo::Revision(1),
            physical: false,
            not_past: None,
        }),
        target: "main".into(),
        image: "img".into(),
        image_pull_policy: "IfNotPresent".into(),
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

#[tokio::test]
async fn create_observe_delete() {
    let server = ApiServer::start().await.unwrap();
    let client = server.client();
    let jobs = ResourceId::of::<Job>();
    let pods = ResourceId::of::<Pod>();

    let created = create_job(&client, &plan()).await.unwrap();
    assert!(created.is_new());
    let uid = created.job().metadata.uid.clone().unwrap();
    let again = create_job(&client, &plan()).await.unwrap();
    assert!(!again.is_new(), "a second create finds the first Job");
    assert_eq!(again.job().metadata.uid.as_deref(), Some(uid.as_str()));

    let selector = job_selector(OperationKind::Compact, "main");
    let observed = observe_jobs(&client, "etcd", &selector).await.unwrap();
    assert_eq!(observed.len(), 1);
    assert!(matches!(observed[0].state, JobState::Running(_)));

    // Play the Job controller and the kubelet: a pod that terminated with a result, then the
    // Job's conditions.
    let result = JobResult::new(
        Report::Compact(CompactReport { current_revision: 10, compacted_revision: 5, ..Default::default() }),
        Outcome::Succeeded,
        "2026-01-01T00:00:00Z".into(),
        1,
    );
    let mut labels = plan().labels();
    labels.insert("batch.kubernetes.io/job-name".into(), "compact-main-7".into());
    server
        .create(
            &pods,
            Some("etcd"),
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "compact-main-7-x1", "labels": labels,
                             "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "compact-main-7",
                                                  "uid": uid, "controller": true}]},
                "spec": {"containers": [{"name": "groundskeeper-job", "image": "img"}]},
            }),
        )
        .unwrap();
    server
        .patch(
            &pods,
            Some("etcd"),
            "compact-main-7-x1",
            PatchFormat::Merge,
            &json!({"status": {"phase": "Succeeded", "containerStatuses": [{
                "name": "groundskeeper-job", "image": "img", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                                         "message": result.to_termination_message()}}}]}}),
            true,
        )
        .unwrap();
    server
        .patch(
            &jobs,
            Some("etcd"),
            "compact-main-7",
            PatchFormat::Merge,
            &json!({"status": {"succeeded": 1, "conditions": [
                {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached"},
                {"type": "Complete", "status": "True", "reason": "CompletionsReached"}]}}),
            true,
        )
        .unwrap();

    let observed = observe_jobs(&client, "etcd", &selector).await.unwrap();
    let JobState::Succeeded(finished) = &observed[0].state else { panic!("{:?}", observed[0].state) };
    assert_eq!(finished.result.as_ref().unwrap(), &result);

    assert!(delete_job(&client, "etcd", "compact-main-7").await.unwrap());
    assert!(server.get(&jobs, Some("etcd"), "compact-main-7").is_none());
    assert!(
        server.get(&pods, Some("etcd"), "compact-main-7-x1").is_none(),
        "Background propagation takes the pods along"
    );
    assert!(!delete_job(&client, "etcd", "compact-main-7").await.unwrap());
    assert!(observe_jobs(&client, "etcd", &selector).await.unwrap().is_empty());
}
