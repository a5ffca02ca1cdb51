//! The condition writer at the HTTP level: read, merge, merge-patch the status subresource with
//! the resourceVersion read, retry on conflict, skip when nothing changed; and the choice between
//! ScyllaDBDatacenter and ScyllaCluster.

use groundskeeper_api::scylla::{ScyllaCluster, ScyllaDBDatacenter};
use groundskeeper_controller::conditions::{Condition, ConditionTarget, WriteOutcome, write_conditions_at};
use groundskeeper_controller::runtime::error::Error;
use groundskeeper_controller::scylla::apply::scylla_condition_target;
use http::{Method, StatusCode};
use jiff::Timestamp;
use serde_json::{Value, json};

use crate::mock_api::{Exchange, Server, scripted_up_to};

const SDC: &str = "/apis/scylla.scylladb.com/v1alpha1/namespaces/scylla/scylladbdatacenters/sc";
const SC: &str = "/apis/scylla.scylladb.com/v1/namespaces/scylla/scyllaclusters/sc";

/// A client whose API server answers `responses` in order, whatever is asked (the client may
/// stop before they are used up).
fn answers(responses: Vec<(StatusCode, Value)>) -> (kube::Client, Server) {
    scripted_up_to(
        responses.into_iter().map(|(status, response)| Exchange::any(status.as_u16(), response)).collect(),
    )
}

fn api_status(code: u16, reason: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason, "message": reason})
}

fn now() -> Timestamp {
    "2026-03-03T03:03:03Z".parse().unwrap()
}

fn foreign() -> Value {
    json!({"type": "Available", "status": "True", "reason": "AsExpected", "message": "",
           "lastTransitionTime": "2025-12-24T10:00:00Z", "observedGeneration": 3, "extra": true})
}

fn datacenter(resource_version: &str, generation: i64, conditions: Value) -> Value {
    json!({
        "apiVersion": "scylla.scylladb.com/v1alpha1", "kind": "ScyllaDBDatacenter",
        "metadata": {"name": "sc", "namespace": "scylla", "generation": generation, "resourceVersion": resource_version},
        "spec": {"clusterName": "sc"},
        "status": {"observedGeneration": generation, "conditions": conditions},
    })
}

fn ours() -> Vec<Condition> {
    vec![Condition::new("CleanupControllerProgressing", true, "CleaningUp", "cleaning sc-dc-r1-0")]
}

fn our_entry(generation: i64, time: &str) -> Value {
    json!({"type": "CleanupControllerProgressing", "status": "True", "reason": "CleaningUp",
           "message": "cleaning sc-dc-r1-0", "lastTransitionTime": time, "observedGeneration": generation})
}

#[tokio::test]
async fn writes_the_merged_list_with_the_resource_version_read() {
    let (client, server) = answers(vec![
        (StatusCode::OK, datacenter("41", 5, json!([foreign()]))),
        (StatusCode::OK, datacenter("42", 5, json!([foreign(), our_entry(5, "2026-03-03T03:03:03Z")]))),
    ]);
    let target = ConditionTarget::of::<ScyllaDBDatacenter>("scylla", "sc");
    let outcome = write_conditions_at(&client, &target, &ours(), 3, now).await.unwrap();
    assert_eq!(outcome, WriteOutcome::Written);
    let seen = server.seen().await;
    assert_eq!(seen.len(), 2);
    assert_eq!((seen[0].method.clone(), seen[0].uri.as_str()), (Method::GET, SDC));
    assert_eq!(seen[1].method, Method::PATCH);
    assert_eq!(seen[1].uri, format!("{SDC}/status?"));
    assert_eq!(seen[1].content_type.as_deref(), Some("application/merge-patch+json"));
    assert_eq!(
        seen[1].body,
        json!({
            "metadata": {"resourceVersion": "41"},
            "status": {"conditions": [foreign(), our_entry(5, "2026-03-03T03:03:03Z")]},
        })
    );
}

#[tokio::test]
async fn nothing_is_written_when_nothing_changed() {
    let current = datacenter("41", 5, json!([foreign(), our_entry(5, "2026-01-01T00:00:00Z")]));
    let (client, server) = answers(vec![(StatusCode::OK, current)]);
    let target = ConditionTarget::of::<ScyllaDBDatacenter>("scylla", "sc");
    let outcome = write_conditions_at(&client, &target, &ours(), 3, now).await.unwrap();
    assert_eq!(outcome, WriteOutcome::Unchanged);
    drop(client);
    assert_eq!(server.seen().await.len(), 1, "one GET, no PATCH");
}

