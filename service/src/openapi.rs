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
//!
//! [`link`] adds OpenAPI links from an answer that creates something (a table, a queue
//! pair) to the routes under it, which clients and stateful tests follow.
//!
//! [`render`] writes the document as the service serves it, stating the range of every
//! unsigned integer: a schema of format `uint8`, `uint16`, `uint32` or `uint64` (what
//! `utoipa` writes for Rust's unsigned types) gets `minimum: 0` and the type's `maximum`
//! unless it names tighter bounds, so a document never lets a client believe that a
//! `u32` field takes 2^32 or that a `u64` field stops at 2^63 - 1.

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
        for op in operations_mut(item) {
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

/// Links the answer `status` of operation `method path` to every operation on
/// `target` (a path ending in a parameter, `/{id}`) and on the paths below it, passing
/// each `(parameter, runtime expression)` of `params` (`("id",
/// "$response.body#/id")`): what a client or a stateful test does next with what it
/// just created. Does nothing where `doc` lacks the operation or the answer.
pub fn link(
    doc: &mut OpenApi,
    (method, path, status): (&str, &str, &str),
    target: &str,
    params: &[(&str, &str)],
) {
    let mut links = Vec::new();
    for (p, item) in &doc.paths.paths {
        if p != target && !p.starts_with(&format!("{target}/")) {
            continue;
        }
        for (m, op) in operations(item) {
            let name = op
                .operation_id
                .clone()
                .unwrap_or_else(|| format!("{m}{}", p.replace(['/', '{', '}'], "_")));
            let reference = format!("#/paths/{}/{m}", p.replace('~', "~0").replace('/', "~1"));
            let l = params
                .iter()
                .fold(
                    utoipa::openapi::link::LinkBuilder::new().operation_ref(reference),
                    |b, (param, expression)| b.parameter(*param, *expression),
                )
                .build();
            links.push((name, l));
        }
    }
    let Some(item) = doc.paths.paths.get_mut(path) else {
        return;
    };
    let op = match method {
        "get" => item.get.as_mut(),
        "put" => item.put.as_mut(),
        "post" => item.post.as_mut(),
        "delete" => item.delete.as_mut(),
        "patch" => item.patch.as_mut(),
        _ => None,
    };
    let Some(utoipa::openapi::RefOr::T(answer)) =
        op.and_then(|op| op.responses.responses.get_mut(status))
    else {
        return;
    };
    for (name, l) in links {
        answer.links.insert(name, l.into());
    }
}

/// The operations of `item` with their methods, in lower case.
fn operations(
    item: &utoipa::openapi::PathItem,
) -> impl Iterator<Item = (&'static str, &utoipa::openapi::path::Operation)> {
    [
        ("get", item.get.as_ref()),
        ("put", item.put.as_ref()),
        ("post", item.post.as_ref()),
        ("delete", item.delete.as_ref()),
        ("patch", item.patch.as_ref()),
    ]
    .into_iter()
    .filter_map(|(m, op)| op.map(|op| (m, op)))
}

/// The document as the service serves it: `doc` as pretty JSON, with every unsigned
/// integer schema given its type's range (see the module documentation).
pub fn render(doc: &OpenApi) -> Result<String, serde_json::Error> {
    let mut json = serde_json::to_value(doc)?;
    bound_value(&mut json);
    serde_json::to_string_pretty(&json)
}

/// `doc()` rendered ([`render`]) once into `cell`: an API's document does not change
/// while it runs. A document that does not serialise becomes a JSON error body.
pub fn rendered(
    cell: &'static std::sync::OnceLock<String>,
    doc: impl FnOnce() -> OpenApi,
) -> &'static str {
    cell.get_or_init(|| {
        render(&doc()).unwrap_or_else(|e| {
            format!("{{\"error\":\"the document does not serialise: {e}\",\"code\":\"internal\"}}")
        })
    })
}

/// The answer of `GET /v1/openapi.json`: `text` as `application/json`.
pub fn json_response(text: &'static str) -> axum::response::Response {
    use axum::response::IntoResponse;
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        text,
    )
        .into_response()
}

/// `utoipa` spells the formats `u-int8` … `u-int64`; the document says `uint8` …
/// `uint64`.
fn unsigned_max(format: &str) -> Option<(&'static str, u64)> {
    match format {
        "uint8" | "u-int8" => Some(("uint8", u8::MAX.into())),
        "uint16" | "u-int16" => Some(("uint16", u16::MAX.into())),
        "uint32" | "u-int32" => Some(("uint32", u32::MAX.into())),
        "uint64" | "u-int64" => Some(("uint64", u64::MAX)),
        _ => None,
    }
}

