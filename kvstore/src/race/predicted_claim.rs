//! An insert whose first look at the buckets also claims a slot: the slot the
//! client's last reads of the key's two combined buckets say a fresh look would
//! pick ([`super::bucket_cache`]).
//!
//! The ordinary insert looks at the buckets (and WRITEs the block), then CASes an
//! empty slot to its word marked tentative and READs the buckets again in one
//! doorbell, then confirms: 3 round trips. When both combined buckets of the key are
//! in the client's cache, the first round trip is instead the block's WRITE, the
//! tentative CAS of the predicted slot and the buckets' READs, the CAS and the READs
//! on the buckets' queue pair in that order — exactly the second round trip of the
//! ordinary claim, so when the CAS finds the slot empty the claim goes on as it
//! would have (the READs after the CAS decide: confirm, or take the slot back when
//! another slot holds the key or a split is under way): 2 round trips. The cache
//! only chooses which empty slot to try; nothing it says is trusted. When the slot
//! was taken since, the CAS changed nothing and the READs are an ordinary first
//! look, taken after it: the insert goes on from them, having lost nothing but the
//! CAS.

use std::rc::Rc;
use std::time::Instant;

use super::bucket_cache::BucketCache;
use super::hash::KeyHash;
use super::net::{Status, View, cas_wr, exchange, parse_view, view_wrs, write_wr};
use super::ops::{Claim, Known, Tentative, settle_claim};
use super::slot::{EMPTY, TENTATIVE};
use super::state::TableState;
use crate::error::KvError;
use crate::ptr::RemotePtr;
use crate::remote::{atomic_value, write_done};
use crate::session::SessionCore;
use crate::stats::OpStats;

/// What an insert's predicted claim did.
#[derive(Debug)]
pub(super) enum Predicted {
    /// Nothing was posted (no prediction, or the claim and the READs would not share
    /// a queue pair): the block is not written.
    NotTaken,
    /// The slot was ours and is confirmed: the insert happened; `seen` is when the
    /// round trip that claimed it was posted.
    Done { slot: RemotePtr, seen: Instant },
    /// The slot was ours, and the claim ended without the insert as the ordinary
    /// claim does ([`Claim`], and whether our slot is known to be gone).
    Settled(Claim, bool),
    /// The slot was taken: nothing of ours is in a slot. `view` was READ after the
    /// CAS (posted at `viewed_at`).
    Missed { view: View, viewed_at: Instant },
}

/// The slot a look at `view` would claim for `hash`: its empty slot, when every
/// bucket covers the key, no split is working on them, and no slot shows the key's
/// fingerprint (the key may be there: a look first, as without a prediction, makes
/// an insert of a present key fail, or a put update it, without a claim to take
/// back).
pub(crate) fn predict(view: &View, hash: &KeyHash) -> Option<RemotePtr> {
    let fp = hash.fingerprint();
    let clear = view.matching(fp).is_empty() && view.tentative(fp).is_empty();
    (clear && view.status(hash) == Status::Good)
        .then(|| view.empty_slot())
        .flatten()
}

