//! The RACE slot: one 8-byte word, changed only by CAS.
//!
//! Bit layout of the little-endian `u64`:
//!
//! ```text
//!  63          56 55          48 47                                   0
//! +--------------+--------------+--------------------------------------+
//! | fingerprint  | length       | pointer to the KV block (RemotePtr,  |
//! | (8 bits)     | (64-B lines) | 48 bits: memnode 8 | offset 40)      |
//! +--------------+--------------+--------------------------------------+
//! ```
//!
//! The all-zero word is the empty slot. An occupied slot always has a length of
//! 1–255 lines, so it is never zero whatever its fingerprint and pointer; KV
//! blocks are 64-byte aligned and at most 255 × 64 = 16320 bytes long
//! ([`MAX_BLOCK_BYTES`]). The length lets a reader fetch the block with one READ.
//! The pointer's two low bits, zero in a value, are flags: bit 0 [`MARK`] (a split
//! is copying the slot) and bit 1 [`TENTATIVE`] (an insert not yet confirmed). Bits
//! 2–5 are the block's *reuse tag* ([`TAG_BITS`]): the low bits of the generation
//! its memory was handed out with, which grows by one each time a block is reused.
//! A CAS that compares against a slot word is delayed by at most the queue pair's
//! retransmission window (plus the packet lifetime); freed blocks wait at least a
//! sixteenth of that before reuse ([`crate::race`]), so within one CAS's flight a
//! block is reused fewer than 16 times, its tag differs, and a stale CAS can never
//! match a slot that names the same memory for another key.

use crate::error::LayoutError;
use crate::ptr::RemotePtr;

/// The word layout, shared with the memory node's RPC workers ([`dmkv_api::race_layout`]).
pub(crate) use dmkv_api::race_layout::{
    EMPTY, FP_SHIFT, FROZEN, LEN_SHIFT, LINE, MARK, MAX_BLOCK_BYTES, TAG_BITS, TAG_SHIFT,
    TENTATIVE, is_split_word, is_tentative,
};

/// Reuses a tag tells apart: a block's tag comes back after this many reuses.
pub(crate) const TAG_PERIOD: u32 = 16;

/// The value a tentative slot word would stand for once finalised: `Ok(None)`
/// for words that are not tentative.
pub(crate) fn unpack_tentative(word: u64) -> Result<Option<Slot>, LayoutError> {
    if !is_tentative(word) || word & MARK != 0 {
        return Ok(None);
    }
    Slot::unpack(word & !TENTATIVE)
}

/// The value a slot word stands for, split marks removed: `Ok(None)` for empty and
/// frozen slots. A tentative word is an error (it stands for no value yet: use
/// [`unpack_tentative`]).
pub(crate) fn unpack_marked(word: u64) -> Result<Option<Slot>, LayoutError> {
    if word == FROZEN {
        return Ok(None);
    }
    Slot::unpack(word & !MARK)
}

/// An occupied slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Slot {
    fingerprint: u8,
    lines: u8,
    tag: u8,
    ptr: RemotePtr,
}

impl Slot {
    /// A slot for a block of `block_len` bytes at `ptr` (64-byte aligned), handed
    /// out with generation `generation` (its low bits are the slot's reuse tag).
    pub(crate) fn new(
        fingerprint: u8,
        block_len: usize,
        ptr: RemotePtr,
        generation: u64,
    ) -> Result<Slot, LayoutError> {
        if block_len == 0 || block_len > MAX_BLOCK_BYTES {
            return Err(LayoutError::BadLength(format!(
                "KV block of {block_len} bytes (1..={MAX_BLOCK_BYTES})"
            )));
        }
        if !ptr.is_aligned(LINE as u64) {
            return Err(LayoutError::OutOfRange(format!(
                "KV block at {ptr:?} is not {LINE}-byte aligned"
            )));
        }
        let lines = u8::try_from(block_len.div_ceil(LINE))
            .map_err(|_| LayoutError::BadLength(format!("{block_len} bytes")))?;
        Ok(Slot {
            fingerprint,
            lines,
            tag: (generation % u64::from(TAG_PERIOD)) as u8,
            ptr,
        })
    }

    /// Pack into the slot word.
    pub(crate) fn pack(self) -> u64 {
        (u64::from(self.fingerprint) << FP_SHIFT)
            | (u64::from(self.lines) << LEN_SHIFT)
            | (u64::from(self.tag) << TAG_SHIFT)
            | self.ptr.raw()
    }

    /// Unpack a slot word: `Ok(None)` for the empty slot; an error for a non-empty
    /// word with zero length or an unaligned pointer (never written by a client).
    pub(crate) fn unpack(word: u64) -> Result<Option<Slot>, LayoutError> {
        if word == EMPTY {
            return Ok(None);
        }
        // Each cast keeps exactly its 8-bit field.
        let fingerprint = (word >> FP_SHIFT) as u8;
        let lines = (word >> LEN_SHIFT) as u8;
        let tag = ((word & TAG_BITS) >> TAG_SHIFT) as u8;
        let ptr = RemotePtr::from_raw_masked(word & !TAG_BITS);
        if lines == 0 {
            return Err(LayoutError::BadLength(format!(
                "slot {word:#018x} is occupied but has zero length"
            )));
        }
        if !ptr.is_aligned(LINE as u64) {
            return Err(LayoutError::OutOfRange(format!(
                "slot {word:#018x} points at an unaligned block"
            )));
        }
        Ok(Some(Slot {
            fingerprint,
            lines,
            tag,
            ptr,
        }))
    }

