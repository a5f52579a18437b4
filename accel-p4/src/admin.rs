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
//! | `POST /v1/copies`, `GET /v1/copies`, `GET /v1/copies/{id}` | switch-initiated copies memnode → memnode (zero-sided RDMA): start one ([`CopyRequest`]), see their progress ([`CopyStatus`]) |
//! | `GET /v1/mirrors`, `POST /v1/mirrors` | replica sets the switch replicates WRITEs to (switch replication of writes): list them (also with a grant), install one ([`MirrorRequest`]: primary and backups by admin URL; answers [`MirrorSet`] with the alias key clients WRITE under; with `balance_reads` also read lanes and a read alias key for load-balanced READs, `non_serving` backups getting none) |
//! | `POST /v1/flows`, `GET /v1/flows`, `GET /v1/flows/{id}`, `DELETE /v1/flows/{id}` | producer/consumer flows between rings in memnode memory (zero-sided RDMA): start one ([`FlowRequest`]), see its status ([`FlowStatus`]: items moved, retries, free space per consumer), stop it |
//!
//! | `GET /v1/openapi.json` | this API's OpenAPI document |
//!
//! Errors are JSON `{"error": "...", "code": "..."}` like the memnode's: 400 (a body that
//! is not JSON, a path segment that does not parse), 401 (no or a wrong credential), 403
//! (a grant on an administrator's route, or another client's connection), 404, 405, 409,
//! 413, 415, 422, and 502 when a memory node the switch calls refuses or cannot be
//! reached. Every route but `/healthz`, `/metrics` and `/v1/openapi.json` needs a
//! credential ([`crate::auth`]): the memory node admin token, or a grant for the client
//! routes.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use axum::extract::rejection::PathRejection;
use axum::extract::{Extension, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use dmkv_api::ErrorBody;
use dmkv_api::switch::LatchRegionRequest;
use dmkv_service::{BodyRejection, JsonObject};
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::admin_documents::{
    Health, LatchRegionEntry, LatchRegionsResponse, LocksResponse, ModeInfo, ModeRequest,
    MuxesResponse, RangeRequest, RangeResponse, RegisterCell, RegisterInfo, RegisterKindName,
    RegisterValues, RegisterWrite, RegistersResponse, RouteGrantResponse, RoutesResponse,
    SteerResponse, SwitchInfo, TableEntry, TablesResponse,
};
use crate::auth::{Principal, SwitchAuth};
use crate::control::{
    Control, ControlError, FaultSettings, LockEntry, Mux, MuxRequest, Route, SteerSettings,
    SwitchQpRequest, SwitchQpResponse,
};
use crate::copy::{CopyRequest, CopyStatus};
use crate::flow::{FlowRequest, FlowStatus};
use crate::io_stats::IoStats;
use crate::model::{Counters, LatchRegion};
use crate::spec::{self, RegisterKind};
use dmkv_api::grant::GrantAccess;
use dmkv_api::switch::SwitchGrantRequest;
use dmkv_api::switch::{MirrorRequest, MirrorSet, MirrorsResponse};

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

/// Largest request body accepted.
pub const MAX_BODY: usize = 2 << 20;

dmkv_service::api! {
    /// The admin API's conventions for the service kit: errors carry [`ErrorBody`];
    /// bodies up to [`MAX_BODY`].
    SwitchApi: ErrorBody, MAX_BODY
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

/// A JSON body that was refused: the service kit's answer (400, 413, 415 or 422).
impl From<BodyRejection> for ApiError {
    fn from(r: BodyRejection) -> ApiError {
        let e = dmkv_service::ApiError::<SwitchApi>::from(r);
        ApiError(e.status, e.code, e.message)
    }
}

/// A path segment that does not parse: 400 `invalid_path`.
impl From<PathRejection> for ApiError {
    fn from(r: PathRejection) -> ApiError {
        ApiError(StatusCode::BAD_REQUEST, "invalid_path", r.body_text())
    }
}

type ApiResult<T> = Result<T, ApiError>;

/// A typed JSON body, or the kit's answer to one that is refused.
type Body<T> = Result<JsonObject<T>, BodyRejection>;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "dmkv switch accelerator admin API",
        description = "The control plane of the dmkv soft switch: mode, counters, registers, match-action tables, connections, queue pairs created through the switch, switch-owned atomics, fault injection, atomic replacement, optimistic latching, Clover steering, zero-sided copies and flows, and switch replication of writes. Every route but /healthz, /metrics and /v1/openapi.json needs a bearer credential: the memory node admin token, or a grant for the client routes (POST /v1/qps, POST /v1/routes/{conn}/grant, DELETE /v1/routes/{conn}, PUT /v1/latch/regions, GET /v1/mirrors), whose connections the switch confines to the grant's windows (see docs/security.md). Errors are JSON `ErrorBody`."
    ),
    components(schemas(ErrorBody))
)]
struct ApiDoc;

