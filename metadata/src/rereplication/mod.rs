//! Re-replication: giving a replica set that lost a member (failover) or keeps a
//! draining one a new member, and resynchronising a memnode that rejoined.
//!
//! The catalog picks the member and adds it as *syncing* (`catalog::rereplicate`);
//! the copier here — a thread of the metadata service, a one-sided client of the
//! memnodes over the same soft-RoCE queue pairs sessions use ([`VerbsMemory`]) —
//! then, per syncing member:
//!
//! 1. **fences** the set: destroys every queue pair of its members, so every
//!    session reconnects, and a session whose queue pair was replaced fetches the
//!    table's configuration again before its next linearizing CAS (writers that
//!    did not learn about the syncing member cannot write the set after this);
//! 2. runs **copy passes** ([`pass`]): read the primary, compare with the new
//!    member, write the difference by the index's [`rule::CopyRule`]; rate-limited
//!    ([`RereplicationConfig::rate_bytes_per_sec`]);
//! 3. once a full pass wrote nothing, **promotes** the member (catalog) and fences
//!    the set again, so every writer treats it as an ordinary backup from then on.
//!
//! A second thread (`failover.rs`) fails silent memnodes over: a failed primary's
//! survivors are first made equal to the member promoted in its place, while
//! nobody can write them (`Catalog::survivor_plans`), and only then is the
//! failover committed.
//!
//! Progress is kept in [`Progress`] (`GET /v1/rereplication`, the tables' status,
//! the metrics). `docs/replication.md` argues why this is safe with live writers.

pub mod engine;
mod failover;
pub mod memory;
pub mod pass;
pub mod rate;
pub mod rule;
pub mod switch_bulk;
pub mod verbs_memory;
mod worker;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::api::{RereplicationState, RereplicationStatus};
use telemetry::family::{Family, Number};

pub use engine::CopyEngine;
pub use memory::ReplicaMemory;
pub use verbs_memory::VerbsMemory;
pub use worker::{Rereplicator, start};

/// The default copy rate in MB/s (`--rereplication-rate-mb`).
pub const DEFAULT_RATE_MB: u64 = 64;

/// The copier's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RereplicationConfig {
    /// Copy bandwidth (bytes read and written) in bytes per second; 0 turns
    /// re-replication off (sets that lost a member stay smaller).
    pub rate_bytes_per_sec: u64,
    /// A re-replication that compared and copied nothing for this long is stalled.
    pub stall_after: Duration,
    /// How often the copier looks for work.
    pub tick: Duration,
}

impl Default for RereplicationConfig {
    fn default() -> Self {
        RereplicationConfig {
            rate_bytes_per_sec: DEFAULT_RATE_MB << 20,
            stall_after: Duration::from_secs(30),
            tick: Duration::from_millis(100),
        }
    }
}

impl RereplicationConfig {
    /// Settings with a rate of `mb` MB/s (0: off).
    pub fn with_rate_mb(mb: u64) -> RereplicationConfig {
        RereplicationConfig {
            rate_bytes_per_sec: mb.saturating_mul(1 << 20),
            ..RereplicationConfig::default()
        }
    }
}

/// Running re-replications and the counters the metrics export.
#[derive(Debug, Default)]
pub struct Progress {
    /// Running re-replications by (table, home).
    running: Mutex<BTreeMap<(String, u64), RereplicationStatus>>,
    bytes: AtomicU64,
    finished: AtomicU64,
    pauses: AtomicU64,
    paused_ms: AtomicU64,
    resyncs: AtomicU64,
    resync_ms: AtomicU64,
    switch_bytes: AtomicU64,
    switch_failures: AtomicU64,
}

impl Progress {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<(String, u64), RereplicationStatus>> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every running re-replication, by table and home.
    pub fn list(&self) -> Vec<RereplicationStatus> {
        self.lock().values().cloned().collect()
    }

    /// The running re-replications of `table`.
    pub fn of_table(&self, table: &str) -> Vec<RereplicationStatus> {
        self.lock()
            .values()
            .filter(|s| s.table == table)
            .cloned()
            .collect()
    }

