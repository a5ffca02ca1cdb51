//! The EtcdCluster controller's decision, table-tested: thresholds, disabled, unhealthy members,
//! too few members, maintenance tasks queued / running / ended (automatic or by hand), the
//! backoff after a failed or skipped one, spec changes, periodic and revision compaction, task
//! names, and what the submitted task runs: its steps as the task controller renders them,
//! against the runner's own parser.

#![allow(clippy::type_complexity)] // tables of cases

use groundskeeper_api::EtcdCluster;
use groundskeeper_api::etcd_cluster::{
    CompactionMode, EtcdClientTls, EtcdClusterSpec, EtcdClusterStatus, EtcdCompactionPolicy, EtcdPartition,
    RevisionSample, RevisionScheme,
};
use groundskeeper_api::maintenance_task::{TaskState, TaskType};
use groundskeeper_api::validate;
use groundskeeper_controller::conditions::ConditionStatus;
use groundskeeper_controller::etcd::apply::automatic_task;
use groundskeeper_controller::etcd::decide::{
    ClusterTaskView, DEGRADED, DISABLED, Decision, Input, Observed, PARTITION_ID_COLLISION, PROGRESSING,
    VERSION_RISK, check_due, decide, task_name,
};
use groundskeeper_controller::etcd::observe::ObservedMember;
use groundskeeper_controller::etcd::policy::Policy;
use groundskeeper_job::cli::{Cli, Command};
use groundskeeper_protocol::operation::LeaderTurnPolicy;
use groundskeeper_protocol::{Operation, keys};
use groundskeeper_stores::etcd::plan::{MemberObservation, MemberStatus};
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
                version: "3.5.23".into(),
                db_size_quota: 0,
            }),
        },
        revision: Some(10_000),
        peer_urls: vec![format!("http://etcd-{}:2380", id - 1)],
    }
}

/// Three healthy members, small and barely fragmented.
fn tidy_trio() -> Vec<ObservedMember> {
    vec![member(1, 20 * MB, 19 * MB), member(2, 20 * MB, 19 * MB), member(3, 20 * MB, 19 * MB)]
}

/// Three healthy members, etcd-1 at 200 MB of which 150 MB free.
fn fragmented_trio() -> Vec<ObservedMember> {
    let mut members = tidy_trio();
    members[1] = member(2, 200 * MB, 50 * MB);
    members
}

fn task(name: &str, task_type: TaskType, state: TaskState, minutes_ago: i64) -> ClusterTaskView {
    ClusterTaskView {
        name: name.into(),
        task_type,
        state,
        created: now() - SignedDuration::from_mins(minutes_ago),
        waits_for: None,
        backup_policy: false,
    }
}

struct Case {
    spec: EtcdClusterSpec,
    members: Observed,
    tasks: Vec<ClusterTaskView>,
    previous: EtcdClusterStatus,
    /// Other clusters of its fleet claiming its id.
    collisions: Vec<String>,
    suspensions: Vec<groundskeeper_api::maintenance_suspension::Suspension>,
    windows: Option<Result<groundskeeper_api::maintenance_window::Windows, String>>,
    now: Timestamp,
}

fn case(members: Vec<ObservedMember>) -> Case {
    Case {
        spec: spec(),
        members: Observed::Members(members),
        tasks: vec![],
        previous: EtcdClusterStatus::default(),
        collisions: vec![],
        suspensions: vec![],
        windows: None,
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
        tasks: &case.tasks,
        previous: &case.previous,
        collisions: &case.collisions,
        suspensions: &case.suspensions,
        windows: case.windows.as_ref(),
        now: case.now,
    })
}

/// The submitted task as the object the trigger creates, checked as the task controller checks
/// it, and its steps as the task controller renders them into Jobs.
fn submitted_steps(decision: &Decision, spec: &EtcdClusterSpec) -> Vec<Operation> {
    let Some(planned) = &decision.submit else {
        return Vec::new();
    };
    let mut cluster = EtcdCluster::new("main", spec.clone());
    cluster.metadata.namespace = Some("etcd".into());
    cluster.metadata.uid = Some("cluster-uid".into());
    let task = automatic_task(&cluster, planned).expect("a task object");
    let labels = task.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels[keys::ORIGIN_LABEL], keys::ORIGIN_AUTOMATIC);
    let owner = &task.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!((owner.kind.as_str(), owner.uid.as_str()), ("EtcdCluster", "cluster-uid"));
    // A cluster that wants its automatic work reviewed gets tasks that await approval.
    assert_eq!(task.spec.require_approval, spec.policy.require_approval);
    let mut reviewed = cluster.clone();
    reviewed.spec.policy.require_approval = true;
    assert!(automatic_task(&reviewed, planned).unwrap().spec.require_approval);
    let work = validate::validate(&task)
        .unwrap_or_else(|errors| panic!("{planned:?}: {}", validate::describe_errors(&errors)))
        .work;
    let naming = groundskeeper_controller::etcd::task::SnapshotNaming {
        cluster: "main".into(),
        time: Timestamp::UNIX_EPOCH,
    };
    groundskeeper_controller::etcd::task::steps(&work, &Policy::from_spec(spec).unwrap(), &naming, &cluster)
        .expect("steps")
        .into_iter()
        .map(|step| step.operation)
        .collect()
}

