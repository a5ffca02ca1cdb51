//! The ring observer's pure parts: who writes a Service's hash, which address Scylla knows a node
//! by, and reading the agent token from its Secret without ever showing it.

use groundskeeper_api::scylla::ScyllaCluster;
use groundskeeper_controller::scylla::ring_observer::{
    FIELD_MANAGER, Writer, broadcast_address, current_hash_patch, token_from_secret, who_writes,
};
use groundskeeper_protocol::keys;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Pod, Secret, Service};
use serde_json::{Value, json};

fn now() -> jiff::Timestamp {
    "2026-11-21T12:00:00Z".parse().unwrap()
}

fn service(annotations: Value, managed_fields: Value) -> Service {
    serde_json::from_value(json!({
        "metadata": {"name": "basic-dc1-a-0", "namespace": "scylla", "annotations": annotations,
                     "managedFields": managed_fields},
        "spec": {"clusterIP": "10.96.0.7"}
    }))
    .unwrap()
}

fn owner(manager: &str, time: &str) -> Value {
    json!([{
        "manager": manager, "operation": "Update", "apiVersion": "v1", "time": time,
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": {"f:annotations": {format!("f:{}", keys::CURRENT_TOKEN_RING_HASH): {}}}}
    }])
}

#[test]
fn who_writes_the_hash() {
    let hash = json!({keys::CURRENT_TOKEN_RING_HASH: "h"});
    let cases = [
        ("absent: nobody writes it", service(json!({}), json!([])), Writer::Us),
        (
            "our marker",
            service(json!({keys::CURRENT_TOKEN_RING_HASH: "h", keys::RING_HASH_OBSERVED_AT: "t"}), json!([])),
            Writer::Us,
        ),
        (
            "our field manager",
            service(hash.clone(), owner(FIELD_MANAGER, "2026-11-21T11:59:00Z")),
            Writer::Us,
        ),
        (
            "scylla-operator, a minute ago",
            service(hash.clone(), owner("scylla-operator", "2026-11-21T11:59:00Z")),
            Writer::Other,
        ),
        (
            "scylla-operator, an hour ago",
            service(hash.clone(), owner("scylla-operator", "2026-11-21T11:00:00Z")),
            Writer::StaleOther,
        ),
        ("no managedFields: trust the writer", service(hash.clone(), json!([])), Writer::Other),
        (
            "managedFields of other fields only",
            service(
                hash,
                json!([{"manager": "kubectl", "operation": "Update", "time": "2026-01-01T00:00:00Z",
                         "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {}}}}]),
            ),
            Writer::Other,
        ),
    ];
    for (name, service, wanted) in cases {
        assert_eq!(who_writes(&service, now()), wanted, "{name}");
    }
    assert!(Writer::StaleOther.observer_acts());
    assert!(!Writer::Other.observer_acts());
}

#[test]
fn broadcast_address_follows_expose_options() {
    let svc = service(json!({}), json!([]));
    let pod: Pod = serde_json::from_value(
        json!({"metadata": {"name": "basic-dc1-a-0"}, "status": {"podIP": "192.168.1.5"}}),
    )
    .unwrap();
    let cluster = |expose: Value| -> ScyllaCluster {
        serde_json::from_value(json!({"metadata": {"name": "basic"}, "spec": {"exposeOptions": expose}}))
            .unwrap()
    };
    assert_eq!(broadcast_address(&cluster(json!(null)), &svc, Some(&pod)).as_deref(), Some("10.96.0.7"));
    let pod_ip = cluster(json!({"broadcastOptions": {"nodes": {"type": "PodIP"}}}));
    assert_eq!(broadcast_address(&pod_ip, &svc, Some(&pod)).as_deref(), Some("192.168.1.5"));
    assert_eq!(broadcast_address(&pod_ip, &svc, None), None);
    let headless: Service =
        serde_json::from_value(json!({"metadata": {"name": "x"}, "spec": {"clusterIP": "None"}})).unwrap();
    assert_eq!(broadcast_address(&cluster(json!(null)), &headless, None), None);
}

#[test]
fn token_from_secret_names_the_secret_and_never_shows_the_token() {
    let secret = |data: Option<&str>| -> Secret {
        Secret {
            data: data.map(|d| {
                [(keys::SCYLLA_AGENT_TOKEN_SECRET_KEY.to_owned(), ByteString(d.as_bytes().to_vec()))].into()
            }),
            ..Default::default()
        }
    };
    let token =
        token_from_secret("scylla", "basic-auth-token", Some(&secret(Some("auth_token: s3cr3t\n")))).unwrap();
    assert_eq!(token.expose(), "s3cr3t");
    for (case, secret, wanted) in [
        ("absent", None, "the Secret does not exist"),
        ("no key", Some(secret(None)), "missing"),
        ("malformed", Some(secret(Some("s3cr3t"))), "not valid YAML of the right shape"),
    ] {
        let err = token_from_secret("scylla", "basic-auth-token", secret.as_ref()).unwrap_err().to_string();
        assert!(err.contains("Secret scylla/basic-auth-token"), "{case}: {err}");
        assert!(err.contains("data[auth-token.yaml]"), "{case}: {err}");
        assert!(err.contains(wanted), "{case}: {err}");
        assert!(!err.contains("s3cr3t"), "{case}: leaked: {err}");
    }
}

#[test]
fn hash_patch_carries_the_marker() {
    let patch = current_hash_patch("h", now());
    assert_eq!(patch["metadata"]["annotations"][keys::CURRENT_TOKEN_RING_HASH], "h");
    assert_eq!(patch["metadata"]["annotations"][keys::RING_HASH_OBSERVED_AT], "2026-11-21T12:00:00Z");
}
