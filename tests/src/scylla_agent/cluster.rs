//! One Scylla cluster's token ring and schema, shared by the agent stand-ins of its nodes.
//!
//! The ring is cluster-wide: every node's agent answers `GET /storage_service/tokens`,
//! `tokens/{endpoint}`, `keyspaces` and `describe_ring/{keyspace}` from the same [`Cluster`].
//! Nodes join with vnode tokens drawn from a seeded generator (the same seed gives the same ring),
//! or with tokens given by hand; they bootstrap (their tokens are pending: not in the ring, and
//! `tokens/{endpoint}` is empty, as Scylla reports a joining node) and become normal, or leave.
//! Keyspaces are created and altered (`ALTER KEYSPACE … WITH replication = …`) here.
//!
//! Replica placement follows Scylla's vnode strategies, written from their documented behaviour
//! and Scylla's `network_topology_strategy.cc`, independently of anything groundskeeper computes
//! (groundskeeper never places replicas: it reads `describe_ring`, so these tests check it against
//! a model it shares no code with):
//!
//! * the replicas of the range `(previous token, t]` are found walking the ring clockwise from
//!   `t` itself, so the first one is the node owning `t` (the primary replica);
//! * `SimpleStrategy`: the first `replication_factor` distinct nodes met (all of them when there
//!   are fewer);
//! * `NetworkTopologyStrategy`: per datacenter with a factor above zero and at least one node,
//!   `rf_left = min(rf, nodes in the DC)` and `acceptable_rack_repeats = rf - racks in the DC`.
//!   A node of a rack not yet used in its DC is taken; a node of a used rack is taken only while
//!   `acceptable_rack_repeats > 0` (which it then lowers). So replicas go to distinct racks first,
//!   and where the DC has fewer racks than its factor, the first nodes met in already-used racks
//!   make up the difference. The walk ends when every DC has its replicas or the ring is done.
//!   Datacenters named in the strategy but without nodes are skipped.
//! * `LocalStrategy`: the node answering; tablet keyspaces have no per-keyspace ring at all
//!   (Scylla fails with an internal error, see [`Cluster::describe_ring`]).
//!
//! Besides answering the API, the model keeps what each node holds data for, per keyspace
//! ([`Cluster::stale_ranges`]): a node's data covers every range it has replicated since its last
//! cleanup of that keyspace (ranges it gains are streamed to it; ranges it loses stay on disk),
//! and a cleanup shrinks it to what it replicates now. That is the ground truth a cleanup policy
//! is measured against: a node holding a range it no longer replicates is a missed cleanup.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Value, json};

/// Scylla's default `num_tokens`.
pub const DEFAULT_NUM_TOKENS: usize = 256;

/// How a keyspace is replicated (its `replication` map).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Strategy {
    /// `LocalStrategy`: node-local (`system`, `system_schema`).
    Local,
    /// `SimpleStrategy` with its `replication_factor`.
    Simple { rf: usize },
    /// `NetworkTopologyStrategy` with a factor per datacenter, on vnodes.
    NetworkTopology { dcs: BTreeMap<String, usize> },
    /// `NetworkTopologyStrategy` with tablets enabled: replicas are placed per tablet.
    Tablets { dcs: BTreeMap<String, usize> },
}

impl Strategy {
    /// `NetworkTopologyStrategy` on vnodes from `[(dc, rf)]`.
    pub fn nts(dcs: &[(&str, usize)]) -> Self {
        Strategy::NetworkTopology { dcs: dcs.iter().map(|(dc, rf)| ((*dc).to_owned(), *rf)).collect() }
    }

    /// `NetworkTopologyStrategy` with tablets from `[(dc, rf)]`.
    pub fn tablets(dcs: &[(&str, usize)]) -> Self {
        Strategy::Tablets { dcs: dcs.iter().map(|(dc, rf)| ((*dc).to_owned(), *rf)).collect() }
    }