/// What the submitted task runs, its steps' runner arguments joined by ` && `.
fn args(decision: &Decision, case: &Case) -> String {
    submitted_steps(decision, &case.spec)
        .iter()
        .map(|op| op.to_args().join(" "))
        .collect::<Vec<_>>()
        .join(" && ")
}

fn submitted_type(decision: &Decision) -> Option<TaskType> {
    decision.submit.as_ref().map(|t| t.task_type.clone())
}

fn condition(decision: &Decision, type_: &str) -> (ConditionStatus, String, String) {
    let c = decision.conditions.iter().find(|c| c.type_ == type_).unwrap();
    (c.status, c.reason.clone(), c.message.clone())
}

#[test]
fn thresholds_decide_whether_a_defrag_task_is_submitted() {
    let cases: &[(&str, Vec<ObservedMember>, Option<&str>)] = &[
        ("nothing fragmented", tidy_trio(), None),
        ("one member over both thresholds", fragmented_trio(), Some("defrag")),
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
        let c = case(members.clone());
        let decision = run(&c);
        let kinds: Vec<&str> =
            submitted_steps(&decision, &c.spec).iter().map(|op| op.kind().as_str()).collect();
        assert_eq!(kinds.first().copied(), *wanted, "{name}");
        assert_eq!(
            submitted_type(&decision),
            wanted.map(|_| TaskType::Defragment),
            "{name}: no compaction policy, so a defrag without compaction"
        );
        let progressing = condition(&decision, PROGRESSING).0;
        assert_eq!(progressing == ConditionStatus::True, wanted.is_some(), "{name}");
        assert_eq!(condition(&decision, DEGRADED).0, ConditionStatus::False, "{name}");
    }
}

#[test]
fn a_defrag_task_carries_the_policy_and_runs_it_as_flags() {
    let mut c = case(fragmented_trio());
    let decision = run(&c);
    let task = decision.submit.as_ref().unwrap();
    assert_eq!(task.name, format!("main-defragment-{}", now().as_second()));
    assert_eq!(task.task_type, TaskType::Defragment);
    let thresholds = task.config.defragment.as_ref().unwrap();
    assert_eq!(thresholds.min_defrag_bytes, 100 * MB);
    assert_eq!(thresholds.max_fragmented_percent, 45.0);
    assert_eq!(
        args(&decision, &c),
        "defrag --endpoints http://etcd-0:2379,http://etcd-1:2379,http://etcd-2:2379 \
         --min-defrag-bytes 100000000 --max-fragmented-percent 45"
    );
    assert!(task.reason.contains("etcd-1"), "{}", task.reason);
    assert_eq!(decision.status.active_task.as_deref(), Some(task.name.as_str()));
    assert_eq!(decision.events[0].reason, "MaintenanceTaskCreated");
    assert!(decision.events[0].note.contains(&task.name));
    let (status, reason, message) = condition(&decision, PROGRESSING);
    assert_eq!((status, reason.as_str()), (ConditionStatus::True, "TaskCreated"));
    assert!(message.contains(&task.name), "{message}");

    c.spec.endpoints = c.spec.endpoints.iter().map(|e| e.replace("http:", "https:")).collect();
    c.spec.tls = Some(EtcdClientTls { secret_name: "etcd-client".into() });
    c.spec.policy.move_leader = false;
    c.spec.policy.min_defrag_bytes = 50 * MB;
    c.spec.policy.max_fragmented_percent = 30.5;
    let decision = run(&c);
    assert!(decision.submit.is_some());
    assert_eq!(
        args(&decision, &c),
        "defrag --endpoints https://etcd-0:2379,https://etcd-1:2379,https://etcd-2:2379 \
         --cacert /etc/groundskeeper/etcd-tls/ca.crt --cert /etc/groundskeeper/etcd-tls/tls.crt \
         --key /etc/groundskeeper/etcd-tls/tls.key --min-defrag-bytes 50000000 \
         --max-fragmented-percent 30.5 --leader-turn never"
    );
}

