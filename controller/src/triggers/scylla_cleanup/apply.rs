//! Thin writes carrying out a [`Plan`]: Service annotation patches, cleanup Jobs through the
//! shared Job path, Events on the ScyllaCluster, and the two conditions through the shared status
//! writer. Every decision was taken in `decide`; here only the shape of each write is chosen.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ObjectReference, ResourceRequirements, Service};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use kube::{Api, Resource};
use serde_json::{Value, json};

use groundskeeper_protocol::keys;
use groundskeeper_protocol::operation::{CleanupRequest, Operation};

use super::decide::{Action, ConditionPlan, DeleteReason, MembersRecord, Plan, SeedReason};
use super::observe::{OPERATION, agent_token_secret_name};
use crate::api::scylla::ScyllaCluster;
use crate::conditions::{self, Condition};
use crate::execution::{self, MaintenanceJob, Scheduling, SecretFile};
use crate::runtime::context::{Context, ControllerConfig};
use crate::runtime::error::{Error, Result};

/// Where the agent token file is mounted in cleanup Jobs.
pub const AUTH_TOKEN_MOUNT_PATH: &str = "/etc/groundskeeper/agent/auth-token.yaml";
/// Longest name Kubernetes accepts for a Job whose name also becomes a label value.
const MAX_JOB_NAME: usize = 63;

/// Name of the cleanup Job of member Service `service`: `cleanup-<service>`, or, when that is
/// longer than 63 characters, its first 52 characters, `-`, and 10 hex digits of a hash of the
/// whole name (so that two long names with the same beginning do not collide).
pub fn cleanup_job_name(service: &str) -> String {
    let full = format!("cleanup-{service}");
    if full.len() <= MAX_JOB_NAME {
        return full;
    }
    let digest = format!("{:016x}", fnv1a64(full.as_bytes()));
    let keep = MAX_JOB_NAME - 11;
    let prefix = full[..keep].trim_end_matches(['-', '.']);
    format!("{prefix}-{}", &digest[..10])
}

/// FNV-1a: stable across releases and platforms (unlike `std`'s hasher), enough to tell names apart.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
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

/// The cleanup Job of one node, as a plain value for the shared Job builder.
pub fn cleanup_job(
    cluster: &ScyllaCluster,
    config: &ControllerConfig,
    service: &str,
    hash: &str,
    rack: &str,
) -> Result<MaintenanceJob> {
    let namespace = cluster.metadata.namespace.clone().unwrap_or_default();
    let name = cluster.metadata.name.clone().unwrap_or_default();
    let owner = cluster
        .controller_owner_ref(&())
        .ok_or_else(|| Error::InvalidObject {
            object: format!("ScyllaCluster {namespace}/{name}"),
            field: "metadata.uid".into(),
            message: "missing: a Job cannot be owned by it".into(),
        })?;
    Ok(MaintenanceJob {
        namespace: namespace.clone(),
        name: cleanup_job_name(service),
        owner,
        operation: Operation::Cleanup(CleanupRequest {
            node_address: node_address(&namespace, service),
            auth_token_file: AUTH_TOKEN_MOUNT_PATH.into(),
            agent_ca_file: None,
            keyspaces: Vec::new(),
        }),
        target: name.clone(),
        node: Some(service.to_owned()),
        extra_labels: BTreeMap::new(),
        annotations: BTreeMap::from([(keys::CLEANUP_TOKEN_RING_HASH.to_owned(), hash.to_owned())]),
        image: config.job_image.clone(),
        image_pull_policy: config.job_image_pull_policy.clone(),
        secret_files: vec![SecretFile {
            secret_name: agent_token_secret_name(&name),
            key: keys::SCYLLA_AGENT_TOKEN_SECRET_KEY.to_owned(),
            mount_path: AUTH_TOKEN_MOUNT_PATH.to_owned(),
        }],
        scheduling: rack_scheduling(cluster, rack),
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
    })
}

/// The JSON merge patch recording `hash` as the node's last-cleaned ring, with its members
/// record (or removing a record that no longer describes that ring).
pub fn last_cleaned_patch(hash: &str, members: Option<&MembersRecord>) -> Value {
    json!({
        "metadata": {
            "annotations": {
                keys::LAST_CLEANED_UP_TOKEN_RING_HASH: hash,
                keys::CLEANED_FOR_MEMBERS: members.map(MembersRecord::to_annotation),
            }
        }
    })
}

/// Carries out `plan` for `cluster`: every action (one failing does not stop the others), then the
/// conditions. Returns the first error.
pub async fn apply(ctx: &Context, cluster: &ScyllaCluster, plan: &Plan) -> Result<()> {
    let mut first_error = None;
    for action in &plan.actions {
        if let Err(err) = apply_action(ctx, cluster, action).await {
            tracing::warn!(error = %err, ?action, "cleanup action failed");
            first_error.get_or_insert(err);
        }
    }
    if let Err(err) = write_conditions(ctx, cluster, plan).await {
        first_error.get_or_insert(err);
    }
    first_error.map_or(Ok(()), Err)
}

