//! groundskeeper's operator: observes Scylla and etcd clusters, decides what maintenance is due,
//! and runs it as Jobs of `groundskeeper-job`.
//!
//! The folders follow the flow of work: `triggers` observe a data store, decide (pure) what is
//! due and submit it as a MaintenanceTask; `tasks` holds the queue and lifecycle of tasks (pure)
//! and the one controller that creates Jobs; `targets` says what a task's work means on each kind
//! of cluster; `execution` turns a planned operation into a Job and reads a finished Job back;
//! `results` writes what a finished Job did back to its task and target; `conditions` merges and
//! writes status conditions; `api` holds the resource types; `runtime` what every controller runs
//! on; `deploy` the manifests of the namespaced mode.

pub mod api;
pub mod conditions;
pub mod deploy;
pub mod execution;
pub mod results;
pub mod runtime;
pub mod targets;
pub mod tasks;
pub mod triggers;
