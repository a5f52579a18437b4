//! Remote pointers: where an object lives in the cluster's disaggregated memory.
//!
//! A [`RemotePtr`] is 48 bits, the width of a RACE slot's pointer field:
//!
//! ```text
//!  47        40 39                                      0
//! +------------+-----------------------------------------+
//! |  memnode   |  byte offset in the memnode's pool      |
//! |  (8 bits)  |  (40 bits, 1 TiB)                       |
//! +------------+-----------------------------------------+
//! ```
//!
//! The memnode index names a memory node in the table's catalog entry; the offset
//! is relative to the base of the pool that memnode registered. Turning it into a
//! `verbs` remote address (rkey + virtual address) is the session's job.

use crate::error::LayoutError;
use std::fmt;

/// Bits of the byte offset.
pub(crate) const OFFSET_BITS: u32 = 40;
/// Bits of the memnode index.
pub(crate) const MEMNODE_BITS: u32 = 8;
/// Total width of a remote pointer.
pub(crate) const PTR_BITS: u32 = OFFSET_BITS + MEMNODE_BITS;
/// Mask of the 48 pointer bits.
pub(crate) const PTR_MASK: u64 = (1 << PTR_BITS) - 1;
/// Largest byte offset plus one.
pub(crate) const MAX_OFFSET: u64 = 1 << OFFSET_BITS;

/// A 48-bit pointer into disaggregated memory: memnode index and byte offset.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct RemotePtr(u64);

impl RemotePtr {
    /// A pointer to `offset` in memnode `memnode`; fails when the offset needs more than 40 bits.
    pub(crate) fn new(memnode: u8, offset: u64) -> Result<RemotePtr, LayoutError> {
        if offset >= MAX_OFFSET {
            return Err(LayoutError::OutOfRange(format!(
                "offset {offset:#x} does not fit in {OFFSET_BITS} bits"
            )));
        }
        Ok(RemotePtr((u64::from(memnode) << OFFSET_BITS) | offset))
    }

    /// A pointer from parts, keeping only the low 40 bits of `offset`.
    pub(crate) fn from_parts_masked(memnode: u8, offset: u64) -> RemotePtr {
        RemotePtr((u64::from(memnode) << OFFSET_BITS) | (offset & (MAX_OFFSET - 1)))
    }

    /// A pointer from the low 48 bits of `raw`, ignoring the rest.
    pub(crate) fn from_raw_masked(raw: u64) -> RemotePtr {
        RemotePtr(raw & PTR_MASK)
    }

    /// Rebuild from the 48-bit raw form; `None` when higher bits are set.
    #[cfg(test)]
    pub fn from_raw(raw: u64) -> Option<RemotePtr> {
        (raw & !PTR_MASK == 0).then_some(RemotePtr(raw))
    }

    /// The 48-bit raw form.
    pub(crate) fn raw(self) -> u64 {
        self.0
    }

    /// The memnode index.
    pub(crate) fn memnode(self) -> u8 {
        // In range by construction: the raw form has 48 bits.
        (self.0 >> OFFSET_BITS) as u8
    }

    /// The byte offset within the memnode's pool.
    pub(crate) fn offset(self) -> u64 {
        self.0 & (MAX_OFFSET - 1)
    }

    /// The same memnode, `delta` bytes further on; `None` when that leaves the 40-bit offset space.
    pub(crate) fn checked_add(self, delta: u64) -> Option<RemotePtr> {
        let offset = self.offset().checked_add(delta)?;
        RemotePtr::new(self.memnode(), offset).ok()
    }

    /// Whether the offset is a multiple of `align` (a power of two).
    pub(crate) fn is_aligned(self, align: u64) -> bool {
        align.is_power_of_two() && self.offset() & (align - 1) == 0
    }
}

impl fmt::Debug for RemotePtr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "m{}+{:#x}", self.memnode(), self.offset())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_limits() {
        let p = RemotePtr::new(7, 0x12_3456_7890).unwrap();
        assert_eq!(p.memnode(), 7);
        assert_eq!(p.offset(), 0x12_3456_7890);
        assert_eq!(RemotePtr::from_raw(p.raw()), Some(p));
        assert_eq!(format!("{p:?}"), "m7+0x1234567890");
        assert!(RemotePtr::new(0, MAX_OFFSET).is_err());
        let top = RemotePtr::new(255, MAX_OFFSET - 1).unwrap();
        assert_eq!(top.raw(), PTR_MASK);
        assert_eq!(RemotePtr::from_raw(1 << 48), None);
        assert_eq!(top.checked_add(1), None);
        assert_eq!(p.checked_add(64).map(|q| q.offset()), Some(0x12_3456_78d0));
    }

    #[test]
    fn alignment() {
        assert!(RemotePtr::new(1, 128).unwrap().is_aligned(64));
        assert!(!RemotePtr::new(1, 72).unwrap().is_aligned(64));
        assert!(!RemotePtr::new(1, 72).unwrap().is_aligned(3));
    }
}
