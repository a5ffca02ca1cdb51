//! The `MaintenanceTask` custom resource (`groundskeeper.dev/v1alpha1`): one piece of maintenance
//! on one cluster, asked for by a person or by one of groundskeeper's automatic triggers (label
//! [`groundskeeper_protocol::keys::ORIGIN_LABEL`]), and what became of it.
//!
//! The schema carries CEL rules (`x-kubernetes-validations`) for what a real API server can check
//! at admission: only the config member of the task's type, the target kind that fits the type,
//! an immutable spec. [`crate::validate`] checks the same and more for servers that do not
//! run CEL, and names the field of every mistake.
//!
//! `spec.type` and `spec.target.kind` are kept as written even when this version does not know
//! them ([`TaskType::Unknown`], [`TargetKind::Unknown`]): one task with a typo must not make every
//! list of tasks fail to deserialize; it is rejected with a reason instead.

use std::borrow::Cow;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Default `spec.ttlSecondsAfterFinished`: a finished task is kept for an hour.
pub const DEFAULT_TTL_SECONDS_AFTER_FINISHED: i64 = 3600;
/// Default `spec.config.snapshot.retain`.
pub const DEFAULT_SNAPSHOT_RETAIN: i32 = 5;
/// Default `spec.config.snapshot.fileName`.
pub const DEFAULT_SNAPSHOT_FILE_NAME: &str = "{cluster}-{time}.db";
/// Placeholders `spec.config.snapshot.fileName` may hold.
pub const SNAPSHOT_FILE_NAME_PLACEHOLDERS: &[&str] = &["{cluster}", "{time}"];
/// Compact with neither `retainRevisions` nor `revision`: keep this many revisions.
pub const DEFAULT_RETAIN_REVISIONS: i64 = 10_000;
/// Most entries `status.lastErrors` keeps (the newest).
pub const MAX_LAST_ERRORS: usize = 10;

// Bounds of the strings and lists in the spec. CEL rules compare the whole spec (immutability),
// and a real API server refuses a CRD whose rules may cost without bound: every string and list
// the rules can reach is bounded.

/// Longest object name (a DNS subdomain): targets and PersistentVolumeClaims.
pub const MAX_NAME_LEN: usize = 253;
/// Longest member Service name (a DNS label).
pub const MAX_NODE_NAME_LEN: usize = 63;
/// Longest keyspace name.
pub const MAX_KEYSPACE_LEN: usize = 255;
/// Longest snapshot file name template.
pub const MAX_FILE_NAME_LEN: usize = 255;
/// Most keyspaces or nodes a cleanup task may list.
pub const MAX_LIST_ITEMS: usize = 1000;
/// Longest value of a closed set of names (type, kind); unknown values are kept but bounded.
const MAX_ENUM_LEN: usize = 64;

/// One piece of maintenance on one cluster in the task's namespace.
///
/// Tasks of one target run one at a time, oldest first (by creation time, then name). A task of
/// the same type and target as one still pending or running is rejected as a duplicate. The spec
/// cannot change once created: to change a task, delete it and create another.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[kube(
    group = "groundskeeper.dev",
    version = "v1alpha1",
    kind = "MaintenanceTask",
    namespaced,
    status = "MaintenanceTaskStatus",
    shortname = "mtask",
    category = "groundskeeper",
    doc = "One piece of maintenance (cleanup, compaction, defragmentation, snapshot) on one cluster, and what became of it.",
    printcolumn = r#"{"name": "Type", "type": "string", "description": "What the task does", "jsonPath": ".spec.type"}"#,
    printcolumn = r#"{"name": "Target", "type": "string", "description": "The cluster it works on (its kind follows from the type)", "jsonPath": ".spec.target.name"}"#,
    printcolumn = r#"{"name": "State", "type": "string", "description": "Pending, InProgress, Completed, Failed or Rejected", "jsonPath": ".status.state"}"#,
    printcolumn = r#"{"name": "Waiting For", "type": "string", "description": "What a Pending task waits for: AwaitingApproval, WaitingForWindow, Suspended, QueuedBehindTask or WaitingForTarget", "jsonPath": ".status.waitingFor"}"#,
    printcolumn = r#"{"name": "Progress", "type": "string", "description": "Nodes or members done, of all", "jsonPath": ".status.progress"}"#,
    printcolumn = r#"{"name": "Next Window", "type": "integer", "description": "Nodes or members left for the next maintenance window", "jsonPath": ".status.leftForNextWindow"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[x_kube(validation = Rule::new("self == oldSelf").message("spec is immutable: delete this MaintenanceTask and create a new one"))]
