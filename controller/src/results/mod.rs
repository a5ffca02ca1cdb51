//! What a finished Job's result means for the work it was part of: conversions from the runner's
//! [`groundskeeper_protocol::JobResult`] into what the task and its target show, and the writes
//! that record it on the target: a cleaned Scylla node's annotations
//! ([`scylla_cleanup::node_cleaned`]), a finished etcd task's outcome in its EtcdCluster's status
//! ([`etcd_cluster::record_task`]).

pub mod etcd_cluster;
pub mod scylla_cleanup;
pub mod task_progress;

pub use task_progress::{member_progress, snapshot_status, snapshot_summary, summary};
