//! Listing the live keys of a RACE table with one-sided READs.
//!
//! The scan reads every directory entry, then every distinct subtable in windows of
//! [`WINDOW_GROUPS`] bucket groups: one READ of the window's buckets, then READs of
//! the KV blocks its occupied slots name (tentative slots are skipped: no reader
//! sees them, and empty slots are deleted keys). Every block's CRC is checked, and
//! its key must belong where it was found: the slot's fingerprint is the key's and
//! the bucket is one of the key's two combined buckets. A block that fails a check,
//! or blocks read a grace period or more after their buckets (they may have been
//! reclaimed and reused), make the window be read again.
//!
//! A scan is not a snapshot. A split moves keys from a subtable to its child while
//! it holds the lock bit of the parent's primary entry, so a scan starts only when
//! no entry is locked, and starts over when the directory changed while it ran (a
//! split started, so a key may have moved from a subtable read late to one read
//! early): every key present throughout a scan is listed once, and a key written
//! or deleted while the scan runs may or may not be. A split whose lock has not
//! changed for the lock timeout is finished by the scan (its holder may have died),
//! and a scan gives up with `Unavailable` only after `max_restarts` attempts and
//! five lock timeouts (a table that keeps splitting).

use std::collections::BTreeSet;
use std::rc::Rc;
use std::time::Instant;

use dmkv_api::metadata::TableDescription;

use super::area::Entry;
use super::bucket::{BUCKET_BYTES, Bucket, GROUP_BYTES, SLOTS_PER_BUCKET, Subtable};
use super::hash::KeyHash;
use super::kv_block::KvBlock;
use super::net::{exchange, exchange_bulk, read_wr, words_of};
use super::slot::{Slot, is_tentative, unpack_marked};
use super::split;
use super::state::{self, TableState};
use crate::error::KvError;
use crate::ptr::RemotePtr;
use crate::remote::read_bytes;
use crate::session::SessionCore;
use crate::stats::OpStats;

/// How many lock timeouts a scan waits for splits to end, at least, before it gives
/// up (with at least `max_restarts` attempts), as writes do.
const SPLIT_WAIT_TIMEOUTS: u32 = 5;

/// Bucket groups read per window (12 buckets, at most 84 occupied slots).
pub(crate) const WINDOW_GROUPS: u64 = 4;

/// Every live key of a RACE table that starts with `prefix`, in byte order.
pub(crate) async fn keys(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    prefix: &[u8],
) -> Result<Vec<Vec<u8>>, KvError> {
    let mut stats = OpStats::default();
    core.renew_if_due();
    let r = keys_inner(core, table, prefix, &mut stats).await;
    core.finish_op(stats);
    r
}

async fn keys_inner(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    prefix: &[u8],
    stats: &mut OpStats,
) -> Result<Vec<Vec<u8>>, KvError> {
    let st = state::open(core, table, stats).await?;
    let max = core.client.options.retry.max_restarts.max(1);
    let budget = core.client.options.retry.lock_timeout * SPLIT_WAIT_TIMEOUTS;
    let started = Instant::now();
    let mut attempt = 0;
    loop {
        let before = read_directory(core, &st, stats).await?;
        if settle_splits(core, &st, &before, attempt, stats).await? {
            let mut found = BTreeSet::new();
            for subtable in distinct_subtables(&st, &before)? {
                scan_subtable(core, &st, subtable, prefix, &mut found, stats).await?;
            }
            if read_directory(core, &st, stats).await? == before {
                return Ok(found.into_iter().collect());
            }
            core.backoff(attempt.min(16)).await;
        }
        stats.restarts += 1;
        attempt += 1;
        if attempt >= max && started.elapsed() >= budget {
            return Err(KvError::unavailable(format!(
                "the key scan gave up after {attempt} attempts in {:?}: the table kept \
                 splitting",
                started.elapsed()
            )));
        }
    }
}

