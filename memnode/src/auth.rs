//! Who may call the admin API: the holder of the node's admin token (the metadata
//! service and operators), or a client presenting a grant.
//!
//! Every route but `GET /healthz` and `GET /metrics` needs `Authorization: Bearer
//! <credential>`, where the credential is the admin token (compared in constant time)
//! or a grant the metadata service signed for this node (verified offline with the
//! grant key). Anything else is answered 401 with a JSON error body. A node started
//! without an admin token ([`AdminAuth::open`], `--insecure-no-auth`) treats every
//! caller as an administrator, but still scopes the queue pairs of callers that
//! present a grant.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use dmkv_api::grant::{Grant, GrantError, GrantKey};

use crate::admin::{AdminState, ApiError};

/// The admin API's credentials.
#[derive(Clone)]
pub struct AdminAuth {
    /// The admin token (`None`: no authentication; every caller is an administrator).
    pub admin_token: Option<String>,
    /// The key grants are verified with (`None`: grants are refused).
    pub grant_key: Option<GrantKey>,
    /// Whether a queue pair created with a grant is restricted to the grant's windows
    /// under its own key (the default). Off, such queue pairs get whole-region access
    /// under the region's key: only for measuring what scoping costs.
    pub scoping: bool,
}

impl std::fmt::Debug for AdminAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminAuth")
            .field("admin_token", &self.admin_token.as_ref().map(|_| ".."))
            .field("grant_key", &self.grant_key)
            .field("scoping", &self.scoping)
            .finish()
    }
}

impl AdminAuth {
    /// No authentication (tests, `--insecure-no-auth`); grants are refused.
    pub fn open() -> AdminAuth {
        AdminAuth {
            admin_token: None,
            grant_key: None,
            scoping: true,
        }
    }

    /// Authentication with `admin_token`; grants verified with `grant_key`, or with the
    /// key derived from the token ([`GrantKey::derive_from_admin_token`]) when `None`.
    pub fn secured(
        admin_token: &str,
        grant_key: Option<GrantKey>,
    ) -> Result<AdminAuth, GrantError> {
        let grant_key = match grant_key {
            Some(k) => k,
            None => GrantKey::derive_from_admin_token(admin_token)?,
        };
        Ok(AdminAuth {
            admin_token: Some(admin_token.trim().to_owned()),
            grant_key: Some(grant_key),
            scoping: true,
        })
    }
}

/// Who is calling, once the credential was checked.
#[derive(Debug, Clone)]
pub enum Principal {
    /// The admin token (or a node without authentication).
    Admin,
    /// A client with a verified, unexpired grant for this node.
    Client(Arc<Grant>),
}

impl Principal {
    /// The client id, for a client.
    pub fn client_id(&self) -> Option<&str> {
        match self {
            Principal::Admin => None,
            Principal::Client(g) => Some(&g.client_id),
        }
    }
}

/// The current time in unix milliseconds.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

fn unauthorized(code: &'static str, message: String) -> Response {
    let mut r = ApiError::new(StatusCode::UNAUTHORIZED, code, message).into_response();
    r.headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    r
}

/// The 403 of a caller whose credential is valid but does not allow the request.
pub fn forbidden(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::FORBIDDEN, "forbidden", message.into())
}

/// Verifies `text` as a grant for this node (`node_id`: the id the metadata service
/// gave it; 0 while unregistered) at `now_ms`.
pub fn verify_grant(
    text: &str,
    key: Option<&GrantKey>,
    node_id: &AtomicU64,
    now_ms: u64,
) -> Result<Grant, (&'static str, String)> {
    let Some(key) = key else {
        return Err((
            "grants_disabled",
            "this memory node has no grant key, so it accepts no grants".to_owned(),
        ));
    };
    let grant = Grant::verify(text, key).map_err(|e| ("invalid_grant", e.to_string()))?;
    let id = node_id.load(Ordering::Acquire);
    if id == 0 {
        return Err((
            "not_registered",
            "this memory node has no id from the metadata service yet, so it cannot check whom a grant is for".to_owned(),
        ));
    }
    if grant.memnode_id != id {
        return Err((
            "invalid_grant",
            format!(
                "the grant is for memory node {}, this is memory node {id}",
                grant.memnode_id
            ),
        ));
    }
    if grant.expired_at(now_ms) {
        return Err((
            "grant_expired",
            format!(
                "the grant expired at {} (unix ms); ask the metadata service for a fresh one",
                grant.expires_at_ms
            ),
        ));
    }
    Ok(grant)
}

/// Whether `path` is served to anyone (liveness and metrics).
fn public(path: &str) -> bool {
    matches!(path, "/healthz" | "/metrics" | "/v1/openapi.json")
}

/// The middleware: checks the credential and records the [`Principal`] in the
/// request's extensions.
pub async fn authenticate(State(s): State<AdminState>, mut req: Request, next: Next) -> Response {
    if public(req.uri().path()) {
        return next.run(req).await;
    }
    let offered = dmkv_service::auth::bearer_token(req.headers()).map(str::to_owned);
    let principal = match (&s.auth.admin_token, offered) {
        (Some(token), Some(offered))
            if dmkv_service::auth::token_matches(offered.as_bytes(), token.as_bytes()) =>
        {
            Principal::Admin
        }
        (token, Some(offered)) => {
            match verify_grant(&offered, s.auth.grant_key.as_ref(), &s.node_id, now_ms()) {
                Ok(g) => Principal::Client(Arc::new(g)),
                // Without a token the node is open: a caller whose bearer is no valid
                // grant is an administrator like everyone else.
                Err(_) if token.is_none() => Principal::Admin,
                Err((code, message)) => return unauthorized(code, message),
            }
        }
        (None, None) => Principal::Admin,
        (Some(_), None) => {
            return unauthorized(
                "unauthorized",
                "this request needs `Authorization: Bearer <memnode admin token or grant>`"
                    .to_owned(),
            );
        }
    };
    req.extensions_mut().insert(principal);
    next.run(req).await
}
