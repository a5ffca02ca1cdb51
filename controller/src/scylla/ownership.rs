//! Ownership, not the ring hash: which keyspaces a node must clean because, since it was last
//! cleaned, it stopped replicating a token range it replicated then. Pure; the reads around it
//! are the trigger's.
//!
//! **Where ownership is read.** By the controller, through one node's agent (the ring is
//! cluster-wide, any node answers for all), before any Job exists: whether a node needs a Job at
//! all, and for which keyspaces, is decided from it (a scale-in needs none). The Job cannot carry
//! ownership back: its result travels in the pod's termination message (4 KiB), and a ring view
//! is megabytes. The controller already talks to agents (the ring observer) with the cluster's
//! token Secret, so no new credential goes anywhere.
//!
//! **One ring view per replication, fetched once.** Scylla's REST API does not say how a keyspace
//! is replicated, and `describe_ring` is one row per token of the cluster (25,600 rows, several
//! MB, for 100 nodes of 256 vnodes), too much to fetch for each of hundreds of keyspaces. So the
//! small `GET /storage_service/ownership/{keyspace}` (one share per node) is read for every vnode
//! keyspace first; keyspaces with identical share lists are replicated alike
//! ([`replication_groups`]), and `describe_ring` is fetched for one keyspace of each group
//! ([`RingView`]). Keyspaces replicated alike always share a list (the same computation on the
//! same ring); two different placements giving every node the very same share would need the
//! vnode tokens Scylla draws at random to line up exactly, which the decision accepts.
//!
//! **What a node owned at its last cleanup** ([`OwnershipRecord`]) is kept on the node's member
//! Service, annotation [`OWNED_AT_LAST_CLEANUP`]: it lives exactly as long as the node
//! (a node removed and re-added gets a new Service and holds no data), survives controller
//! restarts, and needs no RBAC beyond the annotation patches the trigger already makes. To stay
//! within Kubernetes' 256 KiB of annotations per object, the record holds the node's own ranges
//! only (never the whole ring), one range set per group of keyspaces whose ranges on this node are
//! identical (keyspaces replicated alike always are, and so are all those with the same factor in
//! the node's datacenter), with contiguous ranges merged (a node of 256 vnodes replicates at most
//! 256 merged intervals, whatever the factor) and delta-encoded ([`RangeSet::encode`]). For 100
//! nodes × 256 vnodes × 500 keyspaces over 40 replication settings the record of a node stays under
//! [`RECORD_SIZE_LIMIT`] (a test builds that case); a record that would not fit is refused
//! ([`RecordError::TooLarge`]) and that node falls back to the ring-hash rule. The record only
//! shrinks after a cleanup succeeded ([`OwnershipRecord::after_cleanup`]); it grows whenever the
//! node is seen replicating more ([`OwnershipRecord::widened`]): a node seeded when it joins, a
//! node gaining ranges in a scale-in, a keyspace created since.
//!
//! **The rule** ([`decide_node`]): keyspace `k` needs cleanup on node `n` iff the ranges `n`
//! replicated for `k` at its last cleanup are not all among those it replicates now. So a
//! scale-out cleans the nodes that handed ranges over, a scale-in (nodes only gain) cleans none,
//! a lowered factor or a datacenter dropped from `NetworkTopologyStrategy` cleans that keyspace
//! on the nodes that lost replicas, and in a multi-datacenter cluster only the nodes of the
//! datacenters whose ownership changed are cleaned (Scylla's placement is per datacenter, so the
//! others' ranges do not move). Where ownership cannot be known, the decision says so and why
//! ([`FallbackReason`]), and the ring-hash rule decides for that node or keyspace.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use base64::Engine;
use serde::{Deserialize, Serialize};

/// Named here as well, where the ownership rule's users have always found it.
pub use super::model::CleanScope;
pub use groundskeeper_protocol::keys::OWNED_AT_LAST_CLEANUP;
use groundskeeper_stores::scylla::agent::{Mapper, TokenRange};

