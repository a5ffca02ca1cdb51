use std::collections::{BTreeMap, BTreeSet};

use groundskeeper_api::scylla::coexistence::Hold;

use super::*;

fn now() -> Timestamp {
    "2026-11-23T12:00:00Z".parse().unwrap()
}

fn racks(nodes: &[(&str, &str)]) -> BTreeMap<String, (String, String)> {
    nodes.iter().map(|(name, rack)| (name.to_string(), ("dc".to_string(), rack.to_string()))).collect()
}

fn node(name: &str, state: NodeState) -> NodeProgress {
    NodeProgress {
        name: name.into(),
        state,
        job: (state != NodeState::Pending).then(|| format!("t-{name}")),
        ..NodeProgress::default()
    }
}

fn one_per_rack() -> Limits {
    Limits { per_rack: 1, per_cluster: None }
}

fn job_name(index: usize) -> String {
    format!("t-{index}")
}

fn succeeded() -> NodeJob {
    NodeJob::Succeeded { keyspaces: vec!["app".into()], message: "cleaned 1 keyspace".into() }
}

fn failed(retryable: bool) -> NodeJob {
    NodeJob::Failed { message: "agent said 500".into(), retryable }
}

fn states(pass: &Pass) -> Vec<NodeState> {
    pass.nodes.iter().map(|n| n.state).collect()
}

#[test]
fn a_fresh_plan_starts_one_node_per_rack() {
    use NodeState::*;
    let nodes = vec![node("a0", Pending), node("a1", Pending), node("b0", Pending)];
    let racks = racks(&[("a0", "a"), ("a1", "a"), ("b0", "b")]);
    let pass = step(nodes, &BTreeMap::new(), &racks, one_per_rack(), job_name, now());
    assert_eq!(pass.start, vec![0, 2]);
    assert_eq!(states(&pass), vec![Running, Pending, Running]);
    assert_eq!(pass.nodes[0].job.as_deref(), Some("t-0"));
    assert_eq!(pass.nodes[2].job.as_deref(), Some("t-2"));
    assert!(pass.nodes[0].started_at.is_some());
    assert_eq!(pass.end, None);
}

/// (case, nodes before, their Jobs, states after, started, newly succeeded, newly failed)
type Case = (
    &'static str,
    Vec<NodeProgress>,
    Vec<(usize, NodeJob)>,
    Vec<NodeState>,
    Vec<usize>,
    Vec<usize>,
    Vec<usize>,
);

#[test]
fn nodes_follow_their_jobs() {
    use NodeState::*;
    let racks = racks(&[("a0", "a"), ("a1", "a"), ("b0", "b"), ("b1", "b")]);
    let cases: Vec<Case> = vec![
        (
            "a success frees the rack for the next node",
            vec![node("a0", Running), node("a1", Pending), node("b0", Running), node("b1", Pending)],
            vec![(0, succeeded()), (2, NodeJob::Running)],
            vec![Succeeded, Running, Running, Pending],
            vec![1],
            vec![0],
            vec![],
        ),
        (
            "a failure frees its rack too and is reported once",
            vec![node("a0", Running), node("a1", Pending), node("b0", Succeeded), node("b1", Running)],
            vec![(0, failed(true)), (2, succeeded()), (3, NodeJob::Running)],
            vec![Failed, Running, Succeeded, Running],
            vec![1],
            vec![],
            vec![0],
        ),
        (
            "a Job created before a restart is found again, not made twice",
            vec![node("a0", Pending), node("a1", Pending), node("b0", Pending), node("b1", Pending)],
            vec![(0, NodeJob::Running)],
            vec![Running, Pending, Running, Pending],
            vec![2],
            vec![],
            vec![],
        ),
        (
            "a Job deleted by hand runs again",
            vec![node("a0", Running), node("a1", Pending), node("b0", Succeeded), node("b1", Succeeded)],
            vec![(2, succeeded()), (3, succeeded())],
            vec![Running, Pending, Succeeded, Succeeded],
            vec![0],
            vec![],
            vec![],
        ),
    ];
    for (name, nodes, jobs, expected, start, newly_succeeded, newly_failed) in cases {
        let jobs: BTreeMap<usize, (String, NodeJob)> =
            jobs.into_iter().map(|(i, j)| (i, (format!("t-{i}"), j))).collect();
        let pass = step(nodes, &jobs, &racks, one_per_rack(), job_name, now());
        assert_eq!(states(&pass), expected, "{name}");
        assert_eq!(pass.start, start, "{name}");
        assert_eq!(pass.succeeded, newly_succeeded, "{name}");
        assert_eq!(pass.failed, newly_failed, "{name}");
    }
}

