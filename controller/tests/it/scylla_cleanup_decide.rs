//! Table tests of the cleanup decision: snapshot in, plan out.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use groundskeeper_api::maintenance_task::TaskState;
use groundskeeper_api::scylla::coexistence::{
    JobPhase, OperatorCleanup, OperatorJob, SCYLLA_OPERATOR_CLEANS_UP,
};
use groundskeeper_api::scylla::facts::*;
use groundskeeper_controller::scylla::decide::*;
use groundskeeper_controller::scylla::members_record::*;
use groundskeeper_protocol::{keys, ring_hash};

const NS: &str = "scylla";
const SC: &str = "basic";

fn hash(ring: &str) -> String {
    let tokens: Vec<String> = ring.split(',').map(str::to_owned).collect();
    ring_hash(&tokens).unwrap()
}

fn h(n: u32) -> String {
    hash(&format!("{n}"))
}

fn now() -> jiff::Timestamp {
    "2026-11-21T12:00:00Z".parse().unwrap()
}

fn svc(rack: &str, ordinal: u32) -> String {
    format!("{SC}-dc1-{rack}-{ordinal}")
}

fn condition(type_: &str, status: &str) -> ConditionFacts {
    ConditionFacts {
        type_: type_.into(),
        status: status.into(),
        reason: String::new(),
        message: String::new(),
    }
}

fn settled_cluster() -> ClusterFacts {
    ClusterFacts {
        namespace: NS.into(),
        name: SC.into(),
        generation: Some(3),
        observed_generation: Some(3),
        conditions: vec![
            condition("Available", "True"),
            condition("Progressing", "False"),
            condition("Degraded", "False"),
            condition(STATEFUL_SET_CONTROLLER_PROGRESSING, "False"),
        ],
        annotations: BTreeMap::new(),
        single_datacenter: true,
        spec_members: 3,
        status_members: Some(3),
    }
}

/// A member with `current` and `last` hashes (`None`: annotation absent).
fn member(rack: &str, ordinal: u32, current: Option<&str>, last: Option<&str>) -> MemberFacts {
    let mut annotations = BTreeMap::new();
    if let Some(c) = current {
        annotations.insert(keys::CURRENT_TOKEN_RING_HASH.to_owned(), c.to_owned());
    }
    if let Some(l) = last {
        annotations.insert(keys::LAST_CLEANED_UP_TOKEN_RING_HASH.to_owned(), l.to_owned());
    }
    MemberFacts {
        service: svc(rack, ordinal),
        uid: Some(format!("uid-{rack}-{ordinal}")),
        datacenter: Some("dc1".into()),
        rack: Some(rack.into()),
        address: Some(format!("10.0.{}.{ordinal}", rack.as_bytes()[0])),
        annotations,
    }
}

fn with_record(mut m: MemberFacts, ring: &str, uids: &[String]) -> MemberFacts {
    let record = MembersRecord { ring_hash: ring.to_owned(), members: uids.iter().cloned().collect() };
    m.annotations.insert(keys::CLEANED_FOR_MEMBERS.to_owned(), record.to_annotation());
    m
}

fn task(name: &str, state: TaskState, ring: Option<&str>) -> TaskFacts {
    TaskFacts {
        name: name.to_owned(),
        automatic: true,
        state,
        created: now() - jiff::SignedDuration::from_mins(30),
        completed_at: None,
        ring_hash: ring.map(str::to_owned),
        progress: None,
        last_error: None,
        waiting_for: None,
    }
}

/// A task that failed `minutes_ago` with `code`.
fn failed_task(ring: &str, code: &str, minutes_ago: i64) -> TaskFacts {
    TaskFacts {
        completed_at: Some(now() - jiff::SignedDuration::from_mins(minutes_ago)),
        last_error: Some((
            code.to_owned(),
            "cleanup failed on 1 of 3 nodes: basic-dc1-a-0 (keyspace ks1: Can not perform cleanup operation when topology changes)".to_owned(),
        )),
        ..task("basic-cleanup-1", TaskState::Failed, Some(ring))
    }
}

fn snapshot(members: Vec<MemberFacts>, tasks: Vec<TaskFacts>) -> Snapshot {
    Snapshot {
        cluster: settled_cluster(),
        members,
        tasks,
        agent_token: SecretState::Present,
        // These cases are the ring-hash rule's: ownership cases are in scylla_ownership_decide.rs.
        ownership: Err("not read".into()),
        scylla_operator: OperatorCleanup::default(),
        holds: Vec::new(),
        ring_quiet: RingQuiet::settled_long_ago(),
        now: now(),
    }
}

/// The nodes of the Cleanup task the plan submits; empty when it submits none.
fn submits(plan: &Plan) -> Vec<String> {
    let submitted: Vec<&Vec<String>> = plan
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::SubmitCleanupTask { nodes, .. } => Some(nodes),
            _ => None,
        })
        .collect();
    assert!(submitted.len() <= 1, "one task per cluster at most: {plan:#?}");
    submitted.first().map(|n| n.to_vec()).unwrap_or_default()
}

fn nodes(list: &[(&str, u32)]) -> Vec<String> {
    list.iter().map(|(r, i)| svc(r, *i)).collect()
}

fn seeds(plan: &Plan) -> Vec<(String, SeedReason)> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::SeedLastCleaned { service, reason, .. } => Some((service.clone(), *reason)),
            _ => None,
        })
        .collect()
}