/// The largest record written: half the 256 KiB Kubernetes allows for all annotations of an
/// object, leaving room for everyone else's.
pub const RECORD_SIZE_LIMIT: usize = 128 * 1024;
/// Format version of [`OwnershipRecord`].
pub(crate) const RECORD_VERSION: u32 = 1;

/// Token ranges `(start, end]`, sorted, disjoint and not touching (touching ones are merged),
/// over the Murmur3 token space `(i64::MIN, i64::MAX]` (`i64::MIN` is no node's token).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RangeSet(Vec<(i64, i64)>);

impl RangeSet {
    /// From `(start, end]` ranges as `describe_ring` gives them: a range with `start > end`
    /// wraps past the largest token, `start == end` is the whole ring.
    pub(crate) fn from_ring_ranges(ranges: impl IntoIterator<Item = (i64, i64)>) -> Self {
        let mut intervals = Vec::new();
        for (start, end) in ranges {
            match start.cmp(&end) {
                std::cmp::Ordering::Less => intervals.push((start, end)),
                std::cmp::Ordering::Equal => intervals.push((i64::MIN, i64::MAX)),
                std::cmp::Ordering::Greater => {
                    intervals.push((i64::MIN, end));
                    intervals.push((start, i64::MAX));
                }
            }
        }
        Self::from_intervals(intervals)
    }

    /// From non-wrapping `(start, end]` intervals in any order; empty ones are dropped.
    pub(crate) fn from_intervals(mut intervals: Vec<(i64, i64)>) -> Self {
        intervals.retain(|(s, e)| s < e);
        intervals.sort_unstable();
        let mut merged: Vec<(i64, i64)> = Vec::with_capacity(intervals.len());
        for (start, end) in intervals {
            match merged.last_mut() {
                Some(last) if start <= last.1 => last.1 = last.1.max(end),
                _ => merged.push((start, end)),
            }
        }
        Self(merged)
    }

    pub fn intervals(&self) -> &[(i64, i64)] {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn union(&self, other: &RangeSet) -> RangeSet {
        Self::from_intervals(self.0.iter().chain(&other.0).copied().collect())
    }

    /// The part of `self` outside `other`: what a node replicated then and does not now.
    pub fn minus(&self, other: &RangeSet) -> RangeSet {
        let mut out = Vec::new();
        let mut others = other.0.iter().peekable();
        for &(start, end) in &self.0 {
            let mut cursor = start;
            while let Some(&&(os, oe)) = others.peek() {
                if oe <= cursor {
                    others.next();
                    continue;
                }
                if os >= end {
                    break;
                }
                if os > cursor {
                    out.push((cursor, os));
                }
                cursor = oe;
                if oe >= end {
                    break;
                }
                others.next();
            }
            if cursor < end {
                out.push((cursor, end));
            }
        }
        RangeSet(out)
    }

    pub(crate) fn is_subset_of(&self, other: &RangeSet) -> bool {
        self.minus(other).is_empty()
    }

    /// The share of the ring covered, 0 to 1 (for messages).
    pub(crate) fn share_of_ring(&self) -> f64 {
        let width: u128 = self.0.iter().map(|(s, e)| (i128::from(*e) - i128::from(*s)) as u128).sum();
        width as f64 / 2f64.powi(64)
    }

    /// Compact text: standard base64 of LEB128 varints, the interval count, then per interval the
    /// gap from the previous end (from `i64::MIN` for the first) and its width, all as unsigned
    /// offsets. A random vnode interval takes about 15 bytes.
    pub fn encode(&self) -> String {
        let mut bytes = Vec::with_capacity(2 + self.0.len() * 16);
        put_varint(&mut bytes, self.0.len() as u64);
        let mut previous_end = 0u64;
        for &(start, end) in &self.0 {
            let (start, end) = (offset(start), offset(end));
            put_varint(&mut bytes, start - previous_end);
            put_varint(&mut bytes, end - start);
            previous_end = end;
        }
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    pub fn decode(text: &str) -> Result<Self, String> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|err| format!("not base64: {err}"))?;
        let mut input = bytes.as_slice();
        let count = take_varint(&mut input)?;
        let mut intervals = Vec::new();
        let mut previous_end = 0u64;
        for _ in 0..count {
            let start = previous_end
                .checked_add(take_varint(&mut input)?)
                .ok_or("a range starts past the last token")?;
            let end =
                start.checked_add(take_varint(&mut input)?).ok_or("a range ends past the last token")?;
            if end <= start || (start <= previous_end && !intervals.is_empty()) {
                return Err("ranges are not sorted, disjoint and non-empty".into());
            }
            intervals.push((token(start), token(end)));
            previous_end = end;
        }
        if !input.is_empty() {
            return Err(format!("{} bytes after the last range", input.len()));
        }
        Ok(RangeSet(intervals))
    }
}

