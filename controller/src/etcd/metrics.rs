//! The EtcdCluster controller's own series: fragmentation and size per member, bytes reclaimed
//! and defragmentation durations per cluster, and for `Partitioned` clusters the clock skew of
//! their revisions and their busiest millisecond. Registered in [`crate::runtime::metrics::Metrics::new`].
//!
//! Read from each EtcdCluster's spec and status when scraped: whether its maintenance is
//! Degraded, the policy's thresholds and the quota it states (what the alerts compare the
//! members' series with), its newest snapshot and whether its last proof passed.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use kube::ResourceExt;
use prometheus_client::encoding::DescriptorEncoder;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::runtime::metrics::{MetricFamily, ScrapedKind, encode_family};

use groundskeeper_protocol::{JobResult, Report};

use groundskeeper_api::etcd_cluster::{EtcdCluster, EtcdMemberStatus, EtcdPartitionStatus};

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

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DegradedLabels {
    namespace: String,
    cluster: String,
    reason: String,
}

/// The series of one scrape, one family each.
#[derive(Default)]
struct ClusterSeries {
    degraded: Family<DegradedLabels, Gauge>,
    quota: Family<ClusterLabels, Gauge>,
    max_fragmented: Family<ClusterLabels, FloatGauge>,
    min_defrag: Family<ClusterLabels, Gauge>,
    last_snapshot: Family<ClusterLabels, FloatGauge>,
    proof_passed: Family<ClusterLabels, Gauge>,
    proof_time: Family<ClusterLabels, FloatGauge>,
    backup_interval: Family<ClusterLabels, FloatGauge>,
    recovery_point: Family<ClusterLabels, FloatGauge>,
    last_gap: Family<ClusterLabels, FloatGauge>,
    compaction_held: Family<ClusterLabels, Gauge>,
}

