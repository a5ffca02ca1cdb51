//! What a schedule does now: a pure function of the schedule, the tasks it made and the time.
//!
//! * The run due is the latest one after the last run made or skipped (or the schedule's
//!   creation), at or before now: missed runs are not made up for, and a clock that went back
//!   makes nothing due again.
//! * A due run makes a task unless the schedule is suspended, the run is older than the starting
//!   deadline, or the concurrency policy says no; a run that makes nothing is skipped for good,
//!   with its reason.
//! * Finished tasks beyond the history limits are deleted, oldest first.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use groundskeeper_api::maintenance_schedule::ConcurrencyPolicy;
use groundskeeper_api::maintenance_schedule::validate::ValidSchedule;
use groundskeeper_api::maintenance_task::TaskState;

/// A task the schedule made, as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MadeTask {
    pub name: String,
    /// The run it stands for.
    pub scheduled: Timestamp,
    /// `None` until the task controller has seen it (it is Pending then).
    pub state: Option<TaskState>,
}

impl MadeTask {
    /// Not yet seen counts as Pending.
    fn unfinished(&self) -> bool {
        !self.state.unwrap_or_default().is_final()
    }
}

/// Why a due run made no task (also the metric's `reason` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    Suspended,
    ConcurrencyForbid,
    MissedDeadline,
}

impl SkipReason {
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::Suspended => "Suspended",
            SkipReason::ConcurrencyForbid => "ConcurrencyForbid",
            SkipReason::MissedDeadline => "MissedDeadline",
        }
    }
}

/// A run that made no task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip {
    pub scheduled: Timestamp,
    pub reason: SkipReason,
    pub message: String,
}

/// What to do now.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SchedulePlan {
    /// Make the task of this run.
    pub create: Option<Timestamp>,
    /// Delete these tasks (replaced, or beyond the history), with why.
    pub delete: Vec<(String, String)>,
    pub skip: Option<Skip>,
    /// The newest run made or skipped.
    pub last_schedule_time: Option<Timestamp>,
    pub next_run: Option<Timestamp>,
    /// When to look again: at the next run, or sooner.
    pub requeue_after: Option<Duration>,
}

/// The schedule's state and history as read.
pub struct ScheduleFacts<'a> {
    pub valid: &'a ValidSchedule,
    pub created: Timestamp,
    /// From the status: the newest run made or skipped.
    pub last_schedule_time: Option<Timestamp>,
}

pub fn decide(facts: &ScheduleFacts<'_>, tasks: &[MadeTask], now: Timestamp) -> SchedulePlan {
    let valid = facts.valid;
    // The tasks' own record counts too: a task made just before a restart (or by a pass whose
    // status write this pass has not seen yet), its run not yet in the status read.
    let newest_made = tasks.iter().map(|t| t.scheduled).max();
    let last = facts.last_schedule_time.max(newest_made);
    let since = last.map_or(facts.created, |last| last.max(facts.created));
    let mut plan = SchedulePlan { last_schedule_time: last, ..SchedulePlan::default() };
    if let Some(due) = valid.calendar.latest_due(since, now) {
        plan.last_schedule_time = Some(due);
        match refusal(valid, tasks, due, now) {
            Some((reason, message)) => plan.skip = Some(Skip { scheduled: due, reason, message }),
            None => {
                if valid.concurrency_policy == ConcurrencyPolicy::Replace {
                    plan.delete.extend(tasks.iter().filter(|t| t.unfinished()).map(|t| {
                        (t.name.clone(), format!("replaced by the run of {due} (concurrencyPolicy Replace)"))
                    }));
                }
                plan.create = Some(due);
            }
        }
    }
    plan.delete.extend(beyond_history(valid, tasks));
    if !valid.suspend {
        let from = plan.last_schedule_time.map_or(now, |last| last.max(now));
        plan.next_run = valid.calendar.next_after(from);
        plan.requeue_after = plan.next_run.map(|next| {
            Duration::try_from(next.duration_since(now).max(SignedDuration::from_secs(1)))
                .unwrap_or(Duration::from_secs(1))
        });
    }
    plan
}

/// Why the run due at `due` makes no task, if it does not.
fn refusal(
    valid: &ValidSchedule,
    tasks: &[MadeTask],
    due: Timestamp,
    now: Timestamp,
) -> Option<(SkipReason, String)> {
    if valid.suspend {
        return Some((SkipReason::Suspended, "the schedule is suspended (spec.suspend)".to_owned()));
    }
    if let Some(deadline) = valid.starting_deadline
        && now.duration_since(due) > deadline
    {
        return Some((
            SkipReason::MissedDeadline,
            format!(
                "the run of {due} was missed by {}s, more than spec.startingDeadlineSeconds {}",
                now.duration_since(due).as_secs(),
                deadline.as_secs()
            ),
        ));
    }
    let mut unfinished = tasks.iter().filter(|t| t.unfinished());
    match valid.concurrency_policy {
        ConcurrencyPolicy::Allow => None,
        ConcurrencyPolicy::Forbid => unfinished.next().map(|task| {
            (
                SkipReason::ConcurrencyForbid,
                format!("MaintenanceTask {} of the run of {} is not finished (concurrencyPolicy Forbid)", task.name, task.scheduled),
            )
        }),
        ConcurrencyPolicy::Replace => unfinished.find(|t| t.state == Some(TaskState::InProgress)).map(|task| {
            (
                SkipReason::ConcurrencyForbid,
                format!(
                    "MaintenanceTask {} of the run of {} is running: concurrencyPolicy Replace replaces only a task still Pending",
                    task.name, task.scheduled
                ),
            )
        }),
    }
}

/// Finished tasks beyond the history limits, oldest first out.
fn beyond_history(valid: &ValidSchedule, tasks: &[MadeTask]) -> Vec<(String, String)> {
    let mut finished: Vec<&MadeTask> = tasks.iter().filter(|t| !t.unfinished()).collect();
    finished.sort_by(|a, b| b.scheduled.cmp(&a.scheduled).then_with(|| b.name.cmp(&a.name)));
    let completed = finished.iter().filter(|t| t.state == Some(TaskState::Completed));
    let failed = finished.iter().filter(|t| t.state != Some(TaskState::Completed));
    let over = |tasks: Vec<&&MadeTask>, keep: usize, field: &str| {
        tasks
            .into_iter()
            .skip(keep)
            .map(|t| (t.name.clone(), format!("beyond spec.{field} {keep}")))
            .collect::<Vec<_>>()
    };
    let mut delete = over(completed.collect(), valid.successful_history, "successfulTasksHistoryLimit");
    delete.extend(over(failed.collect(), valid.failed_history, "failedTasksHistoryLimit"));
    delete
}

#[cfg(test)]
mod tests;