/// Every route with its OpenAPI operation.
fn api_router() -> OpenApiRouter<AdminState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(health))
        .routes(routes!(metrics))
        .routes(routes!(openapi_json))
        .routes(routes!(switch_info))
        .routes(routes!(get_mode, put_mode))
        .routes(routes!(counters))
        .routes(routes!(registers))
        .routes(routes!(register))
        .routes(routes!(put_register))
        .routes(routes!(tables))
        .routes(routes!(routes, post_route))
        .routes(routes!(delete_route))
        .routes(routes!(post_route_grant))
        .routes(routes!(post_qp))
        .routes(routes!(put_range))
        .routes(routes!(get_faults, put_faults))
        .routes(routes!(get_muxes, post_mux))
        .routes(routes!(get_locks, put_lock))
        .routes(routes!(delete_lock))
        .routes(routes!(get_regions, put_region))
        .routes(routes!(get_steer, put_steer))
        .routes(routes!(get_copies, post_copy))
        .routes(routes!(get_copy))
        .routes(routes!(get_flows, post_flow))
        .routes(routes!(get_flow, delete_flow))
        .routes(routes!(get_mirrors, post_mirror))
}

/// The admin API's OpenAPI document (served at `GET /v1/openapi.json`): the routes'
/// own answers and the service kit's ([`dmkv_service::openapi::complete`]).
pub fn openapi() -> utoipa::openapi::OpenApi {
    let mut doc = api_router().into_openapi();
    // Every route but the public ones needs a bearer credential ([`crate::auth`]).
    dmkv_service::openapi::add_bearer_scheme(&mut doc);
    dmkv_service::openapi::require_bearer_except(&mut doc, crate::auth::public);
    dmkv_service::openapi::complete(&mut doc, "ErrorBody");
    dmkv_service::openapi::link(
        &mut doc,
        ("post", "/v1/routes", "201"),
        "/v1/routes/{conn}",
        &[("conn", "$response.body#/conn")],
    );
    dmkv_service::openapi::link(
        &mut doc,
        ("put", "/v1/replace/locks", "200"),
        "/v1/replace/locks/{slot}",
        &[("slot", "$response.body#/slot")],
    );
    doc
}

fn openapi_text() -> &'static str {
    static DOC: OnceLock<String> = OnceLock::new();
    dmkv_service::openapi::rendered(&DOC, openapi)
}

/// This document.
#[utoipa::path(get, path = "/v1/openapi.json", tag = "switch",
    responses((status = 200, description = "the OpenAPI document", content_type = "application/json")))]
async fn openapi_json() -> Response {
    dmkv_service::openapi::json_response(openapi_text())
}

/// The router.
pub fn router(state: AdminState) -> Router {
    let (router, _) = api_router().split_for_parts();
    router
        .fallback(|| async {
            ApiError(
                StatusCode::NOT_FOUND,
                "not_found",
                "no such route; see /v1/openapi.json".into(),
            )
        })
        .method_not_allowed_fallback(|| async {
            ApiError(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "method not allowed on this route; see /v1/openapi.json".into(),
            )
        })
        .layer(axum::middleware::from_fn_with_state(
            state.auth.clone(),
            crate::auth::authenticate,
        ))
        .layer(axum::middleware::from_fn(
            dmkv_service::trace::trace_requests,
        ))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
        .with_state(state)
}

/// Liveness.
#[utoipa::path(get, path = "/healthz", tag = "switch", responses((status = 200, body = Health)))]
async fn health(State(s): State<AdminState>) -> Json<Health> {
    Json(Health {
        status: "ok".to_owned(),
        uptime_seconds: s.started.elapsed().as_secs(),
        routes: s.control.state().routes.len(),
    })
}