#[x_kube(validation = Rule::new("self.type == 'Cleanup' ? self.target.kind == 'ScyllaCluster' : self.target.kind == 'EtcdCluster'").message("type Cleanup needs target kind ScyllaCluster; Compact, Defragment, Maintenance, Snapshot, Copy, Verify, Delta and Restore need EtcdCluster").field_path(".target.kind"))]
#[x_kube(validation = Rule::new("!has(self.config) || !has(self.config.cleanup) || self.type == 'Cleanup'").message("config.cleanup is only for type Cleanup: remove it, or set the config of this task's type").field_path(".config.cleanup"))]
#[x_kube(validation = Rule::new("!has(self.config) || !has(self.config.compact) || self.type == 'Compact'").message("config.compact is only for type Compact: remove it, or set the config of this task's type").field_path(".config.compact"))]
#[x_kube(validation = Rule::new("!has(self.config) || !has(self.config.defragment) || self.type == 'Defragment'").message("config.defragment is only for type Defragment: remove it, or set the config of this task's type").field_path(".config.defragment"))]
#[x_kube(validation = Rule::new("!has(self.config) || !has(self.config.maintenance) || self.type == 'Maintenance'").message("config.maintenance is only for type Maintenance: remove it, or set the config of this task's type").field_path(".config.maintenance"))]
#[x_kube(validation = Rule::new("!has(self.config) || !has(self.config.snapshot) || self.type == 'Snapshot'").message("config.snapshot is only for type Snapshot: remove it, or set the config of this task's type").field_path(".config.snapshot"))]
#[x_kube(validation = Rule::new("!has(self.config) || !has(self.config.copy) || self.type == 'Copy'").message("config.copy is only for type Copy: remove it, or set the config of this task's type").field_path(".config.copy"))]
#[x_kube(validation = Rule::new("!has(self.config) || !has(self.config.verify) || self.type == 'Verify'").message("config.verify is only for type Verify: remove it, or set the config of this task's type").field_path(".config.verify"))]
#[x_kube(validation = Rule::new("!has(self.config) || !has(self.config.delta) || self.type == 'Delta'").message("config.delta is only for type Delta: remove it, or set the config of this task's type").field_path(".config.delta"))]
#[x_kube(validation = Rule::new("!has(self.config) || !has(self.config.restore) || self.type == 'Restore'").message("config.restore is only for type Restore: remove it, or set the config of this task's type").field_path(".config.restore"))]
#[x_kube(validation = Rule::new("self.type != 'Restore' || (has(self.config) && has(self.config.restore) && self.config.restore.confirm == true)").message("a Restore replaces the data of every member: confirm it with config.restore.confirm: true").field_path(".config.restore"))]
#[serde(rename_all = "camelCase")]
pub struct MaintenanceTaskSpec {
    /// The cluster to work on, in the task's namespace.
    pub target: TaskTarget,
    /// What to do: `Cleanup` (ScyllaCluster: drop data of token ranges nodes no longer own),
    /// `Compact` (EtcdCluster: drop old MVCC history), `Defragment` (EtcdCluster: give free pages
    /// back to the disk, one member at a time), `Maintenance` (EtcdCluster: compact, then
    /// defragment), `Snapshot` (EtcdCluster: save the db to a volume or a bucket), `Copy`
    /// (EtcdCluster: copy its snapshots from one store to another), `Verify` (EtcdCluster: prove
    /// that its newest snapshot restores), `Restore` (EtcdCluster run as a StatefulSet: bring it
    /// back from a snapshot after a lost quorum).
    #[serde(rename = "type")]
    pub task_type: TaskType,
    /// Settings of the task's type: only the member named after the type may be set; absent, the
    /// type's defaults apply.
    #[serde(default, skip_serializing_if = "TaskConfig::is_empty")]
    pub config: TaskConfig,
    /// A finished task (Completed, Failed or Rejected) is deleted this long after it finished
    /// (seconds); 0 deletes it at once.
    #[serde(default = "default_ttl_seconds_after_finished")]
    #[schemars(range(min = 0))]
    pub ttl_seconds_after_finished: i64,
    /// A Failed task is deleted this long after it failed instead (seconds): failures kept longer
    /// than successes, to find out why. Absent: `ttlSecondsAfterFinished`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ttl_seconds_after_failed: Option<i64>,
    /// The task fails (`DeadlineExceeded`) if it has not finished this long after it was created
    /// (seconds), queueing included; its Jobs are then stopped. Absent: no deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub deadline_seconds: Option<i64>,
    /// Start only inside the target's maintenance windows (an EtcdCluster's
    /// `spec.maintenanceWindows`, a ScyllaCluster's `groundskeeper.dev/maintenance-windows`), as
    /// automatic tasks always do. False: a task made by hand starts as soon as it may.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub wait_for_window: bool,
    /// Wait for a person's approval before starting: the task stays Pending (condition `Queued`,
    /// reason `AwaitingApproval`) with its plan in `status.plan` until its
    /// `groundskeeper.dev/approved-plan` annotation names that plan's id (`kubectl groundskeeper
    /// task approve NAME`). If the plan changes before the task starts (a node joined, a member
    /// grew), the new plan needs approving again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub require_approval: bool,
}

/// The cluster a task works on.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskTarget {
    /// `ScyllaCluster` (scylla-operator's, `scylla.scylladb.com`) for Cleanup; `EtcdCluster`
    /// (groundskeeper's) for the other types.
    pub kind: TargetKind,
    /// Name of the cluster, in the task's namespace.
    #[schemars(length(min = 1, max = MAX_NAME_LEN))]
    pub name: String,
}

