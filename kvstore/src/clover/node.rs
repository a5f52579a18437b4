//! The Clover version node: an immutable, 64-byte aligned record of one version of a key.
//!
//! Layout (little-endian integers), padded with zeros to the node's size class:
//!
//! ```text
//! offset  size  field
//!      0     8  header word (see `header`: successor, generations, flags) — changed only by CAS
//!      8     8  chain id: unique per key, assigned at insert (the switch reads it here)
//!     16     2  key length k (≤ MAX_KEY_LEN)
//!     18     1  size class index (position in SIZE_CLASSES) the node was written with
//!     19     1  reserved, zero
//!     20     4  value length v (zero for a tombstone)
//!     24     4  version: the node's position in its chain (predecessor's + 1, wrapping)
//!     28     4  CRC-32 (IEEE) over bytes 8..24, then the key and the value
//!     32     k  key
//!   32+k     v  value
//! 32+k+v        zero padding up to the size class
//! ```
//!
//! The CRC leaves out the version, which the switch accelerator's write steering
//! rewrites in flight (a node linked after another tail than its writer read gets
//! that tail's version + 1; see `accel-p4`'s `write_steer`); readers check the version
//! against the link they followed instead. The CRC leaves out the header, the one word
//! that changes after the node is
//! written; it catches a node read while its memory is being reused. The class
//! index lets a reader that fetched too few bytes learn how many to fetch
//! ([`LayoutError::Truncated`] carries the length needed).
//!
//! The version makes every node reached through a pointer checkable against where
//! the pointer came from: a successor has its predecessor's version plus one, and a
//! node whose memory was reclaimed and reused by the same chain carries a larger
//! version, so a stale pointer into reused memory fails validation even when the
//! generation tags happen to agree.

use crate::error::{KvError, LayoutError, MAX_KEY_LEN};
use crate::size_class::{self, MAX_CLASS, NUM_CLASSES, SIZE_CLASSES};

use super::header::Header;

/// The node's fields, shared with the memory node's RPC workers ([`dmkv_api::clover_layout`]).
pub(crate) use dmkv_api::clover_layout::{
    CHAIN_ID_AT, CLASS_AT, CRC_AT, KEY_LEN_AT, NODE_PREFIX, RESERVED_AT, VALUE_LEN_AT, VERSION_AT,
};

/// Offset of the header word.
pub(crate) const HEADER_AT: usize = 0;
/// Offset of the key; also the fixed prefix length.
pub(crate) const KEY_AT: usize = NODE_PREFIX;

/// A decoded node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NodeRepr {
    /// The header word as read (or as it will be first written).
    pub header: Header,
    /// The key's chain id.
    pub chain_id: u64,
    /// The node's position in its chain: its predecessor's version plus one (wrapping).
    pub version: u32,
    /// The key.
    pub key: Vec<u8>,
    /// The value (empty for a tombstone).
    pub value: Vec<u8>,
}

impl NodeRepr {
    /// Whether the node is a tombstone.
    #[cfg(test)]
    pub fn is_tombstone(&self) -> bool {
        self.header.tombstone
    }
}

/// The largest value a node can carry for a key of `key_len` bytes.
pub(crate) fn max_value_len(key_len: usize) -> usize {
    MAX_CLASS.saturating_sub(NODE_PREFIX + key_len)
}

/// The size class of a node holding a key and value of these lengths.
///
/// Fails with [`KvError::KeyTooLarge`] or [`KvError::ValueTooLarge`] when no class fits.
pub(crate) fn size_class_for(key_len: usize, value_len: usize) -> Result<usize, KvError> {
    if key_len > MAX_KEY_LEN {
        return Err(KvError::KeyTooLarge {
            len: key_len,
            limit: MAX_KEY_LEN,
        });
    }
    let too_large = KvError::ValueTooLarge {
        len: value_len,
        limit: max_value_len(key_len),
    };
    let need = value_len
        .checked_add(NODE_PREFIX + key_len)
        .ok_or_else(|| too_large.clone())?;
    size_class::class_for_len(need).ok_or(too_large)
}

fn crc(buf_fields: &[u8], key_value: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(buf_fields);
    h.update(key_value);
    h.finalize()
}

