//! Thread-aware workers: one transport per thread, many tasks on it.
//!
//! A [`Worker`] lives on one OS thread and owns that thread's transport, queue
//! pairs and completion polling (SMART's thread-aware resource allocation:
//! nothing on the data path is shared across threads). Many tasks (futures) run
//! on the worker's small executor and share its queue pairs; when every task is
//! waiting for the network the worker blocks in the transport instead of spinning.
//!
//! Work requests are posted in batches with one doorbell ([`Qp::post`] or
//! [`Qp::execute`]); completions are returned by polling ([`Worker::poll_completions`])
//! or by awaiting ([`Qp::execute`]). Outstanding work requests are limited by
//! credits with an adaptive maximum (SMART Algorithm 1), and CAS retries go
//! through truncated exponential backoff with a dynamic limit and per-thread
//! admission throttling (SMART §4.3). Each technique can be switched off in
//! [`WorkerConfig`] for ablations.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use crate::throttle::{
    AdmissionConfig, BackoffConfig, ConflictAvoidance, CreditConfig, CreditPool,
};
use crate::transport::{QpHandle, Transport, TransportKind, TransportStats};
use crate::wr::{Completion, CompletionError, CompletionValue, PostError, RemoteAddr, WorkRequest};

/// Settings of a worker: which scale-up techniques are on and how they are tuned.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Work-request credits (SMART Algorithm 1).
    pub credits: CreditConfig,
    /// CAS retry backoff (SMART §4.3).
    pub backoff: BackoffConfig,
    /// Per-thread concurrency-depth throttling of CAS operations (SMART §4.3).
    pub admission: AdmissionConfig,
    /// Attempts a CAS helper makes before giving up with [`VerbError::Contended`].
    pub max_cas_attempts: u32,
    /// Seed for the backoff jitter.
    pub seed: u64,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            credits: CreditConfig::default(),
            backoff: BackoffConfig::default(),
            admission: AdmissionConfig::default(),
            max_cas_attempts: 4096,
            seed: 0x5eed,
        }
    }
}

impl WorkerConfig {
    /// Every SMART technique switched off (the baseline of an ablation).
    pub fn baseline() -> WorkerConfig {
        WorkerConfig {
            credits: CreditConfig::disabled(),
            backoff: BackoffConfig::disabled(),
            admission: AdmissionConfig::disabled(),
            ..WorkerConfig::default()
        }
    }
}

/// Why a verb issued through a worker failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerbError {
    /// The batch could not be posted.
    #[error("post failed: {0}")]
    Post(#[from] PostError),
    /// The work request completed with an error.
    #[error("{0}")]
    Completion(#[from] CompletionError),
    /// A CAS kept failing after the configured number of attempts.
    #[error("CAS still contended after {attempts} attempts (last value {last:#x})")]
    Contended {
        /// Attempts made.
        attempts: u32,
        /// The last value observed.
        last: u64,
    },
}

/// Counters of a worker's own policies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerStats {
    /// CAS helper operations finished.
    pub cas_operations: u64,
    /// CAS attempts beyond the first.
    pub cas_retries: u64,
    /// Times a batch waited for credits.
    pub credit_waits: u64,
    /// Times an operation waited for admission.
    pub admission_waits: u64,
}

struct Core {
    transport: Box<dyn Transport>,
    credits: CreditPool,
    conflict: ConflictAvoidance,
    config: WorkerConfig,
    next_wr_id: u64,
    /// Work requests posted by awaiting tasks (the others complete into `polled`).
    pending: IdMap<Pending>,
    credit_waiters: VecDeque<Waker>,
    admission_waiters: VecDeque<Waker>,
    timers: BTreeMap<(Instant, u64), Waker>,
    next_timer: u64,
    polled: VecDeque<Completion>,
    scratch: Vec<(QpHandle, Completion)>,
    stats: WorkerStats,
}

impl Core {
    fn progress(&mut self, now: Instant) -> bool {
        self.scratch.clear();
        let mut scratch = std::mem::take(&mut self.scratch);
        let n = self.transport.poll(now, &mut scratch);
        let mut woke = n > 0;
        for (_, c) in scratch.drain(..) {
            self.credits.release(1, now);
            match self.pending.get_mut(&c.wr_id) {
                Some(p) if p.abandoned => {
                    self.pending.remove(&c.wr_id);
                }
                Some(p) => {
                    if let Some(w) = p.waker.take() {
                        w.wake();
                    }
                    p.result = Some(c);
                }
                None => self.polled.push_back(c),
            }
        }
        self.scratch = scratch;
        if n > 0 {
            for w in self.credit_waiters.drain(..) {
                w.wake();
            }
        }
        self.credits.tick(now);
        while let Some(entry) = self.timers.first_entry() {
            if entry.key().0 > now {
                break;
            }
            entry.remove().wake();
            woke = true;
        }
        woke
    }

