//! The dmkv client library.
//!
//! Clients of dmkv reach passive memory nodes only through one-sided RDMA verbs
//! (READ, WRITE, CAS, FAA). This crate turns those verbs into a key-value store:
//!
//! - a shared [`Client`] (the metadata-service link and caches; `Send + Sync`,
//!   cheap to clone) creates tables ([`Client::create_table`] with a [`TableSpec`])
//!   and hands out per-thread [`Session`]s;
//! - a [`Session`] owns its queue pairs — one per memory node — and runs the
//!   operations of its tables;
//! - a [`Table`] offers `get`, `put` (upsert), `insert`, `update` and `delete` with
//!   the typed errors of [`KvError`]; bad input is an error, never a panic.
//!
//! # Sessions, threads and futures
//!
//! The table operations are `async`, but their futures are **`!Send`** and only make
//! progress inside [`Session::block_on`] (or as tasks started with
//! [`Session::spawn`] while `block_on` runs) on the thread that owns the session.
//! This is the RDMA resource model on purpose (SMART's thread-aware resources): a
//! session's queue pairs, completion polling, credits and caches belong to one
//! thread and are never shared or locked on the hot path; many tasks of that thread
//! share them. `block_on` drives the queue pairs and the tasks together, so a
//! `Table` future handed to another executor would never complete.
//!
//! So: one [`Client`] per process, one [`Session`] per thread. To use dmkv from an
//! async application (tokio, …), give each session a dedicated thread and talk to it
//! over channels; `examples/tokio_app.rs` shows how.
//!
//! ```
//! use kvstore::{Client, KvError, TableSpec, TransportKind};
//!
//! // An in-process cluster (metadata service and one memory node) for the example;
//! // a real deployment uses `Client::connect("http://metadata:7000", options)`.
//! let client: Client = testbed::embedded_client(testbed::EmbeddedOptions {
//!     transport: TransportKind::Local,
//!     ..Default::default()
//! })?;
//! client.create_table("users", &TableSpec::clover(1024))?;
//!
//! let session = client.session()?;
//! let users = session.table("users")?;
//! session.block_on(async {
//!     users.put(b"alice", b"admin").await?;
//!     assert_eq!(users.get(b"alice").await?, Some(b"admin".to_vec()));
//!     assert_eq!(users.get(b"bob").await?, None);
//!     assert_eq!(users.insert(b"alice", b"x").await, Err(KvError::AlreadyExists));
//!     Ok::<_, KvError>(())
//! })?;
//! session.quiesce();
//! # Ok::<(), KvError>(())
//! ```
//!
//! # Indexes
//!
//! Each table is served by one index, chosen when it is created ([`TableSpec`]):
//!
//! - **Clover**: per-key append-only chains of immutable version nodes; a write
//!   WRITEs a whole node and links it with one CAS on the old tail's header;
//! - **RACE**: extendible hashing; 8-byte slots in 64-byte buckets point at
//!   out-of-place, CRC-protected KV blocks, and a directory of subtables grows by
//!   splitting;
//! - **in place**: a fixed array of fixed-size tuples overwritten in place under a
//!   selectable latch scheme ([`SchemeSpec`]: pessimistic latches, versioning,
//!   CRC-64, FaRM, switch-assisted optimistic latching, and the broken bookend
//!   scheme as a demo).
//!
//! The remote memory layouts (node, root, slot, bucket, KV block, directory
//! entry) have strict parsers that accept arbitrary bytes and never panic.
//! [`latch_schemes`] exposes the latch schemes on raw memory, without a table, for
//! experiments and benchmarks.
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
//! - metadata calls (first touch of a key, leases) block the session's thread.
//!
//! The control plane (the metadata service's documents and client, queue-pair setup)
//! is `dmkv_api`'s; the indexes are tested under concurrency with the `testbed`
//! crate's history recorder and linearizability checker.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod accel;
mod access_mode;
mod address_map;
mod alloc;
mod carve;
mod client;
mod clover;
mod connect;
mod connect_rdma;
mod error;
mod fabric;
pub mod feed;
mod grants;
mod idle;
mod index;
mod inplace;
mod key_map;
mod meta;
mod offload;
mod options;
mod ptr;
mod race;
mod reconnect;
mod recovery;
mod remote;
mod replication;
mod rpc_port;
mod rpc_ring_writer;
mod rpc_transport;
mod session;
mod size_class;
mod spec;
mod stats;
mod table;
mod xxh64;

pub use access_mode::{AccessMode, AccessOptions};
pub use alloc::MemoryStats;
pub use client::Client;
pub use dmkv_api::metadata::{IndexKind, TableDescription};
pub use error::{Cause, KvError, MAX_KEY_LEN};
pub use inplace::KEY_CAP as INPLACE_KEY_CAP;
pub use inplace::{Level, Placement, Readers, SchemeError, SchemeSpec, Unlatch, UnsafeDemo};
pub use options::{
    AcceleratorUse, ClientOptions, CloverOptions, ConnectionOptions, MemoryOptions, RaceOptions,
    ReconnectOptions, RetryOptions, UdpRelay, UdpRoute,
};
/// Where the slot words of a RACE table are, and what its backups hold in them.
pub use race::replica_view as race_replica_view;
pub use rpc_transport::RpcTransport;
pub use session::Session;
pub use spec::TableSpec;
pub use stats::{OpStats, SessionStats};
pub use table::location::{CloverPlace, KeyLocation, KeyPlace, RacePlace, RemotePlace};
pub use table::{FEED_MAX_AGE, Table};
pub use verbs::rc::Pmtu;
pub use verbs::transport::TransportKind;

/// Bytes of remote memory one version of a record occupies in a Clover or RACE
/// table (the size class of a node holding a `key_len`-byte key and a
/// `value_len`-byte value), for sizing clusters.
pub fn object_bytes(key_len: usize, value_len: usize) -> u64 {
    size_class::class_for_len(clover::node::NODE_PREFIX + key_len + value_len)
        .unwrap_or(size_class::MAX_CLASS) as u64
}

/// The latch schemes of in-place tables on raw memory, without a table: for
/// experiments and benchmarks (`sync-bench` measures them this way) and for the
/// switch accelerator's tests.
///
/// A scheme ([`SchemeSpec::build`](crate::SchemeSpec::build)) reads and writes the
/// tuples of an [`Area`] through a [`SlotIo`] (one queue pair of a `verbs` worker);
/// [`Layout`] says where a tuple's latch, versions and payload lie, and [`latch`]
/// decodes latch words. [`register_with_switch`] registers an in-place table's
/// tuples with the switch accelerator, whose stamps [`verify_stamps`] checks.
pub mod latch_schemes {
    pub use crate::inplace::latch;
    pub use crate::inplace::switch_optimistic::{
        STAMP_EVERY, STAMP_INVALID, STAMP_PRESENT, register_with_switch, verify_stamps,
    };
    pub use crate::inplace::{
        Area, AsyncStats, Decide, IoOptions, LatchAt, Layout, LocalFuture, SlotIo, SyncScheme,
    };
}
