//! The JSON documents of the HTTP API: declared in [`dmkv_api::metadata`] (with
//! their OpenAPI schemas, feature `openapi`), which the service's clients share.

pub use dmkv_api::metadata::*;
pub use dmkv_api::rereplication::*;
