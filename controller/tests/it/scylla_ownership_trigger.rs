//! The cleanup trigger's decision with ownership known, on the agent stand-in's cluster model:
//! snapshots built from the model (ring hash, member addresses, the ring views the controller
//! reads), the plan's actions carried out on the member annotations as `apply` does, and a
//! submitted task's nodes cleaned in the model and recorded as the task controller records them.
//! Every case is checked against the model's ground truth of stale data.

use std::collections::{BTreeMap, BTreeSet};

use groundskeeper_api::scylla::coexistence::{
    JOB_CONTROLLER_PROGRESSING, OperatorCleanup, SCYLLA_OPERATOR_CLEANS_UP,
};
use groundskeeper_api::scylla::facts::*;
use groundskeeper_controller::scylla::decide::*;
use groundskeeper_controller::scylla::members_record::*;
use groundskeeper_controller::scylla::ownership::{OWNED_AT_LAST_CLEANUP, RingView, replication_groups};
use groundskeeper_controller::scylla::record::{cleaned_record, ownership_after_cleanup};
use groundskeeper_e2e::scylla_agent::cluster::{Cluster, Strategy};
use groundskeeper_protocol::{keys, ring_hash};
use groundskeeper_stores::scylla::agent::{Mapper, TokenRange};

fn now() -> jiff::Timestamp {
    "2026-11-21T12:00:00Z".parse().unwrap()
}

fn condition(type_: &str, status: &str) -> ConditionFacts {
    ConditionFacts { type_: type_.into(), status: status.into(), ..ConditionFacts::default() }
}

/// One ScyllaCluster (one datacenter of the model) as groundskeeper sees it.
struct Sim {
    model: Cluster,
    /// The ScyllaCluster's datacenter: its members are the model's nodes there.
    dc: &'static str,
    /// Member annotations by node address.
    annotations: BTreeMap<String, BTreeMap<String, String>>,
    /// `Err`: the controller cannot read ownership.
    unknown: Option<String>,
    node_cleanups: usize,
    keyspace_cleanups: usize,
    /// scylla-operator's own cleanup runs for the cluster (its Job controller's condition).
    operator: bool,
    /// Whole-node cleanups scylla-operator's stand-in ran, per node.
    operator_cleanups: BTreeMap<String, usize>,
    /// Nodes in the ring whose member Services the trigger's list missed: it lists the
    /// Services first and reads the ring views after.
    unlisted: BTreeSet<String>,
}

fn vnode_keyspaces(model: &Cluster) -> Vec<String> {
    model
        .keyspaces()
        .into_iter()
        .filter(|(_, s)| matches!(s, Strategy::Simple { .. } | Strategy::NetworkTopology { .. }))
        .map(|(name, _)| name)
        .collect()
}

/// The ring views as `read_ring_views` builds them from the agent's answers.
fn views(model: &Cluster, asking: &str) -> Vec<RingView> {
    let shares: BTreeMap<String, Vec<Mapper>> = vnode_keyspaces(model)
        .into_iter()
        .map(|keyspace| {
            let rows = model
                .effective_ownership(&keyspace, asking)
                .unwrap()
                .into_iter()
                .map(|(key, share)| Mapper { key, value: share.to_string() })
                .collect();
            (keyspace, rows)
        })
        .collect();
    replication_groups(&shares)
        .into_iter()
        .map(|keyspaces| {
            let json = model.describe_ring_json(keyspaces.first().unwrap(), asking).unwrap();
            let rows: Vec<TokenRange> = serde_json::from_value(json).unwrap();
            RingView::from_describe_ring(keyspaces, &rows).unwrap()
        })
        .collect()
}

fn service(endpoint: &str) -> String {
    format!("basic-{}", endpoint.replace('.', "-"))
}

impl Sim {
    fn new(model: &Cluster, dc: &'static str) -> Self {
        Sim {
            model: model.clone(),
            dc,
            annotations: BTreeMap::new(),
            unknown: None,
            node_cleanups: 0,
            keyspace_cleanups: 0,
            operator: false,
            operator_cleanups: BTreeMap::new(),
            unlisted: BTreeSet::new(),
        }
    }

