//! Reads the ring views of a cluster through one node's agent: the thin layer around
//! [`super::ownership`]. The vnode keyspaces are listed, each one's effective ownership read
//! (a few calls at a time), keyspaces replicated alike grouped, and `describe_ring` fetched once
//! per group. Any failure makes the whole reading unknown: a partial view could hide a loss.

use std::collections::{BTreeMap, BTreeSet};

use futures::{StreamExt, TryStreamExt};

use groundskeeper_job::scylla::agent::{AgentClient, AgentError, KeyspaceType, Replication};

use super::ownership::{RingView, replication_groups};

/// Ownership reads in flight at once on one agent.
pub const CONCURRENT_READS: usize = 8;

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
    let keyspaces = agent
        .keyspaces(KeyspaceType::NonLocalStrategy, Replication::Vnodes)
        .await?;
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
