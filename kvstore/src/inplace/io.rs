//! What every scheme shares: the table's memory on one queue pair, round trips
//! charged to an operation, backoff, the exclusive latch with its lease, and the
//! ring of asynchronous unlatches.

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use verbs::worker::Qp;
use verbs::wr::{Completion, CompletionValue, PostError, RemoteAddr, WorkRequest};

use super::latch::{self, LeaseWatch};
use super::{LatchAt, Layout, LocalFuture};
use crate::error::KvError;
use crate::remote::{charge, completion_error, execute};
use crate::replication::mirrors::{Mirror, write_mirrors};
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
    /// the oldest to complete (the rotation of per-QP buffers, Jasny et al., TODS 2025, §3.3).
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
    /// The free word our CAS replaced: its generation goes back on release, and
    /// its torn bit says the tuple may hold part of a dead writer's WRITE.
    pub over: u64,
    /// The bytes of the speculative READ posted with the latching CAS, if any.
    pub read: Option<Vec<u8>>,
}

impl Latched {
    /// The word that releases this latch: the generation we latched over, torn
    /// unless we wrote the whole tuple.
    pub(crate) fn release_word(&self, wrote: bool) -> u64 {
        latch::released(self.over, wrote)
    }

    /// Whether the tuple may hold part of a dead writer's WRITE.
    pub(crate) fn torn(&self) -> bool {
        latch::is_torn(self.over)
    }
}