    /// The reuse tag: the low bits of the generation its block was handed out with.
    pub(crate) fn tag(self) -> u8 {
        self.tag
    }

    /// The key's fingerprint.
    pub(crate) fn fingerprint(self) -> u8 {
        self.fingerprint
    }

    /// The block length in 64-byte lines (1–255).
    #[cfg(test)]
    pub fn lines(self) -> u8 {
        self.lines
    }

    /// Bytes to READ to fetch the whole block.
    pub(crate) fn read_len(self) -> usize {
        usize::from(self.lines) * LINE
    }

    /// Where the KV block lives.
    pub(crate) fn ptr(self) -> RemotePtr {
        self.ptr
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn exact_bits() {
        let p = RemotePtr::new(2, 0x40).unwrap();
        let s = Slot::new(0xab, 100, p, 0).unwrap();
        assert_eq!(s.pack(), 0xab02_0200_0000_0040);
        // The reuse tag sits in bits 2-5 and changes the word, not the block.
        let t = Slot::new(0xab, 100, p, 16 + 5).unwrap();
        assert_eq!(t.pack(), 0xab02_0200_0000_0040 | (5 << 2));
        assert_eq!((t.tag(), t.ptr(), t.read_len()), (5, p, 128));
        assert_ne!(t.pack(), s.pack());
        assert_eq!(Slot::unpack(t.pack()), Ok(Some(t)));
        assert_eq!(s.lines(), 2);
        assert_eq!(s.read_len(), 128);
        assert_eq!(Slot::unpack(s.pack()), Ok(Some(s)));
        assert_eq!(Slot::unpack(EMPTY), Ok(None));
    }

    #[test]
    fn zero_fingerprint_and_pointer_is_still_occupied() {
        let s = Slot::new(0, 1, RemotePtr::new(0, 0).unwrap(), 0).unwrap();
        assert_ne!(s.pack(), EMPTY);
        assert_eq!(Slot::unpack(s.pack()), Ok(Some(s)));
    }

    #[test]
    fn limits() {
        let p = RemotePtr::new(0, 64).unwrap();
        assert!(Slot::new(1, 0, p, 0).is_err());
        assert!(Slot::new(1, MAX_BLOCK_BYTES + 1, p, 0).is_err());
        assert_eq!(Slot::new(1, MAX_BLOCK_BYTES, p, 0).unwrap().lines(), 255);
        assert!(Slot::new(1, 64, RemotePtr::new(0, 8).unwrap(), 0).is_err());
        assert!(Slot::unpack(0xff00_0000_0000_0040).is_err(), "zero length");
        // Bits 2-5 are the reuse tag; the block's address is what remains.
        let tagged = Slot::unpack(0x0001_0000_0000_0008).map(|s| s.map(|s| (s.tag(), s.ptr())));
        assert_eq!(tagged, Ok(Some((2, RemotePtr::new(0, 0).unwrap()))));
    }

    #[test]
    fn split_words() {
        let s = Slot::new(7, 64, RemotePtr::new(1, 128).unwrap(), 3).unwrap();
        assert!(Slot::unpack(FROZEN).is_err());
        assert!(Slot::unpack(s.pack() | MARK).is_err());
        assert_eq!(unpack_marked(s.pack() | MARK), Ok(Some(s)));
        assert_eq!(unpack_marked(s.pack()), Ok(Some(s)));
        assert_eq!(unpack_marked(FROZEN), Ok(None));
        assert_eq!(unpack_marked(EMPTY), Ok(None));
        assert!(is_split_word(FROZEN) && is_split_word(s.pack() | MARK));
        assert!(!is_split_word(EMPTY) && !is_split_word(s.pack()));
    }

    #[test]
    fn tentative_words() {
        let s = Slot::new(7, 64, RemotePtr::new(1, 128).unwrap(), 3).unwrap();
        let t = s.pack() | TENTATIVE;
        assert!(is_tentative(t) && !is_tentative(s.pack()));
        assert!(!is_tentative(EMPTY) && !is_tentative(FROZEN));
        assert_eq!(unpack_tentative(t), Ok(Some(s)));
        assert_eq!(unpack_tentative(s.pack()), Ok(None));
        assert!(
            Slot::unpack(t).is_err(),
            "readers never take it for a value"
        );
        assert!(unpack_marked(t).is_err());
        assert!(!is_split_word(t));
    }

    proptest! {
        #[test]
        fn unpack_pack_identity(w: u64) {
            if let Ok(Some(s)) = Slot::unpack(w) {
                prop_assert_eq!(s.pack(), w);
            }
        }
    }
}
