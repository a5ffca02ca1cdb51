//! `Partitioned` clusters: their composite revisions (bits 0–12 event number, 13–18 cluster id,
//! 19–62 Unix ms; see [`groundskeeper_protocol::revision`]) read back as time, and time turned
//! into a compaction target. Pure functions of the observed revisions, the last status and `now`.
//!
//! **Clock skew.** Arktos orders revisions of different clusters by their time bits and tolerates
//! 5,000 ms of clock difference between clusters. A cluster's newest revision tells how its clock
//! compares with the controller's, with one caveat: a revision is made at a write, and a cluster
//! that wrote nothing for a while has an old newest revision. So:
//! * a revision whose time is ahead of `now` by more than the threshold proves the cluster's
//!   clock runs ahead (no revision is made in the future);
//! * a revision made since the last observation (the revision moved) was made after that
//!   observation: a time before it by more than the threshold proves the clock runs behind;
//! * an old revision that did not move proves nothing.
//!
//! **Compaction by time.** Keeping `retention` of history means compacting to the first revision
//! of `now − retention` ([`compaction_target`]): no sampling. It is done at most once per
//! [`sampler::compact_interval`] (as etcd's periodic compactor), never beyond the current revision
//! nor back to or below what was compacted already. While the cluster's clock is proven behind,
//! its revisions carry times older than they are, and a target computed from the controller's
//! clock would drop history younger than `retention`: no compaction then (defragmentation goes
//! on).

use groundskeeper_protocol::revision::{CompositeRevision, busiest_millisecond, compaction_target};
use jiff::{SignedDuration, Timestamp};

use super::sampler::{self, LastCompaction};
use groundskeeper_api::etcd_cluster::{
    BusiestMillisecond, DEFAULT_MAX_CLOCK_SKEW_MS, EtcdClusterStatus, EtcdPartition, EtcdPartitionStatus,
};

/// Condition type: True while the cluster's revisions cannot be ordered against the fleet's.
pub(crate) const CLOCK_SKEWED: &str = "ClockSkewed";
/// Reasons of [`CLOCK_SKEWED`] (and of its Warning Event).
pub(crate) const CLOCK_AHEAD: &str = "ClockAhead";
pub(crate) const CLOCK_BEHIND: &str = "ClockBehind";
pub(crate) const CLUSTER_ID_MISMATCH: &str = "ClusterIdMismatch";
/// Reason of [`CLOCK_SKEWED`] False, and of the Normal Event when it clears.
pub(crate) const CLOCK_IN_STEP: &str = "ClockInStep";

/// What the revisions say of the cluster's clock and id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Finding {
    /// Within the threshold, or nothing proven.
    InStep,
    /// The newest revision's time is `by_ms` ahead of the controller's clock.
    Ahead { by_ms: i64 },
    /// A revision made since the last observation carries a time `by_ms` before it.
    Behind { by_ms: i64 },
    /// A member's revision carries cluster id `found`, not the spec's.
    IdMismatch { member: String, found: u8 },
}

impl Finding {
    pub fn reason(&self) -> &'static str {
        match self {
            Finding::InStep => CLOCK_IN_STEP,
            Finding::Ahead { .. } => CLOCK_AHEAD,
            Finding::Behind { .. } => CLOCK_BEHIND,
            Finding::IdMismatch { .. } => CLUSTER_ID_MISMATCH,
        }
    }

    /// The condition's message; maintenance goes on in every case.
    pub fn message(&self, partition: &EtcdPartition) -> String {
        let threshold = max_clock_skew_ms(partition);
        let fleet = &partition.fleet;
        match self {
            Finding::InStep => format!(
                "no revision shows a clock more than {threshold} ms off (the newest revision's \
                 time is checked against the controller's clock, and one made since the last \
                 observation against that observation's time); every member's revisions carry \
                 cluster id {}",
                partition.cluster_id
            ),
            Finding::Ahead { by_ms } => format!(
                "the newest revision's time is {by_ms} ms ahead of the controller's clock (more \
                 than spec.partition.maxClockSkewMs {threshold}): this cluster's clock runs ahead, \
                 so fleet {fleet} orders its revisions after others made later; fix its clock \
                 (NTP). Maintenance continues"
            ),
            Finding::Behind { by_ms } => format!(
                "a revision made since the last observation carries a time {by_ms} ms before that \
                 observation (more than spec.partition.maxClockSkewMs {threshold}): this cluster's \
                 clock runs behind, so fleet {fleet} orders its revisions before others made \
                 earlier; fix its clock (NTP). Defragmentation continues; compaction by time waits, \
                 since it would drop history younger than the retention"
            ),
            Finding::IdMismatch { member, found } => format!(
                "member {member}'s revision carries cluster id {found}, not \
                 spec.partition.clusterId {}: the cluster is configured with another id, or does \
                 not write composite revisions (then spec.partition.revisionScheme is Sequential); \
                 revisions of fleet {fleet} cannot be ordered. Maintenance continues",
                partition.cluster_id
            ),
        }
    }
}

