//! `groundskeeper-job defrag` and `compact` against real etcd 3.4 and 3.5 clusters (3 members on
//! loopback). A missing etcd skips the test with a message, except under `CI=true`.
//!
//! The tests run one at a time (a lock): several 3-member clusters at once on a small machine
//! would starve etcd's heartbeats and cause elections that are nobody's fault.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use etcd_client::{AlarmAction, AlarmType};
use groundskeeper_e2e::etcd_cluster::{ClusterOptions, EtcdCluster, EtcdVersion, etcd_or_skip};
use groundskeeper_job::etcd::defrag::{DefragArgs, Progress, run_defrag};
use groundskeeper_job::etcd::lock::{Acquired, DefragLock};
use groundskeeper_job::run::exit_code;
use groundskeeper_protocol::result::{DefragReport, ErrorKind, LeaderChoice, MemberDefragState};
use groundskeeper_protocol::{JobResult, Outcome, Report, exit};
use groundskeeper_stores::etcd::connect::Cluster;

/// Churned dbs reach this size; the thresholds below sit well under it.
const CHURNED_DB: i64 = 6_000_000;
const MIN_DEFRAG_BYTES: i64 = 1_000_000;

async fn cluster(version: EtcdVersion, options: ClusterOptions) -> Option<EtcdCluster> {
    let binary = etcd_or_skip(version)?;
    let _ = rustls::crypto::ring::default_provider().install_default();
    Some(EtcdCluster::start(&binary, options).await.expect("the etcd cluster starts"))
}

async fn fragmented(version: EtcdVersion, options: ClusterOptions) -> Option<EtcdCluster> {
    let cluster = cluster(version, options).await?;
    cluster.churn(CHURNED_DB).await.expect("churn");
    Some(cluster)
}

fn defrag_args(cluster: &EtcdCluster, result_file: &Path) -> DefragArgs {
    common::defrag_args(cluster, result_file, MIN_DEFRAG_BYTES, 45.0)
}