#[test]
fn the_submitted_tasks_steps_parse_with_the_runners_own_flags() {
    let mut defrag = case(fragmented_trio());
    defrag.spec.policy.compaction =
        Some(EtcdCompactionPolicy { mode: CompactionMode::Revision, retention: "5000".into() });
    defrag.spec.policy.allow_single_member = true;
    defrag.spec.policy.move_leader = false;
    let mut periodic = case(tidy_trio());
    periodic.spec.policy.compaction =
        Some(EtcdCompactionPolicy { mode: CompactionMode::Periodic, retention: "1h".into() });
    periodic.previous.revision_samples =
        vec![RevisionSample { time: (now() - SignedDuration::from_hours(1)).into(), revision: 7000 }];
    for (c, wanted) in [(defrag, TaskType::Maintenance), (periodic, TaskType::Compact)] {
        let decision = run(&c);
        assert_eq!(submitted_type(&decision), Some(wanted));
        let steps = submitted_steps(&decision, &c.spec);
        assert_eq!(steps.len(), 1, "one Job, as the trigger's own Job was: {steps:?}");
        let operation = &steps[0];
        let parsed =
            Cli::try_parse_args(operation.to_args()).unwrap_or_else(|err| panic!("{operation:?}: {err}"));
        match parsed.command {
            Command::Defrag(a) => {
                assert_eq!(operation.kind().as_str(), "defrag");
                assert_eq!(a.connection.endpoints.len(), 3);
                assert_eq!(a.compact_retain_revisions, Some(5000));
                assert_eq!(a.leader_turn_policy(), LeaderTurnPolicy::Never);
                assert!(a.allow_single_member);
                assert_eq!(a.min_defrag_bytes, 100 * MB);
            }
            Command::Compact(a) => {
                assert_eq!(operation.kind().as_str(), "compact");
                assert_eq!(a.revision, Some(7000));
                assert!(a.physical);
            }
            Command::Cleanup(_) | Command::RingHash | Command::Revision(_) => {
                panic!("{operation:?} is not an etcd subcommand")
            }
            _ => panic!("{operation:?}: the trigger submits no snapshot work"),
        }
    }
}

#[test]
fn preconditions_keep_tasks_away_and_say_why() {
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
        ("corrupt alarm", Observed::Members(alarmed_corrupt), "MembersUnhealthy", "CORRUPT"),
        (
            "no TLS Secret",
            Observed::Failed("client TLS Secret ns/x (spec.tls.secretName): NotFound".into()),
            "MembersUnhealthy",
            "client TLS Secret ns/x",
        ),
        ("nobody answered", Observed::Members(vec![]), "MembersUnhealthy", "no member answered"),
        ("one member", Observed::Members(single), "TooFewMembers", "1 voting member"),
        ("two leaders", Observed::Members(split_brain), "NoStableLeader", "disagree on the leader"),
    ];
    for (name, observed, reason, message) in cases {
        let mut c = case(vec![]);
        c.members = observed.clone();
        let decision = run(&c);
        assert_eq!(decision.submit, None, "{name}");
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
    assert_eq!(sick.raft_term, None, "a member that did not answer has no term");
    assert_eq!(status.members[0].raft_term, Some(4), "the term the member reported");
    assert!(status.members[0].leader && !status.members[2].leader);
    assert_eq!(status.members[0].id, "1");
}

#[test]
fn a_single_member_cluster_is_defragmented_only_when_allowed() {
    let mut c = case(vec![member(1, 200 * MB, 10 * MB)]);
    assert_eq!(run(&c).submit, None, "refused without allowSingleMember");
    c.spec.policy.allow_single_member = true;
    let decision = run(&c);
    let got = args(&decision, &c);
    assert!(got.ends_with("--allow-single-member"), "{got}");
}

#[test]
fn disabled_observes_but_submits_nothing() {
    let mut c = case(fragmented_trio());
    c.spec.policy.enabled = false;
    let decision = run(&c);
    assert_eq!(decision.submit, None);
    assert_eq!(condition(&decision, DISABLED).0, ConditionStatus::True);
    assert_eq!(decision.status.members.len(), 3);
    assert_eq!(decision.status.max_fragmentation.as_deref(), Some("75.0%"));
}

#[test]
fn a_maintenance_task_queued_or_running_blocks_another_whoever_asked_for_it() {
    use TaskState::*;
    use TaskType::*;
    let cases: &[(&str, Vec<ClusterTaskView>, Option<(&str, &str)>)] = &[
        (
            "our Defragment running",
            vec![task("main-defragment-1", Defragment, InProgress, 5)],
            Some(("main-defragment-1", "TaskRunning")),
        ),
        (
            "a person's Defragment queued",
            vec![task("defrag-now", Defragment, Pending, 1)],
            Some(("defrag-now", "TaskQueued")),
        ),
        (
            "a person's Compact queued: its outcome changes what is due",
            vec![task("compact-now", Compact, Pending, 1)],
            Some(("compact-now", "TaskQueued")),
        ),
        (
            "a running one is named before an older queued one",
            vec![task("first", Maintenance, Pending, 9), task("second", Defragment, InProgress, 3)],
            Some(("second", "TaskRunning")),
        ),
        (
            "the older of two queued ones",
            vec![task("later", Compact, Pending, 1), task("earlier", Defragment, Pending, 2)],
            Some(("earlier", "TaskQueued")),
        ),
        ("a snapshot is no maintenance", vec![task("backup", Snapshot, InProgress, 1)], None),
        (
            "finished tasks block nothing",
            vec![
                task("done", Defragment, Completed, 30),
                task("broke", Maintenance, Failed, 20),
                task("dup", Defragment, Rejected, 10),
            ],
            None,
        ),
    ];
    for (name, tasks, blocked_by) in cases {
        let mut c = case(fragmented_trio());
        c.tasks = tasks.clone();
        let decision = run(&c);
        let (status, reason, message) = condition(&decision, PROGRESSING);
        match blocked_by {
            Some((task, wanted_reason)) => {
                assert_eq!(decision.submit, None, "{name}");
                assert_eq!(decision.status.active_task.as_deref(), Some(*task), "{name}");
                assert_eq!((status, reason.as_str()), (ConditionStatus::True, *wanted_reason), "{name}");
                assert!(message.contains(task), "{name}: {message}");
            }
            None => {
                assert_eq!(submitted_type(&decision), Some(Defragment), "{name}");
            }
        }
    }
}

