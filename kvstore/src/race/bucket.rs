//! RACE buckets, bucket groups and where they sit in a subtable.
//!
//! A bucket is 64 bytes: one header word, then 7 slot words. Buckets come in
//! groups of three, `main₀ | overflow | main₁` (192 bytes), and a subtable is an
//! array of groups. Main bucket `b` lives in group `b / 2`; both main buckets of a
//! group share the middle overflow bucket, so the 128 contiguous bytes
//! `main₀ + overflow` (even `b`) or `overflow + main₁` (odd `b`) — a *combined
//! bucket* — come back from one READ.
//!
//! Bucket header word (little-endian `u64`):
//!
//! ```text
//!  63               41  40  39                        8 7            0
//! +-------------------+----+---------------------------+--------------+
//! | reserved (zero)   | MV | suffix (32 bits)          | local depth  |
//! +-------------------+----+---------------------------+--------------+
//! ```
//!
//! `MV` ([`MOVING`]) marks the buckets of a subtable that a split is still filling
//! from its parent: a key it covers may still live in the parent.
//!
//! Every bucket of a subtable carries the subtable's local depth `l` and the
//! suffix its directory entries share (`suffix < 2^l`). A client that reached the
//! bucket through a cached directory checks `h1 mod 2^l == suffix`; a mismatch
//! means the cache is stale (the subtable split).

use crate::error::LayoutError;
use crate::ptr::RemotePtr;

use super::hash::{KeyHash, SUFFIX_BITS, depth_mask};
use super::slot::EMPTY;
#[cfg(test)]
use super::slot::Slot;

/// The bucket layout, shared with the memory node's RPC workers ([`dmkv_api::race_layout`]).
pub(crate) use dmkv_api::race_layout::{
    BUCKET_BYTES, COMBINED_BYTES, HEADER_MOVING as MOVING, SLOTS_PER_BUCKET,
};

/// Bytes per group of three buckets.
pub(crate) const GROUP_BYTES: u64 = 3 * BUCKET_BYTES as u64;
/// Largest local depth (the suffix has 32 bits).
pub(crate) const MAX_LOCAL_DEPTH: u8 = SUFFIX_BITS;
/// Largest subtable: 2^24 groups (3 GiB).
pub(crate) const MAX_GROUPS: u64 = 1 << 24;

use dmkv_api::race_layout::HEADER_SUFFIX_SHIFT as SUFFIX_SHIFT;

/// The header word of a bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct BucketHeader {
    local_depth: u8,
    suffix: u32,
    moving: bool,
}

impl BucketHeader {
    /// A header; fails unless `local_depth ≤ 32` and `suffix < 2^local_depth`.
    pub(crate) fn new(local_depth: u8, suffix: u32) -> Result<BucketHeader, LayoutError> {
        if local_depth > MAX_LOCAL_DEPTH {
            return Err(LayoutError::OutOfRange(format!(
                "local depth {local_depth} exceeds {MAX_LOCAL_DEPTH}"
            )));
        }
        if u64::from(suffix) & !depth_mask(local_depth) != 0 {
            return Err(LayoutError::OutOfRange(format!(
                "suffix {suffix:#x} has bits above local depth {local_depth}"
            )));
        }
        Ok(BucketHeader {
            local_depth,
            suffix,
            moving: false,
        })
    }

    /// The same header with the [`MOVING`] flag set or cleared.
    pub(crate) fn with_moving(self, moving: bool) -> BucketHeader {
        BucketHeader { moving, ..self }
    }

    /// Whether a split is still filling this subtable from its parent.
    pub(crate) fn moving(self) -> bool {
        self.moving
    }

    /// The local depth.
    pub(crate) fn local_depth(self) -> u8 {
        self.local_depth
    }

    /// The suffix shared by the subtable's keys.
    pub(crate) fn suffix(self) -> u32 {
        self.suffix
    }

    /// Pack into the header word.
    pub(crate) fn pack(self) -> u64 {
        let moving = if self.moving { MOVING } else { 0 };
        u64::from(self.local_depth) | (u64::from(self.suffix) << SUFFIX_SHIFT) | moving
    }

    /// Unpack a header word, strictly (reserved bits zero, suffix within depth).
    pub(crate) fn unpack(word: u64) -> Result<BucketHeader, LayoutError> {
        if word >> 41 != 0 {
            return Err(LayoutError::Reserved(format!(
                "bucket header {word:#018x} has reserved bits set"
            )));
        }
        // Both casts keep exactly their fields (8 and 32 bits).
        Ok(
            BucketHeader::new(word as u8, (word >> SUFFIX_SHIFT) as u32)?
                .with_moving(word & MOVING != 0),
        )
    }