    /// The stand-in's coarser view, for the routes that only filter keyspaces.
    pub fn kind(&self) -> super::KeyspaceKind {
        match self {
            Strategy::Local => super::KeyspaceKind::Local,
            Strategy::Simple { .. } | Strategy::NetworkTopology { .. } => super::KeyspaceKind::Vnodes,
            Strategy::Tablets { .. } => super::KeyspaceKind::Tablets,
        }
    }
}

/// Where a node is and whether its tokens are in the ring yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub datacenter: String,
    pub rack: String,
    pub tokens: Vec<i64>,
    /// Still bootstrapping: its tokens are pending, not part of the ring.
    pub joining: bool,
}

/// Why the model refused a change or a question.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterError {
    #[error("Keyspace {0} Does not exist")]
    NoKeyspace(String),
    #[error("Tried to obtain per-keyspace effective replication map of {0} but it's per-table")]
    PerTable(String),
    #[error("node {0} is not in the cluster")]
    NoNode(String),
    #[error("node {0} is already in the cluster")]
    NodeExists(String),
    #[error("token {0} is already owned by another node")]
    TokenTaken(i64),
}

/// Sorted disjoint `(start, end]` token intervals over `(i64::MIN, i64::MAX]`.
pub type Intervals = Vec<(i64, i64)>;
/// Per endpoint, the intervals it replicates under one strategy. Shared (not copied) with every
/// keyspace of that strategy a node holds exactly that for: a ring of 100 nodes × 256 vnodes
/// with 500 keyspaces would otherwise copy tens of thousands of interval lists.
type Placement = Arc<BTreeMap<String, Arc<Intervals>>>;

/// One row of `describe_ring`: a range `(start, end]` and its replicas, primary first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeReplicas {
    pub start: i64,
    pub end: i64,
    pub endpoints: Vec<String>,
}

#[derive(Debug)]
struct State {
    seed: u64,
    num_tokens: usize,
    /// Joins so far: part of the token seed, so a node re-added under the same address gets new
    /// tokens (as a replaced or re-bootstrapped Scylla node does).
    joins: u64,
    nodes: BTreeMap<String, Node>,
    /// In creation order.
    keyspaces: Vec<(String, Strategy)>,
    /// Per (endpoint, keyspace): the ranges the node holds data for, as sorted disjoint
    /// `(start, end]` intervals over `(i64::MIN, i64::MAX]`.
    held: BTreeMap<(String, String), Arc<Intervals>>,
    /// Schema changes so far (keyspaces created or altered): Scylla's schema version moves with each.
    schema_changes: u64,
    /// Per vnode strategy: the ranges each node replicates. Cleared when the ring changes.
    placements: BTreeMap<Strategy, Placement>,
    /// Per vnode strategy: every range with its replicas. Cleared when the ring changes.
    rows: BTreeMap<Strategy, Arc<Vec<RangeReplicas>>>,
}

/// A cluster model, shared (cheap to clone) between the agents of its nodes and the test.
#[derive(Debug, Clone)]
pub struct Cluster {
    state: Arc<Mutex<State>>,
}

impl Cluster {
    /// An empty cluster with Scylla's system keyspaces (`system_distributed` with
    /// `SimpleStrategy` 3 and `system_traces` with 2, as Scylla creates them). `seed` fixes every
    /// token drawn; `num_tokens` is each node's vnode count.
    pub fn new(seed: u64, num_tokens: usize) -> Self {
        let keyspaces = vec![
            ("system".to_owned(), Strategy::Local),
            ("system_schema".to_owned(), Strategy::Local),
            ("system_distributed".to_owned(), Strategy::Simple { rf: 3 }),
            ("system_traces".to_owned(), Strategy::Simple { rf: 2 }),
        ];
        Self {
            state: Arc::new(Mutex::new(State {
                seed,
                num_tokens,
                joins: 0,
                nodes: BTreeMap::new(),
                keyspaces,
                held: BTreeMap::new(),
                schema_changes: 0,
                placements: BTreeMap::new(),
                rows: BTreeMap::new(),
            })),
        }
    }

