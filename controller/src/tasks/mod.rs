//! MaintenanceTasks, the one path for maintenance asked for by people and by the triggers:
//! checked ([`validate`]), queued per target ([`queue`]), moved through their states
//! ([`lifecycle`]) and their status written ([`status`]).
//!
//! Everything here is pure: it speaks of targets and tasks, never of a data store or of the
//! Kubernetes API, and takes the time as an argument. The controller around it gathers the facts
//! and carries out the decisions.

pub mod lifecycle;
pub mod queue;
pub mod status;
pub mod validate;

pub use lifecycle::{
    Decision, Rejection, TargetFacts, TargetKey, TargetPlan, TargetTasks, TaskDecision, TaskView, WaitReason,
    decide, earliest_requeue, group_by_target,
};
pub use status::{apply_decision, complete, fail, progress_of, push_error};
pub use validate::{FieldError, ValidTask, Work, validate};
