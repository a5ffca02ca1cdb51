//! One typed request from the controller to `groundskeeper-job`: the controller renders an
//! [`Operation`] into a Job's container arguments ([`Operation::to_args`]) and the runner parses
//! them with its own command line. A test on the runner's side parses every rendering back, so
//! the flag names live here once and cannot drift from the runner's parser.

use std::fmt;

/// The kind of work, as the runner's subcommand, the Jobs' `groundskeeper.dev/operation` label
/// and the result's `operation` field name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OperationKind {
    Cleanup,
    Defrag,
    Compact,
    Snapshot,
    SnapshotCopy,
    SnapshotProve,
    RestoreMember,
    SnapshotDelta,
    SnapshotReplay,
}

impl OperationKind {
    pub const ALL: [OperationKind; 9] = [
        Self::Cleanup,
        Self::Defrag,
        Self::Compact,
        Self::Snapshot,
        Self::SnapshotCopy,
        Self::SnapshotProve,
        Self::RestoreMember,
        Self::SnapshotDelta,
        Self::SnapshotReplay,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cleanup => "cleanup",
            Self::Defrag => "defrag",
            Self::Compact => "compact",
            Self::Snapshot => "snapshot",
            Self::SnapshotCopy => "snapshot-copy",
            Self::SnapshotProve => "snapshot-prove",
            Self::RestoreMember => "restore-member",
            Self::SnapshotDelta => "snapshot-delta",
            Self::SnapshotReplay => "snapshot-replay",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == name)
    }
}

impl fmt::Display for OperationKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A piece of work for one `groundskeeper-job` run.
#[derive(Debug, Clone, PartialEq)]
pub enum Operation {
    Cleanup(CleanupRequest),
    Defrag(DefragRequest),
    Compact(CompactRequest),
    Snapshot(SnapshotRequest),
    SnapshotCopy(CopyRequest),
    SnapshotProve(ProveRequest),
    RestoreMember(RestoreMemberRequest),
    SnapshotDelta(DeltaRequest),
    SnapshotReplay(ReplayRequest),
}

/// Clean one Scylla node through its Scylla Manager Agent.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CleanupRequest {
    /// Host name or IP address of the node's agent.
    pub node_address: String,
    /// Path of the mounted agent token file (`auth-token.yaml`).
    pub auth_token_file: String,
    /// Path of a CA bundle for the agent's certificate; `None` accepts its self-signed one.
    pub agent_ca_file: Option<String>,
    /// Only these keyspaces; empty: every keyspace that can hold stale data.
    pub keyspaces: Vec<String>,
    /// The keyspaces listed are all the node holds stale data for: reset Scylla's own cleanup
    /// flag once they are clean.
    pub mark_node_clean: bool,
}

/// Where an etcd cluster is and the mounted client TLS files, if any.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EtcdTarget {
    pub endpoints: Vec<String>,
    pub tls: Option<EtcdTlsFiles>,
}

/// Paths of the mounted PEM files.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EtcdTlsFiles {
    pub ca: String,
    pub cert: String,
    pub key: String,
}

/// Defragment the members over the thresholds, one at a time, leader last.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DefragRequest {
    pub etcd: EtcdTarget,
    pub min_defrag_bytes: i64,
    pub max_fragmented_percent: f64,
    /// Compact to current − N first.
    pub compact_retain_revisions: Option<i64>,
    /// That compaction never goes past this revision (the newest one backed up, while
    /// incremental backups are on).
    pub compact_not_past: Option<i64>,
    /// Whether leadership moves before the leader's defrag.
    pub leader_turn: LeaderTurnPolicy,
    /// `Auto`: the leader is defragmented in place when its predicted defrag takes at most this
    /// many seconds; `None`: the runner's default.
    pub leader_in_place_budget_seconds: Option<u64>,
    /// Members on an etcd version whose defrag can corrupt data when it overlaps a snapshot
    /// apply are skipped instead of defragmented once caught up.
    pub refuse_affected_versions: bool,
    /// The members' storage quota (`--quota-backend-bytes`), from the spec: a `NOSPACE` alarm is
    /// disarmed once a member's db is under it (etcd 3.6.6 and later report their own).
    pub quota_backend_bytes: Option<i64>,
    pub allow_single_member: bool,
    /// The end of the maintenance window the task runs in (RFC 3339): no member is started
    /// whose expected defrag would end after it (it is left for the next window).
    pub not_after: Option<String>,
    /// When that window opened (RFC 3339): a member expected to take longer than the whole window
    /// may then still start as the first of the run, so that it is not left out for ever.
    pub window_opened: Option<String>,
    /// Expected defrag rate per member name (bytes per second, from its earlier defrags);
    /// members not listed are expected at the runner's default rate.
    pub expected_rates: Vec<(String, f64)>,
}

