//! The `EtcdCluster` custom resource (`groundskeeper.dev/v1alpha1`): which etcd cluster to look
//! after, how, and what was last seen of it.
//!
//! The spec is kept as the user wrote it (durations and retentions are strings, as etcd's own
//! flags take them); [`super::policy::Policy::from_spec`] turns it into checked values and names
//! the field of every mistake.

use groundskeeper_protocol::operation::LeaderTurnPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Default `spec.policy.checkInterval`, as in OpenShift's defrag controller.
pub const DEFAULT_CHECK_INTERVAL: &str = "10m";
/// Default `spec.policy.minDefragBytes`: 100 MB.
pub const DEFAULT_MIN_DEFRAG_BYTES: i64 = 100 * 1000 * 1000;
/// Default `spec.policy.maxFragmentedPercent`.
pub const DEFAULT_MAX_FRAGMENTED_PERCENT: f64 = 45.0;

/// An etcd cluster groundskeeper compacts and defragments.
///
/// The controller observes every member with cheap `Status` calls on `spec.policy.checkInterval`
/// and when the spec changes, and submits a maintenance task (`MaintenanceTask`, label
/// `groundskeeper.dev/origin: automatic`) when one is due and none is queued or running.
#[derive(CustomResource, Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
#[kube(
    group = "groundskeeper.dev",
    version = "v1alpha1",
    kind = "EtcdCluster",
    namespaced,
    status = "EtcdClusterStatus",
    shortname = "etcdc",
    category = "groundskeeper",
    printcolumn = r#"{"name": "Members", "type": "integer", "description": "Members observed", "jsonPath": ".status.memberCount"}"#,
    printcolumn = r#"{"name": "Healthy", "type": "integer", "description": "Members that answered and report no errors", "jsonPath": ".status.healthyMembers"}"#,
    printcolumn = r#"{"name": "Max Fragmentation", "type": "string", "description": "Highest fragmentation of any member", "jsonPath": ".status.maxFragmentation"}"#,
    printcolumn = r#"{"name": "Active Task", "type": "string", "description": "Maintenance task queued or running", "jsonPath": ".status.activeTask"}"#,
    printcolumn = r#"{"name": "Degraded", "type": "string", "description": "DefragControllerDegraded", "jsonPath": ".status.conditions[?(@.type==\"DefragControllerDegraded\")].status"}"#,
    printcolumn = r#"{"name": "Last Maintenance", "type": "date", "description": "When the last maintenance task finished", "jsonPath": ".status.lastMaintenanceTime"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct EtcdClusterSpec {
    /// Client URLs of the members, e.g. `https://etcd-0.etcd:2379`. Every member should be
    /// listed; members the cluster reports but that are not listed are reached on the client
    /// URLs they advertise.
    #[schemars(length(min = 1))]
    pub endpoints: Vec<String>,
    /// Client TLS. Absent: plain `http://` endpoints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<EtcdClientTls>,
    /// Automatic maintenance: how often the members are observed, when a member is due for
    /// defragmentation, the leader's turn, history compaction. Absent: the defaults.
    #[serde(default)]
    pub policy: EtcdMaintenancePolicy,
    /// Bounds for the maintenance Jobs.
    #[serde(default)]
    pub job: EtcdJobLimits,
    /// Backups on their own: a full snapshot every `fullEvery` and, between them, a delta (the
    /// changes since the newest full snapshot or delta) every `deltaEvery`, as MaintenanceTasks
    /// labelled `groundskeeper.dev/origin: backup-policy`. While deltas are on, groundskeeper's
    /// own compaction (automatic and tasks) never compacts past the newest revision backed up.
    /// Absent: no backup is taken unless asked for (Snapshot and Delta tasks, schedules).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<EtcdBackupPolicy>,
    /// For one cluster of a fleet of partitioned etcd clusters (one Kubernetes API served by
    /// several etcd clusters): its place in the fleet. Absent: a cluster on its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<EtcdPartition>,
    /// When automatic maintenance may start: weekly windows in a time zone. Outside them the
    /// automatic tasks wait (Pending, saying when the next window opens); work in progress is
    /// never interrupted by a window closing. Absent: any time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintenance_windows: Option<crate::maintenance_window::MaintenanceWindowsSpec>,
    /// The StatefulSet that runs the members (one member per pod, named after it, with its data
    /// on the pod's PersistentVolumeClaim): what a Restore task scales and restores. Absent:
    /// Restore tasks are rejected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stateful_set: Option<EtcdStatefulSet>,
}

