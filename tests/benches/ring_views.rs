//! What the cleanup trigger reads of a large cluster's ring per pass (not a test: figures for
//! docs/benchmarks.md).
//!
//! One agent stand-in answering from a modelled cluster of 100 nodes with 256 vnodes each and
//! 500 vnode keyspaces in four replication groups (plus Scylla's system keyspaces). Through the
//! trigger's own reading code (`read_through`, its view cache), per pass: the bytes the agent
//! sent and the wall time, for
//! * a first pass (nothing cached: the schema version, every keyspace's ownership, one
//!   `describe_ring` per replication group),
//! * a pass with nothing changed (the schema version only),
//! * a pass after a replication change (one keyspace's RF lowered: the schema version moved, so
//!   everything is read again),
//!
//! and the schema watch's call per cluster and interval. Medians of 5 rounds.
//!
//! Run: `cargo bench -p groundskeeper-e2e --bench ring_views`.

use std::time::{Duration, Instant};

use groundskeeper_controller::scylla::ownership_reader::{ViewCache, read_through};
use groundskeeper_e2e::scylla_agent::cluster::{Cluster, Strategy};
use groundskeeper_e2e::scylla_agent::{AgentSpec, ScyllaAgent};
use groundskeeper_stores::scylla::agent::{AgentClient, AgentConfig};
use groundskeeper_stores::scylla::token::AuthToken;

const NODES: usize = 100;
const VNODES: usize = 256;
const KEYSPACES: usize = 500;
const ROUNDS: usize = 5;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(measure());
}

/// One pass's cost: bytes the agent sent, and the wall time.
#[derive(Clone, Copy)]
struct Cost {
    bytes: u64,
    time: Duration,
}

async fn measure() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let built = Instant::now();
    let model = Cluster::new(3, VNODES);
    let racks = ["a", "b", "c"];
    for i in 0..NODES {
        model.join(&format!("10.1.{}.{}", i / 250, i % 250), "dc1", racks[i % 3]).expect("a node joins");
    }
    let strategies = [
        Strategy::nts(&[("dc1", 3)]),
        Strategy::nts(&[("dc1", 2)]),
        Strategy::Simple { rf: 3 },
        Strategy::nts(&[("dc1", 1)]),
    ];
    for k in 0..KEYSPACES {
        model.create_keyspace(&format!("ks{k:03}"), strategies[k % strategies.len()].clone());
    }
    eprintln!(
        "model of {NODES} nodes × {VNODES} vnodes × {KEYSPACES} keyspaces built in {:?}",
        built.elapsed()
    );
    let token = "bench-token";
    let spec = AgentSpec { token: token.into(), ..AgentSpec::default() }.member_of(&model, "10.1.0.0");
    let agent = ScyllaAgent::start(spec).await;
    let mut config = AgentConfig::new(agent.host(), AuthToken::new(token).expect("a token"));
    config.port = agent.port();
    config.ca_pem = Some(agent.ca_pem().as_bytes().to_vec());
    config.request_timeout = Duration::from_secs(120);
    let client = AgentClient::new(config).expect("an agent client");

    let (mut first, mut unchanged, mut changed, mut watch) = (vec![], vec![], vec![], vec![]);
    for round in 0..ROUNDS {
        let cache = ViewCache::default();
        first.push(pass(&client, &agent, &cache).await);
        unchanged.push(pass(&client, &agent, &cache).await);
        let keyspace = format!("ks{:03}", round * 4);
        model.alter_keyspace(&keyspace, Strategy::nts(&[("dc1", 2)])).expect("an RF change");
        changed.push(pass(&client, &agent, &cache).await);
        let before = agent.served_bytes();
        let start = Instant::now();
        client.schema_version().await.expect("the schema version");
        watch.push(Cost { bytes: agent.served_bytes() - before, time: start.elapsed() });
        model.alter_keyspace(&keyspace, strategies[0].clone()).expect("RF back");
    }
    eprintln!("| pass | bytes read (median) | time (median) |");
    eprintln!("|---|---|---|");
    for (what, costs) in [
        ("first (nothing cached)", &first),
        ("nothing changed", &unchanged),
        ("after a replication change", &changed),
        ("schema watch, per cluster and interval", &watch),
    ] {
        let bytes = median(costs.iter().map(|c| c.bytes as f64).collect());
        let time = median(costs.iter().map(|c| c.time.as_secs_f64() * 1000.0).collect());
        eprintln!("| {what} | {} ({bytes:.0} B) | {time:.1} ms |", human(bytes));
    }
}

/// One pass's reading of the views through the trigger's cache, with its cost.
async fn pass(client: &AgentClient, agent: &ScyllaAgent, cache: &ViewCache) -> Cost {
    let before = agent.served_bytes();
    let start = Instant::now();
    // The member Services' ring fingerprint: the same in every pass here.
    let views = read_through(client, cache, ("scylla", "bench"), 42, false).await.expect("the ring views");
    assert!(!views.is_empty());
    Cost { bytes: agent.served_bytes() - before, time: start.elapsed() }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn human(bytes: f64) -> String {
    if bytes >= 1024.0 * 1024.0 {
        format!("{:.1} MiB", bytes / 1024.0 / 1024.0)
    } else if bytes >= 1024.0 {
        format!("{:.1} KiB", bytes / 1024.0)
    } else {
        format!("{bytes:.0} B")
    }
}