#[test]
fn a_failed_or_skipped_maintenance_backs_off_for_a_check_interval() {
    for (outcome, degraded) in [("Failed", true), ("Skipped", false)] {
        let mut c = case(fragmented_trio());
        c.previous.last_maintenance_task = Some("main-defragment-1".into());
        c.previous.last_maintenance_outcome = Some(outcome.into());
        c.previous.last_maintenance_time = Some(now().into());
        c.previous.last_maintenance_message =
            Some("MaintenanceTask main-defragment-1: failed: member etcd-2 stopped answering".into());
        let decision = run(&c);
        assert_eq!(decision.submit, None, "{outcome}: no retry at once");
        assert_eq!(decision.requeue_after, SignedDuration::from_mins(10), "{outcome}");
        let (status, reason, message) = condition(&decision, DEGRADED);
        if degraded {
            assert_eq!((status, reason.as_str()), (ConditionStatus::True, "MaintenanceFailed"));
            assert!(message.contains("member etcd-2 stopped answering"), "{message}");
        } else {
            assert_eq!(status, ConditionStatus::False, "{outcome}: {message}");
        }

        c.previous = decision.status.clone();
        c.now = now() + SignedDuration::from_mins(10) - SignedDuration::from_secs(1);
        assert_eq!(run(&c).submit, None, "{outcome}: still backing off");
        c.now = now() + SignedDuration::from_mins(10);
        let retried = run(&c).submit.expect("a task once the interval is over");
        assert_eq!(retried.name, format!("main-defragment-{}", c.now.as_second()));
    }
}

#[test]
fn a_succeeded_maintenance_means_no_backoff() {
    let mut c = case(fragmented_trio());
    c.previous.last_maintenance_outcome = Some("Succeeded".into());
    c.previous.last_maintenance_time = Some(now().into());
    assert!(run(&c).submit.is_some());
}

