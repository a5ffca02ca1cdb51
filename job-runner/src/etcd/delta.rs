//! `groundskeeper-job snapshot-delta`: an incremental snapshot. Every change etcd made after a
//! start revision (the end of the previous full snapshot or delta) up to the cluster's revision
//! when the run started, kept as etcd made them: puts and deletes with their key, value, create
//! and mod revisions, version and lease, grouped by transaction (the changes of one transaction
//! share one revision in etcd). Written to the same stores as full snapshots, in the format of
//! [`format`], under a name that says its revisions ([`name`]).
//!
//! **Why a watch.** etcd keeps its history (every revision until a compaction) and serves it two
//! ways: a range at a past revision gives the keyspace as it was then, not what changed; a watch
//! with `start_revision` replays the changes themselves, in revision order, each with its kv as
//! written, deletes included. So one watch over the whole keyspace from `start + 1` reads exactly
//! the delta, in one pass, streamed. It is asked for with `fragment` (etcd splits a large batch
//! into messages of at most its request size limit, instead of one message of up to a thousand
//! revisions) and read a message at a time, so memory stays bounded by one message and one
//! transaction. etcd cuts its batches only between revisions; a fragmented batch says so on every
//! part but its last: so the transactions of a message are whole once a message that is not a
//! fragment arrives. Every revision of etcd is one change at least (a transaction that changes
//! nothing takes no revision), so once a whole message reaches the end revision, every change up
//! to it has arrived; events after the end (the watch goes on as writes go on) are left out. The
//! end is not taken from a progress notification: etcd 3.4 (and 3.5 before 3.5.8) answer
//! `RequestProgress` at once, with the store's revision, before a watch still catching up has
//! sent its history.
//!
//! **Compacted history.** A start revision etcd compacted is answered with the compact revision
//! and the watch cancelled: the changes are gone and no retry brings them back. The run fails
//! with `failureReason: HistoryCompacted` and the compact revision in its result, exit code 2
//! (bad input: the Job is not retried), before anything is written: the controller takes a full
//! snapshot next.
//!
//! **Atomicity** as for full snapshots: a folder's delta is written as a hidden `.NAME.partial`,
//! read back and checked whole, fsynced, renamed and the folder fsynced; a bucket's goes into a
//! multipart upload of its staging object, published under its name only once whole, aborted on
//! a failure or a stop. A run killed outright leaves only the hidden partial file or an
//! incomplete upload, never anything under a delta's name.

use std::collections::{BTreeMap, VecDeque};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use etcd_client::{Client, EventType, WatchOptions, WatchResponse, WatchStream};
use groundskeeper_protocol::operation::SnapshotStore;
use groundskeeper_protocol::result::{DeltaFailureReason, DeltaReport, mib};
use groundskeeper_protocol::{JobResult, Outcome, Report};
use groundskeeper_stores::etcd::connect::{Cluster, Connection, EndpointArgs};
use groundskeeper_stores::etcd::retention::NameTemplate;

use super::bucket::{self, Bucket, CLEAN_UP_WAIT, Upload};
use super::codec::{self, DecodingReader, Encoded, Encoding, Key};
use super::compact::runtime;
use super::etcd_tools::{self, ToArgs};
use super::snapshot::{Partial, check_file_with, choose_member};
use crate::run::{self, Failure, RunClock, StopSignal};

pub(crate) mod format;
pub mod name;
pub mod replay;

use format::{Decoder, Encoder, Event, Header, Kind, Summary, Txn};
use name::DeltaName;

/// A watch that brings nothing for this long is given up on (retryable).
const STALL_TIMEOUT: Duration = super::snapshot::STALL_TIMEOUT;
/// The largest watch message taken: etcd sends at most its request size limit per fragment
/// (1.5 MiB by default; raised by some), plus one event that alone is larger.
const MAX_MESSAGE: usize = 64 * 1024 * 1024;
/// Bytes collected before they go to the file.
const FILE_BUFFER: usize = 1024 * 1024;
/// How often progress is logged.
const PROGRESS_EVERY: Duration = Duration::from_secs(10);
/// Object metadata of a delta, besides `sha256`, `revision` (the end), `cluster` and `member`.
pub(crate) const META_START: &str = "start-revision";
pub(crate) const META_END: &str = "end-revision";
pub(crate) const META_EVENTS: &str = "events";
pub(crate) const META_FORMAT: &str = "format";

