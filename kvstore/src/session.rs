//! A per-thread session: the thread's worker with one queue pair per memory node
//! (replaced when it fails, see [`crate::recovery`]), its allocator, SMART conflict avoidance, background runner and counters — the
//! context every index works in — and a slot for what each index keeps per session
//! ([`crate::index`]). Not `Send`: make one per thread with [`Client::session`].

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use verbs::throttle::ConflictAvoidance;
use verbs::transport::TransportStats;
use verbs::worker::Worker;

use crate::alloc::{Allocator, MemoryStats};
use crate::client::{Client, ClientInner};
use crate::connect;
use crate::error::KvError;
use crate::fabric::{RoutedTransport, Routes};
use crate::index::SessionIndex;
use crate::reconnect::Reconnector;
use crate::remote::Links;
use crate::stats::{OpStats, SessionStats};

/// A thread's handle on the cluster. See the [module documentation](self).
pub struct Session {
    pub(crate) core: Rc<SessionCore>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("transport", &self.core.worker.transport_kind())
            .field("stats", &self.core.stats.borrow())
            .finish()
    }
}

pub(crate) struct SessionCore {
    pub client: Arc<ClientInner>,
    pub worker: Worker,
    pub links: Links,
    pub alloc: RefCell<Allocator>,
    stats: RefCell<SessionStats>,
    last_op: Cell<OpStats>,
    conflict: RefCell<ConflictAvoidance>,
    admission_waiters: RefCell<VecDeque<Waker>>,
    background: Cell<usize>,
    /// Background jobs not yet picked up by the runner, and those it is running.
    jobs: RefCell<Vec<Job>>,
    running: RefCell<Vec<Job>>,
    runner: RefCell<Option<Waker>>,
    /// The queue pairs go through the switch accelerator: link CAS results and node
    /// READ responses may carry its steering markers.
    pub accelerated: bool,
    /// Set by [`Session::abandon`]: stop without handing chunks over.
    abandoned: Cell<bool>,
    /// What the indexes keep for this session, one object per index kind.
    indexes: RefCell<Vec<Rc<dyn SessionIndex>>>,
    /// Per replicated table: the configuration epoch the metadata service last
    /// confirmed, and the count of replaced queue pairs then
    /// ([`crate::clover::replicated::confirm_config`]).
    pub config_checks: RefCell<std::collections::HashMap<String, (u64, u64)>>,
    /// The session's leased bytes when its queue pairs last got fresh grants.
    granted_lease_bytes: Cell<u64>,
}

type Job = Pin<Box<dyn Future<Output = ()>>>;

/// The session's background runner: one task, spawned when the session opens,
/// that polls every background job (so jobs are started from inside other tasks
/// without spawning). Holds the session weakly.
async fn run_background(core: Weak<SessionCore>) {
    std::future::poll_fn(move |cx| {
        let Some(core) = core.upgrade() else {
            return Poll::Ready(());
        };
        let mut running = std::mem::take(&mut *core.running.borrow_mut());
        running.append(&mut core.jobs.borrow_mut());
        *core.runner.borrow_mut() = Some(cx.waker().clone());
        running.retain_mut(|job| {
            if job.as_mut().poll(cx).is_ready() {
                core.background.set(core.background.get().saturating_sub(1));
                false
            } else {
                true
            }
        });
        let mut slot = core.running.borrow_mut();
        running.append(&mut slot);
        *slot = running;
        Poll::Pending
    })
    .await
}

/// The switch's replica sets a session WRITEs through, when switch replication is on
/// and its queue pairs go through the accelerator (read with a grant of one of the
/// `connected` memory nodes, if the metadata service issues grants).
fn switch_mirrors(
    client: &Arc<ClientInner>,
    accelerated: bool,
    connected: impl Iterator<Item = u64>,
) -> Result<crate::replication::by_switch::SwitchMirrors, KvError> {
    use crate::replication::by_switch::SwitchMirrors;
    let (writes, reads) = (
        client.options.connection.switch_replication,
        client.options.connection.balance_reads,
    );
    if !(writes || reads) || !accelerated {
        return Ok(SwitchMirrors::default());
    }
    let Some(switch) = crate::accel::resolve(client)? else {
        return Ok(SwitchMirrors::default());
    };
    let mut credential = None;
    for id in connected {
        if let Some(g) = crate::grants::fetch(client, id)?.and_then(|g| g.into_iter().next()) {
            credential = Some(g.grant);
            break;
        }
    }
    let pmtu = client.options.connection.rc.pmtu.bytes();
    Ok(SwitchMirrors::via(switch, credential, pmtu).with_uses(writes, reads))
}

