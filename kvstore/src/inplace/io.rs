//! What every scheme shares: the table's memory on one queue pair, round trips
//! charged to an operation, backoff, the exclusive latch with its lease, and the
//! ring of asynchronous unlatches.

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use verbs::rc::Pmtu;
use verbs::transport::wire_cost;
use verbs::worker::Qp;
use verbs::wr::{Completion, CompletionError, CompletionValue, PostError, RemoteAddr, WorkRequest};

use super::latch::{self, LeaseWatch};
use super::{LatchAt, Layout, LocalFuture};
use crate::error::KvError;
use crate::stats::OpStats;

/// Tunables of a [`SlotIo`].
#[derive(Debug, Clone)]
pub struct IoOptions {
    /// How long a latch word may stay unchanged before it is taken to belong to a
    /// dead client and broken (see the [module documentation](super)).
    pub lease: Duration,
    /// An operation that cannot latch (or read consistently) for this long gives up
    /// with `Contended`; must exceed the lease.
    pub give_up_after: Duration,
    /// Asynchronous unlatches in flight per queue pair before the next one waits for
    /// the oldest to complete (the rotation of per-QP buffers, sync seed §3.3).
    pub async_depth: usize,
    /// Seed of the backoff jitter.
    pub seed: u64,
    /// Cap of the truncated exponential backoff between retries; zero retries at
    /// once (no sleep).
    pub max_backoff: Duration,
}

impl Default for IoOptions {
    fn default() -> IoOptions {
        IoOptions {
            lease: Duration::from_millis(500),
            give_up_after: Duration::from_secs(5),
            async_depth: 8,
            seed: 0x1a7c_4e55,
            max_backoff: Duration::from_micros(200),
        }
    }
}

/// Where a table's tuples (and separate latches) are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Area {
    /// Tuple 0.
    pub data: RemoteAddr,
    /// Latch 0 of the separate latch array, if the layout has one.
    pub latches: Option<RemoteAddr>,
    /// Number of tuples.
    pub slots: u64,
}

impl Area {
    /// Lay out as many tuples of `layout` as fit in `bytes` at `base` (64-byte
    /// aligned): the latch array first (if any), then the tuples.
    pub fn carve(base: RemoteAddr, bytes: u64, layout: &Layout) -> Area {
        Area::with_slots(base, layout.slots_in(bytes), layout)
    }

    /// Lay out exactly `slots` tuples at `base` ([`Layout::area_bytes`] bytes).
    pub fn with_slots(base: RemoteAddr, slots: u64, layout: &Layout) -> Area {
        let array = layout.latch_array_bytes(slots);
        Area {
            data: base.offset(array),
            latches: matches!(layout.latch, LatchAt::Array).then_some(base),
            slots,
        }
    }
}

/// An exclusive latch this client holds.
#[derive(Debug)]
pub(crate) struct Latched {
    /// The latch word our CAS stored (unique to this acquisition).
    pub word: u64,
    /// The bytes of the speculative READ posted with the latching CAS, if any.
    pub read: Option<Vec<u8>>,
}

/// Bounds asynchronous unlatches in flight: a slot (buffer) of the ring is reused
/// only after the request that owns it has completed.
///
/// In this verbs API a WRITE's payload is moved into its work request, so the
/// bytes of an in-flight request cannot be overwritten by construction; the ring
/// keeps the discipline of the paper's per-QP buffer rotation explicit: each
/// in-flight unlatch owns one of `depth` slots, and an operation that finds all
/// of them busy waits for the oldest completion before posting.
struct Ring {
    depth: usize,
    in_flight: Cell<usize>,
    waiters: RefCell<Vec<Waker>>,
    errors: Cell<u64>,
    posted: Cell<u64>,
    waited: Cell<u64>,
    background: Cell<OpStats>,
}

impl Ring {
    async fn enter(&self) {
        let mut counted = false;
        std::future::poll_fn(|cx| {
            if self.in_flight.get() < self.depth {
                self.in_flight.set(self.in_flight.get() + 1);
                Poll::Ready(())
            } else {
                if !counted {
                    counted = true;
                    self.waited.set(self.waited.get() + 1);
                }
                self.waiters.borrow_mut().push(cx.waker().clone());
                Poll::Pending
            }
        })
        .await
    }

