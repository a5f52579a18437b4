//! The HTTP API (axum), described by an OpenAPI document (utoipa).
//!
//! | route | answer |
//! |---|---|
//! | `GET /healthz` | 200 [`Health`] |
//! | `GET /metrics` | 200 Prometheus text |
//! | `GET /v1/openapi.json` | 200 the OpenAPI document |
//! | `POST /v1/memnodes` | 201 / 200 [`RegisterMemnodeResponse`] |
//! | `GET /v1/accelerator` | 200 [`AcceleratorInfo`] (`enabled: false` without one) |
//! | `GET /v1/memnodes` | 200 [`MemnodesResponse`] |
//! | `GET /v1/memnodes/{id}` | 200 [`MemnodeInfo`] |
//! | `DELETE /v1/memnodes/{id}` | 204 |
//! | `POST /v1/memnodes/{id}/heartbeat` | 200 [`HeartbeatResponse`] |
//! | `POST /v1/leases` | 201 [`Lease`] |
//! | `GET /v1/leases?client=` | 200 [`LeasesResponse`] |
//! | `GET /v1/leases/{id}` | 200 [`Lease`] |
//! | `DELETE /v1/leases/{id}` | 204 |
//! | `POST /v1/leases/{id}/renew` | 200 [`Lease`] |
//! | `POST /v1/leases/{id}/adopt` | 200 [`Lease`] (table-owned now) / 204 (freed) |
//! | `POST /v1/tables` | 201 [`TableDescription`] |
//! | `GET /v1/tables` | 200 [`TablesResponse`] |
//! | `GET /v1/tables/{name}` | 200 [`TableDescription`] |
//! | `DELETE /v1/tables/{name}` | 204 |
//! | `POST /v1/tables/{name}/chains` | 201 / 200 [`ChainResponse`] |
//! | `GET /v1/tables/{name}/chains?key=` | 200 [`ChainInfo`] (404 when the key has no chain) |
//! | `POST /v1/tables/{name}/chains/{chain_id}/root` | 201 / 200 [`RootResponse`] |
//! | `PUT /v1/tables/{name}/chains/{chain_id}/tail` | 200 [`TailResponse`] |
//! | `GET /v1/tables/{name}/chains/{chain_id}/tail` | 200 [`TailResponse`] |
//!
//! With a token configured, every POST, PUT and DELETE needs `Authorization: Bearer
//! <token>` (401 otherwise); GETs are open. Every error is JSON [`ErrorBody`]: 400
//! (`invalid_json`, `invalid_path`), 401 (`unauthorized`), 404 (`not_found`,
//! `*_not_found`), 405, 409 (`table_exists`, `memnode_conflict`, `memnode_unhealthy`,
//! `wrong_index`, `lease_owned_by_table`, `not_a_data_lease`), 410 (`lease_expired`), 413 (`body_too_large`,
//! over 1 MiB), 415, 422 (`invalid_request`), 500 (`storage_error`), 503
//! (`no_memnodes`), 507 (`out_of_memory`).

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, JsonRejection};
use axum::extract::{DefaultBodyLimit, MatchedPath, Path, Query, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use base64::Engine as _;
use serde::Deserialize;
use tracing::Instrument as _;
use utoipa::OpenApi;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::{
    AcceleratorInfo, AdoptLeaseRequest, ChainInfo, ChainRequest, ChainResponse, CreateLeaseRequest,
    CreateTableRequest, ErrorBody, Health, HeartbeatResponse, Lease, LeasesResponse, MemnodeInfo,
    MemnodesResponse, RegisterMemnodeRequest, RegisterMemnodeResponse, RenewLeaseRequest,
    RootResponse, TableDescription, TablesResponse, TailHint, TailResponse,
};
use crate::catalog::{Catalog, CatalogError};
use crate::clock::Clock;
use crate::metrics::RequestMetrics;

/// Largest request body accepted.
pub const MAX_BODY: usize = 1 << 20;

/// What the handlers share.
#[derive(Debug)]
pub struct Shared {
    /// The catalog.
    pub catalog: Mutex<Catalog>,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// The bearer token mutating requests need, if any.
    pub token: Option<String>,
    /// Counters.
    pub metrics: RequestMetrics,
    /// Start time.
    pub started: Instant,
    /// Scrapes of the memnodes and the accelerator for the dashboard.
    pub cluster: crate::cluster::ClusterView,
    /// The accelerator's client-side UDP address, advertised with its admin URL.
    pub accelerator_data: Option<String>,
}

impl Shared {
    /// Runs `f` on the locked catalog with the current time.
    pub fn with<T>(&self, f: impl FnOnce(&mut Catalog, u64) -> T) -> T {
        let now = self.clock.now_ms();
        let mut c = self.catalog.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut c, now)
    }

    /// Returns the memory of leases past expiry and grace; how many.
    pub fn sweep(&self) -> Result<usize, CatalogError> {
        let sweep = self.with(|c, now| c.reclaim_expired(now))?;
        if !sweep.adopted.is_empty() {
            let bytes = sweep.adopted.iter().map(|l| l.len).sum();
            self.metrics.on_adopted(sweep.adopted.len() as u64, bytes);
        }
        for l in &sweep.adopted {
            tracing::info!(
                lease = l.id,
                client = %l.client,
                table = ?l.table,
                memnode = l.memnode_id,
                bytes = l.len,
                "expired data lease adopted by its table (its memory may hold live values)"
            );
        }
        let reclaimed = sweep.reclaimed;
        if !reclaimed.is_empty() {
            let bytes = reclaimed.iter().map(|l| l.len).sum();
            self.metrics.on_reclaimed(reclaimed.len() as u64, bytes);
            for l in &reclaimed {
                tracing::info!(
                    lease = l.id,
                    client = %l.client,
                    memnode = l.memnode_id,
                    bytes = l.len,
                    "expired lease reclaimed"
                );
            }
        }
        Ok(reclaimed.len())
    }
}