/// Default `spec.statefulSet.dataDir`: what etcd's own StatefulSet example and most charts use
/// below the data volume's mount.
pub const DEFAULT_STATEFUL_SET_DATA_DIR: &str = "default.etcd";

/// How the members of a cluster run as a StatefulSet keep their data.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EtcdStatefulSet {
    /// The StatefulSet, in the EtcdCluster's namespace. Its pods are the members: each member's
    /// name (`--name`) is its pod's name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// The volumeClaimTemplate of the members' data (claims `<template>-<pod>`). Absent: the
    /// StatefulSet's only one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub data_volume_claim_template: Option<String>,
    /// The member's `--data-dir`, relative to the root of its data volume. Absent:
    /// `default.etcd`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 255))]
    pub data_dir: Option<String>,
}

/// A cluster's place in a fleet of partitioned etcd clusters.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EtcdPartition {
    /// The fleet: the clusters that serve one Kubernetes API. Cluster ids are unique within it;
    /// two clusters of a fleet claiming one id are both reported and neither is maintained.
    #[schemars(length(min = 1, max = 253))]
    pub fleet: String,
    /// This cluster's id in the fleet, 0–63: bits 13–18 of its revisions when they are
    /// composite.
    #[schemars(range(min = 0, max = 63))]
    pub cluster_id: i32,
    /// `Sequential`: etcd's own revisions. `Partitioned`: composite revisions (bits 0–12 event
    /// number within the millisecond, 13–18 cluster id, 19–62 Unix time in ms); revision-count
    /// compaction means nothing there and is refused.
    #[serde(default)]
    pub revision_scheme: RevisionScheme,
    /// `Partitioned`: how far (ms) the time in the cluster's newest revision may be from the
    /// controller's clock before condition `ClockSkewed` is set. Absent: 5000, the clock
    /// difference between clusters the Arktos design tolerates when it orders their revisions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_clock_skew_ms: Option<i64>,
}

/// Default `spec.partition.maxClockSkewMs`.
pub const DEFAULT_MAX_CLOCK_SKEW_MS: i64 = 5_000;

/// How a cluster numbers its revisions.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq, JsonSchema)]
pub enum RevisionScheme {
    #[default]
    Sequential,
    Partitioned,
}

/// A Secret in the EtcdCluster's namespace holding the client certificate: keys `ca.crt` (the CA
/// that signed the members' serving certificates), `tls.crt` and `tls.key` (the client
/// certificate and its key, PEM) — the layout of a `kubernetes.io/tls` Secret plus the CA, as
/// cert-manager writes it. The maintenance Job mounts it read-only.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EtcdClientTls {
    /// The Secret's name, in the EtcdCluster's namespace: keys `ca.crt`, `tls.crt` and `tls.key`.
    #[schemars(length(min = 1))]
    pub secret_name: String,
}

/// Key of the CA certificate in the client TLS Secret.
pub const TLS_CA_KEY: &str = "ca.crt";
/// Default `spec.backup.fullEvery`.
pub const DEFAULT_FULL_EVERY: &str = "6h";

