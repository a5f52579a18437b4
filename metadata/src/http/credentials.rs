//! `/v1/credentials`: issuing, listing and revoking scoped credentials (admins only).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use dmkv_api::credentials::{CreateCredentialRequest, CreatedCredential, CredentialsResponse};
use dmkv_service::{BodyRejection, JsonObject};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::authorize::Admin;
use super::error::ApiError;
use super::extract::parse_id;
use super::state::{AppState, blocking};
use crate::api::ErrorBody;

/// `POST|GET /v1/credentials`, `DELETE /v1/credentials/{id}`.
pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_credential, list_credentials))
        .routes(routes!(revoke_credential))
}

/// Issue a credential: an admin one, or one scoped to tables (exact names or
/// prefixes ending in `*`) with `read` or `read-write` access, optionally expiring.
/// The answer carries its secret, which the service does not keep: store it now.
#[utoipa::path(post, path = "/v1/credentials", tag = "credentials",
    request_body = CreateCredentialRequest,
    security(("bearer" = [])),
    responses((status = 201, body = CreatedCredential),
        (status = 400, description = "the body is not JSON (`invalid_json`)", body = ErrorBody),
        (status = 422, description = "invalid scope, label or expiry", body = ErrorBody)))]
async fn create_credential(
    _: Admin,
    State(s): State<AppState>,
    body: Result<JsonObject<CreateCredentialRequest>, BodyRejection>,
) -> Result<(StatusCode, Json<CreatedCredential>), ApiError> {
    let JsonObject(req) = body?;
    let made = blocking(&s, move |c, now| c.create_credential(&req, now)).await?;
    let cred = &made.credential;
    tracing::info!(
        credential = cred.id,
        kind = cred.kind.as_str(),
        scope = %cred.scope_text(),
        label = %cred.label,
        expires_at_ms = ?cred.expires_at_ms,
        "credential issued"
    );
    Ok((StatusCode::CREATED, Json(made)))
}

/// Every credential not revoked (never their secrets): id, kind, scope, label,
/// when issued, when it expires, when last used.
#[utoipa::path(get, path = "/v1/credentials", tag = "credentials",
    security(("bearer" = [])),
    responses((status = 200, body = CredentialsResponse)))]
async fn list_credentials(
    _: Admin,
    State(s): State<AppState>,
) -> Result<Json<CredentialsResponse>, ApiError> {
    let credentials = blocking(&s, |c, now| c.credentials(now)).await?;
    Ok(Json(CredentialsResponse { credentials }))
}

/// Revoke a credential: its secret is refused (401) from the next request on.
#[utoipa::path(delete, path = "/v1/credentials/{id}", tag = "credentials",
    params(("id" = u64, Path, description = "credential id")),
    security(("bearer" = [])),
    responses((status = 204, description = "revoked"),
        (status = 400, description = "the id is not a number (`invalid_path`)", body = ErrorBody),
        (status = 404, description = "no such credential (`credential_not_found`)", body = ErrorBody)))]
async fn revoke_credential(
    _: Admin,
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = parse_id("credential id", &id)?;
    let gone = blocking(&s, move |c, _| c.revoke_credential(id)).await?;
    tracing::warn!(credential = id, scope = %gone.scope_text(), label = %gone.label, "credential revoked");
    Ok(StatusCode::NO_CONTENT)
}