    fn leave(&self) {
        self.in_flight.set(self.in_flight.get().saturating_sub(1));
        for w in self.waiters.borrow_mut().drain(..) {
            w.wake();
        }
    }

    async fn drain(&self) {
        std::future::poll_fn(|cx| {
            if self.in_flight.get() == 0 {
                Poll::Ready(())
            } else {
                self.waiters.borrow_mut().push(cx.waker().clone());
                Poll::Pending
            }
        })
        .await
    }
}

/// A handle on a [`SlotIo`]'s asynchronous unlatches that does not keep the
/// `SlotIo` alive: the owner of the queue pair (a session) waits for them with
/// it before it stops driving the queue pair, even after the table handle that
/// posted them is gone.
#[derive(Clone)]
pub struct UnlatchWaiter(Weak<Ring>);

impl std::fmt::Debug for UnlatchWaiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnlatchWaiter")
            .field("in_flight", &self.0.upgrade().map(|r| r.in_flight.get()))
            .finish()
    }
}

impl UnlatchWaiter {
    /// Whether no unlatch of it can be in flight any more (its `SlotIo` and
    /// every unlatch it posted are gone).
    pub fn is_done(&self) -> bool {
        self.0.strong_count() == 0
    }

    /// Wait until every asynchronous unlatch posted so far has completed.
    pub async fn drain(&self) {
        if let Some(ring) = self.0.upgrade() {
            ring.drain().await
        }
    }
}

/// Counters of a [`SlotIo`]'s asynchronous unlatches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AsyncStats {
    /// Unlatch batches posted without waiting.
    pub posted: u64,
    /// Operations that waited for a ring slot.
    pub waited: u64,
    /// Unlatches that failed (their latch is recovered by its lease).
    pub errors: u64,
    /// Verbs the completions needed afterwards (reader-count fix-ups).
    pub background: OpStats,
}

/// One table's memory as reached through one queue pair, with the state a
/// scheme needs across operations (owner token, backoff, asynchronous unlatches).
pub struct SlotIo {
    qp: Qp,
    pmtu: Pmtu,
    area: Area,
    /// Client id in the owner tokens of our latch words.
    client: u64,
    /// Acquisitions so far (the sequence number of the next owner token).
    acquisitions: Cell<u64>,
    options: IoOptions,
    rng: RefCell<SmallRng>,
    ring: Rc<Ring>,
}

impl std::fmt::Debug for SlotIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlotIo")
            .field("area", &self.area)
            .field("client", &self.client)
            .finish()
    }
}

impl SlotIo {
    /// Access to `area` through `qp` (whose path MTU is `pmtu`, for byte counts).
    pub fn new(qp: Qp, pmtu: Pmtu, area: Area, options: IoOptions) -> SlotIo {
        let mut rng = SmallRng::seed_from_u64(options.seed ^ rand::random::<u64>());
        let client = rng.random_range(1..=latch::MAX_CLIENT);
        SlotIo {
            qp,
            pmtu,
            area,
            client,
            acquisitions: Cell::new(0),
            rng: RefCell::new(rng),
            ring: Rc::new(Ring {
                depth: options.async_depth.max(1),
                in_flight: Cell::new(0),
                waiters: RefCell::new(Vec::new()),
                errors: Cell::new(0),
                posted: Cell::new(0),
                waited: Cell::new(0),
                background: Cell::new(OpStats::default()),
            }),
            options,
        }
    }

    /// The memory.
    pub fn area(&self) -> &Area {
        &self.area
    }

    /// The queue pair.
    pub fn qp(&self) -> &Qp {
        &self.qp
    }

    /// The settings.
    pub fn options(&self) -> &IoOptions {
        &self.options
    }

    /// A latch word for this client's next exclusive acquisition: our client id
    /// and a new sequence number, so that the word differs from the one our
    /// previous acquisition stored (see [`latch`]; the lease relies on it).
    pub fn fresh_latch_word(&self) -> u64 {
        let seq = self.acquisitions.get();
        self.acquisitions.set(seq.wrapping_add(1));
        latch::exclusive(latch::token(self.client, seq))
    }

