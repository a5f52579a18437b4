//! `verbs-bench threads`: thread-aware resource allocation (SMART, ASPLOS'24, §3.1 and
//! §4.1, Figs. 3 and 13a) on the transports dmkv has.
//!
//! Every thread runs SMART's bench-tool loop straight on a transport, without a worker:
//! post `depth` work requests, ring the doorbell, wait for all of their completions,
//! repeat. What varies is how the threads get at the queue pair:
//!
//! - **shared**: one queue pair (one socket, one completion queue) for all threads,
//!   behind a lock that posting and polling take — SMART's "shared QP";
//! - **multiplexed**: one such shared queue pair per two threads;
//! - **per-thread**: each thread owns its queue pair, socket and completion polling and
//!   takes no lock — the thread-aware allocation a [`verbs::worker::Worker`] makes;
//!
//! how the doorbell is rung:
//!
//! - **batched**: the `depth` work requests are posted as one batch and flushed once
//!   (on `udp`, one `sendmmsg` for all of them);
//! - **single**: each work request is posted and flushed on its own;
//!
//! and how completions are awaited:
//!
//! - **block**: a thread with nothing completed blocks in the transport (the socket)
//!   until something may have arrived;
//! - **spin**: it polls again at once.
//!
//! The verbs are 64-byte READs at uniformly random addresses and CASes on one shared
//! word: each thread's `k`-th CAS of a batch expects the value its previous ones would
//! leave (`guess + k`), so a thread alone always swaps and every failure is another
//! thread's interference. The shared lock's waiting time is measured (SMART found 74 %
//! of the time in doorbell spinlocks with per-thread QPs sharing doorbells).

use std::sync::{Arc, Barrier, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use verbs::transport::{Transport, TransportKind, TransportStats};
use verbs::wr::{Completion, CompletionValue, RemoteAddr, WorkRequest};

use crate::measure::{Targets, open_transport};

/// Bytes of each READ.
pub const READ_BYTES: u32 = 64;

/// READs go to this many 64-byte slots past the first page of the region (16 MiB).
const READ_SLOTS: u64 = 1 << 18;

/// How threads get at queue pairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// One queue pair for all threads, behind a lock.
    Shared,
    /// One locked queue pair per two threads.
    Multiplexed,
    /// A queue pair per thread, no lock.
    PerThread,
}

impl Policy {
    /// Name on the command line and in the tables.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Shared => "shared",
            Policy::Multiplexed => "multiplexed",
            Policy::PerThread => "per-thread",
        }
    }

    /// Threads per queue pair with `threads` threads.
    fn sharers(self, threads: usize) -> usize {
        match self {
            Policy::Shared => threads.max(1),
            Policy::Multiplexed => 2,
            Policy::PerThread => 1,
        }
    }
}

impl std::str::FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Policy, String> {
        match s {
            "shared" => Ok(Policy::Shared),
            "multiplexed" => Ok(Policy::Multiplexed),
            "per-thread" => Ok(Policy::PerThread),
            o => Err(format!(
                "unknown policy {o:?}: use shared, multiplexed or per-thread"
            )),
        }
    }
}

/// How the doorbell is rung.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Doorbell {
    /// One doorbell (and flush) per batch of `depth` work requests.
    Batched,
    /// One per work request.
    Single,
}

impl Doorbell {
    /// Name on the command line and in the tables.
    pub fn name(self) -> &'static str {
        match self {
            Doorbell::Batched => "batched",
            Doorbell::Single => "single",
        }
    }
}

impl std::str::FromStr for Doorbell {
    type Err = String;
    fn from_str(s: &str) -> Result<Doorbell, String> {
        match s {
            "batched" => Ok(Doorbell::Batched),
            "single" => Ok(Doorbell::Single),
            o => Err(format!("unknown doorbell {o:?}: use batched or single")),
        }
    }
}

/// How completions are awaited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completions {
    /// Block in the transport while nothing has completed.
    Block,
    /// Poll again at once.
    Spin,
}