    /// The model's nodes of this datacenter that have joined.
    fn nodes(&self) -> Vec<String> {
        self.model
            .endpoints()
            .into_iter()
            .filter(|e| self.model.node(e).is_some_and(|n| n.datacenter == self.dc))
            .filter(|e| !self.model.node_tokens(e).is_empty())
            .collect()
    }

    fn current_hash(&self) -> String {
        let ring: Vec<String> = self.model.ring().iter().map(i64::to_string).collect();
        ring_hash(&ring).unwrap()
    }

    fn views(&self) -> Result<Vec<RingView>, String> {
        if let Some(why) = &self.unknown {
            return Err(why.clone());
        }
        Ok(views(&self.model, &self.nodes()[0]))
    }

    fn members(&self) -> Vec<MemberFacts> {
        let hash = self.current_hash();
        self.nodes()
            .into_iter()
            .filter(|endpoint| !self.unlisted.contains(endpoint))
            .map(|endpoint| {
                let mut annotations = self.annotations.get(&endpoint).cloned().unwrap_or_default();
                annotations.insert(keys::CURRENT_TOKEN_RING_HASH.into(), hash.clone());
                let node = self.model.node(&endpoint).unwrap();
                MemberFacts {
                    service: service(&endpoint),
                    uid: Some(format!("uid-{endpoint}")),
                    datacenter: Some(node.datacenter.clone()),
                    rack: Some(node.rack.clone()),
                    address: Some(endpoint.clone()),
                    annotations,
                }
            })
            .collect()
    }

    fn snapshot(&self) -> Snapshot {
        let mut conditions = vec![condition("Available", "True"), condition("Degraded", "False")];
        if self.operator {
            conditions.push(condition(JOB_CONTROLLER_PROGRESSING, "False"));
        }
        let types: Vec<String> = conditions.iter().map(|c| c.type_.clone()).collect();
        Snapshot {
            cluster: ClusterFacts {
                namespace: "scylla".into(),
                name: "basic".into(),
                generation: Some(1),
                observed_generation: Some(1),
                conditions,
                annotations: BTreeMap::new(),
                single_datacenter: self.model.endpoints().len() == self.nodes().len(),
                spec_members: 3,
                status_members: Some(3),
            },
            members: self.members(),
            tasks: Vec::new(),
            agent_token: SecretState::Present,
            ownership: self.views(),
            scylla_operator: OperatorCleanup::observed(types.iter().map(String::as_str), vec![]),
            holds: Vec::new(),
            ring_quiet: RingQuiet::settled_long_ago(),
            now: now(),
        }
    }

    fn endpoint_of(&self, service_name: &str) -> String {
        self.nodes().into_iter().find(|e| service(e) == service_name).unwrap()
    }

    fn annotate(&mut self, service_name: &str, key: &str, value: Option<String>) {
        let endpoint = self.endpoint_of(service_name);
        let annotations = self.annotations.entry(endpoint).or_default();
        match value {
            Some(value) => annotations.insert(key.to_owned(), value),
            None => annotations.remove(key),
        };
    }

    /// One trigger pass: the plan, its annotation writes carried out.
    fn pass(&mut self) -> Plan {
        let plan = decide(&self.snapshot());
        for action in &plan.actions {
            match action {
                Action::SeedLastCleaned { service, hash, members, .. } => {
                    self.annotate(service, keys::LAST_CLEANED_UP_TOKEN_RING_HASH, Some(hash.clone()));
                    let members = members.as_ref().map(MembersRecord::to_annotation);
                    self.annotate(service, keys::CLEANED_FOR_MEMBERS, members);
                }
                Action::RecordOwnership { service, value, .. } => {
                    self.annotate(service, OWNED_AT_LAST_CLEANUP, Some(value.clone()));
                }
                Action::SubmitCleanupTask { .. } => {}
            }
        }
        plan
    }

