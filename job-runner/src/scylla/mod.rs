//! Scylla: the Scylla Manager Agent client and node cleanup.

pub mod agent;
pub mod cleanup;
pub mod token;
