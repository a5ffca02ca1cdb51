//! `groundskeeper-job` under real SIGTERM and SIGINT: the spawned binary is signalled while it
//! works (against the Scylla Manager Agent stand-in and real etcd 3.4 and 3.5 clusters), then its
//! exit code, its result file and what the remote side saw are checked. Each test waits for
//! observable state before signalling (a cleanup running on the stand-in, the runner's own log
//! line saying a defrag call is sent), never for a fixed time.

use crate::common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use groundskeeper_e2e::etcd_cluster::{ClusterOptions, EtcdCluster, EtcdVersion, etcd_or_skip};
use groundskeeper_e2e::scylla_agent::{AgentSpec, KeyspaceKind, ScyllaAgent};
use groundskeeper_job::etcd::defrag::{Progress, run_defrag};
use groundskeeper_protocol::operation::LeaderTurnPolicy;
use groundskeeper_protocol::result::{
    DefragReport, ErrorKind, KeyspaceStatus, MemberDefragState, TransferState,
};
use groundskeeper_protocol::{JobResult, Outcome, Report, exit};
use tokio::io::{AsyncBufReadExt, BufReader};

/// Generous bounds for a loaded 2-core machine: reaching them is a failure, not a wait.
const START_WITHIN: Duration = Duration::from_secs(120);
const EXIT_WITHIN: Duration = Duration::from_secs(90);

fn signal(child: &tokio::process::Child, signal: libc::c_int) {
    let pid = child.id().expect("the runner is still running") as libc::pid_t;
    // SAFETY: kill(2) on our own child's pid.
    let sent = unsafe { libc::kill(pid, signal) };
    assert_eq!(sent, 0, "signal {signal} sent");
}

/// Waits for the runner to exit after a signal; its exit code (never death by the signal) and
/// its stderr.
async fn exit_of(child: tokio::process::Child) -> (i32, String) {
    let output = tokio::time::timeout(EXIT_WITHIN, child.wait_with_output())
        .await
        .expect("the runner exits within its grace period")
        .expect("the runner's output");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let code = output.status.code().unwrap_or_else(|| {
        panic!("killed by the signal instead of exiting ({:?}); stderr:\n{stderr}", output.status)
    });
    (code, stderr)
}

fn read_result(path: &Path, stderr: &str) -> JobResult {
    let json =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("no result file ({e}); stderr:\n{stderr}"));
    JobResult::parse(&json).unwrap_or_else(|e| panic!("bad result ({e}): {json}"))
}

#[tokio::test]
async fn a_signal_stops_the_cleanup_running_on_the_node_and_the_result_says_so() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    for (sig, name) in [(libc::SIGTERM, "SIGTERM"), (libc::SIGINT, "SIGINT")] {
        let agent = ScyllaAgent::start(
            AgentSpec::default()
                .keyspace("shop", KeyspaceKind::Vnodes)
                .cleanup_runs_until_stopped()
                // Scylla holds a wait_task until its timeout; so does the stand-in, briefly.
                .wait_task_delay(Duration::from_millis(100)),
        )
        .await;
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("auth-token.yaml");
        std::fs::write(&token, format!("auth_token: {}\n", agent.token())).unwrap();
        let result_file = dir.path().join("result.json");
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_groundskeeper-job"))
            .arg("cleanup")
            .args(["--node-address", &agent.host()])
            .args(["--agent-port", &agent.port().to_string()])
            .arg("--auth-token-file")
            .arg(&token)
            .arg("--result-file")
            .arg(&result_file)
            .args(["--poll-interval", "100ms"])
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start groundskeeper-job");

        let started = Instant::now();
        while agent.running_cleanups().is_empty() {
            assert!(started.elapsed() < START_WITHIN, "no cleanup started: {:?}", agent.call_lines());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(agent.running_cleanups(), ["system_distributed"]);
        let calls_before = agent.calls().len();
        signal(&child, sig);
        let (code, stderr) = exit_of(child).await;

        assert_eq!(code, exit::RETRYABLE, "{name}: {stderr}");
        let result = read_result(&result_file, &stderr);
        assert_eq!(result.outcome, Outcome::Failed, "{name}");
        assert_eq!(result.stopped_by.as_deref(), Some(name));
        let error = result.error.as_ref().expect("an error");
        assert_eq!(error.kind, ErrorKind::Retryable);
        assert!(error.message.contains(&format!("stopped by signal ({name})")), "{}", error.message);
        let Report::Cleanup(report) = &result.report else { panic!("not a cleanup report: {result:?}") };
        let statuses: Vec<(&str, KeyspaceStatus)> =
            report.keyspaces.iter().map(|k| (k.name.as_str(), k.status)).collect();
        assert_eq!(
            statuses,
            [
                ("system_distributed", KeyspaceStatus::Failed),
                ("system_traces", KeyspaceStatus::NotStarted),
                ("shop", KeyspaceStatus::NotStarted),
            ],
            "{name}"
        );
        let stopped = report.keyspaces[0].message.as_deref().unwrap_or_default();
        assert!(stopped.contains(&format!("stopped by {name}")), "{stopped}");
        assert!(stopped.contains("aborted") && stopped.contains("stop_compaction CLEANUP sent"), "{stopped}");
        assert!(!report.marked_node_clean);

        // The node saw the task aborted and the cleanup compactions stopped, after the signal.
        let after: Vec<String> =
            agent.calls()[calls_before..].iter().filter(|c| c.method == "POST").map(|c| c.line()).collect();
        assert!(after.iter().any(|l| l.starts_with("POST /task_manager/abort_task/")), "{after:?}");
        assert!(after.contains(&"POST /compaction_manager/stop_compaction".to_owned()), "{after:?}");
        // Once before cleaning (a stale cleanup), once to stop this one.
        assert_eq!(agent.stop_compaction_types(), ["CLEANUP", "CLEANUP"]);
        assert!(agent.running_cleanups().is_empty(), "the cleanup still runs on the node");
        assert_eq!(agent.stopped_keyspaces(), ["system_distributed"]);
        assert!(agent.cleaned_keyspaces().is_empty());
        assert!(!agent.marked_clean());
    }
}

