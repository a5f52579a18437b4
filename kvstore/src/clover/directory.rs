//! The chain directory: how a new key gets its chain without a call to the
//! metadata service.
//!
//! A Clover table may own a directory (table-owned memory the service zeroes and
//! hands out, `POST .../chains/directory`): an array of 64-byte buckets of eight
//! 8-byte slots. A key hashes to one bucket; a slot names the root of one key's
//! chain:
//!
//! ```text
//!  63            48 47                                  0
//! +----------------+-------------------------------------+
//! | fingerprint 16 | root (48-bit remote pointer)        |
//! +----------------+-------------------------------------+
//! ```
//!
//! The fingerprint (never 0, so a claimed slot is never 0) is 16 more bits of the
//! key's hash. Roots of directory tables also hold their key (see
//! [`encode_keyed_root`]), so a slot whose fingerprint matches is confirmed by one
//! READ of its root.
//!
//! Claiming a key (a write of a key that has no chain yet): READ its bucket; a slot
//! naming the key's root wins. Otherwise write a root and a first node (a tombstone
//! of version 1, as on the metadata path) with a chain id from the client's leased
//! block ([`super::chain_ids`]), then CAS a free slot from 0 to the new root. The
//! CAS is where the key gets its chain: of several writers racing for the same key
//! one CAS lands first, and every other writer's next READ of the bucket finds it
//! (a losing writer frees its root and node, which nobody saw). A successful claim
//! is queued for publication to the service ([`super::publish`]).
//!
//! Slots are never cleared while the table exists (a deleted key keeps its chain),
//! so a bucket only fills. A key whose bucket is full and does not name it goes to
//! the metadata service (`POST .../chains`), and always will: a key is either in
//! the directory or in the service's chain map, never both.

use std::rc::Rc;

use dmkv_api::metadata::{DirectoryLocation, TableDescription};
use verbs::wr::WorkRequest;

use super::chain_ids;
use super::header::Header;
use super::node::{NodeRepr, encode, size_class_for};
use super::publish;
use super::shortcut::{Shortcut, encode_root};
use super::state::{self, ChainCache, ChainRef, Hint};
use crate::client::meta_error;
use crate::error::KvError;
use crate::meta;
use crate::ptr::{PTR_MASK, RemotePtr};
use crate::remote::{atomic_value, read_bytes, write_done};
use crate::session::SessionCore;
use crate::stats::OpStats;
use crate::xxh64::xxh64;

/// Bytes per bucket (one READ).
pub(crate) const BUCKET_BYTES: u64 = dmkv_api::clover_directory::BUCKET_BYTES as u64;
/// Offset of the key's length (u32) in a keyed root.
const ROOT_KEY_LEN_AT: usize = dmkv_api::clover_directory::ROOT_KEY_LEN_AT;
/// Offset of the key in a keyed root.
const ROOT_KEY_AT: usize = dmkv_api::clover_directory::ROOT_KEY_AT;
/// Seed of the directory's key hash (distinct from RACE's).
const SEED: u64 = 0xC10E_D1EC_7041_0001;
/// Claims of one key before giving up (each lost CAS means another key or the
/// same key took the slot; the next READ tells).
const MAX_CLAIMS: u32 = 64;

/// A table's chain directory, as this client reaches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Directory {
    /// The first byte of the directory.
    pub start: RemotePtr,
    /// Buckets in it.
    pub buckets: u64,
}

/// Where `key` lives in a directory: its bucket and its fingerprint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Place {
    /// Bucket index.
    pub bucket: u64,
    /// The fingerprint in the slot's top 16 bits (never 0).
    pub fingerprint: u16,
}

/// The bucket and fingerprint of `key` in a directory of `buckets` buckets.
pub(crate) fn place(key: &[u8], buckets: u64) -> Place {
    let h = xxh64(key, SEED);
    Place {
        bucket: h % buckets.max(1),
        fingerprint: u16::try_from(h >> 48).unwrap_or(1).max(1),
    }
}

