//! The admin HTTP API (axum): health, Prometheus metrics, regions, queue pairs.
//!
//! | route | answer |
//! |---|---|
//! | `GET /healthz` | 200 [`Health`] (503 if the data plane stopped) |
//! | `GET /metrics` | 200 Prometheus text exposition (OpenMetrics when the `Accept` header prefers it), build info and `process_*` included |
//! | `GET /v1/node` | 200 [`NodeInfo`] |
//! | `GET /v1/regions` | 200 [`RegionsResponse`] |
//! | `POST /v1/regions/{rkey}/zero` | 200 [`ZeroResponse`] from a [`ZeroRequest`]; 404 unknown rkey, 422 range outside the region |
//! | `GET /v1/qps` | 200 [`QpsResponse`] |
//! | `POST /v1/qps` | 201 [`CreateQpResponse`] (in a [`dmkv_api::memnode::CreatedQp`], with the request ring `?rpc_ring=true` asked for) from a [`CreateQpRequest`] |
//! | `GET /v1/qps/{qpn}` | 200 [`QpInfo`] or 404 |
//! | `POST /v1/qps/{qpn}/grant` | 200 [`QpInfo`] from an [`UpdateGrantRequest`]: a newer grant of the queue pair's client |
//! | `DELETE /v1/qps/{qpn}` | 204 or 404 |
//! | `GET /v1/rdma/qps`, `POST /v1/rdma/qps`, `DELETE /v1/rdma/qps/{qpn}` | RDMA NIC queue pairs ([`crate::admin_rdma`]) |
//! | `GET /v1/openapi.json` | 200 the OpenAPI document ([`openapi`]) |
//!
//! Every route but `/healthz`, `/metrics` and `/v1/openapi.json` needs `Authorization: Bearer` with the
//! admin token or a grant ([`crate::auth`]); 401 otherwise. A grant's holder may read
//! the node and its regions, create a queue pair (scoped to the grant, with its own
//! memory key), and read, re-grant or delete its own queue pairs; anything else is 403.
//!
//! Every error is JSON: [`ErrorBody`] `{"error": "...", "code": "..."}`, with status 400
//! (syntax), 404 (unknown route, QP or region), 405, 409 (too many QPs), 413 (body over 64 KiB),
//! 415 (not JSON) or 422 (well-formed JSON with missing or invalid fields, or JSON that is
//! not an object).

use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use axum::extract::rejection::QueryRejection;
use axum::extract::{DefaultBodyLimit, Extension, Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use dmkv_service::{BodyRejection, JsonObject};
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::{
    CreateQpRequest, CreateQpResponse, ErrorBody, Health, NodeInfo, QpInfo, QpsResponse,
    RegionDescriptor, RegionsResponse, UpdateGrantRequest, ZeroRequest, ZeroResponse,
};
use crate::auth::{self, AdminAuth, Principal, forbidden};
use crate::memory::NodeMemory;
use crate::metrics::Metrics;
use crate::qp_grants::GrantMismatch;
use crate::qps::{GrantContext, QpError, QpTable};
use crate::rpc::RpcStats;
use telemetry::family::{Family, Number, labels};
use verbs::mem::{AccessError, AccessFlags, RemoteMemory, ScopeViolation, ScopeViolations};

/// Largest request body accepted.
pub const MAX_BODY: usize = 64 * 1024;

/// What the handlers share.
#[derive(Debug, Clone)]
pub struct AdminState {
    /// The queue pairs.
    pub qps: Arc<QpTable>,
    /// The counters.
    pub metrics: Arc<Metrics>,
    /// The node's memory.
    pub memory: NodeMemory,
    /// The bound soft-RoCE address.
    pub listen: SocketAddrV4,
    /// When the node started.
    pub started: Instant,
    /// Whether the data plane thread is serving.
    pub dataplane_running: Arc<AtomicBool>,
    /// Datagrams whose handling panicked.
    pub dataplane_panics: Arc<AtomicU64>,
    /// The credentials callers must present.
    pub auth: Arc<AdminAuth>,
    /// The id the metadata service gave this node (0 while unregistered); grants name it.
    pub node_id: Arc<AtomicU64>,
    /// Requests scoped queue pairs refused, by reason.
    pub violations: Arc<ScopeViolations>,
    /// The RPC counters, when the node runs RPC workers.
    pub rpc: Option<Arc<RpcStats>>,
    /// The RDMA NIC path (`--transport rdma`), if the node serves one.
    pub rdma: Option<Arc<dyn crate::rdma_serving::RdmaServing>>,
}

impl AdminState {
    /// The context grants are checked and scoped in, now.
    fn grant_context<'a>(&'a self, region: &'a RegionDescriptor) -> GrantContext<'a> {
        GrantContext {
            region,
            violations: &self.violations,
            scoping: self.auth.scoping,
            now_ms: auth::now_ms(),
        }
    }

    /// The region grants are offsets into.
    fn grant_region(&self) -> Result<RegionDescriptor, ApiError> {
        self.memory.descriptors().into_iter().next().ok_or_else(|| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "no_region",
                "this node registered no region",
            )
        })
    }
}

