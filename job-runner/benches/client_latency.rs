//! What clients feel during a maintenance run: a steady, open-loop load (writes and linearizable
//! reads of small values through one etcd-client connected to every endpoint, as kube-apiserver
//! connects) runs before, during and after the defragmentation of a fragmented 3-member cluster.
//! Three contenders, side by side in one process, each on a fresh cluster with the same data:
//!
//! - `groundskeeper (transfer during last follower)`: the runner's own defrag run
//!   ([`run_defrag`]), one member at a time, followers first, each member caught up before the
//!   next, leadership moved away from the leader while the last follower is being defragmented
//!   (`PlanOptions::early_transfer` on);
//! - `groundskeeper (transfer after followers)`: the same run with `early_transfer` off:
//!   leadership moves only when the leader's turn comes, after every follower finished and caught
//!   up;
//! - `sequential, no transfer`: a plain `Defragment` call on each member in turn, followers first
//!   and the leader last, no leadership transfer and no wait in between (what `etcdctl defrag
//!   --cluster` and backup sidecars do).
//!
//! Reported per phase: requests, failed requests (errors and time-outs), p50/p99/max latency;
//! per run: the maintenance's wall time and raft term changes seen through each member's
//! `Status` (a planned leadership transfer is one term; every other term change is an election).
//! Latency is measured from the moment a request was due, not from when it was sent, so a stalled
//! member shows as latency and never as fewer requests.
//!
//! ```sh
//! cargo bench -p groundskeeper-job --bench client_latency
//! ```
//!
//! Sizes and load (environment; defaults in brackets):
//! `GROUNDSKEEPER_BENCH_DB_MB` db size each member reaches before the maintenance [300],
//! `GROUNDSKEEPER_BENCH_LIVE_MB` live data a defrag copies [64],
//! `GROUNDSKEEPER_BENCH_ROUNDS` runs per contender, alternating [3],
//! `GROUNDSKEEPER_BENCH_PHASE_SECONDS` length of the before and after phases [10],
//! `GROUNDSKEEPER_BENCH_WRITES` writes per second [200], `GROUNDSKEEPER_BENCH_READS` reads per
//! second [800], `GROUNDSKEEPER_BENCH_VALUE_BYTES` [1024], `GROUNDSKEEPER_BENCH_KEYS` keys the
//! load touches [10000], `GROUNDSKEEPER_BENCH_TIMEOUT_SECONDS` per request [10],
//! `GROUNDSKEEPER_BENCH_ETCD` versions, `3.4`, `3.5` or `3.4,3.5` [3.4,3.5].
//!
//! The client's balancer (tonic's power-of-two-choices, every endpoint reporting the same load)
//! sends each request to a member picked at random, so about a third of the requests reach the
//! member being defragmented, as with kube-apiserver's round-robin.

#[path = "../tests/it/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use etcd_client::{Client, ConnectOptions, KvClient, Txn, TxnOp};
use groundskeeper_e2e::etcd_cluster::{ClusterOptions, EtcdCluster, EtcdVersion, MemberState, find_etcd};
use groundskeeper_e2e::measure::flush_disk;
use groundskeeper_job::etcd::defrag::{Progress, run_defrag};
use groundskeeper_protocol::{Outcome, Report};
use tokio::task::JoinSet;

/// Goals: p99 during the maintenance at most this many times p99 before it.
const P99_RATIO_GOAL: f64 = 2.0;

/// A request this slow counts as stalled.
const SLOW: Duration = Duration::from_millis(100);

#[derive(Debug, Clone)]
struct Config {
    db_bytes: i64,
    live_bytes: u64,
    rounds: usize,
    phase: Duration,
    writes_per_second: u32,
    reads_per_second: u32,
    value_bytes: usize,
    keys: u64,
    request_timeout: Duration,
    versions: Vec<EtcdVersion>,
}

fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v.trim().parse().unwrap_or_else(|_| panic!("{name}={v:?}: not a whole number")),
        Err(_) => default,
    }
}