impl Completions {
    /// Name on the command line and in the tables.
    pub fn name(self) -> &'static str {
        match self {
            Completions::Block => "block",
            Completions::Spin => "spin",
        }
    }
}

impl std::str::FromStr for Completions {
    type Err = String;
    fn from_str(s: &str) -> Result<Completions, String> {
        match s {
            "block" => Ok(Completions::Block),
            "spin" => Ok(Completions::Spin),
            o => Err(format!("unknown completion mode {o:?}: use block or spin")),
        }
    }
}

/// The verb of a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocVerb {
    /// 64-byte READs at random addresses.
    Read,
    /// CAS on one shared word.
    Cas,
}

impl AllocVerb {
    /// Name on the command line and in the tables.
    pub fn name(self) -> &'static str {
        match self {
            AllocVerb::Read => "read",
            AllocVerb::Cas => "cas",
        }
    }
}

impl std::str::FromStr for AllocVerb {
    type Err = String;
    fn from_str(s: &str) -> Result<AllocVerb, String> {
        match s {
            "read" => Ok(AllocVerb::Read),
            "cas" => Ok(AllocVerb::Cas),
            o => Err(format!("unknown verb {o:?}: use read or cas")),
        }
    }
}

/// One cell of the experiment.
#[derive(Debug, Clone, Copy)]
pub struct AllocSpec {
    /// Transport.
    pub transport: TransportKind,
    /// Verb.
    pub verb: AllocVerb,
    /// Queue-pair allocation.
    pub policy: Policy,
    /// Doorbell batching.
    pub doorbell: Doorbell,
    /// Completion waiting.
    pub completions: Completions,
    /// Threads.
    pub threads: usize,
    /// Work requests per batch (outstanding per thread).
    pub depth: usize,
    /// Measured time.
    pub duration: Duration,
    /// Path MTU of udp queue pairs.
    pub pmtu: verbs::rc::Pmtu,
}

/// What a cell measured.
#[derive(Debug, Clone, Default)]
pub struct AllocResult {
    /// Work requests completed without error.
    pub ops: u64,
    /// CASes that swapped.
    pub swaps: u64,
    /// Work requests that completed with an error.
    pub errors: u64,
    /// Wall time (the longest thread).
    pub elapsed: Duration,
    /// Time threads spent waiting for a shared queue pair's lock, summed.
    pub lock_wait: Duration,
    /// Time threads ran, summed (the denominator of the lock-wait share).
    pub thread_time: Duration,
    /// Transport counters, all queue pairs.
    pub transport: TransportStats,
    /// CPU time of the whole process (clients and memory node).
    pub cpu: Duration,
}

impl AllocResult {
    /// Completed work requests per second.
    pub fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Successful CASes per second.
    pub fn swaps_per_sec(&self) -> f64 {
        self.swaps as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Share of the threads' time spent waiting for a shared queue pair's lock.
    pub fn lock_wait_share(&self) -> f64 {
        self.lock_wait.as_secs_f64() / self.thread_time.as_secs_f64().max(1e-9)
    }
}

/// A queue pair several threads share: its transport and, per sharing thread, the
/// completions another thread polled for it.
struct SharedQp {
    transport: Box<dyn Transport + Send>,
    inbox: Vec<Vec<Completion>>,
}

/// Work request ids carry the posting thread's place among the sharers in their top bits.
const SHARER_SHIFT: u32 = 48;

/// One thread's way to its queue pair.
enum Access<'a> {
    Own(Box<dyn Transport + Send>),
    Shared {
        qp: &'a Mutex<SharedQp>,
        me: usize,
        lock_wait: Duration,
    },
}

