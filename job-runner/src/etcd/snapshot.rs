//! `groundskeeper-job snapshot`: stream a snapshot of the keyspace from one member into a file;
//! `snapshot verify FILE`: check such a file on its own.
//!
//! What etcd sends (`Maintenance.Snapshot`) is the member's bbolt database, read in one read
//! transaction, followed by 32 bytes: the SHA-256 of the database. `etcdctl snapshot restore` /
//! `etcdutl snapshot restore` recognise the trailer by the file's size (512 × n + 32) and refuse a
//! file whose database does not hash to it. The runner checks the trailer while streaming and
//! again on what reached the disk, so a file it leaves under `--output` is one etcd restores.
//!
//! The snapshot comes from a healthy follower when there is one, so the leader, which carries
//! every write, does not also pay for reading its whole database. The file is written under a
//! hidden temporary name in the output's folder, fsynced, renamed into place and the folder
//! fsynced: a failed or stopped run (SIGTERM, SIGINT) removes its temporary file, and one killed
//! outright leaves only that hidden `.NAME.partial`, never a file under the output's name.
//!
//! With `--to URL --object NAME` the stream goes straight into a multipart upload to a bucket
//! instead (see [`to_bucket`]): nothing is kept in memory beyond a few parts, nothing on disk.
//!
//! Right after the stream, the member it came from counts the keys at the snapshot's revision
//! (`keys` in the result): what a proof of the snapshot checks a restored member against.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use groundskeeper_protocol::result::{SnapshotReport, mib};
use groundskeeper_protocol::{JobResult, Outcome, Report};
use sha2::{Digest, Sha256};

use super::bolt::Db;
use super::bolt_stream::RevisionScan;
use super::codec::{self, Decoder, DecodingReader, Encoded, Encoding, Key};
use super::compact::runtime;
use crate::run::{self, Failure, RunClock, StopSignal};
use groundskeeper_protocol::operation::BucketLocation;
use groundskeeper_stores::etcd::connect::{Cluster, Connection, EndpointArgs};
use groundskeeper_stores::etcd::plan::MemberObservation;
use groundskeeper_stores::etcd::retention::policy::{Policy, Selection, Tier};
use groundskeeper_stores::etcd::retention::{self, NameTemplate};

use crate::etcd::delta::name::DeltaName;

pub(crate) mod to_bucket;

/// etcd's checksum after the database.
pub const TRAILER: u64 = 32;
/// etcd's restore tells a snapshot with a trailer by `size % 512 == 32`.
const SECTOR: u64 = 512;
/// A member that sends nothing for this long is given up on (retryable).
pub const STALL_TIMEOUT: Duration = Duration::from_secs(60);

/// The most a snapshot stream may bring for a member whose db was `db_size` bytes just before:
/// twice that plus 64 MiB (the db may grow between the status read and the stream's start, never
/// by that much). More is not this member's database, and would only fill the volume. Every
/// other answer from etcd is one gRPC message, at most 4 MiB (the gRPC client's default limit).
pub fn stream_limit(db_size: i64) -> u64 {
    (db_size.max(0) as u64).saturating_mul(2).saturating_add(64 * 1024 * 1024)
}

#[derive(clap::Args, Debug, Clone)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct SnapshotArgs {
    #[command(subcommand)]
    pub check: Option<SnapshotCheck>,
    #[command(flatten)]
    pub connection: EndpointArgs,
    #[command(flatten)]
    pub encoding: crate::etcd::codec::EncodingArgs,
    /// The snapshot file to write. Its folder must exist; a file already there is replaced
    /// (atomically) once the new snapshot is complete and checked.
    #[arg(long, required_unless_present = "to", conflicts_with = "to")]
    pub output: Option<PathBuf>,
    /// The bucket to stream the snapshot into instead of a file: `s3://BUCKET[/PREFIX]`,
    /// `gs://BUCKET[/PREFIX]` or `az://CONTAINER[/PREFIX]`. The object appears only once etcd's
    /// checksum matched.
    #[arg(long, value_name = "URL", requires = "object")]
    pub to: Option<String>,
    /// A setting of the bucket, by object_store's key names (`endpoint=…`, `region=…`,
    /// `allow_http=true`, `account_name=…`); repeatable. No secrets: those go in --to-credentials.
    #[arg(long = "to-option", value_name = "KEY=VALUE", requires = "to")]
    pub to_options: Vec<String>,
    /// A folder (a mounted Secret) whose files hold the bucket's credentials, each named by its
    /// key (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, GOOGLE_SERVICE_ACCOUNT_KEY,
    /// AZURE_STORAGE_ACCOUNT_KEY …). Without it: the pod's own cloud identity.
    #[arg(long = "to-credentials", value_name = "DIR", requires = "to")]
    pub to_credentials: Option<PathBuf>,
    /// The object's name under the bucket's prefix (with retention: one of the template's names).
    #[arg(long, value_name = "NAME", requires = "to")]
    pub object: Option<String>,
    /// Retention: once the new snapshot is complete and checked, keep this many snapshots of the
    /// cluster in the output's folder (the new one included) and delete the older ones, oldest
    /// first by the time in their names. Needs --file-name-template and --cluster, which say
    /// which files are this cluster's snapshots; no other file is ever deleted.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), requires_all = ["file_name_template", "cluster"])]
    pub retain: Option<u32>,
    /// The template the cluster's snapshot files are named by: `{cluster}` stands for
    /// --cluster, `{time}` for a UTC time as 20060102T150405Z. --output must be one of its names.
    #[arg(long, requires = "retain")]
    pub file_name_template: Option<String>,
    /// The cluster's name, as `{cluster}` in --file-name-template.
    #[arg(long, requires = "retain")]
    pub cluster: Option<String>,
    /// Retention: also keep every full snapshot of the cluster written this recently (`12h`, `2d`).
    #[arg(long, value_name = "DURATION", requires = "retain")]
    pub keep_within: Option<String>,
    /// Retention tier `EVERY:FOR` (`1h:7d`): also keep the newest full snapshot of each
    /// EVERY-long period (aligned on the Unix epoch, UTC) of the last FOR. Repeatable.
    #[arg(long = "keep-tier", value_name = "EVERY:FOR", requires = "retain")]
    pub keep_tiers: Vec<String>,
    /// Retention of the cluster's deltas: keep the chains (a full snapshot and the deltas after
    /// it) that restore a point in time this recent, with their full snapshots. Absent: the
    /// deltas of every full snapshot kept. A delta goes only with its whole chain.
    #[arg(long, value_name = "DURATION", requires = "retain")]
    pub keep_deltas_for: Option<String>,
    /// Retention: the most the cluster's full snapshots and deltas in the store may weigh; the
    /// oldest full snapshots go first, with their deltas (never the newest and its deltas).
    #[arg(long, value_name = "BYTES", requires = "retain")]
    pub max_total_bytes: Option<u64>,
    /// Where to write the result JSON.
    #[arg(long, default_value = run::DEFAULT_RESULT_FILE)]
    pub result_file: PathBuf,
    /// The pod's terminationGracePeriodSeconds. A stop ends the stream at once (a snapshot
    /// changes nothing in etcd, a later run takes a new one); the temporary file is removed.
    #[arg(long, default_value_t = groundskeeper_protocol::exit::TERMINATION_GRACE_PERIOD_SECONDS)]
    pub grace_period_seconds: u64,
}

