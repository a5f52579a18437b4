//! `/v1/memnodes`: registration, heartbeats, deregistration, drain, listing.

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use dmkv_service::{BodyRejection, JsonObject};
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::authorize::{Admin, Principal};
use super::error::ApiError;
use super::extract::parse_id;
use super::state::{AppState, blocking};
use crate::api::{
    DrainResponse, ErrorBody, HeartbeatResponse, MemnodeInfo, MemnodesResponse,
    RegisterMemnodeRequest, RegisterMemnodeResponse,
};

/// `POST|GET /v1/memnodes`, `GET|DELETE /v1/memnodes/{id}`,
/// `POST /v1/memnodes/{id}/heartbeat`, `POST /v1/memnodes/{id}/drain`.
pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(register_memnode, list_memnodes))
        .routes(routes!(get_memnode, deregister_memnode))
        .routes(routes!(heartbeat))
        .routes(routes!(drain_memnode))
}

/// The query of `DELETE /v1/memnodes/{id}`.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct DeleteQuery {
    /// Delete it even though table data or leases live there: those tables are
    /// marked lost.
    #[serde(default)]
    force: bool,
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
    _: Admin,
    State(s): State<AppState>,
    body: Result<JsonObject<RegisterMemnodeRequest>, BodyRejection>,
) -> Result<(StatusCode, Json<RegisterMemnodeResponse>), ApiError> {
    let JsonObject(req) = body?;
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

/// Every memnode with its health and free memory (for callers that are not admins,
/// only the first region of each: the one queue pairs are set up with).
#[utoipa::path(get, path = "/v1/memnodes", tag = "memnodes",
    security(("bearer" = [])),
    responses((status = 200, body = MemnodesResponse)))]
async fn list_memnodes(who: Principal, State(s): State<AppState>) -> Json<MemnodesResponse> {
    let memnodes = s.with(|c, now| c.memnodes(now));
    Json(MemnodesResponse {
        memnodes: memnodes.into_iter().map(|m| redact(&who, m)).collect(),
    })
}

/// What `who` may see of memnode `m`: all of it for an admin; otherwise only its
/// first region (a client's queue pair to the memnode names it; every lease and
/// table description names the region of its own memory).
fn redact(who: &Principal, mut m: MemnodeInfo) -> MemnodeInfo {
    if !who.is_admin() {
        m.regions.truncate(1);
    }
    m
}

/// One memnode.
#[utoipa::path(get, path = "/v1/memnodes/{id}", tag = "memnodes",
    params(("id" = u64, Path, description = "memnode id")),
    security(("bearer" = [])),
    responses((status = 200, body = MemnodeInfo), (status = 404, body = ErrorBody)))]
async fn get_memnode(
    who: Principal,
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<MemnodeInfo>, ApiError> {
    let id = parse_id("memnode id", &id)?;
    let m = s.with(|c, now| c.memnode(id, now))?;
    Ok(Json(redact(&who, m)))
}

/// Remove a memnode. Refused while table data or leases live there (drain it, drop
/// or move what lives there, or pass `force=true` to accept losing it).
#[utoipa::path(delete, path = "/v1/memnodes/{id}", tag = "memnodes",
    params(("id" = u64, Path, description = "memnode id"), DeleteQuery),
    security(("bearer" = [])),
    responses((status = 204, description = "removed"), (status = 404, body = ErrorBody),
        (status = 409, description = "table data or leases live there (`memnode_in_use`)", body = ErrorBody)))]
async fn deregister_memnode(
    _: Admin,
    State(s): State<AppState>,
    Path(id): Path<String>,
    query: Result<Query<DeleteQuery>, QueryRejection>,
) -> Result<StatusCode, ApiError> {
    let id = parse_id("memnode id", &id)?;
    let Query(q) = query.map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_query",
            format!("{e}; the only parameter is force=true|false"),
        )
    })?;
    let force = q.force;
    blocking(&s, move |c, now| c.deregister_memnode(id, force, now)).await?;
    if force {
        tracing::warn!(memnode = id, "memnode deleted with force");
    } else {
        tracing::info!(memnode = id, "memnode deregistered");
    }
    Ok(StatusCode::NO_CONTENT)
}

/// Drain a memnode: no new leases or table memory go there. Answers what still
/// lives there; once nothing does, it can be deleted.
#[utoipa::path(post, path = "/v1/memnodes/{id}/drain", tag = "memnodes",
    params(("id" = u64, Path, description = "memnode id")),
    security(("bearer" = [])),
    responses((status = 202, description = "draining", body = DrainResponse),
        (status = 404, body = ErrorBody)))]
async fn drain_memnode(
    _: Admin,
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<DrainResponse>), ApiError> {
    let id = parse_id("memnode id", &id)?;
    let d = blocking(&s, move |c, now| c.drain_memnode(id, now)).await?;
    tracing::info!(
        memnode = id,
        tables = d.tables.len(),
        leases = d.leases,
        "memnode draining"
    );
    Ok((StatusCode::ACCEPTED, Json(d)))
}

/// A memnode is alive.
#[utoipa::path(post, path = "/v1/memnodes/{id}/heartbeat", tag = "memnodes",
    params(("id" = u64, Path, description = "memnode id")),
    security(("bearer" = [])),
    responses((status = 200, body = HeartbeatResponse),
        (status = 404, description = "unknown: register again", body = ErrorBody)))]
async fn heartbeat(
    _: Admin,
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<HeartbeatResponse>, ApiError> {
    let id = parse_id("memnode id", &id)?;
    Ok(Json(s.with(|c, now| c.heartbeat(id, now))?))
}