/// Runs the real binary; returns its exit code and the result it wrote.
fn run_binary(cluster: &EtcdCluster, args: &[&str]) -> (i32, JobResult) {
    let result_file = cluster.dir().join("result.json");
    let _ = std::fs::remove_file(&result_file);
    let out = Command::new(env!("CARGO_BIN_EXE_groundskeeper-job"))
        .args(args)
        .arg("--result-file")
        .arg(&result_file)
        .output()
        .expect("groundskeeper-job runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let json = std::fs::read_to_string(&result_file)
        .unwrap_or_else(|e| panic!("no result file ({e}); stderr:\n{stderr}"));
    let result = JobResult::parse(&json).unwrap_or_else(|e| panic!("bad result ({e}): {json}"));
    eprintln!("{stderr}");
    (out.status.code().expect("exited"), result)
}

fn defrag_report(result: &JobResult) -> &DefragReport {
    match &result.report {
        Report::Defrag(report) => report,
        other => panic!("not a defrag report: {other:?}"),
    }
}

async fn max_term(cluster: &EtcdCluster) -> u64 {
    let states = cluster.states().await.expect("every member answers");
    states.iter().map(|s| s.raft_term).max().unwrap()
}

groundskeeper_e2e::for_each_etcd_version!(
    every_member_is_defragmented_with_one_planned_leader_transfer,
    auto_keeps_a_leader_with_a_short_predicted_defrag_in_place,
    a_member_under_the_thresholds_is_left_alone,
    dry_run_changes_nothing,
    a_member_killed_mid_run_stops_the_run,
    client_tls_with_generated_certificates,
    compaction_is_idempotent_and_refuses_future_revisions,
    a_defrag_call_timeout_is_not_a_failure,
    every_member_has_finished_the_compaction_before_any_defrag,
    a_nospace_alarm_is_disarmed_once_space_is_back,
    a_nospace_alarm_under_the_size_minimum_is_cured,
    no_move_leader_defragments_the_leader_last_in_place,
    a_second_run_is_refused_while_the_lock_is_held,
    the_lock_is_released_through_a_member_that_answers,
    endpoints_of_two_clusters_are_refused,
    a_shared_endpoint_is_never_taken_for_one_member,
    a_compaction_is_told_even_when_no_member_needs_a_defrag,
    members_that_would_overrun_the_window_are_left_for_the_next,
);

async fn every_member_is_defragmented_with_one_planned_leader_transfer(version: EtcdVersion) {
    let Some(cluster) = fragmented(version, ClusterOptions::default()).await else {
        return;
    };
    let before = cluster.states().await.unwrap();
    let term_before = max_term(&cluster).await;
    let min = MIN_DEFRAG_BYTES.to_string();
    let (code, result) = run_binary(
        &cluster,
        &[
            "defrag",
            "--endpoints",
            &cluster.endpoints_flag(),
            "--min-defrag-bytes",
            &min,
            "--leader-turn",
            "always",
        ],
    );
    assert_eq!(code, exit::SUCCESS, "{result:?}");
    assert_eq!(result.outcome, Outcome::Succeeded);
    let report = defrag_report(&result);
    assert_eq!(report.members.len(), 3);
    let turn = report.leader_turn.as_ref().expect("the leader's turn is reported");
    assert_eq!((turn.policy.as_str(), turn.choice), ("always", LeaderChoice::TransferFirst), "{turn:?}");
    assert!(turn.reason.starts_with("policy Always: leadership moves first (predicted"), "{}", turn.reason);
    assert!(report.members.iter().all(|m| m.defragmented), "{report:?}");
    for m in &report.members {
        assert!(m.db_size_after < m.db_size_before / 2, "{m:?} barely shrank");
    }
    // Followers first; the leader last, after leadership moved to a follower.
    let old_leader = before.iter().find(|s| s.is_leader()).unwrap();
    let last = report.members.last().unwrap();
    assert_eq!(last.name, old_leader.name);
    assert!(last.was_leader);
    assert!(report.members[..2].iter().all(|m| !m.was_leader));
    let moved_to = report.leader_moved_to.clone().expect("leadership was moved");
    assert_ne!(moved_to, old_leader.name);
    // One planned transfer: the term rose by exactly that, no election on top.
    let after = cluster.states().await.unwrap();
    let term_after = max_term(&cluster).await;
    assert!(term_after <= term_before + 1, "term {term_before} → {term_after}: an election happened");
    assert_eq!(after.iter().find(|s| s.is_leader()).unwrap().name, moved_to);
    for (b, a) in before.iter().zip(&after) {
        assert!(a.db_size < b.db_size / 2, "{a:?} still large (was {} bytes)", b.db_size);
    }
}

/// `Auto`: the followers' defrags, timed, predict the leader's far under the 5 s budget on these
/// small dbs: the leader is defragmented in place, no transfer, no term change, and the result
/// says so with the prediction and the actual time.
async fn auto_keeps_a_leader_with_a_short_predicted_defrag_in_place(version: EtcdVersion) {
    let Some(cluster) = fragmented(version, ClusterOptions::default()).await else {
        return;
    };
    let before = cluster.states().await.unwrap();
    let term_before = max_term(&cluster).await;
    let min = MIN_DEFRAG_BYTES.to_string();
    let (code, result) = run_binary(
        &cluster,
        &["defrag", "--endpoints", &cluster.endpoints_flag(), "--min-defrag-bytes", &min],
    );
    assert_eq!(code, exit::SUCCESS, "{result:?}");
    let report = defrag_report(&result);
    assert!(report.members.iter().all(|m| m.defragmented), "{report:?}");
    let old_leader = before.iter().find(|s| s.is_leader()).unwrap();
    let turn = report.leader_turn.as_ref().expect("the leader's turn is reported");
    assert_eq!(turn.member, old_leader.name);
    assert_eq!((turn.policy.as_str(), turn.choice), ("auto", LeaderChoice::InPlace), "{turn:?}");
    assert_eq!(turn.rate_from.as_deref(), Some("this run's followers (2)"), "{turn:?}");
    assert!(turn.predicted_ms.unwrap() <= turn.budget_ms, "{turn:?}");
    assert_eq!(turn.budget_ms, 5000);
    let last = report.members.last().unwrap();
    assert_eq!((last.name.as_str(), last.was_leader), (old_leader.name.as_str(), true));
    assert_eq!(turn.actual_ms, Some(last.duration_ms), "the actual time is the leader's own defrag");
    assert!(turn.reason.contains("≤ the 5.0s budget: in place, no transfer"), "{}", turn.reason);
    assert_eq!(report.leader_moved_to, None);
    assert_eq!(report.leader_transfer, None);
    assert_eq!(max_term(&cluster).await, term_before, "no transfer and no election");
    assert_eq!(cluster.leader().await.unwrap().name, old_leader.name, "the leader still leads");
}

async fn a_member_under_the_thresholds_is_left_alone(version: EtcdVersion) {
    let Some(cluster) = fragmented(version, ClusterOptions::default()).await else {
        return;
    };
    // Defragment one follower by hand: it is then far under the fragmentation threshold.
    let states = cluster.states().await.unwrap();
    let follower = (0..3).find(|i| !states[*i].is_leader()).unwrap();
    let mut client = cluster.client(Some(follower)).await.unwrap();
    client.defragment().await.unwrap();
    let small = cluster.state(follower).await.unwrap();
    assert!(small.db_size < states[follower].db_size / 2);

    let dir = tempfile::tempdir().unwrap();
    let options = defrag_args(&cluster, &dir.path().join("r")).options().unwrap();
    let result = run_defrag(&options, &mut |_| {}).await;
    assert_eq!(result.outcome, Outcome::Succeeded, "{result:?}");
    let report = defrag_report(&result);
    let untouched = report.members.iter().find(|m| m.name == small.name).unwrap();
    assert!(!untouched.defragmented);
    assert!(untouched.reason.contains("under the 45% fragmentation threshold"), "{}", untouched.reason);
    assert_eq!(report.members.last().unwrap().name, small.name, "skipped members come last");
    assert_eq!(report.members.iter().filter(|m| m.defragmented).count(), 2);

    // Over every size threshold: nothing to do, and the run says so.
    let mut args = defrag_args(&cluster, &dir.path().join("r"));
    args.min_defrag_bytes = 1_000_000_000;
    let result = run_defrag(&args.options().unwrap(), &mut |_| {}).await;
    assert_eq!(result.outcome, Outcome::Skipped, "{result:?}");
    assert_eq!(exit_code(&result), exit::SUCCESS);
    assert!(defrag_report(&result).members.iter().all(|m| !m.defragmented));
}

async fn dry_run_changes_nothing(version: EtcdVersion) {
    let Some(cluster) = fragmented(version, ClusterOptions::default()).await else {
        return;
    };
    let before = cluster.settled_states(Duration::from_secs(30)).await.unwrap();
    let min = MIN_DEFRAG_BYTES.to_string();
    let (code, result) = run_binary(
        &cluster,
        &[
            "defrag",
            "--endpoints",
            &cluster.endpoints_flag(),
            "--min-defrag-bytes",
            &min,
            "--compact-retain-revisions",
            "0",
            "--dry-run",
        ],
    );
    assert_eq!(code, exit::SUCCESS);
    assert_eq!(result.outcome, Outcome::Succeeded);
    let report = defrag_report(&result);
    assert!(report.dry_run);
    assert_eq!(report.compacted_revision, None);
    assert!(report.members.iter().all(|m| !m.defragmented && m.reason.starts_with("would defragment")));
    let after = cluster.states().await.unwrap();
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(
            (b.db_size, b.leader, b.raft_term, b.revision),
            (a.db_size, a.leader, a.raft_term, a.revision)
        );
    }
}

