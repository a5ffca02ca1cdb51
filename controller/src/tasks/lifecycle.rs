//! What happens next to each task of one target: a pure function of the target's facts, the
//! tasks and the time.
//!
//! ```text
//!   Pending ──▶ InProgress ──▶ Completed | Failed      (then deleted, ttlSecondsAfterFinished later)
//!      │
//!      └──▶ Rejected | Failed (DeadlineExceeded)
//! ```
//!
//! The rules, in the order they apply:
//!
//! * a final task (Completed, Failed, Rejected) never changes; it is deleted once
//!   `ttlSecondsAfterFinished` has passed since it finished (`completedAt`; its creation if no
//!   finish time was recorded);
//! * a waiting task with an invalid spec is rejected, naming every mistake;
//! * a waiting task whose target does not exist is rejected; a running one fails
//!   (`TargetNotFound`): its Jobs have nothing left to work on;
//! * a task not finished `deadlineSeconds` after its creation fails (`DeadlineExceeded`), the
//!   deadline included (at exactly the deadline it fails);
//! * the rest queue ([`super::queue`]): a duplicate is rejected naming the task it duplicates;
//!   the head starts when its target is ready, or waits saying what for; the others wait,
//!   naming the task they are queued behind.
//!
//! The caller gathers the facts (does the target exist, may work start on it: the exact reason
//! when not), applies each decision (status with [`super::status`], Jobs, deletion), and looks
//! again at [`TargetPlan::requeue_at`] at the latest: the earliest deadline or TTL expiry.

use std::collections::BTreeMap;
use std::fmt;

use jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;

use super::queue::{self, Place, QueueEntry, Standing};
use groundskeeper_api::maintenance_suspension::Suspension;
use groundskeeper_api::maintenance_task::{MaintenanceTask, TaskState, TaskTarget, TaskType};
use groundskeeper_api::validate::{FieldError, describe_errors, validate};

/// What the caller knows of a target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetFacts {
    /// No object of that kind and name in the tasks' namespace (give this for a kind that is
    /// not known, too).
    Missing,
    /// It exists but work may not start on it now; `reason` says exactly what it waits for,
    /// e.g. "condition Available is False".
    Waiting { reason: String },
    /// It exists and work may start on it.
    Ready,
}

/// The target's maintenance windows, for the tasks that wait for them (automatic ones, and
/// those whose spec asks to).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WindowGate {
    /// A window is open: work may start.
    Open,
    /// None is open; the next opens at `opens` (`opens_local`: in the windows' zone, for people).
    Closed { opens: Timestamp, opens_local: String },
    /// The windows are written wrong (`why` names the field): nothing that waits for them starts.
    Invalid { why: String },
}

/// What the lifecycle needs of a task.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskView {
    pub name: String,
    pub created: Timestamp,
    pub task_type: TaskType,
    /// `Pending` when the task has no status yet.
    pub state: TaskState,
    pub started_at: Option<Timestamp>,
    pub completed_at: Option<Timestamp>,
    pub deadline_seconds: Option<i64>,
    pub ttl_seconds_after_finished: i64,
    /// `spec.ttlSecondsAfterFailed`: a Failed task's instead.
    pub ttl_seconds_after_failed: Option<i64>,
    /// What [`validate`] said of the spec.
    pub validation: Result<(), Vec<FieldError>>,
    /// Starts only inside the target's maintenance windows: an automatic task, or one whose spec
    /// says `waitForWindow`.
    pub waits_for_window: bool,
    /// Whether a person must approve its plan first, and whether they have.
    pub approval: Approval,
}

/// A task's approval gate (`spec.requireApproval`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approval {
    /// The task starts without one.
    NotRequired,
    /// Its `groundskeeper.dev/approved-plan` annotation names the plan in its status.
    Approved,
    /// Not approved yet: `plan` is the id of the plan in its status (`None` while none is
    /// written), `approved` what the annotation names if anything (an older plan).
    Awaiting { plan: Option<String>, approved: Option<String> },
}

impl Approval {
    /// The gate of `task` as its spec, status and annotation say.
    pub fn of(task: &MaintenanceTask) -> Self {
        if !task.spec.require_approval {
            return Approval::NotRequired;
        }
        // A plan without id is one that could not be made: nothing to approve yet.
        let plan = task
            .status
            .as_ref()
            .and_then(|s| s.plan.as_ref())
            .map(|p| p.id.clone())
            .filter(|id| !id.is_empty());
        let approved =
            task.annotations().get(groundskeeper_protocol::keys::APPROVED_PLAN).map(|a| a.trim().to_owned());
        match (&plan, &approved) {
            (Some(plan), Some(approved)) if plan == approved => Approval::Approved,
            _ => Approval::Awaiting { plan, approved },
        }
    }
}

