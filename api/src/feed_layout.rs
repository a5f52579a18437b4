//! Where a change feed's rings are (`kvstore::feed`): its producer lanes and its
//! consumer rings, each a ring in table-owned memory of a memory node, laid out as
//! the switch's flows expect:
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
//! the owner word between them is the lanes' own. The catalog keeps a table's
//! [`FeedLayout`] (`TableDescription::feed`), so every writer of the table records
//! its writes and consumers find the rings by the table's name.

use serde::{Deserialize, Serialize};

/// Offset of the head word.
pub const HEAD_AT: u64 = 0;
/// Offset of a producer lane's owner word.
pub const OWNER_AT: u64 = 32;
/// Offset of the tail word.
pub const TAIL_AT: u64 = 64;
/// Offset of slot 0.
pub const SLOTS_AT: u64 = 128;
/// Most producer lanes or consumer rings of one feed (the switch's flow limit).
pub const MAX_RINGS: usize = 8;

/// One ring of a feed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FeedRing {
    /// The memory node's id in the catalog.
    pub memnode: u64,
    /// Its admin URL (the switch creates its queue pairs there).
    pub admin_url: String,
    /// Address of the ring's head word.
    pub va: u64,
    /// Memory key covering the ring.
    pub rkey: u32,
    /// Bytes per slot.
    pub slot_size: u32,
    /// Number of slots.
    pub slots: u32,
}

impl FeedRing {
    /// Bytes the ring takes, header included.
    pub fn bytes(&self) -> u64 {
        SLOTS_AT + u64::from(self.slot_size) * u64::from(self.slots)
    }

    /// Address of the slot holding item `item`.
    pub fn slot_va(&self, item: u64) -> u64 {
        let slot = item % u64::from(self.slots.max(1));
        self.va + SLOTS_AT + slot * u64::from(self.slot_size)
    }
}

/// A feed: the table it records and where its rings are. Created by
/// `Session::create_feed`; the operator keeps it (it is plain JSON) and hands it to
/// the feed's writers, its consumers and the switch's flow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FeedLayout {
    /// The table's name.
    pub table: String,
    /// The table's catalog id.
    pub table_id: u64,
    /// Producer lanes, written by the table's writers.
    pub lanes: Vec<FeedRing>,
    /// Consumer rings, written by the switch.
    pub consumers: Vec<FeedRing>,
}