    /// Runs the submitted task as the task controller does: each node cleans its keyspaces (the
    /// stand-in marks them clean in the model), then its success is recorded.
    fn run_task(&mut self, plan: &Plan) {
        let Some(Action::SubmitCleanupTask { nodes, per_node, ring_hash, .. }) =
            plan.actions.iter().find(|a| matches!(a, Action::SubmitCleanupTask { .. }))
        else {
            return;
        };
        for node in nodes {
            let endpoint = self.endpoint_of(node);
            let keyspaces = match per_node.iter().find(|p| &p.node == node) {
                Some(only) => only.keyspaces.clone(),
                None => vnode_keyspaces(&self.model),
            };
            for keyspace in &keyspaces {
                self.model.cleaned(&endpoint, keyspace);
            }
            self.node_cleanups += 1;
            self.keyspace_cleanups += keyspaces.len();
            let member = self.members().into_iter().find(|m| &m.service == node).unwrap();
            let current = member.annotations.get(keys::CURRENT_TOKEN_RING_HASH).cloned();
            let last = member.annotations.get(keys::LAST_CLEANED_UP_TOKEN_RING_HASH).cloned();
            // Beside scylla-operator too: the node is clean for the task's ring.
            let recorded = cleaned_record(Some(ring_hash), current.as_deref(), last.as_deref(), None)
                .map(|(hash, _)| hash);
            if let Some(hash) = &recorded {
                self.annotate(node, keys::LAST_CLEANED_UP_TOKEN_RING_HASH, Some(hash.clone()));
            }
            let last_after = recorded.or(last);
            let views = self.views();
            if let Ok(value) = ownership_after_cleanup(
                &views,
                &member,
                Some(ring_hash),
                current.as_ref(),
                &keyspaces,
                last_after.as_deref(),
            ) {
                self.annotate(node, OWNED_AT_LAST_CLEANUP, Some(value));
            }
        }
    }

    /// scylla-operator's cleanup controller (1.10 – 1.21: a node without last-cleaned is seeded
    /// with its current hash): every node whose hashes differ is cleaned whole and recorded
    /// clean for the current ring. Returns the nodes it cleaned.
    fn operator_cleans(&mut self) -> Vec<String> {
        let mut cleaned = Vec::new();
        for member in self.members() {
            let current = member.annotations[keys::CURRENT_TOKEN_RING_HASH].clone();
            let last = member.annotations.get(keys::LAST_CLEANED_UP_TOKEN_RING_HASH);
            if last.is_some_and(|last| *last != current) {
                let endpoint = self.endpoint_of(&member.service);
                for keyspace in vnode_keyspaces(&self.model) {
                    self.model.cleaned(&endpoint, &keyspace);
                }
                *self.operator_cleanups.entry(member.service.clone()).or_default() += 1;
                cleaned.push(member.service.clone());
            }
            if last != Some(&current) {
                self.annotate(&member.service, keys::LAST_CLEANED_UP_TOKEN_RING_HASH, Some(current));
            }
        }
        cleaned
    }

    /// scylla-operator (1.10 – 1.21) seeding node `endpoint` (when it has no last-cleaned) with
    /// its current hash.
    fn operator_seeds_only(&mut self, endpoint: &str) {
        let current = self.current_hash();
        let annotations = self.annotations.entry(endpoint.to_owned()).or_default();
        annotations.entry(keys::LAST_CLEANED_UP_TOKEN_RING_HASH.to_owned()).or_insert(current);
    }

    /// scylla-operator (1.10 – 1.21) seeding a node without last-cleaned with its current hash.
    fn operator_seeds(&mut self) {
        for member in self.members() {
            let endpoint = self.endpoint_of(&member.service);
            self.operator_seeds_only(&endpoint);
        }
    }

    /// Passes and tasks until a pass submits nothing.
    fn settle(&mut self) -> Plan {
        loop {
            let plan = self.pass();
            if plan.actions.is_empty() {
                return plan;
            }
            self.run_task(&plan);
        }
    }

    /// `submitted` with a whole-node cleanup (`*`) written out as the keyspaces the node holds
    /// data of: those it replicates and those it still holds stale data for.
    fn expand(&self, submitted: BTreeMap<String, BTreeSet<String>>) -> BTreeMap<String, BTreeSet<String>> {
        submitted
            .into_iter()
            .map(|(node, keyspaces)| {
                if !keyspaces.contains("*") {
                    return (node, keyspaces);
                }
                let endpoint = self.endpoint_of(&node);
                let held = vnode_keyspaces(&self.model)
                    .into_iter()
                    .filter(|k| {
                        !self.model.replicated_ranges(k, &endpoint).unwrap().is_empty()
                            || !self.model.stale_ranges(&endpoint, k).is_empty()
                    })
                    .collect();
                (node, held)
            })
            .collect()
    }