/// Whether leadership moves away from the leader before its defrag.
///
/// A leader defragmenting in place blocks every write of the cluster for its defrag, with no
/// election; a transfer costs clients the requests in flight at the leader (`leader changed`,
/// dropped proposals). Which hurts less depends on how long the defrag takes: see
/// `docs/etcd-maintenance.md`, "The leader's turn".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum LeaderTurnPolicy {
    /// In place when its predicted defrag (from this run's followers) fits the budget, else
    /// leadership moves first.
    #[default]
    Auto,
    /// Leadership always moves first.
    Always,
    /// Never: the leader is defragmented last, in place.
    Never,
}

impl LeaderTurnPolicy {
    pub const ALL: [LeaderTurnPolicy; 3] = [Self::Auto, Self::Always, Self::Never];

    /// As the runner's `--leader-turn` flag and the result spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Always => "always",
            Self::Never => "never",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str().eq_ignore_ascii_case(text))
    }
}

impl fmt::Display for LeaderTurnPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How far a compaction goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactTo {
    /// Keep the last N revisions.
    RetainRevisions(i64),
    /// Exactly this revision.
    Revision(i64),
}

/// Compact the MVCC history.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactRequest {
    pub etcd: EtcdTarget,
    pub to: CompactTo,
    /// Wait until the compaction reached the backend, so a defrag right after reclaims the pages.
    pub physical: bool,
    /// Never compact past this revision (the newest one backed up, while incremental backups are
    /// on): a target beyond it is held back to it.
    pub not_past: Option<i64>,
}

/// Stream a snapshot of the keyspace from one healthy member (a follower when there is one) into
/// a file, written atomically, or into an object of a bucket, completed only once etcd's checksum
/// matched.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotRequest {
    pub etcd: EtcdTarget,
    /// Where the snapshot goes.
    pub output: SnapshotOutput,
    /// Old snapshots of the same cluster to delete from the output's folder or bucket prefix once
    /// the new one is complete and checked; `None`: delete nothing.
    pub retention: Option<SnapshotRetention>,
    /// Compressed, encrypted, both or neither.
    pub encoding: ObjectEncoding,
}

/// How a writer stores the snapshots and deltas it writes, and the key readers open encrypted
/// ones with. Readers tell each object's encoding from its first bytes, so a store may hold plain,
/// compressed and encrypted objects side by side.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ObjectEncoding {
    /// zstd's level (1–19, 3 by default): `--compression zstd [--compression-level N]`;
    /// `None`: not compressed.
    pub zstd_level: Option<i32>,
    /// The key's file (from a mounted Secret): what is written is encrypted with it (AES-256-GCM)
    /// and what is read is opened with it: `--encryption-key FILE`.
    pub encryption_key_file: Option<String>,
}

/// zstd's level when none is given.
pub const DEFAULT_ZSTD_LEVEL: i32 = 3;

impl ObjectEncoding {
    fn render(&self, args: &mut Args) {
        if let Some(level) = self.zstd_level {
            args.value("compression", "zstd");
            if level != DEFAULT_ZSTD_LEVEL {
                args.value("compression-level", level);
            }
        }
        render_key(self.encryption_key_file.as_deref(), args);
    }
}

fn render_key(file: Option<&str>, args: &mut Args) {
    if let Some(file) = file {
        args.value("encryption-key", file);
    }
}

/// Where one snapshot is written.
#[derive(Debug, Clone, PartialEq)]
pub enum SnapshotOutput {
    /// Path of the snapshot file (its folder must exist, on the volume it goes to):
    /// `--output PATH`.
    File(String),
    /// An object named `name` under the bucket's prefix: `--to URL --object NAME` and the
    /// bucket's options and credentials.
    Object { bucket: BucketLocation, name: String },
}

impl SnapshotOutput {
    /// The file's or object's name, without its folder or prefix.
    pub fn name(&self) -> &str {
        match self {
            Self::File(path) => path.rsplit('/').next().unwrap_or(path),
            Self::Object { name, .. } => name,
        }
    }
}

