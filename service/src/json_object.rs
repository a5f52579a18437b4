//! A JSON request body that must be a JSON object.
//!
//! axum's `Json<T>` lets serde read a struct from a JSON *array* of its fields in
//! order (`[1, 0, "10.0.0.1:4791"]` for `{"qpn": 1, "psn": 0, "addr": ...}`), which no
//! API document allows and no client means. [`JsonObject`] reads the body as JSON,
//! refuses anything but an object (422 `invalid_request`), and only then reads the
//! object into `T`; its rejection [`BodyRejection`] converts into the kit's
//! [`ApiError`] with the same answers as a refused `Json<T>` (400, 413, 415, 422).

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{Api, ApiError};

/// A request body that is a JSON object, read into `T`.
#[derive(Debug, Clone, Copy, Default)]
pub struct JsonObject<T>(pub T);

/// Why a [`JsonObject`] body was refused.
#[derive(Debug)]
pub enum BodyRejection {
    /// axum refused the body: not JSON, the wrong content type, too large.
    Json(JsonRejection),
    /// Well-formed JSON that is not an object, or whose fields do not make a `T`.
    Invalid(String),
}

/// What kind of JSON value `v` is, for messages.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Reads `value` into `T` if it is a JSON object.
pub fn from_object<T: DeserializeOwned>(value: Value) -> Result<T, BodyRejection> {
    if !value.is_object() {
        return Err(BodyRejection::Invalid(format!(
            "the request body must be a JSON object, not {}",
            kind(&value)
        )));
    }
    serde_json::from_value(value)
        .map_err(|e| BodyRejection::Invalid(format!("invalid request body: {e}")))
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonObject<T> {
    type Rejection = BodyRejection;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let Json(value) = Json::<Value>::from_request(req, state)
            .await
            .map_err(BodyRejection::Json)?;
        from_object(value).map(JsonObject)
    }
}

/// The answer when a handler takes [`JsonObject`] directly rather than converting the
/// rejection into its API's error: the same status and code, in a dmkv error document
/// (`{"error", "code"}`).
impl IntoResponse for BodyRejection {
    fn into_response(self) -> Response {
        let e = ApiError::<Generic>::from(self);
        e.into_response()
    }
}

/// The conventions of no API in particular, for [`BodyRejection`]'s own answer.
enum Generic {}

impl Api for Generic {
    type ErrorBody = Value;
    const MAX_BODY: usize = 0;

    fn error_body(code: &'static str, message: String) -> Value {
        serde_json::json!({ "error": message, "code": code })
    }
}

impl<A: Api> From<BodyRejection> for ApiError<A> {
    fn from(r: BodyRejection) -> Self {
        match r {
            BodyRejection::Json(r) => ApiError::from(r),
            BodyRejection::Invalid(message) => {
                ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_request", message)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Qp {
        qpn: u32,
        psn: u32,
    }

    async fn read(body: &str, content_type: &str) -> Result<Qp, BodyRejection> {
        let req = Request::builder()
            .method("POST")
            .header("content-type", content_type)
            .body(Body::from(body.to_owned()))
            .expect("request");
        JsonObject::<Qp>::from_request(req, &()).await.map(|j| j.0)
    }

    fn status(r: BodyRejection) -> StatusCode {
        struct T;
        impl Api for T {
            type ErrorBody = Value;
            const MAX_BODY: usize = 1024;
            fn error_body(code: &'static str, message: String) -> Value {
                serde_json::json!({ "code": code, "error": message })
            }
        }
        ApiError::<T>::from(r).status
    }

    #[tokio::test]
    async fn only_objects_are_read() {
        let ok = read(r#"{"qpn": 1, "psn": 2}"#, "application/json").await;
        assert_eq!(ok.expect("an object is read"), Qp { qpn: 1, psn: 2 });
        for body in ["[1, 2]", "null", "3", "\"x\""] {
            let e = read(body, "application/json").await.expect_err(body);
            assert_eq!(status(e), StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        }
        let e = read(r#"{"qpn": "one"}"#, "application/json")
            .await
            .unwrap_err();
        assert_eq!(status(e), StatusCode::UNPROCESSABLE_ENTITY);
        let e = read("{", "application/json").await.unwrap_err();
        assert_eq!(status(e), StatusCode::BAD_REQUEST);
        let e = read(r#"{"qpn": 1, "psn": 2}"#, "text/plain")
            .await
            .unwrap_err();
        assert_eq!(status(e), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    }
}