#[derive(clap::Args, Debug, Clone)]
pub struct DeltaArgs {
    #[command(flatten)]
    pub encoding: crate::etcd::codec::EncodingArgs,
    #[command(flatten)]
    pub connection: EndpointArgs,
    #[command(flatten)]
    pub to: ToArgs,
    /// The template the cluster's full snapshots are named by (`{cluster}`, `{time}`): without
    /// --start-revision the delta starts where the newest full snapshot or delta in the store
    /// ends.
    #[arg(long)]
    pub file_name_template: String,
    /// The cluster's name: `{cluster}` in the template, and the first part of a delta's name.
    #[arg(long)]
    pub cluster: String,
    /// The delta holds the changes after this revision; default: the revision of the newest
    /// full snapshot or the end of the newest delta of the cluster in the store.
    #[arg(long)]
    pub start_revision: Option<i64>,
    /// The last revision the delta holds; default: the cluster's revision when the run starts.
    #[arg(long)]
    pub end_revision: Option<i64>,
    /// Where to write the result JSON.
    #[arg(long, default_value = run::DEFAULT_RESULT_FILE)]
    pub result_file: PathBuf,
    /// The pod's terminationGracePeriodSeconds. A stop ends the read at once; the temporary file
    /// is removed, the upload aborted.
    #[arg(long, default_value_t = groundskeeper_protocol::exit::TERMINATION_GRACE_PERIOD_SECONDS)]
    pub grace_period_seconds: u64,
}

/// A delta as asked for, checked.
#[derive(Debug, Clone)]
pub(crate) struct DeltaRequest {
    pub store: SnapshotStore,
    pub template: NameTemplate,
    pub cluster: String,
    pub start_revision: Option<i64>,
    pub end_revision: Option<i64>,
    /// How the delta is stored; its key also opens the store's encrypted full snapshots.
    pub encoding: Encoding,
}

impl DeltaArgs {
    /// Everything that can be checked before the store or etcd is asked: bad input naming the
    /// flag.
    pub(crate) fn request(&self) -> Result<DeltaRequest, Failure> {
        let template = NameTemplate::parse(&self.file_name_template, &self.cluster)
            .map_err(|why| Failure::bad_input(format!("--file-name-template / --cluster: {why}")))?;
        name::check_cluster(&self.cluster).map_err(|why| Failure::bad_input(format!("--cluster: {why}")))?;
        if let Some(start) = self.start_revision.filter(|r| *r < 0) {
            return Err(Failure::bad_input(format!("--start-revision {start}: cannot be negative")));
        }
        if let Some(end) = self.end_revision.filter(|r| *r < 1) {
            return Err(Failure::bad_input(format!("--end-revision {end}: revisions start at 1")));
        }
        if let (Some(start), Some(end)) = (self.start_revision, self.end_revision)
            && end <= start
        {
            return Err(Failure::bad_input(format!(
                "--end-revision {end} is not after --start-revision {start}: a delta holds the \
                 changes after its start up to its end"
            )));
        }
        let store = self.to.checked_store()?;
        match &store {
            SnapshotStore::Folder(folder) => match std::fs::metadata(folder) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => return Err(Failure::bad_input(format!("--to {folder}: not a folder"))),
                Err(e) => return Err(Failure::bad_input(format!("--to {folder}: {e}"))),
            },
            // The URL, its options and credentials: nothing is asked of the store yet.
            SnapshotStore::Bucket(location) => {
                Bucket::open(location).map_err(|failure| Failure {
                    message: format!("--to {}: {}", location.url, failure.message),
                    ..failure
                })?;
            }
        }
        Ok(DeltaRequest {
            store,
            template,
            cluster: self.cluster.clone(),
            start_revision: self.start_revision,
            end_revision: self.end_revision,
            encoding: self.encoding.encoding()?,
        })
    }
}

/// A store opened for deltas.
pub(crate) enum Store {
    Folder(PathBuf),
    Bucket(Box<Bucket>),
}

impl Store {
    pub(crate) fn open(store: &SnapshotStore) -> Result<Self, Failure> {
        Ok(match store {
            SnapshotStore::Folder(folder) => Store::Folder(PathBuf::from(folder)),
            SnapshotStore::Bucket(location) => Store::Bucket(Box::new(Bucket::open(location)?)),
        })
    }

    pub(crate) fn describe(&self) -> String {
        match self {
            Store::Folder(folder) => folder.display().to_string(),
            Store::Bucket(bucket) => bucket.url().to_owned(),
        }
    }

    pub(crate) fn locate(&self, name: &str) -> String {
        match self {
            Store::Folder(folder) => folder.join(name).display().to_string(),
            Store::Bucket(bucket) => bucket.object_url(name),
        }
    }

    /// The names of the files or objects directly in the store.
    pub(crate) async fn names(&self, flag: &str) -> Result<Vec<String>, Failure> {
        match self {
            Store::Folder(folder) => {
                let entries = std::fs::read_dir(folder).map_err(|e| {
                    Failure::bad_input(format!("{flag} {}: cannot list the folder: {e}", folder.display()))
                })?;
                Ok(entries
                    .filter_map(Result::ok)
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                    .filter_map(|e| e.file_name().into_string().ok())
                    .collect())
            }
            Store::Bucket(bucket) => {
                Ok(bucket.list_names().await?.into_iter().map(|(name, _, _)| name).collect())
            }
        }
    }

