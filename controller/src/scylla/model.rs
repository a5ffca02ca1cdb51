//! What every stage of the Scylla folder shares, needing nothing else of it: what is read of a
//! cluster's Cleanup tasks and agent token Secret, what one pass of the trigger plans (its
//! actions and conditions) and the state of that pass that `decide` fills and `condition_texts`
//! words, the records kept on member Services, and the codes a failed Cleanup task carries.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use groundskeeper_api::maintenance_task::{NodeCleanupConfig, TaskState};
use groundskeeper_api::scylla::facts::MemberFacts;
use groundskeeper_protocol::keys;

/// `lastErrors[].code` of a Cleanup task one of whose nodes failed in a way no retry can fix
/// (the runner's bad-input exit code: wrong token, unknown keyspace).
pub const BAD_INPUT: &str = "BadInput";
/// `lastErrors[].code` of a Cleanup task one of whose nodes failed, a retry may help.
pub(crate) const NODE_FAILED: &str = "NodeFailed";
/// `lastErrors[].code` of a Cleanup task naming a node that is not a member of its cluster.
pub(crate) const NODE_NOT_FOUND: &str = "NodeNotFound";

/// A Cleanup MaintenanceTask of the cluster, as the trigger needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskFacts {
    pub name: String,
    /// Submitted by this trigger (label `groundskeeper.dev/origin: automatic`).
    pub automatic: bool,
    /// `Pending` while it has no status yet.
    pub state: TaskState,
    pub created: jiff::Timestamp,
    pub completed_at: Option<jiff::Timestamp>,
    /// The ring it was submitted for (its `cleanup-token-ring-hash` annotation; manual tasks
    /// have none).
    pub ring_hash: Option<String>,
    /// `status.progress`, e.g. `2/3`.
    pub progress: Option<String>,
    /// Its newest error: code and description.
    pub last_error: Option<(String, String)>,
    /// While pending: what it waits for (its `Queued` condition).
    pub waiting_for: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretState {
    Present,
    Missing { name: String },
    MissingKey { name: String, key: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeedReason {
    /// `last-cleaned-…` absent: a node that just joined holds no stale data.
    Joined,
    /// Only nodes left the ring since the node was last cleaned: it lost no ranges.
    OnlyNodesLeft,
    /// The ownership rule: the ring moved, the node replicates every range it replicated when
    /// last cleaned.
    NoRangeLost,
    /// Seeded `NeverCleanedUp`: it joined together with others, so what it holds cannot be
    /// known; it is cleaned once.
    JoinedTogether,
}

/// Why a node's ownership record is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordChange {
    /// The node had none: it just joined (or, beside scylla-operator, is about to be cleaned or
    /// seeded by it): what it replicates now.
    Seeded,
    /// It replicates ranges or keyspaces the record lacks.
    Widened,
    /// Its `last-cleaned-…` moved without a cleanup that shrinks the record: kept (and widened),
    /// now standing for the new value.
    Rebased,
    /// scylla-operator (or someone else) cleaned the whole node for its current ring: the record
    /// is what the node replicates now.
    ResetAfterOutsideCleanup,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Write `last-cleaned-… = hash` (and the members record, or remove it when `None`).
    SeedLastCleaned { service: String, hash: String, members: Option<MembersRecord>, reason: SeedReason },
    /// Write the node's ownership record ([`keys::OWNED_AT_LAST_CLEANUP`]): `value` is the annotation,
    /// `change` why it is written.
    RecordOwnership { service: String, value: String, change: RecordChange },
    /// Create the cluster's automatic Cleanup task for `nodes` (member Service names, in
    /// cleaning order), for ring `ring_hash`. `per_node`: nodes that clean only some keyspaces
    /// (the ownership rule), the others clean every keyspace. `retry_of` names the failed task
    /// it follows.
    SubmitCleanupTask {
        name: String,
        nodes: Vec<String>,
        per_node: Vec<NodeCleanupConfig>,
        ring_hash: String,
        retry_of: Option<String>,
    },
}

/// A node the automatic task cleans.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Candidate {
    pub service: String,
    /// Its current ring hash.
    pub ring_hash: String,
    /// `All` under the ring-hash rule; the keyspaces it lost ranges of under the ownership rule.
    pub scope: CleanScope,
    pub mark_node_clean: bool,
}

/// A condition as this trigger wants it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConditionPlan {
    pub type_: &'static str,
    pub status: bool,
    pub reason: String,
    pub message: String,
}

/// Which keyspaces a node's cleanup Job cleans.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CleanScope {
    /// Every keyspace that can hold stale data (the ring-hash rule's whole-node cleanup).
    All,
    Only(BTreeSet<String>),
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

/// A node's annotations, understood.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LastCleaned {
    Absent,
    NeverCleanedUp,
    Hash(String),
}

impl LastCleaned {
    /// The annotation's value.
    pub(crate) fn annotation(&self) -> Option<&str> {
        match self {
            LastCleaned::Absent => None,
            LastCleaned::NeverCleanedUp => Some(keys::NEVER_CLEANED_UP),
            LastCleaned::Hash(hash) => Some(hash),
        }
    }
}

/// A member as one pass of the decision understands its annotations.
pub(crate) struct Member<'a> {
    pub(crate) facts: &'a MemberFacts,
    pub(crate) current: Option<&'a str>,
    pub(crate) last: LastCleaned,
    pub(crate) record: Option<MembersRecord>,
}

/// What one pass of the decision found and plans, node by node, for its plan and its conditions.
#[derive(Default)]
pub(crate) struct PassState {
    pub(crate) actions: Vec<Action>,
    /// Nodes needing cleanup, in cleaning order.
    pub(crate) candidates: Vec<Candidate>,
    pub(crate) bootstrapping: Vec<String>,
    /// Nodes whose ring moved and that the ownership rule found clean (no range lost).
    pub(crate) lost_nothing: Vec<String>,
    /// Nodes the ring-hash rule cleans because ownership could not decide: (service, why).
    pub(crate) fallbacks: Vec<(String, String)>,
    /// Nodes whose ownership record was reset after someone else cleaned them.
    pub(crate) reset: Vec<String>,
    /// Nodes just marked `NeverCleanedUp` because they joined together with others
    /// (`decide::decide_joiner`).
    pub(crate) joined_together: Vec<String>,
    /// Nodes cleaned once, whole, for carrying `NeverCleanedUp`.
    pub(crate) clean_once: Vec<String>,
}

impl PassState {
    /// The name of the task this pass submits, if any.
    pub(crate) fn submitted(&self) -> Option<&str> {
        self.actions.iter().find_map(|a| match a {
            Action::SubmitCleanupTask { name, .. } => Some(name.as_str()),
            _ => None,
        })
    }
}
