//! A finished etcd task's outcome in its EtcdCluster's status: what each kind of result records,
//! that a failure keeps the progress made before it, that compaction only moves forward, and
//! that an outcome is recorded once; a snapshot's file on its task and its cluster.

use groundskeeper_api::etcd_cluster::{EtcdClusterStatus, EtcdMemberStatus};
use groundskeeper_api::maintenance_task::{TaskState, TaskType};
use groundskeeper_controller::etcd::record::{
    FinishedStep, FinishedTask, is_maintenance, record, record_snapshot,
};
use groundskeeper_controller::etcd::task_progress::{snapshot_status, snapshot_summary};
use groundskeeper_protocol::result::{
    CompactReport, DefragReport, ErrorKind, MemberDefrag, MemberDefragState, ResultError, SnapshotReport,
};
use groundskeeper_protocol::{JobResult, Outcome, Report};
use jiff::Timestamp;

const MB: i64 = 1_000_000;

fn now() -> Timestamp {
    "2026-03-01T12:00:00Z".parse().unwrap()
}

fn defrag_result(outcome: Outcome, defragmented: bool) -> JobResult {
    let report = DefragReport {
        members: vec![MemberDefrag {
            name: "etcd-1".into(),
            id: "2".into(),
            db_size_before: 200 * MB,
            db_size_after: if defragmented { 50 * MB } else { 200 * MB },
            defragmented,
            duration_ms: 2500,
            was_leader: false,
            reason: if defragmented { "fragmented".into() } else { "under the thresholds".into() },
            state: None,
        }],
        ..Default::default()
    };
    JobResult::new(Report::Defrag(report), outcome, "2026-03-01T11:50:00Z".into(), 60_000)
}

fn compact_result(compacted_revision: i64, already_compacted: bool) -> JobResult {
    JobResult::new(
        Report::Compact(CompactReport {
            current_revision: 10_000,
            compacted_revision,
            physical: true,
            already_compacted,
            held_back_from: None,
        }),
        Outcome::Succeeded,
        "2026-03-01T11:59:00Z".into(),
        5,
    )
}

fn finished(name: &str, state: TaskState, results: Vec<JobResult>) -> FinishedTask {
    FinishedTask {
        name: name.into(),
        state,
        failure: None,
        steps: results
            .into_iter()
            .enumerate()
            .map(|(step, result)| FinishedStep { job: format!("{name}-{step}"), result: Ok(result) })
            .collect(),
    }
}

