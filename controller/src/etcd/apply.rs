//! The writes of one pass of the EtcdCluster controller: the status (with the conditions merged),
//! at most one automatic MaintenanceTask, Events.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition as MetaCondition, ObjectMeta};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use serde_json::Value;

use groundskeeper_api::etcd_cluster::{EtcdCluster, EtcdClusterStatus};
use groundskeeper_api::maintenance_task::{
    DEFAULT_TTL_SECONDS_AFTER_FINISHED, MaintenanceTask, MaintenanceTaskSpec, TargetKind, TaskTarget,
};
use groundskeeper_protocol::keys;

use kube::runtime::controller::Action;

use super::decide::{Decision, PlannedTask};
use super::metrics::EtcdMetrics;
use super::model::Observed;
use crate::conditions::{self, merge_conditions};
use crate::runtime::context::Context;
use crate::runtime::error::{Error, Result};
use crate::runtime::reconciler::describe;

/// Wait before deciding again on a status that changed under a decision.
pub(super) const RETRY_ON_CONFLICT: Duration = Duration::from_secs(1);

/// Applies a decision: writes the status (on the resourceVersion it was decided on), submits
/// its task (a task of that name that exists already is taken as the same decision made by
/// another reconciliation), updates the metrics and publishes the Events.
pub async fn apply(
    cluster: &EtcdCluster,
    ctx: &Context,
    observed: &Observed,
    mut decision: Decision,
    now: Timestamp,
) -> Result<Action> {
    let namespace = cluster.namespace().unwrap_or_default();
    let name = cluster.name_any();
    let previous = cluster.status.clone().unwrap_or_default();
    let status = with_conditions(decision.status, &decision.conditions, cluster.meta().generation, now)?;
    match write_status(&ctx.client, cluster, &previous, &status).await {
        Err(err) if err.api_status_code() == Some(409) => {
            tracing::info!(cluster = %describe(cluster), "status changed since it was read: deciding again");
            return Ok(Action::requeue(RETRY_ON_CONFLICT));
        }
        written => written?,
    }
    if let Some(planned) = &decision.submit {
        let task = automatic_task(cluster, planned)?;
        if !submit_task(ctx, cluster, planned, task).await? {
            decision.events.retain(|e| e.reason != "MaintenanceTaskCreated");
        }
    }
    if let Some(planned) = &decision.backup {
        let task = backup_task(cluster, planned)?;
        if !submit_task(ctx, cluster, planned, task).await? {
            decision.events.retain(|e| e.reason != "BackupTaskCreated");
        }
    }
    delete_failed_history(ctx, &namespace, &decision.delete_tasks).await;
    if let Observed::Members(_) = observed {
        ctx.metrics.family::<EtcdMetrics>().observed(&namespace, &name, &status.members, &previous.members);
    }
    ctx.metrics.family::<EtcdMetrics>().partition(&namespace, &name, status.partition.as_ref());
    ctx.publish_events(&cluster.object_ref(&()), "Maintain", &decision.events).await;
    Ok(Action::requeue(to_std(decision.requeue_after)))
}

/// Creates `task`; false when a task of that name exists already: another reconciliation (a
/// second replica, or ours before a restart) decided the same on the same state, and the task and
/// its Event were theirs.
async fn submit_task(
    ctx: &Context,
    cluster: &EtcdCluster,
    planned: &PlannedTask,
    task: MaintenanceTask,
) -> Result<bool> {
    let namespace = cluster.namespace().unwrap_or_default();
    let created = Api::<MaintenanceTask>::namespaced(ctx.client.clone(), &namespace)
        .create(&PostParams::default(), &task)
        .await;
    match created {
        Ok(_) => {
            tracing::info!(task = %planned.name, cluster = %describe(cluster), "submitted a task");
            Ok(true)
        }
        Err(kube::Error::Api(status)) if status.code == 409 => {
            tracing::info!(task = %planned.name, "the task exists already");
            Ok(false)
        }
        Err(err) => Err(Error::kube(format!(
            "create MaintenanceTask {namespace}/{} for EtcdCluster {}",
            planned.name,
            cluster.name_any()
        ))(err)),
    }
}

/// Deletes the backup policy's Failed tasks beyond its history limit; one already gone is
/// fine, and one that cannot be deleted now is tried again at the next pass.
async fn delete_failed_history(ctx: &Context, namespace: &str, names: &[String]) {
    let tasks: Api<MaintenanceTask> = Api::namespaced(ctx.client.clone(), namespace);
    for name in names {
        match tasks.delete(name, &kube::api::DeleteParams::background()).await {
            Ok(_) => {
                tracing::info!(task = %name, "deleted a failed backup task beyond spec.backup.failedHistoryLimit")
            }
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(err) => {
                tracing::warn!(task = %name, "could not delete a failed backup task beyond the history limit: {err}")
            }
        }
    }
}

/// A Failed task of the backup policy is deleted a week after it failed at the latest (seconds):
/// `spec.backup.failedHistoryLimit` keeps the newest few until then.
pub const FAILED_BACKUP_TASK_TTL_SECONDS: i64 = 7 * 24 * 3600;

