//! The client library's I/O layer: memory-node links, pointer translation, and
//! batches of verbs whose cost — as the transport reports it for each work request —
//! is charged to an operation. The indexes and the latch schemes post through it.
//!
//! Every batch goes to one memory node's queue pair with one doorbell; batches to
//! several memory nodes that an operation issues together are posted at once and
//! awaited together, which is one round trip.

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use verbs::transport::QpHandle;
use verbs::worker::{Qp, Worker};
use verbs::wr::{Completion, CompletionError, CompletionValue, PostError, RemoteAddr, WorkRequest};

use crate::connect::RegionRef;
use crate::error::KvError;
use crate::fabric::{Replace, SharedRoutes};
use crate::ptr::RemotePtr;
use crate::reconnect::Reconnector;
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

/// The memory nodes a session is connected to, by metadata memnode id, and what it
/// needs to connect again to those it lost or never reached ([`crate::reconnect`]).
pub(crate) struct Links {
    links: RefCell<HashMap<u64, Link>>,
    /// Regions of registered memory nodes, connected or not (see
    /// [`Links::with_known_regions`]).
    known: HashMap<u64, RegionRef>,
    routes: SharedRoutes,
    worker: Worker,
    reconnector: Reconnector,
    /// The switch's replica sets (switch replication of writes) and whose turn it is.
    mirrors: crate::replication::by_switch::SwitchMirrors,
}

/// What a pointer resolved to.
pub(crate) struct Target {
    /// The memnode id.
    pub memnode: u64,
    /// The verbs address.
    pub addr: RemoteAddr,
}

impl Links {
    /// The links of a session whose worker is `worker`, over `routes`, with the
    /// memory nodes reached when it opened (`connected`: route and region by id).
    pub(crate) fn new(
        worker: Worker,
        routes: SharedRoutes,
        connected: HashMap<u64, (QpHandle, RegionRef)>,
        reconnector: Reconnector,
    ) -> Links {
        let links = connected
            .into_iter()
            .map(|(id, (route, region))| (id, link_of(&worker, route, region)))
            .collect();
        Links {
            links: RefCell::new(links),
            known: HashMap::new(),
            routes,
            worker,
            reconnector,
            mirrors: Default::default(),
        }
    }

    /// Replicated WRITEs go through the switch's replica sets `mirrors`.
    pub(crate) fn with_mirrors(
        mut self,
        mirrors: crate::replication::by_switch::SwitchMirrors,
    ) -> Links {
        self.mirrors = mirrors;
        self
    }

    /// The alias key under which one WRITE of `len` bytes to `members` (memnode ids,
    /// primary first) is replicated by the switch, if it can be: the switch has the
    /// set, the WRITE is one packet, and the primary's queue pair does not translate
    /// keys.
    pub(crate) fn switch_alias(&self, members: &[u64], len: u64) -> Option<u32> {
        let primary = *members.first()?;
        let link = self.connected(primary)?;
        let pmtu = u64::from(self.mirrors.pmtu());
        if len == 0 || len > pmtu || self.routes.borrow().translates_keys(link.qp.handle()) {
            return None;
        }
        self.mirrors.alias(members)
    }

    /// The read alias key under which one READ of `len` bytes from `members` (memnode
    /// ids, primary first) may be served by any member the switch picks: the switch
    /// balances the set's READs, the READ is one response packet, and the primary's
    /// queue pair does not translate keys. Only for bytes that never change while a
    /// reader can reach them.
    pub(crate) fn switch_read_alias(&self, members: &[u64], len: u64) -> Option<u32> {
        let primary = *members.first()?;
        let link = self.connected(primary)?;
        let pmtu = u64::from(self.mirrors.pmtu()).min(1024);
        if len == 0 || len > pmtu || self.routes.borrow().translates_keys(link.qp.handle()) {
            return None;
        }
        self.mirrors.read_alias(members)
    }

    /// The routes under the session's queue pairs.
    pub(crate) fn routes(&self) -> &SharedRoutes {
        &self.routes
    }

    /// The reconnector.
    pub(crate) fn reconnector(&self) -> &Reconnector {
        &self.reconnector
    }

    /// Why memnode `id` has no link: the session could not reach it (when it opened
    /// or since), or it registered after the session opened.
    pub(crate) fn missing(&self, id: u64) -> KvError {
        match self.reconnector.last_error(id) {
            Some(why) => KvError::unavailable(format!(
                "memnode {id} holds this data but is not connected to this session ({why}); \
                 the session connects again when an operation needs it"
            )),
            None => KvError::unavailable(format!("memnode {id} is not connected to this session")),
        }
    }

    /// Remembers the regions of the registered memory nodes (from the metadata
    /// service when the session opened), so that memory on a node the session
    /// cannot reach can still be named: a replicated table's home that failed over
    /// names the copies its backups hold.
    pub(crate) fn with_known_regions(mut self, known: HashMap<u64, RegionRef>) -> Links {
        self.known = known;
        self
    }

    /// The memnode ids with a link.
    pub(crate) fn ids(&self) -> impl Iterator<Item = u64> + use<> {
        let ids: Vec<u64> = self.links.borrow().keys().copied().collect();
        ids.into_iter()
    }