impl Access<'_> {
    fn lock<'m>(qp: &'m Mutex<SharedQp>, lock_wait: &mut Duration) -> MutexGuard<'m, SharedQp> {
        let t0 = Instant::now();
        let g = qp.lock().unwrap_or_else(|p| p.into_inner());
        *lock_wait += t0.elapsed();
        g
    }

    /// Post `batch` with one doorbell and flush it to the wire; completions the flush
    /// finds (a direct transport completes on posting) go to `out`.
    fn post(
        &mut self,
        batch: Vec<(u64, WorkRequest)>,
        out: &mut Vec<Completion>,
    ) -> Result<(), String> {
        match self {
            Access::Own(t) => {
                t.post(0, batch).map_err(|e| e.to_string())?;
                let mut got = Vec::new();
                t.poll(Instant::now(), &mut got);
                out.extend(got.into_iter().map(|(_, c)| c));
                Ok(())
            }
            Access::Shared { qp, me, lock_wait } => {
                let me = *me;
                let mut g = Self::lock(qp, lock_wait);
                let batch = batch
                    .into_iter()
                    .map(|(id, wr)| (id | (me as u64) << SHARER_SHIFT, wr))
                    .collect();
                g.transport.post(0, batch).map_err(|e| e.to_string())?;
                let SharedQp { transport, inbox } = &mut *g;
                let mut got = Vec::new();
                transport.poll(Instant::now(), &mut got);
                route(&mut got, inbox);
                take_own(&mut inbox[me], out);
                Ok(())
            }
        }
    }

    /// Poll, moving this thread's completions to `out`.
    fn poll(&mut self, out: &mut Vec<Completion>) {
        match self {
            Access::Own(t) => {
                let mut got = Vec::new();
                t.poll(Instant::now(), &mut got);
                out.extend(got.into_iter().map(|(_, c)| c));
            }
            Access::Shared { qp, me, lock_wait } => {
                let mut g = Self::lock(qp, lock_wait);
                let SharedQp { transport, inbox } = &mut *g;
                let mut got = Vec::new();
                transport.poll(Instant::now(), &mut got);
                route(&mut got, inbox);
                take_own(&mut inbox[*me], out);
            }
        }
    }

    /// Block until something may have arrived (at most `max`).
    fn wait(&mut self, max: Duration) {
        let until = Instant::now() + max;
        match self {
            Access::Own(t) => t.wait(until),
            Access::Shared { qp, me, lock_wait } => {
                let mut g = Self::lock(qp, lock_wait);
                if g.inbox[*me].is_empty() {
                    g.transport.wait(until);
                }
            }
        }
    }
}

/// Move `mine` to `out`, with the sharer bits taken off their ids.
fn take_own(mine: &mut Vec<Completion>, out: &mut Vec<Completion>) {
    out.extend(mine.drain(..).map(|mut c| {
        c.wr_id &= (1 << SHARER_SHIFT) - 1;
        c
    }));
}

/// Hand polled completions to the inboxes of the threads that posted them.
fn route(got: &mut Vec<(usize, Completion)>, inbox: &mut [Vec<Completion>]) {
    for (_, c) in got.drain(..) {
        let who = (c.wr_id >> SHARER_SHIFT) as usize;
        if let Some(b) = inbox.get_mut(who) {
            b.push(c);
        }
    }
}

