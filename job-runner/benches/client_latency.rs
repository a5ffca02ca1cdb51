//! What clients feel during a maintenance run. Two workloads run before, during and after the
//! defragmentation of a fragmented 3-member cluster, through one etcd-client connected to every
//! endpoint (as kube-apiserver holds one client over all its etcd endpoints):
//!
//! - lease holders, as client-go's leader election renews a Lease: each holder renews every 2 s
//!   (the retry period) within a 10 s renew deadline; after a renewal that succeeded at t0 it
//!   waits the retry period, then tries to renew until t0 + 2 s + 10 s, one attempt (a txn that
//!   updates its key if nobody else did, as kube-apiserver's update of a Lease does) every 2 s or
//!   as soon as the previous attempt ended, whichever is later; an attempt still waiting at the
//!   deadline is cut there. No renewal before the deadline: the lease is lost (counted), and the
//!   holder acquires it again, one attempt every 2 s, and goes on;
//! - a steady, open-loop load of writes and linearizable reads of small values.
//!
//! Every request goes through a client that retries as etcd's Go client (clientv3's retry
//! interceptor) does: a read that fails with `Unavailable` (etcd's `leader changed`, `no leader`,
//! `request timed out`, ...) is sent again, after no wait and 25 ms in turn (its round-robin
//! quorum backoff for 3 endpoints), at most 100 times, until the request's own deadline; a write
//! is sent again only when it surely never reached a server (`isSafeRetryMutableRPC`: the
//! connection could not be made), never after a server's answer or a time-out. Each request keeps
//! its first attempt's outcome (what a client without retries sees) and the outcome with retries.
//!
//! Four contenders, side by side in one process, each on a fresh cluster with the same data:
//!
//! - `groundskeeper, leader turn auto`, `always` and `never`: the runner's own defrag run
//!   ([`run_defrag`]): one member at a time, followers first, each caught up before the next; at
//!   the leader's turn `auto` defragments it in place when its defrag, predicted from this run's
//!   followers, fits the in-place budget (5 s), and moves leadership first otherwise; `always`
//!   always moves it first, `never` never does;
//! - `sequential, no transfer`: a plain `Defragment` call on each member in turn, followers first
//!   and the leader last, no leadership transfer and no wait in between (what `etcdctl defrag
//!   --cluster` and backup sidecars do).
//!
//! Reported per phase: requests, failed requests without and with retries, p50/p99/max latency
//! (with retries); per run: leases lost, failed renewals, the worst write stall (load writes and
//! lease renewals due from the maintenance's start on), the maintenance's wall time, raft term
//! changes seen through each member's `Status` (a planned leadership transfer is one term; every
//! other term change is an election), and the leader's turn the runner chose. Each failure and
//! the worst stall say what the maintenance was doing when the request was due: a follower's
//! defrag, the leader's turn (from its decision, through any transfer, to the end of the old
//! leader's defrag), or neither. Latency is measured from the moment a request was due, not from
//! when it was sent, so a stalled member shows as latency and never as fewer requests.
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
//! `GROUNDSKEEPER_BENCH_LEASES` lease holders [50],
//! `GROUNDSKEEPER_BENCH_WRITES` writes per second [200], `GROUNDSKEEPER_BENCH_READS` reads per
//! second [800], `GROUNDSKEEPER_BENCH_VALUE_BYTES` [1024], `GROUNDSKEEPER_BENCH_KEYS` keys the
//! load touches [10000], `GROUNDSKEEPER_BENCH_TIMEOUT_SECONDS` per load request [10],
//! `GROUNDSKEEPER_BENCH_ETCD` versions, `3.4`, `3.5` or `3.4,3.5` [3.4,3.5].
//!
//! The client's balancer (tonic's power-of-two-choices, every endpoint reporting the same load)
//! sends each request to a member picked at random, so about a third of the requests reach the
//! member being defragmented, as with kube-apiserver's round-robin.

#[path = "../tests/it/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use etcd_client::{Client, Compare, CompareOp, ConnectOptions, KvClient, Txn, TxnOp, TxnOpResponse};
use groundskeeper_e2e::etcd_cluster::{ClusterOptions, EtcdCluster, EtcdVersion, MemberState, find_etcd};
use groundskeeper_e2e::measure::flush_disk;
use groundskeeper_job::etcd::defrag::{Progress, run_defrag};
use groundskeeper_protocol::operation::LeaderTurnPolicy;
use groundskeeper_protocol::result::{LeaderChoice, LeaderTurn};
use groundskeeper_protocol::{Outcome, Report};
use tokio::task::JoinSet;

