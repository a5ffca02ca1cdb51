//! The cleanup trigger's writes, a cleanup task's node Job and the record of a cleaned node, at
//! the HTTP level: method, path and body of every call.

use std::collections::BTreeMap;
use std::sync::Arc;

use groundskeeper_api::maintenance_task::{NodeCleanupConfig, TaskState};
use groundskeeper_api::scylla::ScyllaCluster;
use groundskeeper_api::scylla::coexistence::{JobPhase, OperatorJob, Signal};
use groundskeeper_api::scylla::facts::{DEGRADED, MemberFacts, PROGRESSING};
use groundskeeper_controller::jobs;
use groundskeeper_controller::runtime::context::{Context, ControllerConfig};
use groundskeeper_controller::runtime::metrics::Metrics;
use groundskeeper_controller::scylla::apply;
use groundskeeper_controller::scylla::decide::{
    Action, ConditionPlan, Plan, RecordChange, SecretState, SeedReason,
};
use groundskeeper_controller::scylla::job::{AUTH_TOKEN_MOUNT_PATH, NodeCleanup, cleanup_job};
use groundskeeper_controller::scylla::members_record::MembersRecord;
use groundskeeper_controller::scylla::ownership::OWNED_AT_LAST_CLEANUP;
use groundskeeper_controller::scylla::record;
use groundskeeper_controller::scylla::{self, observe, ring_observer};
use groundskeeper_protocol::{keys, ring_hash};
use http::Method;

use crate::mock_api::{Exchange, not_found, scripted};
use serde_json::{Value, json};

const NS: &str = "scylla";
const SC_PATH: &str = "/apis/scylla.scylladb.com/v1/namespaces/scylla/scyllaclusters/basic";
const SDC_PATH: &str = "/apis/scylla.scylladb.com/v1alpha1/namespaces/scylla/scylladbdatacenters/basic";
const SVC_PATH: &str = "/api/v1/namespaces/scylla/services";
const JOBS_PATH: &str = "/apis/batch/v1/namespaces/scylla/jobs";
const TASKS_PATH: &str = "/apis/groundskeeper.dev/v1alpha1/namespaces/scylla/maintenancetasks";
const EVENTS_PATH: &str = "/apis/events.k8s.io/v1/namespaces/scylla/events";

/// A request of `method` whose path and query start with `uri`, and its answer.
fn ex(method: Method, uri: &str, status: u16, response: Value) -> Exchange {
    Exchange::prefix(method, uri, status, response)
}

fn hash(n: u32) -> String {
    ring_hash(&[n.to_string()]).unwrap()
}

fn cluster_json() -> Value {
    json!({
        "apiVersion": "scylla.scylladb.com/v1",
        "kind": "ScyllaCluster",
        "metadata": {"name": "basic", "namespace": NS, "uid": "sc-uid", "generation": 2, "resourceVersion": "10"},
        "spec": {
            "datacenter": {"name": "dc1", "racks": [{
                "name": "a",
                "members": 3,
                "placement": {
                    "tolerations": [{"key": "scylla", "operator": "Equal", "value": "true", "effect": "NoSchedule"}],
                    "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["scylla"]}]}
                    ]}},
                    "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"scylla/cluster": "basic"}}
                    }}]},
                    "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"app": "scylla"}}
                    }]}
                }
            }]}
        },
        "status": {
            "observedGeneration": 2,
            "conditions": [
                {"type": "Available", "status": "True", "reason": "AsExpected", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"type": "Degraded", "status": "False", "reason": "AsExpected", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}
            ]
        }
    })
}

fn cluster() -> ScyllaCluster {
    serde_json::from_value(cluster_json()).unwrap()
}

fn context(client: kube::Client) -> Context {
    Context::new(client, ControllerConfig::default(), Arc::new(Metrics::new()))
}

fn quiet_conditions() -> (ConditionPlan, ConditionPlan) {
    (
        ConditionPlan {
            type_: PROGRESSING,
            status: false,
            reason: "AsExpected".into(),
            message: "all 3 nodes are clean".into(),
        },
        ConditionPlan { type_: DEGRADED, status: false, reason: "AsExpected".into(), message: String::new() },
    )
}

fn plan(actions: Vec<Action>) -> Plan {
    let (progressing, degraded) = quiet_conditions();
    Plan { actions, progressing, degraded, requeue_after: None }
}

