//! `snapshot --to URL --object NAME`: the snapshot stream goes straight into a multipart upload
//! (parts of [`bucket::PART_BYTES`], a few in flight: no full copy in memory nor on disk), its
//! SHA-256 and etcd's trailer checked as it passes, and the upload is completed only when the
//! trailer matched. Any failure, and a stop (SIGTERM, SIGINT), aborts the upload: nothing ever
//! appears under the object's name unless it is whole. A run killed outright leaves an
//! incomplete upload, which is no object (listings and reads do not see it) and which the
//! bucket's lifecycle rule for incomplete multipart uploads removes.
//!
//! The stream goes into the snapshot's hidden staging object (`.NAME.partial`); once it is whole
//! and its SHA-256, revision and keys are known, the staging object is copied under the
//! snapshot's name inside the store with all of its metadata, in one request that replaces what
//! was under the name whole or not at all ([`bucket::Staged::publish`]). So a snapshot that was
//! already under the name (a Job run again) stays as it was unless the new one is published,
//! whole and recorded: a failure at any step, the bookkeeping ones included, loses no snapshot.
//! The revision is the one the snapshot's database holds, read from the stream itself (see
//! [`RevisionScan`]): the highest revision in etcd's `key` bucket, what `etcdutl snapshot status`
//! reports for the file. `keys` is counted by the member the snapshot came from, at that
//! revision, right after the stream. A run killed outright after the upload leaves only the
//! staging object, which the cluster's next retention deletes.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use groundskeeper_protocol::operation::BucketLocation;
use groundskeeper_protocol::result::{SnapshotReport, mib};
use groundskeeper_stores::etcd::connect::Connection;

use super::{Retention, Source, TrailerCheck, open_stream};
use crate::etcd::bolt_stream::RevisionScan;
use crate::etcd::bucket::{self, Bucket, CLEAN_UP_WAIT, Upload};
use crate::etcd::codec::{Encoded, Encoder, Encoding};
use crate::run::{Failure, StopSignal};

/// A staging object this old is a killed run's leftover: no run takes an hour between the end
/// of its upload and its publication.
const STALE_STAGING: jiff::SignedDuration = jiff::SignedDuration::from_secs(3600);
/// How often progress is logged while streaming.
const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// Streams a snapshot into object `name` of the bucket, records its metadata, then applies
/// retention to the cluster's objects under the same prefix.
pub(super) async fn snapshot(
    connection: &Connection,
    location: &BucketLocation,
    name: &str,
    retention: Option<&Retention>,
    encoding: &Encoding,
    report: &mut SnapshotReport,
    stop: &StopSignal,
) -> Result<(), Failure> {
    let bucket = Bucket::open(location)?;
    // The name, the bucket and the credentials first: a mistake there is bad input, found before
    // etcd is asked for anything.
    bucket.check_new_name(name)?;
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
    let mut encoder = encoding.encoder()?;
    let pumped = tokio::select! {
        pumped = pump(&mut source, &mut upload, &mut encoder, &mut check, &mut scan) => pumped,
        stop = stop.requested() => Err(stop.failure(
            "the snapshot stream was abandoned and the upload aborted: nothing is under the object's name",
        )),
    };
    let whole = pumped.and_then(|()| {
        check.finish().map_err(|why| {
            Failure::retryable(format!(
                "the snapshot from {} is not whole: {why}; the upload was aborted",
                source.member
            ))
        })
    });
    let whole = match whole {
        Ok((_, db_sha256)) => finish_encoding(encoder, &mut upload).await.map(|encoded| (encoded, db_sha256)),
        Err(failure) => Err(failure),
    };
    let (encoded, db_sha256) = match whole {
        Ok(hashes) => hashes,
        Err(failure) => {
            abort(upload, stop).await;
            return Err(failure);
        }
    };
    let staged = upload.complete().await?;
    report.stream_duration_ms = started.elapsed().as_millis() as u64;
    let revision = scan.finish().unwrap_or_else(|why| {
        tracing::warn!(object = %bucket.object_url(name), "the snapshot's revision could not be read: {why}");
        None
    });
    report.keys = source.count_keys(revision).await;
    let (sha256, size) = (encoded.stored_sha256.clone(), encoded.stored_bytes);
    metadata.insert(bucket::META_SHA256.to_owned(), sha256.clone());
    metadata.extend(encoded.metadata());
    if let Some(revision) = revision {
        metadata.insert(bucket::META_REVISION.to_owned(), revision.to_string());
    }
    if let Some(keys) = report.keys {
        metadata.insert(bucket::META_KEYS.to_owned(), keys.to_string());
    }
    staged.publish(size, &metadata).await?;
    report.size_bytes = size;
    report.size_mib = mib(size);
    report.revision = revision;
    report.sha256 = Some(sha256);
    report.db_sha256 = Some(db_sha256);
    report.stored = encoded.stored_as();
    if let Some(retention) = retention {
        apply_retention(&bucket, name, retention, report).await;
    }
    Ok(())
}

