//! What a ScyllaCluster's annotations ask of groundskeeper: whether maintenance is enabled, and
//! how many nodes may be cleaned at once per rack and per cluster (read in
//! [`groundskeeper_api::scylla::limits`], which the plugin's dry run shares). Annotations that
//! cannot be read are reported, never guessed at.

use groundskeeper_api::scylla::facts::{ClusterFacts, shorten};
use groundskeeper_protocol::keys;

pub use groundskeeper_api::scylla::limits::{Limits, cluster_limits};

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
