//! What the cleanup controller should do for one ScyllaCluster: a pure function of a snapshot.
//!
//! Rules (see DESIGN.md, "Scylla"):
//! * a node needs cleanup iff its `current-token-ring-hash` differs from its
//!   `last-cleaned-up-token-ring-hash` (`NeverCleanedUp` never equals a hash: "clean once");
//! * a node without a current hash is bootstrapping: it gets no Job and blocks nobody;
//! * a node without `last-cleaned-…` just joined and holds no stale data: it is seeded with its
//!   current hash, at once and whatever the cluster's state, because a node seeded late (after
//!   more nodes joined) may already hold ranges it has since handed over;
//! * new Jobs only when the cluster is settled (observed generation, `StatefulSetControllerProgressing`
//!   not True, `Available` True, `Degraded` False), the agent token Secret exists, and the rack and
//!   cluster concurrency bounds allow; everything else (seeding, recording, deleting) goes ahead;
//! * a Job cleans for the hash it was created with; its success records that hash only, so a Job
//!   that ran while the ring moved again leaves the node needing cleanup for the new ring;
//! * a failed Job stays (for its logs and so it is not retried in a loop) and makes the controller
//!   Degraded. A failure that may pass on retry is retried: the Job is deleted [`RETRY_BACKOFF`]
//!   after it failed and a new one created on the next pass. A failure no retry can fix (bad
//!   credentials, unknown keyspace: exit code 2) is kept until a person deletes the Job, having
//!   fixed the cause. A failed Job for a ring that has moved on is deleted at once.
//! * a Job deleted by hand simply disappears from the snapshot: the node needs cleanup again.
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

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use groundskeeper_protocol::keys;
use serde::{Deserialize, Serialize};

/// Wait between a retryable Job failure and the next attempt.
pub const RETRY_BACKOFF: Duration = Duration::from_secs(5 * 60);
/// Requeue while cleanup Jobs run, so progress is noticed even if a watch event is missed.
pub const REQUEUE_WHILE_RUNNING: Duration = Duration::from_secs(30);

/// Condition types this controller owns.
pub const PROGRESSING: &str = "CleanupControllerProgressing";
pub const DEGRADED: &str = "CleanupControllerDegraded";

/// scylla-operator's condition gating cleanup while StatefulSets roll.
pub const STATEFUL_SET_CONTROLLER_PROGRESSING: &str = "StatefulSetControllerProgressing";

