//! Living beside scylla-operator's own cleanup controller: pure rules, no API calls.
//!
//! scylla-operator 1.10 and later (`Run node cleanup after scaling the ScyllaCluster`, first in
//! v1.10.0) runs a cleanup controller of its own that cannot be switched off. For every member
//! Service whose `current-token-ring-hash` differs from its `last-cleaned-up-token-ring-hash` it
//! creates a Job `cleanup-<member service>` (labels `scylla-operator.scylladb.com/node-job-type:
//! Cleanup`, `scylla/cluster: <cluster>`, annotation `cleanup-token-ring-hash`), all nodes at
//! once, as soon as the cluster is settled and **every** member Service carries both
//! annotations; once a Job has completed it writes the Job's hash as the node's
//! `last-cleaned-…` and deletes (prunes) every Job of its labels it no longer wants. Its Job
//! first stops any cleanup running on the node (`StopCleanup`), then cleans every keyspace.
//!
//! Seeding of `last-cleaned-…` (what a node without it means):
//! * v1.10 up to v1.21 (and later releases without scylla-operator PR #3574): a member Service
//!   that has a current hash but no `last-cleaned-…` gets `last-cleaned = current` (a node that
//!   just joined is taken as clean); until then the node is waited for.
//! * since PR #3574 (2026-08, in scylla-operator's main branch, not in a release up to v1.21.1):
//!   every member Service is created with `last-cleaned = NeverCleanedUp`, so every node is
//!   cleaned once; a Service without the annotation is "not known yet" and waited for.
//!
//! groundskeeper's policy where scylla-operator's cleanup is active for a cluster:
//! * the automatic ring-hash trigger stands back: it cleans no node whose hashes differ and seeds
//!   no annotation (seeding is scylla-operator's, and a groundskeeper seed could exempt a node
//!   from the cleanup scylla-operator owes it), and says so in `CleanupControllerProgressing`
//!   with reason [`SCYLLA_OPERATOR_CLEANS_UP`]; the ownership rule still submits tasks for nodes
//!   whose hashes are equal (scylla-operator sees nothing there) but that stopped replicating
//!   ranges, and resets a node's ownership record once scylla-operator has cleaned it for its
//!   current ring (`ownership::basis_change`), so no node is cleaned twice for one change;
//! * tasks (manual ones, and rules that look beyond the ring hash) still run, but a node starts
//!   only when scylla-operator neither cleans it nor is about to ([`node_turn`]): two cleanups of
//!   one ring change are never run, and scylla-operator's Job never stops ours half-way;
//! * scylla-operator's Jobs are only read, never adopted, changed or deleted, and no
//!   groundskeeper Job takes a name of theirs: groundskeeper's Jobs are `<task>-<index>`, and
//!   `gk-<hash>-<task>-<index>` where that would start with [`RESERVED_JOB_PREFIX`]
//!   ([`is_reserved_job_name`], used by the task controller's `step_job_name`). They carry no
//!   `scylla/cluster` label, the one scylla-operator selects the Jobs it adopts and prunes by.
//!
//! Signals that scylla-operator's cleanup is active ([`detect`]), both observable through what
//! groundskeeper already reads:
//! * the status of the cluster or of its ScyllaDBDatacenter carries scylla-operator's
//!   `JobControllerProgressing` or `JobControllerDegraded` condition: written on every sync by
//!   versions that have the cleanup controller (1.10+), before any ring change; the versions
//!   with a ScyllaDBDatacenter write it there first and copy it up to the ScyllaCluster later,
//!   so both are read;
//! * a Job with scylla-operator's cleanup labels exists for the cluster;
//! * an earlier pass saw one of these: the trigger's own `CleanupControllerProgressing` has
//!   reason [`SCYLLA_OPERATOR_CLEANS_UP`]. scylla-operator's cleanup controller cannot be switched
//!   off, so once seen it is taken as there for good: a moment without either sign (a status
//!   rebuilt, every Job pruned, a ring change noticed before scylla-operator's next sync) does
//!   not hand the cluster back to the ring-hash trigger, which would clean a node scylla-operator
//!   cleans as well.
//!
//! Not used as signals: `NeverCleanedUp` (a person may write it to ask for a cleanup), the
//! current ring hash (groundskeeper's ring observer writes it too where no sidecar does), a
//! `last-cleaned-…` on every member Service (groundskeeper seeds it too), and the
//! ScyllaDBDatacenter's existence alone (every version that has one writes its Job controller's
//! conditions there on every sync, from before any ring change: the direct sign above).

