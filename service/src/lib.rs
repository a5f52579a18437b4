//! The mechanism every dmkv service shares — the memory node's admin API, the metadata
//! service and the accelerator's admin API — so that each of them holds only its own
//! policy:
//!
//! * [`signals`] — waiting for SIGTERM or SIGINT ([`Signals`]), installed before a
//!   service says it is serving;
//! * [`server`] — an HTTP server on its own thread: bind ([`Listener`]), serve an axum
//!   router with graceful shutdown, stop ([`HttpServer::stop`]) with a bounded drain;
//! * [`tls`] — a service's certificate and key, loaded and checked at start-up
//!   ([`ServerTls`]), which a [`Listener`] serves HTTPS with ([`tls_listener`]),
//!   and the flags that name them ([`tls_args`]);
//! * [`auth`] — bearer tokens, compared in constant time;
//! * [`auth`] — bearer tokens, compared in constant time; [`secrets`] — reading a
//!   token or key from a file or the environment (never argv);
//! * [`trace`] — request spans named after the route template, children of the
//!   caller's W3C `traceparent`, heartbeats untraced by default;
//! * [`json_object`] — request bodies that must be JSON objects ([`JsonObject`]);
//! * [`openapi`] — the bearer scheme and the answers the kit gives, added to every
//!   service's OpenAPI document;
//! * [`error`] — error answers: an HTTP status and the API's JSON error document
//!   ([`ApiError`], generic over the API's [`Api`] conventions).
//!
//! The kit knows no service and no API document: the error body type is the service's
//! (`dmkv-api`'s `ErrorBody`), handed in through [`Api`].
#![warn(missing_docs)]

pub mod auth;
pub mod error;
pub mod json_object;
pub mod openapi;
pub mod secrets;
pub mod server;
pub mod signals;
pub mod tls;
pub mod tls_args;
pub mod tls_listener;
pub mod trace;

pub use error::{Api, ApiError};
pub use json_object::{BodyRejection, JsonObject};
pub use server::{HttpServer, Listener, SpawnError, Stop};
pub use signals::Signals;
pub use tls::{ServerTls, TlsError};
pub use tls_args::TlsArgs;
