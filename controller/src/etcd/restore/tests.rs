use groundskeeper_api::EtcdCluster;
use groundskeeper_api::restore::{RestorePhase, RestoreStatus};
use groundskeeper_api::validate::Restore;
use groundskeeper_protocol::Report;
use groundskeeper_protocol::result::ProveReport;
use jiff::{SignedDuration, Timestamp};

use super::decide::{admission, decide, start};
use super::job::step_of_restore;
use super::model::{Admission, ReadyPods, RestoreAction, RestoreFacts, StepJob};
use crate::etcd::snapshot_steps::SnapshotNaming;
use groundskeeper_api::etcd_cluster::{EtcdClusterSpec, EtcdClusterStatus, EtcdStatefulSet, KnownMember};
use groundskeeper_api::snapshot_catalog::{SnapshotProof, SnapshotRecord};
use groundskeeper_api::snapshot_store::Store;
use groundskeeper_protocol::result::RestoreMemberReport;

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(1_900_000_000 + second).unwrap()
}

fn cluster(quorum_lost_at: Option<i64>) -> EtcdCluster {
    let mut cluster = EtcdCluster::new(
        "main",
        EtcdClusterSpec {
            endpoints: vec!["http://a:2379".into()],
            tls: None,
            policy: Default::default(),
            job: Default::default(),
            partition: None,
            maintenance_windows: None,
            backup: None,
            stateful_set: Some(EtcdStatefulSet {
                name: "etcd".into(),
                data_volume_claim_template: Some("data".into()),
                data_dir: None,
            }),
        },
    );
    cluster.status = Some(EtcdClusterStatus {
        healthy_members: Some(1),
        member_count: Some(3),
        quorum_lost_since: quorum_lost_at.map(|s| at(s).into()),
        last_revision_with_quorum: Some(130),
        membership: (0..3)
            .map(|i| KnownMember {
                name: format!("etcd-{i}"),
                id: format!("{i}"),
                peer_urls: vec![format!("http://etcd-{i}.etcd:2380")],
            })
            .collect(),
        snapshots: vec![SnapshotRecord {
            store: "s3://b".into(),
            object: "main-1.db".into(),
            revision: Some(100),
            keys: Some(40),
            sha256: Some("abc".into()),
            proof: Some(SnapshotProof { proven: true, ..SnapshotProof::default() }),
            ..SnapshotRecord::default()
        }],
        ..EtcdClusterStatus::default()
    });
    cluster
}

fn restore(override_quorum_check: bool) -> Restore {
    let bucket = groundskeeper_api::snapshot_store::BucketSpec { url: "s3://b".into(), ..Default::default() };
    Restore {
        encoding: Default::default(),
        from: Store::Bucket(bucket),
        object: None,
        quorum_lost_for: SignedDuration::from_secs(300),
        override_quorum_check,
        to_revision: None,
        to_time: None,
    }
}

/// Quorum lost since (seconds), override, now (seconds), what admission says: `Ok(true)`
/// admitted, `Ok(false)` waits, `Err` refused, each with words of its message.
type AdmissionCase = (Option<i64>, bool, i64, Result<bool, &'static str>, &'static str);

