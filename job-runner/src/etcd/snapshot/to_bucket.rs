//! `snapshot --to URL --object NAME`: the snapshot stream goes straight into a multipart upload
//! (parts of [`bucket::PART_BYTES`], a few in flight: no full copy in memory nor on disk), its
//! SHA-256 and etcd's trailer checked as it passes, and the upload is completed only when the
//! trailer matched. Any failure, and a stop (SIGTERM, SIGINT), aborts the upload: nothing ever
//! appears under the object's name unless it is whole. A run killed outright leaves an
//! incomplete upload, which is no object (listings and reads do not see it) and which the
//! bucket's lifecycle rule for incomplete multipart uploads removes.
//!
//! The object's user metadata: `member` and `cluster` from the start; `sha256`, `revision` and
//! `keys` once the stream went by, recorded inside the store (see [`Bucket::replace_metadata`]).
//! The revision is the one the snapshot's database holds, read from the stream itself (see
//! [`RevisionScan`]): the highest revision in etcd's `key` bucket, what `etcdutl snapshot status`
//! reports for the file. `keys` is counted by the member the snapshot came from, at that
//! revision, right after the stream. A snapshot whose metadata cannot be recorded is deleted
//! again; only a run killed outright between the completion and the update leaves a whole
//! object without a recorded checksum (its trailer still checks it).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use groundskeeper_protocol::operation::BucketLocation;
use groundskeeper_protocol::result::{SnapshotReport, mib};
use groundskeeper_stores::etcd::connect::Connection;
use groundskeeper_stores::etcd::retention;

use super::{Retention, Source, TrailerCheck, open_stream};
use crate::etcd::bolt_stream::RevisionScan;
use crate::etcd::bucket::{self, Bucket, Upload};
use crate::run::{Failure, StopSignal};

/// Longest wait for an abort or a clean-up delete: the store may be what failed.
const CLEAN_UP_WAIT: Duration = Duration::from_secs(10);
/// How often progress is logged while streaming.
const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// Streams a snapshot into object `name` of the bucket, records its metadata, then applies
/// retention to the cluster's objects under the same prefix.
pub(super) async fn snapshot(
    connection: &Connection,
    location: &BucketLocation,
    name: &str,
    retention: Option<&Retention>,
    report: &mut SnapshotReport,
    stop: &StopSignal,
) -> Result<(), Failure> {
    let bucket = Bucket::open(location)?;
    // The bucket and the credentials first: a mistake there is bad input, found before etcd is
    // asked for anything.
    bucket.check_bucket_exists().await?;
    let mut source = open_stream(connection, report).await?;
    let started = Instant::now();
    let mut metadata = BTreeMap::from([(bucket::META_MEMBER.to_owned(), source.member.clone())]);
    if let Some(retention) = retention {
        metadata.insert(bucket::META_CLUSTER.to_owned(), retention.cluster.clone());
    }
    let mut upload = bucket.start_upload(name, &metadata).await?;
    let mut check = TrailerCheck::default();
    let mut scan = RevisionScan::default();
    let pumped = tokio::select! {
        pumped = pump(&mut source, &mut upload, &mut check, &mut scan) => pumped,
        stop = stop.requested() => Err(stop.failure(
            "the snapshot stream was abandoned and the upload aborted: nothing is under the object's name",
        )),
    };
    let size = check.len;
    let whole = pumped.and_then(|()| {
        check.finish().map_err(|why| {
            Failure::retryable(format!(
                "the snapshot from {} is not whole: {why}; the upload was aborted",
                source.member
            ))
        })
    });
    let (sha256, db_sha256) = match whole {
        Ok(hashes) => hashes,
        Err(failure) => {
            abort(upload, stop).await;
            return Err(failure);
        }
    };
    upload.complete().await?;
    report.stream_duration_ms = started.elapsed().as_millis() as u64;
    let revision = scan.finish().unwrap_or_else(|why| {
        tracing::warn!(object = %bucket.object_url(name), "the snapshot's revision could not be read: {why}");
        None
    });
    report.keys = source.count_keys(revision).await;
    metadata.insert(bucket::META_SHA256.to_owned(), sha256.clone());
    if let Some(revision) = revision {
        metadata.insert(bucket::META_REVISION.to_owned(), revision.to_string());
    }
    if let Some(keys) = report.keys {
        metadata.insert(bucket::META_KEYS.to_owned(), keys.to_string());
    }
    if let Err(failure) = bucket.replace_metadata(name, size, &metadata).await {
        delete_unrecorded(&bucket, name).await;
        return Err(failure);
    }
    report.size_bytes = size;
    report.size_mib = mib(size);
    report.revision = revision;
    report.sha256 = Some(sha256);
    report.db_sha256 = Some(db_sha256);
    if let Some(retention) = retention {
        apply_retention(&bucket, name, retention, report).await;
    }
    Ok(())
}

