//! `groundskeeper-job snapshot-replay`: a full snapshot and its deltas replayed in order up to a
//! target revision in a throwaway member, and proven: the member serves the target revision, and
//! the keys there are counted and hashed (see [`keyspace_digest`]).
//!
//! The full snapshot is fetched, checked and restored into the scratch folder as `snapshot-prove`
//! does, and its member started on loopback. After `snapshot restore` the member's revision is
//! the snapshot's; each transaction applied then takes exactly one revision. So each original
//! transaction is applied as one etcd `Txn` (its puts and deletes, in their order), and the
//! revision etcd answers is checked against the one the transaction had: when every revision
//! after the snapshot's is replayed, each as one transaction, the replayed member's revisions
//! are the original ones, and "restored to revision R" is exact, create and mod revisions and
//! versions of every key included. A gap (a revision no delta holds) or a transaction that got
//! another revision fails the replay.
//!
//! **Leases.** A lease of the original cluster exists in the member only when the full snapshot
//! held it. A replayed put with a lease the member does not know grants that lease first, under
//! the same id, with a TTL of a day (granting takes no revision), so the key keeps its lease id.
//! The leases restored from the snapshot are kept alive while the replay runs: one that expired
//! in the member would delete its keys at a revision of its own. Deletes of keys whose lease
//! expired in the original are in the deltas like any delete, and replayed as such.
//!
//! The member runs with etcd's per-transaction limits raised (`--max-txn-ops`,
//! `--max-request-bytes`): a lease's expiry deletes all its keys in one revision, more than a
//! client's transaction may hold by default.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use etcd_client::{Client, GetOptions, LeaseGrantOptions, PutOptions, TxnOp};
use groundskeeper_protocol::operation::SnapshotStore;
use groundskeeper_protocol::result::{ReplayReport, SavedSnapshot};
use groundskeeper_protocol::{JobResult, Outcome, Report};
use groundskeeper_stores::etcd::connect::Connection;
use groundskeeper_stores::etcd::retention::NameTemplate;
use sha2::{Digest, Sha256};

use super::format::{Decoder, Kind, Txn};
use super::name::{self, DeltaName};
use super::{Store, check_delta_file};
use crate::etcd::codec::{self, Encoding, Key};
use crate::etcd::compact::runtime;
use crate::etcd::etcd_tools::{self, FromArgs, RestoreFlags, ToolArgs, WorkDir};
use crate::etcd::prove::{MEMBER, Member, STOP_GRACE, free_ports, start_timeout};
use crate::etcd::snapshot::{Destination, run_snapshot};
use crate::run::{self, Failure, RunClock, StopSignal};

/// TTL of a lease granted for replayed keys.
const GRANTED_TTL: i64 = 24 * 3600;
/// How often restored leases are kept alive.
const KEEP_ALIVE_EVERY: Duration = Duration::from_millis(500);
/// Keys per range while hashing the keyspace.
const PAGE: i64 = 1000;
/// How often progress is logged.
const PROGRESS_EVERY: Duration = Duration::from_secs(10);
/// The throwaway member's limits: one original transaction is one replayed transaction, however
/// many changes it made.
const MEMBER_FLAGS: &[&str] = &["--max-txn-ops=1000000", "--max-request-bytes=33554432"];

#[derive(clap::Args, Debug, Clone)]
pub struct ReplayArgs {
    #[command(flatten)]
    pub encoding: crate::etcd::codec::EncodingArgs,
    #[command(flatten)]
    pub from: FromArgs,
    /// The full snapshot to start from; default: the cluster's newest, by the time in its name.
    #[arg(long)]
    pub object: Option<String>,
    /// The template the cluster's full snapshots are named by (`{cluster}`, `{time}`).
    #[arg(long)]
    pub file_name_template: String,
    /// The cluster's name, as `{cluster}` in --file-name-template and in the deltas' names.
    #[arg(long)]
    pub cluster: String,
    /// The revision to replay to; default: as far as the deltas in the store reach.
    #[arg(long)]
    pub to_revision: Option<i64>,
    /// The keys the member must hold at the target revision.
    #[arg(long)]
    pub expect_keys: Option<i64>,
    /// A writable folder (an emptyDir) for the downloads and the throwaway member; what the run
    /// puts there is removed when it ends.
    #[arg(long)]
    pub scratch_dir: PathBuf,
    /// Once proven, save the replayed member's snapshot in the store under this name (a full
    /// snapshot at the target revision), written as a Snapshot run writes one: nothing under the
    /// name until it is whole and checked.
    #[arg(long)]
    pub save_as: Option<String>,
    #[command(flatten)]
    pub tools: ToolArgs,
    /// Where to write the result JSON.
    #[arg(long, default_value = run::DEFAULT_RESULT_FILE)]
    pub result_file: PathBuf,
    /// The pod's terminationGracePeriodSeconds. A stop kills the throwaway member and empties
    /// the scratch folder at once.
    #[arg(long, default_value_t = groundskeeper_protocol::exit::TERMINATION_GRACE_PERIOD_SECONDS)]
    pub grace_period_seconds: u64,
}