/// Whether no split holds an entry of `words`. A split moves keys from a subtable to
/// its child while it holds the lock bit of the parent's primary entry, without the
/// directory changing, so a scan that reads the child before the parent could miss a
/// key: the scan waits (backing off) until no entry is locked, and finishes a split
/// whose lock has not changed for the lock timeout (its holder may have died), as
/// searches do.
async fn settle_splits(
    core: &Rc<SessionCore>,
    st: &TableState,
    words: &[u64],
    attempt: u32,
    stats: &mut OpStats,
) -> Result<bool, KvError> {
    let mut settled = true;
    for (index, &word) in words.iter().enumerate() {
        let e = Entry::unpack(word, st.ready.initial)?;
        if !e.locked {
            continue;
        }
        settled = false;
        if st.lock_expired(index, word, core.client.options.retry.lock_timeout) {
            split::finish(core, st, index, e.subtable, e.depth, word, stats).await?;
        }
    }
    if !settled {
        core.backoff(attempt.min(16)).await;
    }
    Ok(settled)
}

/// Every directory entry word (one round trip).
async fn read_directory(
    core: &SessionCore,
    st: &TableState,
    stats: &mut OpStats,
) -> Result<Vec<u64>, KvError> {
    let n = 1usize << st.depth();
    let done = exchange(
        core,
        vec![read_wr(core, &st.table(), st.entry_ptr(0)?, 8 * n as u64)?],
        stats,
    )
    .await?;
    let words = words_of(read_bytes(done.first())?);
    st.set_entries(words.clone());
    Ok(words)
}

/// The subtables the entries name, each once, in address order.
fn distinct_subtables(st: &TableState, words: &[u64]) -> Result<Vec<RemotePtr>, KvError> {
    let mut out = BTreeSet::new();
    for &w in words {
        out.insert(Entry::unpack(w, st.ready.initial)?.subtable);
    }
    Ok(out.into_iter().collect())
}

/// An occupied slot found in a window: its bucket line and what it names.
#[derive(Debug, Clone, Copy)]
struct Occupied {
    /// Index of the bucket line in the subtable (three per group).
    line: u64,
    /// The slot.
    slot: Slot,
}

/// Add the live keys of one subtable starting with `prefix` to `found`.
async fn scan_subtable(
    core: &Rc<SessionCore>,
    st: &TableState,
    subtable: RemotePtr,
    prefix: &[u8],
    found: &mut BTreeSet<Vec<u8>>,
    stats: &mut OpStats,
) -> Result<(), KvError> {
    let geometry = st.geometry;
    let max = core.client.options.retry.max_restarts.max(1);
    let mut group = 0;
    while group < geometry.groups() {
        let groups = WINDOW_GROUPS.min(geometry.groups() - group);
        let mut done = false;
        for attempt in 0..max {
            if let Some(keys) = read_window(core, st, subtable, group, groups, stats).await? {
                found.extend(keys.into_iter().filter(|k| k.starts_with(prefix)));
                done = true;
                break;
            }
            stats.restarts += 1;
            core.backoff(attempt).await;
        }
        if !done {
            return Err(KvError::unavailable(format!(
                "the key scan gave up on a window of subtable {subtable:?} after {max} restarts"
            )));
        }
        group += groups;
    }
    Ok(())
}

/// Read `groups` bucket groups from `first` and the KV blocks they name: the keys,
/// or `None` when the window must be read again.
async fn read_window(
    core: &Rc<SessionCore>,
    st: &TableState,
    subtable: RemotePtr,
    first: u64,
    groups: u64,
    stats: &mut OpStats,
) -> Result<Option<Vec<Vec<u8>>>, KvError> {
    let at = subtable
        .checked_add(first * GROUP_BYTES)
        .ok_or_else(|| KvError::corrupt(format!("subtable {subtable:?} overflows")))?;
    let viewed_at = Instant::now();
    let geometry = st.geometry;
    let done = exchange(
        core,
        vec![read_wr(core, &st.table(), at, groups * GROUP_BYTES)?],
        stats,
    )
    .await?;
    let occupied = occupied_slots(read_bytes(done.first())?, first * 3)?;
    if occupied.is_empty() {
        return Ok(Some(Vec::new()));
    }
    let wrs = occupied
        .iter()
        .map(|o| read_wr(core, &st.table(), o.slot.ptr(), o.slot.read_len() as u64))
        .collect::<Result<Vec<_>, _>>()?;
    let blocks = exchange_bulk(core, wrs, stats).await?;
    if viewed_at.elapsed() >= core.client.options.memory.grace {
        return Ok(None);
    }
    let mut keys = Vec::with_capacity(occupied.len());
    for (o, c) in occupied.iter().zip(&blocks) {
        let Ok(block) = KvBlock::parse(read_bytes(Some(c))?) else {
            return Ok(None);
        };
        if !belongs(geometry, o, block.key()) {
            return Ok(None);
        }
        keys.push(block.key().to_vec());
    }
    Ok(Some(keys))
}

