//! MaintenanceSchedules: tasks made from a template on a cron schedule ([`decide`], pure) and the
//! controller around it ([`controller`]). A generic layer above [`crate::tasks`]: the tasks it
//! makes run through the same queue as every other task; it knows no data store.

pub mod controller;
pub mod decide;
pub(crate) mod metrics;
