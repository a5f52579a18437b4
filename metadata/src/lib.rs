//! The dmkv metadata service.
#![warn(missing_docs)]

pub mod alloc;
pub mod api;
pub mod catalog;
pub mod clock;
pub mod expiry;
pub mod http;
pub mod metrics;
pub mod placement;
pub mod server;
pub mod store;

pub use server::{MetadataServer, ServerConfig, ServerHandle, StartError, StoreConfig};
pub mod carve;
pub mod client;
