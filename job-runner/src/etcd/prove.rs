//! `groundskeeper-job snapshot-prove`: proof that a snapshot restores. The snapshot (named, or
//! the cluster's newest by its file name template) is fetched and checked as `snapshot verify`
//! checks a file, restored with etcd's own tool into a throwaway member in the scratch folder,
//! and that member is started on loopback: it must serve the revision recorded when the snapshot
//! was taken and hold the recorded number of keys at that revision.
//!
//! The member's ports are picked by binding port 0; when another process takes one before etcd
//! binds it, the member is started again on new ports (a restarted member does not check its
//! listening peer port against the one recorded in its data). The member is stopped with
//! SIGTERM, then killed, and everything the run made in the scratch folder is removed, also when
//! the run fails or is stopped by a signal.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use etcd_client::{Client, ConnectOptions, GetOptions};
use groundskeeper_protocol::operation::SnapshotStore;
use groundskeeper_protocol::result::{ErrorKind, ProveReport, mib};
use groundskeeper_protocol::{JobResult, Outcome, Report};
use groundskeeper_stores::etcd::retention::NameTemplate;

use super::codec::{Encoded, Key};
use super::compact::runtime;
use super::etcd_tools::{
    self, EtcdBinary, Fetched, FromArgs, Process, RestoreFlags, RestoreTool, ToolArgs, WorkDir, tool_failed,
};
use crate::run::{self, Failure, RunClock, StopSignal};

/// What etcd writes first with `--logger=zap` (3.4 and 3.5 alike): a JSON log line. An etcd that
/// exits without one never got to the restored data.
const ETCD_LOGGED: &str = "\"level\":\"";
/// Starts of the member before a port taken by someone else counts as a failure.
const START_ATTEMPTS: usize = 5;
/// How long the member has to exit after SIGTERM before it is killed.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(10);
/// Each request to the member.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// The member's name, and its cluster's token, in the throwaway data.
pub(crate) const MEMBER: &str = "groundskeeper-proof";

