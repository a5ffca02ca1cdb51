//! The task controller: the thin layer around the pure queue and lifecycle. One reconciliation
//! looks at one task's target: it reads every task of that target and the target itself, decides
//! (see [`super::lifecycle::decide`]), writes the statuses that changed, and carries the running
//! task's work forward one step: create the Job of its next step, or read its finished Jobs back
//! into the task's status.
//!
//! Restart safety comes from what is read, not remembered: a task is InProgress before any Job
//! of it exists (its status is written first), its Jobs have deterministic names and carry the
//! task's name and step in labels, and its result is read from the Jobs each time, so a
//! controller that stops at any point finds the same Jobs again and makes none twice.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, ResourceExt};

use groundskeeper_api::maintenance_suspension::MaintenanceSuspension;
use groundskeeper_api::maintenance_task::{MaintenanceTask, MaintenanceTaskStatus, TaskState};
use groundskeeper_protocol::keys;

use super::checked::CheckedTask;
use super::lifecycle::{Decision, Rejection, TargetFacts, TargetTasks, TaskView, WindowGate, decide};
use super::metrics::TaskMetrics;
use super::status::apply_decision;
use super::step_jobs::{NOT_SUPPORTED, task_jobs};
use super::target::{ReadTarget, StartBlock, Targets};
use crate::conditions;
use crate::jobs::{self, JobState};
use crate::runtime::context::Context;
use crate::runtime::error::{Error, Result};
use crate::runtime::metrics::Scraped;
use crate::runtime::reconciler::{self, Reconciler};
use crate::runtime::scope;
use groundskeeper_api::maintenance_window::{WindowState, Windows};
use groundskeeper_api::plan::TaskPlan;

/// This controller's name in metrics and logs.
pub(crate) const CONTROLLER: &str = "tasks";

/// Runs the task controller, for tasks on the kinds of target in `targets`, until the process is
/// told to stop.
pub async fn run(ctx: Arc<Context>, targets: Targets) {
    scope::in_each_namespace(&ctx, |namespace| run_in(ctx.clone(), targets.clone(), namespace)).await;
}

/// The task controller over the tasks of one namespace, or of all for `None`.
async fn run_in(ctx: Arc<Context>, targets: Targets, namespace: Option<String>) {
    let tasks = scope::api::<MaintenanceTask>(&ctx.client, namespace.as_deref());
    let jobs = scope::api::<Job>(&ctx.client, namespace.as_deref());
    let ours = format!("{}={}", keys::MANAGED_BY_LABEL, keys::MANAGED_BY);
    let controller = Controller::new(tasks, watcher::Config::default())
        .owns(jobs, watcher::Config::default().labels(&ours));
    // A suspension made, changed or resumed wakes the tasks of its target at once: waiting ones
    // hold or go on, running ones stop when it says so.
    let known = controller.store();
    ctx.metrics.family::<Scraped<MaintenanceTask>>().watch(known.clone());
    let tasks_known = known.clone();
    let suspensions = scope::api::<MaintenanceSuspension>(&ctx.client, namespace.as_deref());
    let controller = controller.watches(suspensions, watcher::Config::default(), move |suspension| {
        let namespace = suspension.namespace();
        known
            .state()
            .into_iter()
            .filter(|task| task.spec.target == suspension.spec.target && task.namespace() == namespace)
            .map(|task| ObjectRef::from_obj(task.as_ref()))
            .collect::<Vec<_>>()
    });
    // Each kind of target wakes its tasks on the changes that matter to them (a ScyllaCluster's
    // topology change stops its running cleanups at once).
    let mut controller = controller;
    for target in targets.all() {
        controller = target.wake_tasks_on_change(controller, &ctx, namespace.as_deref(), tasks_known.clone());
    }
    reconciler::run(controller, ctx, CONTROLLER, move |task, reconciler| {
        reconcile(task, reconciler, targets.clone())
    })
    .await;
}

pub async fn reconcile(
    task: Arc<MaintenanceTask>,
    reconciler: Arc<Reconciler<MaintenanceTask>>,
    targets: Targets,
) -> Result<Action> {
    let _timer = reconciler.ctx.metrics.reconcile_started(CONTROLLER);
    let action = reconcile_at(&task, &reconciler.ctx, &targets, reconciler.ctx.clock.now()).await?;
    reconciler.succeeded(&task);
    Ok(action)
}

