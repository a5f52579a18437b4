//! The extendible directory of subtables and its split bookkeeping.
//!
//! The directory has `2^G` entries (`G` = global depth). Entry `i` names the
//! subtable holding keys whose suffix (`h1 mod 2^G`) is `i`. A subtable of local
//! depth `l ≤ G` is named by the `2^(G−l)` entries that agree on their low `l`
//! bits; its bucket headers carry those `l` bits as their suffix.
//!
//! Splitting the subtable behind entry `i` (local depth `l`): if `l = G` the
//! directory first doubles (entry `j + 2^G` copies entry `j`, `G` grows by one).
//! Then a new subtable takes the half of the old one's keys whose suffix bit `l` is
//! one: the entries with that bit set are re-pointed to it, and both subtables get
//! local depth `l + 1` (suffixes `s` and `s | 2^l`). Bucket positions inside a
//! subtable do not depend on the suffix, so moved slots keep their positions.
//!
//! This module is the pure data structure: the remote protocol (locking entries by
//! CAS, updating bucket headers before moving slots, copy then clear with undo)
//! drives it.
//!
//! Entry word (little-endian `u64`):
//!
//! ```text
//!  63   62          56 55          48 47                                0
//! +----+--------------+--------------+-----------------------------------+
//! | LK | reserved (0) | local depth  | subtable (RemotePtr, 48 bits)     |
//! +----+--------------+--------------+-----------------------------------+
//! ```
//!
//! `LK` ([`LOCKED`]) marks a split in progress on that entry.

#[cfg(test)]
use thiserror::Error;

use crate::error::LayoutError;
use crate::ptr::{PTR_MASK, RemotePtr};

#[cfg(test)]
use super::bucket::BucketHeader;
#[cfg(test)]
use super::hash::{KeyHash, depth_mask};

/// Largest global depth: 2^20 entries (an 8 MiB directory).
pub(crate) const MAX_GLOBAL_DEPTH: u8 = 20;
/// Bit 63 of an entry: a split holds this entry.
pub(crate) const LOCKED: u64 = 1 << 63;
/// Shift of the local depth in an entry.
pub(crate) const DEPTH_SHIFT: u32 = 48;
const RESERVED: u64 = 0x7f << 56;

/// A directory entry: the subtable and its local depth.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct DirEntry {
    /// Where the subtable lives.
    pub subtable: RemotePtr,
    /// The subtable's local depth.
    pub local_depth: u8,
    /// A split is in progress.
    pub locked: bool,
}

impl DirEntry {
    /// An unlocked entry.
    #[cfg(test)]
    pub fn new(subtable: RemotePtr, local_depth: u8) -> DirEntry {
        DirEntry {
            subtable,
            local_depth,
            locked: false,
        }
    }

    /// Pack into the entry word.
    pub(crate) fn pack(self) -> u64 {
        let lock = if self.locked { LOCKED } else { 0 };
        lock | (u64::from(self.local_depth) << DEPTH_SHIFT) | self.subtable.raw()
    }

    /// Unpack an entry word, strictly (reserved bits zero, depth ≤ [`MAX_GLOBAL_DEPTH`]).
    pub(crate) fn unpack(word: u64) -> Result<DirEntry, LayoutError> {
        if word & RESERVED != 0 {
            return Err(LayoutError::Reserved(format!(
                "directory entry {word:#018x} has reserved bits set"
            )));
        }
        // The cast keeps exactly the 8-bit depth field.
        let local_depth = (word >> DEPTH_SHIFT) as u8;
        if local_depth > MAX_GLOBAL_DEPTH {
            return Err(LayoutError::OutOfRange(format!(
                "local depth {local_depth} exceeds {MAX_GLOBAL_DEPTH}"
            )));
        }
        Ok(DirEntry {
            subtable: RemotePtr::from_raw_masked(word & PTR_MASK),
            local_depth,
            locked: word & LOCKED != 0,
        })
    }

