//! The OpenAPI document: every resource's routes put together, the bearer scheme, the
//! answers of the authorisation step ([`super::authorize`]: 401, 403, and 400 for an
//! invalid table name in the path) on every route that needs a credential, and the
//! document served at `GET /v1/openapi.json`.

use std::sync::OnceLock;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use utoipa::OpenApi;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
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

/// Adds the answers of the authorisation step to every operation that declares the
/// bearer scheme: 401 and 403, and 400 `invalid_table_name` for a route with a
/// `{name}` path parameter.
struct AuthAnswers;

impl utoipa::Modify for AuthAnswers {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};
        let answer = |description: &str| {
            ResponseBuilder::new()
                .description(description)
                .content(
                    "application/json",
                    ContentBuilder::new()
                        .schema(Some(Ref::from_schema_name("ErrorBody")))
                        .build(),
                )
                .build()
        };
        for (path, item) in openapi.paths.paths.iter_mut() {
            let ops = [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.patch,
            ];
            for op in ops.into_iter().flatten() {
                if op.security.as_ref().is_none_or(|s| s.is_empty()) {
                    continue;
                }
                let r = &mut op.responses.responses;
                r.entry("401".into()).or_insert_with(|| {
                    answer("no bearer token, or a wrong, revoked or expired one (`unauthorized`)")
                        .into()
                });
                r.entry("403".into()).or_insert_with(|| {
                    answer("the credential does not cover this route; the message names the scope needed (`forbidden`)")
                        .into()
                });
                if path.contains("{name}") {
                    r.entry("400".into()).or_insert_with(|| {
                        answer("the table name is invalid (`invalid_table_name`)").into()
                    });
                }
            }
        }
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
    use utoipa::Modify as _;
    let mut doc = api_router().into_openapi();
    AuthAnswers.modify(&mut doc);
    doc
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
