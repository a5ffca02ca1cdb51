//! An in-memory Kubernetes API, faithful enough for kube's client, watcher and reflector.
//!
//! It is **not** a kube-apiserver: it keeps objects as JSON in one process, validates built-in
//! objects hardly at all (names only), and runs no controllers. What it does implement, as the
//! real API does:
//!
//! - **Resources**: the built-ins groundskeeper touches (core/v1 Services, Secrets, ConfigMaps,
//!   Pods, PersistentVolumeClaims, Events, Namespaces; batch/v1 Jobs; apps/v1 StatefulSets;
//!   coordination.k8s.io/v1 Leases; events.k8s.io/v1 Events) and any custom resource registered
//!   with [`ResourceType::custom`] (scylla-operator's ScyllaCluster and ScyllaDBDatacenter and
//!   groundskeeper's own types are registered by default).
//!   Discovery: `/version`, `/api`, `/apis`, `/api/v1`, `/apis/{group}/{version}` (with the
//!   CRDs' singular and short names and categories, and the built-ins' usual short names).
//!   Custom resources of groundskeeper's CRDs (and scylla-operator's where the reference folder
//!   is at hand) are served by the CRD manifests themselves (the [`crds`] module).
//! - **What kubectl reads**: Table output (`Accept: application/json;as=Table;g=meta.k8s.io`) for
//!   GET, LIST and watches, with the CRDs' `additionalPrinterColumns` and the built-ins' usual
//!   columns (the [`table`] module); the OpenAPI v3 documents (`/openapi/v3`, per group-version:
//!   the CRDs' schemas, k8s-openapi's for the built-ins, the `fieldValidation` parameter kubectl
//!   looks for), and an empty `/openapi/v2` (protobuf) so that kubectl 1.27 applies.
//! - **Metadata**: one global resourceVersion counter (a decimal string), `uid`,
//!   `creationTimestamp`, `generateName`. `metadata.generation` is kept for custom resources,
//!   Jobs and StatefulSets only (as the real API; ConfigMaps, Services, Pods… have none): it goes
//!   up when anything outside `metadata` changes — outside `metadata` and `status` for types with
//!   the status subresource — and when deletion starts.
//! - **Reads**: GET; LIST with `labelSelector` (`=`, `==`, `!=`, `in`, `notin`, `key`, `!key`),
//!   `fieldSelector` (`metadata.name`, `metadata.namespace`, and a few per-kind fields such as a
//!   Pod's `status.phase`; others are refused with 400 as the real API does), `limit`/`continue`
//!   (pages come from the current state, not from a snapshot at the first page's revision),
//!   lists across all namespaces. `resourceVersionMatch` is ignored: a list is always current.
//! - **Watches**: `?watch=true` streams newline-delimited ADDED/MODIFIED/DELETED/BOOKMARK events
//!   from a resourceVersion, out of a bounded change history; an older resourceVersion gets an
//!   ERROR event with a 410 `Expired` Status, as does every open watch after
//!   [`ApiServer::expire_watches`]. Without a resourceVersion (or `0`) the current objects come
//!   first as ADDED. `allowWatchBookmarks` sends a BOOKMARK every `bookmark_interval`;
//!   `sendInitialEvents=true` (with `resourceVersionMatch=NotOlderThan`) ends the initial state with
//!   the `k8s.io/initial-events-end` bookmark; `timeoutSeconds` ends the stream. Selectors apply
//!   to watches: an object that starts or stops matching is seen as ADDED or DELETED.
//! - **Writes**: create (201; 409 `AlreadyExists`; 422 without a name; status dropped for types
//!   with the status subresource; Job defaults: counts, completion mode, selector and pod
//!   template labels), update with optimistic concurrency on `metadata.resourceVersion` (409
//!   `Conflict`; an empty resourceVersion is an unconditional update), immutable Job
//!   `spec.template`/`spec.selector`. A write that changes nothing stores nothing and sends no
//!   event. PATCH: merge patch, JSON patch, strategic merge patch for built-ins (merge patch plus
//!   the keyed lists listed in the `patch` module; custom resources answer 415 as the real API);
//!   server-side apply answers 415. A patch carrying a stale `metadata.resourceVersion` conflicts.
//!   `/status`: only `status` changes there; on the main endpoint `status` is ignored.
//!   `dryRun=All` on create, update, patch and delete: every check runs and the would-be object
//!   is answered; nothing is stored, no resourceVersion is used, no event is sent.
//! - **Custom resource schemas** (the [`schema`] module), from the CRD manifests: on every
//!   create, update, patch and status write, unknown fields are pruned (with `fieldValidation`
//!   `Strict` a 400, `Warn` — the default — a `Warning: 299` header each, `Ignore` nothing),
//!   nulls and `default`s handled as structural defaulting does, then the OpenAPI checks, the
//!   `x-kubernetes-list-type` checks and the `x-kubernetes-validations` CEL rules (transition
//!   rules on updates), answered with the real 422 `Invalid` Status and its causes. A `/status`
//!   write is checked against the status schema. Types without a CRD here (SIG etcd-operator's
//!   EtcdCluster, scylla-operator's without the reference folder) are stored as sent.
//! - **Deletion**: immediate, unless finalizers are present: then `deletionTimestamp` is set and
//!   the object goes when an update empties `metadata.finalizers`. Preconditions (uid,
//!   resourceVersion) are honoured. Owner-reference garbage collection runs at once, in the same
//!   write: dependents whose owners are all gone are deleted (Background and Foreground are
//!   treated alike), `Orphan` removes the owner reference instead. As the real API does, a Job
//!   deleted without a `propagationPolicy` orphans its Pods.
//!
//! - **RBAC** for requests that carry a bearer token registered with [`Builder::authorize`]:
//!   authorized by verb, API group, resource/subresource, namespace and `resourceNames` against
//!   the Roles and ClusterRoles bound to that ServiceAccount in a set of manifests (the
//!   [`rbac`] module; [`rbac::controller_grants`] reads `manifests/base/` with `install/cluster-wide/`, [`rbac::controller_grants_namespaced`] with `install/namespaced/`), refused with the real
//!   403 Status; an unknown token gets 401. Requests without a token are the test harness and
//!   are not checked. Aggregated roles, groups and users other than ServiceAccounts are not
//!   modelled.
//!
//! Not implemented: other authentication, admission (webhooks, policies), validation and
//! defaulting of built-in objects other than names and the Job's defaults, namespaces' existence
//! (objects may be created in any namespace), server-side apply, `managedFields`, graceful Pod
//! termination, protobuf, the legacy `/watch/` paths, subresources other than `status`,
//! conversion between versions of a resource, and of CRD schemas: `allOf`/`anyOf`/`oneOf`/`not`,
//! validation ratcheting, ObjectMeta checks inside embedded resources, most string formats, CEL
//! cost limits, duplicate fields in a body (strict decoding reports unknown fields only), and
//! defaulting when an object is read back (objects here are defaulted when written).
//!
//! For scenarios there are hooks that bypass HTTP but go through the same rules: [`ApiServer::get`],
//! [`ApiServer::create`], [`ApiServer::replace`], [`ApiServer::patch`], [`ApiServer::delete`]…
//! and [`ApiServer::subscribe`] for every committed change (to play the Job controller and the
//! kubelet).

