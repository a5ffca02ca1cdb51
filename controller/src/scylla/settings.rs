//! What a ScyllaCluster's annotations ask of groundskeeper: whether maintenance is enabled, and
//! how many nodes may be cleaned at once per rack and per cluster. Annotations that cannot be read
//! are reported, never guessed at.

use groundskeeper_api::scylla::facts::{ClusterFacts, shorten};
use groundskeeper_protocol::keys;

/// How many nodes may be cleaned at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub per_rack: u32,
    pub per_cluster: Option<u32>,
}

/// The cluster's concurrency annotations (1 per rack and no cluster bound when absent), or what
/// is wrong with them: nothing starts on a guess.
pub(crate) fn cluster_limits(cluster: &ClusterFacts) -> Result<Limits, Vec<String>> {
    let per_rack = positive_annotation(cluster, keys::CLEANUP_MAX_PER_RACK);
    let per_cluster = positive_annotation(cluster, keys::CLEANUP_MAX_PER_CLUSTER);
    match (per_rack, per_cluster) {
        (Ok(per_rack), Ok(per_cluster)) => Ok(Limits { per_rack: per_rack.unwrap_or(1), per_cluster }),
        (per_rack, per_cluster) => Err([per_rack.err(), per_cluster.err()].into_iter().flatten().collect()),
    }
}

fn positive_annotation(cluster: &ClusterFacts, key: &str) -> Result<Option<u32>, String> {
    let Some(value) = cluster.annotations.get(key) else {
        return Ok(None);
    };
    match value.parse::<u32>() {
        Ok(n) if n > 0 => Ok(Some(n)),
        _ => Err(format!(
            "annotation {key} on ScyllaCluster {}/{} is not a positive integer: '{}'",
            cluster.namespace,
            cluster.name,
            shorten(value)
        )),
    }
}

/// `Ok(false)`: turned off; `Err`: unreadable, so no new Jobs.
pub(super) fn parse_enabled(cluster: &ClusterFacts) -> Result<bool, String> {
    match cluster.annotations.get(keys::MAINTENANCE_ENABLED).map(String::as_str) {
        None | Some("true") => Ok(true),
        Some("false") => Ok(false),
        Some(other) => Err(format!(
            "annotation {} on ScyllaCluster {}/{} must be \"true\" or \"false\", not '{}'; no \
             cleanup starts until it is",
            keys::MAINTENANCE_ENABLED,
            cluster.namespace,
            cluster.name,
            shorten(other)
        )),
    }
}