/// The handlers' state.
pub type AppState = Arc<Shared>;

/// Runs `f` on the catalog off the async threads (it may wait for a disk flush).
async fn blocking<T: Send + 'static>(
    s: &AppState,
    f: impl FnOnce(&mut Catalog, u64) -> Result<T, CatalogError> + Send + 'static,
) -> Result<T, ApiError> {
    let s = s.clone();
    tokio::task::spawn_blocking(move || s.with(f))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))?
        .map_err(ApiError::from)
}

/// An error answer: status, stable code and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Machine-readable code.
    pub code: &'static str,
    /// Human-readable message.
    pub message: String,
}

impl ApiError {
    /// An error with `status`, `code` and `message`.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: self.message,
            code: self.code.to_owned(),
        };
        (self.status, Json(body)).into_response()
    }
}

fn too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "body_too_large",
        format!("request body exceeds the {MAX_BODY}-byte limit"),
    )
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> ApiError {
        let text = r.body_text();
        match &r {
            JsonRejection::JsonDataError(_) => {
                ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_request", text)
            }
            JsonRejection::JsonSyntaxError(_) => {
                ApiError::new(StatusCode::BAD_REQUEST, "invalid_json", text)
            }
            JsonRejection::MissingJsonContentType(_) => ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "expected a JSON body with `Content-Type: application/json`",
            ),
            _ if r.status() == StatusCode::PAYLOAD_TOO_LARGE => too_large(),
            _ => ApiError::new(r.status(), "bad_request", text),
        }
    }
}

impl From<CatalogError> for ApiError {
    fn from(e: CatalogError) -> ApiError {
        let msg = e.to_string();
        match e {
            CatalogError::Invalid(_) => {
                ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_request", msg)
            }
            CatalogError::NotFound { code, .. } => ApiError::new(StatusCode::NOT_FOUND, code, msg),
            CatalogError::Conflict { code, .. } => ApiError::new(StatusCode::CONFLICT, code, msg),
            CatalogError::Expired(_) => ApiError::new(StatusCode::GONE, "lease_expired", msg),
            CatalogError::OutOfMemory(_) => {
                ApiError::new(StatusCode::INSUFFICIENT_STORAGE, "out_of_memory", msg)
            }
            CatalogError::NoMemnodes(_) => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "no_memnodes", msg)
            }
            CatalogError::Scrub(_) => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "memnode_unavailable", msg)
            }
            CatalogError::Store(_) => {
                tracing::error!(error = %msg, "persistence failed");
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "storage_error", msg)
            }
        }
    }
}