    /// Whether `word` is held exclusively by one of our acquisitions.
    fn held_by_us(&self, word: u64) -> bool {
        latch::is_exclusive(word) && latch::client(word) == self.client
    }

    /// Counters of the asynchronous unlatches.
    pub fn async_stats(&self) -> AsyncStats {
        AsyncStats {
            posted: self.ring.posted.get(),
            waited: self.ring.waited.get(),
            errors: self.ring.errors.get(),
            background: self.ring.background.get(),
        }
    }

    /// Wait until every asynchronous unlatch has completed.
    pub async fn flush(&self) {
        self.ring.drain().await
    }

    /// A handle to wait for this `SlotIo`'s asynchronous unlatches with, which
    /// stays usable after the `SlotIo` is dropped.
    pub fn unlatch_waiter(&self) -> UnlatchWaiter {
        UnlatchWaiter(Rc::downgrade(&self.ring))
    }

    /// Address of tuple `slot`.
    pub fn tuple_addr(&self, layout: &Layout, slot: u64) -> Result<RemoteAddr, KvError> {
        self.check_slot(slot)?;
        Ok(self.area.data.offset(slot * layout.stride))
    }

    /// Address of the latch word of `slot`.
    pub fn latch_addr(&self, layout: &Layout, slot: u64) -> Result<RemoteAddr, KvError> {
        self.check_slot(slot)?;
        match layout.latch {
            LatchAt::InTuple(off) => Ok(self.area.data.offset(slot * layout.stride + off)),
            LatchAt::Array => self
                .area
                .latches
                .map(|a| a.offset(8 * slot))
                .ok_or_else(|| KvError::InvalidArgument("the area has no latch array".into())),
        }
    }

    fn check_slot(&self, slot: u64) -> Result<(), KvError> {
        if slot < self.area.slots {
            Ok(())
        } else {
            Err(KvError::InvalidArgument(format!(
                "slot {slot} is outside the table's {} slots",
                self.area.slots
            )))
        }
    }

    /// The instant an operation starting now gives up.
    pub(crate) fn deadline(&self) -> Instant {
        Instant::now() + self.options.give_up_after
    }

    /// Post `batch` with one doorbell and wait for it: one round trip.
    pub(crate) async fn round_trip(
        &self,
        batch: Vec<WorkRequest>,
        stats: &mut OpStats,
    ) -> Result<Vec<Completion>, KvError> {
        charge(&batch, self.pmtu, stats);
        stats.round_trips += 1;
        self.qp.execute(batch).await.map_err(post_error)
    }

    /// Sleep before retry `attempt` (0 = first retry): truncated exponential with jitter.
    pub(crate) async fn backoff(&self, attempt: u32) {
        if self.options.max_backoff.is_zero() {
            return;
        }
        let cap = self.options.max_backoff.as_nanos().max(1) as u64;
        let base = (500u64 << attempt.min(20)).min(cap);
        let d = self.rng.borrow_mut().random_range(base / 2..=base);
        self.qp.worker().sleep(Duration::from_nanos(d)).await
    }

    /// Before the next attempt of an operation that must start over: count the
    /// restart, give up when `deadline` has passed, and back off.
    pub(crate) async fn restart(
        &self,
        deadline: Instant,
        attempt: &mut u32,
        stats: &mut OpStats,
    ) -> Result<(), KvError> {
        stats.restarts += 1;
        *attempt += 1;
        self.check_deadline(deadline, *attempt)?;
        self.backoff(*attempt - 1).await;
        Ok(())
    }

    /// Give up when `deadline` has passed.
    pub(crate) fn check_deadline(&self, deadline: Instant, attempts: u32) -> Result<(), KvError> {
        if Instant::now() > deadline {
            Err(KvError::Contended { attempts })
        } else {
            Ok(())
        }
    }

    /// Break latch `word` (a dead holder's) at `at` with a CAS from exactly `word`.
    pub(crate) async fn break_latch(
        &self,
        at: RemoteAddr,
        word: u64,
        stats: &mut OpStats,
    ) -> Result<(), KvError> {
        let done = self
            .round_trip(vec![WorkRequest::cas(at, word, latch::broken(word))], stats)
            .await?;
        atomic(done.first())?;
        Ok(())
    }

