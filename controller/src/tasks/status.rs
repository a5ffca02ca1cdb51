//! A task's status after a decision or an outcome: pure functions from status to status.
//!
//! What they write:
//!
//! * `state`, and its times: `initiatedAt` when the task is first taken into account,
//!   `startedAt` when its work starts, `completedAt` when it becomes final;
//! * `lastOperation`: the last thing that happened, in one line (its time moves only when the
//!   line changes, so that deciding the same again writes nothing);
//! * `lastErrors`: one entry per rejection or failure, the newest [`MAX_LAST_ERRORS`] kept;
//! * two conditions:
//!   - [`QUEUED`]: True while the task is Pending, its reason `QueuedBehindTask` or
//!     `WaitingForTarget` and its message exactly what it waits for; False once it started
//!     (`Started`) or ended (reason: the final state);
//!   - [`READY`]: True once the task is Completed, so `kubectl wait --for=condition=Ready
//!     mtask/<name>` waits for success; False before (reason `Pending`, `InProgress`) and after
//!     a failure or rejection (reason: the error code, message: what went wrong);
//! * `waitingFor`: the `Queued` reason while the task is Pending (a `kubectl get` column), absent
//!   otherwise;
//! * `observedGeneration`: the generation the decision was made for.
//!
//! A final status (Completed, Failed, Rejected) is returned unchanged, whatever is applied.
//! Times are kept in whole seconds, as the API stores them, so that a status read back compares
//! equal to the one written.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use super::lifecycle::Decision;
use crate::conditions::MESSAGE_MAX_LEN;
use groundskeeper_api::maintenance_task::{
    LastOperation, MAX_LAST_ERRORS, MaintenanceTaskStatus, NodeProgress, TaskError, TaskState,
};
use groundskeeper_api::maintenance_task::{QUEUED, READY};

/// `lastErrors[].code` of a task that did not finish by its deadline.
pub(crate) const DEADLINE_EXCEEDED: &str = "DeadlineExceeded";
/// `lastErrors[].code` of a running task stopped by a suspension of its target.
pub(crate) const SUSPENDED: &str = "Suspended";
/// `lastErrors[].code` of a task whose target was deleted while it ran.
pub(crate) const TARGET_NOT_FOUND: &str = "TargetNotFound";

/// The status after `decision`. Decisions that change nothing in the status (`KeepRunning`,
/// `Nothing`, `Delete`) return it as it is.
pub fn apply_decision(
    status: MaintenanceTaskStatus,
    decision: &Decision,
    generation: Option<i64>,
    now: Timestamp,
) -> MaintenanceTaskStatus {
    match decision {
        Decision::Wait { reason } => wait(status, reason.code(), &reason.to_string(), generation, now),
        Decision::Start => start(status, generation, now),
        Decision::Reject { reason } => finish(
            status,
            Ending::failure(TaskState::Rejected, reason.code(), format!("rejected: {reason}")),
            generation,
            now,
        ),
        Decision::FailDeadline { deadline } => finish(
            status,
            Ending::failure(
                TaskState::Failed,
                DEADLINE_EXCEEDED,
                format!(
                    "not finished by its deadline {} (spec.deadlineSeconds after creation); its \
                     work is stopped",
                    format_time(*deadline)
                ),
            ),
            generation,
            now,
        ),
        Decision::FailTargetGone { target } => finish(
            status,
            Ending::failure(
                TaskState::Failed,
                TARGET_NOT_FOUND,
                format!(
                    "{} {} was deleted while the task ran; its work is stopped",
                    target.kind, target.name
                ),
            ),
            generation,
            now,
        ),
        Decision::FailSuspended { by } => finish(
            status,
            Ending::failure(
                TaskState::Failed,
                SUSPENDED,
                format!("stopped: {by} (spec.runningTasks Stop); create the task again once it is resumed"),
            ),
            generation,
            now,
        ),
        Decision::KeepRunning | Decision::Nothing | Decision::Delete => status,
    }
}

/// The status of a task whose work succeeded: Completed, `Ready` True.
pub fn complete(
    status: MaintenanceTaskStatus,
    description: &str,
    generation: Option<i64>,
    now: Timestamp,
) -> MaintenanceTaskStatus {
    finish(
        status,
        Ending { state: TaskState::Completed, error_code: None, description: description.to_owned() },
        generation,
        now,
    )
}

/// The status of a task whose work failed: Failed, with a `lastErrors` entry of `code`
/// (CamelCase) saying what went wrong and what to do.
pub fn fail(
    status: MaintenanceTaskStatus,
    code: &str,
    description: &str,
    generation: Option<i64>,
    now: Timestamp,
) -> MaintenanceTaskStatus {
    finish(status, Ending::failure(TaskState::Failed, code, description.to_owned()), generation, now)
}

/// A running task's last operation set to `description` (its time moves only when it changes).
pub fn note_running(
    mut status: MaintenanceTaskStatus,
    description: &str,
    now: Timestamp,
) -> MaintenanceTaskStatus {
    if status.state == Some(TaskState::InProgress) {
        set_operation(&mut status, TaskState::InProgress, description, now);
    }
    status
}

