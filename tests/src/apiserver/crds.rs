//! The CustomResourceDefinitions the server serves custom resources by: groundskeeper's own from
//! `manifests/crds/`, and scylla-operator's (ScyllaCluster, ScyllaDBDatacenter) from the
//! reference folder beside the repository (see [`crate::reference`]) when it is there; without
//! it those two types have no CRD here (no schema, no printer columns). SIG etcd-operator's
//! `EtcdCluster` (operator.etcd.io) has none either.
//!
//! Each file is read and parsed once per process, and scylla-operator's (1 MB of YAML) only when
//! one of its types is first asked for.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::Value;

use super::resources::ResourceId;

/// One served version of a CRD: its `spec.versions[i]` entry, with the CRD's names and scope.
#[derive(Debug)]
pub struct CrdVersion {
    /// `spec.versions[i]`: `schema.openAPIV3Schema`, `subresources`, `additionalPrinterColumns`…
    pub version: Value,
    /// `spec.names` (kind, plural, singular, shortNames, categories).
    pub names: Value,
    pub namespaced: bool,
}

impl CrdVersion {
    /// `schema.openAPIV3Schema`, if the version has one.
    pub fn schema(&self) -> Option<&Value> {
        self.version.pointer("/schema/openAPIV3Schema")
    }
}

type Versions = BTreeMap<ResourceId, CrdVersion>;

/// The CRD version serving `id`, if one of the known CRDs does.
pub fn crd_version(id: &ResourceId) -> Option<&'static CrdVersion> {
    static OWN: OnceLock<Versions> = OnceLock::new();
    static SCYLLA: OnceLock<Versions> = OnceLock::new();
    if id.group == "scylla.scylladb.com" {
        return SCYLLA.get_or_init(scylla_operator_crds).get(id);
    }
    OWN.get_or_init(own_crds).get(id)
}

fn own_crds() -> Versions {
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests/crds"));
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            path.file_name().is_some_and(|n| n.to_string_lossy().ends_with(".groundskeeper.dev.yaml"))
        })
        .collect();
    files.sort();
    versions_of(&files)
}

fn scylla_operator_crds() -> Versions {
    let dir = match std::env::var_os("GROUNDSKEEPER_REFERENCE_DIR") {
        Some(dir) => PathBuf::from(dir).join("scylla"),
        None => PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/reference/scylla")),
    };
    let files: Vec<PathBuf> = ["scyllaclusters.crd.yaml", "scylladbdatacenters.crd.yaml"]
        .iter()
        .map(|file| dir.join(file))
        .filter(|path| path.is_file())
        .collect();
    versions_of(&files)
}

fn versions_of(files: &[PathBuf]) -> Versions {
    let mut versions = Versions::new();
    for path in files {
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        let docs: Vec<Value> = serde_saphyr::from_str_multiple(&text)
            .unwrap_or_else(|e| panic!("{} is not YAML: {e}", path.display()));
        for crd in docs.into_iter().filter(|d| d["kind"] == "CustomResourceDefinition") {
            add_crd(&mut versions, crd);
        }
    }
    versions
}

fn add_crd(versions: &mut Versions, crd: Value) {
    let group = crd["spec"]["group"].as_str().unwrap_or_default().to_string();
    let plural = crd["spec"]["names"]["plural"].as_str().unwrap_or_default().to_string();
    let namespaced = crd["spec"]["scope"] == "Namespaced";
    for version in crd["spec"]["versions"].as_array().cloned().unwrap_or_default() {
        let name = version["name"].as_str().unwrap_or_default();
        let id = ResourceId::new(&group, name, &plural);
        versions.insert(id, CrdVersion { version, names: crd["spec"]["names"].clone(), namespaced });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_own_crd_version_is_found_with_its_schema() {
        for plural in ["etcdclusters", "maintenancetasks", "maintenanceschedules", "maintenancesuspensions"] {
            let found = crd_version(&ResourceId::new("groundskeeper.dev", "v1alpha1", plural))
                .unwrap_or_else(|| panic!("{plural}: no CRD"));
            assert!(found.schema().is_some(), "{plural}: no schema");
            assert!(found.namespaced, "{plural}");
        }
        assert!(crd_version(&ResourceId::new("operator.etcd.io", "v1alpha1", "etcdclusters")).is_none());
    }
}
