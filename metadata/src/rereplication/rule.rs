//! How one pass of a copy turns what the primary and the new member hold into
//! writes to the new member, per index: the hook other indexes supply their own
//! rule through ([`CopyRule`], chosen by [`for_index`]).
//!
//! Clover's rule ([`WriteOnceWords`]): every difference is written, as 8-byte words
//! (extents are 64-byte aligned). An isolated differing word — what a header link
//! or a shortcut looks like, words writers CAS concurrently — is set with
//! CAS(value seen on the new member → value on the primary), so a writer's CAS that
//! lands in between is not overwritten blindly; longer runs (node bytes, which a
//! writer WRITEs once before linking them) are written with one WRITE. Why a pass
//! that writes nothing proves the copy complete is argued in `docs/replication.md`.

use crate::api::IndexKind;

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
    /// The patches that make `copy` (the new member's bytes) equal to `primary`
    /// (the primary's bytes of the same range, read just before).
    fn patches(&self, primary: &[u8], copy: &[u8]) -> Vec<Patch>;
}

/// Clover's rule: words are written once on the primary (node bytes before they
/// are linked, a header's link by one CAS), so copying every difference until a
/// pass finds none converges (`docs/replication.md`).
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteOnceWords;

fn word(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    if let Some(s) = b.get(at..at + 8) {
        w.copy_from_slice(s);
    }
    u64::from_le_bytes(w)
}

impl CopyRule for WriteOnceWords {
    fn name(&self) -> &'static str {
        "write-once-words"
    }

    fn patches(&self, primary: &[u8], copy: &[u8]) -> Vec<Patch> {
        let len = primary.len().min(copy.len());
        let words = len / 8;
        let differs = |i: usize| primary[i * 8..i * 8 + 8] != copy[i * 8..i * 8 + 8];
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
                    swap: word(primary, a),
                });
            } else {
                out.push(Patch::Write {
                    offset: a as u64,
                    bytes: primary[a..b].to_vec(),
                });
            }
        }
        // A tail shorter than a word (never for 64-byte extents) is written.
        let tail = words * 8;
        if tail < len && primary[tail..len] != copy[tail..len] {
            out.push(Patch::Write {
                offset: tail as u64,
                bytes: primary[tail..len].to_vec(),
            });
        }
        out
    }
}

/// The copy rule of `index`, or `None` when its tables cannot be re-replicated
/// yet (their replica sets stay smaller after a failure).
pub fn for_index(index: IndexKind) -> Option<&'static dyn CopyRule> {
    match index {
        IndexKind::Clover => Some(&WriteOnceWords),
        _ => None,
    }
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
        let p = WriteOnceWords.patches(&primary, &copy);
        assert_eq!(p.len(), 3, "{p:?}");
        let run = WriteOnceWords.patches(&primary, &[0u8; 64]);
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
        assert!(WriteOnceWords.patches(&primary, &copy).is_empty());
    }

    #[test]
    fn only_clover_has_a_rule_yet() {
        assert!(for_index(IndexKind::Clover).is_some());
        assert!(for_index(IndexKind::Race).is_none());
        assert!(for_index(IndexKind::InPlace).is_none());
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
            let p = WriteOnceWords.patches(&primary, &copy);
            apply(&mut copy, &p);
            prop_assert_eq!(&copy, &primary);
            prop_assert!(WriteOnceWords.patches(&primary, &copy).is_empty());
        }
    }
}