impl TaskView {
    /// The view of a task object. `now` stands in for a creation time the object lacks (only
    /// objects that did not come from an API server lack one).
    pub fn of(task: &MaintenanceTask, now: Timestamp) -> Self {
        Self::with_validation(task, validate(task).map(|_| ()), now)
    }

    /// The view of a task already checked (the verdict is not computed again).
    pub fn of_checked(task: &super::checked::CheckedTask, now: Timestamp) -> Self {
        Self::with_validation(task, task.valid().map(|_| ()).map_err(<[FieldError]>::to_vec), now)
    }

    fn with_validation(
        task: &MaintenanceTask,
        validation: Result<(), Vec<FieldError>>,
        now: Timestamp,
    ) -> Self {
        let status = task.status.as_ref();
        let time = |t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>| t.map(|t| t.0);
        TaskView {
            name: task.name_any(),
            created: time(task.metadata.creation_timestamp.as_ref()).unwrap_or(now),
            task_type: task.spec.task_type.clone(),
            state: status.and_then(|s| s.state).unwrap_or_default(),
            started_at: time(status.and_then(|s| s.started_at.as_ref())),
            completed_at: time(status.and_then(|s| s.completed_at.as_ref())),
            deadline_seconds: task.spec.deadline_seconds,
            ttl_seconds_after_finished: task.spec.ttl_seconds_after_finished,
            ttl_seconds_after_failed: task.spec.ttl_seconds_after_failed,
            validation,
            waits_for_window: waits_for_window(task),
            approval: Approval::of(task),
        }
    }
}

/// Whether `task` starts (and, for a Cleanup, starts each node) only inside its target's
/// maintenance windows: an automatic task, or one whose spec says `waitForWindow`.
pub fn waits_for_window(task: &MaintenanceTask) -> bool {
    task.spec.wait_for_window
        || task.labels().get(groundskeeper_protocol::keys::ORIGIN_LABEL).map(String::as_str)
            == Some(groundskeeper_protocol::keys::ORIGIN_AUTOMATIC)
}

/// A target (in one namespace) and its tasks, as [`decide`] takes them.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetTasks {
    pub target: TaskTarget,
    pub facts: TargetFacts,
    pub tasks: Vec<TaskView>,
    /// `None`: the target has no maintenance windows (work may start at any time).
    pub window: Option<WindowGate>,
    /// The target's maintenance suspensions in force now.
    pub suspensions: Vec<Suspension>,
}

/// A target as a key: tasks of different namespaces never share a queue.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TargetKey {
    pub namespace: String,
    pub target: TaskTarget,
}

/// The tasks grouped by target, each group's views ready for [`decide`].
pub fn group_by_target(tasks: &[MaintenanceTask], now: Timestamp) -> BTreeMap<TargetKey, Vec<TaskView>> {
    let mut groups: BTreeMap<TargetKey, Vec<TaskView>> = BTreeMap::new();
    for task in tasks {
        let key =
            TargetKey { namespace: task.namespace().unwrap_or_default(), target: task.spec.target.clone() };
        groups.entry(key).or_default().push(TaskView::of(task, now));
    }
    groups
}

/// What to do with one task.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Turn it away for good (state Rejected).
    Reject { reason: Rejection },
    /// Leave it Pending; `reason` is what it waits for.
    Wait { reason: WaitReason },
    /// Start its work (state InProgress).
    Start,
    /// Its work runs; leave it.
    KeepRunning,
    /// It did not finish by `deadline` (state Failed, code `DeadlineExceeded`); stop its Jobs.
    FailDeadline { deadline: Timestamp },
    /// Its target's maintenance was suspended with running tasks stopped (state Failed, code
    /// `Suspended`); stop its Jobs. `by` describes the suspension.
    FailSuspended { by: String },
    /// Its target was deleted while it ran (state Failed, code `TargetNotFound`); stop its Jobs.
    FailTargetGone { target: TaskTarget },
    /// Finished, and its time to live has passed: delete the object.
    Delete,
    /// Finished, kept until its time to live has passed.
    Nothing,
}

