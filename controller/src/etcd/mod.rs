//! etcd compaction, defragmentation and snapshots on `EtcdCluster`s: the whole vertical, from
//! what is observed to what a finished Job records. The files are stages in one order, each using
//! only its own stage and the ones before it (checked by `controller/tests/it/layering.rs`, see
//! `docs/architecture.md`):
//!
//! * [`model`]: what every stage shares (what was observed, the conditions, the outcomes); and
//!   [`config`]: etcd's flags (the fleet bound, the two discoveries), with their checks;
//! * the rules of this store, pure: [`policy`] (the spec, checked), [`sampler`] (compaction by
//!   revision samples), [`backups`] (the backup policy: recovery point, what is due, the
//!   compaction guard), [`partition`] (revisions that carry a cluster id and a time), [`fleet`]
//!   and [`fleet_slot`] (fleets of partitioned clusters), [`quorum`] (what the status keeps for a
//!   restore); and [`metrics`];
//! * the EtcdCluster controller's pass: [`observe`] (cheap `Status` calls on every member) →
//!   [`decide`] (pure: the spec, the members, the cluster's MaintenanceTasks and the last status)
//!   → [`apply`] (a status write, at most one automatic MaintenanceTask submitted, Events,
//!   metrics);
//! * [`record`]: what a finished task's Jobs did, written back into the EtcdCluster's status
//!   ([`snapshot_record`]: its snapshot catalog), and [`task_progress`]: into the task's own (per
//!   member, per snapshot);
//! * [`job`]: the Job of one step of a task ([`snapshot_steps`]: the steps that write, copy and
//!   prove snapshots);
//! * [`task`]: what a MaintenanceTask means on an EtcdCluster: its steps, carried forward by the
//!   task controller; a Restore's in [`restore`], a folder in the same order;
//! * [`discovery`] (EtcdClusters made for Arktos StorageClusters) and [`operator_discovery`]
//!   (EtcdClusters made for etcd-operator's clusters);
//! * [`controller`]: the EtcdCluster controller, one pass per cluster, and the discoveries beside
//!   it.

pub mod apply;
pub mod backups;
pub mod config;
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
