//! The chain root: a 64-byte object per key holding the shortcut word and the chain id.
//!
//! Layout of the root object (little-endian), padded with zeros to 64 bytes:
//!
//! ```text
//! offset  size  field
//!      0     8  shortcut word — changed only by CAS
//!      8     8  chain id (the same as in every node of the chain)
//! ```
//!
//! The root never moves while the key exists: the metadata service records its
//! address as the chain's tail hint, so a client that has never seen the key finds
//! it there. The shortcut word points at a recent node of the chain — not
//! necessarily the tail — from which a reader follows successors to the tail.
//!
//! Bit layout of the shortcut word (bit 0 is the least significant):
//!
//! ```text
//!  63                 43 42      38 37       30 29                  0
//! +---------------------+----------+-----------+---------------------+
//! | node version (21)   | class (5)| memnode   | node line (30 bits) |
//! +---------------------+----------+-----------+---------------------+
//! ```
//!
//! - node line and memnode: the node's [`RemotePtr`] in 64-byte lines, as in a
//!   header's successor field (so the node lies in the first 64 GiB of its pool);
//! - class: the node's size class index, so a reader fetches exactly the node;
//! - version: the low 21 bits of the node's version. The word only moves forward
//!   (to nodes of larger version), and a node is reclaimed only once the word has
//!   moved past it, so the node the word names is never reused while named; a
//!   reader that read the word a while ago still checks the version it finds.

use crate::error::LayoutError;
use crate::ptr::RemotePtr;
use crate::size_class::{NUM_CLASSES, SIZE_CLASSES};

use super::header::{MAX_SUCCESSOR_OFFSET, NODE_ALIGN};

/// Size of the root object.
pub(crate) const ROOT_SIZE: usize = 64;
/// Offset of the shortcut word in the root.
pub(crate) const SHORTCUT_AT: usize = dmkv_api::clover_layout::ROOT_SHORTCUT_AT;
/// Offset of the chain id in the root.
pub(crate) const ROOT_CHAIN_ID_AT: usize = dmkv_api::clover_layout::ROOT_CHAIN_ID_AT;
/// Bytes a reader fetches from a root: the shortcut word and the chain id.
pub(crate) const ROOT_READ: usize = dmkv_api::clover_layout::ROOT_READ;

const LINE_BITS: u32 = dmkv_api::clover_layout::SUCC_LINE_BITS;
const MEMNODE_SHIFT: u32 = dmkv_api::clover_layout::SHORTCUT_MEMNODE_SHIFT;
const CLASS_SHIFT: u32 = dmkv_api::clover_layout::SHORTCUT_CLASS_SHIFT;
const CLASS_BITS: u32 = dmkv_api::clover_layout::SHORTCUT_CLASS_BITS;
const VERSION_SHIFT: u32 = dmkv_api::clover_layout::SHORTCUT_VERSION_SHIFT;
/// Bits of the node version kept in the shortcut word.
pub(crate) const VERSION_BITS: u32 = dmkv_api::clover_layout::SHORTCUT_VERSION_BITS;
/// Mask of the version bits kept in the shortcut word.
pub(crate) const VERSION_MASK: u32 = (1 << VERSION_BITS) - 1;

/// A decoded shortcut word: where a recent node of the chain is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Shortcut {
    /// The node.
    pub ptr: RemotePtr,
    /// Its size class in bytes.
    pub size_class: usize,
    /// The low [`VERSION_BITS`] bits of its version.
    pub version: u32,
}

impl Shortcut {
    /// A shortcut to the node at `ptr` of class `size_class` and version `version`.
    ///
    /// Fails when `ptr` is not 64-byte aligned or beyond the first 64 GiB, or when
    /// `size_class` is not a size class.
    pub(crate) fn new(
        ptr: RemotePtr,
        size_class: usize,
        version: u32,
    ) -> Result<Shortcut, LayoutError> {
        if !ptr.is_aligned(NODE_ALIGN) || ptr.offset() >= MAX_SUCCESSOR_OFFSET {
            return Err(LayoutError::OutOfRange(format!(
                "shortcut target {ptr:?} is unaligned or beyond {MAX_SUCCESSOR_OFFSET:#x}"
            )));
        }
        if crate::size_class::class_index(size_class).is_none() {
            return Err(LayoutError::OutOfRange(format!(
                "{size_class} is not a size class"
            )));
        }
        Ok(Shortcut {
            ptr,
            size_class,
            version: version & VERSION_MASK,
        })
    }

    /// Pack into the 64-bit word.
    pub(crate) fn pack(self) -> u64 {
        let class = crate::size_class::class_index(self.size_class).unwrap_or_default() as u64;
        (u64::from(self.version & VERSION_MASK) << VERSION_SHIFT)
            | (class << CLASS_SHIFT)
            | (u64::from(self.ptr.memnode()) << MEMNODE_SHIFT)
            | (self.ptr.offset() / NODE_ALIGN)
    }

