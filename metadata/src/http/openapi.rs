//! The OpenAPI document: every resource's routes put together, the bearer scheme, the
//! answers the service kit gives before a handler decides ([`dmkv_service::openapi`]:
//! 401 and 403 from the authorisation step, 400 for a path segment that does not parse
//! or a table name outside its pattern, 400/413/415/422 for a body axum refuses), and
//! the document served at `GET /v1/openapi.json`.

use std::sync::OnceLock;

use axum::response::Response;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::state::AppState;
use super::{
    chain_directory, chains, credentials, grants, history, leases, location, memnodes,
    rereplication, service, tables,
};
use crate::api::ErrorBody;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "dmkv metadata service",
        description = "Memnode registry, chunk leases, table catalog, index slow paths and scoped credentials of dmkv. When the service has a root token, every route but the public ones (health, metrics, this document, the accelerator, the cluster view and its history) needs `Authorization: Bearer <secret>`: the root token, an admin credential, or a table credential covering the route's table with the access it needs (401 when missing, wrong, revoked or expired; 403 when out of scope)."
    ),
    modifiers(&BearerScheme),
    components(schemas(ErrorBody, crate::api::TableName, crate::api::Base64Key))
)]
struct ApiDoc;

struct BearerScheme;

impl utoipa::Modify for BearerScheme {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        dmkv_service::openapi::add_bearer_scheme(openapi);
    }
}

/// Every route of the API with its OpenAPI operation.
pub(super) fn api_router() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(service::routes())
        .merge(history::routes())
        .merge(location::routes())
        .routes(routes!(openapi_json))
        .merge(memnodes::routes())
        .merge(leases::routes())
        .merge(tables::routes())
        .merge(grants::routes())
        .merge(chains::routes())
        .merge(credentials::routes())
        .merge(rereplication::routes())
        .merge(chain_directory::routes())
}

/// The OpenAPI document of the API.
pub fn openapi() -> utoipa::openapi::OpenApi {
    use dmkv_service::openapi::link;
    let mut doc = api_router().into_openapi();
    dmkv_service::openapi::complete(&mut doc, "ErrorBody");
    let created = |path| ("post", path, "201");
    let name = "$response.body#/name";
    link(
        &mut doc,
        created("/v1/tables"),
        "/v1/tables/{name}",
        &[("name", name)],
    );
    let lease = "$response.body#/lease_id";
    link(
        &mut doc,
        created("/v1/leases"),
        "/v1/leases/{id}",
        &[("id", lease)],
    );
    let credential = "$response.body#/credential/id";
    link(
        &mut doc,
        created("/v1/credentials"),
        "/v1/credentials/{id}",
        &[("id", credential)],
    );
    let memnode = "$response.body#/id";
    link(
        &mut doc,
        created("/v1/memnodes"),
        "/v1/memnodes/{id}",
        &[("id", memnode)],
    );
    link(
        &mut doc,
        ("post", "/v1/memnodes", "200"),
        "/v1/memnodes/{id}",
        &[("id", memnode)],
    );
    let chain = "$response.body#/chain_id";
    link(
        &mut doc,
        created("/v1/tables/{name}/chains"),
        "/v1/tables/{name}/chains/{chain_id}",
        &[("name", "$request.path.name"), ("chain_id", chain)],
    );
    doc
}

fn openapi_text() -> &'static str {
    static DOC: OnceLock<String> = OnceLock::new();
    dmkv_service::openapi::rendered(&DOC, openapi)
}

/// This document.
#[utoipa::path(get, path = "/v1/openapi.json", tag = "service",
    responses((status = 200, description = "the OpenAPI document", content_type = "application/json")))]
async fn openapi_json() -> Response {
    dmkv_service::openapi::json_response(openapi_text())
}