    /// The compare/swap pair that locks this entry for a split.
    #[cfg(test)]
    pub fn lock_cas(self) -> (u64, u64) {
        let unlocked = DirEntry {
            locked: false,
            ..self
        };
        (unlocked.pack(), unlocked.pack() | LOCKED)
    }
}

/// Why a directory operation was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[cfg(test)]
pub enum DirectoryError {
    /// The directory cannot double again.
    #[error("global depth {0} is the maximum")]
    DepthLimit(u8),
    /// No such entry.
    #[error("entry {index} is outside a directory of {len} entries")]
    NoSuchEntry {
        /// The requested index.
        index: usize,
        /// Entries in the directory.
        len: usize,
    },
    /// The entry is locked by a split in progress.
    #[error("entry {0} is locked by a split in progress")]
    Locked(usize),
    /// The entries violate the extendible-hashing invariants.
    #[error("inconsistent directory: {0}")]
    Inconsistent(String),
    /// The directory bytes are malformed.
    #[error(transparent)]
    Layout(#[from] LayoutError),
}

/// What splitting one subtable changes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg(test)]
pub struct SplitPlan {
    /// The directory doubles first.
    pub doubles: bool,
    /// The subtable being split (it keeps the keys that stay).
    pub old_subtable: RemotePtr,
    /// Its local depth before the split.
    pub old_depth: u8,
    /// Bucket header of the old subtable after the split.
    pub stay_header: BucketHeader,
    /// Bucket header of the new subtable.
    pub move_header: BucketHeader,
    /// Entries (indices after any doubling) that keep pointing at the old subtable.
    pub stay: Vec<usize>,
    /// Entries re-pointed at the new subtable.
    pub moved: Vec<usize>,
}

#[cfg(test)]
impl SplitPlan {
    /// Whether a key in the old subtable moves to the new one (its suffix bit `old_depth` is set).
    pub fn moves(&self, hash: &KeyHash) -> bool {
        self.move_header.covers(hash)
    }

    /// The local depth of both subtables after the split.
    pub fn new_depth(&self) -> u8 {
        self.old_depth + 1
    }
}

/// An extendible directory (a client's cached copy, or the authoritative one in tests).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg(test)]
pub struct Directory {
    global_depth: u8,
    entries: Vec<DirEntry>,
}

#[cfg(test)]
fn suffix_u32(v: u64) -> u32 {
    // Callers pass values masked to at most MAX_GLOBAL_DEPTH (20) bits.
    u32::try_from(v).unwrap_or(u32::MAX)
}

#[cfg(test)]
impl Directory {
    /// A directory over `subtables` (a power-of-two count, at most `2^MAX_GLOBAL_DEPTH`),
    /// entry `i` naming subtable `i` at local depth = global depth.
    pub fn new(subtables: &[RemotePtr]) -> Result<Directory, DirectoryError> {
        let n = subtables.len();
        if !n.is_power_of_two() || n > 1 << MAX_GLOBAL_DEPTH {
            return Err(DirectoryError::Inconsistent(format!(
                "{n} initial subtables: need a power of two up to 2^{MAX_GLOBAL_DEPTH}"
            )));
        }
        let global_depth = u8::try_from(n.trailing_zeros()).unwrap_or(MAX_GLOBAL_DEPTH);
        Ok(Directory {
            global_depth,
            entries: subtables
                .iter()
                .map(|&p| DirEntry::new(p, global_depth))
                .collect(),
        })
    }

    /// The global depth.
    pub fn global_depth(&self) -> u8 {
        self.global_depth
    }

    /// All entries.
    pub fn entries(&self) -> &[DirEntry] {
        &self.entries
    }

    /// Entry `index`, if it exists.
    pub fn entry(&self, index: usize) -> Option<DirEntry> {
        self.entries.get(index).copied()
    }

    /// The entry index for a key.
    pub fn index_of(&self, hash: &KeyHash) -> usize {
        hash.subtable_index(self.global_depth)
    }

