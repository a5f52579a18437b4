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
//! This first layer is sans-IO: it fixes the remote memory layouts (node, slot,
//! bucket, KV block, directory entry), their encoders and strict parsers, the
//! hashing, and the bookkeeping the networked protocol needs. Parsers accept
//! arbitrary bytes and never panic. The networked `Client`/`Session`/`Table`
//! build on these.
//!
//! [`history`] and [`lincheck`] record what clients observed and check that it is
//! linearizable, which is how the indexes are tested under concurrency.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod clover;
pub mod error;
pub mod history;
pub mod lincheck;
pub mod ptr;
pub mod race;
pub mod size_class;
pub mod xxh64;

pub use error::{KvError, MAX_KEY_LEN};