async fn a_member_killed_mid_run_stops_the_run(version: EtcdVersion) {
    let Some(mut cluster) = fragmented(version, ClusterOptions::default()).await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let options = defrag_args(&cluster, &dir.path().join("r")).options().unwrap();
    let names: Vec<String> = (0..3).map(|i| cluster.name(i).to_owned()).collect();
    let mut killed = None;
    let mut plan_order = Vec::new();
    let result = {
        let cluster = &mut cluster;
        run_defrag(&options, &mut |progress| match progress {
            Progress::Planned(plan) => plan_order = plan.members.iter().map(|m| m.name.clone()).collect(),
            // After the first member, kill the member planned last (the leader).
            Progress::MemberDone(_) if killed.is_none() => {
                let victim = plan_order.last().unwrap().clone();
                cluster.kill(names.iter().position(|n| *n == victim).unwrap());
                killed = Some(victim);
            }
            _ => {}
        })
        .await
    };
    let killed = killed.expect("a member was killed");
    assert_eq!(result.outcome, Outcome::Failed, "{result:?}");
    assert_eq!(exit_code(&result), exit::RETRYABLE);
    let error = result.error.as_ref().unwrap();
    assert_eq!(error.kind, ErrorKind::Retryable);
    assert!(error.message.contains(&format!("member {killed}")), "{}", error.message);
    assert!(
        error.message.contains("not healthy") || error.message.contains("unhealthy"),
        "{}",
        error.message
    );
    let report = defrag_report(&result);
    assert_eq!(report.members.iter().filter(|m| m.defragmented).count(), 1, "{report:?}");
    assert_eq!(report.members.len(), 3);
    assert!(report.leader_moved_to.is_none(), "nothing more was touched");
    // The run gave its lock back through a member that answers: a retry is not held up by it.
    let alive = names.iter().position(|n| *n != killed).unwrap();
    let mut client = cluster.client(Some(alive)).await.unwrap();
    let lease = client.lease_time_to_live(groundskeeper_job::etcd::lock::LOCK_LEASE_ID, None).await.unwrap();
    assert_eq!(lease.ttl(), -1, "the stopped run released the lock");
}

async fn client_tls_with_generated_certificates(version: EtcdVersion) {
    let options = ClusterOptions { client_tls: true, ..ClusterOptions::default() };
    let Some(cluster) = fragmented(version, options).await else {
        return;
    };
    assert!(cluster.endpoints_flag().starts_with("https://"));
    let endpoints = cluster.endpoints_flag();
    let min = MIN_DEFRAG_BYTES.to_string();
    let mut args = vec!["defrag", "--endpoints", &endpoints, "--min-defrag-bytes", &min];
    let tls_flags = cluster.tls_flags();
    args.extend(tls_flags.iter().map(String::as_str));
    let (code, result) = run_binary(&cluster, &args);
    assert_eq!(code, exit::SUCCESS, "{result:?}");
    assert!(defrag_report(&result).members.iter().all(|m| m.defragmented));
    // A member's metrics (read for its defrag's feature gate) come over the same client TLS.
    let tls = cluster.tls().unwrap();
    let connection = groundskeeper_stores::etcd::connect::EndpointArgs {
        endpoints: cluster.client_urls(),
        cacert: Some(tls.ca.clone()),
        cert: Some(tls.client_cert.clone()),
        key: Some(tls.client_key.clone()),
    }
    .connection()
    .unwrap();
    let metrics = connection.metrics(&cluster.client_urls()[0], Duration::from_secs(5)).await.unwrap();
    assert!(metrics.contains("etcd_server_version"), "{}", &metrics[..metrics.len().min(300)]);
    assert!(
        !groundskeeper_stores::etcd::versions::reports_non_blocking_defrag(&metrics),
        "3.4 and 3.5 block"
    );

    // Without a client certificate the members refuse us: unreachable, retryable.
    let ca = cluster.tls().unwrap().ca.display().to_string();
    let (code, result) = run_binary(&cluster, &["defrag", "--endpoints", &endpoints, "--cacert", &ca]);
    assert_eq!(code, exit::RETRYABLE, "{result:?}");
    // A TLS file that is not there is bad input.
    let (code, result) =
        run_binary(&cluster, &["defrag", "--endpoints", &endpoints, "--cacert", "/nonexistent/ca.pem"]);
    assert_eq!(code, exit::BAD_INPUT);
    assert!(result.message.unwrap().contains("--cacert /nonexistent/ca.pem"));
    // https without a CA is bad input too.
    let (code, _) = run_binary(&cluster, &["defrag", "--endpoints", &endpoints]);
    assert_eq!(code, exit::BAD_INPUT);
    // A CA that did not sign the members' certificates: no retry fixes it.
    let wrong_ca = cluster.dir().join("unrelated-ca.pem");
    std::fs::write(&wrong_ca, unrelated_ca_pem()).unwrap();
    let wrong_ca = wrong_ca.display().to_string();
    let mut args = vec!["defrag", "--endpoints", &endpoints];
    let tls_flags: Vec<String> =
        tls_flags.iter().map(|f| if *f == ca { wrong_ca.clone() } else { f.clone() }).collect();
    args.extend(tls_flags.iter().map(String::as_str));
    assert!(args.contains(&wrong_ca.as_str()), "{args:?}");
    let (code, result) = run_binary(&cluster, &args);
    assert_eq!(code, exit::BAD_INPUT, "{result:?}");
    let message = result.error.unwrap().message;
    assert!(message.contains("--cacert must be the CA"), "{message}");
}

