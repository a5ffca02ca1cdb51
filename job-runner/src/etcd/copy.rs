//! `groundskeeper-job snapshot-copy`: a cluster's snapshots copied from one store to another
//! (folder → bucket, bucket → bucket, bucket → folder), every object checked on both sides.
//!
//! For each of the cluster's snapshots in the source (the names its file name template gives it;
//! `--only` narrows them), oldest first:
//! * its SHA-256 is known before anything is written: a folder's file is checked as `snapshot
//!   verify` checks it (which also reads its revision); a bucket's object carries it in its
//!   metadata (one written by hand without it is hashed as it streams, and the copy records it);
//! * one already in the destination with the same size and SHA-256 is left as it is, so a run
//!   again copies nothing twice and a run after a killed one finishes the rest; one under the same
//!   name with other bytes is never overwritten (it is reported, the others are copied);
//! * otherwise the bytes stream from source to destination (no full copy in memory nor on disk),
//!   hashed and checked against etcd's trailer on the way: a bucket's multipart upload is
//!   completed, and a folder's `.NAME.partial` renamed into place, only when they match what the
//!   source recorded; anything else aborts it, so nothing under the name is ever incomplete;
//! * then the destination is read back and hashed: a copy whose bytes differ is deleted again.
//!
//! A bucket object gets the source's metadata (`sha256`, `revision`, `keys`, `cluster`,
//! `member`), completed with what the copy learnt (the SHA-256, and the revision read from a
//! folder's file). A run killed outright leaves at most one incomplete upload (no object) or one
//! hidden `.NAME.partial` file, which the next run replaces.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use groundskeeper_protocol::operation::SnapshotStore;
use groundskeeper_protocol::result::{CopiedObject, CopyReport, ErrorKind, mib};
use groundskeeper_protocol::{JobResult, Outcome, Report};
use groundskeeper_stores::etcd::retention::{self, NameTemplate};
use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;

use super::bolt_stream::RevisionScan;
use super::bucket::{self, Bucket, CLEAN_UP_WAIT, Upload};
use super::codec;
use super::compact::runtime;
use super::etcd_tools::{FromArgs, ToArgs, is_not_writable, sync_dir};
use super::snapshot::{TrailerCheck, check_file_with, hex};
use crate::run::{self, Failure, RunClock, StopSignal};

/// Pieces read from a file at a time.
const FILE_CHUNK: usize = 1024 * 1024;
/// How often progress is logged while an object streams.
const PROGRESS_EVERY: Duration = Duration::from_secs(10);

#[derive(clap::Args, Debug, Clone)]
pub struct CopyArgs {
    #[command(flatten)]
    pub from: FromArgs,
    #[command(flatten)]
    pub to: ToArgs,
    /// The template the cluster's snapshots are named by (`{cluster}`, `{time}`): only objects
    /// whose whole name it gives the cluster are copied.
    #[arg(long)]
    pub file_name_template: String,
    /// The cluster's name, as `{cluster}` in --file-name-template.
    #[arg(long)]
    pub cluster: String,
    /// Only this snapshot (repeatable); default: every snapshot of the cluster in the source.
    #[arg(long = "only", value_name = "NAME")]
    pub only: Vec<String>,
    /// Where to write the result JSON.
    #[arg(long, default_value = run::DEFAULT_RESULT_FILE)]
    pub result_file: PathBuf,
    /// The pod's terminationGracePeriodSeconds. A stop aborts the object in flight at once.
    #[arg(long, default_value_t = groundskeeper_protocol::exit::TERMINATION_GRACE_PERIOD_SECONDS)]
    pub grace_period_seconds: u64,
}

/// A copy as asked for, checked.
#[derive(Debug, Clone)]
pub(crate) struct CopyJob {
    pub from: SnapshotStore,
    pub to: SnapshotStore,
    pub template: NameTemplate,
    pub only: Vec<String>,
}

