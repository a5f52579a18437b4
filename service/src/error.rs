//! Error answers: an HTTP status and the API's JSON error document.
//!
//! The document is the API's own type (`{"error": "...", "code": "..."}` in dmkv), so
//! the kit is generic over it: a service names its conventions once, as a type
//! implementing [`Api`] (declared with [`api!`](crate::api!)), and answers with
//! `ApiError<ThatApi>`.

use std::fmt;
use std::marker::PhantomData;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// The conventions of one HTTP API: the document its error answers carry, and the
/// largest request body it takes (named in its 413 answers).
pub trait Api: 'static {
    /// The JSON document of every error answer.
    type ErrorBody: Serialize;

    /// Largest request body accepted, in bytes.
    const MAX_BODY: usize;

    /// The error document for a stable machine-readable `code` and a human-readable
    /// `message`.
    fn error_body(code: &'static str, message: String) -> Self::ErrorBody;
}

/// Declares an API's conventions: an uninhabited type implementing [`Api`] whose error
/// document is `$body` — a dmkv error document, a struct with the strings `error` (the
/// message) and `code` — and whose request bodies are at most `$max_body` bytes.
///
/// ```
/// #[derive(serde::Serialize)]
/// pub struct ErrorBody {
///     pub error: String,
///     pub code: String,
/// }
///
/// dmkv_service::api! {
///     /// The admin API's conventions.
///     pub AdminApi: ErrorBody, 64 * 1024
/// }
///
/// type ApiError = dmkv_service::ApiError<AdminApi>;
/// let e = ApiError::too_large();
/// assert_eq!(e.message, "request body exceeds the 65536-byte limit");
/// ```
#[macro_export]
macro_rules! api {
    ($(#[$attr:meta])* $vis:vis $name:ident: $body:path, $max_body:expr) => {
        $(#[$attr])*
        #[derive(Debug)]
        $vis enum $name {}

        impl $crate::Api for $name {
            type ErrorBody = $body;
            const MAX_BODY: usize = $max_body;

            fn error_body(code: &'static str, message: ::std::string::String) -> $body {
                $body {
                    error: message,
                    code: code.to_owned(),
                }
            }
        }
    };
}

/// An error answer of API `A`: status, stable code and message.
pub struct ApiError<A> {
    /// HTTP status.
    pub status: StatusCode,
    /// Machine-readable code.
    pub code: &'static str,
    /// Human-readable message.
    pub message: String,
    api: PhantomData<fn() -> A>,
}

impl<A> ApiError<A> {
    /// An error with `status`, `code` and `message`.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            api: PhantomData,
        }
    }

    /// 500 `internal`: something that should not fail did (a blocking task panicked).
    pub fn internal(why: impl fmt::Display) -> Self {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            why.to_string(),
        )
    }
}

impl<A: Api> ApiError<A> {
    /// 413 `body_too_large`: the body exceeds [`Api::MAX_BODY`].
    pub fn too_large() -> Self {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!("request body exceeds the {}-byte limit", A::MAX_BODY),
        )
    }
}

impl<A: Api> IntoResponse for ApiError<A> {
    fn into_response(self) -> Response {
        let status = self.status;
        let mut response = (status, Json(A::error_body(self.code, self.message))).into_response();
        if status == StatusCode::PAYLOAD_TOO_LARGE {
            // The rest of the body is never read, so the connection cannot carry another
            // request: say so, or a client would reuse it and see it closed under its
            // next request.
            response.headers_mut().insert(
                axum::http::header::CONNECTION,
                axum::http::HeaderValue::from_static("close"),
            );
        }
        response
    }
}

/// A JSON body axum refused: 422 `invalid_request` (well-formed, wrong fields), 400
/// `invalid_json` (syntax), 415 `unsupported_media_type` (not JSON), 413
/// `body_too_large`, else the rejection's own status with `bad_request`.
impl<A: Api> From<JsonRejection> for ApiError<A> {
    fn from(r: JsonRejection) -> Self {
        let text = r.body_text();
        match &r {
            JsonRejection::JsonDataError(_) => {
                ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_request", text)
            }
            JsonRejection::JsonSyntaxError(_) => {
                ApiError::new(StatusCode::BAD_REQUEST, "invalid_json", text)
            }
            JsonRejection::MissingJsonContentType(_) => ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "expected a JSON body with `Content-Type: application/json`",
            ),
            _ if r.status() == StatusCode::PAYLOAD_TOO_LARGE => ApiError::too_large(),
            _ => ApiError::new(r.status(), "bad_request", text),
        }
    }
}

impl<A> fmt::Debug for ApiError<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiError")
            .field("status", &self.status)
            .field("code", &self.code)
            .field("message", &self.message)
            .finish()
    }
}

impl<A> Clone for ApiError<A> {
    fn clone(&self) -> Self {
        ApiError::new(self.status, self.code, self.message.clone())
    }
}

impl<A> PartialEq for ApiError<A> {
    fn eq(&self, other: &Self) -> bool {
        (self.status, self.code, &self.message) == (other.status, other.code, &other.message)
    }
}

impl<A> Eq for ApiError<A> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Body {
        error: String,
        code: String,
    }

    enum Test {}

    impl Api for Test {
        type ErrorBody = Body;
        const MAX_BODY: usize = 64;
        fn error_body(code: &'static str, message: String) -> Body {
            Body {
                error: message,
                code: code.to_owned(),
            }
        }
    }

    #[test]
    fn answers_carry_status_and_document() {
        let e = ApiError::<Test>::too_large();
        assert_eq!(e.status, StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(e.message, "request body exceeds the 64-byte limit");
        let resp = ApiError::<Test>::new(StatusCode::CONFLICT, "taken", "x").into_response();
        assert_eq!(resp.status(), StatusCode::CONFLICT);
        assert!(resp.headers().get(axum::http::header::CONNECTION).is_none());
        // A 413 closes the connection (its body was not read) and says so.
        let resp = e.clone().into_response();
        assert_eq!(
            resp.headers().get(axum::http::header::CONNECTION),
            Some(&axum::http::HeaderValue::from_static("close"))
        );
        assert_eq!(
            ApiError::<Test>::internal("boom"),
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "boom")
        );
    }
}
