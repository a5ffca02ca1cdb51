//! `groundskeeper-job cleanup`: drop the data a Scylla node keeps for token ranges it no longer
//! owns, keyspace by keyspace, through the Scylla Manager Agent.
//!
//! Order of work: stop a cleanup left running by an earlier attempt (two cleanups of one node
//! compete for disk and I/O); list the keyspaces that can hold stale data (non-local, vnode
//! replicated: tablets and local keyspaces cannot); clean each with Scylla's task API, logging
//! progress, or with the blocking call where the node has no task API; stop at the first
//! failure; finally reset Scylla's own "cleanup needed" flag where the node offers that.
//!
//! Scylla's flag (ScyllaDB 6.0 and later: the node cleans itself before a topology operation
//! while it is set) is reset with `mark_node_as_clean` once every keyspace that can hold stale
//! data is clean: after a whole-node cleanup, or after the listed keyspaces when the controller
//! says they are all the node lost ranges of (`--mark-node-clean`, from the ownership rule). A
//! node whose flag stayed set would clean every keyspace again on its own, undoing what cleaning
//! only the keyspaces that lost ranges saves.
//!
//! `cleanup_all` is never called. Its local form (`?global=false`, 2026.1, 2025.1.10+, 2025.2.4+,
//! 2025.3.5+, 2025.4+) also cleans the node and resets the flag, but as one blocking call with no
//! progress, no keyspace selection and no task to abort; and on 6.x, which ignores the
//! parameter, the same request cleans the whole cluster at once. Cleaning keyspace by keyspace
//! then `mark_node_as_clean` does the same work with progress, on every version, and cannot
//! reach another node.
//!
//! On SIGTERM or SIGINT the run stops at once (a cleanup can run for hours; no grace period
//! covers it): the cleanup task in flight is aborted, `stop_compaction?type=CLEANUP` stops the
//! compactions on the node (the blocking call's too), and the result says so.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use groundskeeper_protocol::result::{CleanupReport, KeyspaceCleanup, KeyspaceStatus};
use groundskeeper_protocol::{JobResult, Outcome, Report};

use crate::run::{self, DEFAULT_RESULT_FILE, Failure, RunClock, Stop, StopSignal};
use groundskeeper_stores::scylla::agent::{
    AgentClient, AgentConfig, AgentError, DEFAULT_AGENT_PORT, KeyspaceType, Replication, TaskState,
    TaskStatus, check_keyspace_name,
};
use groundskeeper_stores::scylla::token::AuthToken;

/// Task-manager module and task type of a cleanup (Scylla's compaction module).
const COMPACTION_MODULE: &str = "compaction";
const CLEANUP_TASK_TYPE: &str = "cleanup compaction";
/// Failed status reads in a row tolerated while a cleanup runs: one lost poll must not abandon
/// hours of work.
const STATUS_READ_ATTEMPTS: u32 = 5;

#[derive(clap::Args, Debug, Clone)]
pub struct CleanupArgs {
    /// Address of the node to clean (IP or DNS name); the agent's certificate is checked for it
    /// when --agent-ca-file is given.
    #[arg(long)]
    pub node_address: String,
    /// HTTPS port of the Scylla Manager Agent.
    #[arg(long, default_value_t = DEFAULT_AGENT_PORT)]
    pub agent_port: u16,
    /// scylla-operator's agent token file (`auth-token.yaml`: `auth_token: <token>`).
    #[arg(long)]
    pub auth_token_file: PathBuf,
    /// PEM CA bundle to verify the agent's certificate with. Without it the agent's certificate
    /// (self-signed by default) is accepted as it is.
    #[arg(long)]
    pub agent_ca_file: Option<PathBuf>,
    /// Clean only these keyspaces (repeatable). Default: every keyspace that can hold stale data.
    #[arg(long = "keyspace", value_name = "KEYSPACE")]
    pub keyspaces: Vec<String>,
    /// The listed keyspaces are all this node holds stale data for (the controller worked it out
    /// from what the node owns): once they are clean, reset Scylla's own "cleanup needed" flag as
    /// after a whole-node cleanup.
    #[arg(long)]
    pub mark_node_clean: bool,
    /// Where to write the result JSON.
    #[arg(long, default_value = DEFAULT_RESULT_FILE)]
    pub result_file: PathBuf,
    /// How often to report the progress of a running cleanup, e.g. `5s`, `500ms`, `1m`.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub poll_interval: Duration,
    /// Limit for each ordinary call to the agent (not for the cleanup itself).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub request_timeout: Duration,
    /// The pod's terminationGracePeriodSeconds: after SIGTERM, stopping the cleanup on the node
    /// may take until a few seconds before it ends, then the result is written.
    #[arg(long, default_value_t = groundskeeper_protocol::exit::TERMINATION_GRACE_PERIOD_SECONDS)]
    pub grace_period_seconds: u64,
}

