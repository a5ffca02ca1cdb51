//! Scylla: the Scylla Manager Agent client and node cleanup.