#[derive(clap::Subcommand, Debug, Clone)]
pub enum SnapshotCheck {
    /// Check a snapshot file on its own: etcd's SHA-256 trailer, the bbolt meta pages, and the
    /// revision it holds. Exit 0 when etcd would restore it, 2 when it would refuse it.
    Verify(VerifyArgs),
    /// Decode a compressed or encrypted snapshot file into a plain one that etcd's own
    /// `snapshot restore` reads (a restore by hand), checked as `verify` checks a file. Exit 0
    /// when the plain file is whole, 2 when the file is damaged or the key is not its own.
    Decode(DecodeArgs),
}

#[derive(clap::Args, Debug, Clone)]
pub struct DecodeArgs {
    /// The compressed or encrypted snapshot file.
    pub file: PathBuf,
    /// The plain snapshot file to write (its folder must exist; nothing is left there on a
    /// failure).
    #[arg(long)]
    pub output: PathBuf,
    #[command(flatten)]
    pub key: codec::KeyArgs,
    /// Also write the result JSON here (it always goes to stdout).
    #[arg(long)]
    pub result_file: Option<PathBuf>,
}

#[derive(clap::Args, Debug, Clone)]
pub struct VerifyArgs {
    /// The snapshot file.
    pub file: PathBuf,
    #[command(flatten)]
    pub key: crate::etcd::codec::KeyArgs,
    /// Also write the result JSON here (it always goes to stdout).
    #[arg(long)]
    pub result_file: Option<PathBuf>,
}

/// What a checked snapshot file is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    pub size: u64,
    /// SHA-256 of the whole file, hex.
    pub sha256: String,
    /// The trailer: SHA-256 of the database, hex.
    pub db_sha256: String,
    /// `None` when the key bucket could not be read (or is empty).
    pub revision: Option<i64>,
    /// When the file is compressed or encrypted: what it held (`size` and `sha256` are the
    /// file's, `db_sha256` and `revision` the snapshot's inside).
    pub content: Option<Encoded>,
}

impl Checked {
    /// The snapshot's own size: the file's, or what it decodes to.
    pub fn content_size(&self) -> u64 {
        self.content.as_ref().map_or(self.size, |c| c.content_bytes)
    }

    /// A check of the plain file a compressed or encrypted object was decoded into, told as the
    /// object's: its size and SHA-256 are the object's, with what it holds beside.
    pub(crate) fn of_stored(self, content: Option<Encoded>) -> Result<Self, String> {
        let Some(content) = content else { return Ok(self) };
        if content.content_sha256 != self.sha256 {
            return Err(format!(
                "decoded into a file that reads back with sha256 {}, not the {} decoded",
                self.sha256, content.content_sha256
            ));
        }
        Ok(Self {
            size: content.stored_bytes,
            sha256: content.stored_sha256.clone(),
            content: Some(content),
            ..self
        })
    }
}

/// SHA-256 of the whole stream and of the database before its last 32 bytes, fed chunk by chunk:
/// the last 32 bytes seen are held back from the database's hash until more arrive.
#[derive(Default)]
pub struct TrailerCheck {
    whole: Sha256,
    db: Sha256,
    tail: Vec<u8>,
    len: u64,
}

impl TrailerCheck {
    pub fn update(&mut self, chunk: &[u8]) {
        self.whole.update(chunk);
        self.len += chunk.len() as u64;
        self.tail.extend_from_slice(chunk);
        if self.tail.len() > TRAILER as usize {
            let spill = self.tail.len() - TRAILER as usize;
            self.db.update(&self.tail[..spill]);
            self.tail.drain(..spill);
        }
    }

    /// Bytes seen so far.
    pub fn bytes_seen(&self) -> u64 {
        self.len
    }

    /// SHA-256 of every byte seen, whatever they are (a compressed or encrypted object, whose
    /// trailer is inside).
    pub fn whole_sha256(self) -> String {
        hex(&self.whole.finalize())
    }

    /// The hashes when the trailer matches, else why the stream is not a whole snapshot.
    pub fn finish(self) -> Result<(String, String), String> {
        if self.len < TRAILER + SECTOR || !(self.len - TRAILER).is_multiple_of(SECTOR) {
            return Err(format!(
                "{} bytes is not the size of a snapshot (a database of 512-byte multiples and a \
                 32-byte SHA-256 trailer): truncated, or not written by etcd's snapshot API",
                self.len
            ));
        }
        let db = self.db.finalize();
        if db.as_slice() != self.tail.as_slice() {
            return Err(format!(
                "the SHA-256 trailer does not match the data: the database hashes to {} but the \
                 trailer says {} (corrupted or truncated)",
                hex(&db),
                hex(&self.tail)
            ));
        }
        Ok((hex(&self.whole.finalize()), hex(&db)))
    }
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Checks a snapshot file: size, trailer, bbolt meta pages; reads the revision it holds. `Err`
/// when etcd's restore would refuse the file (or it cannot be read: bad input either way).
pub fn check_file(path: &Path) -> Result<Checked, Failure> {
    check_file_with(path, None)
}

/// [`check_file`] for a file that may be compressed or encrypted (opened with `key`): it is
/// decoded as it is read and the snapshot inside checked the same way.
pub fn check_file_with(path: &Path, key: Option<&Key>) -> Result<Checked, Failure> {
    let refuse = |why: String| Failure::bad_input(format!("snapshot {}: {why}", path.display()));
    // Before opening: opening a FIFO waits for a writer, forever.
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => {
            return Err(refuse(format!("is {}, not a regular file", special_kind(&m.file_type()))));
        }
        Err(e) => return Err(refuse(format!("cannot open it: {e}"))),
        Ok(_) => {}
    }
    let mut file = File::open(path).map_err(|e| refuse(format!("cannot open it: {e}")))?;
    let metadata = file.metadata().map_err(|e| refuse(e.to_string()))?;
    if !metadata.is_file() {
        return Err(refuse("not a regular file".into()));
    }
    let mut head = Vec::with_capacity(8);
    (&mut file).take(8).read_to_end(&mut head).map_err(|e| refuse(format!("cannot read it: {e}")))?;
    file.seek(std::io::SeekFrom::Start(0)).map_err(|e| refuse(format!("cannot read it: {e}")))?;
    if codec::is_encoded(&head) {
        return check_encoded(path, file, key);
    }
    let mut check = TrailerCheck::default();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(|e| refuse(format!("cannot read it: {e}")))?;
        if n == 0 {
            break;
        }
        check.update(&buf[..n]);
    }
    let size = check.len;
    let (sha256, db_sha256) = check.finish().map_err(refuse)?;
    let db = Db::open(&file, size - TRAILER).map_err(refuse)?;
    let revision = match db.max_revision() {
        Ok(revision) => revision,
        Err(why) => {
            tracing::warn!(path = %path.display(), "the revision could not be read: {why}");
            None
        }
    };
    Ok(Checked { size, sha256, db_sha256, revision, content: None })
}

