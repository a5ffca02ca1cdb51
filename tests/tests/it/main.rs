//! The integration tests of this crate, in one binary (one link, one process): each module
//! is one area.

mod apiserver;
mod apiserver_schema;
mod common;
mod demo;
mod etcd_backups;
mod etcd_fleet;
mod etcd_maintenance;
mod etcd_operator_discovery;
mod etcd_restore;
mod etcd_snapshot;
mod harness;
mod kubectl;
mod leader_election;
mod monitoring;
mod real_cluster;
mod schedules;
mod scylla_bursts;
mod scylla_cleanup;
mod scylla_ownership;
mod statefulset_standin;
mod windows;
