//! The admin HTTP API (axum).
//!
//! | route | answer |
//! |---|---|
//! | `GET /healthz` | 200 `{"status":"ok",...}` |
//! | `GET /metrics` | Prometheus text (OpenMetrics when asked for): per-function counters, route lookups, Clover steering, socket counters, mode, build info, `process_*` ([`crate::metrics`]) |
//! | `GET /v1/switch` | the switch's addresses and mode |
//! | `GET /v1/mode`, `PUT /v1/mode` | `{"mode": bits, "functions": [names]}`; PUT takes either |
//! | `GET /v1/counters` | counters by function |
//! | `GET /v1/registers` | every register: name, width, size, kind, control |
//! | `GET /v1/registers/{name}` | `{"name", "values": [[index, value], ...]}` (non-zero cells) |
//! | `PUT /v1/registers/{name}/{index}` | `{"value": n}` (control-plane write) |
//! | `GET /v1/tables` | every table's entries |
//! | `GET /v1/routes`, `POST /v1/routes`, `DELETE /v1/routes/{conn}` | connections |
//! | `POST /v1/qps` | create a memnode QP through the switch ([`SwitchQpRequest`]); with a grant as the credential, a connection confined to the grant's windows |
//! | `POST /v1/routes/{conn}/grant` | give a scoped connection another or a newer grant (`{"grant": ...}`) |
//! | `PUT /v1/atomics/range` | `{"rkey", "base_va", "slots", "first_slot"}` |
//! | `GET /v1/faults`, `PUT /v1/faults` | [`FaultSettings`] |
//! | `GET /v1/replace/mux`, `POST /v1/replace/mux` | multiplexed QPs; POST `{"memnode": admin URL}` creates one ([`MuxRequest`]) |
//! | `GET /v1/replace/locks`, `PUT /v1/replace/locks` | tracked lock words; PUT `{"rkey", "va", "mux"}` ([`LockEntry`]) |
//! | `DELETE /v1/replace/locks/{slot}` | stop tracking a word |
//! | `GET /v1/latch/regions`, `PUT /v1/latch/regions` | switch-latched tuple regions; PUT `{"rkey", "base_va", "stride_log2", "tuples", "first_tuple"}` ([`LatchRegionRequest`]) |
//! | `GET /v1/steer`, `PUT /v1/steer` | Clover steering: tracked keys (chain ids) and node size classes, quiet period after a restart ([`crate::control::SteerSettings`]); GET adds the steering counters |
//!
//! Errors are JSON `{"error": "...", "code": "..."}` like the memnode's. Every route but
//! `/healthz` and `/metrics` needs a credential ([`crate::auth`]): the admin token, or
//! a grant for the client routes.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Extension, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use dmkv_api::ErrorBody;
use dmkv_api::switch::LatchRegionRequest;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::auth::{Principal, SwitchAuth};
use crate::control::{
    Control, ControlError, FaultSettings, LockEntry, MuxRequest, Route, SwitchQpRequest,
};
use crate::io_stats::IoStats;
use crate::model::{AtomicRange, LatchRegion};
use crate::spec::{self, RegisterKind};
use dmkv_api::grant::GrantAccess;
use dmkv_api::switch::SwitchGrantRequest;

/// What the handlers share.
#[derive(Clone)]
pub struct AdminState {
    /// The control plane.
    pub control: Arc<Control>,
    /// Socket counters.
    pub io: Arc<IoStats>,
    /// Start time.
    pub started: Instant,
    /// Who may call what.
    pub auth: Arc<SwitchAuth>,
}

dmkv_service::api! {
    /// The admin API's conventions for the service kit: errors carry [`ErrorBody`];
    /// bodies up to axum's default limit (the router sets none).
    SwitchApi: ErrorBody, 2 << 20
}

/// An error answer: status, stable code, message.
struct ApiError(StatusCode, &'static str, String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        dmkv_service::ApiError::<SwitchApi>::new(self.0, self.1, self.2).into_response()
    }
}

