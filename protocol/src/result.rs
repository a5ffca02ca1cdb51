//! The result a `groundskeeper-job` run writes to `--result-file`.
//!
//! By default that file is `/dev/termination-log`, which the kubelet copies into the pod's
//! `status.containerStatuses[].state.terminated.message`, where the controller reads it. The
//! kubelet keeps at most 4096 bytes of it, so [`JobResult::to_termination_message`] drops detail
//! (successful entries first, failures last) until the JSON fits, and says so with `truncated`.

use serde::{Deserialize, Serialize};

/// `apiVersion` of the result JSON. Bumped on incompatible changes.
pub const RESULT_API_VERSION: &str = "groundskeeper.dev/result/v1";
/// What the kubelet keeps of a termination message.
pub const TERMINATION_MESSAGE_LIMIT: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Outcome {
    Succeeded,
    Failed,
    /// There was nothing to do (no keyspace to clean, no member over the thresholds).
    Skipped,
}

/// Why a run failed, for a person and for the controller's retry decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ErrorKind {
    /// Retrying cannot help: bad arguments, bad credentials, unknown keyspace, future revision.
    BadInput,
    /// May pass on retry: server errors, topology changes, timeouts, unreachable members.
    Retryable,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResultError {
    pub kind: ErrorKind,
    pub message: String,
    /// What went wrong, where the controller acts on the cause rather than only showing the
    /// message. Absent for every other failure, and in results of runners older than it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<ErrorReason>,
}

/// Causes of a failure the controller tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ErrorReason {
    /// The object read is encrypted and the run was given no key.
    KeyMissing,
    /// The object read is encrypted with another key than the one the run was given.
    KeyMismatch,
}