/// The switch's addresses and mode.
#[utoipa::path(get, path = "/v1/switch", tag = "switch", responses((status = 200, body = SwitchInfo)))]
async fn switch_info(State(s): State<AdminState>) -> Json<SwitchInfo> {
    let mode = s.control.pipeline().mode();
    Json(SwitchInfo {
        client_side: s.control.client_side(),
        memnode_side: s.control.memnode_side(),
        mode: ModeInfo::of(mode),
        spec_version: spec::SPEC_VERSION,
    })
}

/// The pipeline's mode.
#[utoipa::path(get, path = "/v1/mode", tag = "mode", responses((status = 200, body = ModeInfo)))]
async fn get_mode(State(s): State<AdminState>) -> Json<ModeInfo> {
    Json(ModeInfo::of(s.control.pipeline().mode()))
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

/// Set the pipeline's mode, by bits or by function names.
#[utoipa::path(put, path = "/v1/mode", tag = "mode", request_body = ModeRequest,
    responses((status = 200, body = ModeInfo),
        (status = 422, description = "not exactly one of `mode` and `functions`, an unknown function (`invalid_request`), or a function not implemented (`not_implemented`)", body = ErrorBody)))]
async fn put_mode(
    State(s): State<AdminState>,
    body: Body<ModeRequest>,
) -> ApiResult<Json<ModeInfo>> {
    let JsonObject(body) = body?;
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
    Ok(Json(ModeInfo::of(bits)))
}

/// The counters, by function.
#[utoipa::path(get, path = "/v1/counters", tag = "switch", responses((status = 200, body = Counters)))]
async fn counters(State(s): State<AdminState>) -> Json<Counters> {
    Json(s.control.pipeline().counters())
}

/// Every register.
#[utoipa::path(get, path = "/v1/registers", tag = "registers", responses((status = 200, body = RegistersResponse)))]
async fn registers(State(s): State<AdminState>) -> Json<RegistersResponse> {
    let registers = spec::REGISTERS
        .iter()
        .map(|r| RegisterInfo {
            name: r.name.to_owned(),
            width: r.width,
            size: r.size,
            kind: if r.kind == RegisterKind::Pair {
                RegisterKindName::Pair
            } else {
                RegisterKindName::Single
            },
            control: r.control.to_owned(),
            doc: r.doc.to_owned(),
        })
        .collect();
    let access_violations: u64 = s
        .control
        .pipeline()
        .registers()
        .iter()
        .map(|r| r.violations())
        .sum();
    Json(RegistersResponse {
        registers,
        access_violations,
    })
}

fn no_register(name: &str) -> ApiError {
    ApiError(
        StatusCode::NOT_FOUND,
        "not_found",
        format!("no register {name}"),
    )
}

/// A register's non-zero cells.
#[utoipa::path(get, path = "/v1/registers/{name}", tag = "registers",
    params(("name" = String, Path, description = "the register's name (see GET /v1/registers)")),
    responses((status = 200, body = RegisterValues),
        (status = 404, description = "no such register", body = ErrorBody)))]
async fn register(
    State(s): State<AdminState>,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult<Json<RegisterValues>> {
    let Path(name) = path?;
    let p = s.control.pipeline();
    let r = p.register(&name).ok_or_else(|| no_register(&name))?;
    let values = r
        .dump()
        .into_iter()
        .enumerate()
        .filter(|(_, v)| *v != 0)
        .collect();
    Ok(Json(RegisterValues {
        name,
        size: r.spec().size,
        values,
    }))
}

/// Write a register cell from the control plane.
#[utoipa::path(put, path = "/v1/registers/{name}/{index}", tag = "registers",
    params(("name" = String, Path, description = "the register's name"),
        ("index" = u64, Path, description = "the cell, below the register's size")),
    request_body = RegisterWrite,
    responses((status = 200, body = RegisterCell),
        (status = 404, description = "no such register", body = ErrorBody),
        (status = 422, description = "the index is not below the register's size, or the body's fields are invalid", body = ErrorBody)))]
async fn put_register(
    State(s): State<AdminState>,
    path: Result<Path<(String, usize)>, PathRejection>,
    body: Body<RegisterWrite>,
) -> ApiResult<Json<RegisterCell>> {
    let Path((name, index)) = path?;
    let JsonObject(body) = body?;
    let mut p = s.control.pipeline();
    let r = p.register_mut(&name).ok_or_else(|| no_register(&name))?;
    if index >= r.spec().size {
        return Err(ApiError(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_request",
            format!("index {index} beyond {}", r.spec().size),
        ));
    }
    r.cp_write(index, body.value);
    Ok(Json(RegisterCell {
        name,
        index,
        value: r.cp_read(index),
    }))
}