impl CopyArgs {
    /// Everything that can be checked before a store is asked anything: bad input when wrong.
    pub(crate) fn copy_job(&self) -> Result<CopyJob, Failure> {
        let template = NameTemplate::parse(&self.file_name_template, &self.cluster)
            .map_err(|why| Failure::bad_input(format!("--file-name-template / --cluster: {why}")))?;
        let from = self.from.checked_store()?;
        let to = self.to.checked_store()?;
        if same_place(&from, &to) {
            return Err(Failure::bad_input(format!(
                "--from and --to are the same place ({}): a copy needs another store",
                store_text(&from)
            )));
        }
        for name in &self.only {
            if !template.is_snapshot_name(name) {
                return Err(Failure::bad_input(format!(
                    "--only {name:?} is not a name --file-name-template {:?} gives cluster {:?}",
                    self.file_name_template, self.cluster
                )));
            }
        }
        Ok(CopyJob { from, to, template, only: self.only.clone() })
    }
}

fn same_place(a: &SnapshotStore, b: &SnapshotStore) -> bool {
    match (a, b) {
        (SnapshotStore::Folder(a), SnapshotStore::Folder(b)) => {
            Path::new(a.trim_end_matches('/')) == Path::new(b.trim_end_matches('/'))
        }
        (SnapshotStore::Bucket(a), SnapshotStore::Bucket(b)) => {
            a.url.trim_end_matches('/') == b.url.trim_end_matches('/') && a.options == b.options
        }
        _ => false,
    }
}

/// A store as the report names it: the folder's path or the bucket's URL.
fn store_text(store: &SnapshotStore) -> String {
    match store {
        SnapshotStore::Folder(path) => path.trim_end_matches('/').to_owned(),
        SnapshotStore::Bucket(bucket) => bucket.url.trim_end_matches('/').to_owned(),
    }
}

/// An opened store.
enum Side {
    Folder(PathBuf),
    Bucket(Box<Bucket>),
}

impl Side {
    fn open(store: &SnapshotStore) -> Result<Self, Failure> {
        match store {
            SnapshotStore::Folder(path) => Ok(Side::Folder(PathBuf::from(path))),
            SnapshotStore::Bucket(location) => Ok(Side::Bucket(Box::new(Bucket::open(location)?))),
        }
    }

    /// Where object `name` is, for messages.
    fn describe(&self, name: &str) -> String {
        match self {
            Side::Folder(dir) => dir.join(name).display().to_string(),
            Side::Bucket(bucket) => bucket.object_url(name),
        }
    }

    /// A folder must be one; a bucket must exist and take the credentials.
    async fn check(&self, flag: &str) -> Result<(), Failure> {
        match self {
            Side::Folder(dir) => match std::fs::metadata(dir) {
                Ok(m) if m.is_dir() => Ok(()),
                Ok(_) => Err(Failure::bad_input(format!("--{flag} {}: is not a folder", dir.display()))),
                Err(e) => Err(Failure::bad_input(format!(
                    "--{flag} {}: {e}; mount the claim there, or give another folder",
                    dir.display()
                ))),
            },
            Side::Bucket(bucket) => bucket.check_bucket_exists().await,
        }
    }

    /// The cluster's snapshots here, oldest first by the time in their names, with their sizes
    /// (and, in a bucket, their metadata: one HEAD request each).
    async fn snapshots(&self, template: &NameTemplate) -> Result<Vec<Entry>, Failure> {
        match self {
            Side::Folder(dir) => folder_snapshots(dir, template),
            Side::Bucket(bucket) => Ok(bucket
                .list_snapshots(template, true)
                .await?
                .into_iter()
                .map(|s| Entry { name: s.name, size: s.size_bytes, metadata: s.metadata })
                .collect()),
        }
    }