    /// Whether `n` more work requests may go to queue pair `qp` now: there is room in its
    /// send queue and the credits were taken. Pending (with `waker` kept for the next
    /// completion) while they are short; an error when nothing of ours is outstanding,
    /// so no completion would ever make room.
    fn admit(&mut self, qp: QpHandle, n: usize, waker: &Waker) -> Poll<Result<(), PostError>> {
        let room = self.transport.send_queue_room(qp);
        if room < n {
            if room == 0 && self.pending.is_empty() && self.polled.is_empty() {
                return Poll::Ready(Err(PostError::QueueFull(n)));
            }
            push_waker(&mut self.credit_waiters, waker);
            return Poll::Pending;
        }
        if !self.credits.try_acquire(n as u32) {
            self.stats.credit_waits += 1;
            push_waker(&mut self.credit_waiters, waker);
            return Poll::Pending;
        }
        Poll::Ready(Ok(()))
    }

    fn next_deadline(&self) -> Option<Instant> {
        self.timers.keys().next().map(|(t, _)| *t)
    }
}

type Task = Pin<Box<dyn Future<Output = ()>>>;

/// A place in the worker's task list.
enum TaskSlot {
    /// Free for a new task.
    Free,
    /// Its task is being polled right now (taken out of the list): not free, so a task
    /// spawned from inside that poll gets another slot.
    Running,
    /// A task waiting to be polled again.
    Parked(Task),
}

/// Hashes work request ids (already unique, sequential integers) with one multiply.
#[derive(Default, Clone, Copy)]
struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8 | *b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type IdMap<V> = HashMap<u64, V, std::hash::BuildHasherDefault<IdHasher>>;

/// A work request posted by an awaiting task: its completion, once it arrives, and
/// the task to wake.
#[derive(Default)]
struct Pending {
    waker: Option<Waker>,
    result: Option<Completion>,
    /// The awaiting future was dropped first: the completion is discarded on arrival.
    abandoned: bool,
}

/// Held by a future awaiting posted work requests: if it is dropped before it took their
/// completions (a cancelled task, a lost race), their entries are forgotten — removed
/// when complete, discarded on arrival otherwise — instead of kept for ever.
struct AwaitGuard<'a> {
    core: &'a RefCell<Core>,
    ids: std::ops::Range<u64>,
    /// Cleared once the completions were taken.
    armed: bool,
}

impl Drop for AwaitGuard<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        // A drop from inside the worker's own borrow cannot reach the map: it keeps the
        // entries, as before there was a guard.
        let Ok(mut core) = self.core.try_borrow_mut() else {
            return;
        };
        for id in self.ids.clone() {
            let complete = match core.pending.get_mut(&id) {
                Some(p) if p.result.is_none() => {
                    p.abandoned = true;
                    p.waker = None;
                    false
                }
                Some(_) => true,
                None => false,
            };
            if complete {
                core.pending.remove(&id);
            }
        }
    }
}

struct TaskWaker {
    id: usize,
    ready: Arc<Mutex<VecDeque<usize>>>,
    /// Set while the task sits in the ready queue: however many times it is woken
    /// before its next poll, it is queued (and polled) once.
    queued: std::sync::atomic::AtomicBool,
}

