//! What every service's OpenAPI document says the same way: the bearer scheme, and the
//! answers the kit's own machinery gives before a handler decides anything.
//!
//! Each service declares its routes and their own answers with `utoipa` annotations
//! next to the handlers; [`complete`] then adds, to every operation, the answers that
//! follow from the shape of the operation rather than from its handler:
//!
//! * an operation that declares the bearer scheme: 401 `unauthorized` (no token, a wrong
//!   one, or an expired one) and 403 `forbidden` (the token does not cover the route);
//! * an operation with a path parameter: 400 (the segment does not parse, such as a
//!   negative or non-decimal id, or a table name outside its pattern);
//! * an operation with a request body: 400 `invalid_json` (syntax), 413
//!   `body_too_large` (over the API's limit), 415 `unsupported_media_type` (not
//!   `Content-Type: application/json`) and 422 `invalid_request` (well-formed JSON whose
//!   fields are missing, of the wrong type, out of range or inconsistent) — exactly the
//!   answers [`crate::ApiError`]'s conversion of a JSON rejection gives.
//!
//! Answers an operation already declares keep their own description. Every added
//! answer carries the API's error document (a reference to the component schema the
//! service names).

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, OpenApi, Ref, ResponseBuilder};

/// The name of the bearer security scheme in every document.
pub const BEARER: &str = "bearer";

/// Adds the bearer scheme ([`BEARER`], `Authorization: Bearer <secret>`) to `doc`'s
/// components.
pub fn add_bearer_scheme(doc: &mut OpenApi) {
    let components = doc.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        BEARER,
        SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
    );
}

/// Adds the answers of the service kit's machinery (see the module documentation) to
/// every operation of `doc`, each with a JSON body of the component schema
/// `error_schema`.
pub fn complete(doc: &mut OpenApi, error_schema: &str) {
    let answer = |description: &str| {
        ResponseBuilder::new()
            .description(description)
            .content(
                "application/json",
                ContentBuilder::new()
                    .schema(Some(Ref::from_schema_name(error_schema)))
                    .build(),
            )
            .build()
    };
    for (path, item) in doc.paths.paths.iter_mut() {
        let ops = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ];
        for op in ops.into_iter().flatten() {
            let secured = op.security.as_ref().is_some_and(|s| !s.is_empty());
            let has_body = op.request_body.is_some();
            let r = &mut op.responses.responses;
            let mut add = |status: &str, description: &str| {
                r.entry(status.into())
                    .or_insert_with(|| answer(description).into());
            };
            if secured {
                add(
                    "401",
                    "no bearer token, or a wrong, revoked or expired one (`unauthorized`)",
                );
                add(
                    "403",
                    "the token does not cover this route; the message names what is needed (`forbidden`)",
                );
            }
            if path.contains('{') {
                add(
                    "400",
                    "a path segment does not parse (`invalid_path` and the like) or is outside its pattern",
                );
            }
            if has_body {
                add(
                    "400",
                    "the body is not JSON (`invalid_json`), or a path segment does not parse",
                );
                add(
                    "413",
                    "the body exceeds the API's size limit (`body_too_large`)",
                );
                add(
                    "415",
                    "the body is not sent as `Content-Type: application/json` (`unsupported_media_type`)",
                );
                add(
                    "422",
                    "well-formed JSON whose fields are missing, of the wrong type, out of range or inconsistent (`invalid_request`)",
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use utoipa::openapi::path::{HttpMethod, OperationBuilder, PathItem};
    use utoipa::openapi::request_body::RequestBodyBuilder;
    use utoipa::openapi::security::SecurityRequirement;
    use utoipa::openapi::{OpenApiBuilder, PathsBuilder};

    fn statuses(doc: &OpenApi, path: &str) -> Vec<String> {
        let item = doc.paths.paths.get(path).expect("path");
        let op = item.get.as_ref().or(item.post.as_ref()).expect("operation");
        op.responses.responses.keys().cloned().collect()
    }

    #[test]
    fn answers_follow_the_shape_of_each_operation() {
        let open = OperationBuilder::new()
            .response("200", ResponseBuilder::new().description("ok"))
            .build();
        let secured_body = OperationBuilder::new()
            .security(SecurityRequirement::new(BEARER, Vec::<String>::new()))
            .request_body(Some(RequestBodyBuilder::new().build()))
            .response("201", ResponseBuilder::new().description("created"))
            .response("400", ResponseBuilder::new().description("own words"))
            .build();
        let mut doc = OpenApiBuilder::new()
            .paths(
                PathsBuilder::new()
                    .path("/open", PathItem::new(HttpMethod::Get, open))
                    .path(
                        "/things/{id}",
                        PathItem::new(HttpMethod::Post, secured_body),
                    ),
            )
            .build();
        add_bearer_scheme(&mut doc);
        complete(&mut doc, "ErrorBody");
        assert_eq!(statuses(&doc, "/open"), ["200"]);
        assert_eq!(
            statuses(&doc, "/things/{id}"),
            ["201", "400", "401", "403", "413", "415", "422"]
        );
        let post = doc.paths.paths["/things/{id}"].post.as_ref().expect("post");
        let own = &post.responses.responses["400"];
        let json = serde_json::to_value(own).expect("serialises");
        assert_eq!(json["description"], "own words");
        let components = doc.components.as_ref().expect("components");
        assert!(components.security_schemes.contains_key(BEARER));
    }
}
