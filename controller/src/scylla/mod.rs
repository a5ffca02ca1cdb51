//! Scylla node cleanup after scaling, on ScyllaClusters managed by scylla-operator: the whole
//! vertical, from what is observed to what a finished Job records. The same file names as
//! [`crate::etcd`], so knowing one means knowing the other.
//!
//! * [`controller`]: the cleanup trigger, one pass per ScyllaCluster: [`observe`] (the cluster,
//!   its member Services, its tasks, the ring views) → [`decide`] (pure) → [`apply`] (annotation
//!   patches, at most one automatic Cleanup task submitted, Events, conditions);
//! * [`task`]: what a Cleanup MaintenanceTask means on a ScyllaCluster: its nodes, stepped node
//!   by node within the bounds ([`node_steps`], pure), each node one Job built by [`job`];
//! * [`record`]: what a node's finished cleanup records on its member Service;
//! * the rules of this store: [`ownership`] (which ranges each node replicates, read by
//!   [`ownership_reader`]), [`members_record`] (who the members were at the last cleanup),
//!   [`settings`] (the cluster's annotations), [`ring_observer`] (writes
//!   `current-token-ring-hash` where no scylla-operator sidecar does), [`ring_quiet`] (one round
//!   of cleanups per burst of ring changes);
//! * [`metrics`]: whether the trigger is Degraded, and since when each node needs a cleanup.

pub(crate) mod agent;
pub mod apply;
pub mod condition_texts;
pub mod controller;
pub mod decide;
pub mod job;
pub mod members_record;
pub(crate) mod metrics;
pub(crate) mod model;
pub mod node_steps;
pub mod observe;
pub mod ownership;
pub mod ownership_reader;
pub mod record;
pub mod ring_observer;
pub mod ring_quiet;
pub mod settings;
pub mod task;