fn grant_mismatch(e: GrantMismatch) -> ApiError {
    match &e {
        GrantMismatch::NotFound(_) => {
            ApiError::new(StatusCode::NOT_FOUND, "qp_not_found", e.to_string())
        }
        GrantMismatch::OtherClient { .. } => forbidden(e.to_string()),
        GrantMismatch::NotScoped(_) | GrantMismatch::Older { .. } => {
            ApiError::new(StatusCode::CONFLICT, "grant_conflict", e.to_string())
        }
    }
}

/// Only the admin token may do this.
pub(crate) fn admin_only(p: &Principal, what: &str) -> Result<(), ApiError> {
    match p {
        Principal::Admin => Ok(()),
        Principal::Client(_) => Err(forbidden(format!(
            "{what} needs the memory node admin token; a grant does not allow it"
        ))),
    }
}

/// The admin token, or the client queue pair `qpn` belongs to.
fn admin_or_owner(s: &AdminState, p: &Principal, qpn: u32) -> Result<(), ApiError> {
    let Some(client) = p.client_id() else {
        return Ok(());
    };
    match s.qps.owner(qpn) {
        None => Err(qp_not_found(qpn)),
        Some(Some(owner)) if owner == client => Ok(()),
        Some(_) => Err(forbidden(format!(
            "queue pair {qpn} does not belong to client {client:?}"
        ))),
    }
}

dmkv_service::api! {
    /// The admin API's conventions for the service kit: errors carry [`ErrorBody`],
    /// bodies up to [`MAX_BODY`].
    pub AdminApi: ErrorBody, MAX_BODY
}

/// An error answer of the admin API: status, stable code and message.
pub type ApiError = dmkv_service::ApiError<AdminApi>;

impl From<QpError> for ApiError {
    fn from(e: QpError) -> ApiError {
        match &e {
            QpError::Invalid(_) => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_request",
                e.to_string(),
            ),
            QpError::MissingServerAddr(_) => ApiError::new(
                StatusCode::BAD_REQUEST,
                "missing_server_addr",
                e.to_string(),
            ),
            QpError::TooMany(_) => {
                ApiError::new(StatusCode::CONFLICT, "too_many_qps", e.to_string())
            }
        }
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "dmkv memory node admin API",
        description = "Health, metrics, regions and queue pairs of a dmkv memory node. Every route but `/healthz`, `/metrics` and this document needs `Authorization: Bearer` with the node's admin token or a grant the metadata service signed for this node (401 otherwise); a grant's holder may read the node and its regions, create a queue pair scoped to the grant, and read, re-grant or delete its own queue pairs (403 for anything else). Errors are JSON `ErrorBody`."
    ),
    components(schemas(ErrorBody, dmkv_api::schemas::U32Segment))
)]
struct ApiDoc;

/// Every route with its OpenAPI operation.
fn api_router() -> OpenApiRouter<AdminState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(healthz))
        .routes(routes!(metrics))
        .routes(routes!(openapi_json))
        .routes(routes!(node))
        .routes(routes!(regions))
        .routes(routes!(zero_range))
        .routes(routes!(list_qps, create_qp))
        .routes(routes!(get_qp, delete_qp))
        .routes(routes!(update_grant))
        .merge(crate::admin_rdma::routes())
}

/// The admin API's OpenAPI document (served at `GET /v1/openapi.json`): the routes'
/// own answers, the bearer scheme, and the answers of the service kit
/// ([`dmkv_service::openapi::complete`]).
pub fn openapi() -> utoipa::openapi::OpenApi {
    let mut doc = api_router().into_openapi();
    dmkv_service::openapi::add_bearer_scheme(&mut doc);
    dmkv_service::openapi::complete(&mut doc, "ErrorBody");
    dmkv_service::openapi::link(
        &mut doc,
        ("post", "/v1/qps", "201"),
        "/v1/qps/{qpn}",
        &[("qpn", "$response.body#/qpn")],
    );
    doc
}

