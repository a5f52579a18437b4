//! The service itself: liveness, Prometheus metrics, the cluster at a glance (for the
//! dashboard) and the accelerator clients should use.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ApiError;
use super::state::AppState;
use crate::api::{AcceleratorInfo, Health};

/// `GET /healthz`, `GET /metrics`, `GET /v1/cluster/stats`, `GET /v1/accelerator`.
pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(healthz))
        .routes(routes!(metrics))
        .routes(routes!(cluster_stats))
        .routes(routes!(accelerator))
}

/// Liveness and counts.
#[utoipa::path(get, path = "/healthz", tag = "service",
    responses((status = 200, description = "serving", body = Health)))]
async fn healthz(State(s): State<AppState>) -> Json<Health> {
    let stats = s.with(|c, now| c.stats(now));
    Json(Health {
        status: "ok".into(),
        memnodes: stats.memnodes.len(),
        healthy_memnodes: stats.memnodes.iter().filter(|m| m.2).count(),
        tables: stats.tables.values().sum(),
        leases: stats.leases_active + stats.leases_expired,
        auth: s.token.is_some(),
        uptime_seconds: s.started.elapsed().as_secs(),
    })
}

/// The switch accelerator clients should create their queue pairs through
/// (`POST /v1/qps` on its admin URL), or `enabled: false` when the cluster has none.
#[utoipa::path(get, path = "/v1/accelerator", tag = "service",
    responses((status = 200, description = "the accelerator, if any", body = AcceleratorInfo)))]
async fn accelerator(State(s): State<AppState>) -> Json<AcceleratorInfo> {
    Json(match s.cluster.accelerator() {
        Some(url) => AcceleratorInfo {
            enabled: true,
            admin_url: Some(url.to_owned()),
            data_addr: s.accelerator_data.clone(),
        },
        None => AcceleratorInfo::default(),
    })
}

/// The cluster at a glance (for the dashboard): every memnode's health, capacity and
/// live rates from its scraped `/metrics`, the accelerator's counters, and the
/// service's own request rate and latency.
#[utoipa::path(get, path = "/v1/cluster/stats", tag = "service",
    responses((status = 200, body = crate::cluster::ClusterStats)))]
async fn cluster_stats(
    State(s): State<AppState>,
) -> Result<Json<crate::cluster::ClusterStats>, ApiError> {
    let s = s.clone();
    let stats = tokio::task::spawn_blocking(move || s.cluster_stats())
        .await
        .map_err(ApiError::internal)?;
    Ok(Json(stats))
}

/// Prometheus metrics.
#[utoipa::path(get, path = "/metrics", tag = "service",
    responses((status = 200, description = "Prometheus text exposition (0.0.4), or OpenMetrics 1.0.0 when the Accept header prefers application/openmetrics-text", body = String, content_type = "text/plain")))]
async fn metrics(State(s): State<AppState>, headers: HeaderMap) -> Response {
    let stats = s.with(|c, now| c.stats(now));
    let families = s.metrics.families(&stats, s.started.elapsed().as_secs());
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    match telemetry::exposition::render("metadata", env!("CARGO_PKG_VERSION"), families, accept) {
        Ok((content_type, body)) => ([(header::CONTENT_TYPE, content_type)], body).into_response(),
        Err(e) => ApiError::internal(e).into_response(),
    }
}
