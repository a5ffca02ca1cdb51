//! RBAC for requests that carry a ServiceAccount's bearer token, from the checked-in manifests.
//!
//! The real API server authorizes a request by its attributes (verb, API group, resource and
//! subresource, namespace, name) against the rules of the Roles and ClusterRoles bound to the
//! caller. This does the same for the bindings found in a set of manifests, so that a scenario
//! run with the controller's token proves `manifests/` grants everything the controller
//! does, and a request it does not grant fails with the real 403. Requests without a token are
//! not checked: they are the test harness acting as cluster admin.

use serde_json::Value;

use super::error::ApiError;

/// One `rules[]` entry of a Role or ClusterRole.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rule {
    api_groups: Vec<String>,
    resources: Vec<String>,
    verbs: Vec<String>,
    resource_names: Vec<String>,
}

impl Rule {
    fn parse(rule: &Value) -> Rule {
        let strings = |key: &str| -> Vec<String> {
            rule.get(key)
                .and_then(Value::as_array)
                .map(|items| items.iter().filter_map(|i| i.as_str().map(str::to_owned)).collect())
                .unwrap_or_default()
        };
        Rule {
            api_groups: strings("apiGroups"),
            resources: strings("resources"),
            verbs: strings("verbs"),
            resource_names: strings("resourceNames"),
        }
    }

    fn allows(&self, request: &Attributes) -> bool {
        let any = |list: &[String], value: &str| list.iter().any(|item| item == "*" || item == value);
        any(&self.verbs, &request.verb)
            && any(&self.api_groups, &request.api_group)
            && any(&self.resources, &request.resource)
            && (self.resource_names.is_empty()
                || request.name.as_deref().is_some_and(|name| self.resource_names.iter().any(|n| n == name)))
    }
}

/// What a request asks to do, in RBAC's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes {
    /// get, list, watch, create, update, patch, delete, deletecollection.
    pub verb: String,
    /// "" for the core group.
    pub api_group: String,
    /// The plural, with `/status` for the status subresource.
    pub resource: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

/// What one ServiceAccount may do: rules cluster-wide, and rules within one namespace.
#[derive(Debug, Clone, Default)]
pub struct Grants {
    user: String,
    cluster: Vec<Rule>,
    namespaced: Vec<(String, Rule)>,
}

impl Grants {
    /// The grants of ServiceAccount `namespace/name` in `manifests` (any objects; the RBAC ones
    /// are used). A binding that names a role the manifests do not hold grants nothing, as on a
    /// real cluster.
    pub fn for_service_account(manifests: &[Value], namespace: &str, name: &str) -> Grants {
        let kind_of = |o: &Value| o.get("kind").and_then(Value::as_str).unwrap_or_default().to_owned();
        let meta = |o: &Value, key: &str| {
            o.pointer(&format!("/metadata/{key}")).and_then(Value::as_str).unwrap_or_default().to_owned()
        };
        let rules_of = |kind: &str, role: &str, role_namespace: Option<&str>| -> Vec<Rule> {
            manifests
                .iter()
                .filter(|o| kind_of(o) == kind && meta(o, "name") == role)
                .filter(|o| role_namespace.is_none_or(|ns| meta(o, "namespace") == ns))
                .flat_map(|o| o.get("rules").and_then(Value::as_array).cloned().unwrap_or_default())
                .map(|r| Rule::parse(&r))
                .collect()
        };
        let binds_us = |binding: &Value| {
            binding.get("subjects").and_then(Value::as_array).is_some_and(|subjects| {
                subjects.iter().any(|s| {
                    s.get("kind").and_then(Value::as_str) == Some("ServiceAccount")
                        && s.get("name").and_then(Value::as_str) == Some(name)
                        && s.get("namespace").and_then(Value::as_str) == Some(namespace)
                })
            })
        };
        let mut grants =
            Grants { user: format!("system:serviceaccount:{namespace}:{name}"), ..Grants::default() };
        for binding in manifests.iter().filter(|o| binds_us(o)) {
            let role_kind = binding.pointer("/roleRef/kind").and_then(Value::as_str).unwrap_or_default();
            let role = binding.pointer("/roleRef/name").and_then(Value::as_str).unwrap_or_default();
            match kind_of(binding).as_str() {
                "ClusterRoleBinding" => grants.cluster.extend(rules_of("ClusterRole", role, None)),
                "RoleBinding" => {
                    let binding_namespace = meta(binding, "namespace");
                    let rules = match role_kind {
                        "ClusterRole" => rules_of("ClusterRole", role, None),
                        _ => rules_of("Role", role, Some(&binding_namespace)),
                    };
                    grants.namespaced.extend(rules.into_iter().map(|r| (binding_namespace.clone(), r)));
                }
                _ => {}
            }
        }
        grants
    }

    pub fn allows(&self, request: &Attributes) -> bool {
        self.cluster.iter().any(|rule| rule.allows(request))
            || self.namespaced.iter().any(|(namespace, rule)| {
                request.namespace.as_deref() == Some(namespace.as_str()) && rule.allows(request)
            })
    }