fn openapi_text() -> &'static str {
    static DOC: OnceLock<String> = OnceLock::new();
    dmkv_service::openapi::rendered(&DOC, openapi)
}

/// This document.
#[utoipa::path(get, path = "/v1/openapi.json", tag = "node",
    responses((status = 200, description = "the OpenAPI document", content_type = "application/json")))]
async fn openapi_json() -> Response {
    dmkv_service::openapi::json_response(openapi_text())
}

/// The admin router over `state`.
pub fn router(state: AdminState) -> Router {
    let (router, _) = api_router().split_for_parts();
    router
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::authenticate,
        ))
        .layer(axum::middleware::from_fn(
            dmkv_service::trace::trace_requests,
        ))
        .layer(DefaultBodyLimit::max(MAX_BODY))
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
        "method not allowed on this route",
    )
}

/// Liveness: 200 while the data plane serves, 503 once it stopped.
#[utoipa::path(get, path = "/healthz", tag = "node",
    responses((status = 200, body = Health),
        (status = 503, description = "the data plane stopped (`status: dataplane_stopped`)", body = Health)))]
async fn healthz(State(s): State<AdminState>) -> Response {
    let running = s.dataplane_running.load(Ordering::SeqCst);
    let body = Health {
        status: if running { "ok" } else { "dataplane_stopped" }.to_owned(),
        qps: s.qps.len(),
        uptime_seconds: s.started.elapsed().as_secs(),
    };
    let status = if running {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body)).into_response()
}

/// Prometheus text exposition (OpenMetrics when the `Accept` header prefers it).
#[utoipa::path(get, path = "/metrics", tag = "node",
    responses((status = 200, description = "the metrics, as Prometheus text or OpenMetrics", content(
        (String = "text/plain"), (String = "application/openmetrics-text")))))]
async fn metrics(State(s): State<AdminState>, headers: HeaderMap) -> Response {
    let mut families = s.metrics.families();
    families.push(Family::gauge_value(
        "dmkv_memnode_dataplane_up",
        "1 while the data plane thread serves soft RoCE",
        u64::from(s.dataplane_running.load(Ordering::SeqCst)),
    ));
    families.push(Family::counter_value(
        "dmkv_memnode_handler_panics_total",
        "Datagrams whose handling panicked (counted as malformed drops as well)",
        s.dataplane_panics.load(Ordering::Relaxed),
    ));
    families.push(Family::counter(
        "dmkv_memnode_access_violations_total",
        "Requests on queue pairs created with a grant that were refused (NAK remote access error), by reason: wrong_rkey, outside_window, rights (a write or atomic under read-only rights), expired",
        ScopeViolation::ALL
            .iter()
            .map(|&r| (labels(&[("reason", r.label())]), Number::Int(s.violations.get(r))))
            .collect(),
    ));
    if let Some(rpc) = &s.rpc {
        families.extend(rpc.snapshot().families());
    }
    if let Some(t) = s.memory.table.lock_table() {
        let st = t.stats();
        families.push(Family::counter_value(
            "dmkv_memnode_nic_lock_acquisitions_total",
            "Atomics that went through the modelled NIC lock table",
            st.acquisitions,
        ));
        families.push(Family::counter_value(
            "dmkv_memnode_nic_lock_collisions_total",
            "Atomics that found their NIC lock slot held and waited",
            st.collisions,
        ));
    }
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    match telemetry::exposition::render("memnode", env!("CARGO_PKG_VERSION"), families, accept) {
        Ok((content_type, body)) => ([(header::CONTENT_TYPE, content_type)], body).into_response(),
        Err(_) => ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "the metrics could not be encoded",
        )
        .into_response(),
    }
}

/// The node description served at `GET /v1/node`.
pub fn node_info(s: &AdminState) -> NodeInfo {
    NodeInfo {
        listen: s.listen,
        data_addr: (!s.listen.ip().is_unspecified()).then_some(s.listen),
        data_port: s.listen.port(),
        capacity: s.memory.capacity(),
        qps: s.qps.len(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        regions: s.memory.descriptors(),
        memnode_id: match s.node_id.load(std::sync::atomic::Ordering::Acquire) {
            0 => None,
            id => Some(id),
        },
    }
}

/// Where the node's data plane is and what it serves.
#[utoipa::path(get, path = "/v1/node", tag = "node",
    security(("bearer" = [])),
    responses((status = 200, body = NodeInfo)))]
