//! etcd compaction and defragmentation: the EtcdCluster controller.
//!
//! Observe (cheap `Status` calls on every member), decide (a pure function of the spec, the
//! members, the cluster's MaintenanceTasks and the last status), apply (a status write, at most
//! one automatic MaintenanceTask submitted, Events, metrics). The tasks' Jobs are the task
//! controller's ([`crate::tasks`]); their outcomes come back into the status through
//! [`crate::results::etcd_cluster`].

pub mod decide;
pub mod discovery;
pub mod fleet;
pub mod metrics;
pub mod observe;
pub mod partition;
pub mod policy;
pub mod reconcile;
pub mod sampler;

pub use reconcile::{reconcile, run};
