//! Benchmark of `groundskeeper-job cleanup` (not a test: figures for the README): the size of the
//! binary as built here, and its peak memory and wall time cleaning a node with many keyspaces
//! through the Scylla Manager Agent stand-in (HTTPS, bearer token, async tasks with progress).
//!
//! Run: `cargo bench -p groundskeeper-job --bench cleanup_runner` (the bench profile is the
//! release profile, so the size is that of a release binary).

use std::process::{Command, Stdio};

use groundskeeper_e2e::measure::run_measured;
use groundskeeper_e2e::scylla_agent::{AgentSpec, KeyspaceKind, ScyllaAgent};
use groundskeeper_protocol::{JobResult, Report};

const VNODE_KEYSPACES: usize = 200;
const TABLET_KEYSPACES: usize = 50;
const POLLS_PER_TASK: u32 = 3;

#[tokio::main]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runner = env!("CARGO_BIN_EXE_groundskeeper-job");
    let size = std::fs::metadata(runner).expect("the runner binary exists").len();

    let mut spec = AgentSpec::default().polls_until_done(POLLS_PER_TASK);
    for i in 0..VNODE_KEYSPACES {
        spec = spec.keyspace(&format!("app_{i:03}"), KeyspaceKind::Vnodes);
    }
    for i in 0..TABLET_KEYSPACES {
        spec = spec.keyspace(&format!("tablets_{i:03}"), KeyspaceKind::Tablets);
    }
    let agent = ScyllaAgent::start(spec).await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let token_file = dir.path().join("auth-token.yaml");
    let ca_file = dir.path().join("ca.pem");
    let result_file = dir.path().join("result.json");
    std::fs::write(&token_file, format!("auth_token: {}\n", agent.token())).unwrap();
    std::fs::write(&ca_file, agent.ca_pem()).unwrap();

    let mut command = Command::new(runner);
    command
        .arg("cleanup")
        .args(["--node-address", &agent.host(), "--agent-port", &agent.port().to_string()])
        .arg("--auth-token-file")
        .arg(&token_file)
        .arg("--agent-ca-file")
        .arg(&ca_file)
        .args(["--poll-interval", "10ms"])
        .arg("--result-file")
        .arg(&result_file)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // The stand-in runs on this process's runtime: measure the child from a blocking thread.
    let measured = tokio::task::spawn_blocking(move || run_measured(&mut command))
        .await
        .unwrap()
        .expect("the runner starts");
    assert_eq!(measured.exit_code, 0, "the cleanup failed");
    let result = JobResult::parse(&std::fs::read_to_string(&result_file).unwrap()).unwrap();
    let Report::Cleanup(report) = &result.report else { panic!("not a cleanup result") };

    println!("groundskeeper-job cleanup benchmark");
    println!("  binary size (release): {:.1} MiB ({size} bytes)", size as f64 / (1024.0 * 1024.0));
    println!(
        "  cleaned {} vnode keyspaces (+{TABLET_KEYSPACES} tablet keyspaces left alone), {POLLS_PER_TASK} status polls each",
        agent.cleaned_keyspaces().len()
    );
    println!(
        "  keyspaces in the result: {} (truncated to the termination message: {})",
        report.keyspaces.len(),
        result.truncated
    );
    println!("  wall time: {} ms", measured.wall.as_millis());
    println!("  peak RSS: {} KiB", measured.peak_rss_kib);
}