#[derive(clap::Args, Debug, Clone)]
pub struct ProveArgs {
    #[command(flatten)]
    pub key: crate::etcd::codec::KeyArgs,
    #[command(flatten)]
    pub from: FromArgs,
    /// The snapshot's name in the folder or bucket; default: the cluster's newest, by the time
    /// in its name.
    #[arg(long)]
    pub object: Option<String>,
    /// The template the cluster's snapshots are named by (`{cluster}`, `{time}`).
    #[arg(long)]
    pub file_name_template: String,
    /// The cluster's name, as `{cluster}` in --file-name-template.
    #[arg(long)]
    pub cluster: String,
    /// The revision the restored member must serve; default: the object's `revision`
    /// metadata, else the revision read from the file.
    #[arg(long)]
    pub expect_revision: Option<i64>,
    /// The keys it must hold at that revision; default: the object's `keys` metadata, else not
    /// compared (the result says so).
    #[arg(long)]
    pub expect_keys: Option<i64>,
    /// The SHA-256 the whole file must have, as `sha256sum` prints it.
    #[arg(long)]
    pub expect_sha256: Option<String>,
    /// A writable folder (an emptyDir) for the download and the throwaway member; what the run
    /// puts there is removed when it ends.
    #[arg(long)]
    pub scratch_dir: PathBuf,
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

/// A proof as asked for, checked, with the binaries it runs.
#[derive(Debug, Clone)]
pub(crate) struct Proof {
    pub store: SnapshotStore,
    pub object: Option<String>,
    pub template: NameTemplate,
    pub expect_revision: Option<i64>,
    pub expect_keys: Option<i64>,
    pub expect_sha256: Option<String>,
    pub scratch: PathBuf,
    pub etcd: EtcdBinary,
    pub tool: RestoreTool,
    /// Opens an encrypted snapshot.
    pub key: Option<Key>,
}

impl ProveArgs {
    /// Everything that can be checked before the snapshot is fetched: bad input when wrong.
    pub(crate) fn proof(&self) -> Result<Proof, Failure> {
        let key = self.key.key()?;
        let template = NameTemplate::parse(&self.file_name_template, &self.cluster)
            .map_err(|why| Failure::bad_input(format!("--file-name-template / --cluster: {why}")))?;
        if let Some(revision) = self.expect_revision.filter(|r| *r < 1) {
            return Err(Failure::bad_input(format!("--expect-revision {revision}: revisions start at 1")));
        }
        if let Some(keys) = self.expect_keys.filter(|k| *k < 0) {
            return Err(Failure::bad_input(format!("--expect-keys {keys}: cannot be negative")));
        }
        if !self.scratch_dir.is_absolute() {
            return Err(Failure::bad_input(format!(
                "--scratch-dir {}: give an absolute path",
                self.scratch_dir.display()
            )));
        }
        Ok(Proof {
            store: self.from.checked_store()?,
            object: self.object.clone(),
            template,
            expect_revision: self.expect_revision,
            expect_keys: self.expect_keys,
            expect_sha256: etcd_tools::checked_sha256(self.expect_sha256.as_deref())?,
            scratch: self.scratch_dir.clone(),
            etcd: etcd_tools::find_etcd(self.tools.etcd.as_deref())?,
            tool: etcd_tools::find_restore_tool(self.tools.etcdutl.as_deref())?,
            key,
        })
    }
}

/// The store as the report names it, before the snapshot is known.
fn store_text(store: &SnapshotStore) -> String {
    match store {
        SnapshotStore::Folder(path) => path.clone(),
        SnapshotStore::Bucket(bucket) => bucket.url.clone(),
    }
}

/// Proves the snapshot; stops at once on a stop, killing the member and emptying the scratch
/// folder.
pub(crate) async fn run_prove(proof: &Proof, stop: &StopSignal) -> JobResult {
    let clock = RunClock::start();
    let mut report = ProveReport {
        path: store_text(&proof.store),
        object: proof.object.clone().unwrap_or_default(),
        ..ProveReport::default()
    };
    let outcome = tokio::select! {
        outcome = prove(proof, &mut report) => outcome,
        stop = stop.requested() => Err(stop.failure(
            "the proof was abandoned, its throwaway member killed and the scratch folder emptied",
        )),
    };
    report.proven = outcome.is_ok();
    let failure = outcome.err();
    let mut result = clock.finish(Report::SnapshotProve(report.clone()), Outcome::Succeeded, failure);
    if result.outcome == Outcome::Failed {
        result.stopped_by = stop.get().map(|s| s.signal.to_owned());
    }
    if result.message.is_none() {
        result.message = Some(proven_message(&report, &proof.tool));
    }
    result
}

fn proven_message(report: &ProveReport, tool: &RestoreTool) -> String {
    let keys = match (report.keys, report.expected_keys) {
        (Some(keys), Some(_)) => format!("{keys} keys as recorded"),
        (Some(keys), None) => format!("{keys} keys (no count was recorded: not compared)"),
        (None, _) => "no key count".to_owned(),
    };
    let revision = match (report.revision, report.expected_revision) {
        (Some(revision), Some(_)) => format!("revision {revision} as recorded"),
        (Some(revision), None) => {
            format!("revision {revision} (the snapshot holds no key revision: not compared)")
        }
        (None, _) => "an unknown revision".to_owned(),
    };
    format!(
        "snapshot {} restores: {tool} restored it ({:.2} MiB, sha256 {}), and etcd {} started on it \
         in {} ms and served {revision}, with {keys}",
        report.path,
        mib(report.size_bytes),
        report.sha256.as_deref().unwrap_or_default(),
        report.etcd_version.as_deref().unwrap_or_default(),
        report.start_ms,
    )
}

async fn prove(proof: &Proof, report: &mut ProveReport) -> Result<(), Failure> {
    // First, so that it is dropped (and removed) last, after the member is gone.
    let work = WorkDir::create(&proof.scratch, "prove")?;
    let started = Instant::now();
    // The snapshot is named in the result before its bytes are read: a proof that fails on them
    // (a checksum that does not match, a bad trailer) is recorded against it.
    let (location, object) =
        etcd_tools::choose(&proof.store, proof.object.as_deref(), Some(&proof.template)).await?;
    report.path = location;
    report.object = object.clone();
    tracing::info!(snapshot = %report.path, "fetching the snapshot");
    let fetched = etcd_tools::fetch(
        &proof.store,
        Some(&object),
        Some(&proof.template),
        work.path(),
        proof.key.as_ref(),
    )
    .await?;
    report.path = fetched.location.clone();
    report.object = fetched.object.clone();
    report.size_bytes = fetched.checked.size;
    report.sha256 = Some(fetched.checked.sha256.clone());
    report.stored = fetched.checked.content.as_ref().map(Encoded::stored_as).unwrap_or_default();
    etcd_tools::check_sha256(&fetched, proof.expect_sha256.as_deref())?;
    report.expected_revision =
        proof.expect_revision.or_else(|| recorded_number(&fetched, "revision")).or(fetched.checked.revision);
    report.expected_keys = proof.expect_keys.or_else(|| recorded_number(&fetched, "keys"));
    report.fetch_ms = started.elapsed().as_millis() as u64;

    let started = Instant::now();
    let data = work.path().join("member");
    let peer = format!("http://127.0.0.1:{}", free_ports(1)?[0]);
    let flags = RestoreFlags {
        name: MEMBER.into(),
        initial_cluster: format!("{MEMBER}={peer}"),
        initial_advertise_peer_urls: peer,
        initial_cluster_token: MEMBER.into(),
    };
    tracing::info!(snapshot = %fetched.path.display(), tool = %proof.tool, "restoring into a throwaway member");
    etcd_tools::restore(
        &proof.tool,
        &fetched.path,
        &data,
        &flags,
        &work.path().join("restore.log"),
        etcd_tools::restore_timeout(fetched.checked.content_size()),
    )
    .await?;
    report.restore_ms = started.elapsed().as_millis() as u64;

    let started = Instant::now();
    tracing::info!(etcd = %proof.etcd.path.display(), version = %proof.etcd.version, "starting the throwaway member");
    let mut member =
        Member::start(&proof.etcd, &data, &work, start_timeout(fetched.checked.content_size()), &[]).await?;
    report.start_ms = started.elapsed().as_millis() as u64;
    report.etcd_version = Some(proof.etcd.version.clone());
    tracing::info!(url = %member.url, start_ms = report.start_ms, "checking what the member serves");
    let served = member.served(report.expected_revision).await;
    let stopped = member.process.stop(STOP_GRACE).await;
    tracing::info!(by_sigterm = stopped, "the throwaway member stopped");
    let (revision, keys) = served?;
    report.revision = Some(revision);
    report.keys = Some(keys);
    compare(&fetched, report)
}

/// A number the object's metadata recorded; one that is no number is not taken.
fn recorded_number(fetched: &Fetched, key: &str) -> Option<i64> {
    let text = fetched.metadata.get(key)?;
    match text.trim().parse() {
        Ok(n) => Some(n),
        Err(_) => {
            tracing::warn!(object = %fetched.object, key, value = %text, "the object's metadata holds no number here: not used");
            None
        }
    }
}

/// The served revision and keys against what was expected: bad input naming what differed.
fn compare(fetched: &Fetched, report: &ProveReport) -> Result<(), Failure> {
    let mut differed = Vec::new();
    if let (Some(want), Some(got)) = (report.expected_revision, report.revision)
        && want != got
    {
        differed.push(format!("it served revision {got}, not the recorded {want}"));
    }
    if let (Some(want), Some(got)) = (report.expected_keys, report.keys)
        && want != got
    {
        differed.push(format!("it held {got} keys, not the recorded {want}"));
    }
    if differed.is_empty() {
        return Ok(());
    }
    Err(Failure::bad_input(format!(
        "snapshot {} is not proven: restored and started, {}",
        fetched.location,
        differed.join(", and ")
    )))
}

/// How long the member has to answer: a minute, and half a minute more per GiB (etcd reads every
/// key into its index when it starts).
pub(crate) fn start_timeout(size: u64) -> Duration {
    Duration::from_secs(60 + 30 * size.div_ceil(1 << 30))
}

/// `n` distinct free loopback ports, held until all are picked, then let go for etcd to bind.
pub(crate) fn free_ports(n: usize) -> Result<Vec<u16>, Failure> {
    let listeners = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Failure::retryable(format!("cannot pick a free loopback port: {e}")))?;
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<Result<_, _>>()
        .map_err(|e| Failure::retryable(format!("cannot pick a free loopback port: {e}")))
}

