//! Composite revisions of partitioned etcd (the Arktos design): one Kubernetes API served by up to
//! 64 etcd clusters, each stamping its revisions with the time and its own id, so revisions of
//! different clusters never collide and sort by time across clusters.
//!
//! ```text
//!  63 62                                            19 18        13 12             0
//! ┌──┬───────────────────────────────────────────────┬────────────┬────────────────┐
//! │0 │ Unix time in milliseconds (44 bits)           │ cluster id │ event number   │
//! │  │                                               │ (6 bits)   │ (13 bits)      │
//! └──┴───────────────────────────────────────────────┴────────────┴────────────────┘
//! ```
//!
//! Everything here is pure: the clock is always an argument.

use std::fmt;

/// Bits of the event number within a millisecond (bits 0–12).
pub const EVENT_BITS: u32 = 13;
/// Bits of the cluster id (bits 13–18).
pub const CLUSTER_ID_BITS: u32 = 6;
/// Bits of the Unix time in milliseconds (bits 19–62).
pub const TIMESTAMP_BITS: u32 = 44;
/// Where the cluster id starts.
pub const CLUSTER_ID_SHIFT: u32 = EVENT_BITS;
/// Where the time starts.
pub const TIMESTAMP_SHIFT: u32 = EVENT_BITS + CLUSTER_ID_BITS;

/// Highest event number within one millisecond of one cluster: 8,191.
pub const MAX_EVENT: u16 = (1 << EVENT_BITS) - 1;
/// Highest cluster id: 63 (64 clusters).
pub const MAX_CLUSTER_ID: u8 = (1 << CLUSTER_ID_BITS) - 1;
/// Latest time a revision can carry: 2^44 − 1 ms after the Unix epoch, 2527-06-23T06:20:44.415Z.
pub const MAX_TIMESTAMP_MS: u64 = (1 << TIMESTAMP_BITS) - 1;

/// Clock difference between clusters the Arktos design tolerates when it compares revisions of
/// different clusters by their time.
pub const ARKTOS_CLOCK_SKEW_TOLERANCE_MS: u64 = 5_000;

/// One of the numbers a composite revision is made of, or the revision itself; errors name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    /// Unix time in milliseconds, 0 to 2^44 − 1.
    TimestampMs,
    /// 0 to 63.
    ClusterId,
    /// Event number within the millisecond, 0 to 8,191.
    Event,
    /// The whole revision, 0 to 2^63 − 1 (etcd's revisions are int64; negative ones do not exist).
    Revision,
}

impl Field {
    /// Highest value the field may take (the lowest is always 0).
    pub const fn max(self) -> u64 {
        match self {
            Self::TimestampMs => MAX_TIMESTAMP_MS,
            Self::ClusterId => MAX_CLUSTER_ID as u64,
            Self::Event => MAX_EVENT as u64,
            Self::Revision => i64::MAX as u64,
        }
    }

