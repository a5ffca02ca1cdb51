//! What every stage of the etcd folder shares, needing nothing else of it: what was observed of
//! a cluster (its members, its MaintenanceTasks), the conditions and outcomes the EtcdCluster's
//! status carries, which tasks are maintenance, and where a Job finds the client TLS files.

use groundskeeper_stores::etcd::plan::MemberObservation;
use jiff::Timestamp;
use kube::ResourceExt;

use groundskeeper_api::maintenance_task::{MaintenanceTask, TaskState, TaskType};

pub const PROGRESSING: &str = "DefragControllerProgressing";
pub const DEGRADED: &str = "DefragControllerDegraded";
pub const DISABLED: &str = "DefragControllerDisabled";
/// True while a member runs an etcd version whose defrag can corrupt data beside a snapshot.
pub const VERSION_RISK: &str = "DefragVersionRisk";
/// True while history a delta needed was compacted away and no full snapshot covers it yet
/// (reason `HistoryCompacted`; an Event of the same name when found).
pub const BACKUP_GAP: &str = "BackupGap";
/// True while groundskeeper's compaction is held back at the newest revision backed up.
pub const COMPACTION_HELD_BACK: &str = "CompactionHeldBack";
/// True while a backup of the policy is due but a suspension holds it.
pub const BACKUP_HELD: &str = "BackupHeld";
/// Degraded reason (and Event) of a cluster whose fleet id another cluster of the fleet claims.
pub const PARTITION_ID_COLLISION: &str = "PartitionIdCollision";

/// Shortest `periodic` retention, of a spec or of a discovery's flag. Revisions are sampled every
/// retention/10 and every sample is a status write; this keeps those writes at most one a minute.
pub(crate) const MIN_PERIODIC_RETENTION: jiff::SignedDuration = jiff::SignedDuration::from_mins(10);

/// Where the Job finds the client TLS Secret's files.
pub const TLS_MOUNT_DIR: &str = "/etc/groundskeeper/etcd-tls";

/// `status.lastMaintenanceOutcome` values.
pub(crate) const OUTCOME_SUCCEEDED: &str = "Succeeded";
pub(crate) const OUTCOME_SKIPPED: &str = "Skipped";
pub(crate) const OUTCOME_FAILED: &str = "Failed";

/// Whether tasks of this type are maintenance the EtcdCluster's status records.
pub fn is_maintenance(task_type: &TaskType) -> bool {
    matches!(task_type, TaskType::Compact | TaskType::Defragment | TaskType::Maintenance)
}

/// One member as observed, with the URL it was asked on and the store revision it reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedMember {
    pub endpoint: String,
    pub member: MemberObservation,
    /// The store revision in the `Status` response header.
    pub revision: Option<i64>,
    /// The peer URLs the member list gives it (empty when the member is not listed).
    pub peer_urls: Vec<String>,
}

/// What the members looked like, if they were asked.
#[derive(Debug, Clone, PartialEq)]
pub enum Observed {
    /// Not asked: the spec is invalid.
    NotAttempted,
    /// The client TLS Secret could not be read, or the like: nobody could be asked.
    Failed(String),
    Members(Vec<ObservedMember>),
}

/// One MaintenanceTask on this cluster as the decision sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterTaskView {
    pub name: String,
    pub task_type: TaskType,
    /// `Pending` when the task has no status yet.
    pub state: TaskState,
    pub created: Timestamp,
    /// What it waits for while queued: the message of its `Queued` condition.
    pub waits_for: Option<String>,
    /// Made by the cluster's backup policy (label `groundskeeper.dev/origin: backup-policy`).
    pub backup_policy: bool,
}

impl ClusterTaskView {
    /// The view of a task object; `now` stands in for a creation time it lacks.
    pub fn of(task: &MaintenanceTask, now: Timestamp) -> Self {
        Self {
            name: task.name_any(),
            task_type: task.spec.task_type.clone(),
            state: task.status.as_ref().and_then(|s| s.state).unwrap_or_default(),
            created: task.metadata.creation_timestamp.as_ref().map(|t| t.0).unwrap_or(now),
            waits_for: task.status.as_ref().and_then(|s| {
                s.conditions
                    .iter()
                    .find(|c| c.type_ == groundskeeper_api::maintenance_task::QUEUED && c.status == "True")
                    .map(|c| c.message.clone())
            }),
            backup_policy: task.labels().get(groundskeeper_protocol::keys::ORIGIN_LABEL).map(String::as_str)
                == Some(groundskeeper_protocol::keys::ORIGIN_BACKUP_POLICY),
        }
    }

    /// A backup task of the cluster's policy not final yet.
    pub(crate) fn backup_in_flight(&self) -> bool {
        self.backup_policy && !self.state.is_final()
    }

    /// A maintenance task not final yet.
    pub(crate) fn in_flight(&self) -> bool {
        is_maintenance(&self.task_type) && !self.state.is_final()
    }
}
