//! `groundskeeper-job cleanup` against the Scylla Manager Agent stand-in: the real binary for exit
//! codes, result file and stderr; the library for finer checks.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use groundskeeper_e2e::scylla_agent::{AgentSpec, KeyspaceKind, Proxy, ScyllaAgent};
use groundskeeper_job::scylla::cleanup::{self, CleanupArgs, SKIP_LOCAL, SKIP_TABLETS};
use groundskeeper_protocol::result::{CleanupReport, ErrorKind, KeyspaceStatus};
use groundskeeper_protocol::{JobResult, Outcome, Report, exit};
use tempfile::TempDir;

fn install_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A node with Scylla's system keyspaces plus user keyspaces of each kind.
fn node() -> AgentSpec {
    AgentSpec::default()
        .keyspace("shop", KeyspaceKind::Vnodes)
        .keyspace("events", KeyspaceKind::Tablets)
        .keyspace("ledger", KeyspaceKind::Vnodes)
}

struct Files {
    dir: TempDir,
}

impl Files {
    fn new() -> Self {
        Self { dir: tempfile::tempdir().unwrap() }
    }

    fn write(&self, name: &str, content: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, content).unwrap();
        path
    }

    fn token(&self, token: &str) -> PathBuf {
        self.write("auth-token.yaml", &format!("auth_token: {token}\n"))
    }

    fn result_path(&self) -> PathBuf {
        self.dir.path().join("result.json")
    }
}

fn args(agent: &ScyllaAgent, files: &Files, token_file: &Path) -> CleanupArgs {
    CleanupArgs {
        agent_port: agent.port(),
        result_file: files.result_path(),
        poll_interval: Duration::from_millis(10),
        ..CleanupArgs::new(agent.host(), token_file)
    }
}

fn cleanup_report(result: &JobResult) -> &CleanupReport {
    match &result.report {
        Report::Cleanup(report) => report,
        other => panic!("not a cleanup report: {other:?}"),
    }
}

fn statuses(result: &JobResult) -> Vec<(String, KeyspaceStatus)> {
    cleanup_report(result).keyspaces.iter().map(|k| (k.name.clone(), k.status)).collect()
}

fn owned(list: &[(&str, KeyspaceStatus)]) -> Vec<(String, KeyspaceStatus)> {
    list.iter().map(|(n, s)| ((*n).to_owned(), *s)).collect()
}

/// Runs the real binary with `args` as command-line flags.
async fn run_binary(args: &CleanupArgs, extra: &[&str]) -> (i32, Output, Option<JobResult>) {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_groundskeeper-job"));
    command
        .arg("cleanup")
        .args(["--node-address", &args.node_address])
        .args(["--agent-port", &args.agent_port.to_string()])
        .arg("--auth-token-file")
        .arg(&args.auth_token_file)
        .arg("--result-file")
        .arg(&args.result_file)
        .args(["--poll-interval", "10ms"])
        .args(extra)
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1");
    if let Some(ca) = &args.agent_ca_file {
        command.arg("--agent-ca-file").arg(ca);
    }
    for keyspace in &args.keyspaces {
        command.args(["--keyspace", keyspace]);
    }
    let output = command.output().await.expect("run groundskeeper-job");
    // Only a regular file holds a result (a full device reads as endless zeros).
    let result = std::fs::metadata(&args.result_file)
        .is_ok_and(|m| m.is_file())
        .then(|| std::fs::read_to_string(&args.result_file).ok())
        .flatten()
        .map(|json| JobResult::parse(&json).expect("the result file is a JobResult"));
    (output.status.code().expect("exited"), output, result)
}

/// Runs the real binary as [`run_binary`] does; also returns its peak resident memory in bytes,
/// as its last log line tells it. (The kernel's count for a child, `wait4`'s `ru_maxrss`,
/// includes the peak of the test process it was spawned from.)
async fn run_binary_measured(args: &CleanupArgs, extra: &[&str]) -> (i32, Output, Option<JobResult>, u64) {
    let (code, output, result) = run_binary(args, extra).await;
    let peak = peak_memory_logged(&stderr(&output));
    (code, output, result, peak)
}

