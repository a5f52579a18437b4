//! The Clover node header word (bytes 0–7 of every node), the only mutable part of a node.
//!
//! Bit layout of the little-endian `u64` (bit 0 is the least significant):
//!
//! ```text
//!  63   62   61          46 45        38 37       30 29                  0
//! +----+----+--------------+------------+-----------+---------------------+
//! | HS | TS | own gen (16) | succ gen(8)| succ mnode| succ line (30 bits) |
//! +----+----+--------------+------------+-----------+---------------------+
//! ```
//!
//! - `HS` ([`HAS_SUCCESSOR`]): a successor is linked; while it is clear the
//!   successor fields (bits 0–45) are zero;
//! - `TS` ([`TOMBSTONE`]): this node records a deletion (no value);
//! - own generation: the generation of the memory this node occupies, bumped each
//!   time the memory is reclaimed and reused;
//! - successor generation: the low 8 bits of the successor's own generation, so a
//!   reader following the link can tell a reused node from the one that was linked;
//! - successor memnode and line: the successor's [`RemotePtr`] in 64-byte lines
//!   (memnode index, byte offset / 64). Nodes are 64-byte aligned, and a node that
//!   is linked as a successor must lie in the first 64 GiB of its memnode's pool
//!   ([`MAX_SUCCESSOR_OFFSET`]).
//!
//! The header changes only by CAS, exactly once in a node's life: from
//! `tail(g)` (no successor) to `tail(g)` plus a successor. [`Header::link`]
//! computes that compare/swap pair.

use crate::error::LayoutError;
use crate::ptr::RemotePtr;
use std::fmt;

/// The header's bits, shared with the memory node's RPC workers ([`dmkv_api::clover_layout`]).
pub(crate) use dmkv_api::clover_layout::{
    HAS_SUCCESSOR, NODE_ALIGN, OWN_GEN_SHIFT, SUCC_GEN_SHIFT, SUCC_LINE_BITS, SUCC_MEMNODE_SHIFT,
    SUCCESSOR_FIELDS, TOMBSTONE,
};

/// Offsets at or above this cannot be linked as successors (64 GiB).
pub(crate) const MAX_SUCCESSOR_OFFSET: u64 = NODE_ALIGN << SUCC_LINE_BITS;

/// A linked successor: where it is and the low bits of its generation at link time.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Successor {
    ptr: RemotePtr,
    tag: u8,
}

impl Successor {
    /// A successor at `ptr` with own generation `generation`.
    ///
    /// Fails when `ptr` is not 64-byte aligned or lies beyond [`MAX_SUCCESSOR_OFFSET`].
    pub(crate) fn new(ptr: RemotePtr, generation: u16) -> Result<Successor, LayoutError> {
        if !ptr.is_aligned(NODE_ALIGN) {
            return Err(LayoutError::OutOfRange(format!(
                "successor {ptr:?} is not {NODE_ALIGN}-byte aligned"
            )));
        }
        if ptr.offset() >= MAX_SUCCESSOR_OFFSET {
            return Err(LayoutError::OutOfRange(format!(
                "successor {ptr:?} lies beyond the linkable {MAX_SUCCESSOR_OFFSET:#x}"
            )));
        }
        Ok(Successor {
            ptr,
            tag: generation_tag(generation),
        })
    }

    /// Where the successor lives.
    pub(crate) fn ptr(self) -> RemotePtr {
        self.ptr
    }

    /// Whether a node read at [`ptr`](Self::ptr) with own generation `generation` is the linked one.
    pub(crate) fn matches(self, generation: u16) -> bool {
        generation_tag(generation) == self.tag
    }

    fn bits(self) -> u64 {
        let line = self.ptr.offset() / NODE_ALIGN;
        (u64::from(self.tag) << SUCC_GEN_SHIFT)
            | (u64::from(self.ptr.memnode()) << SUCC_MEMNODE_SHIFT)
            | line
    }

    fn from_bits(word: u64) -> Successor {
        let line = word & ((1 << SUCC_LINE_BITS) - 1);
        // Both casts keep exactly the 8 bits of their field.
        let memnode = (word >> SUCC_MEMNODE_SHIFT) as u8;
        let tag = (word >> SUCC_GEN_SHIFT) as u8;
        // line < 2^30, so the offset (< 2^36) fits the 40-bit offset field exactly.
        let ptr = RemotePtr::from_parts_masked(memnode, line * NODE_ALIGN);
        Successor { ptr, tag }
    }
}

impl fmt::Debug for Successor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}@g{}", self.ptr, self.tag)
    }
}

/// The low 8 bits of a generation, as recorded in a predecessor's header.
pub(crate) fn generation_tag(generation: u16) -> u8 {
    generation.to_le_bytes()[0]
}

/// A decoded header word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Header {
    /// The node's own generation.
    pub generation: u16,
    /// Whether the node is a tombstone.
    pub tombstone: bool,
    /// The linked successor, if any.
    pub successor: Option<Successor>,
}