pub mod crds;
mod error;
mod http;
mod openapi;
mod patch;
pub mod rbac;
mod resources;
pub mod schema;
mod selector;
mod store;
pub mod table;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::broadcast;

pub use error::ApiError;
pub use patch::PatchFormat;
pub use resources::{
    Generation, Propagation, ResourceId, ResourceType, builtin_types, groundskeeper_custom_types,
};
pub use selector::{FieldSelector, LabelSelector};
pub use store::{Change, ChangeKind};

use resources::Registry;
use store::{DeleteOptions, ListOptions, Notice, Store, Target};

/// Options for [`ApiServer`].
#[derive(Clone, Debug)]
pub struct Builder {
    types: Vec<ResourceType>,
    history_limit: usize,
    bookmark_interval: Duration,
    tokens: std::collections::HashMap<String, rbac::Grants>,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            types: builtin_types().into_iter().chain(groundskeeper_custom_types()).collect(),
            history_limit: 10_000,
            bookmark_interval: Duration::from_secs(5),
            tokens: Default::default(),
        }
    }
}

impl Builder {
    /// Registers (or replaces) a resource type.
    pub fn resource(mut self, rt: ResourceType) -> Self {
        self.types.retain(|t| t.id != rt.id);
        self.types.push(rt);
        self
    }