    /// A node joins and finishes bootstrapping at once, with `num_tokens` seeded tokens.
    pub fn join(&self, endpoint: &str, datacenter: &str, rack: &str) -> Result<Vec<i64>, ClusterError> {
        let tokens = self.start_joining(endpoint, datacenter, rack)?;
        self.finish_joining(endpoint)?;
        Ok(tokens)
    }

    /// Nodes `(endpoint, datacenter, rack)` join together (one ring change: large clusters).
    pub fn join_all(&self, nodes: &[(&str, &str, &str)]) -> Result<(), ClusterError> {
        let mut state = self.lock();
        for (endpoint, datacenter, rack) in nodes {
            if state.nodes.contains_key(*endpoint) {
                return Err(ClusterError::NodeExists((*endpoint).to_owned()));
            }
            state.joins += 1;
            let tokens = state.draw_tokens(endpoint);
            let node = Node {
                datacenter: (*datacenter).to_owned(),
                rack: (*rack).to_owned(),
                tokens,
                joining: false,
            };
            state.nodes.insert((*endpoint).to_owned(), node);
        }
        state.ring_changed();
        Ok(())
    }

    /// A node joins with exactly `tokens` (hand-computed rings in tests).
    pub fn join_with_tokens(
        &self,
        endpoint: &str,
        datacenter: &str,
        rack: &str,
        tokens: &[i64],
    ) -> Result<(), ClusterError> {
        let mut state = self.lock();
        if state.nodes.contains_key(endpoint) {
            return Err(ClusterError::NodeExists(endpoint.to_owned()));
        }
        if let Some(taken) = tokens.iter().find(|t| state.owner_of(**t).is_some()) {
            return Err(ClusterError::TokenTaken(*taken));
        }
        state.joins += 1;
        state.nodes.insert(
            endpoint.to_owned(),
            Node {
                datacenter: datacenter.to_owned(),
                rack: rack.to_owned(),
                tokens: tokens.to_vec(),
                joining: false,
            },
        );
        state.ring_changed();
        Ok(())
    }

    /// A node starts bootstrapping: it has its tokens, but they are pending.
    pub fn start_joining(
        &self,
        endpoint: &str,
        datacenter: &str,
        rack: &str,
    ) -> Result<Vec<i64>, ClusterError> {
        let mut state = self.lock();
        if state.nodes.contains_key(endpoint) {
            return Err(ClusterError::NodeExists(endpoint.to_owned()));
        }
        state.joins += 1;
        let tokens = state.draw_tokens(endpoint);
        state.nodes.insert(
            endpoint.to_owned(),
            Node {
                datacenter: datacenter.to_owned(),
                rack: rack.to_owned(),
                tokens: tokens.clone(),
                joining: true,
            },
        );
        Ok(tokens)
    }

    /// The bootstrap ends: the node's tokens enter the ring, and it receives its ranges' data.
    pub fn finish_joining(&self, endpoint: &str) -> Result<(), ClusterError> {
        let mut state = self.lock();
        let node = state.nodes.get_mut(endpoint).ok_or_else(|| ClusterError::NoNode(endpoint.to_owned()))?;
        node.joining = false;
        state.ring_changed();
        Ok(())
    }

    /// A node is decommissioned: its ranges move to the others (which receive their data) and
    /// it leaves the ring, its data with it.
    pub fn decommission(&self, endpoint: &str) -> Result<(), ClusterError> {
        let mut state = self.lock();
        if state.nodes.remove(endpoint).is_none() {
            return Err(ClusterError::NoNode(endpoint.to_owned()));
        }
        state.held.retain(|(node, _), _| node != endpoint);
        state.ring_changed();
        Ok(())
    }