/// A table's entries as [`TableEntry`]s.
fn entries<'a, K, A>(items: impl Iterator<Item = (&'a K, &'a A)>) -> Vec<TableEntry>
where
    K: serde::Serialize + 'a,
    A: serde::Serialize + 'a,
{
    items
        .map(|(k, a)| TableEntry {
            key: serde_json::to_value(k).unwrap_or_default(),
            action: serde_json::to_value(a).unwrap_or_default(),
        })
        .collect()
}

/// Every match-action table's entries.
#[utoipa::path(get, path = "/v1/tables", tag = "switch", responses((status = 200, body = TablesResponse)))]
async fn tables(State(s): State<AdminState>) -> Json<TablesResponse> {
    let p = s.control.pipeline();
    let t = &p.tables;
    Json(TablesResponse {
        route_up: entries(t.route_up.entries()),
        route_down: entries(t.route_down.entries()),
        atomic_range: entries(t.atomic_range.entries()),
        fault_policy: entries(t.fault_policy.entries()),
        tracked_lock: entries(t.tracked_lock.entries()),
        mux_up: entries(t.mux_up.entries()),
        mux_down: entries(t.mux_down.entries()),
        conn_client: entries(t.conn_client.entries()),
        steer_keys: entries(t.steer_keys.entries()),
        steer_classes: t
            .steer_classes
            .entries()
            .map(|(k, _)| serde_json::to_value(k).unwrap_or_default())
            .collect(),
        latch_region: entries(t.latch_region.entries()),
        copy_src: entries(t.copy_src.entries()),
        copy_dst: entries(t.copy_dst.entries()),
        flow_punt: entries(t.flow_punt.entries()),
    })
}

/// Every connection.
#[utoipa::path(get, path = "/v1/routes", tag = "routes", responses((status = 200, body = RoutesResponse)))]
async fn routes(State(s): State<AdminState>) -> Json<RoutesResponse> {
    Json(RoutesResponse {
        routes: s.control.state().routes,
    })
}

/// Install a connection.
#[utoipa::path(post, path = "/v1/routes", tag = "routes", request_body = Route,
    responses((status = 201, body = Route),
        (status = 409, description = "the connection id is taken or the tables are full (`conflict`)", body = ErrorBody)))]
async fn post_route(
    State(s): State<AdminState>,
    body: Body<Route>,
) -> ApiResult<(StatusCode, Json<Route>)> {
    let JsonObject(route) = body?;
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

/// Remove a connection (a client presenting a grant: one of its own).
#[utoipa::path(delete, path = "/v1/routes/{conn}", tag = "routes",
    params(("conn" = u8, Path, description = "the connection id")),
    responses((status = 204, description = "removed"),
        (status = 404, description = "no such connection", body = ErrorBody)))]
async fn delete_route(
    State(s): State<AdminState>,
    Extension(principal): Extension<Principal>,
    path: Result<Path<u8>, PathRejection>,
) -> ApiResult<StatusCode> {
    let Path(conn) = path?;
    own_connection(&s, &principal, conn)?;
    s.control.remove(conn)?;
    Ok(StatusCode::NO_CONTENT)
}

/// Give a connection made with a grant another table's grant, or a newer one.
#[utoipa::path(post, path = "/v1/routes/{conn}/grant", tag = "routes",
    params(("conn" = u8, Path, description = "the connection id")),
    request_body = SwitchGrantRequest,
    responses((status = 200, body = RouteGrantResponse),
        (status = 403, description = "the connection was made with the admin token, is another client's, or the grant is for another memory node or older than the one held (`forbidden`)", body = ErrorBody),
        (status = 404, description = "no such connection", body = ErrorBody)))]
async fn post_route_grant(
    State(s): State<AdminState>,
    Extension(principal): Extension<Principal>,
    path: Result<Path<u8>, PathRejection>,
    body: Body<SwitchGrantRequest>,
) -> ApiResult<Json<RouteGrantResponse>> {
    let Path(conn) = path?;
    let JsonObject(body) = body?;
    if s.control
        .state()
        .routes
        .iter()
        .all(|r| r.conn != Some(conn))
    {
        return Err(ControlError::NotFound(conn).into());
    }
    own_connection(&s, &principal, conn)?;
    let grant = crate::auth::verify_grant(&body.grant, s.auth.grant_key.as_ref())
        .map_err(|(code, message)| ApiError(StatusCode::UNPROCESSABLE_ENTITY, code, message))?;
    s.control.give_grant(conn, &grant)?;
    let tables: Vec<String> = s
        .control
        .scope(conn)
        .map(|sc| sc.by_table.keys().cloned().collect())
        .unwrap_or_default();
    Ok(Json(RouteGrantResponse { conn, tables }))
}

