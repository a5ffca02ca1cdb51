//! `groundskeeper-job compact`: drop MVCC history older than a revision.
//!
//! Compaction is cluster-wide (it goes through raft), so one request to any member does it.
//! Compacting a point that is already compacted is success: a retried Job must not fail because
//! its first attempt worked.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use etcd_client::{Client, CompactionOptions};
use groundskeeper_protocol::result::CompactReport;
use groundskeeper_protocol::{JobResult, Outcome, Report};

use super::lock::{Acquired, DefragLock};
use crate::run::{self, Failure, RunClock, StopSignal};
use futures::future::join_all;
use groundskeeper_stores::etcd::connect::{
    Connection, EndpointArgs, REQUEST_TIMEOUT, error_chain, mixed_clusters, unreachable_failure,
};
pub use groundskeeper_stores::etcd::plan::CompactTarget;

#[derive(clap::Args, Debug, Clone)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["retain_revisions", "revision"])))]
pub struct CompactArgs {
    #[command(flatten)]
    pub connection: EndpointArgs,
    /// Keep this many revisions of history: compact to current − N.
    #[arg(long)]
    pub retain_revisions: Option<i64>,
    /// Compact to exactly this revision.
    #[arg(long)]
    pub revision: Option<i64>,
    /// Never compact past this revision (the newest one backed up, while incremental backups are
    /// on): a target beyond it is held back to it, and the result says so.
    #[arg(long)]
    pub not_past: Option<i64>,
    /// Wait until the compaction has been applied to the backend (the freed pages are then
    /// visible to a defrag).
    #[arg(long)]
    pub physical: bool,
    /// Where to write the result JSON.
    #[arg(long, default_value = run::DEFAULT_RESULT_FILE)]
    pub result_file: PathBuf,
    /// The pod's terminationGracePeriodSeconds: after SIGTERM the compaction call in flight is
    /// waited for until a few seconds before it ends, then the result is written.
    #[arg(long, default_value_t = groundskeeper_protocol::exit::TERMINATION_GRACE_PERIOD_SECONDS)]
    pub grace_period_seconds: u64,
}

impl CompactArgs {
    pub fn target(&self) -> Result<CompactTarget, Failure> {
        match (self.retain_revisions, self.revision) {
            (Some(n), None) if n >= 0 => Ok(CompactTarget::RetainRevisions(n)),
            (Some(n), None) => Err(Failure::bad_input(format!("--retain-revisions {n}: must be 0 or more"))),
            (None, Some(r)) if r >= 1 => Ok(CompactTarget::Revision(r)),
            (None, Some(r)) => Err(Failure::bad_input(format!("--revision {r}: must be 1 or more"))),
            _ => Err(Failure::bad_input("give exactly one of --retain-revisions and --revision")),
        }
    }
}

/// The revision to compact to, given the store's current one; `None` when the history is not
/// longer than what is kept (nothing to compact).
pub fn target_revision(target: CompactTarget, current: i64) -> Result<Option<i64>, Failure> {
    match target {
        CompactTarget::RetainRevisions(n) => Ok(Some(current - n).filter(|r| *r >= 1)),
        CompactTarget::Revision(r) if r > current => {
            Err(Failure::bad_input(format!("revision {r} is a future revision (the store is at {current})")))
        }
        CompactTarget::Revision(r) => Ok(Some(r)),
    }
}

/// `target` held back at `not_past` (the newest revision backed up): the revision to compact to
/// (`None`: none, as nothing at or after revision 1 is backed up), and the one it was held back
/// from when it was.
pub fn held_at(target: Option<i64>, not_past: Option<i64>) -> (Option<i64>, Option<i64>) {
    match (target, not_past) {
        (Some(wanted), Some(limit)) if wanted > limit => (Some(limit).filter(|l| *l >= 1), Some(wanted)),
        _ => (target, None),
    }
}

/// What a compaction request came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compacted {
    Done,
    /// The revision had been compacted already: success, nothing changed.
    AlreadyCompacted,
}

