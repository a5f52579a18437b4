//! `/v1/leases`: granting, listing, renewing, freeing, and handing data leases over
//! to their table.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use dmkv_service::{BodyRejection, JsonObject};
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::authorize::Principal;
use super::error::ApiError;
use super::extract::{invalid_query, optional_json, parse_id};
use super::state::{AppState, blocking};
use dmkv_api::credentials::Access;

use crate::api::{
    AdoptLeaseRequest, CreateLeaseRequest, ErrorBody, Lease, LeasesResponse, RenewLeaseRequest,
};

/// `POST|GET /v1/leases`, `GET|DELETE /v1/leases/{id}`, `POST /v1/leases/{id}/renew`,
/// `POST /v1/leases/{id}/adopt`.
pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_lease, list_leases))
        .routes(routes!(get_lease, free_lease))
        .routes(routes!(renew_lease))
        .routes(routes!(adopt_lease))
}

/// Lease a chunk of remote memory.
#[utoipa::path(post, path = "/v1/leases", tag = "leases",
    request_body = CreateLeaseRequest,
    security(("bearer" = [])),
    responses((status = 201, body = Lease),
        (status = 404, description = "the named memnode or table does not exist (`memnode_not_found`, `table_not_found`)", body = ErrorBody),
        (status = 409, description = "the requested memnode is unhealthy or draining", body = ErrorBody),
        (status = 422, body = ErrorBody),
        (status = 503, description = "no healthy memnode", body = ErrorBody),
        (status = 507, description = "out of memory", body = ErrorBody)))]
async fn create_lease(
    who: Principal,
    State(s): State<AppState>,
    body: Result<JsonObject<CreateLeaseRequest>, BodyRejection>,
) -> Result<(StatusCode, Json<Lease>), ApiError> {
    let JsonObject(req) = body?;
    match &req.table {
        Some(t) => who.require_table(t, Access::ReadWrite)?,
        None => who.require_admin()?,
    }
    let l = blocking(&s, move |c, now| c.create_lease(req, now)).await?;
    tracing::debug!(lease = l.lease_id, client = %l.client, memnode = l.memnode_id, len = l.len, "lease granted");
    Ok((StatusCode::CREATED, Json(l)))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct LeaseQuery {
    /// Only this client's leases.
    client: Option<String>,
}

/// Leases, optionally of one client.
/// A table credential sees only the leases of the tables it may read.
#[utoipa::path(get, path = "/v1/leases", tag = "leases", params(LeaseQuery),
    security(("bearer" = [])),
    responses((status = 200, body = LeasesResponse)))]
async fn list_leases(
    who: Principal,
    State(s): State<AppState>,
    query: Result<Query<LeaseQuery>, QueryRejection>,
) -> Result<Json<LeasesResponse>, ApiError> {
    let Query(q) = query.map_err(invalid_query)?;
    let mut leases = s.with(|c, now| c.leases(q.client.as_deref(), now));
    if !who.is_admin() {
        leases.retain(|l| lease_table(l).is_some_and(|t| who.may_read(t)));
    }
    Ok(Json(LeasesResponse { leases }))
}

/// The table a lease belongs to: the table of a data lease, or the owner of
/// table-owned memory (`client` = `table:<name>`); `None` for a plain lease.
fn lease_table(l: &Lease) -> Option<&str> {
    l.table
        .as_deref()
        .or_else(|| l.client.strip_prefix("table:"))
}

/// 403 unless `who` may do `access` on the table of lease `id` (plain leases:
/// admins only); 404 when there is no such lease.
async fn authorize_lease(
    who: &Principal,
    s: &AppState,
    id: u64,
    access: Access,
) -> Result<(), ApiError> {
    if who.is_admin() {
        return Ok(());
    }
    let l = blocking(s, move |c, now| c.lease(id, now)).await?;
    match lease_table(&l) {
        Some(t) => who.require_table(t, access),
        None => who.require_admin(),
    }
}

/// One lease.
#[utoipa::path(get, path = "/v1/leases/{id}", tag = "leases",
    params(("id" = u64, Path, description = "lease id")),
    security(("bearer" = [])),
    responses((status = 200, body = Lease), (status = 404, body = ErrorBody)))]
async fn get_lease(
    who: Principal,
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Lease>, ApiError> {
    let id = parse_id("lease id", &id)?;
    authorize_lease(&who, &s, id, Access::Read).await?;
    Ok(Json(s.with(|c, now| c.lease(id, now))?))
}

/// Free a lease now.
#[utoipa::path(delete, path = "/v1/leases/{id}", tag = "leases",
    params(("id" = u64, Path, description = "lease id")),
    security(("bearer" = [])),
    responses((status = 204, description = "freed"), (status = 404, body = ErrorBody),
        (status = 409, description = "owned by a table", body = ErrorBody)))]
async fn free_lease(
    who: Principal,
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = parse_id("lease id", &id)?;
    authorize_lease(&who, &s, id, Access::ReadWrite).await?;
    blocking(&s, move |c, _| c.free_lease(id)).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Extend a lease (body optional).
#[utoipa::path(post, path = "/v1/leases/{id}/renew", tag = "leases",
    params(("id" = u64, Path, description = "lease id")),
    request_body(content = RenewLeaseRequest, description = "optional"),
    security(("bearer" = [])),
    responses((status = 200, body = Lease), (status = 404, body = ErrorBody),
        (status = 409, description = "the lease belongs to a table and does not expire (`lease_owned_by_table`)", body = ErrorBody),
        (status = 410, description = "already expired", body = ErrorBody)))]
async fn renew_lease(
    who: Principal,
    State(s): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Lease>, ApiError> {
    let id = parse_id("lease id", &id)?;
    authorize_lease(&who, &s, id, Access::ReadWrite).await?;
    let req: RenewLeaseRequest = optional_json(body)?;
    Ok(Json(
        blocking(&s, move |c, now| c.renew_lease(id, req.ttl_ms, now)).await?,
    ))
}

/// Hand a data lease over to its table now (a client stopping cleanly), keeping
/// its first `keep_bytes` (body optional); 200 with the table-owned lease, or 204
/// when nothing was kept and the lease was freed.
#[utoipa::path(post, path = "/v1/leases/{id}/adopt", tag = "leases",
    params(("id" = u64, Path, description = "lease id")),
    request_body(content = AdoptLeaseRequest, description = "optional"),
    security(("bearer" = [])),
    responses((status = 200, body = Lease), (status = 204, description = "freed"),
        (status = 404, body = ErrorBody),
        (status = 409, description = "owned by a table already, or names no table", body = ErrorBody)))]
async fn adopt_lease(
    who: Principal,
    State(s): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let id = parse_id("lease id", &id)?;
    authorize_lease(&who, &s, id, Access::ReadWrite).await?;
    let req: AdoptLeaseRequest = optional_json(body)?;
    let kept = blocking(&s, move |c, now| c.adopt_lease(id, req.keep_bytes, now)).await?;
    Ok(match kept {
        Some(l) => {
            tracing::info!(lease = id, table = ?l.table, bytes = l.len, "data lease handed over to its table");
            (StatusCode::OK, Json(l)).into_response()
        }
        None => StatusCode::NO_CONTENT.into_response(),
    })
}