/// Parses a JSON body that may be empty (then `T::default()`).
fn optional_json<T: Default + serde::de::DeserializeOwned>(
    body: Result<Bytes, BytesRejection>,
) -> Result<T, ApiError> {
    let body = body.map_err(|r| {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            too_large()
        } else {
            ApiError::new(r.status(), "bad_request", r.body_text())
        }
    })?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(&body).map_err(|e| {
        if e.is_data() {
            ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_request",
                format!("invalid request body: {e}"),
            )
        } else {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_json",
                format!("request body is not valid JSON: {e}"),
            )
        }
    })
}

fn parse_id(what: &str, text: &str) -> Result<u64, ApiError> {
    text.parse().map_err(|_| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_path",
            format!("{what} {text:?} is not a decimal 64-bit number"),
        )
    })
}

// ---- middleware ----

/// Counts, times and traces every request: one `http.request` span (info level) with
/// the method, route template, status and latency, and a debug-level event when answered.
async fn count_requests(State(s): State<AppState>, req: Request, next: Next) -> Response {
    let method = req.method().to_string();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "unmatched".to_owned());
    let span = tracing::info_span!(
        "http.request",
        otel.kind = "server",
        http.request.method = %method,
        http.route = %route,
        http.response.status_code = tracing::field::Empty,
        latency_us = tracing::field::Empty,
    );
    let started = Instant::now();
    let resp = next.run(req).instrument(span.clone()).await;
    let elapsed = started.elapsed();
    let status = resp.status().as_u16();
    span.record("http.response.status_code", status);
    span.record("latency_us", elapsed.as_micros() as u64);
    span.in_scope(|| {
        if status >= 500 {
            tracing::warn!(
                status,
                latency_us = elapsed.as_micros() as u64,
                "request failed"
            );
        } else {
            tracing::debug!(
                status,
                latency_us = elapsed.as_micros() as u64,
                "request answered"
            );
        }
    });
    s.metrics.on_request(&method, &route, status);
    s.metrics.on_latency(&method, &route, elapsed);
    resp
}

/// Constant-time comparison (no early exit on the first differing byte).
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether `headers` carry `Authorization: Bearer <token>`.
pub fn authorized(headers: &HeaderMap, token: &str) -> bool {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, rest) = v.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
        })
        .is_some_and(|t| same(t.as_bytes(), token.as_bytes()))
}

async fn require_token(State(s): State<AppState>, req: Request, next: Next) -> Response {
    let open = matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if let Some(token) = &s.token
        && !open
        && !authorized(req.headers(), token)
    {
        let had = req.headers().contains_key(header::AUTHORIZATION);
        let mut resp = ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            if had {
                "the bearer token is wrong"
            } else {
                "this request changes state and needs `Authorization: Bearer <token>`"
            },
        )
        .into_response();
        resp.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer"),
        );
        return resp;
    }
    next.run(req).await
}

// ---- OpenAPI ----

#[derive(OpenApi)]
#[openapi(
    info(
        title = "dmkv metadata service",
        description = "Memnode registry, chunk leases, table catalog and index slow paths of dmkv. Mutating requests need `Authorization: Bearer <token>` when the service has a token."
    ),
    modifiers(&BearerScheme),
    components(schemas(ErrorBody))
)]
struct ApiDoc;

struct BearerScheme;

impl utoipa::Modify for BearerScheme {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

fn api_router() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(healthz))
        .routes(routes!(metrics))
        .routes(routes!(openapi_json))
        .routes(routes!(register_memnode, list_memnodes))
        .routes(routes!(get_memnode, deregister_memnode))
        .routes(routes!(heartbeat))
        .routes(routes!(create_lease, list_leases))
        .routes(routes!(get_lease, free_lease))
        .routes(routes!(renew_lease))
        .routes(routes!(adopt_lease))
        .routes(routes!(create_table, list_tables))
        .routes(routes!(get_table, drop_table))
        .routes(routes!(open_chain, lookup_chain))
        .routes(routes!(publish_root))
        .routes(routes!(put_tail, get_tail))
        .routes(routes!(cluster_stats))
        .routes(routes!(accelerator))
}

/// The OpenAPI document of the API.
pub fn openapi() -> utoipa::openapi::OpenApi {
    api_router().into_openapi()
}

