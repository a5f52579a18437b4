//! A session's transport with queue pairs that can be replaced under the handles the
//! indexes hold.
//!
//! The worker of a session drives a [`RoutedTransport`]: every queue pair the indexes
//! post on (a [`verbs::worker::Qp`]) names a *route* — one per memory node — and the
//! route names the queue pair of the real transport ([`Fabric`]) that currently
//! carries it. Replacing a broken queue pair swaps the route's queue pair; the handles
//! cached in table handles stay valid.
//!
//! The routed transport also watches what goes through it:
//! - a route whose queue pair failed (retry counter exceeded, flushed, error state)
//!   is marked broken, and posts on it are refused with `QpError` until it is
//!   replaced (nothing is sent);
//! - a route idle for most of its memory node's idle timeout ([`crate::idle`]) is
//!   refused the same way, so it is replaced before it is used;
//! - the operation being polled (its [`OpJournal`], installed by [`crate::recovery`])
//!   learns which memory nodes it used and whether it sent anything but READs.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use verbs::transport::local::DirectTransport;
#[cfg(feature = "rdma")]
use verbs::transport::rdma::RdmaTransport;
use verbs::transport::udp::UdpTransport;
use verbs::transport::{QpHandle, Transport, TransportKind, TransportStats, WireCost};
use verbs::wr::{Completion, CompletionError, PostError, WorkRequest, WrKind};

use crate::address_map::AddressMap;
use crate::idle::IdleWatch;

/// The real transport of a session.
pub(crate) enum Fabric {
    /// Soft RoCE.
    Udp(Box<UdpTransport>),
    /// In-process or shared-memory regions, applied directly.
    Direct(DirectTransport),
    /// An RDMA NIC: the session's own device context, queue pairs and completion queue.
    #[cfg(feature = "rdma")]
    Rdma(Box<RdmaTransport>),
}

impl Fabric {
    fn get(&self) -> &dyn Transport {
        match self {
            Fabric::Udp(t) => t.as_ref(),
            Fabric::Direct(t) => t,
            #[cfg(feature = "rdma")]
            Fabric::Rdma(t) => t.as_ref(),
        }
    }

    fn get_mut(&mut self) -> &mut dyn Transport {
        match self {
            Fabric::Udp(t) => t.as_mut(),
            Fabric::Direct(t) => t,
            #[cfg(feature = "rdma")]
            Fabric::Rdma(t) => t.as_mut(),
        }
    }
}

/// What one operation did on the wire, as far as recovering from a failed queue
/// pair is concerned.
#[derive(Debug, Default)]
pub(crate) struct OpJournal {
    /// It posted a WRITE, CAS or FAA.
    wrote: Cell<bool>,
    /// Memory nodes it posted to or needed (deduplicated).
    touched: RefCell<Vec<u64>>,
    /// Its WRITEs, CASes and FAAs may go only on queue pairs made up to this
    /// route generation ([`Routes::limit_writes`]).
    write_limit: Cell<Option<u64>>,
    /// A write was refused for a queue pair made after the limit (nothing sent).
    refused: Cell<bool>,
}

impl OpJournal {
    /// Whether the operation posted anything but READs.
    pub(crate) fn wrote(&self) -> bool {
        self.wrote.get()
    }

    /// The memory nodes the operation posted to or needed.
    pub(crate) fn touched(&self) -> Vec<u64> {
        self.touched.borrow().clone()
    }

    /// Whether a write of the operation was refused because its queue pair was
    /// made after the operation confirmed its table's configuration.
    pub(crate) fn refused(&self) -> bool {
        self.refused.get()
    }

    /// The operation used (or needed) memory node `memnode`.
    pub(crate) fn touch(&self, memnode: u64) {
        let mut t = self.touched.borrow_mut();
        if !t.contains(&memnode) {
            t.push(memnode);
        }
    }
}