/// Where a cluster's snapshots are kept: a mounted folder (a PersistentVolumeClaim) or a bucket.
/// Rendered as one location flag: an absolute path for a folder, the bucket's URL otherwise.
#[derive(Debug, Clone, PartialEq)]
pub enum SnapshotStore {
    /// A folder inside the container (absolute path).
    Folder(String),
    Bucket(BucketLocation),
}

/// A bucket (or a prefix in it) of an object store: S3 and S3-compatible stores, Google Cloud
/// Storage, Azure Blob Storage.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BucketLocation {
    /// `s3://BUCKET[/PREFIX]`, `gs://BUCKET[/PREFIX]` or `az://CONTAINER[/PREFIX]`.
    pub url: String,
    /// The store's settings that are no secret, by the names the `object_store` crate gives its
    /// configuration keys (`endpoint`, `region`, `allow_http`, `virtual_hosted_style_request`,
    /// `account_name` ...), in order.
    pub options: Vec<(String, String)>,
    /// A folder (a mounted Secret) whose files hold the credentials, each named by its key
    /// (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`,
    /// `GOOGLE_SERVICE_ACCOUNT_KEY`, `AZURE_STORAGE_ACCOUNT_KEY` ...). `None`: the store's own
    /// ambient credentials (instance or workload identity).
    pub credentials_dir: Option<String>,
}

/// Copy a cluster's snapshots from one store to another (folder → bucket, bucket → bucket,
/// bucket → folder), checking every object's checksum on both sides; objects already in the
/// destination with the same size and SHA-256 are left as they are, so a run that was killed is
/// finished by the next.
#[derive(Debug, Clone, PartialEq)]
pub struct CopyRequest {
    pub from: SnapshotStore,
    pub to: SnapshotStore,
    /// Which snapshots are the cluster's: the file name template and the value of `{cluster}`.
    pub file_name_template: String,
    pub cluster: String,
    /// Only these names (empty: every snapshot of the cluster in `from`).
    pub only: Vec<String>,
}

/// Prove that a snapshot restores: fetch it, check it, restore it into a throwaway member on
/// loopback inside the Job, start that member and check that it serves the revision and holds
/// the number of keys recorded when the snapshot was taken.
#[derive(Debug, Clone, PartialEq)]
pub struct ProveRequest {
    pub from: SnapshotStore,
    /// The snapshot's name; `None`: the cluster's newest by the time in its name.
    pub object: Option<String>,
    pub file_name_template: String,
    pub cluster: String,
    /// The revision recorded when it was taken; `None`: the object's own metadata, else the
    /// revision read from the file.
    pub expect_revision: Option<i64>,
    /// The number of keys recorded when it was taken; `None`: the object's own metadata, else
    /// not compared (the result says so).
    pub expect_keys: Option<i64>,
    /// The expected SHA-256 of the whole file, when recorded.
    pub expect_sha256: Option<String>,
    /// A writable scratch folder (an `emptyDir`) for the download and the throwaway member.
    pub scratch_dir: String,
    /// The key an encrypted snapshot is opened with (its file).
    pub encryption_key_file: Option<String>,
}

/// Restore one member's data from a snapshot, on its own data volume, while the cluster is
/// stopped: the member's current data folder is moved aside (never deleted), the snapshot is
/// checked against `expect_sha256` and restored with the member's own name and peer URL, the
/// cluster's membership and a new cluster token. Run again, a restore that finished is
/// recognised and left as it is.
#[derive(Debug, Clone, PartialEq)]
pub struct RestoreMemberRequest {
    pub from: SnapshotStore,
    pub object: String,
    /// SHA-256 of the whole snapshot file, as recorded; a file that does not match is refused.
    pub expect_sha256: Option<String>,
    /// The member's data folder (`--data-dir`) as the Job mounts its volume.
    pub data_dir: String,
    /// The member's name (`--name`).
    pub name: String,
    /// Every member as `NAME=PEER_URL`, comma-separated (`--initial-cluster`).
    pub initial_cluster: String,
    /// This member's peer URL(s), comma-separated (`--initial-advertise-peer-urls`).
    pub initial_advertise_peer_urls: String,
    /// The new cluster's token (`--initial-cluster-token`): the restored cluster never joins
    /// members of the old one.
    pub initial_cluster_token: String,
    /// The old data folder is moved to `DATA_DIR + keep_old_suffix` (e.g. `.pre-restore-TASK`).
    pub keep_old_suffix: String,
    /// A writable scratch folder for the download (on the member's volume, or an `emptyDir`).
    pub scratch_dir: String,
    /// The key an encrypted snapshot is opened with (its file).
    pub encryption_key_file: Option<String>,
}

