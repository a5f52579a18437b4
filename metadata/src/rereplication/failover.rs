//! The failover thread: fails over every memnode that sent no heartbeat for the
//! failover timeout, first making the survivors of every replica set it was the
//! primary of equal to the member promoted in its place
//! (`Catalog::survivor_plans` says why, and why nobody writes them meanwhile).
//!
//! It runs beside the copier, with its own queue pairs, so that a failover never
//! waits for a long re-replication pass.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use super::memory::ReplicaMemory;
use super::pass::run_pass;
use super::rate::RateLimit;
use super::rule::WriteOnceWords;
use super::worker::fence_members;
use crate::catalog::SyncPlan;
use crate::http::Shared;

/// Most copy passes resynchronising one survivor: nobody writes it meanwhile, so
/// the second pass normally finds nothing left.
const RESYNC_PASSES: u32 = 4;

/// Attempts of one resynchronisation (a fence of the copier's may end this
/// thread's queue pairs under a pass).
const RESYNC_ATTEMPTS: u32 = 3;

/// Starts the failover thread; it stops when `stop` is set.
pub(super) fn spawn(
    shared: Arc<Shared>,
    tick: Duration,
    memory: Box<dyn ReplicaMemory>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("failover".into())
        .spawn(move || {
            let mut f = Failovers {
                shared,
                memory,
                stop,
            };
            while !f.stop.load(Ordering::Relaxed) {
                f.fail_over_due();
                std::thread::sleep(tick);
            }
        })
}

struct Failovers {
    shared: Arc<Shared>,
    memory: Box<dyn ReplicaMemory>,
    stop: Arc<AtomicBool>,
}

impl Failovers {
    /// Fails over every memnode that is due, resynchronising survivors first. A
    /// resynchronisation that fails (a survivor is down too) is logged and the
    /// failover goes ahead: the set would otherwise stay without a primary.
    fn fail_over_due(&mut self) {
        let due = self.shared.with(|c, now| c.failover_due_now(now));
        for id in due {
            if self.stop.load(Ordering::Relaxed) {
                return;
            }
            let plans = self.shared.with(|c, _| c.survivor_plans(id));
            let started = std::time::Instant::now();
            for p in &plans {
                match self.resync(&p.plan) {
                    Ok((passes, written)) => tracing::warn!(
                        table = %p.table,
                        set = p.set,
                        failed = id,
                        primary = p.plan.source.id,
                        survivor = p.plan.target.id,
                        passes,
                        written,
                        "survivor of a failed primary resynchronised with the member promoted in its place"
                    ),
                    Err(e) => tracing::error!(
                        table = %p.table,
                        set = p.set,
                        failed = id,
                        primary = p.plan.source.id,
                        survivor = p.plan.target.id,
                        error = %e,
                        "resynchronising a survivor of a failed primary failed; failing over without it"
                    ),
                }
            }
            if !plans.is_empty() {
                let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                self.shared.rereplication.add_resync(ms);
                tracing::warn!(
                    memnode = id,
                    sets = plans.len(),
                    resync_ms = ms,
                    "survivors resynchronised; failing over"
                );
            }
            match self.shared.with(|c, now| c.fail_over_silent(id, now)) {
                Ok((memnode, reason, f)) => crate::http::log_failover(memnode, &reason, &f),
                Err(e) => {
                    tracing::warn!(memnode = id, error = %e, "failover failed; it is retried")
                }
            }
        }
    }

    /// Makes `plan`'s target equal to its source while nobody writes the set:
    /// fences the survivors, then copies until a pass writes nothing; the passes
    /// and bytes written. The set serves nothing until the failover is committed,
    /// so the copy is not rate-limited.
    fn resync(&mut self, plan: &SyncPlan) -> Result<(u32, u64), String> {
        let mut last = String::new();
        for _ in 0..RESYNC_ATTEMPTS {
            match self.resync_once(plan) {
                Ok(done) => return Ok(done),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    fn resync_once(&mut self, plan: &SyncPlan) -> Result<(u32, u64), String> {
        fence_members(self.memory.as_mut(), plan)?;
        let mut unlimited = RateLimit::new(u64::MAX);
        let mut written = 0;
        for pass in 1..=RESYNC_PASSES {
            let r = run_pass(
                self.memory.as_mut(),
                plan,
                &WriteOnceWords,
                &mut unlimited,
                &self.stop,
                |_| {},
            )?;
            written += r.written;
            if r.written == 0 {
                return Ok((pass, written));
            }
        }
        Err(format!(
            "the survivor still differed from the new primary after {RESYNC_PASSES} passes"
        ))
    }
}