/// Finished Delta tasks of the backup policy are deleted after this long (seconds): one comes
/// every `deltaEvery`, and the catalog keeps what they wrote.
pub const DELTA_TASK_TTL_SECONDS: i64 = 600;

/// The backup policy's task as an object: as [`automatic_task`], labelled
/// `groundskeeper.dev/origin: backup-policy` (it does not wait for maintenance windows nor for an
/// approval); a Delta task is deleted [`DELTA_TASK_TTL_SECONDS`] after it finished.
pub fn backup_task(cluster: &EtcdCluster, planned: &PlannedTask) -> Result<MaintenanceTask> {
    let mut task = automatic_task(cluster, planned)?;
    task.labels_mut().insert(keys::ORIGIN_LABEL.to_owned(), keys::ORIGIN_BACKUP_POLICY.to_owned());
    task.spec.require_approval = false;
    task.spec.ttl_seconds_after_failed = Some(FAILED_BACKUP_TASK_TTL_SECONDS);
    if task.spec.task_type == groundskeeper_api::maintenance_task::TaskType::Delta {
        task.spec.ttl_seconds_after_finished = DELTA_TASK_TTL_SECONDS;
    }
    Ok(task)
}

/// The planned task as an object: labelled `groundskeeper.dev/origin: automatic`, owned by the
/// EtcdCluster (deleting the cluster deletes its tasks, and their Jobs with them).
pub fn automatic_task(cluster: &EtcdCluster, planned: &PlannedTask) -> Result<MaintenanceTask> {
    let owner = cluster.controller_owner_ref(&()).ok_or_else(|| Error::InvalidObject {
        object: format!("EtcdCluster {}", describe(cluster)),
        field: "metadata.uid".into(),
        message: "missing: the object was not read from the API server".into(),
    })?;
    Ok(MaintenanceTask {
        metadata: ObjectMeta {
            name: Some(planned.name.clone()),
            namespace: cluster.namespace(),
            labels: Some(BTreeMap::from([
                (keys::ORIGIN_LABEL.to_owned(), keys::ORIGIN_AUTOMATIC.to_owned()),
                (keys::MANAGED_BY_LABEL.to_owned(), keys::MANAGED_BY.to_owned()),
            ])),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: MaintenanceTaskSpec {
            target: TaskTarget { kind: TargetKind::EtcdCluster, name: cluster.name_any() },
            task_type: planned.task_type.clone(),
            config: planned.config.clone(),
            ttl_seconds_after_finished: DEFAULT_TTL_SECONDS_AFTER_FINISHED,
            ttl_seconds_after_failed: None,
            deadline_seconds: None,
            // Automatic: it waits for the target's maintenance windows whatever this says.
            wait_for_window: false,
            // The cluster asks that its automatic work be approved first.
            require_approval: cluster.spec.policy.require_approval,
        },
        status: None,
    })
}

/// The status with our conditions merged into those it had (transition times kept where the
/// status of a condition did not change).
fn with_conditions(
    mut status: EtcdClusterStatus,
    ours: &[crate::conditions::Condition],
    generation: Option<i64>,
    now: Timestamp,
) -> Result<EtcdClusterStatus> {
    let existing: Vec<Value> = status
        .conditions
        .iter()
        .map(serde_json::to_value)
        .collect::<std::result::Result<_, _>>()
        .map_err(Error::json("EtcdCluster status.conditions"))?;
    let merged = merge_conditions(&existing, ours, generation, now);
    status.conditions = merged
        .into_iter()
        .map(serde_json::from_value::<MetaCondition>)
        .collect::<std::result::Result<_, _>>()
        .map_err(Error::json("EtcdCluster status.conditions"))?;
    Ok(status)
}

/// The JSON merge patch turning status `previous` into `next` (see [`conditions::status_patch`]).
pub fn status_patch(previous: &EtcdClusterStatus, next: &EtcdClusterStatus) -> Result<Value> {
    conditions::status_patch(previous, next).map_err(Error::json("EtcdCluster status"))
}

/// Writes the status when it changed, on the resourceVersion it was read with (a 409 when the
/// status changed since).
async fn write_status(
    client: &kube::Client,
    cluster: &EtcdCluster,
    previous: &EtcdClusterStatus,
    next: &EtcdClusterStatus,
) -> Result<()> {
    if previous == next {
        return Ok(());
    }
    let namespace = cluster.namespace().unwrap_or_default();
    let name = cluster.name_any();
    let mut patch = status_patch(previous, next)?;
    if let Some(version) = cluster.resource_version() {
        patch["metadata"] = serde_json::json!({ "resourceVersion": version });
    }
    Api::<EtcdCluster>::namespaced(client.clone(), &namespace)
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(Error::kube(format!("write status of EtcdCluster {namespace}/{name}")))?;
    Ok(())
}

/// A wait as the controller runtime takes it (a second for one that cannot be).
pub(super) fn to_std(duration: SignedDuration) -> Duration {
    Duration::try_from(duration).unwrap_or(Duration::from_secs(1))
}
