//! `/metrics`, `/healthz` and `/readyz`.
//!
//! `/healthz` answers as long as the process serves requests. `/readyz` answers 200 once the
//! replica has reached the API server (leader or standby alike: a standby is ready to take over),
//! and 503 before, so a Deployment rollout waits for a replica that can actually work.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use crate::runtime::metrics::Metrics;

/// Readiness, set by whoever knows the replica can work.
#[derive(Clone, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    pub fn set_ready(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub(crate) fn is_ready(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

#[derive(Clone)]
struct AppState {
    metrics: Arc<Metrics>,
    readiness: Readiness,
}

pub fn router(metrics: Arc<Metrics>, readiness: Readiness) -> Router {
    Router::new()
        .route("/metrics", get(render_metrics))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .with_state(AppState { metrics, readiness })
}

pub async fn serve(addr: SocketAddr, metrics: Arc<Metrics>, readiness: Readiness) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(%addr, "serving /metrics, /healthz and /readyz");
    axum::serve(listener, router(metrics, readiness)).await
}

async fn render_metrics(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")],
        state.metrics.encode(),
    )
}

async fn ready(State(state): State<AppState>) -> (StatusCode, &'static str) {
    if state.readiness.is_ready() {
        (StatusCode::OK, "ready")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready: the API server has not been reached yet")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    async fn get(router: &Router, path: &str) -> (StatusCode, String) {
        let response = router.clone().oneshot(Request::get(path).body(Body::empty()).unwrap()).await.unwrap();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
        (status, String::from_utf8(bytes.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn endpoints_answer() {
        let metrics = Arc::new(Metrics::new());
        metrics.job_created("cleanup");
        let readiness = Readiness::default();
        let router = router(metrics, readiness.clone());

        assert_eq!(get(&router, "/healthz").await, (StatusCode::OK, "ok".into()));
        assert_eq!(get(&router, "/readyz").await.0, StatusCode::SERVICE_UNAVAILABLE);
        readiness.set_ready();
        assert_eq!(get(&router, "/readyz").await.0, StatusCode::OK);
        let (status, body) = get(&router, "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        assert!(body.contains("groundskeeper_jobs_created_total{operation=\"cleanup\"} 1"), "{body}");
        assert!(body.ends_with("# EOF\n"));
    }
}