/// Create a memory node's queue pair through the switch (with a grant as the
/// credential: a connection confined to the grant's windows).
#[utoipa::path(post, path = "/v1/qps", tag = "routes", request_body = SwitchQpRequest,
    responses((status = 201, body = SwitchQpResponse),
        (status = 403, description = "the grant is for another memory node (`forbidden`)", body = ErrorBody),
        (status = 409, description = "the switch's connection space is full (`conflict`)", body = ErrorBody),
        (status = 502, description = "the memory node refused or could not be reached (`memnode_error`)", body = ErrorBody)))]
async fn post_qp(
    State(s): State<AdminState>,
    Extension(principal): Extension<Principal>,
    body: Body<SwitchQpRequest>,
) -> Response {
    let req = match body {
        Ok(JsonObject(req)) => req,
        Err(e) => return ApiError::from(e).into_response(),
    };
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

/// Own the words of a region's range in the switch (switch-resident atomics).
#[utoipa::path(put, path = "/v1/atomics/range", tag = "atomics", request_body = RangeRequest,
    responses((status = 200, body = RangeResponse),
        (status = 409, description = "the range overlaps the slots of another, or the table is full (`conflict`)", body = ErrorBody)))]
async fn put_range(
    State(s): State<AdminState>,
    body: Body<RangeRequest>,
) -> ApiResult<Json<RangeResponse>> {
    let JsonObject(body) = body?;
    s.control.set_atomic_range(body.rkey, body.range)?;
    Ok(Json(RangeResponse {
        rkey: body.rkey,
        range: body.range,
    }))
}

/// The fault settings.
#[utoipa::path(get, path = "/v1/faults", tag = "faults", responses((status = 200, body = FaultSettings)))]
async fn get_faults(State(s): State<AdminState>) -> Json<FaultSettings> {
    Json(s.control.state().faults)
}

/// Set the fault settings.
#[utoipa::path(put, path = "/v1/faults", tag = "faults", request_body = FaultSettings,
    responses((status = 200, body = FaultSettings)))]
async fn put_faults(
    State(s): State<AdminState>,
    body: Body<FaultSettings>,
) -> ApiResult<Json<FaultSettings>> {
    let JsonObject(body) = body?;
    s.control.set_faults(body)?;
    Ok(Json(body))
}

/// The steering settings and counters.
#[utoipa::path(get, path = "/v1/steer", tag = "steer", responses((status = 200, body = SteerResponse)))]
async fn get_steer(State(s): State<AdminState>) -> Json<SteerResponse> {
    let c = s.control.pipeline().counters();
    Json(SteerResponse {
        settings: s.control.state().steer,
        write_steer: c.write_steer,
        read_steer: c.read_steer,
    })
}

/// Set the steering settings.
#[utoipa::path(put, path = "/v1/steer", tag = "steer", request_body = SteerSettings,
    responses((status = 200, body = SteerSettings)))]
async fn put_steer(
    State(s): State<AdminState>,
    body: Body<SteerSettings>,
) -> ApiResult<Json<SteerSettings>> {
    let JsonObject(body) = body?;
    s.control.set_steering(body.clone())?;
    Ok(Json(body))
}

/// The multiplexed upstream queue pairs (atomic replacement).
#[utoipa::path(get, path = "/v1/replace/mux", tag = "replace", responses((status = 200, body = MuxesResponse)))]
async fn get_muxes(State(s): State<AdminState>) -> Json<MuxesResponse> {
    Json(MuxesResponse {
        muxes: s.control.state().muxes,
    })
}

/// Create a multiplexed upstream queue pair to a memory node.
#[utoipa::path(post, path = "/v1/replace/mux", tag = "replace", request_body = MuxRequest,
    responses((status = 201, body = Mux),
        (status = 409, description = "every multiplexed queue pair is in use (`conflict`)", body = ErrorBody),
        (status = 502, description = "the memory node refused or could not be reached (`memnode_error`)", body = ErrorBody)))]
