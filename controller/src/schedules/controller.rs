//! The schedule controller: the thin layer around [`super::decide`]. One reconciliation reads a
//! schedule and the tasks it made, decides with the context's clock, deletes and makes tasks,
//! writes the status, and comes back at the next run.
//!
//! Restart safety comes from what is read: a run's task has a name of its own (the schedule's
//! and the run's minute), so a task made just before a restart is found again, not made twice,
//! and its annotation says which run it stands for.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, OwnerReference, Time};
use kube::api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType};
use kube::runtime::watcher;
use kube::{Api, Resource, ResourceExt};

use groundskeeper_api::maintenance_schedule::calendar::Calendars;
use groundskeeper_api::maintenance_schedule::validate::{ValidSchedule, validate_schedule_with};
use groundskeeper_api::maintenance_schedule::{
    MAX_RECENT_TASKS, MaintenanceSchedule, MaintenanceScheduleStatus, READY, SCHEDULE_LABEL,
    SCHEDULED_TIME_ANNOTATION, ScheduledTask, SkippedRun,
};
use groundskeeper_api::maintenance_task::{MaintenanceTask, TaskState};
use groundskeeper_api::validate::describe_errors;
use groundskeeper_protocol::keys;
use groundskeeper_protocol::names::bounded_name;

use super::decide::{MadeTask, ScheduleFacts, SchedulePlan, decide};
use super::metrics::ScheduleMetrics;
use crate::conditions;
use crate::runtime::context::Context;
use crate::runtime::error::{Error, Result};
use crate::runtime::metrics::Scraped;
use crate::runtime::reconciler::{self, Reconciler};
use crate::runtime::scope;

/// This controller's name in metrics and logs.
pub(crate) const CONTROLLER: &str = "schedules";

/// Runs the schedule controller until the process is told to stop.
pub async fn run(ctx: Arc<Context>) {
    scope::in_each_namespace(&ctx, |namespace| run_in(ctx.clone(), namespace)).await;
}

async fn run_in(ctx: Arc<Context>, namespace: Option<String>) {
    let schedules = scope::api::<MaintenanceSchedule>(&ctx.client, namespace.as_deref());
    let tasks = scope::api::<MaintenanceTask>(&ctx.client, namespace.as_deref());
    let controller = Controller::new(schedules, watcher::Config::default())
        .owns(tasks, watcher::Config::default().labels(SCHEDULE_LABEL));
    ctx.metrics.family::<Scraped<MaintenanceSchedule>>().watch(controller.store());
    let calendars = Arc::new(Calendars::default());
    reconciler::run(controller, ctx, CONTROLLER, move |schedule, reconciler| {
        reconcile(schedule, reconciler, calendars.clone())
    })
    .await;
}

pub async fn reconcile(
    schedule: Arc<MaintenanceSchedule>,
    reconciler: Arc<Reconciler<MaintenanceSchedule>>,
    calendars: Arc<Calendars>,
) -> Result<Action> {
    let ctx = &reconciler.ctx;
    let _timer = ctx.metrics.reconcile_started(CONTROLLER);
    // Read afresh: the watch cache may not show yet the status the previous pass wrote, and a run
    // decided on an older one would be skipped (and counted) twice.
    let namespace = schedule.namespace().unwrap_or_default();
    let api: Api<MaintenanceSchedule> = Api::namespaced(ctx.client.clone(), &namespace);
    let name = schedule.name_any();
    let Some(fresh) = api
        .get_opt(&name)
        .await
        .map_err(Error::kube(format!("get MaintenanceSchedule {namespace}/{name}")))?
    else {
        return Ok(Action::await_change());
    };
    let action = reconcile_at(&fresh, ctx, &calendars, ctx.clock.now()).await?;
    reconciler.succeeded(&schedule);
    Ok(action)
}

