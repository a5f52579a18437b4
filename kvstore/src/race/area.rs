//! The remote layout of a RACE table's directory area, and its bootstrap word.
//!
//! The metadata service gives every `race` table a zeroed, table-owned area (64 KiB
//! by default; `race.directory` in the table's description). Clients lay it out as:
//!
//! ```text
//! offset            size          field
//!      0               8          state word (changed only by CAS)
//!      8               8          registry count (advanced by FAA)
//!     16              48          reserved, zero
//!     64        8 · 2^D           directory entries (changed only by CAS)
//! 64 + 8 · 2^D     the rest       registry: lease ids of the chunks subtables live in
//! ```
//!
//! State word (little-endian `u64`), by its top two bits:
//!
//! ```text
//! 00  zero: nobody has initialised the table
//! 01  initialising:  01 | reserved | attempt (16) @32 | client token (32) @0
//! 10  ready:         10 | depth D (6) @56 | log2 groups per subtable (6) @48 | initial subtable (48)
//! ```
//!
//! The first client CASes 0 → "initialising by me", writes an empty initial
//! subtable in memory it registered in the registry, and CASes its own
//! initialising word → ready (WRITE and CAS on one queue pair, so the subtable is
//! complete before it is published). A client that finds another's initialising
//! word unchanged for the split timeout takes over with a CAS to its own word (the
//! slow client's final CAS then fails; it only ever wrote its own memory).
//!
//! The directory is allocated at its full depth `D` from the start (4096 entries
//! in 64 KiB): entry `i` serves keys whose hash suffix is `i mod 2^D`, so the
//! directory never doubles, and a subtable of local depth `l` is named by the
//! `2^(D−l)` entries agreeing on their low `l` bits. An entry word of zero (with or
//! without the lock bit) names the initial subtable at local depth 0; any other
//! word is a [`DirEntry`]. Only the *primary* entry of a subtable (the one whose
//! index is below `2^l`, i.e. equal to its suffix) is exact about the local depth
//! and carries the split lock; the other entries are exact about the subtable.
//!
//! The registry lists the leases of subtable memory so every session using the
//! table renews them: the metadata service has no endpoint that allocates
//! table-owned chunks (see [`crate::race`]).

use crate::error::LayoutError;
use crate::ptr::{PTR_MASK, RemotePtr};

use super::directory::{DirEntry, LOCKED, MAX_GLOBAL_DEPTH};

/// Offset of the state word.
pub(crate) const STATE_AT: u64 = 0;
/// Offset of the registry count.
pub(crate) const REGISTRY_COUNT_AT: u64 = 8;
/// Offset of entry 0.
pub(crate) const ENTRIES_AT: u64 = 64;
/// Deepest directory a client lays out (4096 entries).
pub(crate) const MAX_DEPTH: u8 = 12;
/// Registry slots an area must keep at least.
pub(crate) const MIN_REGISTRY: u64 = 256;
/// Largest subtable, as log2 of its group count.
pub(crate) const MAX_LOG2_GROUPS: u8 = 24;

const TAG_SHIFT: u32 = 62;
const TAG_INIT: u64 = 1;
const TAG_READY: u64 = 2;

/// The decoded state word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    /// Nobody initialised the table yet.
    Empty,
    /// A client is initialising it.
    Initialising {
        /// The client's random token.
        token: u32,
        /// How many times initialisation was taken over.
        attempt: u16,
    },
    /// Ready to use.
    Ready(Ready),
}

/// What a ready table's state word says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ready {
    /// Directory depth: `2^depth` entries.
    pub depth: u8,
    /// Groups per subtable, as a power of two.
    pub log2_groups: u8,
    /// The initial subtable (named by zero entries).
    pub initial: RemotePtr,
}

impl Ready {
    /// Groups per subtable.
    pub(crate) fn groups(&self) -> u64 {
        1 << self.log2_groups
    }
}

impl State {
    /// Pack into the state word.
    pub(crate) fn pack(self) -> u64 {
        match self {
            State::Empty => 0,
            State::Initialising { token, attempt } => {
                (TAG_INIT << TAG_SHIFT) | (u64::from(attempt) << 32) | u64::from(token)
            }
            State::Ready(r) => {
                (TAG_READY << TAG_SHIFT)
                    | (u64::from(r.depth) << 56)
                    | (u64::from(r.log2_groups) << 48)
                    | r.initial.raw()
            }
        }
    }

    /// Unpack a state word strictly.
    pub(crate) fn unpack(word: u64) -> Result<State, LayoutError> {
        match word >> TAG_SHIFT {
            0 if word == 0 => Ok(State::Empty),
            TAG_INIT if word & (0x3fff << 48) == 0 => Ok(State::Initialising {
                // The casts keep exactly their fields.
                token: word as u32,
                attempt: (word >> 32) as u16,
            }),
            TAG_READY => {
                let depth = ((word >> 56) & 0x3f) as u8;
                let log2_groups = ((word >> 48) & 0xff) as u8;
                if depth > MAX_GLOBAL_DEPTH || log2_groups > MAX_LOG2_GROUPS {
                    return Err(LayoutError::OutOfRange(format!(
                        "state word {word:#018x}: depth {depth}, 2^{log2_groups} groups"
                    )));
                }
                Ok(State::Ready(Ready {
                    depth,
                    log2_groups,
                    initial: RemotePtr::from_raw_masked(word & PTR_MASK),
                }))
            }
            _ => Err(LayoutError::Reserved(format!(
                "directory state word {word:#018x}"
            ))),
        }
    }
}

