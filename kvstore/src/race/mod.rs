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
//! - [`directory`]: the extendible directory of subtables and its split bookkeeping;
//! - [`area`]: the remote layout of a table's directory area (state word,
//!   directory entries at full depth, registry of subtable chunks).
//!
//! A search reads the two combined buckets (after the directory, 2 round trips; 1
//! with a validated directory cache), then the KV blocks whose fingerprints match.

pub mod area;
pub mod bucket;
pub mod directory;
pub mod hash;
pub mod kv_block;
pub mod slot;

pub use bucket::{Bucket, BucketHeader, CombinedBucket, SlotRef, Subtable};
pub use directory::{DirEntry, Directory, SplitPlan};
pub use hash::KeyHash;
pub use kv_block::KvBlock;
pub use slot::Slot;
