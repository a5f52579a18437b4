//! Recording a plain table write in the table's feed: any writer of a table whose
//! catalog entry names a feed (`TableDescription::feed`) appends each committed
//! write to one of the feed's producer lanes, taking the lane for that one append.
//!
//! A lane has one writer at a time. An append takes a free lane with a CAS of its
//! owner word (0 → a *transient* owner word, bit 63 set) in one doorbell with READs
//! of the lane's head and tail — they execute after the CAS on the same queue pair,
//! so when the CAS won they are the lane's current counters — and then, in a second
//! doorbell, WRITEs the record into the head's slot, the head + 1, and releases the
//! lane with a CAS back to 0: two round trips per write, whichever lane is free. A
//! lane a [`super::FeedWriter`] holds (its owner word has bit 63 clear) is never taken.
//!
//! **Leases.** A writer that dies between its two doorbells leaves its transient
//! owner word in the lane. A writer that finds every lane taken watches them; a lane
//! whose transient owner word and head stay unchanged for [`LANE_LEASE`] belongs to
//! a dead writer and is freed with a CAS from exactly the word it watched (a live
//! writer holds a lane for one round trip). As for in-place latches, a writer
//! stalled for longer than the lease between its two doorbells could then append
//! beside another; the second doorbell's release CAS tells it (its owner word is
//! gone) and the write reports the record as possibly damaged.
//!
//! A write whose record cannot be appended (no lane freed within [`APPEND_WAIT`],
//! a lane full for as long) has taken effect and is reported as such: the consumer
//! sees a hole in the key's versions, as for a writer that crashed.

use std::time::{Duration, Instant};

use verbs::wr::WorkRequest;

use crate::error::KvError;
use crate::index::WriteKind;
use crate::remote::{atomic_value, read_bytes, write_done};
use crate::session::SessionCore;
use crate::stats::OpStats;

use super::layout::{FeedLayout, HEAD_AT, OWNER_AT, TAIL_AT};
use super::record::{FeedOp, FeedRecord, RECORD_HEADER};
use super::ring_io::{target as addr, word};

/// Bit 63 of a lane's owner word: taken for one append (not held by a `FeedWriter`).
pub(crate) const TRANSIENT: u64 = 1 << 63;
/// How long a transient owner word and the lane's head may stay unchanged before a
/// waiting writer frees the lane.
pub const LANE_LEASE: Duration = Duration::from_secs(2);
/// How long an append waits for a free lane with room before giving up.
pub const APPEND_WAIT: Duration = Duration::from_secs(10);

/// Bytes a record of this write takes; refused before the write when it exceeds the
/// feed's slots.
pub(crate) fn check_fits(layout: &FeedLayout, key: &[u8], value: &[u8]) -> Result<(), KvError> {
    let needed = RECORD_HEADER + key.len() + value.len();
    let slot = layout.lanes.first().map_or(0, |r| r.slot_size as usize);
    if needed > slot {
        return Err(KvError::InvalidArgument(format!(
            "table {}'s change feed holds records of {slot} bytes; this write's record takes \
             {needed}",
            layout.table
        )));
    }
    Ok(())
}

/// The record of a committed write of `key` (its chain id and version as the session
/// saw them when the write linked).
pub(crate) fn record_of(
    core: &SessionCore,
    table_id: u64,
    key: &[u8],
    kind: WriteKind,
    value: &[u8],
) -> Result<FeedRecord, KvError> {
    let Some((chain_id, hint)) = crate::clover::state::of(core)
        .hint(table_id, key)
        .and_then(|c| c.hint.map(|h| (c.chain.chain_id, h)))
    else {
        return Err(KvError::unavailable(
            "the write took effect but its version is unknown to the session: it is missing \
             from the feed",
        ));
    };
    let delete = kind == WriteKind::Delete;
    Ok(FeedRecord {
        lane: 0,
        lane_seq: 0,
        op: if delete { FeedOp::Delete } else { FeedOp::Put },
        table_id,
        chain_id,
        version: hint.version,
        key: key.to_vec(),
        value: if delete { Vec::new() } else { value.to_vec() },
    })
}

/// Take lane `lane` of `layout` as an append does and stop there, leaving its
/// transient owner word — what a writer that stopped between its two doorbells
/// leaves (for tests of the lease). Returns whether the lane was free.
#[doc(hidden)]
pub async fn take_lane_and_stop(
    session: &crate::session::Session,
    layout: &FeedLayout,
    lane: usize,
) -> Result<bool, KvError> {
    let ring = layout
        .lanes
        .get(lane)
        .ok_or_else(|| KvError::InvalidArgument(format!("the feed has no lane {lane}")))?;
    let mine = TRANSIENT | (rand::random::<u64>() >> 1) | 1;
    let old = super::ring_io::cas_word(&session.core, ring, OWNER_AT, 0, mine).await?;
    Ok(old == 0)
}