/// A compressed or encrypted snapshot file, decoded as it is read: etcd's trailer checked on the
/// snapshot inside, its revision read from its pages as they pass.
fn check_encoded(path: &Path, file: File, key: Option<&Key>) -> Result<Checked, Failure> {
    let refuse = |why: String| Failure::bad_input(format!("snapshot {}: {why}", path.display()));
    let decoder = Decoder::new(format!("snapshot {}", path.display()), key);
    let mut reader = DecodingReader::new(std::io::BufReader::with_capacity(1 << 20, file), decoder);
    let mut check = TrailerCheck::default();
    let mut scan = RevisionScan::default();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(n) => n,
            // The decoder's own failure names the file already.
            Err(e) => {
                return Err(Failure::from_io(&e).unwrap_or_else(|| refuse(format!("cannot read it: {e}"))));
            }
        };
        if n == 0 {
            break;
        }
        check.update(&buf[..n]);
        scan.update(&buf[..n]);
    }
    let content = reader.encoded().cloned().expect("read to its end");
    let (_, db_sha256) = check.finish().map_err(refuse)?;
    let revision = scan.finish().unwrap_or_else(|why| {
        tracing::warn!(path = %path.display(), "the revision could not be read: {why}");
        None
    });
    Ok(Checked {
        size: content.stored_bytes,
        sha256: content.stored_sha256.clone(),
        db_sha256,
        revision,
        content: Some(content),
    })
}

/// The member to stream from: a healthy voting follower, the most caught-up one (then the lowest
/// id); else the healthy leader. `Err` says why none is healthy.
pub fn choose_member(observed: &[MemberObservation]) -> Result<(&MemberObservation, bool), String> {
    let healthy: Vec<&MemberObservation> =
        observed.iter().filter(|m| !m.is_learner && m.unhealthy_because().is_none()).collect();
    let is_leader = |m: &MemberObservation| m.status.as_ref().is_ok_and(|s| s.leader == m.id);
    let applied = |m: &MemberObservation| m.status.as_ref().map_or(0, |s| s.raft_applied_index);
    let follower =
        healthy.iter().filter(|m| !is_leader(m)).max_by_key(|m| (applied(m), std::cmp::Reverse(m.id)));
    if let Some(follower) = follower {
        return Ok((follower, false));
    }
    if let Some(leader) = healthy.iter().find(|m| is_leader(m)) {
        return Ok((leader, true));
    }
    let why: Vec<String> = observed
        .iter()
        .map(|m| {
            let state = match (m.is_learner, m.unhealthy_because()) {
                (_, Some(why)) => why,
                (true, None) => "a learner".into(),
                (false, None) => "healthy".into(),
            };
            format!("{} ({}): {state}", m.name, m.id_hex())
        })
        .collect();
    Err(format!("no healthy member to take a snapshot from: {}", why.join("; ")))
}

/// The output path, checked before anything is asked of etcd: a file name in a folder that
/// exists, naming nothing yet or a regular file (an earlier snapshot, replaced atomically).
/// A device, a FIFO, a socket or a folder is refused, and so is a symbolic link leading out of
/// the output's folder: the snapshot is only ever written as a regular file in that folder.
/// Returns the folder and the temporary file's path.
pub fn check_output(output: &Path) -> Result<(PathBuf, PathBuf), Failure> {
    let bad = |why: &str| Failure::bad_input(format!("--output {}: {why}", output.display()));
    let name = output
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| !n.is_empty())
        .ok_or_else(|| bad("names no file"))?;
    if output.as_os_str().to_string_lossy().ends_with('/') {
        return Err(bad("names a folder, not a file"));
    }
    let dir = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    match std::fs::metadata(&dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(bad("its folder is not a folder")),
        Err(e) => return Err(bad(&format!("its folder {}: {e}", dir.display()))),
    }
    match std::fs::symlink_metadata(output) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(bad(&e.to_string())),
        Ok(m) if m.file_type().is_symlink() => check_link_stays_in(output, &dir).map_err(|why| bad(&why))?,
        Ok(m) if m.is_dir() => return Err(bad("is a folder")),
        Ok(m) if !m.is_file() => {
            return Err(bad(&format!(
                "is {}, not a regular file: a snapshot is only written as a regular file; give a \
                 file name in a folder on the snapshot volume",
                special_kind(&m.file_type())
            )));
        }
        Ok(_) => {}
    }
    Ok((dir.clone(), dir.join(format!(".{name}.partial"))))
}

/// A symbolic link at the output's name is replaced by the snapshot (never written through);
/// still, one leading out of the folder is a mistake or a trap, and is refused.
fn check_link_stays_in(link: &Path, dir: &Path) -> Result<(), String> {
    let target = std::fs::read_link(link).map_err(|e| format!("cannot read the link: {e}"))?;
    let target = if target.is_absolute() { target } else { dir.join(target) };
    let folder = std::fs::canonicalize(dir).map_err(|e| e.to_string())?;
    let target_folder = target.parent().and_then(|p| std::fs::canonicalize(p).ok());
    if target_folder.as_deref() != Some(folder.as_path()) || target.file_name().is_none() {
        return Err(format!(
            "is a symbolic link to {}, outside its folder {}; give the path of a file in the folder itself",
            target.display(),
            folder.display()
        ));
    }
    match std::fs::symlink_metadata(&target) {
        Ok(m) if !m.is_file() => Err(format!(
            "is a symbolic link to {}, which is {}, not a regular file",
            target.display(),
            special_kind(&m.file_type())
        )),
        _ => Ok(()),
    }
}

