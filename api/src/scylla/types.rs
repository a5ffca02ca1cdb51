//! Partial views of scylla-operator's `ScyllaCluster` (`scylla.scylladb.com/v1`) and
//! `ScyllaDBDatacenter` (`scylla.scylladb.com/v1alpha1`).

use k8s_openapi::api::core::v1::{NodeAffinity, PodAffinity, PodAntiAffinity, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::namespaced_resource;

/// `scylla.scylladb.com/v1` `ScyllaCluster`, the fields groundskeeper reads.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScyllaCluster {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: ScyllaClusterSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ScyllaStatus>,
}

namespaced_resource!(
    ScyllaCluster,
    group = "scylla.scylladb.com",
    version = "v1",
    kind = "ScyllaCluster",
    plural = "scyllaclusters"
);

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScyllaClusterSpec {
    #[serde(default)]
    pub datacenter: ScyllaClusterDatacenter,
    /// Seeds outside this ScyllaCluster: when set, the ring holds nodes of other datacenters that
    /// have no member Service here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub external_seeds: Vec<String>,
    /// Kept as JSON: only `broadcastOptions.nodes.type` is read (which address Scylla knows a
    /// node by: `ServiceClusterIP`, the default, or `PodIP`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expose_options: Option<Value>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScyllaClusterDatacenter {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub racks: Vec<ScyllaClusterRack>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScyllaClusterRack {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub members: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
}

/// Where a rack's pods may run (the same shape in both CRDs).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_affinity: Option<NodeAffinity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_affinity: Option<PodAffinity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_anti_affinity: Option<PodAntiAffinity>,
}

/// The status fields groundskeeper reads; the same shape in both CRDs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScyllaStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Kept as JSON values: the list is shared with scylla-operator, whose entries must survive
    /// byte-for-byte (see [`crate::conditions`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Value>,
    /// The ScyllaCluster's `racks` (a map of rack name to its status, `members` among it); kept
    /// as JSON, since the ScyllaDBDatacenter's has another shape.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub racks: Option<Value>,
}

impl ScyllaStatus {
    /// The `status` of condition `type_` (`"True"`, `"False"`, `"Unknown"`), if present.
    pub fn condition_status(&self, type_: &str) -> Option<&str> {
        crate::conditions::condition_status(&self.conditions, type_)
    }
}

/// `scylla.scylladb.com/v1alpha1` `ScyllaDBDatacenter`, the fields groundskeeper reads.
/// scylla-operator makes one per ScyllaCluster, with the same name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScyllaDBDatacenter {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: ScyllaDBDatacenterSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ScyllaStatus>,
}

namespaced_resource!(
    ScyllaDBDatacenter,
    group = "scylla.scylladb.com",
    version = "v1alpha1",
    kind = "ScyllaDBDatacenter",
    plural = "scylladbdatacenters"
);

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScyllaDBDatacenterSpec {
    #[serde(default)]
    pub cluster_name: String,
    /// Empty means: the object's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datacenter_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rack_template: Option<ScyllaDBDatacenterRackTemplate>,
    #[serde(default)]
    pub racks: Vec<ScyllaDBDatacenterRack>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScyllaDBDatacenterRackTemplate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScyllaDBDatacenterRack {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
}

impl ScyllaCluster {
    /// The rack called `name`, if the spec has one.
    pub fn rack(&self, name: &str) -> Option<&ScyllaClusterRack> {
        self.spec.datacenter.racks.iter().find(|rack| rack.name == name)
    }
}

impl ScyllaDBDatacenter {
    /// The datacenter name Scylla uses: `spec.datacenterName`, else the object's name.
    pub fn datacenter_name(&self) -> String {
        match self.spec.datacenter_name.as_deref() {
            Some(name) if !name.is_empty() => name.to_owned(),
            _ => self.metadata.name.clone().unwrap_or_default(),
        }
    }
}
