//! One round of cleanups per burst of ring changes: the automatic cleanup waits for the ring to
//! be quiet.
//!
//! Rings move in bursts: scylla-operator 1.22 bootstraps and decommissions nodes in parallel,
//! every join or leave moves every node's ring, and each node's sidecar notices on its own poll
//! (every 30 s, 5 s while a node joins). A task submitted at the first change would clean nodes
//! for a ring that is gone moments later, and the next change would have them cleaned again.
//!
//! The rule: the trigger submits an automatic task only when
//! * what the member Services say of the ring (each member, its UID and its
//!   `current-token-ring-hash`) has not changed for the quiet period (`--cleanup-ring-quiet-period`,
//!   default [`DEFAULT_QUIET_PERIOD`]), and
//! * every member reports a hash and all report the same one, or they have disagreed for longer
//!   than [`DISAGREEMENT_BOUND`] (a node stuck bootstrapping, a sidecar gone quiet): then the
//!   cleanup goes on without them, as before — a stuck node does not hold every cleanup back.
//!
//! The cluster settling (scylla-operator's conditions) gates the task besides; the quiet period
//! covers what those conditions do not: sidecars reporting the last join up to one poll after the
//! cluster looks settled. The time a ring was first seen is kept in memory: after a restart the
//! quiet period starts again (a cleanup is late by that much, never early).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;
use std::time::Duration;

use jiff::Timestamp;

use groundskeeper_api::scylla::facts::MemberFacts;
use groundskeeper_protocol::keys;

/// How long the ring must stay as it is before an automatic cleanup task is submitted.
pub const DEFAULT_QUIET_PERIOD: Duration = Duration::from_secs(10);
/// How long members may disagree on the ring (or lack a hash) before the cleanup goes on
/// without waiting for them: four polls of scylla-operator's sidecar.
pub const DISAGREEMENT_BOUND: Duration = Duration::from_secs(4 * 30);

/// What the member Services say of the ring, reduced to a number that changes when any member
/// comes, goes, or reports another hash.
pub(crate) fn fingerprint(members: &[MemberFacts]) -> u64 {
    let mut seen: Vec<(&str, Option<&str>, Option<&str>)> = members
        .iter()
        .map(|m| {
            let hash = m.annotations.get(keys::CURRENT_TOKEN_RING_HASH).map(String::as_str);
            (m.service.as_str(), m.uid.as_deref(), hash)
        })
        .collect();
    seen.sort_unstable();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    seen.hash(&mut hasher);
    hasher.finish()
}

/// Since when each cluster's ring has been as it is now, as this process saw it.
#[derive(Debug, Default)]
pub(crate) struct RingMemory {
    seen: Mutex<HashMap<(String, String), (u64, Timestamp)>>,
}

impl RingMemory {
    /// Since when the ring of `namespace/name` has had `fingerprint`: `now` when it just changed
    /// (or is seen for the first time).
    pub(crate) fn unchanged_since(
        &self,
        namespace: &str,
        name: &str,
        fingerprint: u64,
        now: Timestamp,
    ) -> Timestamp {
        let mut seen = self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let entry = seen.entry((namespace.to_owned(), name.to_owned())).or_insert((fingerprint, now));
        if entry.0 != fingerprint {
            *entry = (fingerprint, now);
        }
        entry.1
    }

    pub(crate) fn forget(&self, namespace: &str, name: &str) {
        let mut seen = self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        seen.remove(&(namespace.to_owned(), name.to_owned()));
    }
}

/// The ring as the trigger saw it over time: since when it is unchanged, and the quiet period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingQuiet {
    pub unchanged_since: Timestamp,
    pub period: Duration,
}

impl RingQuiet {
    /// A ring unchanged for ever: no wait.
    pub fn settled_long_ago() -> Self {
        RingQuiet { unchanged_since: Timestamp::UNIX_EPOCH, period: DEFAULT_QUIET_PERIOD }
    }
}

/// Why the automatic cleanup waits for the ring, and for how long at most; `None`: it is quiet.
pub(crate) fn quiet_wait(
    members: &[MemberFacts],
    quiet: RingQuiet,
    now: Timestamp,
) -> Option<(String, Duration)> {
    let unchanged = duration_between(quiet.unchanged_since, now);
    let since = quiet.unchanged_since.strftime("%Y-%m-%dT%H:%M:%SZ");
    if unchanged < quiet.period {
        let left = quiet.period - unchanged;
        return Some((
            format!(
                "waiting for the ring to stay unchanged for {}s (it last changed at {since}), so \
                 that a burst of ring changes is cleaned up once",
                quiet.period.as_secs()
            ),
            left,
        ));
    }
    let apart = disagreeing(members);
    if apart.is_empty() || unchanged >= DISAGREEMENT_BOUND {
        return None;
    }
    Some((
        format!(
            "waiting for every node to report the same ring (differing or without a ring hash: {}); \
             after {}s unchanged (since {since}) the cleanup goes on without them",
            apart.join(", "),
            DISAGREEMENT_BOUND.as_secs()
        ),
        DISAGREEMENT_BOUND - unchanged,
    ))
}

