//! The objects groundskeeper reads and writes: its own custom resources (generated into
//! `manifests/crds/`) and partial views of scylla-operator's.

pub mod crds;
pub mod etcd_cluster;
pub mod maintenance_task;
pub mod scylla;
pub mod storage_cluster;

pub use etcd_cluster::{EtcdCluster, EtcdClusterSpec, EtcdClusterStatus};
pub use maintenance_task::{MaintenanceTask, MaintenanceTaskSpec, MaintenanceTaskStatus};
