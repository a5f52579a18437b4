//! The JSON documents of the admin HTTP API: declared in [`dmkv_api::memnode`], which
//! the node's clients share.

pub use dmkv_api::memnode::*;
