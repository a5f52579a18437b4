//! The RACE KV block: an immutable, out-of-place key-value record a slot points to.
//!
//! Layout (little-endian), zero-padded to a whole number of 64-byte lines:
//!
//! ```text
//! offset  size  field
//!      0     2  key length k (≤ MAX_KEY_LEN)
//!      2     2  reserved, zero
//!      4     4  value length v
//!      8     k  key
//!    8+k     v  value
//!  8+k+v     4  CRC-32 (IEEE) over bytes 0 .. 8+k+v
//! ```
//!
//! A block is written completely before any slot points at it and never changes
//! afterwards; an update writes a new block and swings the slot. A reader always
//! verifies the CRC (a block being reclaimed or a torn read fails it) and the key
//! (fingerprints collide). The whole block must fit the slot's length field:
//! at most [`MAX_BLOCK_BYTES`] bytes, so `k + v ≤ 16308`.

use crate::error::{KvError, LayoutError, MAX_KEY_LEN};

use super::slot::{LINE, MAX_BLOCK_BYTES};

/// The block's fixed parts, shared with the memory node's RPC workers ([`dmkv_api::race_layout`]).
pub(crate) use dmkv_api::race_layout::{BLOCK_CRC_BYTES as CRC_BYTES, BLOCK_PREFIX};

/// Bytes a block for this key and value occupies before padding.
pub(crate) fn block_len(key_len: usize, value_len: usize) -> usize {
    BLOCK_PREFIX
        .saturating_add(key_len)
        .saturating_add(value_len)
        .saturating_add(CRC_BYTES)
}

/// The largest value a block can hold next to a key of `key_len` bytes.
pub(crate) fn max_value_len(key_len: usize) -> usize {
    MAX_BLOCK_BYTES.saturating_sub(block_len(key_len, 0))
}

/// Encode a block, padded to whole 64-byte lines (the length a slot records).
pub(crate) fn encode(key: &[u8], value: &[u8]) -> Result<Vec<u8>, KvError> {
    crate::error::check_key(key)?;
    if value.len() > max_value_len(key.len()) {
        return Err(KvError::ValueTooLarge {
            len: value.len(),
            limit: max_value_len(key.len()),
        });
    }
    let (Ok(key_len), Ok(value_len)) = (u16::try_from(key.len()), u32::try_from(value.len()))
    else {
        return Err(KvError::InvalidArgument("length out of range".into()));
    };
    let len = block_len(key.len(), value.len());
    let mut buf = Vec::with_capacity(len.next_multiple_of(LINE));
    buf.extend_from_slice(&key_len.to_le_bytes());
    buf.extend_from_slice(&[0, 0]);
    buf.extend_from_slice(&value_len.to_le_bytes());
    buf.extend_from_slice(key);
    buf.extend_from_slice(value);
    let crc = crc32fast::hash(&buf);
    buf.extend_from_slice(&crc.to_le_bytes());
    buf.resize(len.next_multiple_of(LINE), 0);
    Ok(buf)
}

/// A verified, zero-copy view of a KV block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KvBlock<'a> {
    key: &'a [u8],
    value: &'a [u8],
}

impl<'a> KvBlock<'a> {
    /// Parse and verify a block from the start of `buf` (bytes after the trailer are ignored).
    pub(crate) fn parse(buf: &'a [u8]) -> Result<KvBlock<'a>, LayoutError> {
        let Some(prefix) = buf
            .get(..BLOCK_PREFIX)
            .and_then(|p| <&[u8; BLOCK_PREFIX]>::try_from(p).ok())
        else {
            return Err(LayoutError::Truncated {
                need: BLOCK_PREFIX,
                have: buf.len(),
            });
        };
        let key_len = usize::from(u16::from_le_bytes([prefix[0], prefix[1]]));
        let reserved = u16::from_le_bytes([prefix[2], prefix[3]]);
        let value_len = u32::from_le_bytes([prefix[4], prefix[5], prefix[6], prefix[7]]) as usize;
        if reserved != 0 {
            return Err(LayoutError::Reserved(format!(
                "KV block bytes 2..4 are {reserved:#06x}"
            )));
        }
        if key_len > MAX_KEY_LEN {
            return Err(LayoutError::BadLength(format!(
                "key length {key_len} exceeds {MAX_KEY_LEN}"
            )));
        }
        let len = block_len(key_len, value_len);
        if len > MAX_BLOCK_BYTES {
            return Err(LayoutError::BadLength(format!(
                "block of {len} bytes exceeds {MAX_BLOCK_BYTES}"
            )));
        }
        let body_end = len - CRC_BYTES;
        let (Some(covered), Some(trailer)) = (buf.get(..body_end), buf.get(body_end..len)) else {
            return Err(LayoutError::Truncated {
                need: len,
                have: buf.len(),
            });
        };
        let mut t = [0u8; CRC_BYTES];
        t.copy_from_slice(trailer);
        let stored = u32::from_le_bytes(t);
        let computed = crc32fast::hash(covered);
        if stored != computed {
            return Err(LayoutError::Checksum { stored, computed });
        }
        let (key, value) = covered
            .get(BLOCK_PREFIX..)
            .unwrap_or_default()
            .split_at_checked(key_len)
            .unwrap_or_default();
        Ok(KvBlock { key, value })
    }

    /// The key.
    pub(crate) fn key(&self) -> &'a [u8] {
        self.key
    }

