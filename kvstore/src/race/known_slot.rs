//! An update after a slot the client saw moments ago, in one round trip.
//!
//! An update or put of a key whose slot this client saw holding the key's word
//! (by a search or a write posted less than half a reclamation grace period ago,
//! [`super::block_hints::Hint::seen`]) skips the look at the buckets: in one
//! doorbell on the memory node's queue pair it WRITEs the new KV block and CASes
//! the remembered slot from the remembered word to the new block's word. The queue
//! pair executes them in order, so the block is complete before any slot names it.
//! Two work requests and one round trip, against five in two round trips (the
//! combined buckets, the new block and the hinted block, then the CAS).
//!
//! Why the CAS alone is enough: at most one confirmed slot names a key's record
//! (see `claim` in [`super::ops`]), updates CAS that slot in place, and a split
//! marks a slot before it copies it and clears it only after, so a CAS comparing
//! against the unmarked word fails once the split has begun with that slot and is
//! carried along (marked, then copied) when it landed before. The compare value
//! names the block by its address and reuse tag; a block is reused only a
//! reclamation grace period after its slot stopped naming it, and its tag comes
//! round only after [`super::slot::TAG_PERIOD`] reuses, a period that covers this
//! window as well as the CAS's longest flight ([`super::ops::block_grace`]). So
//! the CAS succeeds exactly when the slot still names the block the client saw:
//! the key's current record, which it replaces — the update's linearization
//! point, as for the ordinary CAS. A lost CAS changes nothing: the written block is
//! unreachable, and the ordinary path takes over with it (without writing it
//! again).
//!
//! Only unreplicated tables outside the switch accelerator and the RPC mode take
//! this path (a replicated slot's CAS is decided across its copies, the
//! accelerator steers CASes), only with a plain confirmed word (not marked by a
//! split, not tentative), and only when the block and the slot share a memory node.

use std::time::{Duration, Instant};

use dmkv_api::metadata::TableDescription;

use super::block_hints::Hint;
use super::hash::KeyHash;
use super::hinted_read::locate;
use super::net::{Wr, cas_wr, exchange, write_wr};
use super::slot::Slot;
use super::state::TableState;
use crate::error::KvError;
use crate::index::WriteKind;
use crate::ptr::RemotePtr;
use crate::remote::{atomic_value, write_done};
use crate::replication::copies;
use crate::session::SessionCore;
use crate::stats::OpStats;
use verbs::wr::WorkRequest;

/// What an update after a known slot did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KnownSlot {
    /// The slot named the new block from the CAS on: the write is done. `replaced`
    /// is what it named before; `seen` the time taken before posting.
    Written { replaced: Slot, seen: Instant },
    /// The block is written, but the slot had moved on: the ordinary path takes
    /// over (the block is unreachable and needs no second WRITE).
    Lost,
    /// Not tried: nothing was posted.
    NotTaken,
}

/// How recently the slot must have been seen: half the reclamation grace period
/// (as for Clover's known tail).
pub(crate) fn window(grace: Duration) -> Duration {
    grace / 2
}

/// The slot a hint lets an update CAS at `now`: a plain confirmed word seen within
/// `window`; `None` otherwise.
pub(crate) fn usable(hint: &Hint, now: Instant, window: Duration) -> Option<Slot> {
    if now.saturating_duration_since(hint.seen) >= window {
        return None;
    }
    // A marked (split) or tentative word unpacks to nothing or to another word.
    Slot::unpack(hint.word)
        .ok()
        .flatten()
        .filter(|s| s.pack() == hint.word)
}

/// Whether a write of `kind` to `table` may go after a known slot.
pub(crate) fn applies(core: &SessionCore, table: &TableDescription, kind: WriteKind) -> bool {
    matches!(kind, WriteKind::Update | WriteKind::Put)
        && !copies::is_replicated(table)
        && !core.accelerated
}

/// The doorbell: the block's WRITE, then the slot's CAS, both to one memory node;
/// the WRITEs handed back when they would not share one (or the block has more
/// than one copy).
pub(crate) fn doorbell(write: Vec<Wr>, cas: Wr) -> Result<Vec<Wr>, Vec<Wr>> {
    match <[Wr; 1]>::try_from(write) {
        Ok([w]) if w.0 == cas.0 => Ok(vec![w, cas]),
        Ok([w]) => Err(vec![w]),
        Err(write) => Err(write),
    }
}

/// The bytes of the first WRITE among `wrs` (handed back unposted).
fn written_bytes(wrs: Vec<Wr>) -> Vec<u8> {
    wrs.into_iter()
        .find_map(|(_, wr)| match wr {
            WorkRequest::Write { data, .. } => Some(data),
            _ => None,
        })
        .unwrap_or_default()
}

