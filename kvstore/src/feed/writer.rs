//! A feed's writer: a client that holds one producer lane and records each write it
//! makes to the table there.
//!
//! A lane has one writer at a time: [`FeedWriter::open`] takes the first free lane
//! with a CAS of its owner word (0 → the writer's id) and [`FeedWriter::close`] gives
//! it back. A write goes to the table first; once it returned success (its link CAS,
//! the linearization point, succeeded) the record — carrying the node's chain id and
//! version — is WRITTEN into the lane's next slot and the lane's head is advanced in
//! the same round trip; only then does the call return. So a caller whose write
//! succeeded knows the record is in the lane.
//!
//! A writer that crashes after its write and before its record leaves that write out
//! of the feed; a consumer notices it as a hole in the key's versions (the next record
//! of the key is more than one version later), see [`super::mirror`]. A crashed
//! writer's lane stays held (its owner word keeps its id) until an operator clears it.

use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::error::KvError;
use crate::index::WriteKind;
use crate::session::{Session, SessionCore};
use crate::table::Table;

use super::layout::{FeedLayout, FeedRing, HEAD_AT, OWNER_AT, TAIL_AT};
use super::record::{FeedOp, FeedRecord};
use super::ring_io;

/// How long an append waits for room in a full lane before failing.
const FULL_LANE_WAIT: Duration = Duration::from_secs(10);

/// A writer holding one lane of a feed. See the [module documentation](self).
pub struct FeedWriter {
    core: Rc<SessionCore>,
    table: Table,
    lane: u8,
    ring: FeedRing,
    owner: u64,
    next: u64,
    tail: u64,
}

impl std::fmt::Debug for FeedWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FeedWriter")
            .field("table", &self.table.name())
            .field("lane", &self.lane)
            .field("next", &self.next)
            .finish()
    }
}

impl FeedWriter {
    /// Take a free lane of `feed` for `session`'s writes to the feed's table. Fails with
    /// `Unavailable` when every lane is held, and with `Unsupported` when the session's
    /// queue pairs go through the switch accelerator (a link the switch steers gives the
    /// session the node's version only later).
    pub async fn open(session: &Session, feed: &FeedLayout) -> Result<FeedWriter, KvError> {
        let core = session.core.clone();
        if core.accelerated {
            return Err(KvError::Unsupported(
                "a feed writer's session must reach the memory nodes directly, not through the switch accelerator".into(),
            ));
        }
        let table = session.table(&feed.table)?;
        if table.description().id != feed.table_id {
            return Err(KvError::InvalidArgument(format!(
                "the feed was made for table {} id {}, which was recreated since",
                feed.table, feed.table_id
            )));
        }
        // Bit 63 clear: a held lane, never freed by writers waiting for a lane
        // (`super::append` takes lanes with bit 63 set, for one append).
        let owner = loop {
            let id: u64 = rand::random::<u64>() >> 1;
            if id != 0 {
                break id;
            }
        };
        for (lane, ring) in feed.lanes.iter().enumerate() {
            if ring_io::cas_word(&core, ring, OWNER_AT, 0, owner).await? != 0 {
                continue;
            }
            let next = ring_io::read_word(&core, ring, HEAD_AT).await?;
            let tail = ring_io::read_word(&core, ring, TAIL_AT).await?;
            return Ok(FeedWriter {
                core,
                table,
                lane: u8::try_from(lane).unwrap_or(u8::MAX),
                ring: ring.clone(),
                owner,
                next,
                tail,
            });
        }
        Err(KvError::unavailable(format!(
            "all {} lanes of the feed of table {} are held by other writers",
            feed.lanes.len(),
            feed.table
        )))
    }

    /// The lane this writer holds.
    pub fn lane(&self) -> u8 {
        self.lane
    }

    /// The table handle the writer writes through (for reads).
    pub fn table(&self) -> &Table {
        &self.table
    }

    /// Set `key` to `value` (upsert) and record it.
    pub async fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), KvError> {
        self.write(key, WriteKind::Put, value).await
    }

    /// Create `key` and record it; `AlreadyExists` (and no record) when it has a value.
    pub async fn insert(&mut self, key: &[u8], value: &[u8]) -> Result<(), KvError> {
        self.write(key, WriteKind::Insert, value).await
    }

    /// Replace the value of `key` and record it; `NotFound` (and no record) when absent.
    pub async fn update(&mut self, key: &[u8], value: &[u8]) -> Result<(), KvError> {
        self.write(key, WriteKind::Update, value).await
    }

    /// Delete `key` and record the tombstone; `NotFound` (and no record) when absent.
    pub async fn delete(&mut self, key: &[u8]) -> Result<(), KvError> {
        self.write(key, WriteKind::Delete, &[]).await
    }

    /// Give the lane back (another writer may take it).
    pub async fn close(self) -> Result<(), KvError> {
        ring_io::cas_word(&self.core, &self.ring, OWNER_AT, self.owner, 0).await?;
        Ok(())
    }

    async fn write(&mut self, key: &[u8], kind: WriteKind, value: &[u8]) -> Result<(), KvError> {
        let needed = super::record::RECORD_HEADER + key.len() + value.len();
        if needed > self.ring.slot_size as usize {
            return Err(KvError::InvalidArgument(format!(
                "a feed record of this write takes {needed} bytes; the feed's slots hold {}",
                self.ring.slot_size
            )));
        }
        self.table.write_recorded(key, kind, value, false).await?;
        // The write linked its node and left it as this session's hint for the key
        // (nothing else ran on this thread since).
        let table_id = self.table.description().id;
        let Some((chain_id, hint)) = crate::clover::state::of(&self.core)
            .hint(table_id, key)
            .and_then(|c| c.hint.map(|h| (c.chain.chain_id, h)))
        else {
            return Err(KvError::unavailable(
                "the write took effect but its version is unknown to the session: it is missing from the feed",
            ));
        };
        let record = FeedRecord {
            lane: self.lane,
            lane_seq: self.next,
            op: if kind == WriteKind::Delete {
                FeedOp::Delete
            } else {
                FeedOp::Put
            },
            table_id,
            chain_id,
            version: hint.version,
            key: key.to_vec(),
            value: if kind == WriteKind::Delete {
                Vec::new()
            } else {
                value.to_vec()
            },
        };
        let bytes = record
            .encode()
            .ok_or_else(|| KvError::InvalidArgument("a feed record too large to encode".into()))?;
        self.wait_for_room().await?;
        ring_io::put_item(&self.core, &self.ring, self.next, bytes).await?;
        self.next += 1;
        Ok(())
    }

    async fn wait_for_room(&mut self) -> Result<(), KvError> {
        let started = Instant::now();
        while self.next - self.tail >= u64::from(self.ring.slots) {
            self.tail = ring_io::read_word(&self.core, &self.ring, TAIL_AT).await?;
            if self.next - self.tail < u64::from(self.ring.slots) {
                break;
            }
            if started.elapsed() > FULL_LANE_WAIT {
                return Err(KvError::unavailable(format!(
                    "the write took effect but feed lane {} stayed full for {FULL_LANE_WAIT:?} \
                     (is the switch's flow running?): it is missing from the feed",
                    self.lane
                )));
            }
            self.core.worker.sleep(Duration::from_micros(50)).await;
        }
        Ok(())
    }
}
