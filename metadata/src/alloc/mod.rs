//! Allocation mechanism: the free-extent map of one region ([`ExtentMap`]) and the
//! strategies that pick where in it an allocation goes ([`Allocator`]: [`FirstFit`],
//! [`BestFit`], one file each), and the offset range free on every member of a
//! replica set ([`mirrored_fit`]). Which memnode serves a lease is a separate policy
//! ([`crate::placement`]).
//!
//! The free maps are not persisted: on startup they are rebuilt from the persisted
//! regions minus the persisted leases, so they can never disagree with the leases.

mod best_fit;
mod first_fit;
mod mirror;

use std::collections::BTreeMap;

pub use best_fit::BestFit;
pub use first_fit::FirstFit;
pub use mirror::{common_free, mirrored_fit};

/// Every allocation is aligned to at least this many bytes (one RDMA cache line).
pub const MIN_ALIGN: u64 = 64;

/// Why an extent operation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExtentError {
    /// The range is not (entirely) free: it overlaps an allocation or leaves the region.
    #[error("range {va:#x}+{len} is not free in this region")]
    NotFree {
        /// Start.
        va: u64,
        /// Length.
        len: u64,
    },
    /// The range is (partly) free already or outside the region: a double free.
    #[error("range {va:#x}+{len} is not allocated in this region")]
    NotAllocated {
        /// Start.
        va: u64,
        /// Length.
        len: u64,
    },
}

/// The free extents of one region `[base, base + len)`, coalesced, by address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtentMap {
    base: u64,
    len: u64,
    free: BTreeMap<u64, u64>,
    free_bytes: u64,
}

impl ExtentMap {
    /// A region whose bytes are all free.
    pub fn new(base: u64, len: u64) -> ExtentMap {
        let mut free = BTreeMap::new();
        if len > 0 {
            free.insert(base, len);
        }
        ExtentMap {
            base,
            len,
            free,
            free_bytes: len,
        }
    }

    /// First byte of the region.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// Size of the region.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the region is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Free bytes.
    pub fn free_bytes(&self) -> u64 {
        self.free_bytes
    }

    /// Allocated bytes.
    pub fn used_bytes(&self) -> u64 {
        self.len - self.free_bytes
    }

    /// Free extents `(start, len)` in address order.
    pub fn extents(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.free.iter().map(|(&s, &l)| (s, l))
    }

    /// Where an allocation of `len` bytes aligned to `align` (relative to the region
    /// base) could start inside the free extent `(start, ext_len)`, if it fits.
    pub fn fit_in(&self, start: u64, ext_len: u64, len: u64, align: u64) -> Option<u64> {
        let off = start - self.base;
        let aligned = off.checked_next_multiple_of(align.max(1))? + self.base;
        let end = start.checked_add(ext_len)?;
        (aligned.checked_add(len)? <= end).then_some(aligned)
    }

    /// The largest allocation of alignment `align` that would fit.
    pub fn largest_fit(&self, align: u64) -> u64 {
        self.extents()
            .filter_map(|(s, l)| {
                let a = self.fit_in(s, l, 0, align)?;
                Some(s + l - a)
            })
            .max()
            .unwrap_or(0)
    }

    /// The length of the free extent that starts exactly at `va`, if one does.
    pub fn free_at(&self, va: u64) -> Option<u64> {
        self.free.get(&va).copied()
    }

    /// Where the largest allocation of alignment `align` that is at least `min`
    /// bytes long could start, and how long it could be (the first such extent
    /// when several are equally large).
    pub fn largest_extent(&self, min: u64, align: u64) -> Option<(u64, u64)> {
        self.extents()
            .filter_map(|(s, l)| {
                let a = self.fit_in(s, l, min, align)?;
                Some((a, s + l - a))
            })
            .fold(None, |best: Option<(u64, u64)>, (a, len)| match best {
                Some((_, b)) if b >= len => best,
                _ => Some((a, len)),
            })
    }

    /// Marks `[va, va + len)` allocated; it must be entirely free.
    pub fn reserve(&mut self, va: u64, len: u64) -> Result<(), ExtentError> {
        let not_free = ExtentError::NotFree { va, len };
        if len == 0 {
            return Err(not_free);
        }
        let end = va.checked_add(len).ok_or(not_free.clone())?;
        let (&s, &l) = self.free.range(..=va).next_back().ok_or(not_free.clone())?;
        if s + l < end {
            return Err(not_free);
        }
        self.free.remove(&s);
        if va > s {
            self.free.insert(s, va - s);
        }
        if s + l > end {
            self.free.insert(end, s + l - end);
        }
        self.free_bytes -= len;
        Ok(())
    }