/// A closed set of names, serialised as the plain string, that keeps a value it does not know
/// as [`Unknown`](TaskType::Unknown) instead of failing: the schema offers the known values, and
/// [`crate::validate`] reports the unknown one.
macro_rules! open_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident { $($(#[$variant_meta:meta])* $variant:ident,)+ }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name {
            $($(#[$variant_meta])* $variant,)+
            /// A value this version does not know, kept as written.
            Unknown(String),
        }

        impl $name {
            /// The values this version knows, as written in a spec.
            pub const KNOWN: &[&str] = &[$(stringify!($variant)),+];

            pub fn as_str(&self) -> &str {
                match self {
                    $(Self::$variant => stringify!($variant),)+
                    Self::Unknown(text) => text,
                }
            }

            pub fn parse(text: &str) -> Self {
                match text {
                    $(stringify!($variant) => Self::$variant,)+
                    other => Self::Unknown(other.to_owned()),
                }
            }

            pub fn is_known(&self) -> bool {
                !matches!(self, Self::Unknown(_))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                String::deserialize(deserializer).map(|text| Self::parse(&text))
            }
        }

        impl JsonSchema for $name {
            fn schema_name() -> Cow<'static, str> {
                stringify!($name).into()
            }

            fn inline_schema() -> bool {
                true
            }

            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                json_schema!({"type": "string", "enum": Self::KNOWN, "maxLength": MAX_ENUM_LEN})
            }
        }
    };
}

open_enum! {
    /// What a task does.
    pub enum TaskType {
        /// ScyllaCluster: drop data for token ranges the nodes no longer own.
        Cleanup,
        /// EtcdCluster: drop MVCC history older than a revision.
        Compact,
        /// EtcdCluster: give freed pages back to the disk, one member at a time, leader last.
        Defragment,
        /// EtcdCluster: compact, then defragment.
        Maintenance,
        /// EtcdCluster: save the db to a volume or a bucket.
        Snapshot,
        /// EtcdCluster: copy its snapshots from one store to another.
        Copy,
        /// EtcdCluster: prove that a snapshot restores, in a throwaway member.
        Verify,
        /// EtcdCluster: save the changes since its newest snapshot or delta in a store (an
        /// incremental snapshot) beside its full snapshots.
        Delta,
        /// EtcdCluster run as a StatefulSet: restore every member from a snapshot after a lost
        /// quorum.
        Restore,
    }
}

open_enum! {
    /// The kind of a task's target.
    pub enum TargetKind {
        /// scylla-operator's `scylla.scylladb.com/v1` ScyllaCluster.
        ScyllaCluster,
        /// groundskeeper's `groundskeeper.dev/v1alpha1` EtcdCluster.
        EtcdCluster,
    }
}

impl TaskType {
    /// The kind of target this type works on; `None` for an unknown type.
    pub fn target_kind(&self) -> Option<TargetKind> {
        match self {
            TaskType::Cleanup => Some(TargetKind::ScyllaCluster),
            TaskType::Compact
            | TaskType::Defragment
            | TaskType::Maintenance
            | TaskType::Snapshot
            | TaskType::Copy
            | TaskType::Verify
            | TaskType::Delta
            | TaskType::Restore => Some(TargetKind::EtcdCluster),
            TaskType::Unknown(_) => None,
        }
    }

    /// Whether a waiting task of this type is placed before the other waiting tasks of its
    /// target: a Restore brings back a cluster every other task waits for.
    pub fn goes_first(&self) -> bool {
        matches!(self, TaskType::Restore)
    }

    /// Whether a running task of this type is left to finish when its deadline passes or a
    /// suspension stops running work: a Restore stopped half-way would leave the cluster scaled to
    /// zero; it stops at a failed step by itself, saying how to go on or back.
    pub fn runs_to_its_end(&self) -> bool {
        matches!(self, TaskType::Restore)
    }

    /// The name of the `spec.config` member for this type (`cleanup`, `compact`, ...).
    pub fn config_member(&self) -> Option<&'static str> {
        match self {
            TaskType::Cleanup => Some("cleanup"),
            TaskType::Compact => Some("compact"),
            TaskType::Defragment => Some("defragment"),
            TaskType::Maintenance => Some("maintenance"),
            TaskType::Snapshot => Some("snapshot"),
            TaskType::Copy => Some("copy"),
            TaskType::Verify => Some("verify"),
            TaskType::Delta => Some("delta"),
            TaskType::Restore => Some("restore"),
            TaskType::Unknown(_) => None,
        }
    }
}

/// Settings per task type: a union, of which only the member named after `spec.type` may be set.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskConfig {
    /// For type Cleanup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleanup: Option<CleanupConfig>,
    /// For type Compact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compact: Option<CompactConfig>,
    /// For type Defragment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defragment: Option<DefragmentConfig>,
    /// For type Maintenance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintenance: Option<MaintenanceConfig>,
    /// For type Snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<SnapshotConfig>,
    /// For type Copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy: Option<CopyConfig>,
    /// For type Verify.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<VerifyConfig>,
    /// For type Delta.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta: Option<DeltaConfig>,
    /// For type Restore.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore: Option<RestoreConfig>,
}

impl TaskConfig {
    pub fn is_empty(&self) -> bool {
        self.members_set().is_empty()
    }

    /// The names of the members that are set, in declaration order.
    pub fn members_set(&self) -> Vec<&'static str> {
        [
            ("cleanup", self.cleanup.is_some()),
            ("compact", self.compact.is_some()),
            ("defragment", self.defragment.is_some()),
            ("maintenance", self.maintenance.is_some()),
            ("snapshot", self.snapshot.is_some()),
            ("copy", self.copy.is_some()),
            ("verify", self.verify.is_some()),
            ("delta", self.delta.is_some()),
            ("restore", self.restore.is_some()),
        ]
        .into_iter()
        .filter_map(|(member, set)| set.then_some(member))
        .collect()
    }
}