/// The status write as the shared writer does it for a cluster without a ScyllaDBDatacenter.
fn status_exchanges() -> Vec<Exchange> {
    vec![
        ex(Method::GET, SDC_PATH, 404, not_found()),
        ex(Method::GET, SC_PATH, 200, cluster_json()),
        ex(Method::PATCH, &format!("{SC_PATH}/status?"), 200, cluster_json()),
    ]
}

fn event_response() -> Value {
    json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e", "namespace": NS}, "eventTime": "2026-01-01T00:00:00.000000Z"})
}

#[tokio::test]
async fn seeding_patches_annotations_only_and_writes_conditions_keeping_others() {
    let record = MembersRecord { ring_hash: hash(6), members: ["u1".to_owned(), "u2".to_owned()].into() };
    let mut script = vec![ex(Method::PATCH, &format!("{SVC_PATH}/basic-dc1-a-3?"), 200, json!({}))];
    script.extend(status_exchanges());
    let (client, server) = scripted(script);
    let ctx = context(client);
    let plan = plan(vec![Action::SeedLastCleaned {
        service: "basic-dc1-a-3".into(),
        hash: hash(6),
        members: Some(record.clone()),
        reason: SeedReason::Joined,
    }]);
    apply::apply(&ctx, &cluster(), &plan).await.unwrap();
    let seen = server.seen().await;
    assert_eq!(
        seen[0].body,
        json!({"metadata": {"annotations": {
            keys::LAST_CLEANED_UP_TOKEN_RING_HASH: hash(6),
            keys::CLEANED_FOR_MEMBERS: record.to_annotation(),
        }}})
    );
    assert_eq!(seen[0].uri, format!("{SVC_PATH}/basic-dc1-a-3?"));
    let status = &seen[3].body;
    assert_eq!(status["metadata"]["resourceVersion"], "10");
    let conditions = status["status"]["conditions"].as_array().unwrap();
    let types: Vec<&str> = conditions.iter().map(|c| c["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["Available", "Degraded", "CleanupControllerProgressing", "CleanupControllerDegraded"]);
    assert_eq!(conditions[0], cluster_json()["status"]["conditions"][0]);
    assert_eq!(conditions[2]["status"], "False");
    assert_eq!(conditions[2]["message"], "all 3 nodes are clean");
}

#[tokio::test]
async fn an_ownership_record_is_a_merge_patch_of_its_annotation_and_a_task_names_per_node_keyspaces() {
    let mut script = vec![
        ex(Method::PATCH, &format!("{SVC_PATH}/basic-dc1-a-3?"), 200, json!({})),
        ex(
            Method::POST,
            &format!("{TASKS_PATH}?"),
            201,
            json!({"apiVersion": "groundskeeper.dev/v1alpha1", "kind": "MaintenanceTask", "metadata": {"name": "x"},
                   "spec": {"target": {"kind": "ScyllaCluster", "name": "basic"}, "type": "Cleanup"}}),
        ),
        ex(Method::POST, &format!("{EVENTS_PATH}?"), 201, event_response()),
    ];
    script.extend(status_exchanges());
    let (client, server) = scripted(script);
    let ctx = context(client);
    let plan = plan(vec![
        Action::RecordOwnership {
            service: "basic-dc1-a-3".into(),
            value: "{\"version\":1,\"groups\":[]}".into(),
            change: RecordChange::Seeded,
        },
        Action::SubmitCleanupTask {
            name: "basic-cleanup-1700000000".into(),
            nodes: vec!["basic-dc1-a-0".into(), "basic-dc1-a-1".into()],
            per_node: vec![NodeCleanupConfig {
                node: "basic-dc1-a-1".into(),
                keyspaces: vec!["app".into(), "system_traces".into()],
                mark_node_clean: true,
            }],
            ring_hash: hash(6),
            retry_of: None,
        },
    ]);
    apply::apply(&ctx, &cluster(), &plan).await.unwrap();
    let seen = server.seen().await;
    assert_eq!(seen[0].uri, format!("{SVC_PATH}/basic-dc1-a-3?"));
    assert_eq!(
        seen[0].body,
        json!({"metadata": {"annotations": {OWNED_AT_LAST_CLEANUP: "{\"version\":1,\"groups\":[]}"}}})
    );
    assert_eq!(
        seen[1].body["spec"]["config"]["cleanup"],
        json!({
            "nodes": ["basic-dc1-a-0", "basic-dc1-a-1"],
            "perNode": [{"node": "basic-dc1-a-1", "keyspaces": ["app", "system_traces"], "markNodeClean": true}],
        })
    );
    assert_eq!(
        seen[2].body["note"],
        "submitted cleanup task basic-cleanup-1700000000 for 2 node(s): basic-dc1-a-0, basic-dc1-a-1 (app, system_traces)"
    );
}

/// Where the cluster broadcasts pod IPs, a member's address (what describe_ring names it by) is
/// its pod's IP; a member without a pod has none.
#[tokio::test]
async fn members_broadcasting_pod_ips_are_addressed_by_them() {
    let mut json = cluster_json();
    json["spec"]["exposeOptions"] = json!({"broadcastOptions": {"nodes": {"type": "PodIP"}}});
    let cluster: ScyllaCluster = serde_json::from_value(json).unwrap();
    let pods = json!({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": [
        {"metadata": {"name": "basic-dc1-a-0", "namespace": NS}, "status": {"podIP": "10.244.0.7"}},
    ]});
    let (client, server) = scripted(vec![ex(
        Method::GET,
        "/api/v1/namespaces/scylla/pods?&labelSelector=scylla%2Fcluster%3Dbasic",
        200,
        pods,
    )]);
    let member = |name: &str| MemberFacts {
        service: name.into(),
        address: Some("10.96.0.1".into()),
        ..MemberFacts::default()
    };
    let mut members = vec![member("basic-dc1-a-0"), member("basic-dc1-a-1")];
    observe::fill_pod_addresses(&client, &cluster, &mut members).await.unwrap();
    server.seen().await;
    let addresses: Vec<Option<&str>> = members.iter().map(|m| m.address.as_deref()).collect();
    assert_eq!(addresses, [Some("10.244.0.7"), None]);
}

#[tokio::test]
async fn a_record_that_no_longer_fits_is_removed() {
    assert_eq!(
        record::last_cleaned_patch(&hash(1), None),
        json!({"metadata": {"annotations": {
            keys::LAST_CLEANED_UP_TOKEN_RING_HASH: hash(1),
            keys::CLEANED_FOR_MEMBERS: null,
        }}})
    );
}

/// The Job of one node of a cleanup task, as created through the shared Job path.
#[tokio::test]
async fn cleanup_job_body() {
    let (client, server) =
        scripted(vec![ex(Method::POST, &format!("{JOBS_PATH}?"), 201, json!({"metadata": {"name": "x"}}))]);
    let h = hash(6);
    let task_owner = k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
        api_version: "groundskeeper.dev/v1alpha1".into(),
        kind: "MaintenanceTask".into(),
        name: "basic-cleanup-1".into(),
        uid: "task-uid".into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let planned = cleanup_job(
        &cluster(),
        &ControllerConfig::default(),
        NodeCleanup {
            job: "basic-cleanup-1-0".into(),
            owner: task_owner,
            service: "basic-dc1-a-0".into(),
            rack: "a".into(),
            ring_hash: Some(h.clone()),
            keyspaces: Vec::new(),
            mark_node_clean: false,
            labels: [(keys::TASK_LABEL.to_owned(), "basic-cleanup-1".to_owned())].into(),
        },
    );
    jobs::create_job(&client, &planned).await.unwrap();
    let seen = server.seen().await;
    let job = &seen[0].body;
    assert_eq!(job["metadata"]["name"], "basic-cleanup-1-0", "never scylla-operator's cleanup-<node>");
    assert_eq!(job["metadata"]["namespace"], NS);
    assert_eq!(job["metadata"]["annotations"][keys::CLEANUP_TOKEN_RING_HASH], h);
    assert_eq!(job["spec"]["template"]["metadata"]["annotations"][keys::CLEANUP_TOKEN_RING_HASH], h);
    let labels = &job["metadata"]["labels"];
    assert_eq!(labels[keys::MANAGED_BY_LABEL], "groundskeeper");
    assert_eq!(labels[keys::OPERATION_LABEL], "cleanup");
    assert_eq!(labels[keys::TARGET_LABEL], "basic");
    assert_eq!(labels[keys::NODE_LABEL], "basic-dc1-a-0");
    assert_eq!(labels[keys::TASK_LABEL], "basic-cleanup-1");
    let owner = &job["metadata"]["ownerReferences"][0];
    assert_eq!(
        (owner["kind"].as_str(), owner["uid"].as_str(), owner["controller"].as_bool()),
        (Some("MaintenanceTask"), Some("task-uid"), Some(true))
    );
    let spec = &job["spec"];
    let config = ControllerConfig::default();
    assert_eq!(spec["backoffLimit"], config.job_limits.backoff_limit);
    assert_eq!(spec["activeDeadlineSeconds"], config.job_limits.active_deadline_seconds);
    assert_eq!(spec["ttlSecondsAfterFinished"], config.job_limits.ttl_seconds_after_finished);
    let rules = spec["podFailurePolicy"]["rules"].as_array().unwrap();
    assert_eq!(rules[0]["action"], "FailJob");
    assert_eq!(rules[0]["onExitCodes"]["values"], json!([groundskeeper_protocol::exit::BAD_INPUT]));
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Never");
    assert_eq!(pod["automountServiceAccountToken"], false);
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
    let container = &pod["containers"][0];
    assert_eq!(
        container["args"],
        json!([
            "cleanup",
            "--node-address",
            "basic-dc1-a-0.scylla.svc",
            "--auth-token-file",
            AUTH_TOKEN_MOUNT_PATH
        ])
    );
    assert_eq!(container["securityContext"]["allowPrivilegeEscalation"], false);
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(container["securityContext"]["capabilities"]["drop"], json!(["ALL"]));
    let mount = container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mountPath"] == AUTH_TOKEN_MOUNT_PATH)
        .expect("token mount");
    assert_eq!(mount["readOnly"], true);
    let volume = pod["volumes"].as_array().unwrap().iter().find(|v| v["name"] == mount["name"]).unwrap();
    assert_eq!(volume["secret"]["secretName"], "basic-auth-token");
    assert_eq!(volume["secret"]["items"][0]["key"], "auth-token.yaml");
    // Placement of rack a, without its pod anti-affinity.
    let placement = &cluster_json()["spec"]["datacenter"]["racks"][0]["placement"];
    assert_eq!(pod["tolerations"], placement["tolerations"]);
    assert_eq!(pod["affinity"]["nodeAffinity"], placement["nodeAffinity"]);
    assert_eq!(pod["affinity"]["podAffinity"], placement["podAffinity"]);
    assert!(pod["affinity"].get("podAntiAffinity").is_none(), "{}", pod["affinity"]);
}

#[tokio::test]
async fn recording_a_success_patches_and_tells_in_an_event() {
    let (client, server) = scripted(vec![
        ex(Method::PATCH, &format!("{SVC_PATH}/basic-dc1-a-0?"), 200, json!({})),
        ex(Method::POST, &format!("{EVENTS_PATH}?"), 201, event_response()),
    ]);
    let ctx = context(client);
    let recorded = record::cleaned_record(Some(&hash(1)), Some(&hash(1)), Some(&hash(0)), None);
    record::node_cleaned(&ctx, &cluster(), "basic-dc1-a-0", "basic-cleanup-1-0", recorded).await.unwrap();
    let seen = server.seen().await;
    assert_eq!(seen[0].body["metadata"]["annotations"][keys::LAST_CLEANED_UP_TOKEN_RING_HASH], hash(1));
    let event = &seen[1].body;
    assert_eq!(event["reason"], "NodeCleanedUp");
    assert_eq!(event["type"], "Normal");
    assert_eq!(event["note"], "node basic-dc1-a-0 cleaned up by Job basic-cleanup-1-0");
    assert_eq!(event["regarding"]["kind"], "ScyllaCluster");
    assert_eq!(event["regarding"]["name"], "basic");
    assert_eq!(event["related"]["kind"], "Service");
}

#[tokio::test]
async fn nothing_to_record_still_tells_and_a_failure_warns() {
    let (client, server) = scripted(vec![
        ex(Method::POST, &format!("{EVENTS_PATH}?"), 201, event_response()),
        ex(Method::POST, &format!("{EVENTS_PATH}?"), 201, event_response()),
    ]);
    let ctx = context(client);
    record::node_cleaned(&ctx, &cluster(), "basic-dc1-a-1", "t-1", None).await.unwrap();
    record::node_failed(&ctx, &cluster(), "basic-dc1-a-2", "t-2", "keyspace ks: HTTP 500").await;
    let seen = server.seen().await;
    assert_eq!(seen.len(), 2, "no annotation patch when nothing is to be recorded");
    assert_eq!(seen[1].body["type"], "Warning");
    assert_eq!(seen[1].body["reason"], "CleanupFailed");
    assert_eq!(seen[1].body["note"], "cleanup Job t-2 of node basic-dc1-a-2 failed: keyspace ks: HTTP 500");
    assert_eq!(seen[1].body["related"]["kind"], "Job");
}

#[tokio::test]
async fn submitting_creates_one_automatic_task_owned_by_the_cluster_and_tells() {
    let mut script = vec![
        ex(
            Method::POST,
            &format!("{TASKS_PATH}?"),
            201,
            json!({"apiVersion": "groundskeeper.dev/v1alpha1", "kind": "MaintenanceTask", "metadata": {"name": "x"},
                   "spec": {"target": {"kind": "ScyllaCluster", "name": "basic"}, "type": "Cleanup"}}),
        ),
        ex(Method::POST, &format!("{EVENTS_PATH}?"), 201, event_response()),
    ];
    script.extend(status_exchanges());
    let (client, server) = scripted(script);
    let ctx = context(client);
    let plan = plan(vec![Action::SubmitCleanupTask {
        name: "basic-cleanup-1700000000".into(),
        nodes: vec!["basic-dc1-a-0".into(), "basic-dc1-a-1".into()],
        per_node: Vec::new(),
        ring_hash: hash(6),
        retry_of: Some("basic-cleanup-1600000000".into()),
    }]);
    apply::apply(&ctx, &cluster(), &plan).await.unwrap();
    let seen = server.seen().await;
    let task = &seen[0].body;
    assert_eq!(task["metadata"]["name"], "basic-cleanup-1700000000");
    assert_eq!(task["metadata"]["labels"][keys::ORIGIN_LABEL], keys::ORIGIN_AUTOMATIC);
    assert_eq!(task["metadata"]["annotations"][keys::CLEANUP_TOKEN_RING_HASH], hash(6));
    assert_eq!(task["metadata"]["ownerReferences"][0]["kind"], "ScyllaCluster");
    assert_eq!(task["metadata"]["ownerReferences"][0]["uid"], "sc-uid");
    assert_eq!(
        task["spec"],
        json!({
            "target": {"kind": "ScyllaCluster", "name": "basic"},
            "type": "Cleanup",
            "config": {"cleanup": {"nodes": ["basic-dc1-a-0", "basic-dc1-a-1"]}},
            "ttlSecondsAfterFinished": 3600,
        })
    );
    let event = &seen[1].body;
    assert_eq!(event["reason"], "CleanupTaskSubmitted");
    assert_eq!(
        event["note"],
        "submitted cleanup task basic-cleanup-1700000000 for 2 node(s), after task basic-cleanup-1600000000 failed: basic-dc1-a-0, basic-dc1-a-1"
    );
}

#[tokio::test]
async fn a_task_submitted_before_a_restart_is_not_an_error() {
    let conflict = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 409, "reason": "AlreadyExists", "message": "exists"});
    let mut script = vec![ex(Method::POST, &format!("{TASKS_PATH}?"), 409, conflict)];
    script.extend(status_exchanges());
    let (client, server) = scripted(script);
    let ctx = context(client);
    let plan = plan(vec![Action::SubmitCleanupTask {
        name: "basic-cleanup-1700000000".into(),
        nodes: vec!["basic-dc1-a-0".into()],
        per_node: Vec::new(),
        ring_hash: hash(6),
        retry_of: None,
    }]);
    apply::apply(&ctx, &cluster(), &plan).await.unwrap();
    assert_eq!(server.seen().await.len(), 4, "no Event for a task that existed");
}