/// Encode `node` into a buffer of exactly `size_class` bytes, ready for one WRITE.
///
/// Fails when the key is too long, a tombstone carries a value, `size_class` is not
/// a class, or the node does not fit in it.
pub(crate) fn encode(node: &NodeRepr, size_class: usize) -> Result<Vec<u8>, KvError> {
    let class_index = size_class::class_index(size_class)
        .ok_or_else(|| KvError::InvalidArgument(format!("{size_class} is not a size class")))?;
    let need = size_class_for(node.key.len(), node.value.len())?;
    if need > size_class {
        return Err(KvError::ValueTooLarge {
            len: node.value.len(),
            limit: size_class.saturating_sub(NODE_PREFIX + node.key.len()),
        });
    }
    if node.header.tombstone && !node.value.is_empty() {
        return Err(KvError::InvalidArgument(
            "a tombstone node carries no value".into(),
        ));
    }
    let (Ok(key_len), Ok(value_len), Ok(class_byte)) = (
        u16::try_from(node.key.len()),
        u32::try_from(node.value.len()),
        u8::try_from(class_index),
    ) else {
        return Err(KvError::InvalidArgument("length out of range".into()));
    };
    let mut buf = Vec::with_capacity(size_class);
    buf.extend_from_slice(&node.header.pack().to_le_bytes());
    buf.extend_from_slice(&node.chain_id.to_le_bytes());
    buf.extend_from_slice(&key_len.to_le_bytes());
    buf.push(class_byte);
    buf.push(0);
    buf.extend_from_slice(&value_len.to_le_bytes());
    buf.extend_from_slice(&node.version.to_le_bytes());
    let mut h = crc32fast::Hasher::new();
    h.update(&buf[CHAIN_ID_AT..VERSION_AT]);
    h.update(&node.key);
    h.update(&node.value);
    buf.extend_from_slice(&h.finalize().to_le_bytes());
    buf.extend_from_slice(&node.key);
    buf.extend_from_slice(&node.value);
    buf.resize(size_class, 0);
    Ok(buf)
}

fn word(buf: &[u8], at: usize) -> Result<u64, LayoutError> {
    buf.get(at..at + 8)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_le_bytes)
        .ok_or(LayoutError::Truncated {
            need: at + 8,
            have: buf.len(),
        })
}

/// The header word of a node from the first 8 bytes of `buf` (a header-only READ).
pub(crate) fn read_header(buf: &[u8]) -> Result<Header, LayoutError> {
    Header::unpack(word(buf, HEADER_AT)?)
}

/// The chain id of a node from the first 16 bytes of `buf`.
pub(crate) fn read_chain_id(buf: &[u8]) -> Result<u64, LayoutError> {
    word(buf, CHAIN_ID_AT)
}

/// A checked, zero-copy view of a node in a buffer (typically a READ's payload).
#[derive(Debug, Clone, Copy)]
pub(crate) struct NodeView<'a> {
    buf: &'a [u8],
    header: Header,
    version: u32,
    key_len: usize,
    value_len: usize,
    size_class: usize,
}

