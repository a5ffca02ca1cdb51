//! The checks before each member, against real etcd 3.4 and 3.5: a member frozen, one cut off
//! from its peers, and one far behind the leader each stop the run before that member, naming
//! it, with nothing more touched. Peer faults come from proxies in front of the members' peer
//! ports ([`groundskeeper_e2e::peer_network`]); their client ports keep answering.

use crate::common;

use std::time::Duration;

use groundskeeper_e2e::etcd_cluster::{ClusterOptions, EtcdCluster, EtcdVersion, etcd_or_skip};
use groundskeeper_e2e::etcd_writes::{OnFailure, WritePlan, WriteValue, Writes};
use groundskeeper_job::etcd::defrag::{Progress, run_defrag};
use groundskeeper_job::run::exit_code;
use groundskeeper_protocol::result::{DefragReport, ErrorKind, MemberDefragState};
use groundskeeper_protocol::{JobResult, Outcome, Report, exit};

const CHURNED_DB: i64 = 6_000_000;
const MIN_DEFRAG_BYTES: i64 = 1_000_000;

groundskeeper_e2e::for_each_etcd_version!(
    a_member_frozen_mid_run_stops_the_run_before_it,
    a_member_cut_off_from_its_peers_stops_the_run_before_it,
    a_member_far_behind_the_leader_is_waited_for_then_stops_the_run,
);

async fn fragmented(version: EtcdVersion) -> Option<EtcdCluster> {
    let binary = etcd_or_skip(version)?;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let options = ClusterOptions { peer_faults: true, ..ClusterOptions::default() };
    let cluster = EtcdCluster::start(&binary, options).await.expect("the etcd cluster starts");
    cluster.churn(CHURNED_DB).await.expect("churn");
    Some(cluster)
}

fn report(result: &JobResult) -> &DefragReport {
    match &result.report {
        Report::Defrag(report) => report,
        other => panic!("not a defrag report: {other:?}"),
    }
}

/// The run stopped retryably before `victim`, naming it; only `done` members were defragmented.
fn assert_stopped_before(result: &JobResult, victim: &str, done: usize, words: &[&str]) {
    assert_eq!(result.outcome, Outcome::Failed, "{result:?}");
    assert_eq!(exit_code(result), exit::RETRYABLE);
    let error = result.error.as_ref().unwrap();
    assert_eq!(error.kind, ErrorKind::Retryable);
    assert!(error.message.contains(&format!("member {victim}")), "{}", error.message);
    assert!(words.iter().any(|w| error.message.contains(w)), "{words:?}: {}", error.message);
    let report = report(result);
    assert_eq!(report.members.iter().filter(|m| m.defragmented).count(), done, "{report:?}");
    let entry = report.members.iter().find(|m| m.name == victim).unwrap();
    assert_eq!(entry.state, Some(MemberDefragState::Stopped), "{entry:?}");
    assert!(!entry.defragmented);
}

/// The member's index and name that the plan takes `n`-th (followers by name, leader last).
async fn planned(cluster: &EtcdCluster, n: usize) -> (usize, String) {
    let states = cluster.states().await.unwrap();
    let mut followers: Vec<usize> = (0..states.len()).filter(|i| !states[*i].is_leader()).collect();
    followers.sort_by_key(|i| states[*i].name.clone());
    let i = followers[n];
    (i, states[i].name.clone())
}

/// After the first follower, the second freezes (SIGSTOP): its `Status` no longer answers.
async fn a_member_frozen_mid_run_stops_the_run_before_it(version: EtcdVersion) {
    let Some(cluster) = fragmented(version).await else {
        return;
    };
    let (victim, name) = planned(&cluster, 1).await;
    let options =
        common::defrag_args(&cluster, &cluster.dir().join("r"), MIN_DEFRAG_BYTES, 10.0).options().unwrap();
    let mut frozen = false;
    let result = run_defrag(&options, &mut |progress| {
        if let Progress::MemberDone(_) = progress
            && !frozen
        {
            cluster.pause(victim);
            frozen = true;
        }
    })
    .await;
    cluster.resume(victim);
    // Its Status times out, or (when that answer was already on its way) the read through it.
    assert_stopped_before(&result, &name, 1, &["not healthy", "did not answer", "linearizable read"]);
}

