//! The RACE hash table's remote layout at the word level: what the client library
//! (which builds and changes it) and a memory node's RPC workers (which search and
//! change it next to memory) must agree on bit for bit.
//!
//! - the 8-byte **slot word**: fingerprint 8 | length in 64-byte lines 8 | pointer 48
//!   (memnode 8 | offset 40), whose two low bits are flags ([`MARK`], [`TENTATIVE`])
//!   and bits 2–5 the block's reuse tag ([`TAG_BITS`]);
//! - the 64-byte **bucket**: one header word (local depth 8 | suffix 32 | moving 1)
//!   and 7 slot words; a *combined bucket* is a main bucket and its overflow bucket,
//!   128 contiguous bytes, main first for even bucket numbers and second for odd;
//! - the **KV block**: key length u16 | reserved u16 | value length u32 | key | value
//!   | CRC-32 (IEEE) of everything before it, little-endian, padded to whole lines.
//!
//! Only pure functions of bytes live here; the client library's typed views
//! (`kvstore::race`) use these constants.

/// The empty slot.
pub const EMPTY: u64 = 0;
/// Shift of the fingerprint in a slot word.
pub const FP_SHIFT: u32 = 56;
/// Shift of the length (in lines) in a slot word.
pub const LEN_SHIFT: u32 = 48;
/// Bytes per length unit (and the alignment of KV blocks).
pub const LINE: usize = 64;
/// Largest KV block a slot can describe: 255 lines.
pub const MAX_BLOCK_BYTES: usize = 255 * LINE;
/// A free slot of a subtable being split (no insert takes it).
pub const FROZEN: u64 = 1 << 63;
/// Set in an occupied slot a split is copying.
pub const MARK: u64 = 1;
/// Set in the slot of an insert not yet confirmed; readers ignore such a slot.
pub const TENTATIVE: u64 = 2;
/// Shift of the reuse tag in a slot word.
pub const TAG_SHIFT: u32 = 2;
/// The reuse tag's bits in a slot word.
pub const TAG_BITS: u64 = 0xF << TAG_SHIFT;
/// Bits of a pointer's offset.
pub const PTR_OFFSET_BITS: u32 = 40;
/// Mask of a slot word's 48 pointer bits.
pub const PTR_MASK: u64 = (1 << 48) - 1;

/// Bytes per bucket.
pub const BUCKET_BYTES: usize = 64;
/// Slots per bucket.
pub const SLOTS_PER_BUCKET: usize = 7;
/// Bytes of a combined bucket (main + overflow).
pub const COMBINED_BYTES: usize = 2 * BUCKET_BYTES;
/// Shift of the suffix in a bucket header word.
pub const HEADER_SUFFIX_SHIFT: u32 = 8;
/// Header bit of a subtable a split is still filling.
pub const HEADER_MOVING: u64 = 1 << 40;

/// Bytes of a KV block's fixed prefix (lengths).
pub const BLOCK_PREFIX: usize = 8;
/// Bytes of a KV block's CRC trailer.
pub const BLOCK_CRC_BYTES: usize = 4;
/// Longest key a KV block holds.
pub const MAX_KEY_BYTES: usize = 256;

/// Whether a slot word is tentative (an insert not yet confirmed).
pub fn is_tentative(word: u64) -> bool {
    word != FROZEN && word & TENTATIVE != 0
}

/// Whether a slot word is frozen or marked by a split in progress.
pub fn is_split_word(word: u64) -> bool {
    word == FROZEN || (word != EMPTY && word & MARK != 0)
}

/// The fingerprint of a slot word.
pub fn slot_fingerprint(word: u64) -> u8 {
    (word >> FP_SHIFT) as u8
}

/// Where the KV block of an occupied slot word lives and how long it is: (memnode
/// byte of the pointer, offset, bytes to read). `None` for the empty and frozen
/// words and for words that no client writes (zero length, unaligned pointer).
/// Flag and tag bits are ignored.
pub fn slot_block(word: u64) -> Option<(u8, u64, usize)> {
    if word == EMPTY || word == FROZEN {
        return None;
    }
    let lines = usize::from((word >> LEN_SHIFT) as u8);
    let ptr = word & PTR_MASK & !TAG_BITS & !(MARK | TENTATIVE);
    let offset = ptr & ((1 << PTR_OFFSET_BITS) - 1);
    if lines == 0 || !offset.is_multiple_of(LINE as u64) {
        return None;
    }
    Some(((ptr >> PTR_OFFSET_BITS) as u8, offset, lines * LINE))
}

/// A bucket header word's fields: (local depth, suffix, moving); `None` when
/// reserved bits are set or the suffix has bits above the depth.
pub fn header_fields(word: u64) -> Option<(u8, u32, bool)> {
    if word >> 41 != 0 {
        return None;
    }
    let depth = word as u8;
    let suffix = (word >> HEADER_SUFFIX_SHIFT) as u32;
    if depth > 32 || u64::from(suffix) & !depth_mask(depth) != 0 {
        return None;
    }
    Some((depth, suffix, word & HEADER_MOVING != 0))
}

/// Mask of the low `depth` bits (at most 32).
pub fn depth_mask(depth: u8) -> u64 {
    (1u64 << depth.min(32)) - 1
}

/// Whether a bucket with header word `header` covers a key whose first hash has
/// low 32 bits `suffix` (the stale-directory check). A malformed header covers nothing.
pub fn header_covers(header: u64, suffix: u32) -> bool {
    header_fields(header)
        .is_some_and(|(depth, s, _)| u64::from(suffix) & depth_mask(depth) == u64::from(s))
}