impl TaskWaker {
    fn new(id: usize, ready: Arc<Mutex<VecDeque<usize>>>) -> Arc<TaskWaker> {
        Arc::new(TaskWaker {
            id,
            ready,
            queued: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// About to be polled: wakes from now on queue it again.
    fn dequeued(&self) {
        self.queued
            .store(false, std::sync::atomic::Ordering::Release);
    }
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        if self.queued.swap(true, std::sync::atomic::Ordering::AcqRel) {
            return;
        }
        if let Ok(mut q) = self.ready.lock() {
            q.push_back(self.id);
        }
    }
}

/// Each task's waker, made once (with the flag that keeps it queued at most once).
type WakerCache = Vec<Option<(Arc<TaskWaker>, Waker)>>;

/// Queue `waker` unless an equivalent one is already waiting.
fn push_waker(list: &mut VecDeque<Waker>, waker: &Waker) {
    if !list.iter().any(|w| w.will_wake(waker)) {
        list.push_back(waker.clone());
    }
}

const MAIN_TASK: usize = usize::MAX;

/// A worker thread's verbs context: its transport, queue pairs, tasks and policies.
///
/// Not `Send`: create it on the thread that uses it.
#[derive(Clone)]
pub struct Worker {
    core: Rc<RefCell<Core>>,
    tasks: Rc<RefCell<Vec<TaskSlot>>>,
    wakers: Rc<RefCell<WakerCache>>,
    ready: Arc<Mutex<VecDeque<usize>>>,
}

impl Worker {
    /// A worker over `transport` with `config`.
    pub fn new(transport: Box<dyn Transport>, config: WorkerConfig) -> Worker {
        let now = Instant::now();
        let core = Core {
            transport,
            credits: CreditPool::new(config.credits.clone(), now),
            conflict: ConflictAvoidance::new(
                config.backoff.clone(),
                config.admission.clone(),
                config.seed,
            ),
            config,
            next_wr_id: 1,
            pending: IdMap::default(),
            credit_waiters: VecDeque::new(),
            admission_waiters: VecDeque::new(),
            timers: BTreeMap::new(),
            next_timer: 0,
            polled: VecDeque::new(),
            scratch: Vec::new(),
            stats: WorkerStats::default(),
        };
        Worker {
            core: Rc::new(RefCell::new(core)),
            tasks: Rc::new(RefCell::new(Vec::new())),
            wakers: Rc::new(RefCell::new(Vec::new())),
            ready: Arc::new(Mutex::new(VecDeque::new())),
        }
    }

    /// A handle to queue pair `handle` of this worker's transport.
    pub fn qp(&self, handle: QpHandle) -> Qp {
        Qp {
            worker: self.clone(),
            handle,
        }
    }

    /// Run `f` against the transport (e.g. to connect a queue pair).
    pub fn with_transport<R>(&self, f: impl FnOnce(&mut dyn Transport) -> R) -> R {
        let mut core = self.core.borrow_mut();
        f(core.transport.as_mut())
    }

    /// Which transport this worker uses.
    pub fn transport_kind(&self) -> TransportKind {
        self.core.borrow().transport.kind()
    }

    /// Transport counters.
    pub fn transport_stats(&self) -> TransportStats {
        self.core.borrow().transport.stats()
    }

    /// Policy counters.
    pub fn stats(&self) -> WorkerStats {
        self.core.borrow().stats
    }

    /// The current adaptive credit maximum (C_max).
    pub fn credit_max(&self) -> u32 {
        self.core.borrow().credits.cmax()
    }

    /// Make progress without blocking and append completions of work requests posted
    /// with [`Qp::post`] to `out` (completion by polling).
    pub fn poll_completions(&self, out: &mut Vec<Completion>) -> usize {
        let mut core = self.core.borrow_mut();
        core.progress(Instant::now());
        let n = core.polled.len();
        out.extend(core.polled.drain(..));
        n
    }

    /// Block until something may have progressed or `timeout` passes.
    pub fn wait(&self, timeout: Duration) {
        let mut core = self.core.borrow_mut();
        core.transport.wait(Instant::now() + timeout);
    }

    /// Start a task on this worker; it runs while [`Worker::block_on`] runs.
    pub fn spawn(&self, task: impl Future<Output = ()> + 'static) {
        let mut tasks = self.tasks.borrow_mut();
        let id = match tasks.iter().position(|t| matches!(t, TaskSlot::Free)) {
            Some(free) => {
                tasks[free] = TaskSlot::Parked(Box::pin(task));
                free
            }
            None => {
                tasks.push(TaskSlot::Parked(Box::pin(task)));
                tasks.len() - 1
            }
        };
        if let Ok(mut q) = self.ready.lock() {
            q.push_back(id);
        }
    }

    /// Drop every spawned task that has not finished; they never run again. Tasks hold
    /// their worker, so an owner that is done with a worker calls this to free the
    /// tasks (and what they hold, such as open spans) instead of leaving them parked.
    pub fn cancel_tasks(&self) {
        let abandoned = match self.tasks.try_borrow_mut() {
            Ok(mut tasks) => std::mem::take(&mut *tasks),
            // Called from inside a task's poll: leave the list alone.
            Err(_) => return,
        };
        if let Ok(mut q) = self.ready.lock() {
            q.retain(|id| *id == MAIN_TASK);
        }
        if let Ok(mut wakers) = self.wakers.try_borrow_mut() {
            wakers.clear();
        }
        drop(abandoned);
    }

    /// Run `main` (and every spawned task) to completion of `main` on this thread.
    pub fn block_on<F: Future>(&self, main: F) -> F::Output {
        let mut main = std::pin::pin!(main);
        let main_task = TaskWaker::new(MAIN_TASK, self.ready.clone());
        let main_waker = Waker::from(main_task.clone());
        let mut main_ready = true;
        let mut batch = Vec::new();
        loop {
            if main_ready {
                main_ready = false;
                main_task.dequeued();
                let mut cx = Context::from_waker(&main_waker);
                if let Poll::Ready(v) = main.as_mut().poll(&mut cx) {
                    return v;
                }
            }
            batch.clear();
            if let Ok(mut q) = self.ready.lock() {
                batch.extend(q.drain(..));
            }
            for &id in &batch {
                if id == MAIN_TASK {
                    main_ready = true;
                    continue;
                }
                self.poll_task(id);
            }
            let now = Instant::now();
            let progressed = self.core.borrow_mut().progress(now);
            let idle = !main_ready
                && !progressed
                && self.ready.lock().map(|q| q.is_empty()).unwrap_or(true);
            if idle {
                let mut core = self.core.borrow_mut();
                let until = core
                    .next_deadline()
                    .unwrap_or(now + Duration::from_millis(1))
                    .min(now + Duration::from_millis(1));
                core.transport.wait(until);
            }
        }
    }

    fn poll_task(&self, id: usize) {
        let task = {
            let mut tasks = self.tasks.borrow_mut();
            match tasks.get_mut(id) {
                Some(slot @ TaskSlot::Parked(_)) => {
                    match std::mem::replace(slot, TaskSlot::Running) {
                        TaskSlot::Parked(t) => Some(t),
                        _ => None,
                    }
                }
                _ => None,
            }
        };
        let Some(mut task) = task else { return };
        let waker = {
            let mut wakers = self.wakers.borrow_mut();
            if wakers.len() <= id {
                wakers.resize(id + 1, None);
            }
            let (task_waker, waker) = wakers[id].get_or_insert_with(|| {
                let tw = TaskWaker::new(id, self.ready.clone());
                let w = Waker::from(tw.clone());
                (tw, w)
            });
            task_waker.dequeued();
            waker.clone()
        };
        let mut cx = Context::from_waker(&waker);
        let done = task.as_mut().poll(&mut cx).is_ready();
        if let Some(slot) = self.tasks.borrow_mut().get_mut(id) {
            *slot = if done {
                TaskSlot::Free
            } else {
                TaskSlot::Parked(task)
            };
        }
    }

    /// Sleep for `d` without blocking other tasks.
    pub fn sleep(&self, d: Duration) -> Sleep {
        Sleep {
            worker: self.clone(),
            deadline: Instant::now() + d,
            key: None,
        }
    }

    async fn admit(&self) {
        std::future::poll_fn(|cx| {
            let mut core = self.core.borrow_mut();
            if core.conflict.try_admit() {
                Poll::Ready(())
            } else {
                core.stats.admission_waits += 1;
                push_waker(&mut core.admission_waiters, cx.waker());
                Poll::Pending
            }
        })
        .await
    }

    fn finish_admitted(&self, retries: u32) {
        let mut core = self.core.borrow_mut();
        core.conflict.finish();
        core.conflict.on_operation_done(retries, Instant::now());
        core.stats.cas_operations += 1;
        core.stats.cas_retries += retries as u64;
        if let Some(w) = core.admission_waiters.pop_front() {
            w.wake();
        }
    }
}

/// A timer future from [`Worker::sleep`].
pub struct Sleep {
    worker: Worker,
    deadline: Instant,
    key: Option<(Instant, u64)>,
}

impl Future for Sleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.deadline {
            return Poll::Ready(());
        }
        let deadline = self.deadline;
        let worker = self.worker.clone();
        let mut core = worker.core.borrow_mut();
        if let Some(key) = self.key.take() {
            core.timers.remove(&key);
        }
        let key = (deadline, core.next_timer);
        core.next_timer += 1;
        core.timers.insert(key, cx.waker().clone());
        self.key = Some(key);
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(key) = self.key.take()
            && let Ok(mut core) = self.worker.core.try_borrow_mut()
        {
            core.timers.remove(&key);
        }
    }
}

