//! What every controller runs on: the shared context, the error type, leader election, metrics,
//! the `/metrics`, `/healthz`, `/readyz` endpoints, the namespaces watched and the manifests of
//! the namespaced mode. Knows no data store.

pub mod backoff;
pub mod clock;
pub mod context;
pub mod deploy;
pub mod error;
pub mod http;
pub mod leader;
pub mod metrics;
pub mod reconciler;
pub mod scope;
