//! The error backoff every controller uses: per object, the wait after a failed reconciliation
//! doubles with each failure in a row, from the configured `requeue_error` up to
//! [`MAX_ERROR_BACKOFF`], and a successful reconciliation starts it over.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

use kube::Resource;
use kube::runtime::reflector::ObjectRef;

/// Longest wait after repeated failures of one object's reconciliation.
pub(crate) const MAX_ERROR_BACKOFF: Duration = Duration::from_secs(600);

/// The wait after `failures` failures in a row: `base` doubled per failure after the first,
/// at most [`MAX_ERROR_BACKOFF`].
pub(crate) fn error_backoff(base: Duration, failures: u32) -> Duration {
    let factor = 1u32 << failures.saturating_sub(1).min(10);
    base.saturating_mul(factor).min(MAX_ERROR_BACKOFF)
}

/// How many reconciliations of each object failed in a row.
pub(crate) struct FailureCounts<K: Resource> {
    counts: Mutex<HashMap<ObjectRef<K>, u32>>,
}

impl<K> Default for FailureCounts<K>
where
    K: Resource,
{
    fn default() -> Self {
        Self { counts: Mutex::new(HashMap::new()) }
    }
}

impl<K> FailureCounts<K>
where
    K: Resource,
    K::DynamicType: Default + Eq + Hash + Clone,
{
    /// Counts one more failure of `object`; the failures in a row so far.
    pub fn failed(&self, object: &K) -> u32 {
        let mut counts = self.lock();
        let count = counts.entry(ObjectRef::from_obj(object)).or_insert(0);
        *count = count.saturating_add(1);
        *count
    }

    /// `object` reconciled: its next failure waits the base time again.
    pub fn succeeded(&self, object: &K) {
        self.lock().remove(&ObjectRef::from_obj(object));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectRef<K>, u32>> {
        // A panic elsewhere while holding the lock leaves plain counters: still usable.
        self.counts.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    #[test]
    fn the_wait_doubles_per_failure_up_to_the_bound() {
        let base = Duration::from_secs(30);
        let cases = [(0, 30), (1, 30), (2, 60), (3, 120), (5, 480), (6, 600), (40, 600)];
        for (failures, seconds) in cases {
            assert_eq!(error_backoff(base, failures), Duration::from_secs(seconds), "{failures}");
        }
    }

    #[test]
    fn failures_count_per_object_and_success_starts_over() {
        let object = |name: &str| ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        let counts = FailureCounts::default();
        assert_eq!(counts.failed(&object("a")), 1);
        assert_eq!(counts.failed(&object("a")), 2);
        assert_eq!(counts.failed(&object("b")), 1);
        counts.succeeded(&object("a"));
        assert_eq!(counts.failed(&object("a")), 1);
    }
}
