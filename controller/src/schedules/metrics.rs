//! The schedule metrics: `groundskeeper_schedule_runs_total{result,reason}` for every run that
//! came (made a task, or skipped and why) and `groundskeeper_schedule_start_delay_seconds`, from
//! a run's time to its task being made; and, read from each schedule's status when scraped, its
//! last run, last success and last skipped run (`groundskeeper_schedule_last_*_timestamp_seconds`).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use groundskeeper_api::maintenance_schedule::MaintenanceSchedule;

use crate::runtime::metrics::{MetricFamily, ScrapedKind, encode_family};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RunLabels {
    /// `created` or `skipped`.
    pub result: &'static str,
    /// `Created`, or why it was skipped: `Suspended`, `ConcurrencyForbid`, `MissedDeadline`.
    pub reason: &'static str,
}

pub struct ScheduleMetrics {
    pub runs: Family<RunLabels, Counter>,
    pub start_delay: Histogram,
}

impl ScheduleMetrics {
    pub fn created(&self, delay_seconds: f64) {
        self.runs.get_or_create(&RunLabels { result: "created", reason: "Created" }).inc();
        self.start_delay.observe(delay_seconds.max(0.0));
    }

    pub fn skipped(&self, reason: &'static str) {
        self.runs.get_or_create(&RunLabels { result: "skipped", reason }).inc();
    }
}

impl MetricFamily for ScheduleMetrics {
    fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            runs: Family::default(),
            // 0.1 s … ~1.8 h: on time is under a second, a run made late after a restart hours.
            start_delay: Histogram::new(exponential_buckets(0.1, 3.0, 10)),
        };
        registry.register(
            "schedule_runs",
            "MaintenanceSchedule runs that came: tasks made, and runs skipped by reason",
            metrics.runs.clone(),
        );
        registry.register(
            "schedule_start_delay_seconds",
            "From a scheduled run's time to its MaintenanceTask being made",
            metrics.start_delay.clone(),
        );
        metrics
    }
}

/// Labels of a series about one schedule: what it makes tasks of, and on what.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OneSchedule {
    namespace: String,
    schedule: String,
    r#type: String,
    target_kind: String,
    target: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SkippedRun {
    #[prometheus(flatten)]
    schedule: OneSchedule,
    reason: String,
}

type FloatGauge = Gauge<f64, AtomicU64>;

fn seconds(time: &Time) -> f64 {
    time.0.as_millisecond() as f64 / 1000.0
}

impl ScrapedKind for MaintenanceSchedule {
    fn encode(schedules: &[Arc<Self>], encoder: &mut DescriptorEncoder) -> fmt::Result {
        let last_run = Family::<OneSchedule, FloatGauge>::default();
        let last_success = Family::<OneSchedule, FloatGauge>::default();
        let last_skipped = Family::<SkippedRun, FloatGauge>::default();
        for schedule in schedules {
            let template = &schedule.spec.task_template.spec;
            let labels = OneSchedule {
                namespace: schedule.namespace().unwrap_or_default(),
                schedule: schedule.name_any(),
                r#type: template.task_type.to_string(),
                target_kind: template.target.kind.to_string(),
                target: template.target.name.clone(),
            };
            let Some(status) = &schedule.status else { continue };
            if let Some(time) = &status.last_schedule_time {
                last_run.get_or_create(&labels).set(seconds(time));
            }
            if let Some(time) = &status.last_successful_time {
                last_success.get_or_create(&labels).set(seconds(time));
            }
            if let Some(skipped) = &status.last_skipped {
                let series = SkippedRun { schedule: labels, reason: skipped.reason.clone() };
                last_skipped.get_or_create(&series).set(seconds(&skipped.scheduled_time));
            }
        }
        let help = "The newest run of a MaintenanceSchedule that came due, made a task or skipped \
                    (status.lastScheduleTime), Unix seconds";
        encode_family(encoder, "schedule_last_run_timestamp_seconds", help, &last_run)?;
        let help = "When the newest Completed task of a MaintenanceSchedule finished \
                    (status.lastSuccessfulTime), Unix seconds";
        encode_family(encoder, "schedule_last_success_timestamp_seconds", help, &last_success)?;
        let help = "The last run of a MaintenanceSchedule that made no task, by why \
                    (status.lastSkipped), Unix seconds";
        encode_family(encoder, "schedule_last_skipped_timestamp_seconds", help, &last_skipped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::metrics::Scraped;
    use kube::runtime::{reflector, watcher};

    #[test]
    fn a_schedules_runs_are_read_from_its_status_when_scraped() {
        let mut registry = Registry::with_prefix("groundskeeper");
        let scraped = Scraped::<MaintenanceSchedule>::register(&mut registry);
        let (cache, mut writer) = reflector::store();
        scraped.watch(cache);
        let schedule: MaintenanceSchedule = serde_json::from_value(serde_json::json!({
            "apiVersion": "groundskeeper.dev/v1alpha1",
            "kind": "MaintenanceSchedule",
            "metadata": {"name": "nightly", "namespace": "etcd"},
            "spec": {"schedule": "30 2 * * *",
                     "taskTemplate": {"spec": {"target": {"kind": "EtcdCluster", "name": "main"}, "type": "Snapshot"}}},
            "status": {"lastScheduleTime": "2026-01-02T02:30:00Z", "lastSuccessfulTime": "2026-01-01T02:31:00Z",
                       "lastSkipped": {"scheduledTime": "2026-01-02T02:30:00Z", "reason": "ConcurrencyForbid", "message": "m"}},
        }))
        .unwrap();
        writer.apply_watcher_event(&watcher::Event::Apply(schedule));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        let one =
            r#"namespace="etcd",schedule="nightly",type="Snapshot",target_kind="EtcdCluster",target="main""#;
        for line in [
            format!("groundskeeper_schedule_last_run_timestamp_seconds{{{one}}} 1767321000.0"),
            format!("groundskeeper_schedule_last_success_timestamp_seconds{{{one}}} 1767234660.0"),
            format!(
                "groundskeeper_schedule_last_skipped_timestamp_seconds{{{one},reason=\"ConcurrencyForbid\"}} 1767321000.0"
            ),
        ] {
            assert!(text.contains(&line), "{line} missing from\n{text}");
        }
    }
}
