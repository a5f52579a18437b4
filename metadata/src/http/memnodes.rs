//! `/v1/memnodes`: registration, heartbeats, deregistration, listing.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ApiError;
use super::extract::parse_id;
use super::state::{AppState, blocking};
use crate::api::{
    ErrorBody, HeartbeatResponse, MemnodeInfo, MemnodesResponse, RegisterMemnodeRequest,
    RegisterMemnodeResponse,
};

/// `POST|GET /v1/memnodes`, `GET|DELETE /v1/memnodes/{id}`,
/// `POST /v1/memnodes/{id}/heartbeat`.
pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(register_memnode, list_memnodes))
        .routes(routes!(get_memnode, deregister_memnode))
        .routes(routes!(heartbeat))
}

/// Register (or re-register, by name) a memnode.
#[utoipa::path(post, path = "/v1/memnodes", tag = "memnodes",
    request_body = RegisterMemnodeRequest,
    security(("bearer" = [])),
    responses(
        (status = 201, description = "registered", body = RegisterMemnodeResponse),
        (status = 200, description = "re-registered", body = RegisterMemnodeResponse),
        (status = 409, description = "data address used by another memnode", body = ErrorBody),
        (status = 422, description = "invalid request", body = ErrorBody)))]
async fn register_memnode(
    State(s): State<AppState>,
    body: Result<Json<RegisterMemnodeRequest>, JsonRejection>,
) -> Result<(StatusCode, Json<RegisterMemnodeResponse>), ApiError> {
    let Json(req) = body?;
    let name = req.name.clone();
    let (resp, created) = blocking(&s, move |c, now| c.register_memnode(req, now)).await?;
    tracing::info!(
        memnode = resp.id,
        name = %name,
        created,
        epoch = resp.epoch,
        "memnode registered"
    );
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(resp)))
}

/// Every memnode with its health and free memory.
#[utoipa::path(get, path = "/v1/memnodes", tag = "memnodes",
    responses((status = 200, body = MemnodesResponse)))]
async fn list_memnodes(State(s): State<AppState>) -> Json<MemnodesResponse> {
    Json(MemnodesResponse {
        memnodes: s.with(|c, now| c.memnodes(now)),
    })
}

/// One memnode.
#[utoipa::path(get, path = "/v1/memnodes/{id}", tag = "memnodes",
    params(("id" = u64, Path, description = "memnode id")),
    responses((status = 200, body = MemnodeInfo), (status = 404, body = ErrorBody)))]
async fn get_memnode(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<MemnodeInfo>, ApiError> {
    let id = parse_id("memnode id", &id)?;
    Ok(Json(s.with(|c, now| c.memnode(id, now))?))
}

/// Remove a memnode; its leases are revoked.
#[utoipa::path(delete, path = "/v1/memnodes/{id}", tag = "memnodes",
    params(("id" = u64, Path, description = "memnode id")),
    security(("bearer" = [])),
    responses((status = 204, description = "removed"), (status = 404, body = ErrorBody)))]
async fn deregister_memnode(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = parse_id("memnode id", &id)?;
    blocking(&s, move |c, _| c.deregister_memnode(id)).await?;
    tracing::info!(memnode = id, "memnode deregistered");
    Ok(StatusCode::NO_CONTENT)
}

/// A memnode is alive.
#[utoipa::path(post, path = "/v1/memnodes/{id}/heartbeat", tag = "memnodes",
    params(("id" = u64, Path, description = "memnode id")),
    security(("bearer" = [])),
    responses((status = 200, body = HeartbeatResponse),
        (status = 404, description = "unknown: register again", body = ErrorBody)))]
async fn heartbeat(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<HeartbeatResponse>, ApiError> {
    let id = parse_id("memnode id", &id)?;
    Ok(Json(s.with(|c, now| c.heartbeat(id, now))?))
}
