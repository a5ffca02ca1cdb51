//! One observation pass of the EtcdCluster controller over a fleet of partitioned etcd clusters
//! with real etcd processes (not a test: figures for the README).
//!
//! `FLEET_CLUSTERS` clusters (default 64) × 3 members of etcd 3.5 on loopback. A pass is what the
//! controller does for every cluster of the fleet when each is due at once: the members' `Status`
//! calls and `MemberList` (new connections, as each reconciliation makes them), then the pure
//! decision, composite revisions decoded (the clusters are `Partitioned`; real etcd writes
//! sequential revisions, which decode as well), all clusters concurrently, as the controller
//! runtime reconciles them. Measures, over `ROUNDS` passes:
//! * the wall time of a pass;
//! * the heap the controller's code allocates during a pass (peak above what was live before,
//!   counted by a global allocator) and what stays live after it (the statuses kept);
//! * the process's resident memory (VmRSS / VmHWM).
//!
//! Run: `cargo bench -p groundskeeper-controller --bench fleet_observation` (etcd 3.5 found as
//! the tests find it: `GROUNDSKEEPER_ETCD_3_5`, `target/tools/`, PATH; `cargo xtask test` fetches
//! it). Each member takes about 128 MiB of disk (its WAL segment and the next one, both
//! preallocated at 64 MiB): 64 × 3 members take 24 GiB. The disk is shared, so no further
//! cluster is started once less than `MIN_FREE_GIB` would be left on the temporary directory's
//! file system; the figures then say how many were reached.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures::future::join_all;
use groundskeeper_api::etcd_cluster::{EtcdClusterSpec, EtcdClusterStatus};
use groundskeeper_controller::etcd::decide::{Decision, Input, Observed, decide};
use groundskeeper_controller::etcd::observe::observe_cluster;
use groundskeeper_controller::etcd::policy::Policy;
use groundskeeper_e2e::etcd_cluster::{ClusterOptions, EtcdCluster, EtcdVersion, find_etcd};
use jiff::Timestamp;

const ROUNDS: usize = 5;
const MEMBERS: usize = 3;
/// Free space (GiB) the benchmark leaves on the temporary directory's file system.
const MIN_FREE_GIB: u64 = 8;
/// Disk one cluster takes: its members' preallocated WAL files (measured: 39 clusters took
/// 15 GiB).
const CLUSTER_DISK_GIB: f64 = 0.4;

/// Free space of the temporary directory's file system, in GiB (`df -Pk`).
fn free_gib() -> Option<f64> {
    let output = std::process::Command::new("df").arg("-Pk").arg(std::env::temp_dir()).output().ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    let available_kib: f64 = text.lines().nth(1)?.split_whitespace().nth(3)?.parse().ok()?;
    Some(available_kib / (1024.0 * 1024.0))
}

mod common;
use common::{Counting, LIVE, PEAK};

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// A line of `/proc/self/status` in KiB (`VmRSS`, `VmHWM`).
fn proc_kib(field: &str) -> usize {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix(field)?.trim().strip_suffix("kB")?.trim().parse().ok())
        .unwrap_or(0)
}

fn spec(cluster: &EtcdCluster, id: usize) -> EtcdClusterSpec {
    serde_json::from_value(serde_json::json!({
        "endpoints": cluster.client_urls(),
        "partition": {"fleet": "bench", "clusterId": id, "revisionScheme": "Partitioned"},
        "policy": {"compaction": {"mode": "periodic", "retention": "1h"}},
    }))
    .expect("a valid spec")
}