impl CleanupArgs {
    /// Arguments for `node_address` with the defaults of the command line.
    pub fn new(node_address: impl Into<String>, auth_token_file: impl Into<PathBuf>) -> Self {
        Self {
            node_address: node_address.into(),
            agent_port: DEFAULT_AGENT_PORT,
            auth_token_file: auth_token_file.into(),
            agent_ca_file: None,
            keyspaces: Vec::new(),
            mark_node_clean: false,
            result_file: PathBuf::from(DEFAULT_RESULT_FILE),
            poll_interval: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
            grace_period_seconds: groundskeeper_protocol::exit::TERMINATION_GRACE_PERIOD_SECONDS,
        }
    }
}

/// `5s`, `500ms`, `2m`, `1h`, or plain seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 =
        number.parse().map_err(|_| format!("{text:?} is not a duration like 5s, 500ms or 2m"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "" | "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => return Err(format!("{text:?}: unknown unit {unit:?} (use ms, s, m or h)")),
    };
    Duration::try_from_secs_f64(seconds).map_err(|err| format!("{text:?}: {err}"))
}

/// Runs the cleanup in a fresh runtime, writes the result file and returns the exit code: what
/// `groundskeeper-job cleanup` does.
pub fn main(args: CleanupArgs) -> i32 {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return groundskeeper_protocol::exit::RETRYABLE;
        }
    };
    let result = runtime.block_on(async {
        // A bad value is reported by the run itself; the default keeps the handlers meanwhile.
        let grace = run::check_wait("--grace-period-seconds", Duration::from_secs(args.grace_period_seconds))
            .unwrap_or(Duration::from_secs(groundskeeper_protocol::exit::TERMINATION_GRACE_PERIOD_SECONDS));
        let stop = StopSignal::listen_or_warn(grace);
        run_until(&args, &stop).await
    });
    run::report(&result, &args.result_file);
    run::exit_code(&result)
}

/// Cleans one node and says how it went. Never panics on bad input: every problem ends in the
/// result, with its retry class.
pub async fn run(args: &CleanupArgs) -> JobResult {
    run_until(args, &StopSignal::never()).await
}

/// The keyspace being cleaned, for stopping it on a signal.
#[derive(Debug, Default)]
struct InFlight {
    /// Index in the report's keyspaces.
    keyspace: Option<usize>,
    started: Option<Instant>,
    /// The cleanup task, once the node gave its id (task API only).
    task: Option<String>,
    mode: Option<Mode>,
}

/// Cleans one node as [`run`] does, until `stop` says to stop: then the cleanup in flight is
/// stopped on the node and the run reports what it did.
pub async fn run_until(args: &CleanupArgs, stop: &StopSignal) -> JobResult {
    let clock = RunClock::start();
    let mut report = CleanupReport { node: args.node_address.clone(), ..Default::default() };
    let mut in_flight = InFlight::default();
    let failure = tokio::select! {
        outcome = clean_node(args, &mut report, &mut in_flight) => outcome.err(),
        stop = stop.requested() => Some(stop_in_flight(args, &mut report, &in_flight, stop).await),
    };
    if let Some(failure) = &failure {
        tracing::error!(node = %args.node_address, error = %failure.message, "cleanup failed");
    }
    let nothing_to_clean = report.keyspaces.iter().all(|k| k.status == KeyspaceStatus::Skipped);
    let outcome = if nothing_to_clean { Outcome::Skipped } else { Outcome::Succeeded };
    let message = (failure.is_none()).then(|| summary(&report));
    let mut result = clock.finish(Report::Cleanup(report), outcome, failure);
    if let Some(message) = message {
        result.message = Some(message);
    }
    if result.outcome == Outcome::Failed {
        result.stopped_by = stop.get().map(|s| s.signal.to_owned());
    }
    result
}

