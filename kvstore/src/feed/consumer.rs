//! A feed's consumer: reads the records the switch put into its ring, in the feed's
//! order, and frees their slots.
//!
//! [`FeedConsumer::poll`] READs the ring's head; when it is past the consumer's tail it
//! READs the slots in between (up to 64, one round trip), checks every record, then WRITEs the
//! new tail so the switch may fill those slots again. Every consumer ring of a feed
//! gets the same records in the same order (the switch's ordered replication).

use std::collections::VecDeque;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::error::KvError;
use crate::session::{Session, SessionCore};

use super::layout::{FeedLayout, FeedRing, HEAD_AT, TAIL_AT};
use super::record::FeedRecord;
use super::ring_io;

/// Most slots READ in one poll.
const MAX_BATCH: u64 = 64;

/// A consumer of one ring of a feed. See the [module documentation](self).
pub struct FeedConsumer {
    core: Rc<SessionCore>,
    ring: FeedRing,
    tail: u64,
    /// Records read but not handed out by [`FeedConsumer::next`] yet.
    buffered: VecDeque<FeedRecord>,
}

impl std::fmt::Debug for FeedConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FeedConsumer")
            .field("va", &self.ring.va)
            .field("tail", &self.tail)
            .finish()
    }
}

impl FeedConsumer {
    /// Open consumer ring `index` of `feed` (from where its tail says).
    pub async fn open(
        session: &Session,
        feed: &FeedLayout,
        index: usize,
    ) -> Result<FeedConsumer, KvError> {
        let ring = feed.consumers.get(index).cloned().ok_or_else(|| {
            KvError::InvalidArgument(format!(
                "the feed has {} consumer rings, not {}",
                feed.consumers.len(),
                index + 1
            ))
        })?;
        let core = session.core.clone();
        let tail = ring_io::read_word(&core, &ring, TAIL_AT).await?;
        Ok(FeedConsumer {
            core,
            ring,
            tail,
            buffered: VecDeque::new(),
        })
    }

    /// Records taken so far (the ring's tail).
    pub fn position(&self) -> u64 {
        self.tail
    }

    /// The records published since the last poll, oldest first (empty when none);
    /// their slots are freed. A slot that does not hold a valid record is
    /// `Corrupt` (and nothing is freed).
    pub async fn poll(&mut self) -> Result<Vec<FeedRecord>, KvError> {
        let mut out: Vec<FeedRecord> = self.buffered.drain(..).collect();
        out.extend(self.take().await?);
        Ok(out)
    }

    async fn take(&mut self) -> Result<Vec<FeedRecord>, KvError> {
        let head = ring_io::read_word(&self.core, &self.ring, HEAD_AT).await?;
        if head <= self.tail {
            return Ok(Vec::new());
        }
        if head - self.tail > u64::from(self.ring.slots) {
            return Err(KvError::corrupt(format!(
                "the feed ring's head {head} is more than a ring ahead of its tail {}",
                self.tail
            )));
        }
        // At most MAX_BATCH slot READs in one round trip; the rest on the next poll.
        let head = head.min(self.tail + MAX_BATCH);
        let slots = ring_io::read_items(&self.core, &self.ring, self.tail, head).await?;
        let mut out = Vec::with_capacity(slots.len());
        for (i, slot) in slots.iter().enumerate() {
            let r = FeedRecord::parse(slot).map_err(|e| {
                KvError::corrupt(format!("feed ring item {}: {e}", self.tail + i as u64))
            })?;
            out.push(r);
        }
        ring_io::write_word(&self.core, &self.ring, TAIL_AT, head).await?;
        self.tail = head;
        Ok(out)
    }

    /// The next record, waiting for it for up to `within`; `None` if none came.
    pub async fn next(&mut self, within: Duration) -> Result<Option<FeedRecord>, KvError> {
        let started = Instant::now();
        loop {
            if let Some(r) = self.buffered.pop_front() {
                return Ok(Some(r));
            }
            let more = self.take().await?;
            self.buffered.extend(more);
            if self.buffered.is_empty() {
                if started.elapsed() >= within {
                    return Ok(None);
                }
                self.core.worker.sleep(Duration::from_micros(100)).await;
            }
        }
    }
}
