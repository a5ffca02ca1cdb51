//! Status conditions: merged into lists other controllers share (the rules are the API's:
//! [`groundskeeper_api::conditions`]), written apart from the decisions ([`writer`]).

pub mod writer;

pub use groundskeeper_api::conditions::{
    Condition, ConditionStatus, MESSAGE_MAX_LEN, condition_status, format_time, merge_conditions,
};
pub use writer::{
    ConditionTarget, WriteOutcome, conditions_patch, status_patch, write_conditions, write_conditions_at,
};