    /// What is under `name` here: its size and the SHA-256 it records (a bucket object's
    /// metadata); `None` when nothing is.
    async fn existing(&self, name: &str) -> Result<Option<(u64, Option<String>)>, Failure> {
        match self {
            Side::Folder(dir) => match std::fs::symlink_metadata(dir.join(name)) {
                Ok(m) if m.is_file() => Ok(Some((m.len(), None))),
                Ok(_) => Err(Failure::bad_input(format!(
                    "{}: is not a regular file; a snapshot cannot be copied there",
                    dir.join(name).display()
                ))),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(Failure::retryable(format!("{}: {e}", dir.join(name).display()))),
            },
            Side::Bucket(bucket) => {
                Ok(bucket.head(name).await?.map(|(size, m)| (size, m.get(bucket::META_SHA256).cloned())))
            }
        }
    }

    /// Starts reading `name`.
    async fn read(&self, name: &str) -> Result<Source<'_>, Failure> {
        match self {
            Side::Folder(dir) => {
                let path = dir.join(name);
                let file = tokio::fs::File::open(&path)
                    .await
                    .map_err(|e| Failure::retryable(format!("cannot open {}: {e}", path.display())))?;
                Ok(Source::File { file, path, buffer: vec![0; FILE_CHUNK] })
            }
            Side::Bucket(bucket) => Ok(Source::Object(bucket.read(name).await?)),
        }
    }

    /// SHA-256 and size of what is under `name`, read whole.
    async fn hash(&self, name: &str, stop: &StopSignal) -> Result<(String, u64), Failure> {
        let mut source = self.read(name).await?;
        let mut hash = Sha256::new();
        let mut size = 0u64;
        loop {
            let chunk = tokio::select! {
                chunk = source.next() => chunk?,
                stop = stop.requested() => return Err(stop.failure("the copy was stopped while it read an object back")),
            };
            let Some(chunk) = chunk else { break };
            hash.update(&chunk);
            size += chunk.len() as u64;
        }
        Ok((hex(&hash.finalize()), size))
    }

    /// Deletes what is under `name` (best effort, bounded), after a copy that did not check out.
    async fn remove(&self, name: &str) {
        match self {
            Side::Folder(dir) => {
                let _ = std::fs::remove_file(dir.join(name));
            }
            Side::Bucket(bucket) => {
                if !matches!(tokio::time::timeout(CLEAN_UP_WAIT, bucket.delete(name)).await, Ok(Ok(()))) {
                    tracing::error!(object = %bucket.object_url(name), "a copy that did not check out could not be deleted: delete it by hand");
                }
            }
        }
    }
}

/// One of the cluster's snapshots in the source.
#[derive(Debug, Clone)]
struct Entry {
    name: String,
    size: u64,
    metadata: BTreeMap<String, String>,
}

fn folder_snapshots(dir: &Path, template: &NameTemplate) -> Result<Vec<Entry>, Failure> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| Failure::bad_input(format!("--from {}: cannot list the folder: {e}", dir.display())))?;
    let mut sizes = BTreeMap::new();
    for entry in entries.filter_map(Result::ok) {
        let Ok(name) = entry.file_name().into_string() else { continue };
        if let Ok(m) = entry.metadata()
            && m.is_file()
        {
            sizes.insert(name, m.len());
        }
    }
    let names: Vec<String> = sizes.keys().cloned().collect();
    // Retention's selection with nothing kept is every snapshot of the cluster, oldest first.
    Ok(retention::select(template, &names, "", 1)
        .delete
        .into_iter()
        .map(|name| Entry { size: sizes[&name], name, metadata: BTreeMap::new() })
        .collect())
}

/// The bytes of an object or a file, piece by piece.
enum Source<'a> {
    File { file: tokio::fs::File, path: PathBuf, buffer: Vec<u8> },
    Object(bucket::Reading<'a>),
}

impl Source<'_> {
    async fn next(&mut self) -> Result<Option<bytes::Bytes>, Failure> {
        match self {
            Source::File { file, path, buffer } => {
                let read = file
                    .read(buffer)
                    .await
                    .map_err(|e| Failure::retryable(format!("cannot read {}: {e}", path.display())))?;
                Ok((read > 0).then(|| bytes::Bytes::copy_from_slice(&buffer[..read])))
            }
            Source::Object(reading) => reading.next().await,
        }
    }
}