    /// The value.
    pub(crate) fn value(&self) -> &'a [u8] {
        self.value
    }

    /// Whether this block holds `key` (fingerprints collide; always check).
    pub(crate) fn key_matches(&self, key: &[u8]) -> bool {
        self.key == key
    }
}

/// Parse `buf` as the block of `key`: verify the CRC and the key, return the value.
///
/// `Ok(None)` means the block is intact but belongs to another key (a fingerprint collision).
pub(crate) fn value_for<'a>(buf: &'a [u8], key: &[u8]) -> Result<Option<&'a [u8]>, LayoutError> {
    let block = KvBlock::parse(buf)?;
    Ok(block.key_matches(key).then_some(block.value()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The memory node's parser and encoder (`dmkv_api::race_layout`) agree with
    /// these on every block.
    #[test]
    fn the_shared_layout_agrees() {
        for (k, v) in [
            (&b"k"[..], &b""[..]),
            (b"user:1", b"value"),
            (&[7u8; 256][..], &[1u8; 300][..]),
        ] {
            let b = encode(k, v).unwrap();
            assert_eq!(dmkv_api::race_layout::encode_block(k, v), Some(b.clone()));
            assert_eq!(dmkv_api::race_layout::parse_block(&b), Some((k, v)));
            let parsed = KvBlock::parse(&b).unwrap();
            assert_eq!((parsed.key(), parsed.value()), (k, v));
        }
    }
    use proptest::prelude::*;

    #[test]
    fn exact_layout() {
        let buf = encode(b"key", b"value").unwrap();
        assert_eq!(buf.len(), 64);
        assert_eq!(&buf[..8], &[3, 0, 0, 0, 5, 0, 0, 0]);
        assert_eq!(&buf[8..16], b"keyvalue");
        assert_eq!(&buf[16..20], &crc32fast::hash(&buf[..16]).to_le_bytes());
        assert!(buf[20..].iter().all(|&b| b == 0));
        let b = KvBlock::parse(&buf).unwrap();
        assert_eq!((b.key(), b.value()), (&b"key"[..], &b"value"[..]));
        assert_eq!(value_for(&buf, b"key"), Ok(Some(&b"value"[..])));
        assert_eq!(value_for(&buf, b"kez"), Ok(None));
    }

    #[test]
    fn padding_to_lines() {
        assert_eq!(encode(b"", &[0; 52]).unwrap().len(), 64);
        assert_eq!(encode(b"", &[0; 53]).unwrap().len(), 128);
        let limit = max_value_len(10);
        assert_eq!(limit, 16320 - 22);
        assert_eq!(
            encode(&[1; 10], &vec![2; limit]).unwrap().len(),
            MAX_BLOCK_BYTES
        );
        assert_eq!(
            encode(&[1; 10], &vec![2; limit + 1]),
            Err(KvError::ValueTooLarge {
                len: limit + 1,
                limit
            })
        );
        assert!(matches!(
            encode(&[0; 257], b""),
            Err(KvError::KeyTooLarge { .. })
        ));
    }

    #[test]
    fn corruption_and_truncation() {
        let buf = encode(b"key", b"value").unwrap();
        for i in 0..20 {
            let mut bad = buf.clone();
            bad[i] ^= 1;
            assert!(KvBlock::parse(&bad).is_err(), "flip at {i} accepted");
        }
        assert_eq!(
            KvBlock::parse(&buf[..19]),
            Err(LayoutError::Truncated { need: 20, have: 19 })
        );
        assert!(KvBlock::parse(&buf[..5]).is_err());
        assert!(KvBlock::parse(&[0xff; 64]).is_err());
    }

    proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = KvBlock::parse(&bytes);
        }

        #[test]
        fn parse_never_panics_on_plausible_lengths(k in 0u16..300, v in 0u32..20_000, tail in proptest::collection::vec(any::<u8>(), 0..400)) {
            let mut buf = Vec::new();
            buf.extend_from_slice(&k.to_le_bytes());
            buf.extend_from_slice(&[0, 0]);
            buf.extend_from_slice(&v.to_le_bytes());
            buf.extend_from_slice(&tail);
            let _ = KvBlock::parse(&buf);
        }

        #[test]
        fn round_trip(key in proptest::collection::vec(any::<u8>(), 0..=MAX_KEY_LEN), value in proptest::collection::vec(any::<u8>(), 0..2000)) {
            let buf = encode(&key, &value).unwrap();
            prop_assert_eq!(buf.len() % LINE, 0);
            let b = KvBlock::parse(&buf).unwrap();
            prop_assert_eq!(b.key(), &key[..]);
            prop_assert_eq!(b.value(), &value[..]);
        }
    }
}