/// The verbs of a batch, comma-separated (`read,read,cas`), for spans and events.
struct Opcodes<'a>(&'a [WorkRequest]);

impl std::fmt::Display for Opcodes<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, wr) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            f.write_str(wr.kind().name())?;
        }
        Ok(())
    }
}

/// One of a worker's queue pairs, shared by the worker's tasks.
#[derive(Clone)]
pub struct Qp {
    worker: Worker,
    handle: QpHandle,
}

/// Outcome of a successful CAS helper operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CasOutcome {
    /// The value the word held before the successful swap.
    pub previous: u64,
    /// The value written.
    pub new: u64,
    /// Attempts it took (1 = no retry).
    pub attempts: u32,
}

impl Qp {
    /// The transport handle of this queue pair.
    pub fn handle(&self) -> QpHandle {
        self.handle
    }

    /// The worker this queue pair belongs to.
    pub fn worker(&self) -> &Worker {
        &self.worker
    }

    /// What `wr` puts on the wire on this queue pair without loss, as its transport
    /// counts it (at the queue pair's path MTU).
    pub fn wire_cost(&self, wr: &WorkRequest) -> crate::transport::WireCost {
        self.worker
            .core
            .borrow()
            .transport
            .wire_cost(self.handle, wr)
    }

    /// Post a batch with one doorbell; completions come from [`Worker::poll_completions`].
    ///
    /// Returns the work request ids assigned, in order. Credits are not waited for: if the
    /// credit pool (when enabled) is exhausted the post fails with `QueueFull`.
    pub fn post(&self, batch: Vec<WorkRequest>) -> Result<Vec<u64>, PostError> {
        tracing::debug!(
            qp = self.handle,
            work_requests = batch.len(),
            opcodes = %Opcodes(&batch),
            "verbs.post"
        );
        let mut core = self.worker.core.borrow_mut();
        let n = batch.len() as u32;
        if !core.credits.try_acquire(n) {
            core.stats.credit_waits += 1;
            return Err(PostError::QueueFull(n as usize));
        }
        let first = core.next_wr_id;
        core.next_wr_id += batch.len() as u64;
        let ids: Vec<u64> = (first..first + batch.len() as u64).collect();
        let items = ids.iter().copied().zip(batch).collect();
        if let Err(e) = core.transport.post(self.handle, items) {
            core.credits.release(n, Instant::now());
            return Err(e);
        }
        Ok(ids)
    }

