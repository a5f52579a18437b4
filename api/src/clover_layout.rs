//! The Clover version node's remote layout: what the client library (which writes
//! and links nodes) and a memory node's RPC workers (which walk chains next to
//! memory) must agree on.
//!
//! Node (little-endian), padded to its size class ([`crate::layout::SIZE_CLASSES`]):
//!
//! ```text
//!  0 header u64 | 8 chain id u64 | 16 key length u16 | 18 class index u8 | 19 zero
//! 20 value length u32 | 24 version u32 | 28 CRC-32 over bytes 8..24, key, value
//! 32 key | value
//! ```
//!
//! Header word: bit 63 has-successor, bit 62 tombstone, bits 46–61 the node's own
//! generation, bits 38–45 the successor's generation tag (low 8 bits of its
//! generation), bits 30–37 the successor's memnode, bits 0–29 its offset in 64-byte
//! lines. The successor bits are zero while the has-successor bit is clear.

use crate::layout::SIZE_CLASSES;

/// Bit 63 of a header: a successor is linked.
pub const HAS_SUCCESSOR: u64 = 1 << 63;
/// Bit 62 of a header: the node is a tombstone.
pub const TOMBSTONE: u64 = 1 << 62;
/// Shift of a header's own 16-bit generation.
pub const OWN_GEN_SHIFT: u32 = 46;
/// Shift of a header's successor generation tag.
pub const SUCC_GEN_SHIFT: u32 = 38;
/// Shift of a header's successor memnode.
pub const SUCC_MEMNODE_SHIFT: u32 = 30;
/// Width of a header's successor line offset.
pub const SUCC_LINE_BITS: u32 = 30;
/// Mask of a header's successor fields.
pub const SUCCESSOR_FIELDS: u64 = (1 << OWN_GEN_SHIFT) - 1;
/// Node alignment in bytes.
pub const NODE_ALIGN: u64 = 64;

/// Offset of the chain id.
pub const CHAIN_ID_AT: usize = 8;
/// Offset of the key length.
pub const KEY_LEN_AT: usize = 16;
/// Offset of the size class index.
pub const CLASS_AT: usize = 18;
/// Offset of the reserved byte.
pub const RESERVED_AT: usize = 19;
/// Offset of the value length.
pub const VALUE_LEN_AT: usize = 20;
/// Offset of the version.
pub const VERSION_AT: usize = 24;
/// Offset of the CRC-32.
pub const CRC_AT: usize = 28;
/// Offset of the key; also the fixed prefix's length.
pub const NODE_PREFIX: usize = 32;
/// Longest key.
pub const MAX_KEY_BYTES: usize = 256;

/// Offset of the shortcut word in a chain's root.
pub const ROOT_SHORTCUT_AT: usize = 0;
/// Offset of the chain id in a chain's root.
pub const ROOT_CHAIN_ID_AT: usize = 8;
/// Bytes of a root a reader needs: the shortcut word and the chain id.
pub const ROOT_READ: usize = 16;
/// Shift of a shortcut word's memnode (its low 30 bits are the node's line).
pub const SHORTCUT_MEMNODE_SHIFT: u32 = 30;
/// Shift of a shortcut word's 5-bit size class index.
pub const SHORTCUT_CLASS_SHIFT: u32 = 38;
/// Width of a shortcut word's size class index.
pub const SHORTCUT_CLASS_BITS: u32 = 5;
/// Shift of a shortcut word's low version bits.
pub const SHORTCUT_VERSION_SHIFT: u32 = 43;
/// Version bits a shortcut word keeps.
pub const SHORTCUT_VERSION_BITS: u32 = 21;

/// The node a root's shortcut word names (`version bits 21 | class 5 | memnode 8 |
/// line 30`, bit 0 least significant): (memnode, byte offset, size class index, low
/// [`SHORTCUT_VERSION_BITS`] bits of its version).
pub fn shortcut_target(word: u64) -> (u8, u64, u8, u32) {
    let line = word & ((1 << SUCC_LINE_BITS) - 1);
    let class = ((word >> SHORTCUT_CLASS_SHIFT) & ((1 << SHORTCUT_CLASS_BITS) - 1)) as u8;
    let version = (word >> SHORTCUT_VERSION_SHIFT) as u32 & ((1 << SHORTCUT_VERSION_BITS) - 1);
    (
        (word >> SHORTCUT_MEMNODE_SHIFT) as u8,
        line * NODE_ALIGN,
        class,
        version,
    )
}

/// A header's own generation.
pub fn header_generation(header: u64) -> u16 {
    (header >> OWN_GEN_SHIFT) as u16
}

/// A header's linked successor: (memnode, byte offset, generation tag); `None` when
/// none is linked. `Err(())` for a header no client writes (successor bits without
/// the flag).
#[allow(clippy::result_unit_err)]
pub fn header_successor(header: u64) -> Result<Option<(u8, u64, u8)>, ()> {
    if header & HAS_SUCCESSOR == 0 {
        return if header & SUCCESSOR_FIELDS == 0 {
            Ok(None)
        } else {
            Err(())
        };
    }
    let line = header & ((1 << SUCC_LINE_BITS) - 1);
    Ok(Some((
        (header >> SUCC_MEMNODE_SHIFT) as u8,
        line * NODE_ALIGN,
        (header >> SUCC_GEN_SHIFT) as u8,
    )))
}

/// What a node holds, after its checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeFields<'a> {
    /// The header word as read.
    pub header: u64,
    /// The chain id.
    pub chain_id: u64,
    /// The version.
    pub version: u32,
    /// The size class index.
    pub class_index: u8,
    /// The key.
    pub key: &'a [u8],
    /// The value (empty for a tombstone).
    pub value: &'a [u8],
}