/// Order-preserving map of a token onto `u64` (`i64::MIN` → 0).
fn offset(token: i64) -> u64 {
    (token as u64) ^ (1 << 63)
}

fn token(offset: u64) -> i64 {
    (offset ^ (1 << 63)) as i64
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn take_varint(input: &mut &[u8]) -> Result<u64, String> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = input.split_first().ok_or("cut short")?;
        *input = rest;
        value |= u64::from(byte & 0x7f)
            .checked_shl(shift)
            .filter(|v| v >> shift == u64::from(byte & 0x7f))
            .ok_or("a number too large")?;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err("a number too large".into())
}

/// Why a `describe_ring` answer cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OwnershipError {
    #[error("describe_ring {keyspace}: {field} {value:?} is not a decimal int64 token")]
    BadToken { keyspace: String, field: &'static str, value: String },
    #[error("describe_ring {keyspace}: no ranges (an empty ring)")]
    EmptyRing { keyspace: String },
}

/// One node's part of a ring view.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeRanges {
    /// From `endpoint_details` (empty when Scylla gave none).
    pub datacenter: String,
    pub ranges: RangeSet,
}

/// What every node replicates, for keyspaces replicated alike: one `describe_ring` answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RingView {
    pub keyspaces: BTreeSet<String>,
    /// By node address (as Scylla knows the node: its broadcast address).
    pub nodes: BTreeMap<String, NodeRanges>,
    /// The ring the answer was read on: a digest of its range boundaries (every keyspace's
    /// `describe_ring` lists the ranges of the whole ring). Views read across a ring change
    /// differ here ([`one_ring`]).
    pub ring: u64,
}

impl RingView {
    /// From the `describe_ring` answer of one keyspace of the group `keyspaces`.
    pub fn from_describe_ring(
        keyspaces: BTreeSet<String>,
        rows: &[TokenRange],
    ) -> Result<Self, OwnershipError> {
        let asked = keyspaces.first().cloned().unwrap_or_default();
        if rows.is_empty() {
            return Err(OwnershipError::EmptyRing { keyspace: asked });
        }
        let parse = |field: &'static str, value: &str| {
            value.parse::<i64>().map_err(|_| OwnershipError::BadToken {
                keyspace: asked.clone(),
                field,
                value: value.to_owned(),
            })
        };
        let mut intervals: BTreeMap<String, (String, Vec<(i64, i64)>)> = BTreeMap::new();
        let mut boundaries = BTreeSet::new();
        for row in rows {
            let range = (parse("start_token", &row.start_token)?, parse("end_token", &row.end_token)?);
            boundaries.extend([range.0, range.1]);
            for endpoint in &row.endpoints {
                if let Some((_, ranges)) = intervals.get_mut(endpoint.as_str()) {
                    ranges.push(range);
                    continue;
                }
                let datacenter = row
                    .endpoint_details
                    .iter()
                    .find(|d| &d.host == endpoint)
                    .map(|d| d.datacenter.clone())
                    .unwrap_or_default();
                intervals.insert(endpoint.clone(), (datacenter, vec![range]));
            }
        }
        let nodes = intervals
            .into_iter()
            .map(|(endpoint, (datacenter, ranges))| {
                let ranges = RangeSet::from_ring_ranges(ranges);
                (endpoint, NodeRanges { datacenter, ranges })
            })
            .collect();
        Ok(Self { keyspaces, nodes, ring: ring_digest(&boundaries) })
    }

    /// The ranges `endpoint` replicates here (none when it is no replica of anything).
    pub(crate) fn ranges_of(&self, endpoint: &str) -> RangeSet {
        self.nodes.get(endpoint).map(|n| n.ranges.clone()).unwrap_or_default()
    }
}

