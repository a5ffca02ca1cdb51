//! The task metrics: `groundskeeper_tasks_total{type,state}` and
//! `groundskeeper_task_duration_seconds{type,state}` when a task ends,
//! `groundskeeper_tasks_queued{type}` for the tasks Pending now; and, read from the task
//! controller's cache when scraped, per task that exists: `groundskeeper_task_state` (1, by
//! state), and while it runs `groundskeeper_task_started_timestamp_seconds` and
//! `groundskeeper_task_expected_duration_seconds` (its plan's).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use kube::ResourceExt;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use groundskeeper_api::maintenance_task::{MaintenanceTask, TaskState};

use crate::runtime::metrics::{MetricFamily, ScrapedKind, encode_family};

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

/// Labels of a series about one task.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OneTask {
    namespace: String,
    task: String,
    r#type: String,
    target_kind: String,
    target: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OneTaskState {
    #[prometheus(flatten)]
    task: OneTask,
    state: String,
}

type FloatGauge = Gauge<f64, AtomicU64>;

impl ScrapedKind for MaintenanceTask {
    fn encode(tasks: &[Arc<Self>], encoder: &mut DescriptorEncoder) -> fmt::Result {
        let states = Family::<OneTaskState, Gauge>::default();
        let started = Family::<OneTask, FloatGauge>::default();
        let expected = Family::<OneTask, FloatGauge>::default();
        for task in tasks {
            let labels = OneTask {
                namespace: task.namespace().unwrap_or_default(),
                task: task.name_any(),
                r#type: task.spec.task_type.to_string(),
                target_kind: task.spec.target.kind.to_string(),
                target: task.spec.target.name.clone(),
            };
            let status = task.status.clone().unwrap_or_default();
            let state = status.state.unwrap_or_default();
            states.get_or_create(&OneTaskState { task: labels.clone(), state: state.to_string() }).set(1);
            if state != TaskState::InProgress {
                continue;
            }
            if let Some(at) = &status.started_at {
                started.get_or_create(&labels).set(at.0.as_millisecond() as f64 / 1000.0);
            }
            if let Some(seconds) = status.plan.and_then(|plan| plan.expected_seconds) {
                expected.get_or_create(&labels).set(seconds as f64);
            }
        }
        let help = "1 for each MaintenanceTask that exists, labelled with its state";
        encode_family(encoder, "task_state", help, &states)?;
        let help = "When a running MaintenanceTask's work started (status.startedAt), Unix seconds";
        encode_family(encoder, "task_started_timestamp_seconds", help, &started)?;
        let help = "How long a running MaintenanceTask's plan expects its work to take";
        encode_family(encoder, "task_expected_duration_seconds", help, &expected)
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

    fn task(name: &str, status: serde_json::Value) -> MaintenanceTask {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "groundskeeper.dev/v1alpha1",
            "kind": "MaintenanceTask",
            "metadata": {"name": name, "namespace": "etcd"},
            "spec": {"target": {"kind": "EtcdCluster", "name": "main"}, "type": "Defragment"},
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn the_tasks_that_exist_are_read_when_scraped_and_go_with_them() {
        use crate::runtime::metrics::Scraped;
        use kube::runtime::{reflector, watcher};
        let mut registry = Registry::with_prefix("groundskeeper");
        let scraped = Scraped::<MaintenanceTask>::register(&mut registry);
        let (cache, mut writer) = reflector::store();
        scraped.watch(cache);
        let running = task(
            "defrag-1",
            serde_json::json!({"state": "InProgress", "startedAt": "2026-01-01T00:00:00Z",
                               "plan": {"id": "0123456789ab", "summary": "s", "expectedSeconds": 600}}),
        );
        let failed = task("defrag-0", serde_json::json!({"state": "Failed"}));
        writer.apply_watcher_event(&watcher::Event::Apply(running));
        writer.apply_watcher_event(&watcher::Event::Apply(failed.clone()));
        let encode = || {
            let mut text = String::new();
            prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
            text
        };
        let text = encode();
        let one =
            r#"namespace="etcd",task="defrag-1",type="Defragment",target_kind="EtcdCluster",target="main""#;
        for line in [
            format!("groundskeeper_task_state{{{one},state=\"InProgress\"}} 1"),
            format!("groundskeeper_task_started_timestamp_seconds{{{one}}} 1767225600.0"),
            format!("groundskeeper_task_expected_duration_seconds{{{one}}} 600.0"),
            r#"groundskeeper_task_state{namespace="etcd",task="defrag-0",type="Defragment",target_kind="EtcdCluster",target="main",state="Failed"} 1"#.to_owned(),
        ] {
            assert!(text.contains(&line), "{line} missing from\n{text}");
        }
        assert_eq!(text.matches("task_started_timestamp_seconds{").count(), 1, "only running tasks: {text}");
        writer.apply_watcher_event(&watcher::Event::Delete(failed));
        assert!(!encode().contains("defrag-0"), "a deleted task takes its series with it");
    }
}