impl ErrorReason {
    /// A mistake in the key a run was given (none, or another), not in what it read.
    pub fn is_key(self) -> bool {
        matches!(self, ErrorReason::KeyMissing | ErrorReason::KeyMismatch)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobResult {
    pub api_version: String,
    #[serde(flatten)]
    pub report: Report,
    pub outcome: Outcome,
    /// One line for people: what happened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ResultError>,
    /// RFC 3339.
    pub started_at: String,
    pub duration_ms: u64,
    /// Entries were dropped to fit the termination message.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// The signal that stopped the run before its work was done (`SIGTERM`, `SIGINT`): the pod
    /// was deleted, its Job's deadline passed or its node drained.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<String>,
}

/// What was done, per operation. Serialised flat into the result, tagged by `operation`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "operation", rename_all = "camelCase")]
pub enum Report {
    Cleanup(CleanupReport),
    Defrag(DefragReport),
    Compact(CompactReport),
    /// Added after `v1` was first written: results of older runners never carry it, and older
    /// readers only meet it where a runner of this version runs a snapshot.
    Snapshot(SnapshotReport),
    SnapshotCopy(CopyReport),
    SnapshotProve(ProveReport),
    RestoreMember(RestoreMemberReport),
    /// An incremental snapshot: etcd's history between two revisions (`snapshot-delta`).
    SnapshotDelta(DeltaReport),
    /// A full snapshot and its deltas replayed into a throwaway member (`snapshot-replay`).
    SnapshotReplay(ReplayReport),
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CleanupReport {
    /// Address of the node that was cleaned.
    pub node: String,
    /// A cleanup left running by an earlier attempt was stopped first.
    #[serde(default)]
    pub stopped_stale_cleanup: bool,
    /// Scylla's own "cleanup needed" flag was reset (`mark_node_as_clean`, where offered).
    #[serde(default)]
    pub marked_node_clean: bool,
    /// The node's data on disk before the cleanup (`GET /storage_service/load`), bytes; absent
    /// when the node did not say. The controller expects the node's next cleanup to take as
    /// long per byte.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_bytes: Option<i64>,
    #[serde(default)]
    pub keyspaces: Vec<KeyspaceCleanup>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum KeyspaceStatus {
    Cleaned,
    Failed,
    /// Not attempted because an earlier keyspace failed.
    NotStarted,
    /// Asked for, but it cannot hold stale data (local strategy or tablets): not cleaned.
    Skipped,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyspaceCleanup {
    pub name: String,
    pub status: KeyspaceStatus,
    pub duration_ms: u64,
    /// `async` (task manager, with progress) or `sync` (the blocking call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DefragReport {
    #[serde(default)]
    pub dry_run: bool,
    /// Revision the keyspace was compacted to before defragmenting, if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compacted_revision: Option<i64>,
    /// The revision that compaction would have gone to, when it was held back at
    /// `--compact-not-past` (the newest revision backed up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction_held_back_from: Option<i64>,
    /// Member leadership was moved to before the leader was defragmented (set once etcd said
    /// the transfer happened, even when the run failed afterwards).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_moved_to: Option<String>,
    /// The leadership transfer the run asked for, whatever became of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_transfer: Option<LeaderTransfer>,
    /// How the leader's turn was decided: in place or leadership moved first, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_turn: Option<LeaderTurn>,
    /// `NOSPACE` alarms disarmed after space was freed (member ids, hex).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alarms_disarmed: Vec<String>,
    /// `NOSPACE` alarms still raised when the run ended, each with why it was left: the cluster
    /// still refuses writes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alarms_left: Vec<AlarmLeft>,
    /// What the run noticed and could not do or did not use: alarms it could not list, an
    /// `--expected-rate` for a member the cluster does not have. The work itself is in `members`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// In the order processed.
    #[serde(default)]
    pub members: Vec<MemberDefrag>,
}

/// A `NOSPACE` alarm the run left raised.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AlarmLeft {
    /// Member id in hex, as etcdctl prints it.
    pub member: String,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberDefrag {
    pub name: String,
    /// Member id in hex, as etcdctl prints it.
    pub id: String,
    pub db_size_before: i64,
    /// After the defrag; the size before when the member was not defragmented or its size after
    /// could not be read (the reason then says so).
    pub db_size_after: i64,
    /// The member is known to have been defragmented: `state` is `defragmented`.
    pub defragmented: bool,
    /// From the defrag call to the member's answer (or to the sizes showing it), 0 when no
    /// call was made.
    pub duration_ms: u64,
    pub was_leader: bool,
    pub reason: String,
    /// What happened to the member. Absent in results of older runners: see
    /// [`MemberDefrag::state`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<MemberDefragState>,
}

/// What a defrag run did to one member.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum MemberDefragState {
    /// Defragmented: the call answered, or the member's sizes show it.
    Defragmented,
    /// Under the thresholds, or a learner: left alone.
    Skipped,
    /// A dry run would defragment it; nothing was done.
    Planned,
    /// The run stopped before this member's turn: untouched.
    NotReached,
    /// The run stopped at this member before any defrag call was made: untouched.
    Stopped,
    /// The defrag call failed, or calls were cut and its sizes show no defrag.
    Failed,
    /// A defrag call was made but the run could not learn its end (it had to stop while the
    /// call was in flight, or the member never answered): etcd finishes a defrag it started,
    /// so the member may well be defragmented.
    Unknown,
    /// Its expected defrag would have run past the end of the maintenance window: untouched,
    /// left for the next window.
    Deferred,
}

/// The leader's turn: what was chosen, on what prediction, and what it took.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaderTurn {
    /// The leader's name.
    pub member: String,
    /// `auto`, `always` or `never`.
    pub policy: String,
    pub choice: LeaderChoice,
    /// Why, in words: the prediction against the budget, or the policy.
    pub reason: String,
    /// The leader's predicted defrag, when a rate was known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_ms: Option<u64>,
    /// The in-place budget the prediction was held against.
    pub budget_ms: u64,
    /// The rate the prediction used (bytes per second).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_bytes_per_second: Option<u64>,
    /// Where that rate came from: `this run's followers (N)`, `its earlier defrags` or `the
    /// default rate (no follower measured)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_from: Option<String>,
    /// The leader's defrag as it happened; absent when it did not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actual_ms: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum LeaderChoice {
    /// Defragmented as the leader: writes wait for it, no election, no transfer.
    InPlace,
    /// Leadership moved to a caught-up follower first.
    TransferFirst,
}

/// A leadership transfer (`MoveLeader`) the run asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaderTransfer {
    pub from: String,
    pub to: String,
    pub state: TransferState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum TransferState {
    /// etcd answered that leadership moved.
    Moved,
    /// etcd refused or the call failed: leadership did not move.
    Failed,
    /// The call was cut or the run had to stop while it was in flight.
    Unknown,
}

impl MemberDefrag {
    /// What happened to the member; for results of older runners, read from `defragmented` and
    /// the reason's wording as they wrote it.
    pub fn state(&self) -> MemberDefragState {
        if let Some(state) = self.state {
            return state;
        }
        if self.defragmented {
            MemberDefragState::Defragmented
        } else if self.reason.starts_with("stopped:") {
            MemberDefragState::Stopped
        } else if self.reason.starts_with("not reached") {
            MemberDefragState::NotReached
        } else if self.reason.starts_with("would defragment") {
            MemberDefragState::Planned
        } else {
            MemberDefragState::Skipped
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactReport {
    /// The store's revision when the run began.
    pub current_revision: i64,
    /// The revision compacted to.
    pub compacted_revision: i64,
    #[serde(default)]
    pub physical: bool,
    /// That revision had been compacted already: nothing to do, not an error.
    #[serde(default)]
    pub already_compacted: bool,
    /// The revision the compaction would have gone to, when it was held back at `--not-past`
    /// (the newest revision backed up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_back_from: Option<i64>,
}

/// How an object is stored when it is not stored as it is (compressed, encrypted): beside its
/// size and SHA-256, which are of the bytes stored, the content's (the snapshot or delta as etcd's
/// tools and the runner read it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredAs {
    /// `zstd`, `aes-256-gcm` or `zstd+aes-256-gcm`; absent: stored as it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<String>,
    /// The id of the key it is encrypted with (never the key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
    /// Size and SHA-256 (hex) of the content, when it is encoded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_sha256: Option<String>,
}

impl StoredAs {
    /// Whether the object is stored as it is.
    pub fn is_plain(&self) -> bool {
        self.encoding.is_none()
    }
}

/// A snapshot taken (`groundskeeper-job snapshot`) or a file checked (`snapshot verify`).
///
/// An etcd v3 snapshot stream is the member's bbolt database followed by 32 bytes: the SHA-256
/// of the database. etcd's restore checks it; so does the runner, while streaming.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotReport {
    /// The file written or checked, or the object written as its URL
    /// (`s3://bucket/prefix/name`).
    pub path: String,
    /// Only an existing file was checked (`snapshot verify`): nothing was taken.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub verify_only: bool,
    /// The member the snapshot was streamed from (its name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<String>,
    /// Its id in hex, as etcdctl prints it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member_id: Option<String>,
    /// The member was the leader when the run chose it (no healthy follower was there).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_leader: bool,
    /// Size of the file, trailer included.
    #[serde(default)]
    pub size_bytes: u64,
    /// The same in MiB, rounded to two decimals, for people.
    #[serde(default)]
    pub size_mib: f64,
    /// The highest revision the snapshot holds (read from the file's key bucket, as
    /// `etcdutl snapshot status` reads it); absent when it could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
    /// The number of keys at that revision, counted by the member the snapshot came from right
    /// after it was taken; what a proof of the snapshot checks the restored member against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<i64>,
    /// SHA-256 of the whole file, hex: what `sha256sum FILE` prints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// The checksum etcd appended (SHA-256 of the database before it), hex, checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub db_sha256: Option<String>,
    /// How it is stored, when compressed or encrypted.
    #[serde(flatten)]
    pub stored: StoredAs,
    /// From the snapshot request to the file renamed into place (0 for a check).
    #[serde(default)]
    pub stream_duration_ms: u64,
    /// Retention: how many snapshots of the cluster are kept in the folder (the new one
    /// included); absent when the run was not asked to delete old ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retain: Option<u32>,
    /// Older snapshots of the same cluster deleted by retention, oldest first (file names in the
    /// output's folder).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deleted: Vec<String>,
    /// How many were deleted (stays right when `deleted` is shortened to fit the termination
    /// message).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub deleted_count: u32,
    /// Deltas of the same cluster deleted by retention (chains no rule keeps), oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deleted_deltas: Vec<String>,
    /// How many deltas were deleted (stays right when `deletedDeltas` is shortened).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub deleted_deltas_count: u32,
    /// Bytes of the cluster's full snapshots and deltas left in the store after retention.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept_bytes: Option<u64>,
    /// Set when the newest full snapshot and its deltas alone weigh more than the store's size
    /// limit (nothing more may be deleted): their bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub over_limit_bytes: Option<u64>,
    /// Temporary files of this cluster's interrupted runs that were removed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed_partial_files: Vec<String>,
    /// Files retention should have deleted but could not, each with why. The snapshot itself is
    /// complete all the same.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retention_errors: Vec<String>,
}

/// What `snapshot-copy` did: every snapshot of the cluster in the source, copied, found already
/// in the destination, or failed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CopyReport {
    /// The source and destination, as folder paths or bucket URLs.
    pub from: String,
    pub to: String,
    /// Snapshots copied by this run, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub copied: Vec<CopiedObject>,
    /// Snapshots already in the destination with the same size and SHA-256 (left as they are).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub already_there: Vec<String>,
    /// Snapshots that could not be copied, each with why; nothing of them is left in the
    /// destination under their name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<String>,
    /// Bytes copied by this run.
    #[serde(default)]
    pub bytes_copied: u64,
    /// How many snapshots of the cluster the source holds.
    #[serde(default)]
    pub source_count: u32,
}

/// One snapshot copied.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CopiedObject {
    pub name: String,
    pub size_bytes: u64,
    /// Of the whole file, the same on both sides.
    pub sha256: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<i64>,
    /// How it is stored (copies carry objects as they are).
    #[serde(flatten)]
    pub stored: StoredAs,
}

/// What `snapshot-prove` found: whether the snapshot restored into a throwaway member that
/// served the recorded revision and held the recorded number of keys.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProveReport {
    /// The snapshot, as a path or URL.
    pub path: String,
    /// Its name in the store.
    pub object: String,
    /// The snapshot restored, started and served what was recorded.
    pub proven: bool,
    #[serde(default)]
    pub size_bytes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// How it is stored, when compressed or encrypted.
    #[serde(flatten)]
    pub stored: StoredAs,
    /// The revision the restored member served, and what it was expected to serve.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_revision: Option<i64>,
    /// The keys the restored member held at that revision, and how many were recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_keys: Option<i64>,
    /// The etcd version of the throwaway member.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd_version: Option<String>,
    /// Time to fetch, to restore the data folder, and to start the member until it answered.
    #[serde(default)]
    pub fetch_ms: u64,
    #[serde(default)]
    pub restore_ms: u64,
    #[serde(default)]
    pub start_ms: u64,
}

/// What `restore-member` did on one member's volume.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RestoreMemberReport {
    pub member: String,
    /// The restored data folder.
    pub data_dir: String,
    /// Where the old data folder was moved (absent: there was none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_data_moved_to: Option<String>,
    /// A run before this one had already restored the folder with this cluster token.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub already_restored: bool,
    /// The snapshot restored, its SHA-256 and the revision it holds.
    pub object: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// How it is stored, when compressed or encrypted.
    #[serde(flatten)]
    pub stored: StoredAs,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
    pub initial_cluster_token: String,
}