impl Session {
    pub(crate) fn open(client: Arc<ClientInner>, n: u64) -> Result<Session, KvError> {
        let connected = connect::open(&client)?;
        let mut config = client.options.connection.worker.clone();
        config.seed ^= n.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(rand::random::<u32>());
        let conflict = ConflictAvoidance::new(
            config.backoff.clone(),
            config.admission.clone(),
            config.seed,
        );
        let routes = Routes::shared(connected.fabric);
        let worker = Worker::new(
            Box::new(RoutedTransport::new(routes.clone())),
            config.clone(),
        );
        let reconnector = Reconnector::new(
            connected.connector,
            client.options.connection.reconnect.interval,
        );
        let now = Instant::now();
        let accelerated = connected.qps.values().any(|q| q.accelerated);
        let mut opened = HashMap::new();
        for (id, qp) in connected.qps {
            let route = routes.borrow_mut().add(id, qp.handle, qp.idle_timeout, now);
            routes
                .borrow_mut()
                .set_address_map(route, qp.address_map.clone(), qp.replace_at);
            routes.borrow_mut().set_rpc(route, qp.rpc.clone());
            reconnector.opened(id, route, &qp);
            opened.insert(id, (route, qp.region));
        }
        for (id, why) in connected.unreachable {
            reconnector.unreachable(id, why, now);
        }
        let mirrors = switch_mirrors(&client, accelerated, opened.keys().copied())?;
        let links = Links::new(worker.clone(), routes, opened, reconnector)
            .with_known_regions(connected.regions)
            .with_mirrors(mirrors);
        let o = &client.options;
        let alloc = Allocator::new(
            format!("{}-s{n}", client.lease_name),
            o.memory.lease_ttl,
            o.memory.chunk_bytes,
            o.memory.grace,
            config.seed,
        );
        let core = Rc::new(SessionCore {
            accelerated,
            links,
            worker,
            alloc: RefCell::new(alloc),
            stats: RefCell::new(SessionStats::default()),
            last_op: Cell::new(OpStats::default()),
            conflict: RefCell::new(conflict),
            admission_waiters: RefCell::new(VecDeque::new()),
            background: Cell::new(0),
            jobs: RefCell::new(Vec::new()),
            running: RefCell::new(Vec::new()),
            runner: RefCell::new(None),
            abandoned: Cell::new(false),
            indexes: RefCell::new(Vec::new()),
            config_checks: RefCell::new(std::collections::HashMap::new()),
            granted_lease_bytes: Cell::new(0),
            client,
        });
        core.worker.spawn(run_background(Rc::downgrade(&core)));
        Ok(Session { core })
    }

    /// Run `fut` (and the session's other tasks) on this thread until it finishes.
    pub fn block_on<F: Future>(&self, fut: F) -> F::Output {
        self.core.worker.block_on(fut)
    }

    /// Start a task on this session; it runs while [`Session::block_on`] runs.
    pub fn spawn(&self, task: impl Future<Output = ()> + 'static) {
        self.core.worker.spawn(task)
    }

    /// Sleep without blocking the session's other tasks.
    pub fn sleep(&self, d: Duration) -> impl Future<Output = ()> + use<> {
        self.core.worker.sleep(d)
    }

    /// Run background work (advancing shortcuts, checking roots) until none is
    /// left, and wait for the asynchronous unlatches of in-place tables (a write
    /// of such a table returns before its WRITE-and-unlatch batch completes; a
    /// session dropped before it completed would stop retransmitting it, losing
    /// the write and leaving the latch to its lease). Call it before dropping a
    /// session that wrote.
    pub fn quiesce(&self) {
        let core = self.core.clone();
        self.block_on(async move {
            loop {
                while core.background.get() > 0 {
                    core.worker.sleep(Duration::from_micros(50)).await;
                }
                let indexes = core.indexes.borrow().clone();
                for index in &indexes {
                    index.quiesce().await;
                }
                if core.background.get() == 0 {
                    break;
                }
            }
        })
    }

    /// Totals of this session.
    pub fn stats(&self) -> SessionStats {
        let mut s = *self.core.stats.borrow();
        s.reconnects = self.core.links.reconnector().reconnects();
        s
    }

    /// The cost of the operation that finished last.
    pub fn last_op(&self) -> OpStats {
        self.core.last_op.get()
    }

    /// The transport's counters (doorbells, packets, bytes, retransmissions).
    pub fn transport_stats(&self) -> TransportStats {
        self.core.worker.transport_stats()
    }

    /// The allocator's counters.
    pub fn memory_stats(&self) -> MemoryStats {
        let mut s = self.core.alloc.borrow().stats();
        for index in self.core.indexes.borrow().iter() {
            index.memory_stats(&mut s);
        }
        s
    }

    /// The worker this session runs on.
    pub fn worker(&self) -> &Worker {
        &self.core.worker
    }

    /// Stop the session the way a crash would: its leases are neither handed over
    /// nor freed, so they expire and the service lets their tables adopt them
    /// (for tests and demonstrations of that path). Dropping a session instead
    /// hands its chunks over to their tables at once, trimmed to what it used.
    pub fn abandon(self) {
        self.core.abandoned.set(true);
    }

    /// Forget every cached tail hint (the next access of each key starts from its root).
    pub fn clear_hints(&self) {
        for index in self.core.indexes.borrow().iter() {
            index.clear_hints();
        }
    }
}