/// A replay as asked for, checked.
#[derive(Debug, Clone)]
pub(crate) struct Replay {
    pub store: SnapshotStore,
    pub object: Option<String>,
    pub template: NameTemplate,
    pub cluster: String,
    pub to_revision: Option<i64>,
    pub expect_keys: Option<i64>,
    pub scratch: PathBuf,
    pub save_as: Option<String>,
    pub etcd: etcd_tools::EtcdBinary,
    pub tool: etcd_tools::RestoreTool,
    /// Opens the store's encrypted objects; the saved snapshot is stored so.
    pub encoding: Encoding,
}

impl ReplayArgs {
    pub(crate) fn replay(&self) -> Result<Replay, Failure> {
        let encoding = self.encoding.encoding()?;
        let template = NameTemplate::parse(&self.file_name_template, &self.cluster)
            .map_err(|why| Failure::bad_input(format!("--file-name-template / --cluster: {why}")))?;
        name::check_cluster(&self.cluster).map_err(|why| Failure::bad_input(format!("--cluster: {why}")))?;
        if let Some(revision) = self.to_revision.filter(|r| *r < 1) {
            return Err(Failure::bad_input(format!("--to-revision {revision}: revisions start at 1")));
        }
        if let Some(keys) = self.expect_keys.filter(|k| *k < 0) {
            return Err(Failure::bad_input(format!("--expect-keys {keys}: cannot be negative")));
        }
        if let Some(name) = &self.save_as
            && (name.is_empty() || name.contains('/') || name.starts_with('.') || name.ends_with(".delta"))
        {
            return Err(Failure::bad_input(format!(
                "--save-as {name:?}: give a plain file name (no '/', not hidden, not a delta's)"
            )));
        }
        if !self.scratch_dir.is_absolute() {
            return Err(Failure::bad_input(format!(
                "--scratch-dir {}: give an absolute path",
                self.scratch_dir.display()
            )));
        }
        Ok(Replay {
            store: self.from.checked_store()?,
            object: self.object.clone(),
            template,
            cluster: self.cluster.clone(),
            to_revision: self.to_revision,
            expect_keys: self.expect_keys,
            scratch: self.scratch_dir.clone(),
            save_as: self.save_as.clone(),
            etcd: etcd_tools::find_etcd(self.tools.etcd.as_deref())?,
            tool: etcd_tools::find_restore_tool(self.tools.etcdutl.as_deref())?,
            encoding,
        })
    }
}

/// The deltas that lead from `from` to `to` (or as far as they reach when `to` is `None`), in
/// order: each starts at or before where the last one ended and ends after it; of several, the
/// one that reaches furthest. `Err` names the first revision no delta holds.
pub(crate) fn chain(
    deltas: &[(DeltaName, String)],
    from: i64,
    to: Option<i64>,
) -> Result<(Vec<(DeltaName, String)>, i64), i64> {
    let mut at = from;
    let mut chosen = Vec::new();
    while to.is_none_or(|to| at < to) {
        let next = deltas
            .iter()
            .filter(|(d, _)| d.start_revision <= at && d.end_revision > at)
            .max_by_key(|(d, _)| d.end_revision);
        match next {
            Some(delta) => {
                at = delta.0.end_revision;
                chosen.push(delta.clone());
            }
            None if to.is_none() => break,
            None => return Err(at + 1),
        }
    }
    Ok((chosen, to.unwrap_or(at)))
}