    /// Returns `[va, va + len)` to the free extents (coalescing); it must be entirely
    /// allocated and inside the region.
    pub fn release(&mut self, va: u64, len: u64) -> Result<(), ExtentError> {
        let not_alloc = ExtentError::NotAllocated { va, len };
        let end = va.checked_add(len).ok_or(not_alloc.clone())?;
        if len == 0 || va < self.base || end > self.base + self.len {
            return Err(not_alloc);
        }
        let prev = self.free.range(..end).next_back().map(|(&s, &l)| (s, l));
        if let Some((s, l)) = prev
            && s + l > va
        {
            return Err(not_alloc);
        }
        let mut start = va;
        let mut size = len;
        if let Some((s, l)) = prev
            && s + l == va
        {
            self.free.remove(&s);
            start = s;
            size += l;
        }
        if let Some(next_len) = self.free.remove(&end) {
            size += next_len;
        }
        self.free.insert(start, size);
        self.free_bytes += len;
        Ok(())
    }

    /// Allocates `len` bytes aligned to `align` where `strategy` says.
    pub fn allocate(&mut self, strategy: &dyn Allocator, len: u64, align: u64) -> Option<u64> {
        let align = align.max(MIN_ALIGN);
        if len == 0 {
            return None;
        }
        let va = strategy.place(self, len, align)?;
        self.reserve(va, len).ok()?;
        Some(va)
    }

    /// Allocates `len` bytes aligned to `align` at the high end of the free extent
    /// `strategy` picks (the highest aligned start that fits in it), leaving the
    /// low part of that extent free.
    pub fn allocate_high(&mut self, strategy: &dyn Allocator, len: u64, align: u64) -> Option<u64> {
        let align = align.max(MIN_ALIGN);
        if len == 0 {
            return None;
        }
        let low = strategy.place(self, len, align)?;
        let (&start, &ext) = self.free.range(..=low).next_back()?;
        let top = (start + ext).checked_sub(len)?;
        let va = top - (top - self.base) % align;
        let va = if va >= low { va } else { low };
        self.reserve(va, len).ok()?;
        Some(va)
    }
}

/// Where in a region an allocation goes (the mechanism's strategy).
pub trait Allocator: Send + Sync + std::fmt::Debug {
    /// The strategy's name (`first_fit`, `best_fit`).
    fn name(&self) -> &'static str;

    /// A free, suitably aligned start for `len` bytes in `map`, or `None` if none fits.
    fn place(&self, map: &ExtentMap, len: u64, align: u64) -> Option<u64>;
}

/// The strategies, by name (for configuration).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AllocatorKind {
    /// Lowest address that fits ([`FirstFit`]).
    #[default]
    FirstFit,
    /// Smallest free extent that fits ([`BestFit`]).
    BestFit,
}

impl AllocatorKind {
    /// The strategy.
    pub fn build(self) -> Box<dyn Allocator> {
        match self {
            AllocatorKind::FirstFit => Box::new(FirstFit),
            AllocatorKind::BestFit => Box::new(BestFit),
        }
    }
}