/// Why a task is turned away.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    Invalid {
        errors: Vec<FieldError>,
    },
    TargetNotFound {
        target: TaskTarget,
    },
    /// Another task of the same type and target, ahead of it, is still pending or running.
    Duplicate {
        of: String,
        of_state: TaskState,
    },
    /// Its target says it may not run: what it asks for does not hold (`why`, naming what was
    /// seen).
    NotAdmitted {
        why: String,
    },
}

impl Rejection {
    /// For `lastErrors[].code` and the conditions' reason.
    pub fn code(&self) -> &'static str {
        match self {
            Rejection::Invalid { .. } => "InvalidSpec",
            Rejection::TargetNotFound { .. } => "TargetNotFound",
            Rejection::Duplicate { .. } => "Duplicate",
            Rejection::NotAdmitted { .. } => "NotAdmitted",
        }
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejection::Invalid { errors } => write!(
                f,
                "the spec is invalid: {}. The spec cannot change: create a corrected task",
                describe_errors(errors)
            ),
            Rejection::TargetNotFound { target } => write!(
                f,
                "{} {} does not exist in this namespace: create it first, or create a task that \
                 names an existing one",
                target.kind, target.name
            ),
            Rejection::Duplicate { of, of_state } => write!(
                f,
                "duplicate of MaintenanceTask {of} ({of_state}), which does the same work on the \
                 same target; wait for it to finish and create this task again if still needed"
            ),
            Rejection::NotAdmitted { why } => f.write_str(why),
        }
    }
}

/// What a pending task waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitReason {
    /// Its turn: `task` runs or is first in line, with `ahead` tasks in front of this one.
    QueuedBehind {
        task: String,
        /// `task` runs, or starts with this very decision.
        task_running: bool,
        ahead: usize,
    },
    /// Its target, which is not ready for work for `reason` (as the caller gave it).
    Target { target: TaskTarget, reason: String },
    /// Its target's next maintenance window (the task waits for windows).
    Window { target: TaskTarget, gate: WindowGate },
    /// Its target's maintenance is suspended (`suspension` describes it).
    Suspended { target: TaskTarget, suspension: String, until: Option<Timestamp> },
    /// A person's approval of its plan (`spec.requireApproval`).
    Approval { plan: Option<String>, approved: Option<String> },
}

impl WaitReason {
    /// For the `Queued` condition's reason.
    pub fn code(&self) -> &'static str {
        match self {
            WaitReason::QueuedBehind { .. } => "QueuedBehindTask",
            WaitReason::Target { .. } => "WaitingForTarget",
            WaitReason::Window { .. } => "WaitingForWindow",
            WaitReason::Suspended { .. } => "Suspended",
            WaitReason::Approval { .. } => "AwaitingApproval",
        }
    }
}

impl fmt::Display for WaitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitReason::QueuedBehind { task, task_running, ahead } => {
                let state = if *task_running { "InProgress" } else { "Pending" };
                let tasks = if *ahead == 1 { "task" } else { "tasks" };
                write!(f, "queued behind MaintenanceTask {task} ({state}); {ahead} {tasks} ahead of this one")
            }
            WaitReason::Target { target, reason } => {
                write!(f, "waits for {} {}: {reason}", target.kind, target.name)
            }
            WaitReason::Approval { plan: None, .. } => write!(
                f,
                "awaits approval of its plan, which cannot be made now (status.plan.summary says \
                 why); it can be approved once it is made"
            ),
            WaitReason::Approval { plan: Some(plan), approved } => {
                write!(
                    f,
                    "awaits approval of plan {plan} (status.plan): review it, then `kubectl groundskeeper task approve` this task"
                )?;
                match approved {
                    Some(old) if old != plan => {
                        write!(f, "; the plan approved before ({old}) has changed since")
                    }
                    _ => Ok(()),
                }
            }
            WaitReason::Suspended { target, suspension, .. } => {
                write!(f, "waits while {} {} is suspended: {suspension}", target.kind, target.name)
            }
            WaitReason::Window { target, gate: WindowGate::Closed { opens, opens_local } } => write!(
                f,
                "waits for the next maintenance window of {} {}: it opens {opens_local} ({opens}); \
                 this task starts only inside one",
                target.kind, target.name
            ),
            WaitReason::Window { target, gate } => write!(
                f,
                "waits for a maintenance window of {} {}, whose windows cannot be read: {}; fix them \
                 and this task starts inside the next one",
                target.kind,
                target.name,
                match gate {
                    WindowGate::Invalid { why } => why.as_str(),
                    _ => "",
                }
            ),
        }
    }
}

/// One task's decision.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskDecision {
    pub name: String,
    pub decision: Decision,
}