    /// Whether a key with this hash belongs in a subtable with this header.
    pub(crate) fn covers(self, hash: &KeyHash) -> bool {
        hash.suffix(self.local_depth) == u64::from(self.suffix)
    }
}

/// A parsed bucket: header and raw slot words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bucket {
    /// The header.
    pub header: BucketHeader,
    /// The slot words, as read ([`EMPTY`] for free slots).
    pub slots: [u64; SLOTS_PER_BUCKET],
}

fn words<const N: usize>(buf: &[u8]) -> Result<[u64; N], LayoutError> {
    let mut out = [0u64; N];
    let need = N * 8;
    if buf.len() < need {
        return Err(LayoutError::Truncated {
            need,
            have: buf.len(),
        });
    }
    for (w, chunk) in out.iter_mut().zip(buf.chunks_exact(8)) {
        let mut b = [0u8; 8];
        b.copy_from_slice(chunk);
        *w = u64::from_le_bytes(b);
    }
    Ok(out)
}

impl Bucket {
    /// An empty bucket with this header.
    pub(crate) fn empty(header: BucketHeader) -> Bucket {
        Bucket {
            header,
            slots: [EMPTY; SLOTS_PER_BUCKET],
        }
    }

    /// Parse the first 64 bytes of `buf`. Slot words are kept raw: decode each with
    /// [`Slot::unpack`], which rejects words no client writes.
    pub(crate) fn parse(buf: &[u8]) -> Result<Bucket, LayoutError> {
        let w: [u64; 1 + SLOTS_PER_BUCKET] = words(buf)?;
        let [header, slots @ ..] = w;
        Ok(Bucket {
            header: BucketHeader::unpack(header)?,
            slots,
        })
    }

    /// The 64 bytes of this bucket.
    pub(crate) fn encode(&self) -> [u8; BUCKET_BYTES] {
        let mut out = [0u8; BUCKET_BYTES];
        let all = std::iter::once(self.header.pack()).chain(self.slots);
        for (chunk, w) in out.chunks_exact_mut(8).zip(all) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        out
    }

    /// Number of empty slots.
    pub(crate) fn free_slots(&self) -> usize {
        self.slots.iter().filter(|&&w| w == EMPTY).count()
    }
}

/// Which bucket of a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg(test)]
pub enum GroupPos {
    /// The first main bucket (even bucket numbers).
    Main0,
    /// The shared overflow bucket.
    Overflow,
    /// The second main bucket (odd bucket numbers).
    Main1,
}

/// Where a byte offset falls inside a subtable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg(test)]
pub struct Location {
    /// The group.
    pub group: u64,
    /// The bucket within the group.
    pub pos: GroupPos,
    /// The slot, or `None` for the bucket header word.
    pub slot: Option<usize>,
}

/// The geometry of a subtable: how many bucket groups it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Subtable {
    groups: u64,
}

impl Subtable {
    /// A subtable of `groups` groups (1 ..= [`MAX_GROUPS`]).
    pub(crate) fn new(groups: u64) -> Result<Subtable, LayoutError> {
        if groups == 0 || groups > MAX_GROUPS {
            return Err(LayoutError::OutOfRange(format!(
                "{groups} bucket groups (1..={MAX_GROUPS})"
            )));
        }
        Ok(Subtable { groups })
    }

    /// Number of groups.
    pub(crate) fn groups(self) -> u64 {
        self.groups
    }

    /// The two candidate main buckets of `hash` in this subtable (they may coincide).
    pub(crate) fn candidates(self, hash: &KeyHash) -> [u64; 2] {
        hash.bucket_choices(self.main_buckets())
    }

    /// Number of main buckets (two per group).
    pub(crate) fn main_buckets(self) -> u64 {
        2 * self.groups
    }

    /// Size in bytes.
    pub(crate) fn bytes(self) -> u64 {
        self.groups * GROUP_BYTES
    }

    /// Slots in the subtable (main and overflow buckets).
    #[cfg(test)]
    pub fn capacity(self) -> u64 {
        3 * self.groups * SLOTS_PER_BUCKET as u64
    }

    /// The group holding main bucket `bucket`.
    pub(crate) fn group_of(bucket: u64) -> u64 {
        bucket / 2
    }