fn uids(members: &[MemberFacts]) -> Vec<String> {
    members.iter().map(|m| m.uid.clone().unwrap()).collect()
}

/// One expectation about a plan.
enum Expect {
    Submits(Vec<String>),
    Seeds(Vec<(String, SeedReason)>),
    Contains(Action),
    NoAction,
    Progressing(bool, &'static str, &'static str),
    Degraded(bool, &'static str, &'static str),
    Requeue(Option<Duration>),
}

fn check(name: &str, snapshot: &Snapshot, expectations: &[Expect]) {
    let plan = decide(snapshot);
    for expect in expectations {
        match expect {
            Expect::Submits(wanted) => assert_eq!(&submits(&plan), wanted, "{name}: submits, plan {plan:#?}"),
            Expect::Seeds(wanted) => assert_eq!(&seeds(&plan), wanted, "{name}: seeds, plan {plan:#?}"),
            Expect::Contains(action) => {
                assert!(plan.actions.contains(action), "{name}: wanted {action:?} in {plan:#?}")
            }
            Expect::NoAction => assert!(plan.actions.is_empty(), "{name}: wanted no action, {plan:#?}"),
            Expect::Progressing(status, reason, text) => {
                let c = &plan.progressing;
                assert_eq!((c.status, c.reason.as_str()), (*status, *reason), "{name}: {c:#?}");
                assert!(c.message.contains(text), "{name}: {:?} lacks {text:?}", c.message);
            }
            Expect::Degraded(status, reason, text) => {
                let c = &plan.degraded;
                assert_eq!((c.status, c.reason.as_str()), (*status, *reason), "{name}: {c:#?}");
                assert!(c.message.contains(text), "{name}: {:?} lacks {text:?}", c.message);
            }
            Expect::Requeue(wanted) => assert_eq!(&plan.requeue_after, wanted, "{name}: requeue"),
        }
    }
    assert_eq!(plan.progressing.type_, PROGRESSING);
    assert_eq!(plan.degraded.type_, DEGRADED);
}

#[test]
fn scale_out_three_to_six_cleans_the_old_nodes_not_the_new() {
    let (old, new) = (h(3), h(6));
    let one_rack = one_by_one(&old, &new);
    let record = MembersRecord { ring_hash: new.clone(), members: uids(&one_rack).into_iter().collect() };
    check(
        "one rack",
        &snapshot(one_rack, vec![]),
        &[
            // One task for the cluster, naming the old nodes in cleaning order.
            Expect::Submits(nodes(&[("a", 0), ("a", 1), ("a", 2)])),
            Expect::Contains(Action::SubmitCleanupTask {
                name: format!("basic-cleanup-{}", now().as_second()),
                nodes: nodes(&[("a", 0), ("a", 1), ("a", 2)]),
                per_node: Vec::new(),
                ring_hash: new.clone(),
                retry_of: None,
            }),
            // The new nodes seen one at a time: each seeded as it joins, the last one now.
            Expect::Seeds(vec![(svc("a", 5), SeedReason::Joined)]),
            Expect::Contains(Action::SeedLastCleaned {
                service: svc("a", 5),
                hash: new.clone(),
                members: Some(record),
                reason: SeedReason::Joined,
            }),
            Expect::Progressing(
                true,
                "CleanupRunning",
                "3 of 6 nodes need cleanup; submitted a cleanup task",
            ),
            Expect::Degraded(false, "AsExpected", ""),
            Expect::Requeue(Some(REQUEUE_WHILE_RUNNING)),
        ],
    );
    let three_racks: Vec<MemberFacts> = ["a", "b", "c"]
        .iter()
        .flat_map(|r| {
            let seeded = (*r != "c").then_some(new.as_str());
            [member(r, 0, Some(&new), Some(&old)), member(r, 1, Some(&new), seeded)]
        })
        .collect();
    check(
        "three racks",
        &snapshot(three_racks, vec![]),
        &[
            Expect::Submits(nodes(&[("a", 0), ("b", 0), ("c", 0)])),
            Expect::Seeds(vec![(svc("c", 1), SeedReason::Joined)]),
        ],
    );
}

/// Six nodes of one rack after a 3 → 6 scale-out whose new nodes were seen one at a time: the
/// old three last cleaned for `old`, the first two new ones already seeded for `new`, the last
/// one just joined.
fn one_by_one(old: &str, new: &str) -> Vec<MemberFacts> {
    (0..6)
        .map(|i| {
            let last = match i {
                0..3 => Some(old),
                3 | 4 => Some(new),
                _ => None,
            };
            member("a", i, Some(new), last)
        })
        .collect()
}