/// `spec.partition.maxClockSkewMs`, or its default.
pub fn max_clock_skew_ms(partition: &EtcdPartition) -> i64 {
    partition.max_clock_skew_ms.unwrap_or(DEFAULT_MAX_CLOCK_SKEW_MS)
}

/// The decoded revisions and what they say.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RevisionCheck {
    pub status: EtcdPartitionStatus,
    pub finding: Finding,
}

/// Takes the members' revisions (`(member name, revision)`) apart. `previous` is the last
/// status: its revision and observation time tell whether the newest revision was made since,
/// its busiest millisecond is kept unless a busier one is seen. `None` when no member reported
/// a revision.
pub(crate) fn check_revisions(
    partition: &EtcdPartition,
    revisions: &[(String, i64)],
    previous: &EtcdClusterStatus,
    now: Timestamp,
) -> Option<RevisionCheck> {
    let decoded: Vec<(&str, CompositeRevision)> = revisions
        .iter()
        .filter_map(|(member, r)| Some((member.as_str(), CompositeRevision::decode(*r).ok()?)))
        .collect();
    let (newest_revision, newest) = revisions
        .iter()
        .filter_map(|(_, r)| Some((*r, CompositeRevision::decode(*r).ok()?)))
        .max_by_key(|(r, _)| *r)?;
    let now_ms = u64::try_from(now.as_millisecond()).unwrap_or(0);
    let skew = newest.clock_skew_ms(now_ms);
    let threshold = max_clock_skew_ms(partition);
    let mismatch = decoded.iter().find(|(_, d)| i32::from(d.cluster_id) != partition.cluster_id);
    let behind_by = behind_by_ms(previous, newest_revision, &newest);
    let finding = match (mismatch, behind_by) {
        (Some((member, d)), _) => Finding::IdMismatch { member: (*member).to_owned(), found: d.cluster_id },
        _ if skew > threshold => Finding::Ahead { by_ms: skew },
        (None, Some(by_ms)) if by_ms > threshold => Finding::Behind { by_ms },
        _ => Finding::InStep,
    };
    let busiest = busiest_seen(
        previous.partition.as_ref().and_then(|p| p.busiest_millisecond.clone()),
        busiest_millisecond(decoded.iter().map(|(_, d)| *d)),
    );
    Some(RevisionCheck {
        status: EtcdPartitionStatus {
            revision_timestamp_ms: i64::try_from(newest.timestamp_ms).ok(),
            revision_time: i64::try_from(newest.timestamp_ms)
                .ok()
                .and_then(|ms| Timestamp::from_millisecond(ms).ok())
                .map(Into::into),
            revision_cluster_id: Some(i32::from(newest.cluster_id)),
            clock_skew_ms: Some(skew),
            busiest_millisecond: busiest,
        },
        finding,
    })
}

/// How far before the last observation the newest revision's time is, when that revision was
/// made since (it moved past the revision then observed); `None` when nothing was made since.
fn behind_by_ms(
    previous: &EtcdClusterStatus,
    newest_revision: i64,
    newest: &CompositeRevision,
) -> Option<i64> {
    let observed_before = previous.last_observed_time.as_ref()?.0.as_millisecond();
    let revision_before = previous.revision?;
    if newest_revision <= revision_before {
        return None;
    }
    let made_ms = i64::try_from(newest.timestamp_ms).ok()?;
    Some(observed_before.saturating_sub(made_ms))
}

fn busiest_seen(
    kept: Option<BusiestMillisecond>,
    seen: Option<CompositeRevision>,
) -> Option<BusiestMillisecond> {
    let seen = seen.map(|r| BusiestMillisecond {
        timestamp_ms: i64::try_from(r.timestamp_ms).unwrap_or(i64::MAX),
        event_number: i32::from(r.event),
        budget_used: format!("{:.1}%", r.event_budget_used() * 100.0),
    });
    match (kept, seen) {
        (Some(kept), Some(seen)) if seen.event_number > kept.event_number => Some(seen),
        (Some(kept), _) => Some(kept),
        (None, seen) => seen,
    }
}

