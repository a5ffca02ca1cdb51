//! The integration tests of this crate, in one binary (one link, one process): each module
//! is one area.

mod conditions_apiserver;
mod conditions_crd;
mod conditions_merge;
mod conditions_writer;
mod crds_up_to_date;
mod etcd_decide;
mod etcd_observe;
mod etcd_reconcile;
mod etcd_results;
mod examples;
mod install_kustomize;
mod jobs_api;
mod jobs_apiserver;
mod jobs_build;
mod jobs_observe;
mod layering;
mod mock_api;
mod monitoring_rules;
mod namespaced_rbac_up_to_date;
mod scylla_cleanup_apply;
mod scylla_cleanup_decide;
mod scylla_cleanup_ring_observer;
mod scylla_ownership;
mod scylla_ownership_trigger;
mod tasks_apiserver;
mod tasks_snapshot;