/// Where the copy's bytes go until it is whole.
enum Sink<'a> {
    /// `.NAME.partial` in the destination folder, renamed to `NAME` once checked.
    File(PartialFile),
    Upload(Upload<'a>),
}

/// A folder's temporary file, removed when dropped unless renamed into place.
struct PartialFile {
    partial: PathBuf,
    target: PathBuf,
    file: Option<std::fs::File>,
}

impl PartialFile {
    /// Replaces whatever an earlier run left at the temporary name; created with `O_EXCL`, which
    /// never follows a link.
    fn create(dir: &Path, name: &str) -> Result<Self, Failure> {
        let partial = dir.join(format!(".{name}.partial"));
        let failure = |e: std::io::Error| {
            let message = format!("cannot create {}: {e}", partial.display());
            if is_not_writable(&e) { Failure::bad_input(message) } else { Failure::retryable(message) }
        };
        match std::fs::remove_file(&partial) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(failure(e)),
            _ => {}
        }
        let file =
            std::fs::OpenOptions::new().write(true).create_new(true).open(&partial).map_err(failure)?;
        Ok(Self { target: dir.join(name), partial, file: Some(file) })
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), Failure> {
        let file = self.file.as_mut().expect("open until renamed");
        file.write_all(bytes).map_err(|e| self.write_failure(e))
    }

    fn write_failure(&self, e: std::io::Error) -> Failure {
        let message = format!("cannot write {}: {e}", self.partial.display());
        if is_not_writable(&e) { Failure::bad_input(message) } else { Failure::retryable(message) }
    }

    /// fsync, rename into place, fsync the folder.
    fn finish(mut self) -> Result<(), Failure> {
        let file = self.file.take().expect("open until renamed");
        file.sync_all().map_err(|e| self.write_failure(e))?;
        drop(file);
        std::fs::rename(&self.partial, &self.target).map_err(|e| self.write_failure(e))?;
        if let Some(dir) = self.target.parent() {
            sync_dir(dir).map_err(|e| self.write_failure(e))?;
        }
        Ok(())
    }
}

impl Drop for PartialFile {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.partial);
        }
    }
}

impl Sink<'_> {
    async fn write(&mut self, bytes: &[u8]) -> Result<(), Failure> {
        match self {
            Sink::File(file) => file.write(bytes),
            Sink::Upload(upload) => upload.write(bytes).await,
        }
    }

    /// Puts the copy in place under its name: the file renamed, or the upload published with
    /// `metadata` (see [`bucket::Staged::publish`]).
    async fn complete(self, size: u64, metadata: &BTreeMap<String, String>) -> Result<(), Failure> {
        match self {
            Sink::File(file) => file.finish(),
            Sink::Upload(upload) => upload.complete().await?.publish(size, metadata).await,
        }
    }

    /// Gives the copy up: the temporary file removed, or the upload aborted (bounded: the store
    /// may be what failed; an upload left incomplete is no object).
    async fn abort(self) {
        match self {
            Sink::File(file) => drop(file),
            Sink::Upload(upload) => match tokio::time::timeout(CLEAN_UP_WAIT, upload.abort()).await {
                Ok(Ok(())) => {}
                _ => tracing::warn!(
                    "an upload could not be aborted; it is no object, and the bucket's lifecycle rule for \
                     incomplete multipart uploads removes it"
                ),
            },
        }
    }
}

/// What became of one snapshot.
enum Copied {
    Copied(CopiedObject),
    AlreadyThere,
}