/// [`reconcile`] with the clock given.
pub async fn reconcile_at(
    task: &MaintenanceTask,
    ctx: &Context,
    targets: &Targets,
    now: Timestamp,
) -> Result<Action> {
    let namespace = task.namespace().unwrap_or_default();
    let api: Api<MaintenanceTask> = Api::namespaced(ctx.client.clone(), &namespace);
    // The target's tasks are LISTed from the API server, not read from the watch's cache
    // (`Controller::store`): the cache is as new as the task that triggered this pass, but not
    // necessarily as new as the statuses this controller wrote in its last passes, and the queue's
    // decisions read those statuses across tasks. A task written Completed that the cache still
    // shows InProgress would be completed again (its outcome recorded, its Event published and
    // its finish counted twice); one written InProgress that it still shows Pending would be
    // started again with a new startedAt; and the one-task-at-a-time rule reads every task's
    // state. The status writes are merge patches without a resourceVersion, so nothing would
    // refuse a write made from a stale copy.
    //
    // Each task of the target is checked here, once for the whole pass: the queue, the plan, the
    // start, each step and the record of the outcome read this verdict.
    let tasks: Vec<CheckedTask> = api
        .list(&ListParams::default())
        .await
        .map_err(Error::kube(format!("list MaintenanceTasks in {namespace}")))?
        .items
        .into_iter()
        .filter(|t| t.spec.target == task.spec.target)
        .map(CheckedTask::check)
        .collect();
    // A kind no data store here knows has no target: its tasks are rejected by their checks.
    let target = match targets.of(&task.spec.target.kind) {
        Some(kind) => Some(kind.read(ctx, task).await?),
        None => None,
    };
    let tasks = match &target {
        Some(target) => refresh_plans(&api, tasks, target.as_ref()).await?,
        None => tasks,
    };
    let mut input = TargetTasks {
        target: task.spec.target.clone(),
        facts: target.as_ref().map_or(TargetFacts::Missing, |t| t.facts_for(&unfinished(&tasks))),
        tasks: tasks.iter().map(|t| TaskView::of_checked(t, now)).collect(),
        window: target.as_ref().and_then(|t| t.windows()).map(|windows| window_gate(windows, now)),
        suspensions: super::hold::suspensions_of(ctx, &namespace, &task.spec.target, now).await?,
    };
    let mut plan = decide(&input, now);
    // A task that would start now but cannot yet (its target says why) waits, the queue behind
    // it too.
    if let Some(target) = &target {
        match start_blocker(ctx, target.as_ref(), &tasks, &plan.decisions).await? {
            Some((_, StartBlock::Wait { reason, until })) => {
                input.facts = TargetFacts::Waiting { reason };
                plan = decide(&input, now);
                plan.requeue_at = plan.requeue_at.into_iter().chain(until).min();
            }
            Some((name, StartBlock::Reject(why))) => {
                for decided in plan.decisions.iter_mut().filter(|d| d.name == name) {
                    decided.decision =
                        Decision::Reject { reason: Rejection::NotAdmitted { why: why.clone() } };
                }
            }
            None => {}
        }
    }
    record_queued(ctx, &namespace, &input);
    let mut look_again_soon = false;
    for decided in &plan.decisions {
        let Some(task) = tasks.iter().find(|t| t.name_any() == decided.name) else {
            continue;
        };
        look_again_soon |= carry_out(ctx, &api, task, &decided.decision, target.as_deref(), now).await?;
    }
    let until_requeue = plan
        .requeue_at
        .map(|at| Duration::try_from(at.duration_since(now)).unwrap_or(Duration::from_secs(1)));
    let requeue = match (look_again_soon, until_requeue) {
        (true, Some(wait)) => wait.min(ctx.config.requeue_busy),
        (true, None) => ctx.config.requeue_busy,
        (false, Some(wait)) => wait.min(ctx.config.requeue_idle),
        (false, None) => ctx.config.requeue_idle,
    };
    Ok(Action::requeue(requeue.max(Duration::from_secs(1))))
}