#[test]
fn an_invalid_spec_degrades_with_the_field_and_submits_nothing() {
    let mut c = case(fragmented_trio());
    c.spec.policy.check_interval = "10x".into();
    c.members = Observed::NotAttempted;
    let decision = run(&c);
    assert_eq!(decision.submit, None);
    let (status, reason, message) = condition(&decision, DEGRADED);
    assert_eq!((status, reason.as_str()), (ConditionStatus::True, "InvalidSpec"));
    assert!(message.contains(r#"spec.policy.checkInterval: "10x" is not a duration"#), "{message}");
}

#[test]
fn observation_is_due_on_the_interval_on_spec_change_and_when_a_task_is_queued_or_ends() {
    use TaskState::*;
    use TaskType::*;
    let next = now() + SignedDuration::from_mins(5);
    let previous = EtcdClusterStatus {
        observed_generation: Some(1),
        next_check_time: Some(next.into()),
        active_task: Some("main-defragment-2".into()),
        ..Default::default()
    };
    let same_task = vec![task("main-defragment-2", Defragment, InProgress, 1)];
    let cases: &[(&str, Option<i64>, Vec<ClusterTaskView>, Timestamp, bool)] = &[
        ("nothing changed, before the interval", Some(1), same_task.clone(), now(), false),
        (
            "the task moved from queued to running",
            Some(1),
            vec![task("main-defragment-2", Defragment, Pending, 1)],
            now(),
            false,
        ),
        ("the interval is over", Some(1), same_task.clone(), next, true),
        ("spec changed", Some(2), same_task.clone(), now(), true),
        ("the task ended", Some(1), vec![task("main-defragment-2", Defragment, Completed, 1)], now(), true),
        ("the task was deleted", Some(1), vec![], now(), true),
        (
            "a person queued a task before ours",
            Some(1),
            vec![
                task("defrag-now", Defragment, Pending, 9),
                task("main-defragment-2", Defragment, Pending, 1),
            ],
            now(),
            true,
        ),
        (
            "an old finished task is still around",
            Some(1),
            vec![
                task("main-defragment-1", Defragment, Completed, 60),
                task("main-defragment-2", Defragment, InProgress, 1),
            ],
            now(),
            false,
        ),
    ];
    for (name, generation, tasks, at, due) in cases {
        let result = check_due(&previous, *generation, tasks, *at);
        assert_eq!(result.is_ok(), *due, "{name}: {result:?}");
    }
    assert_eq!(check_due(&previous, Some(1), &same_task, now()), Err(SignedDuration::from_mins(5)));
    assert!(check_due(&EtcdClusterStatus::default(), Some(1), &[], now()).is_ok(), "never observed");
    let idle = EtcdClusterStatus { active_task: None, ..previous.clone() };
    assert!(
        check_due(&idle, Some(1), &[task("defrag-now", Defragment, Pending, 0)], now()).is_ok(),
        "a task queued on an idle cluster"
    );
}

#[test]
fn a_spec_change_takes_effect_at_once() {
    // Under the default 45% threshold nothing is due; lowered to 20%, etcd-0 is.
    let mut members = tidy_trio();
    members[0] = member(1, 200 * MB, 140 * MB);
    let mut c = case(members);
    c.previous.observed_generation = Some(1);
    assert_eq!(run(&c).submit, None);
    c.spec.policy.max_fragmented_percent = 20.0;
    let decision = run(&c);
    assert!(args(&decision, &c).starts_with("defrag "), "{}", args(&decision, &c));
}

fn periodic(retention: &str) -> Case {
    let mut c = case(tidy_trio());
    c.spec.policy.compaction =
        Some(EtcdCompactionPolicy { mode: CompactionMode::Periodic, retention: retention.into() });
    c
}

#[test]
fn periodic_compaction_samples_and_compacts_to_the_revision_of_retention_ago() {
    // First sight: one sample, nothing to compact, back when the next sample is due (6 min).
    let c = periodic("1h");
    let decision = run(&c);
    assert_eq!(decision.submit, None);
    assert_eq!(
        decision.status.revision_samples,
        vec![RevisionSample { time: now().into(), revision: 10_000 }]
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
    assert_eq!(run(&c).submit, None);

    // One more minute and the first sample is exactly an hour old.
    c.now = now() + SignedDuration::from_mins(1);
    let decision = run(&c);
    let task = decision.submit.as_ref().expect("compaction due");
    assert_eq!(task.task_type, TaskType::Compact);
    assert_eq!(task.config.compact.as_ref().unwrap().revision, Some(5000));
    let got = args(&decision, &c);
    assert!(got.starts_with("compact ") && got.ends_with("--physical --revision 5000"), "{got}");

    // Compacted to 5000 half an hour ago: not again before the hour is over.
    c.previous.last_compacted_revision = Some(5000);
    c.previous.last_compaction_time = Some((c.now - SignedDuration::from_mins(30)).into());
    assert_eq!(run(&c).submit, None);
}

#[test]
fn periodic_compaction_comes_before_a_due_defrag() {
    let mut c = periodic("1h");
    c.members = Observed::Members(fragmented_trio());
    c.previous.revision_samples =
        vec![RevisionSample { time: (now() - SignedDuration::from_hours(2)).into(), revision: 4000 }];
    let decision = run(&c);
    assert_eq!(submitted_type(&decision), Some(TaskType::Compact));
    // Once compacted, the defrag follows, without a compaction of its own.
    c.previous.last_compacted_revision = Some(4000);
    c.previous.last_compaction_time = Some(now().into());
    let decision = run(&c);
    assert_eq!(submitted_type(&decision), Some(TaskType::Defragment));
    assert!(!args(&decision, &c).contains("compact"), "{}", args(&decision, &c));
}

#[test]
fn revision_compaction_keeps_the_last_n_revisions() {
    let revision = |keep: &str, last: Option<i64>, minutes_ago: Option<i64>, members: Vec<ObservedMember>| {
        let mut c = case(members);
        c.spec.policy.compaction =
            Some(EtcdCompactionPolicy { mode: CompactionMode::Revision, retention: keep.into() });
        c.previous.last_compacted_revision = last;
        c.previous.last_compaction_time = minutes_ago.map(|m| (now() - SignedDuration::from_mins(m)).into());
        let decision = run(&c);
        (args(&decision, &c), submitted_type(&decision))
    };
    // Revision 10000 observed.
    let cases: &[(&str, &str, Option<i64>, Option<i64>, Vec<ObservedMember>, &str)] = &[
        ("never compacted", "1000", None, None, tidy_trio(), "compact"),
        ("history shorter than kept", "20000", None, None, tidy_trio(), ""),
        ("compacted to the target already", "1000", Some(9000), Some(60), tidy_trio(), ""),
        ("target moved, compacted an interval ago", "1000", Some(8000), Some(10), tidy_trio(), "compact"),
        ("target moved, compacted recently", "1000", Some(8000), Some(9), tidy_trio(), ""),
        ("a due defrag compacts first itself", "1000", None, None, fragmented_trio(), "defrag"),
    ];
    for (name, keep, last, ago, members, wanted) in cases {
        let (got, task_type) = revision(keep, *last, *ago, members.clone());
        assert!(got.starts_with(wanted), "{name}: {got}");
        match *wanted {
            "compact" => {
                assert_eq!(task_type, Some(TaskType::Compact), "{name}");
                assert!(got.ends_with(&format!("--retain-revisions {keep}")), "{name}: {got}");
            }
            "defrag" => {
                // One Maintenance task, one step: the defrag compacts first itself.
                assert_eq!(task_type, Some(TaskType::Maintenance), "{name}");
                assert!(!got.contains(" && "), "{name}: {got}");
                assert!(got.ends_with(&format!("--compact-retain-revisions {keep}")), "{name}: {got}");
            }
            _ => assert!(got.is_empty() && task_type.is_none(), "{name}: {got}"),
        }
    }
}

#[test]
fn switching_away_from_periodic_drops_the_samples() {
    let mut c = case(tidy_trio());
    c.previous.revision_samples = vec![RevisionSample { time: now().into(), revision: 1 }];
    assert!(run(&c).status.revision_samples.is_empty());
}

#[test]
fn task_names_are_deterministic_and_valid() {
    let at: Timestamp = "2026-03-01T12:00:00Z".parse().unwrap();
    assert_eq!(task_name("main", &TaskType::Maintenance, at), "main-maintenance-1772366400");
    assert_eq!(task_name("main", &TaskType::Compact, at), "main-compact-1772366400");
    let long = "a".repeat(70);
    let name = task_name(&long, &TaskType::Defragment, at);
    assert!(name.len() <= 63, "{name}");
    assert!(name.ends_with("-defragment-1772366400"));
    assert_eq!(name, task_name(&long, &TaskType::Defragment, at));
    let other = format!("{}b", "a".repeat(69));
    assert_ne!(
        task_name(&other, &TaskType::Defragment, at),
        name,
        "long names sharing a prefix do not collide"
    );
}

/// Two clusters of one fleet claiming one id: reported (once as an Event, always as Degraded),
/// and nothing is submitted, however fragmented the members are.
#[test]
fn a_disputed_fleet_id_blocks_maintenance_and_is_told_once() {
    let mut c = case(fragmented_trio());
    c.spec.partition = Some(EtcdPartition {
        fleet: "arktos".into(),
        cluster_id: 3,
        revision_scheme: RevisionScheme::Partitioned,
        max_clock_skew_ms: None,
    });
    c.collisions = vec!["tenants/tenant-3".into()];
    let decision = run(&c);
    assert_eq!(decision.submit, None, "no task while the id is disputed");
    let (status, reason, message) = condition(&decision, DEGRADED);
    assert_eq!((status, reason.as_str()), (ConditionStatus::True, PARTITION_ID_COLLISION));
    assert!(
        message.starts_with(
            "spec.partition.clusterId 3 of fleet arktos is also claimed by EtcdCluster tenants/tenant-3"
        ),
        "{message}"
    );
    assert_eq!(decision.events.len(), 1);
    assert!(decision.events[0].warning);
    assert_eq!(decision.events[0].reason, PARTITION_ID_COLLISION);

    // The next pass, the condition already says so: no second Event.
    let (_, told_reason, told_message) = condition(&decision, DEGRADED);
    c.previous.conditions = vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
        type_: DEGRADED.into(),
        status: "True".into(),
        reason: told_reason,
        message: told_message,
        last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()),
        observed_generation: Some(1),
    }];
    let again = run(&c);
    assert!(again.events.is_empty(), "{:?}", again.events);
    assert_eq!(again.submit, None);

    // Resolved (the other cluster took another id): maintenance as usual.
    c.collisions.clear();
    let resolved = run(&c);
    assert!(resolved.submit.is_some(), "the fragmented members are defragmented again");
    assert_eq!(condition(&resolved, DEGRADED).0, ConditionStatus::False);
}