/// The throwaway member, killed when dropped.
pub(crate) struct Member {
    pub(crate) process: Process,
    pub(crate) client: Client,
    pub(crate) url: String,
}

/// Why a start did not give a member.
enum StartFailed {
    /// Another process took a port before etcd bound it: start again on new ports.
    PortTaken,
    Failed(Failure),
}

impl Member {
    pub(crate) async fn start(
        etcd: &EtcdBinary,
        data: &std::path::Path,
        work: &WorkDir,
        timeout: Duration,
        extra_flags: &[&str],
    ) -> Result<Self, Failure> {
        for attempt in 1..=START_ATTEMPTS {
            let ports = free_ports(2)?;
            let url = format!("http://127.0.0.1:{}", ports[0]);
            let peer = format!("http://127.0.0.1:{}", ports[1]);
            let mut command = Command::new(&etcd.path);
            command
                .arg(format!("--name={MEMBER}"))
                .arg(format!("--data-dir={}", data.display()))
                .arg(format!("--listen-client-urls={url}"))
                .arg(format!("--advertise-client-urls={url}"))
                .arg(format!("--listen-peer-urls={peer}"))
                .arg(format!("--initial-advertise-peer-urls={peer}"))
                .arg(format!("--initial-cluster={MEMBER}={peer}"))
                .arg(format!("--initial-cluster-token={MEMBER}"))
                .arg("--logger=zap")
                .args(extra_flags)
                .stdin(std::process::Stdio::null());
            let log = work.path().join(format!("etcd-{attempt}.log"));
            let process = Process::spawn(&mut command, &log)
                .map_err(|e| Failure::retryable(format!("cannot start {}: {e}", etcd.path.display())))?;
            match Self::answering(process, url, &etcd.path, timeout).await {
                Ok(member) => return Ok(member),
                Err(StartFailed::PortTaken) => {
                    tracing::info!(
                        attempt,
                        "a port was taken before etcd bound it; starting again on new ports"
                    );
                }
                Err(StartFailed::Failed(failure)) => return Err(failure),
            }
        }
        Err(Failure::retryable(format!(
            "the throwaway member could not bind free loopback ports in {START_ATTEMPTS} attempts"
        )))
    }