fn openapi_text() -> &'static str {
    static DOC: OnceLock<String> = OnceLock::new();
    DOC.get_or_init(|| {
        openapi()
            .to_pretty_json()
            .expect("the OpenAPI document serialises")
    })
}

/// The router over `state`.
pub fn router(state: AppState) -> Router {
    let (router, _) = api_router().split_for_parts();
    router
        .merge(crate::dashboard::router())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(state.clone(), require_token))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            count_requests,
        ))
        .with_state(state)
}

async fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        "no such route; see /v1/openapi.json",
    )
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "method not allowed on this route; see /v1/openapi.json",
    )
}

// ---- handlers ----

/// Liveness and counts.
#[utoipa::path(get, path = "/healthz", tag = "service",
    responses((status = 200, description = "serving", body = Health)))]
async fn healthz(State(s): State<AppState>) -> Json<Health> {
    let stats = s.with(|c, now| c.stats(now));
    Json(Health {
        status: "ok".into(),
        memnodes: stats.memnodes.len(),
        healthy_memnodes: stats.memnodes.iter().filter(|m| m.2).count(),
        tables: stats.tables.values().sum(),
        leases: stats.leases_active + stats.leases_expired,
        auth: s.token.is_some(),
        uptime_seconds: s.started.elapsed().as_secs(),
    })
}

/// The switch accelerator clients should create their queue pairs through
/// (`POST /v1/qps` on its admin URL), or `enabled: false` when the cluster has none.
#[utoipa::path(get, path = "/v1/accelerator", tag = "service",
    responses((status = 200, description = "the accelerator, if any", body = AcceleratorInfo)))]
async fn accelerator(State(s): State<AppState>) -> Json<AcceleratorInfo> {
    Json(match s.cluster.accelerator() {
        Some(url) => AcceleratorInfo {
            enabled: true,
            admin_url: Some(url.to_owned()),
            data_addr: s.accelerator_data.clone(),
        },
        None => AcceleratorInfo::default(),
    })
}

/// The cluster at a glance (for the dashboard): every memnode's health, capacity and
/// live rates from its scraped `/metrics`, the accelerator's counters, and the
/// service's own request rate and latency.
#[utoipa::path(get, path = "/v1/cluster/stats", tag = "service",
    responses((status = 200, body = crate::cluster::ClusterStats)))]
async fn cluster_stats(
    State(s): State<AppState>,
) -> Result<Json<crate::cluster::ClusterStats>, ApiError> {
    if let Some(cached) = s.cluster.cached() {
        return Ok(Json(cached));
    }
    let s = s.clone();
    let stats = tokio::task::spawn_blocking(move || {
        let (memnodes, stats) = s.with(|c, now| (c.memnodes(now), c.stats(now)));
        let inputs = crate::cluster::Inputs {
            memnodes,
            requests: s.metrics.totals(),
            leases_active: stats.leases_active as u64,
            tables: stats.tables.values().sum::<usize>() as u64,
            uptime_seconds: s.started.elapsed().as_secs(),
        };
        s.cluster.stats(inputs)
    })
    .await
    .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))?;
    Ok(Json(stats))
}

/// Prometheus metrics.
#[utoipa::path(get, path = "/metrics", tag = "service",
    responses((status = 200, description = "Prometheus text exposition", body = String, content_type = "text/plain")))]
async fn metrics(State(s): State<AppState>) -> Response {
    let stats = s.with(|c, now| c.stats(now));
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        s.metrics.render(&stats, s.started.elapsed().as_secs()),
    )
        .into_response()
}

/// This document.
#[utoipa::path(get, path = "/v1/openapi.json", tag = "service",
    responses((status = 200, description = "the OpenAPI document", content_type = "application/json")))]
async fn openapi_json() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], openapi_text()).into_response()
}

/// Register (or re-register, by name) a memnode.
#[utoipa::path(post, path = "/v1/memnodes", tag = "memnodes",
    request_body = RegisterMemnodeRequest,
    security(("bearer" = [])),
    responses(
        (status = 201, description = "registered", body = RegisterMemnodeResponse),
        (status = 200, description = "re-registered", body = RegisterMemnodeResponse),
        (status = 409, description = "data address used by another memnode", body = ErrorBody),
        (status = 422, description = "invalid request", body = ErrorBody)))]