    /// Whether `self` and `other` hold the same rules for the same ServiceAccount, whatever
    /// their order or repetition: two sets of manifests that grant alike.
    pub fn same_as(&self, other: &Grants) -> bool {
        let within = |a: &Grants, b: &Grants| {
            a.cluster.iter().all(|rule| b.cluster.contains(rule))
                && a.namespaced.iter().all(|rule| b.namespaced.contains(rule))
        };
        self.user == other.user && within(self, other) && within(other, self)
    }

    /// Ok, or the 403 the real API answers, worded as it words it.
    pub fn authorize(&self, request: &Attributes) -> Result<(), ApiError> {
        if self.allows(request) {
            return Ok(());
        }
        let (plural, subresource) = match request.resource.split_once('/') {
            Some((plural, sub)) => (plural, Some(sub)),
            None => (request.resource.as_str(), None),
        };
        let qualified = if request.api_group.is_empty() {
            plural.to_owned()
        } else {
            format!("{plural}.{}", request.api_group)
        };
        let object = match &request.name {
            Some(name) => format!("{qualified} {name:?}"),
            None => qualified,
        };
        let resource = match subresource {
            Some(sub) => format!("resource \"{plural}/{sub}\""),
            None => format!("resource \"{plural}\""),
        };
        let scope = match &request.namespace {
            Some(ns) => format!("in the namespace \"{ns}\""),
            None => "at the cluster scope".to_owned(),
        };
        Err(ApiError::forbidden(format!(
            "{object} is forbidden: User \"{}\" cannot {} {resource} in API group \"{}\" {scope}",
            self.user, request.verb, request.api_group
        )))
    }
}

/// Bearer token the scenarios give the controller; see [`controller_grants`].
pub const CONTROLLER_TOKEN: &str = "groundskeeper-controller-token";
/// Namespace and name of the controller's ServiceAccount in `manifests/`.
pub const CONTROLLER_SERVICE_ACCOUNT: (&str, &str) = ("groundskeeper", "groundskeeper-controller");

/// What the cluster-wide mode's manifests (`manifests/base/` and `manifests/install/cluster-wide/`)
/// grant the controller's ServiceAccount.
pub fn controller_grants() -> Grants {
    grants_of(&["base", "install/cluster-wide"])
}

/// [`controller_grants`] plus what `manifests/addons/storage-cluster-discovery/` adds for
/// `--discover-storage-clusters`.
pub fn controller_grants_with_storage_cluster_discovery() -> Grants {
    grants_of(&["base", "install/cluster-wide", "addons/storage-cluster-discovery"])
}

/// [`controller_grants`] plus what `manifests/addons/etcd-operator-discovery/` adds for
/// `--discover-etcd-operator-clusters`.
pub fn controller_grants_with_etcd_operator_discovery() -> Grants {
    grants_of(&["base", "install/cluster-wide", "addons/etcd-operator-discovery"])
}

/// What the namespaced mode's manifests (`manifests/base/` and `manifests/install/namespaced/`, the
/// examples' namespaces `scylla` and `etcd`) grant the controller's ServiceAccount.
pub fn controller_grants_namespaced() -> Grants {
    grants_of(&["base", "install/namespaced"])
}

fn grants_of(dirs: &[&str]) -> Grants {
    let mut manifests = Vec::new();
    for dir in dirs {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests").join(dir);
        manifests.extend(load_manifests(&dir).unwrap_or_else(|err| panic!("{}: {err}", dir.display())));
    }
    let (namespace, name) = CONTROLLER_SERVICE_ACCOUNT;
    Grants::for_service_account(&manifests, namespace, name)
}

