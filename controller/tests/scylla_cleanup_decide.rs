//! Table tests of the cleanup decision: snapshot in, plan out.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use groundskeeper_controller::triggers::scylla_cleanup::decide::*;
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
        annotations,
    }
}

fn with_record(mut m: MemberFacts, ring: &str, uids: &[String]) -> MemberFacts {
    let record = MembersRecord {
        ring_hash: ring.to_owned(),
        members: uids.iter().cloned().collect(),
    };
    m.annotations
        .insert(keys::CLEANED_FOR_MEMBERS.to_owned(), record.to_annotation());
    m
}

fn job(node: &str, ring: &str, state: JobState) -> JobFacts {
    JobFacts {
        name: format!("cleanup-{node}"),
        node: node.to_owned(),
        ring_hash: Some(ring.to_owned()),
        state,
        failure_reported: false,
    }
}

fn failed(retryable: bool, minutes_ago: i64) -> JobState {
    JobState::Failed {
        message: "keyspace ks1: Can not perform cleanup operation when topology changes".into(),
        retryable,
        finished_at: Some(now() - jiff::SignedDuration::from_mins(minutes_ago)),
    }
}

fn snapshot(members: Vec<MemberFacts>, jobs: Vec<JobFacts>) -> Snapshot {
    Snapshot {
        cluster: settled_cluster(),
        members,
        jobs,
        agent_token: SecretState::Present,
        findings: Vec::new(),
        now: now(),
    }
}

fn create(rack: &str, ordinal: u32, ring: &str) -> Action {
    Action::CreateCleanupJob {
        service: svc(rack, ordinal),
        hash: ring.to_owned(),
        datacenter: "dc1".into(),
        rack: rack.into(),
    }
}

fn creates(plan: &Plan) -> Vec<String> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::CreateCleanupJob { service, .. } => Some(service.clone()),
            _ => None,
        })
        .collect()
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
    Creates(Vec<String>),
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
            Expect::Creates(wanted) => assert_eq!(&creates(&plan), wanted, "{name}: creates, plan {plan:#?}"),
            Expect::Seeds(wanted) => assert_eq!(&seeds(&plan), wanted, "{name}: seeds, plan {plan:#?}"),
            Expect::Contains(action) => {
                assert!(
                    plan.actions.contains(action),
                    "{name}: wanted {action:?} in {plan:#?}"
                )
            }
            Expect::NoAction => assert!(plan.actions.is_empty(), "{name}: wanted no action, {plan:#?}"),
            Expect::Progressing(status, reason, text) => {
                let c = &plan.progressing;
                assert_eq!(
                    (c.status, c.reason.as_str()),
                    (*status, *reason),
                    "{name}: {c:#?}"
                );
                assert!(c.message.contains(text), "{name}: {:?} lacks {text:?}", c.message);
            }
            Expect::Degraded(status, reason, text) => {
                let c = &plan.degraded;
                assert_eq!(
                    (c.status, c.reason.as_str()),
                    (*status, *reason),
                    "{name}: {c:#?}"
                );
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
    // One rack: the default bound lets one cleanup run at a time.
    let one_rack: Vec<MemberFacts> = (0..6)
        .map(|i| member("a", i, Some(&new), (i < 3).then_some(old.as_str())))
        .collect();
    let record = MembersRecord {
        ring_hash: new.clone(),
        members: uids(&one_rack).into_iter().collect(),
    };
    check(
        "one rack",
        &snapshot(one_rack, vec![]),
        &[
            Expect::Creates(vec![svc("a", 0)]),
            Expect::Seeds((3..6).map(|i| (svc("a", i), SeedReason::Joined)).collect()),
            Expect::Contains(Action::SeedLastCleaned {
                service: svc("a", 3),
                hash: new.clone(),
                members: Some(record),
                reason: SeedReason::Joined,
            }),
            Expect::Progressing(true, "CleanupRunning", "3 of 6 nodes need cleanup"),
            Expect::Progressing(true, "CleanupRunning", "2 waiting for a free slot"),
            Expect::Degraded(false, "AsExpected", ""),
        ],
    );
    // Three racks of one node each, scaled to two each: one cleanup per rack at once.
    let three_racks: Vec<MemberFacts> = ["a", "b", "c"]
        .iter()
        .flat_map(|r| {
            [
                member(r, 0, Some(&new), Some(&old)),
                member(r, 1, Some(&new), None),
            ]
        })
        .collect();
    check(
        "three racks",
        &snapshot(three_racks, vec![]),
        &[
            Expect::Creates(vec![svc("a", 0), svc("b", 0), svc("c", 0)]),
            Expect::Contains(create("a", 0, &new)),
            Expect::Seeds(
                ["a", "b", "c"]
                    .iter()
                    .map(|r| (svc(r, 1), SeedReason::Joined))
                    .collect(),
            ),
        ],
    );
}