/// A digest of a ring's token boundaries: equal for equal rings within one process.
fn ring_digest(boundaries: &BTreeSet<i64>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    boundaries.hash(&mut hasher);
    hasher.finish()
}

/// Whether `views` were all read on one ring. A reading that spans a ring change mixes rings:
/// a node that joined between two `describe_ring` calls is missing from the earlier views, and
/// a record seeded from them would miss ranges whose data the node holds.
pub fn one_ring(views: &[RingView]) -> bool {
    views.windows(2).all(|pair| pair[0].ring == pair[1].ring)
}

/// Groups keyspaces by their `GET /storage_service/ownership/{keyspace}` answers: equal share
/// lists, one group (see the module documentation). Groups and their members in name order.
pub fn replication_groups(shares: &BTreeMap<String, Vec<Mapper>>) -> Vec<BTreeSet<String>> {
    let mut groups: BTreeMap<Vec<(String, String)>, BTreeSet<String>> = BTreeMap::new();
    for (keyspace, rows) in shares {
        let mut key: Vec<(String, String)> = rows.iter().map(|m| (m.key.clone(), m.value.clone())).collect();
        key.sort();
        groups.entry(key).or_default().insert(keyspace.clone());
    }
    let mut groups: Vec<BTreeSet<String>> = groups.into_values().collect();
    groups.sort();
    groups
}

/// What one node replicates now, per vnode keyspace: the keyspaces' ring views looked up for it.
pub fn node_ownership(views: &[RingView], endpoint: &str) -> BTreeMap<String, RangeSet> {
    views
        .iter()
        .flat_map(|view| {
            let ranges = view.ranges_of(endpoint);
            view.keyspaces.iter().map(move |k| (k.clone(), ranges.clone()))
        })
        .collect()
}

