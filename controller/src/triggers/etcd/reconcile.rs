//! The thin layer around [`decide`]: read the EtcdCluster's maintenance tasks and the members,
//! decide, then write the status, submit the task, publish Events and update the metrics.
//!
//! The status is written before the task is submitted, with the resourceVersion the decision was
//! made on: when the task controller recorded a finished task's outcome in the meantime
//! ([`crate::results::etcd_cluster`]), the write conflicts, nothing is submitted, and the
//! cluster is decided again on the fresh status. A task whose outcome is recorded is final
//! before the tasks are listed, so a decision never misses an outcome it then acts against.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    Condition as MetaCondition, ObjectMeta, OwnerReference,
};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Resource, ResourceExt};
use serde_json::Value;

use groundskeeper_protocol::{Operation, keys};

use super::decide::{
    ClusterTaskView, Decision, Input, Observed, PlannedEvent, PlannedTask, TLS_MOUNT_DIR, check_due, decide,
};
use super::fleet::{FleetMember, id_collisions};
use super::observe::{ClientTls, observe_cluster};
use super::policy::Policy;
use crate::api::etcd_cluster::{EtcdCluster, EtcdClusterStatus, TLS_CA_KEY, TLS_CERT_KEY, TLS_KEY_KEY};
use crate::api::maintenance_task::{
    DEFAULT_TTL_SECONDS_AFTER_FINISHED, MaintenanceTask, MaintenanceTaskSpec, TargetKind, TaskTarget,
};
use crate::conditions::{self, merge_conditions};
use crate::execution::{ClaimVolume, MaintenanceJob, SecretFile};
use crate::runtime::context::{Context, JobLimits};
use crate::runtime::error::{Error, Result};
use crate::runtime::reconciler::{self, Reconciler, describe};
use crate::runtime::scope;

/// This controller's name in metrics and logs.
pub const CONTROLLER: &str = "etcd";
/// Wait before deciding again on a status that changed under a decision.
const RETRY_ON_CONFLICT: Duration = Duration::from_secs(1);

/// Runs the EtcdCluster controller (and, with `--discover-storage-clusters`, the discovery of
/// Arktos StorageClusters as EtcdClusters) until the watch streams end.
pub async fn run(ctx: Arc<Context>) {
    let clusters = scope::in_each_namespace(&ctx, |namespace| run_in(ctx.clone(), namespace));
    futures::join!(clusters, super::discovery::run(ctx.clone()));
}

/// The trigger over the EtcdClusters of one namespace, or of all for `None`.
async fn run_in(ctx: Arc<Context>, namespace: Option<String>) {
    let clusters = scope::api::<EtcdCluster>(&ctx.client, namespace.as_deref());
    let tasks = scope::api::<MaintenanceTask>(&ctx.client, namespace.as_deref());
    // Every task on a cluster wakes it, whoever asked for it: a task queued or ended changes
    // what is due (see `check_due`).
    let controller = Controller::new(clusters, watcher::Config::default()).watches(
        tasks,
        watcher::Config::default(),
        |task: MaintenanceTask| {
            let namespace = task.namespace()?;
            (task.spec.target.kind == TargetKind::EtcdCluster)
                .then(|| ObjectRef::new(&task.spec.target.name).within(&namespace))
        },
    );
    reconciler::run(controller, ctx, CONTROLLER, reconcile).await;
}

/// One reconciliation of one EtcdCluster.
pub async fn reconcile(
    cluster: Arc<EtcdCluster>,
    reconciler: Arc<Reconciler<EtcdCluster>>,
) -> Result<Action> {
    let _timer = reconciler.ctx.metrics.reconcile_started(CONTROLLER);
    let action = reconcile_at(&cluster, &reconciler.ctx, Timestamp::now()).await?;
    reconciler.succeeded(&cluster);
    Ok(action)
}

/// [`reconcile`] with the clock given, for tests.
pub async fn reconcile_at(cluster: &EtcdCluster, ctx: &Context, now: Timestamp) -> Result<Action> {
    let namespace = cluster.namespace().unwrap_or_default();
    let name = cluster.name_any();
    let previous = cluster.status.clone().unwrap_or_default();
    if cluster.meta().deletion_timestamp.is_some() {
        ctx.metrics.etcd.forget(&namespace, &name, &previous.members);
        return Ok(Action::await_change());
    }
    let tasks = cluster_tasks(ctx, &namespace, &name, now).await?;
    if let Err(wait) = check_due(&previous, cluster.meta().generation, &tasks, now) {
        return Ok(Action::requeue(to_std(wait)));
    }
    let policy = Policy::from_spec(&cluster.spec);
    let collisions = fleet_collisions(ctx, cluster).await?;
    // A cluster whose fleet id is disputed is not maintained: nothing to observe for it.
    let observed = match &policy {
        Ok(policy) if collisions.is_empty() => observe(&ctx.client, &namespace, policy).await,
        _ => Observed::NotAttempted,
    };
    let decision = decide(&Input {
        cluster: &name,
        generation: cluster.meta().generation,
        policy: policy.as_ref(),
        enabled: cluster.spec.policy.enabled,
        observed: &observed,
        tasks: &tasks,
        previous: &previous,
        collisions: &collisions,
        now,
    });
    apply(cluster, ctx, &observed, decision, now).await
}