fn unrelated_ca_pem() -> String {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let key = rcgen::KeyPair::generate().unwrap();
    params.self_signed(&key).unwrap().pem()
}

/// Two runs at once on one cluster: the second is refused (retryable) naming the first, touches
/// nothing, and the lock is gone once the first has finished.
async fn a_second_run_is_refused_while_the_lock_is_held(version: EtcdVersion) {
    let Some(cluster) = fragmented(version, ClusterOptions::default()).await else {
        return;
    };
    let client = cluster.client(None).await.unwrap();
    let acquired = DefragLock::acquire(vec![client]).await;
    let Ok(Acquired::Held(held)) = acquired else {
        panic!("the cluster has space: the lock is taken");
    };
    let before = cluster.settled_states(Duration::from_secs(30)).await.unwrap();
    let endpoints = cluster.endpoints_flag();
    let min = MIN_DEFRAG_BYTES.to_string();
    let args = ["defrag", "--endpoints", &endpoints, "--min-defrag-bytes", &min];
    let (code, result) = run_binary(&cluster, &args);
    assert_eq!(code, exit::RETRYABLE, "{result:?}");
    let message = result.error.unwrap().message;
    assert!(message.contains("another defrag or compaction run holds this cluster's lock"), "{message}");
    assert!(message.contains("s left unless renewed"), "{message}");
    // A compaction does not run beside it either: the same lock.
    let compact = ["compact", "--endpoints", &endpoints, "--retain-revisions", "0"];
    let (code, result) = run_binary(&cluster, &compact);
    assert_eq!(code, exit::RETRYABLE, "{result:?}");
    let message = result.error.unwrap().message;
    assert!(message.contains("another defrag or compaction run holds this cluster's lock"), "{message}");
    let after = cluster.states().await.unwrap();
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(
            (b.db_size, b.revision),
            (a.db_size, a.revision),
            "{}: nothing defragmented, and the lock moved no revision",
            b.name
        );
    }
    held.release().await;

    let (code, result) = run_binary(&cluster, &args);
    assert_eq!(code, exit::SUCCESS, "{result:?}");
    assert!(defrag_report(&result).members.iter().all(|m| m.defragmented));
    let mut client = cluster.client(None).await.unwrap();
    let lease = client.lease_time_to_live(groundskeeper_job::etcd::lock::LOCK_LEASE_ID, None).await.unwrap();
    assert_eq!(lease.ttl(), -1, "the run gave the lock back");
}