impl From<ControlError> for ApiError {
    fn from(e: ControlError) -> ApiError {
        let (status, code) = match &e {
            ControlError::Invalid(_) => (StatusCode::UNPROCESSABLE_ENTITY, "invalid_request"),
            ControlError::Conflict(_) => (StatusCode::CONFLICT, "conflict"),
            ControlError::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            ControlError::Memnode(_) => (StatusCode::BAD_GATEWAY, "memnode_error"),
            ControlError::State(_) => (StatusCode::INTERNAL_SERVER_ERROR, "state_file"),
            ControlError::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
        };
        ApiError(status, code, e.to_string())
    }
}

type ApiResult<T> = Result<T, ApiError>;

/// The router.
pub fn router(state: AdminState) -> Router {
    Router::new()
        .route("/healthz", get(health))
        .route("/metrics", get(metrics))
        .route("/v1/switch", get(switch_info))
        .route("/v1/mode", get(get_mode).put(put_mode))
        .route("/v1/counters", get(counters))
        .route("/v1/registers", get(registers))
        .route("/v1/registers/{name}", get(register))
        .route("/v1/registers/{name}/{index}", put(put_register))
        .route("/v1/tables", get(tables))
        .route("/v1/routes", get(routes).post(post_route))
        .route("/v1/routes/{conn}", axum::routing::delete(delete_route))
        .route("/v1/routes/{conn}/grant", post(post_route_grant))
        .route("/v1/qps", post(post_qp))
        .route("/v1/atomics/range", put(put_range))
        .route("/v1/faults", get(get_faults).put(put_faults))
        .route("/v1/replace/mux", get(get_muxes).post(post_mux))
        .route("/v1/replace/locks", get(get_locks).put(put_lock))
        .route(
            "/v1/replace/locks/{slot}",
            axum::routing::delete(delete_lock),
        )
        .route("/v1/latch/regions", get(get_regions).put(put_region))
        .route("/v1/steer", get(get_steer).put(put_steer))
        .fallback(|| async { ApiError(StatusCode::NOT_FOUND, "not_found", "no such route".into()) })
        .layer(axum::middleware::from_fn_with_state(
            state.auth.clone(),
            crate::auth::authenticate,
        ))
        .layer(axum::middleware::from_fn(
            dmkv_service::trace::trace_requests,
        ))
        .with_state(state)
}

async fn health(State(s): State<AdminState>) -> Json<Value> {
    Json(json!({
        "status": "ok",
        "uptime_seconds": s.started.elapsed().as_secs(),
        "routes": s.control.state().routes.len(),
    }))
}

fn mode_json(mode: u32) -> Value {
    let functions: Vec<&str> = spec::mode::ALL
        .iter()
        .filter(|(_, b)| mode & b != 0)
        .map(|(n, _)| *n)
        .collect();
    json!({ "mode": mode, "functions": functions })
}

async fn switch_info(State(s): State<AdminState>) -> Json<Value> {
    let mode = s.control.pipeline().mode();
    Json(json!({
        "client_side": s.control.client_side(),
        "memnode_side": s.control.memnode_side(),
        "mode": mode_json(mode),
        "spec_version": spec::SPEC_VERSION,
    }))
}

async fn get_mode(State(s): State<AdminState>) -> Json<Value> {
    Json(mode_json(s.control.pipeline().mode()))
}

/// `PUT /v1/mode` body.
#[derive(Debug, Deserialize)]
struct ModeBody {
    mode: Option<u32>,
    functions: Option<Vec<String>>,
}

/// Parse mode bits from function names.
pub fn parse_functions(names: &[String]) -> Result<u32, String> {
    let mut bits = 0;
    for n in names {
        let (_, b) = spec::mode::ALL
            .iter()
            .find(|(name, _)| name == n)
            .ok_or_else(|| format!("unknown function {n:?}"))?;
        bits |= b;
    }
    Ok(bits)
}