    /// The revision a full snapshot holds: its object's `revision` metadata, or read from the
    /// file.
    pub(crate) async fn full_snapshot_revision(
        &self,
        name: &str,
        key: Option<&Key>,
    ) -> Result<Option<i64>, Failure> {
        match self {
            Store::Folder(folder) => {
                let path = folder.join(name);
                let key = key.cloned();
                let checked = tokio::task::spawn_blocking(move || check_file_with(&path, key.as_ref()))
                    .await
                    .map_err(|e| Failure::retryable(format!("the snapshot check did not finish: {e}")))??;
                Ok(checked.revision)
            }
            Store::Bucket(bucket) => Ok(bucket
                .head(name)
                .await?
                .and_then(|(_, metadata)| metadata.get(bucket::META_REVISION)?.parse().ok())),
        }
    }
}

/// Where the next delta starts: the revision of the newest full snapshot or the end of the
/// newest delta, whichever is later, and which one that is.
async fn start_from_store(store: &Store, request: &DeltaRequest) -> Result<(i64, String), Failure> {
    let names = store.names("--to").await?;
    let mut full = None;
    if let Some(name) = etcd_tools::newest(&request.template, &names) {
        match store.full_snapshot_revision(&name, request.encoding.key.as_ref()).await? {
            Some(revision) => {
                full = Some(NewestFull { revision, time: request.template.time_of(&name), name })
            }
            None => tracing::warn!(snapshot = %name, "the newest full snapshot says no revision: not used"),
        }
    }
    chain_end(full, name::deltas_of(&request.cluster, &names)).ok_or_else(|| {
        Failure::bad_input(format!(
            "--to {}: no full snapshot (named by --file-name-template) nor delta of cluster {} there \
             to start from; take a full snapshot first, or give --start-revision",
            store.describe(),
            request.cluster
        ))
    })
}

/// The newest full snapshot of a store: its revision, the time in its name, its name.
struct NewestFull {
    revision: i64,
    time: Option<jiff::Timestamp>,
    name: String,
}

/// Where the chain of a store ends: the newest full snapshot's revision, or the end of the
/// furthest delta written at or after it. A delta written before the newest full snapshot is of
/// another timeline when the cluster was restored to an older point since (its revisions may be
/// past the restored cluster's), so it is never continued from.
fn chain_end(full: Option<NewestFull>, deltas: Vec<(DeltaName, String)>) -> Option<(i64, String)> {
    let since = full.as_ref().and_then(|f| f.time);
    let furthest = deltas
        .into_iter()
        .filter(|(delta, _)| since.is_none_or(|time| delta.time >= time))
        .max_by_key(|(delta, _)| delta.end_revision);
    match (full, furthest) {
        (Some(full), Some((delta, name))) if delta.end_revision > full.revision => {
            Some((delta.end_revision, name))
        }
        (Some(full), _) => Some((full.revision, full.name)),
        (None, delta) => delta.map(|(delta, name)| (delta.end_revision, name)),
    }
}

/// Why reading history stopped short.
pub(crate) enum ReadError {
    /// etcd compacted the history past the start: the compact revision.
    Compacted(i64),
    Failed(Failure),
}

impl From<Failure> for ReadError {
    fn from(failure: Failure) -> Self {
        ReadError::Failed(failure)
    }
}

/// etcd's history after a revision up to an end, transaction by transaction, from one watch.
pub(crate) struct History {
    stream: WatchStream,
    end: i64,
    member: String,
    /// The transaction being gathered: more of its events may come in the next message.
    pending: Option<Txn>,
    ready: VecDeque<Txn>,
    /// The highest revision seen.
    seen: i64,
    /// Every event up to the end has arrived.
    done: bool,
}

impl History {
    pub(crate) async fn open(client: &Client, start: i64, end: i64, member: &str) -> Result<Self, Failure> {
        let options = WatchOptions::new().with_all_keys().with_start_revision(start + 1).with_fragment();
        let stream = client
            .watch_client()
            .max_decoding_message_size(MAX_MESSAGE)
            .watch(vec![0u8], Some(options))
            .await
            .map_err(|e| Failure::retryable(format!("{member} refused the watch of its history: {e}")))?;
        Ok(Self {
            stream,
            end,
            member: member.to_owned(),
            pending: None,
            ready: VecDeque::new(),
            seen: start,
            done: false,
        })
    }

    /// The next transaction, `None` once every one up to the end was given.
    pub(crate) async fn next(&mut self) -> Result<Option<Txn>, ReadError> {
        loop {
            if let Some(txn) = self.ready.pop_front() {
                return Ok(Some(txn));
            }
            if self.done {
                return Ok(self.pending.take());
            }
            let response = self.receive().await?;
            self.take(response)?;
        }
    }

