//! The EtcdCluster controller's decision, table-tested: thresholds, disabled, unhealthy members,
//! too few members, Jobs running / succeeded / failed, spec changes, periodic and revision
//! compaction, Job names, and the Job's arguments against the runner's own parser.

#![allow(clippy::type_complexity)] // tables of cases

use groundskeeper_controller::api::etcd_cluster::{
    CompactionMode, EtcdClientTls, EtcdClusterSpec, EtcdClusterStatus, EtcdCompactionPolicy, RevisionSample,
};
use groundskeeper_controller::conditions::ConditionStatus;
use groundskeeper_controller::execution::{Attempts, Finished, JobState};
use groundskeeper_controller::triggers::etcd::decide::{
    DEGRADED, DISABLED, Decision, Input, MaintenanceJobView, Observed, PROGRESSING, check_due, decide,
    job_name,
};
use groundskeeper_controller::triggers::etcd::observe::ObservedMember;
use groundskeeper_controller::triggers::etcd::policy::Policy;
use groundskeeper_job::cli::{Cli, Command};
use groundskeeper_job::etcd::plan::{MemberObservation, MemberStatus};
use groundskeeper_protocol::result::{CompactReport, DefragReport, ErrorKind, MemberDefrag, ResultError};
use groundskeeper_protocol::{JobResult, Outcome, Report};
use jiff::{SignedDuration, Timestamp};

const MB: i64 = 1_000_000;

fn now() -> Timestamp {
    "2026-03-01T12:00:00Z".parse().unwrap()
}

fn spec() -> EtcdClusterSpec {
    serde_json::from_value(serde_json::json!({
        "endpoints": ["http://etcd-0:2379", "http://etcd-1:2379", "http://etcd-2:2379"]
    }))
    .unwrap()
}

/// A healthy voting member led by member 1.
fn member(id: u64, size: i64, in_use: i64) -> ObservedMember {
    ObservedMember {
        endpoint: format!("http://etcd-{}:2379", id - 1),
        member: MemberObservation {
            id,
            name: format!("etcd-{}", id - 1),
            is_learner: false,
            status: Ok(MemberStatus {
                db_size: size,
                db_size_in_use: in_use,
                leader: 1,
                raft_term: 4,
                raft_index: 500,
                raft_applied_index: 500,
                errors: vec![],
            }),
        },
        revision: Some(10_000),
    }
}

/// Three healthy members, small and barely fragmented.
fn tidy_trio() -> Vec<ObservedMember> {
    vec![
        member(1, 20 * MB, 19 * MB),
        member(2, 20 * MB, 19 * MB),
        member(3, 20 * MB, 19 * MB),
    ]
}

/// Three healthy members, etcd-1 at 200 MB of which 150 MB free.
fn fragmented_trio() -> Vec<ObservedMember> {
    let mut members = tidy_trio();
    members[1] = member(2, 200 * MB, 50 * MB);
    members
}

fn running(name: &str, attempt: u64) -> MaintenanceJobView {
    MaintenanceJobView {
        name: name.into(),
        attempt,
        deleting: false,
        state: JobState::Running(Attempts { active: 1, failed: 0 }),
    }
}

fn defrag_result(outcome: Outcome) -> JobResult {
    let report = DefragReport {
        members: vec![MemberDefrag {
            name: "etcd-1".into(),
            id: "2".into(),
            db_size_before: 200 * MB,
            db_size_after: 50 * MB,
            defragmented: true,
            duration_ms: 2500,
            was_leader: false,
            reason: "fragmented".into(),
            state: None,
        }],
        ..Default::default()
    };
    JobResult::new(
        Report::Defrag(report),
        outcome,
        "2026-03-01T11:50:00Z".into(),
        60_000,
    )
}

fn succeeded(name: &str, attempt: u64, result: JobResult) -> MaintenanceJobView {
    MaintenanceJobView {
        name: name.into(),
        attempt,
        deleting: false,
        state: JobState::Succeeded(Finished {
            reason: "CompletionsReached".into(),
            message: String::new(),
            result: Ok(result),
        }),
    }
}