impl Config {
    fn from_env() -> Self {
        let versions = std::env::var("GROUNDSKEEPER_BENCH_ETCD").unwrap_or_else(|_| "3.4,3.5".into());
        let versions = versions
            .split(',')
            .map(|v| match v.trim() {
                "3.4" => EtcdVersion::V3_4,
                "3.5" => EtcdVersion::V3_5,
                other => panic!("GROUNDSKEEPER_BENCH_ETCD: {other:?} is neither 3.4 nor 3.5"),
            })
            .collect();
        Self {
            db_bytes: (env_u64("GROUNDSKEEPER_BENCH_DB_MB", 300) * 1_000_000) as i64,
            live_bytes: env_u64("GROUNDSKEEPER_BENCH_LIVE_MB", 64) * 1_000_000,
            rounds: env_u64("GROUNDSKEEPER_BENCH_ROUNDS", 3).max(1) as usize,
            phase: Duration::from_secs(env_u64("GROUNDSKEEPER_BENCH_PHASE_SECONDS", 10)),
            writes_per_second: env_u64("GROUNDSKEEPER_BENCH_WRITES", 200) as u32,
            reads_per_second: env_u64("GROUNDSKEEPER_BENCH_READS", 800) as u32,
            value_bytes: env_u64("GROUNDSKEEPER_BENCH_VALUE_BYTES", 1024) as usize,
            keys: env_u64("GROUNDSKEEPER_BENCH_KEYS", 10_000).max(1),
            request_timeout: Duration::from_secs(env_u64("GROUNDSKEEPER_BENCH_TIMEOUT_SECONDS", 10)),
            versions,
        }
    }
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = Config::from_env();
    // Two workers: the load, its clients and the maintenance share them, as on a small node.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let mut ran = false;
    for version in config.versions.clone() {
        match find_etcd(version) {
            Ok(binary) => {
                ran = true;
                runtime.block_on(bench(version, &binary, &config));
            }
            Err(why) => println!("{version}: skipped: {why}"),
        }
    }
    if !ran {
        std::process::exit(1);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Contender {
    /// The runner, leadership moved during the last follower's defrag.
    TransferDuring,
    /// The runner, leadership moved after every follower finished and caught up.
    TransferAfter,
    Sequential,
}

impl Contender {
    const ALL: [Contender; 3] = [Contender::TransferDuring, Contender::TransferAfter, Contender::Sequential];

    fn name(self) -> &'static str {
        match self {
            Contender::TransferDuring => "groundskeeper (transfer during last follower)",
            Contender::TransferAfter => "groundskeeper (transfer after followers)",
            Contender::Sequential => "sequential, no transfer",
        }
    }
}

/// Width of the contender column.
const NAME: usize = 45;

const PHASES: [&str; 3] = ["before", "during", "after"];

/// One request as the client saw it.
#[derive(Debug, Clone)]
struct Sample {
    /// When it was due.
    due: Instant,
    /// From due to answer (or to the error, or to the time-out).
    latency: Duration,
    /// Why it failed, if it did.
    error: Option<String>,
    write: bool,
}

#[derive(Debug, Clone, Copy, Default)]
struct PhaseStats {
    requests: usize,
    failed: usize,
    /// Requests that took [`SLOW`] or longer.
    slow: usize,
    p50: Duration,
    p99: Duration,
    max: Duration,
}

impl PhaseStats {
    fn of(samples: &[&Sample]) -> Self {
        let mut latencies: Vec<Duration> = samples.iter().map(|s| s.latency).collect();
        latencies.sort();
        let at = |q: f64| {
            if latencies.is_empty() {
                Duration::ZERO
            } else {
                latencies[((latencies.len() as f64 * q).ceil() as usize).clamp(1, latencies.len()) - 1]
            }
        };
        Self {
            requests: samples.len(),
            failed: samples.iter().filter(|s| s.error.is_some()).count(),
            slow: latencies.iter().filter(|l| **l >= SLOW).count(),
            p50: at(0.50),
            p99: at(0.99),
            max: latencies.last().copied().unwrap_or_default(),
        }
    }
}

/// What one run of one contender gave.
#[derive(Debug, Clone)]
struct RunFigures {
    phases: [PhaseStats; 3],
    wall: Duration,
    term_changes: u64,
    planned_transfers: u64,
    /// (member, was leader when its defrag started, defrag duration)
    defrags: Vec<(String, bool, Duration)>,
    db_sizes: Vec<(i64, i64)>,
    /// The slowest request: latency, phase, write or read.
    worst: (Duration, &'static str, bool),
    /// Failed requests by phase, write or read, and error.
    errors: BTreeMap<(&'static str, &'static str, String), usize>,
}

impl RunFigures {
    fn elections(&self) -> u64 {
        self.term_changes.saturating_sub(self.planned_transfers)
    }

