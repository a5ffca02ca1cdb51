//! What every controller's reconciliations share: the context and the failures of each object
//! in a row, and the one error policy built on them.

use std::fmt::{Debug, Display};
use std::hash::Hash;
use std::sync::Arc;

use futures::StreamExt;
use kube::runtime::controller::{Action, Controller};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;

use super::backoff::{FailureCounts, error_backoff};
use super::context::Context;
use super::error::Error;

pub struct Reconciler<K: Resource> {
    pub ctx: Arc<Context>,
    /// The `controller` label of metrics and the name in logs.
    pub controller: &'static str,
    failures: FailureCounts<K>,
}

impl<K> Reconciler<K>
where
    K: Resource + ResourceExt,
    K::DynamicType: Default + Eq + Hash + Clone,
{
    pub fn new(ctx: Arc<Context>, controller: &'static str) -> Self {
        Self { ctx, controller, failures: FailureCounts::default() }
    }

    /// A reconciliation of `object` went through: its next failure waits the base time again.
    pub fn succeeded(&self, object: &K) {
        self.failures.succeeded(object);
    }

    /// The error policy: count the failure, log it, and retry after the error backoff.
    pub fn failed(&self, object: &K, error: &Error) -> Action {
        self.ctx.metrics.reconcile_failed(self.controller, error);
        let failures = self.failures.failed(object);
        let delay = error_backoff(self.ctx.config.requeue_error, failures);
        tracing::warn!(
            controller = self.controller,
            object = %describe(object),
            error = %error,
            failures,
            retry_in_s = delay.as_secs(),
            "reconciliation failed"
        );
        Action::requeue(delay)
    }
}

/// Runs `controller` until the process is told to stop: each object through `reconcile`, each
/// failure through the one error policy ([`Reconciler::failed`]).
pub async fn run<K, F, Fut>(controller: Controller<K>, ctx: Arc<Context>, name: &'static str, reconcile: F)
where
    K: Clone + Resource + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Debug + Eq + Hash + Clone + Default + Unpin + Send + Sync,
    F: FnMut(Arc<K>, Arc<Reconciler<K>>) -> Fut,
    Fut: Future<Output = Result<Action, Error>> + Send + 'static,
{
    // What it holds is what it must keep reconciling: the alert on a stalled controller
    // compares the two.
    ctx.metrics.watch_objects(name, controller.store());
    controller
        .shutdown_on_signal()
        .run(
            reconcile,
            |object, error, reconciler| reconciler.failed(&object, error),
            Arc::new(Reconciler::new(ctx, name)),
        )
        .for_each(|result| async move {
            if let Err(err) = result {
                tracing::debug!(controller = name, error = %err, "controller event");
            }
        })
        .await;
}

/// `namespace/name` of an object, for messages.
pub fn describe<K: ResourceExt>(object: &K) -> impl Display {
    format!("{}/{}", object.namespace().unwrap_or_default(), object.name_any())
}