/// Cleanup of a ScyllaCluster's nodes.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CleanupConfig {
    /// Keyspaces to clean. Empty: every keyspace that can hold stale data (vnode-replicated and
    /// not local; tablet keyspaces need no cleanup).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_LIST_ITEMS), inner(length(min = 1, max = MAX_KEYSPACE_LEN)))]
    pub keyspaces: Vec<String>,
    /// Nodes to clean, by member Service name (`<cluster>-<dc>-<rack>-<ordinal>`). Empty: every
    /// node of the cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_LIST_ITEMS), inner(length(min = 1, max = MAX_NODE_NAME_LEN)))]
    pub nodes: Vec<String>,
    /// At most this many nodes of one rack are cleaned at the same time. Absent: the
    /// ScyllaCluster's `groundskeeper.dev/cleanup-max-concurrent-per-rack` annotation, else 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_concurrent_per_rack: Option<i32>,
    /// At most this many nodes of the whole cluster are cleaned at the same time. Absent: the
    /// ScyllaCluster's `groundskeeper.dev/cleanup-max-concurrent` annotation, else no bound
    /// beyond the per-rack one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_concurrent: Option<i32>,
    /// Per node, what to clean there instead of `keyspaces` (the automatic task's ownership rule
    /// fills it: each node cleans only the keyspaces it stopped replicating ranges of). A node
    /// listed here must be in `nodes`; nodes not listed clean `keyspaces`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_LIST_ITEMS))]
    pub per_node: Vec<NodeCleanupConfig>,
}

/// What one node of a Cleanup task cleans.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeCleanupConfig {
    /// Member Service name of the node.
    #[schemars(length(min = 1, max = MAX_NODE_NAME_LEN))]
    pub node: String,
    /// Keyspaces to clean on that node. Empty: every keyspace that can hold stale data.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_LIST_ITEMS), inner(length(min = 1, max = MAX_KEYSPACE_LEN)))]
    pub keyspaces: Vec<String>,
    /// The keyspaces are all the node holds stale data for: once they are clean, reset Scylla's
    /// own "cleanup needed" flag (`mark_node_as_clean`, where the node offers it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mark_node_clean: bool,
}

/// Compaction of an etcd cluster's MVCC history. Give at most one of `retainRevisions` and
/// `revision`; neither keeps the last 10,000 revisions.
#[derive(KubeSchema, Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq)]
#[x_kube(validation = Rule::new("!has(self.retainRevisions) || !has(self.revision)").message("give one of retainRevisions and revision, not both"))]
#[serde(rename_all = "camelCase")]
pub struct CompactConfig {
    /// Keep the last N revisions: compact to the current revision − N.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub retain_revisions: Option<i64>,
    /// Compact to exactly this revision (it must not be in the future).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub revision: Option<i64>,
    /// Wait until the compaction has reached the backend, so that a defragmentation right after
    /// sees the freed pages.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub physical: bool,
}

/// Defragmentation of an etcd cluster, one member at a time, leader last (leadership moved away
/// first). A member is defragmented when its db is at least `minDefragBytes` large and at least
/// `maxFragmentedPercent` of it is free pages. A task asked for by hand defaults both to 0:
/// every member is defragmented. Automatic tasks carry the EtcdCluster's thresholds here.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DefragmentConfig {
    /// Defragment a member only when its db is at least this large (bytes). 0: any size.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub min_defrag_bytes: i64,
    /// Defragment a member only when at least this share of its db is free pages:
    /// (dbSize − dbSizeInUse) / dbSize, in %. 0: however little.
    #[serde(default)]
    #[schemars(range(min = 0, max = 100))]
    pub max_fragmented_percent: f64,
}

/// Compaction, then defragmentation.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MaintenanceConfig {
    /// The compaction step (its defaults as for type Compact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compact: Option<CompactConfig>,
    /// The defragmentation step (its defaults as for type Defragment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defragment: Option<DefragmentConfig>,
}