/// The slot word naming `root` for a key of fingerprint `fp`.
pub(crate) fn slot_word(fp: u16, root: RemotePtr) -> u64 {
    (u64::from(fp) << 48) | root.raw()
}

/// The fingerprint and root a slot word names; `None` for a free slot.
pub(crate) fn slot_parts(word: u64) -> Option<(u16, RemotePtr)> {
    (word != 0).then(|| {
        (
            u16::try_from(word >> 48).unwrap_or_default(),
            RemotePtr::from_raw_masked(word & PTR_MASK),
        )
    })
}

/// Bytes of a keyed root for a key of `key_len` bytes (a multiple of 64).
pub(crate) fn keyed_root_size(key_len: usize) -> usize {
    dmkv_api::clover_directory::keyed_root_size(key_len)
}

/// A root that also holds its key: the usual root (shortcut word, chain id), then
/// the key's length (u32, little-endian) at 16 and the key at 24, padded with
/// zeros to [`keyed_root_size`].
pub(crate) fn encode_keyed_root(chain_id: u64, shortcut: Shortcut, key: &[u8]) -> Vec<u8> {
    let mut buf = encode_root(chain_id, shortcut);
    buf.resize(keyed_root_size(key.len()), 0);
    let len = u32::try_from(key.len()).unwrap_or(u32::MAX).to_le_bytes();
    if let Some(b) = buf.get_mut(ROOT_KEY_LEN_AT..ROOT_KEY_LEN_AT + 4) {
        b.copy_from_slice(&len);
    }
    if let Some(b) = buf.get_mut(ROOT_KEY_AT..ROOT_KEY_AT + key.len()) {
        b.copy_from_slice(key);
    }
    buf
}

/// Whether the first `ROOT_KEY_AT + key.len()` bytes of a keyed root hold `key`;
/// also the root's chain id when they do.
pub(crate) fn root_holds(buf: &[u8], key: &[u8]) -> Option<u64> {
    dmkv_api::clover_directory::root_holds(buf, key)
}

/// The chain directory of `table` for this client: `None` when the table creates
/// chains through the metadata service. Asked once per client and table.
pub(crate) async fn of(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    stats: &mut OpStats,
) -> Result<Option<Directory>, KvError> {
    if let Some(d) = state::shared(core).directory(table.id) {
        return Ok(d);
    }
    let create = core.client.options.clover.chain_directory;
    let name = table.name.clone();
    let answer = meta::call(core, stats, move |m| m.chain_directory(&name, create)).await;
    let dir = match answer {
        Ok(r) => {
            // The directory may be younger than the queue pairs' grants: give them
            // fresh ones that cover it before the first READ of a bucket.
            if core.links.reconnector().holds_grants() {
                core.grant_new_leases(true);
            }
            Some(reach(core, &r.directory)?)
        }
        Err(e) if e.code() == Some("chain_directory_unavailable") => None,
        Err(e) if e.code() == Some("chain_directory_lost") => {
            return Err(KvError::unavailable(e.to_string()));
        }
        Err(e) => return Err(meta_error(e)),
    };
    state::shared(core).set_directory(table.id, dir);
    Ok(dir)
}

fn reach(core: &SessionCore, d: &DirectoryLocation) -> Result<Directory, KvError> {
    let buckets = d.len / BUCKET_BYTES;
    if buckets == 0 {
        return Err(KvError::corrupt(format!(
            "a chain directory of {} bytes has no bucket",
            d.len
        )));
    }
    Ok(Directory {
        start: core.links.ptr_of(d.memnode_id, d.va)?,
        buckets,
    })
}

/// What one READ of a key's bucket (and of the roots its fingerprint matches) says.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Probe {
    /// The key's chain, when a slot names it.
    pub found: Option<ChainRef>,
    /// A free slot of the bucket, when the key has none.
    pub free: Option<usize>,
    /// Where the bucket is.
    pub bucket: RemotePtr,
}