/// Every task's decision, in queue order, and when to look again at the latest.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetPlan {
    pub target: TaskTarget,
    pub decisions: Vec<TaskDecision>,
    /// The earliest deadline or TTL expiry among the tasks kept; `None`: nothing is due by time
    /// (only a change will bring one).
    pub requeue_at: Option<Timestamp>,
}

/// One decision per task of the target.
pub fn decide(input: &TargetTasks, now: Timestamp) -> TargetPlan {
    let tasks = &input.tasks;
    let mut decisions: Vec<Option<Decision>> =
        tasks.iter().map(|task| settle(task, &input.target, &input.facts, &input.suspensions, now)).collect();
    let in_queue: Vec<usize> = (0..tasks.len()).filter(|&i| decisions[i].is_none()).collect();
    let entries: Vec<QueueEntry> = in_queue.iter().map(|&i| queue_entry(&tasks[i])).collect();
    for (&i, place) in in_queue.iter().zip(queue::place(&entries)) {
        decisions[i] = Some(from_place(place, input, &tasks[i]));
    }
    let decided: Vec<(&TaskView, Decision)> = tasks
        .iter()
        .zip(decisions.into_iter().map(|d| d.expect("every task is settled or queued")))
        .collect();
    plan(input.target.clone(), decided, now)
}

/// The earliest time any of the plans wants to be looked at again.
pub fn earliest_requeue(plans: &[TargetPlan]) -> Option<Timestamp> {
    plans.iter().filter_map(|p| p.requeue_at).min()
}

/// The decisions that do not depend on the queue; `None` for a task that is to be queued.
fn settle(
    task: &TaskView,
    target: &TaskTarget,
    facts: &TargetFacts,
    suspensions: &[Suspension],
    now: Timestamp,
) -> Option<Decision> {
    if task.state.is_final() {
        return Some(finished(task, now));
    }
    let running = task.state == TaskState::InProgress;
    if !running && let Err(errors) = &task.validation {
        return Some(Decision::Reject { reason: Rejection::Invalid { errors: errors.clone() } });
    }
    if !running && *facts == TargetFacts::Missing {
        return Some(Decision::Reject { reason: Rejection::TargetNotFound { target: target.clone() } });
    }
    let stoppable = !(running && task.task_type.runs_to_its_end());
    if stoppable
        && let Some(deadline) = deadline_of(task)
        && deadline <= now
    {
        return Some(Decision::FailDeadline { deadline });
    }
    if running && *facts == TargetFacts::Missing {
        return Some(Decision::FailTargetGone { target: target.clone() });
    }
    if running
        && stoppable
        && let Some(suspension) = suspensions.iter().find(|s| s.stop_running && !s.allows(&task.task_type))
    {
        return Some(Decision::FailSuspended { by: suspension.describe() });
    }
    None
}

fn finished(task: &TaskView, now: Timestamp) -> Decision {
    match expiry_of(task) {
        Some(expiry) if expiry <= now => Decision::Delete,
        _ => Decision::Nothing,
    }
}

fn queue_entry(task: &TaskView) -> QueueEntry {
    QueueEntry {
        name: task.name.clone(),
        created: task.created,
        task_type: task.task_type.clone(),
        standing: if task.state == TaskState::InProgress { Standing::Running } else { Standing::Waiting },
    }
}

fn from_place(place: Place, input: &TargetTasks, task: &TaskView) -> Decision {
    match place {
        Place::Running => Decision::KeepRunning,
        Place::Head => head_decision(input, task),
        Place::Behind { head, head_running, ahead } => {
            // A head that is not running yet starts in this very pass when the target is ready
            // (and, if it waits for one, a window is open): say so now, rather than write a
            // second message once it has.
            let head_starts = input
                .tasks
                .iter()
                .find(|t| t.name == head)
                .is_some_and(|head| matches!(head_decision(input, head), Decision::Start));
            Decision::Wait {
                reason: WaitReason::QueuedBehind {
                    task: head,
                    task_running: head_running || head_starts,
                    ahead,
                },
            }
        }
        Place::Duplicate { of, of_running } => Decision::Reject {
            reason: Rejection::Duplicate {
                of,
                of_state: if of_running { TaskState::InProgress } else { TaskState::Pending },
            },
        },
    }
}