/// A `Partitioned` cluster of id 5 keeping an hour of history, its members' newest revision
/// made `ago` before `now()` (negative: ahead).
fn partitioned(ago: SignedDuration) -> Case {
    use groundskeeper_protocol::CompositeRevision;
    let mut c = periodic("1h");
    c.spec.partition = Some(EtcdPartition {
        fleet: "arktos".into(),
        cluster_id: 5,
        revision_scheme: RevisionScheme::Partitioned,
        max_clock_skew_ms: None,
    });
    let revision =
        CompositeRevision { timestamp_ms: (now() - ago).as_millisecond() as u64, cluster_id: 5, event: 9 }
            .encode()
            .unwrap();
    let Observed::Members(members) = &mut c.members else { unreachable!() };
    for m in members.iter_mut() {
        m.revision = Some(revision);
    }
    c
}

/// Time-based compaction of a `Partitioned` cluster: no sampling; the target is the hour-ago
/// millisecond shifted into place with the cluster's id; the submitted task runs the runner's
/// `compact --revision` with that exact revision.
#[test]
fn a_partitioned_cluster_compacts_to_the_revision_of_retention_ago_without_sampling() {
    let c = partitioned(SignedDuration::from_millis(200));
    let decision = run(&c);
    assert!(decision.status.revision_samples.is_empty(), "no sampling");
    let target = (((now().as_millisecond() - 3_600_000) as u64) << 19 | 5 << 13) as i64;
    let task = decision.submit.as_ref().expect("a compaction at first sight");
    assert_eq!(task.task_type, TaskType::Compact);
    assert_eq!(task.config.compact.as_ref().unwrap().revision, Some(target));
    let got = args(&decision, &c);
    assert!(got.ends_with(&format!("--physical --revision {target}")), "{got}");
    // The runner reads the flag back as the same exact revision.
    let Operation::Compact(request) = &submitted_steps(&decision, &c.spec)[0] else {
        panic!("a compaction step")
    };
    assert_eq!(request.to, groundskeeper_protocol::operation::CompactTo::Revision(target));
    let step = Operation::Compact(request.clone());
    match Cli::try_parse_args(step.to_args()).unwrap().command {
        Command::Compact(a) => assert_eq!((a.revision, a.retain_revisions), (Some(target), None)),
        _ => panic!("{step:?} is not a compaction"),
    }
    let status = decision.status.partition.as_ref().expect("partition status");
    assert_eq!(status.clock_skew_ms, Some(-200));
    assert_eq!(status.revision_cluster_id, Some(5));
    assert_eq!(condition(&decision, "ClockSkewed").0, ConditionStatus::False);

    // Compacted to that target 30 minutes ago: nothing again within the hour.
    let mut c = partitioned(SignedDuration::from_millis(200));
    c.previous.last_compacted_revision = Some(target);
    c.previous.last_compaction_time = Some((now() - SignedDuration::from_mins(30)).into());
    assert_eq!(run(&c).submit, None);

    // Nothing written for more than the retention: the target would pass the current revision.
    let c = partitioned(SignedDuration::from_mins(61));
    assert_eq!(run(&c).submit, None);
}