    /// Bytes written to new members since the service started.
    pub fn bytes_total(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Re-replications finished since the service started.
    pub fn finished(&self) -> u64 {
        self.finished.load(Ordering::Relaxed)
    }

    /// Write pauses of last copy passes since the service started.
    pub fn pauses(&self) -> u64 {
        self.pauses.load(Ordering::Relaxed)
    }

    /// Milliseconds tables' writes were paused since the service started.
    pub fn paused_ms(&self) -> u64 {
        self.paused_ms.load(Ordering::Relaxed)
    }

    /// Failovers of a primary whose survivors were resynchronised first, since
    /// the service started.
    pub fn resyncs(&self) -> u64 {
        self.resyncs.load(Ordering::Relaxed)
    }

    /// Milliseconds those resynchronisations took (the failovers waited for
    /// them), since the service started.
    pub fn resync_ms(&self) -> u64 {
        self.resync_ms.load(Ordering::Relaxed)
    }

    fn add_resync(&self, ms: u64) {
        self.resyncs.fetch_add(1, Ordering::Relaxed);
        self.resync_ms.fetch_add(ms, Ordering::Relaxed);
    }

    /// Bytes the switch copy engine copied.
    pub fn switch_bytes(&self) -> u64 {
        self.switch_bytes.load(Ordering::Relaxed)
    }

    /// Bulk copies by the switch that failed (the passes then copied everything).
    pub fn switch_failures(&self) -> u64 {
        self.switch_failures.load(Ordering::Relaxed)
    }

    fn add_switch_bytes(&self, bytes: u64) {
        self.switch_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    fn add_switch_failure(&self) {
        self.switch_failures.fetch_add(1, Ordering::Relaxed);
    }

    fn add_pause(&self, ms: u64) {
        self.pauses.fetch_add(1, Ordering::Relaxed);
        self.paused_ms.fetch_add(ms, Ordering::Relaxed);
    }

    /// Running re-replications.
    pub fn active(&self) -> usize {
        self.lock().len()
    }

    /// Running re-replications that are stalled.
    pub fn stalled(&self) -> usize {
        self.lock()
            .values()
            .filter(|s| s.state == RereplicationState::Stalled)
            .count()
    }

    /// The re-replication metric families:
    /// `dmkv_metadata_rereplication_bytes_total` (bytes written to new members),
    /// `dmkv_metadata_rereplication_write_pauses_total` and
    /// `dmkv_metadata_rereplication_write_paused_seconds_total` (last copy passes run
    /// with a table's writes paused, and how long they paused them),
    /// `dmkv_metadata_failover_resyncs_total` and
    /// `dmkv_metadata_failover_resync_seconds_total` (what failovers of a primary
    /// waited for to resynchronise its survivors),
    /// `dmkv_metadata_rereplication_active` (running) and
    /// `dmkv_metadata_rereplication_stalled` (running, nothing copied for the
    /// stall threshold).
    pub fn families(&self) -> Vec<Family> {
        vec![
            Family::counter_value(
                "dmkv_metadata_rereplication_bytes_total",
                "Bytes written to new members of replica sets by re-replication.",
                Number::Int(self.bytes_total()),
            ),
            Family::counter_value(
                "dmkv_metadata_rereplication_switch_bytes_total",
                "Bytes the switch copied memory node to memory node for re-replication (switch copy engine).",
                Number::Int(self.switch_bytes()),
            ),
            Family::counter_value(
                "dmkv_metadata_rereplication_switch_copy_failures_total",
                "Bulk copies by the switch that failed; the copy passes then copied everything.",
                Number::Int(self.switch_failures()),
            ),
            Family::counter_value(
                "dmkv_metadata_rereplication_write_pauses_total",
                "Times a table's writes were paused for the last copy pass of a new member.",
                Number::Int(self.pauses()),
            ),
            Family::counter_value(
                "dmkv_metadata_rereplication_write_paused_seconds_total",
                "Seconds tables' writes were paused for last copy passes.",
                Number::Float(self.paused_ms() as f64 / 1000.0),
            ),
            Family::counter_value(
                "dmkv_metadata_failover_resyncs_total",
                "Failovers of a primary whose surviving copies were resynchronised first.",
                Number::Int(self.resyncs()),
            ),
            Family::counter_value(
                "dmkv_metadata_failover_resync_seconds_total",
                "Seconds failovers waited for their survivors' resynchronisation.",
                Number::Float(self.resync_ms() as f64 / 1000.0),
            ),
            Family::gauge_value(
                "dmkv_metadata_rereplication_active",
                "Replica sets whose new member is being synchronised.",
                Number::Int(self.active() as u64),
            ),
            Family::gauge_value(
                "dmkv_metadata_rereplication_stalled",
                "Running re-replications that copied nothing for the stall threshold.",
                Number::Int(self.stalled() as u64),
            ),
        ]
    }

    /// Records (or replaces) the status of the running re-replication of
    /// `(s.table, s.home)`.
    pub fn put(&self, s: RereplicationStatus) {
        self.lock().insert((s.table.clone(), s.home), s);
    }

    fn remove(&self, table: &str, home: u64) {
        self.lock().remove(&(table.to_owned(), home));
    }

    fn retain(&self, keep: impl Fn(&(String, u64)) -> bool) {
        self.lock().retain(|k, _| keep(k));
    }

    fn add_bytes(&self, n: u64) {
        self.bytes.fetch_add(n, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_counts_running_and_stalled_and_renders_them() {
        let p = Progress::default();
        p.put(RereplicationStatus {
            table: "t".into(),
            home: 1,
            ..RereplicationStatus::default()
        });
        p.put(RereplicationStatus {
            table: "t".into(),
            home: 2,
            state: RereplicationState::Stalled,
            ..RereplicationStatus::default()
        });
        p.add_bytes(4096);
        p.add_pause(12);
        p.add_pause(30);
        p.add_resync(7);
        assert_eq!((p.active(), p.stalled()), (2, 1));
        assert_eq!(p.of_table("t").len(), 2);
        assert!(p.of_table("u").is_empty());
        let out = telemetry::exposition::render("metadata", "0", p.families(), None)
            .expect("renders")
            .1;
        for line in [
            "dmkv_metadata_rereplication_bytes_total 4096",
            "dmkv_metadata_rereplication_active 2",
            "dmkv_metadata_rereplication_stalled 1",
            "dmkv_metadata_rereplication_write_pauses_total 2",
            "dmkv_metadata_rereplication_write_paused_seconds_total 0.042",
            "dmkv_metadata_failover_resync_seconds_total 0.007",
            "# TYPE dmkv_metadata_rereplication_bytes_total counter",
        ] {
            assert!(out.lines().any(|l| l == line), "{line}:\n{out}");
        }
        p.remove("t", 1);
        assert_eq!(p.active(), 1);
    }
}