    /// The entry for a key.
    pub fn lookup(&self, hash: &KeyHash) -> DirEntry {
        let i = self.index_of(hash);
        // `i < 2^global_depth = len` by construction; fall back to entry 0 regardless.
        self.entries
            .get(i)
            .or(self.entries.first())
            .copied()
            .unwrap_or(DirEntry::new(RemotePtr::from_raw_masked(0), 0))
    }

    /// Replace entry `index` (a cache refresh after re-reading it remotely).
    pub fn set(&mut self, index: usize, entry: DirEntry) -> Result<(), DirectoryError> {
        let len = self.entries.len();
        let slot = self
            .entries
            .get_mut(index)
            .ok_or(DirectoryError::NoSuchEntry { index, len })?;
        *slot = entry;
        Ok(())
    }

    /// The indices of all entries naming the same subtable as entry `index`
    /// (those agreeing with it on the low `local_depth` bits).
    pub fn sharing(&self, index: usize) -> Result<Vec<usize>, DirectoryError> {
        let e = self.get(index)?;
        let depth = e.local_depth.min(self.global_depth);
        let base = index & depth_mask(depth) as usize;
        let step = 1usize << depth;
        Ok((base..self.entries.len()).step_by(step).collect())
    }

    fn get(&self, index: usize) -> Result<DirEntry, DirectoryError> {
        self.entry(index).ok_or(DirectoryError::NoSuchEntry {
            index,
            len: self.entries.len(),
        })
    }

    /// Double the directory: entry `j + 2^G` copies entry `j`.
    pub fn double(&mut self) -> Result<(), DirectoryError> {
        if self.global_depth >= MAX_GLOBAL_DEPTH {
            return Err(DirectoryError::DepthLimit(self.global_depth));
        }
        self.entries.extend_from_within(..);
        self.global_depth += 1;
        Ok(())
    }

    /// What splitting the subtable behind entry `index` would change.
    pub fn plan_split(&self, index: usize) -> Result<SplitPlan, DirectoryError> {
        let e = self.get(index)?;
        if e.locked {
            return Err(DirectoryError::Locked(index));
        }
        let l = e.local_depth;
        if l > self.global_depth {
            return Err(DirectoryError::Inconsistent(format!(
                "entry {index} has local depth {l} above global depth {}",
                self.global_depth
            )));
        }
        let doubles = l == self.global_depth;
        if doubles && self.global_depth >= MAX_GLOBAL_DEPTH {
            return Err(DirectoryError::DepthLimit(self.global_depth));
        }
        let len_after = if doubles {
            self.entries.len() * 2
        } else {
            self.entries.len()
        };
        let stay_suffix = index as u64 & depth_mask(l);
        let move_suffix = stay_suffix | (1 << l);
        let (moved, stay): (Vec<usize>, Vec<usize>) = (stay_suffix as usize..len_after)
            .step_by(1 << l)
            .partition(|&j| j as u64 & (1 << l) != 0);
        Ok(SplitPlan {
            doubles,
            old_subtable: e.subtable,
            old_depth: l,
            stay_header: BucketHeader::new(l + 1, suffix_u32(stay_suffix))?,
            move_header: BucketHeader::new(l + 1, suffix_u32(move_suffix))?,
            stay,
            moved,
        })
    }

    /// Split the subtable behind entry `index`, moving half its suffix space to
    /// `new_subtable`; returns the plan that was applied.
    pub fn split(
        &mut self,
        index: usize,
        new_subtable: RemotePtr,
    ) -> Result<SplitPlan, DirectoryError> {
        let plan = self.plan_split(index)?;
        if plan.doubles {
            self.double()?;
        }
        let depth = plan.new_depth();
        for &j in &plan.stay {
            self.set(j, DirEntry::new(plan.old_subtable, depth))?;
        }
        for &j in &plan.moved {
            self.set(j, DirEntry::new(new_subtable, depth))?;
        }
        Ok(plan)
    }