/// Every piece of the stream: checked, scanned for the revision, uploaded.
async fn pump(
    source: &mut Source,
    upload: &mut Upload<'_>,
    check: &mut TrailerCheck,
    scan: &mut RevisionScan,
) -> Result<(), Failure> {
    let mut last_log = Instant::now();
    while let Some(message) = source.next(check.len).await? {
        let blob = message.blob();
        check.update(blob);
        scan.update(blob);
        upload.write(blob).await?;
        if last_log.elapsed() > PROGRESS_EVERY {
            tracing::info!(bytes = check.len, remaining = message.remaining_bytes(), "uploading");
            last_log = Instant::now();
        }
    }
    Ok(())
}

/// Aborts the upload, waiting at most [`CLEAN_UP_WAIT`] (and not past a stop's deadline).
async fn abort(upload: Upload<'_>, stop: &StopSignal) {
    let now = Instant::now();
    let wait =
        stop.get().map_or(CLEAN_UP_WAIT, |s| s.deadline.saturating_duration_since(now).min(CLEAN_UP_WAIT));
    match tokio::time::timeout(wait, upload.abort()).await {
        Ok(Ok(())) => tracing::info!("the upload was aborted: no object was written"),
        Ok(Err(failure)) => tracing::warn!(
            "the upload could not be aborted ({}); it is no object, and the bucket's lifecycle rule \
             for incomplete multipart uploads removes it",
            failure.message
        ),
        Err(_) => tracing::warn!(
            "the upload's abort did not finish in {wait:?}; it is no object, and the bucket's \
             lifecycle rule for incomplete multipart uploads removes it"
        ),
    }
}

/// A snapshot whose metadata could not be recorded is deleted again (best effort).
async fn delete_unrecorded(bucket: &Bucket, name: &str) {
    match tokio::time::timeout(CLEAN_UP_WAIT, bucket.delete(name)).await {
        Ok(Ok(())) => tracing::warn!(
            object = %bucket.object_url(name),
            "deleted the snapshot again: its checksum and revision could not be recorded"
        ),
        _ => tracing::error!(
            object = %bucket.object_url(name),
            "the snapshot's metadata could not be recorded, nor the object deleted: delete it by hand"
        ),
    }
}

/// Deletes the cluster's older snapshots under the prefix beyond `retain` (the new one counts);
/// other objects are never touched. What could not be deleted is listed, the snapshot counts
/// as taken all the same.
async fn apply_retention(bucket: &Bucket, keep: &str, retention: &Retention, report: &mut SnapshotReport) {
    let names: Vec<String> = match bucket.list_names().await {
        Ok(objects) => objects.into_iter().map(|(name, _, _)| name).collect(),
        Err(failure) => {
            report.retention_errors.push(format!("{}: cannot list it: {}", bucket.url(), failure.message));
            return;
        }
    };
    let selection = retention::select(&retention.template, &names, keep, retention.retain);
    for name in selection.delete {
        match bucket.delete(&name).await {
            Ok(()) => {
                tracing::info!(object = %name, retain = retention.retain, "deleted an old snapshot of the cluster");
                report.deleted.push(name);
            }
            Err(failure) => {
                tracing::warn!("retention: {name}: {}", failure.message);
                report.retention_errors.push(format!("{name}: {}", failure.message));
            }
        }
    }
    report.deleted_count = report.deleted.len() as u32;
}