/// What kind of file a non-regular one is, in words.
fn special_kind(kind: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_dir() {
        "a folder"
    } else if kind.is_symlink() {
        "a symbolic link"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// The temporary file, removed when dropped unless it was renamed into place.
pub(crate) struct Partial {
    path: PathBuf,
    file: Option<File>,
    pub(crate) kept: bool,
}

impl Partial {
    /// Creates the temporary file anew: whatever is at its name (a file left by a run that was
    /// killed, or a symbolic link planted there) is removed first, and the file is created only
    /// if nothing is there (`O_EXCL`, which never follows a link).
    pub(crate) fn create(path: &Path) -> Result<Self, Failure> {
        let failure = |e: std::io::Error| {
            let message = format!("cannot create {}: {e}", path.display());
            if e.kind() == std::io::ErrorKind::PermissionDenied {
                Failure::bad_input(message)
            } else {
                Failure::retryable(message)
            }
        };
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(failure(e)),
            _ => {}
        }
        let file = OpenOptions::new().write(true).read(true).create_new(true).open(path).map_err(failure)?;
        Ok(Self { path: path.to_owned(), file: Some(file), kept: false })
    }

    pub(crate) fn file(&mut self) -> &mut File {
        self.file.as_mut().expect("open until renamed")
    }
}

impl Drop for Partial {
    fn drop(&mut self) {
        self.file.take();
        if !self.kept {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Retention as a run was asked for it: what to keep of the cluster's snapshots and deltas,
/// and which files are the cluster's snapshots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retention {
    pub retain: u32,
    pub template: NameTemplate,
    /// The value of `{cluster}`, also recorded in a bucket object's metadata.
    pub cluster: String,
    pub policy: Policy,
}

impl Retention {
    /// What decides the cluster's backups in a store at `now` (deltas by their names).
    pub(crate) fn select(
        &self,
        listed: &[(String, u64)],
        keep: &str,
        now: jiff::Timestamp,
    ) -> (Selection, Vec<String>) {
        let delta_time = self.delta_time();
        self.scope(&delta_time, now).select(listed, keep)
    }

    /// Lists `folder`, deletes what the policy keeps not (`keep` stays) and says what it did.
    fn apply_in(&self, folder: &Path, keep: &str, now: jiff::Timestamp) -> retention::Applied {
        let delta_time = self.delta_time();
        retention::apply(folder, &self.scope(&delta_time, now), keep)
    }

    fn scope<'a>(
        &'a self,
        delta_time: &'a dyn Fn(&str) -> Option<jiff::Timestamp>,
        now: jiff::Timestamp,
    ) -> retention::Scope<'a> {
        retention::Scope { template: &self.template, delta_time, policy: &self.policy, now }
    }

    /// The time of one of the cluster's deltas, by its name; `None` for any other name.
    fn delta_time(&self) -> impl Fn(&str) -> Option<jiff::Timestamp> + '_ {
        |name: &str| DeltaName::parse(&self.cluster, name).map(|delta| delta.time)
    }

    /// The policy's rules in a few words, e.g. `keep 5, tiers 1h:7d, deltas for 1d`.
    pub(crate) fn describe(&self) -> String {
        let policy = &self.policy;
        let mut words = vec![format!("keep {}", policy.keep_last)];
        if let Some(within) = policy.keep_within {
            words.push(format!("every one of the last {within:#}"));
        }
        for tier in &policy.tiers {
            words.push(format!("one per {:#} for {:#}", tier.every, tier.keep_for));
        }
        if let Some(within) = policy.keep_deltas_for {
            words.push(format!("deltas for {within:#}"));
        }
        if let Some(bytes) = policy.max_total_bytes {
            words.push(format!("at most {}", bytes_and_mib(bytes)));
        }
        words.join(", ")
    }
}

/// `N bytes (M MiB)`.
fn bytes_and_mib(bytes: u64) -> String {
    format!("{bytes} bytes ({:.2} MiB)", mib(bytes))
}

/// The retention flags beyond `--retain` as a policy, each checked: `Err` names the flag.
fn retention_policy(args: &SnapshotArgs, retain: u32) -> Result<Policy, Failure> {
    let duration = |flag: &str, text: &str| {
        groundskeeper_stores::duration::parse(text)
            .map_err(|why| Failure::bad_input(format!("{flag}: {why}")))
    };
    let tiers = args
        .keep_tiers
        .iter()
        .map(|tier| {
            let (every, keep_for) = tier.split_once(':').ok_or_else(|| {
                Failure::bad_input(format!("--keep-tier {tier:?} is not EVERY:FOR (e.g. 1h:7d)"))
            })?;
            Ok(Tier { every: duration("--keep-tier", every)?, keep_for: duration("--keep-tier", keep_for)? })
        })
        .collect::<Result<Vec<_>, Failure>>()?;
    let policy = Policy {
        keep_last: retain,
        keep_within: args.keep_within.as_deref().map(|t| duration("--keep-within", t)).transpose()?,
        tiers,
        keep_deltas_for: args
            .keep_deltas_for
            .as_deref()
            .map(|t| duration("--keep-deltas-for", t))
            .transpose()?,
        max_total_bytes: args.max_total_bytes,
    };
    policy.check().map_err(|(rule, why)| {
        let flag = match rule.as_str() {
            "keepLast" => "--retain",
            "keepWithin" => "--keep-within",
            "keepDeltasFor" => "--keep-deltas-for",
            "maxTotalSize" => "--max-total-bytes",
            _ => "--keep-tier",
        };
        Failure::bad_input(format!("{flag}: {why}"))
    })?;
    Ok(policy)
}

/// Where a snapshot goes.
#[derive(Debug, Clone, PartialEq)]
pub enum Destination {
    File(PathBuf),
    Object { bucket: BucketLocation, name: String },
}

impl Destination {
    /// The file's or object's name, as retention's template must give it.
    fn name(&self) -> &str {
        match self {
            Destination::File(path) => path.file_name().and_then(|n| n.to_str()).unwrap_or_default(),
            Destination::Object { name, .. } => name,
        }
    }

    /// The file's path or the object's URL, for the result.
    pub fn describe(&self) -> String {
        match self {
            Destination::File(path) => path.display().to_string(),
            Destination::Object { bucket, name } => format!("{}/{name}", bucket.url.trim_end_matches('/')),
        }
    }
}