/// Goals: p99 during the maintenance at most this many times p99 before it.
const P99_RATIO_GOAL: f64 = 2.0;

/// A request this slow counts as stalled.
const SLOW: Duration = Duration::from_millis(100);

/// client-go's leader election defaults: a holder renews every retry period and gives the lease
/// up when no renewal succeeded within the renew deadline.
const RETRY_PERIOD: Duration = Duration::from_secs(2);
const RENEW_DEADLINE: Duration = Duration::from_secs(10);

/// clientv3's retries: at most 100, a 25 ms wait after each round over a quorum of the
/// endpoints (2 of 3), none in between.
const MAX_RETRIES: u32 = 100;
const BACKOFF: Duration = Duration::from_millis(25);
const QUORUM: u32 = 2;

#[derive(Debug, Clone)]
struct Config {
    db_bytes: i64,
    live_bytes: u64,
    rounds: usize,
    phase: Duration,
    leases: usize,
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
            leases: env_u64("GROUNDSKEEPER_BENCH_LEASES", 50) as usize,
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
    /// The runner with `--leader-turn auto`, `always` or `never`.
    Groundskeeper(LeaderTurnPolicy),
    Sequential,
}

impl Contender {
    const ALL: [Contender; 4] = [
        Contender::Groundskeeper(LeaderTurnPolicy::Auto),
        Contender::Groundskeeper(LeaderTurnPolicy::Always),
        Contender::Groundskeeper(LeaderTurnPolicy::Never),
        Contender::Sequential,
    ];

    fn name(self) -> &'static str {
        match self {
            Contender::Groundskeeper(LeaderTurnPolicy::Auto) => "groundskeeper, leader turn auto",
            Contender::Groundskeeper(LeaderTurnPolicy::Always) => "groundskeeper, leader turn always",
            Contender::Groundskeeper(LeaderTurnPolicy::Never) => "groundskeeper, leader turn never",
            Contender::Sequential => "sequential, no transfer",
        }
    }
}

/// Width of the contender column.
const NAME: usize = 45;

const PHASES: [&str; 3] = ["before", "during", "after"];

/// One load request as the client saw it.
#[derive(Debug, Clone)]
struct Sample {
    /// When it was due.
    due: Instant,
    write: bool,
    /// Its first attempt: why it failed, if it did (what a client without retries sees).
    first_error: Option<String>,
    /// From due to the final answer (or error, or time-out), retries included.
    latency: Duration,
    /// Why it failed in the end, retries included.
    error: Option<String>,
}

/// One lease renewal attempt.
#[derive(Debug, Clone)]
struct Renewal {
    due: Instant,
    /// From due to its answer, or to the cut at the cycle's deadline.
    latency: Duration,
    error: Option<String>,
}

/// What the lease holders went through.
#[derive(Debug, Clone, Default)]
struct LeaseLog {
    renewals: Vec<Renewal>,
    /// When a holder's renew deadline passed without a renewal.
    lost: Vec<Instant>,
}

#[derive(Debug, Clone, Copy, Default)]
struct PhaseStats {
    requests: usize,
    /// Failed on the first attempt: a client without retries.
    failed_raw: usize,
    /// Failed with clientv3's retries.
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
            failed_raw: samples.iter().filter(|s| s.first_error.is_some()).count(),
            failed: samples.iter().filter(|s| s.error.is_some()).count(),
            slow: latencies.iter().filter(|l| **l >= SLOW).count(),
            p50: at(0.50),
            p99: at(0.99),
            max: latencies.last().copied().unwrap_or_default(),
        }
    }
}

/// The leader's turn as one run took it.
#[derive(Debug, Clone)]
struct Turn {
    /// `in place` or `transfer first`.
    choice: &'static str,
    predicted: Option<Duration>,
    actual: Option<Duration>,
}

