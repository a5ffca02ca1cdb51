//! MaintenanceTasks, the one path for maintenance asked for by people and by the triggers:
//! queued per target ([`queue`]), moved through their states ([`lifecycle`]), their steps
//! followed ([`steps`], [`step_jobs`]) and their status written ([`status`]). The checks of a task's spec are the API's ([`groundskeeper_api::validate`]),
//! run once per task and reconciliation ([`checked`]).
//!
//! Those are pure: they speak of targets and tasks, never of a data store or of the Kubernetes
//! API, and take the time as an argument. [`controller`] is the task controller around them: it
//! gathers the facts, carries out the decisions, and is the one place that creates a task's Jobs.
//! What the work means on a kind of target is not known here: each data store implements
//! [`target::Target`] and is handed to the controller when it starts.

pub mod checked;
pub mod controller;
pub mod hold;
pub mod lifecycle;
pub mod metrics;
pub mod queue;
pub mod status;
pub mod step_jobs;
pub mod steps;
pub mod target;

pub use checked::CheckedTask;
pub use lifecycle::{
    Decision, Rejection, TargetFacts, TargetKey, TargetPlan, TargetTasks, TaskDecision, TaskView, WaitReason,
    decide, earliest_requeue, group_by_target,
};
pub use status::{apply_decision, complete, fail, progress_of, push_error};
