//! What groundskeeper knows of each data store, shared by the controller (which observes) and
//! `groundskeeper-job` (which does the work): the clients that reach them and the pure rules both
//! sides apply, so that the two can never disagree on, say, when a member needs a defrag.
//!
//! * [`etcd`]: the connection to a cluster's members ([`etcd::connect`]), the defrag and
//!   compaction rules ([`etcd::plan`]) and the snapshot file names and retention
//!   ([`etcd::retention`]);
//! * [`duration`]: durations as specs and flags give them (`30s`, `1h30m`, `7d`);
//! * [`scylla`]: the Scylla Manager Agent client ([`scylla::agent`]) and its token
//!   ([`scylla::token`]).

pub mod duration;
pub mod etcd;
pub mod failure;
pub mod scylla;

pub use failure::Failure;