    /// (node, keyspace) pairs of this datacenter holding data of ranges they no longer replicate.
    fn stale(&self) -> BTreeSet<(String, String)> {
        let nodes = self.nodes();
        self.model
            .stale()
            .into_iter()
            .filter(|(node, _)| nodes.contains(node))
            .map(|(node, keyspace)| (service(&node), keyspace))
            .collect()
    }
}

/// Per node of the submitted task, the keyspaces it cleans (`*`: every keyspace).
fn submitted(plan: &Plan) -> BTreeMap<String, BTreeSet<String>> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::SubmitCleanupTask { nodes, per_node, .. } => Some((nodes, per_node)),
            _ => None,
        })
        .flat_map(|(nodes, per_node)| {
            nodes.iter().map(|node| {
                let keyspaces = match per_node.iter().find(|p| &p.node == node) {
                    Some(only) => only.keyspaces.iter().cloned().collect(),
                    None => BTreeSet::from(["*".to_owned()]),
                };
                (node.clone(), keyspaces)
            })
        })
        .collect()
}

/// The ground truth as a plan names it: per node, the keyspaces holding stale data.
fn expected_from(stale: &BTreeSet<(String, String)>) -> BTreeMap<String, BTreeSet<String>> {
    let mut expected: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (node, keyspace) in stale {
        expected.entry(node.clone()).or_default().insert(keyspace.clone());
    }
    expected
}

fn endpoint(dc: u8, i: u8) -> String {
    format!("10.0.{dc}.{i}")
}

fn rack(i: u8) -> &'static str {
    ["a", "b", "c"][usize::from(i) % 3]
}

/// Node `10.0.1.<i>` joins, and the trigger sees it (the member Service's ring hash wakes it):
/// scylla-operator adds nodes one at a time, each bootstrap taking long enough. A node first seen
/// after it handed ranges to later nodes would be seeded without them: see the README.
fn join(sim: &mut Sim, i: u8) {
    sim.model.join(&endpoint(1, i), "dc1", rack(i)).unwrap();
    sim.pass();
}

/// A one-datacenter cluster of three nodes with `app` (NTS 3) and `shrinking` (NTS 3), every
/// node clean and recorded: first seen together, each is cleaned once.
fn three_nodes() -> Sim {
    let model = Cluster::new(7, 8);
    for i in 0..3 {
        model.join(&endpoint(1, i), "dc1", rack(i)).unwrap();
    }
    model.create_keyspace("app", Strategy::nts(&[("dc1", 3)]));
    model.create_keyspace("shrinking", Strategy::nts(&[("dc1", 3)]));
    model.create_keyspace("events", Strategy::tablets(&[("dc1", 3)]));
    let mut sim = Sim::new(&model, "dc1");
    let first = sim.pass();
    let marked = first
        .actions
        .iter()
        .filter(|a| matches!(a, Action::SeedLastCleaned { reason: SeedReason::JoinedTogether, .. }))
        .count();
    assert_eq!(marked, 3, "joined together, each is marked to be cleaned once: {first:#?}");
    let second = sim.pass();
    assert_eq!(submitted(&second).len(), 3, "each is cleaned once: {second:#?}");
    sim.run_task(&second);
    sim.settle();
    assert!(sim.stale().is_empty());
    sim.node_cleanups = 0;
    sim.keyspace_cleanups = 0;
    sim
}

/// (case, change to the settled three-node cluster, what the first plan must submit, a phrase
/// the Progressing condition must hold)
type Case = (&'static str, fn(&mut Sim), Option<&'static str>);