/// `KEY=VALUE` options as pairs; one without `=` keeps an empty value (refused when checked).
pub(crate) fn option_pairs(options: &[String]) -> Vec<(String, String)> {
    options
        .iter()
        .map(|option| match option.split_once('=') {
            Some((key, value)) => (key.to_owned(), value.to_owned()),
            None => (option.clone(), String::new()),
        })
        .collect()
}

/// Refuses an option that is not `KEY=VALUE`, naming its flag.
pub(crate) fn check_options(flag: &str, options: &[String]) -> Result<(), Failure> {
    match options.iter().find(|o| o.split_once('=').is_none_or(|(k, _)| k.is_empty())) {
        Some(option) => Err(Failure::bad_input(format!("{flag} {option:?} is not KEY=VALUE"))),
        None => Ok(()),
    }
}

impl SnapshotArgs {
    /// The bucket `--to` names, with its options and credentials folder.
    pub fn bucket_location(&self) -> Option<BucketLocation> {
        Some(BucketLocation {
            url: self.to.clone()?,
            options: option_pairs(&self.to_options),
            credentials_dir: self.to_credentials.as_ref().map(|p| p.to_string_lossy().into_owned()),
        })
    }

    /// Where the snapshot goes: `--output`, or `--to` and `--object`.
    pub fn destination(&self) -> Result<Destination, Failure> {
        // clap lets a bucket's flags through beside --output (it conflicts with --to): refused here.
        if self.to.is_none()
            && (self.object.is_some() || !self.to_options.is_empty() || self.to_credentials.is_some())
        {
            return Err(Failure::bad_input(
                "--object, --to-option and --to-credentials are for a bucket and need --to; a file \
                 snapshot takes --output alone",
            ));
        }
        match (self.bucket_location(), &self.object) {
            (Some(bucket), Some(name)) => {
                check_options("--to-option", &self.to_options)?;
                Ok(Destination::Object { bucket, name: name.clone() })
            }
            _ => Ok(Destination::File(self.output.clone().unwrap_or_default())),
        }
    }

    /// `--retain` with its template and cluster, checked; `--output` must be one of the
    /// template's names, or retention would not count the new snapshot as the cluster's.
    pub fn retention(&self) -> Result<Option<Retention>, Failure> {
        let (Some(retain), Some(template), Some(cluster)) =
            (self.retain, &self.file_name_template, &self.cluster)
        else {
            return Ok(None);
        };
        let template = NameTemplate::parse(template, cluster)
            .map_err(|why| Failure::bad_input(format!("--file-name-template / --cluster: {why}")))?;
        let destination = self.destination()?;
        let name = destination.name();
        if !template.is_snapshot_name(name) {
            let flag = match destination {
                Destination::File(_) => "--output",
                Destination::Object { .. } => "--object",
            };
            return Err(Failure::bad_input(format!(
                "{flag} {}: {name:?} is not a name --file-name-template {:?} gives cluster {cluster:?}, \
                 so retention would not count it as one of the cluster's snapshots",
                destination.describe(),
                self.file_name_template.as_deref().unwrap_or_default(),
            )));
        }
        let policy = retention_policy(self, retain)?;
        if policy != Policy::keep_last(retain) && !template.has_time() {
            return Err(Failure::bad_input(format!(
                "--keep-within, --keep-tier, --keep-deltas-for and --max-total-bytes need {{time}} in \
                 --file-name-template {:?}: without it the snapshots have no time to keep them by",
                self.file_name_template.as_deref().unwrap_or_default()
            )));
        }
        Ok(Some(Retention { retain, template, cluster: cluster.clone(), policy }))
    }
}

/// Streams a snapshot into a file (atomically) or a bucket's object (completed only once whole);
/// stops at once on a stop. Then, when asked, deletes the cluster's older snapshots in the same
/// folder or under the same prefix (see [`retention`]).
pub async fn run_snapshot(
    connection: &Connection,
    destination: &Destination,
    retention: Option<&Retention>,
    encoding: &Encoding,
    stop: &StopSignal,
) -> JobResult {
    let clock = RunClock::start();
    let mut report = SnapshotReport {
        path: destination.describe(),
        retain: retention.map(|r| r.retain),
        ..SnapshotReport::default()
    };
    let outcome = match destination {
        Destination::File(output) => {
            let outcome = tokio::select! {
                outcome = snapshot_with(connection, output, encoding, &mut report) => outcome,
                stop = stop.requested() => Err(stop.failure(
                    "the snapshot stream was abandoned and its temporary file removed",
                )),
            };
            // Only once the new snapshot is in place and checked: a failed run deletes nothing.
            if outcome.is_ok()
                && let Some(retention) = retention
            {
                apply_retention(output, retention, &mut report);
            }
            outcome
        }
        // The upload watches for a stop itself: it must be aborted, not merely dropped.
        Destination::Object { bucket, name } => {
            to_bucket::snapshot(connection, bucket, name, retention, encoding, &mut report, stop).await
        }
    };
    let failure = outcome.err();
    let mut result = clock.finish(Report::Snapshot(report.clone()), Outcome::Succeeded, failure);
    if result.outcome == Outcome::Failed {
        result.stopped_by = stop.get().map(|s| s.signal.to_owned());
    }
    if result.message.is_none() {
        result.message = Some(
            format!(
                "snapshot of revision {} from {} ({}) {} {}: {}, sha256 {}, {}",
                report.revision.map_or_else(|| "unknown".to_owned(), |r| r.to_string()),
                report.member.as_deref().unwrap_or_default(),
                if report.from_leader { "the leader: no healthy follower" } else { "a follower" },
                match destination {
                    Destination::File(_) => "written to",
                    Destination::Object { .. } => "uploaded to",
                },
                report.path,
                describe_size(report.size_bytes, &report.stored),
                report.sha256.as_deref().unwrap_or_default(),
                match report.keys {
                    Some(keys) => format!("{keys} keys"),
                    None => "keys not counted".to_owned(),
                },
            ) + &describe_retention(&report, retention),
        );
    }
    result
}

fn apply_retention(output: &Path, retention: &Retention, report: &mut SnapshotReport) {
    let folder = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let keep = output.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let applied = retention.apply_in(folder, keep, jiff::Timestamp::now());
    let rules = retention.describe();
    for name in applied.deleted.iter().chain(&applied.deleted_deltas) {
        tracing::info!(file = %name, retention = %rules, "deleted an old backup of the cluster");
    }
    for error in &applied.errors {
        tracing::warn!("retention: {error}");
    }
    report.deleted_count = applied.deleted.len() as u32;
    report.deleted = applied.deleted;
    report.deleted_deltas_count = applied.deleted_deltas.len() as u32;
    report.deleted_deltas = applied.deleted_deltas;
    report.kept_bytes = Some(applied.kept_bytes);
    report.over_limit_bytes = applied.over_limit;
    report.removed_partial_files = applied.removed_partials;
    report.retention_errors = applied.errors;
}