/// Writes the plan of every waiting task that asks for approval, when it is new or differs from
/// the one in its status (a new plan id undoes an approval given for the old one); returns the
/// tasks as written. A plan that cannot be made is written as such (no id, its summary says why):
/// nothing can be approved until it can.
async fn refresh_plans(
    api: &Api<MaintenanceTask>,
    mut tasks: Vec<CheckedTask>,
    target: &dyn ReadTarget,
) -> Result<Vec<CheckedTask>> {
    for task in tasks.iter_mut() {
        let before = task.status.clone().unwrap_or_default();
        if !task.spec.require_approval || before.state.unwrap_or_default() != TaskState::Pending {
            continue;
        }
        let plan = plan_or_why(target, task);
        if before.plan.as_ref().map(|p| (&p.id, &p.summary)) == Some((&plan.id, &plan.summary)) {
            continue;
        }
        let after = MaintenanceTaskStatus { plan: Some(plan), ..before.clone() };
        write_status(api, task, &before, &after).await?;
        task.set_status(Some(after));
    }
    Ok(tasks)
}

/// The task's plan, or a plan without id whose summary says why none can be made.
fn plan_or_why(target: &dyn ReadTarget, task: &CheckedTask) -> TaskPlan {
    target.plan(task).unwrap_or_else(|why| TaskPlan {
        summary: format!("no plan can be made now: {why}"),
        ..TaskPlan::default()
    })
}

/// Where the target's windows stand at `now`.
fn window_gate(windows: std::result::Result<Windows, String>, now: Timestamp) -> WindowGate {
    match windows {
        Ok(windows) => match windows.state_at(now) {
            WindowState::Open { .. } => WindowGate::Open,
            WindowState::Closed { opens } => WindowGate::Closed { opens, opens_local: windows.local(opens) },
        },
        Err(why) => WindowGate::Invalid { why },
    }
}

/// Why a task about to start must wait or is turned away although its target may take work, as
/// the target says, with the task's name; `None` when they may start.
async fn start_blocker(
    ctx: &Context,
    target: &dyn ReadTarget,
    tasks: &[CheckedTask],
    decisions: &[super::lifecycle::TaskDecision],
) -> Result<Option<(String, StartBlock)>> {
    let starting = decisions
        .iter()
        .filter(|d| d.decision == Decision::Start)
        .filter_map(|d| tasks.iter().find(|t| t.name_any() == d.name));
    for task in starting {
        if let Some(block) = target.start_blocker(ctx, task).await? {
            return Ok(Some((task.name_any(), block)));
        }
    }
    Ok(None)
}

/// The tasks not yet final.
fn unfinished(tasks: &[CheckedTask]) -> Vec<MaintenanceTask> {
    tasks
        .iter()
        .filter(|t| !t.status.as_ref().and_then(|s| s.state).is_some_and(|s| s.is_final()))
        .map(|t| t.task().clone())
        .collect()
}

fn record_queued(ctx: &Context, namespace: &str, input: &TargetTasks) {
    let mut by_type: BTreeMap<String, i64> = BTreeMap::new();
    for task in input.tasks.iter().filter(|t| t.state == TaskState::Pending) {
        *by_type.entry(task.task_type.to_string()).or_default() += 1;
    }
    ctx.metrics.family::<TaskMetrics>().queued(namespace, &input.target.name, by_type);
}

/// Carries out one decision on `task`; true when it should be looked at again soon: its work
/// runs, or it waits for its target (whose changes do not wake this controller).
async fn carry_out(
    ctx: &Context,
    api: &Api<MaintenanceTask>,
    task: &CheckedTask,
    decision: &Decision,
    target: Option<&dyn ReadTarget>,
    now: Timestamp,
) -> Result<bool> {
    let before = task.status.clone().unwrap_or_default();
    match decision {
        Decision::Delete => {
            delete_task(api, task).await?;
            Ok(false)
        }
        Decision::Start | Decision::KeepRunning => {
            let mut started = apply_decision(before.clone(), decision, task.metadata.generation, now);
            // What it is about to do, kept beside what it did (an approved plan stays as approved).
            if let Some(target) = target
                && started.plan.is_none()
            {
                started.plan = Some(plan_or_why(target, task));
            }
            // InProgress is written before any Job exists, so a restart finds the task running.
            write_status(api, task, &before, &started).await?;
            let after = advance(ctx, task, started.clone(), target, now).await?;
            record_outcome(ctx, task, target, &started, &after, now).await?;
            write_status(api, task, &started, &after).await?;
            finished_metrics(ctx, task, &started, &after, now);
            Ok(after.state == Some(TaskState::InProgress))
        }
        Decision::FailDeadline { .. } | Decision::FailTargetGone { .. } | Decision::FailSuspended { .. } => {
            let after = apply_decision(before.clone(), decision, task.metadata.generation, now);
            record_outcome(ctx, task, target, &before, &after, now).await?;
            write_status(api, task, &before, &after).await?;
            stop_jobs(ctx, task).await?;
            finished_metrics(ctx, task, &before, &after, now);
            Ok(false)
        }
        Decision::Reject { .. } | Decision::Wait { .. } | Decision::Nothing => {
            let after = apply_decision(before.clone(), decision, task.metadata.generation, now);
            write_status(api, task, &before, &after).await?;
            finished_metrics(ctx, task, &before, &after, now);
            Ok(matches!(decision, Decision::Wait { .. }))
        }
    }
}