async fn post_mux(State(s): State<AdminState>, body: Body<MuxRequest>) -> Response {
    let req = match body {
        Ok(JsonObject(req)) => req,
        Err(e) => return ApiError::from(e).into_response(),
    };
    let control = s.control.clone();
    match tokio::task::spawn_blocking(move || control.create_mux(&req)).await {
        Ok(Ok(mux)) => (StatusCode::CREATED, Json(mux)).into_response(),
        Ok(Err(e)) => ApiError::from(e).into_response(),
        Err(e) => {
            ApiError(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()).into_response()
        }
    }
}

/// The tracked lock words (atomic replacement).
#[utoipa::path(get, path = "/v1/replace/locks", tag = "replace", responses((status = 200, body = LocksResponse)))]
async fn get_locks(State(s): State<AdminState>) -> Json<LocksResponse> {
    Json(LocksResponse {
        locks: s.control.state().locks,
    })
}

/// Track a lock word.
#[utoipa::path(put, path = "/v1/replace/locks", tag = "replace", request_body = LockEntry,
    responses((status = 200, body = LockEntry),
        (status = 409, description = "the word is tracked already, or no slot is free (`conflict`)", body = ErrorBody)))]
async fn put_lock(
    State(s): State<AdminState>,
    body: Body<LockEntry>,
) -> ApiResult<Json<LockEntry>> {
    let JsonObject(body) = body?;
    Ok(Json(s.control.track_lock(body)?))
}

/// Stop tracking a lock word.
#[utoipa::path(delete, path = "/v1/replace/locks/{slot}", tag = "replace",
    params(("slot" = u32, Path, description = "the word's cache slot")),
    responses((status = 204, description = "no longer tracked"),
        (status = 422, description = "no word is tracked in this slot (`invalid_request`)", body = ErrorBody)))]
async fn delete_lock(
    State(s): State<AdminState>,
    path: Result<Path<u32>, PathRejection>,
) -> ApiResult<StatusCode> {
    let Path(slot) = path?;
    s.control.untrack_lock(slot)?;
    Ok(StatusCode::NO_CONTENT)
}

/// The switch-latched tuple regions (optimistic latching).
#[utoipa::path(get, path = "/v1/latch/regions", tag = "latch", responses((status = 200, body = LatchRegionsResponse)))]
async fn get_regions(State(s): State<AdminState>) -> Json<LatchRegionsResponse> {
    let regions = s
        .control
        .state()
        .latch_regions
        .iter()
        .map(|(rkey, r)| LatchRegionEntry {
            rkey: *rkey,
            region: *r,
        })
        .collect();
    Json(LatchRegionsResponse { regions })
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

/// Latch a region's tuples in the switch (a client presenting a grant: tuples inside
/// one of its read-write windows).
#[utoipa::path(put, path = "/v1/latch/regions", tag = "latch", request_body = LatchRegionRequest,
    responses((status = 200, body = LatchRegionEntry),
        (status = 403, description = "a grant that does not cover the tuples read-write (`forbidden`)", body = ErrorBody),
        (status = 409, description = "the tuples overlap another region's, or the table is full (`conflict`)", body = ErrorBody)))]
async fn put_region(
    State(s): State<AdminState>,
    Extension(principal): Extension<Principal>,
    body: Body<LatchRegionRequest>,
) -> ApiResult<Json<LatchRegionEntry>> {
    let JsonObject(body) = body?;
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
    Ok(Json(LatchRegionEntry {
        rkey: body.rkey,
        region,
    }))
}

/// Prometheus text exposition (OpenMetrics when the `Accept` header prefers it).
#[utoipa::path(get, path = "/metrics", tag = "switch",
    responses((status = 200, description = "the metrics, as Prometheus text or OpenMetrics", content(
        (String = "text/plain"), (String = "application/openmetrics-text")))))]
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

/// Every switch-initiated copy, running and ended.
#[derive(Debug, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct CopiesResponse {
    /// By id.
    pub copies: Vec<CopyStatus>,
}

/// Every switch-initiated copy and its progress.
#[utoipa::path(get, path = "/v1/copies", tag = "copies", responses((status = 200, body = CopiesResponse)))]
async fn get_copies(State(s): State<AdminState>) -> Json<CopiesResponse> {
    Json(CopiesResponse {
        copies: s.control.copy_statuses(),
    })
}