fn failed(name: &str, attempt: u64) -> MaintenanceJobView {
    let mut result = defrag_result(Outcome::Failed);
    result.error = Some(ResultError {
        kind: ErrorKind::Retryable,
        message: "member etcd-2 stopped answering".into(),
    });
    MaintenanceJobView {
        name: name.into(),
        attempt,
        deleting: false,
        state: JobState::Failed(Finished {
            reason: "BackoffLimitExceeded".into(),
            message: "Job has reached the specified backoff limit".into(),
            result: Ok(result),
        }),
    }
}

struct Case {
    spec: EtcdClusterSpec,
    members: Observed,
    jobs: Vec<MaintenanceJobView>,
    previous: EtcdClusterStatus,
    now: Timestamp,
}

fn case(members: Vec<ObservedMember>) -> Case {
    Case {
        spec: spec(),
        members: Observed::Members(members),
        jobs: vec![],
        previous: EtcdClusterStatus::default(),
        now: now(),
    }
}

fn run(case: &Case) -> Decision {
    let policy = Policy::from_spec(&case.spec);
    decide(&Input {
        cluster: "main",
        generation: Some(1),
        policy: policy.as_ref(),
        enabled: case.spec.policy.enabled,
        observed: &case.members,
        jobs: &case.jobs,
        previous: &case.previous,
        now: case.now,
    })
}

fn condition(decision: &Decision, type_: &str) -> (ConditionStatus, String, String) {
    let c = decision.conditions.iter().find(|c| c.type_ == type_).unwrap();
    (c.status, c.reason.clone(), c.message.clone())
}

fn args(decision: &Decision) -> String {
    decision
        .create
        .as_ref()
        .map(|j| j.operation.to_args().join(" "))
        .unwrap_or_default()
}

#[test]
fn thresholds_decide_whether_a_defrag_job_is_created() {
    let cases: &[(&str, Vec<ObservedMember>, Option<&str>)] = &[
        ("nothing fragmented", tidy_trio(), None),
        (
            "one member over both thresholds",
            fragmented_trio(),
            Some("defrag"),
        ),
        (
            "large but only 40% free",
            {
                let mut m = tidy_trio();
                m[0] = member(1, 200 * MB, 120 * MB);
                m
            },
            None,
        ),
        (
            "90% free but under 100 MB",
            {
                let mut m = tidy_trio();
                m[0] = member(1, 99 * MB, 9 * MB);
                m
            },
            None,
        ),
        (
            "exactly 100 MB and exactly 45%",
            {
                let mut m = tidy_trio();
                m[2] = member(3, 100 * MB, 55 * MB);
                m
            },
            Some("defrag"),
        ),
        (
            "a fragmented learner is never defragmented",
            {
                let mut m = tidy_trio();
                m.push(member(4, 300 * MB, 10 * MB));
                m[3].member.is_learner = true;
                m
            },
            None,
        ),
    ];
    for (name, members, wanted) in cases {
        let decision = run(&case(members.clone()));
        assert_eq!(
            decision.create.as_ref().map(|j| j.operation.kind().as_str()),
            *wanted,
            "{name}"
        );
        let progressing = condition(&decision, PROGRESSING).0;
        assert_eq!(progressing == ConditionStatus::True, wanted.is_some(), "{name}");
        assert_eq!(condition(&decision, DEGRADED).0, ConditionStatus::False, "{name}");
    }
}