/// When the task becomes final in this reconciliation, its target records what it did (see
/// [`ReadTarget::record_outcome`]). Called before the final status is written.
async fn record_outcome(
    ctx: &Context,
    task: &CheckedTask,
    target: Option<&dyn ReadTarget>,
    before: &MaintenanceTaskStatus,
    after: &MaintenanceTaskStatus,
    now: Timestamp,
) -> Result<()> {
    let is_final = |s: &MaintenanceTaskStatus| s.state.is_some_and(|state| state.is_final());
    match target {
        Some(target) if !is_final(before) && is_final(after) => {
            target.record_outcome(ctx, task, after, now).await
        }
        _ => Ok(()),
    }
}

/// One step forward for a running task, on its target.
async fn advance(
    ctx: &Context,
    task: &CheckedTask,
    status: MaintenanceTaskStatus,
    target: Option<&dyn ReadTarget>,
    now: Timestamp,
) -> Result<MaintenanceTaskStatus> {
    match target {
        Some(target) => target.advance(ctx, task, status, now).await,
        None => {
            let why = format!("no target of kind {} is known here", task.spec.target.kind);
            Ok(super::status::fail(status, NOT_SUPPORTED, &why, task.metadata.generation, now))
        }
    }
}

/// Deletes the task's Jobs (their pods get SIGTERM): a task that failed its deadline or lost its
/// target stops its work.
async fn stop_jobs(ctx: &Context, task: &MaintenanceTask) -> Result<()> {
    let namespace = task.namespace().unwrap_or_default();
    for job in task_jobs(ctx, task).await? {
        if matches!(job.state, JobState::Running(_)) {
            jobs::delete_job(&ctx.client, &namespace, &job.name).await?;
        }
    }
    Ok(())
}

async fn delete_task(api: &Api<MaintenanceTask>, task: &MaintenanceTask) -> Result<()> {
    match api.delete(&task.name_any(), &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(err) => Err(Error::kube(format!("delete MaintenanceTask {}", task.name_any()))(err)),
    }
}

pub async fn write_status(
    api: &Api<MaintenanceTask>,
    task: &MaintenanceTask,
    before: &MaintenanceTaskStatus,
    after: &MaintenanceTaskStatus,
) -> Result<()> {
    if before == after {
        return Ok(());
    }
    let name = task.name_any();
    let patch = conditions::status_patch(before, after).map_err(Error::json("MaintenanceTask status"))?;
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(Error::kube(format!("write status of MaintenanceTask {name}")))?;
    Ok(())
}

/// Counts a task that became final in this reconciliation.
fn finished_metrics(
    ctx: &Context,
    task: &MaintenanceTask,
    before: &MaintenanceTaskStatus,
    after: &MaintenanceTaskStatus,
    now: Timestamp,
) {
    let is_final = |s: &MaintenanceTaskStatus| s.state.is_some_and(|state| state.is_final());
    if is_final(before) || !is_final(after) {
        return;
    }
    let created = task.metadata.creation_timestamp.as_ref().map(|t| t.0).unwrap_or(now);
    let seconds = now.duration_since(created).as_secs_f64();
    let state = after.state.map(|s| s.to_string()).unwrap_or_default();
    ctx.metrics.family::<TaskMetrics>().finished(&task.spec.task_type.to_string(), &state, seconds);
}