/// The occupied, confirmed slots of the bucket lines in `buf`, whose first line
/// is line `first_line` of its subtable.
fn occupied_slots(buf: &[u8], first_line: u64) -> Result<Vec<Occupied>, KvError> {
    let mut out = Vec::new();
    for (i, chunk) in buf.chunks_exact(BUCKET_BYTES).enumerate() {
        let bucket = Bucket::parse(chunk)?;
        for &w in &bucket.slots[..SLOTS_PER_BUCKET] {
            if is_tentative(w) {
                continue;
            }
            if let Ok(Some(slot)) = unpack_marked(w) {
                out.push(Occupied {
                    line: first_line + i as u64,
                    slot,
                });
            }
        }
    }
    Ok(out)
}

/// Whether `key` may live in the slot `o`: the slot's fingerprint is the key's
/// and its bucket line is one of the key's two combined buckets (a main bucket the
/// key hashes to, or the overflow bucket of such a main bucket's group).
fn belongs(geometry: Subtable, o: &Occupied, key: &[u8]) -> bool {
    let hash = KeyHash::of(key);
    if hash.fingerprint() != o.slot.fingerprint() {
        return false;
    }
    let group = o.line / 3;
    geometry
        .candidates(&hash)
        .iter()
        .any(|&b| match o.line % 3 {
            0 => b == 2 * group,
            1 => Subtable::group_of(b) == group,
            _ => b == 2 * group + 1,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::race::bucket::BucketHeader;

    /// A slot word naming a block of one line at `va` with `key`'s fingerprint.
    fn slot_for(key: &[u8], va: u64) -> Slot {
        let ptr = RemotePtr::new(1, va).unwrap();
        Slot::new(KeyHash::of(key).fingerprint(), 1, ptr, 0).unwrap()
    }

    #[test]
    fn a_key_belongs_only_in_its_two_combined_buckets() {
        let geometry = Subtable::new(64).unwrap();
        let key = b"user:42";
        let [a, b] = geometry.candidates(&KeyHash::of(key));
        let slot = slot_for(key, 0x1000);
        let line_of_main = |m: u64| 3 * (m / 2) + if m.is_multiple_of(2) { 0 } else { 2 };
        for m in [a, b] {
            let main = Occupied {
                line: line_of_main(m),
                slot,
            };
            assert!(belongs(geometry, &main, key));
            let overflow = Occupied {
                line: 3 * (m / 2) + 1,
                slot,
            };
            assert!(belongs(geometry, &overflow, key));
        }
        let elsewhere = (0..geometry.groups() * 3)
            .filter(|&l| {
                ![a, b]
                    .iter()
                    .any(|&m| l == line_of_main(m) || l == 3 * (m / 2) + 1)
            })
            .collect::<Vec<_>>();
        assert!(!elsewhere.is_empty());
        for line in elsewhere {
            assert!(!belongs(geometry, &Occupied { line, slot }, key), "{line}");
        }
        // Another key's fingerprint in the right bucket does not belong either.
        let other = (0u32..)
            .map(|i| format!("k{i}").into_bytes())
            .find(|k| KeyHash::of(k).fingerprint() != KeyHash::of(key).fingerprint())
            .unwrap();
        let wrong = Occupied {
            line: line_of_main(a),
            slot: slot_for(&other, 0x1000),
        };
        assert!(!belongs(geometry, &wrong, key));
    }

    #[test]
    fn empty_and_tentative_slots_are_not_listed() {
        let header = BucketHeader::new(0, 0).unwrap();
        let mut bucket = Bucket::empty(header);
        let live = slot_for(b"a", 0x40);
        let pending = slot_for(b"b", 0x80);
        bucket.slots[0] = live.pack();
        bucket.slots[3] = pending.pack() | crate::race::slot::TENTATIVE;
        let mut buf = Bucket::empty(header).encode().to_vec();
        buf.extend_from_slice(&bucket.encode());
        let found = occupied_slots(&buf, 6).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].line, 7);
        assert_eq!(found[0].slot, live);
    }
}
