//! [`keys::CLEANED_FOR_MEMBERS`]: the ring hash and the UIDs of every member Service when that
//! hash was recorded, written only when every member agreed on it. It lets a scale-in (nodes only
//! left) be told apart from any other ring change (see [`super::decide`], "Scale-in").

use std::collections::BTreeSet;

use groundskeeper_api::scylla::facts::{ClusterFacts, MemberFacts, looks_like_ring_hash};
use groundskeeper_protocol::keys;

/// Named here as well, where the record's users have always found it.
pub use super::model::MembersRecord;

/// The members record to write with `hash`, when every member agrees on it.
pub(crate) fn record_for(settled: &Option<MembersRecord>, hash: &str) -> Option<MembersRecord> {
    settled.as_ref().filter(|r| r.ring_hash == hash).cloned()
}

/// The members record of a cluster whose every member reports the same well-formed current hash
/// and has a UID; `None` otherwise (or when other datacenters may hold nodes we cannot see).
pub(crate) fn settled_record(cluster: &ClusterFacts, members: &[MemberFacts]) -> Option<MembersRecord> {
    if !cluster.single_datacenter || members.is_empty() {
        return None;
    }
    let mut hash: Option<&str> = None;
    let mut uids = BTreeSet::new();
    for member in members {
        let current = member.annotations.get(keys::CURRENT_TOKEN_RING_HASH)?;
        if !looks_like_ring_hash(current) || hash.is_some_and(|h| h != current) {
            return None;
        }
        hash = Some(current);
        uids.insert(member.uid.clone()?);
    }
    Some(MembersRecord { ring_hash: hash?.to_owned(), members: uids })
}