/// Everything the decision needs, read from the API by `observe`.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub cluster: ClusterFacts,
    pub members: Vec<MemberFacts>,
    /// Cleanup Jobs groundskeeper created for this cluster.
    pub jobs: Vec<JobFacts>,
    pub agent_token: SecretState,
    /// Objects `observe` could not make sense of: each makes the controller Degraded.
    pub findings: Vec<Finding>,
    pub now: jiff::Timestamp,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ClusterFacts {
    pub namespace: String,
    pub name: String,
    pub generation: Option<i64>,
    pub observed_generation: Option<i64>,
    pub conditions: Vec<ConditionFacts>,
    pub annotations: BTreeMap<String, String>,
    /// `spec.externalSeeds` is empty: every node of the ring has a member Service here.
    pub single_datacenter: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConditionFacts {
    pub type_: String,
    pub status: String,
    pub reason: String,
    pub message: String,
}

/// A member Service (one per Scylla node), with its annotations as found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemberFacts {
    pub service: String,
    pub uid: Option<String>,
    /// `scylla/datacenter` label.
    pub datacenter: Option<String>,
    /// `scylla/rack` label.
    pub rack: Option<String>,
    pub annotations: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFacts {
    pub name: String,
    /// The member Service it cleans (`groundskeeper.dev/node` label).
    pub node: String,
    /// Its `cleanup-token-ring-hash` annotation.
    pub ring_hash: Option<String>,
    pub state: JobState,
    /// A Warning Event was published for its failure already.
    pub failure_reported: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    Running,
    Succeeded,
    Failed {
        /// From the result, the Job's conditions, or both.
        message: String,
        /// False when no retry can help (exit code 2, bad input).
        retryable: bool,
        finished_at: Option<jiff::Timestamp>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretState {
    Present,
    Missing { name: String },
    MissingKey { name: String, key: String },
}

/// Something `observe` found wrong with an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Kind and namespaced name, e.g. `Job ns/cleanup-x`.
    pub object: String,
    pub message: String,
}

/// What [`keys::CLEANED_FOR_MEMBERS`] holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MembersRecord {
    pub ring_hash: String,
    /// UIDs of every member Service, sorted.
    pub members: BTreeSet<String>,
}

impl MembersRecord {
    pub fn to_annotation(&self) -> String {
        serde_json::to_string(self).expect("records always serialise")
    }

    pub fn from_annotation(value: &str) -> Option<Self> {
        serde_json::from_str(value).ok()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeedReason {
    /// `last-cleaned-…` absent: a node that just joined holds no stale data.
    Joined,
    /// Only nodes left the ring since the node was last cleaned: it lost no ranges.
    OnlyNodesLeft,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteReason {
    /// It succeeded and the node's annotation says so.
    Recorded,
    /// It failed for a ring that has moved on.
    Outdated,
    /// Its member Service is gone.
    MemberGone,
    /// It failed in a way that may pass on retry, [`RETRY_BACKOFF`] ago.
    Retry,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Write `last-cleaned-… = hash` (and the members record, or remove it when `None`).
    SeedLastCleaned {
        service: String,
        hash: String,
        members: Option<MembersRecord>,
        reason: SeedReason,
    },
    /// A cleanup Job succeeded: `last-cleaned-… = hash` (the Job's own hash).
    RecordCleaned {
        service: String,
        hash: String,
        job: String,
        members: Option<MembersRecord>,
    },
    CreateCleanupJob {
        service: String,
        hash: String,
        datacenter: String,
        rack: String,
    },
    /// Publish a Warning Event for a failed Job, and mark the Job so it is published once.
    ReportJobFailure {
        job: String,
        service: String,
        message: String,
    },
    DeleteJob {
        job: String,
        reason: DeleteReason,
    },
}

/// A condition as this controller wants it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConditionPlan {
    pub type_: &'static str,
    pub status: bool,
    pub reason: String,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub actions: Vec<Action>,
    pub progressing: ConditionPlan,
    pub degraded: ConditionPlan,
    /// When to look again even without a watch event; `None`: the idle resync.
    pub requeue_after: Option<Duration>,
}

/// A node's annotations, understood.
#[derive(Debug, Clone, PartialEq, Eq)]
enum LastCleaned {
    Absent,
    NeverCleanedUp,
    Hash(String),
}

struct Member<'a> {
    facts: &'a MemberFacts,
    dc: &'a str,
    rack: &'a str,
    current: Option<&'a str>,
    last: LastCleaned,
    record: Option<MembersRecord>,
}

impl Member<'_> {
    fn rack_key(&self) -> (String, String) {
        (self.dc.to_owned(), self.rack.to_owned())
    }
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
    let limits = parse_limits(cluster, &mut problems);
    if let Some(message) = secret_problem(snapshot) {
        problems.push(("AgentTokenSecretMissing", message));
    }
    for finding in &snapshot.findings {
        problems.push((
            "InvalidObject",
            format!("{}: {}", finding.object, finding.message),
        ));
    }

    let mut members = Vec::new();
    for facts in sorted_members(&snapshot.members) {
        match understand_member(cluster, facts) {
            Ok(member) => members.push(member),
            Err(message) => problems.push(("InvalidAnnotation", message)),
        }
    }
    let settled = settled_record(cluster, &snapshot.members);

    let mut state = PassState::default();
    let member_names: BTreeSet<&str> = snapshot.members.iter().map(|m| m.service.as_str()).collect();
    for job in &snapshot.jobs {
        if !member_names.contains(job.node.as_str()) {
            state.actions.push(Action::DeleteJob {
                job: job.name.clone(),
                reason: DeleteReason::MemberGone,
            });
        }
    }
    for member in &members {
        let job = snapshot.jobs.iter().find(|j| j.node == member.facts.service);
        decide_member(snapshot, member, job, &settled, &mut state, &mut problems);
    }
    // Jobs of members whose annotations could not be understood still occupy their slots.
    let understood: BTreeSet<&str> = members.iter().map(|m| m.facts.service.as_str()).collect();
    for job in &snapshot.jobs {
        if member_names.contains(job.node.as_str())
            && !understood.contains(job.node.as_str())
            && job.state == JobState::Running
        {
            state.running_elsewhere += 1;
        }
    }

    let blockers = blockers(snapshot, enabled.is_ok(), &limits);
    let waiting_for_capacity = if blockers.is_empty() {
        start_jobs(&limits, &mut state)
    } else {
        0
    };
    let progressing = progressing_condition(&members, &state, &limits, &blockers, waiting_for_capacity);
    let degraded = degraded_condition(&problems);
    let requeue_after = state.requeue_after();
    Plan {
        actions: state.actions,
        progressing,
        degraded,
        requeue_after,
    }
}

#[derive(Default)]
struct PassState {
    actions: Vec<Action>,
    /// Nodes needing cleanup with no Job yet, in order: (service, hash, dc, rack).
    candidates: Vec<(String, String, String, String)>,
    /// Running Jobs per (dc, rack).
    running: BTreeMap<(String, String), u32>,
    /// Running Jobs of members that could not be understood (their rack is unknown).
    running_elsewhere: u32,
    /// Nodes needing cleanup, including those being cleaned.
    needing: usize,
    bootstrapping: Vec<String>,
    /// Failed Jobs waiting for their retry.
    retry_in: Option<Duration>,
}

impl PassState {
    fn running_total(&self) -> u32 {
        self.running.values().sum::<u32>() + self.running_elsewhere
    }

    fn requeue_after(&self) -> Option<Duration> {
        let running = (self.running_total() > 0).then_some(REQUEUE_WHILE_RUNNING);
        match (running, self.retry_in) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

fn decide_member(
    snapshot: &Snapshot,
    member: &Member<'_>,
    job: Option<&JobFacts>,
    settled: &Option<MembersRecord>,
    state: &mut PassState,
    problems: &mut Vec<(&'static str, String)>,
) {
    let service = &member.facts.service;
    let needs_cleanup = match (member.current, &member.last) {
        (Some(current), LastCleaned::Hash(last)) => current != last,
        (Some(_), LastCleaned::NeverCleanedUp) => true,
        _ => false,
    };
    if let Some(job) = job {
        decide_with_job(snapshot, member, job, settled, state, problems);
        if needs_cleanup {
            state.needing += 1;
        }
        return;
    }
    let Some(current) = member.current else {
        state.bootstrapping.push(service.clone());
        return;
    };
    if member.last == LastCleaned::Absent {
        state.actions.push(Action::SeedLastCleaned {
            service: service.clone(),
            hash: current.to_owned(),
            members: record_for(settled, current),
            reason: SeedReason::Joined,
        });
        return;
    }
    if !needs_cleanup {
        return;
    }
    if only_nodes_left(snapshot, member, current, settled) {
        state.actions.push(Action::SeedLastCleaned {
            service: service.clone(),
            hash: current.to_owned(),
            members: record_for(settled, current),
            reason: SeedReason::OnlyNodesLeft,
        });
        return;
    }
    state.needing += 1;
    state.candidates.push((
        service.clone(),
        current.to_owned(),
        member.dc.to_owned(),
        member.rack.to_owned(),
    ));
}

fn decide_with_job(
    snapshot: &Snapshot,
    member: &Member<'_>,
    job: &JobFacts,
    settled: &Option<MembersRecord>,
    state: &mut PassState,
    problems: &mut Vec<(&'static str, String)>,
) {
    let cluster = &snapshot.cluster;
    let job_object = format!("Job {}/{}", cluster.namespace, job.name);
    let Some(job_hash) = job.ring_hash.as_deref() else {
        problems.push((
            "InvalidObject",
            format!(
                "{job_object} has no annotation {}: delete it so the node is cleaned again",
                keys::CLEANUP_TOKEN_RING_HASH
            ),
        ));
        if job.state == JobState::Running {
            *state.running.entry(member.rack_key()).or_default() += 1;
        }
        return;
    };
    match &job.state {
        JobState::Running => *state.running.entry(member.rack_key()).or_default() += 1,
        JobState::Succeeded => {
            let already = member.last == LastCleaned::Hash(job_hash.to_owned());
            // Never move `last-cleaned` away from the current hash: the node is clean already.
            let clean_now =
                matches!((&member.last, member.current), (LastCleaned::Hash(l), Some(c)) if l == c);
            if already || clean_now {
                state.actions.push(Action::DeleteJob {
                    job: job.name.clone(),
                    reason: DeleteReason::Recorded,
                });
            } else {
                state.actions.push(Action::RecordCleaned {
                    service: member.facts.service.clone(),
                    hash: job_hash.to_owned(),
                    job: job.name.clone(),
                    members: record_for(settled, job_hash),
                });
            }
        }
        JobState::Failed {
            message,
            retryable,
            finished_at,
        } => {
            if !job.failure_reported {
                state.actions.push(Action::ReportJobFailure {
                    job: job.name.clone(),
                    service: member.facts.service.clone(),
                    message: message.clone(),
                });
            }
            let outdated = member.current.is_some_and(|c| c != job_hash);
            let wait = retry_wait(snapshot.now, *finished_at);
            let (delete, advice) = if outdated {
                (
                    Some(DeleteReason::Outdated),
                    "the ring has moved on; a new Job follows".to_owned(),
                )
            } else if !retryable {
                (
                    None,
                    "no retry can fix this: fix the cause, then delete the Job to retry".to_owned(),
                )
            } else if wait.is_zero() {
                (Some(DeleteReason::Retry), "retrying now".to_owned())
            } else {
                state.retry_in = Some(state.retry_in.map_or(wait, |w| w.min(wait)));
                (None, format!("retrying in {}s", wait.as_secs()))
            };
            problems.push((
                "CleanupJobFailed",
                format!("cleanup Job {} failed: {message} ({advice})", job.name),
            ));
            if let Some(reason) = delete {
                state.actions.push(Action::DeleteJob {
                    job: job.name.clone(),
                    reason,
                });
            }
        }
    }
}

fn retry_wait(now: jiff::Timestamp, finished_at: Option<jiff::Timestamp>) -> Duration {
    let Some(finished_at) = finished_at else {
        return Duration::ZERO;
    };
    let elapsed = now.duration_since(finished_at);
    let elapsed = Duration::try_from(elapsed).unwrap_or(Duration::ZERO);
    RETRY_BACKOFF.saturating_sub(elapsed)
}

/// The members record to write with `hash`, when every member agrees on it.
fn record_for(settled: &Option<MembersRecord>, hash: &str) -> Option<MembersRecord> {
    settled.as_ref().filter(|r| r.ring_hash == hash).cloned()
}

/// The members record of a cluster whose every member reports the same well-formed current hash
/// and has a UID; `None` otherwise (or when other datacenters may hold nodes we cannot see).
fn settled_record(cluster: &ClusterFacts, members: &[MemberFacts]) -> Option<MembersRecord> {
    if !cluster.single_datacenter || members.is_empty() {
        return None;
    }
    let mut hash: Option<&str> = None;
    let mut uids = BTreeSet::new();
    for member in members {
        let current = member.annotations.get(keys::CURRENT_TOKEN_RING_HASH)?;
        if !looks_like_ring_hash(current) || hash.is_some_and(|h| h != current) {
            return None;
        }
        hash = Some(current);
        uids.insert(member.uid.clone()?);
    }
    Some(MembersRecord {
        ring_hash: hash?.to_owned(),
        members: uids,
    })
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
    let (Some(dc), Some(rack)) = (facts.datacenter.as_deref(), facts.rack.as_deref()) else {
        return Err(format!(
            "{object} lacks label {} or {}: cannot tell its rack, so it is not cleaned",
            keys::SCYLLA_DATACENTER_LABEL,
            keys::SCYLLA_RACK_LABEL
        ));
    };
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
    let record = facts
        .annotations
        .get(keys::CLEANED_FOR_MEMBERS)
        .and_then(|v| MembersRecord::from_annotation(v));
    Ok(Member {
        facts,
        dc,
        rack,
        current,
        last,
        record,
    })
}

/// SHA-512 in standard padded base64: 88 characters ending in `==`.
pub fn looks_like_ring_hash(value: &str) -> bool {
    value.len() == 88
        && value.ends_with("==")
        && value[..86]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

fn shorten(value: &str) -> String {
    if value.chars().count() <= 100 {
        return value.to_owned();
    }
    let cut: String = value.chars().take(100).collect();
    format!("{cut}…")
}

/// Members ordered by datacenter, rack, then ordinal (numerically: `-10` after `-9`).
fn sorted_members(members: &[MemberFacts]) -> Vec<&MemberFacts> {
    let mut sorted: Vec<&MemberFacts> = members.iter().collect();
    sorted.sort_by_key(|m| (m.datacenter.clone(), m.rack.clone(), ordinal_key(&m.service)));
    sorted
}

fn ordinal_key(service: &str) -> (String, u64) {
    match service.rsplit_once('-') {
        Some((prefix, n)) if n.parse::<u64>().is_ok() => (prefix.to_owned(), n.parse().unwrap_or(0)),
        _ => (service.to_owned(), 0),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub per_rack: u32,
    pub per_cluster: Option<u32>,
    /// A limit annotation could not be read: start nothing rather than guess.
    pub invalid: bool,
}

fn parse_limits(cluster: &ClusterFacts, problems: &mut Vec<(&'static str, String)>) -> Limits {
    let mut limits = Limits {
        per_rack: 1,
        per_cluster: None,
        invalid: false,
    };
    match positive_annotation(cluster, keys::CLEANUP_MAX_PER_RACK) {
        Ok(Some(n)) => limits.per_rack = n,
        Ok(None) => {}
        Err(message) => {
            limits.invalid = true;
            problems.push(("InvalidAnnotation", message));
        }
    }
    match positive_annotation(cluster, keys::CLEANUP_MAX_PER_CLUSTER) {
        Ok(n) => limits.per_cluster = n,
        Err(message) => {
            limits.invalid = true;
            problems.push(("InvalidAnnotation", message));
        }
    }
    limits
}

fn positive_annotation(cluster: &ClusterFacts, key: &str) -> Result<Option<u32>, String> {
    let Some(value) = cluster.annotations.get(key) else {
        return Ok(None);
    };
    match value.parse::<u32>() {
        Ok(n) if n > 0 => Ok(Some(n)),
        _ => Err(format!(
            "annotation {key} on ScyllaCluster {}/{} is not a positive integer: '{}'",
            cluster.namespace,
            cluster.name,
            shorten(value)
        )),
    }
}

/// `Ok(false)`: turned off; `Err`: unreadable, so no new Jobs.
fn parse_enabled(cluster: &ClusterFacts) -> Result<bool, String> {
    match cluster
        .annotations
        .get(keys::MAINTENANCE_ENABLED)
        .map(String::as_str)
    {
        None | Some("true") => Ok(true),
        Some("false") => Ok(false),
        Some(other) => Err(format!(
            "annotation {} on ScyllaCluster {}/{} must be \"true\" or \"false\", not '{}'; no \
             cleanup starts until it is",
            keys::MAINTENANCE_ENABLED,
            cluster.namespace,
            cluster.name,
            shorten(other)
        )),
    }
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
        degraded: ConditionPlan {
            type_: DEGRADED,
            status: false,
            reason: "Disabled".into(),
            message,
        },
        requeue_after: None,
    }
}

fn secret_problem(snapshot: &Snapshot) -> Option<String> {
    let namespace = &snapshot.cluster.namespace;
    match &snapshot.agent_token {
        SecretState::Present => None,
        SecretState::Missing { name } => Some(format!(
            "Secret {namespace}/{name} (the Scylla Manager Agent token) does not exist: cleanup Jobs \
             cannot authenticate, none is created"
        )),
        SecretState::MissingKey { name, key } => Some(format!(
            "Secret {namespace}/{name} has no key {key} (the Scylla Manager Agent token): cleanup \
             Jobs cannot authenticate, none is created"
        )),
    }
}

/// Why no new Job may start now, each as a sentence a person can act on.
fn blockers(snapshot: &Snapshot, enabled_known: bool, limits: &Limits) -> Vec<String> {
    let mut blockers = precondition_failures(&snapshot.cluster);
    if !enabled_known || limits.invalid {
        blockers.push("waiting for the invalid annotations on the ScyllaCluster to be fixed".into());
    }
    match &snapshot.agent_token {
        SecretState::Present => {}
        SecretState::Missing { name } => blockers.push(format!(
            "waiting for the agent token Secret {}/{name}",
            snapshot.cluster.namespace
        )),
        SecretState::MissingKey { name, key } => blockers.push(format!(
            "waiting for key {key} in the agent token Secret {}/{name}",
            snapshot.cluster.namespace
        )),
    }
    blockers
}

/// The cluster preconditions of DESIGN.md, each failing one as "waiting for …".
pub fn precondition_failures(cluster: &ClusterFacts) -> Vec<String> {
    let mut waiting = Vec::new();
    match (cluster.generation, cluster.observed_generation) {
        (Some(g), Some(o)) if g == o => {}
        (g, o) => waiting.push(format!(
            "waiting for scylla-operator to observe generation {} (status.observedGeneration is {})",
            g.map_or("?".into(), |g| g.to_string()),
            o.map_or("unset".into(), |o| o.to_string())
        )),
    }
    let condition = |type_: &str| cluster.conditions.iter().find(|c| c.type_ == type_);
    if condition(STATEFUL_SET_CONTROLLER_PROGRESSING).is_some_and(|c| c.status == "True") {
        waiting.push(format!(
            "waiting for {STATEFUL_SET_CONTROLLER_PROGRESSING} to clear"
        ));
    }
    match condition("Available") {
        Some(c) if c.status == "True" => {}
        Some(c) => waiting.push(format!(
            "waiting for Available=True (is {}{})",
            c.status,
            explain(c)
        )),
        None => waiting.push("waiting for Available=True (condition not set yet)".into()),
    }
    match condition("Degraded") {
        Some(c) if c.status == "False" => {}
        // scylla-operator counts our own Degraded into its aggregate: do not let our own report
        // (a failed Job on one node, say) stop cleanup of all the others.
        Some(c) if c.status == "True" && degraded_only_by_us(cluster) => {}
        Some(c) => waiting.push(format!(
            "waiting for Degraded=False (is {}{})",
            c.status,
            explain(c)
        )),
        None => waiting.push("waiting for Degraded=False (condition not set yet)".into()),
    }
    waiting
}

fn degraded_only_by_us(cluster: &ClusterFacts) -> bool {
    let mut others = cluster
        .conditions
        .iter()
        .filter(|c| c.type_ != "Degraded" && c.type_.ends_with("Degraded") && c.status == "True");
    let ours = cluster
        .conditions
        .iter()
        .any(|c| c.type_ == DEGRADED && c.status == "True");
    ours && others.all(|c| c.type_ == DEGRADED)
}

fn explain(c: &ConditionFacts) -> String {
    match (c.reason.is_empty(), c.message.is_empty()) {
        (true, true) => String::new(),
        (false, true) => format!(": {}", c.reason),
        (true, false) => format!(": {}", shorten(&c.message)),
        (false, false) => format!(": {}: {}", c.reason, shorten(&c.message)),
    }
}

/// Turns candidates into Jobs within the bounds; returns how many are left waiting for a slot.
fn start_jobs(limits: &Limits, state: &mut PassState) -> usize {
    let mut total = state.running_total();
    let mut waiting = 0;
    for (service, hash, dc, rack) in std::mem::take(&mut state.candidates) {
        let in_rack = state.running.entry((dc.clone(), rack.clone())).or_default();
        let cluster_full = limits.per_cluster.is_some_and(|max| total >= max);
        if *in_rack >= limits.per_rack || cluster_full {
            waiting += 1;
            continue;
        }
        *in_rack += 1;
        total += 1;
        state.actions.push(Action::CreateCleanupJob {
            service,
            hash,
            datacenter: dc,
            rack,
        });
    }
    waiting
}

fn progressing_condition(
    members: &[Member<'_>],
    state: &PassState,
    limits: &Limits,
    blockers: &[String],
    waiting_for_capacity: usize,
) -> ConditionPlan {
    let running_total = state.running_total() as usize;
    let mut parts = Vec::new();
    if state.needing > 0 {
        parts.push(format!(
            "{} of {} nodes need cleanup",
            state.needing,
            members.len()
        ));
    }
    for ((dc, rack), running) in &state.running {
        if *running > 0 {
            parts.push(format!(
                "{running} running in rack {rack}{} (limit {})",
                if dc.is_empty() {
                    String::new()
                } else {
                    format!(" of datacenter {dc}")
                },
                limits.per_rack
            ));
        }
    }
    if let Some(max) = limits.per_cluster
        && waiting_for_capacity > 0
        && running_total >= max as usize
    {
        parts.push(format!("{running_total} running in the cluster (limit {max})"));
    }
    if waiting_for_capacity > 0 {
        parts.push(format!("{waiting_for_capacity} waiting for a free slot"));
    }
    if state.needing > 0 && running_total == 0 {
        parts.extend(blockers.iter().cloned());
    }
    if !state.bootstrapping.is_empty() {
        parts.push(format!(
            "{} bootstrapping (no ring hash yet, not waited for): {}",
            plural(state.bootstrapping.len(), "node", "nodes"),
            state.bootstrapping.join(", ")
        ));
    }
    let (status, reason) = if running_total > 0 {
        (true, "CleanupRunning")
    } else if state.needing > 0 {
        (true, "WaitingForPreconditions")
    } else {
        (false, "AsExpected")
    };
    if parts.is_empty() {
        parts.push(format!("all {} nodes are clean", members.len()));
    } else if state.needing == 0 {
        parts.insert(0, "no node needs cleanup".into());
    }
    ConditionPlan {
        type_: PROGRESSING,
        status,
        reason: reason.into(),
        message: parts.join("; "),
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn degraded_condition(problems: &[(&'static str, String)]) -> ConditionPlan {
    match problems.first() {
        None => ConditionPlan {
            type_: DEGRADED,
            status: false,
            reason: "AsExpected".into(),
            message: String::new(),
        },
        Some((reason, _)) => ConditionPlan {
            type_: DEGRADED,
            status: true,
            reason: (*reason).into(),
            message: problems
                .iter()
                .map(|(_, m)| m.as_str())
                .collect::<Vec<_>>()
                .join("; "),
        },
    }
}