#[test]
fn a_defrag_job_carries_the_policy_as_flags() {
    let mut c = case(fragmented_trio());
    let decision = run(&c);
    let job = decision.create.as_ref().unwrap();
    assert_eq!(job.name, "main-maint-1");
    assert_eq!(job.attempt, 1);
    assert_eq!(
        args(&decision),
        "defrag --endpoints http://etcd-0:2379,http://etcd-1:2379,http://etcd-2:2379 \
         --min-defrag-bytes 100000000 --max-fragmented-percent 45"
    );
    assert!(job.reason.contains("etcd-1"), "{}", job.reason);
    assert_eq!(decision.status.last_attempt, 1);
    assert_eq!(decision.status.active_job.as_deref(), Some("main-maint-1"));
    assert_eq!(decision.events[0].reason, "MaintenanceJobCreated");

    c.spec.endpoints = c
        .spec
        .endpoints
        .iter()
        .map(|e| e.replace("http:", "https:"))
        .collect();
    c.spec.tls = Some(EtcdClientTls {
        secret_name: "etcd-client".into(),
    });
    c.spec.policy.move_leader = false;
    c.spec.policy.min_defrag_bytes = 50 * MB;
    c.spec.policy.max_fragmented_percent = 30.5;
    let decision = run(&c);
    let job = decision.create.as_ref().unwrap();
    assert_eq!(job.tls_secret.as_deref(), Some("etcd-client"));
    assert_eq!(
        args(&decision),
        "defrag --endpoints https://etcd-0:2379,https://etcd-1:2379,https://etcd-2:2379 \
         --cacert /etc/groundskeeper/etcd-tls/ca.crt --cert /etc/groundskeeper/etcd-tls/tls.crt \
         --key /etc/groundskeeper/etcd-tls/tls.key --min-defrag-bytes 50000000 \
         --max-fragmented-percent 30.5 --no-move-leader"
    );
}

#[test]
fn job_arguments_parse_with_the_runners_own_flags() {
    let mut defrag = case(fragmented_trio());
    defrag.spec.policy.compaction = Some(EtcdCompactionPolicy {
        mode: CompactionMode::Revision,
        retention: "5000".into(),
    });
    defrag.spec.policy.allow_single_member = true;
    defrag.spec.policy.move_leader = false;
    let mut periodic = case(tidy_trio());
    periodic.spec.policy.compaction = Some(EtcdCompactionPolicy {
        mode: CompactionMode::Periodic,
        retention: "1h".into(),
    });
    periodic.previous.revision_samples = vec![RevisionSample {
        time: (now() - SignedDuration::from_hours(1)).into(),
        revision: 7000,
    }];
    for c in [defrag, periodic] {
        let decision = run(&c);
        let job = decision.create.expect("a Job");
        let parsed = Cli::try_parse_args(job.operation.to_args())
            .unwrap_or_else(|err| panic!("{:?}: {err}", job.operation));
        match parsed.command {
            Command::Defrag(a) => {
                assert_eq!(job.operation.kind().as_str(), "defrag");
                assert_eq!(a.connection.endpoints.len(), 3);
                assert_eq!(a.compact_retain_revisions, Some(5000));
                assert!(a.no_move_leader && a.allow_single_member);
                assert_eq!(a.min_defrag_bytes, 100 * MB);
            }
            Command::Compact(a) => {
                assert_eq!(job.operation.kind().as_str(), "compact");
                assert_eq!(a.revision, Some(7000));
                assert!(a.physical);
            }
            Command::Cleanup(_) | Command::RingHash => {
                panic!("{:?} is not an etcd subcommand", job.operation)
            }
        }
    }
}

#[test]
fn preconditions_keep_jobs_away_and_say_why() {
    let unreachable = {
        let mut m = fragmented_trio();
        m[2].member.status = Err("http://etcd-2:2379: cannot connect: connection refused".into());
        m
    };
    let alarmed_corrupt = {
        let mut m = fragmented_trio();
        m[0].member.status.as_mut().unwrap().errors = vec!["memberID:1 alarm:CORRUPT".into()];
        m
    };
    let single = vec![member(1, 200 * MB, 10 * MB)];
    let split_brain = {
        let mut m = fragmented_trio();
        m[2].member.status.as_mut().unwrap().leader = 3;
        m
    };
    let cases: &[(&str, Observed, &str, &str)] = &[
        (
            "unreachable member",
            Observed::Members(unreachable),
            "MembersUnhealthy",
            "member etcd-2 (http://etcd-2:2379): unreachable",
        ),
        (
            "corrupt alarm",
            Observed::Members(alarmed_corrupt),
            "MembersUnhealthy",
            "CORRUPT",
        ),
        (
            "no TLS Secret",
            Observed::Failed("client TLS Secret ns/x (spec.tls.secretName): NotFound".into()),
            "MembersUnhealthy",
            "client TLS Secret ns/x",
        ),
        (
            "nobody answered",
            Observed::Members(vec![]),
            "MembersUnhealthy",
            "no member answered",
        ),
        (
            "one member",
            Observed::Members(single),
            "TooFewMembers",
            "1 voting member",
        ),
        (
            "two leaders",
            Observed::Members(split_brain),
            "NoStableLeader",
            "disagree on the leader",
        ),
    ];
    for (name, observed, reason, message) in cases {
        let mut c = case(vec![]);
        c.members = observed.clone();
        let decision = run(&c);
        assert_eq!(decision.create, None, "{name}");
        let (status, got_reason, got_message) = condition(&decision, DEGRADED);
        assert_eq!(status, ConditionStatus::True, "{name}");
        assert_eq!(got_reason, *reason, "{name}");
        assert!(got_message.contains(message), "{name}: {got_message}");
    }
}