/// The revision to compact a `Partitioned` cluster to now, keeping `retention` of history:
/// `None` when no compaction is due (see the module's documentation).
pub(crate) fn compaction_due(
    partition: &EtcdPartition,
    retention: SignedDuration,
    current_revision: Option<i64>,
    last: LastCompaction,
    clock_behind: bool,
    now: Timestamp,
) -> Option<i64> {
    if clock_behind {
        return None;
    }
    if last.time.is_some_and(|time| now - sampler::compact_interval(retention) < time) {
        return None;
    }
    let now_ms = u64::try_from(now.as_millisecond()).ok()?;
    let retention_ms = u64::try_from(retention.as_millis()).ok()?;
    let cluster_id = u8::try_from(partition.cluster_id).ok()?;
    let target = compaction_target(now_ms, retention_ms, cluster_id, current_revision?).ok()??;
    if last.revision.is_some_and(|done| done >= target) {
        return None;
    }
    Some(target)
}

#[cfg(test)]
#[allow(clippy::type_complexity)] // tables of cases
mod tests {
    use super::*;
    use groundskeeper_api::etcd_cluster::RevisionScheme;

    const HOUR: SignedDuration = SignedDuration::from_hours(1);

    fn now() -> Timestamp {
        "2026-03-01T12:00:00Z".parse().unwrap()
    }

    fn ms(t: Timestamp) -> u64 {
        t.as_millisecond() as u64
    }

    fn partition(cluster_id: i32) -> EtcdPartition {
        EtcdPartition {
            fleet: "arktos".into(),
            cluster_id,
            revision_scheme: RevisionScheme::Partitioned,
            max_clock_skew_ms: None,
        }
    }

    fn rev(at: Timestamp, cluster_id: u8, event: u16) -> i64 {
        CompositeRevision { timestamp_ms: ms(at), cluster_id, event }.encode().unwrap()
    }

    fn secs(s: i64) -> SignedDuration {
        SignedDuration::from_secs(s)
    }

    #[test]
    fn the_target_is_the_first_revision_of_retention_ago_once_per_interval() {
        let p = partition(5);
        let current = Some(rev(now() - secs(1), 5, 17));
        let hour_ago = rev(now() - HOUR, 5, 0);
        let never = LastCompaction::default();
        let cases: Vec<(&str, Option<i64>, LastCompaction, bool, Option<i64>)> = vec![
            ("first compaction", current, never, false, Some(hour_ago)),
            (
                "the target is exactly (now − retention) << 19 | id << 13",
                current,
                never,
                false,
                Some((((ms(now()) - 3_600_000) << 19) | (5 << 13)) as i64),
            ),
            ("no revision observed", None, never, false, None),
            (
                "nothing written since retention ago: the target would pass the current revision",
                Some(rev(now() - HOUR - secs(1), 5, 3)),
                never,
                false,
                None,
            ),
            (
                "a current revision exactly at the target is fine",
                Some(hour_ago),
                never,
                false,
                Some(hour_ago),
            ),
            (
                "within an interval of the last compaction",
                current,
                LastCompaction {
                    time: Some(now() - HOUR + secs(1)),
                    revision: Some(rev(now() - HOUR - HOUR, 5, 0)),
                },
                false,
                None,
            ),
            (
                "an interval after the last compaction",
                current,
                LastCompaction { time: Some(now() - HOUR), revision: Some(rev(now() - HOUR - HOUR, 5, 0)) },
                false,
                Some(hour_ago),
            ),
            (
                "compacted at or past the target already (by hand)",
                current,
                LastCompaction { time: None, revision: Some(hour_ago) },
                false,
                None,
            ),
            ("the cluster's clock is proven behind", current, never, true, None),
        ];
        for (name, current, last, behind, expected) in cases {
            assert_eq!(compaction_due(&p, HOUR, current, last, behind, now()), expected, "{name}");
        }
        // Retention of a day: compacted hourly, to the revision of a day ago.
        let day = SignedDuration::from_hours(24);
        let last = LastCompaction { time: Some(now() - HOUR), revision: Some(rev(now() - day - HOUR, 5, 0)) };
        assert_eq!(compaction_due(&p, day, current, last, false, now()), Some(rev(now() - day, 5, 0)));
    }

    fn observed_before(seconds_ago: i64, revision: i64) -> EtcdClusterStatus {
        EtcdClusterStatus {
            last_observed_time: Some((now() - secs(seconds_ago)).into()),
            revision: Some(revision),
            ..EtcdClusterStatus::default()
        }
    }

