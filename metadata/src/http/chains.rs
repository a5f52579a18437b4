//! `/v1/tables/{name}/chains`: the Clover slow path — a key's chain id, and where its
//! tail was last seen.

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use dmkv_service::{BodyRejection, JsonObject};
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::authorize::{TableRead, TableWrite};
use super::error::ApiError;
use super::extract::{decode_key, invalid_query, parse_id};
use super::state::{AppState, blocking};
use crate::api::{
    ChainInfo, ChainKeysPage, ChainRequest, ChainResponse, ErrorBody, RootResponse, TailHint,
    TailResponse,
};

/// `POST|GET /v1/tables/{name}/chains`, `POST /v1/tables/{name}/chains/{chain_id}/root`,
/// `PUT|GET /v1/tables/{name}/chains/{chain_id}/tail`, `GET /v1/tables/{name}/keys`.
pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(open_chain, lookup_chain))
        .routes(routes!(publish_root))
        .routes(routes!(put_tail, get_tail))
        .routes(routes!(list_keys))
}

/// Insert or open a key's chain (Clover tables): its unique 64-bit id.
#[utoipa::path(post, path = "/v1/tables/{name}/chains", tag = "clover",
    params(("name" = crate::api::TableName, Path, description = "table name")),
    request_body = ChainRequest,
    security(("bearer" = [])),
    responses((status = 201, description = "created", body = ChainResponse),
        (status = 200, description = "opened", body = ChainResponse),
        (status = 404, body = ErrorBody), (status = 409, description = "not a clover table", body = ErrorBody),
        (status = 422, body = ErrorBody)))]
async fn open_chain(
    _: TableWrite,
    State(s): State<AppState>,
    Path(name): Path<String>,
    body: Result<JsonObject<ChainRequest>, BodyRejection>,
) -> Result<(StatusCode, Json<ChainResponse>), ApiError> {
    let JsonObject(req) = body?;
    let key = decode_key(&req.key)?;
    let r = blocking(&s, move |c, _| c.open_chain(&name, &key)).await?;
    let status = if r.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(r)))
}

/// The query of [`lookup_chain`].
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct ChainQuery {
    /// The key, standard base64 (percent-encoded in the query); required.
    #[param(required = true, value_type = crate::api::Base64Key)]
    key: Option<String>,
}

/// A key's chain without creating it (Clover tables): its id and stored tail hint;
/// 404 `chain_not_found` when the key has none.
#[utoipa::path(get, path = "/v1/tables/{name}/chains", tag = "clover",
    params(("name" = crate::api::TableName, Path, description = "table name"), ChainQuery),
    security(("bearer" = [])),
    responses((status = 200, body = ChainInfo), (status = 404, body = ErrorBody),
        (status = 409, description = "not a clover table", body = ErrorBody),
        (status = 422, body = ErrorBody)))]
async fn lookup_chain(
    _: TableRead,
    State(s): State<AppState>,
    Path(name): Path<String>,
    query: Result<Query<ChainQuery>, QueryRejection>,
) -> Result<Json<ChainInfo>, ApiError> {
    let Query(q) = query.map_err(invalid_query)?;
    let key = q.key.ok_or_else(|| {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_request",
            "the query parameter key (standard base64) is required",
        )
    })?;
    let key = decode_key(&key)?;
    Ok(Json(s.with(|c, _| c.lookup_chain(&name, &key))?))
}

/// Publish a chain's root: store this tail hint unless one is stored (put-if-absent).
/// 201 when this hint was stored, 200 with the stored hint (unchanged) when another
/// was there first, so exactly one of several racing publishers wins and each learns
/// which.
#[utoipa::path(post, path = "/v1/tables/{name}/chains/{chain_id}/root", tag = "clover",
    params(("name" = crate::api::TableName, Path, description = "table name"),
        ("chain_id" = u64, Path, description = "chain id")),
    request_body = TailHint,
    security(("bearer" = [])),
    responses((status = 201, description = "stored", body = RootResponse), (status = 409, description = "not a clover table (`wrong_index`)", body = ErrorBody),
        (status = 200, description = "another hint was stored first", body = RootResponse),
        (status = 404, body = ErrorBody), (status = 422, body = ErrorBody)))]