    async fn receive(&mut self) -> Result<WatchResponse, Failure> {
        let what = format!("revision {} of {}", self.seen, self.end);
        match tokio::time::timeout(STALL_TIMEOUT, self.stream.message()).await {
            Ok(Ok(Some(response))) => Ok(response),
            Ok(Ok(None)) => {
                Err(Failure::retryable(format!("{} ended the watch of its history at {what}", self.member)))
            }
            Ok(Err(e)) => Err(Failure::retryable(format!(
                "the watch of {}'s history broke at {what}: {e}",
                self.member
            ))),
            Err(_) => Err(Failure::retryable(format!(
                "{} sent nothing for {}s at {what}",
                self.member,
                STALL_TIMEOUT.as_secs()
            ))),
        }
    }

    fn take(&mut self, response: WatchResponse) -> Result<(), ReadError> {
        if response.compact_revision() > 0 {
            return Err(ReadError::Compacted(response.compact_revision()));
        }
        if response.canceled() {
            return Err(ReadError::Failed(Failure::retryable(format!(
                "{} cancelled the watch of its history: {}",
                self.member,
                response.cancel_reason()
            ))));
        }
        if response.created() {
            return Ok(());
        }
        for event in response.events() {
            let Some(kv) = event.kv() else { continue };
            let revision = kv.mod_revision();
            if revision > self.end {
                // Everything up to the end came before it.
                self.finish();
                return Ok(());
            }
            if revision < self.seen || (revision == self.seen && self.pending.is_none()) {
                return Err(ReadError::Failed(Failure::retryable(format!(
                    "{} sent revision {revision} after {}: out of order",
                    self.member, self.seen
                ))));
            }
            self.seen = revision;
            let event = Event {
                kind: match event.event_type() {
                    EventType::Put => Kind::Put,
                    EventType::Delete => Kind::Delete,
                },
                key: kv.key().to_vec(),
                value: kv.value().to_vec(),
                create_revision: kv.create_revision(),
                mod_revision: revision,
                version: kv.version(),
                lease: kv.lease(),
            };
            match &mut self.pending {
                Some(txn) if txn.revision == revision => txn.events.push(event),
                pending => {
                    if let Some(txn) = pending.take() {
                        self.ready.push_back(txn);
                    }
                    *pending = Some(Txn { revision, events: vec![event] });
                }
            }
        }
        if !response.fragment() && !response.events().is_empty() {
            // A whole batch: its last transaction is whole too.
            if let Some(txn) = self.pending.take() {
                self.ready.push_back(txn);
            }
            if self.seen >= self.end {
                self.done = true;
            }
        }
        Ok(())
    }

    fn finish(&mut self) {
        self.done = true;
        if let Some(txn) = self.pending.take() {
            self.ready.push_back(txn);
        }
    }
}

/// Where a delta is being written.
struct Sink<'a> {
    target: Target<'a>,
    encoder: codec::Encoder,
    key: Option<Key>,
}

/// Where a delta's stored bytes go.
enum Target<'a> {
    File { partial: Partial, partial_path: PathBuf, path: PathBuf, dir: PathBuf, buffer: Vec<u8> },
    Bucket { upload: Upload<'a>, bucket: &'a Bucket, name: String },
}

impl<'a> Sink<'a> {
    async fn open(
        store: &'a Store,
        name: &str,
        metadata: &BTreeMap<String, String>,
        encoding: &Encoding,
    ) -> Result<Self, Failure> {
        let encoder = encoding.encoder()?;
        let target = match store {
            Store::Folder(dir) => {
                let partial_path = dir.join(bucket::staging_name(name));
                Target::File {
                    partial: Partial::create(&partial_path)?,
                    partial_path,
                    path: dir.join(name),
                    dir: dir.clone(),
                    buffer: Vec::with_capacity(FILE_BUFFER),
                }
            }
            Store::Bucket(bucket) => Target::Bucket {
                upload: bucket.start_upload(name, metadata).await?,
                bucket,
                name: name.to_owned(),
            },
        };
        Ok(Self { target, encoder, key: encoding.key.clone() })
    }

    /// The delta's plain bytes: encoded, then stored.
    async fn write(&mut self, bytes: &[u8]) -> Result<(), Failure> {
        let stored = self.encoder.push(bytes)?;
        self.target.write(&stored).await
    }

    /// The delta under its name, whole (see [`Target::finish`]), with what was stored: its
    /// SHA-256 and encoding join the metadata.
    async fn finish(
        self,
        summary: &Summary,
        metadata: &mut BTreeMap<String, String>,
    ) -> Result<Encoded, Failure> {
        let Self { mut target, encoder, key } = self;
        let (last, encoded) = encoder.finish()?;
        target.write(&last).await?;
        metadata.insert(bucket::META_SHA256.to_owned(), encoded.stored_sha256.clone());
        metadata.extend(encoded.metadata());
        target.finish(summary, &encoded, metadata, key.as_ref()).await?;
        Ok(encoded)
    }

