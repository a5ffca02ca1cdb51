use std::collections::BTreeMap;

use super::*;
use crate::scylla::node_steps::to_start;
use crate::scylla::settings::Limits;
use groundskeeper_api::scylla::facts::ConditionFacts;

fn member(rack: &str, ordinal: u32) -> MemberFacts {
    MemberFacts {
        service: format!("sc-dc-{rack}-{ordinal}"),
        uid: Some(format!("uid-{rack}-{ordinal}")),
        datacenter: Some("dc".into()),
        rack: Some(rack.into()),
        address: None,
        annotations: BTreeMap::new(),
    }
}

fn condition(type_: &str, status: &str) -> ConditionFacts {
    ConditionFacts { type_: type_.into(), status: status.into(), ..ConditionFacts::default() }
}

fn settled() -> ClusterFacts {
    ClusterFacts {
        namespace: "ns".into(),
        name: "sc".into(),
        generation: Some(2),
        observed_generation: Some(2),
        conditions: vec![condition("Available", "True"), condition("Degraded", "False")],
        annotations: BTreeMap::new(),
        single_datacenter: true,
        spec_members: 3,
        status_members: Some(3),
    }
}

fn progress(name: &str, state: NodeState) -> NodeProgress {
    NodeProgress { name: name.into(), state, ..NodeProgress::default() }
}

#[test]
fn facts_say_exactly_what_a_cleanup_waits_for() {
    let present = SecretState::Present;
    assert_eq!(facts(None, &present), TargetFacts::Missing);
    assert_eq!(facts(Some(&settled()), &present), TargetFacts::Ready);

    let mut rolling = settled();
    rolling.observed_generation = Some(1);
    let mut bad_annotation = settled();
    bad_annotation.annotations.insert(keys::CLEANUP_MAX_PER_RACK.into(), "zero".into());
    let cases: Vec<(&str, ClusterFacts, SecretState, &str)> = vec![
        ("generation not observed", rolling, present.clone(), "observe generation 2"),
        ("bad concurrency annotation", bad_annotation, present.clone(), "cleanup-max-concurrent-per-rack"),
        (
            "no agent token",
            settled(),
            SecretState::Missing { name: "sc-auth-token".into() },
            "agent token Secret ns/sc-auth-token",
        ),
    ];
    for (name, cluster, secret, expected) in cases {
        match facts(Some(&cluster), &secret) {
            TargetFacts::Waiting { reason } => {
                assert!(reason.starts_with("ScyllaCluster ns/sc: "), "{name}: {reason}");
                assert!(reason.contains(expected), "{name}: {reason}");
            }
            other => panic!("{name}: {other:?}"),
        }
    }
}

#[test]
fn plan_orders_nodes_by_rack_and_ordinal_and_refuses_strangers() {
    let members = vec![member("b", 0), member("a", 10), member("a", 2)];
    let all = plan_nodes(&Cleanup::default(), &settled(), &members).unwrap();
    let names: Vec<&str> = all.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["sc-dc-a-2", "sc-dc-a-10", "sc-dc-b-0"]);
    assert!(all.iter().all(|n| n.state == NodeState::Pending));

    let some = Cleanup { nodes: vec!["sc-dc-b-0".into(), "sc-dc-a-10".into()], ..Cleanup::default() };
    let names: Vec<String> =
        plan_nodes(&some, &settled(), &members).unwrap().into_iter().map(|n| n.name).collect();
    assert_eq!(names, ["sc-dc-a-10", "sc-dc-b-0"], "cleaning order, not the order asked");

    let stranger = Cleanup { nodes: vec!["sc-dc-c-0".into()], ..Cleanup::default() };
    let err = plan_nodes(&stranger, &settled(), &members).unwrap_err();
    assert!(err.contains("spec.config.cleanup.nodes: sc-dc-c-0"), "{err}");
    assert!(err.contains("sc-dc-a-2, sc-dc-a-10, sc-dc-b-0"), "{err}");
    assert!(plan_nodes(&Cleanup::default(), &settled(), &[]).unwrap().is_empty());
}

#[test]
fn limits_come_from_the_task_then_the_cluster_then_one_per_rack() {
    let mut annotated = settled();
    annotated.annotations.insert(keys::CLEANUP_MAX_PER_RACK.into(), "2".into());
    annotated.annotations.insert(keys::CLEANUP_MAX_PER_CLUSTER.into(), "3".into());
    let mut broken = settled();
    broken.annotations.insert(keys::CLEANUP_MAX_PER_CLUSTER.into(), "-1".into());
    let own = Cleanup { max_concurrent_per_rack: Some(4), max_concurrent: Some(5), ..Cleanup::default() };
    let cases = [
        ("defaults", Cleanup::default(), settled(), (1, None)),
        ("annotations", Cleanup::default(), annotated.clone(), (2, Some(3))),
        ("the task wins", own.clone(), annotated, (4, Some(5))),
        ("unreadable annotations: one at a time", Cleanup::default(), broken.clone(), (1, Some(1))),
        ("unreadable annotations, task bounds", own, broken, (4, Some(5))),
    ];
    for (name, cleanup, cluster, (per_rack, per_cluster)) in cases {
        assert_eq!(limits(&cleanup, &cluster), Limits { per_rack, per_cluster }, "{name}");
    }
}

