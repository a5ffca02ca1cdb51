//! Reads the ring views of a cluster through one node's agent: the thin layer around
//! [`super::ownership`]. The vnode keyspaces are listed, each one's effective ownership read
//! (a few calls at a time), keyspaces replicated alike grouped, and `describe_ring` fetched once
//! per group. Any failure makes the whole reading unknown: a partial view could hide a loss.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use futures::{StreamExt, TryStreamExt};

use groundskeeper_protocol::keys;
use groundskeeper_stores::scylla::agent::{AgentClient, AgentError, KeyspaceType, Replication};
use groundskeeper_stores::scylla::token::AuthToken;

use super::agent::{agent_config, read_token};
use super::ownership::{RingView, one_ring, replication_groups};
use super::ring_quiet::fingerprint;
use crate::runtime::context::Context;
use groundskeeper_api::scylla::facts::MemberFacts;

/// Nodes asked in turn for the ring views before ownership counts as unknown.
pub(crate) const NODES_TRIED: usize = 2;

/// Ownership reads in flight at once on one agent.
pub(crate) const CONCURRENT_READS: usize = 8;

/// Readings through one agent before a ring that keeps moving makes ownership unknown for the
/// pass. A reading takes a few calls; a ring change lands between two of them only rarely.
pub(crate) const READINGS_WHILE_THE_RING_MOVES: usize = 3;

/// What could not be read, for the decision's fallback reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    #[error("{0}")]
    Agent(#[from] AgentError),
    #[error("{0}")]
    Ownership(#[from] super::ownership::OwnershipError),
    #[error(
        "the ring changed while its views were read, {0} times in a row (nodes joining or leaving): read again at the next pass"
    )]
    RingMoving(usize),
}

/// The ring views of every vnode keyspace (tablet and local keyspaces have none), one per
/// replication group, all read on one ring: a reading that spans a ring change is read again
/// ([`READINGS_WHILE_THE_RING_MOVES`] at most).
pub async fn read_ring_views(agent: &AgentClient) -> Result<Vec<RingView>, ReadError> {
    for _ in 0..READINGS_WHILE_THE_RING_MOVES {
        let views = read_ring_views_once(agent).await?;
        if one_ring(&views) {
            return Ok(views);
        }
        tracing::debug!("the ring changed while its views were read: reading again");
    }
    Err(ReadError::RingMoving(READINGS_WHILE_THE_RING_MOVES))
}

async fn read_ring_views_once(agent: &AgentClient) -> Result<Vec<RingView>, ReadError> {
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

/// The ring views of cluster `namespace/cluster`, read through the first joined node (one with a
/// current ring hash) that answers, [`NODES_TRIED`] at most; or why they cannot be known, as the
/// fallback reason the decision reports.
pub(crate) async fn read_cluster_views(
    ctx: &Context,
    namespace: &str,
    cluster: &str,
    members: &[MemberFacts],
) -> Result<Vec<RingView>, String> {
    read_cluster_views_cached(ctx, &ViewCache::default(), namespace, cluster, members).await
}

/// [`read_cluster_views`], from `cache` when neither the schema version (one small call to the
/// agent) nor what the member Services say of the ring moved since the views were read, and no
/// member is still joining (one that has joined may not show in its Service yet).
pub(crate) async fn read_cluster_views_cached(
    ctx: &Context,
    cache: &ViewCache,
    namespace: &str,
    cluster: &str,
    members: &[MemberFacts],
) -> Result<Vec<RingView>, String> {
    let token = read_token(&ctx.client, namespace, cluster).await.map_err(|err| err.to_string())?;
    let joined = members
        .iter()
        .filter(|m| m.annotations.contains_key(keys::CURRENT_TOKEN_RING_HASH))
        .take(NODES_TRIED);
    let ring = ring_key(members);
    let joining = members.iter().any(|m| !m.annotations.contains_key(keys::CURRENT_TOKEN_RING_HASH));
    let mut failures = Vec::new();
    for member in joined {
        let config = agent_config(&super::config::Config::of(ctx), namespace, &member.service, token.clone());
        let read = match AgentClient::new(config) {
            Ok(agent) => read_through(&agent, cache, (namespace, cluster), ring, joining).await,
            Err(err) => Err(ReadError::Agent(err)),
        };
        match read {
            Ok(views) => {
                cache.remember_agent(namespace, cluster, &member.service, &token);
                return Ok(views);
            }
            Err(err) => failures.push(format!("through {}: {err}", member.service)),
        }
    }
    // Nothing read: nothing kept, and nothing for the schema watch to ask.
    cache.forget(namespace, cluster);
    if failures.is_empty() {
        return Err("no node has joined the ring yet".into());
    }
    Err(failures.join("; "))
}

/// What the views depend on besides the schema: the ring as the member Services say
/// ([`fingerprint`]) and each member's address (a pod restarted with a new IP where nodes
/// broadcast their pod IP).
fn ring_key(members: &[MemberFacts]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut addresses: Vec<(&str, Option<&str>)> =
        members.iter().map(|m| (m.service.as_str(), m.address.as_deref())).collect();
    addresses.sort_unstable();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (fingerprint(members), addresses).hash(&mut hasher);
    hasher.finish()
}

/// The views through one agent: the cached ones when still good for its schema version and the
/// ring (`ring`: the member Services' [`fingerprint`]; `joining`: a member has no ring hash yet),
/// else read (and cached).
pub async fn read_through(
    agent: &AgentClient,
    cache: &ViewCache,
    (namespace, cluster): (&str, &str),
    ring: u64,
    joining: bool,
) -> Result<Vec<RingView>, ReadError> {
    let key = ViewKey { schema: agent.schema_version().await?, ring };
    if !joining && let Some(views) = cache.views_for(namespace, cluster, &key) {
        return Ok(views);
    }
    let views = read_ring_views(agent).await?;
    cache.store(namespace, cluster, key, views.clone());
    Ok(views)
}

/// What a cluster's ring views were read for: the schema version (replication settings) and the
/// ring as the member Services say ([`fingerprint`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ViewKey {
    schema: String,
    ring: u64,
}