/// Backups on their own: full snapshots, and deltas between them.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EtcdBackupPolicy {
    /// Where the snapshots and deltas go. Absent: the claim `<cluster name>-snapshots` (never
    /// created for you).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<crate::snapshot_store::SnapshotStoreSpec>,
    /// File name template of the full snapshots, as for a Snapshot task. Absent:
    /// `{cluster}-{time}.db`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = crate::maintenance_task::MAX_FILE_NAME_LEN))]
    pub file_name: Option<String>,
    /// A full snapshot this often, as a duration (`6h`, `1d`: at least `10m`); and at once when
    /// the store holds none, or history a delta needed was compacted away (a gap).
    #[serde(default = "default_full_every")]
    pub full_every: String,
    /// A delta this often, as a duration (`30s`, `5m`: at least `5s`, less than `fullEvery`).
    /// Absent: full snapshots only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta_every: Option<String>,
    /// Full snapshots of this cluster kept in the store, the newest included (as a Snapshot
    /// task's `retain`). Absent: 5.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub retain: Option<i32>,
    /// Retention beyond `retain`, as a Snapshot task's: by age, by tiers, of deltas (by whole
    /// chains) and by total size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<crate::maintenance_task::RetentionPolicy>,
    /// Failed tasks of the policy kept to find out why (the newest; older ones are deleted, and
    /// each goes a week after it failed at the latest). Succeeded ones go by their
    /// `ttlSecondsAfterFinished`: Delta tasks after 10 minutes, Snapshot tasks after an hour.
    /// Absent: 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub failed_history_limit: Option<i32>,
}

/// Default `spec.backup.failedHistoryLimit`.
pub const DEFAULT_FAILED_HISTORY_LIMIT: i32 = 3;

fn default_full_every() -> String {
    DEFAULT_FULL_EVERY.to_owned()
}

/// Key of the client certificate in the client TLS Secret.
pub const TLS_CERT_KEY: &str = "tls.crt";
/// Key of the client key in the client TLS Secret.
pub const TLS_KEY_KEY: &str = "tls.key";

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EtcdMaintenancePolicy {
    /// False: observe and report only, never submit a task (condition `DefragControllerDisabled`).
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// How often the members are observed, as a duration (`10m`, `1h30m`).
    #[serde(default = "default_check_interval")]
    pub check_interval: String,
    /// A member is defragmented only when its db is at least this large (bytes) ...
    #[serde(default = "default_min_defrag_bytes")]
    #[schemars(range(min = 0))]
    pub min_defrag_bytes: i64,
    /// ... and at least this share of it is free pages: (dbSize − dbSizeInUse) / dbSize, in %.
    #[serde(default = "default_max_fragmented_percent")]
    #[schemars(range(min = 0, max = 100))]
    pub max_fragmented_percent: f64,
    /// Defragment a cluster of fewer than 3 voting members. Defragmenting blocks a member, so
    /// without a quorum of others the cluster stops serving meanwhile.
    #[serde(default)]
    pub allow_single_member: bool,
    /// False is the same as `leaderTurn: Never` (kept for existing specs; give `leaderTurn`).
    #[serde(default = "default_true")]
    pub move_leader: bool,
    /// The leader's turn. `Auto` (the default): the leader is defragmented in place when its
    /// defrag, predicted from the followers just done, takes at most `leaderInPlaceBudgetSeconds`,
    /// else leadership moves to a caught-up follower first. `Always`: leadership always moves
    /// first. `Never`: the leader is defragmented last, in place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_turn: Option<LeaderTurn>,
    /// `Auto`: the longest predicted leader defrag done in place, in seconds. Absent: 5.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 3600))]
    pub leader_in_place_budget_seconds: Option<u64>,
    /// Skip the members whose etcd version can corrupt data when a defrag overlaps a snapshot
    /// apply (before 3.5.23, and 3.6.0–3.6.4), instead of defragmenting them only when caught
    /// up with the leader right before their turn.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub refuse_affected_versions: bool,
    /// The members' storage quota (their `--quota-backend-bytes`): a `NOSPACE` alarm is disarmed
    /// once a member's db is under it. etcd 3.6.6 and later report their own, which is then
    /// used; before, `Status` reported it wrong. Absent: an alarm is disarmed on the members
    /// just defragmented.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub quota_backend_bytes: Option<i64>,
    /// History compaction. Absent: groundskeeper does not compact (etcd's own
    /// `--auto-compaction-*` or the Kubernetes API server may).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction: Option<EtcdCompactionPolicy>,
    /// The automatic tasks wait for a person's approval of their plan before starting
    /// (`spec.requireApproval` of the tasks submitted): proposed, reviewed, approved.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub require_approval: bool,
}