/// Copies the cluster's snapshots; a stop aborts the object in flight at once.
pub(crate) async fn run_copy(job: &CopyJob, stop: &StopSignal) -> JobResult {
    let clock = RunClock::start();
    let mut report =
        CopyReport { from: store_text(&job.from), to: store_text(&job.to), ..CopyReport::default() };
    let mut failures = Vec::new();
    let outcome = copy_all(job, &mut report, &mut failures, stop).await;
    let failure = match outcome {
        Err(failure) => Some(failure),
        Ok(()) => summary_failure(&failures),
    };
    let mut result = clock.finish(Report::SnapshotCopy(report.clone()), Outcome::Succeeded, failure);
    if result.outcome == Outcome::Failed {
        result.stopped_by = stop.get().map(|s| s.signal.to_owned());
    }
    result.message = Some(match result.message.take() {
        Some(why) => format!("{}: {why}", copy_summary(&report)),
        None => copy_summary(&report),
    });
    result
}

/// The run's failure when some snapshots could not be copied: retryable when any could be
/// copied by a retry, bad input when none could.
fn summary_failure(failures: &[Failure]) -> Option<Failure> {
    let first = failures.first()?;
    let kind = if failures.iter().any(|f| f.kind == ErrorKind::Retryable) {
        ErrorKind::Retryable
    } else {
        ErrorKind::BadInput
    };
    let message = format!("{} snapshot(s) not copied; the first: {}", failures.len(), first.message);
    // A cause shared by every failure is the run's.
    let reason = first.reason.filter(|r| failures.iter().all(|f| f.reason == Some(*r)));
    Some(Failure { kind, message, reason })
}

fn copy_summary(report: &CopyReport) -> String {
    let mut text = format!(
        "{} snapshot(s) of the cluster in {}: {} copied to {} ({:.2} MiB, {} bytes)",
        report.source_count,
        report.from,
        report.copied.len(),
        report.to,
        mib(report.bytes_copied),
        report.bytes_copied
    );
    if !report.already_there.is_empty() {
        text.push_str(&format!(", {} already there with the same SHA-256", report.already_there.len()));
    }
    if !report.failed.is_empty() {
        text.push_str(&format!(", {} failed ({})", report.failed.len(), report.failed.join("; ")));
    }
    text
}

async fn copy_all(
    job: &CopyJob,
    report: &mut CopyReport,
    failures: &mut Vec<Failure>,
    stop: &StopSignal,
) -> Result<(), Failure> {
    let from = Side::open(&job.from)?;
    let to = Side::open(&job.to)?;
    from.check("from").await?;
    to.check("to").await?;
    let mut snapshots = from.snapshots(&job.template).await?;
    report.source_count = snapshots.len() as u32;
    if !job.only.is_empty() {
        for name in job.only.iter().filter(|n| !snapshots.iter().any(|s| &s.name == *n)) {
            let failure = Failure::bad_input(format!("{}: no such snapshot", from.describe(name)));
            report.failed.push(format!("{name}: {}", failure.message));
            failures.push(failure);
        }
        snapshots.retain(|s| job.only.contains(&s.name));
    }
    tracing::info!(from = %report.from, to = %report.to, snapshots = snapshots.len(), "copying the cluster's snapshots");
    let total = snapshots.len();
    for (at, entry) in snapshots.iter().enumerate() {
        if let Some(stop) = stop.get() {
            return Err(stop.failure("the copy stopped before the next snapshot"));
        }
        tracing::info!(
            snapshot = %entry.name,
            size = %format!("{:.2} MiB ({} bytes)", mib(entry.size), entry.size),
            "snapshot {} of {total}",
            at + 1
        );
        match copy_one(&from, &to, entry, stop).await {
            Ok(Copied::Copied(copied)) => {
                report.bytes_copied += copied.size_bytes;
                report.copied.push(copied);
            }
            Ok(Copied::AlreadyThere) => {
                tracing::info!(snapshot = %entry.name, "already in the destination with the same SHA-256: left as it is");
                report.already_there.push(entry.name.clone());
            }
            Err(failure) if stop.get().is_some() => return Err(failure),
            Err(failure) => {
                tracing::warn!(snapshot = %entry.name, "not copied: {}", failure.message);
                report.failed.push(format!("{}: {}", entry.name, failure.message));
                failures.push(failure);
            }
        }
    }
    Ok(())
}

