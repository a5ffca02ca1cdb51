//! The EtcdCluster controller's own series: fragmentation and size per member, bytes reclaimed
//! and defragmentation durations per cluster, and for `Partitioned` clusters the clock skew of
//! their revisions and their busiest millisecond. Registered in [`crate::runtime::metrics::Metrics::new`].

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::runtime::metrics::MetricFamily;

use groundskeeper_protocol::{JobResult, Report};

use groundskeeper_api::etcd_cluster::{EtcdMemberStatus, EtcdPartitionStatus};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ClusterLabels {
    pub namespace: String,
    pub cluster: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct MemberLabels {
    pub namespace: String,
    pub cluster: String,
    pub member: String,
}

type FloatGauge = Gauge<f64, AtomicU64>;

pub(crate) struct EtcdMetrics {
    pub fragmented_percent: Family<MemberLabels, FloatGauge>,
    pub db_size_bytes: Family<MemberLabels, Gauge>,
    pub reclaimed_bytes: Family<ClusterLabels, Counter>,
    pub defrag_duration: Family<ClusterLabels, Histogram>,
    pub clock_skew_ms: Family<ClusterLabels, Gauge>,
    pub busiest_millisecond_events: Family<ClusterLabels, Gauge>,
}

fn defrag_duration_histogram() -> Histogram {
    // 50 ms … ~27 min: a small db defragments in well under a second, a multi-GB one in minutes.
    Histogram::new(exponential_buckets(0.05, 2.0, 16))
}

impl EtcdMetrics {
    /// Sets the gauges of a `Partitioned` cluster's revisions; drops them when it has none.
    pub fn partition(&self, namespace: &str, cluster: &str, partition: Option<&EtcdPartitionStatus>) {
        let labels = ClusterLabels { namespace: namespace.to_owned(), cluster: cluster.to_owned() };
        match partition.and_then(|p| p.clock_skew_ms) {
            Some(skew) => {
                self.clock_skew_ms.get_or_create(&labels).set(skew);
            }
            None => {
                self.clock_skew_ms.remove(&labels);
            }
        }
        match partition.and_then(|p| p.busiest_millisecond.as_ref()) {
            Some(busiest) => {
                self.busiest_millisecond_events.get_or_create(&labels).set(i64::from(busiest.event_number));
            }
            None => {
                self.busiest_millisecond_events.remove(&labels);
            }
        }
    }

    /// Sets the per-member gauges to what was observed, and drops the series of members that
    /// are gone.
    pub fn observed(
        &self,
        namespace: &str,
        cluster: &str,
        members: &[EtcdMemberStatus],
        previous: &[EtcdMemberStatus],
    ) {
        let labels = |member: &EtcdMemberStatus| MemberLabels {
            namespace: namespace.to_owned(),
            cluster: cluster.to_owned(),
            member: member.name.clone(),
        };
        for gone in previous.iter().filter(|p| !members.iter().any(|m| m.name == p.name)) {
            self.fragmented_percent.remove(&labels(gone));
            self.db_size_bytes.remove(&labels(gone));
        }
        for member in members {
            if let Some(percent) = member.fragmentation_percent {
                self.fragmented_percent.get_or_create(&labels(member)).set(percent);
            }
            if let Some(size) = member.db_size {
                self.db_size_bytes.get_or_create(&labels(member)).set(size);
            }
        }
    }

    /// Counts what a finished defragmentation did.
    pub fn recorded(&self, namespace: &str, cluster: &str, result: &JobResult) {
        let Report::Defrag(report) = &result.report else {
            return;
        };
        let labels = ClusterLabels { namespace: namespace.to_owned(), cluster: cluster.to_owned() };
        for member in report.members.iter().filter(|m| m.defragmented) {
            let reclaimed = (member.db_size_before - member.db_size_after).max(0);
            self.reclaimed_bytes.get_or_create(&labels).inc_by(reclaimed as u64);
            self.defrag_duration.get_or_create(&labels).observe(member.duration_ms as f64 / 1000.0);
        }
    }

    /// Drops every series of a deleted cluster.
    pub fn forget(&self, namespace: &str, cluster: &str, members: &[EtcdMemberStatus]) {
        self.observed(namespace, cluster, &[], members);
        let labels = ClusterLabels { namespace: namespace.to_owned(), cluster: cluster.to_owned() };
        self.reclaimed_bytes.remove(&labels);
        self.defrag_duration.remove(&labels);
        self.partition(namespace, cluster, None);
    }
}

impl MetricFamily for EtcdMetrics {
    fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            fragmented_percent: Family::default(),
            db_size_bytes: Family::default(),
            reclaimed_bytes: Family::default(),
            defrag_duration: Family::new_with_constructor(defrag_duration_histogram as fn() -> Histogram),
            clock_skew_ms: Family::default(),
            busiest_millisecond_events: Family::default(),
        };
        registry.register(
            "etcd_member_fragmented_percent",
            "Share of a member's db that is free pages, (dbSize - dbSizeInUse) / dbSize, in percent",
            metrics.fragmented_percent.clone(),
        );
        registry.register(
            "etcd_member_db_size_bytes",
            "Size of a member's db file",
            metrics.db_size_bytes.clone(),
        );
        registry.register(
            "etcd_defrag_reclaimed_bytes",
            "Bytes given back to the disk by defragmentation",
            metrics.reclaimed_bytes.clone(),
        );
        registry.register(
            "etcd_defrag_duration_seconds",
            "Time one member's defragmentation took",
            metrics.defrag_duration.clone(),
        );
        registry.register(
            "etcd_partition_clock_skew_milliseconds",
            "Partitioned cluster: time in its newest revision minus the controller's clock when \
             observed (positive: its clock is ahead; negative: behind, or no write since)",
            metrics.clock_skew_ms.clone(),
        );
        registry.register(
            "etcd_partition_busiest_millisecond_event_number",
            "Partitioned cluster: highest event number seen within one millisecond (limit 8191)",
            metrics.busiest_millisecond_events.clone(),
        );
        metrics
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use groundskeeper_protocol::Outcome;
    use groundskeeper_protocol::result::{DefragReport, MemberDefrag};

    fn member(name: &str, percent: f64) -> EtcdMemberStatus {
        EtcdMemberStatus {
            name: name.into(),
            fragmentation_percent: Some(percent),
            db_size: Some(1000),
            ..Default::default()
        }
    }

    fn encode(registry: &Registry) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, registry).unwrap();
        out
    }

    #[test]
    fn gauges_follow_the_members_and_results_count_once_each() {
        let mut registry = Registry::default();
        let metrics = EtcdMetrics::register(&mut registry);
        let before = [member("etcd-0", 50.0), member("etcd-1", 10.0)];
        metrics.observed("ns", "main", &before, &[]);
        metrics.observed("ns", "main", &[member("etcd-0", 5.0)], &before);
        let report = DefragReport {
            members: vec![MemberDefrag {
                name: "etcd-0".into(),
                id: "1".into(),
                db_size_before: 300,
                db_size_after: 100,
                defragmented: true,
                duration_ms: 1500,
                was_leader: false,
                reason: String::new(),
                state: None,
            }],
            ..Default::default()
        };
        let result = JobResult::new(Report::Defrag(report), Outcome::Succeeded, "t".into(), 1);
        metrics.recorded("ns", "main", &result);
        let text = encode(&registry);
        assert!(text.contains(
            r#"etcd_member_fragmented_percent{namespace="ns",cluster="main",member="etcd-0"} 5.0"#
        ));
        assert!(!text.contains(r#"member="etcd-1""#), "{text}");
        assert!(text.contains(r#"etcd_defrag_reclaimed_bytes_total{namespace="ns",cluster="main"} 200"#));
        assert!(text.contains(r#"etcd_defrag_duration_seconds_count{namespace="ns",cluster="main"} 1"#));
    }

    #[test]
    fn partition_gauges_follow_the_status_and_go_with_the_cluster() {
        use groundskeeper_api::etcd_cluster::BusiestMillisecond;
        let mut registry = Registry::default();
        let metrics = EtcdMetrics::register(&mut registry);
        let status = EtcdPartitionStatus {
            clock_skew_ms: Some(-120),
            busiest_millisecond: Some(BusiestMillisecond {
                timestamp_ms: 1,
                event_number: 4095,
                budget_used: "50.0%".into(),
            }),
            ..Default::default()
        };
        metrics.partition("ns", "tenant-1", Some(&status));
        let text = encode(&registry);
        assert!(
            text.contains(
                r#"etcd_partition_clock_skew_milliseconds{namespace="ns",cluster="tenant-1"} -120"#
            ),
            "{text}"
        );
        assert!(text.contains(
            r#"etcd_partition_busiest_millisecond_event_number{namespace="ns",cluster="tenant-1"} 4095"#
        ));
        metrics.forget("ns", "tenant-1", &[]);
        assert!(!encode(&registry).contains("tenant-1"));
    }
}
