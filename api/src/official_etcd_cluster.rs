//! SIG etcd's etcd-operator (`etcd-io/etcd-operator`): its `EtcdCluster` (`operator.etcd.io/v1alpha1`,
//! namespaced), as far as groundskeeper reads it.
//!
//! ```yaml
//! apiVersion: operator.etcd.io/v1alpha1
//! kind: EtcdCluster
//! metadata: {name: main, namespace: etcd}
//! spec:
//!   size: 3
//!   version: v3.5.21
//!   tls: {provider: auto}          # absent: the members serve plain http
//!   etcdOptions: ["--listen-client-urls=https://0.0.0.0:2379"]
//! status:
//!   leaderID: 8e9e05c52164694d
//!   members: [{name: main-0, id: 8e9e05c52164694d, isHealthy: true, isLeader: true}]
//! ```
//!
//! What the operator makes of it, and groundskeeper relies on: a headless Service named after
//! the cluster (client address `<name>.<namespace>.svc.cluster.local`, port 2379, resolving to the
//! member pods; the operator's certificates name it and `*.<name>.<namespace>.svc.cluster.local`
//! by default), members serving https with client certificates required when `spec.tls` is set, and the
//! client certificate for other clients in Secret `<name>-client-tls` (keys `ca.crt`, `tls.crt`,
//! `tls.key`). `spec.etcdOptions` are etcd flags that replace the operator's defaults of the same
//! name (`--listen-client-urls` among them). Member pods are not read: their names and number are
//! the operator's business (a StatefulSet, or one Pod per member).
//!
//! A foreign resource: its CRD is the operator's, never generated or installed by groundskeeper
//! (it is not in [`crate::crds::all`]), and the object is never written. Every field is optional
//! here and unknown ones are ignored, so a newer operator's objects still read.

use kube::CustomResource;
use serde::{Deserialize, Serialize};

/// API group of the operator's resources.
pub const GROUP: &str = "operator.etcd.io";
/// Port the operator's members serve clients on unless `spec.etcdOptions` says otherwise.
pub const DEFAULT_CLIENT_PORT: u16 = 2379;
/// The etcd flag whose value says on which scheme and port members serve clients.
pub const LISTEN_CLIENT_URLS: &str = "--listen-client-urls";

/// The spec of an etcd-operator `EtcdCluster`: the fields groundskeeper reads.
#[derive(CustomResource, Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[kube(
    group = "operator.etcd.io",
    version = "v1alpha1",
    kind = "EtcdCluster",
    root = "OperatorEtcdCluster",
    namespaced,
    status = "OperatorEtcdClusterStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct OperatorEtcdClusterSpec {
    /// Members wanted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<i64>,
    /// etcd version of the members' image, e.g. `v3.5.21`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Present: the members serve clients over TLS and require a client certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<OperatorTls>,
    /// etcd flags, `--name=value` (or `--name value`), replacing the operator's defaults.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub etcd_options: Vec<String>,
}

/// `spec.tls`: how the operator gets its certificates. Only its presence matters here.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct OperatorTls {
    /// `auto` (the default) or `cert-manager`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
}

/// The status the operator writes.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OperatorEtcdClusterStatus {
    /// The leader's member id, hex.
    #[serde(rename = "leaderID", default, skip_serializing_if = "Option::is_none")]
    pub leader_id: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<OperatorMemberStatus>,
}

/// One member as the operator last saw it.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct OperatorMemberStatus {
    /// The member's name (its pod's).
    #[serde(default)]
    pub name: String,
    /// Member id, hex.
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub is_healthy: bool,
    #[serde(default)]
    pub is_leader: bool,
    #[serde(default)]
    pub is_learner: bool,
}

impl OperatorEtcdCluster {
    /// Name of the Secret with the client certificate the operator makes for other clients.
    pub fn client_tls_secret(name: &str) -> String {
        format!("{name}-client-tls")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::Resource;

    #[test]
    fn reads_the_object_as_the_operator_serves_it_unknown_fields_and_all() {
        let object: OperatorEtcdCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "operator.etcd.io/v1alpha1", "kind": "EtcdCluster",
            "metadata": {"name": "main", "namespace": "etcd", "uid": "u1"},
            "spec": {
                "size": 3, "version": "v3.5.21", "imageRegistry": "gcr.io/etcd-development/etcd",
                "tls": {"provider": "cert-manager", "providerCfg": {"certManagerCfg": {"issuerName": "ca"}}},
                "etcdOptions": ["--auto-compaction-retention=1h"],
                "podTemplate": {"spec": {"nodeSelector": {"a": "b"}}}
            },
            "status": {
                "leaderID": "8e9e05c52164694d", "readyReplicas": 3,
                "members": [{"name": "main-0", "id": "8e9e05c52164694d", "isHealthy": true, "isLeader": true, "version": "3.5.21"}],
                "conditions": []
            }
        }))
        .unwrap();
        assert_eq!(object.spec.size, Some(3));
        assert_eq!(object.spec.tls.unwrap().provider.as_deref(), Some("cert-manager"));
        assert_eq!(object.spec.etcd_options, ["--auto-compaction-retention=1h"]);
        let status = object.status.unwrap();
        assert_eq!(status.leader_id.as_deref(), Some("8e9e05c52164694d"));
        assert!(status.members[0].is_leader && status.members[0].is_healthy);
        assert_eq!(
            OperatorEtcdCluster::url_path(&(), Some("etcd")),
            "/apis/operator.etcd.io/v1alpha1/namespaces/etcd/etcdclusters"
        );
        let bare: OperatorEtcdCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "operator.etcd.io/v1alpha1", "kind": "EtcdCluster",
            "metadata": {"name": "bare"}, "spec": {}
        }))
        .unwrap();
        assert_eq!(bare.spec, OperatorEtcdClusterSpec::default());
    }
}
