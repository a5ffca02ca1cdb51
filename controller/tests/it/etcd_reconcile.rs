//! The EtcdCluster controller's API writes at the HTTP level: the status it writes (on the
//! resourceVersion it decided on), the MaintenanceTask it submits, the Events, and the calls it
//! does not make; and the Jobs an etcd task's steps run as.

use groundskeeper_e2e::fixtures;
use groundskeeper_protocol::Operation;
use groundskeeper_protocol::operation::{CompactRequest, CompactTo, EtcdTarget};
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::mock_api::{Exchange, Server, assert_no_more_requests, scripted_context};
use groundskeeper_api::etcd_cluster::{EtcdCluster, EtcdClusterStatus};
use groundskeeper_controller::etcd::apply::{apply, status_patch};
use groundskeeper_controller::etcd::controller::reconcile_at;
use groundskeeper_controller::etcd::decide::{Input, Observed, decide};
use groundskeeper_controller::etcd::job::{EtcdJob, etcd_job, job_limits};
use groundskeeper_controller::etcd::observe::ObservedMember;
use groundskeeper_controller::etcd::observe::read_client_tls;
use groundskeeper_controller::etcd::policy::Policy;
use groundskeeper_controller::jobs::build_job;
use groundskeeper_controller::runtime::context::{Context, JobLimits};
use groundskeeper_stores::etcd::plan::{MemberObservation, MemberStatus};
use http::{Method, StatusCode};
use jiff::Timestamp;
use kube::runtime::controller::Action;
use serde_json::{Value, json};

/// A request of `method` on `path`, and its answer.
fn exchange(method: Method, path: &str, status: StatusCode, response: Value) -> Exchange {
    Exchange::new(method, path, status.as_u16(), response)
}

/// A context whose API server answers `script` in order.
fn scripted(script: Vec<Exchange>) -> (Arc<Context>, Server) {
    scripted_context(script)
}

fn now() -> Timestamp {
    "2026-03-01T12:00:00Z".parse().unwrap()
}

fn cluster(spec: Value, status: Option<EtcdClusterStatus>) -> EtcdCluster {
    let mut cluster: EtcdCluster = serde_json::from_value(json!({
        "apiVersion": "groundskeeper.dev/v1alpha1",
        "kind": "EtcdCluster",
        "metadata": {"name": "main", "namespace": "etcd", "uid": "uid-main", "generation": 2, "resourceVersion": "7"},
        "spec": spec,
    }))
    .unwrap();
    cluster.status = status;
    cluster
}

fn tls_spec() -> Value {
    json!({
        "endpoints": ["https://etcd-0:2379", "https://etcd-1:2379", "https://etcd-2:2379"],
        "tls": {"secretName": "etcd-client"},
    })
}

fn member(id: u64, size: i64, in_use: i64) -> ObservedMember {
    ObservedMember {
        endpoint: format!("https://etcd-{}:2379", id - 1),
        member: MemberObservation {
            id,
            name: format!("etcd-{}", id - 1),
            is_learner: false,
            status: Ok(MemberStatus {
                db_size: size,
                db_size_in_use: in_use,
                leader: 1,
                raft_term: 2,
                raft_index: 10,
                raft_applied_index: 10,
                errors: vec![],
                version: "3.5.23".into(),
                db_size_quota: 0,
            }),
        },
        revision: Some(500),
        peer_urls: Vec::new(),
    }
}

fn fragmented() -> Observed {
    Observed::Members(vec![
        member(1, 20_000_000, 19_000_000),
        member(2, 300_000_000, 30_000_000),
        member(3, 20_000_000, 19_000_000),
    ])
}

fn task_created(name: &str) -> Value {
    fixtures::task("etcd", name, "Defragment").metadata("uid", "task-uid").json()
}

fn empty_task_list() -> Value {
    json!({"apiVersion": "groundskeeper.dev/v1alpha1", "kind": "MaintenanceTaskList", "metadata": {}, "items": []})
}

const STATUS_PATH: &str = "/apis/groundskeeper.dev/v1alpha1/namespaces/etcd/etcdclusters/main/status";
const TASKS_PATH: &str = "/apis/groundskeeper.dev/v1alpha1/namespaces/etcd/maintenancetasks";

