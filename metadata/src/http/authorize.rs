//! Who is asking, and whether the route lets them: the one authorisation step of the
//! API.
//!
//! [`authenticate`] (a middleware over every route) resolves the bearer token of a
//! request to a [`Principal`] — the root token, an admin credential or a table
//! credential — and answers 401 when it is missing (outside the public routes),
//! wrong, revoked or expired. Each handler then declares what it needs with one
//! extractor argument, which answers 403 naming the scope needed when the principal
//! lacks it:
//!
//! * [`Admin`] — the catalog, memnodes and credentials;
//! * [`TableRead`] / [`TableWrite`] — a route under `/v1/tables/{name}` that reads or
//!   writes the data of table `name` (also checks the name: 400 `invalid_table_name`);
//! * [`Principal`] itself — any authenticated caller, for routes that filter what they
//!   answer ([`Principal::may_read`]) or whose table is in the body or in a stored
//!   record ([`Principal::require_table`]).
//!
//! Putting a new route under a scope is one argument: `_: TableRead` for a route of
//! `/v1/tables/{name}/...` that needs read access (`_: TableWrite` for read-write,
//! `_: Admin` for admins). When what it needs depends on the request (say a grant
//! asking for `access: read-write`), add `who: Principal` too and call
//! `who.require_table(&name, Access::ReadWrite)?` once the body is parsed.
//!
//! A service without a root token is open: every caller is [`Principal::Open`] and may
//! do everything.

use axum::extract::{FromRequestParts, RawPathParams, Request, State};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use dmkv_api::credentials::{Access, CredentialInfo, CredentialKind};
use dmkv_service::auth::{bearer_token, token_matches};

use super::error::ApiError;
use super::state::{AppState, blocking};
use crate::catalog::{CredentialCheck, validate_table_name};

/// Who sent a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// The service has no root token: everybody may do everything.
    Open,
    /// The root token (`--token-file`, `DMKV_METADATA_TOKEN`).
    Root,
    /// A credential issued by `POST /v1/credentials` (admin or table).
    Credential(CredentialInfo),
    /// No bearer token, on a public route (health, metrics, the OpenAPI document,
    /// the accelerator, the cluster view and its history, and the dashboard).
    Anonymous,
}

impl Principal {
    /// Whether it may do everything (the root token, an admin credential, or an open
    /// service).
    pub fn is_admin(&self) -> bool {
        match self {
            Principal::Open | Principal::Root => true,
            Principal::Credential(c) => c.kind == CredentialKind::Admin,
            Principal::Anonymous => false,
        }
    }

    /// Whether it may do `access` on table `table`.
    pub fn covers(&self, table: &str, access: Access) -> bool {
        match self {
            Principal::Credential(c) => c.covers(table, access),
            p => p.is_admin(),
        }
    }

    /// Whether it may see table `table` (read access), for filtering listings.
    pub fn may_read(&self, table: &str) -> bool {
        self.covers(table, Access::Read)
    }

    fn who(&self) -> String {
        match self {
            Principal::Credential(c) => format!("credential {} ({})", c.id, c.scope_text()),
            Principal::Anonymous => "an anonymous request".to_owned(),
            _ => "the root token".to_owned(),
        }
    }

    /// 403 unless it is an admin.
    pub fn require_admin(&self) -> Result<(), ApiError> {
        if self.is_admin() {
            return Ok(());
        }
        Err(forbidden(format!(
            "this route needs an admin credential (the root token or a credential of kind \
             admin); {} does not cover it",
            self.who()
        )))
    }

    /// 403 unless it may do `access` on table `table`.
    pub fn require_table(&self, table: &str, access: Access) -> Result<(), ApiError> {
        if self.covers(table, access) {
            return Ok(());
        }
        Err(forbidden(format!(
            "this route needs {} access to table {table:?}; {} does not cover it (ask an \
             admin for a credential with `tables: [{table:?}]` and `access: {}`)",
            access.as_str(),
            self.who(),
            access.as_str()
        )))
    }
}

fn forbidden(message: String) -> ApiError {
    ApiError::new(StatusCode::FORBIDDEN, "forbidden", message)
}

fn unauthorized(message: impl Into<String>) -> Response {
    let mut resp = ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message).into_response();
    resp.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer"),
    );
    resp
}

/// 400 `invalid_table_name` unless `name` is a valid table name (see
/// [`validate_table_name`]).
pub(super) fn check_table_name(name: &str) -> Result<(), ApiError> {
    validate_table_name(name)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "invalid_table_name", e.to_string()))
}

/// Routes anybody may call, with or without a token.
fn public(path: &str) -> bool {
    matches!(
        path,
        "/" | "/healthz"
            | "/metrics"
            | "/v1/openapi.json"
            | "/v1/cluster/stats"
            | "/v1/cluster/history"
            | "/v1/accelerator"
    ) || path == "/dashboard"
        || path.starts_with("/dashboard/")
}

