//! A search that knows where the key's slot was: READ that slot's 64-byte bucket
//! and the KV block the slot named, two READs in one doorbell, instead of both
//! combined buckets and the block (four bucket lines and a block).
//!
//! Why one bucket is enough: at most one confirmed slot names a key's current
//! record (a split's copy names the same block as the slot it copies), and a
//! bucket whose header covers the key and is not being filled by a split is
//! authoritative for the key at the moment it is read — a split changes every
//! header of the subtable it splits before it moves any slot out of it, and no
//! writer changes a key while its subtable is frozen or its new subtable is being
//! filled. So when the line, read whole by one READ, shows the hinted word in the
//! hinted slot under such a header, the key's record was the block that word
//! names when the line was read; the block READ, posted after the line READ on the
//! same queue pair and completed within the grace period of it, returns that
//! record (the argument of [`super::net::read_view_and_block`]). When the slot
//! shows another confirmed word with the key's fingerprint (the key was updated:
//! updates CAS the key's own slot), that word's block is read in a second round
//! trip and, holding the key within the grace period of the line's READ, is the
//! key's record by the same argument. Any other outcome — an emptied or marked
//! slot, a header that does not cover the key or says *moving*, a block that
//! fails its checks or came late, another key's block — proves nothing, and the
//! caller searches the ordinary way.

use std::rc::Rc;
use std::time::Instant;

use dmkv_api::metadata::TableDescription;

use super::block_hints::Hint;
use super::bucket::{BUCKET_BYTES, Bucket, COMBINED_BYTES, Subtable};
use super::hash::KeyHash;
use super::kv_block::value_for;
use super::net::{Candidate, exchange, hinted_block_wr, lookup_all, read_wr};
use super::slot::Slot;
use crate::error::KvError;
use crate::ptr::RemotePtr;
use crate::remote::read_bytes;
use crate::session::SessionCore;
use crate::stats::OpStats;

/// Where a hinted slot sits among a key's bucket lines in one subtable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HintedLine {
    /// Address of the 64-byte bucket (header word first).
    pub line: RemotePtr,
    /// Index of the slot within the bucket (0..7).
    pub index: usize,
}

/// The bucket line of `subtable` holding the slot at `slot`, when that slot is one
/// of the slots `hash` may use there (its main or overflow bucket of either
/// choice); `None` otherwise (a split moved the key, the hint is from another
/// subtable, or `slot` is not a slot word's address).
pub(crate) fn locate(
    subtable: RemotePtr,
    geometry: Subtable,
    hash: &KeyHash,
    slot: RemotePtr,
) -> Option<HintedLine> {
    if slot.memnode() != subtable.memnode() {
        return None;
    }
    geometry.candidates(hash).into_iter().find_map(|bk| {
        let combined = subtable.checked_add(Subtable::combined_offset(bk))?;
        let within = slot.offset().checked_sub(combined.offset())?;
        if within >= COMBINED_BYTES as u64 || within % 8 != 0 {
            return None;
        }
        let line_at = within - within % BUCKET_BYTES as u64;
        let word = (within - line_at) / 8;
        // Word 0 of a bucket is its header, not a slot.
        let index = usize::try_from(word.checked_sub(1)?).ok()?;
        Some(HintedLine {
            line: combined.checked_add(line_at)?,
            index,
        })
    })
}

/// What the hinted line and block showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LineVerdict {
    /// The key's value, proven by the line and the hinted block.
    Proven(Vec<u8>),
    /// Under a covering, settled header the hinted slot now holds another confirmed
    /// word with the key's fingerprint (the key was updated in place, or the slot
    /// was reused): that word's block, read next, decides.
    Replaced(Candidate),
    /// Nothing proven: search the ordinary way.
    Unproven,
}

/// Decide from the line's bytes and the hinted block's bytes (see the module docs);
/// `in_grace`: the block completed within the grace period of the line's READ.
pub(crate) fn decide(
    at: HintedLine,
    line: &[u8],
    block: Option<&[u8]>,
    hash: &KeyHash,
    key: &[u8],
    hint: u64,
    in_grace: bool,
) -> LineVerdict {
    let Ok(bucket) = Bucket::parse(line) else {
        return LineVerdict::Unproven;
    };
    let h = bucket.header;
    let Some(&word) = bucket.slots.get(at.index) else {
        return LineVerdict::Unproven;
    };
    if !h.covers(hash) || h.moving() {
        return LineVerdict::Unproven;
    }
    if word != hint {
        // Only a confirmed word (not empty, split-marked or tentative) with the
        // key's fingerprint may name the key's record.
        return match Slot::unpack(word) {
            Ok(Some(slot)) if slot.fingerprint() == hash.fingerprint() => {
                match at.line.checked_add(8 * (at.index as u64 + 1)) {
                    Some(addr) => LineVerdict::Replaced(Candidate { addr, word, slot }),
                    None => LineVerdict::Unproven,
                }
            }
            _ => LineVerdict::Unproven,
        };
    }
    match block.filter(|_| in_grace).map(|b| value_for(b, key)) {
        Some(Ok(Some(value))) => LineVerdict::Proven(value.to_vec()),
        _ => LineVerdict::Unproven,
    }
}

