//! The client from the kubeconfig, and thin reads and writes that turn a failure into an
//! [`Error`] naming the object, the CRD or the permission at fault.

use k8s_openapi::NamespaceResourceScope;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::cli::Global;
use crate::error::{Error, Request, explain};

/// A client, and the namespace commands work in.
#[derive(Clone)]
pub struct Access {
    pub client: Client,
    /// `-n`, else the context's namespace, else `default`.
    pub namespace: String,
    /// `-A`.
    pub all_namespaces: bool,
}

impl Access {
    /// From `--kubeconfig`/`$KUBECONFIG`/`~/.kube/config` and `--context`; without either flag
    /// and without a kubeconfig, the in-cluster service account.
    pub async fn connect(global: &Global) -> Result<Access, Error> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let options = KubeConfigOptions { context: global.context.clone(), ..KubeConfigOptions::default() };
        let config = match (&global.kubeconfig, &global.context) {
            (Some(path), _) => {
                let file = Kubeconfig::read_from(path).map_err(|e| {
                    Error::Kubeconfig(format!("cannot read the kubeconfig {}: {e}", path.display()))
                })?;
                Config::from_custom_kubeconfig(file, &options)
                    .await
                    .map_err(|e| kubeconfig_error(&global.context, e))?
            }
            (None, Some(_)) => {
                Config::from_kubeconfig(&options).await.map_err(|e| kubeconfig_error(&global.context, e))?
            }
            (None, None) => Config::infer().await.map_err(|e| {
                Error::Kubeconfig(format!(
                    "no cluster to talk to: {e}. Set KUBECONFIG or --kubeconfig to a kubeconfig file \
                     (default ~/.kube/config), or run inside a pod"
                ))
            })?,
        };
        let namespace = global.namespace.clone().unwrap_or_else(|| config.default_namespace.clone());
        let client = Client::try_from(config)
            .map_err(|e| Error::Kubeconfig(format!("cannot build a client from the kubeconfig: {e}")))?;
        Ok(Access { client, namespace, all_namespaces: global.all_namespaces })
    }

    pub fn api<K>(&self, namespace: Option<&str>) -> Api<K>
    where
        K: kube::Resource<Scope = NamespaceResourceScope, DynamicType = ()>,
    {
        match namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        }
    }

    /// The error for `err`; after a 404, discovery tells a missing object from a missing CRD.
    pub async fn explain(&self, request: Request, err: kube::Error) -> Error {
        let kube::Error::Api(status) = &err else {
            return Error::transport(&request, &err);
        };
        let served = if status.code == 404 { self.serves(&request).await } else { None };
        explain(&request, status, served)
    }

    /// Whether discovery lists the request's resource type (`None` when discovery fails).
    async fn serves(&self, request: &Request) -> Option<bool> {
        let api_version = if request.group.is_empty() {
            request.version.clone()
        } else {
            format!("{}/{}", request.group, request.version)
        };
        match self.client.list_api_group_resources(&api_version).await {
            Ok(list) => Some(list.resources.iter().any(|r| r.name == request.plural)),
            Err(kube::Error::Api(status)) if status.code == 404 => Some(false),
            Err(_) => None,
        }
    }

    pub async fn get<K>(&self, namespace: &str, name: &str) -> Result<K, Error>
    where
        K: kube::Resource<Scope = NamespaceResourceScope, DynamicType = ()>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug,
    {
        match self.api::<K>(Some(namespace)).get(name).await {
            Ok(object) => Ok(object),
            Err(err) => Err(self.explain(Request::of::<K>("get", Some(namespace), Some(name)), err).await),
        }
    }

    /// Every object of the type in `namespace` (`None`: all namespaces), optionally by label.
    pub async fn list<K>(&self, namespace: Option<&str>, labels: Option<&str>) -> Result<Vec<K>, Error>
    where
        K: kube::Resource<Scope = NamespaceResourceScope, DynamicType = ()>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug,
    {
        let mut params = ListParams::default();
        if let Some(labels) = labels {
            params = params.labels(labels);
        }
        match self.api::<K>(namespace).list(&params).await {
            Ok(list) => Ok(list.items),
            Err(err) => Err(self.explain(Request::of::<K>("list", namespace, None), err).await),
        }
    }

    pub async fn create<K>(&self, namespace: &str, object: &K) -> Result<K, Error>
    where
        K: kube::Resource<Scope = NamespaceResourceScope, DynamicType = ()>
            + Clone
            + DeserializeOwned
            + Serialize
            + std::fmt::Debug,
    {
        match self.api::<K>(Some(namespace)).create(&PostParams::default(), object).await {
            Ok(created) => Ok(created),
            Err(err) => Err(self.explain(Request::of::<K>("create", Some(namespace), None), err).await),
        }
    }

    /// A JSON merge patch of the object's metadata or spec.
    pub async fn merge_patch<K>(
        &self,
        namespace: &str,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<K, Error>
    where
        K: kube::Resource<Scope = NamespaceResourceScope, DynamicType = ()>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug,
    {
        let params = kube::api::PatchParams::default();
        match self.api::<K>(Some(namespace)).patch(name, &params, &kube::api::Patch::Merge(patch)).await {
            Ok(patched) => Ok(patched),
            Err(err) => Err(self.explain(Request::of::<K>("patch", Some(namespace), Some(name)), err).await),
        }
    }

    /// Deletes with background propagation: dependents (a task's Jobs) go too.
    pub async fn delete<K>(&self, namespace: &str, name: &str) -> Result<(), Error>
    where
        K: kube::Resource<Scope = NamespaceResourceScope, DynamicType = ()>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug,
    {
        match self.api::<K>(Some(namespace)).delete(name, &DeleteParams::background()).await {
            Ok(_) => Ok(()),
            Err(err) => Err(self.explain(Request::of::<K>("delete", Some(namespace), Some(name)), err).await),
        }
    }
}

fn kubeconfig_error(context: &Option<String>, err: kube::config::KubeconfigError) -> Error {
    let what = match context {
        Some(context) => format!("the kubeconfig context {context:?}"),
        None => "the kubeconfig".to_owned(),
    };
    Error::Kubeconfig(format!(
        "cannot use {what}: {err}. Check KUBECONFIG/--kubeconfig and `kubectl config get-contexts`"
    ))
}