/// A clock ahead by more than 5 s: condition ClockSkewed and one Warning Event per episode;
/// maintenance continues; back within the threshold the condition clears with a Normal Event.
#[test]
fn a_skewed_clock_is_told_once_per_episode_and_maintenance_continues() {
    let c = partitioned(-SignedDuration::from_secs(8));
    let decision = run(&c);
    let (status, reason, message) = condition(&decision, "ClockSkewed");
    assert_eq!((status, reason.as_str()), (ConditionStatus::True, "ClockAhead"));
    assert!(message.contains("8000 ms ahead") && message.contains("Maintenance continues"), "{message}");
    assert!(decision.submit.is_some(), "compaction goes on while the clock runs ahead");
    let warnings: Vec<_> = decision.events.iter().filter(|e| e.reason == "ClockAhead").collect();
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].warning);

    let told = |decision: &Decision| {
        let (_, reason, message) = condition(decision, "ClockSkewed");
        let status = condition(decision, "ClockSkewed").0;
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
            type_: "ClockSkewed".into(),
            status: status.as_str().into(),
            reason,
            message,
            last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()),
            observed_generation: Some(1),
        }
    };
    let mut again = partitioned(-SignedDuration::from_secs(9));
    again.previous.conditions = vec![told(&decision)];
    let second = run(&again);
    assert_eq!(condition(&second, "ClockSkewed").1, "ClockAhead");
    assert!(
        second.events.iter().all(|e| e.reason != "ClockAhead"),
        "one Warning per episode: {:?}",
        second.events
    );

    let mut back = partitioned(SignedDuration::from_millis(10));
    back.previous.conditions = vec![told(&second)];
    let cleared = run(&back);
    assert_eq!(condition(&cleared, "ClockSkewed").0, ConditionStatus::False);
    let normal: Vec<_> = cleared.events.iter().filter(|e| e.reason == "ClockInStep").collect();
    assert_eq!(normal.len(), 1);
    assert!(!normal[0].warning);

    // A clock proven behind (written since the last observation, 10 s before it): no
    // time-based compaction, since it would drop history younger than the hour.
    let mut behind = partitioned(SignedDuration::from_secs(40));
    behind.previous.last_observed_time = Some((now() - SignedDuration::from_secs(30)).into());
    behind.previous.revision = Some(1);
    let decision = run(&behind);
    let (_, reason, message) = condition(&decision, "ClockSkewed");
    assert_eq!(reason, "ClockBehind");
    assert!(message.contains("compaction by time waits"), "{message}");
    assert_eq!(decision.submit, None);

    // A cluster without a partition has no such condition at all.
    assert!(run(&case(tidy_trio())).conditions.iter().all(|c| c.type_ != "ClockSkewed"));
}

/// A task held back (here by its fleet's bound) says so in the cluster's status, and a change of
/// what it waits for makes the cluster due at once.
#[test]
fn what_a_queued_task_waits_for_shows_on_its_cluster() {
    let why = "fleet arktos: 1 of 1 maintenance slots taken by EtcdCluster etcd/tenant-2 \
               (MaintenanceTask tenant-2-compact-1); waits for a slot";
    let mut c = case(fragmented_trio());
    let mut queued = task("main-defragment-1", TaskType::Defragment, TaskState::Pending, 1);
    queued.waits_for = Some(why.into());
    c.tasks = vec![queued.clone()];
    let decision = run(&c);
    assert_eq!(decision.submit, None);
    assert_eq!(decision.status.active_task_waits_for.as_deref(), Some(why));
    let (status, reason, message) = condition(&decision, PROGRESSING);
    assert_eq!((status, reason.as_str()), (ConditionStatus::True, "TaskQueued"));
    assert_eq!(message, format!("MaintenanceTask main-defragment-1 (Defragment) is queued: {why}"));

    let mut previous = decision.status.clone();
    previous.next_check_time = Some((now() + SignedDuration::from_mins(10)).into());
    assert!(check_due(&previous, Some(1), &[queued.clone()], now()).is_err());
    let mut freed = queued.clone();
    freed.waits_for = None;
    assert_eq!(check_due(&previous, Some(1), &[freed], now()), Ok(()));
}