/// The lock is taken through the lowest-id member; that member then freezes (SIGSTOP) or dies
/// (SIGKILL). The release goes through a member that answers, so the lease is gone at once, and
/// the retry, once the member is back, is not refused by a lock nobody holds.
async fn the_lock_is_released_through_a_member_that_answers(version: EtcdVersion) {
    let Some(mut cluster) = fragmented(version, ClusterOptions::default()).await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for freeze in [true, false] {
        let options = defrag_args(&cluster, &dir.path().join("r")).options().unwrap();
        let members = Cluster::discover(options.connection.clone()).await.expect("the cluster answers");
        let lowest = members.members.iter().min_by_key(|m| m.id).unwrap();
        let (first, first_id) = (lowest.name.clone(), lowest.id);
        let Ok(Acquired::Held(lock)) = DefragLock::acquire(members.clients()).await else {
            panic!("the cluster has space: the lock is taken");
        };
        let victim = (0..cluster.len()).find(|i| cluster.name(*i) == first).unwrap();
        let witness = (victim + 1) % cluster.len();
        if freeze {
            cluster.pause(victim);
        } else {
            cluster.kill(victim);
        }
        lock.release().await;

        let mut client = cluster.client(Some(witness)).await.unwrap();
        // The stopped member may have been the leader: the witness answers a linearizable
        // request only once the others elected one of themselves (under load that can take
        // longer than etcd's request timeout). Bounded.
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let status = client.status().await;
            if status.as_ref().is_ok_and(|s| s.leader() != 0 && s.leader() != first_id) {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "no leader but {first} within 60 s: {status:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let lease =
            client.lease_time_to_live(groundskeeper_job::etcd::lock::LOCK_LEASE_ID, None).await.unwrap();
        assert_eq!(lease.ttl(), -1, "freeze {freeze}: the lock is gone although {first} does not answer");
        if freeze {
            cluster.resume(victim);
            cluster.wait_healthy(Duration::from_secs(30)).await.unwrap();
        } else {
            cluster.restart(victim).await.unwrap();
        }
        let endpoints = cluster.endpoints_flag();
        let min = MIN_DEFRAG_BYTES.to_string();
        let (code, result) =
            run_binary(&cluster, &["defrag", "--endpoints", &endpoints, "--min-defrag-bytes", &min]);
        assert_eq!(code, exit::SUCCESS, "freeze {freeze}: the retry starts at once: {result:?}");
        cluster.churn(CHURNED_DB).await.expect("churn");
    }
}

/// The only endpoint given is shared by every member, as a Service in front of them is: new
/// connections reach the members in turn, or the same one several times in a row. Each member is
/// still reached on its own advertised URL, checked by the id it answers with, so every member is
/// defragmented once, the leader last.
async fn a_shared_endpoint_is_never_taken_for_one_member(version: EtcdVersion) {
    for picks in [vec![0, 1, 2], vec![0, 0, 0, 1, 1, 1, 2, 2, 2]] {
        shared_endpoint_run(version, picks).await;
    }
}

async fn shared_endpoint_run(version: EtcdVersion, picks: Vec<usize>) {
    let Some(cluster) = fragmented(version, ClusterOptions::default()).await else {
        return;
    };
    let members =
        cluster.client_urls().iter().map(|url| url.trim_start_matches("http://").parse().unwrap()).collect();
    let shared = groundskeeper_e2e::peer_network::shared_endpoint(members, picks).unwrap();
    let before = cluster.states().await.unwrap();
    let endpoint = format!("http://{shared}");
    let min = MIN_DEFRAG_BYTES.to_string();
    let (code, result) =
        run_binary(&cluster, &["defrag", "--endpoints", &endpoint, "--min-defrag-bytes", &min]);
    assert_eq!(code, exit::SUCCESS, "{result:?}");
    let report = defrag_report(&result);
    let mut names: Vec<&str> = report.members.iter().map(|m| m.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["m0", "m1", "m2"]);
    let leader = before.iter().find(|s| s.is_leader()).unwrap();
    assert_eq!(report.members.last().unwrap().name, leader.name, "{report:?}");
    let after = cluster.states().await.unwrap();
    for (b, a) in before.iter().zip(&after) {
        assert!(
            a.db_size < b.db_size / 2,
            "{} was not defragmented: {} → {} bytes",
            a.name,
            b.db_size,
            a.db_size
        );
    }
}

/// One run, one cluster: endpoints of two clusters are bad input, and neither is touched.
async fn endpoints_of_two_clusters_are_refused(version: EtcdVersion) {
    let one = ClusterOptions { members: 1, ..ClusterOptions::default() };
    let Some(first) = cluster(version, one.clone()).await else {
        return;
    };
    let Some(second) = cluster(version, one).await else {
        return;
    };
    let mut writer = first.client(None).await.unwrap();
    for i in 0..20 {
        writer.put(format!("k{i}"), "v", None).await.unwrap();
    }
    let endpoints = format!("{},{}", first.endpoints_flag(), second.endpoints_flag());
    let defrag = ["defrag", "--endpoints", &endpoints, "--allow-single-member", "--min-defrag-bytes", "0"];
    // The same rule for every subcommand that talks to a cluster.
    let compact = ["compact", "--endpoints", &endpoints, "--retain-revisions", "0"];
    for args in [&defrag[..], &compact[..]] {
        let (code, result) = run_binary(&first, args);
        assert_eq!(code, exit::BAD_INPUT, "{args:?}: {result:?}");
        let message = result.error.unwrap().message;
        assert!(message.contains("2 different etcd clusters"), "{message}");
        assert!(
            message.contains(&first.endpoints_flag()) && message.contains(&second.endpoints_flag()),
            "{message}"
        );
    }
    // Neither cluster was compacted: the first one's oldest revision is still readable.
    writer
        .get("k0", Some(etcd_client::GetOptions::new().with_revision(2)))
        .await
        .expect("revision 2 is kept");
}

/// `--compact-retain-revisions` compacts even when no member is over the thresholds, and the
/// result says so.
async fn a_compaction_is_told_even_when_no_member_needs_a_defrag(version: EtcdVersion) {
    let Some(cluster) = cluster(version, ClusterOptions::default()).await else {
        return;
    };
    let mut client = cluster.client(None).await.unwrap();
    for i in 0..50 {
        client.put("k", format!("v{i}"), None).await.unwrap();
    }
    let endpoints = cluster.endpoints_flag();
    let huge = (64u64 << 30).to_string();
    let (code, result) = run_binary(
        &cluster,
        &[
            "defrag",
            "--endpoints",
            &endpoints,
            "--min-defrag-bytes",
            &huge,
            "--compact-retain-revisions",
            "10",
        ],
    );
    assert_eq!(code, exit::SUCCESS, "{result:?}");
    assert_eq!(result.outcome, Outcome::Skipped);
    let compacted = defrag_report(&result).compacted_revision.expect("compacted");
    let message = result.message.unwrap();
    assert!(
        message.starts_with(&format!("compacted to revision {compacted}; 0 of 3 member(s)")),
        "{message}"
    );
}

async fn compaction_is_idempotent_and_refuses_future_revisions(version: EtcdVersion) {
    let Some(cluster) = cluster(version, ClusterOptions::default()).await else {
        return;
    };
    let mut client = cluster.client(None).await.unwrap();
    let mut current = 0;
    for i in 0..20 {
        // The store's revision after the write, as the leader committed it: a follower's status
        // read now may not have applied it yet.
        current = client.put("k", format!("v{i}"), None).await.unwrap().header().unwrap().revision();
    }
    // Every member has applied it before the runner asks one of them.
    let settled = cluster.settled_states(Duration::from_secs(30)).await.expect("the cluster settles");
    assert!(settled.iter().all(|m| m.revision == current), "{settled:?}");
    let endpoints = cluster.endpoints_flag();
    let (code, result) =
        run_binary(&cluster, &["compact", "--endpoints", &endpoints, "--retain-revisions", "5"]);
    assert_eq!(code, exit::SUCCESS, "{result:?}");
    let Report::Compact(report) = &result.report else { panic!() };
    assert_eq!((report.current_revision, report.compacted_revision), (current, current - 5));
    assert!(!report.already_compacted);

    // The same point again, and an older one: already compacted, which is success.
    for revision in [current - 5, current - 10] {
        let r = revision.to_string();
        let (code, result) =
            run_binary(&cluster, &["compact", "--endpoints", &endpoints, "--revision", &r, "--physical"]);
        assert_eq!(code, exit::SUCCESS, "{result:?}");
        let Report::Compact(report) = &result.report else { panic!() };
        assert!(report.already_compacted, "{report:?}");
    }
    // A revision the store has not reached is bad input.
    let future = (current + 1000).to_string();
    let (code, result) = run_binary(&cluster, &["compact", "--endpoints", &endpoints, "--revision", &future]);
    assert_eq!(code, exit::BAD_INPUT, "{result:?}");
    assert!(result.message.unwrap().contains("future revision"));
    // Retaining more than the history holds: nothing to do.
    let (code, result) =
        run_binary(&cluster, &["compact", "--endpoints", &endpoints, "--retain-revisions", "100000"]);
    assert_eq!(code, exit::SUCCESS);
    assert_eq!(result.outcome, Outcome::Skipped);
    // An unreachable cluster is retryable.
    let dead = "http://127.0.0.1:1";
    let (code, _) = run_binary(&cluster, &["compact", "--endpoints", dead, "--retain-revisions", "1"]);
    assert_eq!(code, exit::RETRYABLE);
}

async fn a_defrag_call_timeout_is_not_a_failure(version: EtcdVersion) {
    let Some(cluster) = fragmented(version, ClusterOptions::default()).await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let before = cluster.states().await.unwrap();
    let mut args = defrag_args(&cluster, &dir.path().join("r"));
    // The call gives up at once; the runner must then poll until each defrag is over.
    args.defrag_call_timeout_ms = 1;
    args.compact_retain_revisions = Some(0);
    let result = run_defrag(&args.options().unwrap(), &mut |_| {}).await;
    assert_eq!(result.outcome, Outcome::Succeeded, "{result:?}");
    let report = defrag_report(&result);
    assert!(report.compacted_revision.is_some());
    assert!(report.members.iter().all(|m| m.defragmented));
    // The defrags did happen (server-side), even though every call was abandoned.
    for (b, a) in before.iter().zip(cluster.states().await.unwrap()) {
        assert!(a.db_size < b.db_size / 2, "{a:?} still large (was {} bytes)", b.db_size);
    }
}

/// A compaction before the defrags is applied by each member in the background: by the time the
/// run reports it done (and before any member is defragmented), every member's count of finished
/// compactions has gone up.
async fn every_member_has_finished_the_compaction_before_any_defrag(version: EtcdVersion) {
    let Some(cluster) = fragmented(version, ClusterOptions::default()).await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut args = defrag_args(&cluster, &dir.path().join("r"));
    args.compact_retain_revisions = Some(0);
    let options = args.options().unwrap();
    let urls = cluster.client_urls();
    let connection = options.connection.clone();
    let finished = |connection: &groundskeeper_stores::etcd::connect::Connection| {
        let handle = tokio::runtime::Handle::current();
        tokio::task::block_in_place(|| {
            handle.block_on(async {
                let mut counts = Vec::new();
                for url in &urls {
                    let metrics = connection.metrics(url, Duration::from_secs(5)).await.unwrap();
                    counts
                        .push(groundskeeper_stores::etcd::versions::compactions_finished(&metrics).unwrap());
                }
                counts
            })
        })
    };
    let before = finished(&connection);
    let mut at_compacted = None;
    let mut defrag_started_first = false;
    let result = run_defrag(&options, &mut |progress| match progress {
        Progress::Compacted { .. } => at_compacted = Some(finished(&connection)),
        Progress::MemberStarted(_) if at_compacted.is_none() => defrag_started_first = true,
        _ => {}
    })
    .await;
    assert_eq!(result.outcome, Outcome::Succeeded, "{result:?}");
    assert!(!defrag_started_first, "a defrag started before the compaction was reported done");
    let at_compacted = at_compacted.expect("the compaction was reported");
    for (i, (b, a)) in before.iter().zip(&at_compacted).enumerate() {
        assert!(a > b, "member {i}: {b} compactions finished before, {a} when the run went on");
    }
}

async fn a_nospace_alarm_is_disarmed_once_space_is_back(version: EtcdVersion) {
    nospace_alarm_cured(version, MIN_DEFRAG_BYTES).await;
}

/// A cluster with a small quota fills under the size minimum (100 MB by default): alarmed, it is
/// still defragmented and disarmed, not skipped while it stays read-only.
async fn a_nospace_alarm_under_the_size_minimum_is_cured(version: EtcdVersion) {
    nospace_alarm_cured(version, groundskeeper_stores::etcd::plan::DEFAULT_MIN_DEFRAG_BYTES).await;
}

/// Fills an 8 MB quota until the NOSPACE alarm goes off, then a defrag run with its own
/// compaction and `min_defrag_bytes` must defragment every member, disarm, and writes succeed.
async fn nospace_alarm_cured(version: EtcdVersion, min_defrag_bytes: i64) {
    let options = ClusterOptions { quota_backend_bytes: Some(8_000_000), ..ClusterOptions::default() };
    let Some(cluster) = cluster(version, options).await else {
        return;
    };
    let mut client = cluster.client(None).await.unwrap();
    let value = vec![b'x'; 256 * 1024];
    let mut writes = 0;
    loop {
        match client.put(format!("fill/{}", writes % 4), value.clone(), None).await {
            Ok(_) => writes += 1,
            Err(err) if err.to_string().contains("database space exceeded") => break,
            Err(err) => panic!("unexpected write error: {err}"),
        }
        assert!(writes < 1000, "the quota was never reached");
    }
    let alarms = client.alarm(AlarmAction::Get, AlarmType::None, None).await.unwrap();
    assert!(alarms.alarms().iter().any(|a| a.alarm() == AlarmType::Nospace));

    let dir = tempfile::tempdir().unwrap();
    let mut args = common::defrag_args(&cluster, &dir.path().join("r"), min_defrag_bytes, 45.0);
    args.compact_retain_revisions = Some(0);
    let result = run_defrag(&args.options().unwrap(), &mut |_| {}).await;
    assert_eq!(result.outcome, Outcome::Succeeded, "{result:?}");
    let report = defrag_report(&result);
    assert!(report.members.iter().all(|m| m.defragmented), "{report:?}");
    assert!(!report.alarms_disarmed.is_empty());
    let alarms = client.alarm(AlarmAction::Get, AlarmType::None, None).await.unwrap();
    assert!(alarms.alarms().is_empty(), "{} alarm(s) left", alarms.alarms().len());
    client.put("fill/after", "writable again", None).await.expect("writes are accepted again");
}

async fn no_move_leader_defragments_the_leader_last_in_place(version: EtcdVersion) {
    let Some(cluster) = fragmented(version, ClusterOptions::default()).await else {
        return;
    };
    let leader = cluster.leader().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut args = defrag_args(&cluster, &dir.path().join("r"));
    args.no_move_leader = true;
    let result = run_defrag(&args.options().unwrap(), &mut |_| {}).await;
    assert_eq!(result.outcome, Outcome::Succeeded, "{result:?}");
    let report = defrag_report(&result);
    assert_eq!(report.leader_moved_to, None);
    assert!(report.members.iter().all(|m| m.defragmented));
    let last = report.members.last().unwrap();
    assert_eq!((last.name.as_str(), last.was_leader), (leader.name.as_str(), true));
}

/// With the window's end given, a member whose expected defrag (its size at its expected rate)
/// would end after it is left untouched for the next window; the others are defragmented. A
/// window already over defragments nothing.
async fn members_that_would_overrun_the_window_are_left_for_the_next(version: EtcdVersion) {
    let Some(cluster) = fragmented(version, ClusterOptions::default()).await else {
        return;
    };
    let states = cluster.states().await.unwrap();
    let slow = states.iter().find(|s| !s.is_leader()).unwrap().name.clone();
    let dir = tempfile::tempdir().unwrap();
    let mut args = defrag_args(&cluster, &dir.path().join("r"));
    let in_an_hour = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(1);
    args.not_after = Some(in_an_hour.to_string());
    // One byte per second: this member's ~6 MB would take months.
    args.expected_rates = vec![format!("{slow}=1")];
    let result = run_defrag(&args.options().unwrap(), &mut |_| {}).await;
    assert_eq!(result.outcome, Outcome::Succeeded, "{result:?}");
    assert!(
        result
            .message
            .as_deref()
            .unwrap()
            .ends_with("defragmented 2 member(s); 1 left for the next maintenance window"),
        "{result:?}"
    );
    let report = defrag_report(&result);
    let deferred = report.members.iter().find(|m| m.name == slow).unwrap();
    assert_eq!(deferred.state(), MemberDefragState::Deferred);
    assert!(!deferred.defragmented);
    assert!(
        deferred.reason.starts_with("left for the next maintenance window: expected "),
        "{}",
        deferred.reason
    );
    assert_eq!(report.members.iter().filter(|m| m.defragmented).count(), 2, "{report:?}");
    let after = cluster.state(states.iter().position(|s| s.name == slow).unwrap()).await.unwrap();
    let before = states.iter().find(|s| s.name == slow).unwrap();
    assert!(after.db_size >= before.db_size / 2, "the deferred member was not touched");

    // The window is over: nothing is started.
    let mut args = defrag_args(&cluster, &dir.path().join("r"));
    args.min_defrag_bytes = 0;
    args.max_fragmented_percent = 0.0;
    args.not_after = Some((jiff::Timestamp::now() - jiff::SignedDuration::from_secs(1)).to_string());
    let result = run_defrag(&args.options().unwrap(), &mut |_| {}).await;
    assert_eq!(result.outcome, Outcome::Succeeded, "{result:?}");
    let report = defrag_report(&result);
    assert!(report.members.iter().all(|m| m.state() == MemberDefragState::Deferred), "{report:?}");
}

/// Runs `test` on etcd 3.5 alone, one cluster at a time as the others.
async fn on_3_5<F: std::future::Future<Output = ()>>(test: impl FnOnce(EtcdVersion) -> F) {
    let _one = groundskeeper_e2e::etcd_cluster::CLUSTER_TURNS.lock().await;
    test(EtcdVersion::V3_5).await
}

/// A window that has closed starts nothing, not even a first member the whole window was too
/// short for; contradictory window flags are bad input naming both; an `--expected-rate` for a
/// member the cluster does not have (or spelled in another case) is said in the result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_starts_after_the_window_and_unused_rates_are_said() {
    on_3_5(|version| async move {
        let Some(cluster) = fragmented(version, ClusterOptions::default()).await else { return };
        let dir = tempfile::tempdir().unwrap();
        let now = jiff::Timestamp::now();
        let mut args = defrag_args(&cluster, &dir.path().join("r"));
        args.not_after = Some((now - jiff::SignedDuration::from_secs(30)).to_string());
        args.window_opened = Some((now - jiff::SignedDuration::from_secs(90)).to_string());
        let first = cluster.name(0).to_owned();
        // One byte per second: longer than the whole window, and the member is first in line.
        args.expected_rates = (0..3).map(|i| format!("{}=1", cluster.name(i))).collect();
        args.expected_rates.push(format!("{}=1000", first.to_uppercase()));
        args.expected_rates.push("gone-member=1000".into());
        let result = run_defrag(&args.options().unwrap(), &mut |_| {}).await;
        assert_eq!(result.outcome, Outcome::Succeeded, "{result:?}");
        let report = defrag_report(&result);
        assert!(report.members.iter().all(|m| !m.defragmented), "{report:?}");
        assert!(report.members.iter().all(|m| m.state() == MemberDefragState::Deferred), "{report:?}");
        let message = result.message.as_deref().unwrap();
        assert!(message.contains("\"gone-member\", which is not a member"), "{message}");
        assert!(message.contains(&format!("case-sensitive: {first}?")), "{message}");
        assert_eq!(report.warnings.len(), 2, "{report:?}");

        let endpoints = cluster.endpoints_flag();
        let (code, result) = run_binary(
            &cluster,
            &[
                "defrag",
                "--endpoints",
                &endpoints,
                "--not-after",
                "2026-11-25T05:00:00Z",
                "--window-opened",
                "2026-11-25T06:00:00Z",
            ],
        );
        assert_eq!(code, exit::BAD_INPUT, "{result:?}");
        let message = result.message.unwrap();
        assert!(message.contains("--window-opened") && message.contains("--not-after"), "{message}");
    })
    .await
}