async fn apply_action(ctx: &Context, cluster: &ScyllaCluster, action: &Action) -> Result<()> {
    let namespace = cluster.metadata.namespace.clone().unwrap_or_default();
    match action {
        Action::SeedLastCleaned {
            service,
            hash,
            members,
            reason,
        } => {
            patch_service(&ctx.client, &namespace, service, hash, members.as_ref()).await?;
            let why = match reason {
                SeedReason::Joined => "it just joined and holds no stale data",
                SeedReason::OnlyNodesLeft => {
                    "only nodes left the ring since its last cleanup: it lost no ranges"
                }
            };
            tracing::info!(%namespace, %service, "seeded last-cleaned ring hash: {why}");
            Ok(())
        }
        Action::RecordCleaned {
            service,
            hash,
            job,
            members,
        } => {
            patch_service(&ctx.client, &namespace, service, hash, members.as_ref()).await?;
            ctx.metrics.job_finished(OPERATION.as_str(), "succeeded");
            let note = format!("node {service} cleaned up by Job {job}");
            let node = related("v1", "Service", &namespace, service);
            publish(ctx, cluster, node, EventType::Normal, "NodeCleanedUp", note).await;
            Ok(())
        }
        Action::CreateCleanupJob {
            service, hash, rack, ..
        } => {
            let plan = cleanup_job(cluster, &ctx.config, service, hash, rack)?;
            let created = execution::create_job(&ctx.client, &plan).await?;
            if created.is_new() {
                ctx.metrics.job_created(OPERATION.as_str());
                tracing::info!(%namespace, %service, job = %plan.name, "created cleanup Job");
            }
            Ok(())
        }
        Action::ReportJobFailure {
            job,
            service,
            message,
        } => {
            ctx.metrics.job_finished(OPERATION.as_str(), "failed");
            let note = format!("cleanup Job {job} of node {service} failed: {message}");
            let failed = related("batch/v1", "Job", &namespace, job);
            publish(ctx, cluster, failed, EventType::Warning, "CleanupFailed", note).await;
            mark_failure_reported(&ctx.client, &namespace, job).await
        }
        Action::DeleteJob { job, reason } => {
            execution::delete_job(&ctx.client, &namespace, job).await?;
            tracing::info!(%namespace, %job, ?reason, "deleted cleanup Job");
            if *reason == DeleteReason::Retry {
                let note = format!("retrying the cleanup: deleted failed Job {job}");
                let deleted = related("batch/v1", "Job", &namespace, job);
                publish(ctx, cluster, deleted, EventType::Normal, "CleanupRetried", note).await;
            }
            Ok(())
        }
    }
}

pub async fn patch_service(
    client: &kube::Client,
    namespace: &str,
    service: &str,
    hash: &str,
    members: Option<&MembersRecord>,
) -> Result<()> {
    let api: Api<Service> = Api::namespaced(client.clone(), namespace);
    api.patch(
        service,
        &PatchParams::default(),
        &Patch::Merge(&last_cleaned_patch(hash, members)),
    )
    .await
    .map_err(Error::kube(format!(
        "patch annotation {} of Service {namespace}/{service}",
        keys::LAST_CLEANED_UP_TOKEN_RING_HASH
    )))?;
    Ok(())
}

async fn mark_failure_reported(client: &kube::Client, namespace: &str, job: &str) -> Result<()> {
    let api: Api<Job> = Api::namespaced(client.clone(), namespace);
    let patch = json!({"metadata": {"annotations": {keys::FAILURE_REPORTED: "true"}}});
    match api
        .patch(job, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        // Deleted by hand in the meantime: nothing left to mark.
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(err) => Err(Error::kube(format!("annotate Job {namespace}/{job}"))(err)),
    }
}

/// The node or Job an Event is about, besides the cluster. Events with the same reason about the
/// same cluster are folded into one series unless they name different related objects, so each
/// cleaned node gets an Event of its own.
fn related(api_version: &str, kind: &str, namespace: &str, name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some(api_version.to_owned()),
        kind: Some(kind.to_owned()),
        namespace: Some(namespace.to_owned()),
        name: Some(name.to_owned()),
        ..ObjectReference::default()
    }
}

async fn publish(
    ctx: &Context,
    cluster: &ScyllaCluster,
    related: ObjectReference,
    type_: EventType,
    reason: &str,
    note: String,
) {
    let event = Event {
        type_,
        reason: reason.to_owned(),
        note: Some(note),
        action: "Cleanup".to_owned(),
        secondary: Some(related),
    };
    ctx.publish_event(&cluster.object_ref(&()), event).await;
}

/// The plan's conditions as the shared writer takes them.
pub fn conditions(plan: &Plan) -> [Condition; 2] {
    let convert = |c: &ConditionPlan| Condition::new(c.type_, c.status, c.reason.clone(), c.message.clone());
    [convert(&plan.progressing), convert(&plan.degraded)]
}

/// Writes the conditions on the ScyllaDBDatacenter of the same name when there is one, else on
/// the ScyllaCluster.
pub async fn write_conditions(ctx: &Context, cluster: &ScyllaCluster, plan: &Plan) -> Result<()> {
    let namespace = cluster.metadata.namespace.clone().unwrap_or_default();
    let name = cluster.metadata.name.clone().unwrap_or_default();
    let target = conditions::scylla_condition_target(&ctx.client, &namespace, &name).await?;
    conditions::write_conditions(
        &ctx.client,
        &target,
        &conditions(plan),
        ctx.config.status_write_attempts,
    )
    .await?;
    Ok(())
}