/// Why a delta could not be taken, when no retry can help: the controller takes a full snapshot
/// next instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DeltaFailureReason {
    /// etcd compacted the history from the start revision on: the changes since the previous
    /// snapshot or delta are gone, only a full snapshot covers them now.
    HistoryCompacted,
}

/// An incremental snapshot (`groundskeeper-job snapshot-delta`): every change etcd made after
/// `startRevision` up to and including `endRevision`, in the order etcd made them, one record per
/// transaction (revision). Format: `docs/snapshots.md#incremental-snapshots-deltas`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeltaReport {
    /// The store (folder or bucket URL) the delta went to.
    pub path: String,
    /// The delta's file or object name (absent when nothing was written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    /// The delta holds the changes after this revision…
    #[serde(default)]
    pub start_revision: i64,
    /// …up to and including this one: the cluster's revision when the run started.
    #[serde(default)]
    pub end_revision: i64,
    /// Where the start revision came from: `flag`, or the newest full snapshot or delta in the
    /// store (its name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_from: Option<String>,
    /// Transactions (revisions) and changes (puts and deletes) in the delta.
    #[serde(default)]
    pub transactions: u64,
    #[serde(default)]
    pub events: u64,
    #[serde(default)]
    pub size_bytes: u64,
    #[serde(default)]
    pub size_mib: f64,
    /// SHA-256 of the whole file, as `sha256sum` prints it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// How it is stored, when compressed or encrypted.
    #[serde(flatten)]
    pub stored: StoredAs,
    /// The member the history was read from, its id and the cluster's id (hex).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<String>,
    /// Why the run failed when a retry cannot help (the controller takes a full snapshot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<DeltaFailureReason>,
    /// With `HistoryCompacted`: the revision etcd compacted to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compact_revision: Option<i64>,
    /// From the first read of history to the delta in place.
    #[serde(default)]
    pub read_duration_ms: u64,
    /// Hidden partial files (staging objects) of this cluster's deltas that killed runs left
    /// more than an hour ago, removed after the delta was in place.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed_partial_files: Vec<String>,
}