    /// `CREATE KEYSPACE`: a new keyspace holds no data anywhere yet, but from now on each node
    /// holds data for the ranges it replicates.
    pub fn create_keyspace(&self, name: &str, strategy: Strategy) {
        let mut state = self.lock();
        state.keyspaces.retain(|(n, _)| n != name);
        state.keyspaces.push((name.to_owned(), strategy));
        state.schema_changes += 1;
        state.data_follows(&[name.to_owned()]);
    }

    /// `GET /storage_service/schema_version`: a UUID that moves with every schema change.
    pub fn schema_version(&self) -> String {
        format!("5b1c2e0a-0000-1000-8000-{:012x}", self.lock().schema_changes)
    }

    /// `ALTER KEYSPACE … WITH replication = …`. Ranges a node gains are repaired onto it; those
    /// it loses stay on its disk until a cleanup.
    pub fn alter_keyspace(&self, name: &str, strategy: Strategy) -> Result<(), ClusterError> {
        let mut state = self.lock();
        let entry = state
            .keyspaces
            .iter_mut()
            .find(|(n, _)| n == name)
            .ok_or_else(|| ClusterError::NoKeyspace(name.to_owned()))?;
        entry.1 = strategy;
        state.schema_changes += 1;
        state.data_follows(&[name.to_owned()]);
        Ok(())
    }

    /// Keyspaces with their strategies, in creation order.
    pub fn keyspaces(&self) -> Vec<(String, Strategy)> {
        self.lock().keyspaces.clone()
    }

    pub fn node(&self, endpoint: &str) -> Option<Node> {
        self.lock().nodes.get(endpoint).cloned()
    }

    /// Every endpoint, joining ones included.
    pub fn endpoints(&self) -> Vec<String> {
        self.lock().nodes.keys().cloned().collect()
    }

    /// `GET /storage_service/tokens`: every token of the ring, ascending.
    pub fn ring(&self) -> Vec<i64> {
        self.lock().ring().into_iter().map(|(t, _)| t).collect()
    }

    /// `GET /storage_service/tokens/{endpoint}`: the node's tokens, ascending; none while it
    /// bootstraps or when it is not a member.
    pub fn node_tokens(&self, endpoint: &str) -> Vec<i64> {
        let state = self.lock();
        let mut tokens = match state.nodes.get(endpoint) {
            Some(node) if !node.joining => node.tokens.clone(),
            _ => Vec::new(),
        };
        tokens.sort_unstable();
        tokens
    }

    /// Every range of the ring with its replicas for `keyspace`, in ring order (the wrapping
    /// range `(last, first]` last), as `asking` (the node answering) sees it.
    pub fn describe_ring(&self, keyspace: &str, asking: &str) -> Result<Vec<RangeReplicas>, ClusterError> {
        let mut state = self.lock();
        let strategy = state.strategy(keyspace)?.clone();
        match strategy {
            Strategy::Tablets { .. } => Err(ClusterError::PerTable(keyspace.to_owned())),
            Strategy::Local => Ok(state.ranges_with_replicas(&strategy, asking)),
            vnodes => Ok(state.vnode_rows(&vnodes).as_ref().clone()),
        }
    }

    /// The `token_range` objects of `GET /storage_service/describe_ring/{keyspace}`, in the
    /// order Scylla gives them: none in particular (it walks a hash map). Here a fixed shuffle
    /// of ring order, so a client that assumes ring order fails in tests.
    pub fn describe_ring_json(&self, keyspace: &str, asking: &str) -> Result<Value, ClusterError> {
        let ranges = self.describe_ring(keyspace, asking)?;
        let state = self.lock();
        let mut rows: Vec<(u64, Value)> = ranges
            .iter()
            .map(|range| (mix(range.end as u64 ^ state.seed), state.token_range_json(range)))
            .collect();
        rows.sort_by_key(|(key, _)| *key);
        Ok(Value::Array(rows.into_iter().map(|(_, row)| row).collect()))
    }