impl Default for EtcdMaintenancePolicy {
    fn default() -> Self {
        Self {
            enabled: true,
            check_interval: default_check_interval(),
            min_defrag_bytes: DEFAULT_MIN_DEFRAG_BYTES,
            max_fragmented_percent: DEFAULT_MAX_FRAGMENTED_PERCENT,
            allow_single_member: false,
            move_leader: true,
            leader_turn: None,
            leader_in_place_budget_seconds: None,
            refuse_affected_versions: false,
            quota_backend_bytes: None,
            compaction: None,
            require_approval: false,
        }
    }
}

/// Whether leadership moves before the leader's defrag.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, JsonSchema)]
pub enum LeaderTurn {
    Auto,
    Always,
    Never,
}

impl LeaderTurn {
    pub fn policy(self) -> LeaderTurnPolicy {
        match self {
            LeaderTurn::Auto => LeaderTurnPolicy::Auto,
            LeaderTurn::Always => LeaderTurnPolicy::Always,
            LeaderTurn::Never => LeaderTurnPolicy::Never,
        }
    }
}

impl EtcdMaintenancePolicy {
    /// `leaderTurn`, with `moveLeader: false` read as `Never`.
    pub fn leader_turn_policy(&self) -> LeaderTurnPolicy {
        match (self.move_leader, self.leader_turn) {
            (false, _) => LeaderTurnPolicy::Never,
            (true, turn) => turn.map_or(LeaderTurnPolicy::Auto, LeaderTurn::policy),
        }
    }
}

/// History compaction, with etcd's own modes.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EtcdCompactionPolicy {
    /// `periodic`: keep history for the `retention` duration (revisions are sampled over time,
    /// and the cluster is compacted to the one sampled `retention` ago, as etcd's periodic
    /// compactor does). `revision`: keep the last `retention` revisions.
    pub mode: CompactionMode,
    /// `periodic`: how long history is kept, as a duration (`1h`, `30m`). `revision`: how many
    /// revisions are kept (`10000`).
    pub retention: String,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum CompactionMode {
    /// Keep history for a duration: revisions are sampled over time, as etcd's periodic
    /// compactor does, and the cluster is compacted to the one sampled `retention` ago.
    Periodic,
    /// Keep the last `retention` revisions.
    Revision,
}

/// Bounds of the maintenance Jobs. Each field absent: the controller's own setting
/// (`--job-active-deadline-seconds`, `--job-backoff-limit`, `--job-ttl-seconds-after-finished`).
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EtcdJobLimits {
    /// The Job is stopped after this long (seconds), retries included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub active_deadline_seconds: Option<i64>,
    /// Retries of a failed run (a run that fails on bad input is not retried).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub backoff_limit: Option<i32>,
    /// Finished Jobs are deleted after this long (seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ttl_seconds_after_finished: Option<i32>,
}

fn default_true() -> bool {
    true
}
fn default_check_interval() -> String {
    DEFAULT_CHECK_INTERVAL.to_owned()
}
fn default_min_defrag_bytes() -> i64 {
    DEFAULT_MIN_DEFRAG_BYTES
}
fn default_max_fragmented_percent() -> f64 {
    DEFAULT_MAX_FRAGMENTED_PERCENT
}

