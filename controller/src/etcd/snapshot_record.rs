//! What a finished Snapshot, Copy or Verify task leaves in its EtcdCluster's status (pure): each
//! snapshot written or copied goes into the catalog (`status.snapshots`) under its store, those
//! retention deleted leave it, and a proof is attached to its snapshot and becomes
//! `status.lastSnapshotProof`, which drives condition `SnapshotRestorable` and, when it failed,
//! Degraded. Recording twice changes nothing, so a controller that restarts between the record and
//! the task's final status records safely again.

use groundskeeper_api::etcd_cluster::{BackupGap, EtcdClusterStatus};
use groundskeeper_api::snapshot_catalog::{
    SnapshotProof, SnapshotRecord, with_proof, with_record, without_deleted,
};
use groundskeeper_api::validate::Work;
use groundskeeper_protocol::result::{
    CopyReport, DeltaReport, ErrorReason, ProveReport, ReplayReport, SnapshotReport, StoredAs,
};
use groundskeeper_protocol::{JobResult, Outcome, Report};
use jiff::Timestamp;

/// The status with what `results` (the task's finished steps, in order) say recorded; `None`
/// when nothing changes.
pub fn record_snapshot_work(
    previous: &EtcdClusterStatus,
    task: &str,
    work: &Work,
    results: &[JobResult],
    now: Timestamp,
) -> Option<EtcdClusterStatus> {
    let mut status = previous.clone();
    for result in results {
        match (&result.report, work) {
            (Report::Snapshot(report), Work::Snapshot(snapshot)) if result.outcome == Outcome::Succeeded => {
                record_snapshot(&mut status, &snapshot.store.display(), task, report, now);
            }
            (Report::SnapshotCopy(report), Work::Copy(copy)) => {
                record_copy(&mut status, &copy.from.display(), &copy.to.display(), task, report, now);
            }
            (Report::SnapshotProve(report), Work::Snapshot(snapshot)) => {
                record_proof(&mut status, &snapshot.store.display(), task, result, report, now);
            }
            (Report::SnapshotProve(report), Work::Verify(verify)) => {
                record_proof(&mut status, &verify.from.display(), task, result, report, now);
            }
            (Report::SnapshotDelta(report), Work::Delta(delta)) if result.outcome == Outcome::Succeeded => {
                record_delta(&mut status, &delta.to.display(), task, report, now);
            }
            (Report::SnapshotDelta(report), Work::Delta(delta)) => {
                record_gap(&mut status, &delta.to.display(), task, report, now);
            }
            (Report::SnapshotReplay(report), Work::Restore(restore)) => {
                record_saved(&mut status, &restore.from.display(), task, report, now);
            }
            _ => {}
        }
    }
    (status != *previous).then_some(status)
}

/// A record's `encoding`, `keyId` and `contentBytes`, from what a report says of how an object is
/// stored: never a key, only its id.
fn stored_fields(stored: &StoredAs) -> SnapshotRecord {
    SnapshotRecord {
        encoding: stored.encoding.clone(),
        key_id: stored.key_id.clone(),
        content_bytes: stored.content_bytes.and_then(|b| i64::try_from(b).ok()),
        ..SnapshotRecord::default()
    }
}

fn mib_text(bytes: u64) -> String {
    format!("{:.2} MiB", bytes as f64 / (1024.0 * 1024.0))
}

fn record_snapshot(
    status: &mut EtcdClusterStatus,
    store: &str,
    task: &str,
    report: &SnapshotReport,
    now: Timestamp,
) {
    let object = report.path.rsplit('/').next().unwrap_or(&report.path).to_owned();
    let catalog = std::mem::take(&mut status.snapshots);
    let deleted: Vec<String> = report.deleted.iter().chain(&report.deleted_deltas).cloned().collect();
    let catalog = without_deleted(catalog, store, &deleted);
    status.snapshots = with_record(
        catalog,
        SnapshotRecord {
            store: store.to_owned(),
            object,
            written_at: Some(now.into()),
            revision: report.revision,
            start_revision: None,
            changes: None,
            keys: report.keys,
            size_bytes: i64::try_from(report.size_bytes).ok(),
            size: Some(mib_text(report.size_bytes)),
            sha256: report.sha256.clone(),
            task: Some(task.to_owned()),
            proof: None,
            ..stored_fields(&report.stored)
        },
    );
}

