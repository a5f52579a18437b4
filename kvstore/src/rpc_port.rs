//! A session's RPC endpoint on one queue pair: requests go out as SENDs on the
//! queue pair the session already has to a memory node — or, when the queue pair has
//! a request ring ([`crate::RpcTransport::Write`]), as one WRITE into it
//! ([`RingWriter`]) — and replies come back as SENDs from the node's workers into the
//! receive queue set up when the queue pair was connected (`udp` queue pairs to a
//! node started with `--rpc-workers N`).
//!
//! Every call posts one receive buffer for its reply and matches replies to calls
//! by the request id the node echoes, so the session's tasks may have several calls
//! outstanding on one queue pair. A reply that arrives after its call gave up is
//! dropped when it is seen.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::time::{Duration, Instant};

use dmkv_api::memnode::RpcRingInfo;
use dmkv_api::rpc::{RPC_HEADER_LEN, RPC_MAX_REPLY, RPC_MAX_REQUEST, Request, request_id};
use verbs::recv::RecvQueue;
use verbs::worker::{Qp, Worker};
use verbs::wr::WorkRequest;

use crate::address_map::AddressMap;
use crate::error::KvError;
use crate::remote::{Link, charge, post_error};
use crate::rpc_ring_writer::RingWriter;
use crate::session::SessionCore;
use crate::stats::OpStats;

/// Where a session calls memory node `memnode`: its RPC endpoint, its link (queue
/// pair and region), and the key requests carry for `region_rkey` on that queue
/// pair. `Ok(None)`: the node runs no RPC workers, or the queue pair cannot carry
/// RPCs (no reply queue; an RDMA queue pair's windows).
pub(crate) fn endpoint(
    core: &SessionCore,
    memnode: u64,
    region_rkey: u32,
) -> Result<Option<(std::rc::Rc<RpcPort>, Link, u32)>, KvError> {
    let link = core.links.ready(memnode)?;
    let Some((port, map)) = core.links.routes().borrow().rpc_of(link.qp.handle()) else {
        return Ok(None);
    };
    let rkey = match map {
        None => region_rkey,
        Some(AddressMap::Rekey { region, own }) if region == region_rkey => own,
        Some(AddressMap::Rekey { .. }) => region_rkey,
        Some(AddressMap::Windows { .. }) => return Ok(None),
    };
    Ok(Some((port, link, rkey)))
}

/// The body of an `ok` reply to a request for `what` (e.g. "Clover insert"); any other
/// status is the error the caller returns: `failed` (the worker stopped executing it:
/// its effect is unknown) or a refusal.
pub(crate) fn ok_body<'a>(reply: &'a [u8], what: &str) -> Result<&'a [u8], KvError> {
    let reply = dmkv_api::rpc::parse_reply(reply)
        .map_err(|e| KvError::corrupt(format!("the memory node's RPC reply: {e}")))?;
    match reply.status {
        dmkv_api::rpc::RpcStatus::Ok => Ok(reply.body),
        dmkv_api::rpc::RpcStatus::Failed => Err(KvError::unavailable(format!(
            "the memory node's worker failed executing the {what}; it may or may not have \
             taken effect"
        ))),
        other => Err(KvError::unavailable(format!(
            "the memory node refused the {what}: {other:?}"
        ))),
    }
}

/// The error of an `rpc` operation on a node without RPC workers.
pub(crate) fn no_workers(table: &str) -> KvError {
    KvError::Unsupported(format!(
        "table {table:?}: access mode rpc needs a memory node with RPC workers \
         (start it with --rpc-workers N) reached over udp; use one-sided or hybrid"
    ))
}

/// Receive buffers a queue pair's reply queue holds at most.
pub(crate) const REPLY_QUEUE_DEPTH: usize = 64;

/// How often a waiting call looks at the reply queue.
const POLL_EVERY: Duration = Duration::from_micros(20);

/// Replies kept for calls that have not looked yet (more are dropped: their calls
/// gave up).
const MAX_STASHED: usize = 256;

/// What a queue pair's RPC endpoint is made of.
#[derive(Debug, Clone)]
pub(crate) struct RpcSetup {
    /// Where the replies arrive.
    pub(crate) replies: RecvQueue,
    /// The queue pair's request ring, when it has one.
    pub(crate) ring: Option<RpcRingInfo>,
}

/// The RPC endpoint of one queue pair.
pub(crate) struct RpcPort {
    replies: RecvQueue,
    ring: Option<RingWriter>,
    stash: RefCell<HashMap<u64, Vec<u8>>>,
    next_id: Cell<u64>,
}

impl std::fmt::Debug for RpcPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RpcPort")
            .field("next_id", &self.next_id.get())
            .finish()
    }
}

impl RpcPort {
    /// The endpoint `setup` describes.
    pub(crate) fn new(setup: RpcSetup) -> RpcPort {
        RpcPort {
            replies: setup.replies,
            ring: setup.ring.map(RingWriter::new),
            stash: RefCell::new(HashMap::new()),
            // Start from a random id, so a late reply to an earlier queue pair's
            // call is unlikely to match one of this one's.
            next_id: Cell::new(u64::from(rand::random::<u32>()) << 16),
        }
    }

