//! One-sided verbs on a feed ring through a session's queue pairs: READs of words and
//! slots, WRITEs of slots and counters, CAS on a lane's owner word. Each call is one
//! round trip on the ring's memory node, charged to the session's background counters.

use verbs::wr::WorkRequest;

use crate::error::KvError;
use crate::remote::{atomic_value, read_bytes, write_done};
use crate::session::SessionCore;
use crate::stats::OpStats;

use super::layout::FeedRing;

/// The verbs address of `len` bytes at `va` on the ring's memory node.
pub(crate) fn target(
    core: &SessionCore,
    ring: &FeedRing,
    va: u64,
    len: u64,
) -> Result<verbs::wr::RemoteAddr, KvError> {
    let ptr = core.links.ptr_of(ring.memnode, va)?;
    core.links.resolve(ptr, len).map(|t| t.addr).ok_or_else(|| {
        KvError::corrupt(format!(
            "feed ring bytes at {va:#x} lie outside memnode {}'s region",
            ring.memnode
        ))
    })
}

/// Runs `wrs` on the ring's memory node in one round trip, counted as background
/// work of the session.
async fn run(
    core: &SessionCore,
    ring: &FeedRing,
    wrs: Vec<WorkRequest>,
) -> Result<Vec<verbs::wr::Completion>, KvError> {
    let mut stats = OpStats::default();
    let done = run_counted(core, ring, wrs, &mut stats).await;
    core.add_background(&stats);
    done
}

/// Runs `wrs` on the ring's memory node in one round trip, counted in `stats` (the
/// operation's own), and returns their completions in order.
pub(crate) async fn run_counted(
    core: &SessionCore,
    ring: &FeedRing,
    wrs: Vec<WorkRequest>,
    stats: &mut OpStats,
) -> Result<Vec<verbs::wr::Completion>, KvError> {
    core.links
        .round_trip(vec![(ring.memnode, wrs)], stats)
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| KvError::unavailable("missing feed ring completions"))
}

/// READ the 8-byte word at `ring.va + at`.
pub(crate) async fn read_word(
    core: &SessionCore,
    ring: &FeedRing,
    at: u64,
) -> Result<u64, KvError> {
    let addr = target(core, ring, ring.va + at, 8)?;
    let done = run(core, ring, vec![WorkRequest::read(addr, 8)]).await?;
    word(read_bytes(done.first())?)
}

/// The little-endian word an 8-byte READ of a ring returned.
pub(crate) fn word(b: &[u8]) -> Result<u64, KvError> {
    let w: [u8; 8] = b
        .try_into()
        .map_err(|_| KvError::corrupt("a feed ring word READ returned other than 8 bytes"))?;
    Ok(u64::from_le_bytes(w))
}

/// WRITE `value` to the 8-byte word at `ring.va + at`.
pub(crate) async fn write_word(
    core: &SessionCore,
    ring: &FeedRing,
    at: u64,
    value: u64,
) -> Result<(), KvError> {
    let addr = target(core, ring, ring.va + at, 8)?;
    let done = run(
        core,
        ring,
        vec![WorkRequest::write(addr, value.to_le_bytes().to_vec())],
    )
    .await?;
    write_done(done.first())
}

/// CAS the 8-byte word at `ring.va + at` from `compare` to `swap`; the old value.
pub(crate) async fn cas_word(
    core: &SessionCore,
    ring: &FeedRing,
    at: u64,
    compare: u64,
    swap: u64,
) -> Result<u64, KvError> {
    let addr = target(core, ring, ring.va + at, 8)?;
    let done = run(core, ring, vec![WorkRequest::cas(addr, compare, swap)]).await?;
    atomic_value(done.first())
}

/// WRITE `bytes` into the slot of item `item`, then the head word `item + 1`, in one
/// round trip (one queue pair executes them in order, so the slot is complete before
/// the head says it is there).
pub(crate) async fn put_item(
    core: &SessionCore,
    ring: &FeedRing,
    item: u64,
    bytes: Vec<u8>,
) -> Result<(), KvError> {
    let slot = target(core, ring, ring.slot_va(item), bytes.len() as u64)?;
    let head = target(core, ring, ring.va + super::layout::HEAD_AT, 8)?;
    let done = run(
        core,
        ring,
        vec![
            WorkRequest::write(slot, bytes),
            WorkRequest::write(head, (item + 1).to_le_bytes().to_vec()),
        ],
    )
    .await?;
    write_done(done.first())?;
    write_done(done.get(1))
}

/// READ the slots of items `from .. to` (at most the ring's slot count), one READ each
/// in one round trip.
pub(crate) async fn read_items(
    core: &SessionCore,
    ring: &FeedRing,
    from: u64,
    to: u64,
) -> Result<Vec<Vec<u8>>, KvError> {
    let mut wrs = Vec::new();
    for item in from..to {
        let addr = target(core, ring, ring.slot_va(item), u64::from(ring.slot_size))?;
        wrs.push(WorkRequest::read(addr, ring.slot_size));
    }
    if wrs.is_empty() {
        return Ok(Vec::new());
    }
    let done = run(core, ring, wrs).await?;
    let mut out = Vec::with_capacity(done.len());
    for c in &done {
        out.push(read_bytes(Some(c))?.to_vec());
    }
    if out.len() as u64 != to - from {
        return Err(KvError::unavailable("missing feed slot READ completions"));
    }
    Ok(out)
}

/// WRITE zeros over the ring's header line and counters (a fresh ring: empty, no owner).
pub(crate) async fn clear_header(core: &SessionCore, ring: &FeedRing) -> Result<(), KvError> {
    let addr = target(core, ring, ring.va, super::layout::SLOTS_AT)?;
    let done = run(
        core,
        ring,
        vec![WorkRequest::write(
            addr,
            vec![0; super::layout::SLOTS_AT as usize],
        )],
    )
    .await?;
    write_done(done.first())
}