    /// Serves no resource type `id` (as a cluster where its CRD is not installed: requests for
    /// it get 404 and discovery does not list it).
    pub fn without(mut self, id: &ResourceId) -> Self {
        self.types.retain(|t| &t.id != id);
        self
    }

    /// How many changes watches can resume from; older resourceVersions get 410 Gone.
    pub fn history_limit(mut self, changes: usize) -> Self {
        self.history_limit = changes;
        self
    }

    /// Requests bearing `token` are authorized with `grants` (RBAC), as the real API does for a
    /// ServiceAccount's token; see [`ApiServer::client_with_token`].
    pub fn authorize(mut self, token: &str, grants: rbac::Grants) -> Self {
        self.tokens.insert(token.to_owned(), grants);
        self
    }

    pub fn bookmark_interval(mut self, interval: Duration) -> Self {
        self.bookmark_interval = interval;
        self
    }

    /// Listens on 127.0.0.1 with a port the OS picks.
    pub async fn start(self) -> std::io::Result<ApiServer> {
        let mut registry = Registry::default();
        for rt in self.types {
            registry.register(rt);
        }
        let store = Arc::new(Store::new(registry, self.history_limit));
        let app = Arc::new(http::App {
            store: store.clone(),
            bookmark_interval: self.bookmark_interval,
            tokens: self.tokens,
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let server = tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, http::router(app)).await {
                tracing::error!(%error, "in-memory API server stopped");
            }
        });
        Ok(ApiServer { address, store, server })
    }
}

/// A running in-memory Kubernetes API. Dropping it stops the server and ends open watches.
pub struct ApiServer {
    address: SocketAddr,
    store: Arc<Store>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.store.shutdown();
        self.server.abort();
    }
}

impl ApiServer {
    /// A server with the built-in and groundskeeper's custom resource types.
    pub async fn start() -> std::io::Result<ApiServer> {
        Builder::default().start().await
    }

