//! How many nodes of a ScyllaCluster may be cleaned at once: the task's own bounds, else the
//! cluster's annotations, else one per rack. Annotations that cannot be read are reported,
//! never guessed at.

use crate::scylla::facts::{ClusterFacts, shorten};
use crate::validate::Cleanup;
use groundskeeper_protocol::keys;

/// How many nodes may be cleaned at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub per_rack: u32,
    pub per_cluster: Option<u32>,
}

impl Limits {
    /// `at most 1 node per rack at a time` (and the cluster bound when there is one).
    pub fn describe(&self) -> String {
        let mut text = format!("at most {} node(s) per rack at a time", self.per_rack);
        if let Some(max) = self.per_cluster {
            text.push_str(&format!(" and {max} in the whole cluster"));
        }
        text
    }
}

/// The cluster's concurrency annotations (1 per rack and no cluster bound when absent), or what
/// is wrong with them: nothing starts on a guess.
pub fn cluster_limits(cluster: &ClusterFacts) -> Result<Limits, Vec<String>> {
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

/// The task's own bounds where it sets them, else the cluster's annotations, else one per rack.
/// Annotations that cannot be read count as the tightest bound: nothing is run on a guess.
pub fn limits(cleanup: &Cleanup, cluster: &ClusterFacts) -> Limits {
    let from_cluster = cluster_limits(cluster).unwrap_or(Limits { per_rack: 1, per_cluster: Some(1) });
    Limits {
        per_rack: cleanup.max_concurrent_per_rack.unwrap_or(from_cluster.per_rack),
        per_cluster: cleanup.max_concurrent.or(from_cluster.per_cluster),
    }
}