/// READ `key`'s bucket and confirm the slots whose fingerprint matches.
pub(crate) async fn probe(
    core: &SessionCore,
    dir: Directory,
    key: &[u8],
    stats: &mut OpStats,
) -> Result<Probe, KvError> {
    let p = place(key, dir.buckets);
    let bucket = dir
        .start
        .checked_add(p.bucket * BUCKET_BYTES)
        .ok_or_else(|| KvError::corrupt("a chain directory bucket lies outside the pool"))?;
    let t = core
        .links
        .resolve(bucket, BUCKET_BYTES)
        .ok_or_else(|| KvError::corrupt("a chain directory bucket lies outside its region"))?;
    let done = core
        .links
        .round_trip(
            vec![(
                t.memnode,
                vec![WorkRequest::read(t.addr, BUCKET_BYTES as u32)],
            )],
            stats,
        )
        .await?;
    let buf = read_bytes(done.first().and_then(|b| b.first()))?;
    let words: Vec<u64> = buf
        .chunks_exact(8)
        .filter_map(|c| <[u8; 8]>::try_from(c).ok())
        .map(u64::from_le_bytes)
        .collect();
    let free = words.iter().position(|w| *w == 0);
    let candidates: Vec<RemotePtr> = words
        .iter()
        .filter_map(|w| slot_parts(*w))
        .filter(|(fp, _)| *fp == p.fingerprint)
        .map(|(_, root)| root)
        .collect();
    let found = confirm(core, &candidates, key, stats).await?;
    Ok(Probe {
        found,
        free,
        bucket,
    })
}

/// The candidate root that holds `key`, READing all of them in one round trip.
async fn confirm(
    core: &SessionCore,
    candidates: &[RemotePtr],
    key: &[u8],
    stats: &mut OpStats,
) -> Result<Option<ChainRef>, KvError> {
    if candidates.is_empty() {
        return Ok(None);
    }
    let len = ROOT_KEY_AT + key.len();
    let mut batches = Vec::new();
    for root in candidates {
        let t = core
            .links
            .resolve(*root, len as u64)
            .ok_or_else(|| KvError::corrupt(format!("root {root:?} is outside its region")))?;
        let wr = WorkRequest::read(
            t.addr,
            u32::try_from(len).map_err(|_| KvError::corrupt("key too long"))?,
        );
        batches.push((t.memnode, vec![wr]));
    }
    let done = core.links.round_trip(batches, stats).await?;
    for (root, batch) in candidates.iter().zip(&done) {
        let buf = read_bytes(batch.first())?;
        if let Some(chain_id) = root_holds(buf, key) {
            return Ok(Some(ChainRef {
                chain_id,
                root: *root,
            }));
        }
    }
    Ok(None)
}

/// The chain of `key` if the directory names it; `Ok(None)` when the key has none
/// there and its bucket has room (so it has no chain anywhere), `Err` never for a
/// full bucket: that is [`Lookup::Elsewhere`].
pub(crate) enum Lookup {
    /// The directory names the key's chain.
    Found(ChainRef),
    /// The key has no chain.
    Absent,
    /// The key's bucket is full without it: ask the metadata service.
    Elsewhere,
}

/// Look `key` up in the directory without claiming anything (reads).
pub(crate) async fn lookup(
    core: &SessionCore,
    dir: Directory,
    key: &[u8],
    stats: &mut OpStats,
) -> Result<Lookup, KvError> {
    let p = probe(core, dir, key, stats).await?;
    Ok(match (p.found, p.free) {
        (Some(c), _) => Lookup::Found(c),
        (None, Some(_)) => Lookup::Absent,
        (None, None) => Lookup::Elsewhere,
    })
}

