//! Scylla: the Scylla Manager Agent client and its token.

pub mod agent;
pub mod token;
