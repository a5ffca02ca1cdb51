//! Status conditions: merged into lists other controllers share, written apart from the decisions.

pub mod merge;
pub mod writer;

pub use merge::{
    Condition, ConditionStatus, MESSAGE_MAX_LEN, condition_status, format_time, merge_conditions,
};
pub use writer::{
    ConditionTarget, WriteOutcome, conditions_patch, scylla_condition_target, status_patch, write_conditions,
    write_conditions_at,
};