/// Maps etcd's compaction errors (gRPC OutOfRange, see `docs/protocol.md`, "etcd") to the run's outcome.
pub fn classify_compact_error(message: &str) -> Result<Compacted, Failure> {
    if message.contains("required revision has been compacted") {
        Ok(Compacted::AlreadyCompacted)
    } else if message.contains("required revision is a future revision") {
        Err(Failure::bad_input(format!("compaction refused: {message}")))
    } else {
        Err(Failure::retryable(format!("compaction failed: {message}")))
    }
}

/// The store's current revision, from any member.
pub async fn current_revision(client: &mut Client) -> Result<i64, Failure> {
    let status = client
        .status()
        .await
        .map_err(|e| Failure::retryable(format!("cannot read the current revision: {e}")))?;
    status
        .header()
        .map(|h| h.revision())
        .ok_or_else(|| Failure::retryable("the status response carried no header"))
}

/// Compacts to `revision`.
pub async fn compact_to(client: &mut Client, revision: i64, physical: bool) -> Result<Compacted, Failure> {
    let options = physical.then(|| CompactionOptions::new().with_physical());
    match client.compact(revision, options).await {
        Ok(_) => Ok(Compacted::Done),
        Err(err) => classify_compact_error(&err.to_string()),
    }
}

/// Runs one compaction against the cluster behind `connection`.
pub async fn run_compact(connection: &Connection, target: CompactTarget, physical: bool) -> JobResult {
    run_compact_until(connection, Limits { target, not_past: None }, physical, &StopSignal::never()).await
}

/// How far a compaction goes: its target, held back at `not_past` when given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub target: CompactTarget,
    pub not_past: Option<i64>,
}

/// Runs one compaction; after a stop, the calls in flight are waited for until the stop's
/// deadline. A compaction is one call: there is nothing smaller to stop.
pub async fn run_compact_until(
    connection: &Connection,
    limits: Limits,
    physical: bool,
    stop: &StopSignal,
) -> JobResult {
    let clock = RunClock::start();
    let mut report = CompactReport { physical, ..CompactReport::default() };
    let lock = Mutex::new(None);
    let outcome = tokio::select! {
        outcome = compact_with(connection, limits, physical, &mut report, &lock) => outcome,
        given_up = stop.deadline_passed() => Err(given_up.failure(
            "the grace period was ending with the compaction call in flight; whether it took effect is unknown",
        )),
    };
    // Given back however the run ended (a run given up on at its deadline too), so that the
    // retry is not refused by a lock nobody holds.
    let held = lock.lock().expect("the lock's slot").take();
    if let Some(lock) = held {
        lock.release().await;
    }
    let (outcome, failure) = match outcome {
        Ok(outcome) => (outcome, None),
        Err(failure) => (Outcome::Failed, Some(failure)),
    };
    let mut result = clock.finish(Report::Compact(report.clone()), outcome, failure);
    if result.outcome == Outcome::Failed {
        result.stopped_by = stop.get().map(|s| s.signal.to_owned());
    }
    if result.message.is_none() {
        result.message = Some(match outcome {
            Outcome::Skipped if report.held_back_from.is_some() => format!(
                "compaction to revision {} held back: nothing is backed up yet (--not-past {})",
                report.held_back_from.unwrap_or_default(),
                limits.not_past.unwrap_or_default()
            ),
            Outcome::Skipped => {
                format!("history is only {} revisions long: nothing to compact", report.current_revision)
            }
            _ if report.held_back_from.is_some() => format!(
                "compacted to revision {}, held back from {}: it never passes the newest revision backed up",
                report.compacted_revision,
                report.held_back_from.unwrap_or_default()
            ),
            _ if report.already_compacted => {
                format!("revision {} was already compacted", report.compacted_revision)
            }
            _ => format!("compacted to revision {}", report.compacted_revision),
        });
    }
    result
}