/// [`OWNED_AT_LAST_CLEANUP`]: what a node replicated, per keyspace, when it was last cleaned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OwnershipRecord {
    pub keyspaces: BTreeMap<String, RangeSet>,
    /// The node's `last-cleaned-up-token-ring-hash` (a hash or `NeverCleanedUp`) when the record
    /// was seeded, shrunk after a cleanup or reset: the record stands for that cleanup. `None`:
    /// the node had none then, or the record was written before this was kept. A later
    /// `last-cleaned-…` that groundskeeper did not write tells of a cleanup by someone else
    /// ([`basis_change`]).
    pub last_cleaned: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct RecordJson {
    version: u32,
    groups: Vec<GroupJson>,
    /// Added in version 1 without a version change: older readers ignore it, and a record
    /// without it is read as "not known" ([`BasisChange::Rebase`], never a reset).
    #[serde(default, rename = "lastCleaned", skip_serializing_if = "Option::is_none")]
    last_cleaned: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct GroupJson {
    keyspaces: Vec<String>,
    ranges: String,
}

/// Why a record cannot be written or read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("the ownership record would take {bytes} bytes ({}), over the {limit} bytes ({}) kept on a member Service", human(*bytes), human(*limit))]
    TooLarge { bytes: usize, limit: usize },
    #[error("annotation {key}: {message}")]
    Unreadable { key: &'static str, message: String },
}

fn human(bytes: usize) -> String {
    format!("{:.1} KiB", bytes as f64 / 1024.0)
}

impl OwnershipRecord {
    /// The annotation value: keyspaces with identical ranges share one encoded range set.
    pub fn to_annotation(&self) -> Result<String, RecordError> {
        let mut groups: BTreeMap<&RangeSet, Vec<String>> = BTreeMap::new();
        for (keyspace, ranges) in &self.keyspaces {
            groups.entry(ranges).or_default().push(keyspace.clone());
        }
        let groups = groups
            .into_iter()
            .map(|(ranges, keyspaces)| GroupJson { keyspaces, ranges: ranges.encode() })
            .collect();
        let text = serde_json::to_string(&RecordJson {
            version: RECORD_VERSION,
            groups,
            last_cleaned: self.last_cleaned.clone(),
        })
        .expect("records always serialise");
        if text.len() > RECORD_SIZE_LIMIT {
            return Err(RecordError::TooLarge { bytes: text.len(), limit: RECORD_SIZE_LIMIT });
        }
        Ok(text)
    }

    pub fn from_annotation(text: &str) -> Result<Self, RecordError> {
        let unreadable = |message: String| RecordError::Unreadable { key: OWNED_AT_LAST_CLEANUP, message };
        let json: RecordJson = serde_json::from_str(text).map_err(|err| unreadable(err.to_string()))?;
        if json.version != RECORD_VERSION {
            return Err(unreadable(format!(
                "version {} (this controller reads {RECORD_VERSION})",
                json.version
            )));
        }
        let mut keyspaces = BTreeMap::new();
        for group in json.groups {
            let ranges = RangeSet::decode(&group.ranges)
                .map_err(|err| unreadable(format!("ranges of {}: {err}", group.keyspaces.join(","))))?;
            for keyspace in group.keyspaces {
                keyspaces.insert(keyspace, ranges.clone());
            }
        }
        Ok(Self { keyspaces, last_cleaned: json.last_cleaned })
    }

    /// The record to write once a node's cleanup of `cleaned` succeeded. `decided` is what the
    /// node replicated when the cleanup was decided, `now` what it replicates when the record is
    /// written. A cleaned keyspace holds at most what the node replicated while it was cleaned,
    /// which lies in `decided ∪ now` (Scylla refuses to clean while the ring moves); a keyspace
    /// not cleaned still holds what it held, plus what it gained. Keeping the union never misses
    /// a range, at worst cleans once more. Keyspaces no longer in `now` (dropped, or moved to
    /// tablets) are left out. `last_cleaned`: the node's `last-cleaned-…` once this cleanup is
    /// recorded (see [`OwnershipRecord::last_cleaned`]).
    pub fn after_cleanup(
        previous: Option<&OwnershipRecord>,
        decided: &BTreeMap<String, RangeSet>,
        now: &BTreeMap<String, RangeSet>,
        cleaned: &BTreeSet<String>,
        last_cleaned: Option<&str>,
    ) -> OwnershipRecord {
        let keyspaces = now
            .iter()
            .map(|(keyspace, ranges_now)| {
                let mut held = ranges_now.clone();
                if let Some(decided) = decided.get(keyspace) {
                    held = held.union(decided);
                }
                if !cleaned.contains(keyspace)
                    && let Some(old) = previous.and_then(|p| p.keyspaces.get(keyspace))
                {
                    held = held.union(old);
                }
                (keyspace.clone(), held)
            })
            .collect();
        OwnershipRecord { keyspaces, last_cleaned: last_cleaned.map(str::to_owned) }
    }
}

impl OwnershipRecord {
    /// The record to write when the node is seen replicating ranges its record lacks (it gained
    /// ranges: their data is streamed or repaired onto it), or keyspaces it lacks (created since,
    /// or the node just joined: seeded with what it replicates now). `None` when the record
    /// already covers `now`. A record only ever grows this way; it shrinks only after a cleanup
    /// ([`OwnershipRecord::after_cleanup`]). Without this, a range gained in a scale-in and lost
    /// again in the next scale-out would be data nobody knows the node holds.
    pub fn widened(&self, now: &BTreeMap<String, RangeSet>) -> Option<OwnershipRecord> {
        let mut keyspaces = self.keyspaces.clone();
        let mut changed = false;
        for (keyspace, ranges_now) in now {
            match keyspaces.get_mut(keyspace) {
                Some(held) if ranges_now.is_subset_of(held) => {}
                Some(held) => {
                    *held = held.union(ranges_now);
                    changed = true;
                }
                None => {
                    keyspaces.insert(keyspace.clone(), ranges_now.clone());
                    changed = true;
                }
            }
        }
        changed.then_some(OwnershipRecord { keyspaces, last_cleaned: self.last_cleaned.clone() })
    }
}

/// What a change of the node's `last-cleaned-…` since its record was written means for the
/// record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BasisChange {
    /// Nothing to do: the annotation is the one the record stands for, or it tells of no
    /// cleanup the record should follow yet.
    Same,
    /// Take the annotation as the record's basis and keep every range: it moved without a
    /// cleanup that shrinks the record (a seed by scylla-operator, or a record from before the
    /// basis was kept).
    Rebase,
    /// Someone else cleaned the whole node for its current ring: the record becomes what the
    /// node replicates now.
    CleanedElsewhere,
}

