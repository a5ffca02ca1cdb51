//! The thin layer around [`decide`]: read the EtcdCluster's maintenance tasks and the members,
//! decide, then write the status, submit the task, publish Events and update the metrics.
//!
//! The status is written before the task is submitted, with the resourceVersion the decision was
//! made on: when the task controller recorded a finished task's outcome in the meantime
//! ([`crate::etcd::record`]), the write conflicts, nothing is submitted, and the
//! cluster is decided again on the fresh status. A task whose outcome is recorded is final
//! before the tasks are listed, so a decision never misses an outcome it then acts against.

use std::sync::Arc;

use jiff::Timestamp;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};

use groundskeeper_api::etcd_cluster::EtcdCluster;
use groundskeeper_api::maintenance_suspension::MaintenanceSuspension;
use groundskeeper_api::maintenance_task::{MaintenanceTask, TargetKind};

use super::apply::{apply, to_std};
use super::decide::{Input, check_due, decide};
use super::metrics::EtcdMetrics;
use super::model::Observed;
use super::observe::{cluster_tasks, fleet_collisions, observe_members};
use super::policy::Policy;
use crate::runtime::context::Context;
use crate::runtime::error::Result;
use crate::runtime::metrics::Scraped;
use crate::runtime::reconciler::{self, Reconciler};
use crate::runtime::scope;
use crate::tasks::hold::suspensions_of;
use groundskeeper_api::maintenance_task::TaskTarget;
use groundskeeper_api::maintenance_window::windows_of;

/// This controller's name in metrics and logs.
pub(crate) const CONTROLLER: &str = "etcd";

/// Runs the EtcdCluster controller (and, with `--discover-storage-clusters` and
/// `--discover-etcd-operator-clusters`, the discovery of Arktos StorageClusters and of
/// etcd-operator's clusters as EtcdClusters) until the watch streams end.
pub async fn run(ctx: Arc<Context>) {
    let clusters = scope::in_each_namespace(&ctx, |namespace| run_in(ctx.clone(), namespace));
    futures::join!(clusters, super::discovery::run(ctx.clone()), super::operator_discovery::run(ctx.clone()));
}

/// The trigger over the EtcdClusters of one namespace, or of all for `None`.
async fn run_in(ctx: Arc<Context>, namespace: Option<String>) {
    let clusters = scope::api::<EtcdCluster>(&ctx.client, namespace.as_deref());
    let tasks = scope::api::<MaintenanceTask>(&ctx.client, namespace.as_deref());
    // Every task on a cluster wakes it, whoever asked for it: a task queued or ended changes
    // what is due (see `check_due`).
    let controller = Controller::new(clusters, watcher::Config::default())
        .watches(tasks, watcher::Config::default(), |task: MaintenanceTask| {
            let namespace = task.namespace()?;
            (task.spec.target.kind == TargetKind::EtcdCluster)
                .then(|| ObjectRef::new(&task.spec.target.name).within(&namespace))
        })
        // A suspension made, changed or resumed: what the trigger may submit changes at once.
        .watches(
            scope::api::<MaintenanceSuspension>(&ctx.client, namespace.as_deref()),
            watcher::Config::default(),
            |suspension: MaintenanceSuspension| {
                let namespace = suspension.namespace()?;
                (suspension.spec.target.kind == TargetKind::EtcdCluster)
                    .then(|| ObjectRef::new(&suspension.spec.target.name).within(&namespace))
            },
        );
    ctx.metrics.family::<Scraped<EtcdCluster>>().watch(controller.store());
    reconciler::run(controller, ctx, CONTROLLER, reconcile).await;
}

/// One reconciliation of one EtcdCluster.
pub async fn reconcile(
    cluster: Arc<EtcdCluster>,
    reconciler: Arc<Reconciler<EtcdCluster>>,
) -> Result<Action> {
    let _timer = reconciler.ctx.metrics.reconcile_started(CONTROLLER);
    let action = reconcile_at(&cluster, &reconciler.ctx, reconciler.ctx.clock.now()).await?;
    reconciler.succeeded(&cluster);
    Ok(action)
}

/// [`reconcile`] with the clock given, for tests.
pub async fn reconcile_at(cluster: &EtcdCluster, ctx: &Context, now: Timestamp) -> Result<Action> {
    let namespace = cluster.namespace().unwrap_or_default();
    let name = cluster.name_any();
    let previous = cluster.status.clone().unwrap_or_default();
    if cluster.meta().deletion_timestamp.is_some() {
        ctx.metrics.family::<EtcdMetrics>().forget(&namespace, &name, &previous.members);
        return Ok(Action::await_change());
    }
    let tasks = cluster_tasks(ctx, &namespace, &name, now).await?;
    if let Err(wait) = check_due(&previous, cluster.meta().generation, &tasks, now) {
        return Ok(Action::requeue(to_std(wait)));
    }
    let policy = Policy::from_spec(&cluster.spec);
    let collisions = fleet_collisions(ctx, cluster).await?;
    // Read only where a task may be submitted (what holds it back is not needed otherwise).
    let suspensions = match &policy {
        Ok(_) if collisions.is_empty() => {
            let target = TaskTarget { kind: TargetKind::EtcdCluster, name: name.clone() };
            suspensions_of(ctx, &namespace, &target, now).await?
        }
        _ => Vec::new(),
    };
    let windows = windows_of(
        cluster.spec.maintenance_windows.as_ref(),
        &format!("EtcdCluster {namespace}/{name}"),
        "spec.maintenanceWindows",
    );
    // A cluster whose fleet id is disputed is not maintained: nothing to observe for it.
    let observed = match &policy {
        Ok(policy) if collisions.is_empty() => observe_members(&ctx.client, &namespace, policy).await,
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
        suspensions: &suspensions,
        windows: windows.as_ref(),
        now,
    });
    apply(cluster, ctx, &observed, decision, now).await
}
