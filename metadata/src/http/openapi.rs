//! The OpenAPI document: every resource's routes put together, the bearer scheme, and
//! the document served at `GET /v1/openapi.json`.

use std::sync::OnceLock;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use utoipa::OpenApi;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::state::AppState;
use super::{chain_directory, chains, history, leases, location, memnodes, service, tables};
use crate::api::ErrorBody;

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
        .merge(chains::routes())
        .merge(chain_directory::routes())
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

/// This document.
#[utoipa::path(get, path = "/v1/openapi.json", tag = "service",
    responses((status = 200, description = "the OpenAPI document", content_type = "application/json")))]
async fn openapi_json() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], openapi_text()).into_response()
}