async fn register_memnode(
    State(s): State<AppState>,
    body: Result<Json<RegisterMemnodeRequest>, JsonRejection>,
) -> Result<(StatusCode, Json<RegisterMemnodeResponse>), ApiError> {
    let Json(req) = body?;
    let name = req.name.clone();
    let (resp, created) = blocking(&s, move |c, now| c.register_memnode(req, now)).await?;
    tracing::info!(
        memnode = resp.id,
        name = %name,
        created,
        epoch = resp.epoch,
        "memnode registered"
    );
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(resp)))
}

/// Every memnode with its health and free memory.
#[utoipa::path(get, path = "/v1/memnodes", tag = "memnodes",
    responses((status = 200, body = MemnodesResponse)))]
async fn list_memnodes(State(s): State<AppState>) -> Json<MemnodesResponse> {
    Json(MemnodesResponse {
        memnodes: s.with(|c, now| c.memnodes(now)),
    })
}

/// One memnode.
#[utoipa::path(get, path = "/v1/memnodes/{id}", tag = "memnodes",
    params(("id" = u64, Path, description = "memnode id")),
    responses((status = 200, body = MemnodeInfo), (status = 404, body = ErrorBody)))]
async fn get_memnode(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<MemnodeInfo>, ApiError> {
    let id = parse_id("memnode id", &id)?;
    Ok(Json(s.with(|c, now| c.memnode(id, now))?))
}

/// Remove a memnode; its leases are revoked.
#[utoipa::path(delete, path = "/v1/memnodes/{id}", tag = "memnodes",
    params(("id" = u64, Path, description = "memnode id")),
    security(("bearer" = [])),
    responses((status = 204, description = "removed"), (status = 404, body = ErrorBody)))]
async fn deregister_memnode(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = parse_id("memnode id", &id)?;
    blocking(&s, move |c, _| c.deregister_memnode(id)).await?;
    tracing::info!(memnode = id, "memnode deregistered");
    Ok(StatusCode::NO_CONTENT)
}

/// A memnode is alive.
#[utoipa::path(post, path = "/v1/memnodes/{id}/heartbeat", tag = "memnodes",
    params(("id" = u64, Path, description = "memnode id")),
    security(("bearer" = [])),
    responses((status = 200, body = HeartbeatResponse),
        (status = 404, description = "unknown: register again", body = ErrorBody)))]
async fn heartbeat(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<HeartbeatResponse>, ApiError> {
    let id = parse_id("memnode id", &id)?;
    Ok(Json(s.with(|c, now| c.heartbeat(id, now))?))
}

/// Lease a chunk of remote memory.
#[utoipa::path(post, path = "/v1/leases", tag = "leases",
    request_body = CreateLeaseRequest,
    security(("bearer" = [])),
    responses((status = 201, body = Lease),
        (status = 409, description = "the requested memnode is unhealthy", body = ErrorBody),
        (status = 422, body = ErrorBody),
        (status = 503, description = "no healthy memnode", body = ErrorBody),
        (status = 507, description = "out of memory", body = ErrorBody)))]
async fn create_lease(
    State(s): State<AppState>,
    body: Result<Json<CreateLeaseRequest>, JsonRejection>,
) -> Result<(StatusCode, Json<Lease>), ApiError> {
    let Json(req) = body?;
    let l = blocking(&s, move |c, now| c.create_lease(req, now)).await?;
    tracing::debug!(lease = l.lease_id, client = %l.client, memnode = l.memnode_id, len = l.len, "lease granted");
    Ok((StatusCode::CREATED, Json(l)))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
struct LeaseQuery {
    /// Only this client's leases.
    client: Option<String>,
}

/// Leases, optionally of one client.
#[utoipa::path(get, path = "/v1/leases", tag = "leases", params(LeaseQuery),
    responses((status = 200, body = LeasesResponse)))]
async fn list_leases(
    State(s): State<AppState>,
    Query(q): Query<LeaseQuery>,
) -> Json<LeasesResponse> {
    Json(LeasesResponse {
        leases: s.with(|c, now| c.leases(q.client.as_deref(), now)),
    })
}

/// One lease.
#[utoipa::path(get, path = "/v1/leases/{id}", tag = "leases",
    params(("id" = u64, Path, description = "lease id")),
    responses((status = 200, body = Lease), (status = 404, body = ErrorBody)))]