#[tokio::test]
async fn a_conflict_is_retried_on_a_fresh_read_keeping_the_other_writers_entry() {
    let someone_elses = json!({"type": "Progressing", "status": "True", "reason": "RollingOut", "message": "",
                               "lastTransitionTime": "2026-03-03T03:00:00Z"});
    let (client, server) = answers(vec![
        (StatusCode::OK, datacenter("41", 5, json!([foreign()]))),
        (StatusCode::CONFLICT, api_status(409, "Conflict")),
        (StatusCode::OK, datacenter("43", 6, json!([foreign(), someone_elses.clone()]))),
        (StatusCode::OK, datacenter("44", 6, json!([]))),
    ]);
    let target = ConditionTarget::of::<ScyllaDBDatacenter>("scylla", "sc");
    let outcome = write_conditions_at(&client, &target, &ours(), 3, now).await.unwrap();
    assert_eq!(outcome, WriteOutcome::Written);
    let seen = server.seen().await;
    assert_eq!(seen.len(), 4);
    assert_eq!(seen[2].method, Method::GET);
    assert_eq!(
        seen[3].body,
        json!({
            "metadata": {"resourceVersion": "43"},
            "status": {"conditions": [foreign(), someone_elses, our_entry(6, "2026-03-03T03:03:03Z")]},
        })
    );
}

#[tokio::test]
async fn conflicts_give_up_after_the_attempts_allowed() {
    let mut responses = Vec::new();
    for version in ["1", "2"] {
        responses.push((StatusCode::OK, datacenter(version, 5, json!([]))));
        responses.push((StatusCode::CONFLICT, api_status(409, "Conflict")));
    }
    let (client, server) = answers(responses);
    let target = ConditionTarget::of::<ScyllaDBDatacenter>("scylla", "sc");
    let err = write_conditions_at(&client, &target, &ours(), 2, now).await.unwrap_err();
    assert!(matches!(err, Error::Conflict { attempts: 2, .. }), "{err:?}");
    assert!(err.to_string().contains("ScyllaDBDatacenter scylla/sc"), "{err}");
    assert_eq!(server.seen().await.len(), 4);
}

#[tokio::test]
async fn other_errors_are_not_retried_and_name_the_object() {
    let (client, server) = answers(vec![
        (StatusCode::OK, datacenter("1", 5, json!([]))),
        (StatusCode::FORBIDDEN, api_status(403, "Forbidden")),
    ]);
    let target = ConditionTarget::of::<ScyllaCluster>("scylla", "sc");
    let err = write_conditions_at(&client, &target, &ours(), 5, now).await.unwrap_err();
    assert_eq!(err.api_status_code(), Some(403));
    assert!(err.to_string().contains("status.conditions of ScyllaCluster scylla/sc"), "{err}");
    let seen = server.seen().await;
    assert_eq!(seen[0].uri, SC);
    assert_eq!(seen[1].uri, format!("{SC}/status?"));
}

#[tokio::test]
async fn a_conditions_field_that_is_not_a_list_is_reported() {
    let (client, server) = answers(vec![(StatusCode::OK, datacenter("1", 5, json!({"type": "Available"})))]);
    let target = ConditionTarget::of::<ScyllaDBDatacenter>("scylla", "sc");
    let err = write_conditions_at(&client, &target, &ours(), 5, now).await.unwrap_err();
    assert!(matches!(err, Error::InvalidObject { .. }), "{err:?}");
    assert!(err.to_string().contains("ScyllaDBDatacenter scylla/sc: field status.conditions"), "{err}");
    drop(client);
    server.seen().await;
}

#[tokio::test]
async fn conditions_go_to_the_datacenter_when_it_exists() {
    let (client, server) = answers(vec![(StatusCode::OK, datacenter("1", 1, json!([])))]);
    let target = scylla_condition_target(&client, "scylla", "sc").await.unwrap();
    assert_eq!(target.resource.kind, "ScyllaDBDatacenter");
    assert_eq!(target.resource.api_version, "scylla.scylladb.com/v1alpha1");
    assert_eq!(server.seen().await[0].uri, SDC);
}

#[tokio::test]
async fn conditions_go_to_the_cluster_without_a_datacenter() {
    let (client, server) = answers(vec![(StatusCode::NOT_FOUND, api_status(404, "NotFound"))]);
    let target = scylla_condition_target(&client, "scylla", "sc").await.unwrap();
    assert_eq!(target.resource.kind, "ScyllaCluster");
    assert_eq!(target.resource.api_version, "scylla.scylladb.com/v1");
    assert_eq!((target.namespace.as_str(), target.name.as_str()), ("scylla", "sc"));
    server.seen().await;
}

#[tokio::test]
async fn target_choice_fails_on_other_errors() {
    let (client, server) = answers(vec![(StatusCode::FORBIDDEN, api_status(403, "Forbidden"))]);
    let err = scylla_condition_target(&client, "scylla", "sc").await.unwrap_err();
    assert!(err.to_string().contains("get ScyllaDBDatacenter scylla/sc"), "{err}");
    server.seen().await;
}
