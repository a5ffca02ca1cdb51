//! etcd: compaction, defragmentation and snapshots.

pub mod bolt;
pub mod compact;
pub mod defrag;
pub mod lock;
pub mod snapshot;