/// What a pass is, its Jobs, its facts, the action wanted and the phase after it.
type Pass = (&'static str, Vec<(usize, StepJob)>, RestoreFacts, RestoreAction, RestorePhase);

#[test]
fn admission_needs_a_stateful_set_and_a_quorum_lost_long_enough() {
    let cases: [AdmissionCase; 5] = [
        (None, false, 1000, Err("refused"), "has its quorum (1 of 3 members healthy"),
        (Some(900), false, 1000, Ok(false), "100s ago: the restore waits until it has been lost for"),
        (Some(600), false, 1000, Ok(true), ""),
        (Some(700), false, 1000, Ok(true), ""),
        (None, true, 1000, Ok(true), ""),
    ];
    for (lost_at, override_check, now, wanted, words) in cases {
        let got = admission(&restore(override_check), &cluster(lost_at), Some(one_of_three()), at(now));
        match (&got, wanted) {
            (Admission::Admitted, Ok(true)) => {}
            (Admission::NotYet { reason, until }, Ok(false)) => {
                assert!(reason.contains(words), "{lost_at:?}: {reason}");
                assert_eq!(*until, at(lost_at.unwrap() + 300));
            }
            (Admission::Refused(why), Err(_)) => assert!(why.contains(words), "{lost_at:?}: {why}"),
            _ => panic!("{lost_at:?} {override_check}: got {got:?}, wanted {wanted:?}"),
        }
    }
    let mut without = cluster(Some(0));
    without.spec.stateful_set = None;
    let Admission::Refused(why) = admission(&restore(true), &without, None, at(1000)) else {
        panic!("admitted without a StatefulSet")
    };
    assert!(why.contains("spec.statefulSet"), "{why}");
}

fn started() -> RestoreStatus {
    start(&cluster(Some(0)), "r1", "0f1e2d3c-aaaa-bbbb", &restore(false), "data", at(0)).unwrap()
}

fn one_of_three() -> ReadyPods {
    ReadyPods { ready: 1, replicas: 3 }
}

/// A majority of the StatefulSet's pods Ready refuses a restore, whatever the status says: the
/// controller may only have lost its way to the members.
#[test]
fn a_majority_of_ready_pods_refuses_a_restore() {
    let lost_long_ago = cluster(Some(0));
    let two_of_three = ReadyPods { ready: 2, replicas: 3 };
    let Admission::Refused(why) = admission(&restore(false), &lost_long_ago, Some(two_of_three), at(1000))
    else {
        panic!("admitted with 2 of 3 pods Ready")
    };
    assert!(why.contains("StatefulSet etcd reports 2 of 3 pods Ready"), "{why}");
    assert_eq!(
        admission(&restore(false), &lost_long_ago, Some(one_of_three()), at(1000)),
        Admission::Admitted
    );
    assert_eq!(admission(&restore(true), &lost_long_ago, Some(two_of_three), at(1000)), Admission::Admitted);
}

fn facts(replicas: i32, pods: usize) -> RestoreFacts {
    RestoreFacts { replicas: Some(replicas), pods, ..RestoreFacts::default() }
}

fn proven() -> StepJob {
    StepJob::Succeeded(Some(Box::new(Report::SnapshotProve(ProveReport {
        object: "main-1.db".into(),
        proven: true,
        revision: Some(100),
        keys: Some(40),
        sha256: Some("abc".into()),
        ..ProveReport::default()
    }))))
}

fn restored(member: &str) -> StepJob {
    StepJob::Succeeded(Some(Box::new(Report::RestoreMember(RestoreMemberReport {
        member: member.into(),
        ..Default::default()
    }))))
}

#[test]
fn the_start_resolves_the_newest_proven_snapshot_and_names_the_token_after_the_task() {
    let status = started();
    assert_eq!((status.object.as_str(), status.revision, status.keys), ("main-1.db", Some(100), Some(40)));
    assert_eq!(status.cluster_token, "main-restored-r1-0f1e2d3c");
    assert_eq!(status.old_data_suffix, ".pre-restore-r1-0f1e2d3c");
    assert_eq!(
        status.members.iter().map(|m| m.claim.as_str()).collect::<Vec<_>>(),
        ["data-etcd-0", "data-etcd-1", "data-etcd-2"]
    );
    assert_eq!(status.last_revision_before_loss, Some(130));
}

/// Each pass as the controller sees it, from the proof to the cluster back: the action, and the
/// phase after it.
#[test]
fn a_restore_goes_step_by_step_and_each_step_waits_for_what_it_left() {
    let three = |state: fn(&str) -> StepJob| -> Vec<(usize, StepJob)> {
        (1..=3).map(|i| (i, state(&format!("etcd-{}", i - 1)))).collect()
    };
    let with_proof = |mut jobs: Vec<(usize, StepJob)>| {
        jobs.insert(0, (0, proven()));
        jobs
    };
    let healthy = RestoreFacts {
        replicas: Some(3),
        healthy_members: 3,
        revision: Some(101),
        ..RestoreFacts::default()
    };
    let passes: Vec<Pass> = vec![
        (
            "the proof's Job is made",
            vec![],
            facts(3, 3),
            RestoreAction::CreateJobs(vec![0]),
            RestorePhase::CheckingSnapshot,
        ),
        (
            "it runs",
            vec![(0, StepJob::Running)],
            facts(3, 3),
            RestoreAction::Wait,
            RestorePhase::CheckingSnapshot,
        ),
        (
            "proven: the replicas are recorded, nothing scaled yet",
            vec![(0, proven())],
            facts(3, 3),
            RestoreAction::Wait,
            RestorePhase::ScalingDown,
        ),
        (
            "scaled to 0 in the next pass",
            vec![(0, proven())],
            facts(3, 3),
            RestoreAction::ScaleTo(0),
            RestorePhase::ScalingDown,
        ),
        (
            "pods still stopping",
            vec![(0, proven())],
            facts(0, 2),
            RestoreAction::Wait,
            RestorePhase::ScalingDown,
        ),
        (
            "pods gone: one Job per member",
            vec![(0, proven())],
            facts(0, 0),
            RestoreAction::CreateJobs(vec![1, 2, 3]),
            RestorePhase::RestoringMembers,
        ),
        (
            "members restoring",
            with_proof(three(|_| StepJob::Running)),
            facts(0, 0),
            RestoreAction::Wait,
            RestorePhase::RestoringMembers,
        ),
        (
            "members restored: scaled back",
            with_proof(three(restored)),
            facts(0, 0),
            RestoreAction::ScaleTo(3),
            RestorePhase::ScalingUp,
        ),
        (
            "members not healthy yet",
            with_proof(three(restored)),
            RestoreFacts {
                replicas: Some(3),
                healthy_members: 1,
                revision: Some(100),
                ..RestoreFacts::default()
            },
            RestoreAction::Wait,
            RestorePhase::WaitingForMembers,
        ),
    ];
    let mut status = started();
    for (what, jobs, facts, wanted, phase) in passes {
        let (next, action) = decide(status, &jobs, &facts, at(10));
        assert_eq!(action, wanted, "{what}");
        assert_eq!(next.phase, phase, "{what}");
        status = next;
    }
    assert_eq!(status.original_replicas, Some(3));
    let (done, action) = decide(status, &with_proof(three(restored)), &healthy, at(20));
    let RestoreAction::Complete(line) = action else { panic!("complete: {action:?}") };
    assert!(
        line.contains("30 revision(s) written after the snapshot are lost (revisions 101 to 130"),
        "{line}"
    );
    assert_eq!(done.lost_revisions, Some(30));
    let phases: Vec<(RestorePhase, &str)> = done.steps.iter().map(|s| (s.phase, s.state.as_str())).collect();
    assert_eq!(
        phases,
        [
            (RestorePhase::CheckingSnapshot, "Succeeded"),
            (RestorePhase::ScalingDown, "Succeeded"),
            (RestorePhase::RestoringMembers, "Succeeded"),
            (RestorePhase::ScalingUp, "Succeeded"),
            (RestorePhase::WaitingForMembers, "Succeeded"),
            (RestorePhase::Done, "Succeeded"),
        ]
    );
}

#[test]
fn a_failure_stops_at_its_step_and_says_how_to_go_on_or_back() {
    let (status, action) =
        decide(started(), &[(0, StepJob::Failed("trailer mismatch".into()))], &facts(3, 3), at(1));
    let RestoreAction::Fail(why) = action else { panic!("{action:?}") };
    assert!(why.contains("trailer mismatch") && why.contains("nothing of the cluster was touched"), "{why}");
    assert_eq!(status.steps.last().map(|s| s.state.as_str()), Some("Failed"));

    let mut restoring = started();
    restoring.phase = RestorePhase::RestoringMembers;
    restoring.original_replicas = Some(3);
    let jobs =
        vec![(1, restored("etcd-0")), (2, StepJob::Failed("no space".into())), (3, restored("etcd-2"))];
    let (status, action) = decide(restoring, &jobs, &facts(0, 0), at(1));
    let RestoreAction::Fail(why) = action else { panic!("{action:?}") };
    assert!(why.contains("etcd-1: no space"), "{why}");
    let recovery = status.recovery.unwrap();
    assert!(
        recovery.contains(".pre-restore-r1-0f1e2d3c") && recovery.contains("scale the StatefulSet to 3"),
        "{recovery}"
    );
}

#[test]
fn the_member_jobs_restore_each_claim_with_the_whole_membership() {
    let status = started();
    let naming = SnapshotNaming { cluster: "main".into(), time: at(0) };
    let bucket = groundskeeper_api::snapshot_store::BucketSpec { url: "s3://b".into(), ..Default::default() };
    let step = step_of_restore(
        &status,
        2,
        &Store::Bucket(bucket),
        &Default::default(),
        "default.etcd",
        &naming,
        &cluster(Some(0)),
    )
    .unwrap();
    let args = step.operation.to_args().join(" ");
    assert!(
        args.starts_with("restore-member --from s3://b --object main-1.db --expect-sha256 abc"),
        "{args}"
    );
    assert!(args.contains("--data-dir /var/lib/etcd-member/default.etcd --name etcd-1"), "{args}");
    assert!(
        args.contains(
            "--initial-cluster etcd-0=http://etcd-0.etcd:2380,etcd-1=http://etcd-1.etcd:2380,etcd-2=http://etcd-2.etcd:2380 \
             --initial-advertise-peer-urls http://etcd-1.etcd:2380 --initial-cluster-token main-restored-r1-0f1e2d3c \
             --keep-old-suffix .pre-restore-r1-0f1e2d3c"
        ),
        "{args}"
    );
    assert_eq!(step.claims.last().map(|c| c.claim_name.as_str()), Some("data-etcd-1"));
}

/// Asked again before anything is touched: a quorum back while the snapshot was proven, or a
/// member's claim gone, stops the restore with the cluster as it was.
#[test]
fn nothing_is_touched_when_the_restore_may_no_longer_start() {
    let refused = RestoreFacts { refused: Some("EtcdCluster main has its quorum".into()), ..facts(3, 3) };
    for (what, status, jobs) in [
        ("right after the proof", started(), vec![(0, proven())]),
        (
            "before the scale-down",
            {
                let (status, _) = decide(started(), &[(0, proven())], &facts(3, 3), at(1));
                assert_eq!(status.phase, RestorePhase::ScalingDown);
                status
            },
            vec![(0, proven())],
        ),
    ] {
        let (status, action) = decide(status, &jobs, &refused, at(2));
        let RestoreAction::Fail(why) = action else { panic!("{what}: {action:?}") };
        assert!(
            why.contains("has its quorum") && why.contains("nothing of the cluster was touched"),
            "{what}: {why}"
        );
        assert_eq!(status.steps.last().map(|s| s.state.as_str()), Some("Failed"), "{what}");
    }
    let missing = RestoreFacts { missing_claims: vec!["data-etcd-2".into()], ..facts(3, 3) };
    let (_, action) = decide(started(), &[(0, proven())], &missing, at(2));
    let RestoreAction::Fail(why) = action else { panic!("{action:?}") };
    assert!(why.contains("data-etcd-2 do not exist"), "{why}");
}

/// Members are restored only while the StatefulSet stays at zero; from a claim, one at a time.
#[test]
fn members_are_restored_only_while_stopped_and_from_a_claim_one_at_a_time() {
    let mut restoring = started();
    restoring.phase = RestorePhase::RestoringMembers;
    restoring.original_replicas = Some(3);
    let (status, action) = decide(restoring.clone(), &[(0, proven())], &facts(3, 1), at(1));
    let RestoreAction::Fail(why) = action else { panic!("{action:?}") };
    assert!(why.contains("is running again (3 replicas, 1 pods)"), "{why}");
    assert!(status.recovery.unwrap().contains("To go back"));

    let mut from_claim = restoring;
    from_claim.store = "pvc/main-snapshots".into();
    let passes = [
        (vec![(0, proven())], RestoreAction::CreateJobs(vec![1])),
        (vec![(0, proven()), (1, StepJob::Running)], RestoreAction::Wait),
        (vec![(0, proven()), (1, restored("etcd-0"))], RestoreAction::CreateJobs(vec![2])),
    ];
    for (jobs, wanted) in passes {
        let (_, action) = decide(from_claim.clone(), &jobs, &facts(0, 0), at(1));
        assert_eq!(action, wanted, "{jobs:?}");
    }
}

/// To a point in time: the start picks the newest full snapshot at or before the revision (a
/// delta never), refuses a revision before the oldest, naming the field; the replay's saved
/// snapshot becomes what the members are restored from, and a replay that saved nothing, or
/// served another revision, stops it before anything is touched.
#[test]
fn a_restore_to_a_point_in_time_restores_the_snapshot_its_replay_saved() {
    use groundskeeper_protocol::result::{ReplayReport, SavedSnapshot};
    let mut cluster = cluster(Some(0));
    let catalog = &mut cluster.status.as_mut().unwrap().snapshots;
    let record = |object: &str, start: Option<i64>, revision: i64| SnapshotRecord {
        store: "s3://b".into(),
        object: object.into(),
        revision: Some(revision),
        start_revision: start,
        ..SnapshotRecord::default()
    };
    catalog.push(record("main-2.db", None, 200));
    catalog.push(record("main-3-200-260.delta", Some(200), 260));
    let start_at = |revision| {
        start(
            &cluster,
            "r1",
            "0f1e",
            &Restore { to_revision: Some(revision), ..restore(false) },
            "data",
            at(0),
        )
    };
    let status = start_at(250).unwrap();
    assert_eq!((status.object.as_str(), status.replayed_from.as_deref()), ("main-2.db", Some("main-2.db")));
    assert_eq!(start_at(150).unwrap().object, "main-1.db", "the older full holds revision 150's base");
    let why = start_at(50).unwrap_err();
    assert!(why.contains("spec.config.restore.toRevision 50 is before the oldest full snapshot"), "{why}");
    assert!(why.contains("revision 100"), "{why}");

    let replayed = |revision: i64, saved: bool| {
        StepJob::Succeeded(Some(Box::new(Report::SnapshotReplay(ReplayReport {
            object: "main-2.db".into(),
            deltas: vec!["main-3-200-260.delta".into()],
            to_revision: 250,
            replayed: true,
            revisions_exact: true,
            revision: Some(revision),
            keys: Some(33),
            saved: saved.then(|| SavedSnapshot {
                object: "main-20260101T000000Z.db".into(),
                size_bytes: 4096,
                sha256: "feed".into(),
                revision: Some(revision),
                keys: Some(33),
                stored: Default::default(),
            }),
            ..ReplayReport::default()
        }))))
    };
    let (next, action) = decide(status.clone(), &[(0, replayed(250, true))], &facts(3, 3), at(10));
    assert_eq!((action, next.phase), (RestoreAction::Wait, RestorePhase::ScalingDown), "{next:#?}");
    assert_eq!(
        (next.object.as_str(), next.sha256.as_deref(), next.revision, next.keys),
        ("main-20260101T000000Z.db", Some("feed"), Some(250), Some(33))
    );
    assert_eq!(next.deltas, ["main-3-200-260.delta"]);
    for (job, what) in
        [(replayed(250, false), "saved nothing"), (replayed(249, true), "served another revision")]
    {
        let (failed, action) = decide(status.clone(), &[(0, job)], &facts(3, 3), at(10));
        assert!(matches!(action, RestoreAction::Fail(_)), "{what}: {action:?}");
        assert_eq!(failed.object, "main-2.db", "{what}: nothing taken from it");
    }
}

/// A Restore to a time goes to the revision of the newest backup written by then, and a time
/// still to come is refused.
#[test]
fn a_restore_to_a_time_goes_to_the_newest_backup_written_by_then() {
    let mut cluster = cluster(Some(0));
    let written = |second: i64| Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(second)));
    let catalog = &mut cluster.status.as_mut().unwrap().snapshots;
    catalog.push(SnapshotRecord {
        store: "s3://b".into(),
        object: "main-2.db".into(),
        revision: Some(200),
        written_at: written(100),
        ..SnapshotRecord::default()
    });
    catalog.push(SnapshotRecord {
        store: "s3://b".into(),
        object: "main-3-200-260.delta".into(),
        start_revision: Some(200),
        revision: Some(260),
        written_at: written(130),
        ..SnapshotRecord::default()
    });
    let start_at = |time: i64, now: i64| {
        start(&cluster, "r1", "0f1e", &Restore { to_time: Some(at(time)), ..restore(false) }, "data", at(now))
    };
    let status = start_at(140, 200).unwrap();
    assert_eq!((status.to_revision, status.replayed_from.as_deref()), (Some(260), Some("main-2.db")));
    assert_eq!(start_at(120, 200).unwrap().to_revision, Some(200), "the delta was written after 120");
    let why = start_at(300, 200).unwrap_err();
    assert!(why.contains("spec.config.restore.toTime") && why.contains("is in the future"), "{why}");
}

