//! How one pass of a copy turns what the primary and the new member hold into
//! writes to the new member, per index ([`CopyRule`], chosen by [`for_plan`]).
//!
//! Every rule compares 8-byte words (extents are 64-byte aligned) of what the
//! new member must hold with what it holds, and writes the difference: an
//! isolated differing word — what a header link, a shortcut or a slot looks
//! like, words writers CAS concurrently — with CAS(value seen on the new member
//! → value wanted), so a writer's CAS that lands in between is not overwritten
//! blindly; longer runs with one WRITE ([`diff_words`]).
//!
//! - Clover ([`WriteOnceWords`]): the new member must hold the primary's bytes.
//!   Words are written once on the primary, so passes with writers running
//!   converge and a pass that writes nothing proves the copy complete
//!   (`docs/replication.md`).
//! - RACE ([`RaceSlots`]): the new member must hold what the backups hold: the
//!   primary's bytes, except that a slot word the primary holds *tentative* (an
//!   insert not yet confirmed, which only the primary ever holds) is empty. The
//!   slot words are found from the table's directory. Slots change many times,
//!   so the last pass runs with the table's writes paused.
//! - In-place ([`QuietLastPass`]): the primary's bytes; tuples are rewritten in
//!   place, so the last pass runs with the table's writes paused.

use crate::api::IndexKind;
use crate::catalog::SyncPlan;

/// One change to the new member's copy, at an offset from the compared range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Patch {
    /// WRITE `bytes` at `offset`.
    Write {
        /// Offset into the range.
        offset: u64,
        /// What the primary holds there.
        bytes: Vec<u8>,
    },
    /// CAS the word at `offset` from `expect` (seen on the new member) to `swap`
    /// (seen on the primary).
    Cas {
        /// Offset into the range (8-byte aligned).
        offset: u64,
        /// The new member's word as read.
        expect: u64,
        /// The primary's word as read.
        swap: u64,
    },
}

/// How an index's memory is copied to a syncing member while writers run.
pub trait CopyRule: Send + Sync {
    /// The rule's name, for logs.
    fn name(&self) -> &'static str;
    /// Whether the copy may be finished only by a pass run while the table's
    /// writes are paused (a clean pass with writers running proves nothing).
    fn final_pass_paused(&self) -> bool;
    /// The patches that make `copy` (the new member's bytes) hold what it must,
    /// given `primary` (the primary's bytes of the same range, read just before);
    /// `at` is the range's offset from the region base (the same on every member).
    fn patches(&self, at: u64, primary: &[u8], copy: &[u8]) -> Vec<Patch>;
}

/// Clover's rule: words are written once on the primary (node bytes before they
/// are linked, a header's link by one CAS), so copying every difference until a
/// pass finds none converges (`docs/replication.md`).
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteOnceWords;

/// The in-place rule: the primary's bytes, finished by a pass with writes paused.
#[derive(Debug, Clone, Copy, Default)]
pub struct QuietLastPass;

/// RACE's rule: the primary's bytes as the backups hold them — a tentative slot
/// empty — finished by a pass with writes paused.
#[derive(Debug, Clone, Default)]
pub struct RaceSlots {
    /// `[start, end)` offsets from the region base of the subtables homed on the
    /// set's home memnode, sorted.
    subtables: Vec<(u64, u64)>,
}

fn word(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    if let Some(s) = b.get(at..at + 8) {
        w.copy_from_slice(s);
    }
    u64::from_le_bytes(w)
}

/// The patches that make `copy` equal to `want`: runs of differing words with a
/// WRITE, an isolated differing word with a CAS from what `copy` holds.
pub fn diff_words(want: &[u8], copy: &[u8]) -> Vec<Patch> {
    let len = want.len().min(copy.len());
    let words = len / 8;
    let differs = |i: usize| want[i * 8..i * 8 + 8] != copy[i * 8..i * 8 + 8];
    let mut out = Vec::new();
    let mut i = 0;
    while i < words {
        if !differs(i) {
            i += 1;
            continue;
        }
        let start = i;
        while i < words && differs(i) {
            i += 1;
        }
        let (a, b) = (start * 8, i * 8);
        if i - start == 1 {
            out.push(Patch::Cas {
                offset: a as u64,
                expect: word(copy, a),
                swap: word(want, a),
            });
        } else {
            out.push(Patch::Write {
                offset: a as u64,
                bytes: want[a..b].to_vec(),
            });
        }
    }
    // A tail shorter than a word (never for 64-byte extents) is written.
    let tail = words * 8;
    if tail < len && want[tail..len] != copy[tail..len] {
        out.push(Patch::Write {
            offset: tail as u64,
            bytes: want[tail..len].to_vec(),
        });
    }
    out
}