async fn node(State(s): State<AdminState>) -> Json<NodeInfo> {
    Json(node_info(&s))
}

/// Every registered region.
#[utoipa::path(get, path = "/v1/regions", tag = "regions",
    security(("bearer" = [])),
    responses((status = 200, body = RegionsResponse)))]
async fn regions(State(s): State<AdminState>) -> Json<RegionsResponse> {
    Json(RegionsResponse {
        regions: s.memory.descriptors(),
    })
}

/// Bytes zeroed per write while a range is zeroed.
const ZERO_STEP: usize = 1 << 20;

/// Zero `[va, va + len)` of region `rkey` (admin token only).
#[utoipa::path(post, path = "/v1/regions/{rkey}/zero", tag = "regions",
    params(("rkey" = dmkv_api::schemas::U32Segment, Path, description = "the region's remote key")),
    request_body = ZeroRequest,
    security(("bearer" = [])),
    responses((status = 200, body = ZeroResponse),
        (status = 400, description = "the rkey does not parse (`invalid_rkey`), or the body is not JSON", body = ErrorBody),
        (status = 404, description = "no region has this rkey (`region_not_found`)", body = ErrorBody),
        (status = 422, description = "the range is not inside the region (`out_of_range`), or the body's fields are invalid", body = ErrorBody)))]
async fn zero_range(
    State(s): State<AdminState>,
    Extension(principal): Extension<Principal>,
    Path(rkey): Path<String>,
    body: Result<JsonObject<ZeroRequest>, BodyRejection>,
) -> Result<Json<ZeroResponse>, ApiError> {
    admin_only(&principal, "zeroing memory")?;
    let JsonObject(req) = body?;
    let rkey = parse_rkey(&rkey)?;
    let table = s.memory.table.clone();
    table
        .check(rkey, req.va, req.len, AccessFlags::NONE)
        .map_err(zero_error)?;
    // Large ranges are zeroed off the async threads, a step at a time.
    let (va, len) = (req.va, req.len);
    let zeroed = tokio::task::spawn_blocking(move || -> Result<u64, AccessError> {
        let zeros = vec![0u8; ZERO_STEP.min(usize::try_from(len).unwrap_or(ZERO_STEP))];
        let mut done = 0u64;
        while done < len {
            let n = (len - done).min(zeros.len() as u64);
            table.write(rkey, va + done, &zeros[..n as usize])?;
            done += n;
        }
        Ok(done)
    })
    .await
    .map_err(ApiError::internal)?
    .map_err(zero_error)?;
    tracing::info!(
        rkey = format_args!("{rkey:#x}"),
        va = format_args!("{va:#x}"),
        len,
        "range zeroed"
    );
    Ok(Json(ZeroResponse { zeroed }))
}

/// Why a range cannot be zeroed: 404 for an unknown region, 422 for anything else
/// (outside the region, overflowing).
fn zero_error(e: AccessError) -> ApiError {
    match e {
        AccessError::UnknownRkey(_) => {
            ApiError::new(StatusCode::NOT_FOUND, "region_not_found", e.to_string())
        }
        _ => ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "out_of_range",
            e.to_string(),
        ),
    }
}

fn parse_rkey(text: &str) -> Result<u32, ApiError> {
    parse_u32_segment(text).ok_or_else(|| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_rkey",
            format!("{text:?} is not an rkey (decimal or 0x-prefixed hex u32)"),
        )
    })
}

/// Every queue pair (admin token only).
#[utoipa::path(get, path = "/v1/qps", tag = "qps",
    security(("bearer" = [])),
    responses((status = 200, body = QpsResponse)))]
async fn list_qps(
    State(s): State<AdminState>,
    Extension(principal): Extension<Principal>,
) -> Result<Json<QpsResponse>, ApiError> {
    admin_only(&principal, "listing every queue pair")?;
    Ok(Json(QpsResponse { qps: s.qps.list() }))
}

/// Create a responder queue pair: with the admin token, with whole-region access; with
/// a grant, scoped to the grant's windows under its own memory key.
#[utoipa::path(post, path = "/v1/qps", tag = "qps",
    params(dmkv_api::memnode::CreateQpQuery),
    request_body = CreateQpRequest,
    security(("bearer" = [])),
    responses((status = 201, body = dmkv_api::memnode::CreatedQp),
        (status = 400, description = "the node listens on 0.0.0.0 and the request names no `server_addr` (`missing_server_addr`), or the body is not JSON", body = ErrorBody),
        (status = 409, description = "the node serves its maximum number of queue pairs (`too_many_qps`)", body = ErrorBody),
        (status = 422, description = "a field is out of range: qpn, psn, pmtu, a non-unicast address, a server_addr that is not this node's (`invalid_request`)", body = ErrorBody)))]