/// Take an incremental snapshot (a delta) of a cluster: every change after `start_revision` up to
/// `end_revision`, one record per transaction, read from etcd's history and written to `to`
/// beside the cluster's full snapshots. A start etcd has compacted away fails (exit 2) and
/// writes nothing: the next backup must be a full snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct DeltaRequest {
    pub etcd: EtcdTarget,
    pub to: SnapshotStore,
    /// Which snapshots are the cluster's: the file name template and the value of `{cluster}`.
    pub file_name_template: String,
    pub cluster: String,
    /// The delta holds the changes after this revision; `None`: where the newest full snapshot
    /// or delta of the cluster in `to` ends.
    pub start_revision: Option<i64>,
    /// The last revision it holds; `None`: the cluster's revision when the run starts.
    pub end_revision: Option<i64>,
    /// How the delta is stored; its key also opens the store's encrypted snapshots.
    pub encoding: ObjectEncoding,
}

/// Restore a cluster's full snapshot into a throwaway member inside the Job and replay its deltas
/// on it, each transaction landing on its original revision, up to `to_revision`; the keys and
/// the keyspace digest at that revision are reported.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayRequest {
    pub from: SnapshotStore,
    /// The full snapshot to start from; `None`: the cluster's newest, by the time in its name.
    pub object: Option<String>,
    pub file_name_template: String,
    pub cluster: String,
    /// The revision to replay to; `None`: as far as the deltas in the store reach.
    pub to_revision: Option<i64>,
    /// The number of keys the member must hold at the target revision, when recorded.
    pub expect_keys: Option<i64>,
    /// A writable scratch folder (an `emptyDir`) for the downloads and the throwaway member.
    pub scratch_dir: String,
    /// Once proven, the replayed member's snapshot is saved in the store under this name (a
    /// full snapshot at the target revision: what a Restore to a point in time restores).
    pub save_as: Option<String>,
    /// The key opens the store's encrypted objects; the saved snapshot is stored so.
    pub encoding: ObjectEncoding,
}

/// Which files in a snapshot folder are snapshots of one cluster, and which of them and of its
/// deltas to keep.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SnapshotRetention {
    /// Snapshots of the cluster to keep, the new one included (at least 1).
    pub retain: u32,
    /// The file name template the cluster's snapshots are named by (`{cluster}`, `{time}`).
    pub file_name_template: String,
    /// The value of `{cluster}`.
    pub cluster: String,
    /// Also keep every full snapshot written this recently (a duration as specs write it, `2d`).
    pub keep_within: Option<String>,
    /// `EVERY:FOR` (`1h:7d`): the newest full snapshot of each EVERY-long period, for FOR.
    pub tiers: Vec<String>,
    /// Keep the deltas that restore a point in time this recent (with their full snapshots);
    /// `None`: the deltas of every full snapshot kept.
    pub keep_deltas_for: Option<String>,
    /// The most the cluster's backups in the store may weigh: the oldest go first.
    pub max_total_bytes: Option<u64>,
}

impl Operation {
    pub fn kind(&self) -> OperationKind {
        match self {
            Self::Cleanup(_) => OperationKind::Cleanup,
            Self::Defrag(_) => OperationKind::Defrag,
            Self::Compact(_) => OperationKind::Compact,
            Self::Snapshot(_) => OperationKind::Snapshot,
            Self::SnapshotCopy(_) => OperationKind::SnapshotCopy,
            Self::SnapshotProve(_) => OperationKind::SnapshotProve,
            Self::RestoreMember(_) => OperationKind::RestoreMember,
            Self::SnapshotDelta(_) => OperationKind::SnapshotDelta,
            Self::SnapshotReplay(_) => OperationKind::SnapshotReplay,
        }
    }

    /// The container arguments of `groundskeeper-job`, subcommand first.
    pub fn to_args(&self) -> Vec<String> {
        let mut args = Args(vec![self.kind().as_str().to_owned()]);
        match self {
            Self::Cleanup(request) => request.render(&mut args),
            Self::Defrag(request) => request.render(&mut args),
            Self::Compact(request) => request.render(&mut args),
            Self::Snapshot(request) => request.render(&mut args),
            Self::SnapshotCopy(request) => request.render(&mut args),
            Self::SnapshotProve(request) => request.render(&mut args),
            Self::RestoreMember(request) => request.render(&mut args),
            Self::SnapshotDelta(request) => request.render(&mut args),
            Self::SnapshotReplay(request) => request.render(&mut args),
        }
        args.0
    }
}

