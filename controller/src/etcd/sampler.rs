//! `periodic` compaction, sampled the way etcd's own periodic compactor does
//! (`server/etcdserver/api/v3compactor/periodic.go`):
//!
//! * the store's revision is sampled every `min(retention, 1h) / 10`;
//! * the compaction target is the revision sampled `retention` ago, so history of at least
//!   `retention` is always kept;
//! * the first compaction comes once a sample is `retention` old; after that the cluster is
//!   compacted every `min(retention, 1h)` (retention 24h: every hour, to the revision of 24h ago).
//!
//! etcd keeps its samples in memory and starts over after a restart. The controller keeps them
//! in the EtcdCluster's status instead, as (time, revision) pairs: a restart loses nothing, and
//! since samples carry their time, a gap in sampling (controller down) cannot make the target
//! younger than `retention`, which etcd's count-based window could.

use jiff::{SignedDuration, Timestamp};

use groundskeeper_api::etcd_cluster::RevisionSample;

/// etcd samples `retryDivisor` = 10 times per compaction interval.
const SAMPLES_PER_INTERVAL: i32 = 10;
/// etcd never waits longer than an hour between compactions.
const MAX_COMPACT_INTERVAL: SignedDuration = SignedDuration::from_hours(1);

/// Time between two compactions: `min(retention, 1h)`.
pub(crate) fn compact_interval(retention: SignedDuration) -> SignedDuration {
    retention.min(MAX_COMPACT_INTERVAL)
}

/// Time between two samples: `min(retention, 1h) / 10`.
pub(crate) fn sample_interval(retention: SignedDuration) -> SignedDuration {
    compact_interval(retention) / SAMPLES_PER_INTERVAL
}

/// Most samples ever kept: etcd's `retention / sampleInterval + 1`, plus the one sample at or
/// beyond the retention boundary.
pub(crate) fn max_samples(retention: SignedDuration) -> usize {
    let per_retention = retention.as_nanos() / sample_interval(retention).as_nanos();
    usize::try_from(per_retention).unwrap_or(usize::MAX).saturating_add(2)
}

/// When the next sample is due: at once without samples, else a sample interval after the last.
pub(crate) fn next_sample_at(samples: &[RevisionSample], retention: SignedDuration) -> Option<Timestamp> {
    samples.last().map(|last| last.time.0 + sample_interval(retention))
}

/// The samples after observing `revision` at `now`: the revision is recorded when a sample is due,
/// and samples no longer needed are dropped (all but the newest one at least `retention` old).
///
/// A revision lower than the last sample means the store was replaced or restored from a backup:
/// the old samples describe another history, so sampling starts over.
pub fn record(
    samples: &[RevisionSample],
    now: Timestamp,
    revision: i64,
    retention: SignedDuration,
) -> Vec<RevisionSample> {
    let mut samples = samples.to_vec();
    if samples.last().is_some_and(|last| revision < last.revision) {
        samples.clear();
    }
    let due = next_sample_at(&samples, retention).is_none_or(|at| now >= at);
    if due {
        samples.push(RevisionSample { time: now.into(), revision });
    }
    prune(samples, now, retention)
}

fn prune(mut samples: Vec<RevisionSample>, now: Timestamp, retention: SignedDuration) -> Vec<RevisionSample> {
    let cutoff = now - retention;
    // The target is the newest sample at or before the cutoff; older ones are never needed again.
    while samples.len() >= 2 && samples[1].time.0 <= cutoff {
        samples.remove(0);
    }
    let bound = max_samples(retention);
    if samples.len() > bound {
        samples.drain(..samples.len() - bound);
    }
    samples
}

/// The revision sampled `retention` ago: the newest sample at least that old.
pub fn target(samples: &[RevisionSample], now: Timestamp, retention: SignedDuration) -> Option<i64> {
    let cutoff = now - retention;
    samples.iter().rev().find(|s| s.time.0 <= cutoff).map(|s| s.revision)
}

/// What the last compaction did, as far as the sampler cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LastCompaction {
    pub time: Option<Timestamp>,
    pub revision: Option<i64>,
}