/// A snapshot of an etcd cluster's db, written to a volume.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotConfig {
    /// The PersistentVolumeClaim (in the task's namespace) the snapshot is written to, mounted
    /// writable at `/snapshots` in the task's Job. Absent: `<target name>-snapshots`. The claim
    /// is not created for you: while it does not exist the task stays Pending (condition
    /// `Queued`, reason `WaitingForTarget`, naming the claim) and starts once it is created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_NAME_LEN))]
    pub persistent_volume_claim: Option<String>,
    /// File name of the snapshot on that volume. `{cluster}` is replaced by the target's name
    /// and `{time}` by the time the task's work started (UTC, `20060102T150405Z`); no other
    /// placeholder, and no `/`. Retention counts as this cluster's snapshots only the files
    /// whose whole name this template gives the cluster at some time; without `{time}` every
    /// snapshot has the same name and replaces the last.
    #[serde(default = "default_snapshot_file_name")]
    #[schemars(length(min = 1, max = MAX_FILE_NAME_LEN))]
    pub file_name: String,
    /// How many snapshots of this cluster to keep on the volume, the new one included: once the
    /// new snapshot is complete and checked, the oldest beyond (by the time in their names) are
    /// deleted, and so are temporary files left by this cluster's interrupted runs. Other
    /// clusters' snapshots and unrelated files are never touched.
    #[serde(default = "default_snapshot_retain")]
    #[schemars(range(min = 1))]
    pub retain: i32,
    /// Retention beyond `retain`: by age, by tiers, of deltas and by total size. Each rule keeps
    /// what it names and the rules add up; deltas go only with their whole chain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<RetentionPolicy>,
    /// Write the snapshot to this bucket (an object under its prefix) instead of a claim; the
    /// same retention applies to this cluster's objects there, and nothing else in the bucket is
    /// touched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket: Option<crate::snapshot_store::BucketSpec>,
    /// Once written, prove that the snapshot restores (as a Verify task does) before the task
    /// completes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub verify: bool,
    /// How the snapshot is compressed: `zstd` (a standard zstd frame, which `zstd -d` reads by
    /// hand) or `none` (the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<crate::snapshot_store::Compression>,
    /// Encrypt the snapshot with the key in a Secret (AES-256-GCM, client-side); the proof of
    /// `verify` opens it with the same key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption: Option<crate::snapshot_store::EncryptionSpec>,
}

impl Default for SnapshotConfig {
    fn default() -> Self {
        Self {
            persistent_volume_claim: None,
            file_name: default_snapshot_file_name(),
            retain: DEFAULT_SNAPSHOT_RETAIN,
            retention: None,
            bucket: None,
            verify: false,
            compression: None,
            encryption: None,
        }
    }
}

/// What to keep of a cluster's backups in a store beyond the newest `retain` full snapshots.
/// Applied when a full snapshot is written; a full snapshot kept by any rule stays. A delta
/// restores only with the full snapshot before it and every delta between (its chain): deltas go
/// by whole chains, never leaving one that cannot be replayed. Needs `{time}` in the file name.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RetentionPolicy {
    /// Also keep every full snapshot written this recently, as a duration (`12h`, `2d`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 32))]
    pub keep_within: Option<String>,
    /// Also keep, per tier, the newest full snapshot of each `every`-long period (aligned on the
    /// Unix epoch, UTC) for `for`: `{every: 1h, for: 7d}` and `{every: 1d, for: 30d}` keep hourly
    /// snapshots for a week and dailies for a month.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub tiers: Vec<RetentionTier>,
    /// Keep the deltas that restore any point in time this recent (`1d`), with the full
    /// snapshots they follow; older deltas go. Absent: the deltas of every full snapshot kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 32))]
    pub keep_deltas_for: Option<String>,
    /// The most this cluster's full snapshots and deltas in the store may weigh, as a quantity
    /// (`50Gi`): the oldest full snapshots go first, with their deltas; never the newest and its
    /// deltas (the task's result says when those alone weigh more).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 32))]
    pub max_total_size: Option<String>,
}

/// One retention tier: the newest full snapshot of each `every`-long period, for `for`.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RetentionTier {
    /// The period, as a duration (`1h`, `1d`, `1w`).
    #[schemars(length(min = 1, max = 32))]
    pub every: String,
    /// How long the tier keeps them, as a duration longer than `every` (`7d`, `4w`).
    #[serde(rename = "for")]
    #[schemars(length(min = 1, max = 32))]
    pub keep_for: String,
}

/// Copy a cluster's snapshots from one store to another.
#[derive(KubeSchema, Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq)]
#[x_kube(validation = Rule::new("(!has(self.from.compression) || self.from.compression == 'none') && !has(self.from.encryption)").message("a copy carries objects as they are; compressed or encrypted ones stay so: remove compression and encryption from from").field_path(".from"))]
#[x_kube(validation = Rule::new("(!has(self.to.compression) || self.to.compression == 'none') && !has(self.to.encryption)").message("a copy carries objects as they are; compressed or encrypted ones stay so: remove compression and encryption from to").field_path(".to"))]
#[serde(rename_all = "camelCase")]
pub struct CopyConfig {
    /// Where the snapshots are.
    pub from: crate::snapshot_store::SnapshotStoreSpec,
    /// Where they go. Snapshots already there with the same size and SHA-256 are left as they
    /// are, so a task run again (or after its Job was killed) copies only what is missing.
    pub to: crate::snapshot_store::SnapshotStoreSpec,
    /// The file name template the cluster's snapshots are named by (as for Snapshot): only these
    /// are copied. Absent: `{cluster}-{time}.db`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_FILE_NAME_LEN))]
    pub file_name: Option<String>,
    /// Only these snapshots (names in `from`). Empty: every snapshot of the cluster there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_LIST_ITEMS), inner(length(min = 1, max = MAX_FILE_NAME_LEN)))]
    pub only: Vec<String>,
}