impl std::str::FromStr for AllocatorKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "first_fit" | "first-fit" => Ok(AllocatorKind::FirstFit),
            "best_fit" | "best-fit" => Ok(AllocatorKind::BestFit),
            _ => Err(format!(
                "unknown allocator {s:?}: expected first_fit or best_fit"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reserve_release_coalesce() {
        let mut m = ExtentMap::new(0x1000, 0x1000);
        let a = m.allocate(&FirstFit, 0x100, 64).unwrap();
        let b = m.allocate(&FirstFit, 0x100, 64).unwrap();
        assert_eq!((a, b), (0x1000, 0x1100));
        assert_eq!(m.free_bytes(), 0xe00);
        assert!(m.release(a, 0x100).is_ok());
        assert!(m.release(a, 0x100).is_err(), "double free");
        assert!(m.release(0x3000, 0x100).is_err(), "outside");
        m.release(b, 0x100).unwrap();
        assert_eq!(m.extents().collect::<Vec<_>>(), vec![(0x1000, 0x1000)]);
        assert!(m.reserve(0x1800, 0x900).is_err(), "leaves the region");
        m.reserve(0x1800, 0x100).unwrap();
        assert!(m.reserve(0x1880, 0x100).is_err(), "overlap");
        assert_eq!(m.largest_fit(64), 0x800);
        assert_eq!(m.largest_fit(0x1000), 0x800, "aligned to the base");
    }

    #[test]
    fn alignment_is_relative_to_the_base() {
        let mut m = ExtentMap::new(0x40, 0x10000);
        m.allocate(&FirstFit, 64, 64).unwrap();
        let v = m.allocate(&FirstFit, 0x1000, 0x1000).unwrap();
        assert_eq!(v, 0x40 + 0x1000);
    }

    #[test]
    fn free_at_and_largest_extent() {
        let mut m = ExtentMap::new(0, 0x10000);
        m.reserve(0x1000, 0x40).unwrap(); // free: 0..0x1000, 0x1040..0x10000
        assert_eq!(m.free_at(0x1040), Some(0x10000 - 0x1040));
        assert_eq!(m.free_at(0x1000), None);
        assert_eq!(m.largest_extent(64, 64), Some((0x1040, 0x10000 - 0x1040)));
        assert_eq!(
            m.largest_extent(64, 0x1000),
            Some((0x2000, 0xe000)),
            "aligned start"
        );
        m.reserve(0x2000, 0xe000).unwrap(); // free: 0..0x1000, 0x1040..0x2000
        assert_eq!(
            m.largest_extent(64, 64),
            Some((0, 0x1000)),
            "the larger hole"
        );
        assert_eq!(m.largest_extent(0x1001, 64), None);
    }

    #[test]
    fn allocate_high_takes_the_top_of_the_chosen_extent() {
        let mut m = ExtentMap::new(0x40, 0x10000);
        m.reserve(0x1040, 0x40).unwrap(); // free: 0x40..0x1040, 0x1080..0x10040
        assert_eq!(m.allocate_high(&FirstFit, 0x100, 64), Some(0x1040 - 0x100));
        assert_eq!(m.allocate_high(&BestFit, 0x100, 64), Some(0x1040 - 0x200));
        let v = m.allocate_high(&FirstFit, 0x2000, 0x1000).unwrap();
        assert_eq!((v - 0x40) % 0x1000, 0);
        assert_eq!(v, 0x40 + 0xe000, "the highest aligned start");
        assert_eq!(m.allocate_high(&FirstFit, 0x10000, 64), None);
    }

    #[test]
    fn best_fit_prefers_the_tightest_hole() {
        let mut m = ExtentMap::new(0, 0x10000);
        m.reserve(0x100, 0x100).unwrap(); // hole 0..0x100
        m.reserve(0x240, 0x1000).unwrap(); // hole 0x200..0x240
        assert_eq!(m.allocate(&BestFit, 0x40, 64), Some(0x200));
        assert_eq!(m.allocate(&FirstFit, 0x40, 64), Some(0));
    }

    proptest! {
        /// Random allocate/free sequences: allocations never overlap, stay inside the
        /// region and aligned, and free + allocated bytes always equal the region.
        #[test]
        fn no_overlap_and_conservation(
            ops in proptest::collection::vec((any::<bool>(), 1u64..5000, 0usize..64, any::<bool>()), 1..200)
        ) {
            let base = 0x1_0000_0000u64;
            let len = 1u64 << 18;
            let mut m = ExtentMap::new(base, len);
            let mut live: Vec<(u64, u64)> = Vec::new();
            for (alloc, size, pick, best) in ops {
                if alloc || live.is_empty() {
                    let strategy: &dyn Allocator = if best { &BestFit } else { &FirstFit };
                    let size = size.next_multiple_of(64);
                    if let Some(va) = m.allocate(strategy, size, 64) {
                        prop_assert!(va >= base && va + size <= base + len);
                        prop_assert_eq!((va - base) % 64, 0);
                        for &(o, ol) in &live {
                            prop_assert!(va + size <= o || o + ol <= va, "overlap");
                        }
                        live.push((va, size));
                    } else {
                        prop_assert!(m.largest_fit(64) < size);
                    }
                } else {
                    let (va, size) = live.swap_remove(pick % live.len());
                    prop_assert!(m.release(va, size).is_ok());
                }
                let used: u64 = live.iter().map(|l| l.1).sum();
                prop_assert_eq!(m.free_bytes() + used, len);
                let listed: u64 = m.extents().map(|e| e.1).sum();
                prop_assert_eq!(listed, m.free_bytes());
            }
        }
    }
}