/// The revision to compact to now, if a compaction is due: a sample `retention` old exists, it is
/// newer than what was compacted last, and a compaction interval has passed since the last one.
pub fn due(
    samples: &[RevisionSample],
    now: Timestamp,
    retention: SignedDuration,
    last: LastCompaction,
) -> Option<i64> {
    let revision = target(samples, now, retention)?;
    if last.revision.is_some_and(|done| done >= revision) {
        return None;
    }
    if last.time.is_some_and(|time| now - compact_interval(retention) < time) {
        return None;
    }
    Some(revision)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: SignedDuration = SignedDuration::from_hours(1);

    fn t0() -> Timestamp {
        "2026-01-01T00:00:00Z".parse().unwrap()
    }

    fn at(minutes: i64) -> Timestamp {
        t0() + SignedDuration::from_mins(minutes)
    }

    fn sample(minutes: i64, revision: i64) -> RevisionSample {
        RevisionSample { time: at(minutes).into(), revision }
    }

    #[test]
    fn intervals_follow_etcd() {
        for (retention, sample, compact) in [
            (SignedDuration::from_mins(10), SignedDuration::from_mins(1), SignedDuration::from_mins(10)),
            (HOUR, SignedDuration::from_mins(6), HOUR),
            (SignedDuration::from_mins(59), SignedDuration::from_secs(354), SignedDuration::from_mins(59)),
            (SignedDuration::from_hours(24), SignedDuration::from_mins(6), HOUR),
        ] {
            assert_eq!(sample_interval(retention), sample, "{retention:#}");
            assert_eq!(compact_interval(retention), compact, "{retention:#}");
        }
    }

    #[test]
    fn samples_only_when_an_interval_has_passed() {
        let first = record(&[], at(0), 100, HOUR);
        assert_eq!(first, vec![sample(0, 100)]);
        // One second short of the 6-minute interval: nothing recorded.
        let early = record(&first, at(6) - SignedDuration::from_secs(1), 150, HOUR);
        assert_eq!(early, first);
        // Exactly at the boundary: recorded.
        let on_time = record(&first, at(6), 160, HOUR);
        assert_eq!(on_time, vec![sample(0, 100), sample(6, 160)]);
        assert_eq!(next_sample_at(&on_time, HOUR), Some(at(12)));
    }

    #[test]
    fn the_target_is_the_revision_sampled_retention_ago() {
        let samples: Vec<_> = (0..=10).map(|i| sample(i * 6, 100 + i * 10)).collect();
        // 59 minutes after the first sample nothing is an hour old yet.
        assert_eq!(target(&samples, at(59), HOUR), None);
        // At exactly one hour the first sample is the target.
        assert_eq!(target(&samples, at(60), HOUR), Some(100));
        // Later, the newest sample at least an hour old.
        assert_eq!(target(&samples, at(71), HOUR), Some(110));
    }

    #[test]
    fn pruning_keeps_exactly_one_sample_beyond_the_retention() {
        let mut samples = Vec::new();
        for i in 0..=30 {
            samples = record(&samples, at(i * 6), 100 + i, HOUR);
        }
        // At 180 min: the sample of 120 min (an hour ago) and the ten after it.
        assert_eq!(samples.len(), 11);
        assert_eq!(samples[0], sample(120, 120));
        assert_eq!(target(&samples, at(180), HOUR), Some(120));
        assert!(samples.len() <= max_samples(HOUR));
    }

    #[test]
    fn a_long_gap_does_not_shorten_the_retention() {
        // Controller down for two hours: the next target is still at least an hour old.
        let samples = vec![sample(0, 100), sample(6, 110)];
        let after_gap = record(&samples, at(126), 500, HOUR);
        assert_eq!(target(&after_gap, at(126), HOUR), Some(110));
        assert_eq!(target(&after_gap, at(185), HOUR), Some(110));
        assert_eq!(target(&after_gap, at(186), HOUR), Some(500));
    }

    #[test]
    fn a_revision_going_backwards_starts_sampling_over() {
        let samples = vec![sample(0, 100), sample(6, 110)];
        assert_eq!(record(&samples, at(12), 5, HOUR), vec![sample(12, 5)]);
    }

    #[test]
    fn compaction_is_due_once_per_interval_and_never_backwards() {
        let samples: Vec<_> = (0..=20).map(|i| sample(i * 6, 100 + i * 10)).collect();
        let never = LastCompaction::default();
        assert_eq!(due(&samples, at(59), HOUR, never), None, "nothing an hour old");
        assert_eq!(due(&samples, at(60), HOUR, never), Some(100));
        let done = LastCompaction { time: Some(at(60)), revision: Some(100) };
        assert_eq!(due(&samples, at(119), HOUR, done), None, "an interval has not passed");
        assert_eq!(due(&samples, at(120), HOUR, done), Some(200));
        let ahead = LastCompaction { time: Some(at(0)), revision: Some(1000) };
        assert_eq!(due(&samples, at(120), HOUR, ahead), None, "compacted further already");
    }

    #[test]
    fn long_retentions_compact_hourly_to_the_revision_of_retention_ago() {
        let day = SignedDuration::from_hours(24);
        let mut samples = Vec::new();
        for i in 0..=(26 * 10) {
            samples = record(&samples, at(i * 6), 1000 + i, day);
        }
        let now = at(26 * 60);
        assert_eq!(target(&samples, now, day), Some(1000 + 20));
        let last =
            LastCompaction { time: Some(now - SignedDuration::from_mins(59)), revision: Some(1000 + 10) };
        assert_eq!(due(&samples, now, day, last), None);
        let last = LastCompaction { time: Some(now - HOUR), ..last };
        assert_eq!(due(&samples, now, day, last), Some(1020));
        assert!(samples.len() <= max_samples(day));
    }
}