    /// The link of memnode `id`, connecting to it first if the session has none
    /// (rate-limited).
    pub(crate) fn get(&self, id: u64) -> Option<Link> {
        self.connected(id)
            .or_else(|| self.reconnect(id, "its data is needed", false).ok())
    }

    /// The link of memnode `id`, if the session has one (usable or not).
    fn connected(&self, id: u64) -> Option<Link> {
        self.links.borrow().get(&id).cloned()
    }

    /// The link of memnode `id` ready to post on: connected, and its queue pair
    /// neither failed nor idle long enough for the node to have reclaimed it
    /// (those are replaced first).
    pub(crate) fn ready(&self, id: u64) -> Result<Link, KvError> {
        let now = Instant::now();
        let Some(link) = self.connected(id) else {
            return self.reconnect(id, "its data is needed", false);
        };
        let why = self.routes.borrow().needs_replacing(link.qp.handle(), now);
        match why {
            None => Ok(link),
            Some(why) => {
                let idle = matches!(why, Replace::Idle(_));
                self.reconnect(id, why.reason(), idle)
            }
        }
    }

    /// Memory nodes among `ids` without a link ready to post on.
    pub(crate) fn not_ready(&self, ids: &[u64]) -> Vec<u64> {
        let now = Instant::now();
        let links = self.links.borrow();
        let routes = self.routes.borrow();
        ids.iter()
            .copied()
            .filter(|id| match links.get(id) {
                Some(link) => routes.needs_replacing(link.qp.handle(), now).is_some(),
                None => true,
            })
            .collect()
    }

    /// Connect to memnode `id` again because of `why` (see [`Reconnector::attempt`]).
    fn reconnect(&self, id: u64, why: &str, forced: bool) -> Result<Link, KvError> {
        self.routes.borrow().touch(id);
        let fresh = self
            .reconnector
            .attempt(id, why, forced, &self.routes, Instant::now())?;
        let link = link_of(&self.worker, fresh.route, fresh.region);
        self.links.borrow_mut().insert(id, link.clone());
        Ok(link)
    }

    /// Translate `ptr` for an access of `len` bytes; `None` when the memnode is unknown
    /// or unreachable, or the access leaves its region (a pointer that fails
    /// validation, never posted).
    pub(crate) fn resolve(&self, ptr: RemotePtr, len: u64) -> Option<Target> {
        let memnode = u64::from(ptr.memnode());
        let link = self.get(memnode)?;
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
        let (base_va, len) = match (self.connected(memnode), self.known.get(&memnode)) {
            (Some(link), _) => (link.base_va, link.len),
            (None, Some(r)) => (r.base_va, r.len),
            (None, None) => {
                let link = self.get(memnode).ok_or_else(|| self.missing(memnode))?;
                (link.base_va, link.len)
            }
        };
        let offset = va
            .checked_sub(base_va)
            .filter(|o| *o < len)
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

    /// Wait until memnode `id` has a link ready to post on, connecting again as
    /// attempts come due, until `deadline`; the last failure if it does not.
    pub(crate) async fn wait_ready(&self, id: u64, deadline: Instant) -> Result<(), KvError> {
        loop {
            let error = match self.ready(id) {
                Ok(_) => return Ok(()),
                Err(e) => e,
            };
            let now = Instant::now();
            if now >= deadline {
                return Err(error);
            }
            let next = self
                .reconnector
                .next_attempt(id)
                .unwrap_or(now)
                .max(now + Duration::from_millis(1))
                .min(deadline);
            self.worker.sleep(next.saturating_duration_since(now)).await;
        }
    }

    /// Post each `(memnode, batch)` with one doorbell, all at once, and wait for every
    /// completion: one round trip charged to `stats`. Completions come back per batch,
    /// in order.
    pub(crate) async fn round_trip(
        &self,
        batches: Vec<(u64, Vec<WorkRequest>)>,
        stats: &mut OpStats,
    ) -> Result<Vec<Vec<Completion>>, KvError> {
        // A memory node carries one replicated WRITE of this session at a time (the
        // switch tracks one per connection): wait for its turn.
        let mut turns = Vec::new();
        if self.mirrors.on() {
            for (memnode, wrs) in &batches {
                let replicated = wrs.iter().any(|wr| {
                    matches!(wr, WorkRequest::Write { remote, .. } if self.mirrors.is_alias(remote.rkey))
                });
                if replicated {
                    loop {
                        if let Some(turn) = self.mirrors.enter(*memnode) {
                            turns.push(turn);
                            break;
                        }
                        self.worker
                            .sleep(std::time::Duration::from_micros(20))
                            .await;
                    }
                }
            }
        }
        let mut futures: Vec<Pin<Box<dyn Future<Output = _>>>> = Vec::new();
        for (memnode, wrs) in batches {
            let link = self.ready(memnode)?;
            charge(&link.qp, &wrs, stats);
            let qp = link.qp.clone();
            futures.push(Box::pin(async move { qp.execute(wrs).await }));
        }
        stats.round_trips += 1;
        let results = join_all(futures).await;
        results.into_iter().map(|r| r.map_err(post_error)).collect()
    }
}

fn link_of(worker: &Worker, route: QpHandle, region: RegionRef) -> Link {
    Link {
        qp: worker.qp(route),
        rkey: region.rkey,
        base_va: region.base_va,
        len: region.len,
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