/// What the controller last saw and did.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EtcdClusterStatus {
    /// The `metadata.generation` this status was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// When the members were last observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_observed_time: Option<Time>,
    /// When the members are due to be observed next (sooner on a spec change, or when a
    /// maintenance task is queued or ends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_check_time: Option<Time>,
    /// Every member as last observed (from the member list; one per endpoint when no list could be
    /// read), with what its `Status` call answered. When no member answered, the last list is kept with every member marked not
    /// healthy.
    #[serde(default)]
    pub members: Vec<EtcdMemberStatus>,
    /// How many members were last observed (the entries of `members`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member_count: Option<i32>,
    /// How many members are healthy: they answered `Status`, see a leader and report no error
    /// (a `NOSPACE` alarm, which defragmentation cures, aside).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy_members: Option<i32>,
    /// Highest fragmentation of any member, e.g. `"47.2%"` (for `kubectl get`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_fragmentation: Option<String>,
    /// The store's revision when last observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
    /// The revision a groundskeeper task last compacted to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_compacted_revision: Option<i64>,
    /// When the Job of the groundskeeper task that last compacted the cluster finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_compaction_time: Option<Time>,
    /// When the last maintenance task (Compact, Defragment or Maintenance, automatic or asked for
    /// by hand) of this cluster finished, as recorded when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_maintenance_time: Option<Time>,
    /// How the last maintenance task ended: `Succeeded`, `Skipped` (nothing met the thresholds)
    /// or `Failed`. After `Failed` or `Skipped` no automatic task is submitted for a check
    /// interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_maintenance_outcome: Option<String>,
    /// What the last maintenance task did, in one line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_maintenance_message: Option<String>,
    /// The MaintenanceTask whose outcome the `lastMaintenance*` fields record (each outcome is
    /// recorded once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_maintenance_task: Option<String>,
    /// The maintenance task of this cluster queued or running, if any (the one running first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_task: Option<String>,
    /// What the active task waits for while it is queued, as its `Queued` condition says: a
    /// task ahead of it, the cluster's health, or a maintenance slot of its fleet that other
    /// clusters hold (`--fleet-max-concurrent`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_task_waits_for: Option<String>,
    /// `periodic` compaction: revisions sampled over time, oldest first (bounded). Kept here so
    /// that a controller restart does not lose the history etcd's own compactor keeps in memory.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub revision_samples: Vec<RevisionSample>,
    /// `spec.partition.revisionScheme: Partitioned`: the members' revisions taken apart (time,
    /// cluster id, event number), when last observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<EtcdPartitionStatus>,
    /// The last snapshot a Snapshot task took of this cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_snapshot: Option<LastSnapshot>,
    /// Every snapshot of this cluster its tasks wrote or copied, by store, with its last proof
    /// (the newest 50).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub snapshots: Vec<crate::snapshot_catalog::SnapshotRecord>,
    /// The last proof that a snapshot restores ("last snapshot proven restorable at …, revision
    /// …"); a failed one sets condition `SnapshotRestorable` False and the controller Degraded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_snapshot_proof: Option<crate::snapshot_catalog::SnapshotProof>,
    /// What the backup policy (`spec.backup`) has reached: the recovery point, a gap, what
    /// compaction is held at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<EtcdBackupStatus>,
    /// Since when fewer than a majority of the members have been healthy (absent while the
    /// quorum is there): what a Restore task's admission reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quorum_lost_since: Option<Time>,
    /// The highest revision observed while the quorum was there: after a restore, the revisions
    /// between the snapshot's and this one are what was lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_revision_with_quorum: Option<i64>,
    /// The members and their peer URLs as last listed while the quorum was there: the
    /// membership a Restore gives the cluster back.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub membership: Vec<KnownMember>,
    /// `DefragControllerProgressing` (True while a maintenance task of the cluster is queued or
    /// running), `DefragControllerDegraded` (True when members are unhealthy, the spec is invalid,
    /// the last maintenance failed, a snapshot did not prove restorable…: the reason says which),
    /// `DefragControllerDisabled` (True when `spec.policy.enabled` is false), `DefragVersionRisk`
    /// (True while a member runs an etcd version whose defrag can corrupt data beside a snapshot
    /// apply), `SnapshotRestorable` (whether the last proof of a snapshot passed; absent before
    /// any) and, for a `Partitioned` cluster, `ClockSkewed`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

