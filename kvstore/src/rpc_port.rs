//! A session's RPC endpoint on one queue pair: requests go out as SENDs on the
//! queue pair the session already has to a memory node, replies come back as SENDs
//! from the node's workers into the receive queue set up when the queue pair was
//! connected (`udp` queue pairs to a node started with `--rpc-workers N`).
//!
//! Every call posts one receive buffer for its reply and matches replies to calls
//! by the request id the node echoes, so the session's tasks may have several calls
//! outstanding on one queue pair. A reply that arrives after its call gave up is
//! dropped when it is seen.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::time::{Duration, Instant};

use dmkv_api::rpc::{RPC_MAX_REPLY, Request, request_id};
use verbs::recv::RecvQueue;
use verbs::worker::{Qp, Worker};
use verbs::wr::WorkRequest;

use crate::address_map::AddressMap;
use crate::error::KvError;
use crate::remote::{Link, charge, post_error};
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

/// The RPC endpoint of one queue pair.
pub(crate) struct RpcPort {
    replies: RecvQueue,
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
    /// The endpoint whose replies arrive in `replies`.
    pub(crate) fn new(replies: RecvQueue) -> RpcPort {
        RpcPort {
            replies,
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
    /// of `request` with one doorbell, then wait up to `timeout` for the reply
    /// message. One round trip and one RPC in `stats`.
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
        let mut batch = before;
        batch.push(WorkRequest::send(message));
        charge(qp, &batch, stats);
        stats.round_trips += 1;
        stats.rpcs += 1;
        let started = Instant::now();
        qp.execute(batch).await.map_err(post_error)?;
        loop {
            if let Some(reply) = self.take(id) {
                return Ok(reply);
            }
            if started.elapsed() >= timeout {
                return Err(KvError::unavailable(format!(
                    "no reply to RPC {id:#x} from the memory node within {timeout:?} \
                     (its workers may have stopped); the operation may or may not have \
                     taken effect"
                )));
            }
            worker.sleep(POLL_EVERY).await;
        }
    }

    /// The reply to `id`, if it has arrived; other replies are kept for their calls.
    fn take(&self, id: u64) -> Option<Vec<u8>> {
        let mut stash = self.stash.borrow_mut();
        while let Some(c) = self.replies.poll() {
            if c.result.is_err() {
                continue;
            }
            let got = request_id(&c.data);
            if got == id {
                return Some(c.data);
            }
            if stash.len() >= MAX_STASHED {
                stash.clear();
            }
            stash.insert(got, c.data);
        }
        stash.remove(&id)
    }
}
