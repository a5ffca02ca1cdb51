//! Resources groundskeeper reads but does not own (ScyllaCluster, ScyllaDBDatacenter).