/// [`reconcile`] with the clock given.
pub async fn reconcile_at(
    schedule: &MaintenanceSchedule,
    ctx: &Context,
    calendars: &Calendars,
    now: Timestamp,
) -> Result<Action> {
    if schedule.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change()); // its tasks go with it (owner references)
    }
    let namespace = schedule.namespace().unwrap_or_default();
    let name = schedule.name_any();
    let valid = match validate_schedule_with(schedule, calendars) {
        Ok(valid) => valid,
        Err(errors) => {
            let message = describe_errors(&errors);
            report_invalid(ctx, schedule, &message).await;
            write_status(ctx, schedule, invalid_status(schedule, &message, now)).await?;
            return Ok(Action::await_change());
        }
    };
    let tasks_api: Api<MaintenanceTask> = Api::namespaced(ctx.client.clone(), &namespace);
    let selector = format!("{SCHEDULE_LABEL}={name}");
    let listed = tasks_api
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(Error::kube(format!("list MaintenanceTasks of MaintenanceSchedule {namespace}/{name}")))?;
    let owned: Vec<&MaintenanceTask> = listed.items.iter().filter(|t| is_owned_by(t, schedule)).collect();
    let made: Vec<MadeTask> = owned.iter().filter_map(|t| made_task(t)).collect();
    let status = schedule.status.clone().unwrap_or_default();
    let facts = ScheduleFacts {
        valid: &valid,
        created: schedule.creation_timestamp().map_or(now, |t| t.0),
        last_schedule_time: status.last_schedule_time.as_ref().map(|t| t.0),
    };
    let plan = decide(&facts, &made, now);
    apply(ctx, schedule, &valid, &plan, now).await?;
    let next = next_status(schedule, &valid, &plan, &owned, now);
    write_status(ctx, schedule, next).await?;
    let idle = ctx.config.requeue_idle;
    Ok(Action::requeue(plan.requeue_after.map_or(idle, |wait| wait.min(idle))))
}

/// Deletes what the plan deletes, makes the run's task, and tells of a skipped run.
async fn apply(
    ctx: &Context,
    schedule: &MaintenanceSchedule,
    valid: &ValidSchedule,
    plan: &SchedulePlan,
    now: Timestamp,
) -> Result<()> {
    let namespace = schedule.namespace().unwrap_or_default();
    let api: Api<MaintenanceTask> = Api::namespaced(ctx.client.clone(), &namespace);
    for (task, why) in &plan.delete {
        match api.delete(task, &DeleteParams::background()).await {
            Ok(_) => {
                tracing::info!(schedule = %schedule.name_any(), task, why, "deleted a task of the schedule")
            }
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(err) => return Err(Error::kube(format!("delete MaintenanceTask {namespace}/{task}"))(err)),
        }
    }
    let metrics = ctx.metrics.family::<ScheduleMetrics>();
    if let Some(skip) = &plan.skip {
        metrics.skipped(skip.reason.as_str());
        let note = format!("run of {} skipped: {}", skip.scheduled, skip.message);
        tracing::info!(schedule = %schedule.name_any(), "{note}");
        publish(ctx, schedule, EventType::Normal, "RunSkipped", note).await;
    }
    if let Some(run) = plan.create {
        let task = task_of_run(schedule, valid, run)?;
        let task_name = task.name_any();
        match api.create(&PostParams::default(), &task).await {
            Ok(_) => {
                metrics.created(now.duration_since(run).as_secs_f64());
                let note = format!("made MaintenanceTask {task_name} for the run of {run}");
                tracing::info!(schedule = %schedule.name_any(), "{note}");
                publish(ctx, schedule, EventType::Normal, "TaskCreated", note).await;
            }
            // Made before a restart: the same run, the same name.
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(err) => {
                return Err(Error::kube(format!("create MaintenanceTask {namespace}/{task_name}"))(err));
            }
        }
    }
    Ok(())
}