use std::collections::BTreeMap;

/// `CleanupControllerProgressing` reason while the ring-hash trigger leaves cleanup to
/// scylla-operator.
pub const SCYLLA_OPERATOR_CLEANS_UP: &str = "ScyllaOperatorCleansUp";
/// Prefix of scylla-operator's cleanup Job names (`cleanup-<member service>`).
pub const RESERVED_JOB_PREFIX: &str = groundskeeper_protocol::keys::RESERVED_JOB_NAME_PREFIX;
/// Label scylla-operator puts on its node Jobs, and its value on cleanup Jobs.
pub const NODE_JOB_TYPE_LABEL: &str = "scylla-operator.scylladb.com/node-job-type";
pub const NODE_JOB_TYPE_CLEANUP: &str = "Cleanup";
/// Label naming the node (member Service) a scylla-operator node Job works on.
pub const NODE_JOB_LABEL: &str = "scylla-operator.scylladb.com/node-job";
/// scylla-operator's condition types of its Job controller (1.10+).
pub const JOB_CONTROLLER_PROGRESSING: &str = "JobControllerProgressing";
pub const JOB_CONTROLLER_DEGRADED: &str = "JobControllerDegraded";

/// Whether a Job name is one scylla-operator uses for its cleanup Jobs.
pub fn is_reserved_job_name(name: &str) -> bool {
    name.starts_with(RESERVED_JOB_PREFIX)
}

/// The member Service a scylla-operator cleanup Job named `cleanup-<service>` works on.
pub fn node_of_job(job: &str) -> Option<&str> {
    job.strip_prefix(RESERVED_JOB_PREFIX)
}

/// Where one of scylla-operator's cleanup Jobs stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobPhase {
    Running,
    /// `status.completionTime` is set: scylla-operator records its hash next.
    Completed,
    /// Failed for good: scylla-operator leaves it there and does not retry.
    Failed,
}

/// One of scylla-operator's cleanup Jobs, as groundskeeper reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorJob {
    pub name: String,
    /// The member Service it cleans.
    pub node: String,
    /// Its `cleanup-token-ring-hash` annotation.
    pub ring_hash: Option<String>,
    pub phase: JobPhase,
}

/// Why groundskeeper holds scylla-operator's cleanup to be active for a cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signal {
    /// Its Job controller's condition is in the cluster's status.
    JobControllerCondition(String),
    /// One of its cleanup Jobs exists for the cluster.
    CleanupJob(String),
    /// Neither is there now, but an earlier pass saw one: the trigger's own condition says so.
    Remembered,
}

impl Signal {
    pub fn describe(&self) -> String {
        match self {
            Signal::JobControllerCondition(type_) => {
                format!("its condition {type_} is in the cluster's status")
            }
            Signal::CleanupJob(job) => format!("its cleanup Job {job} exists"),
            Signal::Remembered => format!(
                "seen here before, as this condition's reason {SCYLLA_OPERATOR_CLEANS_UP} says: it \
                 cannot be switched off, so the trigger stands back for good"
            ),
        }
    }
}

/// What groundskeeper knows of scylla-operator's cleanup of one cluster.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OperatorCleanup {
    /// `None`: no sign of scylla-operator's cleanup controller (before 1.10).
    pub active: Option<Signal>,
    pub jobs: Vec<OperatorJob>,
}