async fn get_lease(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Lease>, ApiError> {
    let id = parse_id("lease id", &id)?;
    Ok(Json(s.with(|c, now| c.lease(id, now))?))
}

/// Free a lease now.
#[utoipa::path(delete, path = "/v1/leases/{id}", tag = "leases",
    params(("id" = u64, Path, description = "lease id")),
    security(("bearer" = [])),
    responses((status = 204, description = "freed"), (status = 404, body = ErrorBody),
        (status = 409, description = "owned by a table", body = ErrorBody)))]
async fn free_lease(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = parse_id("lease id", &id)?;
    blocking(&s, move |c, _| c.free_lease(id)).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Extend a lease (body optional).
#[utoipa::path(post, path = "/v1/leases/{id}/renew", tag = "leases",
    params(("id" = u64, Path, description = "lease id")),
    request_body(content = RenewLeaseRequest, description = "optional"),
    security(("bearer" = [])),
    responses((status = 200, body = Lease), (status = 404, body = ErrorBody),
        (status = 410, description = "already expired", body = ErrorBody)))]
async fn renew_lease(
    State(s): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Lease>, ApiError> {
    let id = parse_id("lease id", &id)?;
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
    State(s): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let id = parse_id("lease id", &id)?;
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

/// Create a table.
#[utoipa::path(post, path = "/v1/tables", tag = "tables",
    request_body = CreateTableRequest,
    security(("bearer" = [])),
    responses((status = 201, body = TableDescription),
        (status = 409, description = "exists", body = ErrorBody),
        (status = 422, body = ErrorBody),
        (status = 507, description = "no memory for the RACE directory or the in-place tuple area", body = ErrorBody)))]
async fn create_table(
    State(s): State<AppState>,
    body: Result<Json<CreateTableRequest>, JsonRejection>,
) -> Result<(StatusCode, Json<TableDescription>), ApiError> {
    let Json(req) = body?;
    let t = blocking(&s, move |c, now| c.create_table(req, now)).await?;
    tracing::info!(table = %t.name, index = t.index.as_str(), "table created");
    Ok((StatusCode::CREATED, Json(t)))
}

/// Every table.
#[utoipa::path(get, path = "/v1/tables", tag = "tables",
    responses((status = 200, body = TablesResponse)))]
async fn list_tables(State(s): State<AppState>) -> Json<TablesResponse> {
    Json(TablesResponse {
        tables: s.with(|c, _| c.tables()),
    })
}

/// One table (for RACE tables: where the directory is).
#[utoipa::path(get, path = "/v1/tables/{name}", tag = "tables",
    params(("name" = String, Path, description = "table name")),
    responses((status = 200, body = TableDescription), (status = 404, body = ErrorBody)))]
async fn get_table(
    State(s): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<TableDescription>, ApiError> {
    Ok(Json(s.with(|c, _| c.table(&name))?))
}

/// Drop a table with its chains and directory.
#[utoipa::path(delete, path = "/v1/tables/{name}", tag = "tables",
    params(("name" = String, Path, description = "table name")),
    security(("bearer" = [])),
    responses((status = 204, description = "dropped"), (status = 404, body = ErrorBody)))]
async fn drop_table(
    State(s): State<AppState>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    let n = name.clone();
    blocking(&s, move |c, now| c.drop_table(&n, now)).await?;
    tracing::info!(table = %name, "table dropped");
    Ok(StatusCode::NO_CONTENT)
}

/// Insert or open a key's chain (Clover tables): its unique 64-bit id.
#[utoipa::path(post, path = "/v1/tables/{name}/chains", tag = "clover",
    params(("name" = String, Path, description = "table name")),
    request_body = ChainRequest,
    security(("bearer" = [])),
    responses((status = 201, description = "created", body = ChainResponse),
        (status = 200, description = "opened", body = ChainResponse),
        (status = 404, body = ErrorBody), (status = 409, description = "not a clover table", body = ErrorBody),
        (status = 422, body = ErrorBody)))]
async fn open_chain(
    State(s): State<AppState>,
    Path(name): Path<String>,
    body: Result<Json<ChainRequest>, JsonRejection>,
) -> Result<(StatusCode, Json<ChainResponse>), ApiError> {
    let Json(req) = body?;
    let key = base64::engine::general_purpose::STANDARD
        .decode(req.key.as_bytes())
        .map_err(|e| {
            ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_request",
                format!("key is not standard base64: {e}"),
            )
        })?;
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
struct ChainQuery {
    /// The key, standard base64 (percent-encoded in the query).
    key: Option<String>,
}