/// Stops the cleanup in flight on the node (abort its task, then `stop_compaction`, which also
/// ends the blocking call's work), each call bounded by the stop's deadline, and records it on
/// the keyspace. The failure says what was stopped and what was not started.
async fn stop_in_flight(
    args: &CleanupArgs,
    report: &mut CleanupReport,
    in_flight: &InFlight,
    stop: Stop,
) -> Failure {
    let not_started = report.keyspaces.iter().filter(|k| k.status == KeyspaceStatus::NotStarted).count();
    let Some(index) = in_flight.keyspace else {
        return stop.failure(&format!(
            "no cleanup was running on node {}; {not_started} keyspace(s) not started",
            args.node_address
        ));
    };
    let done = match connect(args) {
        Ok(client) => stop_cleanup_on_node(&client, in_flight.task.as_deref(), stop).await,
        Err(failure) => vec![format!("cannot reach the agent to stop it: {}", failure.message)],
    };
    let entry = &mut report.keyspaces[index];
    entry.status = KeyspaceStatus::Failed;
    entry.duration_ms = in_flight.started.map_or(0, |s| s.elapsed().as_millis() as u64);
    entry.mode = in_flight.mode.map(|m| m.name().to_owned());
    let what = format!("stopped by {}: {}", stop.signal, done.join("; "));
    entry.message = Some(what.clone());
    // The keyspace in flight counted as not started until it ended.
    let not_started = not_started.saturating_sub(1);
    stop.failure(&format!(
        "the cleanup of keyspace {} on node {} was stopped ({}); {not_started} keyspace(s) not started",
        entry.name,
        args.node_address,
        done.join("; ")
    ))
}

/// Aborts `task` (where the node gave one) and sends `stop_compaction?type=CLEANUP`; what each
/// did, in words. Calls past the stop's deadline are given up on, so the result is still written.
async fn stop_cleanup_on_node(client: &AgentClient, task: Option<&str>, stop: Stop) -> Vec<String> {
    let deadline = tokio::time::Instant::from(stop.deadline);
    let mut done = Vec::new();
    if let Some(task) = task {
        done.push(match tokio::time::timeout_at(deadline, client.abort_task(task)).await {
            Ok(Ok(true)) => format!("cleanup task {task} aborted"),
            Ok(Ok(false)) => format!("cleanup task {task} is not abortable"),
            Ok(Err(err)) => format!("aborting cleanup task {task} failed: {err}"),
            Err(_) => format!("aborting cleanup task {task} got no answer in time"),
        });
    }
    done.push(match tokio::time::timeout_at(deadline, client.stop_compaction("CLEANUP")).await {
        Ok(Ok(())) => "stop_compaction CLEANUP sent".to_owned(),
        Ok(Err(err)) => {
            format!("stop_compaction CLEANUP failed: {err}; the cleanup may still run on the node")
        }
        Err(_) => {
            "stop_compaction CLEANUP got no answer in time; the cleanup may still run on the node".to_owned()
        }
    });
    for line in &done {
        tracing::warn!(signal = stop.signal, "{line}");
    }
    done
}

fn summary(report: &CleanupReport) -> String {
    let cleaned: Vec<&str> = report
        .keyspaces
        .iter()
        .filter(|k| k.status == KeyspaceStatus::Cleaned)
        .map(|k| k.name.as_str())
        .collect();
    if cleaned.is_empty() {
        format!("node {}: no keyspace needs cleanup", report.node)
    } else {
        format!("node {}: cleaned {} keyspace(s): {}", report.node, cleaned.len(), cleaned.join(", "))
    }
}