/// A task that is due is not submitted at all while the cluster is suspended or outside its
/// maintenance windows: the Progressing condition says what is due and why it is held, and the
/// trigger looks again when the hold ends.
#[test]
fn due_work_is_held_by_a_suspension_or_a_closed_window() {
    use groundskeeper_api::maintenance_suspension::Suspension;
    use groundskeeper_api::maintenance_window::{MaintenanceWindowsSpec, Windows};
    let base = case(fragmented_trio());
    assert!(run(&base).submit.is_some(), "due without a hold");

    let mut suspended = case(fragmented_trio());
    suspended.suspensions = vec![Suspension {
        name: "freeze".into(),
        reason: "incident 4711".into(),
        by: "alice".into(),
        until: Some("2026-03-01T13:00:00Z".parse().unwrap()),
        allow: vec![TaskType::Snapshot],
        stop_running: false,
    }];
    let decision = run(&suspended);
    assert_eq!(decision.submit, None);
    let (_, reason, message) = condition(&decision, "DefragControllerProgressing");
    assert_eq!(reason, "Held");
    assert!(message.contains("is due") && message.contains("suspended by alice"), "{message}");
    assert!(decision.requeue_after <= SignedDuration::from_hours(1), "{:?}", decision.requeue_after);

    let mut outside = case(fragmented_trio());
    // 12:00 UTC on a Sunday: the window opens at 22:00.
    let spec = MaintenanceWindowsSpec { time_zone: "UTC".into(), windows: vec!["* 22:00-02:00".into()] };
    outside.windows = Some(Windows::new(&spec).map_err(|e| format!("{e:?}")));
    let decision = run(&outside);
    assert_eq!(decision.submit, None);
    let (_, reason, message) = condition(&decision, "DefragControllerProgressing");
    assert_eq!(reason, "Held");
    assert!(
        message.contains("outside its maintenance windows: the next opens Sun 2026-03-01 22:00 UTC"),
        "{message}"
    );

    let mut inside = case(fragmented_trio());
    let spec = MaintenanceWindowsSpec { time_zone: "UTC".into(), windows: vec!["* 10:00-14:00".into()] };
    inside.windows = Some(Windows::new(&spec).map_err(|e| format!("{e:?}")));
    assert!(run(&inside).submit.is_some(), "inside the window");
}

fn on_version(mut m: ObservedMember, version: &str) -> ObservedMember {
    m.member.status.as_mut().unwrap().version = version.into();
    m
}

#[test]
fn members_on_an_affected_etcd_version_are_named_in_a_condition() {
    let mut members = tidy_trio();
    members[0] = on_version(members[0].clone(), "3.5.12");
    members[2] = on_version(members[2].clone(), "3.4.35");
    let mut c = case(members);
    let (status, reason, message) = condition(&run(&c), VERSION_RISK);
    assert_eq!((status, reason.as_str()), (ConditionStatus::True, "AffectedVersion"));
    assert!(
        message.starts_with("etcd-0 (3.5.12), etcd-2 (3.4.35): a defrag that overlaps a snapshot apply"),
        "{message}"
    );
    assert!(message.contains("fixed in 3.5.23 (3.6: 3.6.5)"), "{message}");
    assert!(message.contains("only when caught up with the leader right before its turn"), "{message}");
    c.spec.policy.refuse_affected_versions = true;
    let (_, _, message) = condition(&run(&c), VERSION_RISK);
    assert!(message.contains("they are not defragmented (spec.policy.refuseAffectedVersions)"), "{message}");
    let fixed = case(tidy_trio()); // every member on 3.5.23
    let (status, reason, _) = condition(&run(&fixed), VERSION_RISK);
    assert_eq!((status, reason.as_str()), (ConditionStatus::False, "NoAffectedVersion"));
}

#[test]
fn leader_turn_and_move_leader_that_contradict_are_named() {
    let mut c = case(tidy_trio());
    c.spec.policy.move_leader = false;
    c.spec.policy.leader_turn = Some(groundskeeper_api::etcd_cluster::LeaderTurn::Always);
    let err = Policy::from_spec(&c.spec).unwrap_err().to_string();
    assert!(
        err.contains("spec.policy.moveLeader: false contradicts spec.policy.leaderTurn: Always"),
        "{err}"
    );
    c.spec.policy.leader_turn = Some(groundskeeper_api::etcd_cluster::LeaderTurn::Never);
    assert_eq!(Policy::from_spec(&c.spec).unwrap().leader_turn, LeaderTurnPolicy::Never);
    c.spec.policy.move_leader = true;
    c.spec.policy.leader_turn = None;
    c.spec.policy.quota_backend_bytes = Some(0);
    let err = Policy::from_spec(&c.spec).unwrap_err().to_string();
    assert!(err.contains("spec.policy.quotaBackendBytes: 0 must be more than 0"), "{err}");
}
