//! The copier's thread: starts re-replications the catalog wants, runs their
//! passes one after another, promotes finished ones, and publishes progress.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use super::engine::CopyEngine;
use super::memory::ReplicaMemory;
use super::pass::{PassReport, run_pass};
use super::rate::RateLimit;
use super::rule;
use super::{Progress, RereplicationConfig};
use crate::api::{RereplicationState, RereplicationStatus};
use crate::catalog::{AreaOnMember, SyncPlan, SyncTarget};
use crate::http::Shared;

/// The running copier and failover threads; they stop (and are joined) when
/// dropped.
#[derive(Debug)]
pub struct Rereplicator {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    failovers: Option<JoinHandle<()>>,
}

impl Rereplicator {
    /// Stops the copier, waiting for the pass step in progress.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in [self.thread.take(), self.failovers.take()]
            .into_iter()
            .flatten()
        {
            let _ = t.join();
        }
    }
}

impl Drop for Rereplicator {
    fn drop(&mut self) {
        self.halt();
    }
}

/// One syncing member the copier works on.
struct Job {
    target: SyncTarget,
    fenced: bool,
    /// Whether the engine's bulk copy ran (the switch engine copies once, before
    /// the first pass).
    bulk_done: bool,
    status: RereplicationStatus,
}

/// Starts the copier over `shared`'s catalog, reaching the memnodes through
/// `memory`, and the thread that fails silent memnodes over (resynchronising a
/// failed primary's survivors first, `failover.rs`) through
/// `failover_memory`; `None` when `config` turns re-replication off (the lease
/// sweep then fails memnodes over, without resynchronising survivors). A switch
/// copy engine (`shared.copy_engine`) is given `memnode_token`, the memory node
/// admin token the switch was started with.
pub fn start(
    shared: Arc<Shared>,
    config: RereplicationConfig,
    memory: Box<dyn ReplicaMemory>,
    failover_memory: Box<dyn ReplicaMemory>,
    memnode_token: Option<String>,
) -> std::io::Result<Option<Rereplicator>> {
    // A service that stopped in the middle of a paused pass left the pause.
    for table in shared.with(|c, _| c.paused_tables()) {
        if let Err(e) = shared.with(|c, _| c.pause_writes(&table, false)) {
            tracing::error!(table = %table, error = %e, "resuming the table's writes failed");
        }
    }
    if config.rate_bytes_per_sec == 0 {
        tracing::warn!("re-replication is off: replica sets that lose a member stay smaller");
        return Ok(None);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let shared2 = shared.clone();
    let thread = std::thread::Builder::new()
        .name("rereplication".into())
        .spawn(move || Copier::new(shared2, config, memory, flag, memnode_token).run())?;
    let mut running = Rereplicator {
        stop: stop.clone(),
        thread: Some(thread),
        failovers: None,
    };
    shared.copier_fails_over.store(true, Ordering::Relaxed);
    let started = super::failover::spawn(shared.clone(), config.tick, failover_memory, stop);
    match started {
        Ok(t) => running.failovers = Some(t),
        Err(e) => {
            // The sweep keeps failing memnodes over, as without a copier.
            shared.copier_fails_over.store(false, Ordering::Relaxed);
            return Err(e);
        }
    }
    Ok(Some(running))
}

struct Copier {
    shared: Arc<Shared>,
    config: RereplicationConfig,
    memory: Box<dyn ReplicaMemory>,
    stop: Arc<AtomicBool>,
    rate: RateLimit,
    jobs: BTreeMap<(String, usize, u64), Job>,
    memnode_token: Option<String>,
}

fn key(t: &SyncTarget) -> (String, usize, u64) {
    (t.table.clone(), t.set, t.target)
}

impl Copier {
    fn new(
        shared: Arc<Shared>,
        config: RereplicationConfig,
        memory: Box<dyn ReplicaMemory>,
        stop: Arc<AtomicBool>,
        memnode_token: Option<String>,
    ) -> Copier {
        Copier {
            memnode_token,
            rate: RateLimit::new(config.rate_bytes_per_sec),
            shared,
            config,
            memory,
            stop,
            jobs: BTreeMap::new(),
        }
    }

    fn progress(&self) -> &Progress {
        &self.shared.rereplication
    }

    fn run(mut self) {
        while !self.stop.load(Ordering::Relaxed) {
            self.step();
            std::thread::sleep(self.config.tick);
        }
    }

    /// One round: start what is wanted, then one pass of every syncing member.
    fn step(&mut self) {
        let wanted = self.shared.with(|c, _| c.rereplication_wanted());
        for (table, set) in wanted {
            match self.shared.with(|c, now| c.begin_sync(&table, set, now)) {
                Ok(Some(t)) => tracing::warn!(
                    table = %t.table,
                    home = t.home,
                    target = t.target,
                    reason = t.reason,
                    "re-replication started: a new member joins the replica set as syncing"
                ),
                Ok(None) => {
                    tracing::debug!(table = %table, set, "no memnode can take a new copy now")
                }
                Err(e) => {
                    tracing::warn!(table = %table, set, error = %e, "starting re-replication failed")
                }
            }
        }
        let targets = self.shared.with(|c, _| c.syncing());
        let live: Vec<_> = targets.iter().map(key).collect();
        self.jobs.retain(|k, j| {
            let keep = live.contains(k);
            if !keep {
                tracing::warn!(table = %j.target.table, target = j.target.target, "re-replication abandoned: the member is no longer syncing");
            }
            keep
        });
        self.progress()
            .retain(|(t, h)| targets.iter().any(|s| &s.table == t && s.home == *h));
        for t in targets {
            if self.stop.load(Ordering::Relaxed) {
                return;
            }
            let now = self.shared.clock.now_ms();
            let job = self.jobs.entry(key(&t)).or_insert_with(|| Job {
                status: RereplicationStatus {
                    table: t.table.clone(),
                    home: t.home,
                    target: t.target,
                    reason: t.reason.to_owned(),
                    started_ms: now,
                    progress_ms: now,
                    ..RereplicationStatus::default()
                },
                target: t.clone(),
                fenced: false,
                bulk_done: false,
            });
            let mut status = job.status.clone();
            let fenced = job.fenced;
            let mut bulk_done = job.bulk_done;
            let outcome = self.work(&t, fenced, &mut bulk_done, &mut status);
            let now = self.shared.clock.now_ms();
            match outcome {
                Ok(Step::Promoted) => {
                    self.jobs.remove(&key(&t));
                    self.progress().remove(&t.table, t.home);
                    self.progress().finished.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                Ok(Step::Pass) => status.error = None,
                Err(e) => {
                    tracing::warn!(table = %t.table, target = t.target, error = %e, "re-replication pass failed; it is retried");
                    status.error = Some(e);
                }
            }
            let stalled = now.saturating_sub(status.progress_ms)
                >= u64::try_from(self.config.stall_after.as_millis()).unwrap_or(u64::MAX);
            if stalled && status.state != RereplicationState::Stalled {
                tracing::error!(table = %t.table, target = t.target, "re-replication stalled: nothing copied recently");
            }
            if stalled {
                status.state = RereplicationState::Stalled;
            }
            if let Some(j) = self.jobs.get_mut(&key(&t)) {
                j.bulk_done = bulk_done;
                j.fenced = j.fenced || status.state != RereplicationState::Starting;
                j.status = status.clone();
            }
            self.progress().put(status);
        }
    }

    /// One pass of `t` (fencing first if not yet done), promoting it once clean.
    fn work(
        &mut self,
        t: &SyncTarget,
        fenced: bool,
        bulk_done: &mut bool,
        status: &mut RereplicationStatus,
    ) -> Result<Step, String> {
        let plan = self
            .shared
            .with(|c, _| c.sync_plan(t))
            .map_err(|e| e.to_string())?;
        let rule = self.rule_of(&plan)?;
        status.source = plan.source.id;
        status.bytes_total = plan.extents.iter().map(|e| e.len).sum();
        if !fenced {
            // A copy finished by a paused pass needs no fence now: the pause's
            // fence makes every writer learn the new member before it writes
            // again (and the member is promoted when the writes resume).
            if !rule.final_pass_paused() {
                self.fence(&plan)?;
            }
            status.state = RereplicationState::Copying;
            status.progress_ms = self.shared.clock.now_ms();
        }
        if !*bulk_done {
            self.bulk_copy(t, &plan, status);
            *bulk_done = true;
        }
        let progress = self.shared.rereplication.clone();
        let clock = self.shared.clock.clone();
        let before = status.clone();
        let mut last = PassReport::default();
        let r = run_pass(
            self.memory.as_mut(),
            &plan,
            rule.as_ref(),
            &mut self.rate,
            &self.stop,
            |r| {
                let mut s = before.clone();
                s.bytes_compared = r.compared;
                s.bytes_copied += r.written;
                s.progress_ms = clock.now_ms();
                s.state = RereplicationState::Copying;
                progress.add_bytes(r.written - last.written);
                last = r;
                progress.put(s);
            },
        );
        let r = match r {
            Ok(r) => r,
            Err(e) => {
                status.bytes_copied += last.written;
                return Err(e);
            }
        };
        status.bytes_compared = r.compared;
        status.bytes_copied += r.written;
        status.passes += 1;
        status.state = RereplicationState::Copying;
        if r.compared > 0 || r.written > 0 {
            status.progress_ms = self.shared.clock.now_ms();
        }
        tracing::info!(
            table = %t.table,
            target = t.target,
            pass = status.passes,
            compared = r.compared,
            written = r.written,
            copied = status.bytes_copied,
            total = status.bytes_total,
            "re-replication pass done"
        );
        let paused = rule.final_pass_paused();
        if r.written > 0 && !(paused && close_enough(&r, status.passes)) {
            return Ok(Step::Pass);
        }
        status.state = RereplicationState::Promoting;
        self.progress().put(status.clone());
        if paused {
            // Every writer asks for the table before it writes again (the pause's
            // fence replaced its queue pairs): it finds the member promoted.
            self.finish_paused(t, status)?;
        } else {
            let members = self
                .shared
                .with(|c, now| c.promote_sync(t, now))
                .map_err(|e| e.to_string())?;
            // Everyone learns the member is a backup now (and a drained member left).
            let fence: Vec<_> = plan
                .members
                .iter()
                .filter(|m| members.contains(&m.id))
                .cloned()
                .collect();
            for m in &fence {
                if let Err(e) = self.memory.fence(m) {
                    tracing::warn!(memnode = m.id, error = %e, "fencing after the promotion failed");
                }
            }
        }
        tracing::warn!(
            table = %t.table,
            home = t.home,
            target = t.target,
            passes = status.passes,
            copied = status.bytes_copied,
            total = status.bytes_total,
            "re-replication finished: the replica set is whole again"
        );
        Ok(Step::Promoted)
    }

    /// The engine's bulk copy of `plan` before its first pass: nothing for the CPU
    /// engine; with the switch engine, every extent copied by the switch. A bulk
    /// copy that fails is logged and counted and the passes copy everything
    /// instead: they compare every byte either way.
    fn bulk_copy(&mut self, t: &SyncTarget, plan: &SyncPlan, status: &mut RereplicationStatus) {
        let engine = self.shared.copy_engine();
        let CopyEngine::Switch {
            admin_url,
            chunk,
            window,
        } = &engine
        else {
            return;
        };
        let started = std::time::Instant::now();
        let progress = self.shared.rereplication.clone();
        let clock = self.shared.clock.clone();
        let before = status.clone();
        let r = super::switch_bulk::copy_plan(
            admin_url,
            self.memnode_token.as_deref(),
            (*chunk, *window),
            plan,
            &self.stop,
            |bytes| {
                let mut s = before.clone();
                s.switch_bytes = before.switch_bytes + bytes;
                s.progress_ms = clock.now_ms();
                s.state = RereplicationState::Copying;
                progress.put(s);
            },
        );
        match r {
            Ok(bytes) => {
                status.switch_bytes += bytes;
                status.progress_ms = self.shared.clock.now_ms();
                self.progress().add_switch_bytes(bytes);
                tracing::info!(
                    table = %t.table,
                    target = plan.target.id,
                    bytes,
                    ms = started.elapsed().as_millis() as u64,
                    engine = %engine,
                    "bulk copy by the switch done; the copy passes follow"
                );
            }
            Err(e) => {
                self.progress().add_switch_failure();
                tracing::warn!(
                    table = %t.table,
                    target = plan.target.id,
                    error = %e,
                    engine = %engine,
                    "bulk copy by the switch failed; the copy passes copy everything"
                );
            }
        }
    }

    /// Destroys the queue pairs of every member of the set.
    fn fence(&mut self, plan: &SyncPlan) -> Result<(), String> {
        fence_members(self.memory.as_mut(), plan)
    }

    /// The copy rule of `plan`'s table (a RACE table's read from its directory).
    fn rule_of(&mut self, plan: &SyncPlan) -> Result<Box<dyn rule::CopyRule>, String> {
        let directory = match &plan.race_directory {
            Some(a) => Some(read_area(self.memory.as_mut(), a)?),
            None => None,
        };
        rule::for_plan(plan, directory.as_deref())
    }

    /// The last pass of an index whose copy only a pass without writers can
    /// finish: pause the table's writes, wait for writers to learn it, fence the
    /// set (writes posted before the pause stop executing), copy what still
    /// differs at full speed, check with one more pass that nothing differs,
    /// then promote, which resumes the writes. Any failure resumes the writes
    /// before it is reported.
    fn finish_paused(
        &mut self,
        t: &SyncTarget,
        status: &mut RereplicationStatus,
    ) -> Result<(), String> {
        let started = std::time::Instant::now();
        self.shared
            .with(|c, _| c.pause_writes(&t.table, true))
            .map_err(|e| e.to_string())?;
        // Writers learn of the pause within their configuration's age limit; the
        // writes they had in flight finish meanwhile, and the fence that follows
        // stops only stragglers.
        std::thread::sleep(std::time::Duration::from_millis(
            3 * dmkv_api::metadata::WRITER_CONFIG_MAX_AGE_MS,
        ));
        let r = self.copy_paused(t, status);
        let r = r.and_then(|()| {
            self.shared
                .with(|c, now| c.promote_sync(t, now))
                .map(|_| ())
                .map_err(|e| e.to_string())
        });
        if r.is_err() {
            let resumed = self.shared.with(|c, _| c.pause_writes(&t.table, false));
            if let Err(e) = resumed {
                tracing::error!(table = %t.table, error = %e, "resuming the table's writes failed");
            }
        }
        let paused_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.progress().add_pause(paused_ms);
        tracing::info!(
            table = %t.table,
            target = t.target,
            paused_ms,
            ok = r.is_ok(),
            "last copy pass with writes paused"
        );
        r
    }

    /// The passes of [`Copier::finish_paused`] while the writes are paused.
    fn copy_paused(
        &mut self,
        t: &SyncTarget,
        status: &mut RereplicationStatus,
    ) -> Result<(), String> {
        let plan = self
            .shared
            .with(|c, _| c.sync_plan(t))
            .map_err(|e| e.to_string())?;
        self.fence(&plan)?;
        let rule = self.rule_of(&plan)?;
        let mut unlimited = RateLimit::new(u64::MAX);
        for attempt in 0..3 {
            let r = run_pass(
                self.memory.as_mut(),
                &plan,
                rule.as_ref(),
                &mut unlimited,
                &self.stop,
                |_| {},
            )?;
            status.passes += 1;
            status.bytes_copied += r.written;
            self.progress().add_bytes(r.written);
            if r.written == 0 {
                return Ok(());
            }
            tracing::info!(table = %t.table, target = t.target, attempt, written = r.written, "copied with writes paused");
        }
        Err("the copy still differed after three passes with writes paused".into())
    }
}

/// Whether a pass with writers running left so little to copy that the rest is
/// copied with the writes paused: at most 64 KiB or 1/64 of the set was written,
/// or eight passes ran (writers rewrite memory as fast as it is copied).
fn close_enough(r: &PassReport, passes: u64) -> bool {
    r.written <= (64 << 10).max(r.compared / 64) || passes >= 8
}

/// Reads a table-owned area whole.
fn read_area(memory: &mut dyn ReplicaMemory, a: &AreaOnMember) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(usize::try_from(a.len).unwrap_or(0));
    let mut off = 0;
    while off < a.len {
        let n = (a.len - off).min(super::pass::CHUNK);
        let len = u32::try_from(n).map_err(|_| "chunk too long".to_owned())?;
        out.extend(memory.read(&a.member, a.rkey, a.va + off, len)?);
        off += n;
    }
    Ok(out)
}

/// Destroys the queue pairs of every member of `plan`'s set (but `memory`'s own).
pub(super) fn fence_members(memory: &mut dyn ReplicaMemory, plan: &SyncPlan) -> Result<(), String> {
    for m in &plan.members {
        let n = memory.fence(m)?;
        tracing::info!(
            memnode = m.id,
            queue_pairs = n,
            epoch = plan.epoch,
            "replica set fenced"
        );
    }
    Ok(())
}

enum Step {
    Pass,
    Promoted,
}