/// `; retention (keep N, …): deleted …, N MiB kept`, or nothing when the run was not asked to
/// delete.
fn describe_retention(report: &SnapshotReport, retention: Option<&Retention>) -> String {
    let Some(retention) = retention else {
        return String::new();
    };
    let deleted = match (report.deleted_count, report.deleted_deltas_count) {
        (0, 0) => "nothing to delete".to_owned(),
        (fulls, 0) => format!("deleted {fulls} older snapshot(s): {}", a_few(&report.deleted, fulls)),
        (fulls, deltas) => format!(
            "deleted {fulls} older snapshot(s){} and {deltas} delta(s) no rule keeps: {}",
            if fulls == 0 { String::new() } else { format!(" ({})", a_few(&report.deleted, fulls)) },
            a_few(&report.deleted_deltas, deltas)
        ),
    };
    let kept = report.kept_bytes.map(|bytes| format!("; {} kept", bytes_and_mib(bytes))).unwrap_or_default();
    let over = match report.over_limit_bytes {
        Some(bytes) => format!(
            "; the newest full snapshot and its deltas alone weigh {}, over the limit: raise it, or \
             take full snapshots more often so that chains are shorter",
            bytes_and_mib(bytes)
        ),
        None => String::new(),
    };
    let partials = match report.removed_partial_files.len() {
        0 => String::new(),
        n => format!(", removed {n} temporary file(s) of interrupted runs"),
    };
    let errors = match report.retention_errors.as_slice() {
        [] => String::new(),
        errors => format!("; could not delete: {} (delete them by hand)", errors.join("; ")),
    };
    format!("; retention ({}): {deleted}{partials}{kept}{over}{errors}", retention.describe())
}

/// A few of `names` (all of them are in the report), and how many more.
fn a_few(names: &[String], count: u32) -> String {
    const NAMED: usize = 5;
    let shown = &names[..names.len().min(NAMED)];
    match (count as usize).saturating_sub(shown.len()) {
        0 => shown.join(", "),
        more => format!("{} and {more} more", shown.join(", ")),
    }
}

/// A snapshot stream opened on the chosen member.
pub(crate) struct Source {
    pub client: etcd_client::Client,
    pub stream: etcd_client::SnapshotStreaming,
    /// The member's name, for messages.
    pub member: String,
    /// See [`stream_limit`].
    pub limit: u64,
}

impl Source {
    /// The next piece of the stream (`None` at its end), or why there is none: a member that
    /// sent nothing for [`STALL_TIMEOUT`], a broken stream, or more than [`stream_limit`].
    pub(crate) async fn next(
        &mut self,
        received: u64,
    ) -> Result<Option<etcd_client::SnapshotResponse>, Failure> {
        let message = tokio::time::timeout(STALL_TIMEOUT, self.stream.message())
            .await
            .map_err(|_| {
                Failure::retryable(format!(
                    "{} sent nothing for {}s after {received} bytes",
                    self.member,
                    STALL_TIMEOUT.as_secs(),
                ))
            })?
            .map_err(|e| {
                Failure::retryable(format!(
                    "the snapshot stream from {} broke after {received} bytes: {e}",
                    self.member
                ))
            })?;
        if let Some(message) = &message
            && received + message.blob().len() as u64 > self.limit
        {
            return Err(Failure::retryable(format!(
                "the snapshot stream from {} passed {} bytes ({} MiB), more than its database \
                 could hold; stopped, nothing kept",
                self.member,
                self.limit,
                mib(self.limit)
            )));
        }
        Ok(message)
    }

    /// The number of keys at `revision` on the member the snapshot came from (a serializable
    /// count: the member answers itself); `None`, with a warning, when it cannot say (the
    /// revision was compacted meanwhile, or the member stopped answering).
    pub(crate) async fn count_keys(&mut self, revision: Option<i64>) -> Option<i64> {
        let revision = revision?;
        let options = etcd_client::GetOptions::new()
            .with_all_keys()
            .with_count_only()
            .with_revision(revision)
            .with_serializable();
        match self.client.get(Vec::<u8>::new(), Some(options)).await {
            Ok(response) => Some(response.count()),
            Err(e) => {
                tracing::warn!(member = %self.member, revision, "the keys at the snapshot's revision could not be counted: {e}");
                None
            }
        }
    }
}

/// Chooses the member (a healthy follower when there is one), records it in the report, and
/// opens its snapshot stream.
pub(crate) async fn open_stream(
    connection: &Connection,
    report: &mut SnapshotReport,
) -> Result<Source, Failure> {
    let cluster = Cluster::discover(connection.clone()).await?;
    let observed = cluster.observe().await;
    let (member, from_leader) = choose_member(&observed).map_err(Failure::retryable)?;
    report.member = Some(member.name.clone());
    report.member_id = Some(member.id_hex());
    report.from_leader = from_leader;
    let limit = stream_limit(member.status.as_ref().map_or(0, |s| s.db_size));
    let url = cluster
        .member(member.id)
        .and_then(|m| m.url.clone())
        .ok_or_else(|| Failure::retryable(format!("member {} advertises no client URL", member.name)))?;
    tracing::info!(member = %member.name, url, from_leader, to = %report.path, "streaming a snapshot");
    // No request timeout: the stream lasts as long as the database takes to send. A stall is
    // caught chunk by chunk instead.
    let mut client = connection
        .client(&url, None)
        .await
        .map_err(|e| Failure::retryable(format!("cannot connect to {} ({url}): {e}", member.name)))?;
    let stream = client
        .snapshot()
        .await
        .map_err(|e| Failure::retryable(format!("{} refused the snapshot: {e}", member.name)))?;
    Ok(Source { client, stream, member: member.name.clone(), limit })
}

