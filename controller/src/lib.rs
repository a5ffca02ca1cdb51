//! groundskeeper's operator: observes Scylla and etcd clusters, decides what maintenance is due,
//! and runs it as Jobs of `groundskeeper-job`.
//!
//! Each controller follows the same steps: observe (read the cluster and its Jobs into plain
//! values), decide (a pure function of those values), apply (thin API writes), report (status
//! conditions, Events, metrics).

pub mod cleanup;
pub mod context;
pub mod crds;
pub mod error;
pub mod etcd;
pub mod http;
pub mod jobs;
pub mod leader;
pub mod metrics;
pub mod resources;
pub mod status;
