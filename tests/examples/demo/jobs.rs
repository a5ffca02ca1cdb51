//! What a Job's pod runs: `groundskeeper-job` with the container's own arguments, in this
//! process, through the runner's library (the same functions its `main` calls). Two things are
//! translated, because no pod network or volume exists here: the files the Job mounts from
//! Secrets are the kubelet simulator's copies, and a Scylla node's Service DNS name
//! (`<member>.<namespace>.svc`) is that node's agent stand-in on loopback.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use groundskeeper_e2e::kubelet::{Container, MountedFiles, Termination};
use groundskeeper_job::cli::{Cli, Command};
use groundskeeper_job::etcd::compact::{CompactArgs, run_compact};
use groundskeeper_job::etcd::defrag::{DefragArgs, Progress, run_defrag};
use groundskeeper_job::run::{Failure, RunClock, exit_code};
use groundskeeper_job::scylla::cleanup::CleanupArgs;
use groundskeeper_protocol::result::{CompactReport, DefragReport};
use groundskeeper_protocol::{JobResult, Outcome, Report, exit};
use groundskeeper_stores::etcd::connect::EndpointArgs;
use groundskeeper_stores::etcd::plan::{MemberAction, PlannedMember};
use tracing::Instrument;

use crate::logs::{POD_SPAN, pod_line};
use crate::say;

/// Member Service name → where its agent stand-in listens (host, port).
pub type AgentAddresses = Arc<BTreeMap<String, (String, u16)>>;

/// Runs one pod's container to its end, its log lines labelled with the Job.
pub async fn run_container(container: Container, agents: AgentAddresses) -> Termination {
    let job = container.job["metadata"]["name"].as_str().unwrap_or_default().to_owned();
    let span = tracing::info_span!(POD_SPAN, job = %job);
    run_command(container, job, agents).instrument(span).await
}

async fn run_command(container: Container, job: String, agents: AgentAddresses) -> Termination {
    let command = match Cli::try_parse_args(container.args.clone()) {
        Ok(cli) => cli.command,
        Err(err) => return refused(format!("the container's args do not parse: {err}")),
    };
    let files = &container.files;
    let result = match command {
        Command::Cleanup(args) => cleanup(args, files, &agents).await,
        Command::Defrag(args) => defrag(args, files, &job).await,
        Command::Compact(args) => compact(args, files).await,
        Command::RingHash => return refused("ring-hash reads stdin; no Job runs it".into()),
        Command::Snapshot(_)
        | Command::SnapshotCopy(_)
        | Command::SnapshotProve(_)
        | Command::RestoreMember(_)
        | Command::SnapshotDelta(_)
        | Command::SnapshotReplay(_) => {
            return refused("the demo runs no snapshot Job".into());
        }
        Command::Revision(_) => return refused("revision is a local computation; no Job runs it".into()),
    };
    Termination { exit_code: exit_code(&result), message: result.to_termination_message() }
}

/// What the binary does with arguments it cannot take: exit 2 with a message.
fn refused(message: String) -> Termination {
    Termination { exit_code: exit::BAD_INPUT, message }
}

async fn cleanup(mut args: CleanupArgs, files: &MountedFiles, agents: &AgentAddresses) -> JobResult {
    let member = args.node_address.split('.').next().unwrap_or_default();
    if let Some((host, port)) = agents.get(member) {
        args.node_address = host.clone();
        args.agent_port = *port;
    }
    args.auth_token_file = mounted(files, &args.auth_token_file);
    args.agent_ca_file = args.agent_ca_file.map(|path| mounted(files, &path));
    groundskeeper_job::scylla::cleanup::run(&args).await
}

async fn defrag(mut args: DefragArgs, files: &MountedFiles, job: &str) -> JobResult {
    mount_tls(&mut args.connection, files);
    let options = match args.options() {
        Ok(options) => options,
        Err(failure) => return failed(Report::Defrag(DefragReport::default()), failure),
    };
    let job = job.to_owned();
    on_own_runtime(move || async move { run_defrag(&options, &mut |progress| show(&job, progress)).await })
        .await
}

