//! What the copies of a RACE table's memory hold, for whoever copies a replica
//! set member by member (the metadata service's re-replication).
//!
//! Every copy of a RACE table's memory holds the same bytes except for one kind
//! of word: a slot an insert has taken but not yet confirmed is marked
//! *tentative* on the primary alone, while the backups keep the slot empty (see
//! `docs/replication.md`). A copy made for a new backup must therefore hold an
//! empty slot wherever the primary holds a tentative one, and nothing else may
//! be changed — the tentative bit is an ordinary bit in a KV block or a bucket
//! header. [`subtables`] finds where the slot words are, from the directory area;
//! [`is_slot_word`] and [`as_backups_hold`] say which words a copier maps and how.

use super::area::{ENTRIES_AT, Entry, State};
use super::bucket::{BUCKET_BYTES, GROUP_BYTES};
use super::slot::{EMPTY, is_tentative};
use crate::error::{KvError, LayoutError};

/// One subtable: its home memnode, its offset from that memnode's region base
/// and its length in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct SubtableExtent {
    /// The home memnode named in the directory entry.
    pub memnode: u8,
    /// Offset of the first bucket group from the region base.
    pub offset: u64,
    /// Bytes (groups × 192).
    pub len: u64,
}

fn word_at(area: &[u8], at: u64) -> Result<u64, LayoutError> {
    let start = usize::try_from(at).map_err(|_| LayoutError::BadLength(format!("{at}")))?;
    let bytes = area.get(start..start + 8).ok_or(LayoutError::Truncated {
        need: start + 8,
        have: area.len(),
    })?;
    let mut w = [0u8; 8];
    w.copy_from_slice(bytes);
    Ok(u64::from_le_bytes(w))
}

/// The subtables a RACE directory area (the bytes of the whole area, as read
/// from a member) names, each once, sorted. An area nobody initialised yet names
/// none.
pub fn subtables(area: &[u8]) -> Result<Vec<SubtableExtent>, KvError> {
    let ready = match State::unpack(word_at(area, 0)?)? {
        State::Ready(r) => r,
        State::Empty | State::Initialising { .. } => return Ok(Vec::new()),
    };
    let len = ready.groups() * GROUP_BYTES;
    let mut out = vec![SubtableExtent {
        memnode: ready.initial.memnode(),
        offset: ready.initial.offset(),
        len,
    }];
    for i in 0..(1u64 << ready.depth) {
        let e = Entry::unpack(word_at(area, ENTRIES_AT + 8 * i)?, ready.initial)?;
        out.push(SubtableExtent {
            memnode: e.subtable.memnode(),
            offset: e.subtable.offset(),
            len,
        });
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Whether the word at `offset` bytes into a subtable is a slot (every bucket
/// starts with its header word, then holds slots).
pub fn is_slot_word(offset: u64) -> bool {
    offset.is_multiple_of(8) && !offset.is_multiple_of(BUCKET_BYTES as u64)
}

/// What the backups hold for a slot word the primary holds: an unconfirmed
/// (tentative) slot is empty on the backups, any other word the same.
pub fn as_backups_hold(slot_word: u64) -> u64 {
    if is_tentative(slot_word) {
        EMPTY
    } else {
        slot_word
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ptr::RemotePtr;
    use crate::race::area::{Ready, entry_at};
    use crate::race::directory::DirEntry;
    use crate::race::slot::{FROZEN, Slot, TENTATIVE};

    fn area(depth: u8, entries: &[(u64, u64)]) -> Vec<u8> {
        let initial = RemotePtr::from_parts_masked(1, 0x4000);
        let mut a = vec![0u8; 64 << 10];
        let ready = State::Ready(Ready {
            depth,
            log2_groups: 2,
            initial,
        });
        a[..8].copy_from_slice(&ready.pack().to_le_bytes());
        for &(i, w) in entries {
            let at = entry_at(i) as usize;
            a[at..at + 8].copy_from_slice(&w.to_le_bytes());
        }
        a
    }

    #[test]
    fn a_fresh_area_names_no_subtable_and_a_ready_one_names_each_once() {
        assert!(subtables(&[0u8; 4096]).expect("parses").is_empty());
        let split = DirEntry::new(RemotePtr::from_parts_masked(2, 0x8000), 1).pack();
        let a = area(2, &[(1, split), (3, split)]);
        let s = subtables(&a).expect("parses");
        assert_eq!(
            s,
            vec![
                SubtableExtent {
                    memnode: 1,
                    offset: 0x4000,
                    len: 4 * 192
                },
                SubtableExtent {
                    memnode: 2,
                    offset: 0x8000,
                    len: 4 * 192
                },
            ]
        );
        // A short area is an error, not a guess.
        assert!(subtables(&a[..80]).is_err());
    }

    #[test]
    fn only_tentative_slots_differ_between_primary_and_backups() {
        assert!(!is_slot_word(0) && !is_slot_word(64) && !is_slot_word(130));
        assert!(is_slot_word(8) && is_slot_word(56) && is_slot_word(72));
        let v = Slot::new(7, 64, RemotePtr::from_parts_masked(1, 0x1000), 3)
            .expect("slot")
            .pack();
        assert_eq!(as_backups_hold(v), v);
        assert_eq!(as_backups_hold(v | TENTATIVE), EMPTY);
        assert_eq!(as_backups_hold(FROZEN), FROZEN);
        assert_eq!(as_backups_hold(EMPTY), EMPTY);
    }
}