    /// `GET /storage_service/ownership/{keyspace}`: per normal node (by address), the share of
    /// the ring it replicates for `keyspace`, as the `float` Scylla computes.
    pub fn effective_ownership(
        &self,
        keyspace: &str,
        asking: &str,
    ) -> Result<Vec<(String, f32)>, ClusterError> {
        let mut state = self.lock();
        let strategy = state.strategy(keyspace)?.clone();
        let endpoints: Vec<String> =
            state.nodes.iter().filter(|(_, n)| !n.joining).map(|(e, _)| e.clone()).collect();
        let placement = match strategy {
            Strategy::Tablets { .. } => return Err(ClusterError::PerTable(keyspace.to_owned())),
            Strategy::Local => {
                let whole = Arc::new(vec![(i64::MIN, i64::MAX)]);
                Arc::new(BTreeMap::from([(asking.to_owned(), whole)]))
            }
            vnodes => state.placement(&vnodes),
        };
        Ok(endpoints
            .into_iter()
            .map(|endpoint| {
                let width: u128 = placement
                    .get(&endpoint)
                    .into_iter()
                    .flat_map(|intervals| intervals.iter())
                    .map(|(s, e)| (i128::from(*e) - i128::from(*s)) as u128)
                    .sum();
                let share = width as f64 / 2f64.powi(64);
                (endpoint, share as f32)
            })
            .collect())
    }

    /// The ranges `endpoint` replicates for `keyspace` now, as sorted disjoint `(start, end]`
    /// intervals over `(i64::MIN, i64::MAX]`.
    pub fn replicated_ranges(&self, keyspace: &str, endpoint: &str) -> Result<Vec<(i64, i64)>, ClusterError> {
        self.lock().replicated(keyspace, endpoint).map(|intervals| intervals.as_ref().clone())
    }

    /// A cleanup of `keyspace` on `endpoint` finished: the node now holds only what it
    /// replicates.
    pub fn cleaned(&self, endpoint: &str, keyspace: &str) {
        let mut state = self.lock();
        if state.nodes.contains_key(endpoint)
            && let Ok(now) = state.replicated(keyspace, endpoint)
        {
            state.held.insert((endpoint.to_owned(), keyspace.to_owned()), now);
        }
    }

    /// Ranges `endpoint` holds data for in `keyspace` but no longer replicates: what a cleanup
    /// would drop. Empty when the node is clean.
    pub fn stale_ranges(&self, endpoint: &str, keyspace: &str) -> Vec<(i64, i64)> {
        let mut state = self.lock();
        let held = state.held.get(&(endpoint.to_owned(), keyspace.to_owned())).cloned().unwrap_or_default();
        let now = state.replicated(keyspace, endpoint).unwrap_or_default();
        if Arc::ptr_eq(&held, &now) {
            return Vec::new();
        }
        subtract(&held, &now)
    }

    /// Every (endpoint, keyspace) holding data it no longer replicates.
    pub fn stale(&self) -> Vec<(String, String)> {
        let keys: Vec<(String, String)> = self.lock().held.keys().cloned().collect();
        keys.into_iter()
            .filter(|(endpoint, keyspace)| !self.stale_ranges(endpoint, keyspace).is_empty())
            .collect()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().expect("cluster model")
    }
}

impl State {
    fn strategy(&self, keyspace: &str) -> Result<&Strategy, ClusterError> {
        self.keyspaces
            .iter()
            .find(|(n, _)| n == keyspace)
            .map(|(_, s)| s)
            .ok_or_else(|| ClusterError::NoKeyspace(keyspace.to_owned()))
    }

    fn owner_of(&self, token: i64) -> Option<&str> {
        self.nodes
            .iter()
            .find(|(_, node)| node.tokens.contains(&token))
            .map(|(endpoint, _)| endpoint.as_str())
    }

