//! The Job that cleans one node: `groundskeeper-job cleanup` against the node's Scylla Manager
//! Agent, with the agent token Secret mounted, placed where the node's rack runs.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use groundskeeper_api::scylla::ScyllaCluster;
use groundskeeper_protocol::keys;
use groundskeeper_protocol::operation::{CleanupRequest, Operation};

use super::observe::agent_token_secret_name;
use crate::jobs::{MaintenanceJob, Scheduling, SecretFile};
use crate::runtime::context::ControllerConfig;

/// Where the agent token file is mounted in cleanup Jobs.
pub const AUTH_TOKEN_MOUNT_PATH: &str = "/etc/groundskeeper/agent/auth-token.yaml";

/// Address the Job reaches the node's agent at: the member Service's DNS name `<svc>.<ns>.svc`.
/// Not the ClusterIP: the name works for headless member Services too (`exposeOptions.nodeService
/// .type: Headless`), and it is what a person reads in the Job's arguments. The search path of the
/// pod completes it with the cluster's domain, whatever that is.
pub fn node_address(namespace: &str, service: &str) -> String {
    format!("{service}.{namespace}.svc")
}

/// Where the Job's pod may run: the rack's tolerations, node affinity and pod affinity, so that it
/// fits the (tainted, labelled) nodes Scylla runs on. Not the pod anti-affinity: it spreads Scylla
/// pods apart ("not on a node that runs another Scylla pod"), and applied to the Job it would keep
/// it off exactly the dedicated nodes it is meant to fit on.
pub(crate) fn rack_scheduling(cluster: &ScyllaCluster, rack: &str) -> Scheduling {
    let placement = cluster.rack(rack).and_then(|r| r.placement.clone()).unwrap_or_default();
    Scheduling {
        tolerations: placement.tolerations,
        node_affinity: placement.node_affinity,
        pod_affinity: placement.pod_affinity,
        pod_anti_affinity: None,
        node_selector: BTreeMap::new(),
    }
}

/// One node's cleanup, as the task controller asks for it.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeCleanup {
    /// Name of the Job.
    pub job: String,
    /// The task that owns it.
    pub owner: OwnerReference,
    /// Member Service of the node.
    pub service: String,
    pub rack: String,
    /// The node's current ring hash when the Job is made: what its success records.
    pub ring_hash: Option<String>,
    /// Empty: every keyspace that can hold stale data.
    pub keyspaces: Vec<String>,
    /// `keyspaces` are all the node holds stale data for: reset Scylla's own flag once they are
    /// clean (`--mark-node-clean`).
    pub mark_node_clean: bool,
    /// Labels tying the Job to its task.
    pub labels: BTreeMap<String, String>,
}

/// The cleanup Job of one node, as a plain value for the shared Job builder.
pub fn cleanup_job(cluster: &ScyllaCluster, config: &ControllerConfig, node: NodeCleanup) -> MaintenanceJob {
    let namespace = cluster.metadata.namespace.clone().unwrap_or_default();
    let name = cluster.metadata.name.clone().unwrap_or_default();
    let annotations = node
        .ring_hash
        .map(|hash| BTreeMap::from([(keys::CLEANUP_TOKEN_RING_HASH.to_owned(), hash)]))
        .unwrap_or_default();
    MaintenanceJob {
        namespace: namespace.clone(),
        name: node.job,
        owner: node.owner,
        operation: Operation::Cleanup(CleanupRequest {
            node_address: node_address(&namespace, &node.service),
            auth_token_file: AUTH_TOKEN_MOUNT_PATH.into(),
            agent_ca_file: None,
            // A whole-node cleanup resets Scylla's flag by itself; a list of keyspaces does only
            // when the task says they are all the node holds stale data for.
            mark_node_clean: node.mark_node_clean && !node.keyspaces.is_empty(),
            keyspaces: node.keyspaces,
        }),
        target: name.clone(),
        node: Some(node.service),
        extra_labels: node.labels,
        annotations,
        image: config.job_image.clone(),
        image_pull_policy: config.job_image_pull_policy.clone(),
        secret_files: vec![SecretFile {
            secret_name: agent_token_secret_name(&name),
            key: keys::SCYLLA_AGENT_TOKEN_SECRET_KEY.to_owned(),
            mount_path: AUTH_TOKEN_MOUNT_PATH.to_owned(),
        }],
        claim_volumes: Vec::new(),
        secret_folders: Vec::new(),
        scratch: None,
        scheduling: rack_scheduling(cluster, &node.rack),
        // The runner waits on HTTP calls; a little memory for the result and TLS is all it needs.
        resources: Some(ResourceRequirements {
            requests: Some(BTreeMap::from([
                ("cpu".to_owned(), Quantity("10m".into())),
                ("memory".to_owned(), Quantity("32Mi".into())),
            ])),
            limits: Some(BTreeMap::from([("memory".to_owned(), Quantity("128Mi".into()))])),
            ..Default::default()
        }),
        limits: config.job_limits.clone(),
    }
}