/// Try the update of `key` to the block `bytes` at `block` (slot word `word`) after
/// the slot `hint` names (see the module docs). On [`KnownSlot::NotTaken`] `bytes`
/// is left as it was; otherwise it has been written.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn try_write(
    core: &SessionCore,
    st: &TableState,
    hash: &KeyHash,
    hint: Hint,
    block: RemotePtr,
    bytes: &mut Vec<u8>,
    word: u64,
    stats: &mut OpStats,
) -> Result<KnownSlot, KvError> {
    let now = Instant::now();
    let Some(replaced) = usable(&hint, now, window(core.client.options.memory.grace)) else {
        return Ok(KnownSlot::NotTaken);
    };
    // Defence: the slot must still be one of the key's slots in the subtable the
    // cached directory names for it.
    let entry = st.entry(st.index_of(hash))?;
    if locate(entry.subtable, st.geometry, hash, hint.slot).is_none() {
        return Ok(KnownSlot::NotTaken);
    }
    let table = st.table();
    let cas = cas_wr(core, &table, hint.slot, hint.word, word)?;
    let write = write_wr(core, &table, block, std::mem::take(bytes))?;
    let wrs = match doorbell(write, cas) {
        Ok(wrs) => wrs,
        Err(unposted) => {
            *bytes = written_bytes(unposted);
            return Ok(KnownSlot::NotTaken);
        }
    };
    let done = exchange(core, wrs, stats).await?;
    write_done(done.first())?;
    if atomic_value(done.get(1))? == hint.word {
        return Ok(KnownSlot::Written {
            replaced,
            seen: now,
        });
    }
    stats.stale_hints += 1;
    Ok(KnownSlot::Lost)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::race::slot::{MARK, TENTATIVE};
    use verbs::wr::RemoteAddr;

    fn ptr(memnode: u8, offset: u64) -> RemotePtr {
        RemotePtr::new(memnode, offset).unwrap()
    }

    fn word() -> u64 {
        Slot::new(0x5a, 1000, ptr(1, 64 * 40), 3).unwrap().pack()
    }

    fn hint(word: u64, seen: Instant) -> Hint {
        Hint {
            word,
            slot: ptr(1, 4096 + 8),
            seen,
        }
    }

    #[test]
    fn only_a_plain_word_seen_within_the_window_is_usable() {
        let t0 = Instant::now();
        let w = window(Duration::from_millis(100));
        assert_eq!(w, Duration::from_millis(50));
        let fresh = hint(word(), t0);
        assert_eq!(usable(&fresh, t0, w).map(|s| s.pack()), Some(word()));
        assert!(usable(&fresh, t0 + Duration::from_millis(49), w).is_some());
        // Seen too long ago: the block may have been reused since.
        assert_eq!(usable(&fresh, t0 + Duration::from_millis(50), w), None);
        // A split's mark or an unconfirmed insert: never compared against.
        assert_eq!(usable(&hint(word() | MARK, t0), t0, w), None);
        assert_eq!(usable(&hint(word() | TENTATIVE, t0), t0, w), None);
        assert_eq!(usable(&hint(0, t0), t0, w), None);
        // A hint stamped after `now` (another thread's clock read) is fresh.
        assert!(usable(&hint(word(), t0 + Duration::from_millis(5)), t0, w).is_some());
    }

    #[test]
    fn the_block_goes_first_and_both_go_to_one_memory_node() {
        let addr = RemoteAddr { rkey: 7, va: 4096 };
        let cas = (1, WorkRequest::cas(addr, 1, 2));
        let write = |m| (m, WorkRequest::write(addr, vec![9; 64]));
        let wrs = doorbell(vec![write(1)], cas.clone()).unwrap();
        assert_eq!(wrs.len(), 2);
        assert!(matches!(wrs[0].1, WorkRequest::Write { .. }));
        assert!(matches!(wrs[1].1, WorkRequest::CompareSwap { .. }));
        assert!(wrs.iter().all(|(m, _)| *m == 1));
        // Another memory node's queue pair would not order them: the WRITE comes
        // back with its bytes.
        let back = doorbell(vec![write(2)], cas.clone()).unwrap_err();
        assert_eq!(written_bytes(back), vec![9; 64]);
        // More than one copy of the block: not this path.
        assert_eq!(
            doorbell(vec![write(1), write(2)], cas.clone())
                .unwrap_err()
                .len(),
            2
        );
        assert!(doorbell(Vec::new(), cas).unwrap_err().is_empty());
    }
}