/// `errors` with a new entry at the end, the oldest dropped beyond [`MAX_LAST_ERRORS`].
pub fn push_error(errors: &mut Vec<TaskError>, code: &str, description: &str, now: Timestamp) {
    errors.push(TaskError {
        code: code.to_owned(),
        description: truncate(description),
        observed_at: time(now),
    });
    let excess = errors.len().saturating_sub(MAX_LAST_ERRORS);
    errors.drain(..excess);
}

/// `finished/all` of the nodes or members (finished: succeeded, failed or skipped), e.g. `4/6`;
/// `None` while no node is known.
pub fn progress_of(nodes: &[NodeProgress]) -> Option<String> {
    if nodes.is_empty() {
        return None;
    }
    let finished = nodes.iter().filter(|n| n.state.is_finished()).count();
    Some(format!("{finished}/{}", nodes.len()))
}

/// How a task ends.
struct Ending {
    state: TaskState,
    /// Set for failures and rejections: the `lastErrors` code and the `Ready` reason.
    error_code: Option<String>,
    description: String,
}

impl Ending {
    fn failure(state: TaskState, code: &str, description: String) -> Self {
        Ending { state, error_code: Some(code.to_owned()), description }
    }
}

fn wait(
    mut status: MaintenanceTaskStatus,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: Timestamp,
) -> MaintenanceTaskStatus {
    if is_final(&status) {
        return status;
    }
    status.state = Some(TaskState::Pending);
    status.waiting_for = Some(reason.to_string());
    status.initiated_at.get_or_insert_with(|| time(now));
    status.observed_generation = generation;
    set_operation(&mut status, TaskState::Pending, message, now);
    set_condition(&mut status.conditions, QUEUED, true, reason, message, generation, now);
    set_condition(&mut status.conditions, READY, false, "Pending", message, generation, now);
    status
}

fn start(
    mut status: MaintenanceTaskStatus,
    generation: Option<i64>,
    now: Timestamp,
) -> MaintenanceTaskStatus {
    if is_final(&status) {
        return status;
    }
    const STARTED: &str = "work started";
    status.state = Some(TaskState::InProgress);
    status.waiting_for = None;
    status.initiated_at.get_or_insert_with(|| time(now));
    status.started_at = Some(time(now));
    status.observed_generation = generation;
    set_operation(&mut status, TaskState::InProgress, STARTED, now);
    set_condition(&mut status.conditions, QUEUED, false, "Started", STARTED, generation, now);
    set_condition(&mut status.conditions, READY, false, "InProgress", STARTED, generation, now);
    status
}

fn finish(
    mut status: MaintenanceTaskStatus,
    ending: Ending,
    generation: Option<i64>,
    now: Timestamp,
) -> MaintenanceTaskStatus {
    if is_final(&status) {
        return status;
    }
    let state = ending.state;
    let description = ending.description.as_str();
    status.state = Some(state);
    status.waiting_for = None;
    status.initiated_at.get_or_insert_with(|| time(now));
    status.completed_at = Some(time(now));
    status.observed_generation = generation;
    if let Some(code) = &ending.error_code {
        push_error(&mut status.last_errors, code, description, now);
    }
    set_operation(&mut status, state, description, now);
    set_condition(&mut status.conditions, QUEUED, false, state.as_str(), description, generation, now);
    let ready_reason = ending.error_code.as_deref().unwrap_or(state.as_str());
    let succeeded = state == TaskState::Completed;
    set_condition(&mut status.conditions, READY, succeeded, ready_reason, description, generation, now);
    status
}

/// Final states never change.
fn is_final(status: &MaintenanceTaskStatus) -> bool {
    status.state.is_some_and(TaskState::is_final)
}

fn set_operation(status: &mut MaintenanceTaskStatus, state: TaskState, description: &str, now: Timestamp) {
    let description = truncate(description);
    let unchanged =
        status.last_operation.as_ref().is_some_and(|op| op.state == state && op.description == description);
    if !unchanged {
        status.last_operation = Some(LastOperation { state, description, last_update_time: time(now) });
    }
}

/// Sets condition `type_`, keeping its transition time when its status does not change.
fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: Timestamp,
) {
    let status = if status { "True" } else { "False" }.to_owned();
    let last_transition_time = conditions
        .iter()
        .find(|c| c.type_ == type_ && c.status == status)
        .map_or_else(|| time(now), |c| c.last_transition_time.clone());
    let condition = Condition {
        type_: type_.to_owned(),
        status,
        reason: reason.to_owned(),
        message: truncate(message),
        observed_generation: generation,
        last_transition_time,
    };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(existing) => *existing = condition,
        None => conditions.push(condition),
    }
}

/// `now` in whole seconds, as the API stores times.
fn time(now: Timestamp) -> Time {
    Time(Timestamp::from_second(now.as_second()).expect("a timestamp's own seconds are in range"))
}

fn format_time(time: Timestamp) -> String {
    crate::conditions::format_time(time)
}

/// At most the length a condition message may have.
fn truncate(text: &str) -> String {
    let mut cut = text.len().min(MESSAGE_MAX_LEN);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text[..cut].to_owned()
}

#[cfg(test)]
mod tests;
