//! etcd: reaching a cluster's members, and the rules for compaction, defragmentation and
//! snapshot files.

pub mod connect;
pub mod leader_turn;
pub mod plan;
pub mod retention;
pub mod versions;