/// The other clusters of `cluster`'s fleet, in the namespaces this controller looks after, that
/// claim its cluster id.
async fn fleet_collisions(ctx: &Context, cluster: &EtcdCluster) -> Result<Vec<String>> {
    if cluster.spec.partition.is_none() {
        return Ok(Vec::new());
    }
    let fleet: Vec<FleetMember> = all_clusters(ctx).await?.iter().map(fleet_member).collect();
    Ok(id_collisions(&fleet_member(cluster), &fleet))
}

/// Every EtcdCluster in the namespaces this controller looks after.
pub async fn all_clusters(ctx: &Context) -> Result<Vec<EtcdCluster>> {
    let mut all = Vec::new();
    for namespace in scope::watched(&ctx.config) {
        let api: Api<EtcdCluster> = scope::api(&ctx.client, namespace.as_deref());
        let listed = api
            .list(&ListParams::default())
            .await
            .map_err(Error::kube(format!(
                "list EtcdClusters in {}",
                namespace.as_deref().unwrap_or("every namespace")
            )))?;
        all.extend(listed.items);
    }
    Ok(all)
}

fn fleet_member(cluster: &EtcdCluster) -> FleetMember {
    FleetMember {
        namespace: cluster.namespace().unwrap_or_default(),
        name: cluster.name_any(),
        partition: cluster.spec.partition.clone(),
    }
}

/// The MaintenanceTasks whose target is the cluster, whoever created them.
async fn cluster_tasks(
    ctx: &Context,
    namespace: &str,
    name: &str,
    now: Timestamp,
) -> Result<Vec<ClusterTaskView>> {
    let target = TaskTarget {
        kind: TargetKind::EtcdCluster,
        name: name.to_owned(),
    };
    Ok(Api::<MaintenanceTask>::namespaced(ctx.client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .map_err(Error::kube(format!("list MaintenanceTasks in {namespace}")))?
        .items
        .iter()
        .filter(|task| task.spec.target == target)
        .map(|task| ClusterTaskView::of(task, now))
        .collect())
}

/// Reads the client TLS Secret, if any, and asks every member.
async fn observe(client: &kube::Client, namespace: &str, policy: &Policy) -> Observed {
    let tls = match &policy.tls_secret {
        Some(secret) => match read_client_tls(client, namespace, secret).await {
            Ok(tls) => Some(tls),
            Err(why) => return Observed::Failed(why),
        },
        None => None,
    };
    Observed::Members(observe_cluster(&policy.endpoints, tls.as_ref()).await)
}

/// The PEM files of the client TLS Secret. Errors name the Secret and key, never the content.
pub async fn read_client_tls(
    client: &kube::Client,
    namespace: &str,
    secret_name: &str,
) -> std::result::Result<ClientTls, String> {
    let what = format!("client TLS Secret {namespace}/{secret_name} (spec.tls.secretName)");
    let secret = Api::<Secret>::namespaced(client.clone(), namespace)
        .get(secret_name)
        .await
        .map_err(|err| format!("{what}: {err}"))?;
    let data = secret.data.unwrap_or_default();
    let key = |key: &str| {
        data.get(key)
            .map(|bytes| bytes.0.clone())
            .filter(|bytes| !bytes.is_empty())
            .ok_or_else(|| {
                format!(
                    "{what}: has no key {key:?} (keys {TLS_CA_KEY}, {TLS_CERT_KEY}, {TLS_KEY_KEY} are needed)"
                )
            })
    };
    Ok(ClientTls {
        ca: key(TLS_CA_KEY)?,
        cert: key(TLS_CERT_KEY)?,
        key: key(TLS_KEY_KEY)?,
    })
}

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
    let status = with_conditions(
        decision.status,
        &decision.conditions,
        cluster.meta().generation,
        now,
    )?;
    match write_status(&ctx.client, cluster, &previous, &status).await {
        Err(err) if err.api_status_code() == Some(409) => {
            tracing::info!(cluster = %describe(cluster), "status changed since it was read: deciding again");
            return Ok(Action::requeue(RETRY_ON_CONFLICT));
        }
        written => written?,
    }
    if let Some(planned) = &decision.submit {
        let task = automatic_task(cluster, planned)?;
        let created = Api::<MaintenanceTask>::namespaced(ctx.client.clone(), &namespace)
            .create(&PostParams::default(), &task)
            .await;
        match created {
            Ok(_) => {
                tracing::info!(task = %planned.name, cluster = %describe(cluster), "submitted a maintenance task")
            }
            Err(kube::Error::Api(status)) if status.code == 409 => {
                // Another reconciliation (a second replica, or ours before a restart) decided the
                // same on the same state: the task is theirs, the Event was theirs to publish.
                tracing::info!(task = %planned.name, "maintenance task exists already");
                decision.events.retain(|e| e.reason != "MaintenanceTaskCreated");
            }
            Err(err) => {
                return Err(Error::kube(format!(
                    "create MaintenanceTask {namespace}/{} for EtcdCluster {name}",
                    planned.name
                ))(err));
            }
        }
    }
    if let Observed::Members(_) = observed {
        ctx.metrics
            .etcd
            .observed(&namespace, &name, &status.members, &previous.members);
    }
    ctx.metrics
        .etcd
        .partition(&namespace, &name, status.partition.as_ref());
    publish_events(cluster, ctx, &decision.events).await;
    Ok(Action::requeue(to_std(decision.requeue_after)))
}

