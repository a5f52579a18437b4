//! RACE table operations over verbs: search, insert, put, update and delete.
//!
//! **Search** (2 round trips with a warm directory cache): READ the key's two
//! combined buckets in the subtable the cached entry names; if every bucket header
//! covers the key (local depth and suffix) and none is being filled by a split,
//! READ the KV blocks of the slots whose fingerprint matches, check CRC and key,
//! and return the value of the first match by address (1 round trip when no
//! fingerprint matches). A header that does not cover the key means the cache is
//! stale or the subtable is being split: re-read the entry. A split in progress is
//! searched parent first, then child, in two sequential round trips: a moved slot
//! is copied to the child before it is cleared in the parent, so a key present
//! throughout is seen in one of them.
//!
//! **Writes** READ the buckets and WRITE the new KV block (out of place, allocated
//! from the session's size classes) in the same round trip, READ the matching KV
//! blocks (skipped when no fingerprint matches), then CAS the slot:
//! - update / delete / put of a present key: CAS the key's slot from its word to
//!   the new block's slot word (or to empty): 3 round trips; the replaced block is
//!   reclaimed after the grace period;
//! - insert / put of an absent key: CAS an empty slot (the same one every client
//!   would pick from the same contents), then re-read the buckets to find a
//!   duplicate inserted concurrently elsewhere: 3 round trips. Between duplicates
//!   the one at the lower address wins; the loser takes its slot back and reports
//!   `AlreadyExists` (insert) or updates the winner (put).
//!
//! A failed CAS is retried after SMART's truncated exponential backoff, bounded by
//! `max_link_attempts`. An insert that finds both combined buckets full splits the
//! subtable ([`super::split`]) and retries. Writers never write into a subtable a
//! split is working on (its buckets are frozen or being filled): they back off,
//! and help finish a split whose lock has not changed for `race_split_timeout`.

use std::rc::Rc;
use std::time::Instant;

use metadata::api::TableDescription;

use super::bucket::BucketHeader;
use super::hash::KeyHash;
use super::kv_block::encode;
use super::net::{
    Candidate, Lookup, Status, View, cas_bulk, exchange, lookup, lookup_all, parse_view, read_view,
    view_wrs, write_wr,
};
use super::slot::{EMPTY, Slot};
use super::split;
use super::state::{self, TableState, parent_primary};
use crate::alloc::Allocation;
use crate::clover::write::WriteKind;
use crate::error::KvError;
use crate::ptr::RemotePtr;
use crate::remote::write_done;
use crate::session::SessionCore;
use crate::size_class::class_for_len;
use crate::stats::OpStats;

/// Read `key`.
pub(crate) async fn get(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    key: &[u8],
) -> Result<Vec<u8>, KvError> {
    let mut stats = OpStats::default();
    core.renew_if_due();
    let r = get_inner(core, table, key, &mut stats).await;
    core.finish_op(stats);
    r
}

/// Where a key is to be searched.
enum Route {
    /// One subtable, authoritative for the key.
    One(View),
    /// A split in progress: the parent (searched first) and the child.
    Pair(View, View),
    /// Read again (the cached entry was refreshed).
    Again,
    /// A split is in a state that must end first; wait on its primary entry.
    Wait(BucketHeader),
}

async fn get_inner(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    key: &[u8],
    stats: &mut OpStats,
) -> Result<Vec<u8>, KvError> {
    let st = state::open(core, table, stats).await?;
    let hash = KeyHash::of(key);
    let fp = hash.fingerprint();
    let max = core.client.options.max_restarts.max(1);
    for attempt in 0..max {
        let idx = st.index_of(&hash);
        let e = st.entry(idx)?;
        let view = read_view(core, e.subtable, st.geometry, &hash, stats).await?;
        let route = route_read(core, &st, &hash, idx, view, stats).await?;
        let found = match route {
            Route::One(v) => lookup(core, &v.matching(fp), key, stats).await?,
            Route::Pair(parent, child) => {
                let p = parent.matching(fp);
                let mut all = p.clone();
                all.extend(child.matching(fp));
                match lookup_all(core, &all, key, stats).await? {
                    None => Lookup::Torn,
                    Some(found) => {
                        // The parent's copy wins: a slot is cleared there only
                        // after it has been copied to the child.
                        let pick = found
                            .iter()
                            .find(|(c, _)| p.contains(c))
                            .or(found.first())
                            .cloned();
                        pick.map_or(Lookup::Absent, |(c, v)| Lookup::Found(c, v))
                    }
                }
            }
            Route::Again => {
                stats.restarts += 1;
                continue;
            }
            Route::Wait(h) => {
                stats.restarts += 1;
                wait_split(core, &st, h, attempt, stats).await?;
                continue;
            }
        };
        match found {
            Lookup::Found(_, v) => return Ok(v),
            Lookup::Absent => return Err(KvError::NotFound),
            Lookup::Torn => {
                core.backoff(attempt).await;
                continue;
            }
        }
    }
    Err(KvError::Unavailable(format!(
        "search gave up after {max} restarts"
    )))
}