#[test]
fn unhealthy_members_show_in_the_status() {
    let mut members = tidy_trio();
    members[1].member.status = Err("connection refused".into());
    let decision = run(&case(members));
    let status = &decision.status;
    assert_eq!(status.member_count, Some(3));
    assert_eq!(status.healthy_members, Some(2));
    let sick = &status.members[1];
    assert!(!sick.healthy);
    assert_eq!(sick.endpoint, "http://etcd-1:2379");
    assert!(sick.message.as_deref().unwrap().contains("connection refused"));
    assert_eq!(sick.db_size, None);
    assert!(status.members[0].leader && !status.members[2].leader);
    assert_eq!(status.members[0].id, "1");
}

#[test]
fn a_single_member_cluster_is_defragmented_only_when_allowed() {
    let mut c = case(vec![member(1, 200 * MB, 10 * MB)]);
    c.spec.policy.allow_single_member = true;
    let decision = run(&c);
    assert!(
        args(&decision).ends_with("--allow-single-member"),
        "{}",
        args(&decision)
    );
}

#[test]
fn disabled_observes_but_creates_nothing() {
    let mut c = case(fragmented_trio());
    c.spec.policy.enabled = false;
    let decision = run(&c);
    assert_eq!(decision.create, None);
    assert_eq!(condition(&decision, DISABLED).0, ConditionStatus::True);
    assert_eq!(decision.status.members.len(), 3);
    assert_eq!(decision.status.max_fragmentation.as_deref(), Some("75.0%"));
}

#[test]
fn a_job_in_flight_blocks_another_even_while_being_deleted() {
    for deleting in [false, true] {
        let mut c = case(fragmented_trio());
        c.jobs = vec![MaintenanceJobView {
            deleting,
            ..running("main-maint-4", 4)
        }];
        c.previous.last_attempt = 4;
        let decision = run(&c);
        assert_eq!(decision.create, None, "deleting: {deleting}");
        assert_eq!(decision.status.active_job.as_deref(), Some("main-maint-4"));
        let (status, reason, _) = condition(&decision, PROGRESSING);
        assert_eq!((status, reason.as_str()), (ConditionStatus::True, "JobRunning"));
    }
}

#[test]
fn attempts_continue_past_the_highest_seen_anywhere() {
    // The status lost track (restored from a backup), the Jobs did not.
    let mut c = case(fragmented_trio());
    c.previous.last_attempt = 3;
    c.previous.last_recorded_attempt = 7;
    c.jobs = vec![succeeded("main-maint-7", 7, defrag_result(Outcome::Succeeded))];
    assert_eq!(run(&c).create.unwrap().name, "main-maint-8");
}

