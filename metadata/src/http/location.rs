//! `GET /v1/tables/{name}/location?key=`: where a key lives, for the dashboard's key
//! lookup ([`crate::key_lookup`]).

use std::time::Duration;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::authorize::TableRead;
use super::error::ApiError;
use super::extract::decode_key;
use super::state::AppState;
use crate::key_lookup::KeyLocationResponse;

/// How long a lookup may take before the answer is 503.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(10);

/// `GET /v1/tables/{name}/location`.
pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(key_location))
}

/// The query of `GET /v1/tables/{name}/location`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct LocationQuery {
    /// The key, standard base64; required.
    #[param(required = true, value_type = crate::api::Base64Key)]
    key: Option<String>,
}

/// Where a key lives (Clover: its chain and tail node; RACE: its subtable and
/// buckets), on which memnodes, its version and a preview of its value; `found: false`
/// when it has no value. The service reads the key itself; nothing is written.
#[utoipa::path(get, path = "/v1/tables/{name}/location", tag = "tables",
    params(("name" = crate::api::TableName, Path, description = "table name"), LocationQuery),
    security(("bearer" = [])),
    responses(
        (status = 200, body = KeyLocationResponse),
        (status = 404, description = "`table_not_found`", body = crate::api::ErrorBody),
        (status = 422, description = "`invalid_request`: no key, not base64, or an in-place table", body = crate::api::ErrorBody),
        (status = 503, description = "`memnode_unavailable`: the key's memory could not be read", body = crate::api::ErrorBody),
    ))]
async fn key_location(
    _: TableRead,
    State(s): State<AppState>,
    Path(name): Path<String>,
    query: Result<Query<LocationQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<KeyLocationResponse>, ApiError> {
    let Query(q) = query
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "invalid_query", e.body_text()))?;
    let Some(key) = q.key else {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_request",
            "the key is missing: ?key=<standard base64>",
        ));
    };
    let key = decode_key(&key)?;
    let s = s.clone();
    let lookup = tokio::task::spawn_blocking(move || {
        let memnodes = s.with(|c, now| c.memnodes(now));
        s.key_lookup
            .locate(&s.url, s.token.clone(), &name, &key, &memnodes)
    });
    match tokio::time::timeout(LOOKUP_TIMEOUT, lookup).await {
        Err(_) => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "memnode_unavailable",
            format!("key lookup took longer than {LOOKUP_TIMEOUT:?}"),
        )),
        Ok(joined) => joined
            .map_err(ApiError::internal)?
            .map(Json)
            .map_err(|e| ApiError::new(e.status, e.code, e.message)),
    }
}
