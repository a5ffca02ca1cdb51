//! etcd: compaction and defragmentation.