    /// Name in messages.
    pub const fn name(self) -> &'static str {
        match self {
            Self::TimestampMs => "timestamp in ms",
            Self::ClusterId => "cluster id",
            Self::Event => "event number",
            Self::Revision => "revision",
        }
    }

    /// The allowed range, as messages give it.
    pub fn range(self) -> String {
        match self {
            Self::TimestampMs => format!(
                "0 to {MAX_TIMESTAMP_MS} (2^44 − 1 ms after the Unix epoch, 2527-06-23T06:20:44.415Z)"
            ),
            Self::Revision => format!("0 to {} (2^63 − 1)", i64::MAX),
            _ => format!("0 to {}", self.max()),
        }
    }

    /// A value of this field given as text (a command-line argument): a whole decimal number in
    /// the field's range.
    pub fn parse(self, text: &str) -> Result<u64, RevisionError> {
        let digits = text.strip_prefix('-').unwrap_or(text);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(RevisionError::NotANumber { field: self, text: text.to_owned() });
        }
        match text.parse::<i128>() {
            Ok(value) if (0..=i128::from(self.max())).contains(&value) => Ok(value as u64),
            // Negative, too large, or more digits than any integer type holds.
            _ => Err(self.out_of_range(text)),
        }
    }

    fn check(self, value: u64) -> Result<u64, RevisionError> {
        if value <= self.max() { Ok(value) } else { Err(self.out_of_range(value)) }
    }

    fn out_of_range(self, value: impl ToString) -> RevisionError {
        RevisionError::OutOfRange { field: self, value: value.to_string() }
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What cannot be encoded, decoded or computed; every message names the field and its range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RevisionError {
    #[error("{field} {value} is out of range: it must be from {}", field.range())]
    OutOfRange { field: Field, value: String },
    #[error("{field} {text:?} is not a whole number: it must be from {}", field.range())]
    NotANumber { field: Field, text: String },
    #[error(
        "retention of {retention_ms} ms is longer than the time since the Unix epoch ({now_ms} ms): \
         it must be from 0 to {now_ms} ms"
    )]
    RetentionLongerThanNow { retention_ms: u64, now_ms: u64 },
}

/// A revision of a partitioned etcd cluster, taken apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CompositeRevision {
    /// Unix time in milliseconds when the cluster made the revision (its own clock).
    pub timestamp_ms: u64,
    /// The cluster that made it, 0 to 63.
    pub cluster_id: u8,
    /// Its number among the cluster's revisions of that millisecond, 0 to 8,191.
    pub event: u16,
}

impl CompositeRevision {
    /// The int64 revision, checked: cluster id at most 63, event number at most 8,191, time
    /// below 2^44 ms. The derived order (time, then cluster, then event) is the order of the
    /// encoded revisions.
    pub fn encode(&self) -> Result<i64, RevisionError> {
        let timestamp_ms = Field::TimestampMs.check(self.timestamp_ms)?;
        let cluster_id = Field::ClusterId.check(u64::from(self.cluster_id))?;
        let event = Field::Event.check(u64::from(self.event))?;
        Ok(((timestamp_ms << TIMESTAMP_SHIFT) | (cluster_id << CLUSTER_ID_SHIFT) | event) as i64)
    }

    /// A revision taken apart. Every non-negative int64 is one; a negative one is refused.
    pub fn decode(revision: i64) -> Result<Self, RevisionError> {
        let revision = u64::try_from(revision).map_err(|_| Field::Revision.out_of_range(revision))?;
        Ok(Self {
            timestamp_ms: revision >> TIMESTAMP_SHIFT,
            cluster_id: ((revision >> CLUSTER_ID_SHIFT) & u64::from(MAX_CLUSTER_ID)) as u8,
            event: (revision & u64::from(MAX_EVENT)) as u16,
        })
    }

    /// How far the revision's time is ahead of `now_ms` (negative: behind). A revision just made
    /// by a cluster whose clock agrees with `now_ms` has a skew near 0; beyond
    /// [`ARKTOS_CLOCK_SKEW_TOLERANCE_MS`] either way, the cluster's clock is off. Saturates at
    /// the bounds of i64.
    pub fn clock_skew_ms(&self, now_ms: u64) -> i64 {
        let skew = i128::from(self.timestamp_ms) - i128::from(now_ms);
        skew.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
    }

    /// How much of its millisecond's event numbers the cluster had used by this revision: 0.0
    /// for event 0, 1.0 at event 8,191, after which the cluster can make no further revision in
    /// that millisecond. A fraction; multiply by 100 for a percentage.
    pub fn event_budget_used(&self) -> f64 {
        f64::from(self.event) / f64::from(MAX_EVENT)
    }
}

impl TryFrom<i64> for CompositeRevision {
    type Error = RevisionError;

    fn try_from(revision: i64) -> Result<Self, Self::Error> {
        Self::decode(revision)
    }
}

