//! The client library's I/O layer: memory-node links, pointer translation, and
//! batches of verbs whose cost — as the transport reports it for each work request —
//! is charged to an operation. The indexes and the latch schemes post through it.
//!
//! Every batch goes to one memory node's queue pair with one doorbell; batches to
//! several memory nodes that an operation issues together are posted at once and
//! awaited together, which is one round trip.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use verbs::worker::Qp;
use verbs::wr::{Completion, CompletionError, CompletionValue, PostError, RemoteAddr, WorkRequest};

use crate::error::KvError;
use crate::ptr::RemotePtr;
use crate::stats::OpStats;

/// One memory node as a session reaches it: its queue pair and its registered region.
#[derive(Clone)]
pub(crate) struct Link {
    /// The queue pair.
    pub qp: Qp,
    /// The region's remote key.
    pub rkey: u32,
    /// The region's first byte (offset 0 of a [`RemotePtr`]).
    pub base_va: u64,
    /// The region's length.
    pub len: u64,
}

/// The memory nodes a session is connected to, by metadata memnode id.
pub(crate) struct Links {
    links: HashMap<u64, Link>,
    /// Memory nodes the session could not reach when it opened, and why.
    unreachable: HashMap<u64, String>,
}

/// What a pointer resolved to.
pub(crate) struct Target {
    /// The memnode id.
    pub memnode: u64,
    /// The verbs address.
    pub addr: RemoteAddr,
}

impl Links {
    pub(crate) fn new(links: HashMap<u64, Link>, unreachable: HashMap<u64, String>) -> Links {
        Links { links, unreachable }
    }

    /// Why memnode `id` has no link: unreachable when the session opened, or
    /// registered after it.
    pub(crate) fn missing(&self, id: u64) -> KvError {
        match self.unreachable.get(&id) {
            Some(why) => KvError::unavailable(format!(
                "memnode {id} holds this data but could not be reached when this session \
                 opened ({why}); open a new session once it is back"
            )),
            None => KvError::unavailable(format!(
                "memnode {id} is not connected to this session (it joined after the session \
                 was created: open a new session)"
            )),
        }
    }

    /// The memnode ids.
    pub(crate) fn ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.links.keys().copied()
    }

    /// The link of memnode `id`.
    pub(crate) fn get(&self, id: u64) -> Option<&Link> {
        self.links.get(&id)
    }

    /// Translate `ptr` for an access of `len` bytes; `None` when the memnode is unknown
    /// or the access leaves its region (a pointer that fails validation, never posted).
    pub(crate) fn resolve(&self, ptr: RemotePtr, len: u64) -> Option<Target> {
        let memnode = u64::from(ptr.memnode());
        let link = self.links.get(&memnode)?;
        let end = ptr.offset().checked_add(len)?;
        if end > link.len {
            return None;
        }
        Some(Target {
            memnode,
            addr: RemoteAddr::new(link.rkey, link.base_va.checked_add(ptr.offset())?),
        })
    }

    /// The pointer of `va` in memnode `memnode`'s region, when it lies inside it.
    pub(crate) fn ptr_of(&self, memnode: u64, va: u64) -> Result<RemotePtr, KvError> {
        let link = self
            .links
            .get(&memnode)
            .ok_or_else(|| self.missing(memnode))?;
        let offset = va
            .checked_sub(link.base_va)
            .filter(|o| *o < link.len)
            .ok_or_else(|| {
                KvError::corrupt(format!(
                    "address {va:#x} is outside memnode {memnode}'s region"
                ))
            })?;
        let index = u8::try_from(memnode).map_err(|_| {
            KvError::Unsupported(format!(
                "memnode id {memnode} does not fit the 8-bit memnode field of remote pointers"
            ))
        })?;
        Ok(RemotePtr::new(index, offset)?)
    }

    /// Post each `(memnode, batch)` with one doorbell, all at once, and wait for every
    /// completion: one round trip charged to `stats`. Completions come back per batch,
    /// in order.
    pub(crate) async fn round_trip(
        &self,
        batches: Vec<(u64, Vec<WorkRequest>)>,
        stats: &mut OpStats,
    ) -> Result<Vec<Vec<Completion>>, KvError> {
        let mut futures: Vec<Pin<Box<dyn Future<Output = _>>>> = Vec::new();
        for (memnode, wrs) in batches {
            let link = self
                .links
                .get(&memnode)
                .ok_or_else(|| self.missing(memnode))?;
            charge(&link.qp, &wrs, stats);
            let qp = link.qp.clone();
            futures.push(Box::pin(async move { qp.execute(wrs).await }));
        }
        stats.round_trips += 1;
        let results = join_all(futures).await;
        results.into_iter().map(|r| r.map_err(post_error)).collect()
    }
}

/// Charge the verbs of `batch` on `qp` (not a round trip) to `stats`, at what the
/// transport says they put on the wire.
pub(crate) fn charge(qp: &Qp, batch: &[WorkRequest], stats: &mut OpStats) {
    for wr in batch {
        let cost = qp.wire_cost(wr);
        stats.work_requests += 1;
        stats.bytes_sent += cost.request_bytes;
        stats.bytes_received += cost.response_bytes;
    }
}

/// Post `batch` on `qp` with one doorbell and wait for it: one round trip charged
/// to `stats`.
pub(crate) async fn execute(
    qp: &Qp,
    batch: Vec<WorkRequest>,
    stats: &mut OpStats,
) -> Result<Vec<Completion>, KvError> {
    charge(qp, &batch, stats);
    stats.round_trips += 1;
    qp.execute(batch).await.map_err(post_error)
}

/// A batch that could not be posted.
pub(crate) fn post_error(e: PostError) -> KvError {
    KvError::unavailable_because(format!("posting verbs: {e}"), e)
}

/// Await every future, returning their outputs in order.
pub(crate) async fn join_all<T>(mut futures: Vec<Pin<Box<dyn Future<Output = T> + '_>>>) -> Vec<T> {
    let mut out: Vec<Option<T>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, slot) in futures.iter_mut().zip(out.iter_mut()) {
            if slot.is_none() {
                match f.as_mut().poll(cx) {
                    Poll::Ready(v) => *slot = Some(v),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    out.into_iter().flatten().collect()
}

/// The bytes of a READ completion.
pub(crate) fn read_bytes(c: Option<&Completion>) -> Result<&[u8], KvError> {
    match c.map(|c| &c.result) {
        Some(Ok(CompletionValue::Read(b))) => Ok(b),
        Some(Err(e)) => Err(completion_error(*e)),
        _ => Err(KvError::unavailable("missing READ completion")),
    }
}

/// The original value of a CAS completion.
pub(crate) fn atomic_value(c: Option<&Completion>) -> Result<u64, KvError> {
    match c.map(|c| &c.result) {
        Some(Ok(CompletionValue::Atomic(v))) => Ok(*v),
        Some(Err(e)) => Err(completion_error(*e)),
        _ => Err(KvError::unavailable("missing atomic completion")),
    }
}

/// Whether a WRITE completion succeeded.
pub(crate) fn write_done(c: Option<&Completion>) -> Result<(), KvError> {
    match c.map(|c| &c.result) {
        Some(Ok(CompletionValue::Write)) => Ok(()),
        Some(Err(e)) => Err(completion_error(*e)),
        _ => Err(KvError::unavailable("missing WRITE completion")),
    }
}

/// A work request that completed with an error.
pub(crate) fn completion_error(e: CompletionError) -> KvError {
    KvError::unavailable_because(format!("memory node: {e}"), e)
}
