//! The admin routes of the RDMA NIC path: queue pairs a NIC serves.
//!
//! | route | answer |
//! |---|---|
//! | `GET /v1/rdma/qps` | 200 [`RdmaQpsResponse`] (admin token) |
//! | `POST /v1/rdma/qps` | 201 [`CreateRdmaQpResponse`] from a [`CreateRdmaQpRequest`]; 409 when the node serves no RDMA device or serves its maximum of queue pairs |
//! | `DELETE /v1/rdma/qps/{qpn}` | 204, 403 (another client's) or 404 |
//!
//! They are authenticated exactly as `POST /v1/qps`: the admin token gets whole-region
//! access under the region's NIC key; a grant gets the grant's extents under keys of a
//! protection domain of the queue pair's own, until the grant expires.

use axum::Json;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use dmkv_api::memnode_rdma::{CreateRdmaQpRequest, CreateRdmaQpResponse, RdmaQpsResponse};
use dmkv_service::{BodyRejection, JsonObject};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::admin::{AdminState, ApiError, admin_only, parse_qpn};
use crate::api::ErrorBody;
use crate::auth::{self, Principal, forbidden};
use crate::rdma_serving::{RdmaQpError, RdmaScope, RdmaServing};

/// The RDMA routes, merged into the admin API.
pub fn routes() -> OpenApiRouter<AdminState> {
    OpenApiRouter::new()
        .routes(routes!(list_rdma_qps, create_rdma_qp))
        .routes(routes!(delete_rdma_qp))
}

impl From<RdmaQpError> for ApiError {
    fn from(e: RdmaQpError) -> ApiError {
        let (status, code) = match &e {
            RdmaQpError::Invalid(_) => (StatusCode::UNPROCESSABLE_ENTITY, "invalid_request"),
            RdmaQpError::TooMany(_) => (StatusCode::CONFLICT, "too_many_qps"),
            RdmaQpError::NotFound(_) => (StatusCode::NOT_FOUND, "qp_not_found"),
            RdmaQpError::NotOwner { .. } => return forbidden(e.to_string()),
            RdmaQpError::Device { .. } => (StatusCode::INTERNAL_SERVER_ERROR, "rdma_device"),
        };
        ApiError::new(status, code, e.to_string())
    }
}

/// The node's NIC path, or 409 naming how to get one and the other transport.
fn served(s: &AdminState) -> Result<&dyn RdmaServing, ApiError> {
    s.rdma.as_deref().ok_or_else(|| {
        ApiError::new(
            StatusCode::CONFLICT,
            "rdma_not_served",
            "this memory node serves no RDMA device (start it with --transport rdma --rdma-device NAME, built with the `rdma` feature); it serves the `udp` transport (soft RoCE): POST /v1/qps",
        )
    })
}

/// Every RDMA queue pair (admin token only).
#[utoipa::path(get, path = "/v1/rdma/qps", tag = "rdma",
    security(("bearer" = [])),
    responses((status = 200, body = RdmaQpsResponse)))]
async fn list_rdma_qps(
    State(s): State<AdminState>,
    Extension(principal): Extension<Principal>,
) -> Result<Json<RdmaQpsResponse>, ApiError> {
    admin_only(&principal, "listing every RDMA queue pair")?;
    Ok(Json(match s.rdma.as_deref() {
        Some(r) => RdmaQpsResponse {
            device: Some(r.device().to_owned()),
            qps: r.list(),
        },
        None => RdmaQpsResponse {
            device: None,
            qps: Vec::new(),
        },
    }))
}

/// Create and connect the responder half of an RC queue pair on the node's RDMA NIC:
/// with the admin token, whole-region access; with a grant, the grant's extents under
/// keys only this queue pair can use, destroyed when the grant expires.
#[utoipa::path(post, path = "/v1/rdma/qps", tag = "rdma",
    request_body = CreateRdmaQpRequest,
    security(("bearer" = [])),
    responses((status = 201, body = CreateRdmaQpResponse),
        (status = 401, description = "a grant in `grants` does not verify, is for another node, or expired, or the bearer token is wrong", body = ErrorBody),
        (status = 403, description = "a grant in `grants` is for another client than the bearer grant", body = ErrorBody),
        (status = 409, description = "the node serves no RDMA device (`rdma_not_served`) or its maximum of queue pairs (`too_many_qps`)", body = ErrorBody),
        (status = 422, description = "a field is out of range: qpn, psn, gid, lid, mtu, or a grant naming no memory of this node (`invalid_request`)", body = ErrorBody),
        (status = 500, description = "the device refused to create, register or connect (`rdma_device`)", body = ErrorBody)))]
async fn create_rdma_qp(
    State(s): State<AdminState>,
    Extension(principal): Extension<Principal>,
    body: Result<JsonObject<CreateRdmaQpRequest>, BodyRejection>,
) -> Result<(StatusCode, Json<CreateRdmaQpResponse>), ApiError> {
    let JsonObject(req) = body?;
    let rdma = served(&s)?;
    let mut grants = Vec::new();
    if let Principal::Client(first) = &principal {
        grants.push((**first).clone());
        for text in &req.grants {
            let g = auth::verify_grant(text, s.auth.grant_key.as_ref(), &s.node_id, auth::now_ms())
                .map_err(|(code, message)| {
                    ApiError::new(StatusCode::UNAUTHORIZED, code, message)
                })?;
            if g.client_id != first.client_id {
                return Err(forbidden(format!(
                    "a grant in `grants` is for client {:?}, the bearer grant for {:?}",
                    g.client_id, first.client_id
                )));
            }
            grants.push(g);
        }
    }
    let scope = match &principal {
        Principal::Client(_) if s.auth.scoping => RdmaScope::Grants(&grants),
        _ => RdmaScope::WholeRegion,
    };
    let made = rdma.create(&req, scope)?;
    tracing::info!(
        qpn = format_args!("{:#x}", made.qpn),
        client_qpn = format_args!("{:#x}", made.client_qpn),
        client = principal.client_id().unwrap_or("admin"),
        mtu = made.mtu,
        windows = made.windows.len(),
        "RDMA queue pair created"
    );
    Ok((StatusCode::CREATED, Json(made)))
}

/// Destroy an RDMA queue pair (the admin token, or the client it belongs to).
#[utoipa::path(delete, path = "/v1/rdma/qps/{qpn}", tag = "rdma",
    params(("qpn" = dmkv_api::schemas::U32Segment, Path, description = "the responder's queue pair number")),
    security(("bearer" = [])),
    responses((status = 204, description = "destroyed"),
        (status = 404, description = "no such queue pair (`qp_not_found`)", body = ErrorBody),
        (status = 409, description = "the node serves no RDMA device (`rdma_not_served`)", body = ErrorBody)))]
async fn delete_rdma_qp(
    State(s): State<AdminState>,
    Extension(principal): Extension<Principal>,
    Path(qpn): Path<String>,
) -> Result<StatusCode, ApiError> {
    let qpn = parse_qpn(&qpn)?;
    served(&s)?.delete(qpn, principal.client_id())?;
    tracing::info!(qpn = format_args!("{qpn:#x}"), "RDMA queue pair deleted");
    Ok(StatusCode::NO_CONTENT)
}
