//! Parsing what a request carries beyond typed JSON: an optional body, numeric path
//! segments and base64 keys.

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::http::StatusCode;
use base64::Engine as _;

use super::error::ApiError;

/// Parses a JSON body that may be empty (then `T::default()`); otherwise it must be a
/// JSON object (422 `invalid_request` for any other JSON).
pub(super) fn optional_json<T: Default + serde::de::DeserializeOwned>(
    body: Result<Bytes, BytesRejection>,
) -> Result<T, ApiError> {
    let body = body.map_err(|r| {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::too_large()
        } else {
            ApiError::new(r.status(), "bad_request", r.body_text())
        }
    })?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    let value: serde_json::Value = serde_json::from_slice(&body).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_json",
            format!("request body is not valid JSON: {e}"),
        )
    })?;
    Ok(dmkv_service::json_object::from_object(value)?)
}

/// A decimal `u64` path segment; 400 `invalid_path` otherwise.
pub(super) fn parse_id(what: &str, text: &str) -> Result<u64, ApiError> {
    text.parse().map_err(|_| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_path",
            format!("{what} {text:?} is not a decimal 64-bit number"),
        )
    })
}

/// A key in standard base64; 422 `invalid_request` otherwise.
pub(super) fn decode_key(text: &str) -> Result<Vec<u8>, ApiError> {
    base64::engine::general_purpose::STANDARD
        .decode(text.as_bytes())
        .map_err(|e| {
            ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_request",
                format!("key is not standard base64: {e}"),
            )
        })
}

/// 400 `invalid_query`: the query string does not parse into the route's parameters.
pub(super) fn invalid_query(e: QueryRejection) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "invalid_query", e.body_text())
}