/// The KV block of `key` and `value`, padded to whole lines; `None` when the key
/// is longer than [`MAX_KEY_BYTES`] or the block longer than [`MAX_BLOCK_BYTES`].
pub fn encode_block(key: &[u8], value: &[u8]) -> Option<Vec<u8>> {
    let key_len = u16::try_from(key.len()).ok()?;
    let value_len = u32::try_from(value.len()).ok()?;
    let len = BLOCK_PREFIX
        .checked_add(key.len())?
        .checked_add(value.len())?
        .checked_add(BLOCK_CRC_BYTES)?;
    if key.len() > MAX_KEY_BYTES || len > MAX_BLOCK_BYTES {
        return None;
    }
    let mut buf = Vec::with_capacity(len.next_multiple_of(LINE));
    buf.extend_from_slice(&key_len.to_le_bytes());
    buf.extend_from_slice(&[0, 0]);
    buf.extend_from_slice(&value_len.to_le_bytes());
    buf.extend_from_slice(key);
    buf.extend_from_slice(value);
    let crc = crc32fast::hash(&buf);
    buf.extend_from_slice(&crc.to_le_bytes());
    buf.resize(len.next_multiple_of(LINE), 0);
    Some(buf)
}

/// The key and value of a KV block at the start of `buf`, after checking its
/// reserved bytes, lengths and CRC; `None` when any check fails (a torn or
/// reused block, or bytes that are no block).
pub fn parse_block(buf: &[u8]) -> Option<(&[u8], &[u8])> {
    let prefix = buf.get(..BLOCK_PREFIX)?;
    let key_len = usize::from(u16::from_le_bytes([prefix[0], prefix[1]]));
    let reserved = u16::from_le_bytes([prefix[2], prefix[3]]);
    let value_len = u32::from_le_bytes([prefix[4], prefix[5], prefix[6], prefix[7]]) as usize;
    if reserved != 0 || key_len > MAX_KEY_BYTES {
        return None;
    }
    let len = BLOCK_PREFIX
        .checked_add(key_len)?
        .checked_add(value_len)?
        .checked_add(BLOCK_CRC_BYTES)?;
    if len > MAX_BLOCK_BYTES {
        return None;
    }
    let body_end = len - BLOCK_CRC_BYTES;
    let covered = buf.get(..body_end)?;
    let trailer = buf.get(body_end..len)?;
    let stored = u32::from_le_bytes([trailer[0], trailer[1], trailer[2], trailer[3]]);
    if crc32fast::hash(covered) != stored {
        return None;
    }
    covered.get(BLOCK_PREFIX..)?.split_at_checked(key_len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngSeed};

    fn block(key: &[u8], value: &[u8]) -> Vec<u8> {
        encode_block(key, value).expect("fits")
    }

    #[test]
    fn slot_words() {
        // fp 0xab, 2 lines, memnode 3, offset 0x40, tag 5, tentative.
        let w = 0xab02_0300_0000_0040 | (5 << TAG_SHIFT) | TENTATIVE;
        assert_eq!(slot_fingerprint(w), 0xab);
        assert_eq!(slot_block(w), Some((3, 0x40, 128)));
        assert!(is_tentative(w) && !is_split_word(w));
        assert_eq!(slot_block(EMPTY), None);
        assert_eq!(slot_block(FROZEN), None);
        assert_eq!(slot_block(0xab00_0000_0000_0040), None, "zero length");
        assert!(is_split_word(FROZEN) && is_split_word(w & !TENTATIVE | MARK));
    }

    #[test]
    fn headers() {
        let h = 3 | (0b101 << HEADER_SUFFIX_SHIFT);
        assert_eq!(header_fields(h), Some((3, 0b101, false)));
        assert!(header_covers(h, 0xffff_fff5));
        assert!(!header_covers(h, 0xffff_fff4));
        assert_eq!(
            header_fields(h | HEADER_MOVING).map(|f| f.2),
            Some(true),
            "moving"
        );
        assert_eq!(header_fields(1 << 41), None);
        assert_eq!(header_fields(2 | (0b100 << HEADER_SUFFIX_SHIFT)), None);
        assert!(header_covers(0, 12345), "depth 0 covers every key");
    }

    #[test]
    fn blocks() {
        let b = block(b"key", b"value");
        assert_eq!(b.len(), 64);
        assert_eq!(parse_block(&b), Some((&b"key"[..], &b"value"[..])));
        let mut bad = b.clone();
        bad[9] ^= 1;
        assert_eq!(parse_block(&bad), None, "CRC");
        assert_eq!(parse_block(&b[..10]), None, "truncated");
        assert_eq!(encode_block(&[0; MAX_KEY_BYTES + 1], b""), None);
        assert_eq!(encode_block(b"k", &[0; MAX_BLOCK_BYTES]), None);
    }

    proptest! {
        #![proptest_config(Config {
            cases: 256,
            rng_seed: RngSeed::Fixed(0x2ace),
            failure_persistence: None,
            ..Config::default()
        })]

        #[test]
        fn parsers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300), w: u64) {
            let _ = parse_block(&bytes);
            let _ = header_fields(w);
            let _ = header_covers(w, w as u32);
            if let Some((_, offset, len)) = slot_block(w) {
                prop_assert!(offset % LINE as u64 == 0 && (LINE..=MAX_BLOCK_BYTES).contains(&len));
            }
        }
    }
}
