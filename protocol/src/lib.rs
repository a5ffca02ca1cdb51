//! What the groundskeeper controller and the `groundskeeper-job` runner agree on.
//!
//! The controller creates Jobs and reads their results back; the runner does the work. Both
//! sides link this crate so that the annotation keys, the exit codes and the shape of the result
//! cannot drift apart. Also the composite revisions of partitioned etcd clusters ([`revision`]).

pub mod exit;
pub mod keys;
pub mod names;
pub mod operation;
pub mod result;
pub mod revision;
pub mod ring_hash;

pub use operation::{Operation, OperationKind};
pub use result::{JobResult, Outcome, Report};
pub use revision::{CompositeRevision, RevisionError};
pub use ring_hash::{RingHashError, ring_hash, ring_hash_from_json};