#[test]
fn to_start_respects_rack_and_cluster_bounds() {
    use NodeState::*;
    let members = vec![member("a", 0), member("a", 1), member("a", 2), member("b", 0), member("b", 1)];
    let racks = racks(&members);
    let nodes = |states: [NodeState; 5]| -> Vec<NodeProgress> {
        members.iter().zip(states).map(|(m, s)| progress(&m.service, s)).collect()
    };
    let bound = |per_rack, per_cluster| Limits { per_rack, per_cluster };
    let cases: Vec<(&str, Vec<NodeProgress>, Limits, Vec<usize>)> = vec![
        ("one per rack", nodes([Pending; 5]), bound(1, None), vec![0, 3]),
        ("two per rack", nodes([Pending; 5]), bound(2, None), vec![0, 1, 3, 4]),
        ("cluster bound first come", nodes([Pending; 5]), bound(2, Some(3)), vec![0, 1, 3]),
        ("running ones count", nodes([Running, Pending, Pending, Pending, Pending]), bound(1, None), vec![3]),
        (
            "finished ones do not",
            nodes([Succeeded, Failed, Pending, Running, Pending]),
            bound(1, None),
            vec![2],
        ),
        ("cluster full", nodes([Running, Pending, Pending, Running, Pending]), bound(2, Some(2)), vec![]),
        (
            "nothing pending",
            nodes([Succeeded, Skipped, Succeeded, Failed, Succeeded]),
            bound(9, None),
            vec![],
        ),
    ];
    for (name, nodes, limits, expected) in cases {
        assert_eq!(to_start(&nodes, &racks, limits), expected, "{name}");
    }
    let stranger = vec![progress("gone", Pending), progress("sc-dc-a-0", Pending)];
    assert_eq!(to_start(&stranger, &racks, bound(1, None)), vec![1], "a node of no known rack never starts");
}

/// A Job that succeeded (exit 0) whose result cannot be read: the node counts as cleaned, the
/// node's message says what is not known, and the ownership record is not written from it.
#[test]
fn a_succeeded_job_without_a_readable_result_is_cleaned_with_details_unknown() {
    use crate::jobs::{Finished, ResultError};
    let finished = |result| Finished { reason: "Completed".into(), message: String::new(), result };
    let job = |name: &str, state| JobObservation {
        namespace: "ns".into(),
        name: name.into(),
        labels: BTreeMap::new(),
        annotations: BTreeMap::new(),
        deleting: false,
        owner_uid: None,
        state,
    };
    let empty =
        ResultError::Empty { job: "ns/j".into(), pod: "p".into(), exit_code: 0, reason: "Completed".into() };
    let unread = job("j", JobState::Succeeded(finished(Err(empty))));
    match node_job(&unread) {
        NodeJob::Succeeded { keyspaces, message } => {
            assert!(keyspaces.is_empty());
            assert!(message.contains("which keyspaces is not known"), "{message}");
            assert!(message.contains("left no result"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert!(unreadable_result(std::slice::from_ref(&unread), "j").is_some());
    let result = groundskeeper_protocol::JobResult::new(
        groundskeeper_protocol::Report::Cleanup(Default::default()),
        groundskeeper_protocol::Outcome::Succeeded,
        "2026-01-01T00:00:00Z".into(),
        1,
    );
    let read = job("k", JobState::Succeeded(finished(Ok(result))));
    assert_eq!(unreadable_result(&[unread, read], "k"), None);
}

/// After a topology change, an automatic task's interrupted node is owed nothing when it is clean
/// for its current ring; nodes never interrupted, and nodes whose keyspaces the ownership rule
/// chose, are not judged by the ring hash.
#[test]
fn interrupted_nodes_clean_for_their_current_ring_are_no_longer_owed() {
    let hashes = |m: &mut MemberFacts, current: &str, last: &str| {
        m.annotations.insert(keys::CURRENT_TOKEN_RING_HASH.into(), current.into());
        m.annotations.insert(keys::LAST_CLEANED_UP_TOKEN_RING_HASH.into(), last.into());
    };
    let (mut a0, mut a1, mut b0, mut a2) = (member("a", 0), member("a", 1), member("b", 0), member("a", 2));
    hashes(&mut a0, "new", "new");
    hashes(&mut a1, "new", "new");
    hashes(&mut b0, "new", "new");
    hashes(&mut a2, "new", "old");
    let interrupted = |name: &str, times: i32| NodeProgress {
        name: name.into(),
        state: NodeState::Pending,
        interruptions: times,
        ..NodeProgress::default()
    };
    let nodes = vec![
        interrupted(&a0.service, 1),
        interrupted(&a1.service, 1),
        interrupted(&b0.service, 0),
        interrupted(&a2.service, 2),
    ];
    let cleanup = Cleanup {
        keyspaces: vec![],
        nodes: vec![],
        max_concurrent_per_rack: None,
        max_concurrent: None,
        per_node: BTreeMap::from([(
            a1.service.clone(),
            groundskeeper_api::validate::NodeWork { keyspaces: vec!["ks".into()], mark_node_clean: false },
        )]),
    };
    let owed_nothing = no_longer_owed(&nodes, &cleanup, &[a0.clone(), a1, b0, a2]);
    assert_eq!(owed_nothing, BTreeSet::from([a0.service]));
}