async fn clean_node(
    args: &CleanupArgs,
    report: &mut CleanupReport,
    in_flight: &mut InFlight,
) -> Result<(), Failure> {
    run::check_wait("--poll-interval", args.poll_interval)?;
    run::check_wait("--request-timeout", args.request_timeout)?;
    run::check_wait("--grace-period-seconds", Duration::from_secs(args.grace_period_seconds))?;
    for keyspace in &args.keyspaces {
        check_keyspace_name(keyspace).map_err(|err| Failure::bad_input(format!("--keyspace: {err}")))?;
    }
    let client = connect(args)?;
    let context = |err: AgentError| agent_failure(args, err);

    let cleanable =
        client.keyspaces(KeyspaceType::NonLocalStrategy, Replication::Vnodes).await.map_err(context)?;
    let plan = if args.keyspaces.is_empty() {
        plan_keyspaces(&[], &[], &cleanable, &[])
    } else {
        let all = client.keyspaces(KeyspaceType::All, Replication::All).await.map_err(context)?;
        let tablets =
            client.keyspaces(KeyspaceType::NonLocalStrategy, Replication::Tablets).await.map_err(context)?;
        plan_keyspaces(&args.keyspaces, &all, &cleanable, &tablets)
    }
    .map_err(|unknown| {
        Failure::bad_input(format!(
            "--keyspace: no keyspace {} on node {}",
            unknown.join(", "),
            args.node_address
        ))
    })?;

    report.keyspaces = plan
        .iter()
        .map(|planned| KeyspaceCleanup {
            name: planned.name.clone(),
            status: match planned.skip_reason {
                Some(_) => KeyspaceStatus::Skipped,
                None => KeyspaceStatus::NotStarted,
            },
            duration_ms: 0,
            mode: None,
            message: planned.skip_reason.map(str::to_owned),
        })
        .collect();

    // The node's size, for the controller's estimate of its next cleanup: nice to have, so an
    // answer that cannot be had leaves it out rather than failing the cleanup.
    report.load_bytes = match client.load().await {
        Ok(bytes) if bytes.is_finite() && bytes >= 0.0 => Some(bytes.round() as i64),
        Ok(_) => None,
        Err(err) => {
            tracing::info!(node = %args.node_address, "the node's load is not known: {err}");
            None
        }
    };
    // Only once the request is known to be valid: bad input changes nothing on the node.
    report.stopped_stale_cleanup = stop_stale_cleanup(&client).await.map_err(context)?;
    clean_keyspaces(&client, args, report, in_flight).await?;

    let whole_node = plan.iter().filter(|p| p.skip_reason.is_none()).count() == cleanable.len();
    if whole_node || args.mark_node_clean {
        report.marked_node_clean = mark_node_as_clean(&client).await.map_err(context)?;
    }
    Ok(())
}

fn connect(args: &CleanupArgs) -> Result<AgentClient, Failure> {
    let token =
        AuthToken::from_file(&args.auth_token_file).map_err(|err| Failure::bad_input(err.to_string()))?;
    let ca_pem = args.agent_ca_file.as_deref().map(read_ca_file).transpose()?;
    AgentClient::new(AgentConfig {
        host: args.node_address.clone(),
        port: args.agent_port,
        token,
        ca_pem,
        request_timeout: args.request_timeout,
    })
    .map_err(|err| match &args.agent_ca_file {
        Some(path) => Failure::bad_input(format!("agent CA file {}: {err}", path.display())),
        None => Failure::bad_input(err.to_string()),
    })
}

fn read_ca_file(path: &Path) -> Result<Vec<u8>, Failure> {
    std::fs::read(path)
        .map_err(|err| Failure::bad_input(format!("agent CA file {}: cannot be read: {err}", path.display())))
}

