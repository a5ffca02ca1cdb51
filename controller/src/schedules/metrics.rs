//! The schedule metrics: `groundskeeper_schedule_runs_total{result,reason}` for every run that
//! came (made a task, or skipped and why) and `groundskeeper_schedule_start_delay_seconds`, from
//! a run's time to its task being made.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::runtime::metrics::MetricFamily;

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