/// How a record whose basis is `basis` follows the node's `last_cleaned` (the annotation, a hash
/// or `NeverCleanedUp`) and `current` ring hash. `outside_cleaner`: scylla-operator's cleanup
/// runs for the cluster, so groundskeeper writes no `last-cleaned-…` and every change of it is
/// scylla-operator's (or a person's): it writes a ring there only after a Job that cleaned every
/// keyspace of the node for that ring. Where groundskeeper writes `last-cleaned-…` itself (its
/// seeds, its Jobs' results, which shrink the record and write its basis themselves), a change
/// is never taken for someone else's cleanup and the record is left to those writes: a rewrite
/// here could overwrite the shrunk record a Job's result has just written. A record never
/// shrinks on a guess: only a move from a known basis to the node's current ring counts, a move
/// from no basis (a seed by scylla-operator, an old record) is a rebase, and a move to an older
/// ring waits for the cleanup of the current one.
pub fn basis_change(
    basis: Option<&str>,
    last_cleaned: Option<&str>,
    current: Option<&str>,
    outside_cleaner: bool,
) -> BasisChange {
    if !outside_cleaner || last_cleaned.is_none() || last_cleaned == basis {
        return BasisChange::Same;
    }
    if basis.is_none() {
        return BasisChange::Rebase;
    }
    if current.is_some() && last_cleaned == current {
        BasisChange::CleanedElsewhere
    } else {
        BasisChange::Same
    }
}

/// Why the ring-hash rule decides instead of ownership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FallbackReason {
    /// The ring views could not be read (agent unreachable, `describe_ring` or `ownership`
    /// missing on this version, an answer that makes no sense).
    OwnershipUnknown { message: String },
    /// The node carries no record yet (cleaned before ownership was kept, or never).
    NoRecord,
    /// Its record cannot be read.
    RecordUnreadable { message: String },
    /// The keyspace is not in the node's record (created since its last cleanup).
    KeyspaceNotRecorded,
}

impl fmt::Display for FallbackReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FallbackReason::OwnershipUnknown { message } => write!(f, "ownership unknown: {message}"),
            FallbackReason::NoRecord => write!(f, "no record of what the node owned when last cleaned"),
            FallbackReason::RecordUnreadable { message } => write!(f, "record unreadable: {message}"),
            FallbackReason::KeyspaceNotRecorded => {
                write!(f, "keyspace created since the node's last cleanup")
            }
        }
    }
}

/// What the node's record says, as read from its member Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordState {
    Missing,
    Unreadable(String),
    Present(OwnershipRecord),
}

impl RecordState {
    /// From the annotation value, if any.
    pub fn from_annotation(value: Option<&str>) -> Self {
        match value.map(OwnershipRecord::from_annotation) {
            None => RecordState::Missing,
            Some(Ok(record)) => RecordState::Present(record),
            Some(Err(err)) => RecordState::Unreadable(err.to_string()),
        }
    }
}

/// Ranges a node replicated at its last cleanup and does not now, for one keyspace.
#[derive(Debug, Clone, PartialEq)]
pub struct Lost {
    pub ranges: RangeSet,
}

impl Lost {
    pub(crate) fn share_of_ring(&self) -> f64 {
        self.ranges.share_of_ring()
    }
}

/// The decision for one node.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeDecision {
    /// Ownership decides: clean exactly `clean`; keyspaces in `fallback` are left to the
    /// ring-hash rule, each with its reason.
    Ownership { clean: BTreeMap<String, Lost>, fallback: BTreeMap<String, FallbackReason> },
    /// Ownership cannot decide for this node: the ring-hash rule does, for all its keyspaces.
    RingHash { reason: FallbackReason },
}