    fn p99_ratio(&self) -> f64 {
        self.phases[1].p99.as_secs_f64() / self.phases[0].p99.as_secs_f64().max(1e-6)
    }
}

async fn bench(version: EtcdVersion, binary: &Path, config: &Config) {
    let mut runs: Vec<(Contender, RunFigures)> = Vec::new();
    let mut etcd_version = String::new();
    for round in 0..config.rounds {
        // Rotating order, so no contender always runs on a warmer (or busier) machine.
        let mut order = Contender::ALL;
        order.rotate_left(round % Contender::ALL.len());
        for contender in order {
            let (version_string, figures) = one_run(binary, contender, config)
                .await
                .unwrap_or_else(|err| panic!("{version}, {}: {err}", contender.name()));
            etcd_version = version_string;
            eprintln!(
                "{version} round {}/{} {:<NAME$}: wall {} ms, during p99 {} ms max {} ms, failed {}, elections {}",
                round + 1,
                config.rounds,
                contender.name(),
                figures.wall.as_millis(),
                figures.phases[1].p99.as_millis(),
                figures.phases[1].max.as_millis(),
                figures.phases.iter().map(|p| p.failed).sum::<usize>(),
                figures.elections()
            );
            runs.push((contender, figures));
        }
    }
    print_report(version, &etcd_version, config, &runs);
}

/// A fresh cluster, fragmented; the load before, during and after one maintenance run.
async fn one_run(
    binary: &Path,
    contender: Contender,
    config: &Config,
) -> Result<(String, RunFigures), String> {
    let cluster = EtcdCluster::start(binary, ClusterOptions::default()).await?;
    cluster.fill(config.live_bytes).await?;
    preload(&cluster, config).await?;
    cluster.churn(config.db_bytes).await?;
    flush_disk();
    let before = cluster.states().await?;
    let db_sizes = before.iter().map(|s| (s.db_size, s.db_size_in_use)).collect();

    let load = Load::start(&cluster, config).await?;
    tokio::time::sleep(config.phase).await;
    let started = Instant::now();
    let (planned_transfers, defrags) = match contender {
        Contender::TransferDuring => groundskeeper(&cluster, true).await?,
        Contender::TransferAfter => groundskeeper(&cluster, false).await?,
        Contender::Sequential => sequential(&before).await?,
    };
    let ended = Instant::now();
    tokio::time::sleep(config.phase).await;
    let samples = load.stop().await;
    let after = cluster.states().await?;

    let phase_of = |s: &Sample| {
        if s.due < started {
            0
        } else if s.due < ended {
            1
        } else {
            2
        }
    };
    let phases =
        [0, 1, 2].map(|p| PhaseStats::of(&samples.iter().filter(|s| phase_of(s) == p).collect::<Vec<_>>()));
    let worst = samples
        .iter()
        .max_by_key(|s| s.latency)
        .map(|s| (s.latency, PHASES[phase_of(s)], s.write))
        .unwrap_or((Duration::ZERO, "none", false));
    let mut errors = BTreeMap::new();
    for s in &samples {
        if let Some(error) = &s.error {
            let kind = if s.write { "write" } else { "read" };
            *errors.entry((PHASES[phase_of(s)], kind, error.clone())).or_default() += 1;
        }
    }
    Ok((
        cluster.version.clone(),
        RunFigures {
            phases,
            wall: ended - started,
            term_changes: max_term(&after).saturating_sub(max_term(&before)),
            planned_transfers,
            defrags,
            db_sizes,
            worst,
            errors,
        },
    ))
}

fn max_term(states: &[MemberState]) -> u64 {
    states.iter().map(|s| s.raft_term).max().unwrap_or_default()
}

/// The keys the load reads and overwrites, so every read finds a value.
async fn preload(cluster: &EtcdCluster, config: &Config) -> Result<(), String> {
    let mut client = cluster.client(None).await?;
    let value = vec![b'v'; config.value_bytes];
    let per_txn = (512 * 1024 / config.value_bytes.max(1)).clamp(1, 128) as u64;
    let mut key = 0;
    while key < config.keys {
        let ops: Vec<TxnOp> = (key..(key + per_txn).min(config.keys))
            .map(|k| TxnOp::put(load_key(k), value.clone(), None))
            .collect();
        client.txn(Txn::new().and_then(ops)).await.map_err(|e| format!("preload: {e}"))?;
        key += per_txn;
    }
    Ok(())
}

fn load_key(k: u64) -> String {
    format!("load/{k:08}")
}

/// The runner's own defrag run, in this process, leadership moved during the last follower's
/// defrag (`early_transfer`) or after it. Returns the leadership transfers it made and each
/// member's defrag time.
async fn groundskeeper(
    cluster: &EtcdCluster,
    early_transfer: bool,
) -> Result<(u64, Vec<(String, bool, Duration)>), String> {
    // Every member is defragmented, whatever the thresholds would say.
    let mut args = common::defrag_args(cluster, &cluster.dir().join("result.json"), 1_000_000, 10.0);
    args.member_timeout_seconds = 600;
    let mut options = args.options().map_err(|f| f.message)?;
    options.plan.early_transfer = early_transfer;
    let result = run_defrag(&options, &mut |_: Progress<'_>| {}).await;
    let Report::Defrag(report) = &result.report else {
        return Err("the run returned no defrag report".into());
    };
    if result.outcome != Outcome::Succeeded || !report.members.iter().all(|m| m.defragmented) {
        return Err(format!("the defrag run did not defragment every member: {result:?}"));
    }
    let defrags = report
        .members
        .iter()
        .map(|m| (m.name.clone(), m.was_leader, Duration::from_millis(m.duration_ms)))
        .collect();
    Ok((u64::from(report.leader_moved_to.is_some()), defrags))
}

/// `Defragment` on each member in turn, followers first, the leader last, nothing in between.
async fn sequential(before: &[MemberState]) -> Result<(u64, Vec<(String, bool, Duration)>), String> {
    let mut order: Vec<&MemberState> = before.iter().filter(|s| !s.is_leader()).collect();
    order.extend(before.iter().filter(|s| s.is_leader()));
    let mut defrags = Vec::new();
    for member in order {
        // No request time-out: the call lasts as long as the defrag.
        let mut client = Client::connect([member.client_url.as_str()], None)
            .await
            .map_err(|e| format!("{}: {e}", member.name))?;
        let started = Instant::now();
        client.defragment().await.map_err(|e| format!("defragment {}: {e}", member.name))?;
        defrags.push((member.name.clone(), member.is_leader(), started.elapsed()));
    }
    Ok((0, defrags))
}

/// The open-loop load: one request due every 1/(writes + reads) s, each sent in its own task, so
/// a request that hangs delays no other. Bounded: a fixed rate, and every request ends within the
/// time-out.
struct Load {
    stop: Arc<AtomicBool>,
    generator: tokio::task::JoinHandle<Vec<Sample>>,
}

impl Load {
    async fn start(cluster: &EtcdCluster, config: &Config) -> Result<Self, String> {
        let options = ConnectOptions::new().with_connect_timeout(Duration::from_secs(3));
        let client = Client::connect(cluster.client_urls(), Some(options))
            .await
            .map_err(|e| format!("load client: {e}"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let generator = tokio::spawn(generate(client.kv_client(), config.clone(), stop.clone()));
        Ok(Self { stop, generator })
    }

    async fn stop(self) -> Vec<Sample> {
        self.stop.store(true, Ordering::SeqCst);
        self.generator.await.expect("the load generator")
    }
}

async fn generate(client: KvClient, config: Config, stop: Arc<AtomicBool>) -> Vec<Sample> {
    let rate = u64::from(config.writes_per_second + config.reads_per_second).max(1);
    let value = Arc::new(vec![b'w'; config.value_bytes]);
    let mut in_flight: JoinSet<Sample> = JoinSet::new();
    let mut samples = Vec::new();
    let start = tokio::time::Instant::now();
    let mut writes_due = 0u64;
    for i in 0u64.. {
        let due = start + Duration::from_nanos(i * 1_000_000_000 / rate);
        tokio::time::sleep_until(due).await;
        if stop.load(Ordering::SeqCst) {
            break;
        }
        // Writes spread evenly among the reads: request i is a write when the writes due so far
        // fall behind i × share.
        let write = (i + 1) * u64::from(config.writes_per_second) / rate > writes_due;
        if write {
            writes_due += 1;
        }
        // Keys in a scattered order (a multiplicative hash), reads and writes alike.
        let key = load_key(i.wrapping_mul(2_654_435_761) % config.keys);
        let mut client = client.clone();
        let value = value.clone();
        let timeout = config.request_timeout;
        let due = due.into_std();
        in_flight.spawn(async move {
            let answered = if write {
                tokio::time::timeout(timeout, client.put(key, value.as_slice(), None))
                    .await
                    .map(|r| r.map(|_| ()))
            } else {
                tokio::time::timeout(timeout, client.get(key, None)).await.map(|r| r.map(|_| ()))
            };
            let latency = due.elapsed();
            let error = match answered {
                Ok(Ok(())) => None,
                Ok(Err(err)) => Some(err.to_string()),
                Err(_) => Some(format!("no answer within {timeout:?}")),
            };
            Sample { due, latency, error, write }
        });
        while let Some(done) = in_flight.try_join_next() {
            samples.push(done.expect("a request task"));
        }
    }
    while let Some(done) = in_flight.join_next().await {
        samples.push(done.expect("a request task"));
    }
    samples
}

fn median<T: Copy + PartialOrd>(values: impl IntoIterator<Item = T>) -> T {
    let mut sorted: Vec<T> = values.into_iter().collect();
    sorted.sort_by(|a, b| a.partial_cmp(b).expect("comparable"));
    sorted[sorted.len() / 2]
}

fn ms(d: Duration) -> String {
    if d < Duration::from_millis(10) {
        format!("{:.1}", d.as_secs_f64() * 1000.0)
    } else {
        format!("{}", d.as_millis())
    }
}

fn mib(bytes: i64) -> String {
    format!("{bytes} bytes ({:.1} MiB)", bytes as f64 / 1_048_576.0)
}

fn print_report(version: EtcdVersion, etcd_version: &str, config: &Config, runs: &[(Contender, RunFigures)]) {
    let rounds = config.rounds;
    println!(
        "\n{version} ({etcd_version}), 3 members; load {} writes/s + {} linearizable reads/s of {} B \
         values over {} keys, one etcd-client over all endpoints, open loop, {} s time-out; {} s \
         before and after; {rounds} run(s) per contender, alternating; figures are medians over \
         the runs",
        config.writes_per_second,
        config.reads_per_second,
        config.value_bytes,
        config.keys,
        config.request_timeout.as_secs(),
        config.phase.as_secs(),
    );
    let all_sizes: Vec<(i64, i64)> = runs.iter().flat_map(|(_, r)| r.db_sizes.iter().copied()).collect();
    println!(
        "  db size per member before the maintenance: {} .. {}; in use {} .. {}; live data written {}",
        mib(all_sizes.iter().map(|s| s.0).min().unwrap_or_default()),
        mib(all_sizes.iter().map(|s| s.0).max().unwrap_or_default()),
        mib(all_sizes.iter().map(|s| s.1).min().unwrap_or_default()),
        mib(all_sizes.iter().map(|s| s.1).max().unwrap_or_default()),
        mib(config.live_bytes as i64),
    );
    println!(
        "\n  {:<NAME$} {:<7} {:>9} {:>7} {:>9} {:>9} {:>9} {:>9}",
        "contender",
        "phase",
        "requests",
        "failed",
        format!("≥{}ms", SLOW.as_millis()),
        "p50 ms",
        "p99 ms",
        "max ms"
    );
    for contender in Contender::ALL {
        let mine: Vec<&RunFigures> = runs.iter().filter(|(c, _)| *c == contender).map(|(_, r)| r).collect();
        for (p, phase) in PHASES.iter().enumerate() {
            let stat = |f: fn(&PhaseStats) -> Duration| median(mine.iter().map(|r| f(&r.phases[p])));
            println!(
                "  {:<NAME$} {:<7} {:>9} {:>7} {:>9} {:>9} {:>9} {:>9}",
                if p == 0 { contender.name() } else { "" },
                phase,
                median(mine.iter().map(|r| r.phases[p].requests)),
                median(mine.iter().map(|r| r.phases[p].failed)),
                median(mine.iter().map(|r| r.phases[p].slow)),
                ms(stat(|s| s.p50)),
                ms(stat(|s| s.p99)),
                ms(stat(|s| s.max)),
            );
        }
    }
    println!(
        "\n  {:<NAME$} {:>13} {:>13} {:>10} {:>10} {:>14} {:>12}",
        "contender", "wall ms", "term changes", "transfers", "elections", "p99 dur/bef", "worst stall"
    );
    for contender in Contender::ALL {
        let mine: Vec<&RunFigures> = runs.iter().filter(|(c, _)| *c == contender).map(|(_, r)| r).collect();
        let worst = mine.iter().map(|r| r.worst).max_by_key(|w| w.0).expect("a run");
        println!(
            "  {:<NAME$} {:>13} {:>13} {:>10} {:>10} {:>13.2}x {:>9} ms ({}, {})",
            contender.name(),
            ms(median(mine.iter().map(|r| r.wall))),
            median(mine.iter().map(|r| r.term_changes)),
            median(mine.iter().map(|r| r.planned_transfers)),
            median(mine.iter().map(|r| r.elections())),
            median(mine.iter().map(|r| r.p99_ratio())),
            ms(worst.0),
            if worst.2 { "a write" } else { "a read" },
            worst.1,
        );
    }
    println!("\n  per run:");
    for (contender, r) in runs {
        let defrags: Vec<String> = r
            .defrags
            .iter()
            .map(|(name, leader, d)| format!("{name}{} {}", if *leader { "(leader)" } else { "" }, ms(*d)))
            .collect();
        println!(
            "  {:<NAME$} wall {:>6} ms; defrags (ms): {}; failed {}/{}/{}; p99 {}/{}/{} ms; max {}/{}/{} ms; \
             terms +{} ({} planned); worst {} ms ({}, {})",
            contender.name(),
            ms(r.wall),
            defrags.join(", "),
            r.phases[0].failed,
            r.phases[1].failed,
            r.phases[2].failed,
            ms(r.phases[0].p99),
            ms(r.phases[1].p99),
            ms(r.phases[2].p99),
            ms(r.phases[0].max),
            ms(r.phases[1].max),
            ms(r.phases[2].max),
            r.term_changes,
            r.planned_transfers,
            ms(r.worst.0),
            if r.worst.2 { "a write" } else { "a read" },
            r.worst.1,
        );
        for ((phase, kind, error), n) in &r.errors {
            println!("  {:<NAME$} {n} failed {kind}(s) {phase}: {error}", "");
        }
    }
    println!("\n  goals (all runs):");
    for contender in Contender::ALL {
        let mine: Vec<&RunFigures> = runs.iter().filter(|(c, _)| *c == contender).map(|(_, r)| r).collect();
        let failed: usize = mine.iter().flat_map(|r| r.phases.iter().map(|p| p.failed)).sum();
        let elections: u64 = mine.iter().map(|r| r.elections()).sum();
        let ratio = median(mine.iter().map(|r| r.p99_ratio()));
        let verdict = |ok: bool| if ok { "met" } else { "NOT MET" };
        println!(
            "  {:<NAME$} failed requests {failed} ({}); elections {elections} ({}); p99 during/before {ratio:.2}x, \
             goal ≤ {P99_RATIO_GOAL}x ({})",
            contender.name(),
            verdict(failed == 0),
            verdict(elections == 0),
            verdict(ratio <= P99_RATIO_GOAL),
        );
    }
}