fn event_created() -> Value {
    json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e", "namespace": "etcd"}, "eventTime": "2026-03-01T12:00:00.000000Z"})
}

fn cluster_json() -> Value {
    json!({"apiVersion": "groundskeeper.dev/v1alpha1", "kind": "EtcdCluster",
           "metadata": {"name": "main", "namespace": "etcd", "uid": "uid-main"}, "spec": {"endpoints": ["http://x:2379"]}})
}

async fn decide_and_apply(ctx: &Context, cluster: &EtcdCluster, observed: &Observed) -> Action {
    let policy = Policy::from_spec(&cluster.spec);
    let previous = cluster.status.clone().unwrap_or_default();
    let decision = decide(&Input {
        cluster: "main",
        generation: Some(2),
        policy: policy.as_ref(),
        enabled: true,
        observed,
        tasks: &[],
        previous: &previous,
        collisions: &[],
        suspensions: &[],
        windows: None,
        now: now(),
    });
    apply(cluster, ctx, observed, decision, now()).await.unwrap()
}

#[tokio::test]
async fn a_due_defrag_writes_the_status_then_submits_one_task_and_an_event() {
    let cluster = cluster(tls_spec(), None);
    let name = format!("main-defragment-{}", now().as_second());
    let (ctx, server) = scripted(vec![
        exchange(Method::PATCH, STATUS_PATH, StatusCode::OK, cluster_json()),
        exchange(Method::POST, TASKS_PATH, StatusCode::CREATED, task_created(&name)),
        exchange(
            Method::POST,
            "/apis/events.k8s.io/v1/namespaces/etcd/events",
            StatusCode::CREATED,
            event_created(),
        ),
    ]);
    let action = decide_and_apply(&ctx, &cluster, &fragmented()).await;
    assert_eq!(action, Action::requeue(std::time::Duration::from_secs(600)));
    let seen = assert_no_more_requests(ctx, server).await;

    let (content_type, patch) = (seen[0].content_type.as_deref(), &seen[0].body);
    assert_eq!(content_type, Some("application/merge-patch+json"));
    assert_eq!(patch["metadata"]["resourceVersion"], "7", "written on the resourceVersion decided on");
    let status = &patch["status"];
    assert_eq!(status["activeTask"], name.as_str());
    assert_eq!(status["observedGeneration"], 2);
    assert_eq!(status["members"][1]["name"], "etcd-1");
    assert_eq!(status["members"][1]["fragmentationPercent"], 90.0);
    let conditions = status["conditions"].as_array().unwrap();
    let progressing = conditions.iter().find(|c| c["type"] == "DefragControllerProgressing").unwrap();
    assert_eq!(progressing["status"], "True");
    assert_eq!(progressing["reason"], "TaskCreated");
    assert_eq!(progressing["lastTransitionTime"], "2026-03-01T12:00:00Z");

    let task = &seen[1].body;
    assert_eq!(task["metadata"]["name"], name.as_str());
    assert_eq!(task["metadata"]["namespace"], "etcd");
    let labels = &task["metadata"]["labels"];
    assert_eq!(labels["groundskeeper.dev/origin"], "automatic");
    assert_eq!(labels["app.kubernetes.io/managed-by"], "groundskeeper");
    let owner = &task["metadata"]["ownerReferences"][0];
    assert_eq!(
        (&owner["kind"], &owner["name"], &owner["uid"], &owner["controller"]),
        (&json!("EtcdCluster"), &json!("main"), &json!("uid-main"), &json!(true))
    );
    assert_eq!(task["spec"]["target"], json!({"kind": "EtcdCluster", "name": "main"}));
    assert_eq!(task["spec"]["type"], "Defragment");
    assert_eq!(
        task["spec"]["config"],
        json!({"defragment": {"minDefragBytes": 100_000_000, "maxFragmentedPercent": 45.0}})
    );

    let event = &seen[2].body;
    assert_eq!(event["reason"], "MaintenanceTaskCreated");
    assert_eq!(event["regarding"]["name"], "main");
    assert!(event["note"].as_str().unwrap().contains(&name), "{event}");
}