#[test]
fn the_trigger_cleans_exactly_the_keyspaces_nodes_lost_ranges_of() {
    let cases: Vec<Case> = vec![
        (
            "scale-out: the old nodes clean what they handed over, the new ones are seeded",
            |sim| {
                for i in 3..6 {
                    join(sim, i);
                }
            },
            None,
        ),
        (
            "scale-in: nobody lost a range, nothing is submitted and the condition says why",
            |sim| {
                for i in 3..6 {
                    join(sim, i);
                }
                sim.settle();
                for i in (3..6).rev() {
                    sim.model.decommission(&endpoint(1, i)).unwrap();
                }
            },
            Some("ownership rule: 3 nodes lost no range since the last cleanup"),
        ),
        (
            "RF 3 → 2 without a ring change: that keyspace, on the nodes that lost replicas",
            |sim| {
                sim.model.alter_keyspace("shrinking", Strategy::nts(&[("dc1", 2)])).unwrap();
            },
            None,
        ),
        (
            "ownership unknown: the ring-hash rule cleans every node whole, and says why",
            |sim| {
                sim.unknown = Some(
                    "GET /storage_service/describe_ring/app: not offered by this node (HTTP 404)".into(),
                );
                sim.model.join(&endpoint(1, 3), "dc1", rack(3)).unwrap();
            },
            Some(
                "the ring-hash rule decides for 3 nodes where the ownership rule cannot (basic-10-0-1-0, basic-10-0-1-1, basic-10-0-1-2: ownership unknown: GET /storage_service/describe_ring/app: not offered by this node (HTTP 404))",
            ),
        ),
    ];
    for (name, change, phrase) in cases {
        let mut sim = three_nodes();
        change(&mut sim);
        let plan = sim.pass();
        let got = sim.expand(submitted(&plan));
        let stale = expected_from(&sim.stale());
        if sim.unknown.is_some() {
            // Whole-node cleanups of every node whose ring moved: more than the stale ones.
            assert_eq!(got.len(), 3, "{name}: {plan:#?}");
            assert!(submitted(&plan).values().all(|k| k.contains("*")), "{name}: {got:?}");
            assert!(stale.keys().all(|n| got.contains_key(n)), "{name}: {stale:?}");
        } else {
            assert_eq!(got, stale, "{name}: the plan against the model's ground truth");
            // Nodes cleaning only some keyspaces reset Scylla's flag: those are all they hold.
            for action in &plan.actions {
                if let Action::SubmitCleanupTask { per_node, .. } = action {
                    assert!(per_node.iter().all(|p| p.mark_node_clean), "{name}: {per_node:?}");
                }
            }
        }
        if let Some(phrase) = phrase {
            assert!(plan.progressing.message.contains(phrase), "{name}: {:?}", plan.progressing.message);
        }
        sim.run_task(&plan);
        let quiet = sim.settle();
        assert!(sim.stale().is_empty(), "{name}: left stale: {:?}", sim.stale());
        assert!(submitted(&quiet).is_empty(), "{name}: {quiet:#?}");
    }
}