impl NodeDecision {
    /// Keyspaces ownership says to clean (none under the ring-hash rule).
    pub fn keyspaces_to_clean(&self) -> BTreeSet<String> {
        match self {
            NodeDecision::Ownership { clean, .. } => clean.keys().cloned().collect(),
            NodeDecision::RingHash { .. } => BTreeSet::new(),
        }
    }
}

/// The rule (see the module documentation) for one node: `record` is what it owned at its last
/// cleanup, `now` what it replicates per vnode keyspace, or why that is unknown.
pub fn decide_node(record: &RecordState, now: Result<&BTreeMap<String, RangeSet>, &str>) -> NodeDecision {
    let now = match now {
        Ok(now) => now,
        Err(message) => {
            return NodeDecision::RingHash {
                reason: FallbackReason::OwnershipUnknown { message: message.to_owned() },
            };
        }
    };
    let record = match record {
        RecordState::Present(record) => record,
        RecordState::Missing => {
            return NodeDecision::RingHash { reason: FallbackReason::NoRecord };
        }
        RecordState::Unreadable(message) => {
            return NodeDecision::RingHash {
                reason: FallbackReason::RecordUnreadable { message: message.clone() },
            };
        }
    };
    let mut clean = BTreeMap::new();
    let mut fallback = BTreeMap::new();
    for (keyspace, ranges_now) in now {
        let Some(then) = record.keyspaces.get(keyspace) else {
            fallback.insert(keyspace.clone(), FallbackReason::KeyspaceNotRecorded);
            continue;
        };
        let lost = then.minus(ranges_now);
        if !lost.is_empty() {
            clean.insert(keyspace.clone(), Lost { ranges: lost });
        }
    }
    NodeDecision::Ownership { clean, fallback }
}

/// What to do for one node, the ownership rule and the ring-hash rule together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodePlan {
    /// No cleanup.
    Nothing,
    /// A cleanup Job. `mark_node_clean`: the keyspaces are all the node can hold stale data for,
    /// so the Job resets Scylla's own flag once they are clean (`--mark-node-clean`); a
    /// whole-node cleanup does that by itself. `why` is for the task and the Event.
    Clean { scope: CleanScope, mark_node_clean: bool, why: String },
}

/// Combines the ownership decision of a node with the ring-hash rule (`ring_changed`: its
/// current ring hash differs from the one it was last cleaned for). Where ownership cannot
/// decide, the ring-hash rule does, for the whole node or for the keyspaces it cannot judge.
pub fn plan_node(decision: &NodeDecision, ring_changed: bool) -> NodePlan {
    match decision {
        NodeDecision::RingHash { reason } if ring_changed => NodePlan::Clean {
            scope: CleanScope::All,
            mark_node_clean: false,
            why: format!("the ring changed since the node was last cleaned, and {reason}"),
        },
        NodeDecision::RingHash { .. } => NodePlan::Nothing,
        NodeDecision::Ownership { clean, fallback } => {
            let mut keyspaces: BTreeSet<String> = clean.keys().cloned().collect();
            let mut reasons: Vec<String> = clean
                .iter()
                .map(|(keyspace, lost)| {
                    format!(
                        "{keyspace}: no longer replicates {:.2}% of the ring",
                        lost.share_of_ring() * 100.0
                    )
                })
                .collect();
            if ring_changed && !fallback.is_empty() {
                keyspaces.extend(fallback.keys().cloned());
                reasons.extend(fallback.iter().map(|(k, r)| format!("{k}: the ring changed and {r}")));
            }
            if keyspaces.is_empty() {
                return NodePlan::Nothing;
            }
            NodePlan::Clean {
                scope: CleanScope::Only(keyspaces),
                // Keyspaces left to the ring-hash rule that it did not pick may hold stale data
                // nobody knows of: then the flag stays for Scylla to act on.
                mark_node_clean: fallback.is_empty() || ring_changed,
                why: reasons.join("; "),
            }
        }
    }
}

#[cfg(test)]
mod tests;