/// Flags being rendered.
struct Args(Vec<String>);

impl Args {
    fn flag(&mut self, name: &str) {
        self.0.push(format!("--{name}"));
    }

    fn value(&mut self, name: &str, value: impl ToString) {
        self.flag(name);
        self.0.push(value.to_string());
    }

    fn switch(&mut self, name: &str, on: bool) {
        if on {
            self.flag(name);
        }
    }
}

impl CleanupRequest {
    fn render(&self, args: &mut Args) {
        args.value("node-address", &self.node_address);
        args.value("auth-token-file", &self.auth_token_file);
        if let Some(ca) = &self.agent_ca_file {
            args.value("agent-ca-file", ca);
        }
        for keyspace in &self.keyspaces {
            args.value("keyspace", keyspace);
        }
        if self.mark_node_clean {
            args.flag("mark-node-clean");
        }
    }
}

impl EtcdTarget {
    fn render(&self, args: &mut Args) {
        args.value("endpoints", self.endpoints.join(","));
        if let Some(tls) = &self.tls {
            args.value("cacert", &tls.ca);
            args.value("cert", &tls.cert);
            args.value("key", &tls.key);
        }
    }
}

impl DefragRequest {
    fn render(&self, args: &mut Args) {
        self.etcd.render(args);
        args.value("min-defrag-bytes", self.min_defrag_bytes);
        args.value("max-fragmented-percent", self.max_fragmented_percent);
        if self.leader_turn != LeaderTurnPolicy::default() {
            args.value("leader-turn", self.leader_turn.as_str());
        }
        if let Some(budget) = self.leader_in_place_budget_seconds {
            args.value("leader-in-place-budget-seconds", budget);
        }
        args.switch("refuse-affected-versions", self.refuse_affected_versions);
        if let Some(quota) = self.quota_backend_bytes {
            args.value("quota-backend-bytes", quota);
        }
        args.switch("allow-single-member", self.allow_single_member);
        if let Some(keep) = self.compact_retain_revisions {
            args.value("compact-retain-revisions", keep);
        }
        if let Some(limit) = self.compact_not_past {
            args.value("compact-not-past", limit);
        }
        if let Some(not_after) = &self.not_after {
            args.value("not-after", not_after);
        }
        if let Some(opened) = &self.window_opened {
            args.value("window-opened", opened);
        }
        for (member, rate) in &self.expected_rates {
            args.value("expected-rate", format!("{member}={}", rate.round()));
        }
    }
}

impl CompactRequest {
    fn render(&self, args: &mut Args) {
        self.etcd.render(args);
        args.switch("physical", self.physical);
        match self.to {
            CompactTo::RetainRevisions(keep) => args.value("retain-revisions", keep),
            CompactTo::Revision(revision) => args.value("revision", revision),
        }
        if let Some(limit) = self.not_past {
            args.value("not-past", limit);
        }
    }
}

impl SnapshotRequest {
    fn render(&self, args: &mut Args) {
        self.etcd.render(args);
        match &self.output {
            SnapshotOutput::File(path) => args.value("output", path),
            SnapshotOutput::Object { bucket, name } => {
                bucket.render("to", args);
                args.value("object", name);
            }
        }
        if let Some(retention) = &self.retention {
            args.value("retain", retention.retain);
            args.value("file-name-template", &retention.file_name_template);
            args.value("cluster", &retention.cluster);
            if let Some(within) = &retention.keep_within {
                args.value("keep-within", within);
            }
            for tier in &retention.tiers {
                args.value("keep-tier", tier);
            }
            if let Some(within) = &retention.keep_deltas_for {
                args.value("keep-deltas-for", within);
            }
            if let Some(bytes) = retention.max_total_bytes {
                args.value("max-total-bytes", bytes);
            }
        }
        self.encoding.render(args);
    }
}

impl BucketLocation {
    /// `--NAME URL`, `--NAME-option KEY=VALUE` for each option, `--NAME-credentials DIR`.
    fn render(&self, name: &str, args: &mut Args) {
        args.value(name, &self.url);
        for (key, value) in &self.options {
            args.value(&format!("{name}-option"), format!("{key}={value}"));
        }
        if let Some(dir) = &self.credentials_dir {
            args.value(&format!("{name}-credentials"), dir);
        }
    }
}

