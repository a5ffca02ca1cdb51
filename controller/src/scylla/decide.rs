//! What the cleanup trigger should do for one ScyllaCluster: a pure function of a snapshot.
//!
//! Rules (see `docs/protocol.md`, "Scylla"):
//! * where scylla-operator's own cleanup controller runs for the cluster (1.10+), the ring-hash
//!   rule below stands back: no `last-cleaned-…` is seeded, and a node whose hashes differ (or is
//!   `NeverCleanedUp`, or not seeded yet) is scylla-operator's to clean whole. The ownership rule
//!   still runs: records are seeded, widened, and reset once scylla-operator has cleaned a node
//!   for its current ring; a task is submitted only for nodes whose hash did not move but that
//!   stopped replicating ranges, the cases scylla-operator does not see. The condition says both
//!   ([`coexistence`], reason `ScyllaOperatorCleansUp`);
//! * a node needs cleanup iff its `current-token-ring-hash` differs from its
//!   `last-cleaned-up-token-ring-hash` (`NeverCleanedUp` never equals a hash: "clean once");
//! * a node without a current hash is bootstrapping: it is not cleaned, and it holds the others
//!   back only while the ring is young (at most [`super::ring_quiet::DISAGREEMENT_BOUND`] after
//!   the last change): a node stuck joining blocks nobody for good;
//! * no automatic task is submitted before the ring has been quiet ([`super::ring_quiet`]): a
//!   burst of ring changes is cleaned up once, for the ring it ends with;
//! * a node without `last-cleaned-…` just joined. Alone (the only member without one), it holds
//!   no stale data: it is seeded with its current hash, at once and whatever the cluster's state,
//!   because a node seeded late (after more nodes joined) may already hold ranges it has since
//!   handed over. Together with others (a parallel bootstrap, several nodes whose hashes were
//!   first seen after more joined, nodes the ring views list whose Services the pass's list
//!   missed, groundskeeper installed on a cluster that never recorded one), what each held
//!   before the others joined cannot be known: each is cleaned once, whole, and the condition
//!   says so;
//! * the nodes needing cleanup are cleaned by **one** `Cleanup` [`MaintenanceTask`] for the whole
//!   cluster (origin `automatic`, listing those nodes), submitted only when the cluster is settled
//!   (observed generation, `StatefulSetControllerProgressing` not True, `Available` True,
//!   `Degraded` False), the agent token Secret exists, its annotations are valid, and no Cleanup
//!   task of the cluster (automatic or manual) is queued or running: tasks of one target run one
//!   at a time, and a second one would be rejected as a duplicate. The task controller runs it,
//!   node by node within the per-rack and per-cluster bounds, and records each cleaned node;
//! * a failed cleanup task makes the trigger Degraded. When the failure may pass on retry, a new
//!   task follows [`RETRY_BACKOFF`] after it failed; when no retry can fix it (bad credentials, an
//!   unknown keyspace: [`BAD_INPUT`]), none follows until a person, having fixed the cause,
//!   deletes the failed task (or its time to live ends). A task for a ring that has moved on is
//!   followed at once.
//!
//! Ownership (see [`super::ownership`]): where the ring views could be read and the node carries
//! its ownership record, a node is cleaned only for the keyspaces it stopped replicating ranges
//! of since its last cleanup, whether or not its ring hash moved (a lowered replication factor
//! moves no hash); a node whose hash moved but that lost nothing is recorded clean for the new
//! ring. The record is seeded when a node joins and widened on every pass. Where ownership
//! cannot decide, the ring-hash rule below does, and the condition says why.
//!
//! Scale-in: when nodes only left the ring, the remaining nodes gained ranges and lost none, so
//! they hold no stale data; scylla-operator cleans them anyway. Here, next to `last-cleaned-…`,
//! each node carries [`keys::CLEANED_FOR_MEMBERS`]: the ring hash and the UIDs of every member
//! Service when that hash was recorded, written only when every member agreed on that hash. A
//! node is seeded instead of cleaned when all of these hold: the cluster has a single datacenter
//! (no `externalSeeds`: every ring node has a member Service here), its record is for its
//! `last-cleaned-…` hash, every member now reports the same current hash, and the current member
//! UIDs are a strict subset of the recorded ones. UIDs, not names: a node removed and re-added
//! under the same name gets a new Service (and new tokens). In any other case the node is cleaned.
//!
//! [`MaintenanceTask`]: groundskeeper_api::maintenance_task::MaintenanceTask

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use groundskeeper_protocol::keys;

use super::condition_texts::{degraded_condition, plural, progressing_condition};
use super::members_record::{MembersRecord, record_for, settled_record};
use super::model::{Candidate, LastCleaned, Member, PassState};
use super::ownership::{
    BasisChange, CleanScope, NodeDecision, NodePlan, OWNED_AT_LAST_CLEANUP, OwnershipRecord, RangeSet,
    RecordState, RingView, basis_change, decide_node, node_ownership, plan_node,
};
pub use super::ring_quiet::RingQuiet;
use super::ring_quiet::quiet_wait;
use super::settings::{cluster_limits, parse_enabled};
use groundskeeper_api::maintenance_task::{NodeCleanupConfig, TaskState};
use groundskeeper_api::scylla::coexistence;
use groundskeeper_api::scylla::facts::{
    ClusterFacts, DEGRADED, MemberFacts, PROGRESSING, looks_like_ring_hash, precondition_failures, shorten,
    sorted_members, topology_change,
};

