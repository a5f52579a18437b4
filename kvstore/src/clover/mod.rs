//! Clover chains: per-key append-only lists of immutable version nodes.
//!
//! Each key owns a chain identified by a 64-bit chain id assigned at insert. A
//! write allocates a node of the right [size class](crate::size_class), WRITEs it
//! whole (one WRITE whose length is the class), waits for the completion, and then
//! links it with a single CAS on the current tail's header word: the compare value
//! says "no successor, generation g", the swap value names the new node. A failed
//! CAS means another writer linked first: the writer chases headers to the real
//! tail and retries, bounded and with backoff. A read fetches the hinted tail and
//! follows successors until a header says there is none. Deletion appends a
//! tombstone node. Reclaimed nodes get a new generation, so a stale pointer fails
//! validation instead of reading reused memory.
//!
//! - [`header`]: the 8-byte header word and the CAS values that link a node;
//! - [`node`]: the node layout, its encoder and strict parser, and node sizing;
//! - [`shortcut`]: the per-key root object and its shortcut word.
//!
//! The networked protocol, run by a [`crate::Session`]:
//! - `chain`: finding a key's chain and root (caches, the chain directory, the
//!   metadata slow path, creating and publishing roots, taking over from a creator
//!   that never published);
//! - `directory`, `chain_ids`, `publish`: creating a key's chain with no metadata
//!   call per key — a CAS in the table's chain directory, chain ids leased in
//!   blocks, the claimed mappings published to the service in batches;
//! - `first_write`: a new key's first put or insert made by that CAS, the value
//!   being the chain's first version;
//! - `locate`: finding the tail (hinted read plus root in one round trip, walking
//!   successors with validation, the writers' prefix-only chase);
//! - `get`, `write`: the table operations; `link_rpc`: a write's tail search and
//!   link as one RPC to the memory node; `create_rpc`: an insert of a key without
//!   a chain (directory claim and link) as one RPC;
//! - `advance`: moving shortcut words forward and noticing when they moved, which
//!   is what lets superseded nodes be reclaimed (`reclaim`).

mod advance;
pub(crate) mod chain;
pub(crate) mod chain_ids;
pub(crate) mod create_rpc;
pub(crate) mod directory;
mod first_write;
pub(crate) mod get;
pub(crate) mod header;
pub(crate) mod keys;
mod known_tail;
pub(crate) mod link_rpc;
pub(crate) mod locate;
pub(crate) mod node;
pub(crate) mod publish;
pub(crate) mod reclaim;
mod replicated;
pub(crate) mod shortcut;
pub(crate) mod state;
pub(crate) mod steer;
pub(crate) mod write;