impl Turn {
    fn of(turn: &LeaderTurn) -> Self {
        Self {
            choice: match turn.choice {
                LeaderChoice::InPlace => "in place",
                LeaderChoice::TransferFirst => "transfer first",
            },
            predicted: turn.predicted_ms.map(Duration::from_millis),
            actual: turn.actual_ms.map(Duration::from_millis),
        }
    }

    fn describe(&self) -> String {
        let or_dash = |d: Option<Duration>| d.map(ms).unwrap_or_else(|| "-".into());
        format!("{}, predicted {} / actual {} ms", self.choice, or_dash(self.predicted), or_dash(self.actual))
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
    leader_turn: Turn,
    leases_lost: usize,
    renewals: usize,
    renewals_failed: usize,
    /// The slowest write, load or lease renewal, due from the maintenance's start on, retries
    /// included: latency, when it was due (the phase, and during the maintenance what it was
    /// doing), what.
    worst_write: (Duration, String, &'static str),
    /// The slowest request of any kind due from the maintenance's start on, retries included:
    /// latency, when it was due, what.
    worst: (Duration, String, &'static str),
    /// Failures by when they were due, what, and error; raw (first attempt) and with retries.
    errors: BTreeMap<(String, &'static str, String), (usize, usize)>,
}

impl RunFigures {
    fn elections(&self) -> u64 {
        self.term_changes.saturating_sub(self.planned_transfers)
    }

    fn p99_ratio(&self) -> f64 {
        self.phases[1].p99.as_secs_f64() / self.phases[0].p99.as_secs_f64().max(1e-6)
    }

    fn failed_raw(&self) -> usize {
        self.phases.iter().map(|p| p.failed_raw).sum()
    }

    fn failed(&self) -> usize {
        self.phases.iter().map(|p| p.failed).sum()
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
                "{version} round {}/{} {:<NAME$}: wall {} ms, leases lost {}, failed {} raw / {} with retries, \
                 worst write {} ms, during p99 {} ms, elections {}, leader {}",
                round + 1,
                config.rounds,
                contender.name(),
                figures.wall.as_millis(),
                figures.leases_lost,
                figures.failed_raw(),
                figures.failed(),
                ms(figures.worst_write.0),
                ms(figures.phases[1].p99),
                figures.elections(),
                figures.leader_turn.describe(),
            );
            runs.push((contender, figures));
        }
    }
    print_report(version, &etcd_version, config, &runs);
}

/// A fresh cluster, fragmented; the load and the lease holders before, during and after one
/// maintenance run.
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
    let (planned_transfers, defrags, leader_turn, windows) = match contender {
        Contender::Groundskeeper(turn) => groundskeeper(&cluster, turn).await?,
        Contender::Sequential => sequential(&before).await?,
    };
    let ended = Instant::now();
    tokio::time::sleep(config.phase).await;
    let (samples, leases) = load.stop().await;
    let after = cluster.states().await?;

    let phase_of = |due: Instant| {
        if due < started {
            0
        } else if due < ended {
            1
        } else {
            2
        }
    };
    // Where a request was due: before, after, or during, and then during what.
    let place = |due: Instant| match phase_of(due) {
        1 => format!("during {}", cause(&windows, due)),
        p => PHASES[p].to_string(),
    };
    let phases = [0, 1, 2]
        .map(|p| PhaseStats::of(&samples.iter().filter(|s| phase_of(s.due) == p).collect::<Vec<_>>()));
    let what = |write: bool| if write { "a write" } else { "a read" };
    // The maintenance's doing: what was due from its start on (a stall before it is the
    // machine's, not the maintenance's).
    let since_start = |due: Instant| due >= started;
    let slowest_renewal = leases
        .renewals
        .iter()
        .filter(|r| since_start(r.due))
        .max_by_key(|r| r.latency)
        .map(|r| (r.latency, place(r.due), "a lease renewal"));
    let slowest_write = samples
        .iter()
        .filter(|s| s.write && since_start(s.due))
        .max_by_key(|s| s.latency)
        .map(|s| (s.latency, place(s.due), "a write"));
    let slowest = samples
        .iter()
        .filter(|s| since_start(s.due))
        .max_by_key(|s| s.latency)
        .map(|s| (s.latency, place(s.due), what(s.write)));
    let none = (Duration::ZERO, "none".to_string(), "none");
    let worst_write =
        slowest_write.into_iter().chain(slowest_renewal.clone()).max_by_key(|w| w.0).unwrap_or(none.clone());
    let worst = slowest.into_iter().chain(slowest_renewal).max_by_key(|w| w.0).unwrap_or(none);
    let mut errors: BTreeMap<_, (usize, usize)> = BTreeMap::new();
    for s in &samples {
        let phase = place(s.due);
        let kind = if s.write { "write" } else { "read" };
        if let Some(error) = &s.first_error {
            errors.entry((phase.clone(), kind, error.clone())).or_default().0 += 1;
        }
        if let Some(error) = &s.error {
            errors.entry((phase, kind, error.clone())).or_default().1 += 1;
        }
    }
    for r in &leases.renewals {
        if let Some(error) = &r.error {
            let entry = errors.entry((place(r.due), "lease renewal", error.clone())).or_default();
            entry.0 += 1;
            entry.1 += 1;
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
            leader_turn,
            leases_lost: leases.lost.len(),
            renewals: leases.renewals.len(),
            renewals_failed: leases.renewals.iter().filter(|r| r.error.is_some()).count(),
            worst_write,
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

type Maintenance = (u64, Vec<(String, bool, Duration)>, Turn, Vec<Window>);

/// What the maintenance was doing from `from` to `to`.
#[derive(Debug, Clone)]
struct Window {
    from: Instant,
    to: Instant,
    what: &'static str,
}

const FOLLOWER: &str = "a follower's defrag";
const LEADER_TURN: &str = "the leader's turn";
const BETWEEN: &str = "between defrags";

/// What the maintenance was doing when a request was due: the leader's turn (from its decision,
/// through any transfer, to the end of the old leader's defrag), a follower's defrag, or neither.
fn cause(windows: &[Window], due: Instant) -> &'static str {
    let within = |what: &str| windows.iter().any(|w| w.what == what && w.from <= due && due < w.to);
    if within(LEADER_TURN) {
        LEADER_TURN
    } else if within(FOLLOWER) {
        FOLLOWER
    } else {
        BETWEEN
    }
}

/// The runner's own defrag run, in this process, with the given leader's-turn policy. Returns
/// the leadership transfers it made, each member's defrag time, and the leader's turn.
async fn groundskeeper(cluster: &EtcdCluster, leader_turn: LeaderTurnPolicy) -> Result<Maintenance, String> {
    // Every member is defragmented, whatever the thresholds would say.
    let mut args = common::defrag_args(cluster, &cluster.dir().join("result.json"), 1_000_000, 10.0);
    args.member_timeout_seconds = 600;
    let mut options = args.options().map_err(|f| f.message)?;
    options.plan.leader_turn = leader_turn;
    // When each step happened: the leader's turn decided, each member started and done.
    let mut decided: Option<(Instant, String)> = None;
    let mut started: BTreeMap<String, Instant> = BTreeMap::new();
    let mut done: BTreeMap<String, Instant> = BTreeMap::new();
    let result = run_defrag(&options, &mut |progress: Progress<'_>| match progress {
        Progress::LeaderTurnDecided(turn) => decided = Some((Instant::now(), turn.member.clone())),
        Progress::MemberStarted(member) => {
            started.insert(member.name.clone(), Instant::now());
        }
        Progress::MemberDone(member) => {
            done.insert(member.name.clone(), Instant::now());
        }
        _ => {}
    })
    .await;
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
    let turn = report
        .leader_turn
        .as_ref()
        .map(Turn::of)
        .ok_or_else(|| "the defrag report tells no leader's turn".to_string())?;
    let (turn_from, leader) = decided.ok_or_else(|| "no leader's turn was decided".to_string())?;
    let mut windows = Vec::new();
    for m in &report.members {
        let (Some(&from), Some(&to)) = (started.get(&m.name), done.get(&m.name)) else {
            continue;
        };
        if m.name == leader {
            windows.push(Window { from: turn_from, to, what: LEADER_TURN });
        } else {
            windows.push(Window { from, to: from + Duration::from_millis(m.duration_ms), what: FOLLOWER });
        }
    }
    Ok((u64::from(report.leader_moved_to.is_some()), defrags, turn, windows))
}

/// `Defragment` on each member in turn, followers first, the leader last, nothing in between.
async fn sequential(before: &[MemberState]) -> Result<Maintenance, String> {
    let mut order: Vec<&MemberState> = before.iter().filter(|s| !s.is_leader()).collect();
    order.extend(before.iter().filter(|s| s.is_leader()));
    let mut defrags = Vec::new();
    let mut windows = Vec::new();
    for member in order {
        // No request time-out: the call lasts as long as the defrag.
        let mut client = Client::connect([member.client_url.as_str()], None)
            .await
            .map_err(|e| format!("{}: {e}", member.name))?;
        let started = Instant::now();
        client.defragment().await.map_err(|e| format!("defragment {}: {e}", member.name))?;
        defrags.push((member.name.clone(), member.is_leader(), started.elapsed()));
        let what = if member.is_leader() { LEADER_TURN } else { FOLLOWER };
        windows.push(Window { from: started, to: Instant::now(), what });
    }
    let leader = defrags.iter().find(|d| d.1).map(|d| d.2);
    let turn = Turn { choice: "in place", predicted: None, actual: leader };
    Ok((0, defrags, turn, windows))
}

/// An etcd error in a few words: the gRPC code and etcd's message.
fn describe(err: &etcd_client::Error) -> String {
    match err {
        etcd_client::Error::GRpcStatus(status) => format!("{:?}: {}", status.code(), status.message()),
        other => other.to_string(),
    }
}

/// gRPC's `Unavailable`.
const UNAVAILABLE: i32 = 14;

/// Whether clientv3's retry interceptor would send the request again after this error:
/// `isSafeRetryImmutableRPC` for reads (a gRPC status `Unavailable`, which etcd answers with
/// `leader changed`, `no leader`, `request timed out` and the like), `isSafeRetryMutableRPC` for
/// writes (`Unavailable` raised by the client itself because no connection could be made, so
/// the request never reached a server).
fn retried(write: bool, err: &etcd_client::Error) -> bool {
    let etcd_client::Error::GRpcStatus(status) = err else {
        // Not a status: a dial error, which clientv3 does not retry either.
        return false;
    };
    if status.code() as i32 != UNAVAILABLE {
        return false;
    }
    if !write {
        return true;
    }
    let message = status.message();
    !message.starts_with("etcdserver:")
        && ["error trying to connect", "tcp connect error", "Connection refused"]
            .iter()
            .any(|m| message.contains(m))
}

/// The outcome of one request through the retrying client.
struct Answered<T> {
    /// The first attempt's error, if it failed.
    first_error: Option<String>,
    /// The final answer, retries included.
    result: Result<T, String>,
}

/// Sends a request, and again as clientv3 would, until `deadline`.
async fn with_retries<T, F, Fut>(write: bool, deadline: tokio::time::Instant, mut call: F) -> Answered<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, etcd_client::Error>>,
{
    let mut first_error = None;
    let mut attempt = 0u32;
    loop {
        let (error, again) = match tokio::time::timeout_at(deadline, call()).await {
            Ok(Ok(value)) => return Answered { first_error, result: Ok(value) },
            Ok(Err(err)) => (describe(&err), retried(write, &err)),
            Err(_) => ("no answer before the deadline".to_string(), false),
        };
        if first_error.is_none() {
            first_error = Some(error.clone());
        }
        attempt += 1;
        if !again || attempt > MAX_RETRIES {
            return Answered { first_error, result: Err(error) };
        }
        // roundRobinQuorumBackoff: a wait after each round over a quorum, none in between.
        let wait = if attempt.is_multiple_of(QUORUM) { BACKOFF } else { Duration::ZERO };
        if tokio::time::Instant::now() + wait >= deadline {
            return Answered { first_error, result: Err(error) };
        }
        tokio::time::sleep(wait).await;
    }
}

/// The open-loop load: one request due every 1/(writes + reads) s, each sent in its own task, so
/// a request that hangs delays no other; and the lease holders, each in its own task. Bounded: a
/// fixed rate, a fixed number of holders, and every request ends by its deadline.
struct Load {
    stop: Arc<AtomicBool>,
    generator: tokio::task::JoinHandle<Vec<Sample>>,
    holders: JoinSet<LeaseLog>,
}

impl Load {
    async fn start(cluster: &EtcdCluster, config: &Config) -> Result<Self, String> {
        let options = ConnectOptions::new().with_connect_timeout(Duration::from_secs(3));
        let client = Client::connect(cluster.client_urls(), Some(options))
            .await
            .map_err(|e| format!("load client: {e}"))?;
        let stop = Arc::new(AtomicBool::new(false));
        // The holders start spread over one retry period, as independent controllers would.
        let mut holders = JoinSet::new();
        let start = tokio::time::Instant::now();
        for h in 0..config.leases {
            let offset = RETRY_PERIOD * h as u32 / config.leases.max(1) as u32;
            holders.spawn(hold_lease(client.kv_client(), h, start + offset, stop.clone()));
        }
        let generator = tokio::spawn(generate(client.kv_client(), config.clone(), stop.clone()));
        Ok(Self { stop, generator, holders })
    }

    async fn stop(mut self) -> (Vec<Sample>, LeaseLog) {
        self.stop.store(true, Ordering::SeqCst);
        let samples = self.generator.await.expect("the load generator");
        let mut leases = LeaseLog::default();
        while let Some(log) = self.holders.join_next().await {
            let log = log.expect("a lease holder");
            leases.renewals.extend(log.renewals);
            leases.lost.extend(log.lost);
        }
        (samples, leases)
    }
}

/// One renewal: update the holder's key if its revision is still the one this holder last wrote
/// (kube-apiserver's update of a Lease: a txn on the key's mod revision); when it is not (an
/// earlier attempt that was cut off did land), the same txn again on the revision it read back.
/// Returns the revision written.
async fn renew(
    client: &mut KvClient,
    key: &str,
    revision: i64,
    value: &[u8],
) -> Result<i64, etcd_client::Error> {
    let mut known = revision;
    for _ in 0..2 {
        let txn = Txn::new()
            .when([Compare::mod_revision(key, CompareOp::Equal, known)])
            .and_then([TxnOp::put(key, value, None)])
            .or_else([TxnOp::get(key, None)]);
        let answer = client.txn(txn).await?;
        if answer.succeeded() {
            return Ok(answer.header().map(|h| h.revision()).unwrap_or_default());
        }
        for op in answer.op_responses() {
            if let TxnOpResponse::Get(get) = op {
                known = get.kvs().first().map(|kv| kv.mod_revision()).unwrap_or_default();
            }
        }
    }
    Err(etcd_client::Error::InvalidArgs(format!("{key}: changed twice under the holder")))
}

/// A lease holder, as client-go's leader election renews (see the module's header).
async fn hold_lease(
    client: KvClient,
    holder: usize,
    start: tokio::time::Instant,
    stop: Arc<AtomicBool>,
) -> LeaseLog {
    let key = format!("lease/{holder:04}");
    let value = format!("holder-{holder}").into_bytes();
    let mut log = LeaseLog::default();
    let mut revision = 0i64;
    // Acquire (or acquire again after a loss): one attempt every retry period until one
    // succeeds, each cut after the renew deadline.
    let mut next = start;
    let mut held_since: Option<tokio::time::Instant> = None;
    loop {
        let Some(renewed_at) = held_since else {
            tokio::time::sleep_until(next).await;
            if stop.load(Ordering::SeqCst) {
                return log;
            }
            match renewal(&client, &key, &value, revision, next, next + RENEW_DEADLINE, &mut log).await {
                Some(r) => {
                    revision = r;
                    held_since = Some(tokio::time::Instant::now());
                }
                None => next = (next + RETRY_PERIOD).max(tokio::time::Instant::now()),
            }
            continue;
        };
        // Renew: a cycle that starts a retry period after the last success and ends at the
        // renew deadline; an attempt every retry period, or at once when the previous one took
        // longer.
        let cycle = renewed_at + RETRY_PERIOD;
        let deadline = cycle + RENEW_DEADLINE;
        let mut due = cycle;
        held_since = None;
        while due < deadline {
            tokio::time::sleep_until(due).await;
            if stop.load(Ordering::SeqCst) {
                return log;
            }
            if let Some(r) = renewal(&client, &key, &value, revision, due, deadline, &mut log).await {
                revision = r;
                held_since = Some(tokio::time::Instant::now());
                break;
            }
            due = (due + RETRY_PERIOD).max(tokio::time::Instant::now());
        }
        if held_since.is_none() {
            log.lost.push(deadline.into_std());
            next = deadline.max(tokio::time::Instant::now());
        }
    }
}

/// One renewal attempt, due at `due` and cut at `deadline`, logged; the revision written, if it
/// succeeded.
async fn renewal(
    client: &KvClient,
    key: &str,
    value: &[u8],
    revision: i64,
    due: tokio::time::Instant,
    deadline: tokio::time::Instant,
    log: &mut LeaseLog,
) -> Option<i64> {
    let answered = with_retries(true, deadline, || {
        let mut client = client.clone();
        async move { renew(&mut client, key, revision, value).await }
    })
    .await;
    log.renewals.push(Renewal {
        due: due.into_std(),
        latency: due.elapsed(),
        error: answered.result.as_ref().err().cloned(),
    });
    answered.result.ok()
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
        let client = client.clone();
        let value = value.clone();
        let deadline = due + config.request_timeout;
        in_flight.spawn(async move {
            let answered = with_retries(write, deadline, || {
                let mut client = client.clone();
                let key = key.clone();
                let value = value.clone();
                async move {
                    if write {
                        client.put(key, value.as_slice(), None).await.map(|_| ())
                    } else {
                        client.get(key, None).await.map(|_| ())
                    }
                }
            })
            .await;
            Sample {
                due: due.into_std(),
                write,
                first_error: answered.first_error,
                latency: due.elapsed(),
                error: answered.result.err(),
            }
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

fn runs_of(runs: &[(Contender, RunFigures)], contender: Contender) -> Vec<&RunFigures> {
    runs.iter().filter(|(c, _)| *c == contender).map(|(_, r)| r).collect()
}

/// The worst write stall over a contender's runs.
fn worst_write(mine: &[&RunFigures]) -> (Duration, String, &'static str) {
    mine.iter().map(|r| r.worst_write.clone()).max_by_key(|w| w.0).expect("a run")
}

/// The leader's turn over a contender's runs: each choice with its count, and the medians of the
/// predicted and actual times.
fn turns(mine: &[&RunFigures]) -> String {
    let mut choices: BTreeMap<&str, usize> = BTreeMap::new();
    for r in mine {
        *choices.entry(r.leader_turn.choice).or_default() += 1;
    }
    let choices: Vec<String> = choices.iter().map(|(c, n)| format!("{c} {n}/{}", mine.len())).collect();
    let predicted: Vec<Duration> = mine.iter().filter_map(|r| r.leader_turn.predicted).collect();
    let actual: Vec<Duration> = mine.iter().filter_map(|r| r.leader_turn.actual).collect();
    let or_dash = |v: Vec<Duration>| if v.is_empty() { "-".to_string() } else { ms(median(v)) };
    format!("{}; predicted {} / actual {} ms", choices.join(", "), or_dash(predicted), or_dash(actual))
}

fn print_report(version: EtcdVersion, etcd_version: &str, config: &Config, runs: &[(Contender, RunFigures)]) {
    let rounds = config.rounds;
    println!(
        "\n{version} ({etcd_version}), 3 members; {} lease holders renewing every {} s within a {} s renew \
         deadline; load {} writes/s + {} linearizable reads/s of {} B values over {} keys, open loop, {} s \
         time-out; one etcd-client over all endpoints, clientv3's retries; {} s before and after; {rounds} \
         run(s) per contender, alternating; figures are medians over the runs",
        config.leases,
        RETRY_PERIOD.as_secs(),
        RENEW_DEADLINE.as_secs(),
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
        "\n  load requests (latency with retries)\n  {:<NAME$} {:<7} {:>9} {:>11} {:>13} {:>9} {:>9} {:>9} {:>9}",
        "contender",
        "phase",
        "requests",
        "failed raw",
        "failed retry",
        format!("≥{}ms", SLOW.as_millis()),
        "p50 ms",
        "p99 ms",
        "max ms"
    );
    for contender in Contender::ALL {
        let mine = runs_of(runs, contender);
        for (p, phase) in PHASES.iter().enumerate() {
            let stat = |f: fn(&PhaseStats) -> Duration| median(mine.iter().map(|r| f(&r.phases[p])));
            println!(
                "  {:<NAME$} {:<7} {:>9} {:>11} {:>13} {:>9} {:>9} {:>9} {:>9}",
                if p == 0 { contender.name() } else { "" },
                phase,
                median(mine.iter().map(|r| r.phases[p].requests)),
                median(mine.iter().map(|r| r.phases[p].failed_raw)),
                median(mine.iter().map(|r| r.phases[p].failed)),
                median(mine.iter().map(|r| r.phases[p].slow)),
                ms(stat(|s| s.p50)),
                ms(stat(|s| s.p99)),
                ms(stat(|s| s.max)),
            );
        }
    }
    println!(
        "\n  {:<NAME$} {:>8} {:>7} {:>9} {:>11} {:>13} {:>11} {:>10} {:>10}  worst write stall (any run); leader's turn",
        "contender",
        "wall ms",
        "leases",
        "renewals",
        "failed raw",
        "failed retry",
        "p99 d/b",
        "elections",
        "transfers",
    );
    println!("  {:<NAME$} {:>8} {:>7} {:>9}", "", "", "lost", "failed");
    for contender in Contender::ALL {
        let mine = runs_of(runs, contender);
        let worst = worst_write(&mine);
        println!(
            "  {:<NAME$} {:>8} {:>7} {:>9} {:>11} {:>13} {:>10.1}x {:>10} {:>10}  {} ms ({}, {}); {}",
            contender.name(),
            ms(median(mine.iter().map(|r| r.wall))),
            median(mine.iter().map(|r| r.leases_lost)),
            median(mine.iter().map(|r| r.renewals_failed)),
            median(mine.iter().map(|r| r.failed_raw())),
            median(mine.iter().map(|r| r.failed())),
            median(mine.iter().map(|r| r.p99_ratio())),
            median(mine.iter().map(|r| r.elections())),
            median(mine.iter().map(|r| r.planned_transfers)),
            ms(worst.0),
            worst.2,
            worst.1,
            turns(&mine),
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
            "  {:<NAME$} wall {:>6} ms; defrags (ms): {}; leader's turn: {}; leases lost {}, renewals failed {}/{}; \
             failed raw {}/{}/{}, with retries {}/{}/{}; p99 {}/{}/{} ms; max {}/{}/{} ms; terms +{} ({} planned); \
             worst write {} ms ({}, {}); worst {} ms ({}, {})",
            contender.name(),
            ms(r.wall),
            defrags.join(", "),
            r.leader_turn.describe(),
            r.leases_lost,
            r.renewals_failed,
            r.renewals,
            r.phases[0].failed_raw,
            r.phases[1].failed_raw,
            r.phases[2].failed_raw,
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
            ms(r.worst_write.0),
            r.worst_write.2,
            r.worst_write.1,
            ms(r.worst.0),
            r.worst.2,
            r.worst.1,
        );
        for ((phase, kind, error), (raw, retried)) in &r.errors {
            println!("  {:<NAME$} {kind} {phase}: {error}: {raw} raw, {retried} with retries", "");
        }
    }
    let peer = worst_write(&runs_of(runs, Contender::Sequential));
    println!(
        "\n  goals (all runs): no lease lost and no failed request with retries, and a worst write stall no larger \
         than the sequential defrag's ({} ms)",
        ms(peer.0)
    );
    let verdict = |ok: bool| if ok { "met" } else { "NOT MET" };
    for contender in Contender::ALL {
        let mine = runs_of(runs, contender);
        let lost: usize = mine.iter().map(|r| r.leases_lost).sum();
        let failed_raw: usize = mine.iter().map(|r| r.failed_raw()).sum();
        let failed: usize = mine.iter().map(|r| r.failed()).sum();
        let elections: u64 = mine.iter().map(|r| r.elections()).sum();
        let worst = worst_write(&mine);
        let stall = if contender == Contender::Sequential {
            "the peer".to_string()
        } else {
            verdict(worst.0 <= peer.0).to_string()
        };
        println!(
            "  {:<NAME$} leases lost {lost}, failed with retries {failed} (raw {failed_raw}): {}; worst write stall {} ms: \
             {stall}; elections {elections}; p99 during/before {:.1}x (goal ≤ {P99_RATIO_GOAL}x: {})",
            contender.name(),
            verdict(lost == 0 && failed == 0),
            ms(worst.0),
            median(mine.iter().map(|r| r.p99_ratio())),
            verdict(median(mine.iter().map(|r| r.p99_ratio())) <= P99_RATIO_GOAL),
        );
    }
}