async fn put_mode(
    State(s): State<AdminState>,
    Json(body): Json<ModeBody>,
) -> ApiResult<Json<Value>> {
    let bits = match (body.mode, body.functions) {
        (Some(m), None) => m,
        (None, Some(f)) => parse_functions(&f)
            .map_err(|e| ApiError(StatusCode::UNPROCESSABLE_ENTITY, "invalid_request", e))?,
        _ => {
            return Err(ApiError(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_request",
                "give exactly one of `mode` and `functions`".into(),
            ));
        }
    };
    let unimplemented = bits & !spec::mode::IMPLEMENTED;
    if unimplemented != 0 {
        return Err(ApiError(
            StatusCode::UNPROCESSABLE_ENTITY,
            "not_implemented",
            format!("mode bits {unimplemented:#x} name functions not implemented yet"),
        ));
    }
    s.control.set_mode(bits)?;
    Ok(Json(mode_json(bits)))
}

async fn counters(State(s): State<AdminState>) -> Json<Value> {
    Json(serde_json::to_value(s.control.pipeline().counters()).unwrap_or_default())
}

async fn registers(State(s): State<AdminState>) -> Json<Value> {
    let list: Vec<Value> = spec::REGISTERS
        .iter()
        .map(|r| {
            json!({
                "name": r.name,
                "width": r.width,
                "size": r.size,
                "kind": if r.kind == RegisterKind::Pair { "pair" } else { "single" },
                "control": r.control,
                "doc": r.doc,
            })
        })
        .collect();
    let violations: u64 = s
        .control
        .pipeline()
        .registers()
        .iter()
        .map(|r| r.violations())
        .sum();
    Json(json!({ "registers": list, "access_violations": violations }))
}

async fn register(State(s): State<AdminState>, Path(name): Path<String>) -> ApiResult<Json<Value>> {
    let p = s.control.pipeline();
    let r = p.register(&name).ok_or_else(|| {
        ApiError(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no register {name}"),
        )
    })?;
    let values: Vec<(usize, u64)> = r
        .dump()
        .into_iter()
        .enumerate()
        .filter(|(_, v)| *v != 0)
        .collect();
    Ok(Json(
        json!({ "name": name, "size": r.spec().size, "values": values }),
    ))
}

#[derive(Debug, Deserialize)]
struct ValueBody {
    value: u64,
}

async fn put_register(
    State(s): State<AdminState>,
    Path((name, index)): Path<(String, usize)>,
    Json(body): Json<ValueBody>,
) -> ApiResult<Json<Value>> {
    let mut p = s.control.pipeline();
    let r = p.register_mut(&name).ok_or_else(|| {
        ApiError(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no register {name}"),
        )
    })?;
    if index >= r.spec().size {
        return Err(ApiError(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_request",
            format!("index {index} beyond {}", r.spec().size),
        ));
    }
    r.cp_write(index, body.value);
    Ok(Json(
        json!({ "name": name, "index": index, "value": r.cp_read(index) }),
    ))
}

#[derive(Serialize)]
struct Entry<K, A> {
    key: K,
    action: A,
}

async fn tables(State(s): State<AdminState>) -> Json<Value> {
    let p = s.control.pipeline();
    let t = &p.tables;
    let entries = |v: Vec<Value>| Value::Array(v);
    Json(json!({
        "route_up": entries(t.route_up.entries().map(|(k, a)| json!(Entry { key: k, action: a })).collect()),
        "route_down": entries(t.route_down.entries().map(|(k, a)| json!(Entry { key: k, action: a })).collect()),
        "atomic_range": entries(t.atomic_range.entries().map(|(k, a)| json!(Entry { key: k, action: a })).collect()),
        "fault_policy": entries(t.fault_policy.entries().map(|(k, a)| json!(Entry { key: k, action: a })).collect()),
        "tracked_lock": entries(t.tracked_lock.entries().map(|(k, a)| json!(Entry { key: k, action: a })).collect()),
        "mux_up": entries(t.mux_up.entries().map(|(k, a)| json!(Entry { key: k, action: a })).collect()),
        "mux_down": entries(t.mux_down.entries().map(|(k, a)| json!(Entry { key: k, action: a })).collect()),
        "conn_client": entries(t.conn_client.entries().map(|(k, a)| json!(Entry { key: k, action: a })).collect()),
        "steer_keys": entries(t.steer_keys.entries().map(|(k, a)| json!(Entry { key: k, action: a })).collect()),
        "steer_classes": entries(t.steer_classes.entries().map(|(k, _)| json!(k)).collect()),
        "latch_region": entries(t.latch_region.entries().map(|(k, a)| json!(Entry { key: k, action: a })).collect()),
    }))
}