    /// A fresh request id.
    fn next_id(&self) -> u64 {
        let id = self.next_id.get().wrapping_add(1);
        self.next_id.set(id);
        id
    }

    /// Post `before` (e.g. the WRITE of a KV block the request names) and the SEND
    /// of `request` (or its WRITE into the request ring) with one doorbell, then wait
    /// up to `timeout` for the reply message. One round trip and one RPC in `stats`.
    pub(crate) async fn call(
        &self,
        worker: &Worker,
        qp: &Qp,
        before: Vec<WorkRequest>,
        request: Request<'_>,
        timeout: Duration,
        stats: &mut OpStats,
    ) -> Result<Vec<u8>, KvError> {
        let id = self.next_id();
        let message = request.encode(id);
        // A full queue already holds enough buffers for every reply outstanding.
        let _ = self
            .replies
            .post_recv(id, vec![0u8; RPC_MAX_REPLY.next_power_of_two()]);
        let started = Instant::now();
        let (carrier, ring) = match self.ring.as_ref().filter(|r| r.usable()) {
            Some(ring) => match self
                .ring_slot(worker, ring, id, &message, started, timeout)
                .await?
            {
                Some(write) => (write, Some(ring)),
                None => (WorkRequest::send(message), None),
            },
            None => (WorkRequest::send(message), None),
        };
        let mut batch = before;
        batch.push(carrier);
        charge(qp, &batch, stats);
        stats.round_trips += 1;
        stats.rpcs += 1;
        if let Err(e) = qp.execute(batch).await {
            // Whether the request landed in its slot is unknown: the ring may stall.
            if let Some(ring) = ring {
                ring.give_up();
            }
            return Err(post_error(e));
        }
        loop {
            if let Some(reply) = self.take(id) {
                return Ok(reply);
            }
            if started.elapsed() >= timeout {
                // A request left unexecuted in its slot stalls the ring's later ones.
                if let Some(ring) = ring {
                    ring.give_up();
                }
                return Err(KvError::unavailable(format!(
                    "no reply to RPC {id:#x} from the memory node within {timeout:?} \
                     (its workers may have stopped); the operation may or may not have \
                     taken effect"
                )));
            }
            worker.sleep(POLL_EVERY).await;
        }
    }

    /// The WRITE putting request `id` (`message`) into its slot of `ring`, once the
    /// slot is free (waiting for earlier replies until `timeout` after `started`);
    /// `None`: the ring was given up meanwhile, send the request instead.
    async fn ring_slot(
        &self,
        worker: &Worker,
        ring: &RingWriter,
        id: u64,
        message: &[u8],
        started: Instant,
        timeout: Duration,
    ) -> Result<Option<WorkRequest>, KvError> {
        if !(RPC_HEADER_LEN..=RPC_MAX_REQUEST).contains(&message.len()) {
            // No slot holds it: the SEND path answers it with the node's error.
            return Ok(None);
        }
        let claim = RingClaim::new(ring, id);
        loop {
            if !ring.usable() {
                ring.replied(id);
                claim.settle();
                return Ok(None);
            }
            self.drain();
            if ring.slot_free(claim.seq) {
                let write = ring.write(claim.seq, message)?;
                claim.settle();
                return Ok(Some(write));
            }
            if started.elapsed() >= timeout {
                return Err(KvError::unavailable(format!(
                    "RPC {id:#x}: no free slot in the request ring within {timeout:?} \
                     (earlier requests unanswered); it was not sent"
                )));
            }
            worker.sleep(POLL_EVERY).await;
        }
    }

    /// Moves every reply that arrived into the stash (noting it for the ring).
    fn drain(&self) {
        let mut stash = self.stash.borrow_mut();
        while let Some(c) = self.replies.poll() {
            if c.result.is_err() {
                continue;
            }
            let got = request_id(&c.data);
            if let Some(ring) = &self.ring {
                ring.replied(got);
            }
            if stash.len() >= MAX_STASHED {
                stash.clear();
            }
            stash.insert(got, c.data);
        }
    }

    /// The reply to `id`, if it has arrived; other replies are kept for their calls.
    fn take(&self, id: u64) -> Option<Vec<u8>> {
        self.drain();
        self.stash.borrow_mut().remove(&id)
    }
}

/// A sequence number taken in a ring for a request not written yet. Unless settled
/// (written, or the ring given up anyway), dropping it — the call gave up or was
/// dropped while waiting for its slot — gives the ring up: the ring would wait for
/// that number forever.
struct RingClaim<'a> {
    ring: &'a RingWriter,
    seq: u64,
    settled: Cell<bool>,
}

impl<'a> RingClaim<'a> {
    fn new(ring: &'a RingWriter, id: u64) -> RingClaim<'a> {
        RingClaim {
            ring,
            seq: ring.claim(id),
            settled: Cell::new(false),
        }
    }

    fn settle(&self) {
        self.settled.set(true);
    }
}

impl Drop for RingClaim<'_> {
    fn drop(&mut self) {
        if !self.settled.get() {
            self.ring.give_up();
        }
    }
}
