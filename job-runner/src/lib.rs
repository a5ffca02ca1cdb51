//! The library behind `groundskeeper-job`: the work a groundskeeper Job does against a data store,
//! and the result it reports back. Needs no Kubernetes credentials.

pub mod cli;
pub mod etcd;
pub mod revision;
pub mod run;
pub mod scylla;
