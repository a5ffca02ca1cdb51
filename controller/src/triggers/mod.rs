//! What starts maintenance: each trigger observes its data store, decides (a pure function of what
//! it observed), and acts on the decision.

pub mod etcd;
pub mod scylla_cleanup;
