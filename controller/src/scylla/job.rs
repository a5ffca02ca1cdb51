//! The Job that cleans one node: `groundskeeper-job cleanup` against the node's Scylla Manager
//! Agent, with the agent token Secret mounted, placed where the node's rack runs ([`cleanup_job`]),
//! created for a node of a Cleanup task by [`create_node_job`].

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use groundskeeper_api::maintenance_task::MaintenanceTask;
use groundskeeper_api::scylla::ScyllaCluster;
use groundskeeper_api::scylla::facts::MemberFacts;
use groundskeeper_api::validate::Cleanup;
use groundskeeper_protocol::keys;
use groundskeeper_protocol::operation::{CleanupRequest, Operation};
use kube::ResourceExt;

use super::agent::agent_token_secret_name;
use crate::jobs::{self, MaintenanceJob, Scheduling, SecretFile};
use crate::runtime::context::{Context, ControllerConfig};
use crate::runtime::error::Result;
use crate::tasks::step_jobs::{owner_of, step_job_name, step_labels};

/// Named here as well, where the Job's users have always found it.
pub use super::agent::node_address;

/// Where the agent token file is mounted in cleanup Jobs.
pub const AUTH_TOKEN_MOUNT_PATH: &str = "/etc/groundskeeper/agent/auth-token.yaml";

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

/// Creates the cleanup Job of node `service` of `task` (its step `index`), unless it exists.
pub(crate) async fn create_node_job(
    ctx: &Context,
    task: &MaintenanceTask,
    cluster: &ScyllaCluster,
    members: &[MemberFacts],
    cleanup: &Cleanup,
    service: &str,
    index: usize,
) -> Result<()> {
    let owner = owner_of(task)?;
    let member = members.iter().find(|m| m.service == service);
    let work = cleanup.work_of(service);
    let job = cleanup_job(
        cluster,
        &ctx.config,
        NodeCleanup {
            job: step_job_name(&task.name_any(), index),
            owner,
            service: service.to_owned(),
            rack: member.and_then(|m| m.rack.clone()).unwrap_or_default(),
            ring_hash: member.and_then(|m| m.annotations.get(keys::CURRENT_TOKEN_RING_HASH).cloned()),
            keyspaces: work.keyspaces,
            mark_node_clean: work.mark_node_clean,
            labels: step_labels(task, index),
        },
    );
    if jobs::create_job(&ctx.client, &job).await?.is_new() {
        ctx.metrics.job_created(job.operation.kind().as_str());
        tracing::info!(task = %task.name_any(), job = %job.name, node = service, "created the cleanup Job of a task's node");
    }
    Ok(())
}
