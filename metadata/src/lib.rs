//! The dmkv metadata service: memnode registry, two-level allocation, table catalog and
//! the index slow paths. It is off the data path: clients use it to find memory and
//! tables, then talk to memnodes with one-sided verbs.
//!
//! * [`store`] — persistence behind the [`store::MetaStore`] trait ([`store::SledStore`],
//!   [`store::MemStore`]);
//! * [`catalog`] — the state and every operation on it, with time as an argument;
//! * [`alloc`] — free-extent maps and where in a region a lease goes (first fit, best
//!   fit); [`placement`] — which memnode serves it (most free, round robin);
//! * [`expiry`] — lease expiry and the grace period, sans IO; [`clock`] — real and fake
//!   time;
//! * [`http`] — the axum API and its OpenAPI document; [`api`] — its JSON documents;
//!   [`metrics`] — Prometheus text;
//! * [`server`] — starting and stopping the whole service ([`MetadataServer::start`]);
//! * [`client`] — a blocking client; [`carve`] — the client-side size-class carver.
//!
//! # Allocation policy
//!
//! Clients lease coarse **chunks** and carve size classes out of them locally
//! ([`carve::SizeClasses`]). A lease's length is the request rounded up to the chunk
//! size of the region that serves it, and its address is aligned to that chunk size
//! (relative to the region base). The chunk size is configurable (a power of two, 1–64
//! MiB, default 4 MiB); a region smaller than 16 chunks uses a smaller one: the largest
//! power of two giving at least 16 chunks, never below 4 KiB (a 1 MiB memnode hands out
//! 64 KiB chunks). When no healthy memnode has a free extent large enough the answer is
//! 507 `out_of_memory` at once, never a wait.
//!
//! Leases expire unless renewed (default TTL 30 s). An expired lease cannot be renewed;
//! its memory returns to the free map only after a grace period (default 5 s), so late
//! writes of a crashed holder cannot hit memory someone else already got. Freeing a
//! lease explicitly returns the memory at once.
//!
//! # Memnode registration policy
//!
//! Registration is idempotent by name. Registering again with the same regions (same
//! rkeys, addresses and lengths — e.g. after the metadata service restarted, or after a
//! lost heartbeat) keeps the id and every lease. Registering again with different
//! regions means the memnode restarted and its memory is new: the id stays, its `epoch`
//! increases, every lease on it is revoked, and RACE directories that lived on it are
//! allocated afresh (the table's `race.generation` increases). Deregistration (`DELETE
//! /v1/memnodes/{id}`, which the memnode sends on shutdown) revokes its leases and
//! removes it from tables. Memnodes whose last heartbeat is older than the heartbeat
//! timeout (default 3 s; memnodes heartbeat every second) are unhealthy and get no new
//! leases; after a restart of the service every memnode gets one timeout to check in.
//!
//! # Durability
//!
//! Every acknowledged change is written as one atomic batch and flushed before the
//! answer; the free maps are rebuilt from the regions and leases at startup, so they
//! cannot disagree with them. Heartbeat times are not persisted.
#![warn(missing_docs)]

pub mod alloc;
pub mod api;
pub mod carve;
pub mod catalog;
pub mod client;
pub mod clock;
pub mod cluster;
pub mod dashboard;
pub mod expiry;
pub mod http;
pub mod metrics;
pub mod placement;
pub mod server;
pub mod store;

pub use server::{MetadataServer, ServerConfig, ServerHandle, StartError, StoreConfig};