/// The head starts when its target is ready, and, if it waits for one, a window is open.
fn head_decision(input: &TargetTasks, head: &TaskView) -> Decision {
    if let Some(suspension) = input.suspensions.iter().find(|s| !s.allows(&head.task_type))
        && input.facts != TargetFacts::Missing
    {
        return Decision::Wait {
            reason: WaitReason::Suspended {
                target: input.target.clone(),
                suspension: suspension.describe(),
                until: suspension.until,
            },
        };
    }
    // A person's part comes first: the plan may be reviewed while the target or window is not
    // ready yet, and approving it then lets the task start the moment they are.
    if let Approval::Awaiting { plan, approved } = &head.approval
        && input.facts != TargetFacts::Missing
    {
        return Decision::Wait {
            reason: WaitReason::Approval { plan: plan.clone(), approved: approved.clone() },
        };
    }
    match &input.facts {
        TargetFacts::Ready => match &input.window {
            Some(gate @ (WindowGate::Closed { .. } | WindowGate::Invalid { .. }))
                if head.waits_for_window =>
            {
                Decision::Wait {
                    reason: WaitReason::Window { target: input.target.clone(), gate: gate.clone() },
                }
            }
            _ => Decision::Start,
        },
        TargetFacts::Waiting { reason } => Decision::Wait {
            reason: WaitReason::Target { target: input.target.clone(), reason: reason.clone() },
        },
        // Settled before queueing; kept total rather than assumed.
        TargetFacts::Missing => {
            Decision::Reject { reason: Rejection::TargetNotFound { target: input.target.clone() } }
        }
    }
}

/// The decisions in queue order, with the earliest time one of them is due.
fn plan(target: TaskTarget, mut decided: Vec<(&TaskView, Decision)>, now: Timestamp) -> TargetPlan {
    decided.sort_by(|(a, _), (b, _)| queue::queue_order((&a.created, &a.name), (&b.created, &b.name)));
    let requeue_at = decided.iter().filter_map(|(task, decision)| due_at(task, decision, now)).min();
    TargetPlan {
        target,
        decisions: decided
            .into_iter()
            .map(|(task, decision)| TaskDecision { name: task.name.clone(), decision })
            .collect(),
        requeue_at,
    }
}

/// When the task, once its decision is applied, next needs looking at for time's sake alone.
fn due_at(task: &TaskView, decision: &Decision, now: Timestamp) -> Option<Timestamp> {
    match decision {
        Decision::Delete => None,
        Decision::Nothing => expiry_of(task),
        // Final from now on: its time to live starts now.
        Decision::Reject { .. } => after(now, task.ttl_seconds_after_finished.max(0)),
        Decision::FailDeadline { .. } | Decision::FailTargetGone { .. } | Decision::FailSuspended { .. } => {
            after(now, ttl_when(task, TaskState::Failed))
        }
        // A suspension that ends by itself: look again then.
        Decision::Wait { reason: WaitReason::Suspended { until: Some(until), .. } } => {
            Some(deadline_of(task).map_or(*until, |deadline| deadline.min(*until)))
        }
        // The window's opening is when it may start.
        Decision::Wait { reason: WaitReason::Window { gate: WindowGate::Closed { opens, .. }, .. } } => {
            Some(deadline_of(task).map_or(*opens, |deadline| deadline.min(*opens)))
        }
        Decision::Wait { .. } | Decision::Start | Decision::KeepRunning => deadline_of(task),
    }
}

/// Creation plus `deadlineSeconds`.
pub(crate) fn deadline_of(task: &TaskView) -> Option<Timestamp> {
    after(task.created, task.deadline_seconds?)
}

/// When a finished task is to be deleted: its finish (else its creation) plus its TTL (a
/// negative TTL, which validation refuses, counts as 0).
pub(crate) fn expiry_of(task: &TaskView) -> Option<Timestamp> {
    let finished = task.completed_at.unwrap_or(task.created);
    after(finished, ttl_when(task, task.state))
}

/// The task's time to live once it is in final state `state`: `ttlSecondsAfterFailed` for a
/// Failed one when given, else `ttlSecondsAfterFinished` (a negative one, which validation
/// refuses, counts as 0).
fn ttl_when(task: &TaskView, state: TaskState) -> i64 {
    match (state, task.ttl_seconds_after_failed) {
        (TaskState::Failed, Some(seconds)) => seconds,
        _ => task.ttl_seconds_after_finished,
    }
    .max(0)
}

/// `time` plus `seconds`; `None` past the end of time (a deadline too far away to matter).
fn after(time: Timestamp, seconds: i64) -> Option<Timestamp> {
    time.checked_add(SignedDuration::from_secs(seconds)).ok()
}

#[cfg(test)]
mod tests;
