//! What can go wrong, said so that the reader knows what to do next.

use kube::core::Status;

/// One failed command.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Kubeconfig(String),
    #[error("{kind} {name:?} not found in namespace {namespace:?}{hint}")]
    NotFound {
        kind: String,
        namespace: String,
        name: String,
        /// Starts with `: ` when there is one.
        hint: String,
    },
    #[error(
        "the {kind} resource type is not served by this cluster: the CRD {crd} is not installed. {install}"
    )]
    CrdMissing { kind: String, crd: String, install: String },
    #[error(
        "not allowed to {verb} {resource} {scope}: {message}. Ask your cluster admin for a Role that grants `{verb}` on `{resource}` (for the plugin's commands: bind the ClusterRole groundskeeper-plugin-user, manifests/addons/kubectl-plugin-user/cluster-role.yaml)"
    )]
    Forbidden { verb: String, resource: String, scope: String, message: String },
    #[error(
        "the API server did not accept the credentials of the kubeconfig context ({0}): log in again or pick another --context"
    )]
    Unauthorized(String),
    #[error("{action}: {message}")]
    Api { action: String, message: String },
    #[error("{0}")]
    Invalid(String),
}

/// A request, described for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// get, list, watch, create, delete.
    pub verb: &'static str,
    pub kind: String,
    pub group: String,
    pub version: String,
    pub plural: String,
    /// `None`: all namespaces.
    pub namespace: Option<String>,
    pub name: Option<String>,
}

impl Request {
    pub fn of<K: kube::Resource<DynamicType = ()>>(
        verb: &'static str,
        namespace: Option<&str>,
        name: Option<&str>,
    ) -> Self {
        Request {
            verb,
            kind: K::kind(&()).into_owned(),
            group: K::group(&()).into_owned(),
            version: K::version(&()).into_owned(),
            plural: K::plural(&()).into_owned(),
            namespace: namespace.map(str::to_owned),
            name: name.map(str::to_owned),
        }
    }

    fn qualified_plural(&self) -> String {
        if self.group.is_empty() { self.plural.clone() } else { format!("{}.{}", self.plural, self.group) }
    }

    fn action(&self) -> String {
        let mut action = format!("{} {}", self.verb, self.kind);
        if let Some(name) = &self.name {
            action.push_str(&format!(" {name}"));
        }
        match &self.namespace {
            Some(ns) => action.push_str(&format!(" in namespace {ns}")),
            None => action.push_str(" in all namespaces"),
        }
        action
    }
}

/// How to install the CRD of a group.
fn install_hint(group: &str) -> String {
    match group {
        "groundskeeper.dev" => "Install groundskeeper's CRDs: `kubectl apply -f manifests/crds/` from \
                                groundskeeper's repository (or them and the controller: \
                                `kubectl apply -k manifests/install/cluster-wide`)."
            .to_owned(),
        "scylla.scylladb.com" => "ScyllaClusters come with scylla-operator: install scylla-operator \
                                  (its CRDs) first."
            .to_owned(),
        other => format!("Install the CRDs of the API group {other}."),
    }
}

/// The error for a failed request. `served`: whether discovery lists the request's resource
/// type (asked only after a 404; `None` when not asked or discovery failed).
pub fn explain(request: &Request, status: &Status, served: Option<bool>) -> Error {
    match status.code {
        404 if served == Some(false) || request.name.is_none() => Error::CrdMissing {
            kind: request.kind.clone(),
            crd: request.qualified_plural(),
            install: install_hint(&request.group),
        },
        404 => Error::NotFound {
            kind: request.kind.clone(),
            namespace: request.namespace.clone().unwrap_or_default(),
            name: request.name.clone().unwrap_or_default(),
            hint: String::new(),
        },
        403 => Error::Forbidden {
            verb: request.verb.to_owned(),
            resource: request.qualified_plural(),
            scope: match &request.namespace {
                Some(ns) => format!("in namespace {ns}"),
                None => "in all namespaces".to_owned(),
            },
            message: status.message.clone(),
        },
        401 => Error::Unauthorized(status.message.clone()),
        _ => Error::Api {
            action: request.action(),
            message: format!("{} ({} {})", status.message, status.code, status.reason),
        },
    }
}

impl Error {
    /// A transport error (no answer from the API server at all).
    pub fn transport(request: &Request, err: &kube::Error) -> Error {
        Error::Api {
            action: request.action(),
            message: format!("{err}; is the cluster of the kubeconfig context reachable?"),
        }
    }

    /// Adds what to do to a NotFound.
    pub fn with_hint(self, hint: String) -> Error {
        match self {
            Error::NotFound { kind, namespace, name, .. } => {
                Error::NotFound { kind, namespace, name, hint: format!(": {hint}") }
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use groundskeeper_api::EtcdCluster;

    fn status(code: u16, reason: &str, message: &str) -> Status {
        Status::failure(message, reason).with_code(code)
    }

    #[test]
    fn each_status_says_what_is_wrong() {
        let get = Request::of::<EtcdCluster>("get", Some("etcd"), Some("main"));
        let list = Request::of::<EtcdCluster>("list", None, None);
        let cases: Vec<(&str, Request, Status, Option<bool>, &str)> = vec![
            (
                "missing object",
                get.clone(),
                status(404, "NotFound", "etcdclusters.groundskeeper.dev \"main\" not found"),
                Some(true),
                "EtcdCluster \"main\" not found in namespace \"etcd\"",
            ),
            (
                "missing CRD on get",
                get.clone(),
                status(404, "NotFound", "the server could not find the requested resource"),
                Some(false),
                "the CRD etcdclusters.groundskeeper.dev is not installed. Install groundskeeper's CRDs: `kubectl apply -f manifests/crds/`",
            ),
            (
                "missing CRD on list",
                list.clone(),
                status(404, "NotFound", "the server could not find the requested resource"),
                None,
                "the CRD etcdclusters.groundskeeper.dev is not installed",
            ),
            (
                "forbidden",
                get.clone(),
                status(403, "Forbidden", "etcdclusters.groundskeeper.dev \"main\" is forbidden"),
                Some(true),
                "not allowed to get etcdclusters.groundskeeper.dev in namespace etcd: etcdclusters.groundskeeper.dev \"main\" is forbidden. Ask your cluster admin for a Role that grants `get` on `etcdclusters.groundskeeper.dev`",
            ),
            (
                "forbidden everywhere",
                list.clone(),
                status(403, "Forbidden", "no"),
                None,
                "not allowed to list etcdclusters.groundskeeper.dev in all namespaces",
            ),
            (
                "unauthorized",
                get.clone(),
                status(401, "Unauthorized", "Unauthorized"),
                None,
                "did not accept the credentials",
            ),
            (
                "other",
                get,
                status(500, "InternalError", "boom"),
                None,
                "get EtcdCluster main in namespace etcd: boom (500 InternalError)",
            ),
        ];
        for (what, request, status, served, wanted) in cases {
            let got = explain(&request, &status, served).to_string();
            assert!(got.contains(wanted), "{what}: {got}");
        }
    }

    #[test]
    fn scylla_clusters_come_with_scylla_operator() {
        let request = Request::of::<groundskeeper_api::scylla::ScyllaCluster>("get", Some("s"), Some("db"));
        let got = explain(&request, &status(404, "NotFound", ""), Some(false)).to_string();
        assert!(got.contains("scyllaclusters.scylla.scylladb.com is not installed"), "{got}");
        assert!(got.contains("install scylla-operator"), "{got}");
    }
}