impl SessionCore {
    /// Record a finished foreground operation.
    ///
    /// Its cost goes to the current span too: the table API runs each operation in a
    /// `kv.op` span, which records `round_trips`, `work_requests` and `bytes`.
    pub(crate) fn finish_op(&self, op: OpStats) {
        if tracing::enabled!(target: "kvstore::table", tracing::Level::INFO) {
            // Signed: the OpenTelemetry bridge exports unsigned integers as strings.
            let signed = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
            let span = tracing::Span::current();
            span.record("round_trips", signed(op.round_trips));
            span.record("work_requests", signed(op.work_requests));
            span.record("bytes", signed(op.bytes()));
        }
        let mut s = self.stats.borrow_mut();
        s.operations += 1;
        if op.round_trips > 1 {
            s.multi_round_trip_operations += 1;
        }
        s.foreground.add(&op);
        self.last_op.set(op);
    }

    /// What index kind `T` keeps for this session (made on first use).
    pub(crate) fn index_state<T: SessionIndex + Default>(&self) -> Rc<T> {
        let mut all = self.indexes.borrow_mut();
        for s in all.iter() {
            let any: Rc<dyn Any> = s.clone();
            if let Ok(t) = any.downcast::<T>() {
                return t;
            }
        }
        let t = Rc::new(T::default());
        all.push(t.clone());
        t
    }

    /// Record background work.
    pub(crate) fn add_background(&self, op: &OpStats) {
        self.stats.borrow_mut().background.add(op);
    }

    /// Run `task` in the background of this session (on its runner task).
    pub(crate) fn spawn_background(&self, task: impl Future<Output = ()> + 'static) {
        self.background.set(self.background.get() + 1);
        self.jobs.borrow_mut().push(Box::pin(task));
        if let Some(w) = self.runner.borrow().as_ref() {
            w.wake_by_ref();
        }
    }

    /// Wait for the per-thread admission throttle (SMART §4.3).
    pub(crate) async fn admit(&self) {
        std::future::poll_fn(|cx| {
            if self.conflict.borrow_mut().try_admit() {
                Poll::Ready(())
            } else {
                self.admission_waiters
                    .borrow_mut()
                    .push_back(cx.waker().clone());
                Poll::Pending
            }
        })
        .await
    }

    /// An admitted operation finished after `retries` retries.
    pub(crate) fn finish_admitted(&self, retries: u32) {
        {
            let mut c = self.conflict.borrow_mut();
            c.finish();
            c.on_operation_done(retries, Instant::now());
        }
        if let Some(w) = self.admission_waiters.borrow_mut().pop_front() {
            w.wake();
        }
    }

    /// Back off before retry `attempt` (0 = the first retry): truncated exponential
    /// with jitter and the dynamic limit (SMART §4.3).
    pub(crate) async fn backoff(&self, attempt: u32) {
        let d = self.conflict.borrow_mut().retry_delay(attempt);
        if !d.is_zero() {
            self.worker.sleep(d).await;
        }
    }

    /// Renew leases when due.
    pub(crate) fn renew_if_due(&self) {
        let now = Instant::now();
        self.alloc.borrow_mut().renew_if_due(&self.client.meta, now);
        self.grant_new_leases(false);
        self.links.reconnector().refresh_grants(false, now);
    }

    /// Gives the queue pairs fresh grants if the session leased memory since they got
    /// theirs (or now with `leased`: it leased memory outside its allocator), so that
    /// they cover the table's new memory before the session uses it.
    pub(crate) fn grant_new_leases(&self, leased: bool) {
        let bytes = self.alloc.borrow().stats().leased_bytes;
        let grew = bytes > self.granted_lease_bytes.replace(bytes);
        if grew || leased {
            self.links
                .reconnector()
                .refresh_grants(true, Instant::now());
        }
    }
}

impl Client {
    /// A new session for the calling thread: its own worker, one queue pair per
    /// memory node, allocator and caches.
    pub fn session(&self) -> Result<Session, KvError> {
        Session::open(self.inner.clone(), self.inner.next_session())
    }
}

impl Drop for Session {
    /// Abandons unfinished background work (a lagging shortcut is harmless), which
    /// also releases the session's resources; call [`Session::quiesce`] first to
    /// finish it.
    fn drop(&mut self) {
        let jobs = std::mem::take(&mut *self.core.jobs.borrow_mut());
        let running = std::mem::take(&mut *self.core.running.borrow_mut());
        self.core.background.set(0);
        drop(jobs);
        drop(running);
        // Tasks still parked on the worker (asynchronous unlatches, the background
        // runner) would otherwise keep it, and themselves, alive forever.
        self.core.worker.cancel_tasks();
    }
}

impl Drop for SessionCore {
    /// Publishes the client's queued Clover chain mappings and hands the session's
    /// chunks over to their tables (unless abandoned), and deletes its queue pairs.
    fn drop(&mut self) {
        if !self.abandoned.get() {
            crate::clover::publish::flush_all_blocking(self);
            self.alloc.get_mut().hand_over(&self.client.meta);
        }
        self.links.reconnector().destroy_all();
    }
}