impl CopyRule for WriteOnceWords {
    fn name(&self) -> &'static str {
        "write-once-words"
    }

    fn final_pass_paused(&self) -> bool {
        false
    }

    fn patches(&self, _at: u64, primary: &[u8], copy: &[u8]) -> Vec<Patch> {
        diff_words(primary, copy)
    }
}

impl CopyRule for QuietLastPass {
    fn name(&self) -> &'static str {
        "quiet-last-pass"
    }

    fn final_pass_paused(&self) -> bool {
        true
    }

    fn patches(&self, _at: u64, primary: &[u8], copy: &[u8]) -> Vec<Patch> {
        diff_words(primary, copy)
    }
}

impl RaceSlots {
    /// The rule for the subtables `subtables` (as the directory names them) of
    /// the set homed on memnode `home`.
    pub fn new(home: u64, subtables: &[kvstore::race_replica_view::SubtableExtent]) -> RaceSlots {
        let mut ranges: Vec<(u64, u64)> = subtables
            .iter()
            .filter(|s| u64::from(s.memnode) == home)
            .map(|s| (s.offset, s.offset.saturating_add(s.len)))
            .collect();
        ranges.sort_unstable();
        RaceSlots { subtables: ranges }
    }

    /// The subtable holding offset `at`: its first offset.
    fn subtable_of(&self, at: u64) -> Option<u64> {
        let i = self.subtables.partition_point(|&(start, _)| start <= at);
        let (start, end) = *self.subtables.get(i.checked_sub(1)?)?;
        (at < end).then_some(start)
    }
}

impl CopyRule for RaceSlots {
    fn name(&self) -> &'static str {
        "race-slots"
    }

    fn final_pass_paused(&self) -> bool {
        true
    }

    fn patches(&self, at: u64, primary: &[u8], copy: &[u8]) -> Vec<Patch> {
        use kvstore::race_replica_view::{as_backups_hold, is_slot_word};
        let mut want = primary.to_vec();
        for (i, chunk) in want.chunks_exact_mut(8).enumerate() {
            let off = at + 8 * i as u64;
            let Some(start) = self.subtable_of(off) else {
                continue;
            };
            if !is_slot_word(off - start) {
                continue;
            }
            let mut w = [0u8; 8];
            w.copy_from_slice(chunk);
            chunk.copy_from_slice(&as_backups_hold(u64::from_le_bytes(w)).to_le_bytes());
        }
        diff_words(&want, copy)
    }
}

/// The copy rule of `plan`'s table; a RACE table's needs its directory area's
/// bytes (`directory`, as read from the primary of its set).
pub fn for_plan(plan: &SyncPlan, directory: Option<&[u8]>) -> Result<Box<dyn CopyRule>, String> {
    Ok(match plan.index {
        IndexKind::Clover => Box::new(WriteOnceWords),
        IndexKind::InPlace => Box::new(QuietLastPass),
        IndexKind::Race => {
            let area = directory.ok_or("the RACE table's directory could not be read")?;
            let subtables = kvstore::race_replica_view::subtables(area)
                .map_err(|e| format!("reading the RACE table's directory: {e}"))?;
            Box::new(RaceSlots::new(plan.home, &subtables))
        }
    })
}

