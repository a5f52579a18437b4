//! `GET /v1/rereplication`: every running re-replication (a new member of a replica
//! set being synchronised).

use axum::Json;
use axum::extract::State;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::authorize::Admin;
use super::state::AppState;
use crate::api::RereplicationList;

/// `GET /v1/rereplication`.
pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_rereplication))
}

/// Running re-replications: per replica set its new member, bytes compared and
/// copied, passes and state.
#[utoipa::path(get, path = "/v1/rereplication", tag = "tables",
    security(("bearer" = [])),
    responses((status = 200, body = RereplicationList)))]
async fn list_rereplication(_: Admin, State(s): State<AppState>) -> Json<RereplicationList> {
    Json(RereplicationList {
        running: s.rereplication.list(),
    })
}