/// A NOSPACE alarm the freed space cannot cure (the quota is below the db even after the
/// defrag) stays raised, and the result says so, naming the member, its size and the quota.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nospace_alarm_left_raised_is_in_the_result() {
    on_3_5(|version| async move {
        let Some(cluster) = fragmented(version, ClusterOptions::default()).await else { return };
        let mut client = cluster.client(None).await.unwrap();
        let member = cluster.states().await.unwrap()[0].id;
        let mut options = etcd_client::AlarmOptions::new();
        options.with_member(member);
        client.alarm(AlarmAction::Activate, AlarmType::Nospace, Some(options)).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut args = defrag_args(&cluster, &dir.path().join("r"));
        args.quota_backend_bytes = Some(1000);
        let result = run_defrag(&args.options().unwrap(), &mut |_| {}).await;
        assert_eq!(result.outcome, Outcome::Succeeded, "{result:?}");
        let report = defrag_report(&result);
        assert!(report.members.iter().all(|m| m.defragmented), "{report:?}");
        assert!(report.alarms_disarmed.is_empty(), "{report:?}");
        assert_eq!(report.alarms_left.len(), 1, "{report:?}");
        assert_eq!(report.alarms_left[0].member, format!("{member:x}"));
        assert!(report.alarms_left[0].reason.contains("not under the quota of"), "{report:?}");
        let message = result.message.as_deref().unwrap();
        assert!(
            message.contains(&format!("the NOSPACE alarm of member {member:x} is still raised")),
            "{message}"
        );
        let alarms = client.alarm(AlarmAction::Get, AlarmType::None, None).await.unwrap();
        assert_eq!(alarms.alarms().len(), 1, "the alarm is left as it was");
    })
    .await
}