async fn compact_with(
    connection: &Connection,
    limits: Limits,
    physical: bool,
    report: &mut CompactReport,
    lock: &Mutex<Option<DefragLock>>,
) -> Result<Outcome, Failure> {
    let clients = answering_clients(connection).await?;
    let mut client = clients[0].clone();
    // Never beside a defrag of the same cluster (nor a second compaction): the cluster's lock,
    // renewed and released through every member that answered. A cluster out of space grants
    // no lease; compacting is then part of the cure.
    match DefragLock::acquire(clients).await? {
        Acquired::Held(held) => *lock.lock().expect("the lock's slot") = Some(*held),
        Acquired::NoSpace(why) => {
            tracing::warn!(%why, "the cluster takes no write: compacting without the lock")
        }
    }
    compact_once(&mut client, limits, physical, report).await
}

async fn compact_once(
    client: &mut Client,
    limits: Limits,
    physical: bool,
    report: &mut CompactReport,
) -> Result<Outcome, Failure> {
    report.current_revision = current_revision(client).await?;
    let wanted = target_revision(limits.target, report.current_revision)?;
    let (target, held_back_from) = held_at(wanted, limits.not_past);
    report.held_back_from = held_back_from;
    let Some(revision) = target else {
        return Ok(Outcome::Skipped);
    };
    report.compacted_revision = revision;
    report.already_compacted = compact_to(client, revision, physical).await? == Compacted::AlreadyCompacted;
    Ok(Outcome::Succeeded)
}

/// A client on the first endpoint (in the order given) that answers a status call, once every
/// endpoint was asked (in parallel) which cluster it belongs to: endpoints of two clusters are
/// refused (exit 2) as `defrag` and `snapshot` refuse them, rather than compacting whichever
/// cluster is listed first.
pub async fn first_answering_client(connection: &Connection) -> Result<Client, Failure> {
    Ok(answering_clients(connection).await?.remove(0))
}

/// A client on every endpoint that answers, in the order given (at least one), once endpoints
/// of two clusters are refused as in [`first_answering_client`].
async fn answering_clients(connection: &Connection) -> Result<Vec<Client>, Failure> {
    let answers =
        join_all(connection.endpoints.iter().map(|endpoint| status_via(connection, endpoint))).await;
    let clusters: Vec<(String, u64)> = connection
        .endpoints
        .iter()
        .zip(&answers)
        .filter_map(|(endpoint, answer)| Some((endpoint.clone(), answer.as_ref().ok()?.1)))
        .collect();
    if let Some(mixed) = mixed_clusters(&clusters) {
        return Err(Failure::bad_input(mixed));
    }
    let mut errors = Vec::new();
    let mut clients = Vec::new();
    for (endpoint, answer) in connection.endpoints.iter().zip(answers) {
        match answer {
            Ok((client, _)) => clients.push(client),
            Err(why) => errors.push((endpoint.clone(), why)),
        }
    }
    if clients.is_empty() {
        return Err(unreachable_failure(&errors, connection.has_tls()));
    }
    Ok(clients)
}

/// A client on `endpoint` and the cluster id its status names.
async fn status_via(connection: &Connection, endpoint: &str) -> Result<(Client, u64), String> {
    let mut client = connection.client(endpoint, Some(REQUEST_TIMEOUT)).await.map_err(|e| error_chain(&e))?;
    let status = client.status().await.map_err(|e| error_chain(&e))?;
    let cluster = status.header().map(|h| h.cluster_id()).unwrap_or_default();
    Ok((client, cluster))
}

