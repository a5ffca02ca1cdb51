//! etcd compaction, defragmentation and snapshots on `EtcdCluster`s: the whole vertical, from
//! what is observed to what a finished Job records.
//!
//! * [`controller`]: the EtcdCluster controller, one pass per cluster: [`observe`] (cheap
//!   `Status` calls on every member) → [`decide`] (pure: the spec, the members, the cluster's
//!   MaintenanceTasks and the last status) → [`apply`] (a status write, at most one automatic
//!   MaintenanceTask submitted, Events, metrics);
//! * [`task`]: what a MaintenanceTask means on an EtcdCluster: its steps, each one Job built by
//!   [`job`], carried forward by the task controller;
//! * [`record`]: what a finished task's Jobs did, written back into the EtcdCluster's status, and
//!   [`task_progress`]: into the task's own (per member, per snapshot);
//! * the rules of this store: [`policy`] (the spec, checked), [`sampler`] (compaction by revision
//!   samples), [`partition`] (revisions that carry a cluster id and a time), [`fleet`] and
//!   [`fleet_slot`] (fleets of partitioned clusters), [`discovery`] (EtcdClusters made for
//!   Arktos StorageClusters), [`operator_discovery`] (EtcdClusters made for etcd-operator's
//!   clusters), [`metrics`].

pub mod apply;
pub mod controller;
pub mod decide;
pub mod discovery;
pub mod fleet;
pub mod fleet_slot;
pub mod job;
pub mod metrics;
pub mod model;
pub mod observe;
pub mod operator_discovery;
pub mod partition;
pub mod policy;
pub mod quorum;
pub mod record;
pub(crate) mod restore;
pub mod sampler;
pub mod snapshot_record;
pub mod snapshot_steps;
pub mod task;
pub mod task_progress;
