//! scylla-operator, as far as groundskeeper sees it: the objects it writes for one ScyllaCluster
//! (the ScyllaCluster and its status, the ScyllaDBDatacenter, the member Services with the ring
//! hashes its sidecar reports, the agent token Secret) and what a scale-out changes in them.
//!
//! Nothing here reconciles anything: it writes what scylla-operator would have written by the
//! time a cluster is settled. Scylla itself is played by `scylla_agent`.

use std::collections::BTreeMap;

use groundskeeper_protocol::keys;
use groundskeeper_protocol::ring_hash::ring_hash;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Secret, Service};
use serde_json::{Value, json};

use crate::apiserver::{ApiError, ApiServer, PatchFormat, ResourceId};

/// Rack name → members, e.g. `[("a", 2), ("b", 1)]`.
pub type Racks = [(&'static str, i64)];

pub fn scylla_clusters() -> ResourceId {
    ResourceId::new("scylla.scylladb.com", "v1", "scyllaclusters")
}

pub fn scylla_datacenters() -> ResourceId {
    ResourceId::new("scylla.scylladb.com", "v1alpha1", "scylladbdatacenters")
}

pub fn services() -> ResourceId {
    ResourceId::of::<Service>()
}

/// Tokens of a ring of `nodes` nodes with two tokens each, in Scylla's (sorted) order.
pub fn ring(nodes: i64) -> Vec<String> {
    let count = nodes * 2;
    (0..count)
        .map(|i| (i * 1_000_000 - count * 500_000).to_string())
        .collect()
}

/// The ring hash scylla-operator's sidecar writes for a ring of `nodes` nodes.
pub fn ring_hash_of(nodes: i64) -> String {
    ring_hash(&ring(nodes)).expect("the stand-in ring is valid")
}

/// One ScyllaCluster (one datacenter) as scylla-operator manages it.
#[derive(Debug, Clone)]
pub struct ScyllaOperator {
    pub namespace: String,
    pub cluster: String,
    pub datacenter: String,
}

impl ScyllaOperator {
    /// The member Service (and pod) name: `<cluster>-<datacenter>-<rack>-<ordinal>`.
    pub fn member_name(&self, rack: &str, ordinal: i64) -> String {
        format!("{}-{}-{rack}-{ordinal}", self.cluster, self.datacenter)
    }

    pub fn member_names(&self, racks: &Racks) -> Vec<String> {
        racks
            .iter()
            .flat_map(|(rack, members)| (0..*members).map(move |o| self.member_name(rack, o)))
            .collect()
    }

    /// A settled cluster of `racks`: the ScyllaCluster and its status, optionally the
    /// ScyllaDBDatacenter (scylla-operator ≥ 1.11 keeps foreign conditions there), the member
    /// Services all clean for the current ring, and the agent token Secret.
    pub fn create(
        &self,
        server: &ApiServer,
        racks: &Racks,
        with_datacenter: bool,
        agent_token: &str,
    ) -> Result<(), ApiError> {
        server.create_as(&self.agent_token_secret(agent_token))?;
        let ns = Some(self.namespace.as_str());
        server.create(&scylla_clusters(), ns, self.cluster_object(racks))?;
        self.write_status(server, 1, racks)?;
        if with_datacenter {
            server.create(&scylla_datacenters(), ns, self.datacenter_object(racks))?;
            let status =
                json!({ "status": { "observedGeneration": 1, "conditions": settled_conditions(1) } });
            server.patch(
                &scylla_datacenters(),
                ns,
                &self.cluster,
                PatchFormat::Merge,
                &status,
                true,
            )?;
        }
        let hash = ring_hash_of(members(racks));
        for (rack, count) in racks {
            for ordinal in 0..*count {
                server.create(
                    &services(),
                    ns,
                    self.member_service(rack, ordinal, &hash, Some(&hash)),
                )?;
            }
        }
        Ok(())
    }

    /// What scylla-operator does on a scale-out from `before` to `after`: the new spec
    /// (generation 2), new member Services (no last-cleaned hash yet), every node's sidecar
    /// reporting the new ring, then the status catching up.
    pub fn scale_out(&self, server: &ApiServer, before: &Racks, after: &Racks) -> Result<(), ApiError> {
        let ns = Some(self.namespace.as_str());
        let spec = json!({ "spec": self.cluster_object(after)["spec"] });
        server.patch(
            &scylla_clusters(),
            ns,
            &self.cluster,
            PatchFormat::Merge,
            &spec,
            false,
        )?;
        let new_hash = ring_hash_of(members(after));
        for (rack, count) in after {
            let existing = before.iter().find(|(r, _)| r == rack).map_or(0, |(_, m)| *m);
            for ordinal in 0..*count {
                if ordinal < existing {
                    let sidecar =
                        json!({ "metadata": { "annotations": { keys::CURRENT_TOKEN_RING_HASH: new_hash } } });
                    let name = self.member_name(rack, ordinal);
                    server.patch(&services(), ns, &name, PatchFormat::Merge, &sidecar, false)?;
                } else {
                    server.create(
                        &services(),
                        ns,
                        self.member_service(rack, ordinal, &new_hash, None),
                    )?;
                }
            }
        }
        self.write_status(server, 2, after)
    }

    fn write_status(&self, server: &ApiServer, generation: i64, racks: &Racks) -> Result<(), ApiError> {
        let status = self.cluster_status(generation, racks);
        let ns = Some(self.namespace.as_str());
        server.patch(
            &scylla_clusters(),
            ns,
            &self.cluster,
            PatchFormat::Merge,
            &status,
            true,
        )?;
        Ok(())
    }

    pub fn cluster_object(&self, racks: &Racks) -> Value {
        let racks: Vec<Value> = racks
            .iter()
            .map(|(name, members)| {
                json!({
                    "name": name,
                    "members": members,
                    "storage": { "capacity": "10Gi" },
                    "resources": { "requests": { "cpu": "1", "memory": "4Gi" } },
                    "placement": { "tolerations": [{ "key": "scylla", "operator": "Equal", "value": "true", "effect": "NoSchedule" }] }
                })
            })
            .collect();
        json!({
            "apiVersion": "scylla.scylladb.com/v1",
            "kind": "ScyllaCluster",
            "metadata": { "name": self.cluster, "namespace": self.namespace },
            "spec": {
                "version": "6.2.0",
                "agentVersion": "3.4.0",
                "datacenter": { "name": self.datacenter, "racks": racks }
            }
        })
    }

    /// `{"status": …}` of a settled ScyllaCluster at `generation`.
    pub fn cluster_status(&self, generation: i64, racks: &Racks) -> Value {
        let members = members(racks);
        let rack_status: serde_json::Map<String, Value> = racks
            .iter()
            .map(|(name, m)| {
                let status = json!({ "members": m, "readyMembers": m, "availableMembers": m, "updatedMembers": m, "version": "6.2.0" });
                (name.to_string(), status)
            })
            .collect();
        json!({ "status": {
            "observedGeneration": generation,
            "members": members, "readyMembers": members, "availableMembers": members,
            "rackCount": racks.len(),
            "racks": rack_status,
            "conditions": settled_conditions(generation),
        }})
    }

    pub fn datacenter_object(&self, racks: &Racks) -> Value {
        let racks: Vec<Value> = racks.iter().map(|(name, _)| json!({ "name": name })).collect();
        json!({
            "metadata": { "name": self.cluster, "namespace": self.namespace },
            "spec": {
                "clusterName": self.cluster,
                "scyllaDB": { "image": "docker.io/scylladb/scylla:6.2.0" },
                "scyllaDBManagerAgent": { "image": "docker.io/scylladb/scylla-manager-agent:3.4.0" },
                "datacenterName": self.datacenter,
                "racks": racks
            }
        })
    }

    /// A member Service with the ring hash the node's sidecar reports (`current`) and the one it
    /// was last cleaned for (`None`: a node that just joined).
    pub fn member_service(
        &self,
        rack: &str,
        ordinal: i64,
        current: &str,
        last_cleaned: Option<&str>,
    ) -> Value {
        let mut annotations = json!({ keys::CURRENT_TOKEN_RING_HASH: current });
        if let Some(last) = last_cleaned {
            annotations[keys::LAST_CLEANED_UP_TOKEN_RING_HASH] = last.into();
        }
        let name = self.member_name(rack, ordinal);
        json!({
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": {
                    keys::SCYLLA_CLUSTER_LABEL: self.cluster,
                    keys::SCYLLA_DATACENTER_LABEL: self.datacenter,
                    keys::SCYLLA_RACK_LABEL: rack,
                    keys::SCYLLA_SERVICE_TYPE_LABEL: keys::SCYLLA_SERVICE_TYPE_MEMBER,
                    "app.kubernetes.io/managed-by": "scylla-operator",
                },
                "annotations": annotations,
            },
            "spec": {
                "type": "ClusterIP",
                "publishNotReadyAddresses": true,
                "ports": [{ "name": "agent-api", "port": keys::SCYLLA_AGENT_PORT, "protocol": "TCP" }],
                "selector": { "statefulset.kubernetes.io/pod-name": name }
            }
        })
    }

    /// `<cluster>-auth-token` with scylla-operator's `auth-token.yaml`.
    pub fn agent_token_secret(&self, token: &str) -> Secret {
        Secret {
            metadata: kube::api::ObjectMeta {
                name: Some(format!("{}-auth-token", self.cluster)),
                namespace: Some(self.namespace.clone()),
                ..Default::default()
            },
            data: Some(BTreeMap::from([(
                keys::SCYLLA_AGENT_TOKEN_SECRET_KEY.to_string(),
                ByteString(format!("auth_token: {token}\n").into_bytes()),
            )])),
            type_: Some("Opaque".into()),
            ..Default::default()
        }
    }
}

pub fn members(racks: &Racks) -> i64 {
    racks.iter().map(|(_, m)| m).sum()
}

fn condition(type_: &str, status: &str, generation: i64) -> Value {
    json!({
        "type": type_, "status": status, "reason": "AsExpected", "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": generation
    })
}

/// Conditions scylla-operator reports for a settled cluster at `generation`.
pub fn settled_conditions(generation: i64) -> Value {
    json!([
        condition("Available", "True", generation),
        condition("Progressing", "False", generation),
        condition("Degraded", "False", generation),
        condition("StatefulSetControllerProgressing", "False", generation),
    ])
}