/// The members without a hash or with another one than most report.
fn disagreeing(members: &[MemberFacts]) -> Vec<String> {
    let hash = |m: &MemberFacts| m.annotations.get(keys::CURRENT_TOKEN_RING_HASH).cloned();
    let mut counts: HashMap<String, usize> = HashMap::new();
    for member in members {
        if let Some(h) = hash(member) {
            *counts.entry(h).or_default() += 1;
        }
    }
    let most = counts.into_iter().max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0))).map(|(h, _)| h);
    let mut apart: Vec<String> =
        members.iter().filter(|m| most.is_none() || hash(m) != most).map(|m| m.service.clone()).collect();
    apart.sort();
    apart
}

fn duration_between(from: Timestamp, to: Timestamp) -> Duration {
    Duration::try_from(to.duration_since(from)).unwrap_or(Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn member(name: &str, hash: Option<&str>) -> MemberFacts {
        let annotations = hash
            .map(|h| BTreeMap::from([(keys::CURRENT_TOKEN_RING_HASH.to_owned(), h.to_owned())]))
            .unwrap_or_default();
        MemberFacts {
            service: name.into(),
            uid: Some(format!("uid-{name}")),
            annotations,
            ..MemberFacts::default()
        }
    }

    /// (case, members, seconds since the ring last changed, the wait left, words of the reason)
    type Case<'a> = (&'a str, &'a Vec<MemberFacts>, i64, Option<u64>, &'a str);

    #[test]
    fn the_wait_for_a_quiet_ring() {
        let t0: Timestamp = "2026-11-25T10:00:00Z".parse().unwrap();
        let at = |s: i64| t0 + jiff::SignedDuration::from_secs(s);
        let agree = vec![member("n0", Some("B")), member("n1", Some("B")), member("n2", Some("B"))];
        let behind = vec![member("n0", Some("B")), member("n1", Some("A")), member("n2", Some("B"))];
        let joining = vec![member("n0", Some("B")), member("n1", Some("B")), member("n3", None)];
        let quiet = RingQuiet { unchanged_since: t0, period: Duration::from_secs(10) };
        let cases: Vec<Case<'_>> = vec![
            ("just changed", &agree, 0, Some(10), "unchanged for 10s"),
            ("changed 4 s ago", &agree, 4, Some(6), "last changed at 2026-11-25T10:00:00Z"),
            ("quiet, all agree", &agree, 10, None, ""),
            ("quiet, one behind", &behind, 10, Some(110), "n1"),
            ("quiet, one joining", &joining, 30, Some(90), "n3"),
            ("disagreeing past the bound", &behind, 120, None, ""),
            ("a clock that went back", &agree, -5, Some(10), "unchanged"),
        ];
        for (case, members, after, left, words) in cases {
            match quiet_wait(members, quiet, at(after)) {
                None => assert_eq!(left, None, "{case}"),
                Some((why, wait)) => {
                    assert_eq!(Some(wait.as_secs()), left, "{case}: {why}");
                    assert!(why.contains(words), "{case}: {why}");
                }
            }
        }
    }

    #[test]
    fn the_memory_restarts_the_wait_on_every_change() {
        let t0: Timestamp = "2026-11-25T10:00:00Z".parse().unwrap();
        let at = |s: i64| t0 + jiff::SignedDuration::from_secs(s);
        let memory = RingMemory::default();
        let a = fingerprint(&[member("n0", Some("A")), member("n1", Some("A"))]);
        // The order of the members does not matter; a hash, a member or a UID does.
        assert_eq!(a, fingerprint(&[member("n1", Some("A")), member("n0", Some("A"))]));
        let b = fingerprint(&[member("n0", Some("B")), member("n1", Some("A"))]);
        let replaced = {
            let mut n1 = member("n1", Some("A"));
            n1.uid = Some("uid-new".into());
            fingerprint(&[member("n0", Some("A")), n1])
        };
        assert_ne!(a, b);
        assert_ne!(a, replaced);
        assert_eq!(memory.unchanged_since("ns", "db", a, at(0)), at(0));
        assert_eq!(memory.unchanged_since("ns", "db", a, at(5)), at(0));
        assert_eq!(memory.unchanged_since("ns", "other", a, at(5)), at(5), "per cluster");
        assert_eq!(memory.unchanged_since("ns", "db", b, at(7)), at(7));
        assert_eq!(
            memory.unchanged_since("ns", "db", a, at(9)),
            at(9),
            "back to an earlier ring is a change"
        );
        memory.forget("ns", "db");
        assert_eq!(memory.unchanged_since("ns", "db", a, at(12)), at(12));
    }
}