impl OperatorCleanup {
    /// What is known from the cluster's condition types and scylla-operator's cleanup Jobs.
    pub fn observed<'a>(condition_types: impl IntoIterator<Item = &'a str>, jobs: Vec<OperatorJob>) -> Self {
        OperatorCleanup { active: detect(condition_types, &jobs), jobs }
    }

    /// Active as remembered when no sign is there now but `remembered` says an earlier pass saw
    /// one.
    pub fn or_remembered(mut self, remembered: bool) -> Self {
        if remembered && self.active.is_none() {
            self.active = Some(Signal::Remembered);
        }
        self
    }
}

/// The first signal that scylla-operator's cleanup controller runs for the cluster, if any.
pub fn detect<'a>(
    condition_types: impl IntoIterator<Item = &'a str>,
    jobs: &[OperatorJob],
) -> Option<Signal> {
    condition_types
        .into_iter()
        .find(|t| *t == JOB_CONTROLLER_PROGRESSING || *t == JOB_CONTROLLER_DEGRADED)
        .map(|t| Signal::JobControllerCondition(t.to_owned()))
        .or_else(|| jobs.first().map(|j| Signal::CleanupJob(j.name.clone())))
}

/// A node's two ring-hash annotations as found on its member Service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeHashes<'a> {
    pub current: Option<&'a str>,
    pub last_cleaned: Option<&'a str>,
}

impl<'a> NodeHashes<'a> {
    pub fn of(annotations: &'a BTreeMap<String, String>) -> Self {
        use groundskeeper_protocol::keys;
        NodeHashes {
            current: annotations.get(keys::CURRENT_TOKEN_RING_HASH).map(String::as_str),
            last_cleaned: annotations.get(keys::LAST_CLEANED_UP_TOKEN_RING_HASH).map(String::as_str),
        }
    }
}

/// Whether groundskeeper may start a cleanup on a node now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeTurn {
    Free,
    /// Not now: the sentence says for what it waits.
    Wait(String),
}

/// A node held back for scylla-operator: why, and the ring it cleans (or is about to clean) the
/// node for, when known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    pub why: String,
    pub ring: Option<String>,
}

/// Whether scylla-operator did the cleanup a node waited for: it recorded the ring the node
/// waited for as the node's last-cleaned one. Such a node needs no second cleanup for that ring.
pub fn cleaned_while_waiting(waited_for_ring: Option<&str>, hashes: NodeHashes<'_>) -> bool {
    waited_for_ring.is_some() && waited_for_ring == hashes.last_cleaned
}

/// The ring scylla-operator cleans (or is about to clean) `node` for, when it holds the node.
fn held_for_ring(operator: &OperatorCleanup, node: &str, hashes: NodeHashes<'_>) -> Option<String> {
    let job = operator.jobs.iter().find(|j| j.node == node && j.ring_hash.as_deref() != hashes.last_cleaned);
    match job {
        Some(job) => job.ring_hash.clone(),
        None if hashes.last_cleaned.is_some() => hashes.current.map(str::to_owned),
        None => None,
    }
}