/// A delta written goes into the catalog with the revisions it spans; a run that found nothing
/// to write (no object) leaves the catalog as it is.
fn record_delta(
    status: &mut EtcdClusterStatus,
    store: &str,
    task: &str,
    report: &DeltaReport,
    now: Timestamp,
) {
    let Some(object) = &report.object else {
        return;
    };
    status.snapshots = with_record(
        std::mem::take(&mut status.snapshots),
        SnapshotRecord {
            store: store.to_owned(),
            object: object.clone(),
            written_at: Some(now.into()),
            revision: Some(report.end_revision),
            start_revision: Some(report.start_revision),
            changes: i64::try_from(report.events).ok(),
            size_bytes: i64::try_from(report.size_bytes).ok(),
            size: Some(mib_text(report.size_bytes)),
            sha256: report.sha256.clone(),
            task: Some(task.to_owned()),
            ..stored_fields(&report.stored)
        },
    );
}

/// The full snapshot a Restore to a point in time saved (its replay's member at the revision
/// asked for) goes into the catalog as any full snapshot.
fn record_saved(
    status: &mut EtcdClusterStatus,
    store: &str,
    task: &str,
    report: &ReplayReport,
    now: Timestamp,
) {
    let Some(saved) = &report.saved else {
        return;
    };
    status.snapshots = with_record(
        std::mem::take(&mut status.snapshots),
        SnapshotRecord {
            store: store.to_owned(),
            object: saved.object.clone(),
            written_at: Some(now.into()),
            revision: saved.revision,
            keys: saved.keys,
            size_bytes: i64::try_from(saved.size_bytes).ok(),
            size: Some(mib_text(saved.size_bytes)),
            sha256: Some(saved.sha256.clone()),
            task: Some(task.to_owned()),
            ..stored_fields(&saved.stored)
        },
    );
}

/// A delta that found its start compacted away: a gap in the backups of the backup policy's store
/// (`status.backup`, which the EtcdCluster controller keeps for `spec.backup`), which the next
/// pass answers with a full snapshot. Other stores have no policy to answer: the task's own
/// failure says it.
fn record_gap(status: &mut EtcdClusterStatus, store: &str, task: &str, report: &DeltaReport, now: Timestamp) {
    let (Some(compacted_to), Some(backup)) =
        (report.compact_revision, status.backup.as_mut().filter(|b| b.store == store))
    else {
        return;
    };
    if backup.gap.as_ref().is_some_and(|g| g.task == task) {
        return;
    }
    backup.gap = Some(BackupGap {
        task: task.to_owned(),
        found_at: Some(now.into()),
        after_revision: report.start_revision,
        compacted_to,
    });
}

/// Each snapshot copied goes into the catalog under the destination, with what the copy checked
/// (size, checksum) and what the source's entry knew (revision, keys); one already there is
/// entered from the source's entry when the catalog does not know it there yet.
fn record_copy(
    status: &mut EtcdClusterStatus,
    from: &str,
    to: &str,
    task: &str,
    report: &CopyReport,
    now: Timestamp,
) {
    let source = |name: &str| status.snapshots.iter().find(|r| r.store == from && r.object == name).cloned();
    let mut records = Vec::new();
    for copied in &report.copied {
        let known = source(&copied.name);
        records.push(SnapshotRecord {
            store: to.to_owned(),
            object: copied.name.clone(),
            written_at: Some(now.into()),
            revision: copied.revision.or(known.as_ref().and_then(|k| k.revision)),
            start_revision: known.as_ref().and_then(|k| k.start_revision),
            changes: known.as_ref().and_then(|k| k.changes),
            keys: copied.keys.or(known.as_ref().and_then(|k| k.keys)),
            size_bytes: i64::try_from(copied.size_bytes).ok(),
            size: Some(mib_text(copied.size_bytes)),
            sha256: Some(copied.sha256.clone()),
            task: Some(task.to_owned()),
            proof: None,
            // Carried as it is: the copy's own report says how, else the source's entry.
            encoding: copied.stored.encoding.clone().or(known.as_ref().and_then(|k| k.encoding.clone())),
            key_id: copied.stored.key_id.clone().or(known.as_ref().and_then(|k| k.key_id.clone())),
            content_bytes: copied
                .stored
                .content_bytes
                .and_then(|b| i64::try_from(b).ok())
                .or(known.as_ref().and_then(|k| k.content_bytes)),
        });
    }
    for name in &report.already_there {
        let present = status.snapshots.iter().any(|r| r.store == to && &r.object == name);
        if let (false, Some(known)) = (present, source(name)) {
            records.push(SnapshotRecord {
                store: to.to_owned(),
                task: Some(task.to_owned()),
                proof: None,
                ..known
            });
        }
    }
    for record in records {
        status.snapshots = with_record(std::mem::take(&mut status.snapshots), record);
    }
}

