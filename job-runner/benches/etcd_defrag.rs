//! Maintenance overhead: the wall time of a whole `groundskeeper-job defrag` run (process start,
//! discovery, checks, leadership transfer, waits) against the sum of raw `Defragment` calls on
//! the same members with the same data, and the runner's peak memory (`getrusage` of the child).
//!
//! ```sh
//! cargo bench -p groundskeeper-job --bench etcd_defrag
//! ```
//!
//! Runs against every etcd version found (see `groundskeeper_e2e::etcd_cluster`). Sizes can be
//! changed with `GROUNDSKEEPER_BENCH_LIVE_MB` (live data, default 64) and
//! `GROUNDSKEEPER_BENCH_DB_MB` (db size after churn, default 160).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use groundskeeper_e2e::etcd_cluster::{ClusterOptions, EtcdCluster, EtcdVersion, find_etcd};
use groundskeeper_protocol::{JobResult, Report};

/// The overhead the maintenance may add on top of the raw defrags.
const TARGET_RATIO: f64 = 1.15;

fn env_mb(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
        * 1_000_000
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    let live = env_mb("GROUNDSKEEPER_BENCH_LIVE_MB", 64);
    let db = env_mb("GROUNDSKEEPER_BENCH_DB_MB", 160) as i64;
    let mut ran = false;
    for version in [EtcdVersion::V3_4, EtcdVersion::V3_5] {
        match find_etcd(version) {
            Ok(binary) => {
                ran = true;
                runtime.block_on(bench(version, &binary, live, db));
            }
            Err(why) => println!("{version}: skipped: {why}"),
        }
    }
    if !ran {
        std::process::exit(1);
    }
}

async fn bench(version: EtcdVersion, binary: &Path, live: u64, db: i64) {
    let cluster = EtcdCluster::start(binary, ClusterOptions::default())
        .await
        .expect("the cluster starts");
    cluster.fill(live).await.expect("fill");

    // Raw: one Defragment call per member, back to back, nothing else.
    cluster.churn(db).await.expect("churn");
    let before_raw = cluster.states().await.expect("status");
    let mut raw = Vec::new();
    for i in 0..cluster.len() {
        let mut client = cluster.client(Some(i)).await.expect("client");
        let started = Instant::now();
        client.defragment().await.expect("raw defrag");
        raw.push(started.elapsed());
    }
    let raw_sum: Duration = raw.iter().sum();

    // The same fragmentation again, then the whole maintenance run as a separate process.
    cluster.churn(db).await.expect("churn again");
    let before_run = cluster.states().await.expect("status");
    let result_file = cluster.dir().join("bench-result.json");
    let (wall, peak_rss_kib) = run_runner(&cluster, &result_file);
    let result =
        JobResult::parse(&std::fs::read_to_string(&result_file).expect("result file")).expect("result");
    let Report::Defrag(report) = &result.report else {
        panic!("not a defrag report")
    };
    assert!(
        report.members.iter().all(|m| m.defragmented),
        "every member must be defragmented: {report:?}"
    );
    let runner_defrag_sum: u64 = report.members.iter().map(|m| m.duration_ms).sum();
    let ratio = wall.as_secs_f64() / raw_sum.as_secs_f64();

    println!(
        "\n{version} ({}), 3 members, {} MB live data",
        cluster.version,
        live / 1_000_000
    );
    println!(
        "  db sizes before raw defrags:   {:?}",
        before_raw.iter().map(|s| s.db_size).collect::<Vec<_>>()
    );
    println!(
        "  db sizes before the run:       {:?}",
        before_run.iter().map(|s| s.db_size).collect::<Vec<_>>()
    );
    println!(
        "  raw defrag times (ms):         {:?}  sum {} ms",
        raw.iter().map(Duration::as_millis).collect::<Vec<_>>(),
        raw_sum.as_millis()
    );
    println!(
        "  runner's defrag times (ms):    {:?}  sum {runner_defrag_sum} ms",
        report.members.iter().map(|m| m.duration_ms).collect::<Vec<_>>()
    );
    println!(
        "  maintenance wall time:         {} ms (whole process)",
        wall.as_millis()
    );
    println!(
        "  ratio wall / raw sum:          {ratio:.3} (target ≤ {TARGET_RATIO}) {}",
        if ratio <= TARGET_RATIO {
            "ok"
        } else {
            "OVER TARGET"
        }
    );
    println!("  runner peak RSS:               {peak_rss_kib} KiB");
}

/// Runs `groundskeeper-job defrag` and returns its wall time and peak resident memory.
#[allow(clippy::zombie_processes)] // reaped by wait4, which also yields the rusage
fn run_runner(cluster: &EtcdCluster, result_file: &Path) -> (Duration, i64) {
    let runner = std::env::var("GROUNDSKEEPER_JOB_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_groundskeeper-job").to_owned());
    let started = Instant::now();
    let child = Command::new(runner)
        .args([
            "defrag",
            "--endpoints",
            &cluster.endpoints_flag(),
            "--min-defrag-bytes",
            "1000000",
            // Every member must be defragmented for the comparison to hold; the policy is
            // tested elsewhere.
            "--max-fragmented-percent",
            "10",
        ])
        .arg("--result-file")
        .arg(result_file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the runner starts");
    let (status, usage) = wait_with_rusage(child.id() as libc::pid_t);
    let wall = started.elapsed();
    assert_eq!(status, 0, "the runner failed (exit status {status})");
    (wall, usage.ru_maxrss)
}

/// `wait4`: reaps the child and returns its exit code and resource usage (ru_maxrss in KiB).
fn wait_with_rusage(pid: libc::pid_t) -> (i32, libc::rusage) {
    let mut status = 0;
    // SAFETY: rusage is plain data; wait4 fills it for the child we spawned and reaps it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid, "wait4 failed: {}", std::io::Error::last_os_error());
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    (code, usage)
}