#[tokio::test]
async fn a_racing_submit_takes_the_existing_task_and_publishes_no_event() {
    let cluster = cluster(tls_spec(), None);
    let name = format!("main-defragment-{}", now().as_second());
    let conflict = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 409,
                          "reason": "AlreadyExists",
                          "message": format!("maintenancetasks.groundskeeper.dev \"{name}\" already exists")});
    let (ctx, server) = scripted(vec![
        exchange(Method::PATCH, STATUS_PATH, StatusCode::OK, cluster_json()),
        exchange(Method::POST, TASKS_PATH, StatusCode::CONFLICT, conflict),
    ]);
    decide_and_apply(&ctx, &cluster, &fragmented()).await;
    let seen = assert_no_more_requests(ctx, server).await;
    assert_eq!(seen[0].body["status"]["activeTask"], name.as_str());
}

#[tokio::test]
async fn a_status_written_since_it_was_read_submits_nothing_and_decides_again_soon() {
    // The task controller recorded a task's outcome after this decision read the status.
    let cluster = cluster(tls_spec(), None);
    let stale = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 409,
                       "reason": "Conflict",
                       "message": "Operation cannot be fulfilled on etcdclusters.groundskeeper.dev \"main\": the object has been modified"});
    let (ctx, server) = scripted(vec![exchange(Method::PATCH, STATUS_PATH, StatusCode::CONFLICT, stale)]);
    let action = decide_and_apply(&ctx, &cluster, &fragmented()).await;
    assert_eq!(action, Action::requeue(std::time::Duration::from_secs(1)));
    assert_no_more_requests(ctx, server).await;
}

#[tokio::test]
async fn an_unreachable_member_writes_degraded_and_submits_no_task() {
    let cluster = cluster(tls_spec(), None);
    let mut members = vec![member(1, 20_000_000, 19_000_000), member(2, 300_000_000, 30_000_000)];
    members.push(ObservedMember {
        endpoint: "https://etcd-2:2379".into(),
        member: MemberObservation {
            id: 3,
            name: "etcd-2".into(),
            is_learner: false,
            status: Err("https://etcd-2:2379: cannot connect: connection refused".into()),
        },
        revision: None,
        peer_urls: Vec::new(),
    });
    let (ctx, server) = scripted(vec![exchange(Method::PATCH, STATUS_PATH, StatusCode::OK, cluster_json())]);
    decide_and_apply(&ctx, &cluster, &Observed::Members(members)).await;
    let seen = assert_no_more_requests(ctx, server).await;
    let status = &seen[0].body["status"];
    let degraded = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "DefragControllerDegraded")
        .unwrap();
    assert_eq!(degraded["status"], "True");
    assert!(
        degraded["message"].as_str().unwrap().contains("member etcd-2 (https://etcd-2:2379): unreachable")
    );
    assert_eq!(status["members"][2]["healthy"], false);
    assert_eq!(status.get("activeTask"), None);
}

