//! MaintenanceTasks, the one path for maintenance asked for by people and by the triggers:
//! checked ([`validate`]), queued per target ([`queue`]), moved through their states
//! ([`lifecycle`]), their steps followed ([`steps`], and node by node for a Cleanup:
//! [`cleanup`]) and their status written ([`status`]).
//!
//! Those are pure: they speak of targets and tasks, never of a data store or of the Kubernetes
//! API, and take the time as an argument. [`reconcile`] is the task controller around them: it
//! gathers the facts, carries out the decisions, and is the one place that creates a task's Jobs
//! (what the work means on a kind of target comes from [`crate::targets`]).

pub mod cleanup;
pub mod lifecycle;
pub mod metrics;
pub mod queue;
pub mod reconcile;
pub mod status;
pub mod steps;
pub mod validate;

pub use lifecycle::{
    Decision, Rejection, TargetFacts, TargetKey, TargetPlan, TargetTasks, TaskDecision, TaskView, WaitReason,
    decide, earliest_requeue, group_by_target,
};
pub use status::{apply_decision, complete, fail, progress_of, push_error};
pub use validate::{FieldError, ValidTask, Work, validate};
