//! The ring observer: writes `current-token-ring-hash` on member Services where nothing else does.
//!
//! scylla-operator (1.11 and later) writes that annotation from each Scylla pod. Older ones, and
//! clusters whose pods run without it, leave it unwritten, and without it no cleanup is ever due.
//! Every interval, for each ScyllaCluster with maintenance enabled, the observer asks each node's
//! agent for the ring as that node sees it (`GET /storage_service/tokens`), hashes it exactly as
//! scylla-operator does, and writes it, but only on the Services it looks after ([`who_writes`]):
//!
//! * the annotation is absent: nobody writes it, so we do;
//! * it carries our marker [`keys::RING_HASH_OBSERVED_AT`], or `metadata.managedFields` says we
//!   (field manager [`FIELD_MANAGER`]) wrote it: we keep it up to date;
//! * another field manager wrote it more than [`STALE_AFTER`] ago: that writer may be gone, so we
//!   check it and correct it if it is wrong. Both compute the same function of the same ring, so
//!   a writer still alive agrees with us and nothing is written;
//! * another writer wrote it recently, or the API server keeps no managedFields: it is theirs.
//!
//! A node whose own tokens (`GET /storage_service/tokens/{address}`) are empty is bootstrapping:
//! nothing is written for it, so it gets no Job and blocks no one.
//!
//! The node's address for `tokens/{address}` is the one Scylla knows it by: the member Service's
//! ClusterIP (scylla-operator's default broadcast address), or the pod IP when
//! `spec.exposeOptions.broadcastOptions.nodes.type` is `PodIP`. The agent itself is reached at the
//! Service's DNS name.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Service};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use groundskeeper_protocol::{keys, ring_hash};
use groundskeeper_stores::scylla::agent::AgentClient;
use groundskeeper_stores::scylla::token::AuthToken;

use super::agent::{agent_config, read_token};
use super::observe::{broadcasts_pod_ip, list_member_services};
use crate::runtime::context::Context;
use crate::runtime::error::{Error, Result};
use crate::runtime::scope;
use groundskeeper_api::scylla::ScyllaCluster;

/// Named here as well, where the observer's users have always found it.
pub use super::agent::token_from_secret;

/// Field manager of the observer's writes, as `metadata.managedFields` records it.
pub const FIELD_MANAGER: &str = "groundskeeper-ring-observer";
/// Another writer's hash untouched for this long is checked (and corrected if wrong).
pub(crate) const STALE_AFTER: Duration = Duration::from_secs(10 * 60);

/// Who keeps a member Service's `current-token-ring-hash` up to date.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writer {
    /// Nobody, or us: the observer computes and writes it.
    Us,
    /// Another writer, silent for longer than [`STALE_AFTER`]: the observer checks it.
    StaleOther,
    /// Another writer, active: left alone.
    Other,
}

impl Writer {
    pub fn observer_acts(self) -> bool {
        self != Writer::Other
    }
}

/// Who writes the hash of `service`: pure, from its annotations and managedFields.
pub fn who_writes(service: &Service, now: jiff::Timestamp) -> Writer {
    let annotations = service.metadata.annotations.as_ref();
    let has = |key: &str| annotations.is_some_and(|a| a.contains_key(key));
    if !has(keys::CURRENT_TOKEN_RING_HASH) || has(keys::RING_HASH_OBSERVED_AT) {
        return Writer::Us;
    }
    let owner = service
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|entry| entry.subresource.as_deref().unwrap_or_default().is_empty())
        .find(|entry| {
            entry
                .fields_v1
                .as_ref()
                .and_then(|f| f.0.get("f:metadata"))
                .and_then(|m| m.get("f:annotations"))
                .and_then(|a| a.get(format!("f:{}", keys::CURRENT_TOKEN_RING_HASH)))
                .is_some()
        });
    let Some(owner) = owner else {
        return Writer::Other;
    };
    if owner.manager.as_deref() == Some(FIELD_MANAGER) {
        return Writer::Us;
    }
    let written = owner.time.as_ref().map(|t| t.0);
    let silent_for = written.map(|w| Duration::try_from(now.duration_since(w)).unwrap_or(Duration::ZERO));
    match silent_for {
        Some(silent) if silent > STALE_AFTER => Writer::StaleOther,
        _ => Writer::Other,
    }
}

/// The address Scylla knows `service`'s node by: see the module documentation.
pub fn broadcast_address(cluster: &ScyllaCluster, service: &Service, pod: Option<&Pod>) -> Option<String> {
    if broadcasts_pod_ip(cluster) {
        return pod?.status.as_ref()?.pod_ip.clone();
    }
    service.spec.as_ref()?.cluster_ip.clone().filter(|ip| !ip.is_empty() && ip != "None")
}

/// The merge patch writing `hash` with our marker.
pub fn current_hash_patch(hash: &str, now: jiff::Timestamp) -> Value {
    json!({
        "metadata": {
            "annotations": {
                keys::CURRENT_TOKEN_RING_HASH: hash,
                keys::RING_HASH_OBSERVED_AT: crate::conditions::format_time(now),
            }
        }
    })
}

