//! The task metrics: `groundskeeper_tasks_total{type,state}` and
//! `groundskeeper_task_duration_seconds{type,state}` when a task ends,
//! `groundskeeper_tasks_queued{type}` for the tasks Pending now.

use std::collections::BTreeMap;
use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::runtime::metrics::MetricFamily;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TaskLabels {
    #[prometheus(flatten)]
    pub kind: TypeLabel,
    pub state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TypeLabel {
    /// The task's `spec.type` (a raw identifier: the label is `type`).
    pub r#type: String,
}

pub struct TaskMetrics {
    pub total: Family<TaskLabels, Counter>,
    pub duration: Family<TaskLabels, Histogram>,
    pub queued: Family<TypeLabel, Gauge>,
    /// Pending tasks per (namespace, target), by type: the gauge is their sum, so that each
    /// target's reconciliation replaces only its own share.
    queued_by_target: Mutex<BTreeMap<(String, String), BTreeMap<String, i64>>>,
}

fn duration_histogram() -> Histogram {
    // 1 s … ~9 h: a task lasts from a compaction's seconds to a large cleanup's hours.
    Histogram::new(exponential_buckets(1.0, 2.0, 16))
}

impl TaskMetrics {
    /// A task ended in `state` after `seconds`; call once per task.
    pub fn finished(&self, task_type: &str, state: &str, seconds: f64) {
        let labels = TaskLabels { kind: TypeLabel { r#type: task_type.to_owned() }, state: state.to_owned() };
        self.total.get_or_create(&labels).inc();
        self.duration.get_or_create(&labels).observe(seconds.max(0.0));
    }

    /// The Pending tasks of one target now, by type.
    pub fn queued(&self, namespace: &str, target: &str, by_type: BTreeMap<String, i64>) {
        let mut shares = self.queued_by_target.lock().unwrap_or_else(|p| p.into_inner());
        let previous = shares.insert((namespace.to_owned(), target.to_owned()), by_type);
        // Types this target no longer has must drop to their other targets' sum, maybe 0.
        let mut totals: BTreeMap<String, i64> =
            previous.into_iter().flat_map(BTreeMap::into_keys).map(|task_type| (task_type, 0)).collect();
        for share in shares.values() {
            for (task_type, count) in share {
                *totals.entry(task_type.clone()).or_default() += count;
            }
        }
        for (task_type, count) in totals {
            self.queued.get_or_create(&TypeLabel { r#type: task_type }).set(count);
        }
    }
}

impl MetricFamily for TaskMetrics {
    fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            total: Family::default(),
            duration: Family::new_with_constructor(duration_histogram as fn() -> Histogram),
            queued: Family::default(),
            queued_by_target: Mutex::new(BTreeMap::new()),
        };
        registry.register(
            "tasks",
            "MaintenanceTasks that ended, by type and final state",
            metrics.total.clone(),
        );
        registry.register(
            "task_duration_seconds",
            "From a MaintenanceTask's creation to its end, by type and final state",
            metrics.duration.clone(),
        );
        registry.register("tasks_queued", "MaintenanceTasks Pending now, by type", metrics.queued.clone());
        metrics
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queued_is_the_sum_over_targets_and_a_target_replaces_its_share() {
        let mut registry = Registry::default();
        let metrics = TaskMetrics::register(&mut registry);
        let gauge = |t: &str| metrics.queued.get_or_create(&TypeLabel { r#type: t.into() }).get();
        metrics.queued("ns", "a", BTreeMap::from([("Defragment".into(), 2)]));
        metrics.queued("ns", "b", BTreeMap::from([("Defragment".into(), 1), ("Compact".into(), 1)]));
        assert_eq!((gauge("Defragment"), gauge("Compact")), (3, 1));
        metrics.queued("ns", "b", BTreeMap::new());
        assert_eq!((gauge("Defragment"), gauge("Compact")), (2, 0));
        metrics.finished("Compact", "Completed", 12.0);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(text.contains(r#"tasks_total{type="Compact",state="Completed"} 1"#), "{text}");
        assert!(
            text.contains(r#"task_duration_seconds_count{type="Compact",state="Completed"} 1"#),
            "{text}"
        );
    }
}