/// Decide how a reader searches, given the view of the cached subtable.
async fn route_read(
    core: &Rc<SessionCore>,
    st: &TableState,
    hash: &KeyHash,
    idx: usize,
    view: View,
    stats: &mut OpStats,
) -> Result<Route, KvError> {
    match view.status(hash) {
        Status::Good | Status::Frozen(_) => Ok(Route::One(view)),
        Status::Moving(h) => {
            // The child of a split in progress: the key may still be in the parent.
            let Some((p0, _)) = parent_primary(h) else {
                return Ok(Route::Wait(h));
            };
            let (_, parent) = st.refresh_entry(core, p0, stats).await?;
            if parent.subtable == view.subtable {
                return Ok(Route::Wait(h));
            }
            pair(core, st, hash, parent.subtable, view.subtable, stats).await
        }
        Status::Stale(h) => {
            let (_, e) = st.refresh_entry(core, idx, stats).await?;
            if e.subtable != view.subtable {
                return Ok(Route::Again);
            }
            // The entry still names a subtable whose header no longer covers the
            // key: it is being split and the key moves to the child, which is
            // decided (at the primary entry) before any header changes.
            let child_at = hash.subtable_index(h.local_depth());
            let (_, child) = st.refresh_entry(core, child_at, stats).await?;
            if child.subtable == view.subtable {
                return Ok(Route::Wait(h));
            }
            pair(core, st, hash, view.subtable, child.subtable, stats).await
        }
    }
}

/// Read the parent, then the child (two round trips, in this order).
async fn pair(
    core: &Rc<SessionCore>,
    st: &TableState,
    hash: &KeyHash,
    parent: RemotePtr,
    child: RemotePtr,
    stats: &mut OpStats,
) -> Result<Route, KvError> {
    let p = read_view(core, parent, st.geometry, hash, stats).await?;
    let c = read_view(core, child, st.geometry, hash, stats).await?;
    Ok(Route::Pair(p, c))
}

/// Back off while a split holds the subtable a key needs; help finish it when its
/// lock has not changed for the split timeout.
pub(crate) async fn wait_split(
    core: &Rc<SessionCore>,
    st: &TableState,
    h: BucketHeader,
    attempt: u32,
    stats: &mut OpStats,
) -> Result<(), KvError> {
    if let Some((p0, l)) = parent_primary(h) {
        let (w, e) = st.refresh_entry(core, p0, stats).await?;
        if e.locked
            && e.depth == l
            && st.lock_expired(p0, w, core.client.options.race_split_timeout)
        {
            return split::finish(core, st, p0, e.subtable, l, w, stats).await;
        }
    }
    core.backoff(attempt.min(16)).await;
    Ok(())
}

/// A KV block written for a write.
struct Block {
    alloc: Allocation,
    ptr: RemotePtr,
    bytes: Vec<u8>,
    word: u64,
}

/// Run one write of `value` (empty for a delete) to `key`.
pub(crate) async fn write(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    key: &[u8],
    kind: WriteKind,
    value: &[u8],
) -> Result<(), KvError> {
    let mut stats = OpStats::default();
    core.renew_if_due();
    core.admit().await;
    let mut retries = 0;
    let r = write_admitted(core, table, key, kind, value, &mut stats, &mut retries).await;
    core.finish_admitted(retries);
    core.finish_op(stats);
    r
}