/// Runs the observer until the task is dropped.
pub async fn run_ring_observer(ctx: Arc<Context>) {
    let mut interval = tokio::time::interval(super::config::Config::of(&ctx).ring_observer_interval);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        if let Err(err) = observe_all(&ctx).await {
            tracing::warn!(error = %err, "ring observer pass failed");
        }
    }
}

/// One pass over every ScyllaCluster it looks after. A failing cluster is logged and does not
/// stop the others.
pub(crate) async fn observe_all(ctx: &Context) -> Result<()> {
    let mut clusters = Vec::new();
    for namespace in scope::watched(&ctx.config) {
        let api: Api<ScyllaCluster> = scope::api(&ctx.client, namespace.as_deref());
        let listed = api.list(&ListParams::default()).await.map_err(Error::kube(format!(
            "list ScyllaClusters in {}",
            namespace.as_deref().unwrap_or("every namespace")
        )))?;
        clusters.extend(listed.items);
    }
    for cluster in &clusters {
        let disabled = cluster
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(keys::MAINTENANCE_ENABLED))
            .is_some_and(|v| v == "false");
        if disabled || cluster.metadata.deletion_timestamp.is_some() {
            continue;
        }
        if let Err(err) = observe_cluster(ctx, cluster).await {
            ctx.metrics.reconcile_failed("scylla-ring-observer", &err);
            tracing::warn!(error = %err, "ring observer");
        }
    }
    Ok(())
}

/// Computes and writes the hash of every member of `cluster` the observer looks after.
pub async fn observe_cluster(ctx: &Context, cluster: &ScyllaCluster) -> Result<()> {
    let namespace = cluster.metadata.namespace.clone().unwrap_or_default();
    let name = cluster.metadata.name.clone().unwrap_or_default();
    let members = list_member_services(&ctx.client, &namespace, &name).await?;
    let now = jiff::Timestamp::now();
    let ours: Vec<&Service> = members
        .iter()
        .filter(|s| s.metadata.deletion_timestamp.is_none() && who_writes(s, now).observer_acts())
        .collect();
    if ours.is_empty() {
        return Ok(());
    }
    let token = read_token(&ctx.client, &namespace, &name).await?;
    let mut first_error = None;
    for service in ours {
        if let Err(err) = observe_member(ctx, cluster, service, &token).await {
            first_error.get_or_insert(err);
        }
    }
    first_error.map_or(Ok(()), Err)
}

async fn observe_member(
    ctx: &Context,
    cluster: &ScyllaCluster,
    service: &Service,
    token: &AuthToken,
) -> Result<()> {
    let namespace = service.metadata.namespace.clone().unwrap_or_default();
    let name = service.metadata.name.clone().unwrap_or_default();
    let pod = if broadcasts_pod_ip(cluster) {
        // Pod name = member Service name.
        let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
        pods.get_opt(&name).await.map_err(Error::kube(format!("get Pod {namespace}/{name}")))?
    } else {
        None
    };
    let Some(address) = broadcast_address(cluster, service, pod.as_ref()) else {
        tracing::debug!(%namespace, service = %name, "no address for the node yet");
        return Ok(());
    };
    let agent =
        AgentClient::new(agent_config(&super::config::Config::of(ctx), &namespace, &name, token.clone()))
            .map_err(|err| upstream(&namespace, &name, err))?;
    let own = agent.node_tokens(&address).await.map_err(|err| upstream(&namespace, &name, err))?;
    if own.is_empty() {
        tracing::debug!(%namespace, service = %name, "node is bootstrapping: no ring hash written");
        return Ok(());
    }
    let ring = agent.tokens().await.map_err(|err| upstream(&namespace, &name, err))?;
    let hash = ring_hash(&ring).map_err(|err| Error::Upstream {
        target: format!("agent of node {namespace}/{name}"),
        message: format!("GET /storage_service/tokens: {err}"),
    })?;
    let current = service.metadata.annotations.as_ref().and_then(|a| a.get(keys::CURRENT_TOKEN_RING_HASH));
    if current == Some(&hash) {
        return Ok(());
    }
    write_current_hash(&ctx.client, &namespace, &name, &hash, jiff::Timestamp::now()).await
}

pub async fn write_current_hash(
    client: &kube::Client,
    namespace: &str,
    service: &str,
    hash: &str,
    now: jiff::Timestamp,
) -> Result<()> {
    let api: Api<Service> = Api::namespaced(client.clone(), namespace);
    let params = PatchParams { field_manager: Some(FIELD_MANAGER.to_owned()), ..Default::default() };
    api.patch(service, &params, &Patch::Merge(&current_hash_patch(hash, now))).await.map_err(Error::kube(
        format!("patch annotation {} of Service {namespace}/{service}", keys::CURRENT_TOKEN_RING_HASH),
    ))?;
    tracing::info!(%namespace, %service, "wrote current token-ring hash");
    Ok(())
}

fn upstream(namespace: &str, service: &str, err: impl std::fmt::Display) -> Error {
    Error::Upstream { target: format!("agent of node {namespace}/{service}"), message: err.to_string() }
}