/// When the alarms cannot be listed after every member was defragmented (the cluster went away
/// right after the last one), the run still reports the work it did, with a warning; it is no
/// failure that a retry would repeat.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alarms_that_cannot_be_listed_do_not_hide_the_work_done() {
    on_3_5(|version| async move {
        let Some(mut cluster) = fragmented(version, ClusterOptions::default()).await else { return };
        let dir = tempfile::tempdir().unwrap();
        let options = defrag_args(&cluster, &dir.path().join("r")).options().unwrap();
        let mut planned = 0;
        let mut done = 0;
        let result = {
            let cluster = &mut cluster;
            run_defrag(&options, &mut |progress| match progress {
                Progress::Planned(plan) => planned = plan.members.iter().filter(|m| m.will_defrag()).count(),
                Progress::MemberDone(_) => {
                    done += 1;
                    if done == planned {
                        (0..3).for_each(|i| cluster.kill(i));
                    }
                }
                _ => {}
            })
            .await
        };
        assert_eq!(done, 3, "every member was defragmented before the cluster went away");
        assert_eq!(result.outcome, Outcome::Succeeded, "{result:?}");
        assert_eq!(exit_code(&result), exit::SUCCESS);
        let report = defrag_report(&result);
        assert_eq!(report.members.iter().filter(|m| m.defragmented).count(), 3, "{report:?}");
        assert!(report.warnings.iter().any(|w| w.contains("NOSPACE alarms were not checked")), "{report:?}");
        assert!(result.message.as_deref().unwrap().contains("defragmented 3 member(s)"), "{result:?}");
    })
    .await
}