    /// Normal tokens, ascending, with their owners.
    fn ring(&self) -> Vec<(i64, &str)> {
        let mut ring: Vec<(i64, &str)> = self
            .nodes
            .iter()
            .filter(|(_, node)| !node.joining)
            .flat_map(|(endpoint, node)| node.tokens.iter().map(move |t| (*t, endpoint.as_str())))
            .collect();
        ring.sort_unstable();
        ring
    }

    /// [`State::ring`] with each token's node, for placement.
    fn placed_ring(&self) -> Vec<(i64, &str, &Node)> {
        let mut ring: Vec<(i64, &str, &Node)> = self
            .nodes
            .iter()
            .filter(|(_, node)| !node.joining)
            .flat_map(|(endpoint, node)| node.tokens.iter().map(move |t| (*t, endpoint.as_str(), node)))
            .collect();
        ring.sort_unstable_by_key(|(token, _, _)| *token);
        ring
    }

    /// `num_tokens` fresh tokens from the seed, the endpoint and the join count; never
    /// `i64::MIN` (Murmur3's minimum token, which no node can own) nor a token already owned.
    fn draw_tokens(&self, endpoint: &str) -> Vec<i64> {
        let mut taken: BTreeSet<i64> = self.nodes.values().flat_map(|n| n.tokens.iter().copied()).collect();
        let mut x = self.seed ^ fnv1a(endpoint.as_bytes()) ^ mix(self.joins);
        let mut tokens = Vec::with_capacity(self.num_tokens);
        while tokens.len() < self.num_tokens {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let token = mix(x) as i64;
            if token != i64::MIN && taken.insert(token) {
                tokens.push(token);
            }
        }
        tokens.sort_unstable();
        tokens
    }

    /// Every ring range with its replicas under a strategy that is not `Tablets`.
    fn ranges_with_replicas(&self, strategy: &Strategy, asking: &str) -> Vec<RangeReplicas> {
        let ring = self.placed_ring();
        let trackers = match strategy {
            Strategy::NetworkTopology { dcs } => self.nts_trackers(dcs),
            _ => BTreeMap::new(),
        };
        let mut rows = Vec::with_capacity(ring.len());
        for (i, (end, _, _)) in ring.iter().enumerate() {
            let start = ring[(i + ring.len() - 1) % ring.len()].0;
            let endpoints = match strategy {
                Strategy::Local => vec![asking],
                Strategy::Simple { rf } => simple_replicas(&ring, i, *rf),
                Strategy::NetworkTopology { .. } => self.nts_replicas(&ring, i, trackers.clone()),
                Strategy::Tablets { .. } => Vec::new(),
            };
            rows.push(RangeReplicas {
                start,
                end: *end,
                endpoints: endpoints.into_iter().map(str::to_owned).collect(),
            });
        }
        rows
    }