async fn routes(State(s): State<AdminState>) -> Json<Value> {
    Json(json!({ "routes": s.control.state().routes }))
}

async fn post_route(
    State(s): State<AdminState>,
    Json(route): Json<Route>,
) -> ApiResult<(StatusCode, Json<Route>)> {
    Ok((StatusCode::CREATED, Json(s.control.install(route, true)?)))
}

/// A client may act on connection `conn` only if it is scoped and its own.
fn own_connection(s: &AdminState, principal: &Principal, conn: u8) -> ApiResult<()> {
    let Principal::Client(g) = principal else {
        return Ok(());
    };
    match s.control.scope(conn) {
        Some(scope) if scope.client_id == g.client_id => Ok(()),
        _ => Err(ApiError(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!("connection {conn} is not one of client {:?}'s", g.client_id),
        )),
    }
}

async fn delete_route(
    State(s): State<AdminState>,
    Extension(principal): Extension<Principal>,
    Path(conn): Path<u8>,
) -> ApiResult<StatusCode> {
    own_connection(&s, &principal, conn)?;
    s.control.remove(conn)?;
    Ok(StatusCode::NO_CONTENT)
}

async fn post_route_grant(
    State(s): State<AdminState>,
    Extension(principal): Extension<Principal>,
    Path(conn): Path<u8>,
    Json(body): Json<SwitchGrantRequest>,
) -> ApiResult<Json<Value>> {
    own_connection(&s, &principal, conn)?;
    let grant = crate::auth::verify_grant(&body.grant, s.auth.grant_key.as_ref())
        .map_err(|(code, message)| ApiError(StatusCode::UNPROCESSABLE_ENTITY, code, message))?;
    s.control.give_grant(conn, &grant)?;
    let tables: Vec<String> = s
        .control
        .scope(conn)
        .map(|sc| sc.by_table.keys().cloned().collect())
        .unwrap_or_default();
    Ok(Json(json!({ "conn": conn, "tables": tables })))
}

async fn post_qp(
    State(s): State<AdminState>,
    Extension(principal): Extension<Principal>,
    Json(req): Json<SwitchQpRequest>,
) -> Response {
    let control = s.control.clone();
    let grant = match principal {
        Principal::Client(g) => Some(g),
        Principal::Admin => None,
    };
    match tokio::task::spawn_blocking(move || control.create_qp(&req, grant.as_deref())).await {
        Ok(Ok(resp)) => (StatusCode::CREATED, Json(resp)).into_response(),
        Ok(Err(e)) => ApiError::from(e).into_response(),
        Err(e) => {
            ApiError(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()).into_response()
        }
    }
}

#[derive(Debug, Deserialize)]
struct RangeBody {
    rkey: u32,
    #[serde(flatten)]
    range: AtomicRange,
}

async fn put_range(
    State(s): State<AdminState>,
    Json(body): Json<RangeBody>,
) -> ApiResult<Json<Value>> {
    s.control.set_atomic_range(body.rkey, body.range)?;
    Ok(Json(json!({ "rkey": body.rkey, "range": body.range })))
}

async fn get_faults(State(s): State<AdminState>) -> Json<FaultSettings> {
    Json(s.control.state().faults)
}

async fn get_steer(State(s): State<AdminState>) -> Json<Value> {
    let c = s.control.pipeline().counters();
    Json(json!({
        "settings": s.control.state().steer,
        "write_steer": c.write_steer,
        "read_steer": c.read_steer,
    }))
}

async fn put_steer(
    State(s): State<AdminState>,
    Json(body): Json<crate::control::SteerSettings>,
) -> ApiResult<Json<crate::control::SteerSettings>> {
    s.control.set_steering(body.clone())?;
    Ok(Json(body))
}

