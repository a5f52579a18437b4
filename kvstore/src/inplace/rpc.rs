//! In-place reads and writes executed by the memory node's RPC workers
//! ([`dmkv_api::rpc_inplace`], operations 10 and 11): one RPC per tuple instead of
//! the scheme's latch, READ, WRITE and unlatch round trips.
//!
//! The node runs the pessimistic latch protocol of the one-sided clients on the
//! region's own atomics (`memnode::rpc::inplace`), with a latch word this client
//! made ([`SlotIo::fresh_latch_word`]): a latch a worker holds looks to one-sided
//! clients exactly like this client's own, and is broken by the same lease. So
//! one-sided, RPC and hybrid clients of one table stay linearizable together.
//!
//! Only the pessimistic schemes are executed at the node ([`NodeLatch`]); the
//! optimistic ones (versioning, CRC, FaRM, the switch's) and the broken bookend
//! demonstration stay one-sided. A request the node hands back (a latch held by
//! someone else through all its tries) changed nothing: the caller goes on
//! one-sided, where the lease rules deal with a dead holder.

use dmkv_api::rpc::Request;
use dmkv_api::rpc_inplace::{
    InPlaceKind, InPlaceRead, InPlaceWrite, ReadOutcome, TupleAt, WriteOutcome,
};

use super::{Layout, NodeLatch, SlotIo};
use crate::error::KvError;
use crate::index::WriteKind;
use crate::session::SessionCore;
use crate::stats::OpStats;

/// Where the node finds one tuple, for this client.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NodeTarget {
    /// The memory node holding the tuples (the acting primary).
    pub memnode: u64,
    /// The scheme's latch, as the node runs it.
    pub latch: NodeLatch,
}

/// What a call came to.
#[derive(Debug)]
pub(crate) enum Answer<T> {
    /// The node's answer.
    Done(T),
    /// The node handed the request back with nothing changed.
    HandedBack,
    /// The node cannot be called: it runs no workers, or the queue pair has no RPC
    /// endpoint.
    Unreachable,
}

fn tuple_at(
    io: &SlotIo,
    layout: &Layout,
    target: &NodeTarget,
    slot: u64,
    rkey: u32,
    owner: u64,
) -> Result<TupleAt, KvError> {
    let latch = io.latch_addr(layout, slot)?;
    let data = io.tuple_addr(layout, slot)?.offset(target.latch.payload_at);
    let payload = u32::try_from(layout.payload)
        .map_err(|_| KvError::InvalidArgument("an in-place payload over 4 GiB".into()))?;
    Ok(TupleAt {
        rkey,
        latch_va: latch.va,
        data_va: data.va,
        payload,
        owner,
    })
}

/// Make the call; `Ok(None)`: the node cannot be called.
async fn call<'r>(
    core: &SessionCore,
    io: &SlotIo,
    target: &NodeTarget,
    build: impl FnOnce(u32) -> Result<Request<'r>, KvError>,
    stats: &mut OpStats,
) -> Result<Option<Vec<u8>>, KvError> {
    let region_rkey = io.area().data.rkey;
    let Some((port, link, rkey)) = crate::rpc_port::endpoint(core, target.memnode, region_rkey)?
    else {
        return Ok(None);
    };
    let request = build(rkey)?;
    let timeout = core.client.options.access.rpc_timeout;
    let reply = port
        .call(&core.worker, &link.qp, Vec::new(), request, timeout, stats)
        .await?;
    crate::rpc_port::ok_body(&reply, "in-place request").map(|b| Some(b.to_vec()))
}

/// Read slot `slot`'s payload at the node under its latch.
pub(crate) async fn read(
    core: &SessionCore,
    io: &SlotIo,
    layout: &Layout,
    target: &NodeTarget,
    slot: u64,
    stats: &mut OpStats,
) -> Result<Answer<Vec<u8>>, KvError> {
    let shared = target.latch.shared_readers;
    let owner = if shared { 0 } else { io.fresh_latch_word() };
    let at_of = |rkey| tuple_at(io, layout, target, slot, rkey, owner);
    let body = call(
        core,
        io,
        target,
        |rkey| {
            Ok(Request::InPlaceRead(InPlaceRead {
                shared,
                at: at_of(rkey)?,
            }))
        },
        stats,
    )
    .await?;
    let Some(body) = body else {
        return Ok(Answer::Unreachable);
    };
    match ReadOutcome::parse(&body) {
        Some(ReadOutcome::Payload(p)) if p.len() == layout.payload => Ok(Answer::Done(p)),
        Some(ReadOutcome::Payload(p)) => Err(KvError::corrupt(format!(
            "the memory node read {} bytes of a {}-byte in-place payload",
            p.len(),
            layout.payload
        ))),
        Some(ReadOutcome::Torn) => Err(super::pessimistic::torn_error(slot)),
        Some(ReadOutcome::Deferred(_)) => Ok(Answer::HandedBack),
        None => Err(KvError::corrupt(
            "the memory node's in-place read reply does not parse",
        )),
    }
}

/// The wire kind of a table write.
fn kind_of(kind: WriteKind) -> InPlaceKind {
    match kind {
        WriteKind::Insert => InPlaceKind::Insert,
        WriteKind::Update => InPlaceKind::Update,
        WriteKind::Put => InPlaceKind::Put,
        WriteKind::Delete => InPlaceKind::Delete,
    }
}

/// Write `key` into slot `slot` at the node, deciding as the table does under the
/// latch.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn write(
    core: &SessionCore,
    io: &SlotIo,
    layout: &Layout,
    target: &NodeTarget,
    slot: u64,
    kind: WriteKind,
    key: &[u8],
    value: &[u8],
    stats: &mut OpStats,
) -> Result<Answer<WriteOutcome>, KvError> {
    let owner = io.fresh_latch_word();
    let at = |rkey| tuple_at(io, layout, target, slot, rkey, owner);
    let body = call(
        core,
        io,
        target,
        |rkey| {
            Ok(Request::InPlaceWrite(InPlaceWrite {
                kind: kind_of(kind),
                at: at(rkey)?,
                key,
                value,
            }))
        },
        stats,
    )
    .await?;
    let Some(body) = body else {
        return Ok(Answer::Unreachable);
    };
    match WriteOutcome::parse(&body) {
        Some(WriteOutcome::Deferred(_)) => Ok(Answer::HandedBack),
        Some(o) => Ok(Answer::Done(o)),
        None => Err(KvError::corrupt(
            "the memory node's in-place write reply does not parse",
        )),
    }
}
