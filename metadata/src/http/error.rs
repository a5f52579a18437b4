//! Error answers: an [`ApiError`] is a status, a stable code and a message, sent as
//! JSON [`ErrorBody`] (the service kit's [`dmkv_service::ApiError`] under this API's
//! conventions, [`MetadataApi`]); every catalog error maps to one.

use axum::http::StatusCode;

use crate::api::ErrorBody;
use crate::catalog::CatalogError;

dmkv_service::api! {
    /// The API's conventions for the service kit: errors carry [`ErrorBody`], bodies up
    /// to 1 MiB.
    pub MetadataApi: ErrorBody, dmkv_api::metadata::MAX_REQUEST_BODY
}

/// An error answer: status, stable code and message.
pub type ApiError = dmkv_service::ApiError<MetadataApi>;

impl From<CatalogError> for ApiError {
    fn from(e: CatalogError) -> ApiError {
        let msg = e.to_string();
        match e {
            CatalogError::Invalid(_) => {
                ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_request", msg)
            }
            CatalogError::NotFound { code, .. } => ApiError::new(StatusCode::NOT_FOUND, code, msg),
            CatalogError::Conflict { code, .. } => ApiError::new(StatusCode::CONFLICT, code, msg),
            CatalogError::Expired(_) => ApiError::new(StatusCode::GONE, "lease_expired", msg),
            CatalogError::OutOfMemory(_) => {
                ApiError::new(StatusCode::INSUFFICIENT_STORAGE, "out_of_memory", msg)
            }
            CatalogError::NoMemnodes(_) => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "no_memnodes", msg)
            }
            CatalogError::Scrub(_) => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "memnode_unavailable", msg)
            }
            CatalogError::Store(_) => {
                tracing::error!(error = %msg, "persistence failed");
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "storage_error", msg)
            }
        }
    }
}