    async fn abort(self, stop: &StopSignal) {
        self.target.abort(stop).await
    }
}

impl Target<'_> {
    async fn write(&mut self, bytes: &[u8]) -> Result<(), Failure> {
        match self {
            Target::File { partial, partial_path, buffer, .. } => {
                buffer.extend_from_slice(bytes);
                if buffer.len() >= FILE_BUFFER {
                    partial.file().write_all(buffer).map_err(|e| write_failure(partial_path, e))?;
                    buffer.clear();
                }
                Ok(())
            }
            Target::Bucket { upload, .. } => upload.write(bytes).await,
        }
    }

    /// The delta under its name, whole: the file read back (decoded) and checked, renamed,
    /// fsynced; the upload completed and published with its metadata.
    async fn finish(
        self,
        summary: &Summary,
        encoded: &Encoded,
        metadata: &BTreeMap<String, String>,
        key: Option<&Key>,
    ) -> Result<(), Failure> {
        match self {
            Target::File { mut partial, partial_path, path, dir, buffer } => {
                partial.file().write_all(&buffer).map_err(|e| write_failure(&partial_path, e))?;
                partial.file().sync_all().map_err(|e| write_failure(&partial_path, e))?;
                let (check, key) = (partial_path.clone(), key.cloned());
                let read_back = tokio::task::spawn_blocking(move || check_delta_file(&check, key.as_ref()))
                    .await
                    .map_err(|e| Failure::retryable(format!("the delta's check did not finish: {e}")))?
                    .map_err(|why| {
                        Failure::retryable(format!(
                            "{} does not read back whole: {why}",
                            partial_path.display()
                        ))
                    })?;
                if read_back.1 != *summary {
                    return Err(Failure::retryable(format!(
                        "{} reads back as {:?}, not the {:?} written",
                        partial_path.display(),
                        read_back.1,
                        summary
                    )));
                }
                std::fs::rename(&partial_path, &path).map_err(|e| {
                    Failure::retryable(format!(
                        "cannot rename {} to {}: {e}",
                        partial_path.display(),
                        path.display()
                    ))
                })?;
                partial.kept = true;
                etcd_tools::sync_dir(&dir).map_err(|e| {
                    Failure::retryable(format!("cannot fsync the folder {}: {e}", dir.display()))
                })
            }
            Target::Bucket { upload, .. } => {
                upload.complete().await?.publish(encoded.stored_bytes, metadata).await
            }
        }
    }

    /// Gives the delta up: the temporary file removed, the upload aborted.
    async fn abort(self, stop: &StopSignal) {
        match self {
            Target::File { partial, .. } => drop(partial),
            Target::Bucket { upload, bucket, name } => {
                let now = Instant::now();
                let wait = stop
                    .get()
                    .map_or(CLEAN_UP_WAIT, |s| s.deadline.saturating_duration_since(now).min(CLEAN_UP_WAIT));
                match tokio::time::timeout(wait, upload.abort()).await {
                    Ok(Ok(())) => {
                        tracing::info!(object = %bucket.object_url(&name), "the upload was aborted")
                    }
                    _ => tracing::warn!(
                        object = %bucket.object_url(&name),
                        "the upload could not be aborted in time; it is no object, and the bucket's \
                         lifecycle rule for incomplete multipart uploads removes it"
                    ),
                }
            }
        }
    }
}

fn write_failure(path: &Path, error: std::io::Error) -> Failure {
    Failure::retryable(format!("cannot write {}: {error}", path.display()))
}

/// Reads a delta file whole and checks it: its header and what it holds.
pub(crate) fn check_delta_file(path: &Path, key: Option<&Key>) -> Result<(Header, Summary), String> {
    let file = std::fs::File::open(path).map_err(|e| format!("cannot open it: {e}"))?;
    let file = DecodingReader::new(
        std::io::BufReader::with_capacity(1 << 20, file),
        codec::Decoder::new(format!("delta {}", path.display()), key),
    );
    let mut decoder = Decoder::new(std::io::BufReader::with_capacity(1 << 20, file));
    let header = decoder.header()?;
    while decoder.next()?.is_some() {}
    Ok((header, decoder.summary()))
}