/// The directory depth to lay out in an area of `len` bytes: the largest up to
/// [`MAX_DEPTH`] that leaves [`MIN_REGISTRY`] registry slots.
pub(crate) fn depth_for(len: u64) -> Result<u8, LayoutError> {
    (0..=MAX_DEPTH)
        .rev()
        .find(|d| ENTRIES_AT + 8 * (1u64 << d) + 8 * MIN_REGISTRY <= len)
        .ok_or_else(|| {
            LayoutError::OutOfRange(format!("a directory area of {len} bytes is too small"))
        })
}

/// Offset of entry `index`.
pub(crate) fn entry_at(index: u64) -> u64 {
    ENTRIES_AT + 8 * index
}

/// Offset of the registry in a directory of depth `depth`.
pub(crate) fn registry_at(depth: u8) -> u64 {
    ENTRIES_AT + 8 * (1u64 << depth)
}

/// Registry slots in an area of `len` bytes with a directory of depth `depth`.
pub(crate) fn registry_slots(len: u64, depth: u8) -> u64 {
    len.saturating_sub(registry_at(depth)) / 8
}

/// A decoded directory entry word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The subtable.
    pub subtable: RemotePtr,
    /// Its local depth (exact on primary entries).
    pub depth: u8,
    /// A split holds this (primary) entry.
    pub locked: bool,
}

impl Entry {
    /// Decode an entry word; zero (possibly locked) names `initial` at depth 0.
    pub(crate) fn unpack(word: u64, initial: RemotePtr) -> Result<Entry, LayoutError> {
        if word & !LOCKED == 0 {
            return Ok(Entry {
                subtable: initial,
                depth: 0,
                locked: word & LOCKED != 0,
            });
        }
        let e = DirEntry::unpack(word)?;
        Ok(Entry {
            subtable: e.subtable,
            depth: e.local_depth,
            locked: e.locked,
        })
    }

    /// The entry word (never zero for a non-initial subtable).
    pub(crate) fn pack(self, initial: RemotePtr) -> u64 {
        let lock = if self.locked { LOCKED } else { 0 };
        if self.subtable == initial && self.depth == 0 {
            return lock;
        }
        DirEntry {
            subtable: self.subtable,
            local_depth: self.depth,
            locked: self.locked,
        }
        .pack()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn state_words() {
        assert_eq!(State::unpack(0), Ok(State::Empty));
        let i = State::Initialising {
            token: 0xdead_beef,
            attempt: 3,
        };
        assert_eq!(i.pack(), (1 << 62) | (3 << 32) | 0xdead_beef);
        assert_eq!(State::unpack(i.pack()), Ok(i));
        let r = State::Ready(Ready {
            depth: 12,
            log2_groups: 8,
            initial: RemotePtr::new(2, 0x4000).unwrap(),
        });
        assert_eq!(State::unpack(r.pack()), Ok(r));
        assert!(State::unpack(3 << 62).is_err());
        assert!(State::unpack(1).is_err());
        assert!(State::unpack((2 << 62) | (30 << 56)).is_err());
    }

    #[test]
    fn area_geometry() {
        assert_eq!(depth_for(64 << 10), Ok(12));
        assert_eq!(registry_at(12), 64 + 32768);
        assert_eq!(registry_slots(64 << 10, 12), (65536 - 32832) / 8);
        assert_eq!(depth_for(4096), Ok(7));
        assert!(depth_for(1024).is_err());
        assert_eq!(entry_at(3), 88);
    }

    #[test]
    fn entries() {
        let init = RemotePtr::new(1, 4096).unwrap();
        let e = Entry::unpack(0, init).unwrap();
        assert_eq!((e.subtable, e.depth, e.locked), (init, 0, false));
        assert!(Entry::unpack(LOCKED, init).unwrap().locked);
        assert_eq!(e.pack(init), 0);
        let other = Entry {
            subtable: RemotePtr::new(1, 8192).unwrap(),
            depth: 3,
            locked: true,
        };
        assert_eq!(Entry::unpack(other.pack(init), init), Ok(other));
        let deeper = Entry { depth: 1, ..e };
        assert_ne!(deeper.pack(init), 0);
        assert_eq!(Entry::unpack(deeper.pack(init), init), Ok(deeper));
    }

    proptest! {
        #[test]
        fn unpack_never_panics(w: u64) {
            if let Ok(s) = State::unpack(w) {
                prop_assert_eq!(s.pack(), w);
            }
            let _ = Entry::unpack(w, RemotePtr::new(0, 64).unwrap());
        }
    }
}