/// Where `spec.backup` stands.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EtcdBackupStatus {
    /// The store (`pvc/NAME` or the bucket's URL).
    pub store: String,
    /// The recovery point: the newest revision a restore from that store reaches (the newest
    /// full snapshot there and the deltas chained after it)…
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_point_revision: Option<i64>,
    /// …and the last time the cluster was seen at that revision (its whole state in a backup):
    /// writes after this time are in no backup yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_point_time: Option<Time>,
    /// The object that ends the chain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub newest: Option<String>,
    /// The backup task (Snapshot or Delta) queued or running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_task: Option<String>,
    /// Set while groundskeeper's compaction is held back at the recovery point: the revision it
    /// would have compacted to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction_held_from: Option<i64>,
    /// History a delta needed was compacted away (by etcd's own `--auto-compaction-*` or another
    /// client): changes after `afterRevision` up to `compactedTo` are in no backup. Cleared by
    /// the next full snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gap: Option<BackupGap>,
    /// The last gap found, kept once closed (what alert `GroundskeeperEtcdBackupGap` reads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_gap: Option<BackupGap>,
}

/// Changes no backup holds.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupGap {
    /// The delta task that found it.
    pub task: String,
    /// When it was found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub found_at: Option<Time>,
    /// The delta was to hold the changes after this revision…
    pub after_revision: i64,
    /// …but etcd had compacted its history up to this one.
    pub compacted_to: i64,
}

/// A member as the member list gave it.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KnownMember {
    /// The member's name (its `--name`).
    pub name: String,
    /// Member id in hex.
    pub id: String,
    /// The peer URLs it advertises.
    #[serde(default, rename = "peerURLs", skip_serializing_if = "Vec::is_empty")]
    pub peer_urls: Vec<String>,
}

/// A snapshot taken by a Snapshot task, as the cluster's status records it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastSnapshot {
    /// The MaintenanceTask that took it (each task is recorded once).
    pub task: String,
    /// The claim it was written to; empty when it went to a bucket.
    pub persistent_volume_claim: String,
    /// Its file name on the claim, or its object name in the bucket.
    pub file: String,
    /// When the task completed.
    pub time: Time,
    /// The highest revision the snapshot holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
    /// Size of the file in bytes, etcd's 32-byte SHA-256 trailer included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<i64>,
    /// The same for people, e.g. `12.34 MiB`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<String>,
    /// SHA-256 of the whole file, hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// One member as last observed.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EtcdMemberStatus {
    /// The member's name (its `--name`); its id in hex while it has not started (the member list
    /// gives it no name), or the endpoint when no member list could be read.
    pub name: String,
    /// Member id in hex, as etcdctl prints it.
    pub id: String,
    /// The client URL it was observed on.
    pub endpoint: String,
    /// The peer URLs it advertises (from the member list): what a Restore gives each member back.
    #[serde(default, rename = "peerURLs", skip_serializing_if = "Vec::is_empty")]
    pub peer_urls: Vec<String>,
    /// Size of the member's database file in bytes, free pages included (`dbSize` of its
    /// `Status`). Absent when it did not answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub db_size: Option<i64>,
    /// Bytes of the database in use (`dbSizeInUse` of its `Status`); the rest are free pages a
    /// defrag gives back to the disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub db_size_in_use: Option<i64>,
    /// Share of the database that is free pages, in %, one decimal: (dbSize − dbSizeInUse) /
    /// dbSize.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fragmentation_percent: Option<f64>,
    /// The member is the leader, by its own `Status`.
    #[serde(default)]
    pub leader: bool,
    /// The member answered `Status`, sees a leader and reports no error (a `NOSPACE` alarm aside);
    /// else `message` says why not.
    #[serde(default)]
    pub healthy: bool,
    /// The member is a learner (not voting): never defragmented, not counted for the quorum.
    #[serde(default)]
    pub learner: bool,
    /// The etcd version the member reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The Raft term the member reported: a term that keeps rising means elections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raft_term: Option<i64>,
    /// Why the member is not healthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the Job of the groundskeeper task that last defragmented the member finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_defrag_time: Option<Time>,
    /// Bytes that last defragmentation gave back to the disk: the db size before minus after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_bytes_reclaimed: Option<i64>,
    /// The member's last defragmentations (db size before, seconds; at most 5, oldest first):
    /// a plan expects the next one to take as long per byte.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub defrag_history: Vec<crate::plan::WorkSample>,
}