/// Takes the delta; a stop ends it at once, leaving nothing under a delta's name.
pub(crate) async fn run_delta(
    connection: &Connection,
    request: &DeltaRequest,
    stop: &StopSignal,
) -> JobResult {
    let clock = RunClock::start();
    let mut report = DeltaReport { path: etcd_tools_store_text(&request.store), ..DeltaReport::default() };
    let outcome = take_delta(connection, request, &mut report, stop).await;
    let failure = outcome.as_ref().err().cloned();
    let skipped = matches!(outcome, Ok(false));
    let mut result = clock.finish(
        Report::SnapshotDelta(report.clone()),
        if skipped { Outcome::Skipped } else { Outcome::Succeeded },
        failure,
    );
    if result.outcome == Outcome::Failed {
        result.stopped_by = stop.get().map(|s| s.signal.to_owned());
    }
    if result.message.is_none() {
        result.message = Some(if skipped {
            format!(
                "nothing to do: the cluster is still at revision {}, where the last snapshot or delta \
                 ended; no delta written",
                report.start_revision
            )
        } else {
            format!(
                "delta of revisions {}..={} from {}: {} transaction(s), {} change(s), written to {}: {} \
                 bytes ({:.2} MiB), sha256 {}",
                report.start_revision + 1,
                report.end_revision,
                report.member.as_deref().unwrap_or_default(),
                report.transactions,
                report.events,
                report.object.as_deref().map(|o| format!("{}/{o}", report.path)).unwrap_or_default(),
                report.size_bytes,
                report.size_mib,
                report.sha256.as_deref().unwrap_or_default()
            )
        });
    }
    result
}

fn etcd_tools_store_text(store: &SnapshotStore) -> String {
    match store {
        SnapshotStore::Folder(path) => path.clone(),
        SnapshotStore::Bucket(bucket) => bucket.url.clone(),
    }
}

/// `Ok(true)` when a delta was written, `Ok(false)` when there was nothing to write.
async fn take_delta(
    connection: &Connection,
    request: &DeltaRequest,
    report: &mut DeltaReport,
    stop: &StopSignal,
) -> Result<bool, Failure> {
    let stopped =
        |stop: run::Stop| stop.failure("the delta was abandoned; nothing was written under its name");
    let started_at = jiff::Timestamp::now();
    // The store first: a mistake there is bad input, found before etcd is asked for anything.
    let store = Store::open(&request.store)?;
    if let Store::Bucket(bucket) = &store {
        bucket.check_bucket_exists().await?;
    }
    report.path = store.describe();
    let (start, start_from) = match request.start_revision {
        Some(start) => (start, "--start-revision".to_owned()),
        None => tokio::select! {
            found = start_from_store(&store, request) => found?,
            stop = stop.requested() => return Err(stopped(stop)),
        },
    };
    report.start_revision = start;
    report.start_from = Some(start_from.clone());

    let cluster = Cluster::discover(connection.clone()).await?;
    let observed = cluster.observe().await;
    let (member, _) = choose_member(&observed).map_err(Failure::retryable)?;
    let url = cluster
        .member(member.id)
        .and_then(|m| m.url.clone())
        .ok_or_else(|| Failure::retryable(format!("member {} advertises no client URL", member.name)))?;
    let etcd_version = member.status.as_ref().map(|s| s.version.clone()).unwrap_or_default();
    let member_name = member.name.clone();
    report.member = Some(member_name.clone());
    report.member_id = Some(member.id_hex());
    let mut client = connection
        .client(&url, None)
        .await
        .map_err(|e| Failure::retryable(format!("cannot connect to {member_name} ({url}): {e}")))?;
    // The cluster's revision now (a linearizable read): the delta's end.
    let now = tokio::time::timeout(
        Duration::from_secs(30),
        client.get(vec![0u8], Some(etcd_client::GetOptions::new().with_count_only())),
    )
    .await
    .map_err(|_| Failure::retryable(format!("{member_name} did not say its revision in 30s")))?
    .map_err(|e| Failure::retryable(format!("{member_name} did not say its revision: {e}")))?;
    let header = now.header().ok_or_else(|| Failure::retryable(format!("{member_name} sent no header")))?;
    let current = header.revision();
    report.cluster_id = Some(format!("{:x}", header.cluster_id()));
    let end = match request.end_revision {
        Some(end) if end > current => {
            return Err(Failure::bad_input(format!(
                "--end-revision {end} is after the cluster's revision {current}"
            )));
        }
        Some(end) => end,
        None => current,
    };
    report.end_revision = end;
    if start > end {
        return Err(Failure::bad_input(format!(
            "the start revision {start} ({start_from}) is after the end revision {end}{}",
            if request.end_revision.is_some() { "" } else { " (the cluster's revision)" }
        )));
    }
    if start == end {
        return Ok(false);
    }
    let read_started = Instant::now();
    tracing::info!(member = %member_name, url, start, end, to = %report.path, "reading etcd's history");
    let mut history = History::open(&client, start, end, &member_name).await?;
    // The first transaction before anything is written: a compacted start writes nothing.
    let first = tokio::select! {
        first = history.next() => first,
        stop = stop.requested() => return Err(stopped(stop)),
    };
    let first = match first {
        Ok(first) => first,
        Err(ReadError::Compacted(compact)) => return Err(compacted(report, start, compact)),
        Err(ReadError::Failed(failure)) => return Err(failure),
    };

    let name =
        DeltaName { time: started_at, start_revision: start, end_revision: end }.render(&request.cluster);
    let header = Header {
        format: format::FORMAT.into(),
        version: format::VERSION,
        cluster_id: report.cluster_id.clone().unwrap_or_default(),
        member_id: report.member_id.clone().unwrap_or_default(),
        member: member_name.clone(),
        start_revision: start,
        end_revision: end,
        created_at: started_at.to_string(),
        etcd_version,
    };
    let mut metadata = BTreeMap::from([
        (bucket::META_CLUSTER.to_owned(), request.cluster.clone()),
        (bucket::META_MEMBER.to_owned(), member_name.clone()),
        (META_FORMAT.to_owned(), format!("etcd-delta-v{}", format::VERSION)),
        (META_START.to_owned(), start.to_string()),
        (META_END.to_owned(), end.to_string()),
    ]);
    if let Store::Bucket(bucket) = &store {
        bucket.check_new_name(&name)?;
    }
    let mut sink = Sink::open(&store, &name, &metadata, &request.encoding).await?;
    let mut encoder = Encoder::default();
    let pumped = tokio::select! {
        pumped = pump(&mut history, &mut sink, &mut encoder, &header, first) => pumped,
        stop = stop.requested() => Err(ReadError::Failed(stopped(stop))),
    };
    let failure = match pumped {
        Ok(()) => None,
        Err(ReadError::Compacted(compact)) => Some(compacted(report, start, compact)),
        Err(ReadError::Failed(failure)) => Some(failure),
    };
    if let Some(failure) = failure {
        sink.abort(stop).await;
        return Err(failure);
    }
    let (trailer, summary) = encoder.trailer();
    if let Err(failure) = sink.write(&trailer).await {
        sink.abort(stop).await;
        return Err(failure);
    }
    metadata.insert(bucket::META_REVISION.to_owned(), end.to_string());
    metadata.insert(META_EVENTS.to_owned(), summary.events.to_string());
    let encoded = tokio::select! {
        finished = sink.finish(&summary, &mut metadata) => finished?,
        stop = stop.requested() => return Err(stopped(stop)),
    };
    report.object = Some(name);
    report.transactions = summary.transactions;
    report.events = summary.events;
    report.size_bytes = encoded.stored_bytes;
    report.size_mib = mib(encoded.stored_bytes);
    report.sha256 = Some(encoded.stored_sha256.clone());
    report.stored = encoded.stored_as();
    report.read_duration_ms = read_started.elapsed().as_millis() as u64;
    report.removed_partial_files = remove_stale_partials(&store, &request.cluster).await;
    Ok(true)
}