    /// Post a batch with one doorbell and wait for all of its completions, in order.
    ///
    /// Waits for credits (and send-queue room) first when they are short. With `DEBUG`
    /// enabled for `verbs::worker`, the batch runs in a `verbs.batch` span (queue pair,
    /// work requests, opcodes; completions with an error recorded at the end) from the
    /// wait for credits to the last completion, inside the caller's span.
    pub async fn execute(&self, mut batch: Vec<WorkRequest>) -> Result<Vec<Completion>, PostError> {
        if !tracing::enabled!(tracing::Level::DEBUG) {
            if batch.len() == 1
                && let Some(wr) = batch.pop()
            {
                return Ok(self.execute_one(wr).await?.into_iter().collect());
            }
            return self.execute_batch(batch).await;
        }
        let span = tracing::debug_span!(
            "verbs.batch",
            qp = self.handle,
            work_requests = batch.len(),
            opcodes = %Opcodes(&batch),
            failed = tracing::field::Empty,
        );
        let result = tracing::Instrument::instrument(self.execute_batch(batch), span.clone()).await;
        match &result {
            Ok(done) => span.record("failed", done.iter().filter(|c| c.result.is_err()).count()),
            Err(e) => span.record("failed", tracing::field::display(e)),
        };
        result
    }

    async fn execute_batch(&self, batch: Vec<WorkRequest>) -> Result<Vec<Completion>, PostError> {
        for wr in &batch {
            wr.validate()?;
        }
        let n = batch.len();
        if n == 0 {
            return Ok(Vec::new());
        }
        let mut batch = Some(batch);
        let first: u64 = std::future::poll_fn(|cx| {
            let mut core = self.worker.core.borrow_mut();
            if let Err(e) = std::task::ready!(core.admit(self.handle, n, cx.waker())) {
                return Poll::Ready(Err(e));
            }
            let Some(wrs) = batch.take() else {
                return Poll::Ready(Err(PostError::QpError));
            };
            let first = core.next_wr_id;
            core.next_wr_id += n as u64;
            for id in first..first + n as u64 {
                core.pending.insert(id, Pending::default());
            }
            let items = (first..).zip(wrs).collect();
            if let Err(e) = core.transport.post(self.handle, items) {
                for id in first..first + n as u64 {
                    core.pending.remove(&id);
                }
                core.credits.release(n as u32, Instant::now());
                return Poll::Ready(Err(e));
            }
            Poll::Ready(Ok(first))
        })
        .await?;
        let ids = first..first + n as u64;
        let mut guard = AwaitGuard {
            core: &self.worker.core,
            ids: ids.clone(),
            armed: true,
        };
        let out = std::future::poll_fn(|cx| {
            let mut core = self.worker.core.borrow_mut();
            let mut missing = false;
            for id in ids.clone() {
                if let Some(p) = core.pending.get_mut(&id).filter(|p| p.result.is_none()) {
                    p.waker = Some(cx.waker().clone());
                    missing = true;
                }
            }
            if missing {
                return Poll::Pending;
            }
            let done: Vec<Completion> = ids
                .clone()
                .filter_map(|id| core.pending.remove(&id).and_then(|p| p.result))
                .collect();
            Poll::Ready(done)
        })
        .await;
        guard.armed = false;
        Ok(out)
    }