#[test]
fn a_succeeded_job_is_recorded_once() {
    let mut c = case(tidy_trio());
    c.previous.last_attempt = 1;
    c.previous.active_job = Some("main-maint-1".into());
    c.jobs = vec![succeeded("main-maint-1", 1, defrag_result(Outcome::Succeeded))];
    let decision = run(&c);
    assert_eq!(decision.create, None);
    assert_eq!(decision.recorded.len(), 1);
    let status = &decision.status;
    assert_eq!(status.active_job, None);
    assert_eq!(status.last_recorded_attempt, 1);
    assert_eq!(status.last_maintenance_outcome.as_deref(), Some("Succeeded"));
    let etcd1 = &status.members[1];
    assert_eq!(etcd1.last_bytes_reclaimed, Some(150 * MB));
    // Finished = started + duration, not the time the controller noticed.
    assert_eq!(
        etcd1.last_defrag_time.as_ref().unwrap().0,
        "2026-03-01T11:51:00Z".parse::<Timestamp>().unwrap()
    );
    assert_eq!(decision.events[0].reason, "MaintenanceSucceeded");
    assert!(
        decision.events[0].note.contains("150000000 bytes reclaimed"),
        "{}",
        decision.events[0].note
    );
    assert_eq!(condition(&decision, PROGRESSING).0, ConditionStatus::False);

    // The next reconciliation sees the same Job and the recorded status: nothing twice.
    c.previous = decision.status.clone();
    let again = run(&c);
    assert!(again.recorded.is_empty() && again.events.is_empty());
    assert_eq!(again.status.members[1].last_bytes_reclaimed, Some(150 * MB));
}

#[test]
fn a_failed_job_degrades_and_backs_off_for_a_check_interval() {
    let mut c = case(fragmented_trio());
    c.previous.last_attempt = 1;
    c.jobs = vec![failed("main-maint-1", 1)];
    let decision = run(&c);
    assert_eq!(decision.create, None, "no retry at once");
    assert!(decision.events[0].warning);
    assert_eq!(decision.events[0].reason, "MaintenanceFailed");
    let (status, reason, message) = condition(&decision, DEGRADED);
    assert_eq!(
        (status, reason.as_str()),
        (ConditionStatus::True, "MaintenanceFailed")
    );
    assert!(message.contains("member etcd-2 stopped answering"), "{message}");
    // Partial progress is kept: etcd-1 was defragmented before the failure.
    assert_eq!(decision.status.members[1].last_bytes_reclaimed, Some(150 * MB));
    assert_eq!(decision.requeue_after, SignedDuration::from_mins(10));

    c.previous = decision.status.clone();
    c.now = now() + SignedDuration::from_mins(10) - SignedDuration::from_secs(1);
    assert_eq!(run(&c).create, None, "still backing off");
    c.now = now() + SignedDuration::from_mins(10);
    assert_eq!(run(&c).create.unwrap().name, "main-maint-2");
}

#[test]
fn a_failed_job_without_a_readable_result_still_counts() {
    let mut c = case(tidy_trio());
    c.jobs = vec![MaintenanceJobView {
        state: JobState::Failed(Finished {
            reason: "DeadlineExceeded".into(),
            message: "Job was active longer than specified deadline".into(),
            result: Err(groundskeeper_controller::execution::ResultError::NoPod {
                job: "ns/main-maint-1".into(),
            }),
        }),
        ..running("main-maint-1", 1)
    }];
    let decision = run(&c);
    assert_eq!(
        decision.status.last_maintenance_outcome.as_deref(),
        Some("Failed")
    );
    assert!(decision.events[0].note.contains("DeadlineExceeded"));
}