/// A partial file or staging object this old is a killed run's leftover: no run takes an hour
/// between its first write and its publication.
const STALE_PARTIAL: Duration = Duration::from_secs(3600);

/// Whether `name` is the hidden partial file (or staging object) of one of the cluster's deltas.
fn is_delta_partial(cluster: &str, name: &str) -> bool {
    name.strip_prefix('.')
        .and_then(|n| n.strip_suffix(".partial"))
        .is_some_and(|n| DeltaName::parse(cluster, n).is_some())
}

/// Removes the cluster's delta partial files (staging objects) older than [`STALE_PARTIAL`]:
/// younger ones may be another run's, still writing. What could not be removed stays for the
/// next run.
async fn remove_stale_partials(store: &Store, cluster: &str) -> Vec<String> {
    let mut removed = Vec::new();
    match store {
        Store::Folder(dir) => {
            let Ok(entries) = std::fs::read_dir(dir) else { return removed };
            let stale_before = std::time::SystemTime::now() - STALE_PARTIAL;
            for entry in entries.filter_map(Result::ok) {
                let Ok(name) = entry.file_name().into_string() else { continue };
                let stale = entry.metadata().ok().filter(|m| m.is_file()).and_then(|m| m.modified().ok());
                if is_delta_partial(cluster, &name)
                    && stale.is_some_and(|modified| modified < stale_before)
                    && std::fs::remove_file(entry.path()).is_ok()
                {
                    removed.push(name);
                }
            }
        }
        Store::Bucket(bucket) => {
            let Ok(objects) = bucket.list_names().await else { return removed };
            let stale_before =
                jiff::Timestamp::now() - jiff::SignedDuration::from_secs(STALE_PARTIAL.as_secs() as i64);
            for (name, _, modified) in objects {
                if is_delta_partial(cluster, &name)
                    && modified < stale_before
                    && bucket.delete(&name).await.is_ok()
                {
                    removed.push(name);
                }
            }
        }
    }
    for name in &removed {
        tracing::info!(file = %name, "removed a delta's partial file a killed run left");
    }
    removed
}

