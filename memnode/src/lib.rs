//! The dmkv memory node: a passive memory server reached by one-sided RDMA verbs.
//!
//! A memory node allocates its memory (anonymous, huge pages or a shared-memory file),
//! registers it under a random rkey at a fixed virtual address, serves soft RoCE (RoCEv2
//! over UDP) with one responder queue pair per client queue pair, and exposes an admin
//! HTTP API for health, Prometheus metrics, regions and queue-pair setup. It runs no
//! index logic. Bad input — malformed packets, unknown QPNs, wrong rkeys, out-of-bounds
//! or misaligned accesses — is dropped or NAKed as a hardware responder would, counted
//! per reason, and never panics the node or touches memory outside a region.
//!
//! * [`config`] — settings and their parsing (sizes such as `64MiB`);
//! * [`memory`] — allocating and registering the region;
//! * [`region_file`] — a region kept in a file across restarts (`--region-file`);
//! * [`qps`] — the queue-pair table and QP creation;
//! * [`qp_reclaim`] — destroying queue pairs idle past `--qp-idle-timeout`;
//! * [`dataplane`] — the soft-RoCE thread;
//! * [`metrics`] — counters and their Prometheus exposition;
//! * [`admin`] — the HTTP API; [`api`] — its JSON documents; [`auth`] — who may
//!   call it (admin token or grant);
//! * [`qp_grants`] — the grants a queue pair holds and the access scope they make;
//! * [`server`] — starting and stopping a whole node ([`Memnode::start`]);
//! * [`client`] — a blocking admin client and [`client::connect_udp`];
//! * [`registrar`] — the seam for registration with the metadata service;
//! * [`rpc`] — RPC workers executing requests next to memory (`--rpc-workers`).
//! * [`rdma_serving`] — serving through an RDMA NIC as the admin API sees it;
//!   [`admin_rdma`] — its routes; `rdma_path` — the NIC path itself (cargo feature
//!   `rdma`).
#![warn(missing_docs)]

pub mod admin;
pub mod admin_rdma;
pub mod api;
pub mod auth;
pub mod client;
pub mod config;
pub mod dataplane;
pub mod memory;
pub mod metrics;
pub mod qp_grants;
pub mod qp_reclaim;
pub mod qps;
#[cfg(feature = "rdma")]
pub mod rdma_path;
pub mod rdma_serving;
pub mod receive_path;
pub mod region_file;
pub mod registrar;
pub mod response_port;
pub mod rpc;
pub mod server;

pub use config::MemnodeConfig;
pub use receive_path::ReceivePath;
pub use response_port::ResponsePort;
pub use server::{Memnode, MemnodeHandle, StartError};
