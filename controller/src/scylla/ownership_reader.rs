//! Reads the ring views of a cluster through one node's agent: the thin layer around
//! [`super::ownership`]. The vnode keyspaces are listed, each one's effective ownership read
//! (a few calls at a time), keyspaces replicated alike grouped, and `describe_ring` fetched once
//! per group. Any failure makes the whole reading unknown: a partial view could hide a loss.

use std::collections::{BTreeMap, BTreeSet};

use futures::{StreamExt, TryStreamExt};

use groundskeeper_protocol::keys;
use groundskeeper_stores::scylla::agent::{AgentClient, AgentConfig, AgentError, KeyspaceType, Replication};
use groundskeeper_stores::scylla::token::AuthToken;

use super::job::node_address;
use super::ownership::{RingView, replication_groups};
use super::ring_observer::read_token;
use crate::runtime::context::{Context, ControllerConfig};
use groundskeeper_api::scylla::facts::MemberFacts;

/// Nodes asked in turn for the ring views before ownership counts as unknown.
pub(crate) const NODES_TRIED: usize = 2;

/// Ownership reads in flight at once on one agent.
pub(crate) const CONCURRENT_READS: usize = 8;

/// What could not be read, for the decision's fallback reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    #[error("{0}")]
    Agent(#[from] AgentError),
    #[error("{0}")]
    Ownership(#[from] super::ownership::OwnershipError),
}

/// The ring views of every vnode keyspace (tablet and local keyspaces have none), one per
/// replication group.
pub async fn read_ring_views(agent: &AgentClient) -> Result<Vec<RingView>, ReadError> {
    let keyspaces = agent.keyspaces(KeyspaceType::NonLocalStrategy, Replication::Vnodes).await?;
    let shares: BTreeMap<String, _> = futures::stream::iter(keyspaces)
        .map(|keyspace| async move {
            let shares = agent.effective_ownership(&keyspace).await?;
            Ok::<_, AgentError>((keyspace, shares))
        })
        .buffer_unordered(CONCURRENT_READS)
        .try_collect()
        .await?;
    let mut views = Vec::new();
    for group in replication_groups(&shares) {
        views.push(read_group(agent, group).await?);
    }
    Ok(views)
}

async fn read_group(agent: &AgentClient, keyspaces: BTreeSet<String>) -> Result<RingView, ReadError> {
    let first = keyspaces.first().cloned().unwrap_or_default();
    let rows = agent.describe_ring(&first).await?;
    Ok(RingView::from_describe_ring(keyspaces, &rows)?)
}

/// How the controller reaches the agent of member `service`: its DNS name on the agent port,
/// unless the configuration says otherwise ([`ControllerConfig::agent_endpoints`]).
pub(crate) fn agent_config(
    config: &ControllerConfig,
    namespace: &str,
    service: &str,
    token: AuthToken,
) -> AgentConfig {
    let name = node_address(namespace, service);
    let mut agent = AgentConfig::new(name.clone(), token);
    if let Some((host, port)) = config.agent_endpoints.get(&name) {
        agent.host = host.clone();
        agent.port = *port;
    }
    agent
}

/// The ring views of cluster `namespace/cluster`, read through the first joined node (one with a
/// current ring hash) that answers, [`NODES_TRIED`] at most; or why they cannot be known, as the
/// fallback reason the decision reports.
pub(crate) async fn read_cluster_views(
    ctx: &Context,
    namespace: &str,
    cluster: &str,
    members: &[MemberFacts],
) -> Result<Vec<RingView>, String> {
    let token = read_token(&ctx.client, namespace, cluster).await.map_err(|err| err.to_string())?;
    let joined = members
        .iter()
        .filter(|m| m.annotations.contains_key(keys::CURRENT_TOKEN_RING_HASH))
        .take(NODES_TRIED);
    let mut failures = Vec::new();
    for member in joined {
        let config = agent_config(&ctx.config, namespace, &member.service, token.clone());
        let read = match AgentClient::new(config) {
            Ok(agent) => read_ring_views(&agent).await,
            Err(err) => Err(ReadError::Agent(err)),
        };
        match read {
            Ok(views) => return Ok(views),
            Err(err) => failures.push(format!("through {}: {err}", member.service)),
        }
    }
    if failures.is_empty() {
        return Err("no node has joined the ring yet".into());
    }
    Err(failures.join("; "))
}
