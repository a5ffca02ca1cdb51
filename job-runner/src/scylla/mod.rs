//! Scylla: node cleanup through the Scylla Manager Agent.

pub mod cleanup;
