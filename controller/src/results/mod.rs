//! What a finished Job's result means for the work it was part of: conversions from the runner's
//! [`groundskeeper_protocol::JobResult`] into what the task and its target show, and the writes
//! that record it on the target (a cleaned Scylla node's annotations).

pub mod scylla_cleanup;
pub mod task_progress;

pub use task_progress::{member_progress, summary};
