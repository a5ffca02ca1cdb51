//! etcd: compaction and defragmentation.

pub mod compact;
pub mod connect;
pub mod defrag;
pub mod lock;
pub mod plan;