#[tokio::test]
async fn one_failing_write_does_not_stop_the_others_and_is_returned() {
    let mut script = vec![
        ex(
            Method::PATCH,
            &format!("{SVC_PATH}/basic-dc1-a-0?"),
            403,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 403, "reason": "Forbidden", "message": "no"}),
        ),
        ex(Method::PATCH, &format!("{SVC_PATH}/basic-dc1-a-1?"), 200, json!({})),
    ];
    script.extend(status_exchanges());
    let (client, server) = scripted(script);
    let ctx = context(client);
    let seed = |service: &str| Action::SeedLastCleaned {
        service: service.into(),
        hash: hash(1),
        members: None,
        reason: SeedReason::Joined,
    };
    let plan = plan(vec![seed("basic-dc1-a-0"), seed("basic-dc1-a-1")]);
    let err = apply::apply(&ctx, &cluster(), &plan).await.unwrap_err();
    assert!(err.to_string().contains("Service scylla/basic-dc1-a-0"), "{err}");
    assert_eq!(err.metric_label(), "kube");
    assert_eq!(server.seen().await.len(), 5);
}

#[tokio::test]
async fn observe_reads_members_tasks_and_the_secret_into_a_snapshot() {
    let member = |ordinal: u32, annotations: Value| {
        json!({"metadata": {
            "name": format!("basic-dc1-a-{ordinal}"), "namespace": NS, "uid": format!("u{ordinal}"),
            "labels": {"scylla/cluster": "basic", "scylla/datacenter": "dc1", "scylla/rack": "a",
                       "scylla-operator.scylladb.com/scylla-service-type": "member"},
            "annotations": annotations,
        }, "spec": {"clusterIP": format!("10.0.0.{ordinal}")}})
    };
    let services = json!({"apiVersion": "v1", "kind": "ServiceList", "metadata": {}, "items": [
        member(0, json!({keys::CURRENT_TOKEN_RING_HASH: hash(2), keys::LAST_CLEANED_UP_TOKEN_RING_HASH: hash(1)})),
        member(1, json!({})),
    ]});
    let tasks = json!({"apiVersion": "groundskeeper.dev/v1alpha1", "kind": "MaintenanceTaskList", "metadata": {}, "items": [
        {"metadata": {"name": "auto", "namespace": NS, "uid": "t0", "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {keys::ORIGIN_LABEL: keys::ORIGIN_AUTOMATIC},
            "annotations": {keys::CLEANUP_TOKEN_RING_HASH: hash(2)}},
         "spec": {"target": {"kind": "ScyllaCluster", "name": "basic"}, "type": "Cleanup"},
         "status": {"state": "InProgress", "progress": "1/2"}},
        {"metadata": {"name": "other-cluster", "namespace": NS, "uid": "t1"},
         "spec": {"target": {"kind": "ScyllaCluster", "name": "other"}, "type": "Cleanup"}},
        {"metadata": {"name": "etcd-work", "namespace": NS, "uid": "t2"},
         "spec": {"target": {"kind": "EtcdCluster", "name": "basic"}, "type": "Defragment"}},
    ]});
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "basic-auth-token", "namespace": NS},
        "data": {"auth-token.yaml": "YXV0aF90b2tlbjogczNjcjN0"}});
    // scylla-operator's own cleanup Job of node 0, still running.
    let operator_jobs = json!({"apiVersion": "batch/v1", "kind": "JobList", "metadata": {}, "items": [
        {"metadata": {"name": "cleanup-basic-dc1-a-0", "namespace": NS,
            "labels": {"scylla-operator.scylladb.com/node-job-type": "Cleanup", "scylla/cluster": "basic",
                       "scylla-operator.scylladb.com/node-job": "basic-dc1-a-0"},
            "annotations": {keys::CLEANUP_TOKEN_RING_HASH: hash(2)}},
         "spec": {"template": {"spec": {"containers": []}}},
         "status": {"active": 1}},
    ]});
    let (client, server) = scripted(vec![
        ex(
            Method::GET,
            &format!(
                "{SVC_PATH}?&labelSelector=scylla%2Fcluster%3Dbasic%2Cscylla-operator.scylladb.com%2Fscylla-service-type%3Dmember"
            ),
            200,
            services,
        ),
        ex(Method::GET, &format!("{TASKS_PATH}?"), 200, tasks),
        ex(Method::GET, "/api/v1/namespaces/scylla/secrets/basic-auth-token", 200, secret.clone()),
        ex(
            Method::GET,
            "/apis/batch/v1/namespaces/scylla/jobs?&labelSelector=scylla-operator.scylladb.com%2Fnode-job-type%3DCleanup%2Cscylla%2Fcluster%3Dbasic",
            200,
            operator_jobs,
        ),
        // The ScyllaDBDatacenter, where scylla-operator writes its Job controller's conditions.
        ex(
            Method::GET,
            "/apis/scylla.scylladb.com/v1alpha1/namespaces/scylla/scylladbdatacenters/basic",
            200,
            json!({"apiVersion": "scylla.scylladb.com/v1alpha1", "kind": "ScyllaDBDatacenter",
                   "metadata": {"name": "basic", "namespace": NS},
                   "spec": {"clusterName": "basic"},
                   "status": {"conditions": [{"type": "JobControllerProgressing", "status": "False"}]}}),
        ),
        // The token, read again for the ownership reads through the joined node's agent.
        ex(Method::GET, "/api/v1/namespaces/scylla/secrets/basic-auth-token", 200, secret),
        // What holds automatic cleanup back: the cluster's suspensions (none).
        ex(
            Method::GET,
            "/apis/groundskeeper.dev/v1alpha1/namespaces/scylla/maintenancesuspensions?",
            200,
            json!({"apiVersion": "groundskeeper.dev/v1alpha1", "kind": "MaintenanceSuspensionList", "metadata": {}, "items": []}),
        ),
    ]);
    // Nothing listens on port 1: the agent refuses at once, so ownership is unknown.
    let config = scylla::config::Config {
        agent_endpoints: BTreeMap::from([(
            "basic-dc1-a-0.scylla.svc".to_owned(),
            ("127.0.0.1".to_owned(), 1),
        )]),
        ..scylla::config::Config::default()
    };
    let ctx =
        Context::new(client, ControllerConfig::default(), Arc::new(Metrics::new())).with_store_config(config);
    let snapshot = observe::observe(&ctx, &cluster(), "2026-01-01T00:00:00Z".parse().unwrap()).await.unwrap();
    server.seen().await;
    let unknown = snapshot.ownership.clone().unwrap_err();
    assert!(unknown.starts_with("through basic-dc1-a-0: "), "{unknown}");
    assert_eq!(snapshot.members[0].address.as_deref(), Some("10.0.0.0"));
    assert_eq!(snapshot.cluster.generation, Some(2));
    assert_eq!(snapshot.cluster.observed_generation, Some(2));
    assert!(snapshot.cluster.single_datacenter);
    assert_eq!(snapshot.members.len(), 2);
    assert_eq!(snapshot.members[0].rack.as_deref(), Some("a"));
    assert_eq!(snapshot.members[0].uid.as_deref(), Some("u0"));
    assert_eq!(snapshot.tasks.len(), 1, "only the Cleanup tasks of this cluster: {:?}", snapshot.tasks);
    let task = &snapshot.tasks[0];
    assert_eq!((task.name.as_str(), task.state, task.automatic), ("auto", TaskState::InProgress, true));
    assert_eq!(task.ring_hash, Some(hash(2)));
    assert_eq!(task.progress.as_deref(), Some("1/2"));
    assert_eq!(snapshot.agent_token, SecretState::Present);
    assert_eq!(
        snapshot.scylla_operator.jobs,
        vec![OperatorJob {
            name: "cleanup-basic-dc1-a-0".into(),
            node: "basic-dc1-a-0".into(),
            ring_hash: Some(hash(2)),
            phase: JobPhase::Running,
        }],
        "scylla-operator's cleanup Jobs are read"
    );
    // Its Job controller's condition on the ScyllaDBDatacenter is the first sign found.
    assert_eq!(
        snapshot.scylla_operator.active,
        Some(Signal::JobControllerCondition("JobControllerProgressing".into()))
    );
}

#[tokio::test]
async fn ring_observer_write_patches_the_hash_with_its_field_manager() {
    let (client, server) = scripted(vec![ex(
        Method::PATCH,
        &format!("{SVC_PATH}/basic-dc1-a-0?&fieldManager=groundskeeper-ring-observer"),
        200,
        json!({}),
    )]);
    ring_observer::write_current_hash(
        &client,
        NS,
        "basic-dc1-a-0",
        &hash(3),
        "2026-01-01T00:00:00Z".parse().unwrap(),
    )
    .await
    .unwrap();
    let seen = server.seen().await;
    assert_eq!(
        seen[0].body,
        json!({"metadata": {"annotations": {
            keys::CURRENT_TOKEN_RING_HASH: hash(3),
            keys::RING_HASH_OBSERVED_AT: "2026-01-01T00:00:00Z",
        }}})
    );
    assert_eq!(seen[0].method, Method::PATCH);
}