    /// Check the invariants: local depths within the global depth, and every group
    /// of entries agreeing on the low `l` bits names one subtable with depth `l`,
    /// distinct from every other group's.
    pub fn check(&self) -> Result<(), DirectoryError> {
        if self.entries.len() != 1 << self.global_depth {
            return Err(DirectoryError::Inconsistent(format!(
                "{} entries at global depth {}",
                self.entries.len(),
                self.global_depth
            )));
        }
        let mut owner = std::collections::HashMap::new();
        for (i, e) in self.entries.iter().enumerate() {
            if e.local_depth > self.global_depth {
                return Err(DirectoryError::Inconsistent(format!(
                    "entry {i}: local depth {} above global depth {}",
                    e.local_depth, self.global_depth
                )));
            }
            let class = (e.local_depth, i as u64 & depth_mask(e.local_depth));
            match owner.insert(e.subtable, class) {
                Some(prev) if prev != class => {
                    return Err(DirectoryError::Inconsistent(format!(
                        "subtable {:?} is named by entries of suffix classes {prev:?} and {class:?}",
                        e.subtable
                    )));
                }
                _ => {}
            }
            // Every entry of a suffix class must equal the class's lowest entry.
            let base = i & depth_mask(e.local_depth) as usize;
            if self.entries.get(base).map(|o| (o.subtable, o.local_depth))
                != Some((e.subtable, e.local_depth))
            {
                return Err(DirectoryError::Inconsistent(format!(
                    "entries {base} and {i} share suffix bits but differ"
                )));
            }
        }
        Ok(())
    }

    /// The entry words, little-endian, as stored remotely.
    pub fn encode(&self) -> Vec<u8> {
        self.entries
            .iter()
            .flat_map(|e| e.pack().to_le_bytes())
            .collect()
    }