/// Bounds the unsigned integer schemas in `v`; whether it changed anything.
fn bound_value(v: &mut serde_json::Value) -> bool {
    use serde_json::Value;
    match v {
        Value::Object(map) => {
            let mut changed = false;
            if let Some((format, max)) = map
                .get("format")
                .and_then(Value::as_str)
                .and_then(unsigned_max)
            {
                if map.get("format").and_then(Value::as_str) != Some(format) {
                    map.insert("format".into(), format.into());
                    changed = true;
                }
                if !map.contains_key("maximum") {
                    map.insert("maximum".into(), max.into());
                    changed = true;
                }
                if !map.contains_key("minimum") {
                    map.insert("minimum".into(), 0.into());
                    changed = true;
                }
            }
            for child in map.values_mut() {
                changed |= bound_value(child);
            }
            changed
        }
        Value::Array(items) => items.iter_mut().fold(false, |c, i| bound_value(i) | c),
        _ => false,
    }
}

/// The operations of `item` (GET, PUT, POST, DELETE, PATCH) that it has.
fn operations_mut(
    item: &mut utoipa::openapi::path::PathItem,
) -> impl Iterator<Item = &mut utoipa::openapi::path::Operation> {
    [
        &mut item.get,
        &mut item.put,
        &mut item.post,
        &mut item.delete,
        &mut item.patch,
    ]
    .into_iter()
    .flatten()
}

/// Marks every operation of `doc` as needing the bearer credential
/// ([`add_bearer_scheme`]) but those of the paths `public` accepts: for a service
/// whose routes are secured by one layer rather than one by one.
pub fn require_bearer_except(doc: &mut OpenApi, public: impl Fn(&str) -> bool) {
    for (path, item) in doc.paths.paths.iter_mut() {
        if public(path) {
            continue;
        }
        for op in operations_mut(item) {
            op.security = Some(vec![utoipa::openapi::security::SecurityRequirement::new::<
                _,
                _,
                &str,
            >(BEARER, [])]);
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
        let served: serde_json::Value =
            serde_json::from_str(&render(&doc).expect("renders")).expect("JSON");
        assert!(served["paths"]["/things/{id}"]["post"]["responses"]["415"].is_object());
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

    #[test]
    fn links_reach_every_operation_under_the_target() {
        let op = |status: &str| {
            OperationBuilder::new()
                .response(status, ResponseBuilder::new().description("x"))
                .build()
        };
        let mut doc = OpenApiBuilder::new()
            .paths(
                PathsBuilder::new()
                    .path("/things", PathItem::new(HttpMethod::Post, op("201")))
                    .path("/things/{id}", PathItem::new(HttpMethod::Get, op("200")))
                    .path(
                        "/things/{id}/part",
                        PathItem::new(HttpMethod::Put, op("200")),
                    )
                    .path("/thingsx/{id}", PathItem::new(HttpMethod::Get, op("200"))),
            )
            .build();
        link(
            &mut doc,
            ("post", "/things", "201"),
            "/things/{id}",
            &[("id", "$response.body#/id")],
        );
        let json = serde_json::to_value(&doc).expect("serialises");
        let links = json["paths"]["/things"]["post"]["responses"]["201"]["links"]
            .as_object()
            .expect("links");
        let refs: Vec<&str> = links
            .values()
            .map(|l| l["operationRef"].as_str().expect("operationRef"))
            .collect();
        assert_eq!(links.len(), 2, "{links:?}");
        assert!(refs.contains(&"#/paths/~1things~1{id}/get"));
        assert!(refs.contains(&"#/paths/~1things~1{id}~1part/put"));
        for l in links.values() {
            assert_eq!(l["parameters"]["id"], "$response.body#/id");
        }
    }

    #[test]
    fn unsigned_integers_get_their_range() {
        let mut v = serde_json::json!({
            "a": {"type": "integer", "format": "u-int32"},
            "b": [{"type": "integer", "format": "uint64", "minimum": 1}],
            "c": {"type": "integer", "format": "uint8", "maximum": 3},
            "d": {"type": "integer", "format": "int64"},
        });
        assert!(bound_value(&mut v));
        assert_eq!(v["a"]["format"], "uint32");
        assert_eq!(v["a"]["maximum"], 4_294_967_295u64);
        assert_eq!(v["a"]["minimum"], 0);
        assert_eq!(v["b"][0]["maximum"], u64::MAX);
        assert_eq!(v["b"][0]["minimum"], 1);
        assert_eq!(v["c"]["maximum"], 3);
        assert_eq!(v["c"]["minimum"], 0);
        assert!(v["d"].get("maximum").is_none());
        assert!(!bound_value(&mut v), "a second pass changes nothing");
    }
}