/// SHA-256 of the keyspace at `revision` and its number of keys: every key in key order, each as
/// its length and bytes, its value's length and bytes, then its create revision, mod revision
/// and version (8 bytes each, big-endian). Leases are left out. The same on the original cluster
/// (before a compaction) and on a member that restored and replayed it exactly.
pub async fn keyspace_digest(
    client: &mut Client,
    revision: i64,
) -> Result<(i64, String), etcd_client::Error> {
    let mut hash = Sha256::new();
    let mut keys = 0i64;
    let mut from = vec![0u8];
    let mut limit = PAGE;
    loop {
        let options = GetOptions::new().with_range(vec![0u8]).with_revision(revision).with_limit(limit);
        let page = match client.get(from.clone(), Some(options)).await {
            Ok(page) => page,
            // A page of large values can pass a gRPC message's 4 MiB: read smaller pages.
            Err(e) if limit > 1 && e.to_string().contains("message length too large") => {
                limit = (limit / 2).max(1);
                continue;
            }
            Err(e) => return Err(e),
        };
        for kv in page.kvs() {
            hash.update((kv.key().len() as u32).to_be_bytes());
            hash.update(kv.key());
            hash.update((kv.value().len() as u32).to_be_bytes());
            hash.update(kv.value());
            for n in [kv.create_revision(), kv.mod_revision(), kv.version()] {
                hash.update(n.to_be_bytes());
            }
            keys += 1;
        }
        match page.kvs().last() {
            Some(last) if page.more() => {
                from = last.key().to_vec();
                from.push(0);
            }
            _ => break,
        }
    }
    Ok((keys, crate::etcd::snapshot::hex(&hash.finalize())))
}

/// Replays; stops at once on a stop, killing the member and emptying the scratch folder.
pub(crate) async fn run_replay(replay: &Replay, stop: &StopSignal) -> JobResult {
    let clock = RunClock::start();
    let mut report = ReplayReport {
        path: match &replay.store {
            SnapshotStore::Folder(path) => path.clone(),
            SnapshotStore::Bucket(bucket) => bucket.url.clone(),
        },
        object: replay.object.clone().unwrap_or_default(),
        to_revision: replay.to_revision.unwrap_or_default(),
        expected_keys: replay.expect_keys,
        ..ReplayReport::default()
    };
    let outcome = tokio::select! {
        outcome = replay_with(replay, &mut report) => outcome,
        stop = stop.requested() => Err(stop.failure(
            "the replay was abandoned, its throwaway member killed and the scratch folder emptied",
        )),
    };
    report.replayed = outcome.is_ok();
    let failure = outcome.err();
    let mut result = clock.finish(Report::SnapshotReplay(report.clone()), Outcome::Succeeded, failure);
    if result.outcome == Outcome::Failed {
        result.stopped_by = stop.get().map(|s| s.signal.to_owned());
    }
    if result.message.is_none() {
        result.message = Some(
            format!(
                "{} (revision {}) and {} delta(s) replayed to revision {} in {} ms: {} transaction(s), {} \
             change(s), each at its original revision; etcd {} serves revision {} with {} keys \
             (keyspace sha256 {})",
                report.object,
                report.snapshot_revision.unwrap_or_default(),
                report.deltas.len(),
                report.to_revision,
                report.replay_ms,
                report.transactions,
                report.events,
                report.etcd_version.as_deref().unwrap_or_default(),
                report.revision.unwrap_or_default(),
                report.keys.unwrap_or_default(),
                report.keys_sha256.as_deref().unwrap_or_default(),
            ) + &report.saved.as_ref().map_or_else(String::new, |saved| {
                format!(
                    "; saved as {} ({} bytes, {:.2} MiB, sha256 {})",
                    saved.object,
                    saved.size_bytes,
                    saved.size_bytes as f64 / (1024.0 * 1024.0),
                    saved.sha256
                )
            }),
        );
    }
    result
}