/// After the first follower, the second is cut off from its peers: its client port still
/// answers, but it hears no leader and a linearizable read through it cannot complete.
async fn a_member_cut_off_from_its_peers_stops_the_run_before_it(version: EtcdVersion) {
    let Some(cluster) = fragmented(version).await else {
        return;
    };
    let (victim, name) = planned(&cluster, 1).await;
    let options =
        common::defrag_args(&cluster, &cluster.dir().join("r"), MIN_DEFRAG_BYTES, 10.0).options().unwrap();
    let mut cut = false;
    let result = run_defrag(&options, &mut |progress| {
        if let Progress::MemberDone(_) = progress
            && !cut
        {
            cluster.peers().cut(victim);
            cut = true;
        }
    })
    .await;
    cluster.peers().heal(victim);
    assert_stopped_before(&result, &name, 1, &["sees no leader", "linearizable read", "not healthy"]);
}

/// The first follower's peer link is slowed to 2 KB/s while writes go on: it still hears the
/// leader's heartbeats but falls far behind its log. The run waits `--catch-up-timeout-seconds`
/// for it, then stops before touching anything.
async fn a_member_far_behind_the_leader_is_waited_for_then_stops_the_run(version: EtcdVersion) {
    let Some(cluster) = fragmented(version).await else {
        return;
    };
    let (victim, name) = planned(&cluster, 0).await;
    cluster.peers().slow(victim, 2_000);
    // Writes through the leader, so that the slowed member's link does not slow them too.
    let leader = cluster_index(&cluster, &cluster.leader().await.unwrap().name);
    let plan = WritePlan {
        prefix: "load/".into(),
        distinct_keys: Some(500),
        value: WriteValue::Bytes(1024),
        failures: OnFailure::GoOn,
    };
    let load = Writes::start(cluster.client(Some(leader)).await.unwrap(), plan);
    // Behind by far more than the 100 entries allowed before the run starts.
    let mut status_client = cluster.client(Some(victim)).await.unwrap();
    let mut leader_client = cluster.client(Some(leader)).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let (mut behind, mut seen) = (0, String::new());
    while tokio::time::Instant::now() < deadline {
        let leader_status = leader_client.status().await.unwrap();
        let victim_status = status_client.status().await.unwrap();
        behind = leader_status.raft_index().saturating_sub(victim_status.raft_applied_index());
        if behind > 500 {
            break;
        }
        seen = format!(
            "leader's index {}, the slowed member's applied index {}, leader as the slowed member sees it {:x}, as the leader sees it {:x}",
            leader_status.raft_index(),
            victim_status.raft_applied_index(),
            victim_status.leader(),
            leader_status.leader(),
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if behind <= 500 {
        let written = load.stop().await;
        panic!(
            "the slowed member fell only {behind} entries behind in 30 s: {seen}; {} writes made, {} failed",
            written.puts.len(),
            written.failed
        );
    }
    let mut args = common::defrag_args(&cluster, &cluster.dir().join("r"), MIN_DEFRAG_BYTES, 10.0);
    args.catch_up_timeout_seconds = 3;
    let result = run_defrag(&args.options().unwrap(), &mut |_| {}).await;
    load.stop().await;
    cluster.peers().heal(victim);
    assert_stopped_before(&result, &name, 0, &["entries behind the leader's commit index"]);
    let message = &result.error.as_ref().unwrap().message;
    assert!(message.contains("still after 3s"), "{message}");
}

fn cluster_index(cluster: &EtcdCluster, name: &str) -> usize {
    (0..cluster.len()).find(|i| cluster.name(*i) == name).unwrap()
}