/// Prove that a snapshot restores: restored into a throwaway member inside the Job, started, and
/// checked to serve the revision and hold the number of keys recorded when it was taken.
#[derive(KubeSchema, Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq)]
#[x_kube(validation = Rule::new("!has(self.from) || !has(self.from.compression) || self.from.compression == 'none'").message("a Verify only reads, and every object is decoded by its first bytes: remove from.compression (keep encryption to open encrypted ones)").field_path(".from.compression"))]
#[serde(rename_all = "camelCase")]
pub struct VerifyConfig {
    /// Where the snapshot is. Absent: the claim `<target name>-snapshots`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<crate::snapshot_store::SnapshotStoreSpec>,
    /// Its name there. Absent: the cluster's newest by the time in its name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_FILE_NAME_LEN))]
    pub object: Option<String>,
    /// The file name template of the cluster's snapshots. Absent: `{cluster}-{time}.db`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_FILE_NAME_LEN))]
    pub file_name: Option<String>,
    /// Prove a restore to this revision (a point in time): the newest full snapshot of the store
    /// at or before it (or `object`), and the cluster's deltas after it (Delta tasks) replayed up
    /// to it in the throwaway member, each transaction at its original revision. Absent: prove
    /// the snapshot alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub to_revision: Option<i64>,
}

/// Save the changes an EtcdCluster made since its newest snapshot or delta in a store (an
/// incremental snapshot, a delta): every put and delete from etcd's history, each transaction
/// with its revision and leases, up to the cluster's revision when the Job starts, written beside
/// the cluster's full snapshots (`{cluster}-{time}-{start}-{end}.delta`). A start that etcd has
/// compacted away fails the task, naming the revision, and writes nothing: take a full snapshot.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeltaConfig {
    /// Where the cluster's full snapshots are; the delta goes there too. Absent: the claim
    /// `<target name>-snapshots`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<crate::snapshot_store::SnapshotStoreSpec>,
    /// The file name template of the cluster's full snapshots (as for Snapshot). Absent:
    /// `{cluster}-{time}.db`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_FILE_NAME_LEN))]
    pub file_name: Option<String>,
    /// The delta holds the changes after this revision. Absent: where the newest full snapshot
    /// or delta of the cluster in that store ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub start_revision: Option<i64>,
}

/// Default `spec.config.restore.quorumLostForSeconds`.
pub const DEFAULT_QUORUM_LOST_FOR_SECONDS: i64 = 300;

/// Bring an etcd cluster run as a StatefulSet back from a snapshot after it lost its quorum for
/// good. Every member's data is replaced (the old data is moved aside on each volume, never
/// deleted); writes after the snapshot are lost.
#[derive(KubeSchema, Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq)]
#[x_kube(validation = Rule::new("!has(self.toRevision) || !has(self.toTime)").message("give one of toRevision and toTime, not both"))]
#[x_kube(validation = Rule::new("!has(self.from.compression) || self.from.compression == 'none' || has(self.toRevision) || has(self.toTime)").message("a Restore only reads from.compression's store unless it saves a replayed snapshot (toRevision, toTime): remove from.compression").field_path(".from.compression"))]
#[serde(rename_all = "camelCase")]
pub struct RestoreConfig {
    /// Must be true: a person confirms that every member's data is replaced by the snapshot's.
    #[serde(default)]
    pub confirm: bool,
    /// Where the snapshot is.
    pub from: crate::snapshot_store::SnapshotStoreSpec,
    /// The snapshot's name there. Absent: the newest snapshot of the cluster in that store that a
    /// Verify proved restorable (the EtcdCluster's `status.snapshots`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_FILE_NAME_LEN))]
    pub object: Option<String>,
    /// The quorum must have been lost (fewer than a majority of members healthy) for at least
    /// this long, as the EtcdCluster's status saw it, before the task is admitted.
    #[serde(default = "default_quorum_lost_for_seconds")]
    #[schemars(range(min = 0))]
    pub quorum_lost_for_seconds: i64,
    /// Restore although the quorum is not lost (say, to go back to a snapshot on purpose).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub override_quorum_check: bool,
    /// Restore to this revision (a point in time): the newest full snapshot of the store at or
    /// before it (or `object`), and the cluster's deltas after it replayed up to it in a
    /// throwaway member, which must serve it; that member's snapshot is saved in the store
    /// (under the default name template, at the task's time) and restored as any snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub to_revision: Option<i64>,
    /// Restore to the cluster as of this time (RFC 3339, `2026-11-29T10:30:00Z`): the revision of
    /// the newest backup of the store written at or before it (a full snapshot, or a delta of its
    /// chain), then as `toRevision`. Writes after that backup and before the time are in no
    /// backup: the recovery point is the delta interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub to_time: Option<String>,
}

fn default_quorum_lost_for_seconds() -> i64 {
    DEFAULT_QUORUM_LOST_FOR_SECONDS
}

fn default_ttl_seconds_after_finished() -> i64 {
    DEFAULT_TTL_SECONDS_AFTER_FINISHED
}
fn default_snapshot_file_name() -> String {
    DEFAULT_SNAPSHOT_FILE_NAME.to_owned()
}
fn default_snapshot_retain() -> i32 {
    DEFAULT_SNAPSHOT_RETAIN
}

/// Where a task stands. `Completed`, `Failed` and `Rejected` are final: they never change.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum TaskState {
    /// Accepted, waiting its turn or for its target to be ready (the `Queued` condition says
    /// which).
    #[default]
    Pending,
    /// Its Jobs run.
    InProgress,
    /// Done.
    Completed,
    /// Its work failed, or it ran out of time (`lastErrors` says why).
    Failed,
    /// Never run: invalid, a duplicate, or its target does not exist.
    Rejected,
}