/// The encoder's last bytes uploaded: what was stored.
async fn finish_encoding(encoder: Encoder, upload: &mut Upload<'_>) -> Result<Encoded, Failure> {
    let (last, encoded) = encoder.finish()?;
    upload.write(&last).await?;
    Ok(encoded)
}

/// Every piece of the stream: checked, scanned for the revision, encoded, uploaded.
async fn pump(
    source: &mut Source,
    upload: &mut Upload<'_>,
    encoder: &mut Encoder,
    check: &mut TrailerCheck,
    scan: &mut RevisionScan,
) -> Result<(), Failure> {
    let mut last_log = Instant::now();
    while let Some(message) = source.next(check.len).await? {
        let blob = message.blob();
        check.update(blob);
        scan.update(blob);
        upload.write(&encoder.push(blob)?).await?;
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

/// Deletes what the retention policy keeps not of the cluster's snapshots and deltas under the
/// prefix (the new one stays), and the staging objects its killed runs left more than
/// [`STALE_STAGING`] ago; other objects are never touched. What could not be deleted is listed,
/// the snapshot counts as taken all the same.
async fn apply_retention(bucket: &Bucket, keep: &str, retention: &Retention, report: &mut SnapshotReport) {
    let objects = match bucket.list_names().await {
        Ok(objects) => objects,
        Err(failure) => {
            report.retention_errors.push(format!("{}: cannot list it: {}", bucket.url(), failure.message));
            return;
        }
    };
    let listed: Vec<(String, u64)> = objects.iter().map(|(name, size, _)| (name.clone(), *size)).collect();
    let now = jiff::Timestamp::now();
    let (selection, partials) = retention.select(&listed, keep, now);
    // A younger staging object may be another run's, between its upload and its publication.
    let stale_before = now - STALE_STAGING;
    let stale =
        objects.iter().filter(|(name, _, modified)| *modified < stale_before && partials.contains(name));
    for (name, _, _) in stale {
        match bucket.delete(name).await {
            Ok(()) => report.removed_partial_files.push(name.clone()),
            Err(failure) => report.retention_errors.push(format!("{name}: {}", failure.message)),
        }
    }
    let mut left_bytes = 0;
    let rules = retention.describe();
    for (name, is_delta) in selection
        .delete_full
        .iter()
        .map(|n| (n, false))
        .chain(selection.delete_deltas.iter().map(|n| (n, true)))
    {
        match bucket.delete(name).await {
            Ok(()) => {
                tracing::info!(object = %name, retention = %rules, "deleted an old backup of the cluster");
                if is_delta { &mut report.deleted_deltas } else { &mut report.deleted }.push(name.clone());
            }
            Err(failure) => {
                tracing::warn!("retention: {name}: {}", failure.message);
                left_bytes += listed.iter().find(|(n, _)| n == name).map_or(0, |(_, size)| *size);
                report.retention_errors.push(format!("{name}: {}", failure.message));
            }
        }
    }
    report.deleted_count = report.deleted.len() as u32;
    report.deleted_deltas_count = report.deleted_deltas.len() as u32;
    report.kept_bytes = Some(selection.kept_bytes + left_bytes);
    report.over_limit_bytes = selection.over_limit;
}