    /// Unpack a word; fails on a class index beyond the table.
    pub(crate) fn unpack(word: u64) -> Result<Shortcut, LayoutError> {
        let line = word & ((1 << LINE_BITS) - 1);
        // Each cast keeps exactly the bits of its field.
        let memnode = (word >> MEMNODE_SHIFT) as u8;
        let class = ((word >> CLASS_SHIFT) & ((1 << CLASS_BITS) - 1)) as usize;
        let version = (word >> VERSION_SHIFT) as u32 & VERSION_MASK;
        let Some(&size_class) = SIZE_CLASSES.get(class) else {
            return Err(LayoutError::OutOfRange(format!(
                "shortcut class index {class} (there are {NUM_CLASSES})"
            )));
        };
        Ok(Shortcut {
            ptr: RemotePtr::from_parts_masked(memnode, line * NODE_ALIGN),
            size_class,
            version,
        })
    }

    /// Whether a node of version `version` is the one this word names (low bits equal).
    pub(crate) fn names_version(self, version: u32) -> bool {
        version & VERSION_MASK == self.version
    }

    /// Whether this word names a node strictly before one of version `version`
    /// (comparing the low bits modulo 2^21, within half the space).
    pub(crate) fn is_before(self, version: u32) -> bool {
        version_before(self.version, version & VERSION_MASK)
    }
}

/// Whether version `a` precedes version `b`, both taken modulo 2^[`VERSION_BITS`] and
/// assumed less than 2^20 apart.
pub(crate) fn version_before(a: u32, b: u32) -> bool {
    let d = b.wrapping_sub(a) & VERSION_MASK;
    d != 0 && d < (1 << (VERSION_BITS - 1))
}

/// Encode a root object for `chain_id` whose shortcut is `shortcut`.
pub(crate) fn encode_root(chain_id: u64, shortcut: Shortcut) -> Vec<u8> {
    let mut buf = Vec::with_capacity(ROOT_SIZE);
    buf.extend_from_slice(&shortcut.pack().to_le_bytes());
    buf.extend_from_slice(&chain_id.to_le_bytes());
    buf.resize(ROOT_SIZE, 0);
    buf
}

/// Decode the first [`ROOT_READ`] bytes of a root: the shortcut word (raw and
/// decoded) and the chain id.
pub(crate) fn decode_root(buf: &[u8]) -> Result<(u64, Shortcut, u64), LayoutError> {
    let word = |at: usize| {
        buf.get(at..at + 8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_le_bytes)
            .ok_or(LayoutError::Truncated {
                need: ROOT_READ,
                have: buf.len(),
            })
    };
    let raw = word(SHORTCUT_AT)?;
    let chain_id = word(ROOT_CHAIN_ID_AT)?;
    Ok((raw, Shortcut::unpack(raw)?, chain_id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn exact_bits() {
        let s = Shortcut::new(RemotePtr::new(3, 64 * 7).unwrap(), 192, 5).unwrap();
        assert_eq!(s.pack(), (5 << 43) | (2 << 38) | (3 << 30) | 7);
        assert_eq!(Shortcut::unpack(s.pack()), Ok(s));
        assert!(Shortcut::new(RemotePtr::new(0, 65).unwrap(), 64, 1).is_err());
        assert!(Shortcut::new(RemotePtr::new(0, 64).unwrap(), 100, 1).is_err());
        assert!(Shortcut::unpack(31 << 38).is_err());
    }

    #[test]
    fn versions_compare_modulo() {
        assert!(version_before(1, 2));
        assert!(!version_before(2, 2));
        assert!(!version_before(3, 2));
        assert!(version_before(VERSION_MASK, 0), "wraps");
        let s = Shortcut::new(RemotePtr::new(1, 0).unwrap(), 64, (1 << 21) + 9).unwrap();
        assert_eq!(s.version, 9);
        assert!(s.names_version((1 << 22) + 9));
        assert!(s.is_before(10));
        assert!(!s.is_before(9));
    }

    #[test]
    fn root_round_trip() {
        let s = Shortcut::new(RemotePtr::new(2, 4096).unwrap(), 1024, 77).unwrap();
        let buf = encode_root(0xabc, s);
        assert_eq!(buf.len(), ROOT_SIZE);
        assert_eq!(decode_root(&buf), Ok((s.pack(), s, 0xabc)));
        assert!(decode_root(&buf[..15]).is_err());
    }

    proptest! {
        #[test]
        fn unpack_never_panics(w: u64) {
            if let Ok(s) = Shortcut::unpack(w) {
                prop_assert_eq!(Shortcut::unpack(s.pack()), Ok(s));
            }
        }
    }
}