/// Start a copy memnode → memnode driven by the switch: it creates a queue pair of its
/// own on both memory nodes, READs the source and turns every READ response into a
/// WRITE to the target.
#[utoipa::path(post, path = "/v1/copies", tag = "copies", request_body = CopyRequest,
    responses((status = 201, body = CopyStatus),
        (status = 409, description = "every copy slot is in use (`conflict`)", body = ErrorBody),
        (status = 422, description = "a size is out of range (`invalid_request`)", body = ErrorBody),
        (status = 502, description = "a memory node refused or could not be reached (`memnode_error`)", body = ErrorBody)))]
async fn post_copy(State(s): State<AdminState>, body: Body<CopyRequest>) -> Response {
    let req = match body {
        Ok(JsonObject(req)) => req,
        Err(e) => return ApiError::from(e).into_response(),
    };
    let control = s.control.clone();
    match tokio::task::spawn_blocking(move || control.start_copy(&req)).await {
        Ok(Ok(status)) => (StatusCode::CREATED, Json(status)).into_response(),
        Ok(Err(e)) => ApiError::from(e).into_response(),
        Err(e) => {
            ApiError(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()).into_response()
        }
    }
}

/// One copy's progress.
#[utoipa::path(get, path = "/v1/copies/{id}", tag = "copies",
    params(("id" = u64, Path, description = "the copy's id")),
    responses((status = 200, body = CopyStatus),
        (status = 404, description = "no such copy (`not_found`)", body = ErrorBody)))]
async fn get_copy(
    State(s): State<AdminState>,
    path: Result<Path<u64>, PathRejection>,
) -> ApiResult<Json<CopyStatus>> {
    let Path(id) = path?;
    s.control
        .copy_status(id)
        .map(Json)
        .ok_or_else(|| ApiError(StatusCode::NOT_FOUND, "not_found", format!("no copy {id}")))
}

/// Every flow, running and ended.
#[derive(Debug, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct FlowsResponse {
    /// By id.
    pub flows: Vec<FlowStatus>,
}

/// Every flow and its status.
#[utoipa::path(get, path = "/v1/flows", tag = "flows", responses((status = 200, body = FlowsResponse)))]
async fn get_flows(State(s): State<AdminState>) -> Json<FlowsResponse> {
    Json(FlowsResponse {
        flows: s.control.flow_statuses(),
    })
}

/// Start a flow between producer and consumer rings in memory nodes' memory: the
/// switch creates queue pairs of its own on their memory nodes, learns producers'
/// heads by polling, moves items by turning READ responses into WRITEs, and writes the
/// rings' heads and tails itself.
#[utoipa::path(post, path = "/v1/flows", tag = "flows", request_body = FlowRequest,
    responses((status = 201, body = FlowStatus),
        (status = 409, description = "not enough copy slots for the flow's lanes, or a table is full (`conflict`)", body = ErrorBody),
        (status = 422, description = "a ring or a count is out of range (`invalid_request`)", body = ErrorBody),
        (status = 502, description = "a memory node refused or could not be reached (`memnode_error`)", body = ErrorBody)))]
async fn post_flow(State(s): State<AdminState>, body: Body<FlowRequest>) -> Response {
    let req = match body {
        Ok(JsonObject(req)) => req,
        Err(e) => return ApiError::from(e).into_response(),
    };
    let control = s.control.clone();
    match tokio::task::spawn_blocking(move || control.start_flow(&req)).await {
        Ok(Ok(status)) => (StatusCode::CREATED, Json(status)).into_response(),
        Ok(Err(e)) => ApiError::from(e).into_response(),
        Err(e) => {
            ApiError(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()).into_response()
        }
    }
}

/// One flow's status.
#[utoipa::path(get, path = "/v1/flows/{id}", tag = "flows",
    params(("id" = u64, Path, description = "the flow's id")),
    responses((status = 200, body = FlowStatus),
        (status = 404, description = "no such flow (`not_found`)", body = ErrorBody)))]
async fn get_flow(
    State(s): State<AdminState>,
    path: Result<Path<u64>, PathRejection>,
) -> ApiResult<Json<FlowStatus>> {
    let Path(id) = path?;
    s.control
        .flow_status(id)
        .map(Json)
        .ok_or_else(|| ApiError(StatusCode::NOT_FOUND, "not_found", format!("no flow {id}")))
}