fn compacted(report: &mut DeltaReport, start: i64, compact: i64) -> Failure {
    report.failure_reason = Some(DeltaFailureReason::HistoryCompacted);
    report.compact_revision = Some(compact);
    Failure::bad_input(format!(
        "HistoryCompacted: etcd compacted its history to revision {compact}; the changes after revision \
         {start} are gone and no delta can hold them: take a full snapshot next (nothing was written)"
    ))
}

/// Every transaction up to the end into the sink, the header first.
async fn pump(
    history: &mut History,
    sink: &mut Sink<'_>,
    encoder: &mut Encoder,
    header: &Header,
    first: Option<Txn>,
) -> Result<(), ReadError> {
    sink.write(&encoder.header(header)).await?;
    let mut next = first;
    let mut last_log = Instant::now();
    let mut count = 0u64;
    while let Some(txn) = next {
        sink.write(&encoder.txn(&txn)).await?;
        count += 1;
        if last_log.elapsed() > PROGRESS_EVERY {
            tracing::info!(
                revision = txn.revision,
                end = header.end_revision,
                transactions = count,
                "reading history"
            );
            last_log = Instant::now();
        }
        next = history.next().await?;
    }
    Ok(())
}

/// `groundskeeper-job snapshot-delta`: runs, reports, and returns the exit code.
pub fn main(args: DeltaArgs) -> i32 {
    let clock = RunClock::start();
    let prepared = (|| {
        let grace =
            run::check_wait("--grace-period-seconds", Duration::from_secs(args.grace_period_seconds))?;
        Ok::<_, Failure>((args.request()?, args.connection.connection()?, grace))
    })();
    let result = match prepared {
        Ok((request, connection, grace)) => runtime().block_on(async {
            let stop = StopSignal::listen_or_warn(grace);
            run_delta(&connection, &request, &stop).await
        }),
        Err(failure) => clock.finish(
            Report::SnapshotDelta(DeltaReport { path: args.to.to.clone(), ..DeltaReport::default() }),
            Outcome::Failed,
            Some(failure),
        ),
    };
    if let Some(error) = &result.error {
        tracing::error!("no delta: {}", error.message);
    }
    run::report(&result, &args.result_file);
    run::exit_code(&result)
}

#[cfg(test)]
mod tests {
    /// A delta continues the newest full snapshot, or the furthest delta written since it; a
    /// delta older than the newest full snapshot (the timeline before a restore) never.
    #[test]
    fn the_chain_ends_at_the_newest_full_snapshot_or_a_delta_written_after_it() {
        let at = |s: i64| jiff::Timestamp::from_second(1_800_000_000 + s).unwrap();
        let delta = |time: i64, start: i64, end: i64| {
            (DeltaName { time: at(time), start_revision: start, end_revision: end }, format!("d{time}"))
        };
        let full =
            |revision: i64, time: i64| Some(NewestFull { revision, time: Some(at(time)), name: "f".into() });
        let end = chain_end;
        assert_eq!(
            end(full(100, 0), vec![delta(10, 100, 150), delta(20, 150, 170)]),
            Some((170, "d20".into()))
        );
        assert_eq!(end(full(100, 50), vec![delta(10, 100, 900)]), Some((100, "f".into())), "restored since");
        assert_eq!(end(full(100, 0), vec![delta(10, 50, 90)]), Some((100, "f".into())));
        assert_eq!(end(None, vec![delta(10, 50, 90)]), Some((90, "d10".into())));
        assert_eq!(end(None, vec![]), None);
    }

    use super::*;

    #[test]
    fn only_the_clusters_stale_delta_partials_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let name = |cluster: &str, start: i64| {
            DeltaName { time: jiff::Timestamp::UNIX_EPOCH, start_revision: start, end_revision: start + 1 }
                .render(cluster)
        };
        let old = std::time::SystemTime::now() - Duration::from_secs(7200);
        let files = [
            (format!(".{}.partial", name("main", 1)), true),
            (format!(".{}.partial", name("main", 2)), false),
            (format!(".{}.partial", name("main-2", 1)), true),
            (name("main", 3), true),
            (".main-20260101T000000Z.db.partial".to_owned(), true),
        ];
        for (file, is_old) in &files {
            let f = std::fs::File::create(dir.path().join(file)).unwrap();
            if *is_old {
                f.set_modified(old).unwrap();
            }
        }
        let store = Store::Folder(dir.path().to_owned());
        let removed = runtime().block_on(remove_stale_partials(&store, "main"));
        assert_eq!(removed, [files[0].0.clone()]);
        assert!(!dir.path().join(&files[0].0).exists());
        for (file, _) in &files[1..] {
            assert!(dir.path().join(file).exists(), "{file}");
        }
    }
}