/// A snapshot a run saved beside the others.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SavedSnapshot {
    pub object: String,
    pub size_bytes: u64,
    pub sha256: String,
    /// How it is stored, when compressed or encrypted.
    #[serde(flatten)]
    pub stored: StoredAs,

    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<i64>,
}

/// A full snapshot and its deltas replayed into a throwaway member (`groundskeeper-job
/// snapshot-replay`), up to a target revision, and what that member then served.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplayReport {
    /// The store, as a path or URL.
    pub path: String,
    /// The full snapshot restored, and the revision it holds.
    pub object: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_revision: Option<i64>,
    /// The deltas replayed, in order.
    #[serde(default)]
    pub deltas: Vec<String>,
    /// The revision asked for.
    #[serde(default)]
    pub to_revision: i64,
    /// The replay reached it, the member served it, and every replayed transaction got its
    /// original revision.
    pub replayed: bool,
    #[serde(default)]
    pub transactions: u64,
    #[serde(default)]
    pub events: u64,
    /// Every replayed transaction was given the revision it had in the original cluster (one
    /// revision per transaction, none skipped): what makes "restored to revision R" exact.
    #[serde(default)]
    pub revisions_exact: bool,
    /// Leases granted in the member under their original ids for replayed keys.
    #[serde(default)]
    pub leases_granted: u64,
    /// What the member served at the end: its revision, the keys at `toRevision`, and the
    /// SHA-256 of the keyspace there (see `keyspace_digest` in the runner).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_keys: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys_sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd_version: Option<String>,
    #[serde(default)]
    pub restore_ms: u64,
    #[serde(default)]
    pub replay_ms: u64,
    /// With `--save-as`: the replayed member's snapshot saved in the store (its name, size,
    /// SHA-256 of the whole file and the revision it holds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saved: Option<SavedSnapshot>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Bytes as MiB, rounded to two decimals.