async fn replay_with(replay: &Replay, report: &mut ReplayReport) -> Result<(), Failure> {
    // First, so that it is dropped (and removed) last, after the member is gone.
    let work = WorkDir::create(&replay.scratch, "replay")?;
    let key = replay.encoding.key.as_ref();
    let store = Store::open(&replay.store)?;
    let fetched =
        etcd_tools::fetch(&replay.store, replay.object.as_deref(), Some(&replay.template), work.path(), key)
            .await?;
    report.path = store.describe();
    report.object = fetched.object.clone();
    etcd_tools::check_sha256(&fetched, None)?;
    let from = fetched
        .metadata
        .get(super::bucket::META_REVISION)
        .and_then(|r| r.parse().ok())
        .or(fetched.checked.revision)
        .ok_or_else(|| {
            Failure::bad_input(format!("snapshot {}: the revision it holds is not known", fetched.location))
        })?;
    report.snapshot_revision = Some(from);
    if let Some(to) = replay.to_revision.filter(|to| *to < from) {
        return Err(Failure::bad_input(format!(
            "--to-revision {to} is before revision {from} of the full snapshot {}: name an older full \
             snapshot with --object",
            fetched.object
        )));
    }
    let names = store.names("--from").await?;
    // Deltas written before the full snapshot are of another timeline when the cluster was
    // restored to an older point since: never replayed on it.
    let since = replay.template.time_of(&fetched.object);
    let deltas: Vec<(DeltaName, String)> = name::deltas_of(&replay.cluster, &names)
        .into_iter()
        .filter(|(delta, _)| since.is_none_or(|time| delta.time >= time))
        .collect();
    let (chosen, to) = chain(&deltas, from, replay.to_revision).map_err(|missing| {
        Failure::bad_input(format!(
            "--to-revision {}: no delta of cluster {} in {} holds revision {missing} (the full snapshot \
             {} holds revision {from}; the deltas there: {})",
            replay.to_revision.unwrap_or_default(),
            replay.cluster,
            store.describe(),
            fetched.object,
            if deltas.is_empty() {
                "none".to_owned()
            } else {
                deltas
                    .iter()
                    .map(|(d, _)| format!("{}..={}", d.start_revision + 1, d.end_revision))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        ))
    })?;
    report.to_revision = to;
    report.deltas = chosen.iter().map(|(_, name)| name.clone()).collect();

    let started = Instant::now();
    let data = work.path().join("member");
    let peer = format!("http://127.0.0.1:{}", free_ports(1)?[0]);
    let flags = RestoreFlags {
        name: MEMBER.into(),
        initial_cluster: format!("{MEMBER}={peer}"),
        initial_advertise_peer_urls: peer,
        initial_cluster_token: MEMBER.into(),
    };
    etcd_tools::restore(
        &replay.tool,
        &fetched.path,
        &data,
        &flags,
        &work.path().join("restore.log"),
        etcd_tools::restore_timeout(fetched.checked.content_size()),
    )
    .await?;
    let mut member = Member::start(
        &replay.etcd,
        &data,
        &work,
        start_timeout(fetched.checked.content_size()),
        MEMBER_FLAGS,
    )
    .await?;
    report.restore_ms = started.elapsed().as_millis() as u64;
    report.etcd_version = Some(replay.etcd.version.clone());
    let source = DeltaSource { store: &store, work: work.path(), key };
    let mut outcome = replay_deltas(&source, &chosen, &mut member, from, to, report).await;
    if outcome.is_ok()
        && let Some(name) = &replay.save_as
    {
        outcome = save(&replay.store, name, &member, &replay.encoding)
            .await
            .map(|saved| report.saved = Some(saved));
    }
    let stopped = member.process.stop(STOP_GRACE).await;
    tracing::info!(by_sigterm = stopped, "the throwaway member stopped");
    outcome
}

/// The proven member's snapshot, saved in `store` as `name` by the Snapshot run's own writer
/// (streamed, checked, then in place under its name).
async fn save(
    store: &SnapshotStore,
    name: &str,
    member: &Member,
    encoding: &Encoding,
) -> Result<SavedSnapshot, Failure> {
    let connection =
        Connection::new(std::slice::from_ref(&member.url), None, None, &|piece| piece.to_owned())?;
    let destination = match store {
        SnapshotStore::Folder(folder) => Destination::File(Path::new(folder).join(name)),
        SnapshotStore::Bucket(bucket) => {
            Destination::Object { bucket: bucket.clone(), name: name.to_owned() }
        }
    };
    tracing::info!(to = %destination.describe(), "saving the replayed member's snapshot");
    let result = run_snapshot(&connection, &destination, None, encoding, &StopSignal::never()).await;
    let Report::Snapshot(taken) = &result.report else {
        return Err(Failure::retryable("the snapshot of the replayed member reported nothing"));
    };
    if let Some(error) = &result.error {
        return Err(Failure::retryable(format!(
            "the replayed member's snapshot could not be saved as {name}: {}",
            error.message
        )));
    }
    Ok(SavedSnapshot {
        object: name.to_owned(),
        size_bytes: taken.size_bytes,
        sha256: taken.sha256.clone().unwrap_or_default(),
        revision: taken.revision,
        keys: taken.keys,
        stored: taken.stored.clone(),
    })
}

/// Where the deltas are read: their store, the folder a bucket's are downloaded into, the key
/// encrypted ones are opened with.
#[derive(Clone, Copy)]
struct DeltaSource<'a> {
    store: &'a Store,
    work: &'a Path,
    key: Option<&'a Key>,
}