// ---- etcd ----------------------------------------------------------------------------------

/// Churned dbs reach this size; the threshold below sits well under it.
const CHURNED_DB: i64 = 6_000_000;
const MIN_DEFRAG_BYTES: i64 = 1_000_000;

async fn fragmented(version: EtcdVersion) -> Option<EtcdCluster> {
    let binary = etcd_or_skip(version)?;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cluster =
        EtcdCluster::start(&binary, ClusterOptions::default()).await.expect("the etcd cluster starts");
    cluster.churn(CHURNED_DB).await.expect("churn");
    Some(cluster)
}

fn defrag_report(result: &JobResult) -> &DefragReport {
    match &result.report {
        Report::Defrag(report) => report,
        other => panic!("not a defrag report: {other:?}"),
    }
}

groundskeeper_e2e::for_each_etcd_version!(
    sigterm_lets_the_defrag_in_flight_finish_and_starts_no_other,
    a_transferee_that_dies_is_noticed_within_seconds_and_reported,
);

async fn sigterm_lets_the_defrag_in_flight_finish_and_starts_no_other(version: EtcdVersion) {
    let Some(cluster) = fragmented(version).await else {
        return;
    };
    let before = cluster.states().await.unwrap();
    let result_file = cluster.dir().join("result.json");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_groundskeeper-job"))
        .args(["defrag", "--endpoints", &cluster.endpoints_flag()])
        .args(["--min-defrag-bytes", &MIN_DEFRAG_BYTES.to_string()])
        // So that "no leadership moved" below means the stop prevented it.
        .args(["--leader-turn", "always"])
        .arg("--result-file")
        .arg(&result_file)
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start groundskeeper-job");

    // The runner logs this line right after it sent the first member's Defragment call.
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut stderr = String::new();
    let first = tokio::time::timeout(START_WITHIN, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            stderr.push_str(&line);
            stderr.push('\n');
            if let Some(rest) = line.split("defragmenting member=").nth(1) {
                return rest.split_whitespace().next().unwrap().to_owned();
            }
        }
        panic!("the runner ended before defragmenting:\n{stderr}")
    })
    .await
    .expect("a defrag starts");
    signal(&child, libc::SIGTERM);
    let rest = tokio::spawn(async move {
        let mut rest = String::new();
        while let Some(line) = lines.next_line().await.unwrap() {
            rest.push_str(&line);
            rest.push('\n');
        }
        rest
    });
    let (code, _) = exit_of(child).await;
    stderr.push_str(&rest.await.unwrap());

    assert_eq!(code, exit::RETRYABLE, "{stderr}");
    let result = read_result(&result_file, &stderr);
    assert_eq!(result.outcome, Outcome::Failed);
    assert_eq!(result.stopped_by.as_deref(), Some("SIGTERM"));
    let message = result.message.clone().unwrap_or_default();
    assert!(message.contains("stopped by signal (SIGTERM)"), "{message}");
    assert!(message.contains("1 member(s) defragmented, 2 not reached"), "{message}");
    let report = defrag_report(&result);
    let states: Vec<(&str, MemberDefragState)> = report
        .members
        .iter()
        .map(|m| (m.name.as_str(), m.state.expect("every member has a state")))
        .collect();
    assert_eq!(states[0], (first.as_str(), MemberDefragState::Defragmented), "{report:?}");
    assert!(states[1..].iter().all(|(_, s)| *s == MemberDefragState::NotReached), "{report:?}");
    let done = &report.members[0];
    assert!(done.defragmented && done.duration_ms > 0, "{done:?}");
    assert!(done.db_size_after < done.db_size_before / 2, "{done:?}");
    assert!(report.members[1..].iter().all(|m| !m.defragmented && m.reason.contains("stopped by SIGTERM")));
    assert!(report.leader_transfer.is_none() && report.leader_moved_to.is_none());

    // etcd agrees: the member in flight shrank, the others were not touched.
    let after = cluster.states().await.unwrap();
    for (b, a) in before.iter().zip(&after) {
        if a.name == first {
            assert!(a.db_size < b.db_size / 2, "{a:?} was not defragmented (was {} bytes)", b.db_size);
        } else {
            assert!(a.db_size > b.db_size / 2, "{a:?} was defragmented (was {} bytes)", b.db_size);
        }
    }
}

