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

#[cfg(test)]
mod tests {
    use serde_json::Value;

    /// The description a field of type `Time` inherits from k8s-openapi when it has none of its
    /// own: it says how the type is marshalled, nothing of the field.
    const TIME_TYPE_DESCRIPTION: &str = "Time is a wrapper around time.Time";

    /// Every property below `schema` (object properties, array items, map values), by path, with
    /// what is wrong with its description: missing, or only its type's.
    fn undescribed(path: &str, schema: &Value, found: &mut Vec<String>) {
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            for (name, property) in properties {
                let at = format!("{path}.{name}");
                match property.get("description").and_then(Value::as_str).map(str::trim) {
                    None | Some("") => found.push(format!("{at}: no description")),
                    Some(text) if text.starts_with(TIME_TYPE_DESCRIPTION) => {
                        found.push(format!("{at}: only the Time type's description"))
                    }
                    Some(_) => {}
                }
                undescribed(&at, property, found);
            }
        }
        match schema.get("items") {
            Some(Value::Array(items)) => {
                items.iter().for_each(|item| undescribed(&format!("{path}[]"), item, found))
            }
            Some(item) => undescribed(&format!("{path}[]"), item, found),
            None => {}
        }
        if let Some(values) = schema.get("additionalProperties").filter(|v| v.is_object()) {
            undescribed(&format!("{path}{{}}"), values, found);
        }
        for key in ["allOf", "anyOf", "oneOf"] {
            for branch in schema.get(key).and_then(Value::as_array).into_iter().flatten() {
                undescribed(path, branch, found);
            }
        }
    }

    /// `kubectl explain` shows `<empty>` for a field without a description: every field of every
    /// CRD says what it holds.
    #[test]
    fn every_property_of_every_crd_has_a_description() {
        let mut found = Vec::new();
        for (file, crd) in super::all() {
            for version in &crd.spec.versions {
                let schema = serde_json::to_value(&version.schema).unwrap();
                let mut missing = Vec::new();
                undescribed("", &schema["openAPIV3Schema"], &mut missing);
                found.extend(missing.into_iter().map(|m| format!("{file} {}: {m}", version.name)));
            }
        }
        assert!(
            found.is_empty(),
            "{} properties without a description of their own (write a doc comment on the Rust field):\n{}",
            found.len(),
            found.join("\n")
        );
    }
}
