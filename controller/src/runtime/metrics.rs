//! Prometheus metrics of the controller, served on `/metrics`.
//!
//! One [`Metrics`] per process, shared through [`crate::runtime::context::Context`]. Each controller
//! labels its series with its own name (`cleanup`, `etcd`, …), so that one registry serves them
//! all. The series every controller shares are fields here; a layer or data store with series of
//! its own defines them as a [`MetricFamily`] in its folder and reaches them with
//! [`Metrics::family`], so that this module knows no data store.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::runtime::error::Error;

/// Labels of per-controller series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    pub controller: String,
}

/// Labels of reconcile failures: the controller and [`Error::metric_label`].
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    pub controller: String,
    pub error: String,
}

/// Labels of Jobs created: the operation (`cleanup`, `defrag`, `compact`, …).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OperationLabels {
    pub operation: String,
}

/// Labels of Jobs finished: the operation and the outcome (`succeeded`, `failed`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct JobOutcomeLabels {
    pub operation: String,
    pub outcome: String,
}

/// Series of one layer or data store, registered into the process's registry the first time they
/// are asked for ([`Metrics::family`]).
pub(crate) trait MetricFamily: Send + Sync + 'static {
    /// Creates the series and registers them.
    fn register(registry: &mut Registry) -> Self
    where
        Self: Sized;
}

/// All of the controller's metrics, and the registry they are encoded from.
pub struct Metrics {
    registry: Mutex<Registry>,
    families: Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
    pub reconciles: Family<ControllerLabels, Counter>,
    pub reconcile_failures: Family<ErrorLabels, Counter>,
    pub reconcile_duration: Family<ControllerLabels, Histogram>,
    pub jobs_created: Family<OperationLabels, Counter>,
    pub jobs_finished: Family<JobOutcomeLabels, Counter>,
}

fn reconcile_duration_histogram() -> Histogram {
    // 1 ms … ~16 s: reconciles are a few API calls, never the maintenance itself.
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// All metrics, registered under the `groundskeeper` prefix.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("groundskeeper");
        let reconciles = Family::<ControllerLabels, Counter>::default();
        let reconcile_failures = Family::<ErrorLabels, Counter>::default();
        let reconcile_duration = Family::<ControllerLabels, Histogram>::new_with_constructor(
            reconcile_duration_histogram as fn() -> Histogram,
        );
        let jobs_created = Family::<OperationLabels, Counter>::default();
        let jobs_finished = Family::<JobOutcomeLabels, Counter>::default();
        registry.register("reconciles", "Reconciliations started", reconciles.clone());
        registry.register(
            "reconcile_failures",
            "Reconciliations that failed, by error kind",
            reconcile_failures.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Time one reconciliation took",
            reconcile_duration.clone(),
        );
        registry.register("jobs_created", "Maintenance Jobs created", jobs_created.clone());
        registry.register(
            "jobs_finished",
            "Maintenance Jobs seen finished, by outcome",
            jobs_finished.clone(),
        );
        Self {
            registry: Mutex::new(registry),
            families: Mutex::new(HashMap::new()),
            reconciles,
            reconcile_failures,
            reconcile_duration,
            jobs_created,
            jobs_finished,
        }
    }

    /// The series of family `F`, registered on first use.
    pub(crate) fn family<F: MetricFamily>(&self) -> Arc<F> {
        let mut families = self.families.lock().expect("metric families lock");
        let family = families.entry(TypeId::of::<F>()).or_insert_with(|| {
            let mut registry = self.registry.lock().expect("metrics registry lock");
            Arc::new(F::register(&mut registry))
        });
        family.clone().downcast::<F>().expect("a family is stored under its own type")
    }

    /// Counts a reconciliation and measures it until the returned guard is dropped.
    pub(crate) fn reconcile_started(&self, controller: &str) -> ReconcileTimer {
        let labels = ControllerLabels { controller: controller.to_owned() };
        self.reconciles.get_or_create(&labels).inc();
        ReconcileTimer {
            histogram: self.reconcile_duration.get_or_create_owned(&labels),
            started: Instant::now(),
        }
    }

    /// Counts a failed reconciliation under the error's [`Error::metric_label`].
    pub(crate) fn reconcile_failed(&self, controller: &str, error: &Error) {
        self.reconcile_failures
            .get_or_create(&ErrorLabels { controller: controller.to_owned(), error: error.metric_label() })
            .inc();
    }

    /// Counts a Job created for `operation`.
    pub(crate) fn job_created(&self, operation: &str) {
        self.jobs_created.get_or_create(&OperationLabels { operation: operation.to_owned() }).inc();
    }

    /// Counts a Job seen finished; call once per Job (when its result is acted upon).
    pub fn job_finished(&self, operation: &str, outcome: &str) {
        self.jobs_finished
            .get_or_create(&JobOutcomeLabels { operation: operation.to_owned(), outcome: outcome.to_owned() })
            .inc();
    }

    /// The OpenMetrics text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let registry = self.registry.lock().expect("metrics registry lock");
        prometheus_client::encoding::text::encode(&mut out, &registry)
            .expect("writing to a String cannot fail");
        out
    }
}

/// Observes the duration of one reconciliation when dropped.
pub(crate) struct ReconcileTimer {
    histogram: Histogram,
    started: Instant,
}

impl Drop for ReconcileTimer {
    fn drop(&mut self) {
        self.histogram.observe(self.started.elapsed().as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconciles_failures_and_jobs_are_exposed_with_their_labels() {
        let metrics = Metrics::new();
        {
            let _timer = metrics.reconcile_started("cleanup");
        }
        metrics.reconcile_failed("cleanup", &Error::Config("x".into()));
        metrics.job_created("cleanup");
        metrics.job_finished("cleanup", "succeeded");
        let text = metrics.encode();
        for line in [
            "groundskeeper_reconciles_total{controller=\"cleanup\"} 1",
            "groundskeeper_reconcile_failures_total{controller=\"cleanup\",error=\"config\"} 1",
            "groundskeeper_reconcile_duration_seconds_count{controller=\"cleanup\"} 1",
            "groundskeeper_jobs_created_total{operation=\"cleanup\"} 1",
            "groundskeeper_jobs_finished_total{operation=\"cleanup\",outcome=\"succeeded\"} 1",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
        assert!(text.ends_with("# EOF\n"));
    }
}