#[tokio::test]
async fn an_invalid_spec_is_reported_without_asking_etcd() {
    let cluster =
        cluster(json!({"endpoints": ["http://etcd-0:2379"], "policy": {"checkInterval": "10x"}}), None);
    let (ctx, server) = scripted(vec![
        exchange(Method::GET, TASKS_PATH, StatusCode::OK, empty_task_list()),
        exchange(Method::PATCH, STATUS_PATH, StatusCode::OK, cluster_json()),
    ]);
    reconcile_at(&cluster, &ctx, now()).await.unwrap();
    let seen = assert_no_more_requests(ctx, server).await;
    let conditions = seen[1].body["status"]["conditions"].as_array().unwrap().clone();
    let degraded = conditions.iter().find(|c| c["type"] == "DefragControllerDegraded").unwrap();
    assert_eq!(degraded["reason"], "InvalidSpec");
    assert!(
        degraded["message"]
            .as_str()
            .unwrap()
            .contains(r#"spec.policy.checkInterval: "10x" is not a duration"#)
    );
}

#[tokio::test]
async fn a_reconcile_before_the_check_is_due_lists_tasks_and_writes_nothing() {
    let status = EtcdClusterStatus {
        observed_generation: Some(2),
        next_check_time: Some((now() + jiff::SignedDuration::from_mins(4)).into()),
        ..Default::default()
    };
    let cluster = cluster(json!({"endpoints": ["http://etcd-0:2379"]}), Some(status));
    let (ctx, server) = scripted(vec![exchange(Method::GET, TASKS_PATH, StatusCode::OK, empty_task_list())]);
    let action = reconcile_at(&cluster, &ctx, now()).await.unwrap();
    assert_eq!(action, Action::requeue(std::time::Duration::from_secs(240)));
    assert_no_more_requests(ctx, server).await;
}

#[tokio::test]
async fn the_tls_secret_is_read_and_a_missing_key_is_named_without_the_content() {
    let secret = |data: Value| json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "etcd-client", "namespace": "etcd"}, "data": data});
    // base64 of "CA", "CERT", "KEY".
    let full = json!({"ca.crt": "Q0E=", "tls.crt": "Q0VSVA==", "tls.key": "S0VZ"});
    let (ctx, server) = scripted(vec![
        exchange(Method::GET, "/api/v1/namespaces/etcd/secrets/etcd-client", StatusCode::OK, secret(full)),
        exchange(
            Method::GET,
            "/api/v1/namespaces/etcd/secrets/etcd-client",
            StatusCode::OK,
            secret(json!({"ca.crt": "Q0E=", "tls.crt": "Q0VSVA=="})),
        ),
    ]);
    let tls = read_client_tls(&ctx.client, "etcd", "etcd-client").await.unwrap();
    assert_eq!(
        (tls.ca.as_slice(), tls.cert.as_slice(), tls.key.as_slice()),
        (&b"CA"[..], &b"CERT"[..], &b"KEY"[..])
    );
    assert!(!format!("{tls:?}").contains("KEY"), "Debug must not print key material");
    let err = read_client_tls(&ctx.client, "etcd", "etcd-client").await.unwrap_err();
    assert!(err.contains("Secret etcd/etcd-client"), "{err}");
    assert!(err.contains("no key \"tls.key\""), "{err}");
    assert!(!err.contains("CERT"), "{err}");
    assert_no_more_requests(ctx, server).await;
}

#[test]
fn the_status_patch_clears_fields_that_went_away() {
    let before = EtcdClusterStatus {
        active_task: Some("main-defragment-1".into()),
        last_maintenance_task: Some("main-compact-1".into()),
        ..Default::default()
    };
    let after =
        EtcdClusterStatus { last_maintenance_task: Some("main-compact-1".into()), ..Default::default() };
    let patch = status_patch(&before, &after).unwrap();
    assert_eq!(patch["status"]["activeTask"], Value::Null);
    assert!(patch["status"].as_object().unwrap().contains_key("activeTask"));
    assert_eq!(patch["status"]["lastMaintenanceTask"], "main-compact-1");
}

#[tokio::test]
async fn a_tasks_etcd_job_takes_the_clusters_limits_and_mounts_its_tls_secret() {
    let cluster = cluster(
        json!({"endpoints": ["https://etcd-0:2379"], "tls": {"secretName": "etcd-client"},
               "job": {"backoffLimit": 0, "activeDeadlineSeconds": 60}}),
        None,
    );
    let policy = Policy::from_spec(&cluster.spec).unwrap();
    let (ctx, _server) = scripted_context(Vec::new());
    let limits = job_limits(Some(&policy), &JobLimits::default());
    assert_eq!(
        limits,
        JobLimits {
            backoff_limit: 0,
            active_deadline_seconds: 60,
            ttl_seconds_after_finished: JobLimits::default().ttl_seconds_after_finished,
        }
    );
    assert_eq!(job_limits(None, &JobLimits::default()), JobLimits::default());
    let owner = k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
        api_version: "groundskeeper.dev/v1alpha1".into(),
        kind: "MaintenanceTask".into(),
        name: "compact-now".into(),
        uid: "task-uid".into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let job = etcd_job(
        &cluster,
        &ctx,
        EtcdJob {
            owner,
            name: "compact-now-0".into(),
            operation: Operation::Compact(CompactRequest {
                etcd: EtcdTarget::default(),
                to: CompactTo::Revision(1),
                physical: true,
                not_past: None,
            }),
            tls_secret: policy.tls_secret.clone(),
            labels: BTreeMap::new(),
            limits: limits.clone(),
            claim_volumes: Vec::new(),
            secret_folders: Vec::new(),
            scratch: None,
        },
    );
    assert_eq!(job.limits, limits);
    let built = serde_json::to_value(build_job(&job)).unwrap();
    assert_eq!(built["metadata"]["ownerReferences"][0]["kind"], "MaintenanceTask");
    assert_eq!(built["spec"]["backoffLimit"], 0);
    let pod = &built["spec"]["template"]["spec"];
    let mounts = pod["containers"][0]["volumeMounts"].as_array().unwrap();
    for key in ["ca.crt", "tls.crt", "tls.key"] {
        let mount = mounts
            .iter()
            .find(|m| m["mountPath"] == format!("/etc/groundskeeper/etcd-tls/{key}"))
            .unwrap_or_else(|| panic!("{key} not mounted: {mounts:?}"));
        assert_eq!(mount["readOnly"], true);
    }
    let volumes = pod["volumes"].as_array().unwrap();
    assert!(volumes.iter().all(|v| v.get("secret").is_none() || v["secret"]["secretName"] == "etcd-client"));
}