#[test]
fn an_invalid_spec_degrades_with_the_field_and_creates_nothing() {
    let mut c = case(fragmented_trio());
    c.spec.policy.check_interval = "10x".into();
    c.members = Observed::NotAttempted;
    let decision = run(&c);
    assert_eq!(decision.create, None);
    let (status, reason, message) = condition(&decision, DEGRADED);
    assert_eq!((status, reason.as_str()), (ConditionStatus::True, "InvalidSpec"));
    assert!(
        message.contains(r#"spec.policy.checkInterval: "10x" is not a duration"#),
        "{message}"
    );
}

#[test]
fn observation_is_due_on_the_interval_on_spec_change_and_on_job_events() {
    let next = now() + SignedDuration::from_mins(5);
    let previous = EtcdClusterStatus {
        observed_generation: Some(1),
        next_check_time: Some(next.into()),
        active_job: Some("main-maint-2".into()),
        last_recorded_attempt: 1,
        last_attempt: 2,
        ..Default::default()
    };
    let same_job = vec![running("main-maint-2", 2)];
    let cases: &[(&str, Option<i64>, Vec<MaintenanceJobView>, Timestamp, bool)] = &[
        (
            "nothing changed, before the interval",
            Some(1),
            same_job.clone(),
            now(),
            false,
        ),
        ("the interval is over", Some(1), same_job.clone(), next, true),
        ("spec changed", Some(2), same_job.clone(), now(), true),
        (
            "the Job finished",
            Some(1),
            vec![succeeded("main-maint-2", 2, defrag_result(Outcome::Succeeded))],
            now(),
            true,
        ),
        ("the Job was deleted", Some(1), vec![], now(), true),
        (
            "an old finished Job is still around",
            Some(1),
            vec![
                succeeded("main-maint-1", 1, defrag_result(Outcome::Succeeded)),
                running("main-maint-2", 2),
            ],
            now(),
            false,
        ),
    ];
    for (name, generation, jobs, at, due) in cases {
        let result = check_due(&previous, *generation, jobs, *at);
        assert_eq!(result.is_ok(), *due, "{name}: {result:?}");
    }
    assert_eq!(
        check_due(&previous, Some(1), &same_job, now()),
        Err(SignedDuration::from_mins(5))
    );
    assert!(
        check_due(&EtcdClusterStatus::default(), Some(1), &[], now()).is_ok(),
        "never observed"
    );
}

#[test]
fn a_spec_change_takes_effect_at_once() {
    // Under the default 45% threshold nothing is due; lowered to 20%, etcd-0 is.
    let mut members = tidy_trio();
    members[0] = member(1, 200 * MB, 140 * MB);
    let mut c = case(members);
    c.previous.observed_generation = Some(1);
    assert_eq!(run(&c).create, None);
    c.spec.policy.max_fragmented_percent = 20.0;
    let decision = run(&c);
    assert_eq!(decision.create.unwrap().operation.kind().as_str(), "defrag");
}

fn periodic(retention: &str) -> Case {
    let mut c = case(tidy_trio());
    c.spec.policy.compaction = Some(EtcdCompactionPolicy {
        mode: CompactionMode::Periodic,
        retention: retention.into(),
    });
    c
}

#[test]
fn periodic_compaction_samples_and_compacts_to_the_revision_of_retention_ago() {
    // First sight: one sample, nothing to compact, back when the next sample is due (6 min).
    let c = periodic("1h");
    let decision = run(&c);
    assert_eq!(decision.create, None);
    assert_eq!(
        decision.status.revision_samples,
        vec![RevisionSample {
            time: now().into(),
            revision: 10_000
        }]
    );
    assert_eq!(decision.requeue_after, SignedDuration::from_mins(6));

    // 59 minutes of samples: still nothing an hour old.
    let mut c = periodic("1h");
    c.previous.revision_samples = (0..10)
        .map(|i| RevisionSample {
            time: (now() - SignedDuration::from_mins(59) + SignedDuration::from_mins(6 * i)).into(),
            revision: 5000 + i,
        })
        .collect();
    assert_eq!(run(&c).create, None);

    // One more minute and the first sample is exactly an hour old.
    c.now = now() + SignedDuration::from_mins(1);
    let decision = run(&c);
    let job = decision.create.as_ref().expect("compaction due");
    assert_eq!(job.operation.kind().as_str(), "compact");
    assert!(
        args(&decision).ends_with("--physical --revision 5000"),
        "{}",
        args(&decision)
    );

    // Compacted to 5000 half an hour ago: not again before the hour is over.
    c.previous.last_compacted_revision = Some(5000);
    c.previous.last_compaction_time = Some((c.now - SignedDuration::from_mins(30)).into());
    assert_eq!(run(&c).create, None);
}

#[test]
fn periodic_compaction_comes_before_a_due_defrag() {
    let mut c = periodic("1h");
    c.members = Observed::Members(fragmented_trio());
    c.previous.revision_samples = vec![RevisionSample {
        time: (now() - SignedDuration::from_hours(2)).into(),
        revision: 4000,
    }];
    let decision = run(&c);
    assert_eq!(decision.create.unwrap().operation.kind().as_str(), "compact");
    // Once compacted, the defrag follows.
    c.previous.last_compacted_revision = Some(4000);
    c.previous.last_compaction_time = Some(now().into());
    assert_eq!(run(&c).create.unwrap().operation.kind().as_str(), "defrag");
}

#[test]
fn revision_compaction_keeps_the_last_n_revisions() {
    let revision = |keep: &str, last: Option<i64>, minutes_ago: Option<i64>, members: Vec<ObservedMember>| {
        let mut c = case(members);
        c.spec.policy.compaction = Some(EtcdCompactionPolicy {
            mode: CompactionMode::Revision,
            retention: keep.into(),
        });
        c.previous.last_compacted_revision = last;
        c.previous.last_compaction_time = minutes_ago.map(|m| (now() - SignedDuration::from_mins(m)).into());
        args(&run(&c))
    };
    // Revision 10000 observed.
    let cases: &[(&str, &str, Option<i64>, Option<i64>, Vec<ObservedMember>, &str)] = &[
        ("never compacted", "1000", None, None, tidy_trio(), "compact"),
        ("history shorter than kept", "20000", None, None, tidy_trio(), ""),
        (
            "compacted to the target already",
            "1000",
            Some(9000),
            Some(60),
            tidy_trio(),
            "",
        ),
        (
            "target moved, compacted an interval ago",
            "1000",
            Some(8000),
            Some(10),
            tidy_trio(),
            "compact",
        ),
        (
            "target moved, compacted recently",
            "1000",
            Some(8000),
            Some(9),
            tidy_trio(),
            "",
        ),
        (
            "a due defrag compacts first itself",
            "1000",
            None,
            None,
            fragmented_trio(),
            "defrag",
        ),
    ];
    for (name, keep, last, ago, members, wanted) in cases {
        let got = revision(keep, *last, *ago, members.clone());
        assert!(got.starts_with(wanted), "{name}: {got}");
        match *wanted {
            "compact" => assert!(
                got.ends_with(&format!("--retain-revisions {keep}")),
                "{name}: {got}"
            ),
            "defrag" => assert!(
                got.ends_with(&format!("--compact-retain-revisions {keep}")),
                "{name}: {got}"
            ),
            _ => assert!(got.is_empty(), "{name}: {got}"),
        }
    }
}

#[test]
fn switching_away_from_periodic_drops_the_samples() {
    let mut c = case(tidy_trio());
    c.previous.revision_samples = vec![RevisionSample {
        time: now().into(),
        revision: 1,
    }];
    assert!(run(&c).status.revision_samples.is_empty());
}

#[test]
fn compaction_results_move_the_compacted_revision_forward_only() {
    let mut c = case(tidy_trio());
    c.previous.last_compacted_revision = Some(9000);
    let report = CompactReport {
        current_revision: 10_000,
        compacted_revision: 8000,
        physical: true,
        already_compacted: true,
    };
    let result = JobResult::new(
        Report::Compact(report),
        Outcome::Succeeded,
        "2026-03-01T11:59:00Z".into(),
        5,
    );
    c.jobs = vec![succeeded("main-maint-1", 1, result)];
    let decision = run(&c);
    assert_eq!(decision.status.last_compacted_revision, Some(9000));
    assert!(decision.events[0].note.contains("was compacted already"));
}

#[test]
fn job_names_are_deterministic_and_valid() {
    assert_eq!(job_name("main", 12), "main-maint-12");
    let long = "a".repeat(70);
    let name = job_name(&long, 3);
    assert!(name.len() <= 63, "{name}");
    assert!(name.ends_with("-maint-3"));
    assert_eq!(name, job_name(&long, 3));
    let other = format!("{}b", "a".repeat(69));
    assert_ne!(
        job_name(&other, 3),
        name,
        "long names sharing a prefix do not collide"
    );
}
