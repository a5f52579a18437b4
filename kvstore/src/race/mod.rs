//! RACE hashing: a one-sided-RDMA-friendly extendible hash table.
//!
//! Following RACE (Zuo et al., ATC'21) as used by SMART's hash table:
//!
//! - [`hash`]: two independent hashes per key (two-choice hashing), the 8-bit
//!   fingerprint, the directory suffix and the bucket choices;
//! - [`slot`]: the 8-byte slot word (fingerprint, length in lines, pointer), the
//!   unit every insert, update and delete changes by CAS;
//! - [`bucket`]: 64-byte buckets (header + 7 slots) grouped main/overflow/main so
//!   one 128-byte READ returns a main bucket with its overflow bucket, and the
//!   arithmetic that places buckets and slots inside a subtable;
//! - [`kv_block`]: the out-of-place, immutable KV block a slot points to, with a
//!   CRC-32 trailer that every reader checks together with the key;
//! - [`directory`]: the extendible directory of subtables and its split bookkeeping.
//!
//! The networked index, run by a [`crate::Session`]:
//!
//! - [`area`]: the remote layout of a table's directory area (state word,
//!   directory entries at full depth, registry of subtable chunks) and how the
//!   first client initialises it;
//! - `state`: a session's view of a table (cached entries, subtable arena, lease
//!   renewal, bootstrap);
//! - `net`: batches of verbs, reading a key's combined buckets, checking KV blocks;
//! - `block_hints` and `hinted_read`: where the client last saw a key's block, and
//!   the search that READs just that slot's bucket and the block (one round trip,
//!   two READs);
//! - `known_slot`: an update of a key whose slot the client saw moments ago: the
//!   new block's WRITE and the slot's CAS in one doorbell (one round trip);
//! - `bucket_cache` and `predicted_claim`: the combined buckets the client's writes
//!   last read, and the insert that claims the slot they predict in its first round
//!   trip (2 round trips instead of 3 when the prediction holds);
//! - `ops`: search, insert, put, update, delete (2 round trips for a search with a
//!   warm directory cache, 3 for every write without fingerprint collisions; an
//!   insert is confirmed by a second CAS after its duplicate check, and readers
//!   ignore unconfirmed slots);
//! - `rpc`: the same operations as one RPC to the memory node's workers (access
//!   modes `rpc` and `hybrid`, [`crate::AccessMode`]);
//! - `split`: splitting a subtable under concurrent searches and writes;
//! - `scan`: listing a table's live keys (every subtable's buckets and KV blocks).
//!
//! Memory: subtables live in chunks leased under the name `table:<name>:race` with
//! the client's lease TTL and listed in the directory area's registry; every
//! session that opens the table renews every listed chunk when a third of the TTL
//! has passed, so subtables outlive the client that allocated them as long as some
//! client uses the table. (A metadata endpoint allocating table-owned chunks, like
//! the directory area itself, would make this unnecessary.) KV blocks live in the
//! writing session's leased chunks, like Clover's nodes.

pub(crate) mod area;
pub(crate) mod block_hints;
pub(crate) mod bucket;
pub(crate) mod bucket_cache;
pub(crate) mod directory;
pub(crate) mod hash;
pub(crate) mod hinted_read;
pub(crate) mod known_slot;
pub(crate) mod kv_block;
pub(crate) mod net;
pub(crate) mod ops;
mod predicted_claim;
pub mod replica_view;
pub(crate) mod rpc;
pub(crate) mod scan;
pub(crate) mod slot;
pub(crate) mod split;
pub(crate) mod state;