fn block_for(
    core: &SessionCore,
    st: &TableState,
    hash: &KeyHash,
    key: &[u8],
    value: &[u8],
) -> Result<Block, KvError> {
    let bytes = encode(key, value)?;
    let class = class_for_len(bytes.len()).ok_or(KvError::ValueTooLarge {
        len: value.len(),
        limit: super::kv_block::max_value_len(key.len()),
    })?;
    let memnode = st.memnodes[(hash.h2 >> 8) as usize % st.memnodes.len()];
    let alloc = crate::clover::meta::alloc(core, memnode, class)?;
    let ptr = core.links.ptr_of(alloc.memnode, alloc.va)?;
    let word = Slot::new(hash.fingerprint(), bytes.len(), ptr)?.pack();
    Ok(Block {
        alloc,
        ptr,
        bytes,
        word,
    })
}

/// The allocation of the KV block a slot names.
fn allocation_of(core: &SessionCore, slot: Slot) -> Option<Allocation> {
    let ptr = slot.ptr();
    let memnode = u64::from(ptr.memnode());
    let link = core.links.get(memnode)?;
    Some(Allocation {
        memnode,
        va: link.base_va + ptr.offset(),
        size: class_for_len(slot.read_len())?,
        generation: 0,
    })
}

/// Hand the block of a replaced or deleted slot to the allocator (reused after the
/// grace period, so readers that fetched the slot before finish reading it).
fn retire(core: &SessionCore, slot: Slot) {
    if let Some(a) = allocation_of(core, slot) {
        core.alloc.borrow_mut().reclaim(a, Instant::now());
    }
}

/// How a write that linked its block into an empty slot ended.
enum Dedup {
    /// No other slot holds the key (or ours is the lowest).
    Keep,
    /// A slot at a lower address holds the key; ours was taken back (`true`) or
    /// could not be (a split marked it).
    Lost(bool),
}

#[allow(clippy::too_many_arguments)]
async fn write_admitted(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    key: &[u8],
    kind: WriteKind,
    value: &[u8],
    stats: &mut OpStats,
    retries: &mut u32,
) -> Result<(), KvError> {
    let st = state::open(core, table, stats).await?;
    let hash = KeyHash::of(key);
    let fp = hash.fingerprint();
    let mut block = match kind {
        WriteKind::Delete => None,
        _ => Some(block_for(core, &st, &hash, key, value)?),
    };
    let mut written = false;
    // Whether our block was ever visible in a slot (then it is reclaimed with a
    // grace period rather than reused at once).
    let mut published = false;
    let mut still_linked = false;
    let max = core.client.options.max_link_attempts.max(1);
    let mut attempt = 0u32;
    let result = loop {
        if attempt >= max {
            break Err(KvError::Contended { attempts: attempt });
        }
        attempt += 1;
        let idx = st.index_of(&hash);
        let e = st.entry(idx)?;
        let (mut wrs, buckets) = view_wrs(core, e.subtable, st.geometry, &hash)?;
        let n = wrs.len();
        let viewed_at = Instant::now();
        if let Some(b) = block.as_mut().filter(|_| !written) {
            wrs.push(write_wr(core, b.ptr, std::mem::take(&mut b.bytes))?);
        }
        let done = exchange(core, wrs, stats).await?;
        if done.len() > n {
            write_done(done.get(n))?;
            written = true;
        }
        let view = parse_view(&done[..n], e.subtable, st.geometry, &buckets)?;
        match view.status(&hash) {
            Status::Good => {}
            Status::Stale(h) => {
                let (_, fresh) = st.refresh_entry(core, idx, stats).await?;
                if fresh.subtable == view.subtable {
                    wait_split(core, &st, h, attempt, stats).await?;
                }
                stats.restarts += 1;
                continue;
            }
            Status::Frozen(h) | Status::Moving(h) => {
                stats.restarts += 1;
                wait_split(core, &st, h, attempt, stats).await?;
                continue;
            }
        }
        let found = match lookup(core, &view.matching(fp), key, stats).await? {
            Lookup::Torn => {
                core.backoff(attempt).await;
                continue;
            }
            f => f,
        };
        match (kind, found) {
            (WriteKind::Insert, Lookup::Found(..)) => break Err(KvError::AlreadyExists),
            (WriteKind::Update | WriteKind::Delete, Lookup::Absent) => {
                break Err(KvError::NotFound);
            }
            (_, Lookup::Found(c, _)) => {
                let new = block.as_ref().map_or(EMPTY, |b| b.word);
                let prev = cas_bulk(core, &[(c.addr, c.word, new)], stats).await?;
                if prev.first() == Some(&c.word) {
                    published |= block.is_some();
                    retire(core, c.slot);
                    if kind == WriteKind::Delete {
                        clear_duplicates(core, &view, c, key, fp, stats).await?;
                    }
                    break Ok(());
                }
                stats.cas_failures += 1;
                *retries += 1;
                core.backoff(attempt - 1).await;
            }
            (_, _) => {
                // Insert or put of an absent key.
                let Some(b) = block.as_ref() else {
                    break Err(KvError::NotFound);
                };
                if viewed_at.elapsed() > core.client.options.race_insert_view_age {
                    // The empty slot may have been filled and emptied since (by
                    // another key), and the key inserted elsewhere meanwhile:
                    // a duplicate at a lower address would then win over an
                    // older entry. Look again rather than trust an old view.
                    stats.restarts += 1;
                    continue;
                }
                let Some(slot) = view.empty_slot() else {
                    let header = view.buckets.first().map(|c| c.main.header);
                    if let Some(h) = header {
                        split::split(core, &st, view.subtable, h, stats).await?;
                    }
                    continue;
                };
                let prev = cas_bulk(core, &[(slot, EMPTY, b.word)], stats).await?;
                if prev.first() != Some(&EMPTY) {
                    stats.cas_failures += 1;
                    *retries += 1;
                    core.backoff(attempt - 1).await;
                    continue;
                }
                published = true;
                match dedup(core, &st, view.subtable, &hash, key, slot, b.word, stats).await? {
                    Dedup::Keep => break Ok(()),
                    Dedup::Lost(undone) if kind == WriteKind::Insert => {
                        // A duplicate a split marked stays linked: keep its block.
                        still_linked = !undone;
                        break Err(KvError::AlreadyExists);
                    }
                    // A put that lost updates the winner on the next attempt.
                    Dedup::Lost(_) => continue,
                }
            }
        }
    };
    if let Some(b) = block
        && result.is_err()
    {
        if !published {
            core.alloc.borrow_mut().release_unlinked(b.alloc);
        } else if !still_linked && let Ok(Some(s)) = Slot::unpack(b.word) {
            // Taken back after losing to a duplicate: readers may have seen it.
            retire(core, s);
        }
    }
    result
}