/// One memory node's route.
struct Route {
    memnode: u64,
    /// The queue pair of the fabric carrying it.
    inner: QpHandle,
    /// Why its queue pair must be replaced before the next post, if it must.
    broken: Option<String>,
    idle: IdleWatch,
    /// How remote addresses become the queue pair's (its own key, or an RDMA queue
    /// pair's windows), if they must.
    address_map: Option<AddressMap>,
    /// When the queue pair must be replaced whatever happens (an RDMA queue pair whose
    /// grants are due for refreshing: the NIC's keys are fixed at creation).
    replace_at: Option<Instant>,
    /// The route generation its current queue pair was made in.
    made_in: u64,
    /// Its queue pair's RPC endpoint, when the memory node runs RPC workers.
    rpc: Option<Rc<crate::rpc_port::RpcPort>>,
}

/// The routes of a session and the fabric under them (shared by the session and
/// its [`RoutedTransport`]).
pub(crate) struct Routes {
    fabric: Fabric,
    routes: Vec<Route>,
    /// Fabric queue pair → route (replaced queue pairs keep theirs: their flushed
    /// completions still reach the operations that posted them).
    by_inner: HashMap<QpHandle, usize>,
    /// The operation being polled, if any.
    op: Option<Rc<OpJournal>>,
    scratch: Vec<(QpHandle, Completion)>,
    /// Bumped whenever a route gets a queue pair.
    generation: u64,
}

/// Why a route needs a new queue pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Replace {
    /// Its queue pair failed, for this reason.
    Failed(String),
    /// Its queue pair idled long enough for the memory node to reclaim it.
    Idle(String),
}

impl Replace {
    /// The reason, for logs.
    pub(crate) fn reason(&self) -> &str {
        match self {
            Replace::Failed(why) | Replace::Idle(why) => why,
        }
    }
}

/// [`Routes`] shared between a session and its worker's transport.
pub(crate) type SharedRoutes = Rc<RefCell<Routes>>;

/// Whether a completion error means the queue pair itself is gone.
pub(crate) fn breaks_queue_pair(e: CompletionError) -> bool {
    matches!(e, CompletionError::RetryExceeded | CompletionError::Flushed)
}

impl Routes {
    /// Routes over `fabric`, none yet.
    pub(crate) fn shared(fabric: Fabric) -> SharedRoutes {
        Rc::new(RefCell::new(Routes {
            fabric,
            routes: Vec::new(),
            by_inner: HashMap::new(),
            op: None,
            scratch: Vec::new(),
            generation: 0,
        }))
    }

    /// The fabric, to create queue pairs on.
    pub(crate) fn fabric_mut(&mut self) -> &mut Fabric {
        &mut self.fabric
    }

    /// A new route to `memnode` over fabric queue pair `inner`; returns its handle
    /// (what the worker's `Qp` names).
    pub(crate) fn add(
        &mut self,
        memnode: u64,
        inner: QpHandle,
        idle_timeout: Option<Duration>,
        now: Instant,
    ) -> QpHandle {
        let route = self.routes.len();
        self.generation += 1;
        self.routes.push(Route {
            memnode,
            inner,
            broken: None,
            idle: IdleWatch::new(idle_timeout, now),
            address_map: None,
            replace_at: None,
            made_in: self.generation,
            rpc: None,
        });
        self.by_inner.insert(inner, route);
        route
    }

    /// Carry route `route` over the new fabric queue pair `inner` from now on.
    pub(crate) fn replace(
        &mut self,
        route: QpHandle,
        inner: QpHandle,
        idle_timeout: Option<Duration>,
        now: Instant,
    ) {
        if let Some(r) = self.routes.get_mut(route) {
            self.generation += 1;
            r.inner = inner;
            r.broken = None;
            r.idle = IdleWatch::new(idle_timeout, now);
            r.made_in = self.generation;
            self.by_inner.insert(inner, route);
        }
    }

    /// Ends the operation being polled before it writes anything, to be repeated
    /// as a write refused by [`Routes::limit_writes`] is: the error to return.
    pub(crate) fn refuse_writes(&self, why: &str) -> crate::error::KvError {
        if let Some(op) = &self.op {
            op.refused.set(true);
        }
        crate::error::KvError::unavailable(why)
    }