    /// Parse `2^global_depth` entry words from `buf` and check the invariants.
    pub fn parse(global_depth: u8, buf: &[u8]) -> Result<Directory, DirectoryError> {
        if global_depth > MAX_GLOBAL_DEPTH {
            return Err(DirectoryError::DepthLimit(global_depth));
        }
        let n = 1usize << global_depth;
        let need = n * 8;
        let Some(bytes) = buf.get(..need) else {
            return Err(LayoutError::Truncated {
                need,
                have: buf.len(),
            }
            .into());
        };
        let entries = bytes
            .chunks_exact(8)
            .map(|c| {
                let mut w = [0u8; 8];
                w.copy_from_slice(c);
                DirEntry::unpack(u64::from_le_bytes(w))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let d = Directory {
            global_depth,
            entries,
        };
        d.check()?;
        Ok(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn st(n: u64) -> RemotePtr {
        RemotePtr::new(0, n * 4096).unwrap()
    }

    #[test]
    fn entry_bits() {
        let e = DirEntry::new(RemotePtr::new(3, 0x1000).unwrap(), 5);
        assert_eq!(e.pack(), (5 << 48) | (3 << 40) | 0x1000);
        assert_eq!(DirEntry::unpack(e.pack()), Ok(e));
        let (c, s) = e.lock_cas();
        assert_eq!(c, e.pack());
        assert_eq!(s, e.pack() | LOCKED);
        assert!(DirEntry::unpack(s).unwrap().locked);
        assert!(DirEntry::unpack(1 << 56).is_err());
        assert!(DirEntry::unpack(21 << 48).is_err());
    }

    #[test]
    fn split_without_doubling() {
        // Global depth 1 after one split of a depth-0 subtable, then split entry 0 (depth 1 = G: doubles).
        let mut d = Directory::new(&[st(0)]).unwrap();
        assert_eq!(d.global_depth(), 0);
        let p = d.split(0, st(1)).unwrap();
        assert!(p.doubles);
        assert_eq!((p.stay.clone(), p.moved.clone()), (vec![0], vec![1]));
        assert_eq!(d.global_depth(), 1);
        let p = d.split(1, st(2)).unwrap();
        assert!(p.doubles);
        assert_eq!(d.global_depth(), 2);
        // Entries 0 and 2 still share subtable 0 at depth 1: splitting it needs no doubling.
        assert_eq!(d.sharing(2).unwrap(), vec![0, 2]);
        let p = d.split(2, st(3)).unwrap();
        assert!(!p.doubles);
        assert_eq!((p.stay.clone(), p.moved.clone()), (vec![0], vec![2]));
        assert_eq!(p.stay_header, BucketHeader::new(2, 0).unwrap());
        assert_eq!(p.move_header, BucketHeader::new(2, 2).unwrap());
        assert!(p.moves(&KeyHash { h1: 0b110, h2: 0 }));
        assert!(!p.moves(&KeyHash { h1: 0b100, h2: 0 }));
        assert_eq!(
            d.entries().iter().map(|e| e.subtable).collect::<Vec<_>>(),
            vec![st(0), st(1), st(3), st(2)]
        );
        d.check().unwrap();
        let copy = Directory::parse(2, &d.encode()).unwrap();
        assert_eq!(copy, d);
    }

    #[test]
    fn refusals() {
        let mut d = Directory::new(&[st(0), st(1)]).unwrap();
        assert!(matches!(
            d.plan_split(2),
            Err(DirectoryError::NoSuchEntry { .. })
        ));
        let mut locked = d.entry(0).unwrap();
        locked.locked = true;
        d.set(0, locked).unwrap();
        assert_eq!(d.plan_split(0), Err(DirectoryError::Locked(0)));
        assert!(Directory::new(&[st(0), st(1), st(2)]).is_err());
        assert!(Directory::parse(1, &[0; 15]).is_err());
        // Two entries naming one subtable at full depth is inconsistent.
        let bad = Directory::new(&[st(0), st(0)]).unwrap();
        assert!(bad.check().is_err());
        let mut top = Directory::new(&[st(0)]).unwrap();
        for i in 0..MAX_GLOBAL_DEPTH {
            top.split(0, st(u64::from(i) + 1)).unwrap();
        }
        assert_eq!(top.global_depth(), MAX_GLOBAL_DEPTH);
        assert_eq!(
            top.plan_split(0),
            Err(DirectoryError::DepthLimit(MAX_GLOBAL_DEPTH))
        );
    }

    proptest! {
        /// Keys always live in the subtable their directory entry names, and that
        /// subtable's header covers them, across any sequence of splits.
        #[test]
        fn splits_keep_every_key_reachable(
            picks in proptest::collection::vec(any::<u16>(), 0..40),
            keys in proptest::collection::vec(any::<u64>(), 1..200),
        ) {
            let mut d = Directory::new(&[st(0)]).unwrap();
            let mut headers = HashMap::from([(st(0), BucketHeader::new(0, 0).unwrap())]);
            let mut contents: HashMap<RemotePtr, Vec<KeyHash>> = HashMap::new();
            let hashes: Vec<KeyHash> = keys.iter().map(|&k| KeyHash { h1: k, h2: !k }).collect();
            contents.insert(st(0), hashes.clone());
            for (n, pick) in picks.into_iter().enumerate() {
                let index = usize::from(pick) % d.entries().len();
                let new = st(n as u64 + 1);
                let Ok(plan) = d.split(index, new) else { continue };
                let old = contents.remove(&plan.old_subtable).unwrap_or_default();
                let (go, stay): (Vec<KeyHash>, Vec<KeyHash>) = old.into_iter().partition(|h| plan.moves(h));
                contents.insert(plan.old_subtable, stay);
                contents.insert(new, go);
                headers.insert(plan.old_subtable, plan.stay_header);
                headers.insert(new, plan.move_header);
                d.check().unwrap();
            }
            for h in &hashes {
                let e = d.lookup(h);
                prop_assert!(contents[&e.subtable].contains(h));
                prop_assert!(headers[&e.subtable].covers(h));
                prop_assert_eq!(headers[&e.subtable].local_depth(), e.local_depth);
            }
            prop_assert_eq!(Directory::parse(d.global_depth(), &d.encode()), Ok(d));
        }

        #[test]
        fn parse_never_panics(depth in 0u8..4, bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = Directory::parse(depth, &bytes);
        }
    }
}
