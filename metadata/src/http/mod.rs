//! The HTTP API (axum), described by an OpenAPI document (utoipa): one file per
//! resource (`service`, `memnodes`, `leases`, `tables`, `chains`), each with its
//! handlers and their routes, and the HTML [`dashboard`]; `openapi` puts the routes
//! and the document together; `state` is what the handlers share ([`Shared`]),
//! `middleware` counts and traces, `authorize` resolves the bearer secret to a
//! [`Principal`] and lets each route declare the scope it needs, `credentials` serves
//! `/v1/credentials`, `error` maps failures to answers ([`ApiError`]) and `extract`
//! parses paths and bodies.
//!
//! | route | answer |
//! |---|---|
//! | `GET /healthz` | 200 [`Health`](crate::api::Health) |
//! | `GET /metrics` | 200 Prometheus text |
//! | `GET /v1/openapi.json` | 200 the OpenAPI document |
//! | `POST /v1/memnodes` | 201 / 200 [`RegisterMemnodeResponse`](crate::api::RegisterMemnodeResponse) |
//! | `GET /v1/cluster/stats` | 200 [`ClusterStats`](crate::cluster::ClusterStats) |
//! | `GET /v1/cluster/history?range=` | 200 [`ClusterHistory`](crate::history::ClusterHistory) (400 `invalid_query` past the span kept) |
//! | `GET /v1/accelerator` | 200 [`AcceleratorInfo`](crate::api::AcceleratorInfo) (`enabled: false` without one) |
//! | `GET /v1/memnodes` | 200 [`MemnodesResponse`](crate::api::MemnodesResponse) |
//! | `GET /v1/memnodes/{id}` | 200 [`MemnodeInfo`](crate::api::MemnodeInfo) |
//! | `DELETE /v1/memnodes/{id}[?force=true]` | 204 (409 `memnode_in_use` while data or leases live there, without `force`) |
//! | `POST /v1/memnodes/{id}/drain` | 202 [`DrainResponse`](crate::api::DrainResponse) |
//! | `POST /v1/memnodes/{id}/heartbeat` | 200 [`HeartbeatResponse`](crate::api::HeartbeatResponse) |
//! | `POST /v1/leases` | 201 [`Lease`](crate::api::Lease) |
//! | `GET /v1/leases?client=` | 200 [`LeasesResponse`](crate::api::LeasesResponse) |
//! | `GET /v1/leases/{id}` | 200 [`Lease`](crate::api::Lease) |
//! | `DELETE /v1/leases/{id}` | 204 |
//! | `POST /v1/leases/{id}/renew` | 200 [`Lease`](crate::api::Lease) |
//! | `POST /v1/leases/{id}/adopt` | 200 [`Lease`](crate::api::Lease) (table-owned now) / 204 (freed) |
//! | `POST /v1/tables` | 201 [`TableDescription`](crate::api::TableDescription) |
//! | `GET /v1/tables` | 200 [`TablesResponse`](crate::api::TablesResponse) |
//! | `GET /v1/tables/{name}` | 200 [`TableDescription`](crate::api::TableDescription) (with its running re-replications) |
//! | `GET /v1/rereplication` | 200 [`RereplicationList`](crate::api::RereplicationList) |
//! | `DELETE /v1/tables/{name}` | 204 |
//! | `PUT /v1/tables/{name}/feed` | 200 [`TableDescription`](crate::api::TableDescription) (409 `wrong_index` for other than Clover tables) |
//! | `POST /v1/tables/{name}/reset` | 200 [`TableDescription`](crate::api::TableDescription) (409 `table_not_lost`) |
//! | `POST /v1/tables/{name}/grants` | 201 [`GrantResponse`](dmkv_api::grant::GrantResponse) (409 `grants_disabled` without a grant key) |
//! | `POST /v1/tables/{name}/chains` | 201 / 200 [`ChainResponse`](crate::api::ChainResponse) |
//! | `GET /v1/tables/{name}/chains?key=` | 200 [`ChainInfo`](crate::api::ChainInfo) (404 when the key has no chain) |
//! | `POST /v1/tables/{name}/chains/{chain_id}/root` | 201 / 200 [`RootResponse`](crate::api::RootResponse) |
//! | `POST /v1/tables/{name}/chains/ids` | 201 [`ChainIdBlock`](crate::api::ChainIdBlock) |
//! | `POST /v1/tables/{name}/chains/directory` | 201 / 200 [`ChainDirectoryResponse`](crate::api::ChainDirectoryResponse) (409 `chain_directory_unavailable`, `chain_directory_lost`) |
//! | `POST /v1/tables/{name}/chains/published` | 200 [`PublishChainsResponse`](crate::api::PublishChainsResponse) |
//! | `PUT /v1/tables/{name}/chains/{chain_id}/tail` | 200 [`TailResponse`](crate::api::TailResponse) |
//! | `GET /v1/tables/{name}/chains/{chain_id}/tail` | 200 [`TailResponse`](crate::api::TailResponse) |
//! | `GET /v1/tables/{name}/location?key=` | 200 [`KeyLocationResponse`](crate::key_lookup::KeyLocationResponse) (`found: false` for an absent key; 422 for in-place tables) |
//! | `GET /v1/tables/{name}/keys?prefix=&after=&limit=` | 200 [`ChainKeysPage`](crate::api::ChainKeysPage) (Clover: keys ever written) |
//! | `POST /v1/credentials` | 201 [`CreatedCredential`](dmkv_api::credentials::CreatedCredential) (its secret, shown once) |
//! | `GET /v1/credentials` | 200 [`CredentialsResponse`](dmkv_api::credentials::CredentialsResponse) |
//! | `DELETE /v1/credentials/{id}` | 204 (404 `credential_not_found`) |
//!
//! With a root token configured, every route but `/healthz`, `/metrics`,
//! `/v1/openapi.json`, `/v1/accelerator`, `/v1/cluster/stats`, `/v1/cluster/history` and the dashboard needs
//! `Authorization: Bearer <root token or credential>` (401 when missing, wrong, revoked
//! or expired), and a credential that covers the route (403 `forbidden` otherwise; see
//! `authorize`). Every error is JSON [`ErrorBody`](crate::api::ErrorBody): 400
//! (`invalid_json`, `invalid_path`, `invalid_query`, `invalid_table_name`), 401
//! (`unauthorized`), 403 (`forbidden`), 404 (`not_found`,
//! `*_not_found`), 405, 409 (`table_exists`, `memnode_conflict`, `memnode_unhealthy`, `memnode_draining`,
//! `memnode_in_use`, `table_not_lost`, `chain_directory_unavailable`, `chain_directory_lost`,
//! `wrong_index`, `lease_owned_by_table`, `not_a_data_lease`), 410 (`lease_expired`), 413 (`body_too_large`,
//! over 1 MiB), 415, 422 (`invalid_request`), 500 (`storage_error`), 503
//! (`no_memnodes`), 507 (`out_of_memory`).

mod authorize;
mod chain_directory;
mod chains;
mod credentials;
pub mod dashboard;
mod error;
mod extract;
mod grants;
mod history;
mod leases;
mod location;
mod memnodes;
mod middleware;
mod openapi;
mod rereplication;
mod service;
mod state;
mod tables;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::middleware::from_fn_with_state;

pub use authorize::Principal;
pub use error::{ApiError, MetadataApi};
pub use openapi::openapi;
pub use state::{AppState, Shared, log_failover};

/// Largest request body accepted.
pub const MAX_BODY: usize = <MetadataApi as dmkv_service::Api>::MAX_BODY;

/// The router over `state`.
pub fn router(state: AppState) -> Router {
    let (router, _) = openapi::api_router().split_for_parts();
    router
        .merge(dashboard::router())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(from_fn_with_state(state.clone(), authorize::authenticate))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(from_fn_with_state(
            state.clone(),
            middleware::count_requests,
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