    async fn one(&self, wr: WorkRequest) -> Result<CompletionValue, VerbError> {
        let done = if tracing::enabled!(tracing::Level::DEBUG) {
            // The batch path, for its `verbs.batch` span.
            self.execute(vec![wr]).await?.pop()
        } else {
            self.execute_one(wr).await?
        };
        match done {
            Some(c) => Ok(c.result?),
            None => Err(VerbError::Completion(CompletionError::BadResponse)),
        }
    }

    /// [`Qp::execute_batch`] for a batch of one, with nothing allocated on the way: the
    /// same waits for send-queue room and credits, one doorbell, one completion.
    async fn execute_one(&self, wr: WorkRequest) -> Result<Option<Completion>, PostError> {
        wr.validate()?;
        let mut wr = Some(wr);
        let id: u64 = std::future::poll_fn(|cx| {
            let mut core = self.worker.core.borrow_mut();
            if let Err(e) = std::task::ready!(core.admit(self.handle, 1, cx.waker())) {
                return Poll::Ready(Err(e));
            }
            let Some(wr) = wr.take() else {
                return Poll::Ready(Err(PostError::QpError));
            };
            let id = core.next_wr_id;
            core.next_wr_id += 1;
            core.pending.insert(id, Pending::default());
            if let Err(e) = core.transport.post_one(self.handle, id, wr) {
                core.pending.remove(&id);
                core.credits.release(1, Instant::now());
                return Poll::Ready(Err(e));
            }
            Poll::Ready(Ok(id))
        })
        .await?;
        let mut guard = AwaitGuard {
            core: &self.worker.core,
            ids: id..id + 1,
            armed: true,
        };
        let done = std::future::poll_fn(|cx| {
            let mut core = self.worker.core.borrow_mut();
            match core.pending.get_mut(&id) {
                Some(p) if p.result.is_none() => {
                    if !p.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                        p.waker = Some(cx.waker().clone());
                    }
                    Poll::Pending
                }
                _ => Poll::Ready(core.pending.remove(&id).and_then(|p| p.result)),
            }
        })
        .await;
        guard.armed = false;
        Ok(done)
    }

    /// READ `len` bytes.
    pub async fn read(&self, remote: RemoteAddr, len: u32) -> Result<Vec<u8>, VerbError> {
        match self.one(WorkRequest::read(remote, len)).await? {
            CompletionValue::Read(b) => Ok(b),
            _ => Err(VerbError::Completion(CompletionError::BadResponse)),
        }
    }

    /// WRITE `data`.
    pub async fn write(&self, remote: RemoteAddr, data: Vec<u8>) -> Result<(), VerbError> {
        self.one(WorkRequest::write(remote, data)).await.map(|_| ())
    }

    /// SEND `data` into the responder's next posted receive buffer; completes when the
    /// responder acknowledges it (after any RNR waits).
    pub async fn send(&self, data: Vec<u8>) -> Result<(), VerbError> {
        self.one(WorkRequest::send(data)).await.map(|_| ())
    }

    /// SEND `data` with 32 bits of immediate data, delivered beside it.
    pub async fn send_with_imm(&self, data: Vec<u8>, imm: u32) -> Result<(), VerbError> {
        self.one(WorkRequest::send_with_imm(data, imm))
            .await
            .map(|_| ())
    }

    /// One compare-and-swap; returns the original value (success iff it equals `compare`).
    pub async fn cas(&self, remote: RemoteAddr, compare: u64, swap: u64) -> Result<u64, VerbError> {
        match self.one(WorkRequest::cas(remote, compare, swap)).await? {
            CompletionValue::Atomic(v) => Ok(v),
            _ => Err(VerbError::Completion(CompletionError::BadResponse)),
        }
    }

    /// One fetch-and-add; returns the original value.
    pub async fn faa(&self, remote: RemoteAddr, add: u64) -> Result<u64, VerbError> {
        match self.one(WorkRequest::faa(remote, add)).await? {
            CompletionValue::Atomic(v) => Ok(v),
            _ => Err(VerbError::Completion(CompletionError::BadResponse)),
        }
    }

    /// Update a word by CAS with SMART's conflict avoidance.
    ///
    /// Starting from the guess `current`, computes `update(current)`; `None` stops
    /// (returning `Ok(None)` with nothing written). A failed CAS returns the word's
    /// actual value, which becomes the next guess after a truncated exponential backoff
    /// with jitter. The whole operation first passes the worker's admission throttle,
    /// and its retry count feeds the dynamic backoff limit. Bounded by
    /// [`WorkerConfig::max_cas_attempts`].
    pub async fn cas_update(
        &self,
        remote: RemoteAddr,
        current: u64,
        mut update: impl FnMut(u64) -> Option<u64>,
    ) -> Result<Option<CasOutcome>, VerbError> {
        // Each attempt compares against the value the previous one found.
        self.cas_loop(remote, current, |seen| update(seen).map(|new| (seen, new)))
            .await
    }

    /// CAS `compare → swap`, retrying with backoff while the word holds something else.
    ///
    /// This is the lock-acquire pattern (e.g. `0 → owner`): it waits for the word to
    /// become `compare` again, bounded by [`WorkerConfig::max_cas_attempts`].
    pub async fn cas_with_backoff(
        &self,
        remote: RemoteAddr,
        compare: u64,
        swap: u64,
    ) -> Result<CasOutcome, VerbError> {
        let outcome = self
            .cas_loop(remote, compare, |_| Some((compare, swap)))
            .await?;
        // The attempt function never gives up, so an outcome is always present.
        outcome.ok_or(VerbError::Completion(CompletionError::BadResponse))
    }

    /// The retry loop shared by the CAS helpers: `attempt(seen)` names the next
    /// (compare, swap) pair given the value last seen in the word, or `None` to stop.
    async fn cas_loop(
        &self,
        remote: RemoteAddr,
        first_seen: u64,
        mut attempt_with: impl FnMut(u64) -> Option<(u64, u64)>,
    ) -> Result<Option<CasOutcome>, VerbError> {
        let worker = self.worker.clone();
        worker.admit().await;
        let max = worker.core.borrow().config.max_cas_attempts.max(1);
        let mut seen = first_seen;
        let mut attempt = 0u32;
        let result = loop {
            let Some((compare, swap)) = attempt_with(seen) else {
                break Ok(None);
            };
            attempt += 1;
            seen = match self.cas(remote, compare, swap).await {
                Ok(v) => v,
                Err(e) => break Err(e),
            };
            if seen == compare {
                break Ok(Some(CasOutcome {
                    previous: seen,
                    new: swap,
                    attempts: attempt,
                }));
            }
            if attempt >= max {
                break Err(VerbError::Contended {
                    attempts: attempt,
                    last: seen,
                });
            }
            let delay = worker.core.borrow_mut().conflict.retry_delay(attempt - 1);
            if !delay.is_zero() {
                worker.sleep(delay).await;
            }
        };
        worker.finish_admitted(attempt.saturating_sub(1));
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::local::DirectTransport;

    /// Sets its flag when dropped.
    struct Dropped(Rc<std::cell::Cell<bool>>);

    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.set(true);
        }
    }

    /// A worker over the local transport with one registered 64 KiB region.
    fn local_worker(config: WorkerConfig) -> (Worker, RemoteAddr) {
        use crate::mem::{AccessFlags, MemoryTable, Region};
        let table = MemoryTable::new();
        let region = Arc::new(Region::anonymous(65_536).unwrap());
        let info = table.register(region, 0x10_000, AccessFlags::ALL).unwrap();
        let mut transport = DirectTransport::local();
        transport.connect(Arc::new(table));
        let worker = Worker::new(Box::new(transport), config);
        (worker, RemoteAddr::new(info.rkey, 0x10_000))
    }

    #[test]
    fn single_verbs_beyond_the_send_queue_wait_for_room_and_all_complete() {
        use crate::transport::local::DIRECT_QUEUE_DEPTH;
        for config in [WorkerConfig::default(), WorkerConfig::baseline()] {
            let (worker, base) = local_worker(config);
            let tasks = DIRECT_QUEUE_DEPTH + 300;
            let ok = Rc::new(std::cell::Cell::new(0usize));
            for _ in 0..tasks {
                let (qp, ok) = (worker.qp(0), ok.clone());
                worker.spawn(async move {
                    if qp.faa(base, 1).await.is_ok() {
                        ok.set(ok.get() + 1);
                    }
                });
            }
            let qp = worker.qp(0);
            let word = worker.block_on(async {
                while ok.get() < tasks {
                    worker.sleep(Duration::from_micros(50)).await;
                }
                qp.read(base, 8).await
            });
            let word = word.unwrap();
            assert_eq!(
                u64::from_le_bytes(word[..8].try_into().unwrap()),
                tasks as u64
            );
            let stats = worker.transport_stats();
            // One doorbell per verb: nothing was batched behind the caller's back.
            assert_eq!(stats.doorbells, tasks as u64 + 1);
            assert_eq!(stats.completions, stats.work_requests);
        }
    }

    #[test]
    fn a_single_verb_reports_post_and_completion_errors_and_the_next_one_works() {
        let (worker, base) = local_worker(WorkerConfig::default());
        let qp = worker.qp(0);
        worker.block_on(async {
            // Refused before it is posted: nothing reaches the transport.
            let too_long = qp.read(base, (1 << 30) + 1).await;
            assert!(matches!(
                too_long,
                Err(VerbError::Post(PostError::TooLong(_)))
            ));
            // Posted, and completed with an error: no such rkey.
            let bad = RemoteAddr::new(base.rkey ^ 0xFFFF, base.va);
            let err = qp.read(bad, 8).await;
            assert!(matches!(err, Err(VerbError::Completion(_))), "{err:?}");
            // Out of the region's range.
            let err = qp.write(base.offset(65_536), vec![1; 8]).await;
            assert!(matches!(err, Err(VerbError::Completion(_))), "{err:?}");
            qp.write(base.offset(8), vec![7; 8]).await.unwrap();
            assert_eq!(qp.read(base.offset(8), 8).await.unwrap(), vec![7; 8]);
            assert_eq!(
                qp.cas(base.offset(8), 0, 1).await.unwrap(),
                0x0707_0707_0707_0707
            );
        });
        let stats = worker.transport_stats();
        assert_eq!(stats.work_requests, 5, "the refused READ was never posted");
        assert_eq!(stats.errors, 2);
    }

    /// Poll `fut` once with a waker that does nothing.
    fn poll_once<F: Future>(fut: Pin<&mut F>) -> Poll<F::Output> {
        let waker = Waker::noop();
        fut.poll(&mut Context::from_waker(waker))
    }

    #[test]
    fn a_verb_whose_future_is_dropped_leaves_nothing_behind() {
        let (worker, base) = local_worker(WorkerConfig::baseline());
        let qp = worker.qp(0);
        let pending = |w: &Worker| w.core.borrow().pending.len();
        // Dropped before its completion arrived: discarded on arrival.
        for batch in [1, 3] {
            let wrs = vec![WorkRequest::read(base, 8); batch];
            let mut fut = Box::pin(qp.execute(wrs));
            assert!(poll_once(fut.as_mut()).is_pending());
            assert_eq!(pending(&worker), batch, "posted and awaited");
            drop(fut);
            let mut polled = Vec::new();
            worker.poll_completions(&mut polled);
            assert!(
                polled.is_empty(),
                "not handed to poll_completions: {polled:?}"
            );
            assert_eq!(pending(&worker), 0, "batch of {batch}");
        }
        // Dropped after its completion arrived, before it was taken: removed at once.
        let mut fut = Box::pin(qp.read(base, 8));
        assert!(poll_once(fut.as_mut()).is_pending());
        worker.poll_completions(&mut Vec::new());
        assert_eq!(pending(&worker), 1);
        drop(fut);
        assert_eq!(pending(&worker), 0);
        // Cancelled tasks leave nothing either, and the worker goes on.
        for _ in 0..4 {
            let qp = worker.qp(0);
            worker.spawn(async move {
                let _ = qp.read(base, 8).await;
                std::future::pending::<()>().await;
            });
        }
        worker.block_on(async {});
        worker.cancel_tasks();
        worker.poll_completions(&mut Vec::new());
        assert_eq!(pending(&worker), 0);
        assert_eq!(worker.block_on(qp.faa(base, 1)).unwrap(), 0);
    }

    #[test]
    fn cancelled_tasks_are_dropped_and_new_ones_still_run() {
        let worker = Worker::new(Box::new(DirectTransport::local()), WorkerConfig::default());
        let dropped = Rc::new(std::cell::Cell::new(false));
        let guard = Dropped(dropped.clone());
        worker.spawn(async move {
            let _guard = guard;
            std::future::pending::<()>().await;
        });
        // Let the task start and park.
        worker.block_on(async {});
        worker.block_on(worker.sleep(Duration::from_millis(1)));
        assert!(!dropped.get());
        worker.cancel_tasks();
        assert!(dropped.get(), "the parked task was dropped");
        let ran = Rc::new(std::cell::Cell::new(false));
        let flag = ran.clone();
        worker.spawn(async move { flag.set(true) });
        worker.block_on(worker.sleep(Duration::from_millis(1)));
        assert!(ran.get(), "a task spawned afterwards runs");
    }
}
