//! `POST /v1/tables/{name}/grants`: a signed grant over a table's memory on one memory
//! node, which a client presents to that node to get a queue pair scoped to it.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use dmkv_api::grant::{GrantRequest, GrantResponse};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ApiError;
use super::state::AppState;
use crate::api::ErrorBody;
use crate::grant_issuer::IssueError;

/// `POST /v1/tables/{name}/grants`.
pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(issue_grant))
}

/// Whether the caller may have a grant over `table`. The one place this is decided:
/// for now, a caller that passed the service's bearer-token check (every POST needs
/// the token when the service has one) may have a grant over any table.
fn authorize_grant(s: &AppState, headers: &HeaderMap, table: &str) -> Result<(), ApiError> {
    match &s.token {
        Some(token) if !dmkv_service::auth::authorized(headers, token) => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            format!("a grant over table {table:?} needs `Authorization: Bearer <token>`"),
        )),
        _ => Ok(()),
    }
}

/// Issue a grant over the table's memory on one memory node: its extents there, the
/// rights asked for (default read-write), valid for the grant TTL.
#[utoipa::path(post, path = "/v1/tables/{name}/grants", tag = "tables",
    params(("name" = String, Path, description = "table name")),
    request_body = GrantRequest,
    security(("bearer" = [])),
    responses((status = 201, body = GrantResponse),
        (status = 404, description = "no such table or memory node", body = ErrorBody),
        (status = 409, description = "the service issues no grants (`grants_disabled`: no grant key)", body = ErrorBody),
        (status = 422, body = ErrorBody)))]
async fn issue_grant(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(name): Path<String>,
    body: Result<Json<GrantRequest>, JsonRejection>,
) -> Result<(StatusCode, Json<GrantResponse>), ApiError> {
    let Json(req) = body?;
    authorize_grant(&s, &headers, &name)?;
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
