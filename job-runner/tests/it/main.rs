//! The integration tests of this crate, in one binary (one link, one process): each module
//! is one area.

mod cleanup;
mod cleanup_agent_client;
mod cleanup_ring_hash;
mod common;
mod delta;
mod encoded;
mod etcd;
mod health;
mod prove;
mod restore_member;
mod revision;
mod signals;
mod snapshot;
mod snapshot_bucket;
