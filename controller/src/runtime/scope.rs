//! Where the controllers look: every namespace (cluster-wide mode, the ClusterRole of
//! `manifests/install/cluster-wide/`), or only the namespaces they are told to look after
//! (namespaced mode, a Role in each of them: `manifests/install/namespaced/`).
//!
//! A watch covers one namespace or all of them, so in namespaced mode each controller runs once
//! per namespace; nothing it does reaches outside the namespace of the object it works on.

use std::future::Future;

use futures::future::join_all;
use k8s_openapi::NamespaceResourceScope;
use kube::{Api, Resource};

use super::context::{Context, ControllerConfig};

/// The namespaces to watch: `[None]` for every namespace, else one entry per namespace.
pub fn watched(config: &ControllerConfig) -> Vec<Option<String>> {
    // Blank entries (an empty GROUNDSKEEPER_NAMESPACES, a trailing comma) name no namespace.
    let mut namespaces: Vec<String> =
        config.namespaces.iter().map(|n| n.trim().to_owned()).filter(|n| !n.is_empty()).collect();
    namespaces.sort_unstable();
    namespaces.dedup();
    if namespaces.is_empty() { vec![None] } else { namespaces.into_iter().map(Some).collect() }
}

/// The API of `K` in `namespace`, or across every namespace for `None`.
pub fn api<K>(client: &kube::Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match namespace {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    }
}

/// Runs `run` for every watched namespace (once, for all of them, in cluster-wide mode) until
/// every run has ended.
pub(crate) async fn in_each_namespace<F, Fut>(ctx: &Context, run: F)
where
    F: Fn(Option<String>) -> Fut,
    Fut: Future<Output = ()>,
{
    join_all(watched(&ctx.config).into_iter().map(run)).await;
}