/// The failure for an agent error, with the retry class the error has, and, for a refused
/// token, the file it came from.
fn agent_failure(args: &CleanupArgs, err: AgentError) -> Failure {
    let at = format!("agent {}:{}", args.node_address, args.agent_port);
    let message = match &err {
        AgentError::Unauthorized { .. } => {
            format!("{at}: {err} (token from {})", args.auth_token_file.display())
        }
        _ => format!("{at}: {err}"),
    };
    if err.is_retryable() { Failure::retryable(message) } else { Failure::bad_input(message) }
}

/// Stops cleanups an earlier attempt left running. True when one was seen running and stopped.
/// `stop_compaction` is sent whatever was seen: it is cheap and also catches per-shard work the
/// listings do not show.
async fn stop_stale_cleanup(client: &AgentClient) -> Result<bool, AgentError> {
    let tasks = match client.module_tasks(COMPACTION_MODULE).await {
        Ok(tasks) => tasks,
        Err(AgentError::NotFound { .. }) => Vec::new(), // no task manager on this node
        Err(err) => return Err(err),
    };
    let mut stopped = false;
    for task in tasks.iter().filter(|t| {
        t.task_type == CLEANUP_TASK_TYPE && matches!(t.state, TaskState::Running | TaskState::Created)
    }) {
        let aborted = client.abort_task(&task.task_id).await?;
        tracing::warn!(task = %task.task_id, keyspace = %task.keyspace, aborted, "stopping a cleanup task left running by an earlier attempt");
        stopped |= aborted;
    }
    let running = client.compactions().await?;
    for compaction in running.iter().filter(|c| c.task_type.eq_ignore_ascii_case("cleanup")) {
        tracing::warn!(keyspace = %compaction.ks, table = %compaction.cf, "stopping a cleanup left running by an earlier attempt");
        stopped = true;
    }
    client.stop_compaction("CLEANUP").await?;
    Ok(stopped)
}

/// A keyspace the run will report on; `skip_reason` set when it is not to be cleaned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedKeyspace {
    pub name: String,
    pub skip_reason: Option<&'static str>,
}

pub const SKIP_TABLETS: &str =
    "replicated with tablets: Scylla moves tablet data itself, there is nothing to clean";
pub const SKIP_LOCAL: &str = "local strategy: node-local data, there is nothing to clean";

/// Which keyspaces to clean. Without a request: every cleanable one. With one: each requested
/// keyspace once, in the order given; cleanable ones are cleaned, others skipped with a reason.
/// Err lists the requested keyspaces the node does not have.
pub fn plan_keyspaces(
    requested: &[String],
    all: &[String],
    cleanable: &[String],
    tablets: &[String],
) -> Result<Vec<PlannedKeyspace>, Vec<String>> {
    if requested.is_empty() {
        return Ok(cleanable
            .iter()
            .map(|name| PlannedKeyspace { name: name.clone(), skip_reason: None })
            .collect());
    }
    let mut unique: Vec<&String> = Vec::new();
    for name in requested {
        if !unique.contains(&name) {
            unique.push(name);
        }
    }
    let unknown: Vec<String> = unique
        .iter()
        .filter(|name| !all.contains(name) && !cleanable.contains(name))
        .map(|name| (*name).clone())
        .collect();
    if !unknown.is_empty() {
        return Err(unknown);
    }
    Ok(unique
        .into_iter()
        .map(|name| PlannedKeyspace {
            name: name.clone(),
            skip_reason: if cleanable.contains(name) {
                None
            } else if tablets.contains(name) {
                Some(SKIP_TABLETS)
            } else {
                Some(SKIP_LOCAL)
            },
        })
        .collect())
}

/// How a keyspace is cleaned on this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Task API: start, then follow the task.
    Async,
    /// The blocking call (no task API on this node).
    Sync,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Async => "async",
            Mode::Sync => "sync",
        }
    }
}