/// Run one cell.
pub fn run_cell(spec: AllocSpec, targets: &Targets) -> Result<AllocResult, String> {
    let threads = spec.threads.max(1);
    let sharers = spec.policy.sharers(threads);
    let shared: Vec<Mutex<SharedQp>> = if spec.policy == Policy::PerThread {
        Vec::new()
    } else {
        (0..threads.div_ceil(sharers))
            .map(|_| {
                let (transport, _) = open_transport(spec.transport, spec.pmtu, targets)?;
                Ok(Mutex::new(SharedQp {
                    transport,
                    inbox: vec![Vec::new(); sharers],
                }))
            })
            .collect::<Result<_, String>>()?
    };
    let base = match spec.transport {
        TransportKind::Local => targets.local_base,
        _ => targets.node_base,
    };
    // The threads and this one: the shared queue pairs' counters are read once every
    // thread has primed, so they count the measurement only.
    let barrier = Arc::new(Barrier::new(threads + 1));
    let go = Arc::new(Barrier::new(threads + 1));
    let mut baseline = Vec::new();
    let (results, cpu) = crate::cpu::spent_during(|| {
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|thread| {
                    let (barrier, go) = (barrier.clone(), go.clone());
                    let shared = &shared;
                    scope.spawn(move || {
                        let access = if spec.policy == Policy::PerThread {
                            open_transport(spec.transport, spec.pmtu, targets)
                                .map(|(t, _)| Access::Own(t))
                        } else {
                            Ok(Access::Shared {
                                qp: &shared[thread / sharers],
                                me: thread % sharers,
                                lock_wait: Duration::ZERO,
                            })
                        };
                        let primed = access.and_then(|mut a| {
                            let guess = match spec.verb {
                                AllocVerb::Cas => prime(&mut a, base)?,
                                AllocVerb::Read => 0,
                            };
                            Ok((a, guess))
                        });
                        // Every thread reaches the barrier, even one whose setup failed.
                        barrier.wait();
                        go.wait();
                        let (access, guess) = primed?;
                        run_thread(spec, access, base, thread, guess)
                    })
                })
                .collect();
            barrier.wait();
            baseline = shared
                .iter()
                .map(|qp| {
                    let g = qp.lock().unwrap_or_else(|p| p.into_inner());
                    g.transport.stats()
                })
                .collect();
            go.wait();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err("benchmark thread panicked".into()))
                })
                .collect::<Vec<_>>()
        })
    });
    let mut total = AllocResult {
        cpu,
        ..AllocResult::default()
    };
    for r in results {
        let r = r?;
        total.ops += r.ops;
        total.swaps += r.swaps;
        total.errors += r.errors;
        total.elapsed = total.elapsed.max(r.elapsed);
        total.lock_wait += r.lock_wait;
        total.thread_time += r.thread_time;
        total.transport.add(&r.transport);
    }
    for (qp, before) in shared.iter().zip(&baseline) {
        let g = qp.lock().unwrap_or_else(|p| p.into_inner());
        total.transport.add(&g.transport.stats().since(before));
    }
    Ok(total)
}

fn run_thread(
    spec: AllocSpec,
    mut access: Access<'_>,
    base: RemoteAddr,
    thread: usize,
    mut guess: u64,
) -> Result<AllocResult, String> {
    let mut rng = SmallRng::seed_from_u64(0x5eed_0000 ^ thread as u64);
    let depth = spec.depth.max(1);
    let mut next_id = 1u64;
    let mut done = Vec::with_capacity(depth);
    let mut r = AllocResult::default();
    let start = Instant::now();
    let deadline = start + spec.duration;
    let before = match &access {
        Access::Own(t) => t.stats(),
        Access::Shared { .. } => TransportStats::default(),
    };
    while Instant::now() < deadline {
        let batch: Vec<(u64, WorkRequest)> = (0..depth as u64)
            .map(|k| {
                let wr = match spec.verb {
                    AllocVerb::Read => WorkRequest::read(
                        base.offset(4096 + rng.random_range(0..READ_SLOTS) * 64),
                        READ_BYTES,
                    ),
                    AllocVerb::Cas => {
                        WorkRequest::cas(base, guess.wrapping_add(k), guess.wrapping_add(k + 1))
                    }
                };
                (next_id + k, wr)
            })
            .collect();
        next_id += depth as u64;
        done.clear();
        match spec.doorbell {
            Doorbell::Batched => access.post(batch, &mut done)?,
            Doorbell::Single => {
                for item in batch {
                    access.post(vec![item], &mut done)?;
                }
            }
        }
        let round = Instant::now();
        while done.len() < depth {
            let had = done.len();
            access.poll(&mut done);
            if done.len() == had {
                if round.elapsed() > Duration::from_secs(10) {
                    return Err(format!(
                        "{} of {depth} completions missing after 10 s",
                        depth - had
                    ));
                }
                match spec.completions {
                    Completions::Block => access.wait(Duration::from_millis(1)),
                    Completions::Spin => std::hint::spin_loop(),
                }
            }
        }
        done.sort_by_key(|c| c.wr_id);
        for c in &done {
            match &c.result {
                Ok(CompletionValue::Atomic(seen)) => {
                    r.ops += 1;
                    let expected = guess.wrapping_add(c.wr_id - (next_id - depth as u64));
                    if *seen == expected {
                        r.swaps += 1;
                    }
                }
                Ok(_) => r.ops += 1,
                Err(_) => r.errors += 1,
            }
        }
        if spec.verb == AllocVerb::Cas {
            // The next batch expects the word to follow the last value seen: one more
            // if that CAS swapped, else what it found.
            if let Some(Completion {
                result: Ok(CompletionValue::Atomic(seen)),
                wr_id,
                ..
            }) = done.last()
            {
                let expected = guess.wrapping_add(wr_id - (next_id - depth as u64));
                guess = if *seen == expected {
                    seen.wrapping_add(1)
                } else {
                    *seen
                };
            }
        }
    }
    r.elapsed = start.elapsed();
    r.thread_time = r.elapsed;
    match &access {
        Access::Own(t) => r.transport = t.stats().since(&before),
        Access::Shared { lock_wait, .. } => r.lock_wait = *lock_wait,
    }
    Ok(r)
}