async fn put_faults(
    State(s): State<AdminState>,
    Json(body): Json<FaultSettings>,
) -> ApiResult<Json<FaultSettings>> {
    s.control.set_faults(body)?;
    Ok(Json(body))
}

async fn get_muxes(State(s): State<AdminState>) -> Json<Value> {
    Json(json!({ "muxes": s.control.state().muxes }))
}

async fn post_mux(State(s): State<AdminState>, Json(req): Json<MuxRequest>) -> Response {
    let control = s.control.clone();
    match tokio::task::spawn_blocking(move || control.create_mux(&req)).await {
        Ok(Ok(mux)) => (StatusCode::CREATED, Json(mux)).into_response(),
        Ok(Err(e)) => ApiError::from(e).into_response(),
        Err(e) => {
            ApiError(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()).into_response()
        }
    }
}

async fn get_locks(State(s): State<AdminState>) -> Json<Value> {
    Json(json!({ "locks": s.control.state().locks }))
}

async fn put_lock(
    State(s): State<AdminState>,
    Json(body): Json<LockEntry>,
) -> ApiResult<Json<LockEntry>> {
    Ok(Json(s.control.track_lock(body)?))
}

async fn delete_lock(State(s): State<AdminState>, Path(slot): Path<u32>) -> ApiResult<StatusCode> {
    s.control.untrack_lock(slot)?;
    Ok(StatusCode::NO_CONTENT)
}

async fn get_regions(State(s): State<AdminState>) -> Json<Value> {
    let regions: Vec<Value> = s
        .control
        .state()
        .latch_regions
        .iter()
        .map(|(rkey, r)| json!({ "rkey": rkey, "region": r }))
        .collect();
    Json(json!({ "regions": regions }))
}

/// A client may declare a latch region only over tuples inside one read-write window
/// of its grant, in a region one of its connections reaches.
fn region_granted(s: &AdminState, principal: &Principal, body: &LatchRegionRequest) -> bool {
    let Principal::Client(g) = principal else {
        return true;
    };
    if g.access != GrantAccess::ReadWrite || body.stride_log2 >= 64 {
        return false;
    }
    let Some(len) = u64::from(body.tuples).checked_shl(u32::from(body.stride_log2)) else {
        return false;
    };
    let Some(end) = body.base_va.checked_add(len) else {
        return false;
    };
    let state = s.control.state();
    state.scopes.values().any(|scope| {
        scope.client_id == g.client_id
            && scope.memnode_id == g.memnode_id
            && scope.region.rkey == body.rkey
            && g.windows.iter().any(|w| {
                let Some(start) = scope.region.base_va.checked_add(w.offset) else {
                    return false;
                };
                start <= body.base_va && end <= start.saturating_add(w.len)
            })
    })
}

async fn put_region(
    State(s): State<AdminState>,
    Extension(principal): Extension<Principal>,
    Json(body): Json<LatchRegionRequest>,
) -> ApiResult<Json<Value>> {
    if !region_granted(&s, &principal, &body) {
        return Err(ApiError(
            StatusCode::FORBIDDEN,
            "forbidden",
            "the latch region is not inside a read-write window of the grant, on a memory \
             node region one of the client's connections reaches"
                .into(),
        ));
    }
    let region = LatchRegion {
        base_va: body.base_va,
        stride_log2: body.stride_log2,
        tuples: body.tuples,
        first_tuple: body.first_tuple,
    };
    s.control.set_latch_region(body.rkey, region, false)?;
    Ok(Json(json!({ "rkey": body.rkey, "region": region })))
}

async fn metrics(State(s): State<AdminState>, headers: HeaderMap) -> Response {
    let families = crate::metrics::families(&s.control, &s.io);
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    match telemetry::exposition::render("switch", env!("CARGO_PKG_VERSION"), families, accept) {
        Ok((content_type, body)) => ([(header::CONTENT_TYPE, content_type)], body).into_response(),
        Err(_) => ApiError(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "the metrics could not be encoded".to_owned(),
        )
        .into_response(),
    }
}