    /// Latch `at` exclusively by CAS `0 → mine` (a [fresh](Self::fresh_latch_word)
    /// latch word), posting `extra` (a speculative READ) in the same batch;
    /// retries with backoff and breaks expired leases. Returns the latch word
    /// stored (needed to release it) and the bytes `extra` read, if it was a
    /// READ, once the latch is held.
    pub(crate) async fn acquire_exclusive(
        &self,
        at: RemoteAddr,
        extra: Option<WorkRequest>,
        stats: &mut OpStats,
    ) -> Result<Latched, KvError> {
        let deadline = self.deadline();
        let mine = self.fresh_latch_word();
        let mut watch = LeaseWatch::default();
        let mut attempt = 0u32;
        loop {
            let mut batch = vec![WorkRequest::cas(at, 0, mine)];
            batch.extend(extra.clone());
            let mut done = self.round_trip(batch, stats).await?;
            let old = atomic(done.first())?;
            if old == 0 {
                let read = match done.get_mut(1).map(|c| &mut c.result) {
                    Some(Ok(CompletionValue::Read(b))) => Some(std::mem::take(b)),
                    Some(Err(e)) => return Err(completion_error(*e)),
                    _ => None,
                };
                return Ok(Latched { word: mine, read });
            }
            if self.held_by_us(old) {
                // Our own asynchronous unlatch of this word is still in flight, or
                // another task of ours holds it.
                self.flush().await;
                continue;
            }
            stats.cas_failures += 1;
            attempt += 1;
            if watch.expired(old, self.options.lease) {
                self.break_latch(at, old, stats).await?;
                watch.reset();
                continue;
            }
            self.check_deadline(deadline, attempt)?;
            self.backoff(attempt - 1).await;
        }
    }

    /// Release our exclusive latch `mine` at `at` by CAS (keeping reader counts
    /// that readers left while backing off).
    pub(crate) async fn release_exclusive(
        &self,
        at: RemoteAddr,
        mine: u64,
        stats: &mut OpStats,
    ) -> Result<(), KvError> {
        let done = self
            .round_trip(vec![WorkRequest::cas(at, mine, 0)], stats)
            .await?;
        let old = atomic(done.first())?;
        if old == mine {
            return Ok(());
        }
        release_loop(&self.qp, self.pmtu, at, old, mine, self.deadline(), stats).await
    }

    /// Finish releasing our exclusive latch `mine` at `at` after the unlatching
    /// CAS returned `old` (nothing to do when it was ours alone).
    pub(crate) async fn finish_release(
        &self,
        at: RemoteAddr,
        old: u64,
        mine: u64,
        stats: &mut OpStats,
    ) -> Result<(), KvError> {
        if old == mine {
            return Ok(());
        }
        release_loop(&self.qp, self.pmtu, at, old, mine, self.deadline(), stats).await
    }

    /// Post `batch` (which unlatches) now and return without waiting for it: the
    /// asynchronous unlatch. When `cas_unlatch` names the latch word and the
    /// value `mine` we latched it with, the batch's last verb is the unlatching
    /// CAS `mine → 0`, and a completion that shows readers' counts in the word
    /// is fixed up in the background.
    pub(crate) async fn post_unlatch(
        &self,
        batch: Vec<WorkRequest>,
        cas_unlatch: Option<(RemoteAddr, u64)>,
        stats: &mut OpStats,
    ) -> Result<(), KvError> {
        self.ring.enter().await;
        charge(&batch, self.pmtu, stats);
        self.ring.posted.set(self.ring.posted.get() + 1);
        let fut = post_now(&self.qp, batch);
        let ring = self.ring.clone();
        let qp = self.qp.clone();
        let (pmtu, deadline) = (self.pmtu, self.deadline());
        self.qp.worker().spawn(async move {
            let mut bg = OpStats::default();
            let ok = match fut.await {
                Ok(done) => {
                    let failed = done.iter().any(|c| c.result.is_err());
                    match (failed, cas_unlatch) {
                        (true, _) => false,
                        (false, None) => true,
                        (false, Some((at, mine))) => match atomic(done.last()) {
                            Ok(old) if old == mine => true,
                            Ok(old) => release_loop(&qp, pmtu, at, old, mine, deadline, &mut bg)
                                .await
                                .is_ok(),
                            Err(_) => false,
                        },
                    }
                }
                Err(_) => false,
            };
            if !ok {
                ring.errors.set(ring.errors.get() + 1);
            }
            let mut total = ring.background.get();
            total.add(&bg);
            ring.background.set(total);
            ring.leave();
        });
        Ok(())
    }
}