/// Stop a running flow: items already published stay in the consumer rings; the
/// switch's queue pairs are deleted.
#[utoipa::path(delete, path = "/v1/flows/{id}", tag = "flows",
    params(("id" = u64, Path, description = "the flow's id")),
    responses((status = 200, body = FlowStatus),
        (status = 404, description = "no such flow (`not_found`)", body = ErrorBody),
        (status = 409, description = "the flow is not running (`conflict`)", body = ErrorBody)))]
async fn delete_flow(
    State(s): State<AdminState>,
    path: Result<Path<u64>, PathRejection>,
) -> Response {
    let Path(id) = match path {
        Ok(p) => p,
        Err(e) => return ApiError::from(e).into_response(),
    };
    if s.control.flow_status(id).is_none() {
        return ApiError(StatusCode::NOT_FOUND, "not_found", format!("no flow {id}"))
            .into_response();
    }
    let control = s.control.clone();
    match tokio::task::spawn_blocking(move || control.stop_flow(id)).await {
        Ok(Ok(status)) => Json(status).into_response(),
        Ok(Err(e)) => ApiError::from(e).into_response(),
        Err(e) => {
            ApiError(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()).into_response()
        }
    }
}

/// Every replica set the switch replicates WRITEs to.
#[utoipa::path(get, path = "/v1/mirrors", tag = "mirrors", responses((status = 200, body = MirrorsResponse)))]
async fn get_mirrors(State(s): State<AdminState>) -> Json<MirrorsResponse> {
    Json(MirrorsResponse {
        mirrors: s.control.mirrors(),
    })
}

/// Replicate WRITEs to a replica set: the switch creates a queue pair of its own (a
/// lane) on every backup and answers the set with the alias key clients WRITE under.
/// The same members again: the existing set (200).
#[utoipa::path(post, path = "/v1/mirrors", tag = "mirrors", request_body = MirrorRequest,
    responses((status = 201, body = MirrorSet), (status = 200, body = MirrorSet),
        (status = 409, description = "every replica set is in use (`conflict`)", body = ErrorBody),
        (status = 422, description = "no backup, too many, or a member twice (`invalid_request`)", body = ErrorBody),
        (status = 502, description = "a memory node refused or could not be reached (`memnode_error`)", body = ErrorBody)))]
async fn post_mirror(State(s): State<AdminState>, body: Body<MirrorRequest>) -> Response {
    let req = match body {
        Ok(JsonObject(req)) => req,
        Err(e) => return ApiError::from(e).into_response(),
    };
    let control = s.control.clone();
    match tokio::task::spawn_blocking(move || control.add_mirror(&req)).await {
        Ok(Ok((set, true))) => (StatusCode::CREATED, Json(set)).into_response(),
        Ok(Ok((set, false))) => Json(set).into_response(),
        Ok(Err(e)) => ApiError::from(e).into_response(),
        Err(e) => {
            ApiError(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()).into_response()
        }
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
        assert_eq!(
            paths.len(),
            26,
            "every route is documented: {:?}",
            paths.keys()
        );
        assert!(doc["components"]["securitySchemes"]["bearer"].is_object());
        for (path, item) in paths {
            for (method, op) in item.as_object().expect("operations") {
                if crate::auth::public(path) {
                    assert!(op["security"].is_null(), "{method} {path} is public");
                } else {
                    assert!(
                        op["security"][0]["bearer"].is_array(),
                        "{method} {path}: the bearer scheme"
                    );
                    for status in ["401", "403"] {
                        assert!(
                            op["responses"][status].is_object(),
                            "{method} {path} {status}"
                        );
                    }
                }
                if path.contains('{') {
                    assert!(op["responses"]["400"].is_object(), "{method} {path} 400");
                }
                if op["requestBody"].is_object() {
                    for status in ["400", "413", "415", "422"] {
                        assert!(
                            op["responses"][status].is_object(),
                            "{method} {path} {status}"
                        );
                    }
                }
            }
        }
        assert!(paths["/v1/qps"]["post"]["responses"]["502"].is_object());
        let functions = &doc["components"]["schemas"]["ModeInfo"]["properties"]["functions"];
        let names: Vec<&str> = functions["items"]["enum"]
            .as_array()
            .expect("function names")
            .iter()
            .filter_map(|v| v.as_str())
            .collect();
        let all: Vec<&str> = spec::mode::ALL.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, all);
        let reorder = &doc["components"]["schemas"]["FaultPolicy"]["properties"]["reorder"];
        assert_eq!(reorder["maximum"], u64::from(u32::MAX));
    }
}