async fn snapshot_with(
    connection: &Connection,
    output: &Path,
    encoding: &Encoding,
    report: &mut SnapshotReport,
) -> Result<(), Failure> {
    let (dir, partial_path) = check_output(output)?;
    let mut source = open_stream(connection, report).await?;
    let started = Instant::now();
    let mut partial = Partial::create(&partial_path)?;
    let mut check = TrailerCheck::default();
    let mut encoder = encoding.encoder()?;
    let mut last_log = Instant::now();
    while let Some(message) = source.next(check.len).await? {
        let blob = message.blob();
        let stored = encoder.push(blob)?;
        partial.file().write_all(&stored).map_err(|e| write_failure(&partial_path, e))?;
        check.update(blob);
        if last_log.elapsed() > Duration::from_secs(10) {
            tracing::info!(bytes = check.len, remaining = message.remaining_bytes(), "streaming");
            last_log = Instant::now();
        }
    }
    let (last, encoded) = encoder.finish()?;
    partial.file().write_all(&last).map_err(|e| write_failure(&partial_path, e))?;
    let (_, db_sha256) = check.finish().map_err(|why| {
        Failure::retryable(format!("the snapshot from {} is not whole: {why}", source.member))
    })?;
    partial.file().sync_all().map_err(|e| write_failure(&partial_path, e))?;
    // What reached the disk, read back (and decoded): the same bytes, and a database etcd can
    // open.
    let on_disk = check_file_with(&partial_path, encoding.key.as_ref()).map_err(|f| {
        Failure::retryable(format!("the file written does not read back whole: {}", f.message))
    })?;
    let (sha256, streamed) = (encoded.stored_sha256.clone(), encoded.stored_bytes);
    let content_back = on_disk.content.as_ref().map_or(&on_disk.sha256, |c| &c.content_sha256);
    if on_disk.sha256 != sha256 || on_disk.size != streamed || *content_back != encoded.content_sha256 {
        return Err(Failure::retryable(format!(
            "{} reads back as {} bytes with sha256 {}, not the {streamed} bytes written ({sha256})",
            partial_path.display(),
            on_disk.size,
            on_disk.sha256
        )));
    }
    std::fs::rename(&partial_path, output).map_err(|e| {
        Failure::retryable(format!("cannot rename {} to {}: {e}", partial_path.display(), output.display()))
    })?;
    partial.kept = true;
    File::open(&dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Failure::retryable(format!("cannot fsync the folder {}: {e}", dir.display())))?;
    report.size_bytes = streamed;
    report.size_mib = mib(streamed);
    report.revision = on_disk.revision;
    report.sha256 = Some(sha256);
    report.db_sha256 = Some(db_sha256);
    report.stored = encoded.stored_as();
    report.stream_duration_ms = started.elapsed().as_millis() as u64;
    report.keys = source.count_keys(on_disk.revision).await;
    Ok(())
}

/// `N bytes (M MiB)`, and for an encoded object how it is stored and what it holds:
/// `N bytes (M MiB) zstd+aes-256-gcm (key id K) of C bytes (D MiB), 4.1 times smaller`.
pub(crate) fn describe_size(bytes: u64, stored: &groundskeeper_protocol::result::StoredAs) -> String {
    let plain = format!("{bytes} bytes ({:.2} MiB)", mib(bytes));
    let (Some(encoding), Some(content)) = (&stored.encoding, stored.content_bytes) else { return plain };
    let key = stored.key_id.as_ref().map(|id| format!(" (key id {id})")).unwrap_or_default();
    let ratio = match bytes {
        0 => String::new(),
        _ => format!(", {:.1} times smaller", content as f64 / bytes as f64),
    };
    format!("{plain} {encoding}{key} of {content} bytes ({:.2} MiB){ratio}", mib(content))
}

fn write_failure(path: &Path, error: std::io::Error) -> Failure {
    Failure::retryable(format!("cannot write {}: {error}", path.display()))
}

/// `snapshot verify FILE`: the check as a result.
pub fn verify(file: &Path, key: &codec::KeyArgs) -> JobResult {
    let clock = RunClock::start();
    let mut report =
        SnapshotReport { path: file.display().to_string(), verify_only: true, ..SnapshotReport::default() };
    match key.key().and_then(|key| check_file_with(file, key.as_ref())) {
        Ok(checked) => {
            report.size_bytes = checked.size;
            report.size_mib = mib(checked.size);
            report.revision = checked.revision;
            report.sha256 = Some(checked.sha256.clone());
            report.db_sha256 = Some(checked.db_sha256);
            report.stored = checked.content.as_ref().map(Encoded::stored_as).unwrap_or_default();
            let mut result = clock.finish(Report::Snapshot(report.clone()), Outcome::Succeeded, None);
            result.message = Some(format!(
                "snapshot {}: {}, revision {}, etcd's SHA-256 trailer matches; sha256 {}",
                file.display(),
                describe_size(checked.size, &report.stored),
                checked.revision.map_or_else(|| "unknown".to_owned(), |r| r.to_string()),
                checked.sha256
            ));
            result
        }
        Err(failure) => {
            report.size_bytes = std::fs::metadata(file).map(|m| m.len()).unwrap_or_default();
            report.size_mib = mib(report.size_bytes);
            clock.finish(Report::Snapshot(report), Outcome::Failed, Some(failure))
        }
    }
}

/// `snapshot decode FILE --output PLAIN`: the file decoded, then the plain file checked; the
/// result describes the plain file, with how `FILE` was stored.
pub fn decode(args: &DecodeArgs) -> JobResult {
    let decoded = (|| {
        if args.output == args.file {
            return Err(Failure::bad_input("--output: give another file than the one decoded"));
        }
        let key = args.key.key()?;
        let content = codec::decode_file(&args.file, &args.output, key.as_ref())?;
        Ok(content)
    })();
    match decoded {
        Ok(content) => {
            let mut result = verify(&args.output, &codec::KeyArgs::default());
            if let Report::Snapshot(report) = &mut result.report {
                report.stored = content.stored_as();
            }
            if result.error.is_none() {
                result.message = Some(format!(
                    "{} ({}) decoded into {}: {}",
                    args.file.display(),
                    describe_size(content.stored_bytes, &content.stored_as()),
                    args.output.display(),
                    result.message.unwrap_or_default()
                ));
            } else {
                let _ = std::fs::remove_file(&args.output);
            }
            result
        }
        Err(failure) => {
            let report = SnapshotReport {
                path: args.file.display().to_string(),
                verify_only: true,
                ..Default::default()
            };
            RunClock::start().finish(Report::Snapshot(report), Outcome::Failed, Some(failure))
        }
    }
}