/// A key's chain without creating it (Clover tables): its id and stored tail hint;
/// 404 `chain_not_found` when the key has none.
#[utoipa::path(get, path = "/v1/tables/{name}/chains", tag = "clover",
    params(("name" = String, Path, description = "table name"), ChainQuery),
    responses((status = 200, body = ChainInfo), (status = 404, body = ErrorBody),
        (status = 409, description = "not a clover table", body = ErrorBody),
        (status = 422, body = ErrorBody)))]
async fn lookup_chain(
    State(s): State<AppState>,
    Path(name): Path<String>,
    Query(q): Query<ChainQuery>,
) -> Result<Json<ChainInfo>, ApiError> {
    let key = q.key.ok_or_else(|| {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_request",
            "the query parameter key (standard base64) is required",
        )
    })?;
    let key = base64::engine::general_purpose::STANDARD
        .decode(key.as_bytes())
        .map_err(|e| {
            ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_request",
                format!("key is not standard base64: {e}"),
            )
        })?;
    Ok(Json(s.with(|c, _| c.lookup_chain(&name, &key))?))
}

/// Publish a chain's root: store this tail hint unless one is stored (put-if-absent).
/// 201 when this hint was stored, 200 with the stored hint (unchanged) when another
/// was there first, so exactly one of several racing publishers wins and each learns
/// which.
#[utoipa::path(post, path = "/v1/tables/{name}/chains/{chain_id}/root", tag = "clover",
    params(("name" = String, Path, description = "table name"),
        ("chain_id" = u64, Path, description = "chain id")),
    request_body = TailHint,
    security(("bearer" = [])),
    responses((status = 201, description = "stored", body = RootResponse),
        (status = 200, description = "another hint was stored first", body = RootResponse),
        (status = 404, body = ErrorBody), (status = 422, body = ErrorBody)))]
async fn publish_root(
    State(s): State<AppState>,
    Path((name, chain)): Path<(String, String)>,
    body: Result<Json<TailHint>, JsonRejection>,
) -> Result<(StatusCode, Json<RootResponse>), ApiError> {
    let chain = parse_id("chain id", &chain)?;
    let Json(hint) = body?;
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
    params(("name" = String, Path, description = "table name"),
        ("chain_id" = u64, Path, description = "chain id")),
    request_body = TailHint,
    security(("bearer" = [])),
    responses((status = 200, body = TailResponse), (status = 404, body = ErrorBody),
        (status = 422, body = ErrorBody)))]
async fn put_tail(
    State(s): State<AppState>,
    Path((name, chain)): Path<(String, String)>,
    body: Result<Json<TailHint>, JsonRejection>,
) -> Result<Json<TailResponse>, ApiError> {
    let chain = parse_id("chain id", &chain)?;
    let Json(hint) = body?;
    Ok(Json(
        blocking(&s, move |c, now| c.put_tail(&name, chain, hint, now)).await?,
    ))
}

/// Where a chain's tail was last seen (a client cache miss).
#[utoipa::path(get, path = "/v1/tables/{name}/chains/{chain_id}/tail", tag = "clover",
    params(("name" = String, Path, description = "table name"),
        ("chain_id" = u64, Path, description = "chain id")),
    responses((status = 200, body = TailResponse), (status = 404, body = ErrorBody)))]
async fn get_tail(
    State(s): State<AppState>,
    Path((name, chain)): Path<(String, String)>,
) -> Result<Json<TailResponse>, ApiError> {
    let chain = parse_id("chain id", &chain)?;
    Ok(Json(s.with(|c, _| c.tail(&name, chain))?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens() {
        let mut h = HeaderMap::new();
        assert!(!authorized(&h, "t"));
        h.insert(header::AUTHORIZATION, "Bearer t".parse().unwrap());
        assert!(authorized(&h, "t"));
        assert!(!authorized(&h, "tt"));
        h.insert(header::AUTHORIZATION, "bearer  t ".parse().unwrap());
        assert!(authorized(&h, "t"));
        h.insert(header::AUTHORIZATION, "Basic t".parse().unwrap());
        assert!(!authorized(&h, "t"));
    }
}