pub fn mib(bytes: u64) -> f64 {
    (bytes as f64 / (1024.0 * 1024.0) * 100.0).round() / 100.0
}

impl JobResult {
    pub fn new(report: Report, outcome: Outcome, started_at: String, duration_ms: u64) -> Self {
        Self {
            api_version: RESULT_API_VERSION.to_owned(),
            report,
            outcome,
            message: None,
            error: None,
            started_at,
            duration_ms,
            truncated: false,
            stopped_by: None,
        }
    }

    pub fn parse(json: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(json)
    }

    /// The JSON, shrunk to fit the kubelet's termination-message limit: successful entries are
    /// dropped before failed ones, and the message is cut last.
    pub fn to_termination_message(&self) -> String {
        let mut result = self.clone();
        loop {
            let json = serde_json::to_string(&result).expect("results always serialise");
            if json.len() <= TERMINATION_MESSAGE_LIMIT {
                return json;
            }
            result.truncated = true;
            // Entries go in batches worth the excess, not one serialisation per entry: a result
            // of 20,000 keyspaces would otherwise take quadratic time to shrink.
            if result.report.drop_entries_worth(json.len() - TERMINATION_MESSAGE_LIMIT) {
                continue;
            }
            let message = result.message.get_or_insert_default();
            let error_message = result.error.as_mut().map(|e| &mut e.message);
            // Nothing left to drop but text: halve the longest of the two.
            let longest = match error_message {
                Some(e) if e.len() > message.len() => e,
                _ => message,
            };
            if longest.is_empty() {
                return json; // cannot happen with the fields above; never loop forever
            }
            let mut cut = longest.len() / 2;
            while !longest.is_char_boundary(cut) {
                cut -= 1;
            }
            longest.truncate(cut);
        }
    }
}

