//! Where a feed's rings are: its producer lanes and its consumer rings, each a ring
//! in table-owned memory of a memory node, laid out as the switch's flows expect:
//!
//! ```text
//! va + 0      head   u64: items ever put in (producer lanes: the lane's writer;
//!                         consumer rings: the switch)
//! va + 32     owner  u64: producer lanes only — the id of the writer holding the
//!                         lane, 0 when free (taken and given back with CAS)
//! va + 64     tail   u64: items ever taken out (lanes: the switch; consumer rings:
//!                         the consumer)
//! va + 128    slot 0 | slot 1 | … each `slot_size` bytes; item i in slot i % slots
//! ```
//!
//! The switch reads and writes only the 8-byte head and tail words and the slots, so
//! the owner word between them is the lanes' own.

use serde::{Deserialize, Serialize};

pub use dmkv_api::feed_layout::{
    FeedLayout, FeedRing, HEAD_AT, MAX_RINGS, OWNER_AT, SLOTS_AT, TAIL_AT,
};

/// What to create: lanes, consumers and ring sizes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeedSpec {
    /// Producer lanes (1 ..= 8): at most this many clients write at once.
    pub lanes: usize,
    /// Consumer rings (1 ..= 8): each gets every record.
    pub consumers: usize,
    /// Bytes per slot (a record must fit one slot): 64 ..= 65536, a multiple of 64.
    pub slot_size: u32,
    /// Slots per ring (1 ..= 65536).
    pub slots: u32,
    /// Put the rings on this memory node (default: the placement policy chooses).
    pub memnode: Option<u64>,
}

impl FeedSpec {
    /// Checks the counts and sizes.
    pub fn checked(&self) -> Result<(), String> {
        if self.lanes == 0 || self.lanes > MAX_RINGS {
            return Err(format!(
                "lanes {} is out of range: 1 ..= {MAX_RINGS}",
                self.lanes
            ));
        }
        if self.consumers == 0 || self.consumers > MAX_RINGS {
            return Err(format!(
                "consumers {} is out of range: 1 ..= {MAX_RINGS}",
                self.consumers
            ));
        }
        if self.slot_size < 64 || self.slot_size > 65536 || !self.slot_size.is_multiple_of(64) {
            return Err(format!(
                "slot_size {} must be a multiple of 64 in 64 ..= 65536",
                self.slot_size
            ));
        }
        if self.slots == 0 || self.slots > 65536 {
            return Err(format!("slots {} is out of range: 1 ..= 65536", self.slots));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_are_checked() {
        let ok = FeedSpec {
            lanes: 2,
            consumers: 2,
            slot_size: 256,
            slots: 16,
            memnode: None,
        };
        assert!(ok.checked().is_ok());
        assert!(
            FeedSpec {
                lanes: 9,
                ..ok.clone()
            }
            .checked()
            .is_err()
        );
        assert!(
            FeedSpec {
                consumers: 0,
                ..ok.clone()
            }
            .checked()
            .is_err()
        );
        assert!(
            FeedSpec {
                slot_size: 100,
                ..ok.clone()
            }
            .checked()
            .is_err()
        );
        assert!(FeedSpec { slots: 0, ..ok }.checked().is_err());
    }

    #[test]
    fn slots_follow_the_header() {
        let r = FeedRing {
            memnode: 1,
            admin_url: String::new(),
            va: 0x1000,
            rkey: 1,
            slot_size: 256,
            slots: 4,
        };
        assert_eq!(r.slot_va(0), 0x1080);
        assert_eq!(r.slot_va(5), 0x1180);
        assert_eq!(r.bytes(), 128 + 1024);
    }
}