    /// Offset of main bucket `bucket`.
    pub(crate) fn main_offset(bucket: u64) -> u64 {
        Subtable::group_of(bucket) * GROUP_BYTES + (bucket % 2) * 2 * BUCKET_BYTES as u64
    }

    /// Offset of the overflow bucket shared by main bucket `bucket`.
    pub(crate) fn overflow_offset(bucket: u64) -> u64 {
        Subtable::group_of(bucket) * GROUP_BYTES + BUCKET_BYTES as u64
    }

    /// Offset of the 128-byte combined bucket of main bucket `bucket`.
    pub(crate) fn combined_offset(bucket: u64) -> u64 {
        Subtable::group_of(bucket) * GROUP_BYTES + (bucket % 2) * BUCKET_BYTES as u64
    }

    /// Offset of slot `slot` (0..7) of the bucket at `bucket_offset`.
    pub(crate) fn slot_offset(bucket_offset: u64, slot: usize) -> u64 {
        bucket_offset + 8 + 8 * slot as u64
    }

    /// Which group, bucket and slot (or header) a byte offset names; `None` when it
    /// is outside the subtable or not 8-byte aligned.
    #[cfg(test)]
    pub fn locate(self, offset: u64) -> Option<Location> {
        if offset >= self.bytes() || !offset.is_multiple_of(8) {
            return None;
        }
        let group = offset / GROUP_BYTES;
        let within = offset % GROUP_BYTES;
        let pos = match within / BUCKET_BYTES as u64 {
            0 => GroupPos::Main0,
            1 => GroupPos::Overflow,
            _ => GroupPos::Main1,
        };
        let word = (within % BUCKET_BYTES as u64) / 8;
        let slot = word.checked_sub(1).map(|s| s as usize);
        Some(Location { group, pos, slot })
    }
}

/// A slot in a bucket that was read: its address (for the CAS) and its word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct SlotRef {
    /// Address of the slot word.
    pub addr: RemotePtr,
    /// Whether it is in the main (`false`) or the overflow (`true`) bucket.
    pub overflow: bool,
    /// Slot index within its bucket (0..7).
    pub index: usize,
    /// The word as read.
    pub word: u64,
}

fn slot_refs(bucket: &Bucket, at: RemotePtr, overflow: bool) -> impl Iterator<Item = SlotRef> + '_ {
    bucket
        .slots
        .iter()
        .enumerate()
        .map(move |(index, &word)| SlotRef {
            // In range: `CombinedBucket::parse` checked that the whole combined bucket is addressable.
            addr: at
                .checked_add(Subtable::slot_offset(0, index))
                .unwrap_or(at),
            overflow,
            index,
            word,
        })
}

/// A main bucket and its overflow bucket, from one 128-byte READ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CombinedBucket {
    /// The main bucket.
    pub main: Bucket,
    /// The overflow bucket.
    pub overflow: Bucket,
    /// Address of the main bucket.
    pub main_at: RemotePtr,
    /// Address of the overflow bucket.
    pub overflow_at: RemotePtr,
}

impl CombinedBucket {
    /// Parse the 128 bytes read at [`Subtable::combined_offset`]`(bucket)` of the
    /// subtable at `base`.
    pub(crate) fn parse(
        buf: &[u8],
        base: RemotePtr,
        subtable: Subtable,
        bucket: u64,
    ) -> Result<CombinedBucket, LayoutError> {
        if bucket >= subtable.main_buckets() {
            return Err(LayoutError::OutOfRange(format!(
                "bucket {bucket} of a subtable with {} main buckets",
                subtable.main_buckets()
            )));
        }
        if buf.len() < COMBINED_BYTES {
            return Err(LayoutError::Truncated {
                need: COMBINED_BYTES,
                have: buf.len(),
            });
        }
        let (first, second) = buf.split_at(BUCKET_BYTES);
        let (main, overflow) = if bucket.is_multiple_of(2) {
            (first, second)
        } else {
            (second, first)
        };
        let at = |offset: u64| {
            base.checked_add(offset).ok_or_else(|| {
                LayoutError::OutOfRange(format!("subtable at {base:?} + {offset:#x}"))
            })
        };
        // The end of the combined bucket must be addressable too, so every slot address is.
        at(Subtable::combined_offset(bucket) + COMBINED_BYTES as u64)?;
        Ok(CombinedBucket {
            main: Bucket::parse(main)?,
            overflow: Bucket::parse(overflow)?,
            main_at: at(Subtable::main_offset(bucket))?,
            overflow_at: at(Subtable::overflow_offset(bucket))?,
        })
    }

