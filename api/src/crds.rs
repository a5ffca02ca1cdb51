//! The CustomResourceDefinitions groundskeeper owns, as checked in under `manifests/crds/`.
//!
//! They are generated from the Rust types (`cargo run -p groundskeeper-controller --bin crdgen`)
//! and a test fails when the checked-in files drift from the types.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use crate::etcd_cluster::EtcdCluster;
use crate::maintenance_schedule::MaintenanceSchedule;
use crate::maintenance_suspension::MaintenanceSuspension;
use crate::maintenance_task::MaintenanceTask;

/// Every CRD groundskeeper owns, with the file name it is checked in under.
pub fn all() -> Vec<(&'static str, CustomResourceDefinition)> {
    vec![
        ("etcdclusters.groundskeeper.dev.yaml", EtcdCluster::crd()),
        ("maintenancetasks.groundskeeper.dev.yaml", MaintenanceTask::crd()),
        ("maintenanceschedules.groundskeeper.dev.yaml", MaintenanceSchedule::crd()),
        ("maintenancesuspensions.groundskeeper.dev.yaml", MaintenanceSuspension::crd()),
    ]
}

/// The YAML of a CRD as checked in.
pub fn to_yaml(crd: &CustomResourceDefinition) -> String {
    let yaml = serde_saphyr::to_string(crd).expect("CRDs always serialise");
    format!(
        "# Generated from the Rust types by `cargo run -p groundskeeper-controller --bin crdgen`: do not edit.\n{yaml}"
    )
}
