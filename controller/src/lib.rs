//! groundskeeper's operator: observes Scylla and etcd clusters, decides what maintenance is due,
//! and runs it as Jobs of `groundskeeper-job`.
//!
//! Generic layers across, one folder per data store (see `docs/architecture.md`):
//!
//! * [`runtime`]: what every controller runs on (context, errors, leader election, metrics);
//! * [`jobs`]: a planned operation turned into a Job, and a finished Job read back;
//! * [`conditions`]: status conditions written beside other controllers';
//! * [`tasks`]: the MaintenanceTask queue, lifecycle and the one controller that creates Jobs;
//! * [`schedules`]: MaintenanceTasks made on a cron schedule, through the same queue;
//! * [`etcd`] and [`scylla`]: each data store's pipeline (observe → decide → apply), what a task
//!   means on its clusters (`task.rs`, `job.rs`) and what a finished Job records (`record.rs`).
//!
//! The direction is one way: a data store uses the generic layers, never the other way round, and
//! the two data stores never use each other. The one place that names both is this file, which
//! hands each data store's [`tasks::target::Target`] to the task controller.

pub mod conditions;
pub mod etcd;
pub mod jobs;
pub mod runtime;
pub mod schedules;
pub mod scylla;
pub mod tasks;

use std::sync::Arc;

use runtime::context::Context;

/// Checks the controller's flags, the generic ones and each data store's: a wrong value stops the
/// controller at start-up with the flag named.
pub fn check_config(config: &runtime::context::ControllerConfig) -> runtime::error::Result<()> {
    config.validate()?;
    etcd::discovery::check_config(config)?;
    etcd::operator_discovery::check_config(config)
}

/// Every kind of target the task controller runs tasks on.
pub fn task_targets() -> tasks::target::Targets {
    tasks::target::Targets::new([
        Arc::new(etcd::task::EtcdTarget) as Arc<dyn tasks::target::Target>,
        Arc::new(scylla::task::ScyllaTarget),
    ])
}

/// Runs the task controller for every kind of target until the process is told to stop.
pub async fn run_task_controller(ctx: Arc<Context>) {
    tasks::controller::run(ctx, task_targets()).await;
}