#[derive(Clone)]
struct CachedViews {
    key: ViewKey,
    views: Vec<RingView>,
    /// The member whose agent answered, and the token it took: the schema watch asks it again.
    through: Option<(String, AuthToken)>,
}

/// Each cluster's ring views as last read, in the trigger's memory: a pass over a cluster where
/// nothing moved reads one schema version instead of every keyspace's ownership and ring (several
/// MB at 100 nodes). Kept in memory only; a restart reads afresh.
#[derive(Default)]
pub struct ViewCache {
    entries: Mutex<HashMap<(String, String), CachedViews>>,
}

impl ViewCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), CachedViews>> {
        self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn views_for(&self, namespace: &str, cluster: &str, key: &ViewKey) -> Option<Vec<RingView>> {
        let entries = self.lock();
        let cached = entries.get(&(namespace.to_owned(), cluster.to_owned()))?;
        (cached.key == *key).then(|| cached.views.clone())
    }

    fn store(&self, namespace: &str, cluster: &str, key: ViewKey, views: Vec<RingView>) {
        let mut entries = self.lock();
        let through =
            entries.get(&(namespace.to_owned(), cluster.to_owned())).and_then(|c| c.through.clone());
        entries.insert((namespace.to_owned(), cluster.to_owned()), CachedViews { key, views, through });
    }

    fn remember_agent(&self, namespace: &str, cluster: &str, service: &str, token: &AuthToken) {
        if let Some(cached) = self.lock().get_mut(&(namespace.to_owned(), cluster.to_owned())) {
            cached.through = Some((service.to_owned(), token.clone()));
        }
    }

    pub(crate) fn forget(&self, namespace: &str, cluster: &str) {
        self.lock().remove(&(namespace.to_owned(), cluster.to_owned()));
    }

    /// The clusters whose views are cached, with the schema version they were read for and the
    /// agent to ask.
    fn watched(&self) -> Vec<((String, String), String, String, AuthToken)> {
        self.lock()
            .iter()
            .filter_map(|(cluster, cached)| {
                let (service, token) = cached.through.clone()?;
                Some((cluster.clone(), cached.key.schema.clone(), service, token))
            })
            .collect()
    }
}

/// Asks each cluster whose ring views are cached for its schema version every
/// `--cleanup-schema-check-interval`, and sends the cluster on `wake` when it moved: a
/// replication change (a factor lowered, a strategy changed, a datacenter added or dropped)
/// moves no Kubernetes object, and would otherwise be seen only at the idle resync. One small
/// call per cluster and interval; the views themselves are read by the pass it wakes.
pub(crate) async fn watch_schema_versions(
    ctx: Arc<Context>,
    cache: Arc<ViewCache>,
    wake: tokio::sync::mpsc::Sender<
        kube::runtime::reflector::ObjectRef<groundskeeper_api::scylla::ScyllaCluster>,
    >,
) {
    let mut ticks = tokio::time::interval(super::config::Config::of(&ctx).cleanup_schema_check_interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        for ((namespace, cluster), schema, service, token) in cache.watched() {
            let config = agent_config(&super::config::Config::of(&ctx), &namespace, &service, token);
            let Ok(agent) = AgentClient::new(config) else { continue };
            // Unanswered (the cluster gone, its node down): the pass reads the views again, or
            // finds the cluster gone; either way the entry is dropped, so each change (or loss)
            // wakes the cluster once, and a cluster whose views are no longer read is not asked.
            let moved = agent.schema_version().await.map_or(true, |now| now != schema);
            if moved {
                tracing::debug!(%namespace, %cluster, "schema version moved: reading the ring views again");
                cache.forget(&namespace, &cluster);
                let cluster = kube::runtime::reflector::ObjectRef::new(&cluster).within(&namespace);
                if wake.send(cluster).await.is_err() {
                    return;
                }
            }
        }
    }
}