/// The revision whose millisecond came closest to the limit of 8,191 event numbers: the highest
/// event number among `revisions`, and among equals the latest (time, then cluster id). `None`
/// when there are none. Its [`CompositeRevision::event_budget_used`] says how close.
pub fn busiest_millisecond(
    revisions: impl IntoIterator<Item = CompositeRevision>,
) -> Option<CompositeRevision> {
    revisions.into_iter().max_by_key(|revision| (revision.event, revision.timestamp_ms, revision.cluster_id))
}

/// The revision to compact a partitioned cluster to so that it keeps `retention_ms` of history:
/// `now_ms − retention_ms` in the time bits, the cluster's id, event 0. Every revision the
/// cluster made before that instant is older than the target, every one it made since is not.
///
/// `Ok(None)` when the target would be above `current_revision` (the cluster made no revision
/// since that instant): nothing is compacted then. Compacting to the current revision instead
/// would keep no history at all, and a cluster whose clock runs behind `now_ms` would lose the
/// history it still considers recent; etcd refuses a target above the current revision anyway.
///
/// Refused: a retention longer than `now_ms` (there is no time before the epoch), a cluster id
/// above 63, a target time that does not fit 44 bits, a negative current revision.
pub fn compaction_target(
    now_ms: u64,
    retention_ms: u64,
    cluster_id: u8,
    current_revision: i64,
) -> Result<Option<i64>, RevisionError> {
    let Some(target_ms) = now_ms.checked_sub(retention_ms) else {
        return Err(RevisionError::RetentionLongerThanNow { retention_ms, now_ms });
    };
    CompositeRevision::decode(current_revision)?;
    let target = CompositeRevision { timestamp_ms: target_ms, cluster_id, event: 0 }.encode()?;
    Ok((target <= current_revision).then_some(target))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rev(timestamp_ms: u64, cluster_id: u8, event: u16) -> CompositeRevision {
        CompositeRevision { timestamp_ms, cluster_id, event }
    }

    /// 2025-01-01T00:00:00Z.
    const NOW_MS: u64 = 1_735_689_600_000;

    #[test]
    fn encodes_and_decodes_the_vectors() {
        // (timestamp ms, cluster id, event, revision)
        for (timestamp_ms, cluster_id, event, revision) in [
            (0, 0, 0, 0_i64),
            (0, 0, 1, 1),
            (0, 0, 8191, 8191),
            (0, 1, 0, 8192),
            (0, 63, 0, 63 << 13),
            (0, 63, 8191, (1 << 19) - 1),
            (1, 0, 0, 1 << 19),
            (1, 0, 1, (1 << 19) + 1),
            (NOW_MS, 0, 0, 910_001_229_004_800_000),
            (NOW_MS, 5, 42, 910_001_229_004_800_000 + 5 * 8192 + 42),
            (MAX_TIMESTAMP_MS, 0, 0, (MAX_TIMESTAMP_MS << 19) as i64),
            (MAX_TIMESTAMP_MS, 63, 8191, i64::MAX),
        ] {
            let parts = rev(timestamp_ms, cluster_id, event);
            assert_eq!(parts.encode(), Ok(revision), "{parts:?}");
            assert_eq!(CompositeRevision::decode(revision), Ok(parts), "{revision}");
        }
    }

    #[test]
    fn round_trips_over_many_values_and_keeps_their_order() {
        // splitmix64: many well-spread values, the same on every run.
        let mut state = 0x9E37_79B9_7F4A_7C15_u64;
        let mut next = move || {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        let mut previous: Option<(CompositeRevision, i64)> = None;
        for _ in 0..100_000 {
            let parts = rev(
                next() & MAX_TIMESTAMP_MS,
                (next() & u64::from(MAX_CLUSTER_ID)) as u8,
                (next() & u64::from(MAX_EVENT)) as u16,
            );
            let revision = parts.encode().unwrap();
            assert!(revision >= 0);
            assert_eq!(CompositeRevision::decode(revision), Ok(parts));
            // Every non-negative int64 decodes, and encodes back to itself.
            let any = (next() >> 1) as i64;
            assert_eq!(CompositeRevision::decode(any).unwrap().encode(), Ok(any));
            if let Some((before, before_revision)) = previous {
                assert_eq!(before.cmp(&parts), before_revision.cmp(&revision), "{before:?} {parts:?}");
            }
            previous = Some((parts, revision));
        }
    }

    #[test]
    fn every_bound_is_refused_naming_the_field_and_its_range() {
        for (parts, field, value, range) in [
            (rev(0, 64, 0), Field::ClusterId, "64", "0 to 63"),
            (rev(0, u8::MAX, 0), Field::ClusterId, "255", "0 to 63"),
            (rev(0, 0, 8192), Field::Event, "8192", "0 to 8191"),
            (rev(0, 0, u16::MAX), Field::Event, "65535", "0 to 8191"),
            (rev(1 << 44, 0, 0), Field::TimestampMs, "17592186044416", "0 to 17592186044415"),
            (rev(u64::MAX, 0, 0), Field::TimestampMs, "18446744073709551615", "0 to 17592186044415"),
        ] {
            let err = parts.encode().unwrap_err();
            assert_eq!(err, RevisionError::OutOfRange { field, value: value.into() }, "{parts:?}");
            let message = err.to_string();
            assert!(message.contains(field.name()), "{message}");
            assert!(message.contains(range), "{message}");
        }
        for revision in [-1, i64::MIN] {
            let message = CompositeRevision::decode(revision).unwrap_err().to_string();
            assert!(message.starts_with(&format!("revision {revision} is out of range")), "{message}");
            assert!(message.contains("0 to 9223372036854775807"), "{message}");
        }
    }

    #[test]
    fn parses_a_field_from_text_or_says_why_not() {
        assert_eq!(Field::ClusterId.parse("0"), Ok(0));
        assert_eq!(Field::ClusterId.parse("63"), Ok(63));
        assert_eq!(Field::Event.parse("8191"), Ok(8191));
        assert_eq!(Field::TimestampMs.parse("17592186044415"), Ok(MAX_TIMESTAMP_MS));
        assert_eq!(Field::Revision.parse("9223372036854775807"), Ok(i64::MAX as u64));
        for (field, text) in [
            (Field::ClusterId, "64"),
            (Field::ClusterId, "-1"),
            (Field::Event, "8192"),
            (Field::TimestampMs, "17592186044416"),
            (Field::Revision, "9223372036854775808"),
            (Field::Revision, "-5"),
            (Field::Revision, "99999999999999999999999999999999999999999999"),
        ] {
            assert_eq!(field.parse(text), Err(RevisionError::OutOfRange { field, value: text.into() }));
        }
        for (field, text) in [
            (Field::Revision, ""),
            (Field::Revision, "abc"),
            (Field::Revision, "12a"),
            (Field::Revision, " 1"),
            (Field::Revision, "1.5"),
            (Field::Revision, "+1"),
            (Field::Revision, "-"),
            (Field::Event, "0x10"),
        ] {
            let err = field.parse(text).unwrap_err();
            assert!(matches!(err, RevisionError::NotANumber { .. }), "{text:?}: {err:?}");
            assert!(err.to_string().contains(&field.range()), "{err}");
        }
    }

    #[test]
    fn clock_skew_is_signed_and_saturates() {
        // (revision time, now, skew)
        for (timestamp_ms, now_ms, skew) in [
            (NOW_MS, NOW_MS, 0),
            (NOW_MS + 4_999, NOW_MS, 4_999),
            (NOW_MS - 5_001, NOW_MS, -5_001),
            (0, NOW_MS, -(NOW_MS as i64)),
            (MAX_TIMESTAMP_MS, 0, MAX_TIMESTAMP_MS as i64),
            (0, u64::MAX, i64::MIN),
        ] {
            assert_eq!(rev(timestamp_ms, 7, 3).clock_skew_ms(now_ms), skew, "{timestamp_ms} {now_ms}");
        }
    }

    #[test]
    fn the_busiest_millisecond_is_the_highest_event_number() {
        assert_eq!(busiest_millisecond([]), None);
        let revisions = [rev(NOW_MS, 1, 12), rev(NOW_MS + 1, 2, 4_095), rev(NOW_MS + 2, 1, 7)];
        let busiest = busiest_millisecond(revisions).unwrap();
        assert_eq!(busiest, rev(NOW_MS + 1, 2, 4_095));
        // Among equals, the latest.
        let tied = [rev(NOW_MS + 5, 0, 9), rev(NOW_MS + 9, 0, 9), rev(NOW_MS + 1, 3, 9)];
        assert_eq!(busiest_millisecond(tied), Some(rev(NOW_MS + 9, 0, 9)));
        // (event, fraction of the 8,191 limit)
        for (event, used) in [(0, 0.0), (4_095, 4_095.0 / 8_191.0), (8_191, 1.0)] {
            assert_eq!(rev(NOW_MS, 0, event).event_budget_used(), used, "{event}");
        }
        assert!((busiest.event_budget_used() * 100.0 - 49.99).abs() < 0.01);
    }

    #[test]
    fn compaction_targets_on_a_fixed_clock() {
        let at = |timestamp_ms, cluster_id, event| rev(timestamp_ms, cluster_id, event).encode().unwrap();
        let hour = 3_600_000;
        let current = at(NOW_MS - 10, 5, 300);
        // (retention ms, cluster id, current revision, target)
        for (retention_ms, cluster_id, current_revision, target) in [
            // An hour back, this cluster's id, event 0.
            (hour, 5, current, Some(at(NOW_MS - hour, 5, 0))),
            (1, 5, at(NOW_MS, 5, 0), Some(at(NOW_MS - 1, 5, 0))),
            // The target is the current revision itself: allowed.
            (10, 5, at(NOW_MS - 10, 5, 0), Some(at(NOW_MS - 10, 5, 0))),
            // Nothing made since the target instant: nothing compacted.
            (9, 5, current, None),
            (0, 5, current, None),
            // A cluster whose clock runs an hour behind keeps its history.
            (hour, 5, at(NOW_MS - hour - 1, 5, 8_191), None),
            // Same millisecond, lower cluster id: the current revision is below the target.
            (10, 6, at(NOW_MS - 10, 5, 8_191), None),
            // Retention as long as `now`: back to the epoch.
            (NOW_MS, 0, current, Some(0)),
            (NOW_MS, 63, current, Some(at(0, 63, 0))),
        ] {
            assert_eq!(
                compaction_target(NOW_MS, retention_ms, cluster_id, current_revision),
                Ok(target),
                "retention {retention_ms} cluster {cluster_id} current {current_revision}"
            );
        }
    }

    #[test]
    fn compaction_targets_that_cannot_be_are_refused() {
        let current = rev(NOW_MS, 5, 0).encode().unwrap();
        let err = compaction_target(NOW_MS, NOW_MS + 1, 5, current).unwrap_err();
        assert_eq!(err, RevisionError::RetentionLongerThanNow { retention_ms: NOW_MS + 1, now_ms: NOW_MS });
        assert!(err.to_string().contains("retention of 1735689600001 ms"), "{err}");
        assert_eq!(
            compaction_target(NOW_MS, 0, 64, current),
            Err(RevisionError::OutOfRange { field: Field::ClusterId, value: "64".into() })
        );
        assert_eq!(
            compaction_target(1 << 44, 0, 5, i64::MAX),
            Err(RevisionError::OutOfRange { field: Field::TimestampMs, value: "17592186044416".into() })
        );
        assert_eq!(
            compaction_target(NOW_MS, 0, 5, -1),
            Err(RevisionError::OutOfRange { field: Field::Revision, value: "-1".into() })
        );
    }
}
