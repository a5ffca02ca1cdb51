//! etcd: compaction, defragmentation and snapshots.

pub mod bolt;
pub(crate) mod bolt_stream;
pub(crate) mod bucket;
pub mod codec;
pub mod compact;
pub mod copy;
pub mod defrag;
pub mod delta;
pub mod etcd_tools;
pub mod lock;
pub mod prove;
pub mod restore_member;
pub mod snapshot;