/// New nodes first seen together (a parallel bootstrap, sidecars reporting after more joined,
/// groundskeeper installed on a cluster that never recorded a cleanup): what each held before
/// the others joined cannot be known, so each is cleaned once, whole, beside the old nodes, and
/// the condition says so.
#[test]
fn new_nodes_seen_together_are_each_cleaned_once() {
    let (old, new) = (h(3), h(6));
    let together: Vec<MemberFacts> =
        (0..6).map(|i| member("a", i, Some(&new), (i < 3).then_some(old.as_str()))).collect();
    let joined_together = (3..6).map(|i| (svc("a", i), SeedReason::JoinedTogether)).collect();
    check(
        "three joined together: marked NeverCleanedUp, no task before the marks land",
        &snapshot(together, vec![]),
        &[
            Expect::Submits(vec![]),
            Expect::Seeds(joined_together),
            Expect::Contains(Action::SeedLastCleaned {
                service: svc("a", 3),
                hash: keys::NEVER_CLEANED_UP.into(),
                members: None,
                reason: SeedReason::JoinedTogether,
            }),
            Expect::Progressing(
                true,
                "WaitingForPreconditions",
                "3 nodes joined together, so what each held before the others joined cannot be known: marked NeverCleanedUp, each is cleaned once: basic-dc1-a-3, basic-dc1-a-4, basic-dc1-a-5",
            ),
            Expect::Requeue(Some(REQUEUE_WHILE_RUNNING)),
        ],
    );
    let marked: Vec<MemberFacts> = (0..6)
        .map(|i| member("a", i, Some(&new), Some(if i < 3 { old.as_str() } else { keys::NEVER_CLEANED_UP })))
        .collect();
    check(
        "then cleaned once, whole",
        &snapshot(marked, vec![]),
        &[
            Expect::Submits((0..6).map(|i| svc("a", i)).collect()),
            Expect::Progressing(true, "CleanupRunning", "3 nodes to be cleaned once, whole (NeverCleanedUp"),
        ],
    );
    // The last joiner's Service seen only after the others of its burst were marked: it shows
    // their ring, so it may have joined before them and handed them ranges. Not "alone".
    let late: Vec<MemberFacts> = (0..6)
        .map(|i| {
            let last = match i {
                0..3 => Some(old.as_str()),
                3 | 4 => Some(keys::NEVER_CLEANED_UP),
                _ => None,
            };
            member("a", i, Some(&new), last)
        })
        .collect();
    check(
        "a joiner seen after the others of its burst were marked: marked too",
        &snapshot(late, vec![]),
        &[Expect::Submits(vec![]), Expect::Seeds(vec![(svc("a", 5), SeedReason::JoinedTogether)])],
    );
    // A joiner alone on a ring that the marked ones do not show (it joined after they were
    // marked and their cleanup recorded them for another ring): alone, seeded.
    let later_ring: Vec<MemberFacts> = (0..4)
        .map(|i| {
            let last = match i {
                0..3 => Some(new.as_str()),
                _ => None,
            };
            member("a", i, Some(&h(4)), last)
        })
        .collect();
    check(
        "a lone joiner beside no marked member: seeded",
        &snapshot(later_ring, vec![]),
        &[Expect::Seeds(vec![(svc("a", 3), SeedReason::Joined)])],
    );
    let never_recorded: Vec<MemberFacts> = (0..3).map(|i| member("a", i, Some(&new), None)).collect();
    check(
        "installed on a cluster that never recorded a cleanup",
        &snapshot(never_recorded, vec![]),
        &[
            Expect::Submits(vec![]),
            Expect::Seeds((0..3).map(|i| (svc("a", i), SeedReason::JoinedTogether)).collect()),
        ],
    );
}

/// Runs decide → apply on an in-memory model, the submitted task cleaning its nodes in the next
/// step: a scale-out ends with every old node cleaned once, by one task, no new node cleaned.
#[test]
fn scale_out_walk_reaches_quiet_with_one_task() {
    let (old, new) = (h(3), h(6));
    let mut members = one_by_one(&old, &new);
    let mut tasks: Vec<TaskFacts> = Vec::new();
    let mut cleaned = Vec::new();
    for _step in 0..10 {
        let annotate = |members: &mut Vec<MemberFacts>, service: &str, hash: &str| {
            let m = members.iter_mut().find(|m| m.service == service).unwrap();
            m.annotations.insert(keys::LAST_CLEANED_UP_TOKEN_RING_HASH.into(), hash.into());
        };
        // The task submitted in the previous step runs and records its nodes.
        for t in tasks.iter_mut().filter(|t| t.state == TaskState::Pending) {
            t.state = TaskState::Completed;
            t.completed_at = Some(now());
            for node in std::mem::take(&mut cleaned_by_task(t)) {
                cleaned.push(node.clone());
                annotate(&mut members, &node, t.ring_hash.as_deref().unwrap());
            }
        }
        let plan = decide(&snapshot(members.clone(), tasks.clone()));
        if plan.actions.is_empty() {
            assert!(!plan.progressing.status, "{plan:#?}");
            assert_eq!(plan.progressing.message, "all 6 nodes are clean");
            cleaned.sort();
            assert_eq!(cleaned, nodes(&[("a", 0), ("a", 1), ("a", 2)]));
            assert_eq!(tasks.len(), 1, "one task for the ring change");
            return;
        }
        for action in plan.actions {
            match action {
                Action::SeedLastCleaned { service, hash, .. } => annotate(&mut members, &service, &hash),
                Action::SubmitCleanupTask { name, nodes, ring_hash, .. } => {
                    let mut t = task(&name, TaskState::Pending, Some(&ring_hash));
                    t.progress = Some(nodes.join(","));
                    tasks.push(t);
                }
                Action::RecordOwnership { .. } => unreachable!("ownership is not read here"),
            }
        }
    }
    panic!("no quiet state after 10 steps");
}

/// The walk above keeps a task's nodes in its progress field.
fn cleaned_by_task(task: &TaskFacts) -> Vec<String> {
    task.progress.as_deref().map(|p| p.split(',').map(str::to_owned).collect()).unwrap_or_default()
}

