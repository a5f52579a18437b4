//! The hashes of a key: two independent 64-bit hashes and what is derived from them.
//!
//! Both are [XXH64](crate::xxh64) of the key with fixed seeds ([`SEED_1`],
//! [`SEED_2`]), so every client in every process agrees. Bit use:
//!
//! - `h1` bits 0–31: the suffix; its low `depth` bits select the directory entry
//!   (and so the subtable) and must match the bucket header's suffix;
//! - `h1` bits 32–63: the first bucket choice within the subtable;
//! - `h2` bits 32–63: the second bucket choice within the subtable;
//! - `h2` bits 0–7: the 8-bit fingerprint stored in the slot.
//!
//! Bucket choices use bits the directory never looks at, so when a subtable
//! splits, every key keeps its bucket positions and moves between subtables only
//! according to the next suffix bit.

use crate::xxh64::xxh64;

/// Seed of the first hash (ASCII "kvstore1").
pub(crate) const SEED_1: u64 = u64::from_le_bytes(*b"kvstore1");
/// Seed of the second hash (ASCII "kvstore2").
pub(crate) const SEED_2: u64 = u64::from_le_bytes(*b"kvstore2");
/// Suffix bits available for directory depths.
pub(crate) const SUFFIX_BITS: u8 = 32;

/// The two hashes of a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct KeyHash {
    /// First hash: suffix and first bucket choice.
    pub h1: u64,
    /// Second hash: second bucket choice and fingerprint.
    pub h2: u64,
}

/// Mask of the low `depth` bits (depth capped at [`SUFFIX_BITS`]).
pub(crate) fn depth_mask(depth: u8) -> u64 {
    let depth = depth.min(SUFFIX_BITS);
    (1u64 << depth) - 1
}

impl KeyHash {
    /// Hash a key.
    pub(crate) fn of(key: &[u8]) -> KeyHash {
        KeyHash {
            h1: xxh64(key, SEED_1),
            h2: xxh64(key, SEED_2),
        }
    }

    /// The 8-bit fingerprint stored in the key's slot.
    pub(crate) fn fingerprint(&self) -> u8 {
        self.h2.to_le_bytes()[0]
    }

    /// The low `depth` bits of the suffix (depth capped at [`SUFFIX_BITS`]).
    pub(crate) fn suffix(&self, depth: u8) -> u64 {
        self.h1 & depth_mask(depth)
    }

    /// The directory entry (subtable index) under a directory of global depth `global_depth`.
    pub(crate) fn subtable_index(&self, global_depth: u8) -> usize {
        // At most 32 bits, which fits usize on every supported target.
        self.suffix(global_depth) as usize
    }

    /// The two candidate main buckets among `main_buckets` (they may coincide); a
    /// subtable asks with its own count (`Subtable::candidates` in the bucket module).
    pub(crate) fn bucket_choices(&self, main_buckets: u64) -> [u64; 2] {
        let n = main_buckets.max(1);
        [(self.h1 >> 32) % n, (self.h2 >> 32) % n]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pinned outputs: changing them relocates every key of every existing table.
    #[test]
    fn hashes_are_pinned() {
        assert_eq!(SEED_1, 0x3165_726f_7473_766b);
        let h = KeyHash::of(b"user:1001");
        assert_eq!(h.h1, crate::xxh64::xxh64(b"user:1001", SEED_1));
        assert_eq!(h.h1, 0x16c1_31b4_2b72_1ea3);
        assert_eq!(h.h2, 0x7404_02f0_6882_3d14);
        assert_eq!(h.fingerprint(), 0x14);
        assert_eq!(h.suffix(4), 0x3);
        assert_eq!(h.subtable_index(8), 0xa3);
        assert_eq!(h.suffix(0), 0);
        assert_eq!(h.suffix(200), h.h1 & 0xffff_ffff);
    }

    #[test]
    fn the_two_hashes_are_independent() {
        // Agreement of the low bit should be about one half.
        let agree = (0..10_000u32)
            .filter(|i| {
                let h = KeyHash::of(&i.to_be_bytes());
                (h.h1 ^ h.h2) & 1 == 0
            })
            .count();
        assert!((4_700..5_300).contains(&agree), "{agree}");
    }
}
