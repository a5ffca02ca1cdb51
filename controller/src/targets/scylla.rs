//! Cleanup tasks on a ScyllaCluster: whether the cluster may take one now, which nodes a task
//! cleans and in which order, which may start within the per-rack and per-cluster bounds, and
//! the Job that cleans one node.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use groundskeeper_protocol::keys;
use groundskeeper_protocol::operation::{CleanupRequest, Operation};

use crate::api::maintenance_task::{NodeProgress, NodeState};
use crate::api::scylla::ScyllaCluster;
use crate::execution::{MaintenanceJob, Scheduling, SecretFile};
use crate::runtime::context::ControllerConfig;
use crate::tasks::TargetFacts;
use crate::tasks::validate::Cleanup;
use crate::triggers::scylla_cleanup::decide::{
    ClusterFacts, Limits, MemberFacts, SecretState, cluster_limits, precondition_failures, secret_wait,
    sorted_members,
};
use crate::triggers::scylla_cleanup::observe::agent_token_secret_name;

/// Where the agent token file is mounted in cleanup Jobs.
pub const AUTH_TOKEN_MOUNT_PATH: &str = "/etc/groundskeeper/agent/auth-token.yaml";

/// Whether a cleanup may start on the cluster: the same preconditions as the automatic cleanup
/// (DESIGN.md), the agent token Secret, and readable concurrency annotations.
pub fn facts(cluster: Option<&ClusterFacts>, secret: &SecretState) -> TargetFacts {
    let Some(cluster) = cluster else {
        return TargetFacts::Missing;
    };
    let mut waiting = precondition_failures(cluster);
    if let Err(problems) = cluster_limits(cluster) {
        waiting.extend(problems.into_iter().map(|p| format!("waiting for a fix: {p}")));
    }
    waiting.extend(secret_wait(&cluster.namespace, secret));
    if waiting.is_empty() {
        TargetFacts::Ready
    } else {
        TargetFacts::Waiting {
            reason: format!(
                "ScyllaCluster {}/{}: {}",
                cluster.namespace,
                cluster.name,
                waiting.join("; ")
            ),
        }
    }
}

/// The nodes a task cleans, in cleaning order (datacenter, rack, ordinal), each `Pending`: the
/// ones it names, else every member of the cluster. `Err` names a node that is not a member.
pub fn plan_nodes(
    cleanup: &Cleanup,
    cluster: &ClusterFacts,
    members: &[MemberFacts],
) -> Result<Vec<NodeProgress>, String> {
    let sorted = sorted_members(members);
    let unknown: Vec<&str> = cleanup
        .nodes
        .iter()
        .filter(|n| !members.iter().any(|m| &m.service == *n))
        .map(String::as_str)
        .collect();
    if !unknown.is_empty() {
        let known: Vec<&str> = sorted.iter().map(|m| m.service.as_str()).collect();
        return Err(format!(
            "spec.config.cleanup.nodes: {} not a member Service of ScyllaCluster {}/{} (its members: {}); \
             create a new task naming members only",
            unknown.join(", "),
            cluster.namespace,
            cluster.name,
            if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            }
        ));
    }
    Ok(sorted
        .into_iter()
        .filter(|m| cleanup.nodes.is_empty() || cleanup.nodes.contains(&m.service))
        .map(|m| NodeProgress {
            name: m.service.clone(),
            state: NodeState::Pending,
            ..NodeProgress::default()
        })
        .collect())
}

/// The task's own bounds where it sets them, else the cluster's annotations, else one per rack.
/// Annotations that cannot be read count as the tightest bound: nothing is run on a guess.
pub fn limits(cleanup: &Cleanup, cluster: &ClusterFacts) -> Limits {
    let from_cluster = cluster_limits(cluster).unwrap_or(Limits {
        per_rack: 1,
        per_cluster: Some(1),
    });
    Limits {
        per_rack: cleanup.max_concurrent_per_rack.unwrap_or(from_cluster.per_rack),
        per_cluster: cleanup.max_concurrent.or(from_cluster.per_cluster),
    }
}

/// The rack of every member: (datacenter, rack).
pub fn racks(members: &[MemberFacts]) -> BTreeMap<String, (String, String)> {
    members
        .iter()
        .filter_map(|m| Some((m.service.clone(), (m.datacenter.clone()?, m.rack.clone()?))))
        .collect()
}

/// Which pending nodes may start now (indexes into `nodes`, in order), given those running and
/// the bounds. A node whose rack is unknown never starts.
pub fn to_start(
    nodes: &[NodeProgress],
    racks: &BTreeMap<String, (String, String)>,
    limits: Limits,
) -> Vec<usize> {
    let mut per_rack: BTreeMap<&(String, String), u32> = BTreeMap::new();
    let mut total = 0u32;
    for node in nodes.iter().filter(|n| n.state == NodeState::Running) {
        total += 1;
        if let Some(rack) = racks.get(&node.name) {
            *per_rack.entry(rack).or_default() += 1;
        }
    }
    let mut start = Vec::new();
    for (index, node) in nodes.iter().enumerate() {
        if node.state != NodeState::Pending || limits.per_cluster.is_some_and(|max| total >= max) {
            continue;
        }
        let Some(rack) = racks.get(&node.name) else {
            continue;
        };
        let in_rack = per_rack.entry(rack).or_default();
        if *in_rack >= limits.per_rack {
            continue;
        }
        *in_rack += 1;
        total += 1;
        start.push(index);
    }
    start
}

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
pub fn rack_scheduling(cluster: &ScyllaCluster, rack: &str) -> Scheduling {
    let placement = cluster
        .rack(rack)
        .and_then(|r| r.placement.clone())
        .unwrap_or_default();
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

#[cfg(test)]
mod tests;