/// Runs decide → apply on an in-memory model until nothing is left to do, checking the bounds
/// at every step: a scale-out ends with every old node cleaned once, no new node cleaned.
#[test]
fn scale_out_walk_reaches_quiet_within_bounds() {
    let (old, new) = (h(3), h(6));
    let mut members: Vec<MemberFacts> = (0..6)
        .map(|i| member("a", i, Some(&new), (i < 3).then_some(old.as_str())))
        .collect();
    let mut jobs: Vec<JobFacts> = Vec::new();
    let mut cleaned = Vec::new();
    for _step in 0..50 {
        // Jobs created in the previous step finish now.
        for j in &mut jobs {
            if j.state == JobState::Running {
                j.state = JobState::Succeeded;
            }
        }
        let plan = decide(&snapshot(members.clone(), jobs.clone()));
        if plan.actions.is_empty() {
            assert!(!plan.progressing.status, "{plan:#?}");
            assert_eq!(plan.progressing.message, "all 6 nodes are clean");
            let mut expected: Vec<String> = (0..3).map(|i| svc("a", i)).collect();
            expected.sort();
            cleaned.sort();
            assert_eq!(cleaned, expected);
            return;
        }
        for action in plan.actions {
            let annotate = |members: &mut Vec<MemberFacts>, service: &str, hash: &str| {
                let m = members.iter_mut().find(|m| m.service == service).unwrap();
                m.annotations
                    .insert(keys::LAST_CLEANED_UP_TOKEN_RING_HASH.into(), hash.into());
            };
            match action {
                Action::SeedLastCleaned { service, hash, .. } => annotate(&mut members, &service, &hash),
                Action::RecordCleaned { service, hash, .. } => {
                    cleaned.push(service.clone());
                    annotate(&mut members, &service, &hash)
                }
                Action::CreateCleanupJob { service, hash, .. } => {
                    jobs.push(job(&service, &hash, JobState::Running));
                    let running = jobs.iter().filter(|j| j.state == JobState::Running).count();
                    assert!(running <= 1, "rack bound exceeded: {jobs:?}");
                }
                Action::DeleteJob { job, .. } => jobs.retain(|j| j.name != job),
                other => panic!("unexpected {other:?}"),
            }
        }
    }
    panic!("no quiet state after 50 steps");
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
    let seeded_only_left: Vec<_> = (0..3).map(|i| (svc("a", i), SeedReason::OnlyNodesLeft)).collect();
    check(
        "nodes only left: seeded, not cleaned",
        &snapshot(remaining(Some((&six, &recorded))), vec![]),
        &[
            Expect::Creates(vec![]),
            Expect::Seeds(seeded_only_left.clone()),
            Expect::Progressing(false, "AsExpected", "all 3 nodes are clean"),
        ],
    );
    check(
        "no record (cleaned by scylla-operator): cleaned",
        &snapshot(remaining(None), vec![]),
        &[Expect::Creates(vec![svc("a", 0)]), Expect::Seeds(vec![])],
    );
    check(
        "record for another ring: cleaned",
        &snapshot(remaining(Some((&h(5), &recorded))), vec![]),
        &[Expect::Creates(vec![svc("a", 0)]), Expect::Seeds(vec![])],
    );
    let mut multi_dc = snapshot(remaining(Some((&six, &recorded))), vec![]);
    multi_dc.cluster.single_datacenter = false;
    check(
        "external seeds (nodes we cannot see): cleaned",
        &multi_dc,
        &[Expect::Creates(vec![svc("a", 0)]), Expect::Seeds(vec![])],
    );
    // 6 → 5 → 6: same names, but node 5 is a new Service with new tokens.
    let mut back_to_six: Vec<MemberFacts> = (0..5)
        .map(|i| with_record(member("a", i, Some(&h(7)), Some(&six)), &six, &recorded))
        .collect();
    let mut reborn = member("a", 5, Some(&h(7)), None);
    reborn.uid = Some("uid-a-5-again".into());
    back_to_six.push(reborn);
    check(
        "a node left and another joined under the same name: cleaned",
        &snapshot(back_to_six, vec![]),
        &[
            Expect::Creates(vec![svc("a", 0)]),
            Expect::Seeds(vec![(svc("a", 5), SeedReason::Joined)]),
        ],
    );
    // Not every member agrees on the ring yet: unsure, so clean.
    let mut unsettled = remaining(Some((&six, &recorded)));
    unsettled[2]
        .annotations
        .insert(keys::CURRENT_TOKEN_RING_HASH.into(), h(4));
    check(
        "members disagree on the ring: cleaned",
        &snapshot(unsettled, vec![]),
        &[Expect::Seeds(vec![]), Expect::Creates(vec![svc("a", 0)])],
    );
    let same_members = remaining(Some((&six, &uids(&remaining(None)))));
    check(
        "same members, ring changed: cleaned",
        &snapshot(same_members, vec![]),
        &[Expect::Seeds(vec![]), Expect::Creates(vec![svc("a", 0)])],
    );
}

