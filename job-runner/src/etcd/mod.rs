//! etcd: compaction and defragmentation.

pub mod plan;