/// Resolves the request's bearer token to a [`Principal`] (a request extension the
/// scope extractors read); 401 when a route that is not public gets no token, or a
/// wrong, revoked or expired one. Public routes are answered to anybody, whatever
/// token they carry (a probe or a scrape never fails on a stale secret).
pub(super) async fn authenticate(
    State(s): State<AppState>,
    mut req: Request,
    next: Next,
) -> Response {
    let principal = match &s.token {
        None => Principal::Open,
        Some(_) if public(req.uri().path()) => Principal::Anonymous,
        Some(root) => match bearer_token(req.headers()) {
            None => {
                return unauthorized(
                    "this route needs `Authorization: Bearer <secret>`: the root token or a \
                     credential (`dmkv_…`, issued by an admin with POST /v1/credentials)",
                );
            }
            Some(t) if token_matches(t.as_bytes(), root.as_bytes()) => Principal::Root,
            Some(t) => {
                let secret = t.to_owned();
                match blocking(&s, move |c, now| c.check_credential(&secret, now)).await {
                    Ok(CredentialCheck::Valid(info)) => Principal::Credential(info),
                    Ok(CredentialCheck::Expired(info)) => {
                        return unauthorized(format!(
                            "credential {} expired at {} (Unix ms); ask an admin for a new one",
                            info.id,
                            info.expires_at_ms.unwrap_or_default()
                        ));
                    }
                    Ok(CredentialCheck::Unknown) => {
                        return unauthorized(
                            "the bearer token is wrong: neither the root token nor a credential \
                             that is still valid (revoked credentials stop working at once)",
                        );
                    }
                    Err(e) => return e.into_response(),
                }
            }
        },
    };
    req.extensions_mut().insert(principal);
    next.run(req).await
}

impl FromRequestParts<AppState> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &AppState) -> Result<Principal, ApiError> {
        Ok(parts
            .extensions
            .get::<Principal>()
            .cloned()
            .unwrap_or(Principal::Anonymous))
    }
}

/// A route for admins only (403 otherwise).
#[derive(Debug)]
pub(super) struct Admin;

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, s: &AppState) -> Result<Admin, ApiError> {
        let who = Principal::from_request_parts(parts, s).await?;
        who.require_admin()?;
        Ok(Admin)
    }
}

/// A route of `/v1/tables/{name}` that needs access `WRITE ? read-write : read` to
/// table `name`: 400 for an invalid name, 403 when the principal lacks the access.
#[derive(Debug)]
pub(super) struct TableScope<const WRITE: bool>;

/// [`TableScope`] with read access.
pub(super) type TableRead = TableScope<false>;
/// [`TableScope`] with read-write access.
pub(super) type TableWrite = TableScope<true>;

impl<const WRITE: bool> FromRequestParts<AppState> for TableScope<WRITE> {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        s: &AppState,
    ) -> Result<TableScope<WRITE>, ApiError> {
        let params = RawPathParams::from_request_parts(parts, s)
            .await
            .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "invalid_path", e.body_text()))?;
        let name = params
            .iter()
            .find(|(k, _)| *k == "name")
            .map(|(_, v)| v.to_owned())
            .ok_or_else(|| {
                ApiError::internal("a table-scoped route without a {name} path parameter")
            })?;
        check_table_name(&name)?;
        let who = Principal::from_request_parts(parts, s).await?;
        let access = if WRITE {
            Access::ReadWrite
        } else {
            Access::Read
        };
        who.require_table(&name, access)?;
        Ok(TableScope)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(tables: &[&str], access: Access) -> Principal {
        Principal::Credential(CredentialInfo {
            id: 7,
            kind: CredentialKind::Table,
            tables: tables.iter().map(|t| (*t).to_owned()).collect(),
            access,
            label: String::new(),
            created_at_ms: 0,
            expires_at_ms: None,
            last_used_ms: None,
            expired: false,
        })
    }

    #[test]
    fn scopes() {
        assert!(Principal::Root.is_admin() && Principal::Open.is_admin());
        assert!(!Principal::Anonymous.may_read("a"));
        let ro = table(&["a"], Access::Read);
        assert!(!ro.is_admin());
        assert!(ro.require_table("a", Access::Read).is_ok());
        let e = ro.require_table("a", Access::ReadWrite).unwrap_err();
        assert_eq!(e.status, StatusCode::FORBIDDEN);
        let e = ro.require_admin().unwrap_err();
        assert_eq!(e.status, StatusCode::FORBIDDEN);
        assert!(!ro.may_read("b"));
    }

    #[test]
    fn public_routes() {
        for p in [
            "/healthz",
            "/metrics",
            "/dashboard",
            "/dashboard/app.js",
            "/v1/cluster/stats",
        ] {
            assert!(public(p), "{p}");
        }
        for p in [
            "/v1/tables",
            "/v1/memnodes",
            "/v1/credentials",
            "/dashboardx",
        ] {
            assert!(!public(p), "{p}");
        }
    }
}
