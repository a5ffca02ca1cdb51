//! The cleanup trigger's series, set on each pass over a ScyllaCluster and dropped with it:
//! `groundskeeper_scylla_cluster_degraded{namespace,cluster,reason}` (its condition
//! `CleanupControllerDegraded`) and, for each node that needs a cleanup by the ring-hash rule,
//! `groundskeeper_scylla_node_dirty_since_timestamp_seconds{namespace,cluster,node}`: when this
//! process first saw it so (a restart starts the count again).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;

use jiff::Timestamp;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use groundskeeper_api::scylla::facts::{MemberFacts, looks_like_ring_hash};
use groundskeeper_protocol::keys;

use super::model::ConditionPlan;
use crate::runtime::metrics::MetricFamily;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DegradedLabels {
    namespace: String,
    cluster: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NodeLabels {
    namespace: String,
    cluster: String,
    node: String,
}

/// What the last pass over one cluster set, so that the next one removes what no longer holds.
#[derive(Default)]
struct Seen {
    reason: Option<String>,
    /// Dirty nodes, and since when (Unix seconds).
    dirty: BTreeMap<String, f64>,
}

pub(crate) struct ScyllaMetrics {
    degraded: Family<DegradedLabels, Gauge>,
    dirty_since: Family<NodeLabels, Gauge<f64, AtomicU64>>,
    seen: Mutex<BTreeMap<(String, String), Seen>>,
}

/// The nodes whose `current-token-ring-hash` differs from their `last-cleaned-up-token-ring-hash`
/// (`NeverCleanedUp` differs from every hash): scylla-operator's rule for a node that needs a
/// cleanup. A node without either is bootstrapping or just joined, not dirty.
pub(crate) fn dirty_nodes(members: &[MemberFacts]) -> Vec<String> {
    members
        .iter()
        .filter(|member| {
            let current = member.annotations.get(keys::CURRENT_TOKEN_RING_HASH);
            let last = member.annotations.get(keys::LAST_CLEANED_UP_TOKEN_RING_HASH);
            match (current, last) {
                (Some(current), Some(last)) if looks_like_ring_hash(current) => current != last,
                _ => false,
            }
        })
        .map(|member| member.service.clone())
        .collect()
}

impl ScyllaMetrics {
    /// What one pass found: the Degraded condition it writes and the cluster's members.
    pub fn observed(
        &self,
        namespace: &str,
        cluster: &str,
        degraded: &ConditionPlan,
        members: &[MemberFacts],
        now: Timestamp,
    ) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let seen = seen.entry((namespace.to_owned(), cluster.to_owned())).or_default();
        let labels = |reason: &str| DegradedLabels {
            namespace: namespace.to_owned(),
            cluster: cluster.to_owned(),
            reason: reason.to_owned(),
        };
        if let Some(before) = seen.reason.replace(degraded.reason.clone()).filter(|r| *r != degraded.reason) {
            self.degraded.remove(&labels(&before));
        }
        self.degraded.get_or_create(&labels(&degraded.reason)).set(i64::from(degraded.status));
        let node = |node: &str| NodeLabels {
            namespace: namespace.to_owned(),
            cluster: cluster.to_owned(),
            node: node.to_owned(),
        };
        let now = now.as_millisecond() as f64 / 1000.0;
        let dirty: BTreeMap<String, f64> = dirty_nodes(members)
            .into_iter()
            .map(|name| {
                let since = seen.dirty.get(&name).copied().unwrap_or(now);
                (name, since)
            })
            .collect();
        for clean in seen.dirty.keys().filter(|name| !dirty.contains_key(*name)) {
            self.dirty_since.remove(&node(clean));
        }
        for (name, since) in &dirty {
            self.dirty_since.get_or_create(&node(name)).set(*since);
        }
        seen.dirty = dirty;
    }

    /// Drops every series of a deleted cluster.
    pub fn forget(&self, namespace: &str, cluster: &str) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let Some(gone) = seen.remove(&(namespace.to_owned(), cluster.to_owned())) else { return };
        if let Some(reason) = gone.reason {
            let labels =
                DegradedLabels { namespace: namespace.to_owned(), cluster: cluster.to_owned(), reason };
            self.degraded.remove(&labels);
        }
        for node in gone.dirty.into_keys() {
            self.dirty_since.remove(&NodeLabels {
                namespace: namespace.to_owned(),
                cluster: cluster.to_owned(),
                node,
            });
        }
    }
}