/// `groundskeeper-job compact`: runs, reports, and returns the exit code.
pub fn main(args: CompactArgs) -> i32 {
    let clock = RunClock::start();
    let prepared = args.target().and_then(|target| {
        if let Some(limit) = args.not_past.filter(|l| *l < 0) {
            return Err(Failure::bad_input(format!("--not-past {limit}: must be 0 or more")));
        }
        let grace =
            run::check_wait("--grace-period-seconds", Duration::from_secs(args.grace_period_seconds))?;
        Ok((Limits { target, not_past: args.not_past }, args.connection.connection()?, grace))
    });
    let result = match prepared {
        Ok((limits, connection, grace)) => runtime().block_on(async {
            let stop = StopSignal::listen_or_warn(grace);
            run_compact_until(&connection, limits, args.physical, &stop).await
        }),
        Err(failure) => {
            clock.finish(Report::Compact(CompactReport::default()), Outcome::Failed, Some(failure))
        }
    };
    run::report(&result, &args.result_file);
    run::exit_code(&result)
}

/// One thread is plenty: the runner waits on a handful of members.
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime can be built")
}

#[cfg(test)]
mod tests {
    use super::*;
    use groundskeeper_protocol::result::ErrorKind;

    #[test]
    fn target_revisions() {
        use CompactTarget::*;
        let cases = [
            (RetainRevisions(10), 100, Ok(Some(90))),
            (RetainRevisions(0), 100, Ok(Some(100))),
            (RetainRevisions(99), 100, Ok(Some(1))),
            (RetainRevisions(100), 100, Ok(None)),
            (RetainRevisions(1000), 100, Ok(None)),
            (Revision(100), 100, Ok(Some(100))),
            (Revision(5), 100, Ok(Some(5))),
            (Revision(101), 100, Err(ErrorKind::BadInput)),
        ];
        for (target, current, want) in cases {
            let got = target_revision(target, current).map_err(|f| f.kind);
            assert_eq!(got, want, "{target:?} at {current}");
        }
    }

    #[test]
    fn compaction_errors_map_to_outcomes() {
        let cases = [
            (
                "grpc request error: status: OutOfRange, message: \"etcdserver: mvcc: required revision has been compacted\"",
                Ok(Compacted::AlreadyCompacted),
            ),
            (
                "grpc request error: status: OutOfRange, message: \"etcdserver: mvcc: required revision is a future revision\"",
                Err(ErrorKind::BadInput),
            ),
            ("transport error: connection refused", Err(ErrorKind::Retryable)),
            ("grpc request error: status: Unavailable", Err(ErrorKind::Retryable)),
        ];
        for (message, want) in cases {
            assert_eq!(classify_compact_error(message).map_err(|f| f.kind), want, "{message}");
        }
    }

    /// The newest revision backed up bounds the target; below it, or without it, nothing changes;
    /// nothing backed up (0) means no compaction at all.
    #[test]
    fn a_target_past_the_newest_backup_is_held_back_to_it() {
        let cases = [
            (Some(500), Some(400), (Some(400), Some(500))),
            (Some(400), Some(400), (Some(400), None)),
            (Some(300), Some(400), (Some(300), None)),
            (Some(500), None, (Some(500), None)),
            (None, Some(400), (None, None)),
            (Some(500), Some(0), (None, Some(500))),
        ];
        for (target, not_past, want) in cases {
            assert_eq!(held_at(target, not_past), want, "{target:?} not past {not_past:?}");
        }
    }

    #[test]
    fn flags_are_checked() {
        let args = |retain: Option<i64>, revision: Option<i64>| CompactArgs {
            connection: EndpointArgs::default(),
            retain_revisions: retain,
            revision,
            not_past: None,
            physical: false,
            result_file: "/dev/null".into(),
            grace_period_seconds: 60,
        };
        assert_eq!(args(Some(5), None).target(), Ok(CompactTarget::RetainRevisions(5)));
        assert_eq!(args(None, Some(7)).target(), Ok(CompactTarget::Revision(7)));
        for (retain, revision) in [(Some(-1), None), (None, Some(0)), (None, None), (Some(1), Some(1))] {
            assert_eq!(
                args(retain, revision).target().map_err(|f| f.kind),
                Err(ErrorKind::BadInput),
                "{retain:?} {revision:?}"
            );
        }
    }
}