/// The chain of `key`, claimed in the directory if it has none (writes); `None`
/// when its bucket is full without it (ask the metadata service).
pub(crate) async fn claim(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    dir: Directory,
    key: &[u8],
    stats: &mut OpStats,
) -> Result<Option<ChainCache>, KvError> {
    let mut prepared: Option<Prepared> = None;
    let fp = place(key, dir.buckets).fingerprint;
    for _ in 0..MAX_CLAIMS {
        let p = probe(core, dir, key, stats).await?;
        if let Some(chain) = p.found {
            if let Some(mine) = prepared.take() {
                mine.release(core);
            }
            return Ok(Some(ChainCache { chain, hint: None }));
        }
        let Some(free) = p.free else {
            if let Some(mine) = prepared.take() {
                mine.release(core);
            }
            return Ok(None);
        };
        let mine = match prepared.take() {
            Some(m) => m,
            None => prepare(core, table, key, None, stats).await?,
        };
        let slot = p
            .bucket
            .checked_add(free as u64 * 8)
            .and_then(|s| core.links.resolve(s, 8));
        let Some(slot) = slot else {
            mine.release(core);
            return Err(KvError::corrupt(
                "a chain directory slot lies outside its region",
            ));
        };
        let swap = slot_word(fp, mine.cache.chain.root);
        let done = core
            .links
            .round_trip(
                vec![(slot.memnode, vec![WorkRequest::cas(slot.addr, 0, swap)])],
                stats,
            )
            .await;
        let previous = match done.and_then(|d| atomic_value(d.first().and_then(|b| b.first()))) {
            Ok(v) => v,
            Err(e) => {
                // The CAS may have landed: the root stays (a reader may find it).
                return Err(e);
            }
        };
        if previous == 0 {
            publish::claimed(
                core,
                table,
                key,
                mine.cache.chain.chain_id,
                (mine.root.memnode, mine.root.va),
                stats,
            )
            .await;
            return Ok(Some(mine.cache));
        }
        stats.cas_failures += 1;
        prepared = Some(mine);
    }
    Err(KvError::Contended {
        attempts: MAX_CLAIMS,
    })
}

/// A root and first node written for a key, not yet reachable.
pub(crate) struct Prepared {
    /// The chain, with the first node as its hint.
    pub cache: ChainCache,
    /// The first node's memory.
    pub node: crate::alloc::Allocation,
    /// The root's memory.
    pub root: crate::alloc::Allocation,
}

impl Prepared {
    /// Give both back to the allocator (neither was ever reachable).
    pub(crate) fn release(self, core: &SessionCore) {
        let mut a = core.alloc.borrow_mut();
        a.release_unlinked(self.node);
        a.release_unlinked(self.root);
    }
}

/// Allocate and WRITE a keyed root and a first node for `key`, with a fresh chain
/// id: one round trip. The first node is version 1 of the key: a tombstone, or with
/// `value` the key's first value.
pub(crate) async fn prepare(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    key: &[u8],
    value: Option<&[u8]>,
    stats: &mut OpStats,
) -> Result<Prepared, KvError> {
    let (first, writes) = prepare_unwritten(core, table, key, value, stats).await?;
    let done = core
        .links
        .round_trip(vec![(first.target, writes)], stats)
        .await;
    let written = done.and_then(|done| {
        let batch = done.first();
        write_done(batch.and_then(|b| b.first()))?;
        write_done(batch.and_then(|b| b.get(1)))
    });
    match written {
        Ok(()) => Ok(first.prepared),
        Err(e) => {
            first.prepared.release(core);
            Err(e)
        }
    }
}

/// A root and first node allocated and encoded for a key, their WRITEs not posted.
pub(crate) struct Unwritten {
    /// What the WRITEs make (released by the caller if they fail).
    pub prepared: Prepared,
    /// The memory node both lie on.
    pub target: u64,
}