#[test]
fn a_node_that_left_is_skipped() {
    let nodes = vec![node("a0", NodeState::Pending), node("gone", NodeState::Pending)];
    let racks = racks(&[("a0", "a")]);
    let pass = step(nodes, &BTreeMap::new(), &racks, one_per_rack(), job_name, now());
    assert_eq!(states(&pass), vec![NodeState::Running, NodeState::Skipped]);
    assert!(pass.nodes[1].message.as_deref().unwrap().contains("left the cluster"));
}

#[test]
fn the_end_says_what_happened() {
    use NodeState::*;
    let racks = racks(&[("a0", "a"), ("b0", "b"), ("c0", "c")]);
    let done = |jobs: Vec<(usize, NodeJob)>| -> Option<End> {
        let nodes = vec![node("a0", Running), node("b0", Running), node("c0", Running)];
        let jobs: BTreeMap<usize, (String, NodeJob)> =
            jobs.into_iter().map(|(i, j)| (i, (format!("t-{i}"), j))).collect();
        step(nodes, &jobs, &racks, one_per_rack(), job_name, now()).end
    };
    assert_eq!(done(vec![(0, succeeded()), (1, NodeJob::Running), (2, succeeded())]), None);
    match done(vec![(0, succeeded()), (1, succeeded()), (2, succeeded())]) {
        Some(End::Completed { summary }) => {
            assert_eq!(summary, "cleaned 3 node(s): a0, b0, c0 (keyspaces app)")
        }
        other => panic!("{other:?}"),
    }
    match done(vec![(0, succeeded()), (1, failed(true)), (2, succeeded())]) {
        Some(End::Failed { code, description }) => {
            assert_eq!(code, NODE_FAILED);
            assert!(
                description.starts_with("cleanup failed on 1 of 3 nodes: b0 (agent said 500"),
                "{description}"
            );
            assert!(description.contains("kubectl logs job/t-1"), "{description}");
        }
        other => panic!("{other:?}"),
    }
    match done(vec![(0, failed(true)), (1, failed(false)), (2, succeeded())]) {
        Some(End::Failed { code, .. }) => {
            assert_eq!(code, BAD_INPUT, "one hopeless failure makes the task hopeless")
        }
        other => panic!("{other:?}"),
    }
    let all_gone =
        step(vec![node("x", Pending)], &BTreeMap::new(), &BTreeMap::new(), one_per_rack(), job_name, now());
    match all_gone.end {
        Some(End::Completed { summary }) => {
            assert_eq!(summary, "no node cleaned; 1 skipped (left the cluster)")
        }
        other => panic!("{other:?}"),
    }
    let _ = Skipped;
}

