//! Scylla node cleanup after scaling.

pub mod decide;