fn record_proof(
    status: &mut EtcdClusterStatus,
    store: &str,
    task: &str,
    result: &JobResult,
    report: &ProveReport,
    now: Timestamp,
) {
    if report.object.is_empty() {
        return; // the run never got to a snapshot (bad arguments, nothing in the store)
    }
    // A proof that did not finish (the store out of reach, the Job stopped, the member killed)
    // says nothing of the snapshot: only a proof that passed or one that found it wanting
    // (bad input) is recorded.
    let finished = result.outcome == Outcome::Succeeded
        || result
            .error
            .as_ref()
            .is_some_and(|e| e.kind == groundskeeper_protocol::result::ErrorKind::BadInput);
    if !finished || key_failure(result) {
        return;
    }
    let message = match (&result.error, &result.message) {
        (Some(error), _) => error.message.clone(),
        (None, Some(message)) => message.clone(),
        (None, None) => String::new(),
    };
    let proof = SnapshotProof {
        store: store.to_owned(),
        object: report.object.clone(),
        proven: report.proven && result.outcome == Outcome::Succeeded,
        at: Some(now.into()),
        revision: report.revision,
        expected_revision: report.expected_revision,
        keys: report.keys,
        expected_keys: report.expected_keys,
        sha256: report.sha256.clone(),
        task: Some(task.to_owned()),
        message,
    };
    status.snapshots = with_proof(std::mem::take(&mut status.snapshots), &proof);
    status.last_snapshot_proof = Some(proof);
}

/// Whether a proof failed for want of the right key: the snapshot is encrypted and the Job was
/// given no key or another one (the runner's `error.reason`: `KeyMissing`, `KeyMismatch`). That
/// is a mistake of the task (its `encryption`), not a snapshot that does not restore: it is not
/// recorded against the snapshot, nor in `SnapshotRestorable`; the task fails, naming the key id
/// needed.
fn key_failure(result: &JobResult) -> bool {
    result.outcome != Outcome::Succeeded
        && result.error.as_ref().and_then(|e| e.reason).is_some_and(ErrorReason::is_key)
}

/// A Verify's (or a Snapshot with `verify`'s) proof as its task's `status.proof`, once its Job
/// reported.
pub fn task_proof(work: &Work, task: &str, results: &[JobResult], now: Timestamp) -> Option<SnapshotProof> {
    let store = match work {
        Work::Snapshot(snapshot) => snapshot.store.display(),
        Work::Verify(verify) => verify.from.display(),
        _ => return None,
    };
    let mut status = EtcdClusterStatus::default();
    for result in results {
        if let Report::SnapshotProve(report) = &result.report {
            record_proof(&mut status, &store, task, result, report, now);
        }
    }
    status.last_snapshot_proof
}

/// A Copy's `status.copy`, once its Job reported.
pub fn task_copy(results: &[JobResult]) -> Option<groundskeeper_api::maintenance_task::CopyStatus> {
    results.iter().find_map(|result| match &result.report {
        Report::SnapshotCopy(report) => Some(groundskeeper_api::maintenance_task::CopyStatus {
            from: report.from.clone(),
            to: report.to.clone(),
            copied: report.copied.iter().map(|c| c.name.clone()).collect(),
            already_there: report.already_there.clone(),
            failed: report.failed.clone(),
            bytes_copied: i64::try_from(report.bytes_copied).ok(),
            size: Some(mib_text(report.bytes_copied)),
        }),
        _ => None,
    })
}