/// A status as the trigger leaves it: three members observed.
fn observed() -> EtcdClusterStatus {
    EtcdClusterStatus {
        members: (1..=3)
            .map(|id| EtcdMemberStatus {
                name: format!("etcd-{}", id - 1),
                id: id.to_string(),
                healthy: true,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

#[test]
fn only_compaction_and_defragmentation_are_maintenance() {
    for (task_type, wanted) in [
        (TaskType::Compact, true),
        (TaskType::Defragment, true),
        (TaskType::Maintenance, true),
        (TaskType::Snapshot, false),
        (TaskType::Cleanup, false),
    ] {
        assert_eq!(is_maintenance(&task_type), wanted, "{task_type}");
    }
}

#[test]
fn a_completed_defragmentation_is_recorded_once() {
    let task =
        finished("main-defragment-1", TaskState::Completed, vec![defrag_result(Outcome::Succeeded, true)]);
    let recorded = record(&observed(), &task, now()).expect("recorded");
    let status = &recorded.status;
    assert_eq!(status.last_maintenance_task.as_deref(), Some("main-defragment-1"));
    assert_eq!(status.last_maintenance_outcome.as_deref(), Some("Succeeded"));
    assert_eq!(status.last_maintenance_time.as_ref().unwrap().0, now());
    let etcd1 = &status.members[1];
    assert_eq!(etcd1.last_bytes_reclaimed, Some(150 * MB));
    // Finished = started + duration, not the time the controller noticed.
    assert_eq!(
        etcd1.last_defrag_time.as_ref().unwrap().0,
        "2026-03-01T11:51:00Z".parse::<Timestamp>().unwrap()
    );
    assert_eq!(status.members[0].last_defrag_time, None);
    assert!(!recorded.event.warning);
    assert_eq!(recorded.event.reason, "MaintenanceSucceeded");
    assert!(
        recorded.event.note.starts_with("MaintenanceTask main-defragment-1: succeeded: ")
            && recorded.event.note.contains("150000000 bytes reclaimed"),
        "{}",
        recorded.event.note
    );
    assert_eq!(recorded.results.len(), 1);

    // Recorded again (the task's final status write failed and it was retried): nothing twice.
    assert_eq!(record(&recorded.status, &task, now()), None);
}

#[test]
fn a_failed_task_degrades_and_keeps_the_progress_made_before_the_failure() {
    let mut result = defrag_result(Outcome::Failed, true);
    result.error = Some(ResultError {
        kind: ErrorKind::Retryable,
        message: "member etcd-2 stopped answering".into(),
        reason: None,
    });
    let mut task = finished("main-maintenance-1", TaskState::Failed, vec![result]);
    task.failure = Some("step 1 (Job main-maintenance-1-0) failed: member etcd-2 stopped answering".into());
    let recorded = record(&observed(), &task, now()).unwrap();
    assert_eq!(recorded.status.last_maintenance_outcome.as_deref(), Some("Failed"));
    let message = recorded.status.last_maintenance_message.as_deref().unwrap();
    assert!(message.contains("retryable error: member etcd-2 stopped answering"), "{message}");
    assert!(message.contains("failed: step 1 (Job main-maintenance-1-0)"), "{message}");
    assert!(recorded.event.warning);
    assert_eq!(recorded.event.reason, "MaintenanceFailed");
    // etcd-1 was defragmented before the failure.
    assert_eq!(recorded.status.members[1].last_bytes_reclaimed, Some(150 * MB));
}

#[test]
fn a_task_that_failed_without_a_readable_result_still_counts() {
    let task = FinishedTask {
        name: "main-defragment-1".into(),
        state: TaskState::Failed,
        failure: Some("did not finish within its deadline (DeadlineExceeded)".into()),
        steps: vec![FinishedStep {
            job: "main-defragment-1-0".into(),
            result: Err("Job etcd/main-defragment-1-0 has no pod".into()),
        }],
    };
    let recorded = record(&observed(), &task, now()).unwrap();
    assert_eq!(recorded.status.last_maintenance_outcome.as_deref(), Some("Failed"));
    assert!(recorded.event.note.contains("DeadlineExceeded"), "{}", recorded.event.note);
    assert!(recorded.event.note.contains("has no pod"), "{}", recorded.event.note);
    assert!(recorded.results.is_empty());
    // A task that failed before any step ran (its target invalid, its deadline passed queued).
    let task = FinishedTask { steps: vec![], ..task };
    let recorded = record(&observed(), &task, now()).unwrap();
    assert_eq!(recorded.status.last_maintenance_outcome.as_deref(), Some("Failed"));
}

#[test]
fn a_task_whose_every_step_found_nothing_to_do_is_skipped() {
    let skipped = finished("defrag-now", TaskState::Completed, vec![defrag_result(Outcome::Skipped, false)]);
    let recorded = record(&observed(), &skipped, now()).unwrap();
    assert_eq!(recorded.status.last_maintenance_outcome.as_deref(), Some("Skipped"));
    assert_eq!(recorded.event.reason, "MaintenanceSkipped");
    assert_eq!(recorded.status.members[1].last_defrag_time, None);

    // A compaction then a defrag that skipped: the compaction did something.
    let partly = finished(
        "compact-then-defrag",
        TaskState::Completed,
        vec![compact_result(9000, false), defrag_result(Outcome::Skipped, false)],
    );
    let recorded = record(&observed(), &partly, now()).unwrap();
    assert_eq!(recorded.status.last_maintenance_outcome.as_deref(), Some("Succeeded"));
    assert_eq!(recorded.status.last_compacted_revision, Some(9000));
    assert!(recorded.event.note.contains("compacted to revision 9000; skipped: "), "{}", recorded.event.note);
}

#[test]
fn compaction_moves_the_compacted_revision_forward_only() {
    let mut previous = observed();
    previous.last_compacted_revision = Some(9000);
    let task = finished("compact-now", TaskState::Completed, vec![compact_result(8000, true)]);
    let recorded = record(&previous, &task, now()).unwrap();
    assert_eq!(recorded.status.last_compacted_revision, Some(9000));
    assert_eq!(
        recorded.status.last_compaction_time.as_ref().unwrap().0,
        "2026-03-01T11:59:00.005Z".parse::<Timestamp>().unwrap()
    );
    assert!(recorded.event.note.contains("was compacted already"));

    let task = finished("main-compact-2", TaskState::Completed, vec![compact_result(9500, false)]);
    let recorded = record(&recorded.status, &task, now()).unwrap();
    assert_eq!(recorded.status.last_compacted_revision, Some(9500));
}

#[test]
fn a_member_whose_defrag_was_in_flight_when_the_run_stopped_is_told_as_unknown() {
    let mut result = defrag_result(Outcome::Failed, false);
    if let Report::Defrag(report) = &mut result.report {
        report.members[0].state = Some(MemberDefragState::Unknown);
    }
    let task = finished("main-defragment-2", TaskState::Failed, vec![result]);
    let recorded = record(&observed(), &task, now()).expect("recorded");
    assert!(
        recorded.event.note.contains(
            "defragmented 0 of 1 member(s), 1 unknown (a defrag call was in flight when the run stopped)"
        ),
        "{}",
        recorded.event.note
    );
}

fn snapshot_result(outcome: Outcome) -> JobResult {
    let report = SnapshotReport {
        path: "/snapshots/main-20260301T115900Z.db".into(),
        member: Some("etcd-1".into()),
        member_id: Some("2".into()),
        size_bytes: 3 * 1024 * 1024 + 32,
        size_mib: 3.0,
        revision: Some(4242),
        sha256: Some("ab".repeat(32)),
        stream_duration_ms: 1500,
        retain: Some(2),
        deleted: vec!["main-20260101T000000Z.db".into()],
        deleted_count: 1,
        ..Default::default()
    };
    JobResult::new(Report::Snapshot(report), outcome, "2026-03-01T11:59:00Z".into(), 1600)
}

/// A Snapshot task's status shows the file, its size in bytes and MiB, revision, member,
/// checksum, duration and what retention deleted; the cluster records it once as lastSnapshot.
#[test]
fn a_snapshot_shows_on_its_task_and_once_on_its_cluster() {
    let result = snapshot_result(Outcome::Succeeded);
    let snapshot = snapshot_status(Some("snaps"), None, "main-20260301T115900Z.db", Some(&result));
    assert_eq!(snapshot.size_bytes, Some(3 * 1024 * 1024 + 32));
    assert_eq!(snapshot.size.as_deref(), Some("3.00 MiB"));
    assert_eq!(snapshot.revision, Some(4242));
    assert_eq!(snapshot.member.as_deref(), Some("etcd-1"));
    assert_eq!(snapshot.duration_seconds, Some(1.5));
    assert_eq!(snapshot.deleted, ["main-20260101T000000Z.db"]);
    assert_eq!(snapshot.deleted_count, Some(1));
    let line = snapshot_summary(&snapshot);
    assert!(
        line.starts_with("snapshot of revision 4242 from etcd-1 written to snaps/main-20260301T115900Z.db: 3.00 MiB (3145760 bytes) in 1.5s, sha256 abab"),
        "{line}"
    );
    assert!(line.contains("retention deleted 1 older snapshot(s): main-20260101T000000Z.db"), "{line}");

    // Failed or still running: where it goes, nothing claimed about what it holds.
    let failed = snapshot_status(Some("snaps"), None, "f.db", Some(&snapshot_result(Outcome::Failed)));
    assert_eq!((failed.file.as_str(), failed.size_bytes, failed.revision), ("f.db", None, None));
    assert_eq!(snapshot_status(Some("snaps"), None, "f.db", None).sha256, None);
    assert_eq!(record_snapshot(&observed(), "t", &failed, now()), None);

    let recorded = record_snapshot(&observed(), "snap-1", &snapshot, now()).expect("recorded");
    let last = recorded.last_snapshot.clone().unwrap();
    assert_eq!(last.task, "snap-1");
    assert_eq!(last.file, "main-20260301T115900Z.db");
    assert_eq!(last.persistent_volume_claim, "snaps");
    assert_eq!(last.revision, Some(4242));
    assert_eq!(last.size_bytes, Some(3 * 1024 * 1024 + 32));
    assert_eq!(last.time.0, now());
    // Maintenance memory is not touched: a snapshot is no maintenance.
    assert_eq!(recorded.last_maintenance_task, observed().last_maintenance_task);
    assert_eq!(record_snapshot(&recorded, "snap-1", &snapshot, now()), None);
}