    /// From now on, the operation being polled may post WRITEs, CASes and FAAs
    /// only on the queue pairs the session has now: called once it confirmed
    /// its (replicated) table's configuration. A queue pair made later — after
    /// a fence of the table's replica set, perhaps — carries none of its writes
    /// (they are refused, unsent, and the operation repeats on the configuration
    /// it then fetches).
    pub(crate) fn limit_writes(&self) {
        if let Some(op) = &self.op {
            op.write_limit.set(Some(self.generation));
        }
    }

    /// Remote addresses posted on route `route` are translated by `map`, for the queue
    /// pair that carries it now (`None`: as posted); with `replace_at`, that queue pair
    /// is replaced at that time whatever happens.
    pub(crate) fn set_address_map(
        &mut self,
        route: QpHandle,
        map: Option<AddressMap>,
        replace_at: Option<Instant>,
    ) {
        if let Some(r) = self.routes.get_mut(route) {
            r.address_map = map;
            r.replace_at = replace_at;
        }
    }

    /// Whether route `route`'s queue pair translates the keys posted on it (made with
    /// a grant): such a queue pair cannot carry a switch alias key.
    pub(crate) fn translates_keys(&self, route: QpHandle) -> bool {
        self.routes
            .get(route)
            .is_some_and(|r| r.address_map.is_some())
    }

    /// The RPC endpoint of route `route`'s queue pair (`None`: the memory node runs
    /// no RPC workers, or the transport has no receive queues).
    pub(crate) fn set_rpc(&mut self, route: QpHandle, rpc: Option<crate::rpc_port::RpcSetup>) {
        if let Some(r) = self.routes.get_mut(route) {
            r.rpc = rpc.map(|s| Rc::new(crate::rpc_port::RpcPort::new(s)));
        }
    }

    /// Route `route`'s RPC endpoint and how its queue pair translates region keys.
    pub(crate) fn rpc_of(
        &self,
        route: QpHandle,
    ) -> Option<(Rc<crate::rpc_port::RpcPort>, Option<AddressMap>)> {
        let r = self.routes.get(route)?;
        Some((r.rpc.clone()?, r.address_map.clone()))
    }

    /// Why route `route` must get a new queue pair before its next post (`None`: it
    /// is usable at `now`).
    pub(crate) fn needs_replacing(&self, route: QpHandle, now: Instant) -> Option<Replace> {
        let r = self.routes.get(route)?;
        if let Some(why) = &r.broken {
            return Some(Replace::Failed(why.clone()));
        }
        if r.replace_at.is_some_and(|t| now >= t) {
            return Some(Replace::Idle(GRANTS_DUE.to_owned()));
        }
        r.idle
            .should_refresh(now)
            .then(|| Replace::Idle(idle_reason(&r.idle)))
    }

    /// Install `op` as the operation being polled; returns the one it replaces.
    pub(crate) fn enter(&mut self, op: Option<Rc<OpJournal>>) -> Option<Rc<OpJournal>> {
        std::mem::replace(&mut self.op, op)
    }

    /// Tell the operation being polled, if any, that it needed `memnode`.
    pub(crate) fn touch(&self, memnode: u64) {
        if let Some(op) = &self.op {
            op.touch(memnode);
        }
    }

    fn mark_broken(&mut self, route: usize, why: String) {
        if let Some(r) = self.routes.get_mut(route)
            && r.broken.is_none()
        {
            tracing::warn!(
                memnode = r.memnode,
                reason = %why,
                "queue pair to the memory node failed; the session replaces it before using it again"
            );
            r.broken = Some(why);
        }
    }
}

/// Why a queue pair past its `replace_at` is replaced.
const GRANTS_DUE: &str =
    "its grants are due for refreshing (an RDMA queue pair takes them at creation)";