/// What the last verb of an asynchronous unlatch batch releases, so that its
/// completion can be finished in the background.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Unlatching {
    /// Nothing to finish (a write-unlatch WRITE, or an FAA).
    Nothing,
    /// Our exclusive latch `mine` at `at`, released to `restore` by a CAS `mine → restore`.
    Exclusive {
        /// The latch word.
        at: RemoteAddr,
        /// The word we latched with.
        mine: u64,
        /// The word that releases it.
        restore: u64,
    },
    /// Our shared count at `at`, taken by an FAA that returned `acquired`, released
    /// by a CAS `acquired + 1 reader → acquired`.
    Shared {
        /// The latch word.
        at: RemoteAddr,
        /// What our FAA returned.
        acquired: u64,
    },
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
    /// The other copies of the table's memory (a replicated table): every WRITE
    /// reaches them before the primary's batch is posted.
    mirrors: Vec<Mirror>,
    /// Why a mirror missed a write of the current operation (the write went on to
    /// the primary so that its latch is released; the operation then reports it).
    mirror_failure: RefCell<Option<KvError>>,
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
    /// Access to `area` through `qp` (its transport reports what each verb costs
    /// on the wire).
    pub fn new(qp: Qp, area: Area, options: IoOptions) -> SlotIo {
        let mut rng = SmallRng::seed_from_u64(options.seed ^ rand::random::<u64>());
        let client = rng.random_range(1..=latch::MAX_CLIENT);
        SlotIo {
            qp,
            mirrors: Vec::new(),
            mirror_failure: RefCell::new(None),
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

    /// This access with `mirrors`: the other copies of a replicated table's
    /// memory, written before the primary (see [`crate::replication::mirrors`]).
    pub(crate) fn with_mirrors(mut self, mirrors: Vec<Mirror>) -> SlotIo {
        self.mirrors = mirrors;
        self
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

    /// A new random generation for a latch word this client breaks (see [`latch`]).
    fn new_generation(&self) -> u64 {
        latch::generation_of(self.rng.borrow_mut().random::<u64>())
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
        self.mirror(&batch, stats).await;
        execute(&self.qp, batch, stats).await
    }

    /// Write the WRITEs of `batch` on every mirror first. A mirror that fails is
    /// remembered ([`Self::take_mirror_failure`]) rather than stopping the
    /// operation half-way: the primary's batch still goes out, so the latch the
    /// scheme holds is released normally, and the operation reports the failure
    /// at its end (its outcome is then unknown to the caller).
    async fn mirror(&self, batch: &[WorkRequest], stats: &mut OpStats) {
        if let Err(e) = write_mirrors(&self.mirrors, batch, stats).await {
            self.mirror_failure.borrow_mut().get_or_insert(e);
        }
    }

    /// The memnodes of the mirrors.
    pub(crate) fn mirror_memnodes(&self) -> impl Iterator<Item = u64> + '_ {
        self.mirrors.iter().map(Mirror::memnode)
    }

    /// The failure of a mirror during the operation that just ended, if any
    /// (cleared).
    pub(crate) fn take_mirror_failure(&self) -> Option<KvError> {
        self.mirror_failure.borrow_mut().take()
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
        self.check_deadline(deadline, *attempt, stats)?;
        self.backoff(*attempt - 1).await;
        Ok(())
    }

    /// Give up when `deadline` has passed — or, when the operation hands back on a
    /// held latch (`stats.hand_back`, hybrid access), after the first failed attempt
    /// (the caller holds nothing here), counting it in `stats.handed_to_rpc`.
    pub(crate) fn check_deadline(
        &self,
        deadline: Instant,
        attempts: u32,
        stats: &mut OpStats,
    ) -> Result<(), KvError> {
        if stats.hand_back && attempts > 0 {
            stats.handed_to_rpc += 1;
            return Err(KvError::Contended { attempts });
        }
        if Instant::now() > deadline {
            Err(KvError::Contended { attempts })
        } else {
            Ok(())
        }
    }

    /// Break latch `word` (a dead holder's) at `at` with a CAS from exactly `word`,
    /// to a word of a new generation (torn if an exclusive holder is broken).
    pub(crate) async fn break_latch(
        &self,
        at: RemoteAddr,
        word: u64,
        stats: &mut OpStats,
    ) -> Result<(), KvError> {
        let new = latch::broken(word, self.new_generation());
        let done = self
            .round_trip(vec![WorkRequest::cas(at, word, new)], stats)
            .await?;
        if atomic(done.first())? == word {
            tracing::warn!(
                va = at.va,
                word = format_args!("{word:#018x}"),
                exclusive = latch::is_exclusive(word),
                "broke a latch unchanged for longer than the lease (its holder is taken to be dead)"
            );
        }
        Ok(())
    }

    /// Release our shared count at `at` (our FAA returned `acquired`) by CAS, and
    /// only while the word still counts us: a count broken in the meantime is left
    /// alone. Returns whether it was still counted (if not, a writer may have
    /// written while we read).
    pub(crate) async fn release_shared(
        &self,
        at: RemoteAddr,
        acquired: u64,
        stats: &mut OpStats,
    ) -> Result<bool, KvError> {
        let expected = acquired.wrapping_add(latch::READER);
        let done = self
            .round_trip(vec![WorkRequest::cas(at, expected, acquired)], stats)
            .await?;
        let now = atomic(done.first())?;
        if now == expected {
            return Ok(true);
        }
        release_shared_loop(&self.qp, at, acquired, now, self.deadline(), stats).await
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
        // The free word we expect: 0 unless a latch of this word was ever broken.
        let mut expected = 0u64;
        loop {
            let mut batch = vec![WorkRequest::cas(at, expected, mine)];
            batch.extend(extra.clone());
            let mut done = self.round_trip(batch, stats).await?;
            let old = atomic(done.first())?;
            if old == expected {
                let read = match done.get_mut(1).map(|c| &mut c.result) {
                    Some(Ok(CompletionValue::Read(b))) => Some(std::mem::take(b)),
                    Some(Err(e)) => return Err(completion_error(*e)),
                    _ => None,
                };
                return Ok(Latched {
                    word: mine,
                    over: expected,
                    read,
                });
            }
            if latch::is_free(old) {
                // Free, of another generation (a latch of it was broken once): latch
                // over that word right away.
                expected = old;
                watch.reset();
                self.check_deadline(deadline, attempt, stats)?;
                continue;
            }
            attempt += 1;
            if self.held_by_us(old) && self.ring.in_flight.get() > 0 {
                // Our own asynchronous unlatch of this word may still be in flight:
                // wait for it and try again at once (bounded by the deadline).
                self.flush().await;
                self.check_deadline(deadline, attempt, stats)?;
                continue;
            }
            // Held by someone else — or by us with nothing of ours in flight: another
            // task of this session, or an acquisition of ours whose unlatch failed.
            // Either way it is waited for, and broken after the lease, like any other.
            stats.cas_failures += 1;
            if watch.expired(old, self.options.lease) {
                self.break_latch(at, old, stats).await?;
                watch.reset();
                continue;
            }
            self.check_deadline(deadline, attempt, stats)?;
            self.backoff(attempt - 1).await;
        }
    }

    /// Release our exclusive latch `mine` at `at` to `restore` by CAS (keeping
    /// reader counts that readers left while backing off).
    pub(crate) async fn release_exclusive(
        &self,
        at: RemoteAddr,
        mine: u64,
        restore: u64,
        stats: &mut OpStats,
    ) -> Result<(), KvError> {
        let done = self
            .round_trip(vec![WorkRequest::cas(at, mine, restore)], stats)
            .await?;
        let old = atomic(done.first())?;
        if old == mine {
            return Ok(());
        }
        release_loop(&self.qp, at, old, mine, restore, self.deadline(), stats).await
    }

    /// Finish releasing our exclusive latch `mine` at `at` to `restore` after the
    /// unlatching CAS returned `old` (nothing to do when it was ours alone).
    pub(crate) async fn finish_release(
        &self,
        at: RemoteAddr,
        old: u64,
        mine: u64,
        restore: u64,
        stats: &mut OpStats,
    ) -> Result<(), KvError> {
        if old == mine {
            return Ok(());
        }
        release_loop(&self.qp, at, old, mine, restore, self.deadline(), stats).await
    }

    /// Post `batch` (which unlatches) now and return without waiting for it: the
    /// asynchronous unlatch. `unlatching` says what the batch's last verb releases,
    /// so a completion that shows other readers' counts in the word is finished in
    /// the background.
    pub(crate) async fn post_unlatch(
        &self,
        batch: Vec<WorkRequest>,
        unlatching: Unlatching,
        stats: &mut OpStats,
    ) -> Result<(), KvError> {
        self.mirror(&batch, stats).await;
        self.ring.enter().await;
        charge(&self.qp, &batch, stats);
        self.ring.posted.set(self.ring.posted.get() + 1);
        let fut = post_now(&self.qp, batch);
        let ring = self.ring.clone();
        let qp = self.qp.clone();
        let deadline = self.deadline();
        self.qp.worker().spawn(async move {
            let mut bg = OpStats::default();
            let ok = match fut.await {
                Ok(done) => {
                    let failed = done.iter().any(|c| c.result.is_err());
                    match (failed, unlatching) {
                        (true, _) => false,
                        (false, Unlatching::Nothing) => true,
                        (false, Unlatching::Exclusive { at, mine, restore }) => {
                            match atomic(done.last()) {
                                Ok(old) if old == mine => true,
                                Ok(old) => {
                                    release_loop(&qp, at, old, mine, restore, deadline, &mut bg)
                                        .await
                                        .is_ok()
                                }
                                Err(_) => false,
                            }
                        }
                        (false, Unlatching::Shared { at, acquired }) => match atomic(done.last()) {
                            Ok(now) if now == acquired.wrapping_add(latch::READER) => true,
                            Ok(now) => {
                                release_shared_loop(&qp, at, acquired, now, deadline, &mut bg)
                                    .await
                                    .unwrap_or(false)
                            }
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
/// there to `restore` plus the count; fails if the word no longer holds our latch
/// (it was broken: we held it past the lease).
#[allow(clippy::too_many_arguments)]
async fn release_loop(
    qp: &Qp,
    at: RemoteAddr,
    mut old: u64,
    mine: u64,
    restore: u64,
    deadline: Instant,
    stats: &mut OpStats,
) -> Result<(), KvError> {
    loop {
        if old & latch::HOLDER != mine {
            return Err(KvError::unavailable(
                "our latch was broken by another client: we held it past its lease",
            ));
        }
        if Instant::now() > deadline {
            return Err(KvError::Contended { attempts: 0 });
        }
        let batch = vec![WorkRequest::cas(at, old, (old & latch::COUNT) | restore)];
        let done = execute(qp, batch, stats).await?;
        let now = atomic(done.first())?;
        if now == old {
            return Ok(());
        }
        old = now;
    }
}

/// Finish releasing a shared count (our FAA returned `acquired`) after a CAS found
/// `now`: other readers changed the count, so CAS `now → now − 1 reader` while the
/// word still counts us. Returns false, leaving the word alone, once it does not:
/// our count was broken (we held it past the lease).
async fn release_shared_loop(
    qp: &Qp,
    at: RemoteAddr,
    acquired: u64,
    mut now: u64,
    deadline: Instant,
    stats: &mut OpStats,
) -> Result<bool, KvError> {
    loop {
        if !latch::still_counted(acquired, now) {
            return Ok(false);
        }
        if Instant::now() > deadline {
            return Err(KvError::Contended { attempts: 0 });
        }
        let next = now.wrapping_sub(latch::READER);
        let batch = vec![WorkRequest::cas(at, now, next)];
        let done = execute(qp, batch, stats).await?;
        let seen = atomic(done.first())?;
        if seen == now {
            return Ok(true);
        }
        now = seen;
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

/// The original value of an atomic's completion.
pub(crate) use crate::remote::atomic_value as atomic;

/// The bytes of a READ completion.
pub(crate) fn read_bytes(c: Option<&mut Completion>) -> Result<Vec<u8>, KvError> {
    match c.map(|c| &mut c.result) {
        Some(Ok(CompletionValue::Read(b))) => Ok(std::mem::take(b)),
        Some(Err(e)) => Err(completion_error(*e)),
        _ => Err(KvError::unavailable("missing READ completion")),
    }
}

/// Whether every completion of a batch succeeded.
pub(crate) fn all_ok(done: &[Completion]) -> Result<(), KvError> {
    match done.iter().find_map(|c| c.result.as_ref().err()) {
        Some(e) => Err(completion_error(*e)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use verbs::mem::{AccessFlags, MemoryTable, Region};
    use verbs::transport::local::DirectTransport;
    use verbs::worker::{Worker, WorkerConfig};

    use super::*;
    use crate::inplace::{Level, Placement, Readers, SchemeSpec};

    const BASE: u64 = 0x2000_0000;

    /// Two clients (their own owner tokens) on one in-process region.
    fn two_clients(layout: &Layout, lease: Duration) -> (Worker, [SlotIo; 3], Arc<Region>) {
        let region = Arc::new(Region::anonymous(layout.area_bytes(1) as usize).unwrap());
        let table = MemoryTable::new();
        let info = table
            .register(region.clone(), BASE, AccessFlags::ALL)
            .unwrap();
        let mut t = DirectTransport::local();
        let h = t.connect(Arc::new(table));
        let worker = Worker::new(Box::new(t), WorkerConfig::default());
        let area = Area::with_slots(RemoteAddr::new(info.rkey, info.base_va), 1, layout);
        let options = IoOptions {
            lease,
            give_up_after: lease * 4 + Duration::from_millis(500),
            ..IoOptions::default()
        };
        let io = || SlotIo::new(worker.qp(h), area, options.clone());
        let clients = [io(), io(), io()];
        (worker, clients, region)
    }

    /// A live, slow reader's shared count is broken by a writer after the lease; its
    /// late release must leave the word alone (a blind FAA −1 wrapped the count, and
    /// the next reader's +1 then read as a free latch while it was held).
    #[test]
    fn a_broken_readers_late_release_leaves_the_latch_word_alone() {
        let lease = Duration::from_millis(400);
        let spec = SchemeSpec::Pessimistic {
            readers: Readers::Shared,
            level: Level::Basic,
            write_unlatch: false,
            placement: Placement::Embedded,
        };
        let scheme = spec.build(64).unwrap();
        let layout = *scheme.layout();
        let (worker, [slow, writer, next], region) = two_clients(&layout, lease);
        worker.block_on(async {
            let mut st = OpStats::default();
            let at = slow.latch_addr(&layout, 0).unwrap();
            let load = || region.load_word(at.va - BASE).unwrap();
            // The slow reader takes the latch shared.
            let done = slow
                .round_trip(vec![WorkRequest::faa(at, latch::READER)], &mut st)
                .await
                .unwrap();
            let acquired = atomic(done.first()).unwrap();
            // A writer waits one lease, breaks the count and writes.
            let started = Instant::now();
            scheme
                .write(&writer, 0, &mut |_: &[u8]| Some(vec![5; 64]), &mut st)
                .await
                .unwrap();
            assert!(started.elapsed() >= lease);
            let after_write = load();
            assert!(latch::is_free(after_write) && !latch::is_torn(after_write));
            assert_ne!(after_write, 0, "the break left a new generation");
            // The next reader holds the latch shared.
            let done = next
                .round_trip(vec![WorkRequest::faa(at, latch::READER)], &mut st)
                .await
                .unwrap();
            let second = atomic(done.first()).unwrap();
            assert_eq!(load(), second + latch::READER);
            // The slow reader's release comes late: it is no longer counted.
            assert!(!slow.release_shared(at, acquired, &mut st).await.unwrap());
            assert_eq!(
                load(),
                second + latch::READER,
                "the late release changed the word"
            );
            // The next reader's release works, and a writer latches without a lease.
            assert!(next.release_shared(at, second, &mut st).await.unwrap());
            assert_eq!(load(), after_write);
            let started = Instant::now();
            scheme
                .write(&writer, 0, &mut |_: &[u8]| Some(vec![6; 64]), &mut st)
                .await
                .unwrap();
            assert!(started.elapsed() < lease, "no phantom reader to wait for");
            assert_eq!(scheme.read(&next, 0, &mut st).await.unwrap(), vec![6; 64]);
            assert_eq!(load(), after_write);
        });
    }

    /// A latch word that shows our own client id with nothing of ours in flight (an
    /// acquisition of ours whose unlatch was lost) is waited for and broken after the
    /// lease, not spun on forever.
    #[test]
    fn a_latch_left_by_our_own_client_is_bounded_by_the_lease() {
        let lease = Duration::from_millis(50);
        let scheme = SchemeSpec::PESSIMISTIC.build(64).unwrap();
        let layout = *scheme.layout();
        let (worker, [io, _, _], region) = two_clients(&layout, lease);
        let at = io.latch_addr(&layout, 0).unwrap();
        // A word of ours (our client id, an earlier sequence number) that nobody unlatched.
        let ours = io.fresh_latch_word();
        region.store_word(at.va - BASE, ours).unwrap();
        worker.block_on(async {
            let mut st = OpStats::default();
            let started = Instant::now();
            scheme
                .write(&io, 0, &mut |_: &[u8]| Some(vec![1; 64]), &mut st)
                .await
                .unwrap();
            assert!(started.elapsed() >= lease);
            assert!(st.cas_failures > 0);
            io.flush().await;
        });
        let w = region.load_word(at.va - BASE).unwrap();
        assert!(latch::is_free(w) && !latch::is_torn(w), "{w:#x}");
    }
}