/// What the source says of a snapshot before it is copied.
struct Known {
    sha256: Option<String>,
    revision: Option<i64>,
    metadata: BTreeMap<String, String>,
}

async fn copy_one(from: &Side, to: &Side, entry: &Entry, stop: &StopSignal) -> Result<Copied, Failure> {
    if let Side::Bucket(bucket) = to {
        bucket.check_new_name(&entry.name)?;
    }
    let known = known_of(from, entry).await?;
    if let Some((size, recorded)) = to.existing(&entry.name).await? {
        return already_there(from, to, entry, &known, size, recorded, stop).await;
    }
    let started = Instant::now();
    let copied = stream_copy(from, to, entry, &known, stop).await?;
    // The other side: what the destination holds now must hash as the source did.
    let (sha256, size) = to.hash(&entry.name, stop).await?;
    if sha256 != copied.sha256 || size != copied.size_bytes {
        to.remove(&entry.name).await;
        return Err(Failure::retryable(format!(
            "{} read back as {size} bytes with sha256 {sha256}, not the {} bytes with sha256 {} sent; \
             deleted again",
            to.describe(&entry.name),
            copied.size_bytes,
            copied.sha256
        )));
    }
    tracing::info!(
        snapshot = %entry.name,
        sha256 = %copied.sha256,
        seconds = started.elapsed().as_secs_f64(),
        "copied, and checked on both sides"
    );
    Ok(Copied::Copied(copied))
}

/// The source's SHA-256 and revision before the copy: a folder's file checked whole (bad input
/// when etcd would refuse it), a bucket object's metadata.
async fn known_of(from: &Side, entry: &Entry) -> Result<Known, Failure> {
    match from {
        Side::Folder(dir) => {
            let path = dir.join(&entry.name);
            // An encrypted file cannot be checked without its key, which a copy neither has nor
            // needs: its bytes are carried as they are and hashed on the way.
            if let (encoding, Some(key_id)) = codec::describe_stored(&head_of(&path)) {
                let mut metadata = BTreeMap::from([(codec::META_KEY_ID.to_owned(), key_id)]);
                metadata.extend(encoding.map(|encoding| (codec::META_ENCODING.to_owned(), encoding)));
                return Ok(Known { sha256: None, revision: None, metadata });
            }
            let checked = tokio::task::spawn_blocking(move || check_file_with(&path, None))
                .await
                .map_err(|e| Failure::retryable(format!("the snapshot check did not finish: {e}")))??;
            let metadata =
                checked.content.as_ref().map(|c| c.metadata().into_iter().collect()).unwrap_or_default();
            Ok(Known { sha256: Some(checked.sha256), revision: checked.revision, metadata })
        }
        Side::Bucket(_) => Ok(Known {
            sha256: entry.metadata.get(bucket::META_SHA256).map(|s| s.to_ascii_lowercase()),
            revision: entry.metadata.get(bucket::META_REVISION).and_then(|r| r.parse().ok()),
            metadata: entry.metadata.clone(),
        }),
    }
}

/// The first bytes of a file (what says how it is stored); empty when it cannot be read.
fn head_of(path: &Path) -> Vec<u8> {
    let mut head = Vec::new();
    let _ = std::fs::File::open(path).and_then(|f| f.take(HEAD_BYTES as u64).read_to_end(&mut head));
    head
}

/// Enough of an object's first bytes to read a sealed object's header.
const HEAD_BYTES: usize = 8 * 1024;

/// A snapshot whose name is taken in the destination: the same bytes (size and SHA-256) are
/// left as they are; other bytes are never overwritten.
async fn already_there(
    from: &Side,
    to: &Side,
    entry: &Entry,
    known: &Known,
    size: u64,
    recorded: Option<String>,
    stop: &StopSignal,
) -> Result<Copied, Failure> {
    let differs = || {
        Failure::bad_input(format!(
            "{} already holds other bytes than {} ({size} bytes against {}); it is left as it is: \
             delete or rename it to copy this snapshot",
            to.describe(&entry.name),
            from.describe(&entry.name),
            entry.size
        ))
    };
    if size != entry.size {
        return Err(differs());
    }
    let source_sha = match &known.sha256 {
        Some(sha) => sha.clone(),
        None => from.hash(&entry.name, stop).await?.0,
    };
    let there = match recorded {
        Some(sha) => sha.to_ascii_lowercase(),
        None => to.hash(&entry.name, stop).await?.0,
    };
    if there == source_sha { Ok(Copied::AlreadyThere) } else { Err(differs()) }
}