    /// All 14 slots, main bucket first.
    pub(crate) fn slots(&self) -> impl Iterator<Item = SlotRef> + '_ {
        slot_refs(&self.main, self.main_at, false).chain(slot_refs(
            &self.overflow,
            self.overflow_at,
            true,
        ))
    }

    /// Occupied slots whose fingerprint is `fp` (words that fail to decode are skipped).
    #[cfg(test)]
    pub fn matching(&self, fp: u8) -> Vec<(SlotRef, Slot)> {
        self.slots()
            .filter_map(|r| match Slot::unpack(r.word) {
                Ok(Some(s)) if s.fingerprint() == fp => Some((r, s)),
                _ => None,
            })
            .collect()
    }

    /// The first empty slot, main bucket first.
    pub(crate) fn first_empty(&self) -> Option<SlotRef> {
        self.slots().find(|r| r.word == EMPTY)
    }

    /// Number of empty slots in both buckets.
    pub(crate) fn free_slots(&self) -> usize {
        self.main.free_slots() + self.overflow.free_slots()
    }

    /// Whether the main bucket's header says `hash` belongs here (the stale-cache check).
    #[cfg(test)]
    pub fn covers(&self, hash: &KeyHash) -> bool {
        self.main.header.covers(hash)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ptr(off: u64) -> RemotePtr {
        RemotePtr::new(1, off).unwrap()
    }

    #[test]
    fn header_bits() {
        let h = BucketHeader::new(5, 0b10110).unwrap();
        assert_eq!(h.pack(), 5 | (0b10110 << 8));
        assert_eq!(BucketHeader::unpack(h.pack()), Ok(h));
        assert!(BucketHeader::new(2, 4).is_err());
        assert!(BucketHeader::new(33, 0).is_err());
        assert!(BucketHeader::unpack(1 << 41).is_err());
        let m = h.with_moving(true);
        assert_eq!(m.pack(), h.pack() | MOVING);
        assert_eq!(BucketHeader::unpack(m.pack()), Ok(m));
        assert!(m.moving() && m.covers(&KeyHash { h1: 0b10110, h2: 0 }));
        assert!(
            BucketHeader::unpack(1 | (2 << 8)).is_err(),
            "suffix beyond depth"
        );
        let full = BucketHeader::new(32, u32::MAX).unwrap();
        assert_eq!(BucketHeader::unpack(full.pack()), Ok(full));
    }

    #[test]
    fn covers_checks_the_suffix() {
        let hash = KeyHash {
            h1: 0b1011_0110,
            h2: 0,
        };
        assert!(BucketHeader::new(0, 0).unwrap().covers(&hash));
        assert!(BucketHeader::new(3, 0b110).unwrap().covers(&hash));
        assert!(!BucketHeader::new(3, 0b010).unwrap().covers(&hash));
        assert!(BucketHeader::new(4, 0b0110).unwrap().covers(&hash));
    }

    #[test]
    fn group_arithmetic() {
        assert_eq!(Subtable::main_offset(0), 0);
        assert_eq!(Subtable::overflow_offset(0), 64);
        assert_eq!(Subtable::main_offset(1), 128);
        assert_eq!(Subtable::overflow_offset(1), 64);
        assert_eq!(Subtable::combined_offset(0), 0);
        assert_eq!(Subtable::combined_offset(1), 64);
        assert_eq!(Subtable::main_offset(6), 3 * 192);
        assert_eq!(Subtable::combined_offset(7), 3 * 192 + 64);
        assert_eq!(Subtable::slot_offset(128, 0), 136);
        assert_eq!(Subtable::slot_offset(128, 6), 184);
        let st = Subtable::new(4).unwrap();
        assert_eq!(st.bytes(), 768);
        assert_eq!(st.capacity(), 84);
        assert!(Subtable::new(0).is_err());
    }

    #[test]
    fn locate_inverts_the_offsets() {
        let st = Subtable::new(8).unwrap();
        for bucket in 0..st.main_buckets() {
            let pos = if bucket % 2 == 0 {
                GroupPos::Main0
            } else {
                GroupPos::Main1
            };
            for slot in 0..SLOTS_PER_BUCKET {
                let loc = st.locate(Subtable::slot_offset(Subtable::main_offset(bucket), slot));
                assert_eq!(
                    loc,
                    Some(Location {
                        group: bucket / 2,
                        pos,
                        slot: Some(slot)
                    })
                );
                let loc = st.locate(Subtable::slot_offset(
                    Subtable::overflow_offset(bucket),
                    slot,
                ));
                assert_eq!(
                    loc,
                    Some(Location {
                        group: bucket / 2,
                        pos: GroupPos::Overflow,
                        slot: Some(slot)
                    })
                );
            }
            let header = st.locate(Subtable::main_offset(bucket)).unwrap();
            assert_eq!(header.slot, None);
        }
        assert_eq!(st.locate(st.bytes()), None);
        assert_eq!(st.locate(12), None);
    }

    fn filled(header: BucketHeader, tag: u64) -> Bucket {
        let mut b = Bucket::empty(header);
        for (i, s) in b.slots.iter_mut().enumerate() {
            *s = if i == 3 {
                EMPTY
            } else {
                Slot::new(tag as u8 + i as u8, 64, ptr(64 * (tag + i as u64)), 0)
                    .unwrap()
                    .pack()
            };
        }
        b
    }

    #[test]
    fn combined_bucket_of_both_parities() {
        let h = BucketHeader::new(1, 1).unwrap();
        let (m0, ov, m1) = (filled(h, 10), filled(h, 20), filled(h, 30));
        let mut group = Vec::new();
        for b in [m0, ov, m1] {
            group.extend_from_slice(&b.encode());
        }
        let base = ptr(4096);
        let st = Subtable::new(1).unwrap();
        let even = CombinedBucket::parse(&group[0..128], base, st, 0).unwrap();
        assert_eq!((even.main, even.overflow), (m0, ov));
        assert_eq!(even.main_at, ptr(4096));
        assert_eq!(even.overflow_at, ptr(4096 + 64));
        let odd = CombinedBucket::parse(&group[64..192], base, st, 1).unwrap();
        assert_eq!((odd.main, odd.overflow), (m1, ov));
        assert_eq!(odd.main_at, ptr(4096 + 128));

        let refs: Vec<SlotRef> = odd.slots().collect();
        assert_eq!(refs.len(), 14);
        assert_eq!(refs[0].addr, ptr(4096 + 128 + 8));
        assert_eq!(refs[7].addr, ptr(4096 + 64 + 8));
        assert!(refs[7].overflow);
        assert_eq!(
            odd.first_empty().map(|r| r.addr),
            Some(ptr(4096 + 128 + 32))
        );
        assert_eq!(odd.free_slots(), 2);
        let m = odd.matching(31);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].0.addr, ptr(4096 + 128 + 16));
        assert_eq!(m[0].1.ptr(), ptr(64 * 31));
        assert!(odd.covers(&KeyHash { h1: 3, h2: 0 }));
        assert!(!odd.covers(&KeyHash { h1: 2, h2: 0 }));

        assert!(CombinedBucket::parse(&group[0..127], base, st, 0).is_err());
        assert!(CombinedBucket::parse(&group[0..128], base, st, 2).is_err());
    }

    proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200), bucket in 0u64..10) {
            let _ = Bucket::parse(&bytes);
            if let Ok(c) = CombinedBucket::parse(&bytes, ptr(0), Subtable::new(4).unwrap(), bucket) {
                let _ = c.matching(0);
            }
        }

        #[test]
        fn bucket_round_trip(depth in 0u8..=32, suffix: u32, slots: [u64; 7]) {
            let h = BucketHeader::new(depth, (u64::from(suffix) & depth_mask(depth)) as u32).unwrap();
            let b = Bucket { header: h, slots };
            prop_assert_eq!(Bucket::parse(&b.encode()), Ok(b));
        }
    }

    #[test]
    fn buckets_in_range_and_spread() {
        let st = Subtable::new(64).unwrap();
        let mut hits = vec![0u32; st.main_buckets() as usize];
        let mut same = 0;
        for i in 0..20_000u32 {
            let h = KeyHash::of(&i.to_le_bytes());
            let [a, b] = st.candidates(&h);
            assert!(a < 128 && b < 128);
            assert_eq!([a, b].map(Subtable::group_of), [a / 2, b / 2]);
            hits[a as usize] += 1;
            hits[b as usize] += 1;
            same += u32::from(a == b);
        }
        // 40000 choices over 128 buckets: about 312 each.
        assert!(hits.iter().all(|&n| (200..450).contains(&n)), "{hits:?}");
        assert!(same < 400, "choices coincide too often: {same}");
    }
}
