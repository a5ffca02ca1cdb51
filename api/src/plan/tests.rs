#![allow(clippy::type_complexity)] // tables of cases

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde_json::json;

use super::*;
use crate::maintenance_task::MaintenanceTask;
use crate::maintenance_window::{MaintenanceWindowsSpec, Windows};
use crate::validate::validate;

const GIB: i64 = 1024 * 1024 * 1024;

fn sample(bytes: Option<i64>, seconds: f64) -> WorkSample {
    WorkSample { bytes, seconds }
}

/// (case, history, size now, default rate, expected seconds, words in `from`)
#[test]
fn the_expected_duration_comes_from_the_history_per_byte_else_the_defaults() {
    let cases: Vec<(&str, Vec<WorkSample>, Option<i64>, Option<f64>, i64, &str)> = vec![
        (
            "one run, same size",
            vec![sample(Some(GIB), 100.0)],
            Some(GIB),
            None,
            100,
            "median rate of 1 earlier run",
        ),
        (
            "twice the size, twice the time",
            vec![sample(Some(GIB), 100.0)],
            Some(2 * GIB),
            None,
            200,
            "2.00 GiB",
        ),
        (
            "the median rate: an outlier does not move it",
            vec![sample(Some(GIB), 100.0), sample(Some(GIB), 110.0), sample(Some(GIB), 5000.0)],
            Some(GIB),
            None,
            110,
            "3 earlier runs",
        ),
        (
            "an even count: the mean of the middle two",
            vec![sample(Some(GIB), 100.0), sample(Some(GIB), 200.0)],
            Some(GIB),
            None,
            150,
            "2 earlier runs",
        ),
        (
            "sizes unknown: the median duration",
            vec![sample(None, 30.0), sample(None, 90.0), sample(None, 60.0)],
            Some(GIB),
            None,
            60,
            "median duration of 3 earlier runs",
        ),
        (
            "no history, size known: the default rate",
            vec![],
            Some(100 * 1024 * 1024),
            Some(1024.0 * 1024.0),
            100,
            "default",
        ),
        (
            "no history, no size: the default duration",
            vec![],
            None,
            None,
            DEFAULT_CLEANUP_SECONDS,
            "the default 30m 00s",
        ),
        (
            "a zero-byte run counts as no size",
            vec![sample(Some(0), 40.0)],
            Some(GIB),
            None,
            40,
            "median duration",
        ),
        ("never less than a second", vec![sample(Some(GIB), 0.0)], Some(GIB), None, 1, "earlier run"),
    ];
    for (case, history, bytes, rate, seconds, from) in cases {
        let estimate = estimate(&history, bytes, rate, DEFAULT_CLEANUP_SECONDS);
        assert_eq!(estimate.seconds, seconds, "{case}: {estimate:?}");
        assert!(estimate.from.contains(from), "{case}: {estimate:?}");
    }
}

#[test]
fn a_nodes_history_is_read_leniently_and_keeps_the_newest_five() {
    let annotations = |value: &str| BTreeMap::from([(keys::CLEANUP_HISTORY.to_owned(), value.to_owned())]);
    assert_eq!(
        cleanup_history(&annotations("1000:10.5, ?:20,garbage,-5:1,7:NaN,8:-1,9:3")),
        vec![sample(Some(1000), 10.5), sample(None, 20.0), sample(Some(9), 3.0)]
    );
    assert!(cleanup_history(&BTreeMap::new()).is_empty());
    let full = annotations("1:1,2:2@j2,3:3,4:4,5:5");
    assert_eq!(
        cleanup_history_with(&full, sample(None, 6.0), "j6").as_deref(),
        Some("2:2.0@j2,3:3.0,4:4.0,5:5.0,?:6.0@j6")
    );
    assert_eq!(
        cleanup_history_with(&full, sample(None, 6.0), "j2"),
        None,
        "Job j2's run is recorded already"
    );
    let round_trip = cleanup_history(&annotations(
        &cleanup_history_with(&BTreeMap::new(), sample(Some(GIB), 61.25), "t-0").unwrap(),
    ));
    assert_eq!(round_trip, vec![sample(Some(GIB), 61.2)], "kept to a tenth of a second");
    // A node's estimate: its newest known load times its median rate.
    let node = annotations(&format!("{}:100,{}:300", GIB, 2 * GIB));
    let expected = node_cleanup_estimate(&node);
    assert_eq!(expected.seconds, 250, "2 GiB at the median of 100 s/GiB and 150 s/GiB: {expected:?}");
}

fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

/// (case, now, expected seconds, nothing of the task since the window opened, fits)
#[test]
fn work_starts_only_when_it_is_expected_to_end_inside_the_window() {
    // Mon-Fri 01:00-05:00 UTC: four hours.
    let windows = Windows::new(&MaintenanceWindowsSpec {
        time_zone: "UTC".into(),
        windows: vec!["Mon-Fri 01:00-05:00".into()],
    })
    .unwrap();
    let local = |t: Timestamp| windows.local(t);
    let cases: Vec<(&str, &str, i64, bool, Result<(), &str>)> = vec![
        ("fits with time to spare", "2026-11-24T01:00:00Z", 3600, false, Ok(())),
        ("ends exactly at the close", "2026-11-24T04:00:00Z", 3600, false, Ok(())),
        (
            "one second too long",
            "2026-11-24T04:00:01Z",
            3600,
            false,
            Err("would run past this one's end (Tue 2026-11-24 05:00 UTC)"),
        ),
        ("window closed", "2026-11-24T06:00:00Z", 60, true, Err("opens Wed 2026-11-25 01:00 UTC")),
        ("longer than any window, first thing in it", "2026-11-24T01:10:00Z", 5 * 3600, true, Ok(())),
        ("as long as the window, a pass late", "2026-11-24T01:00:07Z", 4 * 3600, true, Ok(())),
        ("about as long, entered late", "2026-11-24T01:30:00Z", 4 * 3600 - 100, true, Ok(())),
        (
            "well shorter than the window, entered late",
            "2026-11-24T03:30:00Z",
            3 * 3600,
            true,
            Err("expected 3h 00m"),
        ),
        (
            "longer than any window, but the task already worked in it",
            "2026-11-24T01:10:00Z",
            5 * 3600,
            false,
            Err("expected 5h 00m"),
        ),
    ];
    for (case, now, expected, nothing_since, want) in cases {
        let now = at(now);
        let state = windows.state_at(now);
        let got = fits_window(&state, now, expected, |_| nothing_since, local);
        match (got, want) {
            (Ok(()), Ok(())) => {}
            (Err(why), Err(words)) => assert!(why.contains(words), "{case}: {why}"),
            (got, want) => panic!("{case}: {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn a_plans_id_names_its_steps_not_its_estimates() {
    let step = |name: &str, seconds: i64| PlanStep {
        name: name.into(),
        action: "Cleanup".into(),
        expected_seconds: Some(seconds),
        estimate: Some(format!("{seconds}")),
        ..PlanStep::default()
    };
    let a = plan_of("s".into(), vec![step("a", 1), step("b", 2)]);
    assert_eq!(a.id.len(), 12);
    assert_eq!(a.expected_seconds, Some(3));
    assert_eq!(a.id, plan_of("other words".into(), vec![step("a", 10), step("b", 20)]).id, "estimates moved");
    assert_ne!(a.id, plan_of("s".into(), vec![step("b", 2), step("a", 1)]).id, "another order");
    assert_ne!(a.id, plan_of("s".into(), vec![step("a", 1)]).id, "a node fewer");
    let mut with_keyspace = step("a", 1);
    with_keyspace.keyspaces = vec!["ks".into()];
    assert_ne!(a.id, plan_of("s".into(), vec![with_keyspace, step("b", 2)]).id, "other keyspaces");
}

fn member(service: &str, rack: &str, history: Option<&str>) -> MemberFacts {
    MemberFacts {
        service: service.into(),
        uid: None,
        datacenter: Some("dc1".into()),
        rack: Some(rack.into()),
        address: None,
        annotations: history
            .map(|h| BTreeMap::from([(keys::CLEANUP_HISTORY.to_owned(), h.to_owned())]))
            .unwrap_or_default(),
    }
}

fn cleanup_task(config: serde_json::Value) -> Cleanup {
    let task: MaintenanceTask = serde_json::from_value(json!({
        "apiVersion": "groundskeeper.dev/v1alpha1", "kind": "MaintenanceTask",
        "metadata": {"name": "t", "namespace": "db"},
        "spec": {"target": {"kind": "ScyllaCluster", "name": "basic"}, "type": "Cleanup", "config": {"cleanup": config}}
    }))
    .unwrap();
    match validate(&task).unwrap().work {
        Work::Cleanup(cleanup) => cleanup,
        other => panic!("{other:?}"),
    }
}

fn cluster() -> ClusterFacts {
    ClusterFacts { namespace: "db".into(), name: "basic".into(), ..ClusterFacts::default() }
}

#[test]
fn a_cleanup_plan_lists_the_nodes_in_cleaning_order_with_their_keyspaces_and_durations() {
    let members = vec![
        member("basic-dc1-b-0", "b", Some(&format!("{GIB}:600"))),
        member("basic-dc1-a-1", "a", None),
        member("basic-dc1-a-0", "a", Some("?:90")),
    ];
    let plan = cleanup_plan(
        &cleanup_task(json!({"keyspaces": ["ks"], "perNode": [{"node": "basic-dc1-a-0", "keyspaces": ["other"]}], "nodes": ["basic-dc1-a-0", "basic-dc1-a-1", "basic-dc1-b-0"]})),
        &cluster(),
        &members,
    )
    .unwrap();
    let names: Vec<&str> = plan.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["basic-dc1-a-0", "basic-dc1-a-1", "basic-dc1-b-0"]);
    let keyspaces: Vec<Vec<String>> = plan.steps.iter().map(|s| s.keyspaces.clone()).collect();
    assert_eq!(keyspaces, [vec!["other".to_owned()], vec!["ks".to_owned()], vec!["ks".to_owned()]]);
    let expected: Vec<Option<i64>> = plan.steps.iter().map(|s| s.expected_seconds).collect();
    assert_eq!(expected, [Some(90), Some(DEFAULT_CLEANUP_SECONDS), Some(600)]);
    assert_eq!(plan.expected_seconds, Some(90 + DEFAULT_CLEANUP_SECONDS + 600));
    assert!(
        plan.summary.contains("clean 3 node(s) of ScyllaCluster db/basic, at most 1 node(s) per rack"),
        "{}",
        plan.summary
    );
    // Only the nodes named; a node that is not a member is an error naming the field.
    let one = cleanup_plan(&cleanup_task(json!({"nodes": ["basic-dc1-b-0"]})), &cluster(), &members).unwrap();
    assert_eq!(one.steps.len(), 1);
    assert!(one.steps[0].note.as_deref().unwrap().contains("every keyspace that can hold stale data"));
    let err =
        cleanup_plan(&cleanup_task(json!({"nodes": ["basic-dc1-c-0"]})), &cluster(), &members).unwrap_err();
    assert!(err.starts_with("spec.config.cleanup.nodes: basic-dc1-c-0 not a member"), "{err}");
}

fn etcd(members: serde_json::Value, policy: serde_json::Value) -> EtcdCluster {
    serde_json::from_value(json!({
        "apiVersion": "groundskeeper.dev/v1alpha1", "kind": "EtcdCluster",
        "metadata": {"name": "main", "namespace": "etcd"},
        "spec": {"endpoints": ["http://e:2379"], "policy": policy},
        "status": {"members": members}
    }))
    .unwrap()
}

fn etcd_work(task_type: &str, config: serde_json::Value) -> Work {
    let task: MaintenanceTask = serde_json::from_value(json!({
        "apiVersion": "groundskeeper.dev/v1alpha1", "kind": "MaintenanceTask",
        "metadata": {"name": "t", "namespace": "etcd"},
        "spec": {"target": {"kind": "EtcdCluster", "name": "main"}, "type": task_type, "config": config}
    }))
    .unwrap();
    validate(&task).unwrap().work
}

fn etcd_member(name: &str, id: &str, leader: bool, db: i64, in_use: i64) -> serde_json::Value {
    json!({"name": name, "id": id, "endpoint": format!("http://{name}:2379"), "dbSize": db, "dbSizeInUse": in_use,
           "leader": leader, "healthy": true})
}

#[test]
fn an_etcd_plan_follows_the_runners_own_rule_followers_first_leader_last() {
    let mut members = json!([
        etcd_member("etcd-0", "a", true, GIB, GIB / 4),
        etcd_member("etcd-1", "b", false, GIB, GIB / 4),
        etcd_member("etcd-2", "c", false, 10_000_000, 9_000_000),
    ]);
    members[1]["defragHistory"] = json!([{"bytes": GIB, "seconds": 4.0}]);
    let cluster = etcd(members, json!({}));
    let plan = etcd_plan(
        &etcd_work("Defragment", json!({"defragment": {"minDefragBytes": 100000000}})),
        &cluster,
        "etcd/main",
    )
    .unwrap();
    let steps: Vec<(&str, &str, Option<i64>)> =
        plan.steps.iter().map(|s| (s.name.as_str(), s.action.as_str(), s.expected_seconds)).collect();
    assert_eq!(
        steps,
        [("etcd-1", "Defragment", Some(4)), ("etcd-0", "Defragment", Some(4)), ("etcd-2", "Skip", None),],
        "the follower's own history; the leader predicted from it (4 s, in place: under the 5 s \
         budget); the small one skipped"
    );
    assert!(plan.steps[2].note.as_deref().unwrap().contains("under the 100000000 bytes minimum"));
    let leader_note = plan.steps[1].note.as_deref().unwrap();
    assert!(leader_note.starts_with("leader; predicted 4.0s"), "{leader_note}");
    assert!(leader_note.contains("≤ the 5.0s budget: in place"), "{leader_note}");
    // A budget under the prediction moves leadership first; so does `Always`.
    for policy in [json!({"leaderInPlaceBudgetSeconds": 2}), json!({"leaderTurn": "Always"})] {
        let mut moved = cluster.clone();
        moved.spec.policy = serde_json::from_value(policy.clone()).unwrap();
        let plan = etcd_plan(
            &etcd_work("Defragment", json!({"defragment": {"minDefragBytes": 100000000}})),
            &moved,
            "etcd/main",
        )
        .unwrap();
        assert_eq!(plan.steps[1].action, "MoveLeaderThenDefragment", "{policy}");
    }
    assert!(
        plan.summary.starts_with("defragment 2 of 3 member(s) of EtcdCluster etcd/main"),
        "{}",
        plan.summary
    );
    // Leadership not moved when the cluster says so.
    let plain = etcd_plan(
        &etcd_work("Defragment", json!({})),
        &etcd(
            json!([
                etcd_member("etcd-0", "a", true, GIB, 0),
                etcd_member("etcd-1", "b", false, GIB, 0),
                etcd_member("etcd-2", "c", false, GIB, 0)
            ]),
            json!({"moveLeader": false}),
        ),
        "etcd/main",
    )
    .unwrap();
    assert_eq!(plain.steps.last().unwrap().action, "Defragment");
    // Compact + defragment: the compaction first, cluster-wide.
    let maintenance = etcd_plan(&etcd_work("Maintenance", json!({})), &cluster, "etcd/main").unwrap();
    assert_eq!(
        (maintenance.steps[0].name.as_str(), maintenance.steps[0].action.as_str()),
        ("cluster", "Compact")
    );
    assert!(maintenance.summary.starts_with("compact, then defragment"), "{}", maintenance.summary);
    // A snapshot streams from a healthy follower.
    let snapshot = etcd_plan(&etcd_work("Snapshot", json!({})), &cluster, "etcd/main").unwrap();
    assert_eq!((snapshot.steps[0].name.as_str(), snapshot.steps[0].action.as_str()), ("etcd-1", "Snapshot"));
    assert!(snapshot.steps[0].note.as_deref().unwrap().contains("claim main-snapshots"));
}

#[test]
fn an_etcd_plan_says_when_nothing_can_be_done_as_things_stand() {
    let mut sick = etcd_member("etcd-1", "b", false, GIB, 0);
    sick["healthy"] = json!(false);
    sick["message"] = json!("connection refused");
    let cluster = etcd(
        json!([etcd_member("etcd-0", "a", true, GIB, 0), sick, etcd_member("etcd-2", "c", false, GIB, 0)]),
        json!({}),
    );
    let err = etcd_plan(&etcd_work("Defragment", json!({})), &cluster, "etcd/main").unwrap_err();
    assert!(
        err.contains("cannot be defragmented as things stand: member etcd-1 (b) is not healthy: unreachable: connection refused"),
        "{err}"
    );
    // Nothing to approve either when the defrag comes after a compaction.
    assert!(etcd_plan(&etcd_work("Maintenance", json!({})), &cluster, "etcd/main").is_err());
    let unseen = etcd(json!([]), json!({}));
    let err = etcd_plan(&etcd_work("Compact", json!({})), &unseen, "etcd/main").unwrap_err();
    assert!(err.contains("no member in its status yet"), "{err}");
}

#[test]
fn sizes_and_durations_read_as_people_write_them() {
    assert_eq!(human_bytes(512), "512 B");
    assert_eq!(human_bytes(12 * 1024 * 1024 + 100_000), "12.1 MiB");
    assert_eq!(human_bytes(3 * GIB / 2), "1.50 GiB");
    assert_eq!(human_seconds(9), "9s");
    assert_eq!(human_seconds(2530), "42m 10s");
    assert_eq!(human_seconds(7500), "2h 05m");
}
