//! dmkv's control plane as its users see it: the JSON documents of every HTTP API,
//! the one HTTP client that carries them, and the one queue-pair setup built on it.
//!
//! * [`metadata`] — the metadata service's documents, [`cluster`] — its cluster view's;
//!   [`metadata_client`] — its client;
//! * [`memnode`] — a memory node's admin documents; [`memnode_admin`] — its calls;
//!   [`memnode_rdma`] — its RDMA queue-pair setup documents;
//! * [`switch`] — the switch accelerator's queue-pair documents and calls;
//! * [`http`] — the HTTP client ([`HttpClient`]); [`ClientError`] — the one error;
//!   [`ErrorBody`] — the error document of every API;
//! * [`tls`] — which servers the client trusts on `https://` URLs ([`tls::ClientTls`]);
//! * [`credentials`] — scoped credentials (`/v1/credentials`); [`secret_file`] —
//!   reading a secret from a file or the environment;
//! * [`qp`] — queue pairs to memory nodes: direct, through the switch, or through a
//!   relay ([`qp::QpPath`]); `qp_rdma` — on RDMA NICs (cargo feature `rdma`);
//! * [`rereplication`] — re-replication and drain progress documents;
//! * [`grant`] — signed grants scoping a client to a table's memory on a memory node;
//! * [`layout`] — remote-memory layout facts the service and the clients share;
//! * [`rpc`] — the framing of RPCs to a memory node's workers.
//!
//! No server framework, no storage engine: servers and clients both depend on this.
#![warn(missing_docs)]

pub mod clover_directory;
pub mod clover_layout;
pub mod cluster;
pub mod credentials;
mod error;
mod error_body;
pub mod feed_layout;
pub mod grant;
pub mod http;
pub mod inplace_tuple;
pub mod latch_word;
pub mod layout;
pub mod memnode;
pub mod memnode_admin;
pub mod memnode_rdma;
pub mod metadata;
pub mod metadata_client;
pub mod qp;
#[cfg(feature = "rdma")]
pub mod qp_rdma;
pub mod race_layout;
pub mod rereplication;
pub mod rpc;
pub mod rpc_clover;
pub mod rpc_clover_create;
pub mod rpc_clover_link;
pub mod rpc_inplace;
pub mod rpc_race;
pub mod rpc_ring;
pub mod schemas;
pub mod secret_file;
pub mod switch;
pub mod switch_copy;
pub mod tls;
pub mod trace_context;

pub use error::ClientError;
pub use error_body::ErrorBody;
pub use http::{HttpClient, RawResponse};
pub use metadata_client::MetadataClient;
