//! What the steps of a Restore share: what a step's Job left, what was read of the cluster, what
//! to do next, whether the Restore may start, where a member's data claim is mounted.

use jiff::Timestamp;

use groundskeeper_protocol::Report;

/// Where a restore Job mounts the member's data claim.
pub(crate) const MEMBER_VOLUME_DIR: &str = "/var/lib/etcd-member";

/// What a restore step's Job left, by step (0: the proof; 1..=N: the members in order).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum StepJob {
    Running,
    Succeeded(Option<Box<Report>>),
    /// Why, as the task's error says it.
    Failed(String),
}

/// What was read of the cluster for one pass.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct RestoreFacts {
    /// The StatefulSet's `spec.replicas`; `None` when it is gone.
    pub replicas: Option<i32>,
    /// Its pods that still exist.
    pub pods: usize,
    /// Members healthy now and the highest revision they serve (read while waiting for them).
    pub healthy_members: usize,
    pub revision: Option<i64>,
    /// Why the members could not be asked, if so.
    pub members_unreachable: Option<String>,
    /// Why the restore may no longer start, as [`admission`] says it when asked again before
    /// anything is touched (the quorum came back while the snapshot was proven).
    pub refused: Option<String>,
    /// Members' data claims that do not exist (checked before anything is touched).
    pub missing_claims: Vec<String>,
}

/// The StatefulSet's pods as it reports them: how many are Ready of how many it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReadyPods {
    pub ready: i32,
    pub replicas: i32,
}

/// What to do after a decision.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RestoreAction {
    /// Create the Jobs of these steps.
    CreateJobs(Vec<usize>),
    /// Set the StatefulSet's `spec.replicas`.
    ScaleTo(i32),
    /// Nothing to do but look again (what is awaited is in the step's message).
    Wait,
    /// The cluster is back: complete the task with this line.
    Complete(String),
    /// Stop: fail the task with this error (the status says how to go on or back).
    Fail(String),
}

/// Whether a Restore may start now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Admission {
    Admitted,
    /// The quorum is lost, but not for as long as the task asks yet: it waits (Pending) until
    /// `until`, and is turned away if the quorum comes back meanwhile.
    NotYet {
        reason: String,
        until: Timestamp,
    },
    /// Turned away for good (Rejected), saying what was seen.
    Refused(String),
}

/// The task's error code when a restore stops at a step.
pub(crate) const RESTORE_FAILED: &str = "RestoreFailed";
