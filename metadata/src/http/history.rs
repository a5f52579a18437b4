//! `GET /v1/cluster/history?range=`: the samples of the cluster stats the service kept
//! ([`crate::history`]), for the dashboard's charts.

use std::time::Duration;

use axum::Json;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ApiError;
use super::state::AppState;
use crate::history::{ClusterHistory, parse_duration};

/// `GET /v1/cluster/history`.
pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(cluster_history))
}

/// The query of `GET /v1/cluster/history`.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct HistoryQuery {
    /// How far back (`5m`, `15m`, `1h`, ...; at most the span kept); everything kept
    /// when absent.
    range: Option<String>,
}

/// The cluster's recent past: summaries of the cluster stats taken every interval
/// (`metadata --stats-history SPAN/INTERVAL`), oldest first.
#[utoipa::path(get, path = "/v1/cluster/history", tag = "service", params(HistoryQuery),
    responses(
        (status = 200, body = ClusterHistory),
        (status = 400, description = "`invalid_query`: not a duration, or longer than the history kept", body = crate::api::ErrorBody),
    ))]
async fn cluster_history(
    State(s): State<AppState>,
    query: Result<Query<HistoryQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<ClusterHistory>, ApiError> {
    let Query(q) = query.map_err(|e| invalid(e.body_text()))?;
    let range: Option<Duration> = match q.range.as_deref() {
        None | Some("") => None,
        Some(r) => Some(parse_duration(r).map_err(invalid)?),
    };
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    s.history.query(range, now_ms).map(Json).map_err(invalid)
}

fn invalid(msg: String) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "invalid_query", msg)
}