async fn a_transferee_that_dies_is_noticed_within_seconds_and_reported(version: EtcdVersion) {
    let Some(mut cluster) = fragmented(version).await else {
        return;
    };
    let mut args = common::defrag_args(&cluster, &cluster.dir().join("result.json"), MIN_DEFRAG_BYTES, 45.0);
    // Far beyond the test's own bound: only noticing the dead member ends the run in time.
    args.member_timeout_seconds = 600;
    args.leader_turn = LeaderTurnPolicy::Always;
    let options = args.options().unwrap();
    let names: Vec<String> = (0..3).map(|i| cluster.name(i).to_owned()).collect();
    let mut killed: Option<(String, Instant)> = None;
    let result = {
        let cluster = &mut cluster;
        run_defrag(&options, &mut |progress| {
            // etcd answered MoveLeader: the new leader dies before the members agree.
            if let Progress::LeaderMoved { to, .. } = progress
                && killed.is_none()
            {
                cluster.kill(names.iter().position(|n| n == to).unwrap());
                killed = Some((to.to_owned(), Instant::now()));
            }
        })
        .await
    };
    let (victim, at) = killed.expect("leadership moved and its new leader was killed");
    assert!(
        at.elapsed() < Duration::from_secs(60),
        "the dead transferee was noticed only after {:?}",
        at.elapsed()
    );
    assert_eq!(result.outcome, Outcome::Failed, "{result:?}");
    let error = result.error.as_ref().unwrap();
    assert_eq!(error.kind, ErrorKind::Retryable);
    assert!(
        error.message.contains(&format!("the new leader {victim}")) && error.message.contains("unreachable"),
        "{}",
        error.message
    );
    let report = defrag_report(&result);
    assert_eq!(report.leader_moved_to.as_deref(), Some(victim.as_str()));
    let transfer = report.leader_transfer.as_ref().expect("the transfer is reported");
    assert_eq!((transfer.to.as_str(), transfer.state), (victim.as_str(), TransferState::Moved));
    // Leadership moved at the old leader's turn, after both followers were defragmented (the
    // victim was one of them): the run stopped at the old leader, before its defrag.
    let states: Vec<MemberDefragState> = report.members.iter().map(|m| m.state.unwrap()).collect();
    assert_eq!(
        states,
        [MemberDefragState::Defragmented, MemberDefragState::Defragmented, MemberDefragState::Stopped],
        "{report:?}"
    );
    assert!(report.members[..2].iter().all(|m| m.defragmented && m.duration_ms > 0));
    assert_eq!(report.members[2].name, transfer.from);
    // etcd agrees for the member still up.
    let second = &report.members[1];
    let i = names.iter().position(|n| *n == second.name).unwrap();
    let now = cluster.state(i).await.unwrap();
    assert!(now.db_size < second.db_size_before / 2, "{now:?} vs {second:?}");
}