#[test]
fn scale_in() {
    let (six, three) = (h(6), h(3));
    let all: Vec<MemberFacts> = (0..6).map(|i| member("a", i, Some(&six), Some(&six))).collect();
    let recorded = uids(&all);
    let remaining = |record: Option<(&str, &[String])>| -> Vec<MemberFacts> {
        (0..3)
            .map(|i| {
                let m = member("a", i, Some(&three), Some(&six));
                match record {
                    Some((ring, uids)) => with_record(m, ring, uids),
                    None => m,
                }
            })
            .collect()
    };
    let every = nodes(&[("a", 0), ("a", 1), ("a", 2)]);
    let seeded_only_left: Vec<_> = (0..3).map(|i| (svc("a", i), SeedReason::OnlyNodesLeft)).collect();
    check(
        "nodes only left: seeded, not cleaned",
        &snapshot(remaining(Some((&six, &recorded))), vec![]),
        &[
            Expect::Submits(vec![]),
            Expect::Seeds(seeded_only_left.clone()),
            Expect::Progressing(false, "AsExpected", "all 3 nodes are clean"),
        ],
    );
    check(
        "no record (cleaned by scylla-operator): cleaned",
        &snapshot(remaining(None), vec![]),
        &[Expect::Submits(every.clone()), Expect::Seeds(vec![])],
    );
    check(
        "record for another ring: cleaned",
        &snapshot(remaining(Some((&h(5), &recorded))), vec![]),
        &[Expect::Submits(every.clone()), Expect::Seeds(vec![])],
    );
    let mut multi_dc = snapshot(remaining(Some((&six, &recorded))), vec![]);
    multi_dc.cluster.single_datacenter = false;
    check(
        "external seeds (nodes we cannot see): cleaned",
        &multi_dc,
        &[Expect::Submits(every.clone()), Expect::Seeds(vec![])],
    );
    // 6 → 5 → 6: same names, but node 5 is a new Service with new tokens.
    let mut back_to_six: Vec<MemberFacts> =
        (0..5).map(|i| with_record(member("a", i, Some(&h(7)), Some(&six)), &six, &recorded)).collect();
    let mut reborn = member("a", 5, Some(&h(7)), None);
    reborn.uid = Some("uid-a-5-again".into());
    back_to_six.push(reborn);
    check(
        "a node left and another joined under the same name: cleaned",
        &snapshot(back_to_six, vec![]),
        &[
            Expect::Submits((0..5).map(|i| svc("a", i)).collect()),
            Expect::Seeds(vec![(svc("a", 5), SeedReason::Joined)]),
        ],
    );
    let mut unsettled = remaining(Some((&six, &recorded)));
    unsettled[2].annotations.insert(keys::CURRENT_TOKEN_RING_HASH.into(), h(4));
    check(
        "members disagree on the ring: cleaned",
        &snapshot(unsettled, vec![]),
        &[Expect::Seeds(vec![]), Expect::Submits(every.clone())],
    );
    let same_members = remaining(Some((&six, &uids(&remaining(None)))));
    check(
        "same members, ring changed: cleaned",
        &snapshot(same_members, vec![]),
        &[Expect::Seeds(vec![]), Expect::Submits(every)],
    );
}