fn idle_reason(idle: &IdleWatch) -> String {
    match idle.timeout() {
        Some(t) => format!(
            "idle for most of the memory node's {} ms idle timeout",
            t.as_millis()
        ),
        None => "idle".to_owned(),
    }
}

/// The transport a session's worker drives: routes over the session's [`Fabric`].
pub(crate) struct RoutedTransport {
    routes: SharedRoutes,
}

impl RoutedTransport {
    /// The transport over `routes`.
    pub(crate) fn new(routes: SharedRoutes) -> RoutedTransport {
        RoutedTransport { routes }
    }
}

impl Transport for RoutedTransport {
    fn kind(&self) -> TransportKind {
        self.routes.borrow().fabric.get().kind()
    }

    fn post(&mut self, qp: QpHandle, mut batch: Vec<(u64, WorkRequest)>) -> Result<(), PostError> {
        let mut guard = self.routes.borrow_mut();
        let routes = &mut *guard;
        let now = Instant::now();
        let Some(route) = routes.routes.get_mut(qp) else {
            return Err(PostError::QpError);
        };
        let memnode = route.memnode;
        let inner = route.inner;
        if let Some(op) = &routes.op {
            op.touch(memnode);
        }
        if route.broken.is_some() {
            return Err(PostError::QpError);
        }
        if route.idle.should_refresh(now) {
            // Not sent: the session replaces the queue pair and tries again.
            return Err(PostError::QpError);
        }
        if route.replace_at.is_some_and(|t| now >= t) {
            // Not sent: the session replaces the queue pair with fresh grants first.
            return Err(PostError::QpError);
        }
        if let Some(map) = &route.address_map {
            for (_, wr) in &mut batch {
                if let Err(outside) = map.apply(wr) {
                    // Memory the queue pair's keys do not reach (a table granted since
                    // it was made): not sent; a new queue pair takes fresh grants.
                    routes.mark_broken(
                        qp,
                        format!(
                            "address {:#x} is outside the queue pair's windows",
                            outside.va
                        ),
                    );
                    return Err(PostError::QpError);
                }
            }
        }
        let n = batch.len();
        let writes = batch.iter().any(|(_, wr)| wr.kind() != WrKind::Read);
        if writes
            && let Some(op) = &routes.op
            && op.write_limit.get().is_some_and(|g| route.made_in > g)
        {
            op.refused.set(true);
            return Err(PostError::QpError);
        }
        match routes.fabric.get_mut().post(inner, batch) {
            Ok(()) => {
                route.idle.posted(n, now);
                if writes && let Some(op) = &routes.op {
                    op.wrote.set(true);
                }
                Ok(())
            }
            Err(PostError::QpError) => {
                routes.mark_broken(qp, "the queue pair is in the error state".into());
                Err(PostError::QpError)
            }
            Err(e) => Err(e),
        }
    }

    fn send_queue_room(&self, qp: QpHandle) -> usize {
        let routes = self.routes.borrow();
        routes
            .routes
            .get(qp)
            .map_or(0, |r| routes.fabric.get().send_queue_room(r.inner))
    }

    fn poll(&mut self, now: Instant, out: &mut Vec<(QpHandle, Completion)>) -> usize {
        let mut guard = self.routes.borrow_mut();
        let routes = &mut *guard;
        let mut scratch = std::mem::take(&mut routes.scratch);
        scratch.clear();
        let n = routes.fabric.get_mut().poll(now, &mut scratch);
        for (inner, c) in scratch.drain(..) {
            let Some(&route) = routes.by_inner.get(&inner) else {
                out.push((inner, c));
                continue;
            };
            let current = routes.routes.get(route).is_some_and(|r| r.inner == inner);
            if current {
                if let Some(r) = routes.routes.get_mut(route) {
                    r.idle.completed();
                }
                if let Err(e) = c.result
                    && breaks_queue_pair(e)
                {
                    routes.mark_broken(route, e.to_string());
                }
            }
            out.push((route, c));
        }
        routes.scratch = scratch;
        n
    }