/// Every object of every YAML file in `dir` (multi-document files included), as JSON; the
/// `kustomization.yaml` that says how kustomize puts them together is not one of them.
pub fn load_manifests(dir: &std::path::Path) -> std::io::Result<Vec<Value>> {
    let mut objects = Vec::new();
    let mut paths: Vec<_> = std::fs::read_dir(dir)?.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>()?;
    paths.sort();
    let is_object_file = |p: &std::path::Path| {
        p.extension().is_some_and(|e| e == "yaml") && !p.ends_with("kustomization.yaml")
    };
    for path in paths.into_iter().filter(|p| is_object_file(p)) {
        let text = std::fs::read_to_string(&path)?;
        let docs: Vec<Value> = serde_saphyr::from_str_multiple(&text).map_err(|e| {
            std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{}: {e}", path.display()))
        })?;
        objects.extend(docs.into_iter().filter(|d| !d.is_null()));
    }
    Ok(objects)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn manifests() -> Vec<Value> {
        vec![
            json!({"kind": "ClusterRole", "metadata": {"name": "reader"}, "rules": [
                {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list"]},
                {"apiGroups": [""], "resources": ["services/status"], "verbs": ["patch"]},
            ]}),
            json!({"kind": "ClusterRoleBinding", "metadata": {"name": "b"},
                   "roleRef": {"kind": "ClusterRole", "name": "reader"},
                   "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "gk"}]}),
            json!({"kind": "Role", "metadata": {"name": "lease", "namespace": "gk"}, "rules": [
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["only"], "verbs": ["get"]},
            ]}),
            json!({"kind": "RoleBinding", "metadata": {"name": "rb", "namespace": "gk"},
                   "roleRef": {"kind": "Role", "name": "lease"},
                   "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "gk"}]}),
            // Bound to someone else: grants "sa" nothing.
            json!({"kind": "ClusterRoleBinding", "metadata": {"name": "other"},
                   "roleRef": {"kind": "ClusterRole", "name": "reader"},
                   "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "elsewhere"}]}),
        ]
    }

    fn request(
        verb: &str,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
        name: Option<&str>,
    ) -> Attributes {
        Attributes {
            verb: verb.into(),
            api_group: group.into(),
            resource: resource.into(),
            namespace: namespace.map(Into::into),
            name: name.map(Into::into),
        }
    }

    #[test]
    fn rules_match_verb_group_resource_namespace_and_name() {
        let grants = Grants::for_service_account(&manifests(), "gk", "sa");
        let cases = [
            (request("list", "batch", "jobs", Some("x"), None), true),
            (request("get", "batch", "jobs", None, Some("j")), true),
            (request("delete", "batch", "jobs", Some("x"), Some("j")), false),
            (request("get", "", "jobs", Some("x"), Some("j")), false),
            (request("patch", "", "services/status", Some("x"), Some("s")), true),
            (request("patch", "", "services", Some("x"), Some("s")), false),
            (request("get", "coordination.k8s.io", "leases", Some("gk"), Some("only")), true),
            (request("get", "coordination.k8s.io", "leases", Some("gk"), Some("other")), false),
            (request("get", "coordination.k8s.io", "leases", Some("x"), Some("only")), false),
            (request("list", "coordination.k8s.io", "leases", Some("gk"), None), false),
        ];
        for (attributes, allowed) in cases {
            assert_eq!(grants.allows(&attributes), allowed, "{attributes:?}");
        }
        assert!(
            !Grants::for_service_account(&manifests(), "gk", "nobody")
                .allows(&request("list", "batch", "jobs", None, None))
        );
    }

    #[test]
    fn the_checked_in_manifests_grant_the_controller_something() {
        let grants = controller_grants();
        let watch_clusters = request("watch", "scylla.scylladb.com", "scyllaclusters", None, None);
        assert!(grants.allows(&watch_clusters));
        let list_secrets = request("list", "", "secrets", None, None);
        assert!(!grants.allows(&list_secrets), "the controller never lists Secrets");
    }

    #[test]
    fn etcd_operator_discovery_reads_the_operators_clusters_and_writes_only_ours() {
        let with = controller_grants_with_etcd_operator_discovery();
        let without = controller_grants();
        for verb in ["get", "list", "watch"] {
            let read = request(verb, "operator.etcd.io", "etcdclusters", Some("etcd"), None);
            assert!(with.allows(&read) && !without.allows(&read), "{verb}");
        }
        for verb in ["create", "update", "patch", "delete"] {
            let write = request(verb, "operator.etcd.io", "etcdclusters", Some("etcd"), Some("main"));
            assert!(!with.allows(&write), "the operator's clusters are never written: {verb}");
            let status = request(verb, "operator.etcd.io", "etcdclusters/status", Some("etcd"), Some("main"));
            assert!(!with.allows(&status), "nor their status: {verb}");
        }
        for verb in ["create", "patch"] {
            let ours =
                request(verb, "groundskeeper.dev", "etcdclusters", Some("etcd"), Some("etcd-operator-main"));
            assert!(with.allows(&ours) && !without.allows(&ours), "{verb}");
        }
        let delete =
            request("delete", "groundskeeper.dev", "etcdclusters", Some("etcd"), Some("etcd-operator-main"));
        assert!(
            !with.allows(&delete),
            "ours go with their source (garbage collection), never deleted by hand"
        );
    }

    #[test]
    fn refusals_read_like_the_real_api() {
        let grants = Grants::for_service_account(&manifests(), "gk", "sa");
        let err = grants.authorize(&request("delete", "batch", "jobs", Some("ns"), Some("j"))).unwrap_err();
        assert_eq!(err.code, 403);
        assert_eq!(
            err.message,
            "jobs.batch \"j\" is forbidden: User \"system:serviceaccount:gk:sa\" cannot delete resource \"jobs\" in API group \"batch\" in the namespace \"ns\""
        );
    }

    #[test]
    fn the_same_rules_in_another_order_grant_the_same_and_one_more_does_not() {
        let grants = Grants::for_service_account(&manifests(), "gk", "sa");
        let mut reordered = manifests();
        reordered.reverse();
        assert!(Grants::for_service_account(&reordered, "gk", "sa").same_as(&grants));
        let mut more = manifests();
        more[0]["rules"][0]["verbs"] = json!(["get", "list", "watch"]);
        assert!(!Grants::for_service_account(&more, "gk", "sa").same_as(&grants));
        assert!(!Grants::for_service_account(&manifests(), "elsewhere", "sa").same_as(&grants));
    }
}