impl<'a> NodeView<'a> {
    /// Validate `buf` as a node: every length within limits and within the buffer,
    /// reserved fields zero, a known size class that holds the node, no value on a
    /// tombstone, and a matching CRC. Bytes after the value are ignored.
    ///
    /// A buffer too short for the lengths it declares yields
    /// [`LayoutError::Truncated`] with the length a complete read needs.
    pub(crate) fn new_checked(buf: &'a [u8]) -> Result<NodeView<'a>, LayoutError> {
        let Some(prefix) = buf
            .get(..NODE_PREFIX)
            .and_then(|p| <&[u8; NODE_PREFIX]>::try_from(p).ok())
        else {
            return Err(LayoutError::Truncated {
                need: NODE_PREFIX,
                have: buf.len(),
            });
        };
        let header = read_header(prefix)?;
        let key_len = usize::from(u16::from_le_bytes([
            prefix[KEY_LEN_AT],
            prefix[KEY_LEN_AT + 1],
        ]));
        let class_index = usize::from(prefix[CLASS_AT]);
        let reserved = prefix[RESERVED_AT];
        let value_len = u32::from_le_bytes([
            prefix[VALUE_LEN_AT],
            prefix[VALUE_LEN_AT + 1],
            prefix[VALUE_LEN_AT + 2],
            prefix[VALUE_LEN_AT + 3],
        ]) as usize;
        let stored = u32::from_le_bytes([
            prefix[CRC_AT],
            prefix[CRC_AT + 1],
            prefix[CRC_AT + 2],
            prefix[CRC_AT + 3],
        ]);
        if reserved != 0 {
            return Err(LayoutError::Reserved(format!(
                "node byte 19 is {reserved:#04x}"
            )));
        }
        if key_len > MAX_KEY_LEN {
            return Err(LayoutError::BadLength(format!(
                "key length {key_len} exceeds {MAX_KEY_LEN}"
            )));
        }
        let Some(&size_class) = SIZE_CLASSES.get(class_index) else {
            return Err(LayoutError::OutOfRange(format!(
                "size class index {class_index} (there are {NUM_CLASSES})"
            )));
        };
        let total = NODE_PREFIX + key_len + value_len;
        if total > size_class {
            return Err(LayoutError::BadLength(format!(
                "{total} bytes of node in a {size_class}-byte size class"
            )));
        }
        if header.tombstone && value_len != 0 {
            return Err(LayoutError::BadLength(format!(
                "tombstone with a {value_len}-byte value"
            )));
        }
        let Some(body) = buf.get(NODE_PREFIX..total) else {
            return Err(LayoutError::Truncated {
                need: total,
                have: buf.len(),
            });
        };
        let computed = crc(&prefix[CHAIN_ID_AT..VERSION_AT], body);
        if computed != stored {
            return Err(LayoutError::Checksum { stored, computed });
        }
        let version = u32::from_le_bytes([
            prefix[VERSION_AT],
            prefix[VERSION_AT + 1],
            prefix[VERSION_AT + 2],
            prefix[VERSION_AT + 3],
        ]);
        Ok(NodeView {
            buf,
            header,
            version,
            key_len,
            value_len,
            size_class,
        })
    }

    /// Validate and decode `buf` into an owned [`NodeRepr`].
    #[cfg(test)]
    pub fn parse(buf: &[u8]) -> Result<NodeRepr, LayoutError> {
        let v = NodeView::new_checked(buf)?;
        Ok(NodeRepr {
            header: v.header(),
            chain_id: v.chain_id(),
            version: v.version(),
            key: v.key().to_vec(),
            value: v.value().to_vec(),
        })
    }

    /// The header word.
    pub(crate) fn header(&self) -> Header {
        self.header
    }

    /// The chain id.
    pub(crate) fn chain_id(&self) -> u64 {
        // Checked at construction: the buffer holds the whole prefix.
        read_chain_id(self.buf).unwrap_or_default()
    }

    /// The node's version (position in its chain).
    pub(crate) fn version(&self) -> u32 {
        self.version
    }

    /// The size class the node was written with.
    pub(crate) fn size_class(&self) -> usize {
        self.size_class
    }

    /// The key bytes.
    pub(crate) fn key(&self) -> &'a [u8] {
        self.buf
            .get(KEY_AT..KEY_AT + self.key_len)
            .unwrap_or_default()
    }

