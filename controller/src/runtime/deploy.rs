//! The controller's namespaced mode as manifests: a Role and a RoleBinding in each namespace it
//! looks after, with exactly the rules of the cluster-wide ClusterRole (read from
//! `manifests/install/cluster-wide/cluster-role.yaml` when this is built, so the two modes cannot
//! drift apart), and the ConfigMap that tells the Deployment which namespaces those are.
//!
//! `cargo run -p groundskeeper-controller --bin namespaced-rbac -- NAMESPACE...` prints them;
//! `manifests/install/namespaced/rbac.yaml` holds them for the namespaces of the examples; that
//! overlay, or a kustomization of your own, installs them with `manifests/base/`.

use serde_json::{Value, json};

/// The cluster-wide rules, as checked in.
const CLUSTER_ROLE: &str = include_str!("../../../manifests/install/cluster-wide/cluster-role.yaml");
/// Name of the controller's ServiceAccount, Roles, bindings and ConfigMap.
pub const NAME: &str = "groundskeeper-controller";
/// Namespace the controller runs in.
pub const CONTROLLER_NAMESPACE: &str = "groundskeeper";
/// The ConfigMap key the Deployment reads into `GROUNDSKEEPER_NAMESPACES`.
pub const NAMESPACES_KEY: &str = "namespaces";

/// Why the manifests cannot be made.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ManifestError {
    #[error(
        "give at least one namespace: without any, use the cluster-wide manifests (manifests/install/cluster-wide/)"
    )]
    NoNamespace,
    #[error(
        "{0:?} is not a namespace name (lowercase letters, digits and '-', at most 63, starting and ending with a letter or digit)"
    )]
    InvalidNamespace(String),
    #[error("the ClusterRole cannot be read: {0}")]
    ClusterRole(String),
}

/// Whether `name` is a valid namespace name (an RFC 1123 label).
pub(crate) fn is_namespace_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    let edge = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    !name.is_empty()
        && name.len() <= 63
        && bytes.first().is_some_and(edge)
        && bytes.last().is_some_and(edge)
        && bytes.iter().all(|b| edge(b) || *b == b'-')
}

/// The namespaced-mode manifests for `namespaces` (sorted, duplicates dropped), as YAML.
pub fn namespaced_rbac(namespaces: &[String]) -> Result<String, ManifestError> {
    let mut namespaces: Vec<&str> = namespaces.iter().map(String::as_str).collect();
    namespaces.sort_unstable();
    namespaces.dedup();
    if namespaces.is_empty() {
        return Err(ManifestError::NoNamespace);
    }
    if let Some(bad) = namespaces.iter().find(|n| !is_namespace_name(n)) {
        return Err(ManifestError::InvalidNamespace((*bad).to_owned()));
    }
    let cluster_role: Value =
        serde_saphyr::from_str(CLUSTER_ROLE).map_err(|e| ManifestError::ClusterRole(e.to_string()))?;
    let rules = cluster_role
        .get("rules")
        .filter(|r| r.is_array())
        .ok_or_else(|| ManifestError::ClusterRole("no rules".into()))?;
    let mut documents = vec![config_map(&namespaces)];
    for namespace in &namespaces {
        documents.push(role(namespace, rules));
        documents.push(role_binding(namespace));
    }
    let mut text = String::from(
        "# Namespaced mode: the controller looks after these namespaces only, with a Role in each.\n\
         # Generated from manifests/install/cluster-wide/cluster-role.yaml by\n\
         #   cargo run -p groundskeeper-controller --bin namespaced-rbac -- NAMESPACE...\n\
         # Install it with manifests/base/ (a kustomization with both as resources, as\n\
         # manifests/install/namespaced/ does), instead of manifests/install/cluster-wide/.\n",
    );
    for (i, document) in documents.into_iter().enumerate() {
        if i > 0 {
            text.push_str("---\n");
        }
        let yaml =
            serde_saphyr::to_string(&document).map_err(|e| ManifestError::ClusterRole(e.to_string()))?;
        text.push_str(&yaml);
    }
    Ok(text)
}

fn labels() -> Value {
    json!({"app.kubernetes.io/name": "groundskeeper", "app.kubernetes.io/component": "controller"})
}

fn config_map(namespaces: &[&str]) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": NAME, "namespace": CONTROLLER_NAMESPACE, "labels": labels()},
        "data": {NAMESPACES_KEY: namespaces.join(",")},
    })
}

fn role(namespace: &str, rules: &Value) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": NAME, "namespace": namespace, "labels": labels()},
        "rules": rules,
    })
}

fn role_binding(namespace: &str) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": NAME, "namespace": namespace, "labels": labels()},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME},
        "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": CONTROLLER_NAMESPACE}],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_names() {
        for good in ["a", "scylla", "team-1", "0x"] {
            assert!(is_namespace_name(good), "{good}");
        }
        let long = "a".repeat(64);
        for bad in ["", "-a", "a-", "A", "a_b", "a.b", long.as_str()] {
            assert!(!is_namespace_name(bad), "{bad}");
        }
    }

    #[test]
    fn one_role_and_binding_per_namespace_with_the_cluster_roles_rules() {
        let text = namespaced_rbac(&["etcd".into(), "scylla".into(), "etcd".into()]).unwrap();
        let documents: Vec<Value> = serde_saphyr::from_str_multiple(&text).unwrap();
        let kinds: Vec<(&str, &str)> = documents
            .iter()
            .map(|d| (d["kind"].as_str().unwrap(), d["metadata"]["namespace"].as_str().unwrap()))
            .collect();
        assert_eq!(
            kinds,
            [
                ("ConfigMap", "groundskeeper"),
                ("Role", "etcd"),
                ("RoleBinding", "etcd"),
                ("Role", "scylla"),
                ("RoleBinding", "scylla"),
            ]
        );
        assert_eq!(documents[0]["data"]["namespaces"], "etcd,scylla");
        let cluster_role: Value = serde_saphyr::from_str(CLUSTER_ROLE).unwrap();
        assert_eq!(documents[1]["rules"], cluster_role["rules"]);
        assert_eq!(documents[2]["subjects"][0]["namespace"], "groundskeeper");
    }

    #[test]
    fn refusals_name_the_mistake() {
        assert_eq!(namespaced_rbac(&[]), Err(ManifestError::NoNamespace));
        assert_eq!(
            namespaced_rbac(&["ok".into(), "Not_OK".into()]),
            Err(ManifestError::InvalidNamespace("Not_OK".into()))
        );
    }
}
