//! The blocking client of the service: [`dmkv_api::MetadataClient`], over the one
//! control-plane HTTP client.

pub use dmkv_api::http::{MAX_IDLE, encode_query};
pub use dmkv_api::metadata_client::MetadataClient;
pub use dmkv_api::{ClientError, RawResponse};