impl Report {
    /// Drops entries whose JSON adds up to at least `excess` bytes, the least interesting first
    /// (then the earliest). False when there is nothing left to drop.
    fn drop_entries_worth(&mut self, excess: usize) -> bool {
        match self {
            Report::Cleanup(r) => drop_worth(&mut r.keyspaces, excess, |k| match k.status {
                KeyspaceStatus::Skipped => 0,
                KeyspaceStatus::Cleaned => 1,
                KeyspaceStatus::NotStarted => 2,
                _ => 3,
            }),
            Report::Defrag(r) => drop_worth(&mut r.members, excess, |m| match m.state() {
                MemberDefragState::Skipped | MemberDefragState::Planned => 0,
                MemberDefragState::Defragmented => 1,
                MemberDefragState::NotReached | MemberDefragState::Deferred => 2,
                _ => 3,
            }),
            Report::Snapshot(r) => {
                drop_worth(&mut r.removed_partial_files, excess, |_| 0)
                    || drop_worth(&mut r.deleted_deltas, excess, |_| 0)
                    || drop_worth(&mut r.deleted, excess, |_| 0)
                    || drop_worth(&mut r.retention_errors, excess, |_| 0)
            }
            Report::SnapshotCopy(r) => {
                drop_worth(&mut r.already_there, excess, |_| 0) || drop_worth(&mut r.copied, excess, |_| 0)
            }
            Report::SnapshotReplay(r) => drop_worth(&mut r.deltas, excess, |_| 0),
            Report::SnapshotDelta(r) => drop_worth(&mut r.removed_partial_files, excess, |_| 0),
            Report::Compact(_) | Report::SnapshotProve(_) | Report::RestoreMember(_) => false,
        }
    }
}