/// The backup policy's Failed tasks beyond `failedHistoryLimit` are deleted, the newest kept,
/// one already gone taken as done; tasks made by hand and tasks not failed are never touched.
#[tokio::test]
async fn failed_backup_tasks_beyond_the_history_limit_are_deleted() {
    use groundskeeper_api::maintenance_task::{TaskState, TaskType};
    use groundskeeper_controller::etcd::model::ClusterTaskView;
    let mut spec = tls_spec();
    spec["backup"] = json!({"fullEvery": "1h", "failedHistoryLimit": 1});
    let cluster = cluster(spec, None);
    let view = |name: &str, minutes_ago: i64, state: TaskState, backup_policy: bool| ClusterTaskView {
        name: name.into(),
        task_type: TaskType::Snapshot,
        state,
        created: now() - jiff::SignedDuration::from_mins(minutes_ago),
        waits_for: None,
        backup_policy,
    };
    let tasks = [
        view("newest-failed", 1, TaskState::Failed, true),
        view("older-failed", 5, TaskState::Failed, true),
        view("oldest-failed", 9, TaskState::Failed, true),
        view("completed", 10, TaskState::Completed, true),
        view("by-hand", 20, TaskState::Failed, false),
    ];
    let gone =
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404, "reason": "NotFound"});
    let deleted = json!({"kind": "Status", "apiVersion": "v1", "status": "Success"});
    let observed = Observed::Members(vec![member(1, 1_000_000, 1_000_000)]);
    let policy = Policy::from_spec(&cluster.spec);
    let decision = decide(&Input {
        cluster: "main",
        generation: Some(2),
        policy: policy.as_ref(),
        enabled: true,
        observed: &observed,
        tasks: &tasks,
        previous: &EtcdClusterStatus::default(),
        collisions: &[],
        suspensions: &[],
        windows: None,
        now: now(),
    });
    assert_eq!(decision.delete_tasks, ["older-failed", "oldest-failed"]);
    let (ctx, server) = scripted(vec![
        exchange(Method::PATCH, STATUS_PATH, StatusCode::OK, cluster_json()),
        exchange(Method::POST, TASKS_PATH, StatusCode::CREATED, task_created("main-snapshot")),
        exchange(Method::DELETE, &format!("{TASKS_PATH}/older-failed"), StatusCode::OK, deleted),
        exchange(Method::DELETE, &format!("{TASKS_PATH}/oldest-failed"), StatusCode::NOT_FOUND, gone),
        exchange(
            Method::POST,
            "/apis/events.k8s.io/v1/namespaces/etcd/events",
            StatusCode::CREATED,
            event_created(),
        ),
    ]);
    apply(&cluster, &ctx, &observed, decision, now()).await.unwrap();
    let seen = assert_no_more_requests(ctx, server).await;
    let task = &seen[1].body;
    assert_eq!(task["spec"]["type"], "Snapshot");
    assert_eq!(task["spec"]["ttlSecondsAfterFailed"], 604_800, "failures are kept a week at the latest");
}