impl MetricFamily for ScyllaMetrics {
    fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            degraded: Family::default(),
            dirty_since: Family::default(),
            seen: Mutex::new(BTreeMap::new()),
        };
        registry.register(
            "scylla_cluster_degraded",
            "1 while a ScyllaCluster's condition CleanupControllerDegraded is True (0 while False), by its reason",
            metrics.degraded.clone(),
        );
        registry.register(
            "scylla_node_dirty_since_timestamp_seconds",
            "Since when a Scylla node has needed a cleanup (its current-token-ring-hash differs from its \
             last-cleaned-up one), as first seen by this process, Unix seconds",
            metrics.dirty_since.clone(),
        );
        metrics
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HASH_A: &str =
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==";
    const HASH_B: &str =
        "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB==";

    fn member(service: &str, current: Option<&str>, last: Option<&str>) -> MemberFacts {
        let mut annotations = BTreeMap::new();
        if let Some(current) = current {
            annotations.insert(keys::CURRENT_TOKEN_RING_HASH.to_owned(), current.to_owned());
        }
        if let Some(last) = last {
            annotations.insert(keys::LAST_CLEANED_UP_TOKEN_RING_HASH.to_owned(), last.to_owned());
        }
        MemberFacts {
            service: service.into(),
            uid: None,
            datacenter: None,
            rack: None,
            address: None,
            annotations,
        }
    }

    fn degraded(status: bool, reason: &str) -> ConditionPlan {
        ConditionPlan {
            type_: "CleanupControllerDegraded",
            status,
            reason: reason.into(),
            message: String::new(),
        }
    }

    fn encode(registry: &Registry) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
        text
    }

    #[test]
    fn a_node_is_dirty_when_its_hashes_differ_or_it_was_never_cleaned() {
        let members = [
            member("clean", Some(HASH_A), Some(HASH_A)),
            member("moved", Some(HASH_B), Some(HASH_A)),
            member("never", Some(HASH_A), Some(keys::NEVER_CLEANED_UP)),
            member("joined", Some(HASH_A), None),
            member("bootstrapping", None, Some(HASH_A)),
        ];
        assert_eq!(dirty_nodes(&members), ["moved", "never"]);
    }

    #[test]
    fn dirty_nodes_keep_their_first_time_and_go_when_clean() {
        let mut registry = Registry::default();
        let metrics = ScyllaMetrics::register(&mut registry);
        let t0 = Timestamp::from_second(1_000).unwrap();
        let t1 = Timestamp::from_second(2_000).unwrap();
        let moved =
            [member("scylla-0", Some(HASH_B), Some(HASH_A)), member("scylla-1", Some(HASH_A), Some(HASH_A))];
        metrics.observed("ns", "basic", &degraded(false, "AsExpected"), &moved, t0);
        metrics.observed("ns", "basic", &degraded(true, "CleanupFailed"), &moved, t1);
        let text = encode(&registry);
        let dirty = r#"scylla_node_dirty_since_timestamp_seconds{namespace="ns",cluster="basic",node="scylla-0"} 1000.0"#;
        assert!(text.contains(dirty), "{text}");
        assert!(!text.contains(r#"node="scylla-1""#), "{text}");
        assert!(
            text.contains(
                r#"scylla_cluster_degraded{namespace="ns",cluster="basic",reason="CleanupFailed"} 1"#
            )
        );
        assert!(!text.contains("AsExpected"), "the old reason's series goes: {text}");
        let cleaned =
            [member("scylla-0", Some(HASH_B), Some(HASH_B)), member("scylla-1", Some(HASH_A), Some(HASH_A))];
        metrics.observed("ns", "basic", &degraded(false, "AsExpected"), &cleaned, t1);
        assert!(!encode(&registry).contains("scylla-0"), "a cleaned node's series goes");
        metrics.forget("ns", "basic");
        assert!(!encode(&registry).contains(r#"cluster="basic""#), "nor anything of a deleted cluster");
    }
}
