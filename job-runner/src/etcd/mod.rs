//! etcd: compaction, defragmentation and snapshots.

pub mod bolt;
#[allow(dead_code)]
pub(crate) mod bolt_stream;
// Its users (snapshot to a bucket, copy, prove) land one by one.
#[allow(dead_code)]
pub(crate) mod bucket;
pub mod compact;
pub mod copy;
pub mod defrag;
pub mod etcd_tools;
pub mod lock;
pub mod prove;
pub mod restore_member;
pub mod snapshot;