async fn replay_deltas(
    source: &DeltaSource<'_>,
    chosen: &[(DeltaName, String)],
    member: &mut Member,
    from: i64,
    to: i64,
    report: &mut ReplayReport,
) -> Result<(), Failure> {
    let DeltaSource { store, work, key } = *source;
    let client = &mut member.client;
    let failed = |what: String, e: etcd_client::Error| {
        Failure::retryable(format!("the throwaway member: {what}: {e}"))
    };
    let status = client.status().await.map_err(|e| failed("status".into(), e))?;
    let restored_at = status.header().map(|h| h.revision()).unwrap_or_default();
    if restored_at != from {
        return Err(Failure::bad_input(format!(
            "the restored member serves revision {restored_at}, not the full snapshot's {from}"
        )));
    }
    let mut leases: BTreeSet<i64> = BTreeSet::new();
    let listed = client.leases().await.map_err(|e| failed("listing its leases".into(), e))?;
    let mut keepers = Vec::new();
    for lease in listed.leases() {
        leases.insert(lease.id());
        keepers.push(keep_alive(client.clone(), lease.id()));
    }
    let _keepers = AbortOnDrop(keepers);
    let started = Instant::now();
    let mut at = from;
    let mut last_log = Instant::now();
    for (delta, name) in chosen {
        let path = match store {
            Store::Folder(folder) => folder.join(name),
            Store::Bucket(bucket) => bucket.download(name, &work.join("delta"), key).await?.path,
        };
        tracing::info!(delta = %name, from = at, to, "replaying a delta");
        let location = store.locate(name);
        let bad = |why: String| Failure::bad_input(format!("delta {location}: {why}"));
        let file = std::fs::File::open(&path).map_err(|e| bad(format!("cannot open it: {e}")))?;
        // A folder's delta may be compressed or encrypted: decoded as it is read (a bucket's
        // was decoded on its way into the file). A key that does not open it is said first,
        // with its reason: the delta reader's errors are only text.
        let subject = format!("delta {location}");
        codec::check_key(&path, &subject, key)?;
        let file = codec::DecodingReader::new(
            std::io::BufReader::with_capacity(1 << 20, file),
            codec::Decoder::new(subject, key),
        );
        let mut decoder = Decoder::new(std::io::BufReader::with_capacity(1 << 20, file));
        let header = decoder.header().map_err(bad)?;
        if (header.start_revision, header.end_revision) != (delta.start_revision, delta.end_revision) {
            return Err(bad(format!(
                "its header says revisions {}..={}, its name {}..={}",
                header.start_revision + 1,
                header.end_revision,
                delta.start_revision + 1,
                delta.end_revision
            )));
        }
        while let Some(txn) = decoder.next().map_err(bad)? {
            if txn.revision <= at || txn.revision > to {
                continue;
            }
            if txn.revision != at + 1 {
                return Err(bad(format!(
                    "it holds no transaction at revision {}: the replay cannot reach revision {to} exactly",
                    at + 1
                )));
            }
            apply(client, &txn, &mut leases, report).await.map_err(|e| {
                failed(format!("replaying the transaction of revision {}", txn.revision), e)
            })
            .and_then(|got| {
                if got == txn.revision {
                    Ok(())
                } else {
                    Err(Failure::bad_input(format!(
                        "the transaction of revision {} was replayed as revision {got}: the replay is not \
                         exact (a lease restored from the snapshot expired, or a change is missing)",
                        txn.revision
                    )))
                }
            })?;
            at = txn.revision;
            report.transactions += 1;
            report.events += txn.events.len() as u64;
            if last_log.elapsed() > PROGRESS_EVERY {
                tracing::info!(revision = at, to, transactions = report.transactions, "replaying");
                last_log = Instant::now();
            }
        }
        // The trailer too: a delta is replayed only when all of it is whole.
        drop(decoder);
        check_delta_file(&path, key).map_err(bad)?;
        if let Store::Bucket(_) = store {
            let _ = std::fs::remove_file(&path);
        }
    }
    report.replay_ms = started.elapsed().as_millis() as u64;
    if at != to {
        return Err(Failure::bad_input(format!("the deltas reach revision {at}, not {to}")));
    }
    report.revisions_exact = true;
    let status = client.status().await.map_err(|e| failed("status".into(), e))?;
    let served = status.header().map(|h| h.revision()).unwrap_or_default();
    report.revision = Some(served);
    let (keys, sha256) =
        keyspace_digest(client, to).await.map_err(|e| failed(format!("reading revision {to}"), e))?;
    report.keys = Some(keys);
    report.keys_sha256 = Some(sha256);
    if served != to {
        return Err(Failure::bad_input(format!("the replayed member serves revision {served}, not {to}")));
    }
    if let Some(want) = report.expected_keys
        && want != keys
    {
        return Err(Failure::bad_input(format!("the replayed member holds {keys} keys at {to}, not {want}")));
    }
    Ok(())
}