/// One observation and decision of one cluster.
async fn observe_and_decide(name: &str, policy: &Policy, previous: &EtcdClusterStatus) -> Decision {
    let observed = Observed::Members(observe_cluster(&policy.endpoints, None).await);
    decide(&Input {
        cluster: name,
        generation: Some(1),
        policy: Ok(policy),
        enabled: true,
        observed: &observed,
        tasks: &[],
        previous,
        collisions: &[],
        suspensions: &[],
        windows: None,
        now: Timestamp::now(),
    })
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let clusters: usize = std::env::var("FLEET_CLUSTERS").ok().and_then(|n| n.parse().ok()).unwrap_or(64);
    let binary = match find_etcd(EtcdVersion::V3_5) {
        Ok(binary) => binary,
        Err(why) => {
            eprintln!("fleet_observation: skipped: {why}");
            return;
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime");
    runtime.block_on(async {
        let started = Instant::now();
        let mut fleet = Vec::with_capacity(clusters);
        for i in 0..clusters {
            if let Some(free) = free_gib()
                && free - CLUSTER_DISK_GIB < MIN_FREE_GIB as f64
            {
                eprintln!(
                    "stopping at {i} clusters: {free:.1} GiB free on {}, {MIN_FREE_GIB} GiB are left to others",
                    std::env::temp_dir().display()
                );
                break;
            }
            let options = ClusterOptions {
                members: MEMBERS,
                ..ClusterOptions::default()
            };
            let cluster = EtcdCluster::start(&binary, options)
                .await
                .unwrap_or_else(|err| panic!("cluster {i} of {clusters} does not start: {err}"));
            fleet.push(cluster);
            eprintln!(
                "started {}/{clusters} clusters ({} etcd processes) in {:.0?}",
                i + 1,
                (i + 1) * MEMBERS,
                started.elapsed()
            );
        }
        let policies: Vec<Policy> = fleet
            .iter()
            .enumerate()
            .map(|(i, c)| Policy::from_spec(&spec(c, i % 64)).expect("a valid policy"))
            .collect();
        let clusters = fleet.len();
        let names: Vec<String> = (0..clusters).map(|i| format!("cluster-{i:02}")).collect();
        let mut statuses = vec![EtcdClusterStatus::default(); clusters];
        let rss_before = proc_kib("VmRSS:");
        let mut times: Vec<Duration> = Vec::new();
        let mut peaks = Vec::new();
        let baseline = LIVE.load(Ordering::Relaxed);
        for round in 0..ROUNDS {
            let before = LIVE.load(Ordering::Relaxed);
            PEAK.store(before, Ordering::Relaxed);
            let start = Instant::now();
            let decisions = join_all(
                names
                    .iter()
                    .zip(&policies)
                    .zip(&statuses)
                    .map(|((name, policy), previous)| observe_and_decide(name, policy, previous)),
            )
            .await;
            times.push(start.elapsed());
            peaks.push(PEAK.load(Ordering::Relaxed).saturating_sub(before));
            let healthy = decisions
                .iter()
                .filter(|d| d.status.healthy_members == Some(MEMBERS as i32))
                .count();
            assert_eq!(healthy, clusters, "round {round}: every member answers");
            statuses = decisions.into_iter().map(|d| d.status).collect();
        }
        let kept = LIVE.load(Ordering::Relaxed).saturating_sub(baseline);
        let mut sorted = times.clone();
        sorted.sort();
        let median = sorted[sorted.len() / 2];
        let peak = *peaks.iter().max().unwrap_or(&0);
        let status_bytes: usize = statuses
            .iter()
            .map(|s| serde_json::to_vec(s).map(|v| v.len()).unwrap_or(0))
            .sum();
        println!("fleet_observation: {clusters} clusters × {MEMBERS} members of etcd 3.5, {ROUNDS} passes");
        println!("| what | figure |");
        println!("|---|---|");
        println!(
            "| one pass (observe + decide, all clusters at once) | {:.0} ms median (min {:.0}, max {:.0}); {:.1} ms per cluster |",
            median.as_secs_f64() * 1000.0,
            sorted[0].as_secs_f64() * 1000.0,
            sorted[sorted.len() - 1].as_secs_f64() * 1000.0,
            median.as_secs_f64() * 1000.0 / clusters as f64
        );
        println!(
            "| heap allocated during a pass, at its peak | {:.1} MiB ({peak} bytes) |",
            mib(peak)
        );
        println!(
            "| heap still live after the last pass (the statuses kept; as JSON {status_bytes} bytes) | {:.2} MiB ({kept} bytes) |",
            mib(kept)
        );
        println!(
            "| process RSS before the passes / after / high-water mark | {:.1} / {:.1} / {:.1} MiB |",
            rss_before as f64 / 1024.0,
            proc_kib("VmRSS:") as f64 / 1024.0,
            proc_kib("VmHWM:") as f64 / 1024.0
        );
        drop(fleet);
    });
}
