//! What every controller's reconciliations share: the context and the failures of each object
//! in a row, and the one error policy built on them.

use std::fmt::Display;
use std::hash::Hash;
use std::sync::Arc;

use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

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
        Self {
            ctx,
            controller,
            failures: FailureCounts::default(),
        }
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

/// `namespace/name` of an object, for messages.
pub fn describe<K: ResourceExt>(object: &K) -> impl Display {
    format!("{}/{}", object.namespace().unwrap_or_default(), object.name_any())
}