    /// Per datacenter of `dcs` with a factor and nodes: `(rf_left, acceptable_rack_repeats)` as
    /// Scylla's tracker starts them.
    fn nts_trackers<'d>(&self, dcs: &'d BTreeMap<String, usize>) -> BTreeMap<&'d str, Dc> {
        let mut trackers = BTreeMap::new();
        for (dc, rf) in dcs {
            let in_dc = self.nodes.values().filter(|n| !n.joining && &n.datacenter == dc);
            let node_count = in_dc.clone().count();
            let rack_count = in_dc.map(|n| n.rack.as_str()).collect::<BTreeSet<_>>().len();
            if *rf == 0 || node_count == 0 {
                continue;
            }
            let tracker = Dc {
                rf_left: (*rf).min(node_count),
                acceptable_rack_repeats: *rf as i64 - rack_count as i64,
            };
            trackers.insert(dc.as_str(), tracker);
        }
        trackers
    }

    /// Scylla's `natural_endpoints_tracker` for the range ending at `ring[from]`, starting from
    /// `trackers` ([`State::nts_trackers`]).
    fn nts_replicas<'a>(
        &'a self,
        ring: &[(i64, &'a str, &'a Node)],
        from: usize,
        mut trackers: BTreeMap<&str, Dc>,
    ) -> Vec<&'a str> {
        let mut dcs_to_fill = trackers.len();
        let mut replicas: Vec<&str> = Vec::new();
        let mut seen_racks: BTreeSet<(&str, &str)> = BTreeSet::new();
        for step in 0..ring.len() {
            if dcs_to_fill == 0 {
                break;
            }
            let (_, endpoint, node) = ring[(from + step) % ring.len()];
            let Some(dc) = trackers.get_mut(node.datacenter.as_str()) else {
                continue;
            };
            if dc.rf_left == 0 || replicas.contains(&endpoint) {
                continue;
            }
            if seen_racks.insert((node.datacenter.as_str(), node.rack.as_str())) {
                dc.rf_left -= 1;
            } else if dc.acceptable_rack_repeats > 0 {
                dc.acceptable_rack_repeats -= 1;
                dc.rf_left -= 1;
            } else {
                continue;
            }
            replicas.push(endpoint);
            if dc.rf_left == 0 {
                dcs_to_fill -= 1;
            }
        }
        replicas
    }

    /// The ranges `endpoint` replicates for `keyspace`; none for local and tablet keyspaces.
    fn replicated(&mut self, keyspace: &str, endpoint: &str) -> Result<Arc<Intervals>, ClusterError> {
        let strategy = self.strategy(keyspace)?.clone();
        Ok(self.placement(&strategy).get(endpoint).cloned().unwrap_or_default())
    }

    /// Every range with its replicas under a vnode `strategy` (cached until the ring changes).
    fn vnode_rows(&mut self, strategy: &Strategy) -> Arc<Vec<RangeReplicas>> {
        if let Some(cached) = self.rows.get(strategy) {
            return cached.clone();
        }
        let rows = Arc::new(self.ranges_with_replicas(strategy, ""));
        self.rows.insert(strategy.clone(), rows.clone());
        rows
    }

    /// Per node, the ranges it replicates under `strategy` (cached until the ring changes).
    fn placement(&mut self, strategy: &Strategy) -> Placement {
        if let Some(cached) = self.placements.get(strategy) {
            return cached.clone();
        }
        let mut by_node: BTreeMap<String, Vec<(i64, i64)>> = BTreeMap::new();
        if matches!(strategy, Strategy::Simple { .. } | Strategy::NetworkTopology { .. }) {
            for row in self.vnode_rows(strategy).iter() {
                for endpoint in &row.endpoints {
                    match by_node.get_mut(endpoint) {
                        Some(ranges) => ranges.extend(unwrap_range(row.start, row.end)),
                        None => {
                            by_node.insert(endpoint.clone(), unwrap_range(row.start, row.end));
                        }
                    }
                }
            }
        }
        let by_node: BTreeMap<String, Arc<Intervals>> =
            by_node.into_iter().map(|(e, ranges)| (e, Arc::new(union(ranges)))).collect();
        let by_node = Arc::new(by_node);
        self.placements.insert(strategy.clone(), by_node.clone());
        by_node
    }

    /// After the ring changed: placements are recomputed and every keyspace's data follows.
    fn ring_changed(&mut self) {
        self.placements.clear();
        self.rows.clear();
        let keyspaces: Vec<String> = self.keyspaces.iter().map(|(n, _)| n.clone()).collect();
        self.data_follows(&keyspaces);
    }

    /// Every node holds data for what it replicates now in `keyspaces`, on top of what it held
    /// (ranges gained are streamed or repaired onto it; nothing is dropped without a cleanup).
    fn data_follows(&mut self, keyspaces: &[String]) {
        let endpoints: Vec<String> =
            self.nodes.iter().filter(|(_, n)| !n.joining).map(|(e, _)| e.clone()).collect();
        for keyspace in keyspaces {
            let Ok(strategy) = self.strategy(keyspace).cloned() else {
                continue;
            };
            if !matches!(strategy, Strategy::Simple { .. } | Strategy::NetworkTopology { .. }) {
                continue;
            }
            let placement = self.placement(&strategy);
            for endpoint in &endpoints {
                let key = (endpoint.clone(), keyspace.clone());
                let replicated = placement.get(endpoint).cloned().unwrap_or_default();
                let held = match self.held.remove(&key) {
                    Some(held) if !Arc::ptr_eq(&held, &replicated) => {
                        let mut both = held.as_ref().clone();
                        both.extend(replicated.iter().copied());
                        Arc::new(union(both))
                    }
                    _ => replicated,
                };
                self.held.insert(key, held);
            }
        }
    }

    fn token_range_json(&self, range: &RangeReplicas) -> Value {
        let details: Vec<Value> = range
            .endpoints
            .iter()
            .map(|endpoint| {
                let node = self.nodes.get(endpoint);
                json!({
                    "host": endpoint,
                    "datacenter": node.map(|n| n.datacenter.as_str()).unwrap_or_default(),
                    "rack": node.map(|n| n.rack.as_str()).unwrap_or_default(),
                })
            })
            .collect();
        json!({
            "start_token": range.start.to_string(),
            "end_token": range.end.to_string(),
            "endpoints": range.endpoints,
            // scylla-operator sets broadcast_rpc_address to the broadcast address.
            "rpc_endpoints": range.endpoints,
            "endpoint_details": details,
        })
    }
}

