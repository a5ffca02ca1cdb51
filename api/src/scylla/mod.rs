//! Resources groundskeeper reads but does not own (ScyllaCluster, ScyllaDBDatacenter).
//!
//! The types are partial views of scylla-operator's CRDs: only the fields groundskeeper reads,
//! every one optional or defaulted, unknown fields ignored, so that a newer scylla-operator does
//! not break reading. They are never written back as a whole (that would drop every field not
//! modelled here): writes go through JSON merge patches of single fields.

pub mod coexistence;
pub mod facts;
pub mod limits;
#[cfg(test)]
mod tests;
mod types;

pub use types::{
    Placement, ScyllaCluster, ScyllaClusterDatacenter, ScyllaClusterRack, ScyllaClusterSpec,
    ScyllaDBDatacenter, ScyllaDBDatacenterRack, ScyllaDBDatacenterRackTemplate, ScyllaDBDatacenterSpec,
    ScyllaStatus,
};

/// Implements [`kube::Resource`] for a namespaced partial view of a CRD.
macro_rules! namespaced_resource {
    ($type:ty, group = $group:literal, version = $version:literal, kind = $kind:literal, plural = $plural:literal) => {
        impl kube::Resource for $type {
            type DynamicType = ();
            type Scope = k8s_openapi::NamespaceResourceScope;

            fn kind(_: &()) -> std::borrow::Cow<'_, str> {
                $kind.into()
            }
            fn group(_: &()) -> std::borrow::Cow<'_, str> {
                $group.into()
            }
            fn version(_: &()) -> std::borrow::Cow<'_, str> {
                $version.into()
            }
            fn plural(_: &()) -> std::borrow::Cow<'_, str> {
                $plural.into()
            }
            fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }
        }
    };
}
use namespaced_resource;