impl TaskState {
    /// Final states never change.
    pub fn is_final(self) -> bool {
        matches!(self, TaskState::Completed | TaskState::Failed | TaskState::Rejected)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Pending => "Pending",
            TaskState::InProgress => "InProgress",
            TaskState::Completed => "Completed",
            TaskState::Failed => "Failed",
            TaskState::Rejected => "Rejected",
        }
    }
}

impl fmt::Display for TaskState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What became of a task.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MaintenanceTaskStatus {
    /// Absent until the controller has seen the task (then as `Pending`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<TaskState>,
    /// While the task is Pending, what it waits for (the `Queued` condition's reason:
    /// `AwaitingApproval`, `WaitingForWindow`, `Suspended`, `QueuedBehindTask`,
    /// `WaitingForTarget`), for `kubectl get`; absent once it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub waiting_for: Option<String>,
    /// When the controller first took the task into account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initiated_at: Option<Time>,
    /// When its work started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    /// When it became Completed, Failed or Rejected; `spec.ttlSecondsAfterFinished` counts from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Time>,
    /// The newest errors, oldest first (at most 10).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_LAST_ERRORS))]
    pub last_errors: Vec<TaskError>,
    /// The last thing that happened to the task, in one line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_operation: Option<LastOperation>,
    /// `Queued` (True while the task waits, saying for what) and `Ready` (True once Completed;
    /// `kubectl wait --for=condition=Ready`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The `metadata.generation` this status was written for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Nodes or members finished, of all, e.g. `4/6` (for `kubectl get`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<String>,
    /// Per node (Cleanup) or per member (etcd types) progress.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<NodeProgress>,
    /// Snapshot: the file being written, and once written what it holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<SnapshotStatus>,
    /// Verify (and Snapshot with `verify`): whether the snapshot was proven restorable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proof: Option<crate::snapshot_catalog::SnapshotProof>,
    /// Copy: what was copied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy: Option<CopyStatus>,
    /// Delta: what the incremental snapshot holds and where it went.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta: Option<DeltaStatus>,
    /// Verify to a point in time (`toRevision`): the full snapshot and deltas replayed, and what
    /// the throwaway member served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<ReplayStatus>,
    /// Restore: its steps and where it stands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore: Option<crate::restore::RestoreStatus>,
    /// What the task does, in order, with expected durations: written while it awaits approval
    /// and when it starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<crate::plan::TaskPlan>,
    /// Nodes or members not started because their expected duration would run past the end of
    /// the maintenance window (tasks that wait for windows only). A Cleanup keeps its nodes
    /// pending and starts them in the next window; an etcd task completes, and a later task (the
    /// trigger's, where the member is still over its thresholds) picks its members up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left_for_next_window: Option<i32>,
}

/// What a Verify to a point in time replayed, and what the member served at the end.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplayStatus {
    /// The store, as the Job saw it: the bucket's URL, or the folder the claim was mounted at.
    pub store: String,
    /// The full snapshot restored first.
    pub snapshot: String,
    /// The revision that full snapshot holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_revision: Option<i64>,
    /// The deltas replayed on it, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deltas: Vec<String>,
    /// The revision asked for.
    pub to_revision: i64,
    /// True: the member served that revision, every replayed transaction landed on its original
    /// revision.
    pub replayed: bool,
    /// Transactions replayed.
    pub transactions: i64,
    /// Changes (puts and deletes) replayed.
    pub changes: i64,
    /// The revision the member served at the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
    /// The keys it held at `toRevision`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<i64>,
    /// SHA-256 of its keyspace at `toRevision` (keys, values, create and mod revisions,
    /// versions, leases), to compare with the cluster's at that revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys_sha256: Option<String>,
}

/// What a Delta task wrote.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeltaStatus {
    /// The store, as the Job saw it: the bucket's URL, or the folder the claim was mounted at.
    pub store: String,
    /// The delta's file or object name; absent when nothing was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    /// It holds the changes after this revision…
    pub start_revision: i64,
    /// …up to and including this one (the cluster's revision when the Job started).
    pub end_revision: i64,
    /// Where the start came from: `flag` (spec.config.delta.startRevision), or the name of the
    /// newest full snapshot or delta in the store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_from: Option<String>,
    /// Transactions (revisions) in it.
    pub transactions: i64,
    /// Changes (puts and deletes) in it.
    pub changes: i64,
    /// Size of the delta in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<i64>,
    /// For people, e.g. `0.12 MiB`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<String>,
    /// SHA-256 of the whole delta, hex (what `sha256sum FILE` prints).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// When the start was compacted away: the revision etcd compacted to (nothing was written;
    /// take a full snapshot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compacted_to: Option<i64>,
    /// How it is stored: `zstd`, `aes-256-gcm` or `zstd+aes-256-gcm`; absent: as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<String>,
    /// The id of the key it is encrypted with (never the key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
    /// Size of the delta once decoded, when it is stored encoded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_bytes: Option<i64>,
}