    /// Waits until the member answers a status request; bounded by `timeout`.
    async fn answering(
        mut process: Process,
        url: String,
        etcd_path: &std::path::Path,
        timeout: Duration,
    ) -> Result<Self, StartFailed> {
        let deadline = Instant::now() + timeout;
        let options = ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(1))
            .with_timeout(Duration::from_secs(5));
        loop {
            let exited =
                process.try_wait().map_err(|e| StartFailed::Failed(Failure::retryable(e.to_string())))?;
            if let Some(status) = exited {
                let tail = process.log_tail();
                if tail.contains("address already in use") {
                    return Err(StartFailed::PortTaken);
                }
                // etcd that never logged (it failed to load), or was killed: nothing said against
                // the snapshot.
                if tool_failed(status, process.logged(ETCD_LOGGED), &tail) {
                    return Err(StartFailed::Failed(Failure::retryable(format!(
                        "etcd {} failed before it read the restored data ({status}): {tail}; etcd or \
                         the machine failed, not the snapshot",
                        etcd_path.display()
                    ))));
                }
                let message = format!("etcd exited while starting on the restored data ({status}): {tail}");
                return Err(StartFailed::Failed(Failure::bad_input(message)));
            }
            if let Ok(mut client) = Client::connect([url.as_str()], Some(options.clone())).await
                && client.status().await.is_ok()
            {
                let client = Client::connect(
                    [url.as_str()],
                    Some(ConnectOptions::new().with_timeout(REQUEST_TIMEOUT)),
                )
                .await
                .map_err(|e| StartFailed::Failed(Failure::retryable(format!("{url}: {e}"))))?;
                return Ok(Self { process, client, url });
            }
            if Instant::now() > deadline {
                return Err(StartFailed::Failed(Failure::retryable(format!(
                    "the restored member did not answer on {url} within {}s: {}",
                    timeout.as_secs(),
                    process.log_tail()
                ))));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The revision the member serves, and the keys it holds at the expected revision (at the
    /// one it serves when that is not known, or ahead of it): a count-only range over the whole
    /// keyspace, "\0" to "\0".
    async fn served(&mut self, expected: Option<i64>) -> Result<(i64, i64), Failure> {
        let failed = |what: &str, e: etcd_client::Error| {
            Failure::retryable(format!("the restored member on {} did not answer {what}: {e}", self.url))
        };
        let status = self.client.status().await.map_err(|e| failed("a status request", e))?;
        let revision = status.header().map(|h| h.revision()).unwrap_or_default();
        let at = expected.filter(|r| *r <= revision).unwrap_or(revision);
        let options = GetOptions::new().with_range(vec![0u8]).with_count_only().with_revision(at);
        let counted = self.client.get(vec![0u8], Some(options)).await.map_err(|e| {
            let message = format!("counting the keys at revision {at}");
            let failure = failed(&message, e);
            // A revision compacted away in the snapshot: it cannot serve what was recorded.
            if failure.message.contains("compacted") {
                Failure::bad_input(format!(
                    "the restored member serves revision {revision} but revision {at} was compacted \
                     away before the snapshot was taken: {}",
                    failure.message
                ))
            } else {
                failure
            }
        })?;
        Ok((revision, counted.count()))
    }
}

/// `groundskeeper-job snapshot-prove`: runs, reports, and returns the exit code.
pub fn main(args: ProveArgs) -> i32 {
    let clock = RunClock::start();
    let prepared = (|| {
        let grace =
            run::check_wait("--grace-period-seconds", Duration::from_secs(args.grace_period_seconds))?;
        Ok::<_, Failure>((args.proof()?, grace))
    })();
    let result = match prepared {
        Ok((proof, grace)) => runtime().block_on(async {
            let stop = StopSignal::listen_or_warn(grace);
            run_prove(&proof, &stop).await
        }),
        Err(failure) => clock.finish(
            Report::SnapshotProve(ProveReport {
                path: args.from.from.clone(),
                object: args.object.clone().unwrap_or_default(),
                ..ProveReport::default()
            }),
            Outcome::Failed,
            Some(failure),
        ),
    };
    if let Some(error) = &result.error {
        let what = if error.kind == ErrorKind::BadInput { "not proven" } else { "proof not finished" };
        tracing::error!("{what}: {}", error.message);
    }
    run::report(&result, &args.result_file);
    run::exit_code(&result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    use super::super::snapshot::Checked;

    fn fetched(metadata: &[(&str, &str)], revision: Option<i64>) -> Fetched {
        Fetched {
            path: "/s/main.db".into(),
            object: "main.db".into(),
            location: "/s/main.db".into(),
            metadata: metadata
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
            checked: Checked { size: 1, sha256: "a".into(), db_sha256: "b".into(), revision, content: None },
        }
    }

    #[test]
    fn recorded_numbers_come_from_the_metadata_when_they_are_numbers() {
        let with = fetched(&[("revision", "42"), ("keys", "x")], Some(40));
        assert_eq!(recorded_number(&with, "revision"), Some(42));
        assert_eq!(recorded_number(&with, "keys"), None);
        assert_eq!(recorded_number(&with, "sha256"), None);
    }

    #[test]
    fn the_proof_names_every_difference() {
        let file = fetched(&[], Some(10));
        let report = |revision, expected_revision, keys, expected_keys| ProveReport {
            revision: Some(revision),
            expected_revision,
            keys: Some(keys),
            expected_keys,
            ..ProveReport::default()
        };
        assert!(compare(&file, &report(10, Some(10), 5, Some(5))).is_ok());
        assert!(compare(&file, &report(10, Some(10), 5, None)).is_ok(), "keys not recorded: not compared");
        let failure = compare(&file, &report(11, Some(10), 4, Some(5))).unwrap_err();
        assert_eq!(failure.kind, ErrorKind::BadInput);
        assert!(failure.message.contains("served revision 11, not the recorded 10"), "{}", failure.message);
        assert!(failure.message.contains("held 4 keys, not the recorded 5"), "{}", failure.message);
    }

    #[test]
    fn start_waits_longer_for_bigger_snapshots() {
        assert_eq!(start_timeout(0), Duration::from_secs(60));
        assert_eq!(start_timeout(1), Duration::from_secs(90));
        assert_eq!(start_timeout(3 << 30), Duration::from_secs(150));
    }
}