/// Whether groundskeeper may start cleaning `node` now, beside scylla-operator's cleanup.
///
/// Where scylla-operator's cleanup is active the node waits while scylla-operator's Job for it
/// runs, while a completed Job's hash is not recorded yet, while its Job failed (scylla-operator
/// does not retry it, but runs it again once it is deleted: cleaning beside it could overlap),
/// while its `last-cleaned-…` is missing (scylla-operator seeds it: with `NeverCleanedUp` on
/// newer versions, which means a cleanup is due), and while its hashes differ (scylla-operator
/// cleans it as soon as its conditions allow). Otherwise it is free: scylla-operator has nothing
/// to do there for this ring.
pub fn node_turn(operator: &OperatorCleanup, node: &str, hashes: NodeHashes<'_>) -> NodeTurn {
    if operator.active.is_none() {
        return NodeTurn::Free;
    }
    if let Some(job) = operator.jobs.iter().find(|j| j.node == node) {
        let ring = job.ring_hash.as_deref().map(short_hash).unwrap_or_default();
        match job.phase {
            JobPhase::Running => {
                return NodeTurn::Wait(format!(
                    "waiting for scylla-operator's cleanup Job {} (ring {ring}) to finish",
                    job.name
                ));
            }
            JobPhase::Completed if job.ring_hash.as_deref() != hashes.last_cleaned => {
                return NodeTurn::Wait(format!(
                    "waiting for scylla-operator to record its completed cleanup Job {} (ring {ring})",
                    job.name
                ));
            }
            JobPhase::Failed => {
                return NodeTurn::Wait(format!(
                    "scylla-operator's cleanup Job {} (ring {ring}) failed and is not retried: see \
                     `kubectl logs job/{}`, then delete it and scylla-operator runs it again",
                    job.name, job.name
                ));
            }
            JobPhase::Completed => {}
        }
    }
    match (hashes.current, hashes.last_cleaned) {
        (_, None) => {
            NodeTurn::Wait("waiting for scylla-operator to seed its last-cleaned-up-token-ring-hash".into())
        }
        (Some(current), Some(last)) if current != last => NodeTurn::Wait(format!(
            "scylla-operator is about to clean it for ring {} (last cleaned for {}): waiting for \
             its cleanup Job {RESERVED_JOB_PREFIX}{node}",
            short_hash(current),
            short_hash(last)
        )),
        _ => NodeTurn::Free,
    }
}

/// The nodes of `nodes` that must wait for scylla-operator, each with why and for which ring.
pub fn held_nodes<'a>(
    operator: &OperatorCleanup,
    nodes: impl IntoIterator<Item = (&'a str, NodeHashes<'a>)>,
) -> BTreeMap<String, Hold> {
    nodes
        .into_iter()
        .filter_map(|(node, hashes)| match node_turn(operator, node, hashes) {
            NodeTurn::Free => None,
            NodeTurn::Wait(why) => {
                Some((node.to_owned(), Hold { why, ring: held_for_ring(operator, node, hashes) }))
            }
        })
        .collect()
}

/// What the ring-hash trigger says while it stands back: the signal, then what scylla-operator
/// is doing. `due` are the nodes whose hashes differ (scylla-operator cleans them); `unknown`
/// those missing either hash, for which scylla-operator holds back every cleanup Job of the
/// cluster.
pub fn stand_back_message(operator: &OperatorCleanup, due: &[String], unknown: &[String]) -> String {
    let signal = operator.active.as_ref().map(Signal::describe).unwrap_or_default();
    let mut parts = vec![format!(
        "scylla-operator cleans this cluster's nodes after ring changes itself ({signal}): the \
         ring-hash trigger stands back; Cleanup tasks still run, each node after scylla-operator is done with it"
    )];
    let running: Vec<&str> =
        operator.jobs.iter().filter(|j| j.phase == JobPhase::Running).map(|j| j.name.as_str()).collect();
    if !running.is_empty() {
        parts.push(format!("its cleanup Jobs running: {}", running.join(", ")));
    }
    if !due.is_empty() {
        parts.push(format!("nodes it has to clean: {}", due.join(", ")));
    }
    if !unknown.is_empty() && !due.is_empty() {
        parts.push(format!(
            "it starts no cleanup Job until every node has both ring hashes, missing on: {}",
            unknown.join(", ")
        ));
    }
    parts.join("; ")
}

/// The first 12 characters of a ring hash, enough to tell rings apart in a message.
fn short_hash(hash: &str) -> String {
    hash.chars().take(12).collect()
}

#[cfg(test)]
mod tests;
