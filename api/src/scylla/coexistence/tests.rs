use super::*;

const H1: &str = "h1-aaaaaaaaaaaaaaaa";
const H2: &str = "h2-bbbbbbbbbbbbbbbb";

fn job(node: &str, hash: &str, phase: JobPhase) -> OperatorJob {
    OperatorJob { name: format!("cleanup-{node}"), node: node.into(), ring_hash: Some(hash.into()), phase }
}

fn active(jobs: Vec<OperatorJob>) -> OperatorCleanup {
    OperatorCleanup::observed([JOB_CONTROLLER_PROGRESSING], jobs)
}

fn hashes<'a>(current: Option<&'a str>, last: Option<&'a str>) -> NodeHashes<'a> {
    NodeHashes { current, last_cleaned: last }
}

#[test]
fn scylla_operator_is_detected_by_its_job_controller_condition_or_its_jobs() {
    let running = job("n0", H1, JobPhase::Running);
    #[allow(clippy::type_complexity)] // a table of cases
    let cases: Vec<(&str, Vec<&str>, Vec<OperatorJob>, Option<Signal>)> = vec![
        ("before 1.10: neither", vec!["Available", "StatefulSetControllerProgressing"], vec![], None),
        (
            "its Progressing condition",
            vec!["Available", "JobControllerProgressing"],
            vec![],
            Some(Signal::JobControllerCondition("JobControllerProgressing".into())),
        ),
        (
            "its Degraded condition alone",
            vec!["JobControllerDegraded"],
            vec![],
            Some(Signal::JobControllerCondition("JobControllerDegraded".into())),
        ),
        (
            "a Job of its, whatever the status says",
            vec!["Available"],
            vec![running.clone()],
            Some(Signal::CleanupJob("cleanup-n0".into())),
        ),
        (
            "groundskeeper's own conditions are no sign",
            vec!["CleanupControllerProgressing", "CleanupControllerDegraded"],
            vec![],
            None,
        ),
    ];
    for (name, types, jobs, wanted) in cases {
        assert_eq!(detect(types, &jobs), wanted, "{name}");
    }
}

#[test]
fn a_node_waits_while_scylla_operator_cleans_it_or_is_about_to() {
    let none = OperatorCleanup::default();
    #[allow(clippy::type_complexity)] // a table of cases
    let cases: Vec<(&str, OperatorCleanup, NodeHashes<'_>, Option<&str>)> = vec![
        ("no scylla-operator cleanup: always free", none.clone(), hashes(Some(H2), Some(H1)), None),
        ("no scylla-operator cleanup, NeverCleanedUp", none, hashes(Some(H2), Some("NeverCleanedUp")), None),
        ("clean for the current ring", active(vec![]), hashes(Some(H1), Some(H1)), None),
        (
            "its Job runs",
            active(vec![job("n0", H2, JobPhase::Running)]),
            hashes(Some(H2), Some(H1)),
            Some("waiting for scylla-operator's cleanup Job cleanup-n0"),
        ),
        (
            "its Job runs although the hashes already agree (ring moved back)",
            active(vec![job("n0", H2, JobPhase::Running)]),
            hashes(Some(H1), Some(H1)),
            Some("waiting for scylla-operator's cleanup Job cleanup-n0"),
        ),
        (
            "its Job completed, hash not recorded yet",
            active(vec![job("n0", H2, JobPhase::Completed)]),
            hashes(Some(H2), Some(H1)),
            Some("waiting for scylla-operator to record"),
        ),
        (
            "its Job completed and recorded: free",
            active(vec![job("n0", H2, JobPhase::Completed)]),
            hashes(Some(H2), Some(H2)),
            None,
        ),
        (
            "its Job failed: it runs again once deleted, so wait",
            active(vec![job("n0", H2, JobPhase::Failed)]),
            hashes(Some(H2), Some(H1)),
            Some("failed and is not retried"),
        ),
        (
            "another node's Job does not hold this one",
            active(vec![job("n1", H2, JobPhase::Running)]),
            hashes(Some(H2), Some(H2)),
            None,
        ),
        (
            "hashes differ, no Job yet: about to clean",
            active(vec![]),
            hashes(Some(H2), Some(H1)),
            Some("scylla-operator is about to clean it"),
        ),
        (
            "newest seeding: NeverCleanedUp is due",
            active(vec![]),
            hashes(Some(H2), Some("NeverCleanedUp")),
            Some("scylla-operator is about to clean it"),
        ),
        (
            "missing last-cleaned: scylla-operator seeds it (either version)",
            active(vec![]),
            hashes(Some(H2), None),
            Some("waiting for scylla-operator to seed"),
        ),
        (
            "no current hash yet, seeded: scylla-operator does nothing there",
            active(vec![]),
            hashes(None, Some("NeverCleanedUp")),
            None,
        ),
    ];
    for (name, operator, hashes, wanted) in cases {
        let turn = node_turn(&operator, "n0", hashes);
        match (wanted, &turn) {
            (None, NodeTurn::Free) => {}
            (Some(part), NodeTurn::Wait(why)) if why.contains(part) => {}
            _ => panic!("{name}: got {turn:?}, wanted {wanted:?}"),
        }
    }
}