#[test]
fn tasks_queued_running_failed_and_retried() {
    let (old, new) = (h(1), h(2));
    let three = || -> Vec<MemberFacts> { (0..3).map(|i| member("a", i, Some(&new), Some(&old))).collect() };
    let every = nodes(&[("a", 0), ("a", 1), ("a", 2)]);
    type Case = (&'static str, Vec<TaskFacts>, Vec<Expect>);
    let cases: Vec<Case> = vec![
        (
            "a task runs: nothing more is submitted",
            vec![TaskFacts {
                progress: Some("1/3".into()),
                ..task("basic-cleanup-1", TaskState::InProgress, Some(&new))
            }],
            vec![
                Expect::NoAction,
                Expect::Progressing(
                    true,
                    "CleanupRunning",
                    "3 of 3 nodes need cleanup; cleanup task basic-cleanup-1 is running, 1/3 nodes done",
                ),
                Expect::Requeue(Some(REQUEUE_WHILE_RUNNING)),
            ],
        ),
        (
            "a manual task is queued: it is waited for, no duplicate",
            vec![TaskFacts {
                automatic: false,
                waiting_for: Some("ScyllaCluster scylla/basic: waiting for Available=True".into()),
                ..task("by-hand", TaskState::Pending, None)
            }],
            vec![
                Expect::NoAction,
                Expect::Progressing(
                    true,
                    "WaitingForPreconditions",
                    "cleanup task by-hand is queued: ScyllaCluster scylla/basic: waiting for Available=True",
                ),
            ],
        ),
        (
            "the last task completed yet nodes need cleanup (ring moved): a new task",
            vec![TaskFacts {
                completed_at: Some(now()),
                ..task("basic-cleanup-1", TaskState::Completed, Some(&old))
            }],
            vec![Expect::Submits(every.clone()), Expect::Degraded(false, "AsExpected", "")],
        ),
        (
            "failed 1 minute ago, a retry may help: wait for the backoff",
            vec![failed_task(&new, "NodeFailed", 1)],
            vec![
                Expect::Submits(vec![]),
                Expect::Degraded(
                    true,
                    "CleanupTaskFailed",
                    "cleanup task basic-cleanup-1 failed: cleanup failed on 1 of 3 nodes: basic-dc1-a-0 (keyspace ks1: Can not perform cleanup operation when topology changes) (a new one follows in 240s)",
                ),
                Expect::Progressing(true, "WaitingForPreconditions", "the next cleanup task follows in 240s"),
                Expect::Requeue(Some(Duration::from_secs(240))),
            ],
        ),
        (
            "failed 6 minutes ago: retried",
            vec![failed_task(&new, "NodeFailed", 6)],
            vec![
                Expect::Contains(Action::SubmitCleanupTask {
                    name: format!("basic-cleanup-{}", now().as_second()),
                    nodes: every.clone(),
                    per_node: Vec::new(),
                    ring_hash: new.clone(),
                    retry_of: Some("basic-cleanup-1".into()),
                }),
                Expect::Degraded(false, "AsExpected", ""),
            ],
        ),
        (
            "failed on bad input: no retry until a person deletes the task",
            vec![failed_task(&new, BAD_INPUT, 600)],
            vec![
                Expect::Submits(vec![]),
                Expect::Degraded(
                    true,
                    "CleanupTaskFailed",
                    "no retry can fix it: cleanup failed on 1 of 3 nodes",
                ),
                Expect::Degraded(
                    true,
                    "CleanupTaskFailed",
                    "fix the cause, then delete MaintenanceTask scylla/basic-cleanup-1",
                ),
            ],
        ),
        (
            "failed for a ring that moved on: a new task at once",
            vec![failed_task(&h(9), BAD_INPUT, 0)],
            vec![Expect::Submits(every.clone())],
        ),
        (
            "an older failure followed by a success does not hold anything back",
            vec![
                failed_task(&new, BAD_INPUT, 60),
                TaskFacts {
                    completed_at: Some(now() - jiff::SignedDuration::from_mins(30)),
                    ..task("basic-cleanup-2", TaskState::Completed, Some(&old))
                },
            ],
            vec![Expect::Submits(every.clone()), Expect::Degraded(false, "AsExpected", "")],
        ),
    ];
    for (name, tasks, expectations) in cases {
        check(name, &snapshot(three(), tasks), &expectations);
    }
}

#[test]
fn automatic_task_names_fit_and_differ_by_time() {
    let name = automatic_task_name("basic", now());
    assert_eq!(name, format!("basic-cleanup-{}", now().as_second()));
    let long = "c".repeat(80);
    let a = automatic_task_name(&long, now());
    let b = automatic_task_name(&long, now() + jiff::SignedDuration::from_secs(1));
    assert!(a.len() <= 63 && b.len() <= 63, "{a} {b}");
    assert_ne!(a, b);
}

#[test]
fn each_precondition_failing_in_turn_blocks_new_tasks_only() {
    let (old, new) = (h(1), h(2));
    let members = || vec![member("a", 0, Some(&new), Some(&old)), member("a", 1, Some(&new), None)];
    type Breaker = fn(&mut ClusterFacts);
    let cases: Vec<(&str, Breaker, &str)> = vec![
        (
            "generation not observed",
            |c| c.observed_generation = Some(2),
            "waiting for scylla-operator to observe generation 3 (status.observedGeneration is 2)",
        ),
        ("observedGeneration unset", |c| c.observed_generation = None, "status.observedGeneration is unset"),
        (
            "StatefulSets rolling",
            |c| c.conditions[3].status = "True".into(),
            "waiting for StatefulSetControllerProgressing to clear",
        ),
        (
            "not available",
            |c| {
                c.conditions[0].status = "False".into();
                c.conditions[0].reason = "MembersNotReady".into();
            },
            "waiting for Available=True (is False: MembersNotReady)",
        ),
        (
            "available unknown",
            |c| {
                c.conditions.remove(0);
            },
            "waiting for Available=True (condition not set yet)",
        ),
        ("degraded", |c| c.conditions[2].status = "True".into(), "waiting for Degraded=False (is True)"),
        (
            "degraded unknown",
            |c| {
                c.conditions.remove(2);
            },
            "waiting for Degraded=False (condition not set yet)",
        ),
    ];
    for (name, breaker, message) in cases {
        let mut s = snapshot(members(), vec![]);
        breaker(&mut s.cluster);
        check(
            name,
            &s,
            &[
                Expect::Submits(vec![]),
                // Seeding a new node never waits: late seeding could hide stale data.
                Expect::Seeds(vec![(svc("a", 1), SeedReason::Joined)]),
                Expect::Progressing(true, "WaitingForPreconditions", message),
                Expect::Degraded(false, "AsExpected", ""),
            ],
        );
    }
    // Degraded only because of our own condition (copied up by scylla-operator): go on.
    let mut s = snapshot(members(), vec![]);
    s.cluster.conditions[2].status = "True".into();
    s.cluster.conditions.push(condition(DEGRADED, "True"));
    check("degraded by us only", &s, &[Expect::Submits(vec![svc("a", 0)])]);
    s.cluster.conditions.push(condition("StatefulSetControllerDegraded", "True"));
    check("degraded by us and others", &s, &[Expect::Submits(vec![])]);
}

/// A ring that just changed gets no task before it has been quiet; members that disagree (a
/// sidecar behind, a node joining) hold it back longer, but not for ever. The pass asks to be
/// repeated when the wait ends.
#[test]
fn a_burst_of_ring_changes_waits_for_a_quiet_ring() {
    let (old, new) = (h(3), h(6));
    let agreeing = one_by_one(&old, &new);
    let mut behind = agreeing.clone();
    // An old node's sidecar still reports the old ring: it is not known to need cleanup yet.
    behind[1] = member("a", 1, Some(&old), Some(&old));
    let changed = |secs_ago: i64, members: &Vec<MemberFacts>| Snapshot {
        ring_quiet: RingQuiet {
            unchanged_since: now() - jiff::SignedDuration::from_secs(secs_ago),
            period: Duration::from_secs(10),
        },
        ..snapshot(members.clone(), vec![])
    };
    let waiting = "waiting for the ring to stay unchanged for 10s";
    let joined = vec![(svc("a", 5), SeedReason::Joined)];
    check(
        "just changed",
        &changed(0, &agreeing),
        &[
            Expect::Submits(vec![]),
            // Joined nodes are seeded at once, whatever the ring does next.
            Expect::Seeds(joined),
            Expect::Progressing(true, "WaitingForPreconditions", waiting),
            Expect::Requeue(Some(Duration::from_secs(10))),
        ],
    );
    check(
        "quiet for 7 s",
        &changed(7, &agreeing),
        &[Expect::Submits(vec![]), Expect::Requeue(Some(Duration::from_secs(3)))],
    );
    check(
        "quiet for 10 s",
        &changed(10, &agreeing),
        &[Expect::Submits(nodes(&[("a", 0), ("a", 1), ("a", 2)]))],
    );
    check(
        "one sidecar behind",
        &changed(30, &behind),
        &[
            Expect::Submits(vec![]),
            Expect::Progressing(
                true,
                "WaitingForPreconditions",
                "waiting for every node to report the same ring",
            ),
            Expect::Requeue(Some(Duration::from_secs(90))),
        ],
    );
    check(
        "one sidecar behind for good",
        &changed(120, &behind),
        &[Expect::Submits(nodes(&[("a", 0), ("a", 2)]))],
    );
}

#[test]
fn bootstrapping_node_blocks_nobody() {
    let (old, new) = (h(1), h(2));
    let members = vec![
        member("a", 0, Some(&new), Some(&old)),
        member("b", 0, Some(&new), Some(&old)),
        member("b", 1, None, None),
    ];
    check(
        "bootstrapping",
        &snapshot(members, vec![]),
        &[
            Expect::Submits(vec![svc("a", 0), svc("b", 0)]),
            Expect::Seeds(vec![]),
            Expect::Progressing(
                true,
                "CleanupRunning",
                "1 node bootstrapping (no ring hash yet, not waited for once the ring has been quiet for 120s): basic-dc1-b-1",
            ),
        ],
    );
}

#[test]
fn malformed_or_missing_annotations() {
    let (old, new) = (h(1), h(2));
    let good = || member("b", 0, Some(&new), Some(&old));
    let cases: Vec<(&str, MemberFacts, &str)> = vec![
        (
            "current hash malformed",
            member("a", 0, Some("not-a-hash"), Some(&old)),
            "annotation internal.scylla-operator.scylladb.com/current-token-ring-hash on Service scylla/basic-dc1-a-0 is not a token-ring hash: \"not-a-hash\"",
        ),
        (
            "last-cleaned malformed",
            member("a", 0, Some(&new), Some("")),
            "annotation internal.scylla-operator.scylladb.com/last-cleaned-up-token-ring-hash on Service scylla/basic-dc1-a-0 is neither a token-ring hash nor NeverCleanedUp: \"\"; set it to NeverCleanedUp",
        ),
        (
            "rack label missing",
            MemberFacts { rack: None, ..member("a", 0, Some(&new), Some(&old)) },
            "Service scylla/basic-dc1-a-0 lacks label scylla/datacenter or scylla/rack",
        ),
    ];
    for (name, bad, message) in cases {
        check(
            name,
            &snapshot(vec![bad, good()], vec![]),
            &[
                // The bad node is left out; the others go on.
                Expect::Submits(vec![svc("b", 0)]),
                Expect::Seeds(vec![]),
                Expect::Degraded(true, "InvalidAnnotation", message),
            ],
        );
    }
    check(
        "last-cleaned missing: seeded with the current hash",
        &snapshot(vec![member("a", 0, Some(&new), None)], vec![]),
        &[Expect::Seeds(vec![(svc("a", 0), SeedReason::Joined)]), Expect::Submits(vec![])],
    );
    check(
        "NeverCleanedUp: cleaned once",
        &snapshot(vec![member("a", 0, Some(&new), Some(keys::NEVER_CLEANED_UP))], vec![]),
        &[Expect::Submits(vec![svc("a", 0)])],
    );
    check(
        "our own record unreadable: treated as unknown (cleaned)",
        &snapshot(
            vec![{
                let mut m = member("a", 0, Some(&new), Some(&old));
                m.annotations.insert(keys::CLEANED_FOR_MEMBERS.into(), "{".into());
                m
            }],
            vec![],
        ),
        &[Expect::Submits(vec![svc("a", 0)]), Expect::Degraded(false, "AsExpected", "")],
    );
}

#[test]
fn concurrency_annotations_are_checked_here_and_applied_by_the_task() {
    let (old, new) = (h(1), h(2));
    let members = || -> Vec<MemberFacts> {
        ["a", "b"]
            .iter()
            .flat_map(|r| (0..2).map(move |i| (r, i)))
            .map(|(r, i)| member(r, i, Some(&new), Some(&old)))
            .collect()
    };
    let with = |pairs: &[(&str, &str)]| {
        let mut s = snapshot(members(), vec![]);
        for (k, v) in pairs {
            s.cluster.annotations.insert((*k).into(), (*v).into());
        }
        s
    };
    let every = nodes(&[("a", 0), ("a", 1), ("b", 0), ("b", 1)]);
    check(
        "valid bounds: one task for every node",
        &with(&[(keys::CLEANUP_MAX_PER_RACK, "2")]),
        &[Expect::Submits(every)],
    );
    for (key, value) in [
        (keys::CLEANUP_MAX_PER_RACK, "abc"),
        (keys::CLEANUP_MAX_PER_RACK, "0"),
        (keys::CLEANUP_MAX_PER_CLUSTER, "-1"),
        (keys::CLEANUP_MAX_PER_CLUSTER, " 2"),
    ] {
        let message =
            format!("annotation {key} on ScyllaCluster scylla/basic is not a positive integer: '{value}'");
        let plan = decide(&with(&[(key, value)]));
        assert!(submits(&plan).is_empty(), "{key}={value}: {plan:#?}");
        assert_eq!(plan.degraded.reason, "InvalidAnnotation");
        assert!(plan.degraded.message.contains(&message), "{}", plan.degraded.message);
        assert!(plan.progressing.message.contains("waiting for the invalid annotations"));
    }
}

#[test]
fn opt_out_and_agent_secret() {
    let (old, new) = (h(1), h(2));
    let members = || vec![member("a", 0, Some(&new), Some(&old)), member("a", 1, Some(&new), None)];
    let mut off = snapshot(members(), vec![]);
    off.cluster.annotations.insert(keys::MAINTENANCE_ENABLED.into(), "false".into());
    check(
        "opted out",
        &off,
        &[
            Expect::NoAction,
            Expect::Progressing(
                false,
                "Disabled",
                "groundskeeper.dev/maintenance-enabled=false on ScyllaCluster scylla/basic",
            ),
            Expect::Degraded(false, "Disabled", ""),
            Expect::Requeue(None),
        ],
    );
    let mut unclear = snapshot(members(), vec![]);
    unclear.cluster.annotations.insert(keys::MAINTENANCE_ENABLED.into(), "no".into());
    check(
        "opt-out unreadable: no new task",
        &unclear,
        &[
            Expect::Submits(vec![]),
            Expect::Seeds(vec![(svc("a", 1), SeedReason::Joined)]),
            Expect::Degraded(true, "InvalidAnnotation", "must be \"true\" or \"false\", not 'no'"),
        ],
    );
    let mut on = snapshot(members(), vec![]);
    on.cluster.annotations.insert(keys::MAINTENANCE_ENABLED.into(), "true".into());
    check("opted in explicitly", &on, &[Expect::Submits(vec![svc("a", 0)])]);

    let mut missing = snapshot(members(), vec![]);
    missing.agent_token = SecretState::Missing { name: "basic-auth-token".into() };
    check(
        "agent token Secret missing",
        &missing,
        &[
            Expect::Submits(vec![]),
            Expect::Seeds(vec![(svc("a", 1), SeedReason::Joined)]),
            Expect::Degraded(
                true,
                "AgentTokenSecretMissing",
                "Secret scylla/basic-auth-token (the Scylla Manager Agent token) does not exist",
            ),
            Expect::Progressing(
                true,
                "WaitingForPreconditions",
                "waiting for the agent token Secret scylla/basic-auth-token",
            ),
        ],
    );
    missing.agent_token = SecretState::MissingKey {
        name: "basic-auth-token".into(),
        key: keys::SCYLLA_AGENT_TOKEN_SECRET_KEY.into(),
    };
    check(
        "agent token key missing",
        &missing,
        &[
            Expect::Submits(vec![]),
            Expect::Degraded(true, "AgentTokenSecretMissing", "has no key auth-token.yaml"),
        ],
    );
}

#[test]
fn quiet_cluster() {
    let new = h(2);
    let members: Vec<MemberFacts> = (0..3).map(|i| member("a", i, Some(&new), Some(&new))).collect();
    check(
        "all clean",
        &snapshot(members, vec![]),
        &[
            Expect::NoAction,
            Expect::Progressing(false, "AsExpected", "all 3 nodes are clean"),
            Expect::Degraded(false, "AsExpected", ""),
            Expect::Requeue(None),
        ],
    );
}

#[test]
fn members_record_round_trips_and_orders_uids() {
    let record = MembersRecord { ring_hash: h(1), members: BTreeSet::from(["b".to_owned(), "a".to_owned()]) };
    let text = record.to_annotation();
    assert!(text.contains("\"members\":[\"a\",\"b\"]"), "{text}");
    assert_eq!(MembersRecord::from_annotation(&text), Some(record));
    assert!(looks_like_ring_hash(&h(1)));
    assert!(!looks_like_ring_hash("abc"));
    assert!(!looks_like_ring_hash(&h(1).replace('=', "!")));
}

/// scylla-operator 1.10+ cleans the cluster itself (its Job controller's condition is in the
/// status, or one of its cleanup Jobs exists): the ring-hash trigger submits nothing and seeds
/// nothing (NeverCleanedUp, missing or a stale hash alike: the annotation is scylla-operator's),
/// and its condition says so, naming the running Jobs and the nodes still due.
#[test]
fn beside_scylla_operators_cleanup_the_trigger_stands_back() {
    let (old, new) = (h(1), h(2));
    let scale_out = vec![
        member("a", 0, Some(&new), Some(&old)),
        member("a", 1, Some(&new), Some("NeverCleanedUp")),
        member("b", 0, Some(&new), None),
        member("b", 1, Some(&new), Some(&new)),
    ];
    let running = OperatorJob {
        name: format!("cleanup-{}", svc("a", 0)),
        node: svc("a", 0),
        ring_hash: Some(new.clone()),
        phase: JobPhase::Running,
    };
    let by_condition = |jobs: Vec<OperatorJob>| {
        let mut cluster = settled_cluster();
        cluster.conditions.push(condition("JobControllerProgressing", "False"));
        let types: Vec<String> = cluster.conditions.iter().map(|c| c.type_.clone()).collect();
        (cluster, OperatorCleanup::observed(types.iter().map(String::as_str), jobs))
    };
    let by_job_only = {
        let cluster = settled_cluster();
        let types: Vec<String> = cluster.conditions.iter().map(|c| c.type_.clone()).collect();
        (cluster, OperatorCleanup::observed(types.iter().map(String::as_str), vec![running.clone()]))
    };
    #[allow(clippy::type_complexity)] // a table of cases
    let cases: Vec<(&str, (ClusterFacts, OperatorCleanup), Vec<MemberFacts>, bool, Vec<&str>)> = vec![
        (
            "ring moved, no Job yet",
            by_condition(vec![]),
            scale_out.clone(),
            true,
            vec![
                "JobControllerProgressing",
                "nodes it has to clean: basic-dc1-a-0, basic-dc1-a-1",
                "until every node has both ring hashes, missing on: basic-dc1-b-0",
            ],
        ),
        (
            "its Job runs",
            by_condition(vec![running.clone()]),
            scale_out.clone(),
            true,
            vec!["its cleanup Jobs running: cleanup-basic-dc1-a-0"],
        ),
        (
            "seen by its Job alone",
            by_job_only,
            scale_out.clone(),
            true,
            vec!["its cleanup Job cleanup-basic-dc1-a-0 exists"],
        ),
        (
            "all clean",
            by_condition(vec![]),
            vec![member("a", 0, Some(&new), Some(&new))],
            false,
            vec!["stands back"],
        ),
    ];
    for (name, (cluster, operator), members, busy, says) in cases {
        let snapshot = Snapshot { cluster, scylla_operator: operator, ..snapshot(members, vec![]) };
        let plan = decide(&snapshot);
        assert!(plan.actions.is_empty(), "{name}: no task, no seeding: {plan:#?}");
        assert_eq!(plan.progressing.reason, SCYLLA_OPERATOR_CLEANS_UP, "{name}");
        assert_eq!(plan.progressing.status, busy, "{name}: {plan:#?}");
        for part in says {
            assert!(plan.progressing.message.contains(part), "{name}: {part:?} in {plan:#?}");
        }
        assert!(!plan.degraded.status, "{name}: standing back is no fault");
    }

    // Without any sign of scylla-operator's cleanup the same cluster gets a task as ever: b-0
    // joined on the ring a-1 was marked NeverCleanedUp for, so it is marked too, then the three
    // are cleaned.
    let plan = decide(&snapshot(scale_out.clone(), vec![]));
    let marks: Vec<_> = plan
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::SeedLastCleaned { service, hash, reason, .. } => {
                Some((service.clone(), hash.clone(), *reason))
            }
            _ => None,
        })
        .collect();
    assert_eq!(marks, vec![(svc("b", 0), keys::NEVER_CLEANED_UP.to_owned(), SeedReason::JoinedTogether)]);
    let mut marked = scale_out;
    marked[2] = member("b", 0, Some(&new), Some(keys::NEVER_CLEANED_UP));
    let plan = decide(&snapshot(marked, vec![]));
    assert_eq!(submits(&plan), nodes(&[("a", 0), ("a", 1), ("b", 0)]));
}

/// A suspension or a closed window (`holds`, as observe finds them) keeps the automatic cleanup
/// from being submitted at all, and the condition says why; the joined nodes are still seeded.
#[test]
fn a_held_cluster_gets_no_cleanup_task_and_says_why() {
    let (old, new) = (h(3), h(6));
    let mut held = snapshot(one_by_one(&old, &new), vec![]);
    held.holds = vec!["outside its maintenance windows: the next opens Sat 2026-11-28 22:00 CET".into()];
    let plan = decide(&held);
    assert!(submits(&plan).is_empty(), "{plan:#?}");
    let progressing = &plan.progressing;
    assert!(
        progressing.message.contains("automatic cleanup held: outside its maintenance windows"),
        "{}",
        progressing.message
    );
    assert!(progressing.message.contains("3 of 6 nodes need cleanup"), "{}", progressing.message);
    check("held", &held, &[Expect::Seeds(vec![(svc("a", 5), SeedReason::Joined)])]);
}
