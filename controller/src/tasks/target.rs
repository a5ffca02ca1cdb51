//! What the task controller asks of a kind of target. Each data store implements [`Target`] in
//! its own folder (`etcd/task.rs`, `scylla/task.rs`); the crate's root hands them to the
//! controller when it starts, so that nothing here names a data store.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use jiff::Timestamp;
use kube::runtime::Controller;
use kube::runtime::reflector::Store;

use groundskeeper_api::maintenance_task::{MaintenanceTask, MaintenanceTaskStatus, TargetKind};
use groundskeeper_api::maintenance_window::Windows;
use groundskeeper_api::plan::TaskPlan;

use super::checked::CheckedTask;
use super::lifecycle::TargetFacts;
use crate::runtime::context::Context;
use crate::runtime::error::Result;

/// A kind of target tasks run on (EtcdCluster, ScyllaCluster).
pub trait Target: Send + Sync + 'static {
    /// The kind of `spec.target` it serves.
    fn kind(&self) -> TargetKind;

    /// The task controller with what wakes the tasks of a target of this kind when the target
    /// changes (a watch on the targets, mapped to their unfinished tasks in `tasks`); as it is
    /// when its changes need no task looked at sooner than its next requeue.
    fn wake_tasks_on_change(
        &self,
        controller: Controller<MaintenanceTask>,
        _ctx: &Context,
        _namespace: Option<&str>,
        _tasks: Store<MaintenanceTask>,
    ) -> Controller<MaintenanceTask> {
        controller
    }

    /// Reads the target `task` names, and what else its tasks' work needs to know of it, for one
    /// reconciliation of the task controller.
    fn read<'a>(
        &'a self,
        ctx: &'a Context,
        task: &'a MaintenanceTask,
    ) -> BoxFuture<'a, Result<Box<dyn ReadTarget>>>;
}

/// One target as read for one reconciliation.
pub trait ReadTarget: Send + Sync {
    /// Whether it may take a task's work now.
    fn facts(&self) -> TargetFacts;

    /// Its maintenance windows, checked (`Err`: what is wrong, naming the field); `None` when it
    /// has none.
    fn windows(&self) -> Option<std::result::Result<Windows, String>> {
        None
    }

    /// The plan of `task` on the target as read: what it would do if it started now, in order,
    /// with expected durations (`status.plan`; what a person approves). `Err`: why none can be
    /// made (the task fails or is rejected for it in its turn).
    fn plan(&self, task: &CheckedTask) -> std::result::Result<TaskPlan, String>;

    /// Whether it may take the work of `tasks` (its tasks not yet final) now: as [`facts`]
    /// unless a kind of work asks for other facts (a restore runs on a cluster that is not
    /// healthy, by design).
    ///
    /// [`facts`]: ReadTarget::facts
    fn facts_for(&self, _tasks: &[MaintenanceTask]) -> TargetFacts {
        self.facts()
    }

    /// Why `task`, about to start on a target that may take work, must wait all the same (a
    /// volume its Job writes to does not exist yet, say) or is turned away (what it asks for
    /// does not hold: a restore of a cluster whose quorum is there); `None` when it may start.
    fn start_blocker<'a>(
        &'a self,
        ctx: &'a Context,
        task: &'a CheckedTask,
    ) -> BoxFuture<'a, Result<Option<StartBlock>>>;

    /// One step forward for the running `task`: the Jobs of its next steps, or its end once they
    /// finished. Returns the task's new status.
    fn advance<'a>(
        &'a self,
        ctx: &'a Context,
        task: &'a CheckedTask,
        status: MaintenanceTaskStatus,
        now: Timestamp,
    ) -> BoxFuture<'a, Result<MaintenanceTaskStatus>>;

    /// Writes what `task`, which has just become final with status `after`, did on the target.
    /// Called before that final status is written: if the write fails, the next reconciliation
    /// records again, so the target must recognise a task it already recorded.
    fn record_outcome<'a>(
        &'a self,
        ctx: &'a Context,
        task: &'a CheckedTask,
        after: &'a MaintenanceTaskStatus,
        now: Timestamp,
    ) -> BoxFuture<'a, Result<()>>;
}

/// Why a task about to start does not start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartBlock {
    /// It waits (Pending), saying for what; looked at again by `until` at the latest.
    Wait { reason: String, until: Option<jiff::Timestamp> },
    /// It is turned away for good (Rejected), saying what was seen.
    Reject(String),
}

/// The kinds of target the task controller knows, by the kind they serve.
#[derive(Clone, Default)]
pub struct Targets {
    by_kind: BTreeMap<String, Arc<dyn Target>>,
}

impl Targets {
    pub fn new(targets: impl IntoIterator<Item = Arc<dyn Target>>) -> Self {
        let by_kind = targets.into_iter().map(|t| (t.kind().to_string(), t)).collect();
        Targets { by_kind }
    }

    /// Every kind known.
    pub fn all(&self) -> impl Iterator<Item = &dyn Target> {
        self.by_kind.values().map(|t| t.as_ref())
    }

    /// What serves `kind`; `None` for a kind no data store here knows (its tasks are rejected).
    pub fn of(&self, kind: &TargetKind) -> Option<&dyn Target> {
        self.by_kind.get(&kind.to_string()).map(|t| t.as_ref())
    }
}

/// The unfinished tasks in `tasks` on the target of `kind` named `name` in `namespace`, as the
/// controller's references: what a change of that target wakes.
pub fn unfinished_tasks_of(
    tasks: &Store<MaintenanceTask>,
    kind: &TargetKind,
    namespace: Option<&str>,
    name: &str,
) -> Vec<kube::runtime::reflector::ObjectRef<MaintenanceTask>> {
    use kube::ResourceExt;
    tasks
        .state()
        .into_iter()
        .filter(|task| task.spec.target.kind == *kind && task.spec.target.name == name)
        .filter(|task| task.namespace().as_deref() == namespace)
        .filter(|task| !task.status.as_ref().and_then(|s| s.state).is_some_and(|s| s.is_final()))
        .map(|task| kube::runtime::reflector::ObjectRef::from_obj(task.as_ref()))
        .collect()
}
