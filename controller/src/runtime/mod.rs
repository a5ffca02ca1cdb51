//! What every controller runs on: the shared context, the error type, leader election, metrics
//! and the `/metrics`, `/healthz`, `/readyz` endpoints. Knows no data store.

pub mod backoff;
pub mod context;
pub mod error;
pub mod http;
pub mod leader;
pub mod metrics;
pub mod reconciler;
pub mod scope;