/// A datacenter's replicas still to place, in Scylla's `natural_endpoints_tracker`.
#[derive(Debug, Clone)]
struct Dc {
    rf_left: usize,
    acceptable_rack_repeats: i64,
}

/// `SimpleStrategy`: the next `rf` distinct nodes clockwise from `ring[from]`.
fn simple_replicas<'a>(ring: &[(i64, &'a str, &'a Node)], from: usize, rf: usize) -> Vec<&'a str> {
    let mut replicas: Vec<&str> = Vec::new();
    for step in 0..ring.len() {
        if replicas.len() == rf {
            break;
        }
        let endpoint = ring[(from + step) % ring.len()].1;
        if !replicas.contains(&endpoint) {
            replicas.push(endpoint);
        }
    }
    replicas
}

/// `(start, end]` as non-wrapping intervals over `(i64::MIN, i64::MAX]`; `start == end` is the
/// whole ring (a ring of one token).
pub fn unwrap_range(start: i64, end: i64) -> Vec<(i64, i64)> {
    if start < end {
        vec![(start, end)]
    } else if start == end {
        vec![(i64::MIN, i64::MAX)]
    } else {
        let mut parts = vec![(i64::MIN, end)];
        if start < i64::MAX {
            parts.push((start, i64::MAX));
        }
        parts.retain(|(s, e)| s < e);
        parts
    }
}

/// Sorted, merged `(start, end]` intervals.
fn union(mut intervals: Vec<(i64, i64)>) -> Vec<(i64, i64)> {
    intervals.sort_unstable();
    let mut merged: Vec<(i64, i64)> = Vec::with_capacity(intervals.len());
    for (start, end) in intervals {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    merged
}

/// `a` minus `b`, both sorted and merged.
fn subtract(a: &[(i64, i64)], b: &[(i64, i64)]) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    for &(start, end) in a {
        let mut cursor = start;
        for &(bs, be) in b.iter().filter(|(bs, be)| *be > start && *bs < end) {
            if bs > cursor {
                out.push((cursor, bs));
            }
            cursor = cursor.max(be);
        }
        if cursor < end {
            out.push((cursor, end));
        }
    }
    out
}

/// splitmix64's finaliser: spreads the bits of a counter over the whole word.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// FNV-1a: a stable hash of an endpoint's name (std's hasher may change between releases).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xCBF2_9CE4_8422_2325, |hash, b| (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01B3))
}

#[cfg(test)]
mod tests;