fn unix_seconds(time: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> f64 {
    time.0.as_millisecond() as f64 / 1000.0
}

impl ClusterSeries {
    fn add(&self, cluster: &EtcdCluster) {
        let labels =
            ClusterLabels { namespace: cluster.namespace().unwrap_or_default(), cluster: cluster.name_any() };
        let policy = &cluster.spec.policy;
        if let Some(quota) = policy.quota_backend_bytes {
            self.quota.get_or_create(&labels).set(quota);
        }
        // A cluster whose maintenance is off is not expected to come under them.
        if policy.enabled {
            self.max_fragmented.get_or_create(&labels).set(policy.max_fragmented_percent);
            self.min_defrag.get_or_create(&labels).set(policy.min_defrag_bytes);
        }
        let Some(status) = &cluster.status else { return };
        if let Some(degraded) = status.conditions.iter().find(|c| c.type_ == super::model::DEGRADED) {
            let series = DegradedLabels {
                namespace: labels.namespace.clone(),
                cluster: labels.cluster.clone(),
                reason: degraded.reason.clone(),
            };
            self.degraded.get_or_create(&series).set(i64::from(degraded.status == "True"));
        }
        // Full snapshots only: a delta restores only on top of one.
        let written = status.snapshots.iter().filter(|s| !s.is_delta()).filter_map(|s| s.written_at.as_ref());
        let newest =
            status.last_snapshot.iter().map(|s| &s.time).chain(written).map(unix_seconds).reduce(f64::max);
        if let Some(newest) = newest {
            self.last_snapshot.get_or_create(&labels).set(newest);
        }
        if let Some(proof) = &status.last_snapshot_proof {
            self.proof_passed.get_or_create(&labels).set(i64::from(proof.proven));
            if let Some(at) = &proof.at {
                self.proof_time.get_or_create(&labels).set(unix_seconds(at));
            }
        }
        self.add_backup(cluster, &labels);
    }

    /// The backup policy's series, for a cluster that has one.
    fn add_backup(&self, cluster: &EtcdCluster, labels: &ClusterLabels) {
        let Some(policy) = &cluster.spec.backup else { return };
        let every = policy.delta_every.as_deref().unwrap_or(&policy.full_every);
        if let Ok(every) = groundskeeper_stores::duration::parse(every) {
            self.backup_interval.get_or_create(labels).set(every.as_secs_f64());
        }
        let Some(backup) = cluster.status.as_ref().and_then(|s| s.backup.as_ref()) else { return };
        if let Some(time) = &backup.recovery_point_time {
            self.recovery_point.get_or_create(labels).set(unix_seconds(time));
        }
        // 0: never; a gap's time stays after a full snapshot closed it.
        let last_gap = backup.last_gap.as_ref().and_then(|g| g.found_at.as_ref()).map_or(0.0, unix_seconds);
        self.last_gap.get_or_create(labels).set(last_gap);
        self.compaction_held.get_or_create(labels).set(i64::from(backup.compaction_held_from.is_some()));
    }

    fn encode(&self, encoder: &mut DescriptorEncoder) -> fmt::Result {
        let help = "1 while an EtcdCluster's condition DefragControllerDegraded is True (0 while \
                    False), by its reason";
        encode_family(encoder, "etcd_cluster_degraded", help, &self.degraded)?;
        let help = "The members' storage quota an EtcdCluster states (spec.policy.quotaBackendBytes)";
        encode_family(encoder, "etcd_policy_quota_backend_bytes", help, &self.quota)?;
        let help = "spec.policy.maxFragmentedPercent of an EtcdCluster whose maintenance is enabled";
        encode_family(encoder, "etcd_policy_max_fragmented_percent", help, &self.max_fragmented)?;
        let help = "spec.policy.minDefragBytes of an EtcdCluster whose maintenance is enabled";
        encode_family(encoder, "etcd_policy_min_defrag_bytes", help, &self.min_defrag)?;
        let help = "When an EtcdCluster's newest snapshot was written (its status' catalog), Unix seconds";
        encode_family(encoder, "etcd_last_snapshot_timestamp_seconds", help, &self.last_snapshot)?;
        let help = "1 when the last proof that an EtcdCluster's snapshot restores passed, 0 when it failed";
        encode_family(encoder, "etcd_snapshot_proof_passed", help, &self.proof_passed)?;
        let help = "When that last proof ended, Unix seconds";
        encode_family(encoder, "etcd_snapshot_proof_timestamp_seconds", help, &self.proof_time)?;
        let help = "How often an EtcdCluster's backup policy backs up (spec.backup.deltaEvery, else fullEvery), seconds";
        encode_family(encoder, "etcd_backup_interval_seconds", help, &self.backup_interval)?;
        let help = "The last time an EtcdCluster's whole state was seen in its backups (status.backup.recoveryPointTime), Unix seconds";
        encode_family(encoder, "etcd_backup_recovery_point_timestamp_seconds", help, &self.recovery_point)?;
        let help = "When a delta last found history compacted away before it read it (a gap), Unix seconds; 0: never";
        encode_family(encoder, "etcd_backup_last_gap_timestamp_seconds", help, &self.last_gap)?;
        let help = "1 while groundskeeper's compaction of an EtcdCluster is held back at the newest revision backed up";
        encode_family(encoder, "etcd_backup_compaction_held_back", help, &self.compaction_held)
    }
}

impl ScrapedKind for EtcdCluster {
    fn encode(clusters: &[Arc<Self>], encoder: &mut DescriptorEncoder) -> fmt::Result {
        let series = ClusterSeries::default();
        for cluster in clusters {
            series.add(cluster);
        }
        series.encode(encoder)
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

    #[test]
    fn a_clusters_state_is_read_from_its_spec_and_status_when_scraped() {
        use crate::runtime::metrics::Scraped;
        use kube::runtime::{reflector, watcher};
        let mut registry = Registry::with_prefix("groundskeeper");
        let scraped = Scraped::<EtcdCluster>::register(&mut registry);
        let (cache, mut writer) = reflector::store();
        scraped.watch(cache);
        let cluster: EtcdCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "groundskeeper.dev/v1alpha1",
            "kind": "EtcdCluster",
            "metadata": {"name": "main", "namespace": "etcd"},
            "spec": {"endpoints": ["http://etcd-0:2379"], "policy": {"quotaBackendBytes": 2147483648_i64}},
            "status": {
                "conditions": [{"type": "DefragControllerDegraded", "status": "True", "reason": "SnapshotNotRestorable",
                                "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                "snapshots": [{"store": "pvc/backups", "object": "a.db", "writtenAt": "2026-01-01T00:00:00Z"},
                              {"store": "pvc/backups", "object": "b.db", "writtenAt": "2026-01-02T00:00:00Z"}],
                "lastSnapshotProof": {"store": "pvc/backups", "object": "b.db", "proven": false, "message": "m",
                                      "at": "2026-01-02T00:10:00Z"},
            },
        }))
        .unwrap();
        writer.apply_watcher_event(&watcher::Event::Apply(cluster.clone()));
        let encode = || {
            let mut text = String::new();
            prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
            text
        };
        let text = encode();
        for line in [
            r#"groundskeeper_etcd_cluster_degraded{namespace="etcd",cluster="main",reason="SnapshotNotRestorable"} 1"#,
            r#"groundskeeper_etcd_policy_quota_backend_bytes{namespace="etcd",cluster="main"} 2147483648"#,
            r#"groundskeeper_etcd_policy_max_fragmented_percent{namespace="etcd",cluster="main"} 45.0"#,
            r#"groundskeeper_etcd_policy_min_defrag_bytes{namespace="etcd",cluster="main"} 100000000"#,
            r#"groundskeeper_etcd_last_snapshot_timestamp_seconds{namespace="etcd",cluster="main"} 1767312000.0"#,
            r#"groundskeeper_etcd_snapshot_proof_passed{namespace="etcd",cluster="main"} 0"#,
            r#"groundskeeper_etcd_snapshot_proof_timestamp_seconds{namespace="etcd",cluster="main"} 1767312600.0"#,
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
        writer.apply_watcher_event(&watcher::Event::Delete(cluster));
        assert!(!encode().contains(r#"cluster="main""#), "a deleted cluster takes its series with it");
    }
}
