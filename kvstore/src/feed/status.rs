//! Where a feed's rings stand: each ring's head and tail (and a lane's owner word),
//! read one-sided — what `dmkv feed status` prints.

use serde::Serialize;

use crate::error::KvError;
use crate::session::Session;

use super::layout::{FeedLayout, FeedRing, HEAD_AT, OWNER_AT, TAIL_AT};
use super::ring_io;

/// One ring's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RingStatus {
    /// Items ever put in.
    pub head: u64,
    /// Items ever taken out.
    pub tail: u64,
    /// Producer lanes: the owner word (0 free; bit 63 set: taken for one append;
    /// otherwise held by a `FeedWriter`). Consumer rings: 0.
    pub owner: u64,
}

impl RingStatus {
    /// Items waiting in the ring.
    pub fn waiting(&self) -> u64 {
        self.head.saturating_sub(self.tail)
    }
}

/// Every ring of a feed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FeedStatus {
    /// The producer lanes, in order.
    pub lanes: Vec<RingStatus>,
    /// The consumer rings, in order.
    pub consumers: Vec<RingStatus>,
}

async fn ring(session: &Session, r: &FeedRing, lane: bool) -> Result<RingStatus, KvError> {
    let core = &session.core;
    Ok(RingStatus {
        head: ring_io::read_word(core, r, HEAD_AT).await?,
        tail: ring_io::read_word(core, r, TAIL_AT).await?,
        owner: if lane {
            ring_io::read_word(core, r, OWNER_AT).await?
        } else {
            0
        },
    })
}

/// Read where every ring of `layout` stands (a few one-sided READs per ring).
pub async fn status(session: &Session, layout: &FeedLayout) -> Result<FeedStatus, KvError> {
    let mut lanes = Vec::new();
    for r in &layout.lanes {
        lanes.push(ring(session, r, true).await?);
    }
    let mut consumers = Vec::new();
    for r in &layout.consumers {
        consumers.push(ring(session, r, false).await?);
    }
    Ok(FeedStatus { lanes, consumers })
}