/// Streams the snapshot into the destination, checking it on the way; the destination gets it
/// only whole and as the source recorded it.
async fn stream_copy(
    from: &Side,
    to: &Side,
    entry: &Entry,
    known: &Known,
    stop: &StopSignal,
) -> Result<CopiedObject, Failure> {
    let mut metadata = known.metadata.clone();
    if let Some(sha) = &known.sha256 {
        metadata.insert(bucket::META_SHA256.to_owned(), sha.clone());
    }
    if let Some(revision) = known.revision {
        metadata.insert(bucket::META_REVISION.to_owned(), revision.to_string());
    }
    let mut source = from.read(&entry.name).await?;
    let mut sink = match to {
        Side::Folder(dir) => Sink::File(PartialFile::create(dir, &entry.name)?),
        Side::Bucket(bucket) => Sink::Upload(bucket.start_upload(&entry.name, &metadata).await?),
    };
    let mut check = TrailerCheck::default();
    let mut scan = RevisionScan::default();
    let mut head = Vec::with_capacity(HEAD_BYTES);
    let pumped = tokio::select! {
        pumped = pump(&mut source, &mut sink, &mut check, &mut scan, &mut head, &entry.name) => pumped,
        stop = stop.requested() => Err(stop.failure(&format!(
            "the copy of {} was abandoned: nothing is under its name in the destination",
            entry.name
        ))),
    };
    let size = check.bytes_seen();
    // A compressed or encrypted object is carried as it is: its trailer is inside, and its
    // SHA-256 (of the bytes stored) is what is checked.
    let encoded = codec::is_encoded(&head);
    let checked = pumped.and_then(|()| {
        let sha256 = if encoded {
            check.whole_sha256()
        } else {
            check
                .finish()
                .map_err(|why| {
                    Failure::bad_input(format!(
                        "{} is not a whole snapshot: {why}",
                        from.describe(&entry.name)
                    ))
                })?
                .0
        };
        match &known.sha256 {
            Some(recorded) if *recorded != sha256 => Err(Failure::bad_input(format!(
                "{} hashes to sha256 {sha256}, not the {recorded} recorded for it: damaged (or \
                 replaced while it was copied); not copied",
                from.describe(&entry.name)
            ))),
            _ => Ok(sha256),
        }
    });
    let sha256 = match checked {
        Ok(sha256) => sha256,
        Err(failure) => {
            sink.abort().await;
            return Err(failure);
        }
    };
    let revision = match encoded {
        true => known.revision,
        false => known.revision.or_else(|| scan.finish().ok().flatten()),
    };
    // What the source did not record is learnt from the stream.
    metadata.insert(bucket::META_SHA256.to_owned(), sha256.clone());
    let (encoding, key_id) = codec::describe_stored(&head);
    for (key, value) in [(codec::META_ENCODING, encoding), (codec::META_KEY_ID, key_id)] {
        if let Some(value) = value {
            metadata.entry(key.to_owned()).or_insert(value);
        }
    }
    if let Some(revision) = revision {
        metadata.insert(bucket::META_REVISION.to_owned(), revision.to_string());
    }
    sink.complete(size, &metadata).await?;
    Ok(CopiedObject {
        name: entry.name.clone(),
        size_bytes: size,
        sha256,
        revision,
        keys: known.metadata.get(bucket::META_KEYS).and_then(|k| k.parse().ok()),
        stored: codec::stored_as_in(&metadata),
    })
}