/// A restore from an encrypted store: the proof and every member's restore get the key (only
/// the key: nothing is written), its Secret mounted with that key alone.
#[test]
fn the_proof_and_the_member_jobs_open_an_encrypted_store_with_its_key() {
    let status = started();
    let naming = SnapshotNaming { cluster: "main".into(), time: at(0) };
    let encoding = groundskeeper_api::snapshot_store::StoreEncoding {
        compress: true,
        encryption: Some(groundskeeper_api::snapshot_store::EncryptionSpec {
            secret_name: "backup-key".into(),
            key: "aes.key".into(),
        }),
    };
    for step in [0, 2] {
        let job = step_of_restore(
            &status,
            step,
            &Store::Claim("snaps".into()),
            &encoding,
            "default.etcd",
            &naming,
            &cluster(Some(0)),
        )
        .unwrap();
        let args = job.operation.to_args().join(" ");
        assert!(args.contains("--encryption-key /var/run/groundskeeper/encryption-from/aes.key"), "{args}");
        assert!(!args.contains("--compression"), "a reader: {args}");
        let folders: Vec<_> =
            job.secret_folders.iter().map(|f| (f.secret_name.as_str(), f.item.as_deref())).collect();
        assert_eq!(folders, [("backup-key", Some("aes.key"))]);
    }
}