/// Beside scylla-operator's own cleanup: a node it cleans (or is about to) waits with the reason
/// as its message and the ring in `waitedForRing`, takes no place in its rack, and starts once it
/// is let go, or is skipped when scylla-operator has cleaned it for that ring meanwhile; a running
/// node of ours is followed whatever the holds say.
#[test]
fn a_held_node_waits_with_its_reason_and_leaves_its_rack_to_the_others() {
    use NodeState::*;
    let racks = racks(&[("a0", "a"), ("a1", "a"), ("b0", "b")]);
    let held = Holds {
        held: BTreeMap::from([(
            "a0".to_string(),
            Hold {
                why: "waiting for scylla-operator's cleanup Job cleanup-a0 (ring abc) to finish".into(),
                ring: Some("abc".into()),
            },
        )]),
        cleaned_by_other: BTreeSet::new(),
        no_longer_owed: BTreeSet::new(),
    };
    let nodes = vec![node("a0", Pending), node("a1", Pending), node("b0", Pending)];
    let no_jobs = BTreeMap::new();
    let pass = step_holding(nodes, &no_jobs, &racks, one_per_rack(), &held, job_name, now());
    assert_eq!(pass.start, vec![1, 2], "a1 takes rack a while a0 waits");
    assert_eq!(states(&pass), vec![Pending, Running, Running]);
    assert_eq!(
        pass.nodes[0].message.as_deref(),
        Some("waiting for scylla-operator's cleanup Job cleanup-a0 (ring abc) to finish")
    );
    assert_eq!(pass.nodes[0].waited_for_ring.as_deref(), Some("abc"));
    assert_eq!(pass.end, None, "a held node keeps the task open");

    // Everything else done, a0 let go: it starts.
    let mut nodes = pass.nodes;
    nodes[1].state = Succeeded;
    nodes[2].state = Succeeded;
    let free = Holds::default();
    let released = step_holding(nodes.clone(), &no_jobs, &racks, one_per_rack(), &free, job_name, now());
    assert_eq!(released.start, vec![0]);
    assert_eq!(released.nodes[0].message.as_deref(), Some("cleaning"));

    // ...unless scylla-operator has cleaned it for the ring it waited for: skipped, task done.
    let cleaned = Holds { cleaned_by_other: BTreeSet::from(["a0".to_string()]), ..Holds::default() };
    let pass = step_holding(nodes, &no_jobs, &racks, one_per_rack(), &cleaned, job_name, now());
    assert!(pass.start.is_empty());
    assert_eq!(pass.nodes[0].state, Skipped);
    assert!(pass.nodes[0].message.as_deref().unwrap().contains("cleaned by scylla-operator"), "{pass:?}");
    let Some(End::Completed { summary }) = &pass.end else { panic!("{pass:?}") };
    assert!(summary.contains("1 cleaned by scylla-operator meanwhile"), "{summary}");
    assert!(!summary.contains("left the cluster"), "{summary}");

    // A running node of ours counts in its rack even when held (scylla-operator started beside it).
    let nodes = vec![node("a0", Running), node("a1", Pending)];
    let jobs = BTreeMap::from([(0, ("t-0".to_string(), NodeJob::Running))]);
    let pass = step_holding(nodes, &jobs, &racks, one_per_rack(), &held, job_name, now());
    assert!(pass.start.is_empty(), "rack a is busy with a0: {pass:?}");
    assert_eq!(states(&pass), vec![Running, Pending]);
    assert_eq!(pass.nodes[0].waited_for_ring, None, "a running node does not wait");
}

/// A node interrupted by a topology change that the new ring owes nothing is skipped, saying so;
/// the others start again.
#[test]
fn an_interrupted_node_no_longer_owed_is_skipped() {
    use NodeState::*;
    let racks = racks(&[("a0", "a"), ("b0", "b")]);
    let mut interrupted = node("a0", Pending);
    interrupted.interruptions = 1;
    let holds = Holds { no_longer_owed: BTreeSet::from(["a0".to_string()]), ..Holds::default() };
    let pass = step_holding(
        vec![interrupted, node("b0", Pending)],
        &BTreeMap::new(),
        &racks,
        one_per_rack(),
        &holds,
        job_name,
        now(),
    );
    assert_eq!(states(&pass), vec![Skipped, Running]);
    assert!(pass.nodes[0].message.as_deref().unwrap().contains("no longer owed a cleanup"), "{pass:?}");
    assert_eq!(pass.start, vec![1]);
}
