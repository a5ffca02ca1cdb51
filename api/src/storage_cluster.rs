//! Arktos's `StorageCluster` (core `v1`, cluster-scoped, `/api/v1/storageclusters`): one etcd
//! cluster of a partitioned Kubernetes API, as Arktos's API server finds its stores. The fields
//! are at the top level of the object, not under a spec:
//!
//! ```yaml
//! apiVersion: v1
//! kind: StorageCluster
//! storageClusterId: "1"          # 0–63, a decimal string
//! serviceAddress: "172.30.0.122:2379"
//! metadata:
//!   name: c1
//! ```
//!
//! Only what groundskeeper reads is modelled; the object is never written.

use std::borrow::Cow;

use k8s_openapi::ClusterResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StorageCluster {
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The cluster id, 0–63, as a decimal string (Arktos validates it so).
    #[serde(default)]
    pub storage_cluster_id: String,
    /// The etcd client address, `host:port` (Arktos hands it to its etcd client as is).
    #[serde(default)]
    pub service_address: String,
}

impl kube::Resource for StorageCluster {
    type DynamicType = ();
    type Scope = ClusterResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "StorageCluster".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }
    fn api_version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "storageclusters".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::Resource;

    #[test]
    fn reads_the_object_as_arktos_serves_it() {
        let object: StorageCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "StorageCluster",
            "metadata": {"name": "c1", "uid": "u1"},
            "storageClusterId": "1", "serviceAddress": "172.30.0.122:2379"
        }))
        .unwrap();
        assert_eq!(object.storage_cluster_id, "1");
        assert_eq!(object.service_address, "172.30.0.122:2379");
        assert_eq!(StorageCluster::url_path(&(), None), "/api/v1/storageclusters");
    }
}
