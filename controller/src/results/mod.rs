//! What a finished Job's result means for the work it was part of: pure conversions from the
//! runner's [`groundskeeper_protocol::JobResult`] into what the task and its target show, and
//! ([`etcd_cluster::record_task`]) the one write of a finished etcd task's outcome into its
//! EtcdCluster's status.

pub mod etcd_cluster;
pub mod task_progress;

pub use task_progress::{member_progress, summary};
