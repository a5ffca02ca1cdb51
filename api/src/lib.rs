//! groundskeeper's API: the objects it reads and writes, and what can be said of them without a
//! Kubernetes API at hand. Shared by the controller and the kubectl plugin.
//!
//! * its own custom resources ([`etcd_cluster`], [`maintenance_task`], [`maintenance_schedule`], generated into
//!   `manifests/crds/` by [`crds`]) and the partial views of others' ([`scylla`],
//!   [`storage_cluster`], [`official_etcd_cluster`]);
//! * a task's plan before it runs ([`plan`]: the controller's and the plugin's dry run alike);
//! * their checks ([`validate`]: a MaintenanceTask's spec, with errors naming the field);
//! * condition lists merged the way every controller that shares them must ([`conditions`]);
//! * the pure facts of a ScyllaCluster ([`scylla::facts`]) and of scylla-operator's own cleanup
//!   beside it ([`scylla::coexistence`]).

pub mod conditions;
pub mod crds;
pub mod etcd_cluster;
pub mod maintenance_schedule;
pub mod maintenance_suspension;
pub mod maintenance_task;
pub mod maintenance_window;
pub mod official_etcd_cluster;
pub mod plan;
pub mod restore;
pub mod scylla;
pub mod snapshot_catalog;
pub mod snapshot_store;
pub mod storage_cluster;
pub mod validate;

pub use etcd_cluster::{EtcdCluster, EtcdClusterSpec, EtcdClusterStatus};
pub use maintenance_schedule::{MaintenanceSchedule, MaintenanceScheduleSpec, MaintenanceScheduleStatus};
pub use maintenance_task::{MaintenanceTask, MaintenanceTaskSpec, MaintenanceTaskStatus};
