//! The dmkv metadata service: memnode registry, two-level allocation, table catalog and
//! the index slow paths. It is off the data path: clients use it to find memory and
//! tables, then talk to memnodes with one-sided verbs.
//!
//! * [`store`] — persistence behind the [`store::MetaStore`] trait ([`store::SledStore`],
//!   [`store::MemStore`]);
//! * [`catalog`] — the state and every operation on it, with time as an argument;
//! * [`alloc`] — free-extent maps and where in a region a lease goes (first fit, best
//!   fit); [`placement`] — which memnode serves it (most free, round robin);
//! * [`inplace`] — checking and sizing in-place tables, sans IO;
//! * [`expiry`] — lease expiry and the grace period, sans IO; [`clock`] — real and fake
//!   time;
//! * [`http`] — the axum API and its OpenAPI document; [`api`] — its JSON documents;
//!   [`metrics`] — Prometheus text;
//! * [`server`] — starting and stopping the whole service ([`MetadataServer::start`]);
//! * [`client`] — the blocking client ([`dmkv_api::MetadataClient`]); clients carve
//!   size classes out of their chunks themselves (`kvstore::carve`).
//!
//! # Allocation policy
//!
//! Clients lease coarse **chunks** and carve size classes out of them locally
//! (`kvstore::carve::SizeClasses`). A lease's length is the request rounded up to the chunk
//! size of the region that serves it, and its address is aligned to 64 bytes (relative
//! to the region base: what carving needs, so memory handed back in 64-byte granules
//! is reusable). The chunk size is configurable (a power of two, 1–64 MiB, default 4
//! MiB); a region smaller than 16 chunks uses a smaller one: the largest power of two
//! giving at least 16 chunks, never below 4 KiB (a 1 MiB memnode hands out 64 KiB
//! chunks). A request may name `min_bytes`: when no free extent holds a whole chunk,
//! it gets the largest free extent of at least that many bytes. When no healthy
//! memnode has a free extent large enough the answer is 507 `out_of_memory` at once,
//! never a wait. Where in a region a data lease goes (continuing its table's run of
//! adopted memory first) is in `catalog::memory`.
//!
//! Leases expire unless renewed (default TTL 30 s). An expired lease cannot be renewed;
//! its memory returns to the free map only after a grace period (default 5 s), so late
//! writes of a crashed holder cannot hit memory someone else already got. Freeing a
//! lease explicitly returns the memory at once.
//!
//! # Table memory and data leases
//!
//! Memory that holds a table's data is never reused while the table lives. A client
//! carving values of a table asks for a **data lease**: `POST /v1/leases` with
//! `table`. While the client renews it, it is the client's (listed under its name,
//! renewable, freeable); once it expires and its grace period ends, the sweep does not
//! reclaim it — the table **adopts** it (`owner: table:<name>`, no expiry,
//! `adopted_at_ms` set). Leases without a table keep expiring into the free map as
//! before. Table-owned memory — a RACE directory, an in-place tuple area or latch
//! array, adopted data leases — is freed when the table is dropped; data leases that
//! live clients still hold for a dropped table expire at once and come back after
//! the grace period. `GET /v1/tables/{name}` reports the figures (`memory`).
//!
//! Why adoption instead of chunks owned by the table from the start: a live client's
//! chunk stays accountable to it (listed, renewed, freeable when it knows it holds
//! nothing), and the only state change is at the moment the service would otherwise
//! have had to guess — when a lease lapses, the service cannot know which objects
//! in it are live (current Clover tails, KV blocks RACE slots point to, written by
//! this client or by others that recycled its freed objects), so it keeps all of it.
//! Table-owned-from-the-start would need the same per-table accounting plus a
//! separate "carving right" lease, and would keep the same stranded bytes.
//!
//! A client that stops cleanly hands its data leases over at once (`POST
//! /v1/leases/{id}/adopt` with `keep_bytes`): the table adopts the prefix its objects
//! lie in (rounded up to 64 bytes) and the rest returns to the free map. What a table
//! adopts merges into its adjacent adopted records (`catalog::runs`): one record per
//! contiguous run, however many sessions wrote. **Bound on
//! stranded memory**: a client that crashes leaves at most the data leases it held
//! — per table and memnode, the chunks it leased (each at least the service's chunk
//! size) — allocated to the table until the table is dropped; in them, bytes that
//! hold no live value are the never-carved tails (below one chunk per table and
//! memnode, plus less than one largest size class per older chunk), carved objects
//! not yet handed out (under 4 KiB per size class) and objects the client had freed
//! or superseded but not yet reused. A client that stops cleanly strands only the
//! unused part of the prefixes it hands over. Nothing a crashed client leaves
//! blocks anyone: the table simply keeps those bytes.
//!
//! # Memnode registration policy
//!
//! Registration is idempotent by name. Registering again with the same regions (same
//! rkeys, addresses and lengths — e.g. after the metadata service restarted, or after a
//! lost heartbeat) keeps the id and every lease. Registering again with different
//! regions means the memnode restarted and its memory is new: the id stays, its `epoch`
//! increases, every lease on it is revoked, and RACE directories that lived on it are
//! allocated afresh (the table's `race.generation` increases); an in-place table's tuple
//! area and latch array on it are not (their contents are gone with the memory): its
//! description then has no `inplace.area`, and clients refuse to open it. Deregistration (`DELETE
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
pub mod catalog;
pub mod client;
pub mod clock;
pub mod cluster;
pub mod expiry;
pub mod grant_issuer;
pub mod history;
pub mod http;
pub mod inplace;
pub mod key_lookup;
pub mod metrics;
pub mod placement;
pub mod rereplication;
pub mod scrub;
pub mod server;
pub mod store;

pub use server::{MetadataServer, ServerConfig, ServerHandle, StartError, StoreConfig};