impl SnapshotStore {
    /// A folder as `--NAME PATH`; a bucket as [`BucketLocation::render`] does.
    fn render(&self, name: &str, args: &mut Args) {
        match self {
            Self::Folder(path) => args.value(name, path),
            Self::Bucket(bucket) => bucket.render(name, args),
        }
    }
}

impl CopyRequest {
    fn render(&self, args: &mut Args) {
        self.from.render("from", args);
        self.to.render("to", args);
        args.value("file-name-template", &self.file_name_template);
        args.value("cluster", &self.cluster);
        for name in &self.only {
            args.value("only", name);
        }
    }
}

impl ProveRequest {
    fn render(&self, args: &mut Args) {
        self.from.render("from", args);
        if let Some(object) = &self.object {
            args.value("object", object);
        }
        args.value("file-name-template", &self.file_name_template);
        args.value("cluster", &self.cluster);
        if let Some(revision) = self.expect_revision {
            args.value("expect-revision", revision);
        }
        if let Some(keys) = self.expect_keys {
            args.value("expect-keys", keys);
        }
        if let Some(sha) = &self.expect_sha256 {
            args.value("expect-sha256", sha);
        }
        args.value("scratch-dir", &self.scratch_dir);
        render_key(self.encryption_key_file.as_deref(), args);
    }
}

impl DeltaRequest {
    fn render(&self, args: &mut Args) {
        self.etcd.render(args);
        self.to.render("to", args);
        args.value("file-name-template", &self.file_name_template);
        args.value("cluster", &self.cluster);
        if let Some(start) = self.start_revision {
            args.value("start-revision", start);
        }
        if let Some(end) = self.end_revision {
            args.value("end-revision", end);
        }
        self.encoding.render(args);
    }
}

impl ReplayRequest {
    fn render(&self, args: &mut Args) {
        self.from.render("from", args);
        if let Some(object) = &self.object {
            args.value("object", object);
        }
        args.value("file-name-template", &self.file_name_template);
        args.value("cluster", &self.cluster);
        if let Some(revision) = self.to_revision {
            args.value("to-revision", revision);
        }
        if let Some(keys) = self.expect_keys {
            args.value("expect-keys", keys);
        }
        args.value("scratch-dir", &self.scratch_dir);
        if let Some(name) = &self.save_as {
            args.value("save-as", name);
        }
        self.encoding.render(args);
    }
}

impl RestoreMemberRequest {
    fn render(&self, args: &mut Args) {
        self.from.render("from", args);
        args.value("object", &self.object);
        if let Some(sha) = &self.expect_sha256 {
            args.value("expect-sha256", sha);
        }
        args.value("data-dir", &self.data_dir);
        args.value("name", &self.name);
        args.value("initial-cluster", &self.initial_cluster);
        args.value("initial-advertise-peer-urls", &self.initial_advertise_peer_urls);
        args.value("initial-cluster-token", &self.initial_cluster_token);
        args.value("keep-old-suffix", &self.keep_old_suffix);
        args.value("scratch-dir", &self.scratch_dir);
        render_key(self.encryption_key_file.as_deref(), args);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_through_their_names() {
        for kind in OperationKind::ALL {
            assert_eq!(OperationKind::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(OperationKind::parse("restore"), None);
        assert_eq!(OperationKind::parse("restore-member"), Some(OperationKind::RestoreMember));
    }

    #[test]
    fn rendering_puts_the_subcommand_first_and_omits_what_is_unset() {
        let compact = Operation::Compact(CompactRequest {
            etcd: EtcdTarget { endpoints: vec!["http://a:2379".into(), "http://b:2379".into()], tls: None },
            to: CompactTo::Revision(42),
            physical: true,
            not_past: Some(90),
        });
        assert_eq!(
            compact.to_args(),
            [
                "compact",
                "--endpoints",
                "http://a:2379,http://b:2379",
                "--physical",
                "--revision",
                "42",
                "--not-past",
                "90"
            ]
        );
        let cleanup = Operation::Cleanup(CleanupRequest {
            node_address: "n.ns.svc".into(),
            auth_token_file: "/t.yaml".into(),
            ..CleanupRequest::default()
        });
        assert_eq!(
            cleanup.to_args(),
            ["cleanup", "--node-address", "n.ns.svc", "--auth-token-file", "/t.yaml"]
        );
    }
}