async fn create_qp(
    State(s): State<AdminState>,
    Extension(principal): Extension<Principal>,
    query: Result<Query<dmkv_api::memnode::CreateQpQuery>, QueryRejection>,
    body: Result<JsonObject<CreateQpRequest>, BodyRejection>,
) -> Result<(StatusCode, Json<dmkv_api::memnode::CreatedQp>), ApiError> {
    let Query(query) = query.map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            format!("the query string: {e} (rpc_ring=true|false)"),
        )
    })?;
    let JsonObject(req) = body?;
    let region = match &principal {
        Principal::Client(_) => Some(s.grant_region()?),
        Principal::Admin => None,
    };
    let span = tracing::info_span!(
        "memnode.qp.create",
        client = %req.addr,
        client_qpn = req.qpn,
        qpn = tracing::field::Empty,
    );
    let _entered = span.enter();
    let grant = match (&principal, &region) {
        (Principal::Client(g), Some(region)) => Some(((**g).clone(), s.grant_context(region))),
        _ => None,
    };
    let info = s
        .qps
        .create_with_ring(&req, s.listen, grant, query.rpc_ring)?;
    span.record("qpn", info.qpn);
    s.metrics.on_qp_created(s.qps.len());
    tracing::info!(
        qpn = format_args!("{:#x}", info.qpn),
        client_qpn = format_args!("{:#x}", info.client_qpn),
        client = %info.client_addr,
        pmtu = info.pmtu,
        "queue pair created"
    );
    Ok((
        StatusCode::CREATED,
        Json(dmkv_api::memnode::CreatedQp {
            qp: CreateQpResponse {
                qpn: info.qpn,
                addr: info.server_addr,
                pmtu: info.pmtu,
                client_qpn: info.client_qpn,
                regions: s.memory.descriptors(),
                idle_timeout_ms: s
                    .qps
                    .idle_timeout()
                    .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
                rkey: info.rkey,
                rpc_psn: info.rpc_psn,
                coalesce: s.qps.coalescing(),
            },
            rpc_ring: info.rpc_ring,
        }),
    ))
}

/// Give a queue pair's client a newer grant (same client; replaces the windows of its
/// table or adds a table).
#[utoipa::path(post, path = "/v1/qps/{qpn}/grant", tag = "qps",
    params(("qpn" = dmkv_api::schemas::U32Segment, Path, description = "the responder's queue pair number")),
    request_body = UpdateGrantRequest,
    security(("bearer" = [])),
    responses((status = 200, body = QpInfo),
        (status = 401, description = "the grant in the body does not verify, is for another node, or expired (`invalid_grant`, `grant_expired`, `grants_disabled`, `not_registered`), or the bearer token is wrong", body = ErrorBody),
        (status = 404, description = "no such queue pair (`qp_not_found`)", body = ErrorBody),
        (status = 409, description = "the queue pair was not created with a grant, or the grant is older than the one it holds (`grant_conflict`)", body = ErrorBody)))]
async fn update_grant(
    State(s): State<AdminState>,
    Extension(principal): Extension<Principal>,
    Path(qpn): Path<String>,
    body: Result<JsonObject<UpdateGrantRequest>, BodyRejection>,
) -> Result<Json<QpInfo>, ApiError> {
    let qpn = parse_qpn(&qpn)?;
    let JsonObject(req) = body?;
    admin_or_owner(&s, &principal, qpn)?;
    let grant = auth::verify_grant(
        &req.grant,
        s.auth.grant_key.as_ref(),
        &s.node_id,
        auth::now_ms(),
    )
    .map_err(|(code, message)| ApiError::new(StatusCode::UNAUTHORIZED, code, message))?;
    let region = s.grant_region()?;
    let table = grant.table.clone();
    let info = s
        .qps
        .update_grant(qpn, grant, s.grant_context(&region))
        .map_err(grant_mismatch)?;
    tracing::info!(
        qpn = format_args!("{qpn:#x}"),
        table,
        "queue pair re-granted"
    );
    Ok(Json(info))
}

/// Parses a QPN path segment: decimal or `0x` hexadecimal.
pub(crate) fn parse_qpn(text: &str) -> Result<u32, ApiError> {
    parse_u32_segment(text).ok_or_else(|| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_qpn",
            format!("{text:?} is not a queue pair number (decimal or 0x-prefixed hexadecimal)"),
        )
    })
}

