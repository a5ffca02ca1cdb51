//! A Scylla Manager Agent stand-in following `shared/reference/scylla/*.json`.
