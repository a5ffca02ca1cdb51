use super::*;
use groundskeeper_api::snapshot_store::Store;
use jiff::SignedDuration;

const STORE: &str = "pvc/main-snapshots";

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + second).unwrap()
}

fn full(object: &str, revision: i64, written: i64) -> SnapshotRecord {
    SnapshotRecord {
        store: STORE.into(),
        object: object.into(),
        written_at: Some(at(written).into()),
        revision: Some(revision),
        ..SnapshotRecord::default()
    }
}

fn delta(start: i64, end: i64, written: i64) -> SnapshotRecord {
    SnapshotRecord {
        start_revision: Some(start),
        ..full(&format!("main-{written}-{start}-{end}.delta"), end, written)
    }
}

fn backup(delta_every: Option<i64>) -> Backup {
    Backup {
        encoding: Default::default(),
        to: Some(Store::Claim("main-snapshots".into())),
        file_name: "{cluster}-{time}.db".into(),
        full_every: SignedDuration::from_hours(6),
        delta_every: delta_every.map(SignedDuration::from_secs),
        retain: 5,
        retention: None,
        failed_history_limit: 3,
    }
}

#[test]
fn the_recovery_point_follows_the_chain_from_the_newest_full_snapshot() {
    let other_store = SnapshotRecord { store: "s3://b/x".into(), ..delta(300, 900, 90) };
    type Case = (&'static str, Vec<SnapshotRecord>, Option<(&'static str, i64, usize)>);
    let cases: Vec<Case> = vec![
        ("empty", vec![], None),
        ("deltas without a full", vec![delta(100, 200, 10)], None),
        ("a full alone", vec![full("a.db", 100, 10)], Some(("a.db", 100, 0))),
        (
            "a chain of two",
            vec![full("a.db", 100, 10), delta(100, 150, 20), delta(150, 170, 30)],
            Some(("main-30-150-170.delta", 170, 2)),
        ),
        (
            "a delta that does not chain extends nothing",
            vec![full("a.db", 100, 10), delta(100, 150, 20), delta(160, 170, 30)],
            Some(("main-20-100-150.delta", 150, 1)),
        ),
        (
            "deltas before the newest full are not its chain",
            vec![full("a.db", 100, 10), delta(100, 150, 20), full("b.db", 300, 40)],
            Some(("b.db", 300, 0)),
        ),
        (
            "another store's delta is not counted",
            vec![full("a.db", 300, 10), other_store],
            Some(("a.db", 300, 0)),
        ),
    ];
    for (name, catalog, want) in cases {
        let got = recovery_point(&catalog, STORE).map(|p| (p.newest, p.revision, p.deltas));
        let want = want.map(|(newest, revision, deltas)| (newest.to_owned(), revision, deltas));
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn what_is_due_and_when() {
    let chain = vec![full("a.db", 100, 0), delta(100, 150, 100)];
    let point = recovery_point(&chain, STORE);
    let gap =
        BackupGap { task: "main-delta-1".into(), found_at: None, after_revision: 150, compacted_to: 180 };
    let none = Attempts::default();
    struct Case {
        name: &'static str,
        deltas: Option<i64>,
        point: Option<RecoveryPoint>,
        gap: Option<BackupGap>,
        attempts: Attempts,
        revision: Option<i64>,
        now: i64,
        due: Option<TaskType>,
        next_at: Option<i64>,
    }
    let case = |name, now, revision, due, next_at| Case {
        name,
        deltas: Some(30),
        point: point.clone(),
        gap: None,
        attempts: none,
        revision,
        now,
        due,
        next_at,
    };
    let cases = [
        Case {
            point: None,
            ..case("no full snapshot: one at once", 5, Some(10), Some(TaskType::Snapshot), None)
        },
        Case {
            point: None,
            attempts: Attempts { last_full: Some(at(0)), ..none },
            ..case("no full snapshot, one tried 5 s ago: again 30 s after it", 5, Some(10), None, Some(30))
        },
        case("changes, delta interval passed: a delta", 130, Some(160), Some(TaskType::Delta), None),
        case("changes, interval not passed: when it does", 110, Some(160), None, Some(130)),
        case("no change since the chain's end: no Job, an interval on", 200, Some(150), None, Some(230)),
        Case {
            attempts: Attempts { last_delta: Some(at(125)), ..none },
            ..case(
                "a delta tried since the chain moved: an interval after it",
                140,
                Some(160),
                None,
                Some(155),
            )
        },
        Case {
            attempts: Attempts { in_flight: true, ..none },
            ..case("a backup in flight: nothing, its end wakes the cluster", 500, Some(160), None, None)
        },
        Case {
            gap: Some(gap.clone()),
            ..case("a gap: a full snapshot at once", 110, Some(200), Some(TaskType::Snapshot), None)
        },
        Case {
            gap: Some(gap.clone()),
            point: recovery_point(&[full("a.db", 100, 0), full("b.db", 190, 150)], STORE),
            ..case("a gap a newer full covers: deltas again", 200, Some(200), Some(TaskType::Delta), None)
        },
        case("the full is fullEvery old: a full", 6 * 3600, Some(200), Some(TaskType::Snapshot), None),
        Case {
            attempts: Attempts { last_full: Some(at(6 * 3600)), ..none },
            ..case(
                "a full tried since and failed: retried an interval on",
                6 * 3600 + 10,
                Some(150),
                None,
                Some(6 * 3600 + 30),
            )
        },
        Case { deltas: None, ..case("fulls only: the next full", 200, Some(300), None, Some(6 * 3600)) },
        case("no member answered: nothing, an interval on", 130, None, None, Some(160)),
        case(
            "the cluster behind its backups (restored): a full at once",
            110,
            Some(120),
            Some(TaskType::Snapshot),
            None,
        ),
    ];
    for c in cases {
        let plan =
            plan(&backup(c.deltas), c.point.as_ref(), c.gap.as_ref(), c.attempts, c.revision, at(c.now));
        assert_eq!(plan.due.as_ref().map(|(t, _)| t.clone()), c.due, "{}: {plan:?}", c.name);
        assert_eq!(plan.next_at, c.next_at.map(at), "{}: {plan:?}", c.name);
    }
}

#[test]
fn a_gap_names_the_revisions_lost_and_the_delta_says_how_far_behind() {
    let chain = vec![full("a.db", 100, 0), delta(100, 150, 100)];
    let point = recovery_point(&chain, STORE);
    let gap =
        BackupGap { task: "main-delta-1".into(), found_at: None, after_revision: 150, compacted_to: 180 };
    let plan_gap =
        plan(&backup(Some(30)), point.as_ref(), Some(&gap), Attempts::default(), Some(200), at(110));
    let (_, why) = plan_gap.due.unwrap();
    assert!(why.contains("after revision 150") && why.contains("to 180") && why.contains("a.db"), "{why}");
    let plan_delta = plan(&backup(Some(30)), point.as_ref(), None, Attempts::default(), Some(160), at(130));
    let (_, why) = plan_delta.due.unwrap();
    assert!(why.starts_with("10 revision(s) after 150"), "{why}");
}

#[test]
fn compaction_is_limited_to_the_recovery_point_only_while_deltas_are_on() {
    let catalog = vec![full("a.db", 100, 0), delta(100, 150, 100)];
    assert_eq!(limit_of(&backup(Some(30)), recovery_point(&catalog, STORE).as_ref()), Some(150));
    assert_eq!(limit_of(&backup(Some(30)), None), Some(0), "nothing backed up: no compaction");
    assert_eq!(limit_of(&backup(None), recovery_point(&catalog, STORE).as_ref()), None, "fulls only");
    let mut cluster = EtcdCluster::new(
        "main",
        serde_json::from_value(serde_json::json!({
            "endpoints": ["http://a:2379"],
            "backup": { "deltaEvery": "30s" },
        }))
        .unwrap(),
    );
    cluster.status =
        Some(groundskeeper_api::etcd_cluster::EtcdClusterStatus { snapshots: catalog, ..Default::default() });
    let policy = Policy::from_spec(&cluster.spec).unwrap();
    assert_eq!(compaction_limit(&policy, &cluster), Some(150));
    cluster.spec.backup.as_mut().unwrap().delta_every = None;
    let fulls_only = Policy::from_spec(&cluster.spec).unwrap();
    assert_eq!(compaction_limit(&fulls_only, &cluster), None, "fulls only hold nothing back");
}

/// Failed tasks of the policy beyond the limit go, newest kept; other tasks are never touched.
#[test]
fn failed_policy_tasks_beyond_the_history_limit_are_deleted_newest_kept() {
    let view = |name: &str, second: i64, state: TaskState, backup_policy: bool| ClusterTaskView {
        name: name.into(),
        task_type: TaskType::Delta,
        state,
        created: Timestamp::from_second(1_780_000_000 + second).unwrap(),
        waits_for: None,
        backup_policy,
    };
    let tasks = vec![
        view("f1", 1, TaskState::Failed, true),
        view("f4", 4, TaskState::Failed, true),
        view("ok", 5, TaskState::Completed, true),
        view("f2", 2, TaskState::Failed, true),
        view("by-hand", 0, TaskState::Failed, false),
        view("f3", 3, TaskState::Failed, true),
        view("running", 6, TaskState::InProgress, true),
    ];
    for (limit, deleted) in
        [(3, vec!["f1"]), (1, vec!["f3", "f2", "f1"]), (0, vec!["f4", "f3", "f2", "f1"]), (9, vec![])]
    {
        let policy = Backup { failed_history_limit: limit, ..backup(Some(30)) };
        assert_eq!(failed_beyond_limit(&tasks, &policy), deleted, "limit {limit}");
    }
}
