//! etcd compaction and defragmentation: the EtcdCluster controller.
//!
//! Observe (cheap `Status` calls on every member), decide (a pure function of the spec, the
//! members, the cluster's maintenance Jobs and the last status), apply (at most one Job per
//! cluster, a status write, Events, metrics).

pub mod decide;
pub mod metrics;
pub mod observe;
pub mod policy;
pub mod reconcile;
pub mod sampler;

pub use reconcile::{reconcile, run};