/// The compare and swap values of the CAS that links a new node after a tail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LinkCas {
    /// Expected header: no successor, the tail's generation and tombstone flag.
    pub compare: u64,
    /// New header: the same plus the successor and its generation tag.
    pub swap: u64,
}

impl Header {
    /// The header of a node as first written: no successor yet.
    pub(crate) fn tail(generation: u16, tombstone: bool) -> Header {
        Header {
            generation,
            tombstone,
            successor: None,
        }
    }

    /// Pack into the 64-bit word.
    pub(crate) fn pack(self) -> u64 {
        let mut w = u64::from(self.generation) << OWN_GEN_SHIFT;
        if self.tombstone {
            w |= TOMBSTONE;
        }
        if let Some(s) = self.successor {
            w |= HAS_SUCCESSOR | s.bits();
        }
        w
    }

    /// Unpack a word; strict: successor fields must be zero unless [`HAS_SUCCESSOR`] is set.
    pub(crate) fn unpack(word: u64) -> Result<Header, LayoutError> {
        // The 16-bit field is extracted exactly by the shift and truncation.
        let generation = (word >> OWN_GEN_SHIFT) as u16;
        let tombstone = word & TOMBSTONE != 0;
        let successor = if word & HAS_SUCCESSOR != 0 {
            Some(Successor::from_bits(word & SUCCESSOR_FIELDS))
        } else if word & SUCCESSOR_FIELDS != 0 {
            return Err(LayoutError::Reserved(format!(
                "header {word:#018x} has successor bits without the has-successor flag"
            )));
        } else {
            None
        };
        Ok(Header {
            generation,
            tombstone,
            successor,
        })
    }

    /// The CAS that links `successor` after this node.
    ///
    /// The compare value is this header without a successor (whatever `self.successor`
    /// says, so a caller can build it from a cached generation); the swap value adds
    /// the successor.
    pub(crate) fn link(self, successor: Successor) -> LinkCas {
        let tail = Header {
            successor: None,
            ..self
        };
        LinkCas {
            compare: tail.pack(),
            swap: Header {
                successor: Some(successor),
                ..tail
            }
            .pack(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ptr(m: u8, off: u64) -> RemotePtr {
        RemotePtr::new(m, off).unwrap()
    }

    #[test]
    fn exact_bit_positions() {
        assert_eq!(Header::tail(0, false).pack(), 0);
        assert_eq!(Header::tail(1, false).pack(), 1 << 46);
        assert_eq!(Header::tail(0xffff, true).pack(), 0x7fff_c000_0000_0000);
        let s = Successor::new(ptr(3, 64 * 5), 0x1234).unwrap();
        let h = Header {
            generation: 2,
            tombstone: false,
            successor: Some(s),
        };
        let w = h.pack();
        assert_eq!(w, (1 << 63) | (2 << 46) | (0x34 << 38) | (3 << 30) | 5);
        assert_eq!(Header::unpack(w), Ok(h));
    }

    #[test]
    fn link_values() {
        let s = Successor::new(ptr(1, 4096), 9).unwrap();
        let cas = Header::tail(7, true).link(s);
        assert_eq!(cas.compare, Header::tail(7, true).pack());
        let after = Header::unpack(cas.swap).unwrap();
        assert_eq!(after.generation, 7);
        assert!(after.tombstone);
        assert_eq!(after.successor, Some(s));
        assert!(s.matches(9));
        assert!(s.matches(9 + 256), "only the low 8 bits are recorded");
        assert!(!s.matches(10));
        // Linking from a header that already names a successor compares against the tail form.
        let linked = Header::unpack(cas.swap).unwrap();
        assert_eq!(linked.link(s), cas);
    }

    #[test]
    fn successor_limits() {
        assert!(Successor::new(ptr(0, 65), 0).is_err());
        assert!(Successor::new(ptr(0, MAX_SUCCESSOR_OFFSET), 0).is_err());
        let last = Successor::new(ptr(255, MAX_SUCCESSOR_OFFSET - 64), 0xff).unwrap();
        let h = Header {
            generation: 0xffff,
            tombstone: true,
            successor: Some(last),
        };
        assert_eq!(h.pack(), u64::MAX);
        assert_eq!(Header::unpack(u64::MAX), Ok(h));
    }

    #[test]
    fn strict_unpack() {
        assert!(Header::unpack(1).is_err());
        assert!(Header::unpack(1 << 45).is_err());
        assert!(Header::unpack(TOMBSTONE | (5 << 46)).is_ok());
    }

    proptest! {
        #[test]
        fn unpack_pack_is_identity_when_accepted(w: u64) {
            if let Ok(h) = Header::unpack(w) {
                prop_assert_eq!(h.pack(), w);
            }
        }

        #[test]
        fn pack_unpack_round_trip(generation: u16, ts: bool, m: u8, line in 0u64..(1 << 30), sgen: u16, linked: bool) {
            let successor = linked.then(|| Successor::new(RemotePtr::new(m, line * 64).unwrap(), sgen).unwrap());
            let h = Header { generation, tombstone: ts, successor };
            prop_assert_eq!(Header::unpack(h.pack()), Ok(h));
        }
    }
}
