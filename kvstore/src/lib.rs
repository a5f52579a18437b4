//! The dmkv client library.
//!
//! Clients of dmkv reach passive memory nodes only through one-sided RDMA verbs
//! (READ, WRITE, CAS, FAA) provided by the `verbs` crate. This crate turns those
//! verbs into a key-value store:
//!
//! - a shared `Client` (metadata-service link, caches; `Send + Sync`) hands out
//!   per-thread `Session`s that own their queue pairs, following the thread-aware
//!   resource model of `verbs::worker`;
//! - a `Table` offers `get`, `put` (upsert), `insert`, `update` and `delete` with
//!   the typed errors of [`error::KvError`]; bad input is an error, never a panic;
//! - each table is backed by one of two indexes:
//!   - [`clover`]: per-key append-only chains of immutable version nodes; a write
//!     WRITEs a whole node and links it with one CAS on the old tail's header;
//!   - [`race`]: RACE extendible hashing; 8-byte slots in 64-byte buckets point at
//!     out-of-place, CRC-protected KV blocks, and a directory of subtables grows by
//!     splitting.
//!
//! The remote memory layouts (node, root, slot, bucket, KV block, directory
//! entry) have encoders and strict parsers that accept arbitrary bytes and never
//! panic. The networked layer:
//!
//! - [`Client`] ([`client`]): `Client::connect(metadata_url, ClientOptions)` for a
//!   running cluster, `Client::in_process` for one whose memory nodes run in this
//!   process (the `testbed` crate starts such embedded clusters, on the `local`, `udp`
//!   or `shm` transport);
//! - [`Session`] ([`session`]): one per thread, owning a `verbs` worker with one
//!   queue pair per memory node, an allocator ([`alloc`]) with reclamation
//!   ([`reclaim`]), caches and counters ([`stats`]);
//! - [`Table`] ([`table`]): the async API, dispatching to the table's index.
//!
//! Both indexes are served: a table's catalog entry says which one it uses.
//! A table of index `inplace` (its catalog entry carries the latch scheme, the
//! capacity and where its table-owned tuple area and latch array are) is served
//! by [`inplace`] instead: fixed-size tuples overwritten in place under a selectable
//! latch scheme (pessimistic latches, versioning, CRC-64, FaRM, and the broken
//! bookend scheme as a demo).
//!
//! Known limits of this version, each waiting on another component:
//! - a key's root is published with the metadata service's unconditional tail
//!   hint, so only the client the service told "created" may publish it; if that
//!   client dies between creating the chain and publishing the root, writes of the
//!   key fail with `Unavailable` (a conditional tail update would let others take
//!   over);
//! - `open_chain` is insert-or-open, so reading an absent key creates its chain;
//! - nodes live in chunks leased by the client that wrote them: data outlives a
//!   client only as long as its leases (table-owned data chunks would fix that);
//! - RACE subtables live in chunks leased under the table's name and renewed by
//!   every session using the table (the metadata service cannot allocate
//!   table-owned chunks yet); a RACE directory never doubles: it is laid out at
//!   its full depth (4096 entries in the 64 KiB area), which bounds a table to
//!   4096 subtables;
//! - a session connects to the memory nodes registered when it opens;
//! - metadata calls (first touch of a key, leases) block the session's thread.
//!
//! The control plane (the metadata service's documents and client, queue-pair setup)
//! is `dmkv_api`'s; the indexes are tested under concurrency with the `testbed`
//! crate's history recorder and linearizability checker.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod accel;
pub mod alloc;
pub mod carve;
pub mod client;
pub mod clover;
mod connect;
pub mod error;
pub mod inplace;
mod offload;
pub mod options;
pub mod ptr;
pub mod race;
pub mod reclaim;
mod remote;
pub mod session;
pub mod size_class;
pub mod stats;
pub mod table;
pub mod xxh64;

pub use alloc::MemoryStats;
pub use client::Client;
pub use dmkv_api::metadata::{IndexKind, TableDescription};
pub use error::{KvError, MAX_KEY_LEN};
pub use options::{AcceleratorUse, ClientOptions, UdpRelay, UdpRoute};
pub use session::Session;
pub use stats::{OpStats, SessionStats};
pub use table::Table;
pub use verbs::rc::Pmtu;
pub use verbs::transport::TransportKind;