    /// The value bytes (empty for a tombstone).
    pub(crate) fn value(&self) -> &'a [u8] {
        let at = KEY_AT + self.key_len;
        self.buf.get(at..at + self.value_len).unwrap_or_default()
    }

    /// Whether the node belongs to `key` in chain `chain_id`: the check a reader makes
    /// before trusting a node reached through a hint or a successor pointer.
    pub(crate) fn belongs_to(&self, chain_id: u64, key: &[u8]) -> bool {
        self.chain_id() == chain_id && self.key() == key
    }

    /// Whether the node's key is `key`.
    #[cfg(test)]
    pub fn key_matches(&self, key: &[u8]) -> bool {
        self.key() == key
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The memory node's encoder and parser (`dmkv_api::clover_layout`) agree with
    /// these on every node.
    #[test]
    fn the_shared_layout_agrees() {
        let successor =
            Successor::new(crate::ptr::RemotePtr::new(2, 640).unwrap(), 0x1234).unwrap();
        for (header, key, value) in [
            (Header::tail(7, false), &b"k"[..], &b"v"[..]),
            (Header::tail(9, true), b"key", b""),
            (
                Header {
                    successor: Some(successor),
                    ..Header::tail(3, false)
                },
                b"user:1",
                &[5u8; 700][..],
            ),
        ] {
            let node = NodeRepr {
                header,
                chain_id: 77,
                version: 12,
                key: key.to_vec(),
                value: value.to_vec(),
            };
            let class = size_class_for(key.len(), value.len()).unwrap();
            let b = encode(&node, class).unwrap();
            let index = u8::try_from(crate::size_class::class_index(class).unwrap()).unwrap();
            assert_eq!(
                dmkv_api::clover_layout::encode_node(header.pack(), 77, 12, index, key, value),
                Some(b.clone())
            );
            let f = dmkv_api::clover_layout::parse_node(&b).unwrap();
            assert_eq!(
                (f.header, f.chain_id, f.version, f.key, f.value),
                (header.pack(), 77, 12, key, value)
            );
            assert_eq!(NodeView::parse(&b).unwrap(), node);
        }
    }
    use crate::clover::header::Successor;
    use crate::ptr::RemotePtr;
    use proptest::prelude::*;

    fn node(key: &[u8], value: &[u8]) -> NodeRepr {
        NodeRepr {
            header: Header::tail(3, false),
            chain_id: 0xfeed_beef_0000_0001,
            version: 0x0102_0304,
            key: key.to_vec(),
            value: value.to_vec(),
        }
    }

    #[test]
    fn exact_layout() {
        let n = node(b"k1", b"hello");
        let buf = encode(&n, 64).unwrap();
        assert_eq!(buf.len(), 64);
        assert_eq!(&buf[0..8], &Header::tail(3, false).pack().to_le_bytes());
        assert_eq!(&buf[8..16], &0xfeed_beef_0000_0001u64.to_le_bytes());
        assert_eq!(&buf[16..18], &[2, 0]);
        assert_eq!(buf[18], 0, "class 64 is index 0");
        assert_eq!(buf[19], 0);
        assert_eq!(&buf[20..24], &[5, 0, 0, 0]);
        assert_eq!(&buf[24..28], &[4, 3, 2, 1]);
        assert_eq!(&buf[32..34], b"k1");
        assert_eq!(&buf[34..39], b"hello");
        assert!(buf[39..].iter().all(|&b| b == 0));
        let mut expect = crc32fast::Hasher::new();
        expect.update(&buf[8..24]);
        expect.update(b"k1hello");
        assert_eq!(&buf[28..32], &expect.finalize().to_le_bytes());
        assert_eq!(NodeView::parse(&buf), Ok(n));
    }

    #[test]
    fn size_classes_for_nodes() {
        assert_eq!(size_class_for(0, 0), Ok(64));
        assert_eq!(size_class_for(4, 28), Ok(64));
        assert_eq!(size_class_for(4, 29), Ok(128));
        assert_eq!(size_class_for(16, 1000), Ok(1536));
        assert_eq!(size_class_for(8, 5000), Ok(6144));
        assert_eq!(size_class_for(8, 10_000), Ok(12288));
        assert_eq!(size_class_for(0, MAX_CLASS - NODE_PREFIX), Ok(MAX_CLASS));
        assert_eq!(
            size_class_for(10, MAX_CLASS),
            Err(KvError::ValueTooLarge {
                len: MAX_CLASS,
                limit: MAX_CLASS - NODE_PREFIX - 10
            })
        );
        assert_eq!(
            size_class_for(MAX_KEY_LEN + 1, 0),
            Err(KvError::KeyTooLarge {
                len: MAX_KEY_LEN + 1,
                limit: MAX_KEY_LEN
            })
        );
        assert!(size_class_for(0, usize::MAX).is_err());
    }

    #[test]
    fn every_class_is_reachable() {
        for (i, &class) in SIZE_CLASSES.iter().enumerate() {
            let value_len = class - NODE_PREFIX - 8;
            assert_eq!(size_class_for(8, value_len), Ok(class));
            let n = node(b"12345678", &vec![0xab; value_len]);
            let buf = encode(&n, class).unwrap();
            assert_eq!(buf[CLASS_AT] as usize, i);
            let v = NodeView::new_checked(&buf).unwrap();
            assert_eq!(v.size_class(), class);
            assert_eq!(v.value().len(), value_len);
        }
    }

    #[test]
    fn encode_rejects_bad_requests() {
        let n = node(b"k", &[1; 100]);
        assert!(matches!(encode(&n, 100), Err(KvError::InvalidArgument(_))));
        assert!(matches!(encode(&n, 64), Err(KvError::ValueTooLarge { .. })));
        let mut t = node(b"k", b"v");
        t.header.tombstone = true;
        assert!(matches!(encode(&t, 64), Err(KvError::InvalidArgument(_))));
        t.value.clear();
        let buf = encode(&t, 64).unwrap();
        assert!(NodeView::parse(&buf).unwrap().is_tombstone());
    }

    #[test]
    fn truncated_reads_say_how_much_to_fetch() {
        let n = node(b"key", &[7; 500]);
        let buf = encode(&n, 768).unwrap();
        assert_eq!(
            NodeView::parse(&buf[..64]),
            Err(LayoutError::Truncated {
                need: NODE_PREFIX + 503,
                have: 64
            })
        );
        assert_eq!(
            NodeView::parse(&buf[..10]),
            Err(LayoutError::Truncated { need: 32, have: 10 })
        );
        // A longer buffer than the node is fine (a READ of a larger guess).
        let mut longer = buf.clone();
        longer.extend_from_slice(&[0xff; 100]);
        assert_eq!(NodeView::parse(&longer), Ok(n));
    }

    #[test]
    fn corruption_is_detected() {
        let n = node(b"key", b"value");
        let buf = encode(&n, 64).unwrap();
        for i in (8..39).filter(|i| !(VERSION_AT..CRC_AT).contains(i)) {
            let mut bad = buf.clone();
            bad[i] ^= 0x10;
            assert!(NodeView::parse(&bad).is_err(), "flip at byte {i} accepted");
        }
        // The version is outside the CRC too (the switch's write steering rewrites it);
        // readers check it against the link they followed.
        let mut moved = buf.clone();
        moved[VERSION_AT] ^= 0x10;
        assert_eq!(NodeView::parse(&moved).unwrap().version, n.version ^ 0x10);
        // The header is outside the CRC: linking changes it without invalidating the node.
        let mut linked = buf.clone();
        let s = Successor::new(RemotePtr::new(0, 128).unwrap(), 1).unwrap();
        let swap = Header::tail(3, false).link(s).swap;
        linked[..8].copy_from_slice(&swap.to_le_bytes());
        let parsed = NodeView::parse(&linked).unwrap();
        assert_eq!(parsed.header.successor, Some(s));
    }

    #[test]
    fn key_checks() {
        let buf = encode(&node(b"abc", b"v"), 64).unwrap();
        let v = NodeView::new_checked(&buf).unwrap();
        assert!(v.key_matches(b"abc"));
        assert!(!v.key_matches(b"abd"));
        assert!(v.belongs_to(0xfeed_beef_0000_0001, b"abc"));
        assert!(!v.belongs_to(1, b"abc"));
        assert_eq!(read_chain_id(&buf), Ok(0xfeed_beef_0000_0001));
        assert_eq!(read_header(&buf[..8]), Ok(Header::tail(3, false)));
        assert!(read_header(&buf[..7]).is_err());
    }

    proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = NodeView::parse(&bytes);
        }

        #[test]
        fn parse_never_panics_on_plausible_prefixes(
            key_len in 0u16..400, class in 0u8..40, value_len in 0u32..2000, tail in proptest::collection::vec(any::<u8>(), 0..600), ts: bool
        ) {
            let mut buf = vec![0u8; NODE_PREFIX];
            if ts { buf[7] = 0x40; }
            buf[16..18].copy_from_slice(&key_len.to_le_bytes());
            buf[18] = class;
            buf[20..24].copy_from_slice(&value_len.to_le_bytes());
            buf.extend_from_slice(&tail);
            let _ = NodeView::parse(&buf);
        }

        #[test]
        fn round_trip(
            key in proptest::collection::vec(any::<u8>(), 0..=MAX_KEY_LEN),
            value in proptest::collection::vec(any::<u8>(), 0..3000),
            generation: u16, chain_id: u64, version: u32, bump in 0usize..3
        ) {
            let n = NodeRepr { header: Header::tail(generation, false), chain_id, version, key, value };
            let min = size_class_for(n.key.len(), n.value.len()).unwrap();
            let i = size_class::class_index(min).unwrap() + bump;
            let class = SIZE_CLASSES[i.min(NUM_CLASSES - 1)];
            let buf = encode(&n, class).unwrap();
            prop_assert_eq!(buf.len(), class);
            prop_assert_eq!(NodeView::parse(&buf), Ok(n));
        }
    }
}
