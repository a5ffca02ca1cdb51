//! groundskeeper's operator: observes Scylla and etcd clusters, decides what maintenance is due,
//! and runs it as Jobs of `groundskeeper-job`.
//!
//! The folders follow the flow of work: `triggers` observe a data store and decide (pure) what is
//! due; `execution` turns a planned operation into a Job and reads a finished Job back;
//! `conditions` merges and writes status conditions; `api` holds the resource types; `tasks` the
//! queue and lifecycle of MaintenanceTasks (pure); `runtime` what every controller runs on.

pub mod api;
pub mod conditions;
pub mod execution;
pub mod results;
pub mod runtime;
pub mod targets;
pub mod tasks;
pub mod triggers;