/// The trigger lists the member Services before it reads the ring views, so in a parallel
/// bootstrap the views may list nodes whose Services the list missed. Every way the list can
/// lag (after each of three joins, any number of the newest joiners missing from it, the one
/// listed looking like the only joiner), with groundskeeper cleaning and beside scylla-operator
/// (1.10 – 1.21, seeding a joiner with its current hash when every node reported its ring before
/// the next joined): once the Services are listed and everything settled, no node holds stale
/// data, and no node was cleaned twice.
#[test]
fn services_listed_before_the_ring_moved_on_leave_no_stale_data() {
    let joiners = [3u8, 4, 5];
    let mut failures = Vec::new();
    for operator in [false, true] {
        for lag in lags(joiners.len()) {
            let mut sim = three_nodes();
            sim.operator = operator;
            for (step, &i) in joiners.iter().enumerate() {
                sim.model.join(&endpoint(1, i), "dc1", rack(i)).unwrap();
                if operator {
                    // scylla-operator's Service sync seeds a node as soon as its ring is reported.
                    sim.operator_seeds_only(&endpoint(1, i));
                }
                sim.unlisted =
                    joiners[..=step].iter().rev().take(lag[step]).map(|&j| endpoint(1, j)).collect();
                sim.pass();
            }
            sim.unlisted.clear();
            let mut cleaned_by_operator = Vec::new();
            for _ in 0..4 {
                if operator {
                    cleaned_by_operator.extend(sim.operator_cleans());
                }
                sim.settle();
            }
            let stale = sim.stale();
            let twice: Vec<(&String, &usize)> =
                sim.operator_cleanups.iter().filter(|(_, n)| **n > 1).collect();
            if !stale.is_empty() || !twice.is_empty() {
                failures.push(format!(
                    "beside scylla-operator: {operator}, newest joiners unlisted after each join: {lag:?}: \
                     stale {stale:?}, cleaned twice by scylla-operator {twice:?}"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// For `n` joins, every sequence of how many of the newest joiners the Service list misses after
/// each join (after join `k`, 0 to `k - 1`: the one it lists is there).
fn lags(n: usize) -> Vec<Vec<usize>> {
    (0..n).fold(vec![Vec::new()], |sequences, step| {
        sequences
            .into_iter()
            .flat_map(|sequence| {
                (0..=step).map(move |missing| {
                    let mut next = sequence.clone();
                    next.push(missing);
                    next
                })
            })
            .collect()
    })
}

#[test]
fn a_joined_node_is_seeded_with_its_ownership_and_records_grow_with_what_nodes_gain() {
    let mut sim = three_nodes();
    let before = sim.annotations.clone();
    sim.model.join(&endpoint(1, 3), "dc1", rack(3)).unwrap();
    let plan = sim.pass();
    let recorded: BTreeMap<&str, bool> = plan
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::RecordOwnership { service, change, .. } => {
                Some((service.as_str(), *change == RecordChange::Seeded))
            }
            _ => None,
        })
        .collect();
    assert_eq!(recorded.get(service(&endpoint(1, 3)).as_str()), Some(&true), "{plan:#?}");
    sim.run_task(&plan);
    for i in 4..6 {
        join(&mut sim, i);
    }
    sim.settle();
    // Scale-in: the remaining nodes gain ranges; their records grow, nothing is cleaned.
    for i in (3..6).rev() {
        sim.model.decommission(&endpoint(1, i)).unwrap();
    }
    let plan = sim.pass();
    assert!(submitted(&plan).is_empty(), "{plan:#?}");
    let widened = plan
        .actions
        .iter()
        .filter(|a| matches!(a, Action::RecordOwnership { change: RecordChange::Widened, .. }))
        .count();
    assert_eq!(widened, 3, "{plan:#?}");
    assert_ne!(before, sim.annotations);
}

/// Two datacenters, each its own ScyllaCluster (scylla-operator's multi-DC: external seeds).
/// Scaling one moves the ring hash everywhere; of the other, only SimpleStrategy keyspaces (whose
/// placement ignores datacenters: Scylla's system_distributed and system_traces) are cleaned,
/// never a NetworkTopologyStrategy one.
#[test]
fn in_two_datacenters_only_the_scaled_one_is_cleaned() {
    let model = Cluster::new(11, 8);
    for dc in 1..=2u8 {
        for i in 0..3 {
            model.join(&endpoint(dc, i), &format!("dc{dc}"), rack(i)).unwrap();
        }
    }
    model.create_keyspace("app", Strategy::nts(&[("dc1", 3), ("dc2", 3)]));
    model.create_keyspace("local_app", Strategy::nts(&[("dc2", 2)]));
    let mut dc1 = Sim::new(&model, "dc1");
    let mut dc2 = Sim::new(&model, "dc2");
    // First seen together, every node is cleaned once.
    dc1.settle();
    dc2.settle();
    assert!(model.stale().is_empty());
    for i in 3..6 {
        model.join(&endpoint(2, i), "dc2", rack(i)).unwrap();
        dc2.pass();
        dc1.pass();
    }
    let plan1 = dc1.pass();
    let plan2 = dc2.pass();
    let got1 = dc1.expand(submitted(&plan1));
    assert_eq!(got1, expected_from(&dc1.stale()), "dc1 against the model");
    let nts: BTreeSet<String> = ["app".to_owned(), "local_app".to_owned()].into();
    assert!(got1.values().all(|k| k.is_disjoint(&nts)), "dc1 cleans no NTS keyspace: {got1:?}");
    let got2 = dc2.expand(submitted(&plan2));
    assert!(got2.values().any(|k| k.contains("app")), "{got2:?}");
    assert_eq!(got2, expected_from(&dc2.stale()), "dc2 against the model");
    dc1.run_task(&plan1);
    dc2.run_task(&plan2);
    dc2.settle();
    dc1.settle();
    assert!(model.stale().is_empty(), "{:?}", model.stale());
}

/// The same, with only NetworkTopologyStrategy keyspaces: the other datacenter lost nothing,
/// nothing is submitted there and its condition says why.
#[test]
fn in_two_datacenters_with_nts_only_the_other_one_cleans_nothing() {
    let model = Cluster::new(13, 8);
    for dc in 1..=2u8 {
        for i in 0..3 {
            model.join(&endpoint(dc, i), &format!("dc{dc}"), rack(i)).unwrap();
        }
    }
    for keyspace in ["system_distributed", "system_traces"] {
        model.alter_keyspace(keyspace, Strategy::nts(&[("dc1", 3), ("dc2", 3)])).unwrap();
    }
    model.create_keyspace("app", Strategy::nts(&[("dc1", 3), ("dc2", 3)]));
    let mut dc1 = Sim::new(&model, "dc1");
    let mut dc2 = Sim::new(&model, "dc2");
    // First seen together, every node is cleaned once.
    dc1.settle();
    dc2.settle();
    assert!(model.stale().is_empty());
    for i in 3..6 {
        model.join(&endpoint(2, i), "dc2", rack(i)).unwrap();
        dc2.pass();
    }
    let plan1 = dc1.pass();
    assert!(submitted(&plan1).is_empty(), "{plan1:#?}");
    assert!(
        plan1.progressing.message.contains("ownership rule: 3 nodes lost no range"),
        "{}",
        plan1.progressing.message
    );
    let plan2 = dc2.pass();
    assert_eq!(dc2.expand(submitted(&plan2)), expected_from(&dc2.stale()));
    assert!(!submitted(&plan2).is_empty());
    dc2.run_task(&plan2);
    dc2.settle();
    assert!(model.stale().is_empty(), "{:?}", model.stale());
}

/// The record writes of a plan: (node, why).
fn record_writes(plan: &Plan) -> Vec<(String, RecordChange)> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::RecordOwnership { service, change, .. } => Some((service.clone(), *change)),
            _ => None,
        })
        .collect()
}

fn writes_of(plan: &Plan, change: RecordChange) -> BTreeSet<String> {
    record_writes(plan).into_iter().filter(|(_, c)| *c == change).map(|(service, _)| service).collect()
}

/// Beside scylla-operator's own cleanup, a scale 3 → 6 → 3: the nodes whose hash moved are
/// scylla-operator's (no task of the ownership rule), the records are seeded and widened all
/// along, and once scylla-operator has cleaned a node its record is reset to what it replicates
/// now, so no pass cleans it a second time for ranges already cleaned.
#[test]
fn beside_scylla_operator_a_scale_is_left_to_it_and_the_records_follow_its_cleanups() {
    let mut sim = three_nodes();
    sim.operator = true;
    let old: BTreeSet<String> = sim.nodes().iter().map(|e| service(e)).collect();
    for i in 3..6 {
        sim.model.join(&endpoint(1, i), "dc1", rack(i)).unwrap();
        let plan = sim.pass();
        assert!(submitted(&plan).is_empty(), "joining {i}: {plan:#?}");
        assert_eq!(
            writes_of(&plan, RecordChange::Seeded),
            BTreeSet::from([service(&endpoint(1, i))]),
            "the node that joined gets its record: {plan:#?}"
        );
        // scylla-operator seeds the new node's last-cleaned; its cleanup waits for the scale.
        sim.operator_seeds();
    }
    let plan = sim.pass();
    assert!(submitted(&plan).is_empty(), "{plan:#?}");
    assert!(
        plan.actions.iter().all(|a| !matches!(a, Action::SeedLastCleaned { .. })),
        "last-cleaned is scylla-operator's: {plan:#?}"
    );
    assert_eq!(plan.progressing.reason, SCYLLA_OPERATOR_CLEANS_UP);
    assert!(!sim.stale().is_empty(), "the old nodes handed ranges over");

    let cleaned: BTreeSet<String> = sim.operator_cleans().into_iter().collect();
    assert!(old.is_subset(&cleaned), "{cleaned:?}");
    assert!(sim.stale().is_empty(), "{:?}", sim.stale());
    let plan = sim.pass();
    assert!(submitted(&plan).is_empty(), "no second cleanup: {plan:#?}");
    assert_eq!(writes_of(&plan, RecordChange::ResetAfterOutsideCleanup), cleaned);
    assert!(
        plan.progressing.message.contains(
            "ownership records reset to what the nodes replicate now after scylla-operator cleaned them"
        ),
        "{}",
        plan.progressing.message
    );
    let quiet = sim.pass();
    assert!(quiet.actions.is_empty(), "{quiet:#?}");
    assert!(!quiet.progressing.status, "{quiet:#?}");

    // Scale-in: the remaining nodes gain ranges: their records widen, and scylla-operator cleans
    // them (needlessly: its rule); the next passes clean nothing again.
    for i in (3..6).rev() {
        sim.model.decommission(&endpoint(1, i)).unwrap();
    }
    let plan = sim.pass();
    assert!(submitted(&plan).is_empty(), "{plan:#?}");
    assert_eq!(writes_of(&plan, RecordChange::Widened), old, "{plan:#?}");
    sim.operator_cleans();
    let plan = sim.pass();
    assert!(submitted(&plan).is_empty(), "{plan:#?}");
    assert_eq!(writes_of(&plan, RecordChange::ResetAfterOutsideCleanup), old);
    assert!(sim.pass().actions.is_empty());
    assert!(sim.stale().is_empty(), "{:?}", sim.stale());
    assert_eq!(sim.node_cleanups, 0, "groundskeeper cleaned nobody");
    // One whole-node cleanup per node and ring change: two for the old nodes (out, in), one for
    // the nodes that joined and handed ranges to later ones.
    assert!(sim.operator_cleanups.values().all(|n| *n <= 2), "{:?}", sim.operator_cleanups);
}

/// Beside scylla-operator, a replication factor lowered without any ring change: scylla-operator
/// sees nothing (the hashes are equal), so the ownership rule submits a task for the nodes that
/// lost replicas, listing that keyspace, and says so; once run, nothing is stale and no further
/// task follows. With a scale at the same time, the nodes whose hash moved are left to
/// scylla-operator's whole-node cleanup, and nobody cleans them twice.
#[test]
fn beside_scylla_operator_a_lowered_replication_factor_is_cleaned_by_the_ownership_rule() {
    let mut sim = three_nodes();
    sim.operator = true;
    sim.model.alter_keyspace("shrinking", Strategy::nts(&[("dc1", 2)])).unwrap();
    let plan = sim.pass();
    let expected = expected_from(&sim.stale());
    assert!(!expected.is_empty());
    assert!(expected.values().all(|k| *k == BTreeSet::from(["shrinking".to_owned()])));
    assert_eq!(submitted(&plan), expected, "{plan:#?}");
    assert_eq!(plan.progressing.reason, SCYLLA_OPERATOR_CLEANS_UP);
    assert!(plan.progressing.status);
    for phrase in [
        "the ring-hash trigger stands back",
        "ownership rule: submitted cleanup task basic-cleanup-",
        "which scylla-operator does not clean",
        "(shrinking)",
    ] {
        assert!(plan.progressing.message.contains(phrase), "{phrase:?} in {:?}", plan.progressing.message);
    }
    assert!(sim.operator_cleans().is_empty(), "nothing for scylla-operator");
    sim.run_task(&plan);
    let quiet = sim.settle();
    assert!(submitted(&quiet).is_empty());
    assert!(sim.stale().is_empty(), "{:?}", sim.stale());
    assert_eq!(sim.node_cleanups, expected.len());

    // RF 2 → 1 together with a node joining: every old node's hash moves, so they are all
    // scylla-operator's, even those that also lost replicas of `shrinking`.
    let mut sim = three_nodes();
    sim.operator = true;
    sim.model.alter_keyspace("shrinking", Strategy::nts(&[("dc1", 1)])).unwrap();
    sim.model.join(&endpoint(1, 3), "dc1", rack(3)).unwrap();
    let plan = sim.pass();
    assert!(submitted(&plan).is_empty(), "{plan:#?}");
    sim.operator_cleans();
    let plan = sim.settle();
    assert!(submitted(&plan).is_empty(), "{plan:#?}");
    assert!(sim.stale().is_empty(), "{:?}", sim.stale());
    assert_eq!(sim.node_cleanups, 0);
    assert!(sim.operator_cleanups.values().all(|n| *n == 1), "{:?}", sim.operator_cleanups);
}
