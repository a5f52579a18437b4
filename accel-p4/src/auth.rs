//! Who may call the switch's admin API: the holder of the admin token (operators and
//! the metadata service), or a client presenting a grant.
//!
//! The switch is started with the memory node admin token (it presents it when it
//! creates its clients' responders); the same token guards its own admin API, and
//! grants are verified with the key derived from it, exactly as memory nodes verify
//! them. Every route but `GET /healthz`, `GET /metrics` and `GET /v1/openapi.json` needs
//! `Authorization: Bearer <credential>`:
//!
//! * the admin token (compared in constant time): every route, and a queue pair made
//!   through `POST /v1/qps` has the switch's whole-region access;
//! * a grant the metadata service signed: only the client routes — `POST /v1/qps` (a
//!   connection confined to the grant's windows), `POST /v1/routes/{conn}/grant` and
//!   `DELETE /v1/routes/{conn}` (its own connections), `PUT /v1/latch/regions` (tuples
//!   inside a read-write window of the grant), `GET /v1/mirrors` (the replica sets and
//!   their alias keys, for switch replication of writes). Anything else is 403.
//!
//! A switch without a token ([`SwitchAuth::open`]: memory nodes without
//! authentication, or `--insecure-no-auth`) treats every caller as an administrator,
//! but still confines the connections of callers that present a valid grant.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use dmkv_api::ErrorBody;
use dmkv_api::grant::{Grant, GrantError, GrantKey};

/// The admin API's credentials.
#[derive(Clone, Default)]
pub struct SwitchAuth {
    /// The admin token (`None`: no authentication; every caller is an administrator).
    pub admin_token: Option<String>,
    /// The key grants are verified with (`None`: grants are refused).
    pub grant_key: Option<GrantKey>,
}

impl std::fmt::Debug for SwitchAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SwitchAuth")
            .field("admin_token", &self.admin_token.as_ref().map(|_| ".."))
            .field("grant_key", &self.grant_key)
            .finish()
    }
}

impl SwitchAuth {
    /// No authentication, no grants.
    pub fn open() -> SwitchAuth {
        SwitchAuth::default()
    }

    /// The admin API guarded by the memory node admin token `token`; grants verified
    /// with the key derived from it, or with `grant_key` when given (the memory nodes'
    /// `--grant-key-file`).
    pub fn secured(token: &str, grant_key: Option<GrantKey>) -> Result<SwitchAuth, GrantError> {
        let grant_key = match grant_key {
            Some(k) => k,
            None => GrantKey::derive_from_admin_token(token)?,
        };
        Ok(SwitchAuth {
            admin_token: Some(token.trim().to_owned()),
            grant_key: Some(grant_key),
        })
    }

    /// An open API that still verifies grants with `grant_key` (memory nodes that
    /// issue grants, a switch run with `--insecure-no-auth`).
    pub fn open_with_grants(grant_key: GrantKey) -> SwitchAuth {
        SwitchAuth {
            admin_token: None,
            grant_key: Some(grant_key),
        }
    }
}

/// Who is calling, once the credential was checked.
#[derive(Debug, Clone)]
pub enum Principal {
    /// The admin token (or a switch without authentication).
    Admin,
    /// A client with a verified, unexpired grant.
    Client(Arc<Grant>),
}

/// The current time in unix milliseconds.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

fn error(status: StatusCode, code: &'static str, message: String) -> Response {
    let body = ErrorBody {
        error: message,
        code: code.to_owned(),
    };
    let mut r = (status, axum::Json(body)).into_response();
    if status == StatusCode::UNAUTHORIZED {
        r.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    r
}

/// Verifies `text` as an unexpired grant under `key`.
pub fn verify_grant(text: &str, key: Option<&GrantKey>) -> Result<Grant, (&'static str, String)> {
    let Some(key) = key else {
        return Err((
            "grants_disabled",
            "this switch has no grant key (it runs without the memory node admin token), so it accepts no grants".to_owned(),
        ));
    };
    let grant = Grant::verify(text, key).map_err(|e| ("invalid_grant", e.to_string()))?;
    if grant.expired_at(now_ms()) {
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

/// Whether `path` is served to anyone (liveness, metrics and the API's document).
pub fn public(path: &str) -> bool {
    matches!(path, "/healthz" | "/metrics" | "/v1/openapi.json")
}

/// Whether a client holding a grant may call `method path`.
pub fn client_route(method: &Method, path: &str) -> bool {
    let segments: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    match (method, segments.as_slice()) {
        (&Method::POST, ["", "v1", "qps"]) => true,
        (&Method::GET, ["", "v1", "mirrors"]) => true,
        (&Method::PUT, ["", "v1", "latch", "regions"]) => true,
        (&Method::DELETE, ["", "v1", "routes", conn]) => conn.parse::<u8>().is_ok(),
        (&Method::POST, ["", "v1", "routes", conn, "grant"]) => conn.parse::<u8>().is_ok(),
        _ => false,
    }
}

/// The middleware: checks the credential, refuses a grant on an administrator's
/// route, and records the [`Principal`] in the request's extensions.
pub async fn authenticate(
    State(auth): State<Arc<SwitchAuth>>,
    mut req: Request,
    next: Next,
) -> Response {
    if public(req.uri().path()) {
        return next.run(req).await;
    }
    let offered = dmkv_service::auth::bearer_token(req.headers()).map(str::to_owned);
    let principal = match (&auth.admin_token, offered) {
        (Some(token), Some(offered))
            if dmkv_service::auth::token_matches(offered.as_bytes(), token.as_bytes()) =>
        {
            Principal::Admin
        }
        (token, Some(offered)) => match verify_grant(&offered, auth.grant_key.as_ref()) {
            Ok(g) => Principal::Client(Arc::new(g)),
            // Without a token the switch is open: a caller whose bearer is no valid
            // grant is an administrator like everyone else.
            Err(_) if token.is_none() => Principal::Admin,
            Err((code, message)) => return error(StatusCode::UNAUTHORIZED, code, message),
        },
        (None, None) => Principal::Admin,
        (Some(_), None) => {
            return error(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "this request needs `Authorization: Bearer <memnode admin token or grant>`"
                    .to_owned(),
            );
        }
    };
    if matches!(principal, Principal::Client(_)) && !client_route(req.method(), req.uri().path()) {
        return error(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!(
                "{} {} needs the admin token; a grant allows only POST /v1/qps, POST \
                 /v1/routes/{{conn}}/grant, DELETE /v1/routes/{{conn}}, PUT \
                 /v1/latch/regions and GET /v1/mirrors",
                req.method(),
                req.uri().path()
            ),
        );
    }
    req.extensions_mut().insert(principal);
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_reach_only_the_client_routes() {
        assert!(client_route(&Method::POST, "/v1/qps"));
        assert!(client_route(&Method::PUT, "/v1/latch/regions"));
        assert!(client_route(&Method::DELETE, "/v1/routes/7"));
        assert!(client_route(&Method::POST, "/v1/routes/7/grant"));
        assert!(!client_route(&Method::POST, "/v1/routes"));
        assert!(!client_route(&Method::DELETE, "/v1/routes/300"));
        assert!(!client_route(&Method::GET, "/v1/routes"));
        assert!(!client_route(&Method::PUT, "/v1/mode"));
        assert!(!client_route(&Method::PUT, "/v1/faults"));
        assert!(!client_route(&Method::PUT, "/v1/registers/mode/0"));
        assert!(!client_route(&Method::GET, "/v1/tables"));
        assert!(!client_route(&Method::POST, "/v1/replace/mux"));
    }
}
