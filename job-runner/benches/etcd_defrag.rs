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
use groundskeeper_e2e::measure::{flush_disk, run_measured};
use groundskeeper_protocol::{JobResult, Report};

/// The overhead the maintenance may add on top of the raw defrags.
const TARGET_RATIO: f64 = 1.15;

fn env_mb(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default) * 1_000_000
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

/// Rounds of (raw defrags, runner); medians are compared, so one slow disk moment does not
/// decide the figure.
const ROUNDS: usize = 3;

async fn bench(version: EtcdVersion, binary: &Path, live: u64, db: i64) {
    let cluster = EtcdCluster::start(binary, ClusterOptions::default()).await.expect("the cluster starts");
    cluster.fill(live).await.expect("fill");

    let mut raw_sums = Vec::new();
    let mut walls = Vec::new();
    let mut runner_defrag_sums = Vec::new();
    let mut peak_rss_kib = 0;
    let mut db_sizes = Vec::new();
    for _ in 0..ROUNDS {
        // Raw: one Defragment call per member, back to back, nothing else.
        cluster.churn(db).await.expect("churn");
        flush_disk();
        db_sizes.extend(cluster.states().await.expect("status").iter().map(|s| s.db_size));
        let mut raw = Duration::ZERO;
        for i in 0..cluster.len() {
            let mut client = cluster.client(Some(i)).await.expect("client");
            let started = Instant::now();
            client.defragment().await.expect("raw defrag");
            raw += started.elapsed();
        }
        raw_sums.push(raw);

        // The same fragmentation again, then the whole maintenance run as a separate process.
        cluster.churn(db).await.expect("churn again");
        flush_disk();
        let result_file = cluster.dir().join("bench-result.json");
        let (wall, rss) = run_runner(&cluster, &result_file);
        let result =
            JobResult::parse(&std::fs::read_to_string(&result_file).expect("result file")).expect("result");
        let Report::Defrag(report) = &result.report else { panic!("not a defrag report") };
        assert!(
            report.members.iter().all(|m| m.defragmented),
            "every member must be defragmented: {report:?}"
        );
        runner_defrag_sums.push(Duration::from_millis(report.members.iter().map(|m| m.duration_ms).sum()));
        walls.push(wall);
        peak_rss_kib = peak_rss_kib.max(rss);
    }
    let (raw, wall) = (median(&raw_sums), median(&walls));
    let ratio = wall.as_secs_f64() / raw.as_secs_f64();
    let ms = |ds: &[Duration]| ds.iter().map(Duration::as_millis).collect::<Vec<_>>();

    println!(
        "\n{version} ({}), 3 members, {} MB live data, {ROUNDS} rounds",
        cluster.version,
        live / 1_000_000
    );
    println!(
        "  db sizes before defrags:       {} .. {} bytes",
        db_sizes.iter().min().unwrap(),
        db_sizes.iter().max().unwrap()
    );
    println!("  raw defrag sums (ms):          {:?}  median {} ms", ms(&raw_sums), raw.as_millis());
    println!("  runner's own defrag sums (ms): {:?}", ms(&runner_defrag_sums));
    println!(
        "  maintenance wall times (ms):   {:?}  median {} ms (whole process)",
        ms(&walls),
        wall.as_millis()
    );
    let overheads: Vec<Duration> =
        walls.iter().zip(&runner_defrag_sums).map(|(wall, defrag)| wall.saturating_sub(*defrag)).collect();
    println!(
        "  runner overhead outside its defrag calls (ms): {:?}  median {} ms",
        ms(&overheads),
        median(&overheads).as_millis()
    );
    println!(
        "  ratio wall / raw sum:          {ratio:.3} (target ≤ {TARGET_RATIO}) {}",
        if ratio <= TARGET_RATIO { "ok" } else { "OVER TARGET" }
    );
    println!("  runner peak RSS:               {peak_rss_kib} KiB");
}

fn median(values: &[Duration]) -> Duration {
    let mut sorted = values.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}

/// Runs `groundskeeper-job defrag` and returns its wall time and peak resident memory.
fn run_runner(cluster: &EtcdCluster, result_file: &Path) -> (Duration, i64) {
    let runner = std::env::var("GROUNDSKEEPER_JOB_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_groundskeeper-job").to_owned());
    let measured = run_measured(
        Command::new(runner)
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
            .stderr(Stdio::null()),
    )
    .expect("the runner starts");
    assert_eq!(measured.exit_code, 0, "the runner failed (exit status {})", measured.exit_code);
    (measured.wall, measured.peak_rss_kib)
}