#[test]
fn jobs_running_succeeded_failed_deleted_by_hand() {
    let (old, new) = (h(1), h(2));
    let three = || -> Vec<MemberFacts> { (0..3).map(|i| member("a", i, Some(&new), Some(&old))).collect() };
    let a0 = svc("a", 0);
    let job_a0 = format!("cleanup-{a0}");
    type Case = (&'static str, Vec<MemberFacts>, Vec<JobFacts>, Vec<Expect>);
    let cases: Vec<Case> = vec![
        (
            "running: nothing new in its rack",
            three(),
            vec![job(&a0, &new, JobState::Running)],
            vec![
                Expect::NoAction,
                Expect::Progressing(
                    true,
                    "CleanupRunning",
                    "3 of 3 nodes need cleanup; 1 running in rack a of datacenter dc1 (limit 1); 2 waiting for a free slot",
                ),
                Expect::Requeue(Some(REQUEUE_WHILE_RUNNING)),
            ],
        ),
        (
            "succeeded: recorded with the Job's hash",
            three(),
            vec![job(&a0, &new, JobState::Succeeded)],
            vec![
                Expect::Contains(Action::RecordCleaned {
                    service: a0.clone(),
                    hash: new.clone(),
                    job: job_a0.clone(),
                    members: Some(MembersRecord {
                        ring_hash: new.clone(),
                        members: uids(&three()).into_iter().collect(),
                    }),
                }),
                // The recorded node still counts as needing cleanup until its annotation changes,
                // but its slot is free: the next node starts.
                Expect::Creates(vec![svc("a", 1)]),
            ],
        ),
        (
            "succeeded and recorded: deleted",
            {
                let mut m = three();
                m[0] = member("a", 0, Some(&new), Some(&new));
                m
            },
            vec![job(&a0, &new, JobState::Succeeded)],
            vec![
                Expect::Contains(Action::DeleteJob {
                    job: job_a0.clone(),
                    reason: DeleteReason::Recorded,
                }),
                Expect::Creates(vec![svc("a", 1)]),
            ],
        ),
        (
            "failed, retryable, 1 minute ago: reported, kept, retried later",
            three(),
            vec![job(&a0, &new, failed(true, 1))],
            vec![
                Expect::Contains(Action::ReportJobFailure {
                    job: job_a0.clone(),
                    service: a0.clone(),
                    message: "keyspace ks1: Can not perform cleanup operation when topology changes".into(),
                }),
                Expect::Degraded(
                    true,
                    "CleanupJobFailed",
                    "cleanup Job cleanup-basic-dc1-a-0 failed: keyspace ks1: Can not perform cleanup operation when topology changes (retrying in 240s)",
                ),
                // A failed Job holds no slot: the next node of the rack goes on.
                Expect::Creates(vec![svc("a", 1)]),
                Expect::Requeue(Some(Duration::from_secs(30))),
            ],
        ),
        (
            "failed, retryable, after the backoff: deleted for a retry",
            three(),
            vec![JobFacts {
                failure_reported: true,
                ..job(&a0, &new, failed(true, 6))
            }],
            vec![
                Expect::Contains(Action::DeleteJob {
                    job: job_a0.clone(),
                    reason: DeleteReason::Retry,
                }),
                Expect::Degraded(true, "CleanupJobFailed", "retrying now"),
            ],
        ),
        (
            "failed, bad input: kept until a person deletes it",
            three(),
            vec![JobFacts {
                failure_reported: true,
                ..job(&a0, &new, failed(false, 600))
            }],
            vec![
                Expect::Creates(vec![svc("a", 1)]),
                Expect::Degraded(
                    true,
                    "CleanupJobFailed",
                    "fix the cause, then delete the Job to retry",
                ),
                Expect::Requeue(Some(REQUEUE_WHILE_RUNNING)),
            ],
        ),
        (
            "failed for a ring that moved on: deleted at once",
            three(),
            vec![JobFacts {
                failure_reported: true,
                ..job(&a0, &h(9), failed(false, 0))
            }],
            vec![Expect::Contains(Action::DeleteJob {
                job: job_a0.clone(),
                reason: DeleteReason::Outdated,
            })],
        ),
        (
            "deleted by hand while running: the node needs cleanup again",
            three(),
            vec![],
            vec![Expect::Creates(vec![a0.clone()])],
        ),
        (
            "Job of a member that is gone: deleted",
            three(),
            vec![job(&svc("a", 7), &new, JobState::Running)],
            vec![
                Expect::Contains(Action::DeleteJob {
                    job: format!("cleanup-{}", svc("a", 7)),
                    reason: DeleteReason::MemberGone,
                }),
                Expect::Creates(vec![a0.clone()]),
            ],
        ),
    ];
    for (name, members, jobs, expectations) in cases {
        check(name, &snapshot(members, jobs), &expectations);
    }
}

#[test]
fn ring_moved_during_a_running_job() {
    let (h0, h1, h2) = (h(10), h(11), h(12));
    let a0 = svc("a", 0);
    let job_name = format!("cleanup-{a0}");
    let node = |last: &str| vec![member("a", 0, Some(&h2), Some(last))];
    check(
        "running for the old ring: left to finish",
        &snapshot(node(&h0), vec![job(&a0, &h1, JobState::Running)]),
        &[
            Expect::NoAction,
            Expect::Progressing(true, "CleanupRunning", "1 of 1 nodes need cleanup"),
        ],
    );
    check(
        "its success records its own hash, not the new one",
        &snapshot(node(&h0), vec![job(&a0, &h1, JobState::Succeeded)]),
        &[Expect::Contains(Action::RecordCleaned {
            service: a0.clone(),
            hash: h1.clone(),
            job: job_name.clone(),
            members: None,
        })],
    );
    check(
        "then the Job goes",
        &snapshot(node(&h1), vec![job(&a0, &h1, JobState::Succeeded)]),
        &[
            Expect::Contains(Action::DeleteJob {
                job: job_name.clone(),
                reason: DeleteReason::Recorded,
            }),
            Expect::Creates(vec![]),
        ],
    );
    check(
        "then a Job for the new ring",
        &snapshot(node(&h1), vec![]),
        &[Expect::Contains(create("a", 0, &h2))],
    );
    check(
        "an old success never moves a clean node back",
        &snapshot(node(&h2), vec![job(&a0, &h1, JobState::Succeeded)]),
        &[Expect::Contains(Action::DeleteJob {
            job: job_name,
            reason: DeleteReason::Recorded,
        })],
    );
}

#[test]
fn each_precondition_failing_in_turn_blocks_new_jobs_only() {
    let (old, new) = (h(1), h(2));
    let members = || {
        vec![
            member("a", 0, Some(&new), Some(&old)),
            member("a", 1, Some(&new), None),
        ]
    };
    type Breaker = fn(&mut ClusterFacts);
    let cases: Vec<(&str, Breaker, &str)> = vec![
        (
            "generation not observed",
            |c| c.observed_generation = Some(2),
            "waiting for scylla-operator to observe generation 3 (status.observedGeneration is 2)",
        ),
        (
            "observedGeneration unset",
            |c| c.observed_generation = None,
            "status.observedGeneration is unset",
        ),
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
        (
            "degraded",
            |c| c.conditions[2].status = "True".into(),
            "waiting for Degraded=False (is True)",
        ),
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
                Expect::Creates(vec![]),
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
    check("degraded by us only", &s, &[Expect::Creates(vec![svc("a", 0)])]);
    s.cluster
        .conditions
        .push(condition("StatefulSetControllerDegraded", "True"));
    check("degraded by us and others", &s, &[Expect::Creates(vec![])]);
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
            Expect::Creates(vec![svc("a", 0), svc("b", 0)]),
            Expect::Seeds(vec![]),
            Expect::Progressing(
                true,
                "CleanupRunning",
                "1 node bootstrapping (no ring hash yet, not waited for): basic-dc1-b-1",
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
            MemberFacts {
                rack: None,
                ..member("a", 0, Some(&new), Some(&old))
            },
            "Service scylla/basic-dc1-a-0 lacks label scylla/datacenter or scylla/rack",
        ),
    ];
    for (name, bad, message) in cases {
        check(
            name,
            &snapshot(vec![bad, good()], vec![]),
            &[
                // No action on the bad node; the others go on.
                Expect::Creates(vec![svc("b", 0)]),
                Expect::Seeds(vec![]),
                Expect::Degraded(true, "InvalidAnnotation", message),
            ],
        );
    }
    check(
        "last-cleaned missing: seeded with the current hash",
        &snapshot(vec![member("a", 0, Some(&new), None)], vec![]),
        &[
            Expect::Seeds(vec![(svc("a", 0), SeedReason::Joined)]),
            Expect::Creates(vec![]),
        ],
    );
    check(
        "NeverCleanedUp: cleaned once",
        &snapshot(
            vec![member("a", 0, Some(&new), Some(keys::NEVER_CLEANED_UP))],
            vec![],
        ),
        &[Expect::Contains(create("a", 0, &new))],
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
        &[
            Expect::Creates(vec![svc("a", 0)]),
            Expect::Degraded(false, "AsExpected", ""),
        ],
    );
    let mut no_hash_job = job(&svc("a", 0), &new, JobState::Succeeded);
    no_hash_job.ring_hash = None;
    check(
        "Job without its hash annotation: not recorded",
        &snapshot(vec![member("a", 0, Some(&new), Some(&old))], vec![no_hash_job]),
        &[
            Expect::NoAction,
            Expect::Degraded(
                true,
                "InvalidObject",
                "Job scylla/cleanup-basic-dc1-a-0 has no annotation internal.scylla-operator.scylladb.com/cleanup-token-ring-hash",
            ),
        ],
    );
    let mut s = snapshot(vec![member("a", 0, Some(&new), Some(&old))], vec![]);
    s.findings.push(Finding {
        object: "Job scylla/cleanup-x".into(),
        message: "has no groundskeeper.dev/node label".into(),
    });
    check(
        "findings from observe",
        &s,
        &[Expect::Degraded(
            true,
            "InvalidObject",
            "Job scylla/cleanup-x: has no groundskeeper.dev/node label",
        )],
    );
}

#[test]
fn concurrency_limits_per_rack_and_per_cluster() {
    let (old, new) = (h(1), h(2));
    let members = || -> Vec<MemberFacts> {
        ["a", "b", "c"]
            .iter()
            .flat_map(|r| (0..3).map(move |i| (r, i)))
            .map(|(r, i)| member(r, i, Some(&new), Some(&old)))
            .collect()
    };
    let with = |pairs: &[(&str, &str)], jobs: Vec<JobFacts>| {
        let mut s = snapshot(members(), jobs);
        for (k, v) in pairs {
            s.cluster.annotations.insert((*k).into(), (*v).into());
        }
        s
    };
    check(
        "default: one per rack",
        &with(&[], vec![]),
        &[Expect::Creates(vec![svc("a", 0), svc("b", 0), svc("c", 0)])],
    );
    check(
        "two per rack",
        &with(&[(keys::CLEANUP_MAX_PER_RACK, "2")], vec![]),
        &[Expect::Creates(vec![
            svc("a", 0),
            svc("a", 1),
            svc("b", 0),
            svc("b", 1),
            svc("c", 0),
            svc("c", 1),
        ])],
    );
    check(
        "one in the cluster",
        &with(&[(keys::CLEANUP_MAX_PER_CLUSTER, "1")], vec![]),
        &[Expect::Creates(vec![svc("a", 0)])],
    );
    check(
        "cluster bound counts running Jobs of every rack",
        &with(
            &[(keys::CLEANUP_MAX_PER_CLUSTER, "2")],
            vec![job(&svc("c", 2), &new, JobState::Running)],
        ),
        &[
            Expect::Creates(vec![svc("a", 0)]),
            Expect::Progressing(true, "CleanupRunning", "2 running in the cluster (limit 2)"),
        ],
    );
    for (key, value) in [
        (keys::CLEANUP_MAX_PER_RACK, "abc"),
        (keys::CLEANUP_MAX_PER_RACK, "0"),
        (keys::CLEANUP_MAX_PER_CLUSTER, "-1"),
        (keys::CLEANUP_MAX_PER_CLUSTER, " 2"),
    ] {
        let message =
            format!("annotation {key} on ScyllaCluster scylla/basic is not a positive integer: '{value}'");
        let plan = decide(&with(&[(key, value)], vec![]));
        assert!(creates(&plan).is_empty(), "{key}={value}: {plan:#?}");
        assert_eq!(plan.degraded.reason, "InvalidAnnotation");
        assert!(
            plan.degraded.message.contains(&message),
            "{}",
            plan.degraded.message
        );
        assert!(
            plan.progressing
                .message
                .contains("waiting for the invalid annotations")
        );
    }
}

#[test]
fn opt_out_and_agent_secret() {
    let (old, new) = (h(1), h(2));
    let members = || {
        vec![
            member("a", 0, Some(&new), Some(&old)),
            member("a", 1, Some(&new), None),
        ]
    };
    let mut off = snapshot(members(), vec![job(&svc("a", 0), &new, JobState::Succeeded)]);
    off.cluster
        .annotations
        .insert(keys::MAINTENANCE_ENABLED.into(), "false".into());
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
    unclear
        .cluster
        .annotations
        .insert(keys::MAINTENANCE_ENABLED.into(), "no".into());
    check(
        "opt-out unreadable: no new Jobs",
        &unclear,
        &[
            Expect::Creates(vec![]),
            Expect::Seeds(vec![(svc("a", 1), SeedReason::Joined)]),
            Expect::Degraded(
                true,
                "InvalidAnnotation",
                "must be \"true\" or \"false\", not 'no'",
            ),
        ],
    );
    let mut on = snapshot(members(), vec![]);
    on.cluster
        .annotations
        .insert(keys::MAINTENANCE_ENABLED.into(), "true".into());
    check("opted in explicitly", &on, &[Expect::Creates(vec![svc("a", 0)])]);

    let mut missing = snapshot(members(), vec![]);
    missing.agent_token = SecretState::Missing {
        name: "basic-auth-token".into(),
    };
    check(
        "agent token Secret missing",
        &missing,
        &[
            Expect::Creates(vec![]),
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
            Expect::Creates(vec![]),
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
    let record = MembersRecord {
        ring_hash: h(1),
        members: BTreeSet::from(["b".to_owned(), "a".to_owned()]),
    };
    let text = record.to_annotation();
    assert!(text.contains("\"members\":[\"a\",\"b\"]"), "{text}");
    assert_eq!(MembersRecord::from_annotation(&text), Some(record));
    assert!(looks_like_ring_hash(&h(1)));
    assert!(!looks_like_ring_hash("abc"));
    assert!(!looks_like_ring_hash(&h(1).replace('=', "!")));
}