/// Applies one original transaction as one `Txn`; the revision etcd gave it.
async fn apply(
    client: &mut Client,
    txn: &Txn,
    leases: &mut BTreeSet<i64>,
    report: &mut ReplayReport,
) -> Result<i64, etcd_client::Error> {
    let mut ops = Vec::with_capacity(txn.events.len());
    for event in &txn.events {
        match event.kind {
            Kind::Put => {
                let mut options = PutOptions::new();
                if event.lease != 0 {
                    if leases.insert(event.lease) {
                        client
                            .lease_grant(GRANTED_TTL, Some(LeaseGrantOptions::new().with_id(event.lease)))
                            .await?;
                        report.leases_granted += 1;
                    }
                    options = options.with_lease(event.lease);
                }
                ops.push(TxnOp::put(event.key.clone(), event.value.clone(), Some(options)));
            }
            Kind::Delete => ops.push(TxnOp::delete(event.key.clone(), None)),
        }
    }
    let response = client.txn(etcd_client::Txn::new().and_then(ops)).await?;
    Ok(response.header().map(|h| h.revision()).unwrap_or_default())
}

/// Keeps a restored lease alive until aborted.
fn keep_alive(mut client: Client, id: i64) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let Ok((mut keeper, mut responses)) = client.lease_keep_alive(id).await else { return };
        loop {
            if keeper.keep_alive().await.is_err() || responses.message().await.is_err() {
                return;
            }
            tokio::time::sleep(KEEP_ALIVE_EVERY).await;
        }
    })
}

struct AbortOnDrop(Vec<tokio::task::JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.iter().for_each(|task| task.abort());
    }
}

/// `groundskeeper-job snapshot-replay`: runs, reports, and returns the exit code.
pub fn main(args: ReplayArgs) -> i32 {
    let clock = RunClock::start();
    let prepared = (|| {
        let grace =
            run::check_wait("--grace-period-seconds", Duration::from_secs(args.grace_period_seconds))?;
        Ok::<_, Failure>((args.replay()?, grace))
    })();
    let result = match prepared {
        Ok((replay, grace)) => runtime().block_on(async {
            let stop = StopSignal::listen_or_warn(grace);
            run_replay(&replay, &stop).await
        }),
        Err(failure) => clock.finish(
            Report::SnapshotReplay(ReplayReport { path: args.from.from.clone(), ..ReplayReport::default() }),
            Outcome::Failed,
            Some(failure),
        ),
    };
    if let Some(error) = &result.error {
        tracing::error!("not replayed: {}", error.message);
    }
    run::report(&result, &args.result_file);
    run::exit_code(&result)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta(start: i64, end: i64) -> (DeltaName, String) {
        let name = DeltaName { time: jiff::Timestamp::UNIX_EPOCH, start_revision: start, end_revision: end };
        let text = name.render("main");
        (name, text)
    }

    #[test]
    fn the_chain_reaches_the_target_or_names_the_gap() {
        let deltas = [delta(10, 20), delta(20, 30), delta(15, 25), delta(30, 40)];
        let ends =
            |chosen: &[(DeltaName, String)]| chosen.iter().map(|(d, _)| d.end_revision).collect::<Vec<_>>();
        let (chosen, to) = chain(&deltas, 10, Some(35)).unwrap();
        assert_eq!((ends(&chosen), to), (vec![20, 30, 40], 35));
        // From inside a delta (a full snapshot taken between two deltas): the one reaching furthest.
        let (chosen, to) = chain(&deltas, 22, None).unwrap();
        assert_eq!((ends(&chosen), to), (vec![30, 40], 40));
        // Nothing to replay.
        assert_eq!(chain(&deltas, 40, Some(40)).unwrap().0.len(), 0);
        assert_eq!(chain(&deltas, 5, Some(12)).unwrap_err(), 6);
        assert_eq!(chain(&deltas[..2], 10, Some(31)).unwrap_err(), 31);
    }
}