/// A Verify to a point in time's `status.replay`, once its Job reported.
pub fn task_replay(results: &[JobResult]) -> Option<groundskeeper_api::maintenance_task::ReplayStatus> {
    results.iter().find_map(|result| match &result.report {
        Report::SnapshotReplay(report) => Some(groundskeeper_api::maintenance_task::ReplayStatus {
            store: report.path.clone(),
            snapshot: report.object.clone(),
            snapshot_revision: report.snapshot_revision,
            deltas: report.deltas.clone(),
            to_revision: report.to_revision,
            replayed: report.replayed && result.outcome == Outcome::Succeeded,
            transactions: i64::try_from(report.transactions).unwrap_or(i64::MAX),
            changes: i64::try_from(report.events).unwrap_or(i64::MAX),
            revision: report.revision,
            keys: report.keys,
            keys_sha256: report.keys_sha256.clone(),
        }),
        _ => None,
    })
}

/// A Delta's `status.delta`, once its Job reported (a compacted start too: it says to what).
pub fn task_delta(results: &[JobResult]) -> Option<groundskeeper_api::maintenance_task::DeltaStatus> {
    results.iter().find_map(|result| match &result.report {
        Report::SnapshotDelta(report) => Some(groundskeeper_api::maintenance_task::DeltaStatus {
            store: report.path.clone(),
            object: report.object.clone(),
            start_revision: report.start_revision,
            end_revision: report.end_revision,
            start_from: report.start_from.clone(),
            transactions: i64::try_from(report.transactions).unwrap_or(i64::MAX),
            changes: i64::try_from(report.events).unwrap_or(i64::MAX),
            size_bytes: report.object.as_ref().and_then(|_| i64::try_from(report.size_bytes).ok()),
            size: report.object.as_ref().map(|_| mib_text(report.size_bytes)),
            sha256: report.sha256.clone(),
            compacted_to: report.compact_revision,
            encoding: report.stored.encoding.clone(),
            key_id: report.stored.key_id.clone(),
            content_bytes: report.stored.content_bytes.and_then(|b| i64::try_from(b).ok()),
        }),
        _ => None,
    })
}