/// After linking `word` into the empty slot `slot`: re-read the buckets and look
/// for another slot holding the key (a concurrent insert). The lower address wins.
#[allow(clippy::too_many_arguments)]
async fn dedup(
    core: &Rc<SessionCore>,
    st: &TableState,
    subtable: RemotePtr,
    hash: &KeyHash,
    key: &[u8],
    slot: RemotePtr,
    word: u64,
    stats: &mut OpStats,
) -> Result<Dedup, KvError> {
    let view = read_view(core, subtable, st.geometry, hash, stats).await?;
    let others: Vec<Candidate> = view
        .matching(hash.fingerprint())
        .into_iter()
        .filter(|c| c.addr != slot && c.addr < slot)
        .collect();
    if others.is_empty() {
        return Ok(Dedup::Keep);
    }
    let Some(found) = lookup_all(core, &others, key, stats).await? else {
        return Ok(Dedup::Keep);
    };
    if found.is_empty() {
        return Ok(Dedup::Keep);
    }
    let prev = cas_bulk(core, &[(slot, word, EMPTY)], stats).await?;
    Ok(Dedup::Lost(prev.first() == Some(&word)))
}

/// After deleting the key's slot: clear any other slot that still holds the key
/// (a duplicate whose inserter has not taken it back).
async fn clear_duplicates(
    core: &Rc<SessionCore>,
    view: &View,
    deleted: Candidate,
    key: &[u8],
    fp: u8,
    stats: &mut OpStats,
) -> Result<(), KvError> {
    let others: Vec<Candidate> = view
        .matching(fp)
        .into_iter()
        .filter(|c| c.addr != deleted.addr && c.word == c.slot.pack())
        .collect();
    if others.is_empty() {
        return Ok(());
    }
    let Some(found) = lookup_all(core, &others, key, stats).await? else {
        return Ok(());
    };
    let cas: Vec<_> = found.iter().map(|(c, _)| (c.addr, c.word, EMPTY)).collect();
    let prev = cas_bulk(core, &cas, stats).await?;
    for ((c, _), p) in found.iter().zip(prev) {
        if p == c.word {
            retire(core, c.slot);
        }
    }
    Ok(())
}
