//! A producer/consumer ring in registered memory on a memory node: the layout both the
//! applications and the switch agree on.
//!
//! ```text
//! va + 0      head  u64, little-endian: items ever put in (written by the ring's producer)
//! va + 64     tail  u64, little-endian: items ever taken out (written by its consumer)
//! va + 128    slot 0 | slot 1 | ... | slot (slots - 1)      each `slot_size` bytes
//! ```
//!
//! Head and tail are counters that only grow; item `i` lives in slot `i % slots`. The
//! ring holds `head - tail` items and has room for `slots - (head - tail)` more. Head
//! and tail sit on separate 64-byte lines, so the producer's and the consumer's WRITEs
//! never share a line.
//!
//! For a *producer* ring of a flow the application writes items and the head; the
//! switch reads the head (by polling, or when a doorbell says it moved), moves items
//! out and writes the tail. For a *consumer* ring the switch writes items and the head;
//! the application reads them and writes the tail, which the switch polls.

use serde::{Deserialize, Serialize};

/// Offset of the head word.
pub const HEAD_OFFSET: u64 = 0;
/// Offset of the tail word.
pub const TAIL_OFFSET: u64 = 64;
/// Offset of slot 0.
pub const SLOTS_OFFSET: u64 = 128;
/// Largest slot (an item is moved by one READ; 64 PMTUs of 1024 bytes).
pub const MAX_SLOT_SIZE: u32 = 64 * 1024;
/// Most slots in a ring.
pub const MAX_SLOTS: u32 = 1 << 20;

/// Where a ring is and how it is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RingLayout {
    /// Address of the ring's first byte (its head word).
    pub va: u64,
    /// Memory key covering the whole ring.
    pub rkey: u32,
    /// Bytes per slot (every item fills one slot).
    pub slot_size: u32,
    /// Number of slots.
    pub slots: u32,
}

impl RingLayout {
    /// Checks the sizes.
    pub fn checked(&self) -> Result<(), String> {
        if self.slot_size == 0 || self.slot_size > MAX_SLOT_SIZE {
            return Err(format!(
                "slot_size {} is out of range: 1 ..= {MAX_SLOT_SIZE} bytes",
                self.slot_size
            ));
        }
        if self.slots == 0 || self.slots > MAX_SLOTS {
            return Err(format!(
                "slots {} is out of range: 1 ..= {MAX_SLOTS}",
                self.slots
            ));
        }
        if !self.va.is_multiple_of(64) {
            return Err(format!("va {:#x} must be 64-byte aligned", self.va));
        }
        if self.va.checked_add(self.bytes()).is_none() {
            return Err(format!(
                "the ring at {:#x} runs past the address space",
                self.va
            ));
        }
        Ok(())
    }

    /// Bytes the ring takes, header included.
    pub fn bytes(&self) -> u64 {
        SLOTS_OFFSET + u64::from(self.slot_size) * u64::from(self.slots)
    }

    /// Address of the head word.
    pub fn head_va(&self) -> u64 {
        self.va.wrapping_add(HEAD_OFFSET)
    }

    /// Address of the tail word.
    pub fn tail_va(&self) -> u64 {
        self.va.wrapping_add(TAIL_OFFSET)
    }

    /// Address of the slot holding item `item` (a head/tail counter value).
    pub fn slot_va(&self, item: u64) -> u64 {
        let slot = item % u64::from(self.slots.max(1));
        self.va
            .wrapping_add(SLOTS_OFFSET)
            .wrapping_add(slot * u64::from(self.slot_size))
    }

    /// Items the ring can still take, given its head and tail (0 if the counters are
    /// inconsistent).
    pub fn room(&self, head: u64, tail: u64) -> u64 {
        let used = head.saturating_sub(tail);
        u64::from(self.slots).saturating_sub(used)
    }
}

/// A head or tail word as its 8 bytes in memory.
pub fn encode_word(value: u64) -> [u8; 8] {
    value.to_le_bytes()
}

/// A head or tail word from the bytes a READ returned (`None` unless exactly 8 bytes).
pub fn decode_word(bytes: &[u8]) -> Option<u64> {
    let b: [u8; 8] = bytes.try_into().ok()?;
    Some(u64::from_le_bytes(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring() -> RingLayout {
        RingLayout {
            va: 0x1000,
            rkey: 7,
            slot_size: 256,
            slots: 4,
        }
    }

    #[test]
    fn items_wrap_around_the_slots() {
        let r = ring();
        assert_eq!(r.head_va(), 0x1000);
        assert_eq!(r.tail_va(), 0x1040);
        assert_eq!(r.slot_va(0), 0x1080);
        assert_eq!(r.slot_va(1), 0x1180);
        assert_eq!(r.slot_va(4), 0x1080);
        assert_eq!(r.bytes(), 128 + 1024);
    }

    #[test]
    fn room_is_slots_minus_items_held() {
        let r = ring();
        assert_eq!(r.room(0, 0), 4);
        assert_eq!(r.room(7, 5), 2);
        assert_eq!(r.room(9, 5), 0);
        assert_eq!(
            r.room(3, 5),
            4,
            "a tail past the head leaves the ring empty"
        );
    }

    #[test]
    fn sizes_are_checked() {
        assert!(ring().checked().is_ok());
        let mut r = ring();
        r.slot_size = 0;
        assert!(r.checked().is_err());
        r = ring();
        r.va = 0x1001;
        assert!(r.checked().is_err());
        r = ring();
        r.va = u64::MAX - 64 + 1;
        assert!(r.checked().is_err());
    }

    #[test]
    fn words_round_trip() {
        assert_eq!(
            decode_word(&encode_word(0x0102_0304_0506_0708)),
            Some(0x0102_0304_0506_0708)
        );
        assert_eq!(decode_word(&[1, 2, 3]), None);
    }
}