/// Allocate and encode a keyed root and a first node for `key` (see [`prepare`]); the
/// two WRITEs — node first, then root — are returned for the caller to post on the
/// memory node's queue pair.
pub(crate) async fn prepare_unwritten(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    key: &[u8],
    value: Option<&[u8]>,
    stats: &mut OpStats,
) -> Result<(Unwritten, Vec<WorkRequest>), KvError> {
    let chain_id = chain_ids::next(core, table, stats).await?;
    let memnode = super::chain::home(core, table, chain_id)?;
    let class = size_class_for(key.len(), value.map_or(0, <[u8]>::len))?;
    let root_size = keyed_root_size(key.len());
    let node = meta::alloc(core, table.into(), memnode, class)?;
    let root = match meta::alloc(core, table.into(), memnode, root_size) {
        Ok(r) => r,
        Err(e) => {
            core.alloc.borrow_mut().release_unlinked(node);
            return Err(e);
        }
    };
    let encoded = (|| {
        let node_ptr = core.links.ptr_of(memnode, node.va)?;
        let root_ptr = core.links.ptr_of(memnode, root.va)?;
        let bytes = encode(
            &NodeRepr {
                header: Header::tail(node.generation, value.is_none()),
                chain_id,
                version: 1,
                key: key.to_vec(),
                value: value.map(<[u8]>::to_vec).unwrap_or_default(),
            },
            class,
        )?;
        let root_bytes = encode_keyed_root(chain_id, Shortcut::new(node_ptr, class, 1)?, key);
        let (Some(n), Some(r)) = (
            core.links.resolve(node_ptr, class as u64),
            core.links.resolve(root_ptr, root_size as u64),
        ) else {
            return Err(KvError::corrupt("a new root lies outside its region"));
        };
        let cache = ChainCache {
            chain: ChainRef {
                chain_id,
                root: root_ptr,
            },
            hint: Some(Hint {
                ptr: node_ptr,
                generation: node.generation,
                version: 1,
                size_class: class,
            }),
        };
        Ok((
            cache,
            n.memnode,
            vec![
                WorkRequest::write(n.addr, bytes),
                WorkRequest::write(r.addr, root_bytes),
            ],
        ))
    })();
    match encoded {
        Ok((cache, target, writes)) => Ok((
            Unwritten {
                prepared: Prepared { cache, node, root },
                target,
            },
            writes,
        )),
        Err(e) => {
            let mut a = core.alloc.borrow_mut();
            a.release_unlinked(node);
            a.release_unlinked(root);
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_words_round_trip_and_are_never_zero() {
        let root = RemotePtr::new(3, 0x1234_5640).unwrap();
        for key in [&b"a"[..], b"user1", b"another key"] {
            let p = place(key, 1000);
            assert!(p.bucket < 1000);
            assert_ne!(p.fingerprint, 0);
            let w = slot_word(p.fingerprint, root);
            assert_ne!(w, 0);
            assert_eq!(slot_parts(w), Some((p.fingerprint, root)));
        }
        assert_eq!(slot_parts(0), None);
        // The memory node reads slot words alike.
        let w = slot_word(0x1234, root);
        assert_eq!(
            dmkv_api::clover_directory::slot_word(0x1234, 3, 0x1234_5640),
            Some(w)
        );
        assert_eq!(
            dmkv_api::clover_directory::slot_root(w),
            Some((0x1234, 3, 0x1234_5640))
        );
        // Even a root at offset 0 of memnode 0 makes a non-zero word.
        assert_ne!(slot_word(1, RemotePtr::from_raw_masked(0)), 0);
    }

    #[test]
    fn keyed_roots_hold_exactly_their_key() {
        let s = Shortcut::new(RemotePtr::new(1, 4096).unwrap(), 64, 1).unwrap();
        let root = encode_keyed_root(42, s, b"user12345");
        assert_eq!(root.len(), 64);
        assert_eq!(root_holds(&root, b"user12345"), Some(42));
        assert_eq!(root_holds(&root, b"user12346"), None);
        // A prefix of the stored key is another key.
        assert_eq!(root_holds(&root, b"user1234"), None);
        let long = vec![7u8; 100];
        let root = encode_keyed_root(9, s, &long);
        assert_eq!(root.len(), keyed_root_size(100));
        assert_eq!(root.len() % 64, 0);
        assert_eq!(root_holds(&root, &long), Some(9));
        // Truncated reads never panic.
        assert_eq!(root_holds(&root[..10], &long), None);
    }
}
