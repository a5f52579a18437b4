//! `POST /v1/tables/{name}/grants`: a signed grant over a table's memory on one memory
//! node, which a client presents to that node to get a queue pair scoped to it.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use dmkv_api::credentials::Access;
use dmkv_api::grant::{GrantAccess, GrantRequest, GrantResponse};
use dmkv_service::{BodyRejection, JsonObject};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::authorize::{Principal, TableRead};
use super::error::ApiError;
use super::state::AppState;
use crate::api::ErrorBody;
use crate::grant_issuer::IssueError;

/// `POST /v1/tables/{name}/grants`.
pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(issue_grant))
}

/// Whether the caller may have a grant over `table`, and with which rights. The one
/// place this is decided: a read-write grant needs read-write access to the table, a
/// read-only grant read access; a request that names no rights gets the most the
/// caller's credential allows.
fn authorize_grant(
    who: &Principal,
    table: &str,
    asked: Option<GrantAccess>,
) -> Result<GrantAccess, ApiError> {
    match asked {
        Some(GrantAccess::ReadWrite) => {
            who.require_table(table, Access::ReadWrite)?;
            Ok(GrantAccess::ReadWrite)
        }
        Some(GrantAccess::ReadOnly) => {
            who.require_table(table, Access::Read)?;
            Ok(GrantAccess::ReadOnly)
        }
        None if who.covers(table, Access::ReadWrite) => Ok(GrantAccess::ReadWrite),
        None => {
            who.require_table(table, Access::Read)?;
            Ok(GrantAccess::ReadOnly)
        }
    }
}

/// Issue a grant over the table's memory on one memory node: its extents there, the
/// rights asked for (default read-write), valid for the grant TTL.
#[utoipa::path(post, path = "/v1/tables/{name}/grants", tag = "tables",
    params(("name" = crate::api::TableName, Path, description = "table name")),
    request_body = GrantRequest,
    security(("bearer" = [])),
    responses((status = 201, body = GrantResponse),
        (status = 404, description = "no such table or memory node", body = ErrorBody),
        (status = 409, description = "the service issues no grants (`grants_disabled`: no grant key)", body = ErrorBody),
        (status = 422, body = ErrorBody)))]
async fn issue_grant(
    _: TableRead,
    who: Principal,
    State(s): State<AppState>,
    Path(name): Path<String>,
    body: Result<JsonObject<GrantRequest>, BodyRejection>,
) -> Result<(StatusCode, Json<GrantResponse>), ApiError> {
    let JsonObject(mut req) = body?;
    req.access = Some(authorize_grant(&who, &name, req.access)?);
    let Some(issuer) = s.grants.as_ref() else {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "grants_disabled",
            "this metadata service has no grant key (--grant-key-file, $DMKV_GRANT_KEY or --memnode-token-file): memory nodes run without grants",
        ));
    };
    let issued = s.with(|c, now| issuer.issue(c, &name, &req, now));
    let g = match issued {
        Ok(g) => g,
        Err(IssueError::Catalog(e)) => return Err(e.into()),
        Err(IssueError::Encode(e)) => {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_request",
                e,
            ));
        }
    };
    tracing::debug!(
        table = %name,
        memnode = g.memnode_id,
        windows = g.windows.len(),
        expires_at_ms = g.expires_at_ms,
        "grant issued"
    );
    Ok((StatusCode::CREATED, Json(g)))
}