/// A `u32` path segment: decimal or `0x` hexadecimal.
fn parse_u32_segment(text: &str) -> Option<u32> {
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

fn qp_not_found(qpn: u32) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "qp_not_found",
        format!("no queue pair {qpn} ({qpn:#x}) on this node"),
    )
}

/// One queue pair (the admin token, or the client it belongs to).
#[utoipa::path(get, path = "/v1/qps/{qpn}", tag = "qps",
    params(("qpn" = dmkv_api::schemas::U32Segment, Path, description = "the responder's queue pair number")),
    security(("bearer" = [])),
    responses((status = 200, body = QpInfo),
        (status = 404, description = "no such queue pair (`qp_not_found`)", body = ErrorBody)))]
async fn get_qp(
    State(s): State<AdminState>,
    Extension(principal): Extension<Principal>,
    Path(qpn): Path<String>,
) -> Result<Json<QpInfo>, ApiError> {
    let qpn = parse_qpn(&qpn)?;
    admin_or_owner(&s, &principal, qpn)?;
    s.qps.info(qpn).map(Json).ok_or_else(|| qp_not_found(qpn))
}

/// Destroy a queue pair (the admin token, or the client it belongs to).
#[utoipa::path(delete, path = "/v1/qps/{qpn}", tag = "qps",
    params(("qpn" = dmkv_api::schemas::U32Segment, Path, description = "the responder's queue pair number")),
    security(("bearer" = [])),
    responses((status = 204, description = "destroyed"),
        (status = 404, description = "no such queue pair (`qp_not_found`)", body = ErrorBody)))]
async fn delete_qp(
    State(s): State<AdminState>,
    Extension(principal): Extension<Principal>,
    Path(qpn): Path<String>,
) -> Result<StatusCode, ApiError> {
    let qpn = parse_qpn(&qpn)?;
    admin_or_owner(&s, &principal, qpn)?;
    let span = tracing::info_span!("memnode.qp.delete", qpn);
    let _entered = span.enter();
    if s.qps.delete(qpn) {
        s.metrics.on_qp_deleted(s.qps.len());
        tracing::info!(qpn = format_args!("{qpn:#x}"), "queue pair deleted");
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(qp_not_found(qpn))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_lists_every_route_with_its_answers() {
        let doc: serde_json::Value =
            serde_json::from_str(openapi_text()).expect("the document is JSON");
        let paths = doc["paths"].as_object().expect("paths");
        let mut listed: Vec<&str> = paths.keys().map(String::as_str).collect();
        listed.sort_unstable();
        assert_eq!(
            listed,
            [
                "/healthz",
                "/metrics",
                "/v1/node",
                "/v1/openapi.json",
                "/v1/qps",
                "/v1/qps/{qpn}",
                "/v1/qps/{qpn}/grant",
                "/v1/rdma/qps",
                "/v1/rdma/qps/{qpn}",
                "/v1/regions",
                "/v1/regions/{rkey}/zero",
            ]
        );
        let create = &paths["/v1/qps"]["post"];
        for status in ["201", "400", "401", "403", "409", "413", "415", "422"] {
            assert!(
                create["responses"][status].is_object(),
                "POST /v1/qps {status}"
            );
        }
        assert!(
            paths["/healthz"]["get"]["security"].is_null(),
            "health is public"
        );
        assert!(paths["/v1/qps/{qpn}"]["get"]["responses"]["400"].is_object());
        let qpn = &doc["components"]["schemas"]["CreateQpRequest"]["properties"]["qpn"];
        assert_eq!(qpn["minimum"], 1);
        assert_eq!(qpn["maximum"], 16_777_215);
        assert!(doc["components"]["securitySchemes"]["bearer"].is_object());
        let links = &create["responses"]["201"]["links"];
        assert_eq!(links.as_object().map(|l| l.len()), Some(3), "{links}");
    }

    #[test]
    fn path_numbers_are_parsed_exactly_as_documented() {
        assert_eq!(parse_u32_segment("42"), Some(42));
        assert_eq!(parse_u32_segment("0x2A"), Some(42));
        assert_eq!(parse_u32_segment("0X2a"), Some(42));
        for bad in [" 42", "42 ", "-1", "4294967296", "0x", "0x1FFFFFFFF", ""] {
            assert_eq!(parse_u32_segment(bad), None, "{bad:?}");
        }
    }
}