/// Cleans the keyspaces not skipped, in order; stops at the first failure (the rest stay
/// `NotStarted`).
async fn clean_keyspaces(
    client: &AgentClient,
    args: &CleanupArgs,
    report: &mut CleanupReport,
    in_flight: &mut InFlight,
) -> Result<(), Failure> {
    let mut mode = Mode::Async;
    for (index, entry) in
        report.keyspaces.iter_mut().enumerate().filter(|(_, k)| k.status == KeyspaceStatus::NotStarted)
    {
        let started = Instant::now();
        *in_flight = InFlight { keyspace: Some(index), started: Some(started), task: None, mode: Some(mode) };
        tracing::info!(keyspace = %entry.name, node = %args.node_address, "cleaning");
        let outcome = clean_keyspace(client, args, &entry.name, &mut mode, in_flight).await;
        *in_flight = InFlight::default();
        entry.duration_ms = started.elapsed().as_millis() as u64;
        entry.mode = Some(mode.name().to_owned());
        match outcome {
            Ok(()) => {
                entry.status = KeyspaceStatus::Cleaned;
                tracing::info!(keyspace = %entry.name, mode = mode.name(), duration_ms = entry.duration_ms, "cleaned");
            }
            Err(failure) => {
                entry.status = KeyspaceStatus::Failed;
                entry.message = Some(failure.message.clone());
                return Err(Failure {
                    message: format!("keyspace {}: {}", entry.name, failure.message),
                    ..failure
                });
            }
        }
    }
    Ok(())
}

async fn clean_keyspace(
    client: &AgentClient,
    args: &CleanupArgs,
    keyspace: &str,
    mode: &mut Mode,
    in_flight: &mut InFlight,
) -> Result<(), Failure> {
    let context = |err: AgentError| agent_failure(args, err);
    if *mode == Mode::Async {
        match client.start_keyspace_cleanup(keyspace).await {
            Ok(task_id) => {
                in_flight.task = Some(task_id.clone());
                return follow_task(client, args, keyspace, &task_id).await;
            }
            Err(AgentError::NotFound { .. }) => {
                tracing::info!(node = %args.node_address, "the node has no task API; using the blocking cleanup call");
                *mode = Mode::Sync;
                in_flight.mode = Some(Mode::Sync);
            }
            Err(err) => return Err(context(err)),
        }
    }
    client.keyspace_cleanup_blocking(keyspace).await.map_err(context)
}

/// Follows a cleanup task to its end, logging progress. `wait_task` with a timeout keeps the
/// task referenced while it runs (so a short task TTL cannot lose its result); between waits
/// `task_status` gives the progress.
async fn follow_task(
    client: &AgentClient,
    args: &CleanupArgs,
    keyspace: &str,
    task_id: &str,
) -> Result<(), Failure> {
    tracing::info!(keyspace, task = task_id, "cleanup task started");
    let mut failed_reads = 0;
    loop {
        let status = match client.wait_task(task_id, Some(args.poll_interval)).await {
            Ok(status) => Ok(status),
            // Still running after the wait: read the progress.
            Err(AgentError::Server { status: 408, .. }) => client.task_status(task_id).await,
            Err(err) => Err(err),
        };
        match status {
            Ok(status) => {
                failed_reads = 0;
                log_progress(keyspace, &status);
                if let Some(result) = task_result(&status) {
                    return result.map_err(|message| task_failure(args, keyspace, message));
                }
            }
            // A task the node itself gave us is unknown now: the node or its agent restarted and
            // the cleanup did not go on. Nothing the user gave is wrong; a retry starts it again.
            Err(err) if is_lost_task(&err) => {
                return Err(Failure::retryable(format!(
                    "agent {}:{}: the cleanup task {task_id} of {keyspace} is no longer known to the \
                     node ({err}): Scylla restarted or dropped it; a retry cleans the keyspace again",
                    args.node_address, args.agent_port
                )));
            }
            Err(err) if err.is_retryable() && failed_reads + 1 < STATUS_READ_ATTEMPTS => {
                failed_reads += 1;
                tracing::warn!(keyspace, task = task_id, error = %err, "cannot read the task status; trying again");
                tokio::time::sleep(args.poll_interval).await;
            }
            Err(err) => return Err(agent_failure(args, err)),
        }
    }
}