/// What a hinted search found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HintedOutcome {
    /// The key's value, and where its block is now and when that was seen (the hint
    /// to keep).
    Found(Vec<u8>, Hint),
    /// Nothing proven: search the ordinary way.
    Unproven,
}

/// READ the hinted slot's bucket and the hinted block of `key` in one round trip
/// and decide; when the slot names another block of the key's fingerprint, READ
/// that block in a second round trip. `None` when the hint cannot be used that way
/// (its slot is not among the key's slots in `subtable`, or the block lies on
/// another memory node than the bucket): nothing was read, and the caller reads the
/// combined buckets (with the block) instead.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn search_hinted(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    subtable: RemotePtr,
    geometry: Subtable,
    hash: &KeyHash,
    key: &[u8],
    hint: Hint,
    stats: &mut OpStats,
) -> Result<Option<HintedOutcome>, KvError> {
    let Some(at) = locate(subtable, geometry, hash, hint.slot) else {
        return Ok(None);
    };
    let line_wr = read_wr(core, table, at.line, BUCKET_BYTES as u64)?;
    let Some(block_wr) = hinted_block_wr(core, table, hint.word, std::slice::from_ref(&line_wr))
    else {
        return Ok(None);
    };
    let posted = Instant::now();
    let done = exchange(core, vec![line_wr, block_wr], stats).await?;
    let in_grace = posted.elapsed() < core.client.options.memory.grace;
    let line = read_bytes(done.first())?;
    let block = done.get(1).and_then(|c| read_bytes(Some(c)).ok());
    let outcome = match decide(at, line, block, hash, key, hint.word, in_grace) {
        LineVerdict::Proven(value) => HintedOutcome::Found(value, hint.seen_at(posted)),
        LineVerdict::Unproven => HintedOutcome::Unproven,
        LineVerdict::Replaced(c) => {
            match lookup_all(core, table, &[c], key, posted, stats).await? {
                Some(found) => match found.into_iter().next() {
                    Some((c, value)) => HintedOutcome::Found(
                        value,
                        Hint {
                            word: c.word,
                            slot: c.addr,
                            seen: posted,
                        },
                    ),
                    None => HintedOutcome::Unproven,
                },
                None => HintedOutcome::Unproven,
            }
        }
    };
    Ok(Some(outcome))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::race::bucket::BucketHeader;
    use crate::race::kv_block::encode;
    use crate::race::slot::{EMPTY, MARK, TENTATIVE};

    fn ptr(memnode: u8, offset: u64) -> RemotePtr {
        RemotePtr::new(memnode, offset).unwrap()
    }

    fn line_bytes(header: BucketHeader, index: usize, word: u64) -> Vec<u8> {
        let mut b = Bucket::empty(header);
        b.slots[index] = word;
        b.encode().to_vec()
    }

    #[test]
    fn every_slot_of_the_keys_buckets_is_located_and_nothing_else() {
        let geometry = Subtable::new(8).unwrap();
        let base = ptr(2, 1 << 20);
        let hash = KeyHash::of(b"user:42");
        let mut found = 0;
        for bk in geometry.candidates(&hash) {
            let combined = base.offset() + Subtable::combined_offset(bk);
            for line in 0..2u64 {
                for slot in 0..7u64 {
                    let at = ptr(2, combined + 64 * line + 8 + 8 * slot);
                    let l = locate(base, geometry, &hash, at).unwrap();
                    assert_eq!(l.line, ptr(2, combined + 64 * line));
                    assert_eq!(l.index, slot as usize);
                    found += 1;
                }
                // The header word is not a slot; a misaligned address is no slot.
                assert_eq!(
                    locate(base, geometry, &hash, ptr(2, combined + 64 * line)),
                    None
                );
                assert_eq!(
                    locate(base, geometry, &hash, ptr(2, combined + 64 * line + 12)),
                    None
                );
            }
            // Another memory node, or just past the combined bucket.
            assert_eq!(locate(base, geometry, &hash, ptr(3, combined + 8)), None);
        }
        assert!(found >= 14);
        // Below the subtable, or in a bucket the key does not use.
        assert_eq!(locate(base, geometry, &hash, ptr(2, 8)), None);
        let [a, b] = geometry.candidates(&hash);
        let other = (0..geometry.main_buckets())
            .find(|&x| {
                let off = Subtable::combined_offset(x);
                [a, b].iter().all(|&c| {
                    let co = Subtable::combined_offset(c);
                    off + 128 <= co || co + 128 <= off
                })
            })
            .unwrap();
        let at = ptr(2, base.offset() + Subtable::combined_offset(other) + 8);
        assert_eq!(locate(base, geometry, &hash, at), None);
    }

    #[test]
    fn only_a_covering_settled_line_with_the_word_in_place_proves_the_block() {
        let key = b"user:7";
        let hash = KeyHash::of(key);
        let at = HintedLine {
            line: ptr(1, 4096),
            index: 4,
        };
        let word = Slot::new(hash.fingerprint(), 2, ptr(1, 1 << 16), 0)
            .unwrap()
            .pack();
        let block = encode(key, b"value").unwrap();
        let depth = 3;
        let good = BucketHeader::new(depth, hash.suffix(depth) as u32).unwrap();
        let line = line_bytes(good, 4, word);
        let verdict = |line: &[u8], index: usize, blk: Option<&[u8]>, hint: u64, grace: bool| {
            decide(
                HintedLine { index, ..at },
                line,
                blk,
                &hash,
                key,
                hint,
                grace,
            )
        };
        assert_eq!(
            verdict(&line, 4, Some(&block), word, true),
            LineVerdict::Proven(b"value".to_vec())
        );
        let other_key = encode(b"other", b"v").unwrap();
        // A byte of the value changed under the CRC.
        let mut torn = block.clone();
        let at_value = torn.windows(5).position(|w| w == b"value").unwrap();
        torn[at_value] ^= 0x40;
        let moving = line_bytes(good.with_moving(true), 4, word);
        let stale = line_bytes(
            BucketHeader::new(depth, (hash.suffix(depth) as u32) ^ 1).unwrap(),
            4,
            word,
        );
        let marked = line_bytes(good, 4, word | MARK);
        let tentative = line_bytes(good, 4, word | TENTATIVE);
        let emptied = line_bytes(good, 4, EMPTY);
        for (line, index, blk, grace, why) in [
            (
                &line[..],
                3,
                Some(&block[..]),
                true,
                "another slot of the line",
            ),
            (&line[..], 4, Some(&block[..]), false, "late"),
            (&line[..], 4, None, true, "no block"),
            (
                &line[..],
                4,
                Some(&other_key[..]),
                true,
                "another key's block",
            ),
            (&line[..], 4, Some(&torn[..]), true, "torn block"),
            (&marked[..], 4, Some(&block[..]), true, "frozen by a split"),
            (&tentative[..], 4, Some(&block[..]), true, "tentative"),
            (&emptied[..], 4, Some(&block[..]), true, "deleted"),
            (&moving[..], 4, Some(&block[..]), true, "being filled"),
            (
                &stale[..],
                4,
                Some(&block[..]),
                true,
                "does not cover the key",
            ),
            (&[0xff; 64][..], 4, Some(&block[..]), true, "garbage"),
            (&line[..40], 4, Some(&block[..]), true, "short"),
        ] {
            assert_eq!(
                verdict(line, index, blk, word, grace),
                LineVerdict::Unproven,
                "{why}"
            );
        }
        // Updated in place: the slot's new word decides, if its fingerprint is the key's.
        let newer = Slot::new(hash.fingerprint(), 2, ptr(1, 1 << 17), 0)
            .unwrap()
            .pack();
        let updated = line_bytes(good, 4, newer);
        match verdict(&updated, 4, Some(&block), word, true) {
            LineVerdict::Replaced(c) => {
                assert_eq!(c.word, newer);
                assert_eq!(c.addr, ptr(1, 4096 + 8 * 5));
            }
            v => panic!("{v:?}"),
        }
        let foreign = Slot::new(hash.fingerprint() ^ 1, 2, ptr(1, 1 << 17), 0)
            .unwrap()
            .pack();
        assert_eq!(
            verdict(&line_bytes(good, 4, foreign), 4, Some(&block), word, true),
            LineVerdict::Unproven
        );
        assert_eq!(
            verdict(
                &line_bytes(good.with_moving(true), 4, newer),
                4,
                Some(&block),
                word,
                true
            ),
            LineVerdict::Unproven
        );
    }
}