    #[test]
    fn skew_is_reported_only_where_the_revisions_prove_it() {
        let p = partition(5);
        let earlier = rev(now() - secs(600), 5, 0);
        let members = |r: i64| vec![("etcd-0".to_owned(), r), ("etcd-1".to_owned(), r)];
        let cases: Vec<(&str, Vec<(String, i64)>, EtcdClusterStatus, Finding)> = vec![
            (
                "a fresh revision",
                members(rev(now() - secs(1), 5, 0)),
                observed_before(30, earlier),
                Finding::InStep,
            ),
            (
                "ahead by exactly the threshold",
                members(rev(now() + secs(5), 5, 0)),
                observed_before(30, earlier),
                Finding::InStep,
            ),
            (
                "ahead by more",
                members(rev(now() + secs(5) + SignedDuration::from_millis(1), 5, 0)),
                observed_before(30, earlier),
                Finding::Ahead { by_ms: 5001 },
            ),
            (
                "an old revision that did not move: an idle cluster, not a slow clock",
                members(earlier),
                observed_before(30, earlier),
                Finding::InStep,
            ),
            (
                "an old revision but no earlier observation: nothing proven",
                members(earlier),
                EtcdClusterStatus::default(),
                Finding::InStep,
            ),
            (
                "written since the last observation, 6 s before it",
                members(rev(now() - secs(36), 5, 0)),
                observed_before(30, earlier),
                Finding::Behind { by_ms: 6000 },
            ),
            (
                "written since the last observation, 5 s before it",
                members(rev(now() - secs(35), 5, 0)),
                observed_before(30, earlier),
                Finding::InStep,
            ),
            (
                "small sequential revisions decode to 1970 (and cluster id 0)",
                members(42),
                observed_before(30, 7),
                Finding::IdMismatch { member: "etcd-0".into(), found: 0 },
            ),
            (
                "another cluster id on one member",
                vec![("etcd-0".to_owned(), rev(now(), 5, 0)), ("etcd-1".to_owned(), rev(now(), 6, 0))],
                observed_before(30, earlier),
                Finding::IdMismatch { member: "etcd-1".into(), found: 6 },
            ),
        ];
        for (name, revisions, previous, expected) in cases {
            let check = check_revisions(&p, &revisions, &previous, now()).expect(name);
            assert_eq!(check.finding, expected, "{name}");
        }
        assert_eq!(check_revisions(&p, &[], &EtcdClusterStatus::default(), now()), None);

        // A sequential cluster in the right id's place (id 0) is caught by its time instead.
        let sequential =
            check_revisions(&partition(0), &members(42), &observed_before(30, 7), now()).unwrap();
        assert!(matches!(sequential.finding, Finding::Behind { by_ms } if by_ms > 1_700_000_000_000));

        // A threshold of the spec's own.
        let mut tight = partition(5);
        tight.max_clock_skew_ms = Some(500);
        let check = check_revisions(
            &tight,
            &members(rev(now() + secs(1), 5, 0)),
            &observed_before(30, earlier),
            now(),
        )
        .unwrap();
        assert_eq!(check.finding, Finding::Ahead { by_ms: 1000 });
        assert!(check.finding.message(&tight).contains("maxClockSkewMs 500"));
    }

    #[test]
    fn the_status_gives_the_time_the_skew_and_the_busiest_millisecond_seen() {
        let p = partition(5);
        let busy_at = now() - secs(2);
        let revisions = vec![
            ("etcd-0".to_owned(), rev(now() - secs(1), 5, 3)),
            ("etcd-1".to_owned(), rev(busy_at, 5, 4095)),
        ];
        let check = check_revisions(&p, &revisions, &EtcdClusterStatus::default(), now()).unwrap();
        let status = check.status;
        assert_eq!(status.revision_timestamp_ms, Some(ms(now()) as i64 - 1000));
        assert_eq!(status.revision_time, Some((now() - secs(1)).into()));
        assert_eq!(status.revision_cluster_id, Some(5));
        assert_eq!(status.clock_skew_ms, Some(-1000));
        let busiest = status.busiest_millisecond.clone().unwrap();
        assert_eq!(
            (busiest.timestamp_ms, busiest.event_number, busiest.budget_used.as_str()),
            (ms(busy_at) as i64, 4095, "50.0%")
        );
        // Kept until a busier millisecond is seen.
        let previous = EtcdClusterStatus { partition: Some(status), ..EtcdClusterStatus::default() };
        let quiet = vec![("etcd-0".to_owned(), rev(now(), 5, 1))];
        let kept = check_revisions(&p, &quiet, &previous, now()).unwrap();
        assert_eq!(kept.status.busiest_millisecond, Some(busiest));
        let burst = vec![("etcd-0".to_owned(), rev(now(), 5, 8191))];
        let busier = check_revisions(&p, &burst, &previous, now()).unwrap();
        assert_eq!(busier.status.busiest_millisecond.unwrap().budget_used, "100.0%");
    }
}