/// The task of the run at `run`: the template's, labelled and owned by the schedule.
fn task_of_run(
    schedule: &MaintenanceSchedule,
    valid: &ValidSchedule,
    run: Timestamp,
) -> Result<MaintenanceTask> {
    let template = &schedule.spec.task_template.metadata;
    let mut labels: BTreeMap<String, String> = template.labels.clone();
    labels.insert(SCHEDULE_LABEL.to_owned(), schedule.name_any());
    labels.insert(keys::ORIGIN_LABEL.to_owned(), keys::ORIGIN_SCHEDULE.to_owned());
    let mut annotations = template.annotations.clone();
    annotations.insert(SCHEDULED_TIME_ANNOTATION.to_owned(), run.to_string());
    let owner = schedule.controller_owner_ref(&()).ok_or_else(|| Error::InvalidObject {
        object: format!("MaintenanceSchedule {}", schedule.name_any()),
        field: "metadata.uid".to_owned(),
        message: "not set yet: the task it makes cannot be owned by it".to_owned(),
    })?;
    Ok(MaintenanceTask {
        metadata: ObjectMeta {
            name: Some(run_task_name(&schedule.name_any(), run)),
            namespace: schedule.namespace(),
            labels: Some(labels),
            annotations: Some(annotations),
            owner_references: Some(vec![OwnerReference { block_owner_deletion: Some(true), ..owner }]),
            ..ObjectMeta::default()
        },
        spec: valid.task_spec.clone(),
        status: None,
    })
}

/// `<schedule>-<minutes since the epoch>`, as Kubernetes names a CronJob's Jobs: one name a run.
pub(crate) fn run_task_name(schedule: &str, run: Timestamp) -> String {
    bounded_name(schedule, &format!("-{}", run.as_second().div_euclid(60)))
}

fn is_owned_by(task: &MaintenanceTask, schedule: &MaintenanceSchedule) -> bool {
    let uid = schedule.uid();
    task.owner_references().iter().any(|owner| Some(&owner.uid) == uid.as_ref())
}

/// A task read back, with the run its annotation names (a task without one is not counted).
fn made_task(task: &MaintenanceTask) -> Option<MadeTask> {
    let scheduled = task.annotations().get(SCHEDULED_TIME_ANNOTATION)?.parse::<Timestamp>().ok()?;
    Some(MadeTask { name: task.name_any(), scheduled, state: task.status.as_ref().and_then(|s| s.state) })
}

fn next_status(
    schedule: &MaintenanceSchedule,
    valid: &ValidSchedule,
    plan: &SchedulePlan,
    owned: &[&MaintenanceTask],
    now: Timestamp,
) -> MaintenanceScheduleStatus {
    let previous = schedule.status.clone().unwrap_or_default();
    let deleted: Vec<&str> = plan.delete.iter().map(|(name, _)| name.as_str()).collect();
    let mut recent: Vec<ScheduledTask> = owned
        .iter()
        .filter(|t| !deleted.contains(&t.name_any().as_str()))
        .filter_map(|t| {
            let made = made_task(t)?;
            Some(ScheduledTask { name: made.name, scheduled_time: Time(made.scheduled), state: made.state })
        })
        .collect();
    if let Some(run) = plan.create {
        let name = run_task_name(&schedule.name_any(), run);
        if !recent.iter().any(|t| t.name == name) {
            recent.push(ScheduledTask { name, scheduled_time: Time(run), state: None });
        }
    }
    recent.sort_by_key(|t| std::cmp::Reverse(t.scheduled_time.0));
    let active =
        recent.iter().filter(|t| !t.state.unwrap_or_default().is_final()).map(|t| t.name.clone()).collect();
    recent.truncate(MAX_RECENT_TASKS);
    let last_successful_time = owned
        .iter()
        .filter_map(|t| t.status.as_ref())
        .filter(|s| s.state == Some(TaskState::Completed))
        .filter_map(|s| s.completed_at.clone())
        .max_by_key(|t| t.0)
        .or(previous.last_successful_time);
    let (status, reason, message) = if valid.suspend {
        ("False", "Suspended", "spec.suspend is true: runs are skipped, no task is made".to_owned())
    } else {
        let next = plan.next_run.map_or_else(|| "none".to_owned(), |n| local_time(valid, n));
        ("True", "Scheduled", format!("next run {next}"))
    };
    MaintenanceScheduleStatus {
        last_schedule_time: plan.last_schedule_time.map(Time),
        last_successful_time,
        next_schedule_time: plan.next_run.map(|n| n.to_string()),
        next_schedule_local: plan.next_run.map(|n| local_time(valid, n)),
        active,
        recent_tasks: recent,
        last_skipped: plan
            .skip
            .as_ref()
            .map(|s| SkippedRun {
                scheduled_time: Time(s.scheduled),
                reason: s.reason.as_str().to_owned(),
                message: s.message.clone(),
            })
            .or(previous.last_skipped),
        conditions: vec![ready(schedule, status, reason, &message, &previous.conditions, now)],
        observed_generation: schedule.metadata.generation,
    }
}