async fn publish_root(
    _: TableWrite,
    State(s): State<AppState>,
    Path((name, chain)): Path<(String, String)>,
    body: Result<JsonObject<TailHint>, BodyRejection>,
) -> Result<(StatusCode, Json<RootResponse>), ApiError> {
    let chain = parse_id("chain id", &chain)?;
    let JsonObject(hint) = body?;
    let r = blocking(&s, move |c, now| c.publish_root(&name, chain, hint, now)).await?;
    let status = if r.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(r)))
}

/// Store where a chain's tail was last seen (unconditionally; Clover clients
/// publish roots with `POST .../root` instead).
#[utoipa::path(put, path = "/v1/tables/{name}/chains/{chain_id}/tail", tag = "clover",
    params(("name" = crate::api::TableName, Path, description = "table name"),
        ("chain_id" = u64, Path, description = "chain id")),
    request_body = TailHint,
    security(("bearer" = [])),
    responses((status = 200, body = TailResponse), (status = 404, body = ErrorBody), (status = 409, description = "not a clover table (`wrong_index`)", body = ErrorBody),
        (status = 422, body = ErrorBody)))]
async fn put_tail(
    _: TableWrite,
    State(s): State<AppState>,
    Path((name, chain)): Path<(String, String)>,
    body: Result<JsonObject<TailHint>, BodyRejection>,
) -> Result<Json<TailResponse>, ApiError> {
    let chain = parse_id("chain id", &chain)?;
    let JsonObject(hint) = body?;
    Ok(Json(
        blocking(&s, move |c, now| c.put_tail(&name, chain, hint, now)).await?,
    ))
}

/// Where a chain's tail was last seen (a client cache miss).
#[utoipa::path(get, path = "/v1/tables/{name}/chains/{chain_id}/tail", tag = "clover",
    params(("name" = crate::api::TableName, Path, description = "table name"),
        ("chain_id" = u64, Path, description = "chain id")),
    security(("bearer" = [])),
    responses((status = 200, body = TailResponse), (status = 404, body = ErrorBody),
        (status = 409, description = "not a clover table (`wrong_index`)", body = ErrorBody)))]
async fn get_tail(
    _: TableRead,
    State(s): State<AppState>,
    Path((name, chain)): Path<(String, String)>,
) -> Result<Json<TailResponse>, ApiError> {
    let chain = parse_id("chain id", &chain)?;
    Ok(Json(s.with(|c, _| c.tail(&name, chain))?))
}

/// The query of [`list_keys`].
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct KeysQuery {
    /// Only keys starting with these bytes, standard base64 (percent-encoded).
    #[param(value_type = Option<crate::api::Base64Key>)]
    prefix: Option<String>,
    /// Only keys after this one (the previous page's `next_after`), standard base64.
    #[param(value_type = Option<crate::api::Base64Key>)]
    after: Option<String>,
    /// Most keys in the page: 1 to 1000 (default and cap 1000; more is cut to 1000).
    #[param(minimum = 1)]
    limit: Option<usize>,
}

/// One page of a Clover table's keys that have a chain — every key ever written,
/// including deleted ones (a deleted key keeps its chain; read the key to tell) —
/// in byte order, as standard base64.
#[utoipa::path(get, path = "/v1/tables/{name}/keys", tag = "clover",
    params(("name" = crate::api::TableName, Path, description = "table name"), KeysQuery),
    security(("bearer" = [])),
    responses((status = 200, body = ChainKeysPage), (status = 404, body = ErrorBody),
        (status = 409, description = "not a clover table", body = ErrorBody),
        (status = 422, body = ErrorBody)))]
async fn list_keys(
    _: TableRead,
    State(s): State<AppState>,
    Path(name): Path<String>,
    query: Result<Query<KeysQuery>, QueryRejection>,
) -> Result<Json<ChainKeysPage>, ApiError> {
    let Query(q) = query.map_err(invalid_query)?;
    let prefix = match q.prefix {
        Some(p) => decode_key(&p)?,
        None => Vec::new(),
    };
    let after = q.after.map(|a| decode_key(&a)).transpose()?;
    let limit = match q.limit {
        Some(0) => {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_request",
                "limit must be 1 to 1000",
            ));
        }
        Some(n) => n,
        None => 0,
    };
    Ok(Json(s.with(|c, _| {
        c.chain_keys(&name, &prefix, after.as_deref(), limit)
    })?))
}
