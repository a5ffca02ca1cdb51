//! The condition writer against the in-memory API server: real resourceVersions, the status
//! subresource, and the ScyllaDBDatacenter-or-ScyllaCluster choice.

use groundskeeper_api::scylla::{ScyllaCluster, ScyllaDBDatacenter};
use groundskeeper_controller::conditions::{Condition, ConditionTarget, WriteOutcome, write_conditions};
use groundskeeper_controller::scylla::apply::scylla_condition_target;
use groundskeeper_e2e::apiserver::{ApiServer, PatchFormat, ResourceId};
use serde_json::{Value, json};

/// scylla-operator's own condition. Fields its CRD does not declare never reach a stored object
/// (the API prunes them), so that unknown fields survive a merge is the `conditions_merge` tests'.
fn foreign() -> Value {
    json!({"type": "Available", "status": "True", "reason": "AsExpected", "message": "",
           "lastTransitionTime": "2025-12-24T10:00:00Z", "observedGeneration": 1})
}

fn object(api_version: &str, kind: &str) -> Value {
    json!({
        "apiVersion": api_version, "kind": kind,
        "metadata": {"name": "sc", "namespace": "scylla"},
        "spec": {},
    })
}

async fn server_with(objects: &[(ResourceId, Value)]) -> ApiServer {
    let server = ApiServer::start().await.unwrap();
    for (id, object) in objects {
        server.create(id, Some("scylla"), object.clone()).unwrap();
        // Status is dropped on create for types with the status subresource: set it apart.
        server
            .patch(
                id,
                Some("scylla"),
                "sc",
                PatchFormat::Merge,
                &json!({"status": {"conditions": [foreign()]}}),
                true,
            )
            .unwrap();
    }
    server
}

fn conditions(server: &ApiServer, id: &ResourceId) -> Vec<Value> {
    let object = server.get(id, Some("scylla"), "sc").unwrap();
    object["status"]["conditions"].as_array().cloned().unwrap_or_default()
}

fn progressing(status: bool, reason: &str) -> Vec<Condition> {
    vec![Condition::new("CleanupControllerProgressing", status, reason, "")]
}

#[tokio::test]
async fn writes_next_to_foreign_conditions_then_stays_quiet() {
    let sdc = ResourceId::of::<ScyllaDBDatacenter>();
    let server =
        server_with(&[(sdc.clone(), object("scylla.scylladb.com/v1alpha1", "ScyllaDBDatacenter"))]).await;
    let client = server.client();
    let target = scylla_condition_target(&client, "scylla", "sc").await.unwrap();
    assert_eq!(target.resource.kind, "ScyllaDBDatacenter");

    let outcome = write_conditions(&client, &target, &progressing(true, "CleaningUp"), 3).await.unwrap();
    assert_eq!(outcome, WriteOutcome::Written);
    let written = conditions(&server, &sdc);
    assert_eq!(written.len(), 2);
    assert_eq!(written[0], foreign(), "the foreign entry is untouched");
    assert_eq!(written[1]["type"], "CleanupControllerProgressing");
    assert_eq!(written[1]["status"], "True");
    let first_transition = written[1]["lastTransitionTime"].clone();

    let revision = server.revision();
    let outcome = write_conditions(&client, &target, &progressing(true, "CleaningUp"), 3).await.unwrap();
    assert_eq!(outcome, WriteOutcome::Unchanged);
    assert_eq!(server.revision(), revision, "nothing written");

    let outcome = write_conditions(&client, &target, &progressing(true, "StillCleaningUp"), 3).await.unwrap();
    assert_eq!(outcome, WriteOutcome::Written);
    let written = conditions(&server, &sdc);
    assert_eq!(written[1]["reason"], "StillCleaningUp");
    assert_eq!(written[1]["lastTransitionTime"], first_transition, "same status: same transition time");
}

#[tokio::test]
async fn without_a_datacenter_the_cluster_gets_the_conditions() {
    let sc = ResourceId::of::<ScyllaCluster>();
    let server = server_with(&[(sc.clone(), object("scylla.scylladb.com/v1", "ScyllaCluster"))]).await;
    let client = server.client();
    let target = scylla_condition_target(&client, "scylla", "sc").await.unwrap();
    assert_eq!(target.resource.kind, "ScyllaCluster");
    write_conditions(&client, &target, &progressing(false, "AsExpected"), 3).await.unwrap();
    let written = conditions(&server, &sc);
    assert_eq!(written[0], foreign());
    assert_eq!(written[1]["status"], "False");
    assert_eq!(
        written[1]["observedGeneration"],
        server.get(&sc, Some("scylla"), "sc").unwrap()["metadata"]["generation"]
    );
}

#[tokio::test]
async fn a_missing_object_is_an_error_naming_it() {
    let server = ApiServer::start().await.unwrap();
    let target = ConditionTarget::of::<ScyllaCluster>("scylla", "nope");
    let err = write_conditions(&server.client(), &target, &progressing(true, "X"), 3).await.unwrap_err();
    assert_eq!(err.api_status_code(), Some(404));
    assert!(err.to_string().contains("ScyllaCluster scylla/nope"), "{err}");
}
