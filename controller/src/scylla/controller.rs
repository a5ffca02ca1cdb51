//! The cleanup trigger loop: one reconciliation per ScyllaCluster (observe → decide → apply),
//! woken by the ScyllaCluster, its member Services, its Cleanup tasks and scylla-operator's own
//! cleanup Jobs (read only: see [`groundskeeper_api::scylla::coexistence`]).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Service;

use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;

use groundskeeper_protocol::keys;

use kube::ResourceExt;

use super::metrics::ScyllaMetrics;
use super::ownership_reader::{ViewCache, watch_schema_versions};
use super::ring_quiet::{RingMemory, RingQuiet, fingerprint};
use super::{apply, decide, observe};
use crate::runtime::context::Context;
use crate::runtime::error::Error;
use crate::runtime::reconciler::{self, Reconciler};
use crate::runtime::scope;
use groundskeeper_api::maintenance_suspension::MaintenanceSuspension;
use groundskeeper_api::maintenance_task::{MaintenanceTask, TargetKind};
use groundskeeper_api::scylla::ScyllaCluster;
use groundskeeper_api::scylla::coexistence;

/// The `controller` label of this controller's metrics.
pub(crate) const CONTROLLER: &str = "scylla-cleanup";

/// Runs the cleanup controller until the process is told to stop.
pub async fn run(ctx: Arc<Context>) {
    scope::in_each_namespace(&ctx, |namespace| run_in(ctx.clone(), namespace)).await;
}

/// The trigger over the ScyllaClusters of one namespace, or of all for `None`.
async fn run_in(ctx: Arc<Context>, namespace: Option<String>) {
    let client = ctx.client.clone();
    let namespace = namespace.as_deref();
    let members_selector =
        format!("{}={}", keys::SCYLLA_SERVICE_TYPE_LABEL, keys::SCYLLA_SERVICE_TYPE_MEMBER);
    let operator_jobs_selector =
        format!("{}={}", coexistence::NODE_JOB_TYPE_LABEL, coexistence::NODE_JOB_TYPE_CLEANUP);
    let controller =
        Controller::new(scope::api::<ScyllaCluster>(&client, namespace), watcher::Config::default())
            .watches(
                scope::api::<Service>(&client, namespace),
                watcher::Config::default().labels(&members_selector),
                cluster_of_member,
            )
            .watches(
                scope::api::<MaintenanceTask>(&client, namespace),
                watcher::Config::default(),
                cluster_of_task,
            )
            .watches(
                scope::api::<Job>(&client, namespace),
                watcher::Config::default().labels(&operator_jobs_selector),
                cluster_of_operator_job,
            )
            .watches(
                scope::api::<MaintenanceSuspension>(&client, namespace),
                watcher::Config::default(),
                cluster_of_suspension,
            );
    let memory = Arc::new(Memory::default());
    // A replication change moves no Kubernetes object: the schema watch wakes the cluster.
    let (wake, mut woken) = tokio::sync::mpsc::channel(64);
    let watch = tokio::spawn(watch_schema_versions(ctx.clone(), memory.views.clone(), wake));
    let controller = controller.reconcile_on(futures::stream::poll_fn(move |cx| woken.poll_recv(cx)));
    reconciler::run(controller, ctx, CONTROLLER, move |cluster, reconciler| {
        reconcile(cluster, reconciler, memory.clone())
    })
    .await;
    watch.abort();
}

/// What the trigger keeps between passes, in memory: since when each ring is as it is, and the
/// ring views last read.
#[derive(Default)]
struct Memory {
    rings: RingMemory,
    views: Arc<ViewCache>,
}

/// The ScyllaCluster a member Service belongs to (`scylla/cluster` label, same namespace).
pub(crate) fn cluster_of_member(service: Service) -> Option<ObjectRef<ScyllaCluster>> {
    let cluster = service.metadata.labels.as_ref()?.get(keys::SCYLLA_CLUSTER_LABEL)?;
    let namespace = service.metadata.namespace.as_deref()?;
    Some(ObjectRef::new(cluster).within(namespace))
}

/// The ScyllaCluster a suspension is about: made, changed or resumed, it changes at once what
/// the trigger may submit.
pub(crate) fn cluster_of_suspension(suspension: MaintenanceSuspension) -> Option<ObjectRef<ScyllaCluster>> {
    let namespace = suspension.metadata.namespace.as_deref()?;
    (suspension.spec.target.kind == TargetKind::ScyllaCluster)
        .then(|| ObjectRef::new(&suspension.spec.target.name).within(namespace))
}

/// The ScyllaCluster one of scylla-operator's cleanup Jobs works for (`scylla/cluster` label).
pub(crate) fn cluster_of_operator_job(job: Job) -> Option<ObjectRef<ScyllaCluster>> {
    let cluster = job.metadata.labels.as_ref()?.get(keys::SCYLLA_CLUSTER_LABEL)?;
    let namespace = job.metadata.namespace.as_deref()?;
    Some(ObjectRef::new(cluster).within(namespace))
}

/// The ScyllaCluster a task works on, when it works on one.
pub(crate) fn cluster_of_task(task: MaintenanceTask) -> Option<ObjectRef<ScyllaCluster>> {
    if task.spec.target.kind != TargetKind::ScyllaCluster {
        return None;
    }
    let namespace = task.metadata.namespace.as_deref()?;
    Some(ObjectRef::new(&task.spec.target.name).within(namespace))
}

/// One pass over one ScyllaCluster, with what the trigger kept from earlier passes.
async fn reconcile(
    cluster: Arc<ScyllaCluster>,
    reconciler: Arc<Reconciler<ScyllaCluster>>,
    memory: Arc<Memory>,
) -> Result<Action, Error> {
    let rings = &memory.rings;
    let ctx = &reconciler.ctx;
    let _timer = ctx.metrics.reconcile_started(CONTROLLER);
    let (namespace, name) = (cluster.namespace().unwrap_or_default(), cluster.name_any());
    if cluster.metadata.deletion_timestamp.is_some() {
        // Its Jobs go with it (owner references); nothing to clean any more.
        rings.forget(&namespace, &name);
        memory.views.forget(&namespace, &name);
        ctx.metrics.family::<ScyllaMetrics>().forget(&namespace, &name);
        return Ok(Action::await_change());
    }
    let now = ctx.clock.now();
    let mut snapshot = observe::observe_with(ctx, &cluster, now, &memory.views).await?;
    snapshot.ring_quiet = RingQuiet {
        unchanged_since: rings.unchanged_since(&namespace, &name, fingerprint(&snapshot.members), now),
        period: super::config::Config::of(ctx).cleanup_ring_quiet_period,
    };
    let plan = decide::decide(&snapshot);
    ctx.metrics.family::<ScyllaMetrics>().observed(&namespace, &name, &plan.degraded, &snapshot.members, now);
    tracing::debug!(
        cluster = %snapshot.cluster.name,
        namespace = %snapshot.cluster.namespace,
        actions = plan.actions.len(),
        progressing = %plan.progressing.message,
        "cleanup plan"
    );
    apply::apply(ctx, &cluster, &plan).await?;
    reconciler.succeeded(&cluster);
    Ok(Action::requeue(requeue_after(&plan, ctx)))
}

/// The plan's own wish (Jobs running, a retry due) bounded by the busy and idle intervals.
fn requeue_after(plan: &decide::Plan, ctx: &Context) -> Duration {
    match plan.requeue_after {
        Some(decide::REQUEUE_WHILE_RUNNING) => ctx.config.requeue_busy,
        Some(wish) => wish.min(ctx.config.requeue_idle),
        None => ctx.config.requeue_idle,
    }
}
