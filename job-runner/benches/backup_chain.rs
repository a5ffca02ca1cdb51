//! Backups with a recovery point in seconds: what a full snapshot and its deltas cost and give,
//! against full snapshots alone, with the runner itself against one real etcd 3.5 member.
//!
//! ```sh
//! cargo bench -p groundskeeper-job --bench backup_chain
//! ```
//!
//! The member is filled with `GROUNDSKEEPER_BENCH_DB_MB` of live data (default 200), then a full
//! snapshot is taken into a folder. A workload of `GROUNDSKEEPER_BENCH_WRITES_PER_SECOND` puts of
//! 1 KiB values per second (default 100, over 5,000 keys) is written in steps of one delta
//! interval's worth (30 s of it, written as fast as etcd takes it, so that the bench does not
//! wait for the clock), each step followed by `snapshot-delta` into the same folder,
//! `GROUNDSKEEPER_BENCH_DELTAS` times (default 10). Measured:
//!
//! * the delta runs' wall times: the recovery point a 30 s interval reaches is the interval plus
//!   that (a Job's pod start comes on top in a cluster);
//! * bytes stored per hour: full snapshots alone every hour (one full), against an hourly full
//!   plus a delta every 30 s (120 of the measured median size);
//! * restore time to a point in time (`snapshot-replay` of the full and every delta up to the
//!   last revision) against a restore of the full snapshot alone (`snapshot-prove`: fetch,
//!   restore, start, check), `GROUNDSKEEPER_BENCH_ROUNDS` rounds (default 3), alternating,
//!   medians;
//! * the runner's own peak memory (`VmHWM`, which it logs when it ends) in each kind of run: the
//!   delta and replay runs must stay bounded as the full snapshot's does, whatever the db size.
//!
//! etcd 3.5 and etcdutl are found where `cargo xtask test` put them (`target/tools/`), or through
//! `GROUNDSKEEPER_ETCD_3_5`.

use std::path::{Path, PathBuf};

use groundskeeper_e2e::etcd_cluster::{ClusterOptions, EtcdCluster, EtcdVersion, find_etcd};
use groundskeeper_e2e::measure::{JobRun, env_number, flush_disk, median, mib, run_job};
use groundskeeper_protocol::Report;

const TEMPLATE: &str = "{cluster}-{time}.db";
const FULL: &str = "main-20260101T000000Z.db";
/// The delta interval the workload's steps stand for, and the full snapshot interval.
const DELTA_EVERY_SECONDS: u64 = 30;
const FULL_EVERY_SECONDS: u64 = 3600;
const KEYS: u64 = 5_000;

fn runner() -> String {
    std::env::var("GROUNDSKEEPER_JOB_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_groundskeeper-job").to_owned())
}

/// Runs the runner with `args` to its end. Panics when it fails.
fn run(work: &Path, args: &[String]) -> JobRun {
    run_job(&runner(), work, args)
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| (*a).to_owned()).collect()
}