/// Why a node does not parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeError {
    /// The buffer is shorter than the node; a read of this many bytes holds it.
    Truncated(usize),
    /// A field, the CRC or the header is not what a client writes.
    Invalid,
}

/// Parse and check the node at the start of `buf`: reserved byte zero, key length
/// at most [`MAX_KEY_BYTES`], a known size class the node fits, no value in a
/// tombstone, a valid header, a matching CRC.
pub fn parse_node(buf: &[u8]) -> Result<NodeFields<'_>, NodeError> {
    let Some(p) = buf.get(..NODE_PREFIX) else {
        return Err(NodeError::Truncated(NODE_PREFIX));
    };
    let le64 = |at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&p[at..at + 8]);
        u64::from_le_bytes(w)
    };
    let le32 = |at: usize| u32::from_le_bytes([p[at], p[at + 1], p[at + 2], p[at + 3]]);
    let header = le64(0);
    let key_len = usize::from(u16::from_le_bytes([p[KEY_LEN_AT], p[KEY_LEN_AT + 1]]));
    let class_index = p[CLASS_AT];
    let value_len = le32(VALUE_LEN_AT) as usize;
    if p[RESERVED_AT] != 0 || key_len > MAX_KEY_BYTES || header_successor(header).is_err() {
        return Err(NodeError::Invalid);
    }
    let Some(&class) = SIZE_CLASSES.get(usize::from(class_index)) else {
        return Err(NodeError::Invalid);
    };
    let total = NODE_PREFIX + key_len + value_len;
    if total > class || (header & TOMBSTONE != 0 && value_len != 0) {
        return Err(NodeError::Invalid);
    }
    let Some(body) = buf.get(NODE_PREFIX..total) else {
        return Err(NodeError::Truncated(class));
    };
    let mut h = crc32fast::Hasher::new();
    h.update(&p[CHAIN_ID_AT..VERSION_AT]);
    h.update(body);
    if h.finalize() != le32(CRC_AT) {
        return Err(NodeError::Invalid);
    }
    let (key, value) = body.split_at(key_len);
    Ok(NodeFields {
        header,
        chain_id: le64(CHAIN_ID_AT),
        version: le32(VERSION_AT),
        class_index,
        key,
        value,
    })
}

/// A node's bytes (for tests and tools): padded to the size class with index
/// `class_index`; `None` when the node does not fit it or the key is too long.
pub fn encode_node(
    header: u64,
    chain_id: u64,
    version: u32,
    class_index: u8,
    key: &[u8],
    value: &[u8],
) -> Option<Vec<u8>> {
    let class = *SIZE_CLASSES.get(usize::from(class_index))?;
    let total = NODE_PREFIX
        .checked_add(key.len())?
        .checked_add(value.len())?;
    if key.len() > MAX_KEY_BYTES || total > class {
        return None;
    }
    let mut b = Vec::with_capacity(class);
    b.extend_from_slice(&header.to_le_bytes());
    b.extend_from_slice(&chain_id.to_le_bytes());
    b.extend_from_slice(&u16::try_from(key.len()).ok()?.to_le_bytes());
    b.push(class_index);
    b.push(0);
    b.extend_from_slice(&u32::try_from(value.len()).ok()?.to_le_bytes());
    b.extend_from_slice(&version.to_le_bytes());
    let mut h = crc32fast::Hasher::new();
    h.update(&b[CHAIN_ID_AT..VERSION_AT]);
    h.update(key);
    h.update(value);
    b.extend_from_slice(&h.finalize().to_le_bytes());
    b.extend_from_slice(key);
    b.extend_from_slice(value);
    b.resize(class, 0);
    Some(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngSeed};

    #[test]
    fn nodes_round_trip_and_are_checked() {
        let header = (7u64 << OWN_GEN_SHIFT)
            | HAS_SUCCESSOR
            | (3 << SUCC_GEN_SHIFT)
            | (2 << SUCC_MEMNODE_SHIFT)
            | 5;
        let b = encode_node(header, 42, 9, 1, b"key", b"value").unwrap();
        assert_eq!(b.len(), 128);
        let n = parse_node(&b).unwrap();
        assert_eq!(
            (n.header, n.chain_id, n.version, n.class_index),
            (header, 42, 9, 1)
        );
        assert_eq!((n.key, n.value), (&b"key"[..], &b"value"[..]));
        assert_eq!(header_generation(header), 7);
        assert_eq!(header_successor(header), Ok(Some((2, 5 * 64, 3))));
        assert_eq!(header_successor(7 << OWN_GEN_SHIFT), Ok(None));
        assert_eq!(header_successor(1), Err(()));
        assert_eq!(parse_node(&b[..20]), Err(NodeError::Truncated(NODE_PREFIX)));
        let mut bad = b.clone();
        bad[33] ^= 1;
        assert_eq!(parse_node(&bad), Err(NodeError::Invalid));
        // A big node read short asks for its whole class.
        let big = encode_node(0, 1, 1, 5, b"k", &[1; 300]).unwrap();
        assert_eq!(parse_node(&big[..64]), Err(NodeError::Truncated(512)));
        assert_eq!(
            encode_node(0, 1, 1, 0, b"k", &[0; 64]),
            None,
            "too big for 64 B"
        );
    }

    proptest! {
        #![proptest_config(Config {
            cases: 256,
            rng_seed: RngSeed::Fixed(0xc10e),
            failure_persistence: None,
            ..Config::default()
        })]

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(n) = parse_node(&bytes) {
                prop_assert!(n.key.len() <= MAX_KEY_BYTES);
            }
        }
    }
}
