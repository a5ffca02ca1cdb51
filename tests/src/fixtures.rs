//! The objects tests build again and again, built one way: groundskeeper's resources as the JSON
//! a user or a controller would send.
//!
//! `task("etcd", "compact-now", "Compact").config(json!({"retainRevisions": 10})).json()` is a
//! MaintenanceTask of type Compact on the EtcdCluster `main` (a Cleanup's target is the
//! ScyllaCluster `basic`), its config under the type's own member (`config.compact`).

use serde_json::{Value, json};

/// `groundskeeper.dev/v1alpha1`.
pub const API_VERSION: &str = "groundskeeper.dev/v1alpha1";

/// A MaintenanceTask being built.
#[derive(Clone, Debug)]
pub struct Task(Value);

/// A MaintenanceTask named `name` in `namespace`, of type `task_type`, on the default target of
/// its kind (EtcdCluster `main`; ScyllaCluster `basic` for a Cleanup).
pub fn task(namespace: &str, name: &str, task_type: &str) -> Task {
    let target = match task_type {
        "Cleanup" => json!({"kind": "ScyllaCluster", "name": "basic"}),
        _ => json!({"kind": "EtcdCluster", "name": "main"}),
    };
    Task(json!({
        "apiVersion": API_VERSION,
        "kind": "MaintenanceTask",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"target": target, "type": task_type},
    }))
}

impl Task {
    /// On the cluster `name` (of the kind the type works on).
    pub fn target(mut self, name: &str) -> Self {
        self.0["spec"]["target"]["name"] = name.into();
        self
    }

    /// The settings of its type, under `spec.config.<type in lower case>`; `null` sets none.
    pub fn config(mut self, config: Value) -> Self {
        if !config.is_null() {
            let member = self.0["spec"]["type"].as_str().unwrap_or_default().to_lowercase();
            self.0["spec"]["config"] = json!({ member: config });
        }
        self
    }

    /// `spec.<field>` set to `value`.
    pub fn spec(mut self, field: &str, value: impl Into<Value>) -> Self {
        self.0["spec"][field] = value.into();
        self
    }

    /// The label `groundskeeper.dev/origin` (`manual`, `automatic`…).
    pub fn origin(self, origin: &str) -> Self {
        self.label("groundskeeper.dev/origin", origin)
    }

    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.0["metadata"]["labels"][key] = value.into();
        self
    }

    /// `metadata.<field>` set to `value` (a uid, a creationTimestamp… as the API would have).
    pub fn metadata(mut self, field: &str, value: impl Into<Value>) -> Self {
        self.0["metadata"][field] = value.into();
        self
    }

    pub fn json(self) -> Value {
        self.0
    }
}

/// An EtcdCluster named `name` in `namespace` with `spec`.
pub fn etcd_cluster(namespace: &str, name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": API_VERSION,
        "kind": "EtcdCluster",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_has_its_config_under_its_types_member_and_the_target_of_its_kind() {
        let compact =
            task("etcd", "c", "Compact").config(json!({"retainRevisions": 10})).origin("manual").json();
        assert_eq!(compact["spec"]["config"], json!({"compact": {"retainRevisions": 10}}));
        assert_eq!(compact["spec"]["target"], json!({"kind": "EtcdCluster", "name": "main"}));
        assert_eq!(compact["metadata"]["labels"]["groundskeeper.dev/origin"], "manual");
        let cleanup = task("scylla", "x", "Cleanup").target("other").config(Value::Null).json();
        assert_eq!(cleanup["spec"]["target"], json!({"kind": "ScyllaCluster", "name": "other"}));
        assert!(cleanup["spec"].get("config").is_none());
    }
}