/// The bytes of `peak_memory="… MiB (N bytes)"` in the runner's `run finished` line.
fn peak_memory_logged(stderr: &str) -> u64 {
    let line = stderr.lines().rev().find(|l| l.contains("run finished")).expect("a `run finished` line");
    let (_, rest) = line.split_once(" MiB (").expect("peak memory in MiB and bytes");
    rest.split(' ').next().and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{line}"))
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[tokio::test]
async fn good_token_cleans_every_vnode_keyspace_and_exits_0() {
    let agent = ScyllaAgent::start(node()).await;
    let files = Files::new();
    let args = args(&agent, &files, &files.token(&agent.token()));

    let (code, output, result) = run_binary(&args, &[]).await;

    assert_eq!(code, exit::SUCCESS, "{}", stderr(&output));
    let result = result.expect("result file written");
    assert_eq!(result.outcome, Outcome::Succeeded);
    assert_eq!(
        statuses(&result),
        owned(&[
            ("system_distributed", KeyspaceStatus::Cleaned),
            ("system_traces", KeyspaceStatus::Cleaned),
            ("shop", KeyspaceStatus::Cleaned),
            ("ledger", KeyspaceStatus::Cleaned),
        ])
    );
    let report = cleanup_report(&result);
    assert!(report.marked_node_clean && agent.marked_clean());
    assert!(!report.stopped_stale_cleanup, "nothing was running");
    assert!(report.keyspaces.iter().all(|k| k.mode.as_deref() == Some("async")));
    assert_eq!(agent.cleaned_keyspaces(), ["system_distributed", "system_traces", "shop", "ledger"]);
    // The same result also goes to stdout for a person running the binary by hand.
    let stdout: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(stdout["outcome"], "succeeded");
}

#[tokio::test]
async fn wrong_token_exits_2_without_revealing_either_token() {
    let agent = ScyllaAgent::start(node()).await;
    let files = Files::new();
    let args = args(&agent, &files, &files.token("not-the-agent-token"));

    let (code, output, result) = run_binary(&args, &[]).await;

    assert_eq!(code, exit::BAD_INPUT, "{}", stderr(&output));
    let result = result.expect("result file written");
    let error = result.error.clone().expect("an error");
    assert_eq!(error.kind, ErrorKind::BadInput);
    assert!(error.message.contains("HTTP 401"), "{}", error.message);
    assert!(
        error.message.contains(&args.auth_token_file.display().to_string()),
        "names the token file: {}",
        error.message
    );
    let everything = format!(
        "{}{}{}",
        stderr(&output),
        String::from_utf8_lossy(&output.stdout),
        std::fs::read_to_string(&args.result_file).unwrap()
    );
    assert!(!everything.contains("not-the-agent-token"));
    assert!(!everything.contains(&agent.token()));
    assert!(agent.cleaned_keyspaces().is_empty());
}

#[tokio::test]
async fn missing_or_malformed_token_file_exits_2_naming_the_file() {
    let agent = ScyllaAgent::start(node()).await;
    let files = Files::new();
    for (name, content, problem) in [
        ("missing.yaml", None, "does not exist"),
        ("empty.yaml", Some(""), "empty"),
        ("wrong-key.yaml", Some("token: abc\n"), "auth_token"),
        ("not-yaml.yaml", Some("auth_token: [abc\n"), "not valid YAML"),
    ] {
        let path = match content {
            Some(content) => files.write(name, content),
            None => files.dir.path().join(name),
        };
        let args = args(&agent, &files, &path);

        let (code, output, result) = run_binary(&args, &[]).await;

        assert_eq!(code, exit::BAD_INPUT, "{name}: {}", stderr(&output));
        let message = result.expect("result file written").error.unwrap().message;
        assert!(message.contains(&path.display().to_string()), "{name}: {message}");
        assert!(message.contains(problem), "{name}: {message}");
        assert!(stderr(&output).contains(&path.display().to_string()), "{name}");
    }
    assert!(agent.calls().is_empty(), "nothing is sent without a token");
}

/// Scylla restarts while the runner follows a cleanup task: the task is gone, which no input
/// of the user's caused, so the run is retryable (exit 1), not bad input.
#[tokio::test]
async fn a_task_lost_to_a_restart_is_retryable() {
    let agent = ScyllaAgent::start(node().polls_until_done(u32::MAX)).await;
    let files = Files::new();
    let args = args(&agent, &files, &files.token(&agent.token()));
    let run = tokio::spawn({
        let args = args.clone();
        async move { run_binary(&args, &[]).await }
    });
    groundskeeper_e2e::wait::eventually("the runner following the task", || {
        agent.call_lines().iter().any(|c| c.contains("task_status") || c.contains("wait_task"))
    })
    .await;
    agent.restart();
    let (code, output, result) = run.await.unwrap();
    assert_eq!(code, exit::RETRYABLE, "{}", stderr(&output));
    let error = result.expect("result file written").error.unwrap();
    assert_eq!(error.kind, ErrorKind::Retryable);
    assert!(error.message.contains("no longer known"), "{}", error.message);
}

/// Arguments that do not parse, or waits of zero, are bad input with a result written all the
/// same, and nothing is sent.
#[tokio::test]
async fn unparsable_arguments_and_zero_waits_exit_2_with_a_result() {
    let agent = ScyllaAgent::start(node()).await;
    let files = Files::new();
    let args = args(&agent, &files, &files.token(&agent.token()));
    for (extra, names) in [
        (&["--request-timeout", "5x"][..], "--request-timeout"),
        (&["--request-timeout", "0s"][..], "--request-timeout"),
        (&["--no-such-flag"][..], "--no-such-flag"),
    ] {
        let _ = std::fs::remove_file(&args.result_file);
        let (code, output, result) = run_binary(&args, extra).await;
        assert_eq!(code, exit::BAD_INPUT, "{extra:?}: {}", stderr(&output));
        let result = result.unwrap_or_else(|| panic!("{extra:?}: no result written"));
        assert_eq!(result.outcome, Outcome::Failed);
        let error = result.error.unwrap();
        assert_eq!(error.kind, ErrorKind::BadInput);
        assert!(error.message.contains(names), "{extra:?}: {}", error.message);
    }
    assert!(agent.calls().is_empty(), "nothing is sent on bad arguments");
}

/// An address with URL syntax could send the token elsewhere: refused before anything is sent.
#[tokio::test]
async fn a_node_address_with_url_syntax_exits_2_and_sends_nothing() {
    let agent = ScyllaAgent::start(node()).await;
    let files = Files::new();
    for address in ["127.0.0.1:1/", "user@127.0.0.1", "https://127.0.0.1"] {
        let mut args = args(&agent, &files, &files.token(&agent.token()));
        args.node_address = address.into();

        let (code, output, result) = run_binary(&args, &[]).await;

        assert_eq!(code, exit::BAD_INPUT, "{address}: {}", stderr(&output));
        let message = result.expect("result file written").error.unwrap().message;
        assert!(message.contains("--node-address"), "{address}: {message}");
    }
    assert!(agent.calls().is_empty(), "nothing is sent to a refused address");
}

#[tokio::test]
async fn topology_change_exits_1_and_later_keyspaces_are_not_started() {
    let agent = ScyllaAgent::start(node().topology_changing("shop")).await;
    let files = Files::new();
    let args = args(&agent, &files, &files.token(&agent.token()));

    let (code, output, result) = run_binary(&args, &[]).await;

    assert_eq!(code, exit::RETRYABLE, "{}", stderr(&output));
    let result = result.expect("result file written");
    assert_eq!(result.outcome, Outcome::Failed);
    assert_eq!(result.error.as_ref().unwrap().kind, ErrorKind::Retryable);
    assert!(
        result
            .error
            .as_ref()
            .unwrap()
            .message
            .contains("Can not perform cleanup operation when topology changes")
    );
    assert_eq!(
        statuses(&result),
        owned(&[
            ("system_distributed", KeyspaceStatus::Cleaned),
            ("system_traces", KeyspaceStatus::Cleaned),
            ("shop", KeyspaceStatus::Failed),
            ("ledger", KeyspaceStatus::NotStarted),
        ])
    );
    assert!(!cleanup_report(&result).marked_node_clean);
    assert!(!agent.marked_clean(), "a half-cleaned node is not marked clean");
    assert!(!agent.call_lines().iter().any(|c| c.ends_with("keyspace_cleanup/ledger")));
}

#[tokio::test]
async fn tablets_and_local_keyspaces_are_never_cleaned() {
    install_provider();
    let agent = ScyllaAgent::start(node()).await;
    let files = Files::new();
    let token = files.token(&agent.token());

    let result = cleanup::run(&args(&agent, &files, &token)).await;
    assert_eq!(result.outcome, Outcome::Succeeded);
    for keyspace in ["events", "system", "system_schema"] {
        assert!(
            !agent.call_lines().iter().any(|c| c.ends_with(&format!("/{keyspace}"))),
            "{keyspace} was sent a cleanup: {:?}",
            agent.call_lines()
        );
    }
    let listing = agent.calls().into_iter().find(|c| c.path == "/storage_service/keyspaces").unwrap();
    assert_eq!(
        listing.query,
        [
            ("type".to_owned(), "non_local_strategy".to_owned()),
            ("replication".to_owned(), "vnodes".to_owned())
        ]
    );

    // Asked for by name, they are reported as skipped with the reason, still not cleaned.
    let mut named = args(&agent, &files, &token);
    named.keyspaces = vec!["events".into(), "system".into()];
    let before = agent.calls().len();
    let result = cleanup::run(&named).await;
    assert_eq!(result.outcome, Outcome::Skipped, "{result:?}");
    assert_eq!(groundskeeper_job::run::exit_code(&result), exit::SUCCESS);
    let report = cleanup_report(&result);
    let reasons: Vec<_> =
        report.keyspaces.iter().map(|k| (k.name.as_str(), k.status, k.message.as_deref())).collect();
    assert_eq!(
        reasons,
        [
            ("events", KeyspaceStatus::Skipped, Some(SKIP_TABLETS)),
            ("system", KeyspaceStatus::Skipped, Some(SKIP_LOCAL)),
        ]
    );
    assert!(!agent.calls()[before..].iter().any(|c| c.path.contains("keyspace_cleanup")), "nothing cleaned");
}

#[tokio::test]
async fn slow_task_is_followed_with_rising_progress_on_stderr() {
    let agent = ScyllaAgent::start(node().polls_until_done(6)).await;
    let files = Files::new();
    let mut args = args(&agent, &files, &files.token(&agent.token()));
    args.keyspaces = vec!["shop".into()];

    let (code, output, result) = run_binary(&args, &[]).await;

    assert_eq!(code, exit::SUCCESS, "{}", stderr(&output));
    let result = result.unwrap();
    assert_eq!(statuses(&result), owned(&[("shop", KeyspaceStatus::Cleaned)]));
    let progress: Vec<f64> = stderr(&output)
        .lines()
        .filter(|l| l.contains("cleanup progress"))
        .filter_map(|l| {
            let value = l.split("completed=").nth(1)?.split_whitespace().next()?;
            value.parse().ok()
        })
        .collect();
    assert!(progress.len() >= 3, "progress lines: {progress:?}\n{}", stderr(&output));
    assert!(progress.windows(2).all(|w| w[0] <= w[1]), "{progress:?}");
    assert!(progress.first() < progress.last(), "{progress:?}");
    assert!(stderr(&output).contains("state=done"));
    let polls = agent.call_lines().iter().filter(|c| c.contains("/task_manager/")).count();
    assert!(polls >= 3, "{:?}", agent.call_lines());
    // Only part of the node was cleaned: its own "cleanup needed" flag stays.
    assert!(!cleanup_report(&result).marked_node_clean && !agent.marked_clean());
}

#[tokio::test]
async fn a_node_without_the_task_api_is_cleaned_with_the_blocking_call() {
    install_provider();
    let agent = ScyllaAgent::start(node().old_node()).await;
    let files = Files::new();

    let result = cleanup::run(&args(&agent, &files, &files.token(&agent.token()))).await;

    assert_eq!(result.outcome, Outcome::Succeeded, "{result:?}");
    let report = cleanup_report(&result);
    assert!(report.keyspaces.iter().all(|k| k.mode.as_deref() == Some("sync")));
    assert_eq!(agent.cleaned_keyspaces(), ["system_distributed", "system_traces", "shop", "ledger"]);
    let calls = agent.call_lines();
    // One probe of the task API, then the blocking call for every keyspace.
    assert_eq!(calls.iter().filter(|c| c.starts_with("POST /tasks/")).count(), 1, "{calls:?}");
    assert!(calls.contains(&"POST /storage_service/keyspace_cleanup/ledger".to_owned()));
    assert!(!report.marked_node_clean, "the old node does not offer it");
}

#[tokio::test]
async fn unknown_keyspace_exits_2_naming_it() {
    let agent = ScyllaAgent::start(node()).await;
    let files = Files::new();
    let mut args = args(&agent, &files, &files.token(&agent.token()));
    args.keyspaces = vec!["shop".into(), "no_such_keyspace".into()];

    let (code, output, result) = run_binary(&args, &[]).await;

    assert_eq!(code, exit::BAD_INPUT, "{}", stderr(&output));
    let message = result.unwrap().error.unwrap().message;
    assert!(message.contains("no_such_keyspace"), "{message}");
    assert!(!message.contains("shop"), "{message}");
    assert!(agent.cleaned_keyspaces().is_empty(), "nothing is cleaned on bad input");
}

#[tokio::test]
async fn the_agent_certificate_verifies_against_its_ca_file() {
    install_provider();
    let agent = ScyllaAgent::start(node()).await;
    let files = Files::new();
    let mut args = args(&agent, &files, &files.token(&agent.token()));
    args.agent_ca_file = Some(files.write("ca.pem", agent.ca_pem()));

    let result = cleanup::run(&args).await;

    assert_eq!(result.outcome, Outcome::Succeeded, "{result:?}");
}

#[tokio::test]
async fn a_wrong_ca_file_fails_the_handshake_as_bad_input() {
    let agent = ScyllaAgent::start(node()).await;
    let files = Files::new();
    let mut args = args(&agent, &files, &files.token(&agent.token()));
    args.agent_ca_file = Some(files.write("other-ca.pem", &unrelated_ca_pem()));

    let (code, output, result) = run_binary(&args, &[]).await;

    assert_eq!(code, exit::BAD_INPUT, "{}", stderr(&output));
    let message = result.unwrap().error.unwrap().message;
    assert!(message.contains("certificate"), "{message}");
    assert!(agent.calls().is_empty(), "no request got through");
}

#[tokio::test]
async fn a_ca_file_without_a_certificate_is_bad_input() {
    install_provider();
    let agent = ScyllaAgent::start(node()).await;
    let files = Files::new();
    let mut args = args(&agent, &files, &files.token(&agent.token()));
    let ca = files.write("ca.pem", "not a certificate\n");
    args.agent_ca_file = Some(ca.clone());

    let result = cleanup::run(&args).await;

    let error = result.error.unwrap();
    assert_eq!(error.kind, ErrorKind::BadInput);
    assert!(error.message.contains(&ca.display().to_string()), "{}", error.message);
}

fn unrelated_ca_pem() -> String {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let key = rcgen::KeyPair::generate().unwrap();
    params.self_signed(&key).unwrap().pem()
}

#[tokio::test]
async fn a_stale_cleanup_is_stopped_before_anything_is_cleaned() {
    install_provider();
    let agent = ScyllaAgent::start(node().stale_cleanup("shop")).await;
    let files = Files::new();

    let result = cleanup::run(&args(&agent, &files, &files.token(&agent.token()))).await;

    assert_eq!(result.outcome, Outcome::Succeeded, "{result:?}");
    assert!(cleanup_report(&result).stopped_stale_cleanup);
    assert!(!agent.stale_cleanup_running());
    let calls = agent.call_lines();
    let position = |needle: &str| calls.iter().position(|c| c.starts_with(needle));
    let abort = position("POST /task_manager/abort_task/").expect("the stale task is aborted");
    let stop = position("POST /compaction_manager/stop_compaction").expect("cleanups are stopped");
    let first_cleanup = position("POST /tasks/compaction/keyspace_cleanup/").unwrap();
    assert!(abort < first_cleanup && stop < first_cleanup, "{calls:?}");
    let stop_call =
        agent.calls().into_iter().find(|c| c.path == "/compaction_manager/stop_compaction").unwrap();
    assert_eq!(stop_call.query, [("type".to_owned(), "CLEANUP".to_owned())]);
}

#[tokio::test]
async fn a_stale_cleanup_on_an_old_node_is_seen_in_the_compaction_list() {
    install_provider();
    let agent = ScyllaAgent::start(node().old_node().stale_cleanup("shop")).await;
    let files = Files::new();

    let result = cleanup::run(&args(&agent, &files, &files.token(&agent.token()))).await;

    assert_eq!(result.outcome, Outcome::Succeeded, "{result:?}");
    assert!(cleanup_report(&result).stopped_stale_cleanup);
    assert!(!agent.stale_cleanup_running());
}

#[tokio::test]
async fn a_failed_cleanup_task_is_retryable_and_explained() {
    install_provider();
    let agent = ScyllaAgent::start(node().failing_task("system_traces")).await;
    let files = Files::new();

    let result = cleanup::run(&args(&agent, &files, &files.token(&agent.token()))).await;

    assert_eq!(groundskeeper_job::run::exit_code(&result), exit::RETRYABLE);
    let error = result.error.clone().unwrap();
    assert!(error.message.contains("system_traces"), "{}", error.message);
    assert!(error.message.contains("injected by the stand-in"), "{}", error.message);
    assert_eq!(
        statuses(&result),
        owned(&[
            ("system_distributed", KeyspaceStatus::Cleaned),
            ("system_traces", KeyspaceStatus::Failed),
            ("shop", KeyspaceStatus::NotStarted),
            ("ledger", KeyspaceStatus::NotStarted),
        ])
    );
}

#[tokio::test]
async fn an_unreachable_agent_is_retryable() {
    install_provider();
    let closed = groundskeeper_e2e::net::ClosedPort::new();
    let port = closed.port();
    let files = Files::new();
    let args = CleanupArgs {
        agent_port: port,
        result_file: files.result_path(),
        ..CleanupArgs::new("127.0.0.1", files.token("t"))
    };

    let result = cleanup::run(&args).await;

    assert_eq!(groundskeeper_job::run::exit_code(&result), exit::RETRYABLE, "{result:?}");
}

/// A proxy that echoes the request's headers in its error page puts the bearer token in the body
/// the runner reads: it must reach no message, log line or result.
#[tokio::test]
async fn a_token_echoed_by_a_proxy_reaches_no_output() {
    install_provider();
    let spec = AgentSpec { proxy: Proxy::EchoHeadersOnError, ..node().topology_changing("shop") };
    let agent = ScyllaAgent::start(spec).await;
    let files = Files::new();
    let token = agent.token();
    let args = args(&agent, &files, &files.token(&token));
    let (code, output, result) = run_binary(&args, &[]).await;
    assert_eq!(code, exit::RETRYABLE, "a 502 from the proxy may pass: {}", stderr(&output));
    let result_text = std::fs::read_to_string(&args.result_file).unwrap();
    assert!(result_text.contains("502"), "the proxy's answer is what the result tells: {result_text}");
    for (name, text) in [
        ("stderr", stderr(&output)),
        ("stdout", String::from_utf8_lossy(&output.stdout).into_owned()),
        ("result", result_text),
    ] {
        assert!(!text.contains(&token), "{name} holds the token:\n{text}");
    }
    assert!(result.is_some());
}

/// An answer that is not the JSON the API describes comes from a broken agent or a proxy, not
/// from the user's input: retryable.
#[tokio::test]
async fn an_answer_that_is_not_json_is_retryable() {
    install_provider();
    let spec = AgentSpec { proxy: Proxy::GarbledBodies, ..node() };
    let agent = ScyllaAgent::start(spec).await;
    let files = Files::new();
    let args = args(&agent, &files, &files.token(&agent.token()));
    let (code, output, result) = run_binary(&args, &[]).await;
    assert_eq!(code, exit::RETRYABLE, "{}", stderr(&output));
    let error = result.expect("a result").error.expect("an error");
    assert_eq!(error.kind, ErrorKind::Retryable);
    assert!(error.message.contains("unexpected response"), "{}", error.message);
}

/// The controller lists the keyspaces the node lost ranges of and says they are all: once they
/// are clean, Scylla's own flag is reset as after a whole-node cleanup (through the binary, so
/// the flag's spelling is checked too).
#[tokio::test]
async fn listed_keyspaces_said_to_be_all_mark_the_node_clean() {
    let agent = ScyllaAgent::start(node()).await;
    let files = Files::new();
    let mut args = args(&agent, &files, &files.token(&agent.token()));
    args.keyspaces = vec!["shop".into()];

    let (code, output, result) = run_binary(&args, &["--mark-node-clean"]).await;

    assert_eq!(code, exit::SUCCESS, "{}", stderr(&output));
    let result = result.unwrap();
    assert_eq!(statuses(&result), owned(&[("shop", KeyspaceStatus::Cleaned)]));
    assert!(cleanup_report(&result).marked_node_clean && agent.marked_clean());
}

#[tokio::test]
async fn a_failed_listed_keyspace_leaves_the_flag_set_even_when_said_to_be_all() {
    let agent = ScyllaAgent::start(node().failing_task("shop")).await;
    let files = Files::new();
    let mut args = args(&agent, &files, &files.token(&agent.token()));
    args.keyspaces = vec!["shop".into()];
    args.mark_node_clean = true;

    let result = cleanup::run(&args).await;

    assert_eq!(result.outcome, Outcome::Failed);
    assert!(!cleanup_report(&result).marked_node_clean && !agent.marked_clean());
}

/// Peak memory the runner may reach on a hostile answer: its own needs (about 20 MiB in a debug
/// build) and the answer's bound (4 MiB for a keyspace list) read once, with room to parse it.
const HOSTILE_ANSWER_PEAK: u64 = 40 * 1024 * 1024;

/// A body that never ends is read up to its bound (4 MiB for the keyspace list), then refused:
/// exit 2, memory bounded, and nothing of the body echoed.
#[tokio::test]
async fn an_endless_answer_is_refused_at_its_bound() {
    install_provider();
    let agent = ScyllaAgent::start(AgentSpec { proxy: Proxy::EndlessBodies, ..node() }).await;
    let files = Files::new();
    let args = args(&agent, &files, &files.token(&agent.token()));

    let (code, output, result, peak) = run_binary_measured(&args, &[]).await;

    assert_eq!(code, exit::BAD_INPUT, "{}", stderr(&output));
    let message = result.expect("a result").error.expect("an error").message;
    assert!(message.contains("GET /storage_service/keyspaces"), "{message}");
    assert!(message.contains("larger than 4194304 bytes (4 MiB)"), "{message}");
    assert!(peak < HOSTILE_ANSWER_PEAK, "peak memory {peak} bytes");
    let printed = output.stdout.len() + output.stderr.len();
    assert!(printed < 16 * 1024, "{printed} bytes of output:\n{}", stderr(&output));
    eprintln!("peak memory on an endless answer: {peak} bytes");
    assert!(agent.cleaned_keyspaces().is_empty());
}

/// An error answer whose body never ends: only its start is read, the error is what the status
/// says.
#[tokio::test]
async fn an_endless_error_body_is_cut_short() {
    install_provider();
    let agent = ScyllaAgent::start(AgentSpec { proxy: Proxy::EndlessBodies, ..node() }).await;
    let files = Files::new();
    let args = args(&agent, &files, &files.token("not-the-agent-token"));

    let (code, output, result, peak) = run_binary_measured(&args, &[]).await;

    assert_eq!(code, exit::BAD_INPUT, "{}", stderr(&output));
    let message = result.expect("a result").error.expect("an error").message;
    assert!(message.contains("HTTP 401"), "{message}");
    assert!(peak < HOSTILE_ANSWER_PEAK, "peak memory {peak} bytes");
    assert!(output.stdout.len() + output.stderr.len() < 16 * 1024);
}

/// A keyspace list larger than any real one (100,000 names of 48 characters, 5 MiB) is refused
/// from its declared length, before it is read; nothing is cleaned.
#[tokio::test]
async fn a_keyspace_list_over_its_bound_is_refused() {
    install_provider();
    let mut spec = node();
    for i in 0..100_000 {
        spec = spec.keyspace(&format!("ks{i:046}"), KeyspaceKind::Vnodes);
    }
    let agent = ScyllaAgent::start(spec).await;
    let files = Files::new();
    let args = args(&agent, &files, &files.token(&agent.token()));

    let (code, output, result, peak) = run_binary_measured(&args, &[]).await;

    assert_eq!(code, exit::BAD_INPUT, "{}", stderr(&output));
    let message = result.expect("a result").error.expect("an error").message;
    assert!(message.contains("larger than 4194304 bytes"), "{message}");
    assert!(peak < HOSTILE_ANSWER_PEAK, "peak memory {peak} bytes");
    assert!(output.stdout.len() < 16 * 1024, "{} bytes on stdout", output.stdout.len());
    assert!(agent.cleaned_keyspaces().is_empty());
}

/// `--keyspace` values no Scylla keyspace can have never reach a request path: `..` would name
/// the parent path, a newline would be dropped by the URL parser and name another keyspace.
#[tokio::test]
async fn keyspace_names_scylla_cannot_have_exit_2_and_send_nothing() {
    for name in ["..", "shop\n", "shop/../ledger", "shop%2F", "", "shop ledger"] {
        let agent = ScyllaAgent::start(node()).await;
        let files = Files::new();
        let mut args = args(&agent, &files, &files.token(&agent.token()));
        args.keyspaces = vec![name.to_owned()];

        let (code, output, result) = run_binary(&args, &[]).await;

        assert_eq!(code, exit::BAD_INPUT, "{name:?}: {}", stderr(&output));
        let message = result.expect("a result").error.expect("an error").message;
        assert!(message.starts_with("--keyspace: keyspace "), "{name:?}: {message}");
        assert!(agent.calls().is_empty(), "{name:?}: {:?}", agent.call_lines());
    }
}

/// A keyspace name in the node's own list that Scylla could not have (a broken or hostile agent)
/// is refused before anything is cleaned.
#[tokio::test]
async fn a_listed_keyspace_scylla_cannot_have_is_refused() {
    install_provider();
    let agent = ScyllaAgent::start(node().keyspace("..", KeyspaceKind::Vnodes)).await;
    let files = Files::new();
    let args = args(&agent, &files, &files.token(&agent.token()));

    let (code, output, result) = run_binary(&args, &[]).await;

    assert_eq!(code, exit::BAD_INPUT, "{}", stderr(&output));
    let message = result.expect("a result").error.expect("an error").message;
    assert!(message.contains(r#"keyspace listed by the node "..""#), "{message}");
    assert!(agent.cleaned_keyspaces().is_empty());
    assert!(agent.call_lines().iter().all(|c| !c.contains("cleanup")), "{:?}", agent.call_lines());
}

/// The result file cannot be written (its folder is a file; a device that is always full): the
/// work is done and the exit code says so (0), the failure is logged as an error, and the result
/// is on stdout. The exit code alone carries the outcome (see docs/results.md).
#[tokio::test]
async fn a_result_file_that_cannot_be_written_keeps_the_exit_code() {
    install_provider();
    let files = Files::new();
    let blocker = files.write("a-file", "");
    let mut unwritable = vec![("its folder is a file", blocker.join("result.json"))];
    // A device like /dev/full (1, 7), made in the scratch folder: only root may.
    let full = files.dir.path().join("full");
    match std::process::Command::new("mknod").arg(&full).args(["c", "1", "7"]).status() {
        Ok(status) if status.success() => unwritable.push(("the disk is full", full)),
        _ => eprintln!("skipped: the full-disk case (mknod of a full device needs root)"),
    }
    for (case, result_file) in unwritable {
        let agent = ScyllaAgent::start(node()).await;
        let mut args = args(&agent, &files, &files.token(&agent.token()));
        args.result_file = result_file;

        let (code, output, _) = run_binary(&args, &[]).await;

        assert_eq!(code, exit::SUCCESS, "{case}: {}", stderr(&output));
        assert!(stderr(&output).contains("could not write the result file"), "{case}: {}", stderr(&output));
        let printed =
            JobResult::parse(&String::from_utf8_lossy(&output.stdout)).expect("the result on stdout");
        assert_eq!(printed.outcome, Outcome::Succeeded, "{case}");
        assert_eq!(agent.cleaned_keyspaces().len(), 4, "{case}: the work was done");
    }
}
