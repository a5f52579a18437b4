//! `/v1/tables/{name}/chains/{ids,directory,published}`: the one-sided Clover insert
//! path — chain ids leased in blocks, the table's chain directory, and batches of
//! the key → chain mappings clients claimed in it.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use dmkv_service::{BodyRejection, JsonObject};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::authorize::{TableRead, TableWrite};
use super::error::ApiError;
use super::state::{AppState, blocking};
use crate::api::{
    ChainDirectoryRequest, ChainDirectoryResponse, ChainIdBlock, ChainIdsRequest, ErrorBody,
    PublishChainsRequest, PublishChainsResponse,
};

/// `POST /v1/tables/{name}/chains/ids`, `POST /v1/tables/{name}/chains/directory`,
/// `POST /v1/tables/{name}/chains/published`.
pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(lease_chain_ids))
        .routes(routes!(chain_directory))
        .routes(routes!(publish_chains))
}

/// Lease a block of fresh chain ids (Clover tables with a chain directory name the
/// chains they create with them; ids never used are simply skipped).
#[utoipa::path(post, path = "/v1/tables/{name}/chains/ids", tag = "clover",
    params(("name" = crate::api::TableName, Path, description = "table name")),
    request_body = ChainIdsRequest,
    security(("bearer" = [])),
    responses((status = 201, body = ChainIdBlock), (status = 404, body = ErrorBody),
        (status = 409, description = "not a clover table", body = ErrorBody),
        (status = 422, body = ErrorBody)))]
async fn lease_chain_ids(
    _: TableWrite,
    State(s): State<AppState>,
    Path(name): Path<String>,
    body: Result<JsonObject<ChainIdsRequest>, BodyRejection>,
) -> Result<(StatusCode, Json<ChainIdBlock>), ApiError> {
    let JsonObject(req) = body?;
    let block = blocking(&s, move |c, _| c.lease_chain_ids(&name, req.count)).await?;
    Ok((StatusCode::CREATED, Json(block)))
}

/// The table's chain directory, created (zeroed) by the first call: 409
/// `chain_directory_unavailable` when the table keeps the per-key service path
/// (replicated, created chains through the service before, declined, or no memory).
#[utoipa::path(post, path = "/v1/tables/{name}/chains/directory", tag = "clover",
    params(("name" = crate::api::TableName, Path, description = "table name")),
    request_body = ChainDirectoryRequest,
    security(("bearer" = [])),
    responses((status = 201, description = "created", body = ChainDirectoryResponse),
        (status = 200, description = "already there", body = ChainDirectoryResponse),
        (status = 404, body = ErrorBody),
        (status = 409, description = "not a clover table, no directory, or the directory was lost", body = ErrorBody)))]
async fn chain_directory(
    _: TableRead,
    State(s): State<AppState>,
    Path(name): Path<String>,
    body: Result<JsonObject<ChainDirectoryRequest>, BodyRejection>,
) -> Result<(StatusCode, Json<ChainDirectoryResponse>), ApiError> {
    let JsonObject(req) = body?;
    let r = blocking(&s, move |c, now| c.chain_directory(&name, req.create, now)).await?;
    let status = if r.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(r)))
}

/// Record key → chain mappings claimed in the chain directory (a key already
/// recorded is left as it is; one bad mapping records nothing).
#[utoipa::path(post, path = "/v1/tables/{name}/chains/published", tag = "clover",
    params(("name" = crate::api::TableName, Path, description = "table name")),
    request_body = PublishChainsRequest,
    security(("bearer" = [])),
    responses((status = 200, body = PublishChainsResponse), (status = 404, body = ErrorBody),
        (status = 409, description = "not a clover table", body = ErrorBody),
        (status = 422, body = ErrorBody)))]
async fn publish_chains(
    _: TableWrite,
    State(s): State<AppState>,
    Path(name): Path<String>,
    body: Result<JsonObject<PublishChainsRequest>, BodyRejection>,
) -> Result<Json<PublishChainsResponse>, ApiError> {
    let JsonObject(req) = body?;
    Ok(Json(
        blocking(&s, move |c, now| c.publish_chains(&name, &req.chains, now)).await?,
    ))
}
