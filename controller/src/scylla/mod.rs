//! Scylla node cleanup after scaling, on ScyllaClusters managed by scylla-operator: the whole
//! vertical, from what is observed to what a finished Job records. The same file names as
//! [`crate::etcd`] for the same stages, in the same order, so knowing one means knowing the other
//! (checked by `controller/tests/it/layering.rs`, see `docs/architecture.md`):
//!
//! * [`model`]: what every stage shares (tasks' and the agent token Secret's facts, the plan's
//!   actions and conditions, the state of one pass, the members record, the task error codes);
//!   and [`config`]: Scylla's flags (the ring observer's interval, the quiet period, the schema
//!   checks, where agents are reached);
//! * the rules of this store, pure: [`settings`] (the cluster's annotations), [`members_record`]
//!   (who the members were at the last cleanup), [`ownership`] (which ranges each node
//!   replicates), [`ring_quiet`] (one round of cleanups per burst of ring changes); and
//!   [`metrics`] (whether the trigger is Degraded, and since when each node needs a cleanup);
//! * [`agent`] (how a node's agent is reached) and [`ownership_reader`] (the ring views read
//!   through it);
//! * the cleanup trigger's pass: [`observe`] (the cluster, its member Services, its tasks, the
//!   ring views) → [`decide`] (pure; [`condition_texts`]: the words of its conditions) →
//!   [`apply`] (annotation patches, at most one automatic Cleanup task submitted, Events,
//!   conditions);
//! * [`record`]: what a node's finished cleanup records on its member Service;
//! * [`job`]: the Job of one node;
//! * [`task`]: what a Cleanup MaintenanceTask means on a ScyllaCluster: its nodes, stepped node
//!   by node within the bounds ([`node_steps`], pure);
//! * [`controller`]: the cleanup trigger, one pass per ScyllaCluster, and [`ring_observer`]
//!   (writes `current-token-ring-hash` where no scylla-operator sidecar does).

pub(crate) mod agent;
pub mod apply;
pub mod condition_texts;
pub mod config;
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