/// What a Copy task copied.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CopyStatus {
    /// The store copied from, as the Job saw it: the bucket's URL, or the folder the claim was
    /// mounted at (`/snapshots-from`).
    pub from: String,
    /// The store copied to, as the Job saw it: the bucket's URL, or the folder the claim was
    /// mounted at (`/snapshots-to`).
    pub to: String,
    /// Snapshots copied.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub copied: Vec<String>,
    /// Snapshots already there, checked and left as they were.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub already_there: Vec<String>,
    /// Snapshots that could not be copied, with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<String>,
    /// Bytes copied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_copied: Option<i64>,
    /// The same for people, e.g. `12.34 MiB`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<String>,
}

/// A Snapshot task's file.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotStatus {
    /// The claim it is written to (empty when it went to a bucket).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub persistent_volume_claim: String,
    /// The bucket it is written to (its URL), when not a claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket: Option<String>,
    /// The number of keys at the snapshot's revision, counted when it was taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<i64>,
    /// Its name on that claim (`spec.config.snapshot.fileName` rendered).
    pub file: String,
    /// Size of the file in bytes, etcd's 32-byte SHA-256 trailer included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<i64>,
    /// The same for people, e.g. `12.34 MiB`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<String>,
    /// The highest revision the snapshot holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
    /// The member it was streamed from (a follower unless none was healthy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<String>,
    /// That member's id in hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member_id: Option<String>,
    /// The member was the leader (no healthy follower was there).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_leader: bool,
    /// SHA-256 of the whole file, hex (what `sha256sum FILE` prints).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// From the snapshot request to the file in place, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_seconds: Option<f64>,
    /// Older snapshots of this cluster deleted from the claim by retention (the oldest first;
    /// shortened when the Job's result had to be, see `deletedCount`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deleted: Vec<String>,
    /// How many retention deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleted_count: Option<i64>,
    /// How many of this cluster's deltas retention deleted (whole chains no rule keeps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleted_deltas_count: Option<i64>,
    /// Bytes of this cluster's full snapshots and deltas left in the store after retention.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept_bytes: Option<i64>,
    /// Set when the newest full snapshot and its deltas alone weigh more than
    /// `retention.maxTotalSize`: their bytes (nothing more may be deleted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub over_limit_bytes: Option<i64>,
    /// Files retention could not delete, with why: delete them by hand.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retention_errors: Vec<String>,
    /// How it is stored: `zstd`, `aes-256-gcm` or `zstd+aes-256-gcm`; absent: as etcd sent it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<String>,
    /// The id of the key it is encrypted with (never the key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
    /// Size of the snapshot once decoded, when it is stored encoded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_bytes: Option<i64>,
}

/// One error met by a task.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskError {
    /// Machine-readable, CamelCase: `InvalidSpec`, `Duplicate`, `TargetNotFound`,
    /// `DeadlineExceeded`, or what a Job reported.
    pub code: String,
    /// For people: what went wrong and what to do.
    pub description: String,
    /// When the error was recorded.
    pub observed_at: Time,
}

/// The last thing that happened to a task.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastOperation {
    /// The task's state after it.
    pub state: TaskState,
    /// What happened, for people: what the task waits for, that its work started or how it is
    /// going, how it ended.
    pub description: String,
    /// When the state or the description last changed.
    pub last_update_time: Time,
}

/// Where the work on one node (Cleanup) or member (etcd types) stands.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum NodeState {
    #[default]
    Pending,
    Running,
    Succeeded,
    Failed,
    /// Nothing to do there (e.g. a member under the thresholds).
    Skipped,
}

impl NodeState {
    /// The work on the node is over, whatever its outcome.
    pub fn is_finished(self) -> bool {
        matches!(self, NodeState::Succeeded | NodeState::Failed | NodeState::Skipped)
    }
}

/// Progress of a task on one node or member.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeProgress {
    /// Member Service name (Scylla) or member name (etcd).
    pub name: String,
    pub state: NodeState,
    /// The Job doing the work there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// Cleanup: when the node's Job was created. Restore: when the step began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    /// Cleanup: when the node's Job was seen to succeed or fail. Restore: when the step ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Time>,
    /// What happened there, in one line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Cleanup: the keyspaces cleaned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keyspaces_cleaned: Vec<String>,
    /// Cleanup beside scylla-operator's own: the ring hash scylla-operator was cleaning (or about
    /// to clean) the node for while the node waited. Once scylla-operator records that hash as
    /// the node's last-cleaned one, the node is skipped: cleaned for that ring already.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waited_for_ring: Option<String>,
    /// Defragmentation: bytes given back to the disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_reclaimed: Option<i64>,
    /// etcd: db size before the work (bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub db_size_before: Option<i64>,
    /// etcd: db size after the work (bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub db_size_after: Option<i64>,
    /// Compaction: the revision compacted to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compacted_revision: Option<i64>,
    /// Cleanup: how often its cleanup was stopped to let a topology change through (the node is
    /// neither failed nor clean then; it runs again once the cluster settles, if still owed).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub interruptions: i32,
    /// Cleanup: when its cleanup was last stopped for a topology change. It starts again no
    /// sooner than the stopped pod's termination grace period after: the stopped runner's last
    /// calls on the node must not stop the new cleanup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted_at: Option<Time>,
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

/// Condition type: True while the task waits (for its turn or for its target).
pub const QUEUED: &str = "Queued";

/// Condition type: True once the task is Completed.
pub const READY: &str = "Ready";

#[cfg(test)]
mod tests;
