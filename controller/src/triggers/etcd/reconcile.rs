//! The thin layer around [`decide`]: read the EtcdCluster's Jobs and the members, decide, then
//! create the Job, write the status, publish Events and update the metrics.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition as MetaCondition, OwnerReference};
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType};
use kube::runtime::watcher;
use kube::{Api, Resource, ResourceExt};
use serde_json::Value;

use groundskeeper_protocol::{Operation, OperationKind, keys};

use super::decide::{
    ATTEMPT_LABEL, Decision, Input, MaintenanceJobView, Observed, PlannedEvent, PlannedJob, TLS_MOUNT_DIR,
    check_due, decide,
};
use super::observe::{ClientTls, observe_cluster};
use super::policy::Policy;
use crate::api::etcd_cluster::{EtcdCluster, EtcdClusterStatus, TLS_CA_KEY, TLS_CERT_KEY, TLS_KEY_KEY};
use crate::conditions::{self, merge_conditions};
use crate::execution::{self, Created, MaintenanceJob, SecretFile};
use crate::runtime::context::{Context, JobLimits};
use crate::runtime::error::{Error, Result};
use crate::runtime::reconciler::{self, Reconciler, describe};

/// This controller's name in metrics and logs.
pub const CONTROLLER: &str = "etcd";
/// Operations of this controller's Jobs (the [`keys::OPERATION_LABEL`] values).
pub const OPERATIONS: [OperationKind; 2] = [OperationKind::Defrag, OperationKind::Compact];

/// Runs the EtcdCluster controller until the watch streams end.
pub async fn run(ctx: Arc<Context>) {
    let clusters = Api::<EtcdCluster>::all(ctx.client.clone());
    let jobs = Api::<Job>::all(ctx.client.clone());
    let ours = format!("{}={}", keys::MANAGED_BY_LABEL, keys::MANAGED_BY);
    let controller = Controller::new(clusters, watcher::Config::default())
        .owns(jobs, watcher::Config::default().labels(&ours));
    reconciler::run(controller, ctx, CONTROLLER, reconcile).await;
}

/// The label selector of every maintenance Job of cluster `name`.
pub fn maintenance_job_selector(name: &str) -> String {
    format!(
        "{}={},{}={name},{} in ({})",
        keys::MANAGED_BY_LABEL,
        keys::MANAGED_BY,
        keys::TARGET_LABEL,
        keys::OPERATION_LABEL,
        OPERATIONS.map(OperationKind::as_str).join(",")
    )
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
    let jobs = execution::observe_jobs(&ctx.client, &namespace, &maintenance_job_selector(&name)).await?;
    let jobs: Vec<MaintenanceJobView> = jobs
        .iter()
        .filter_map(MaintenanceJobView::from_observation)
        .collect();
    if let Err(wait) = check_due(&previous, cluster.meta().generation, &jobs, now) {
        return Ok(Action::requeue(to_std(wait)));
    }
    let policy = Policy::from_spec(&cluster.spec);
    let observed = match &policy {
        Ok(policy) => observe(&ctx.client, &namespace, policy).await,
        Err(_) => Observed::NotAttempted,
    };
    let decision = decide(&Input {
        cluster: &name,
        generation: cluster.meta().generation,
        policy: policy.as_ref(),
        enabled: cluster.spec.policy.enabled,
        observed: &observed,
        jobs: &jobs,
        previous: &previous,
        now,
    });
    apply(cluster, ctx, &policy, &observed, decision, now).await
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

/// Applies a decision: creates its Job (a Job of that name that exists already is taken as the
/// same decision made by another reconciliation), writes the status, updates the metrics and
/// publishes the Events.
pub async fn apply(
    cluster: &EtcdCluster,
    ctx: &Context,
    policy: &std::result::Result<Policy, super::policy::SpecErrors>,
    observed: &Observed,
    mut decision: Decision,
    now: Timestamp,
) -> Result<Action> {
    let namespace = cluster.namespace().unwrap_or_default();
    let name = cluster.name_any();
    if let Some(planned) = &decision.create {
        let limits = job_limits(policy.as_ref().ok(), &ctx.config.job_limits);
        let job = maintenance_job(cluster, ctx, planned, limits)?;
        match execution::create_job(&ctx.client, &job).await? {
            Created::New(_) => ctx.metrics.job_created(planned.operation.kind().as_str()),
            Created::Existing(_) => {
                // Another reconciliation (a second replica, or ours before a restart) decided the
                // same on the same state: the Job is theirs, the Event was theirs to publish.
                tracing::info!(job = %planned.name, "maintenance Job exists already");
                decision.events.retain(|e| e.reason != "MaintenanceJobCreated");
            }
        }
    }
    let previous = cluster.status.clone().unwrap_or_default();
    let status = with_conditions(
        decision.status,
        &decision.conditions,
        cluster.meta().generation,
        now,
    )?;
    write_status(&ctx.client, &namespace, &name, &previous, &status).await?;
    if let Observed::Members(_) = observed {
        ctx.metrics
            .etcd
            .observed(&namespace, &name, &status.members, &previous.members);
    }
    for result in &decision.recorded {
        ctx.metrics.etcd.recorded(&namespace, &name, result);
        let operation = match result.report {
            groundskeeper_protocol::Report::Compact(_) => OperationKind::Compact,
            _ => OperationKind::Defrag,
        };
        let outcome = serde_json::to_value(result.outcome)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        ctx.metrics.job_finished(operation.as_str(), &outcome);
    }
    publish_events(cluster, ctx, &decision.events).await;
    Ok(Action::requeue(to_std(decision.requeue_after)))
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

/// The planned Job as the shared Job path builds it.
pub fn maintenance_job(
    cluster: &EtcdCluster,
    ctx: &Context,
    planned: &PlannedJob,
    limits: JobLimits,
) -> Result<MaintenanceJob> {
    let owner = cluster
        .controller_owner_ref(&())
        .ok_or_else(|| Error::InvalidObject {
            object: format!("EtcdCluster {}", describe(cluster)),
            field: "metadata.uid".into(),
            message: "missing: the object was not read from the API server".into(),
        })?;
    let labels = BTreeMap::from([(ATTEMPT_LABEL.to_owned(), planned.attempt.to_string())]);
    Ok(etcd_job(
        cluster,
        ctx,
        EtcdJob {
            owner,
            name: planned.name.clone(),
            operation: planned.operation.clone(),
            tls_secret: planned.tls_secret.clone(),
            labels,
            limits,
        },
    ))
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

async fn write_status(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    previous: &EtcdClusterStatus,
    next: &EtcdClusterStatus,
) -> Result<()> {
    if previous == next {
        return Ok(());
    }
    let patch = status_patch(previous, next)?;
    Api::<EtcdCluster>::namespaced(client.clone(), namespace)
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(Error::kube(format!(
            "write status of EtcdCluster {namespace}/{name}"
        )))?;
    Ok(())
}

async fn publish_events(cluster: &EtcdCluster, ctx: &Context, events: &[PlannedEvent]) {
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
