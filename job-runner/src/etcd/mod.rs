//! etcd: compaction, defragmentation and snapshots.

pub mod bolt;
pub mod compact;
pub mod connect;
pub mod defrag;
pub mod lock;
pub mod plan;
pub mod retention;
pub mod snapshot;