/// Append `record` to a lane of `layout`, taking a free lane for this one append.
pub(crate) async fn append(
    core: &SessionCore,
    layout: &FeedLayout,
    mut record: FeedRecord,
) -> Result<(), KvError> {
    let mut stats = OpStats::default();
    let r = append_inner(core, layout, &mut record, &mut stats).await;
    core.add_background(&stats);
    r
}

async fn append_inner(
    core: &SessionCore,
    layout: &FeedLayout,
    record: &mut FeedRecord,
    stats: &mut OpStats,
) -> Result<(), KvError> {
    let lanes = layout.lanes.len();
    if lanes == 0 {
        return Err(KvError::corrupt("a change feed without lanes"));
    }
    let mine = TRANSIENT | (rand::random::<u64>() >> 1) | 1;
    let started = Instant::now();
    // Per lane: the owner word and head last seen while it was taken, and since when.
    let mut watched: Vec<Option<(u64, u64, Instant)>> = vec![None; lanes];
    let first = (rand::random::<u64>() as usize) % lanes;
    let mut pause = Duration::from_micros(20);
    loop {
        for i in 0..lanes {
            let lane = (first + i) % lanes;
            let ring = &layout.lanes[lane];
            let owner = addr(core, ring, ring.va + OWNER_AT, 8)?;
            let head_at = addr(core, ring, ring.va + HEAD_AT, 8)?;
            let tail_at = addr(core, ring, ring.va + TAIL_AT, 8)?;
            let done = super::ring_io::run_counted(
                core,
                ring,
                vec![
                    WorkRequest::cas(owner, 0, mine),
                    WorkRequest::read(head_at, 8),
                    WorkRequest::read(tail_at, 8),
                ],
                stats,
            )
            .await?;
            let old = atomic_value(done.first())?;
            let head = word(read_bytes(done.get(1))?)?;
            let tail = word(read_bytes(done.get(2))?)?;
            if old != 0 {
                // Taken: a dead transient owner is freed after the lease.
                if old & TRANSIENT != 0 {
                    match watched[lane] {
                        Some((w, h, since)) if w == old && h == head => {
                            if since.elapsed() >= LANE_LEASE {
                                let freed =
                                    super::ring_io::cas_word(core, ring, OWNER_AT, old, 0).await?;
                                if freed == old {
                                    tracing::warn!(
                                        table = %layout.table, lane,
                                        "a feed lane held by a writer that stopped was freed after its lease"
                                    );
                                }
                                watched[lane] = None;
                            }
                        }
                        _ => watched[lane] = Some((old, head, Instant::now())),
                    }
                }
                continue;
            }
            if head.wrapping_sub(tail) >= u64::from(ring.slots) {
                // Full: give the lane back and try the others.
                super::ring_io::cas_word(core, ring, OWNER_AT, mine, 0).await?;
                continue;
            }
            record.lane = u8::try_from(lane).unwrap_or(u8::MAX);
            record.lane_seq = head;
            let bytes = record.encode().ok_or_else(|| {
                KvError::InvalidArgument("a feed record too large to encode".into())
            })?;
            let slot = addr(core, ring, ring.slot_va(head), bytes.len() as u64)?;
            let done = super::ring_io::run_counted(
                core,
                ring,
                vec![
                    WorkRequest::write(slot, bytes),
                    WorkRequest::write(head_at, (head + 1).to_le_bytes().to_vec()),
                    WorkRequest::cas(owner, mine, 0),
                ],
                stats,
            )
            .await?;
            write_done(done.first())?;
            write_done(done.get(1))?;
            if atomic_value(done.get(2))? != mine {
                return Err(KvError::unavailable(format!(
                    "the write took effect, but feed lane {lane} was freed by another writer \
                     while this one appended (it stalled past the lane's lease): its record \
                     may be damaged"
                )));
            }
            return Ok(());
        }
        if started.elapsed() > APPEND_WAIT {
            return Err(KvError::unavailable(format!(
                "the write took effect but no lane of table {}'s feed was free with room for \
                 {APPEND_WAIT:?} (is the switch's flow running?): it is missing from the feed",
                layout.table
            )));
        }
        core.worker.sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(2));
    }
}