    pub fn builder() -> Builder {
        Builder::default()
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// A kube client for this server; its default namespace is `default`.
    pub fn client(&self) -> kube::Client {
        let url = self.url().parse().expect("the server URL is a valid URI");
        kube::Client::try_from(kube::Config::new(url)).expect("a plain-HTTP kube client builds")
    }

    /// A kube client that sends `token`, so its requests are authorized as the ServiceAccount
    /// given to [`Builder::authorize`].
    pub fn client_with_token(&self, token: &str) -> kube::Client {
        let url = self.url().parse().expect("the server URL is a valid URI");
        let mut config = kube::Config::new(url);
        config.auth_info.token = Some(token.to_owned().into());
        kube::Client::try_from(config).expect("a plain-HTTP kube client builds")
    }

    /// Writes a kubeconfig for this server to `path` (one cluster, user and context, all named
    /// `in-memory`; the context's namespace `namespace`), so that programs that read a kubeconfig,
    /// such as kubectl plugins, can talk to it. With `token`, requests are authorized as the
    /// ServiceAccount given to [`Builder::authorize`]; without, they are the harness's (unchecked).
    pub fn write_kubeconfig(
        &self,
        path: &std::path::Path,
        token: Option<&str>,
        namespace: &str,
    ) -> std::io::Result<()> {
        let user = match token {
            Some(token) => serde_json::json!({ "token": token }),
            None => serde_json::json!({}),
        };
        let config = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{ "name": "in-memory", "cluster": { "server": self.url() } }],
            "users": [{ "name": "in-memory", "user": user }],
            "contexts": [{ "name": "in-memory", "context": { "cluster": "in-memory", "user": "in-memory", "namespace": namespace } }],
            "current-context": "in-memory",
        });
        let text = serde_saphyr::to_string(&config).map_err(std::io::Error::other)?;
        std::fs::write(path, text)
    }

    /// The current (latest) resourceVersion.
    pub fn revision(&self) -> u64 {
        self.store.revision()
    }

    /// Every change committed from now on, in resourceVersion order.
    pub fn subscribe(&self) -> Changes {
        Changes { receiver: self.store.subscribe() }
    }

    /// Forgets the change history and ends every open watch with 410 Gone (like an etcd
    /// compaction): watchers must list again.
    pub fn expire_watches(&self) {
        self.store.expire_watches();
    }

    fn resource(&self, id: &ResourceId) -> Result<ResourceType, ApiError> {
        self.store.resource(id).cloned()
    }

    pub fn get(&self, id: &ResourceId, ns: Option<&str>, name: &str) -> Option<Value> {
        let rt = self.resource(id).ok()?;
        self.store.get(&rt, ns, name).ok()
    }

    /// All objects of a type in a namespace (`None`: all namespaces), in name order.
    pub fn list(&self, id: &ResourceId, ns: Option<&str>) -> Vec<Value> {
        let Ok(rt) = self.resource(id) else {
            return Vec::new();
        };
        self.store.list(&rt, ns, &ListOptions::default()).map(|page| page.items).unwrap_or_default()
    }

    pub fn create(&self, id: &ResourceId, ns: Option<&str>, object: Value) -> Result<Value, ApiError> {
        self.store.create(&self.resource(id)?, ns, object)
    }

    /// PUT on the main endpoint (status ignored where the type has the status subresource).
    pub fn replace(
        &self,
        id: &ResourceId,
        ns: Option<&str>,
        name: &str,
        object: Value,
    ) -> Result<Value, ApiError> {
        self.store.update(&self.resource(id)?, ns, name, object, Target::Main)
    }

    /// PUT on `/status`.
    pub fn replace_status(
        &self,
        id: &ResourceId,
        ns: Option<&str>,
        name: &str,
        object: Value,
    ) -> Result<Value, ApiError> {
        self.store.update(&self.resource(id)?, ns, name, object, Target::Status)
    }

    /// PATCH on the main endpoint, or on `/status` when `status` is true.
    pub fn patch(
        &self,
        id: &ResourceId,
        ns: Option<&str>,
        name: &str,
        format: PatchFormat,
        patch: &Value,
        status: bool,
    ) -> Result<Value, ApiError> {
        let target = if status { Target::Status } else { Target::Main };
        self.store.patch(&self.resource(id)?, ns, name, format, patch, target)
    }

    /// DELETE with the type's default propagation.
    pub fn delete(&self, id: &ResourceId, ns: Option<&str>, name: &str) -> Result<Value, ApiError> {
        self.store.delete(&self.resource(id)?, ns, name, &DeleteOptions::default())
    }

    /// [`ApiServer::get`] for a typed resource.
    pub fn get_as<K>(&self, ns: Option<&str>, name: &str) -> Option<K>
    where
        K: kube::Resource<DynamicType = ()> + DeserializeOwned,
    {
        let object = self.get(&ResourceId::of::<K>(), ns, name)?;
        Some(serde_json::from_value(object).expect("stored objects deserialize into their type"))
    }

    /// [`ApiServer::create`] for a typed resource, in the object's own namespace.
    pub fn create_as<K>(&self, object: &K) -> Result<K, ApiError>
    where
        K: kube::Resource<DynamicType = ()> + Serialize + DeserializeOwned,
    {
        let value = serde_json::to_value(object).map_err(|e| ApiError::bad_request(e.to_string()))?;
        let created = self.create(&ResourceId::of::<K>(), object.meta().namespace.as_deref(), value)?;
        Ok(serde_json::from_value(created).expect("stored objects deserialize into their type"))
    }
}

/// Committed changes, as [`ApiServer::subscribe`] hands them out.
pub struct Changes {
    receiver: broadcast::Receiver<Notice>,
}

/// The subscriber fell too far behind and changes were lost.
#[derive(Debug, thiserror::Error)]
#[error("the change subscription lagged behind and lost {0} changes")]
pub struct Lagged(pub u64);

impl Changes {
    /// The next change; `Ok(None)` once the server is gone.
    pub async fn next(&mut self) -> Result<Option<Arc<Change>>, Lagged> {
        loop {
            match self.receiver.recv().await {
                Ok(Notice::Change(change)) => return Ok(Some(change)),
                Ok(Notice::Expired) => continue,
                Ok(Notice::Shutdown) | Err(broadcast::error::RecvError::Closed) => return Ok(None),
                Err(broadcast::error::RecvError::Lagged(n)) => return Err(Lagged(n)),
            }
        }
    }
}