/// Applies `patches` to `copy` as the new member would (CASes only where the
/// word still holds what they expect): what tests and the pass's own check use.
pub fn apply(copy: &mut [u8], patches: &[Patch]) {
    for p in patches {
        match p {
            Patch::Write { offset, bytes } => {
                let at = *offset as usize;
                if let Some(dst) = copy.get_mut(at..at + bytes.len()) {
                    dst.copy_from_slice(bytes);
                }
            }
            Patch::Cas {
                offset,
                expect,
                swap,
            } => {
                let at = *offset as usize;
                if word(copy, at) == *expect
                    && let Some(dst) = copy.get_mut(at..at + 8)
                {
                    dst.copy_from_slice(&swap.to_le_bytes());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn isolated_words_are_cased_and_runs_written() {
        let primary: Vec<u8> = (0..64u8).collect();
        let mut copy = vec![0u8; 64];
        copy[8..16].copy_from_slice(&primary[8..16]);
        copy[24..64].copy_from_slice(&primary[24..64]);
        copy[40] = 0xff;
        let p = WriteOnceWords.patches(0, &primary, &copy);
        assert_eq!(p.len(), 3, "{p:?}");
        let run = WriteOnceWords.patches(0, &primary, &[0u8; 64]);
        assert!(matches!(&run[..], [Patch::Write { offset: 0, bytes }] if bytes.len() == 64));
        assert!(matches!(
            p[0],
            Patch::Cas {
                offset: 0,
                expect: 0,
                ..
            }
        ));
        assert!(matches!(p[1], Patch::Cas { offset: 16, .. }));
        assert!(matches!(p[2], Patch::Cas { offset: 40, expect, .. } if expect & 0xff == 0xff));
        apply(&mut copy, &p);
        assert_eq!(copy, primary);
        assert!(WriteOnceWords.patches(0, &primary, &copy).is_empty());
    }

    #[test]
    fn only_the_rules_of_words_written_many_times_pause_writes() {
        assert!(!WriteOnceWords.final_pass_paused());
        assert!(QuietLastPass.final_pass_paused());
    }

    #[test]
    fn race_copies_tentative_slots_as_empty_and_nothing_else_changes() {
        use kvstore::race_replica_view::SubtableExtent;
        // One subtable of one group (192 bytes) at offset 0x1000 on home 1, one on
        // another home at the same offset (ignored).
        let rule = RaceSlots::new(
            1,
            &[
                SubtableExtent {
                    memnode: 1,
                    offset: 0x1000,
                    len: 192,
                },
                SubtableExtent {
                    memnode: 2,
                    offset: 0x2000,
                    len: 192,
                },
            ],
        );
        let tentative = (1u64 << 48) | 0x40 | 2;
        let value = (1u64 << 48) | 0x80;
        // The range [0x1000 - 64, 0x1000 + 192 + 64): a word before, the group,
        // a word after; the tentative bit set in every word of the primary.
        let mut primary = vec![0u8; 320];
        for i in 0..40 {
            primary[i * 8..i * 8 + 8].copy_from_slice(&tentative.to_le_bytes());
        }
        primary[64 + 16..64 + 24].copy_from_slice(&value.to_le_bytes());
        let mut copy = vec![0u8; 320];
        let patches = rule.patches(0x1000 - 64, &primary, &copy);
        apply(&mut copy, &patches);
        for i in 0..40 {
            let off = 0x1000 - 64 + 8 * i as u64;
            let w = word(&copy, i * 8);
            let in_subtable = (0x1000..0x1000 + 192).contains(&off);
            let slot = in_subtable && !(off - 0x1000).is_multiple_of(64);
            if slot && off != 0x1000 + 16 {
                assert_eq!(w, 0, "slot word at {off:#x} must be empty on a backup");
            } else {
                assert_eq!(w, word(&primary, i * 8), "word at {off:#x} is copied");
            }
        }
        assert!(rule.patches(0x1000 - 64, &primary, &copy).is_empty());
        // Outside the home's subtables nothing is mapped.
        let other = rule.patches(0x2000, &primary, &vec![0u8; 320]);
        let mut c = vec![0u8; 320];
        apply(&mut c, &other);
        assert_eq!(c, primary);
    }

    proptest! {
        #[test]
        fn applying_a_pass_makes_the_copy_equal(
            primary in proptest::collection::vec(any::<u8>(), 0..256),
            flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..40),
        ) {
            let mut copy = primary.clone();
            for (at, v) in flips {
                if !copy.is_empty() {
                    let n = copy.len();
                    copy[at % n] = v;
                }
            }
            let p = WriteOnceWords.patches(0, &primary, &copy);
            apply(&mut copy, &p);
            prop_assert_eq!(&copy, &primary);
            prop_assert!(WriteOnceWords.patches(0, &primary, &copy).is_empty());
        }
    }
}