/// The current value of the word at `base` (earlier cells left it anywhere), by a CAS
/// that cannot change it, before the measurement.
fn prime(access: &mut Access<'_>, base: RemoteAddr) -> Result<u64, String> {
    let mut got = Vec::new();
    let done = &mut got;
    access.post(vec![(0, WorkRequest::cas(base, 0, 0))], done)?;
    let t0 = Instant::now();
    while done.is_empty() {
        if t0.elapsed() > Duration::from_secs(10) {
            return Err("no answer to the priming CAS after 10 s".into());
        }
        access.poll(done);
        if done.is_empty() {
            access.wait(Duration::from_millis(1));
        }
    }
    match done.first().map(|c| &c.result) {
        Some(Ok(CompletionValue::Atomic(v))) => Ok(*v),
        other => Err(format!("the priming CAS failed: {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        for p in [Policy::Shared, Policy::Multiplexed, Policy::PerThread] {
            assert_eq!(p.name().parse::<Policy>(), Ok(p));
        }
        for d in [Doorbell::Batched, Doorbell::Single] {
            assert_eq!(d.name().parse::<Doorbell>(), Ok(d));
        }
        for c in [Completions::Block, Completions::Spin] {
            assert_eq!(c.name().parse::<Completions>(), Ok(c));
        }
        for v in [AllocVerb::Read, AllocVerb::Cas] {
            assert_eq!(v.name().parse::<AllocVerb>(), Ok(v));
        }
        assert!(
            "pooled"
                .parse::<Policy>()
                .unwrap_err()
                .contains("per-thread")
        );
    }

    #[test]
    fn sharers_follow_the_policy() {
        assert_eq!(Policy::Shared.sharers(8), 8);
        assert_eq!(Policy::Multiplexed.sharers(8), 2);
        assert_eq!(Policy::PerThread.sharers(8), 1);
    }

    #[test]
    fn completions_reach_the_thread_that_posted_them() {
        let mut inbox = vec![Vec::new(); 3];
        let c = |who: u64, id: u64| {
            (
                0,
                Completion {
                    wr_id: who << SHARER_SHIFT | id,
                    kind: verbs::wr::WrKind::Write,
                    result: Ok(CompletionValue::Write),
                },
            )
        };
        let mut got = vec![c(2, 7), c(0, 1), c(2, 8)];
        route(&mut got, &mut inbox);
        assert!(got.is_empty());
        assert_eq!(inbox[0].len(), 1);
        assert!(inbox[1].is_empty());
        assert_eq!(
            inbox[2].iter().map(|c| c.wr_id & 0xff).collect::<Vec<_>>(),
            vec![7, 8]
        );
    }
}