/// Named here as well, where the decision's users have always found them.
pub use super::model::{Action, BAD_INPUT, ConditionPlan, RecordChange, SecretState, SeedReason, TaskFacts};
pub use super::observe::Snapshot;

/// Wait between a cleanup task that failed in a way a retry may fix and the next one.
pub(crate) const RETRY_BACKOFF: Duration = Duration::from_secs(5 * 60);
/// Requeue while a cleanup task is queued or runs, so its end is noticed even if a watch event
/// is missed.
pub const REQUEUE_WHILE_RUNNING: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub actions: Vec<Action>,
    pub progressing: ConditionPlan,
    pub degraded: ConditionPlan,
    /// When to look again even without a watch event; `None`: the idle resync.
    pub requeue_after: Option<Duration>,
}

/// The decision for one ScyllaCluster.
pub fn decide(snapshot: &Snapshot) -> Plan {
    let cluster = &snapshot.cluster;
    let enabled = parse_enabled(cluster);
    if enabled == Ok(false) {
        return disabled_plan(cluster);
    }
    let mut problems: Vec<(&'static str, String)> = Vec::new();
    if let Err(message) = &enabled {
        problems.push(("InvalidAnnotation", message.clone()));
    }
    let limits = cluster_limits(cluster);
    if let Err(messages) = &limits {
        problems.extend(messages.iter().map(|m| ("InvalidAnnotation", m.clone())));
    }
    if let Some(message) = secret_problem(snapshot) {
        problems.push(("AgentTokenSecretMissing", message));
    }

    let mut members = Vec::new();
    for facts in sorted_members(&snapshot.members) {
        match understand_member(cluster, facts) {
            Ok(member) => members.push(member),
            Err(message) => problems.push(("InvalidAnnotation", message)),
        }
    }
    let invalid_settings = enabled.is_err() || limits.is_err();
    if snapshot.scylla_operator.active.is_some() {
        return beside_scylla_operator(snapshot, &members, problems, invalid_settings);
    }
    let settled = settled_record(cluster, &snapshot.members);

    let mut state = PassState::default();
    let joiners = Joiners::count(snapshot, &members);
    for member in &members {
        decide_member(snapshot, member, &settled, &joiners, &mut state);
    }
    let active = active_task(&snapshot.tasks);
    // Why (and how long) the automatic task waits for a quiet ring: worked out once per pass.
    let quiet = quiet_wait(&snapshot.members, snapshot.ring_quiet, snapshot.now);
    let mut blockers = blockers(snapshot, invalid_settings, quiet.as_ref());
    if !state.joined_together.is_empty() {
        // Their mark lands first: the next pass submits one task with them in it.
        blockers.push("marking the nodes that joined together as to be cleaned once".into());
    }
    let ring_hash = settled.as_ref().map(|r| r.ring_hash.clone());
    let retry_in = submit_when_due(snapshot, &mut state, active, ring_hash, &blockers, &mut problems);
    let submitted = state.submitted().is_some();
    let progressing = progressing_condition(&members, &state, active, submitted, &blockers, retry_in);
    let degraded = degraded_condition(&problems);
    // While nodes join or leave, look often: a joiner's ownership is recorded right after it
    // joins only if a pass sees the ring between two joins.
    // A node stuck without a hash is not looked at every busy interval for ever: only while
    // the ring is young.
    let young = quiet.is_some();
    let joining = (!state.bootstrapping.is_empty() && young)
        || !state.joined_together.is_empty()
        || topology_change(cluster, snapshot.members.len()).is_some();
    let busy = (active.is_some() || submitted || joining).then_some(REQUEUE_WHILE_RUNNING);
    let requeue_after = soonest(soonest(busy, retry_in), ring_wait(quiet.as_ref(), &state, active));
    Plan { actions: state.actions, progressing, degraded, requeue_after }
}

/// When a task waits only for the ring to be quiet, how long until it may be: the pass is
/// repeated then, with or without a watch event.
fn ring_wait(
    quiet: Option<&(String, Duration)>,
    state: &PassState,
    active: Option<&TaskFacts>,
) -> Option<Duration> {
    if state.candidates.is_empty() || active.is_some() || state.submitted().is_some() {
        return None;
    }
    quiet.map(|(_, wait)| *wait)
}

fn soonest(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Submits the automatic task for the pass's candidates when no task holds the queue, nothing
/// blocks, and the last failure allows; returns when to look again for a retry. `ring_hash`: the
/// ring every member agrees on, if any (else the first candidate's).
fn submit_when_due(
    snapshot: &Snapshot,
    state: &mut PassState,
    active: Option<&TaskFacts>,
    ring_hash: Option<String>,
    blockers: &[String],
    problems: &mut Vec<(&'static str, String)>,
) -> Option<Duration> {
    if active.is_some() || state.candidates.is_empty() {
        return None;
    }
    let ring_hash = ring_hash.unwrap_or_else(|| state.candidates[0].ring_hash.clone());
    match after_last_failure(snapshot, &ring_hash) {
        Gate::Go { retry_of } if blockers.is_empty() => {
            state.actions.push(Action::SubmitCleanupTask {
                name: automatic_task_name(&snapshot.cluster.name, snapshot.now),
                nodes: state.candidates.iter().map(|c| c.service.clone()).collect(),
                per_node: per_node(&state.candidates),
                ring_hash,
                retry_of,
            });
            None
        }
        Gate::Go { .. } => None,
        Gate::RetryIn { wait, problem } => {
            problems.push(("CleanupTaskFailed", problem));
            Some(wait)
        }
        Gate::Blocked { problem } => {
            problems.push(("CleanupTaskFailed", problem));
            None
        }
    }
}

/// Where scylla-operator cleans the cluster itself ([`coexistence`]): the ring-hash rule stands
/// back (no seeding of `last-cleaned-…`, the annotation is scylla-operator's; no cleanup of a
/// node whose hashes differ, scylla-operator cleans it whole), while the ownership rule keeps
/// the records (seeded, widened, reset once scylla-operator cleaned a node) and submits a task
/// for the nodes scylla-operator does not clean: those whose ring hash did not move but that
/// stopped replicating ranges (a replication factor lowered, a datacenter dropped).
fn beside_scylla_operator(
    snapshot: &Snapshot,
    members: &[Member<'_>],
    mut problems: Vec<(&'static str, String)>,
    invalid_settings: bool,
) -> Plan {
    let mut state = PassState::default();
    for member in members {
        decide_member_beside_operator(snapshot, member, &mut state);
    }
    let active = active_task(&snapshot.tasks);
    let quiet = quiet_wait(&snapshot.members, snapshot.ring_quiet, snapshot.now);
    let blockers = blockers(snapshot, invalid_settings, quiet.as_ref());
    let settled = settled_record(&snapshot.cluster, &snapshot.members).map(|r| r.ring_hash);
    let retry_in = submit_when_due(snapshot, &mut state, active, settled, &blockers, &mut problems);
    let mut plan = stand_back_plan(snapshot, members, &problems);
    let ours = ownership_beside_operator(&state, active, &blockers, retry_in);
    if !ours.is_empty() {
        plan.progressing.message = format!("{}; {}", plan.progressing.message, ours.join("; "));
    }
    let busy = active.is_some() || !state.candidates.is_empty();
    plan.progressing.status |= busy;
    plan.requeue_after = soonest(plan.requeue_after.or(busy.then_some(REQUEUE_WHILE_RUNNING)), retry_in);
    plan.requeue_after = soonest(plan.requeue_after, ring_wait(quiet.as_ref(), &state, active));
    plan.actions = state.actions;
    plan
}

/// One node beside scylla-operator: its record kept, and a cleanup only where its ring hash did
/// not move (scylla-operator sees nothing to do there) but it lost ranges.
fn decide_member_beside_operator(snapshot: &Snapshot, member: &Member<'_>, state: &mut PassState) {
    let Some(current) = member.current else {
        return;
    };
    let owned_now = owned_now(snapshot, member.facts);
    let record = record_ownership(member, current_record(member), owned_now.as_ref().ok(), true, state);
    if member.last != LastCleaned::Hash(current.to_owned()) {
        // Hashes differ, NeverCleanedUp or not seeded yet: scylla-operator's to clean (whole).
        return;
    }
    let decision = decide_node(&record, owned_now.as_ref().map_err(String::as_str));
    if let NodeDecision::RingHash { reason } = &decision {
        state.fallbacks.push((member.facts.service.clone(), reason.to_string()));
    }
    if let NodePlan::Clean { scope, mark_node_clean, .. } = plan_node(&decision, false) {
        state.candidates.push(Candidate {
            service: member.facts.service.clone(),
            ring_hash: current.to_owned(),
            scope: whole_node_when_all(scope, owned_now.as_ref().ok()),
            mark_node_clean,
        });
    }
}

/// What the ownership rule does beside scylla-operator, for the condition: the nodes it cleans
/// and why scylla-operator does not, the records reset after scylla-operator's cleanups, the
/// nodes it cannot judge.
fn ownership_beside_operator(
    state: &PassState,
    active: Option<&TaskFacts>,
    blockers: &[String],
    retry_in: Option<Duration>,
) -> Vec<String> {
    let mut parts = Vec::new();
    if !state.candidates.is_empty() {
        let nodes: Vec<String> = state.candidates.iter().map(describe_candidate).collect();
        let what = match (state.submitted(), active) {
            (Some(task), _) => format!("submitted cleanup task {task} for"),
            (None, Some(task)) => format!("cleanup task {} holds the queue; next for", task.name),
            (None, None) => "waiting to clean".to_owned(),
        };
        parts.push(format!(
            "ownership rule: {what} {}, which scylla-operator does not clean (their ring hash did              not move, yet they stopped replicating ranges: a replication factor lowered or a              datacenter dropped): {}",
            plural(nodes.len(), "node", "nodes"),
            nodes.join(", ")
        ));
        if state.submitted().is_none() && active.is_none() {
            if let Some(wait) = retry_in {
                parts.push(format!("the next cleanup task follows in {}s", wait.as_secs()));
            }
            parts.extend(blockers.iter().cloned());
        }
    } else if let Some(task) = active {
        let doing = if task.state == TaskState::InProgress { "is running" } else { "is queued" };
        parts.push(format!("cleanup task {} {doing}", task.name));
    }
    if !state.reset.is_empty() {
        parts.push(format!(
            "ownership records reset to what the nodes replicate now after scylla-operator cleaned them: {}",
            state.reset.join(", ")
        ));
    }
    if !state.fallbacks.is_empty() {
        let each: Vec<String> =
            state.fallbacks.iter().map(|(service, why)| format!("{service}: {why}")).collect();
        parts.push(format!(
            "the ownership rule cannot tell whether {} stopped replicating ranges ({})",
            plural(state.fallbacks.len(), "node", "nodes"),
            each.join("; ")
        ));
    }
    parts
}

/// `node (ks1, ks2)`, or the bare node when it cleans every keyspace.
fn describe_candidate(candidate: &Candidate) -> String {
    match &candidate.scope {
        CleanScope::All => format!("{} (every keyspace)", candidate.service),
        CleanScope::Only(keyspaces) => {
            format!("{} ({})", candidate.service, keyspaces.iter().cloned().collect::<Vec<_>>().join(", "))
        }
    }
}

/// Where scylla-operator cleans the cluster itself ([`coexistence`]): no task, no seeding (the
/// annotation is scylla-operator's to seed), and the condition says why and what it is doing.
fn stand_back_plan(snapshot: &Snapshot, members: &[Member<'_>], problems: &[(&'static str, String)]) -> Plan {
    let operator = &snapshot.scylla_operator;
    let due: Vec<String> = members
        .iter()
        .filter(|m| match (&m.current, &m.last) {
            (Some(current), LastCleaned::Hash(last)) => current != last,
            (Some(_), LastCleaned::NeverCleanedUp) => true,
            _ => false,
        })
        .map(|m| m.facts.service.clone())
        .collect();
    let unknown: Vec<String> = members
        .iter()
        .filter(|m| m.current.is_none() || m.last == LastCleaned::Absent)
        .map(|m| m.facts.service.clone())
        .collect();
    let running = operator.jobs.iter().any(|j| j.phase == coexistence::JobPhase::Running);
    let busy = running || !due.is_empty();
    Plan {
        actions: Vec::new(),
        progressing: ConditionPlan {
            type_: PROGRESSING,
            status: busy,
            reason: coexistence::SCYLLA_OPERATOR_CLEANS_UP.into(),
            message: coexistence::stand_back_message(operator, &due, &unknown),
        },
        degraded: degraded_condition(problems),
        requeue_after: busy.then_some(REQUEUE_WHILE_RUNNING),
    }
}

/// Name of the automatic Cleanup task submitted at `now`: `<cluster>-cleanup-<unix seconds>`,
/// shortened with a hash when too long. One per pass at most, and none while another is queued
/// or running, so the second is enough to keep them apart.
pub fn automatic_task_name(cluster: &str, now: jiff::Timestamp) -> String {
    crate::jobs::bounded_name(cluster, &format!("-cleanup-{}", now.as_second()))
}

/// The `perNode` entries of the automatic task: the nodes cleaning only some keyspaces.
fn per_node(candidates: &[Candidate]) -> Vec<NodeCleanupConfig> {
    candidates
        .iter()
        .filter_map(|c| match &c.scope {
            CleanScope::All => None,
            CleanScope::Only(keyspaces) => Some(NodeCleanupConfig {
                node: c.service.clone(),
                keyspaces: keyspaces.iter().cloned().collect(),
                mark_node_clean: c.mark_node_clean,
            }),
        })
        .collect()
}

/// The Cleanup task that holds the cluster's queue: the running one, else the oldest waiting.
fn active_task(tasks: &[TaskFacts]) -> Option<&TaskFacts> {
    let running = tasks.iter().find(|t| t.state == TaskState::InProgress);
    running.or_else(|| {
        tasks
            .iter()
            .filter(|t| t.state == TaskState::Pending)
            .min_by(|a, b| (a.created, &a.name).cmp(&(b.created, &b.name)))
    })
}

/// Whether a new task may follow the cluster's newest finished Cleanup task.
enum Gate {
    Go { retry_of: Option<String> },
    RetryIn { wait: Duration, problem: String },
    Blocked { problem: String },
}

fn after_last_failure(snapshot: &Snapshot, ring_hash: &str) -> Gate {
    let newest = snapshot.tasks.iter().filter(|t| t.state.is_final()).max_by(|a, b| {
        let at = |t: &TaskFacts| t.completed_at.unwrap_or(t.created);
        (at(a), &a.name).cmp(&(at(b), &b.name))
    });
    let Some(failed) = newest.filter(|t| t.state == TaskState::Failed) else {
        return Gate::Go { retry_of: None };
    };
    let retry_of = Some(failed.name.clone());
    if failed.ring_hash.as_deref().is_some_and(|h| h != ring_hash) {
        // The ring moved on since: the new task is about other ranges anyway.
        return Gate::Go { retry_of };
    }
    let (code, why) =
        failed.last_error.clone().unwrap_or_else(|| ("Failed".into(), "no error was recorded".into()));
    if code == BAD_INPUT {
        return Gate::Blocked {
            problem: format!(
                "cleanup task {} failed and no retry can fix it: {why}; fix the cause, then delete MaintenanceTask {}/{} to have the nodes cleaned again",
                failed.name, snapshot.cluster.namespace, failed.name
            ),
        };
    }
    let wait = retry_wait(snapshot.now, failed.completed_at);
    if wait.is_zero() {
        return Gate::Go { retry_of };
    }
    Gate::RetryIn {
        wait,
        problem: format!(
            "cleanup task {} failed: {why} (a new one follows in {}s)",
            failed.name,
            wait.as_secs()
        ),
    }
}

/// The members that just joined (no `last-cleaned-…` yet), counted once per pass.
#[derive(Debug, Clone)]
pub(super) struct Joiners<'a> {
    /// Members without `last-cleaned-…`.
    absent: usize,
    /// Of those, the ones without an ownership record that the ring views list already.
    in_ring_unrecorded: usize,
    /// The current ring hashes of members marked `NeverCleanedUp` and not cleaned since.
    marked_together: BTreeSet<&'a str>,
}

impl<'a> Joiners<'a> {
    fn count(snapshot: &Snapshot, members: &[Member<'a>]) -> Joiners<'a> {
        let absent: Vec<&Member<'_>> = members.iter().filter(|m| m.last == LastCleaned::Absent).collect();
        // A joiner with a hash has joined even where the views do not list it yet.
        let in_ring_unrecorded = absent
            .iter()
            .filter(|m| !matches!(current_record(m), RecordState::Present(_)))
            .filter(|m| m.current.is_some() || owned_now(snapshot, m.facts).is_ok())
            .count()
            + unseen_in_ring(snapshot);
        let marked_together = members
            .iter()
            .filter(|m| m.last == LastCleaned::NeverCleanedUp)
            .filter_map(|m| m.current)
            .collect();
        Joiners { absent: absent.len(), in_ring_unrecorded, marked_together }
    }

    /// Without ring views: `member` is the only joiner, and no member marked as having joined
    /// together with others shows its ring. A joiner whose Service became visible after the
    /// others of its burst were marked (the trigger's cache of Services lagging, or their
    /// sidecars reporting in another order) joined with them as far as anyone can tell: it may
    /// have joined before them and handed them ranges.
    fn alone_without_views(&self, member: &Member<'_>) -> bool {
        self.absent == 1 && !member.current.is_some_and(|current| self.marked_together.contains(current))
    }
}

/// How many nodes of this cluster's datacenters the ring views list but no member Service of the
/// snapshot names. The Services are listed before the views are read: nodes that joined in
/// between (a parallel bootstrap creates every Service, then the nodes join one right after
/// another) are in the ring already. Each is a joiner without a record: a member that looks
/// like the only joiner next to them joined together with them, and may have handed them
/// ranges. Nodes of other datacenters have no member Service here; where the views do not say
/// a node's datacenter, a cluster with `externalSeeds` cannot tell, and none are counted. A node
/// that left the ring after its Service was deleted counts too, while the views still list it: a
/// joiner next to it is then cleaned once rather than taken as holding nothing stale.
fn unseen_in_ring(snapshot: &Snapshot) -> usize {
    let Ok(views) = &snapshot.ownership else {
        return 0;
    };
    let known: BTreeSet<&str> = snapshot.members.iter().filter_map(|m| m.address.as_deref()).collect();
    let datacenters: BTreeSet<&str> =
        snapshot.members.iter().filter_map(|m| m.datacenter.as_deref()).collect();
    let ours = |datacenter: &str| {
        snapshot.cluster.single_datacenter || (!datacenter.is_empty() && datacenters.contains(datacenter))
    };
    let unseen: BTreeSet<&str> = views
        .iter()
        .flat_map(|view| &view.nodes)
        .filter(|(address, node)| !known.contains(address.as_str()) && ours(&node.datacenter))
        .map(|(address, _)| address.as_str())
        .collect();
    // A member whose address is not known yet (its pod has no IP) may be one of them.
    let without_address = snapshot.members.iter().filter(|m| m.address.is_none()).count();
    unseen.len().saturating_sub(without_address)
}

/// `joiners`: the members that just joined, this one among them or not.
fn decide_member(
    snapshot: &Snapshot,
    member: &Member<'_>,
    settled: &Option<MembersRecord>,
    joiners: &Joiners<'_>,
    state: &mut PassState,
) {
    let service = &member.facts.service;
    if member.last == LastCleaned::Absent {
        decide_joiner(snapshot, member, settled, joiners, state);
        return;
    }
    let Some(current) = member.current else {
        state.bootstrapping.push(service.clone());
        return;
    };
    if member.last == LastCleaned::NeverCleanedUp {
        // "Clean once", whatever the ownership record says: it joined together with others, or
        // a person asked for it.
        clean_once(member, current, state);
        return;
    }
    let ring_changed = match &member.last {
        LastCleaned::Hash(last) => current != last,
        LastCleaned::NeverCleanedUp => true,
        LastCleaned::Absent => false,
    };
    let owned_now = owned_now(snapshot, member.facts);
    let record = record_ownership(member, current_record(member), owned_now.as_ref().ok(), false, state);
    let seed = |reason| Action::SeedLastCleaned {
        service: service.clone(),
        hash: current.to_owned(),
        members: record_for(settled, current),
        reason,
    };
    let decision = decide_node(&record, owned_now.as_ref().map_err(String::as_str));
    if let NodeDecision::RingHash { reason } = &decision {
        if !ring_changed {
            return;
        }
        if only_nodes_left(snapshot, member, current, settled) {
            state.actions.push(seed(SeedReason::OnlyNodesLeft));
            return;
        }
        state.fallbacks.push((service.clone(), reason.to_string()));
    }
    match plan_node(&decision, ring_changed) {
        NodePlan::Nothing if ring_changed => {
            state.lost_nothing.push(service.clone());
            state.actions.push(seed(SeedReason::NoRangeLost));
        }
        NodePlan::Nothing => {}
        NodePlan::Clean { scope, mark_node_clean, .. } => state.candidates.push(Candidate {
            service: service.clone(),
            ring_hash: current.to_owned(),
            scope: whole_node_when_all(scope, owned_now.as_ref().ok()),
            mark_node_clean,
        }),
    }
}

/// A member that just joined (no `last-cleaned-…`). What it holds is what it replicated right
/// after it joined, less nothing: a node that joined later may since have taken some of it.
/// * With an ownership record (seeded when the ring views first listed it, alone): the
///   ownership rule compares that record with what it replicates now: nothing lost, it is
///   seeded with its current hash; ranges lost, it is cleaned for those keyspaces.
/// * Without one, alone (the only member new to the ring views, or without views the only member
///   without `last-cleaned-…` while no member marked `NeverCleanedUp` shows its ring): what it
///   replicates now is what it holds: record and hash seeded.
/// * Without one, together with others (a parallel bootstrap seen after several joined,
///   groundskeeper installed on a cluster that never recorded a cleanup, several joiners and no
///   ring views): which handed ranges to which cannot be known, so each is marked
///   `NeverCleanedUp` (kept across restarts) and cleaned once, whole, for the ring the burst ends
///   with.
fn decide_joiner(
    snapshot: &Snapshot,
    member: &Member<'_>,
    settled: &Option<MembersRecord>,
    joiners: &Joiners<'_>,
    state: &mut PassState,
) {
    let service = &member.facts.service;
    let owned_now = owned_now(snapshot, member.facts);
    let existing = current_record(member);
    let recorded = matches!(existing, RecordState::Present(_));
    let in_ring = owned_now.is_ok();
    let alone = if snapshot.ownership.is_ok() {
        joiners.in_ring_unrecorded <= 1
    } else {
        joiners.alone_without_views(member)
    };
    if !recorded && (in_ring || member.current.is_some() || snapshot.ownership.is_err()) && !alone {
        state.joined_together.push(service.clone());
        state.actions.push(Action::SeedLastCleaned {
            service: service.clone(),
            hash: keys::NEVER_CLEANED_UP.to_owned(),
            members: None,
            reason: SeedReason::JoinedTogether,
        });
        return;
    }
    let record = record_ownership(member, existing, owned_now.as_ref().ok(), false, state);
    let Some(current) = member.current else {
        state.bootstrapping.push(service.clone());
        return;
    };
    if snapshot.ownership.is_ok() && !in_ring && !recorded {
        // Joined (it has a hash), but the views do not list it yet: seeded once they do, with
        // what it replicates then.
        state.bootstrapping.push(service.clone());
        return;
    }
    let seed = Action::SeedLastCleaned {
        service: service.clone(),
        hash: current.to_owned(),
        members: record_for(settled, current),
        reason: SeedReason::Joined,
    };
    if !recorded {
        state.actions.push(seed);
        return;
    }
    let decision = decide_node(&record, owned_now.as_ref().map_err(String::as_str));
    if let NodeDecision::RingHash { reason } = &decision {
        state.fallbacks.push((service.clone(), reason.to_string()));
    }
    match plan_node(&decision, true) {
        NodePlan::Nothing => state.actions.push(seed),
        NodePlan::Clean { scope, mark_node_clean, .. } => state.candidates.push(Candidate {
            service: service.clone(),
            ring_hash: current.to_owned(),
            scope: whole_node_when_all(scope, owned_now.as_ref().ok()),
            mark_node_clean,
        }),
    }
}

/// A node marked `NeverCleanedUp`: cleaned once, whole.
fn clean_once(member: &Member<'_>, current: &str, state: &mut PassState) {
    let service = member.facts.service.clone();
    state.clean_once.push(service.clone());
    state.candidates.push(Candidate {
        service,
        ring_hash: current.to_owned(),
        scope: CleanScope::All,
        mark_node_clean: false,
    });
}

/// A node cleaning every keyspace it replicates is a whole-node cleanup: the task then names no
/// keyspaces for it (a task lists a node's keyspaces only where it cleans fewer, which keeps the
/// task small on large clusters), and the runner resets Scylla's flag by itself.
fn whole_node_when_all(scope: CleanScope, owned_now: Option<&BTreeMap<String, RangeSet>>) -> CleanScope {
    match (&scope, owned_now) {
        (CleanScope::Only(keyspaces), Some(owned)) if owned.keys().all(|k| keyspaces.contains(k)) => {
            CleanScope::All
        }
        _ => scope,
    }
}

fn owned_now(snapshot: &Snapshot, member: &MemberFacts) -> Result<BTreeMap<String, RangeSet>, String> {
    owned_by(&snapshot.ownership, member)
}

/// What `member` replicates now per vnode keyspace in the cluster's ring `views`, or why that is
/// unknown.
pub(crate) fn owned_by(
    views: &Result<Vec<RingView>, String>,
    member: &MemberFacts,
) -> Result<BTreeMap<String, RangeSet>, String> {
    let views = views.as_ref().map_err(Clone::clone)?;
    let address = member.address.as_deref().ok_or("the node's broadcast address is not known yet")?;
    if !views.is_empty() && !views.iter().any(|v| v.nodes.contains_key(address)) {
        return Err(format!("the ring does not list the node's address {address} yet"));
    }
    Ok(node_ownership(views, address))
}

/// The node's ownership record as found on its member Service.
fn current_record(member: &Member<'_>) -> RecordState {
    RecordState::from_annotation(member.facts.annotations.get(OWNED_AT_LAST_CLEANUP).map(String::as_str))
}

/// Keeps the node's ownership record and returns the one this pass decides on. Seeded when the
/// node has none and just joined (beside scylla-operator also when scylla-operator is about to
/// clean or seed it: the record then follows that); widened when it replicates ranges or
/// keyspaces the record lacks; reset to what it replicates now when someone else cleaned the
/// whole node for its current ring ([`basis_change`], `outside_cleaner`: scylla-operator's
/// cleanup runs for the cluster). A record the node needs that is too large to keep is
/// returned unreadable: it would hide the loss of the ranges it cannot take.
fn record_ownership(
    member: &Member<'_>,
    record: RecordState,
    owned_now: Option<&BTreeMap<String, RangeSet>>,
    outside_cleaner: bool,
    state: &mut PassState,
) -> RecordState {
    let Some(owned_now) = owned_now else {
        return record;
    };
    let last = member.last.annotation();
    // A seed stands for the `last-cleaned-…` the node carries after this pass: the current hash
    // groundskeeper seeds in this same pass, or beside scylla-operator the value found (whose
    // move to the current ring then tells of scylla-operator's cleanup).
    let seed_basis = if outside_cleaner { last } else { member.current };
    let fresh = |basis: Option<&str>| OwnershipRecord {
        keyspaces: owned_now.clone(),
        last_cleaned: basis.map(str::to_owned),
    };
    // Beside scylla-operator a node without a record gets one when scylla-operator is about to
    // clean or seed it (the record then follows that cleanup: reset). One already clean for its
    // ring is not taken as holding only what it replicates: it gets its record at its next
    // cleanup by scylla-operator.
    let seeds = match (&member.last, member.current) {
        (LastCleaned::Absent, _) => true,
        (LastCleaned::NeverCleanedUp, _) => outside_cleaner,
        (LastCleaned::Hash(last), Some(current)) => outside_cleaner && last != current,
        (LastCleaned::Hash(_), None) => false,
    };
    let next = match &record {
        RecordState::Present(held) => {
            match basis_change(held.last_cleaned.as_deref(), last, member.current, outside_cleaner) {
                BasisChange::CleanedElsewhere => Some((fresh(last), RecordChange::ResetAfterOutsideCleanup)),
                BasisChange::Rebase => {
                    let mut next = held.widened(owned_now).unwrap_or_else(|| held.clone());
                    next.last_cleaned = last.map(str::to_owned);
                    Some((next, RecordChange::Rebased))
                }
                BasisChange::Same => held.widened(owned_now).map(|next| (next, RecordChange::Widened)),
            }
        }
        RecordState::Missing if seeds => Some((fresh(seed_basis), RecordChange::Seeded)),
        _ => None,
    };
    let Some((next, change)) = next else {
        return record;
    };
    let value = match next.to_annotation() {
        Ok(value) => value,
        Err(err) => return RecordState::Unreadable(err.to_string()),
    };
    if change == RecordChange::ResetAfterOutsideCleanup {
        state.reset.push(member.facts.service.clone());
    }
    state.actions.push(Action::RecordOwnership { service: member.facts.service.clone(), value, change });
    RecordState::Present(next)
}

fn retry_wait(now: jiff::Timestamp, finished_at: Option<jiff::Timestamp>) -> Duration {
    let Some(finished_at) = finished_at else {
        return Duration::ZERO;
    };
    let elapsed = now.duration_since(finished_at);
    let elapsed = Duration::try_from(elapsed).unwrap_or(Duration::ZERO);
    RETRY_BACKOFF.saturating_sub(elapsed)
}

fn only_nodes_left(
    snapshot: &Snapshot,
    member: &Member<'_>,
    current: &str,
    settled: &Option<MembersRecord>,
) -> bool {
    let (Some(settled), Some(record), LastCleaned::Hash(last)) = (settled, &member.record, &member.last)
    else {
        return false;
    };
    snapshot.cluster.single_datacenter
        && settled.ring_hash == current
        && record.ring_hash == *last
        && settled.members.len() < record.members.len()
        && settled.members.is_subset(&record.members)
}

fn understand_member<'a>(cluster: &ClusterFacts, facts: &'a MemberFacts) -> Result<Member<'a>, String> {
    let object = format!("Service {}/{}", cluster.namespace, facts.service);
    if facts.datacenter.is_none() || facts.rack.is_none() {
        return Err(format!(
            "{object} lacks label {} or {}: cannot tell its rack, so it is not cleaned",
            keys::SCYLLA_DATACENTER_LABEL,
            keys::SCYLLA_RACK_LABEL
        ));
    }
    let current = match facts.annotations.get(keys::CURRENT_TOKEN_RING_HASH) {
        None => None,
        Some(value) if looks_like_ring_hash(value) => Some(value.as_str()),
        Some(value) => {
            return Err(format!(
                "annotation {} on {object} is not a token-ring hash: {:?}; remove it so it is \
                 computed again",
                keys::CURRENT_TOKEN_RING_HASH,
                shorten(value)
            ));
        }
    };
    let last = match facts.annotations.get(keys::LAST_CLEANED_UP_TOKEN_RING_HASH) {
        None => LastCleaned::Absent,
        Some(value) if value == keys::NEVER_CLEANED_UP => LastCleaned::NeverCleanedUp,
        Some(value) if looks_like_ring_hash(value) => LastCleaned::Hash(value.clone()),
        Some(value) => {
            return Err(format!(
                "annotation {} on {object} is neither a token-ring hash nor {}: {:?}; set it to \
                 {} to have the node cleaned",
                keys::LAST_CLEANED_UP_TOKEN_RING_HASH,
                keys::NEVER_CLEANED_UP,
                shorten(value),
                keys::NEVER_CLEANED_UP
            ));
        }
    };
    // Our own bookkeeping: unreadable means "unknown", which only ever leads to a cleanup.
    let record =
        facts.annotations.get(keys::CLEANED_FOR_MEMBERS).and_then(|v| MembersRecord::from_annotation(v));
    Ok(Member { facts, current, last, record })
}

fn disabled_plan(cluster: &ClusterFacts) -> Plan {
    let message = format!(
        "automatic cleanup is turned off by annotation {}=false on ScyllaCluster {}/{}",
        keys::MAINTENANCE_ENABLED,
        cluster.namespace,
        cluster.name
    );
    Plan {
        actions: Vec::new(),
        progressing: ConditionPlan {
            type_: PROGRESSING,
            status: false,
            reason: "Disabled".into(),
            message: message.clone(),
        },
        degraded: ConditionPlan { type_: DEGRADED, status: false, reason: "Disabled".into(), message },
        requeue_after: None,
    }
}

fn secret_problem(snapshot: &Snapshot) -> Option<String> {
    let namespace = &snapshot.cluster.namespace;
    match &snapshot.agent_token {
        SecretState::Present => None,
        SecretState::Missing { name } => Some(format!(
            "Secret {namespace}/{name} (the Scylla Manager Agent token) does not exist: cleanup \
             Jobs cannot authenticate to the agent, no cleanup starts until it exists"
        )),
        SecretState::MissingKey { name, key } => Some(format!(
            "Secret {namespace}/{name} has no key {key} (the Scylla Manager Agent token): cleanup \
             Jobs cannot authenticate to the agent, no cleanup starts until it has it"
        )),
    }
}

/// Why no cleanup task may be submitted now, each as a sentence a person can act on.
/// `quiet`: the wait for a quiet ring, if any ([`quiet_wait`]).
fn blockers(snapshot: &Snapshot, invalid_settings: bool, quiet: Option<&(String, Duration)>) -> Vec<String> {
    let mut blockers = precondition_failures(&snapshot.cluster);
    if invalid_settings {
        blockers.push("waiting for the invalid annotations on the ScyllaCluster to be fixed".into());
    }
    blockers.extend(secret_wait(&snapshot.cluster.namespace, &snapshot.agent_token));
    blockers.extend(snapshot.holds.iter().map(|hold| format!("automatic cleanup held: {hold}")));
    blockers.extend(quiet.map(|(why, _)| why.clone()));
    blockers
}

/// "waiting for …" the agent token Secret, when it or its key is missing.
pub(crate) fn secret_wait(namespace: &str, secret: &SecretState) -> Option<String> {
    match secret {
        SecretState::Present => None,
        SecretState::Missing { name } => {
            Some(format!("waiting for the agent token Secret {namespace}/{name}"))
        }
        SecretState::MissingKey { name, key } => {
            Some(format!("waiting for key {key} in the agent token Secret {namespace}/{name}"))
        }
    }
}
