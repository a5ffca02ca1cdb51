//! Prometheus metrics of the controller, served on `/metrics`.
//!
//! One [`Metrics`] per process, shared through [`crate::runtime::context::Context`]. Each controller
//! labels its series with its own name (`cleanup`, `etcd`, …), so that one registry serves them
//! all. The series every controller shares are fields here; a layer or data store with series of
//! its own defines them as a [`MetricFamily`] in its folder and reaches them with
//! [`Metrics::family`], so that this module knows no data store.
//!
//! What is true of an object now (a task running since, a cluster degraded) is read when scraped
//! from the objects the controllers' caches hold ([`Scraped`]), so an object deleted takes its
//! series with it; what happened (reconciliations, Jobs, tasks ended) is counted as it happens.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use kube::runtime::reflector::Store;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::TypedMetric;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
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
    leader: Gauge,
    watched: Arc<WatchedObjects>,
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
        let leader = Gauge::default();
        registry.register(
            "leader",
            "1 while this replica holds the leader Lease and runs the controllers, 0 while it stands by",
            leader.clone(),
        );
        let watched = Arc::new(WatchedObjects::default());
        registry.register_collector(Box::new(watched.clone()));
        Self {
            registry: Mutex::new(registry),
            families: Mutex::new(HashMap::new()),
            reconciles,
            reconcile_failures,
            reconcile_duration,
            jobs_created,
            jobs_finished,
            leader,
            watched,
        }
    }

    /// This replica leads (its controllers run) or stands by.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// Reports, at each scrape, how many objects `controller`'s cache of one namespace (or of
    /// all) holds: a controller that holds some reconciles each at least every `requeue_idle`.
    pub(crate) fn watch_objects<K>(&self, controller: &'static str, cache: Store<K>)
    where
        K: kube::Resource + Clone + Send + Sync + 'static,
        K::DynamicType: Eq + Hash + Clone + Send + Sync,
    {
        let count = Box::new(move || cache.state().len());
        self.watched.0.lock().expect("watched objects lock").push((controller, count));
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

/// Counts a cache's objects when asked.
type ObjectCount = Box<dyn Fn() -> usize + Send + Sync>;

/// `groundskeeper_watched_objects{controller}`: the caches' sizes, read when scraped.
#[derive(Default)]
struct WatchedObjects(Mutex<Vec<(&'static str, ObjectCount)>>);

impl fmt::Debug for WatchedObjects {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WatchedObjects")
    }
}

impl Collector for WatchedObjects {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let family = Family::<ControllerLabels, Gauge>::default();
        for (controller, count) in self.0.lock().expect("watched objects lock").iter() {
            let labels = ControllerLabels { controller: (*controller).to_owned() };
            family.get_or_create(&labels).inc_by(i64::try_from(count()).unwrap_or(i64::MAX));
        }
        let help = "Objects in a controller's cache now; it reconciles each at least every --requeue-idle";
        encode_family(&mut encoder, "watched_objects", help, &family)
    }
}

/// A kind whose series are computed when scraped, from the objects the caches hold then.
pub(crate) trait ScrapedKind:
    kube::Resource<DynamicType = ()> + Clone + Send + Sync + 'static
{
    fn encode(objects: &[Arc<Self>], encoder: &mut DescriptorEncoder) -> fmt::Result;
}

/// The caches (one per namespace watched, or one for all) of a [`ScrapedKind`]: registered once
/// as a collector ([`Metrics::family`]), given each cache by the controller that fills it.
pub(crate) struct Scraped<K: ScrapedKind>(Arc<Caches<K>>);

struct Caches<K: ScrapedKind>(Mutex<Vec<Store<K>>>);

impl<K: ScrapedKind> Scraped<K> {
    pub fn watch(&self, cache: Store<K>) {
        self.0.0.lock().expect("scraped caches lock").push(cache);
    }
}

impl<K: ScrapedKind> fmt::Debug for Caches<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Caches<{}>", K::kind(&()))
    }
}

impl<K: ScrapedKind> Collector for Caches<K> {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let objects: Vec<Arc<K>> =
            self.0.lock().expect("scraped caches lock").iter().flat_map(Store::state).collect();
        K::encode(&objects, &mut encoder)
    }
}

impl<K: ScrapedKind> MetricFamily for Scraped<K> {
    fn register(registry: &mut Registry) -> Self {
        let caches = Arc::new(Caches(Mutex::new(Vec::new())));
        registry.register_collector(Box::new(caches.clone()));
        Scraped(caches)
    }
}

/// Encodes `family` under `name` (prefixed like every other series), its help ending with a
/// period as the registry writes those of the families registered with it.
pub(crate) fn encode_family<S, M>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    family: &Family<S, M>,
) -> fmt::Result
where
    S: Clone + Eq + Hash + EncodeLabelSet,
    M: EncodeMetric + TypedMetric,
{
    let help = format!("{help}.");
    family.encode(encoder.encode_descriptor(name, &help, None, family.metric_type())?)
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

    #[test]
    fn leadership_and_the_caches_sizes_are_exposed() {
        use k8s_openapi::api::core::v1::ConfigMap;
        use kube::runtime::{reflector, watcher};
        let metrics = Metrics::new();
        assert!(metrics.encode().contains("groundskeeper_leader 0\n"), "a replica starts standing by");
        metrics.set_leader(true);
        let (cache, mut writer) = reflector::store::<ConfigMap>();
        for name in ["a", "b"] {
            let object = ConfigMap {
                metadata: kube::api::ObjectMeta { name: Some(name.into()), ..Default::default() },
                ..Default::default()
            };
            writer.apply_watcher_event(&watcher::Event::Apply(object));
        }
        metrics.watch_objects("etcd", cache.clone());
        metrics.watch_objects("etcd", cache);
        let text = metrics.encode();
        assert!(text.contains("groundskeeper_leader 1\n"), "{text}");
        assert!(text.contains("# TYPE groundskeeper_watched_objects gauge"), "{text}");
        assert!(
            text.contains("groundskeeper_watched_objects{controller=\"etcd\"} 4\n"),
            "summed over caches: {text}"
        );
    }
}