/// `groundskeeper-job snapshot`: runs, reports, and returns the exit code.
pub fn main(args: SnapshotArgs) -> i32 {
    let checked = match &args.check {
        Some(SnapshotCheck::Verify(verify_args)) => {
            Some((verify(&verify_args.file, &verify_args.key), verify_args.result_file.clone()))
        }
        Some(SnapshotCheck::Decode(decode_args)) => {
            Some((decode(decode_args), decode_args.result_file.clone()))
        }
        None => None,
    };
    if let Some((result, result_file)) = checked {
        match &result_file {
            Some(path) => run::report(&result, path),
            None => println!("{}", serde_json::to_string_pretty(&result).expect("results always serialise")),
        }
        if let Some(error) = &result.error {
            eprintln!("error: {}", error.message);
        }
        return run::exit_code(&result);
    }
    let clock = RunClock::start();
    let prepared = (|| {
        let grace =
            run::check_wait("--grace-period-seconds", Duration::from_secs(args.grace_period_seconds))?;
        let destination = args.destination()?;
        if let Destination::File(output) = &destination {
            check_output(output)?;
        }
        let retention = args.retention()?;
        let encoding = args.encoding.encoding()?;
        Ok::<_, Failure>((args.connection.connection()?, grace, destination, retention, encoding))
    })();
    let result = match prepared {
        Ok((connection, grace, destination, retention, encoding)) => runtime().block_on(async {
            let stop = StopSignal::listen_or_warn(grace);
            run_snapshot(&connection, &destination, retention.as_ref(), &encoding, &stop).await
        }),
        Err(failure) => clock.finish(
            Report::Snapshot(SnapshotReport {
                path: args.destination().map(|d| d.describe()).unwrap_or_default(),
                ..SnapshotReport::default()
            }),
            Outcome::Failed,
            Some(failure),
        ),
    };
    run::report(&result, &args.result_file);
    run::exit_code(&result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use groundskeeper_protocol::result::ErrorKind;
    use groundskeeper_stores::etcd::plan::MemberStatus;

    fn stream_of(db: &[u8]) -> Vec<u8> {
        let mut bytes = db.to_vec();
        bytes.extend_from_slice(&Sha256::digest(db));
        bytes
    }

    #[test]
    fn a_stream_may_bring_twice_the_db_and_64_mib_more() {
        const MIB: u64 = 1024 * 1024;
        for (db_size, limit) in
            [(0, 64 * MIB), (-1, 64 * MIB), (100 * MIB as i64, 264 * MIB), (i64::MAX, u64::MAX)]
        {
            assert_eq!(stream_limit(db_size), limit, "{db_size}");
        }
    }

    #[test]
    fn the_trailer_is_checked_whatever_the_chunking() {
        let db: Vec<u8> = (0..4096u32).map(|i| (i * 7) as u8).collect();
        let stream = stream_of(&db);
        for chunk in [1, 5, 31, 32, 33, 1000, 5000] {
            let mut check = TrailerCheck::default();
            stream.chunks(chunk).for_each(|c| check.update(c));
            let (whole, db_hash) = check.finish().unwrap_or_else(|e| panic!("{chunk}: {e}"));
            assert_eq!(whole, hex(&Sha256::digest(&stream)));
            assert_eq!(db_hash, hex(&Sha256::digest(&db)));
        }
        let mut flipped = stream.clone();
        flipped[100] ^= 1;
        let mut check = TrailerCheck::default();
        check.update(&flipped);
        assert!(check.finish().unwrap_err().contains("does not match"));
        let mut check = TrailerCheck::default();
        check.update(&stream[..stream.len() - 1]);
        assert!(check.finish().unwrap_err().contains("not the size of a snapshot"));
    }

    fn member(id: u64, leader: u64, applied: u64, healthy: bool) -> MemberObservation {
        MemberObservation {
            id,
            name: format!("m{id}"),
            is_learner: false,
            status: if healthy {
                Ok(MemberStatus {
                    db_size: 1,
                    db_size_in_use: 1,
                    leader,
                    raft_term: 2,
                    raft_index: applied,
                    raft_applied_index: applied,
                    errors: vec![],
                    ..MemberStatus::default()
                })
            } else {
                Err("connection refused".into())
            },
        }
    }

    #[test]
    fn a_caught_up_follower_is_chosen_the_leader_only_when_alone() {
        let pick = |members: &[MemberObservation]| choose_member(members).map(|(m, leader)| (m.id, leader));
        // Leader 1; followers 2 (behind) and 3.
        let members = [member(1, 1, 10, true), member(2, 1, 8, true), member(3, 1, 10, true)];
        assert_eq!(pick(&members), Ok((3, false)));
        // Equal progress: the lowest id.
        let members = [member(1, 1, 10, true), member(2, 1, 10, true), member(3, 1, 10, true)];
        assert_eq!(pick(&members), Ok((2, false)));
        // Followers down: the leader, and the report says so.
        let members = [member(1, 1, 10, true), member(2, 1, 8, false), member(3, 1, 10, false)];
        assert_eq!(pick(&members), Ok((1, true)));
        // A learner is never chosen.
        let mut learner = member(2, 1, 10, true);
        learner.is_learner = true;
        assert_eq!(pick(&[member(1, 1, 10, true), learner]), Ok((1, true)));
        // Nobody healthy.
        let why = pick(&[member(1, 1, 10, false), member(2, 0, 10, true)]).unwrap_err();
        assert!(why.contains("m1 (1): unreachable"), "{why}");
        assert!(why.contains("m2 (2): sees no leader"), "{why}");
    }

    #[test]
    fn output_paths_are_checked_before_anything_runs() {
        let dir = tempfile::tempdir().unwrap();
        let (folder, partial) = check_output(&dir.path().join("s.db")).unwrap();
        assert_eq!(folder, dir.path());
        assert_eq!(partial, dir.path().join(".s.db.partial"));
        for bad in [
            dir.path().join("missing/s.db"),
            dir.path().to_owned(),
            PathBuf::from(format!("{}/", dir.path().join("x").display())),
            PathBuf::from(""),
        ] {
            let failure = check_output(&bad).unwrap_err();
            assert_eq!(failure.kind, ErrorKind::BadInput, "{bad:?}: {}", failure.message);
        }
    }

    #[test]
    fn a_missing_or_short_file_is_refused_as_bad_input() {
        let dir = tempfile::tempdir().unwrap();
        let result = verify(&dir.path().join("nothing.db"), &Default::default());
        assert_eq!(run::exit_code(&result), groundskeeper_protocol::exit::BAD_INPUT);
        let short = dir.path().join("short.db");
        std::fs::write(&short, stream_of(&[0u8; 512])).unwrap();
        let result = verify(&short, &Default::default());
        // The trailer matches, but it is no bbolt file.
        assert_eq!(run::exit_code(&result), groundskeeper_protocol::exit::BAD_INPUT);
        assert!(result.message.unwrap().contains("not an etcd database"));
    }
}