async fn pump(
    source: &mut Source<'_>,
    sink: &mut Sink<'_>,
    check: &mut TrailerCheck,
    scan: &mut RevisionScan,
    head: &mut Vec<u8>,
    name: &str,
) -> Result<(), Failure> {
    let mut last_log = Instant::now();
    while let Some(chunk) = source.next().await? {
        let room = HEAD_BYTES - head.len();
        head.extend_from_slice(&chunk[..room.min(chunk.len())]);
        check.update(&chunk);
        scan.update(&chunk);
        sink.write(&chunk).await?;
        if last_log.elapsed() > PROGRESS_EVERY {
            let bytes = check.bytes_seen();
            tracing::info!(snapshot = %name, copied = %format!("{:.2} MiB ({bytes} bytes)", mib(bytes)), "copying");
            last_log = Instant::now();
        }
    }
    Ok(())
}

/// `groundskeeper-job snapshot-copy`: runs, reports, and returns the exit code.
pub fn main(args: CopyArgs) -> i32 {
    let clock = RunClock::start();
    let prepared = (|| {
        let grace =
            run::check_wait("--grace-period-seconds", Duration::from_secs(args.grace_period_seconds))?;
        Ok::<_, Failure>((args.copy_job()?, grace))
    })();
    let result = match prepared {
        Ok((job, grace)) => runtime().block_on(async {
            let stop = StopSignal::listen_or_warn(grace);
            run_copy(&job, &stop).await
        }),
        Err(failure) => clock.finish(
            Report::SnapshotCopy(CopyReport {
                from: args.from.from.clone(),
                to: args.to.to.clone(),
                ..CopyReport::default()
            }),
            Outcome::Failed,
            Some(failure),
        ),
    };
    if let Some(error) = &result.error {
        tracing::error!("copy not finished: {}", error.message);
    }
    run::report(&result, &args.result_file);
    run::exit_code(&result)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> Result<CopyJob, Failure> {
        #[derive(clap::Parser)]
        struct Wrap {
            #[command(flatten)]
            copy: CopyArgs,
        }
        use clap::Parser;
        let base = ["x", "--file-name-template", "{cluster}-{time}.db", "--cluster", "main"];
        Wrap::try_parse_from(base.iter().chain(extra)).unwrap().copy.copy_job()
    }

    #[test]
    fn a_copy_needs_two_places_and_names_of_the_cluster() {
        assert!(args(&["--from", "/a", "--to", "s3://b/p"]).is_ok());
        assert!(args(&["--from", "s3://b/p", "--to", "s3://b/q"]).is_ok());
        let cases: &[(&[&str], &str)] = &[
            (&["--from", "/a", "--to", "/a/"], "the same place"),
            (&["--from", "s3://b/p", "--to", "s3://b/p/"], "the same place"),
            (&["--from", "/a", "--to", "s3://b", "--only", "other-20260101T000000Z.db"], "is not a name"),
            (&["--from", "/a", "--to", "b"], "neither an absolute folder path"),
            (&["--from", "/a", "--to", "/b", "--to-option", "region=x"], "a folder takes no --to-option"),
        ];
        for (extra, says) in cases {
            let failure = args(extra).unwrap_err();
            assert_eq!(failure.kind, ErrorKind::BadInput, "{extra:?}");
            assert!(failure.message.contains(says), "{extra:?}: {}", failure.message);
        }
    }

    #[test]
    fn the_run_fails_retryably_when_a_retry_can_help() {
        assert!(summary_failure(&[]).is_none());
        let bad = Failure::bad_input("x");
        let retry = Failure::retryable("y");
        assert_eq!(summary_failure(std::slice::from_ref(&bad)).unwrap().kind, ErrorKind::BadInput);
        let mixed = summary_failure(&[bad, retry]).unwrap();
        assert_eq!(mixed.kind, ErrorKind::Retryable);
        assert!(mixed.message.starts_with("2 snapshot(s) not copied; the first: x"), "{}", mixed.message);
    }
}
