//! The layout of a Clover table's chain directory and of its keyed roots: what the
//! client library (which claims keys one-sided) and a memory node's RPC workers
//! (which claim them next to memory) must agree on.
//!
//! The directory is an array of 64-byte buckets of eight little-endian slot words.
//! A slot names the root of one key's chain: `fingerprint u16 (never 0) | root
//! pointer (48 bits: memnode u8 | offset u40)`; 0 is a free slot. A keyed root is the
//! chain's root (shortcut word at 0, chain id at 8) followed by the key's length
//! (u32 at 16) and the key (at 24), padded with zeros to a multiple of 64 bytes.

/// Slots per bucket.
pub const BUCKET_SLOTS: usize = 8;
/// Bytes per bucket.
pub const BUCKET_BYTES: usize = BUCKET_SLOTS * 8;
/// Shift of a slot's fingerprint.
pub const SLOT_FP_SHIFT: u32 = 48;
/// Bits of a remote pointer's offset.
pub const PTR_OFFSET_BITS: u32 = 40;
/// Mask of a slot's root pointer.
pub const SLOT_PTR_MASK: u64 = (1 << SLOT_FP_SHIFT) - 1;
/// Offset of the key's length in a keyed root.
pub const ROOT_KEY_LEN_AT: usize = 16;
/// Offset of the key in a keyed root.
pub const ROOT_KEY_AT: usize = 24;
/// Granule of a root's size.
pub const ROOT_GRANULE: usize = 64;

/// The slot word naming the root at (`memnode`, `offset`) for a key of fingerprint
/// `fingerprint`; `None` when the offset needs more than 40 bits.
pub fn slot_word(fingerprint: u16, memnode: u8, offset: u64) -> Option<u64> {
    (offset >> PTR_OFFSET_BITS == 0).then(|| {
        (u64::from(fingerprint) << SLOT_FP_SHIFT) | (u64::from(memnode) << PTR_OFFSET_BITS) | offset
    })
}

/// The fingerprint, root memnode and root offset a slot word names; `None` for a
/// free slot.
pub fn slot_root(word: u64) -> Option<(u16, u8, u64)> {
    (word != 0).then_some((
        (word >> SLOT_FP_SHIFT) as u16,
        (word >> PTR_OFFSET_BITS) as u8,
        word & ((1 << PTR_OFFSET_BITS) - 1),
    ))
}

/// Bytes of a keyed root for a key of `key_len` bytes.
pub fn keyed_root_size(key_len: usize) -> usize {
    (ROOT_KEY_AT + key_len).div_ceil(ROOT_GRANULE) * ROOT_GRANULE
}

/// The chain id of a keyed root whose first `ROOT_KEY_AT + key.len()` bytes hold
/// `key`; `None` when they hold another key (or are too short).
pub fn root_holds(buf: &[u8], key: &[u8]) -> Option<u64> {
    let chain_id = u64::from_le_bytes(buf.get(8..16)?.try_into().ok()?);
    let len = u32::from_le_bytes(
        buf.get(ROOT_KEY_LEN_AT..ROOT_KEY_LEN_AT + 4)?
            .try_into()
            .ok()?,
    );
    let stored = buf.get(ROOT_KEY_AT..ROOT_KEY_AT + key.len())?;
    (usize::try_from(len).ok() == Some(key.len()) && stored == key).then_some(chain_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_and_roots() {
        let w = slot_word(0xBEEF, 3, 0x1234_5640).expect("word");
        assert_eq!(slot_root(w), Some((0xBEEF, 3, 0x1234_5640)));
        assert_eq!(slot_root(0), None);
        assert_eq!(slot_word(1, 0, 1 << 40), None);
        assert_eq!(keyed_root_size(1), 64);
        assert_eq!(keyed_root_size(40), 64);
        assert_eq!(keyed_root_size(41), 128);
        let mut root = vec![0u8; 64];
        root[8..16].copy_from_slice(&42u64.to_le_bytes());
        root[16..20].copy_from_slice(&3u32.to_le_bytes());
        root[24..27].copy_from_slice(b"key");
        assert_eq!(root_holds(&root, b"key"), Some(42));
        assert_eq!(root_holds(&root, b"ke"), None);
        assert_eq!(root_holds(&root[..20], b"key"), None);
    }
}