    fn wait(&mut self, until: Instant) {
        self.routes.borrow_mut().fabric.get_mut().wait(until)
    }

    fn stats(&self) -> TransportStats {
        self.routes.borrow().fabric.get().stats()
    }

    fn wire_cost(&self, qp: QpHandle, wr: &WorkRequest) -> WireCost {
        let routes = self.routes.borrow();
        let inner = routes.routes.get(qp).map_or(qp, |r| r.inner);
        routes.fabric.get().wire_cost(inner, wr)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use verbs::mem::{AccessFlags, MemoryTable, Region};
    use verbs::worker::{Worker, WorkerConfig};
    use verbs::wr::RemoteAddr;

    use super::*;

    fn memory() -> (Arc<MemoryTable>, u32) {
        let table = MemoryTable::new();
        let region = Arc::new(Region::anonymous(4096).expect("region"));
        let info = table
            .register(region, 0x1000, AccessFlags::ALL)
            .expect("register");
        (Arc::new(table), info.rkey)
    }

    #[test]
    fn a_replaced_queue_pair_serves_the_same_handle_and_journals_what_was_sent() {
        let (mem, rkey) = memory();
        let mut direct = DirectTransport::local();
        let first = direct.connect(mem.clone());
        let routes = Routes::shared(Fabric::Direct(direct));
        let now = Instant::now();
        let route = routes.borrow_mut().add(3, first, None, now);
        let worker = Worker::new(
            Box::new(RoutedTransport::new(routes.clone())),
            WorkerConfig::default(),
        );
        let qp = worker.qp(route);
        let at = RemoteAddr::new(rkey, 0x1000);

        let journal = Rc::new(OpJournal::default());
        routes.borrow_mut().enter(Some(journal.clone()));
        worker
            .block_on(qp.write(at, vec![7; 8]))
            .expect("write through the route");
        routes.borrow_mut().enter(None);
        assert!(journal.wrote());
        assert_eq!(journal.touched(), vec![3]);

        // Broken: refused without being sent, and the journal still names the node.
        routes.borrow_mut().mark_broken(route, "test".into());
        assert_eq!(
            routes.borrow().needs_replacing(route, now),
            Some(Replace::Failed("test".to_owned()))
        );
        let reads = Rc::new(OpJournal::default());
        routes.borrow_mut().enter(Some(reads.clone()));
        assert!(worker.block_on(qp.read(at, 8)).is_err());
        routes.borrow_mut().enter(None);
        assert!(!reads.wrote());
        assert_eq!(reads.touched(), vec![3]);

        // Replaced: the same handle works again.
        let second = match &mut routes.borrow_mut().fabric {
            Fabric::Direct(d) => d.connect(mem.clone()),
            _ => unreachable!("a direct fabric"),
        };
        routes.borrow_mut().replace(route, second, None, now);
        assert_eq!(routes.borrow().needs_replacing(route, now), None);
        assert_eq!(worker.block_on(qp.read(at, 8)).expect("read"), vec![7; 8]);
    }

    #[test]
    fn an_idle_route_is_refused_until_replaced() {
        let (mem, rkey) = memory();
        let mut direct = DirectTransport::local();
        let first = direct.connect(mem);
        let routes = Routes::shared(Fabric::Direct(direct));
        let long_ago = Instant::now() - Duration::from_secs(10);
        let route = routes
            .borrow_mut()
            .add(1, first, Some(Duration::from_secs(1)), long_ago);
        let worker = Worker::new(
            Box::new(RoutedTransport::new(routes.clone())),
            WorkerConfig::default(),
        );
        assert!(
            routes
                .borrow()
                .needs_replacing(route, Instant::now())
                .is_some_and(|why| matches!(&why, Replace::Idle(_))
                    && why.reason().contains("1000 ms idle timeout"))
        );
        let r = worker.block_on(worker.qp(route).read(RemoteAddr::new(rkey, 0x1000), 8));
        assert!(r.is_err(), "nothing is sent on an idle queue pair: {r:?}");
    }
}
