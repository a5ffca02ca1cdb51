//! Scylla node cleanup after scaling.
