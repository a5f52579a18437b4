//! `/v1/tables`: creating, describing, dropping and resetting tables.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use dmkv_service::{BodyRejection, JsonObject};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::authorize::{Admin, Principal, TableRead, TableWrite, check_table_name};
use super::error::ApiError;
use super::state::{AppState, blocking};
use crate::api::{CreateTableRequest, ErrorBody, TableDescription, TablesResponse};
use dmkv_api::rereplication::MoveCopyRequest;

/// `POST|GET /v1/tables`, `GET|DELETE /v1/tables/{name}`, `POST /v1/tables/{name}/reset`,
/// `POST /v1/tables/{name}/moves`.
pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_table, list_tables))
        .routes(routes!(get_table, drop_table))
        .routes(routes!(reset_table))
        .routes(routes!(move_copy))
        .routes(routes!(set_feed))
}

/// Set a Clover table's change feed (`kvstore`'s `Session::create_feed` does, after
/// creating the rings in table-owned memory): from then on every writer of the table
/// records its writes in the feed's lanes. `{"feed": null}` removes it.
#[utoipa::path(put, path = "/v1/tables/{name}/feed", tag = "tables",
    params(("name" = crate::api::TableName, Path, description = "table name")),
    request_body = dmkv_api::metadata::SetFeedRequest,
    security(("bearer" = [])),
    responses((status = 200, body = TableDescription),
        (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, description = "not a Clover table (`wrong_index`)", body = ErrorBody),
        (status = 422, description = "the feed names another table or has no or too many rings", body = ErrorBody)))]
async fn set_feed(
    _: TableWrite,
    State(s): State<AppState>,
    Path(name): Path<String>,
    body: Result<JsonObject<dmkv_api::metadata::SetFeedRequest>, BodyRejection>,
) -> Result<Json<TableDescription>, ApiError> {
    check_table_name(&name)?;
    let JsonObject(req) = body?;
    let feed = req.feed;
    let set = feed.is_some();
    let n = name.clone();
    let t = blocking(&s, move |c, _| c.set_table_feed(&n, feed)).await?;
    tracing::info!(table = %name, set, "change feed set");
    Ok(Json(t))
}

/// Move a member of a replica set to another memnode (rebalancing): a new member
/// joins, is copied to (by the switch with the `switch` copy engine) and promoted,
/// and the member named leaves. Progress: `GET /v1/rereplication` (reason `move`).
#[utoipa::path(post, path = "/v1/tables/{name}/moves", tag = "tables",
    params(("name" = crate::api::TableName, Path, description = "table name")),
    request_body = MoveCopyRequest,
    security(("bearer" = [])),
    responses((status = 202, description = "the move is under way", body = TableDescription),
        (status = 400, body = ErrorBody),
        (status = 404, description = "no such table, replica set, member or memnode", body = ErrorBody),
        (status = 409, description = "one copy only (`not_replicated`), the set is busy (`replica_set_busy`), or the memnode named cannot take it (`memnode_conflict`, `memnode_draining`, `memnode_unhealthy`)", body = ErrorBody),
        (status = 422, body = ErrorBody)))]
async fn move_copy(
    _: Admin,
    State(s): State<AppState>,
    Path(name): Path<String>,
    body: Result<JsonObject<MoveCopyRequest>, BodyRejection>,
) -> Result<(StatusCode, Json<TableDescription>), ApiError> {
    check_table_name(&name)?;
    let JsonObject(req) = body?;
    let n = name.clone();
    let t = blocking(&s, move |c, now| {
        c.move_copy(&n, req.set, req.from, req.to, now)
    })
    .await?;
    tracing::info!(table = %name, set = req.set, from = req.from, to = ?req.to, "copy move asked");
    Ok((StatusCode::ACCEPTED, Json(t)))
}

/// Acknowledge that a lost table lost data: it stays (name, id, settings) but is
/// emptied, gets new zeroed memory, and is healthy again.
#[utoipa::path(post, path = "/v1/tables/{name}/reset", tag = "tables",
    params(("name" = crate::api::TableName, Path, description = "table name")),
    security(("bearer" = [])),
    responses((status = 200, body = TableDescription), (status = 404, body = ErrorBody),
        (status = 409, description = "the table lost nothing (`table_not_lost`)", body = ErrorBody),
        (status = 503, description = "no healthy memnode to place its new memory on (`no_memnodes`)", body = ErrorBody),
        (status = 507, description = "no memory for its new directory or tuple area", body = ErrorBody)))]
async fn reset_table(
    _: Admin,
    State(s): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<TableDescription>, ApiError> {
    check_table_name(&name)?;
    let n = name.clone();
    let t = blocking(&s, move |c, now| c.reset_table(&n, now)).await?;
    tracing::warn!(table = %name, "lost table reset by an admin");
    Ok(Json(t))
}

/// Create a table.
#[utoipa::path(post, path = "/v1/tables", tag = "tables",
    request_body = CreateTableRequest,
    security(("bearer" = [])),
    responses((status = 201, body = TableDescription),
        (status = 409, description = "exists, or fewer memnodes than its replication (`table_exists`, ...)", body = ErrorBody),
        (status = 422, body = ErrorBody),
        (status = 503, description = "no healthy memnode to place it on (`no_memnodes`)", body = ErrorBody),
        (status = 507, description = "no memory for the RACE directory or the in-place tuple area", body = ErrorBody)))]
async fn create_table(
    _: Admin,
    State(s): State<AppState>,
    body: Result<JsonObject<CreateTableRequest>, BodyRejection>,
) -> Result<(StatusCode, Json<TableDescription>), ApiError> {
    let JsonObject(req) = body?;
    check_table_name(&req.name)?;
    let t = blocking(&s, move |c, now| c.create_table(req, now)).await?;
    tracing::info!(table = %t.name, index = t.index().as_str(), "table created");
    Ok((StatusCode::CREATED, Json(t)))
}

/// Every table the caller may read (a table credential sees only the tables its
/// scope covers).
#[utoipa::path(get, path = "/v1/tables", tag = "tables",
    security(("bearer" = [])),
    responses((status = 200, body = TablesResponse)))]
async fn list_tables(who: Principal, State(s): State<AppState>) -> Json<TablesResponse> {
    let mut tables = s.with(|c, _| c.tables());
    tables.retain(|t| who.may_read(&t.name));
    Json(TablesResponse { tables })
}

/// One table (for RACE tables: where the directory is).
#[utoipa::path(get, path = "/v1/tables/{name}", tag = "tables",
    params(("name" = crate::api::TableName, Path, description = "table name")),
    security(("bearer" = [])),
    responses((status = 200, body = TableDescription), (status = 404, body = ErrorBody)))]
async fn get_table(
    _: TableRead,
    State(s): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<TableDescription>, ApiError> {
    let mut t = s.with(|c, _| c.table(&name))?;
    t.rereplication = s.rereplication.of_table(&name);
    Ok(Json(t))
}

/// Drop a table with its chains and directory.
#[utoipa::path(delete, path = "/v1/tables/{name}", tag = "tables",
    params(("name" = crate::api::TableName, Path, description = "table name")),
    security(("bearer" = [])),
    responses((status = 204, description = "dropped"), (status = 404, body = ErrorBody)))]
async fn drop_table(
    _: Admin,
    State(s): State<AppState>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    check_table_name(&name)?;
    let n = name.clone();
    blocking(&s, move |c, now| c.drop_table(&n, now)).await?;
    tracing::info!(table = %name, "table dropped");
    Ok(StatusCode::NO_CONTENT)
}