/// A proof in one line, for `lastOperation`.
pub fn proof_summary(proof: &SnapshotProof) -> String {
    let number = |n: Option<i64>| n.map_or_else(|| "?".to_owned(), |n| n.to_string());
    if proof.proven {
        format!(
            "snapshot {} in {} proven restorable: revision {}, {} keys",
            proof.object,
            proof.store,
            number(proof.revision),
            number(proof.keys)
        )
    } else {
        format!("snapshot {} in {} NOT proven restorable: {}", proof.object, proof.store, proof.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use groundskeeper_api::snapshot_store::Store;
    use groundskeeper_api::validate::{Copy, Snapshot, Verify};
    use groundskeeper_protocol::result::CopiedObject;
    use groundskeeper_protocol::result::{ErrorKind, ResultError};

    fn now() -> Timestamp {
        "2026-03-01T12:00:00Z".parse().unwrap()
    }

    fn snapshot_work(verify: bool) -> Work {
        Work::Snapshot(Snapshot {
            encoding: Default::default(),
            persistent_volume_claim: "snaps".into(),
            store: Store::Claim("snaps".into()),
            verify,
            file_name: "{cluster}-{time}.db".into(),
            retain: 2,
            rules: Default::default(),
        })
    }

    fn result(report: Report, outcome: Outcome) -> JobResult {
        JobResult::new(report, outcome, "2026-03-01T11:59:00Z".into(), 100)
    }

    fn taken(name: &str, revision: i64, deleted: &[&str]) -> JobResult {
        result(
            Report::Snapshot(SnapshotReport {
                path: format!("/snapshots/{name}"),
                size_bytes: 2 * 1024 * 1024,
                revision: Some(revision),
                keys: Some(10),
                sha256: Some(format!("sha-{name}")),
                deleted: deleted.iter().map(|d| d.to_string()).collect(),
                ..SnapshotReport::default()
            }),
            Outcome::Succeeded,
        )
    }

    fn proved(name: &str, proven: bool) -> JobResult {
        let report = ProveReport {
            object: name.into(),
            proven,
            revision: Some(7),
            expected_revision: Some(7),
            keys: Some(if proven { 10 } else { 9 }),
            expected_keys: Some(10),
            ..ProveReport::default()
        };
        let outcome = if proven { Outcome::Succeeded } else { Outcome::Failed };
        let mut result = result(Report::SnapshotProve(report), outcome);
        if !proven {
            let why = "the restored member holds 9 keys, 10 were recorded";
            result.message = Some(why.into());
            result.error = Some(ResultError { kind: ErrorKind::BadInput, message: why.into(), reason: None });
        }
        result
    }

    /// A delta that found its start compacted records a gap in the backup policy's store, once;
    /// in another store (no policy answers there) nothing.
    #[test]
    fn a_compacted_start_is_a_gap_in_the_policys_store_only() {
        use groundskeeper_api::etcd_cluster::EtcdBackupStatus;
        use groundskeeper_api::validate::Delta;
        use groundskeeper_protocol::result::DeltaFailureReason;
        let work = |claim: &str| {
            Work::Delta(Delta {
                encoding: Default::default(),
                to: Store::Claim(claim.into()),
                file_name: "{cluster}-{time}.db".into(),
                start_revision: None,
            })
        };
        let compacted = result(
            Report::SnapshotDelta(DeltaReport {
                start_revision: 150,
                failure_reason: Some(DeltaFailureReason::HistoryCompacted),
                compact_revision: Some(180),
                ..DeltaReport::default()
            }),
            Outcome::Failed,
        );
        let previous = EtcdClusterStatus {
            backup: Some(EtcdBackupStatus { store: "pvc/snaps".into(), ..EtcdBackupStatus::default() }),
            ..EtcdClusterStatus::default()
        };
        let status = record_snapshot_work(
            &previous,
            "main-delta-9",
            &work("snaps"),
            std::slice::from_ref(&compacted),
            now(),
        )
        .expect("a gap recorded");
        let gap = status.backup.as_ref().and_then(|b| b.gap.clone()).unwrap();
        assert_eq!((gap.task.as_str(), gap.after_revision, gap.compacted_to), ("main-delta-9", 150, 180));
        assert_eq!(
            record_snapshot_work(
                &status,
                "main-delta-9",
                &work("snaps"),
                std::slice::from_ref(&compacted),
                now()
            ),
            None
        );
        assert_eq!(
            record_snapshot_work(&previous, "main-delta-9", &work("other"), &[compacted], now()),
            None
        );
    }

    #[test]
    fn a_snapshot_and_its_proof_enter_the_catalog_and_retention_leaves_it() {
        let status = EtcdClusterStatus::default();
        let first = record_snapshot_work(
            &status,
            "t1",
            &snapshot_work(true),
            &[taken("a.db", 5, &[]), proved("a.db", true)],
            now(),
        )
        .unwrap();
        assert_eq!(first.snapshots.len(), 1);
        assert!(first.snapshots[0].proof.as_ref().unwrap().proven);
        assert_eq!(first.snapshots[0].size.as_deref(), Some("2.00 MiB"));
        assert!(first.last_snapshot_proof.as_ref().unwrap().proven);
        assert_eq!(
            record_snapshot_work(
                &first,
                "t1",
                &snapshot_work(true),
                &[taken("a.db", 5, &[]), proved("a.db", true)],
                now()
            ),
            None,
            "recorded once"
        );

        let second =
            record_snapshot_work(&first, "t2", &snapshot_work(false), &[taken("b.db", 9, &["a.db"])], now())
                .unwrap();
        let names: Vec<&str> = second.snapshots.iter().map(|r| r.object.as_str()).collect();
        assert_eq!(names, ["b.db"], "retention deleted a.db");
        assert!(second.last_snapshot_proof.is_some(), "the last proof stays until another");
    }

    #[test]
    fn deltas_retention_deleted_leave_the_catalog_and_the_others_stay() {
        let delta = |object: &str, start: i64| SnapshotRecord {
            store: "pvc/snaps".into(),
            object: object.into(),
            start_revision: Some(start),
            revision: Some(start + 1),
            ..SnapshotRecord::default()
        };
        let mut status = EtcdClusterStatus {
            snapshots: vec![delta("old.delta", 5), delta("kept.delta", 9)],
            ..EtcdClusterStatus::default()
        };
        let Report::Snapshot(mut report) = taken("b.db", 20, &[]).report else { unreachable!() };
        report.deleted_deltas = vec!["old.delta".into()];
        record_snapshot(&mut status, "pvc/snaps", "t3", &report, now());
        let names: Vec<&str> = status.snapshots.iter().map(|r| r.object.as_str()).collect();
        assert_eq!(names, ["kept.delta", "b.db"]);
    }

    #[test]
    fn a_failed_proof_is_recorded_with_why() {
        let verify = Work::Verify(Verify {
            encoding: Default::default(),
            from: Store::Claim("snaps".into()),
            object: None,
            file_name: "x".into(),
            to_revision: None,
        });
        let status = record_snapshot_work(
            &EtcdClusterStatus::default(),
            "v1",
            &verify,
            &[proved("a.db", false)],
            now(),
        )
        .unwrap();
        let proof = status.last_snapshot_proof.clone().unwrap();
        assert!(!proof.proven);
        assert!(proof.message.contains("9 keys"), "{}", proof.message);
        assert_eq!(status.snapshots[0].store, "pvc/snaps");

        // A proof that did not finish (retryable: the store out of reach, the Job stopped) says
        // nothing of the snapshot: the earlier proof stands.
        let mut unfinished = proved("a.db", false);
        unfinished.error = Some(ResultError {
            kind: ErrorKind::Retryable,
            message: "stopped by signal".into(),
            reason: None,
        });
        assert_eq!(record_snapshot_work(&status, "v2", &verify, &[unfinished], now()), None);
    }

    #[test]
    fn a_copy_enters_the_destination_with_what_the_source_knew() {
        let before = record_snapshot_work(
            &EtcdClusterStatus::default(),
            "t1",
            &snapshot_work(false),
            &[taken("a.db", 5, &[]), taken("b.db", 6, &[])],
            now(),
        )
        .unwrap();
        let bucket =
            groundskeeper_api::snapshot_store::BucketSpec { url: "s3://b/p".into(), ..Default::default() };
        let copy = Work::Copy(Copy {
            from: Store::Claim("snaps".into()),
            to: Store::Bucket(bucket),
            file_name: "x".into(),
            only: vec![],
        });
        let report = CopyReport {
            copied: vec![CopiedObject {
                name: "a.db".into(),
                size_bytes: 10,
                sha256: "sha-a.db".into(),
                revision: None,
                keys: None,
                stored: Default::default(),
            }],
            already_there: vec!["b.db".into()],
            ..CopyReport::default()
        };
        let after = record_snapshot_work(
            &before,
            "c1",
            &copy,
            &[result(Report::SnapshotCopy(report), Outcome::Succeeded)],
            now(),
        )
        .unwrap();
        let in_bucket: Vec<(&str, Option<i64>)> = after
            .snapshots
            .iter()
            .filter(|r| r.store == "s3://b/p")
            .map(|r| (r.object.as_str(), r.revision))
            .collect();
        assert_eq!(in_bucket, [("a.db", Some(5)), ("b.db", Some(6))]);
    }

    /// The catalog and the task's status say how each object is stored and with which key id,
    /// from the Snapshot's, Delta's and Copy's reports.
    #[test]
    fn the_catalog_records_encoding_and_key_id() {
        let stored = StoredAs {
            encoding: Some("zstd+aes-256-gcm".into()),
            key_id: Some("1a2b3c4d5e6f7081".into()),
            content_bytes: Some(8 * 1024 * 1024),
            content_sha256: Some("c".into()),
        };
        let mut snapshot = taken("main-1.db", 7, &[]);
        if let Report::Snapshot(report) = &mut snapshot.report {
            report.stored = stored.clone();
        }
        let status = record_snapshot_work(
            &EtcdClusterStatus::default(),
            "t1",
            &snapshot_work(false),
            &[snapshot],
            now(),
        )
        .unwrap();
        let record = &status.snapshots[0];
        assert_eq!(record.encoding.as_deref(), Some("zstd+aes-256-gcm"));
        assert_eq!(record.key_id.as_deref(), Some("1a2b3c4d5e6f7081"));
        assert_eq!(record.content_bytes, Some(8 * 1024 * 1024));
        let delta_work = Work::Delta(groundskeeper_api::validate::Delta {
            encoding: Default::default(),
            to: Store::Claim("snaps".into()),
            file_name: "{cluster}-{time}.db".into(),
            start_revision: None,
        });
        let delta = result(
            Report::SnapshotDelta(DeltaReport {
                object: Some("main-1-7-9.delta".into()),
                start_revision: 7,
                end_revision: 9,
                stored: stored.clone(),
                ..DeltaReport::default()
            }),
            Outcome::Succeeded,
        );
        let status =
            record_snapshot_work(&status, "t2", &delta_work, std::slice::from_ref(&delta), now()).unwrap();
        let record = status.snapshots.iter().find(|r| r.object == "main-1-7-9.delta").unwrap();
        assert_eq!(record.key_id.as_deref(), Some("1a2b3c4d5e6f7081"));
        let task = task_delta(&[delta]).unwrap();
        assert_eq!(
            (task.encoding.as_deref(), task.key_id.as_deref()),
            (Some("zstd+aes-256-gcm"), Some("1a2b3c4d5e6f7081"))
        );
        // A copy carries the object as it is: its report says how, else the source's entry.
        let copy_work = Work::Copy(Copy {
            from: Store::Claim("snaps".into()),
            to: Store::Claim("offsite".into()),
            file_name: "{cluster}-{time}.db".into(),
            only: vec![],
        });
        let copied = result(
            Report::SnapshotCopy(CopyReport {
                copied: vec![CopiedObject {
                    name: "main-1.db".into(),
                    sha256: "s".into(),
                    ..CopiedObject::default()
                }],
                ..CopyReport::default()
            }),
            Outcome::Succeeded,
        );
        let status = record_snapshot_work(&status, "t3", &copy_work, &[copied], now()).unwrap();
        let record = status.snapshots.iter().find(|r| r.store == "pvc/offsite").unwrap();
        assert_eq!(record.encoding.as_deref(), Some("zstd+aes-256-gcm"));
        assert_eq!(record.key_id.as_deref(), Some("1a2b3c4d5e6f7081"));
    }

    /// A proof that failed for want of the right key is the Verify's mistake, not the snapshot's:
    /// nothing is recorded against the snapshot (so `SnapshotRestorable` does not turn False).
    #[test]
    fn a_proof_without_the_right_key_is_not_recorded_against_the_snapshot() {
        let verify = Work::Verify(Verify {
            encoding: Default::default(),
            from: Store::Claim("snaps".into()),
            object: None,
            file_name: "{cluster}-{time}.db".into(),
            to_revision: None,
        });
        for reason in [ErrorReason::KeyMismatch, ErrorReason::KeyMissing] {
            let mut failed = proved("main-1.db", false);
            let message = "/snapshots/main-1.db is encrypted (key id 1a2b3c4d5e6f7081)".to_owned();
            failed.error = Some(ResultError { kind: ErrorKind::BadInput, message, reason: Some(reason) });
            assert_eq!(
                record_snapshot_work(&EtcdClusterStatus::default(), "v", &verify, &[failed], now()),
                None,
                "{reason:?}"
            );
        }
        // The words alone decide nothing: a failure of another cause whose message speaks of
        // keys is recorded.
        let mut failed = proved("main-1.db", false);
        let message =
            "/snapshots/main-1.db is encrypted with key id 1a2b3c4d5e6f7081, but its last chunk is \
                       cut short"
                .to_owned();
        failed.error = Some(ResultError { kind: ErrorKind::BadInput, message, reason: None });
        let status =
            record_snapshot_work(&EtcdClusterStatus::default(), "v", &verify, &[failed], now()).unwrap();
        assert!(!status.last_snapshot_proof.unwrap().proven);
        // A damaged one still is.
        let damaged = proved("main-1.db", false);
        let status =
            record_snapshot_work(&EtcdClusterStatus::default(), "v", &verify, &[damaged], now()).unwrap();
        assert!(!status.last_snapshot_proof.unwrap().proven);
    }
}