/// Drops items in order of `rank`, then position, until their JSON (and its comma) adds up to
/// `excess` bytes. Linear in the items, whatever their number.
fn drop_worth<T: Serialize>(items: &mut Vec<T>, excess: usize, rank: impl Fn(&T) -> u8) -> bool {
    if items.is_empty() {
        return false;
    }
    let mut order: Vec<(u8, usize)> = items.iter().enumerate().map(|(i, item)| (rank(item), i)).collect();
    order.sort_unstable();
    let mut dropped = vec![false; items.len()];
    let mut freed = 0;
    for (_, i) in order {
        dropped[i] = true;
        freed += serde_json::to_string(&items[i]).map_or(1, |json| json.len() + 1);
        if freed >= excess {
            break;
        }
    }
    let mut position = 0;
    items.retain(|_| {
        position += 1;
        !dropped[position - 1]
    });
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 20,000 keyspaces shrink in one or two passes (it took about 30 s one entry at a time),
    /// keeping the failure and as many entries as fit.
    #[test]
    fn a_huge_result_shrinks_to_the_limit_keeping_its_failures() {
        let message = cleanup(20_000).to_termination_message();
        assert!(message.len() <= TERMINATION_MESSAGE_LIMIT);
        let Report::Cleanup(report) = JobResult::parse(&message).unwrap().report else {
            panic!("a cleanup report")
        };
        assert!(report.keyspaces.iter().any(|k| k.status == KeyspaceStatus::Failed));
        // Not more dropped than needed: the room left is less than two entries.
        assert!(message.len() > TERMINATION_MESSAGE_LIMIT - 2 * 150, "{}", message.len());
    }

    fn cleanup(keyspaces: usize) -> JobResult {
        let report = CleanupReport {
            node: "10.0.0.1".into(),
            keyspaces: (0..keyspaces)
                .map(|i| KeyspaceCleanup {
                    name: format!("keyspace_with_a_rather_long_name_{i:04}"),
                    status: if i == 7 { KeyspaceStatus::Failed } else { KeyspaceStatus::Cleaned },
                    duration_ms: 1234,
                    mode: Some("async".into()),
                    message: None,
                })
                .collect(),
            ..Default::default()
        };
        JobResult::new(Report::Cleanup(report), Outcome::Failed, "2026-11-21T12:00:00Z".into(), 99)
    }

    #[test]
    fn round_trips_with_the_operation_tag_flat() {
        let result = cleanup(2);
        let json = serde_json::to_value(&result).unwrap();
        assert_eq!(json["operation"], "cleanup");
        assert_eq!(json["apiVersion"], RESULT_API_VERSION);
        assert_eq!(json["keyspaces"][0]["durationMs"], 1234);
        assert_eq!(JobResult::parse(&json.to_string()).unwrap(), result);
    }

    /// The error's reason is named as the controller reads it, absent when there is none, and a
    /// result written before it existed still reads.
    #[test]
    fn an_error_reason_is_named_and_optional() {
        let mut result = cleanup(1);
        result.error = Some(ResultError {
            kind: ErrorKind::BadInput,
            message: "s.db is encrypted".into(),
            reason: Some(ErrorReason::KeyMismatch),
        });
        let json = serde_json::to_value(&result).unwrap();
        assert_eq!(json["error"]["reason"], "KeyMismatch");
        assert_eq!(JobResult::parse(&json.to_string()).unwrap(), result);
        result.error.as_mut().unwrap().reason = None;
        let mut json = serde_json::to_value(&result).unwrap();
        assert_eq!(json["error"].get("reason"), None);
        json["error"].as_object_mut().unwrap().remove("reason");
        assert_eq!(JobResult::parse(&json.to_string()).unwrap(), result);
        assert!(ErrorReason::KeyMissing.is_key() && ErrorReason::KeyMismatch.is_key());
    }

    #[test]
    fn defrag_members_are_flat_with_integer_sizes() {
        let report = DefragReport {
            members: vec![MemberDefrag {
                name: "etcd-0".into(),
                id: "8e9e05c52164694d".into(),
                db_size_before: 200_000_000,
                db_size_after: 1_000_000,
                defragmented: true,
                duration_ms: 10,
                was_leader: false,
                reason: "fragmented 99% of 200000000 bytes".into(),
                state: Some(MemberDefragState::Defragmented),
            }],
            ..Default::default()
        };
        let result = JobResult::new(Report::Defrag(report), Outcome::Succeeded, "t".into(), 1);
        let json = serde_json::to_value(&result).unwrap();
        assert_eq!(json["outcome"], "succeeded");
        assert_eq!(json["members"][0]["dbSizeBefore"], 200_000_000);
        assert_eq!(json["members"][0]["wasLeader"], false);
        assert_eq!(json["members"][0]["state"], "defragmented");
    }

    /// Results of runners that wrote no `state` still say what happened, from the fields they
    /// did write.
    #[test]
    fn member_states_of_older_results_come_from_their_wording() {
        use MemberDefragState::*;
        for (defragmented, reason, want) in [
            (true, "db 200 bytes", Defragmented),
            (false, "stopped: member m2 became unhealthy", Stopped),
            (false, "not reached: the run stopped earlier", NotReached),
            (false, "would defragment: db 200 bytes", Planned),
            (false, "db 2 bytes: under the 100 bytes minimum", Skipped),
        ] {
            let json = format!(
                r#"{{"name":"m","id":"1","dbSizeBefore":1,"dbSizeAfter":1,"defragmented":{defragmented},"durationMs":0,"wasLeader":false,"reason":"{reason}"}}"#
            );
            let member: MemberDefrag = serde_json::from_str(&json).unwrap();
            assert_eq!(member.state, None);
            assert_eq!(member.state(), want, "{reason}");
        }
    }

    #[test]
    fn snapshot_reports_are_flat_and_round_trip() {
        let report = SnapshotReport {
            path: "/backup/etcd-1.db".into(),
            member: Some("etcd-1".into()),
            member_id: Some("8e9e05c52164694d".into()),
            size_bytes: 3 * 1024 * 1024 + 32,
            size_mib: mib(3 * 1024 * 1024 + 32),
            revision: Some(1234),
            sha256: Some("ab".repeat(32)),
            db_sha256: Some("cd".repeat(32)),
            stream_duration_ms: 40,
            ..Default::default()
        };
        let result = JobResult::new(Report::Snapshot(report), Outcome::Succeeded, "t".into(), 50);
        let json = serde_json::to_value(&result).unwrap();
        assert_eq!(json["operation"], "snapshot");
        assert_eq!(json["sizeBytes"], 3 * 1024 * 1024 + 32);
        assert_eq!(json["sizeMib"], 3.0);
        assert_eq!(json["revision"], 1234);
        assert_eq!(json["member"], "etcd-1");
        assert!(json.get("verifyOnly").is_none());
        assert!(json.get("fromLeader").is_none());
        assert_eq!(JobResult::parse(&json.to_string()).unwrap(), result);
    }

    /// Results written before the snapshot report existed still read as they did.
    #[test]
    fn older_results_still_parse() {
        let compact = r#"{"apiVersion":"groundskeeper.dev/result/v1","operation":"compact","currentRevision":10,"compactedRevision":5,"outcome":"succeeded","startedAt":"t","durationMs":3}"#;
        let result = JobResult::parse(compact).unwrap();
        assert!(matches!(result.report, Report::Compact(CompactReport { compacted_revision: 5, .. })));
        // The least a snapshot result may carry: everything else has a default.
        let snapshot = r#"{"apiVersion":"groundskeeper.dev/result/v1","operation":"snapshot","path":"/s.db","outcome":"failed","startedAt":"t","durationMs":3}"#;
        let Report::Snapshot(report) = JobResult::parse(snapshot).unwrap().report else {
            panic!("a snapshot report")
        };
        assert_eq!(report.path, "/s.db");
        assert_eq!(report.revision, None);
    }

    /// Retention that deleted many files: the names go first (their count stays), the checksum,
    /// revision and what could not be deleted stay.
    #[test]
    fn a_snapshot_result_with_many_deletions_fits_keeping_what_matters() {
        let names: Vec<String> = (0..300).map(|i| format!("main-2026010{}T0000{i:02}Z.db", i % 10)).collect();
        let report = SnapshotReport {
            path: "/snapshots/main-20260201T000000Z.db".into(),
            size_bytes: 1024 + 32,
            revision: Some(77),
            sha256: Some("ab".repeat(32)),
            retain: Some(1),
            deleted_count: names.len() as u32,
            deleted: names.clone(),
            removed_partial_files: vec![".main-20260101T000000Z.db.partial".into()],
            retention_errors: vec!["main-20250101T000000Z.db: Permission denied".into()],
            ..Default::default()
        };
        let mut result = JobResult::new(Report::Snapshot(report), Outcome::Succeeded, "t".into(), 5);
        result.message = Some("snapshot of revision 77 written; retention deleted 300 files".into());
        let message = result.to_termination_message();
        assert!(message.len() <= TERMINATION_MESSAGE_LIMIT, "{}", message.len());
        let parsed = JobResult::parse(&message).unwrap();
        assert!(parsed.truncated);
        let Report::Snapshot(report) = parsed.report else { panic!("a snapshot report") };
        assert!(report.deleted.len() < names.len());
        assert_eq!(report.deleted_count, 300);
        assert_eq!(report.revision, Some(77));
        assert_eq!(report.sha256, Some("ab".repeat(32)));
        assert_eq!(report.retention_errors.len(), 1);
    }

    #[test]
    fn small_results_are_not_truncated() {
        let message = cleanup(3).to_termination_message();
        assert!(!JobResult::parse(&message).unwrap().truncated);
    }

    #[test]
    fn large_results_keep_failures_and_fit_the_limit() {
        let message = cleanup(500).to_termination_message();
        assert!(message.len() <= TERMINATION_MESSAGE_LIMIT);
        let parsed = JobResult::parse(&message).unwrap();
        assert!(parsed.truncated);
        let Report::Cleanup(report) = parsed.report else { panic!() };
        assert!(report.keyspaces.iter().any(|k| k.status == KeyspaceStatus::Failed));
    }

    #[test]
    fn huge_messages_are_cut_on_char_boundaries() {
        let mut result = cleanup(0);
        result.message = Some("é".repeat(10_000));
        let message = result.to_termination_message();
        assert!(message.len() <= TERMINATION_MESSAGE_LIMIT);
        assert!(JobResult::parse(&message).unwrap().truncated);
    }
}