/// The planned task as an object: labelled `groundskeeper.dev/origin: automatic`, owned by the
/// EtcdCluster (deleting the cluster deletes its tasks, and their Jobs with them).
pub fn automatic_task(cluster: &EtcdCluster, planned: &PlannedTask) -> Result<MaintenanceTask> {
    let owner = cluster
        .controller_owner_ref(&())
        .ok_or_else(|| Error::InvalidObject {
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
            target: TaskTarget {
                kind: TargetKind::EtcdCluster,
                name: cluster.name_any(),
            },
            task_type: planned.task_type.clone(),
            config: planned.config.clone(),
            ttl_seconds_after_finished: DEFAULT_TTL_SECONDS_AFTER_FINISHED,
            deadline_seconds: None,
        },
        status: None,
    })
}

/// The Job limits: the cluster's `spec.job`, else the controller's settings.
pub fn job_limits(policy: Option<&Policy>, defaults: &JobLimits) -> JobLimits {
    let Some(spec) = policy.map(|p| &p.job) else {
        return defaults.clone();
    };
    JobLimits {
        backoff_limit: spec.backoff_limit.unwrap_or(defaults.backoff_limit),
        active_deadline_seconds: spec
            .active_deadline_seconds
            .unwrap_or(defaults.active_deadline_seconds),
        ttl_seconds_after_finished: spec
            .ttl_seconds_after_finished
            .unwrap_or(defaults.ttl_seconds_after_finished),
    }
}

/// What differs between the Jobs run against one EtcdCluster.
pub struct EtcdJob {
    /// The object the Job works for: the EtcdCluster, or the MaintenanceTask.
    pub owner: OwnerReference,
    pub name: String,
    pub operation: Operation,
    /// Mounted under [`TLS_MOUNT_DIR`] when set.
    pub tls_secret: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub limits: JobLimits,
    /// Claims mounted writable (a snapshot's folder).
    pub claim_volumes: Vec<ClaimVolume>,
}

/// A Job against `cluster`, its client TLS Secret mounted where the operation expects it.
pub fn etcd_job(cluster: &EtcdCluster, ctx: &Context, job: EtcdJob) -> MaintenanceJob {
    let secret_files = job
        .tls_secret
        .iter()
        .flat_map(|secret| {
            [TLS_CA_KEY, TLS_CERT_KEY, TLS_KEY_KEY].map(|key| SecretFile {
                secret_name: secret.clone(),
                key: key.to_owned(),
                mount_path: format!("{TLS_MOUNT_DIR}/{key}"),
            })
        })
        .collect();
    MaintenanceJob {
        namespace: cluster.namespace().unwrap_or_default(),
        name: job.name,
        owner: job.owner,
        operation: job.operation,
        target: cluster.name_any(),
        node: None,
        extra_labels: job.labels,
        annotations: BTreeMap::new(),
        image: ctx.config.job_image.clone(),
        image_pull_policy: ctx.config.job_image_pull_policy.clone(),
        secret_files,
        claim_volumes: job.claim_volumes,
        scheduling: Default::default(),
        resources: None,
        limits: job.limits,
    }
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
        .map_err(Error::kube(format!(
            "write status of EtcdCluster {namespace}/{name}"
        )))?;
    Ok(())
}

/// Publishes Events about `cluster`.
pub async fn publish_events(cluster: &EtcdCluster, ctx: &Context, events: &[PlannedEvent]) {
    let regarding = cluster.object_ref(&());
    for planned in events {
        let event = Event {
            type_: if planned.warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: planned.reason.to_owned(),
            note: Some(planned.note.clone()),
            action: "Maintain".to_owned(),
            secondary: None,
        };
        ctx.publish_event(&regarding, event).await;
    }
}

fn to_std(duration: SignedDuration) -> Duration {
    Duration::try_from(duration).unwrap_or(Duration::from_secs(1))
}