/// Finish releasing our exclusive latch at `at` after a CAS found `old` instead of
/// `mine`: readers bumped the count while they backed off, so CAS from what is
/// there to its count alone; fails if the word no longer holds our latch (it was
/// broken: we held it past the lease).
async fn release_loop(
    qp: &Qp,
    pmtu: Pmtu,
    at: RemoteAddr,
    mut old: u64,
    mine: u64,
    deadline: Instant,
    stats: &mut OpStats,
) -> Result<(), KvError> {
    loop {
        if old & latch::HOLDER != mine {
            return Err(KvError::Unavailable(
                "our latch was broken by another client: we held it past its lease".into(),
            ));
        }
        if Instant::now() > deadline {
            return Err(KvError::Contended { attempts: 0 });
        }
        let batch = vec![WorkRequest::cas(at, old, old & latch::COUNT)];
        charge(&batch, pmtu, stats);
        stats.round_trips += 1;
        let done = qp.execute(batch).await.map_err(post_error)?;
        let now = atomic(done.first())?;
        if now == old {
            return Ok(());
        }
        old = now;
    }
}

/// Charge the verbs of `batch` (not a round trip) to `stats`.
fn charge(batch: &[WorkRequest], pmtu: Pmtu, stats: &mut OpStats) {
    for wr in batch {
        let c = wire_cost(wr, pmtu);
        stats.work_requests += 1;
        stats.bytes_sent += c.request_bytes;
        stats.bytes_received += c.response_bytes;
    }
}

/// Post `batch` on `qp` right now (its first poll posts it) and return the future
/// of its completions, so verbs posted later on the queue pair execute after it.
fn post_now(
    qp: &Qp,
    batch: Vec<WorkRequest>,
) -> LocalFuture<'static, Result<Vec<Completion>, PostError>> {
    let qp = qp.clone();
    let mut fut: LocalFuture<'static, _> = Box::pin(async move { qp.execute(batch).await });
    let mut cx = Context::from_waker(Waker::noop());
    match fut.as_mut().poll(&mut cx) {
        Poll::Ready(r) => Box::pin(std::future::ready(r)),
        Poll::Pending => fut,
    }
}

fn post_error(e: PostError) -> KvError {
    KvError::Unavailable(format!("posting verbs: {e}"))
}

pub(crate) fn completion_error(e: CompletionError) -> KvError {
    KvError::Unavailable(format!("memory node: {e}"))
}

/// The original value of an atomic's completion.
pub(crate) fn atomic(c: Option<&Completion>) -> Result<u64, KvError> {
    match c.map(|c| &c.result) {
        Some(Ok(CompletionValue::Atomic(v))) => Ok(*v),
        Some(Err(e)) => Err(completion_error(*e)),
        _ => Err(KvError::Unavailable("missing atomic completion".into())),
    }
}

/// The bytes of a READ completion.
pub(crate) fn read_bytes(c: Option<&mut Completion>) -> Result<Vec<u8>, KvError> {
    match c.map(|c| &mut c.result) {
        Some(Ok(CompletionValue::Read(b))) => Ok(std::mem::take(b)),
        Some(Err(e)) => Err(completion_error(*e)),
        _ => Err(KvError::Unavailable("missing READ completion".into())),
    }
}

/// Whether every completion of a batch succeeded.
pub(crate) fn all_ok(done: &[Completion]) -> Result<(), KvError> {
    match done.iter().find_map(|c| c.result.as_ref().err()) {
        Some(e) => Err(completion_error(*e)),
        None => Ok(()),
    }
}