/// Scylla answers a task id it does not know with 400 "task with id … not found" (404 through
/// some proxies).
fn is_lost_task(err: &AgentError) -> bool {
    match err {
        AgentError::Server { status: 400, message, .. } => message.contains("not found"),
        AgentError::NotFound { .. } => true,
        _ => false,
    }
}

/// `Some` once the task is finished: Ok when done, Err with Scylla's error when failed.
fn task_result(status: &TaskStatus) -> Option<Result<(), String>> {
    match status.state {
        TaskState::Done => Some(Ok(())),
        TaskState::Failed => Some(Err(if status.error.is_empty() {
            "the cleanup task failed without an error message".to_owned()
        } else {
            status.error.clone()
        })),
        _ => None,
    }
}

/// A failed cleanup task is worth retrying (the ring moved, a shard failed); the message says why.
fn task_failure(args: &CleanupArgs, keyspace: &str, error: String) -> Failure {
    Failure::retryable(format!(
        "agent {}:{}: cleanup task of {keyspace} failed: {error}",
        args.node_address, args.agent_port
    ))
}

fn log_progress(keyspace: &str, status: &TaskStatus) {
    let percent = if status.progress_total > 0.0 {
        format!("{:.1}%", 100.0 * status.progress_completed / status.progress_total)
    } else {
        "unknown".to_owned()
    };
    tracing::info!(
        keyspace,
        task = %status.id,
        state = %status.state,
        completed = status.progress_completed,
        total = status.progress_total,
        units = %status.progress_units,
        percent = %percent,
        "cleanup progress"
    );
}

async fn mark_node_as_clean(client: &AgentClient) -> Result<bool, AgentError> {
    let marked = client.mark_node_as_clean().await?;
    if !marked {
        tracing::info!("the node does not offer mark_node_as_clean; its own flag is left as it is");
    }
    Ok(marked)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn keyspace_plans() {
        let all = names(&["system", "system_schema", "ks1", "ks2", "tab"]);
        let cleanable = names(&["ks1", "ks2"]);
        let tablets = names(&["tab"]);
        let planned = |n: &str, r: Option<&'static str>| PlannedKeyspace { name: n.into(), skip_reason: r };
        for (requested, expected) in [
            (vec![], Ok(vec![planned("ks1", None), planned("ks2", None)])),
            (vec!["ks2"], Ok(vec![planned("ks2", None)])),
            (vec!["ks2", "ks1", "ks2"], Ok(vec![planned("ks2", None), planned("ks1", None)])),
            (
                vec!["tab", "system", "ks1"],
                Ok(vec![
                    planned("tab", Some(SKIP_TABLETS)),
                    planned("system", Some(SKIP_LOCAL)),
                    planned("ks1", None),
                ]),
            ),
            (vec!["nope", "ks1", "gone"], Err(names(&["nope", "gone"]))),
        ] {
            let requested = names(&requested);
            assert_eq!(plan_keyspaces(&requested, &all, &cleanable, &tablets), expected, "{requested:?}");
        }
    }

    #[test]
    fn durations() {
        for (text, expected) in [
            ("5s", Some(Duration::from_secs(5))),
            ("500ms", Some(Duration::from_millis(500))),
            ("2m", Some(Duration::from_secs(120))),
            ("1h", Some(Duration::from_secs(3600))),
            ("7", Some(Duration::from_secs(7))),
            ("0.5s", Some(Duration::from_millis(500))),
            ("5x", None),
            ("", None),
            ("s", None),
        ] {
            assert_eq!(parse_duration(text).ok(), expected, "{text:?}");
        }
    }

    #[test]
    fn task_results() {
        let status = |state, error: &str| TaskStatus { state, error: error.into(), ..Default::default() };
        assert_eq!(task_result(&status(TaskState::Running, "")), None);
        assert_eq!(task_result(&status(TaskState::Created, "")), None);
        assert_eq!(task_result(&status(TaskState::Done, "")), Some(Ok(())));
        assert_eq!(task_result(&status(TaskState::Failed, "boom")), Some(Err("boom".into())));
        assert!(matches!(task_result(&status(TaskState::Failed, "")), Some(Err(m)) if !m.is_empty()));
    }
}