fn main() {
    let etcd = match find_etcd(EtcdVersion::V3_5) {
        Ok(etcd) => etcd,
        Err(why) => {
            println!("skipped: {why}");
            std::process::exit(1);
        }
    };
    let etcdutl: PathBuf = etcd.with_file_name("etcdutl");
    let db_mb = env_number("GROUNDSKEEPER_BENCH_DB_MB", 200);
    let writes_per_second = env_number("GROUNDSKEEPER_BENCH_WRITES_PER_SECOND", 100);
    let deltas = env_number("GROUNDSKEEPER_BENCH_DELTAS", 10);
    let rounds = env_number("GROUNDSKEEPER_BENCH_ROUNDS", 3) as usize;
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let options = ClusterOptions { members: 1, ..ClusterOptions::default() };
    let cluster = runtime.block_on(EtcdCluster::start(&etcd, options)).expect("etcd starts");
    runtime.block_on(cluster.fill(db_mb * 1_000_000)).expect("fill");
    let work = tempfile::Builder::new().prefix("groundskeeper-bench-chain-").tempdir().unwrap();
    let folder = work.path().join("snapshots");
    let scratch = work.path().join("scratch");
    std::fs::create_dir(&folder).unwrap();
    std::fs::create_dir(&scratch).unwrap();
    let folder_arg = folder.display().to_string();
    let tools = vec![
        "--etcd".to_owned(),
        etcd.display().to_string(),
        "--etcdutl".to_owned(),
        etcdutl.display().to_string(),
    ];

    let full_path = folder.join(FULL);
    let JobRun { wall: full_wall, peak_bytes: full_peak, .. } = run(
        work.path(),
        &strings(&[
            "snapshot",
            "--endpoints",
            &cluster.endpoints_flag(),
            "--output",
            &full_path.display().to_string(),
        ]),
    );
    let full_bytes = std::fs::metadata(&full_path).unwrap().len();

    let mut client = runtime.block_on(cluster.client(None)).expect("a client");
    let value = "v".repeat(1024);
    let per_step = writes_per_second * DELTA_EVERY_SECONDS;
    let mut delta_walls = Vec::new();
    let mut delta_bytes = Vec::new();
    let mut end_revision = 0;
    let mut written = 0u64;
    let mut delta_peak = 0;
    for _ in 0..deltas {
        runtime.block_on(async {
            for _ in 0..per_step {
                client.put(format!("work/{:05}", written % KEYS), value.as_str(), None).await.expect("a put");
                written += 1;
            }
        });
        let mut args =
            strings(&["snapshot-delta", "--endpoints", &cluster.endpoints_flag(), "--to", &folder_arg]);
        args.extend(strings(&["--file-name-template", TEMPLATE, "--cluster", "main"]));
        let JobRun { wall, peak_bytes, result } = run(work.path(), &args);
        let Report::SnapshotDelta(report) = &result.report else { panic!("a delta report") };
        delta_peak = delta_peak.max(peak_bytes);
        delta_walls.push(wall.as_secs_f64());
        delta_bytes.push(report.size_bytes as f64);
        end_revision = report.end_revision;
    }

    let mut replay_walls = Vec::new();
    let mut full_restore_walls = Vec::new();
    let (mut replay_peak, mut prove_peak) = (0, 0);
    for round in 0..rounds {
        for k in 0..2 {
            flush_disk();
            if (round + k) % 2 == 0 {
                let mut args = strings(&["snapshot-replay", "--from", &folder_arg, "--object", FULL]);
                args.extend(strings(&["--file-name-template", TEMPLATE, "--cluster", "main"]));
                args.extend(strings(&["--scratch-dir", &scratch.display().to_string()]));
                args.extend(strings(&["--to-revision", &end_revision.to_string()]));
                args.extend(tools.clone());
                let JobRun { wall, peak_bytes, result } = run(work.path(), &args);
                let Report::SnapshotReplay(report) = &result.report else { panic!("a replay report") };
                assert_eq!(report.revision, Some(end_revision), "{report:?}");
                replay_peak = replay_peak.max(peak_bytes);
                replay_walls.push(wall.as_secs_f64());
            } else {
                let mut args = strings(&["snapshot-prove", "--from", &folder_arg, "--object", FULL]);
                args.extend(strings(&["--file-name-template", TEMPLATE, "--cluster", "main"]));
                args.extend(strings(&["--scratch-dir", &scratch.display().to_string()]));
                args.extend(tools.clone());
                let JobRun { wall, peak_bytes, .. } = run(work.path(), &args);
                prove_peak = prove_peak.max(peak_bytes);
                full_restore_walls.push(wall.as_secs_f64());
            }
        }
    }

    let median_delta_bytes = median(&delta_bytes) as u64;
    let per_hour_deltas = FULL_EVERY_SECONDS / DELTA_EVERY_SECONDS;
    let chain_per_hour = full_bytes + per_hour_deltas * median_delta_bytes;
    println!(
        "etcd {} member, {db_mb} MB filled; workload {writes_per_second} puts/s of 1 KiB over {KEYS} keys",
        cluster.version
    );
    println!("full snapshot: {} in {:.2} s", mib(full_bytes), full_wall.as_secs_f64());
    println!(
        "{deltas} deltas of {per_step} puts each (30 s of the workload): walls {:?} s, median {:.2} s; sizes median {}",
        delta_walls.iter().map(|w| (w * 100.0).round() / 100.0).collect::<Vec<_>>(),
        median(&delta_walls),
        mib(median_delta_bytes)
    );
    println!(
        "recovery point at a 30 s interval: at most {:.1} s (interval + median delta run), against {} s with hourly full snapshots",
        DELTA_EVERY_SECONDS as f64 + median(&delta_walls),
        FULL_EVERY_SECONDS
    );
    println!(
        "bytes per hour: full only {}; full + {per_hour_deltas} deltas {} ({:.2}x)",
        mib(full_bytes),
        mib(chain_per_hour),
        chain_per_hour as f64 / full_bytes as f64
    );
    println!(
        "restore to the last delta's revision ({deltas} deltas replayed): walls {:?} s, median {:.2} s; full snapshot alone: walls {:?} s, median {:.2} s",
        replay_walls.iter().map(|w| (w * 100.0).round() / 100.0).collect::<Vec<_>>(),
        median(&replay_walls),
        full_restore_walls.iter().map(|w| (w * 100.0).round() / 100.0).collect::<Vec<_>>(),
        median(&full_restore_walls),
    );
    println!(
        "runner peak memory (its own VmHWM, the most of its runs; a member it starts not included): \
         full snapshot {}; delta {}; replay of {deltas} deltas {}; proof of the full snapshot {}",
        mib(full_peak),
        mib(delta_peak),
        mib(replay_peak),
        mib(prove_peak)
    );
}