/// Try the insert of the block `bytes` at `block` (slot word `word`) by claiming the
/// slot predicted in `subtable` (the one the cached directory names for the key) in
/// its first round trip (see the module docs). On [`Predicted::NotTaken`] `bytes` is
/// left as it was; otherwise the block is written.
#[allow(clippy::too_many_arguments)]
pub(super) async fn try_claim(
    core: &Rc<SessionCore>,
    st: &TableState,
    subtable: RemotePtr,
    hash: &KeyHash,
    key: &[u8],
    block: RemotePtr,
    bytes: &mut Vec<u8>,
    word: u64,
    stats: &mut OpStats,
) -> Result<Predicted, KvError> {
    let table = st.table();
    let cache = core.client.shared_state::<BucketCache>();
    let Some(slot) = cache
        .view(table.id, subtable, st.geometry, hash)
        .and_then(|v| predict(&v, hash))
    else {
        return Ok(Predicted::NotTaken);
    };
    let cas = cas_wr(core, &table, slot, EMPTY, word | TENTATIVE)?;
    let (reads, buckets) = view_wrs(core, &table, subtable, st.geometry, hash)?;
    // The READs must execute after the CAS: one queue pair.
    if reads.iter().any(|(memnode, _)| *memnode != cas.0) {
        return Ok(Predicted::NotTaken);
    }
    let mut wrs = write_wr(core, &table, block, std::mem::take(bytes))?;
    let writes = wrs.len();
    wrs.push(cas);
    wrs.extend(reads);
    let viewed_at = Instant::now();
    let done = exchange(core, wrs, stats).await?;
    for c in done.get(..writes).unwrap_or_default() {
        write_done(Some(c))?;
    }
    let previous = atomic_value(done.get(writes))?;
    let view = parse_view(
        done.get(writes + 1..).unwrap_or_default(),
        subtable,
        st.geometry,
        &buckets,
    )?;
    cache.remember(table.id, &view);
    if previous != EMPTY {
        stats.restarts += 1;
        return Ok(Predicted::Missed { view, viewed_at });
    }
    let mut known = Known::new();
    let ours = Tentative {
        hash,
        key,
        slot,
        word,
    };
    let (outcome, gone) = settle_claim(
        core, st, &view, viewed_at, viewed_at, ours, &mut known, stats,
    )
    .await?;
    Ok(match outcome {
        Claim::Done => Predicted::Done {
            slot,
            seen: viewed_at,
        },
        other => Predicted::Settled(other, gone),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::race::bucket::{BucketHeader, Subtable};
    use crate::race::slot::{FROZEN, MARK};

    fn view(hash: &KeyHash, header: BucketHeader, fill: &[(usize, u64)]) -> View {
        let geometry = Subtable::new(64).unwrap();
        let subtable = RemotePtr::new(1, 1 << 20).unwrap();
        View::with_main_slots(subtable, geometry, hash, header, fill)
    }

    #[test]
    fn only_a_settled_covering_view_predicts_its_empty_slot() {
        let hash = KeyHash::of(b"user:9");
        let covering = BucketHeader::new(0, 0).unwrap();
        let free = view(&hash, covering, &[]);
        assert_eq!(predict(&free, &hash), free.empty_slot());
        assert!(predict(&free, &hash).is_some());
        // A split is freezing the buckets: no prediction.
        let frozen = view(&hash, covering, &[(0, FROZEN)]);
        assert_eq!(predict(&frozen, &hash), None);
        // Another key's word (another fingerprint).
        let other = hash.fingerprint() ^ 0x80;
        let word = crate::race::slot::Slot::new(other, 64, RemotePtr::new(1, 64 * 9).unwrap(), 0)
            .unwrap()
            .pack();
        let marked = view(&hash, covering, &[(1, word | MARK)]);
        assert_eq!(predict(&marked, &hash), None);
        // Occupied slots are skipped: the first empty one after them.
        let some = view(&hash, covering, &[(0, word)]);
        let p = predict(&some, &hash).expect("room left");
        assert_ne!(p, free.buckets[0].main_at.checked_add(8).unwrap());
        // A slot with the key's fingerprint (confirmed or not): look first.
        let fp = hash.fingerprint();
        let same = crate::race::slot::Slot::new(fp, 64, RemotePtr::new(1, 64 * 9).unwrap(), 0)
            .unwrap()
            .pack();
        assert_eq!(predict(&view(&hash, covering, &[(3, same)]), &hash), None);
        assert_eq!(
            predict(&view(&hash, covering, &[(3, same | TENTATIVE)]), &hash),
            None
        );
        // Full buckets: nothing to predict.
        let all: Vec<(usize, u64)> = (0..7).map(|i| (i, word)).collect();
        let full_main = view(&hash, covering, &all);
        assert!(
            predict(&full_main, &hash).is_some(),
            "the overflow buckets are empty"
        );
    }
}