/// `2026-11-25 03:00 CET`: a run in the schedule's own time zone.
fn local_time(valid: &ValidSchedule, time: Timestamp) -> String {
    let zoned = time.to_zoned(valid.calendar.time_zone().clone());
    zoned.strftime("%Y-%m-%d %H:%M %Z").to_string()
}

fn ready(
    schedule: &MaintenanceSchedule,
    status: &str,
    reason: &str,
    message: &str,
    previous: &[Condition],
    now: Timestamp,
) -> Condition {
    // The transition time moves only when the status does.
    let since = previous
        .iter()
        .find(|c| c.type_ == READY && c.status == status)
        .map_or(Time(now), |c| c.last_transition_time.clone());
    Condition {
        type_: READY.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message: message.to_owned(),
        last_transition_time: since,
        observed_generation: schedule.metadata.generation,
    }
}

fn invalid_status(
    schedule: &MaintenanceSchedule,
    message: &str,
    now: Timestamp,
) -> MaintenanceScheduleStatus {
    let previous = schedule.status.clone().unwrap_or_default();
    MaintenanceScheduleStatus {
        next_schedule_time: None,
        next_schedule_local: None,
        conditions: vec![ready(schedule, "False", "InvalidSpec", message, &previous.conditions, now)],
        observed_generation: schedule.metadata.generation,
        ..previous
    }
}

/// A Warning Event for an invalid spec, once per message (the condition holds it meanwhile).
async fn report_invalid(ctx: &Context, schedule: &MaintenanceSchedule, message: &str) {
    let already = schedule
        .status
        .as_ref()
        .is_some_and(|s| s.conditions.iter().any(|c| c.type_ == READY && c.message == message));
    if !already {
        publish(
            ctx,
            schedule,
            EventType::Warning,
            "InvalidSpec",
            format!("{message}; no task is made until it is fixed"),
        )
        .await;
    }
}

async fn publish(
    ctx: &Context,
    schedule: &MaintenanceSchedule,
    type_: EventType,
    reason: &str,
    note: String,
) {
    let event = Event {
        type_,
        reason: reason.to_owned(),
        note: Some(note),
        action: "Schedule".to_owned(),
        secondary: None,
    };
    ctx.publish_event(&schedule.object_ref(&()), event).await;
}

async fn write_status(
    ctx: &Context,
    schedule: &MaintenanceSchedule,
    status: MaintenanceScheduleStatus,
) -> Result<()> {
    let previous = schedule.status.clone().unwrap_or_default();
    if previous == status {
        return Ok(());
    }
    let namespace = schedule.namespace().unwrap_or_default();
    let name = schedule.name_any();
    let api: Api<MaintenanceSchedule> = Api::namespaced(ctx.client.clone(), &namespace);
    let patch =
        conditions::status_patch(&previous, &status).map_err(Error::json("MaintenanceSchedule status"))?;
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(Error::kube(format!("write the status of MaintenanceSchedule {namespace}/{name}")))?;
    Ok(())
}