#[test]
fn held_nodes_name_each_waiting_node_with_its_reason() {
    let operator = active(vec![job("n1", H2, JobPhase::Running)]);
    let held = held_nodes(
        &operator,
        [
            ("n0", hashes(Some(H2), Some(H2))),
            ("n1", hashes(Some(H2), Some(H1))),
            ("n2", hashes(Some(H2), Some("NeverCleanedUp"))),
        ],
    );
    assert_eq!(held.keys().collect::<Vec<_>>(), ["n1", "n2"]);
    assert!(held["n1"].why.contains("cleanup-n1"), "{held:?}");
    assert_eq!(held["n1"].ring.as_deref(), Some(H2), "its Job's ring");
    assert!(held["n2"].why.contains("about to clean"), "{held:?}");
    assert_eq!(held["n2"].ring.as_deref(), Some(H2), "the node's current ring");
    let unseeded = held_nodes(&operator, [("n3", hashes(Some(H2), None))]);
    assert_eq!(unseeded["n3"].ring, None, "not known until it is seeded");
}

#[test]
fn a_node_is_clean_once_scylla_operator_recorded_the_ring_it_waited_for() {
    for (waited, last, done) in [
        (Some(H2), Some(H2), true),
        (Some(H2), Some(H1), false),
        (Some(H2), Some("NeverCleanedUp"), false),
        (None, Some(H2), false),
        (None, None, false),
    ] {
        assert_eq!(
            cleaned_while_waiting(waited, hashes(Some(H2), last)),
            done,
            "waited for {waited:?}, last cleaned {last:?}"
        );
    }
}

#[test]
fn scylla_operator_job_names_are_reserved() {
    for (name, reserved) in [
        ("cleanup-basic-us-east-1-a-0", true),
        ("cleanup-", true),
        ("basic-cleanup-1767225600-0", false),
        ("clean-now-0", false),
        ("cleanupx-0", false),
    ] {
        assert_eq!(is_reserved_job_name(name), reserved, "{name}");
    }
    assert_eq!(node_of_job("cleanup-basic-us-east-1-a-0"), Some("basic-us-east-1-a-0"));
    assert_eq!(node_of_job("clean-now-0"), None);
}

#[test]
fn the_stand_back_message_names_the_signal_the_running_jobs_and_the_due_nodes() {
    let operator = active(vec![job("n0", H2, JobPhase::Running), job("n1", H2, JobPhase::Completed)]);
    let message = stand_back_message(&operator, &["n0".into(), "n2".into()], &[]);
    assert!(message.contains("JobControllerProgressing"), "{message}");
    assert!(message.contains("stands back"), "{message}");
    assert!(message.contains("running: cleanup-n0;"), "{message}");
    assert!(message.contains("nodes it has to clean: n0, n2"), "{message}");
    assert!(!message.contains("missing on"), "{message}");

    // One node without its hashes holds back every cleanup Job of scylla-operator's.
    let blocked = stand_back_message(&active(vec![]), &["n0".into()], &["n5".into()]);
    assert!(
        blocked.ends_with("it starts no cleanup Job until every node has both ring hashes, missing on: n5"),
        "{blocked}"
    );
    let nothing_due = stand_back_message(&active(vec![]), &[], &["n5".into()]);
    assert!(!nothing_due.contains("missing on"), "nothing waits on it: {nothing_due}");
}