/// One revision sample of the periodic compactor.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RevisionSample {
    /// When it was sampled.
    pub time: Time,
    /// The store's revision then (the highest any member reported).
    pub revision: i64,
}

/// The composite revisions of a `Partitioned` cluster, as last observed.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EtcdPartitionStatus {
    /// Unix time (ms) in the store's newest revision: when, by the cluster's own clock, it made
    /// its last write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_timestamp_ms: Option<i64>,
    /// The same, as a time (seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_time: Option<Time>,
    /// The cluster id in the newest revision (bits 13–18); `spec.partition.clusterId` unless
    /// the cluster is configured with another id, or does not write composite revisions at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_cluster_id: Option<i32>,
    /// `revisionTimestampMs` minus the controller's clock when observed (ms). Positive: the
    /// cluster's clock is ahead by at least that much (no revision is made in the future).
    /// Negative: the cluster's clock is behind, or it simply wrote nothing since; condition
    /// `ClockSkewed` tells the two apart from the writes made between two observations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_skew_ms: Option<i64>,
    /// The millisecond in which a member's observed revision had the highest event number,
    /// since the cluster was first observed: how close a write burst came to the 8,192 events
    /// a cluster can make per millisecond.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busiest_millisecond: Option<BusiestMillisecond>,
}

/// The busiest millisecond seen in a cluster's revisions.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BusiestMillisecond {
    /// Unix time (ms) of that millisecond, by the cluster's clock.
    pub timestamp_ms: i64,
    /// The highest event number seen in it, 0 to 8,191: the cluster's revisions within one
    /// millisecond are numbered from 0, and at 8,191 it can make no further one in that
    /// millisecond.
    pub event_number: i32,
    /// `eventNumber` against the limit of 8,191, e.g. `"0.1%"`.
    pub budget_used: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    #[test]
    fn a_minimal_spec_takes_the_documented_defaults() {
        let spec: EtcdClusterSpec =
            serde_json::from_value(serde_json::json!({"endpoints": ["http://127.0.0.1:2379"]})).unwrap();
        assert!(spec.policy.enabled);
        assert_eq!(spec.policy.check_interval, "10m");
        assert_eq!(spec.policy.min_defrag_bytes, 100_000_000);
        assert_eq!(spec.policy.max_fragmented_percent, 45.0);
        assert!(spec.policy.move_leader);
        assert!(!spec.policy.allow_single_member);
        assert_eq!(spec.policy.compaction, None);
        assert_eq!(spec.tls, None);
    }

    #[test]
    fn the_crd_is_namespaced_with_a_status_subresource() {
        let crd = EtcdCluster::crd();
        assert_eq!(crd.spec.group, "groundskeeper.dev");
        assert_eq!(crd.spec.scope, "Namespaced");
        let version = &crd.spec.versions[0];
        assert_eq!(version.name, "v1alpha1");
        assert!(version.subresources.as_ref().unwrap().status.is_some());
        let columns = version.additional_printer_columns.as_ref().unwrap();
        let degraded = columns.iter().find(|c| c.name == "Degraded").unwrap();
        assert_eq!(degraded.json_path, ".status.conditions[?(@.type==\"DefragControllerDegraded\")].status");
    }

    #[test]
    fn compaction_modes_are_lower_case() {
        let policy: EtcdCompactionPolicy =
            serde_json::from_value(serde_json::json!({"mode": "periodic", "retention": "1h"})).unwrap();
        assert_eq!(policy.mode, CompactionMode::Periodic);
        assert!(
            serde_json::from_value::<EtcdCompactionPolicy>(
                serde_json::json!({"mode": "Periodic", "retention": "1h"})
            )
            .is_err()
        );
    }
}