/// Runs the runner on a runtime and thread of its own, as the binary's `main` does: the defrag
/// run holds its progress callback across awaits, so its future cannot move between threads.
async fn on_own_runtime<F, Fut>(run: F) -> JobResult
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = JobResult>,
{
    let (done, result) = tokio::sync::oneshot::channel();
    let span = tracing::Span::current();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime for the runner");
        let _ = done.send(span.in_scope(|| runtime.block_on(run())));
    });
    result.await.unwrap_or_else(|_| {
        failed(
            Report::Defrag(DefragReport::default()),
            Failure::retryable("the runner's thread ended without a result"),
        )
    })
}

async fn compact(mut args: CompactArgs, files: &MountedFiles) -> JobResult {
    mount_tls(&mut args.connection, files);
    let prepared = args.target().and_then(|target| Ok((target, args.connection.connection()?)));
    match prepared {
        Ok((target, connection)) => run_compact(&connection, target, args.physical).await,
        Err(failure) => failed(Report::Compact(CompactReport::default()), failure),
    }
}

fn failed(report: Report, failure: Failure) -> JobResult {
    RunClock::start().finish(report, Outcome::Failed, Some(failure))
}

fn mount_tls(connection: &mut EndpointArgs, files: &MountedFiles) {
    for path in [&mut connection.cacert, &mut connection.cert, &mut connection.key] {
        if let Some(p) = path.as_mut() {
            *p = mounted(files, p);
        }
    }
}

/// The local copy of a file mounted at `path`; a path nothing is mounted at stays as it is, and
/// the runner then reports it missing, as it would in the pod.
fn mounted(files: &MountedFiles, path: &Path) -> PathBuf {
    files.local(path).unwrap_or(path).to_path_buf()
}

/// The defrag runner's progress callback, as its log would show it.
fn show(job: &str, progress: Progress<'_>) {
    let info = &tracing::Level::INFO;
    match progress {
        Progress::Compacted { revision, already } => {
            let how = if already { "already compacted to" } else { "compacted to" };
            pod_line(Some(job), info, &format!("{how} revision {revision}"));
        }
        Progress::Planned(plan) => {
            for m in &plan.members {
                pod_line(Some(job), info, &planned(m));
            }
        }
        Progress::LeaderTurnDecided(turn) => {
            pod_line(Some(job), info, &format!("leader {}'s turn: {}", turn.member, turn.reason))
        }
        Progress::LeaderMoved { from, to } => {
            pod_line(Some(job), info, &format!("leadership moved {from} → {to}"))
        }
        // The runner logs it itself ("defragmenting member=…").
        Progress::MemberStarted(_) => {}
        Progress::MemberDone(m) => {
            let text = format!(
                "{} defragmented in {} ms: {} → {}",
                m.name,
                m.duration_ms,
                say::mib(m.db_size_before),
                say::mib(m.db_size_after)
            );
            pod_line(Some(job), info, &text);
        }
    }
}

/// `plan: m0 (leader): move leadership, then defrag: db 68.2 MiB, 10.4 MiB in use`.
fn planned(m: &PlannedMember) -> String {
    let leader = if m.was_leader { " (leader)" } else { "" };
    let action = match m.action {
        MemberAction::Defrag => "defrag",
        MemberAction::MoveLeaderThenDefrag => "move leadership, then defrag",
        MemberAction::LeaderDecidedAtTurn => {
            "defrag in place, or move leadership first if its predicted time is over the budget"
        }
        MemberAction::Skip => "skip",
    };
    format!(
        "plan: {}{leader}: {action}: db {}, {} in use",
        m.name,
        say::mib(m.db_size),
        say::mib(m.db_size_in_use)
    )
}
