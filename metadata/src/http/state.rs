//! What the handlers share: the catalog behind its lock, the clock, the token, the
//! counters and the cluster view; and running catalog work off the async threads.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::error::ApiError;
use crate::catalog::{Catalog, CatalogError};
use crate::clock::Clock;
use crate::metrics::RequestMetrics;

/// What the handlers share.
#[derive(Debug)]
pub struct Shared {
    /// The catalog.
    pub catalog: Mutex<Catalog>,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// The bearer token mutating requests need, if any.
    pub token: Option<String>,
    /// Counters.
    pub metrics: RequestMetrics,
    /// Start time.
    pub started: Instant,
    /// Scrapes of the memnodes and the accelerator for the dashboard.
    pub cluster: crate::cluster::ClusterView,
    /// The accelerator's client-side UDP address, advertised with its admin URL.
    pub accelerator_data: Option<String>,
    /// Samples of the cluster stats, for the dashboard's charts.
    pub history: crate::history::StatsHistory,
    /// The service's own base URL (`http://ip:port`, loopback when it listens on every
    /// address), which its key lookups connect to.
    pub url: String,
    /// The kvstore client of key lookups.
    pub key_lookup: crate::key_lookup::KeyLookup,
    /// Running re-replications and their counters.
    pub rereplication: Arc<crate::rereplication::Progress>,
    /// Signs grants (`None`: the service issues none).
    pub grants: Option<crate::grant_issuer::GrantIssuer>,
    /// Set while the copier runs: it fails silent memnodes over (resynchronising
    /// the survivors of a failed primary first), and the lease sweep does not.
    pub copier_fails_over: AtomicBool,
    /// Who moves the bulk of re-replicated bytes (changeable while running).
    pub copy_engine: Mutex<crate::rereplication::CopyEngine>,
}

impl Shared {
    /// The re-replication copy engine now.
    pub fn copy_engine(&self) -> crate::rereplication::CopyEngine {
        self.copy_engine
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Changes the re-replication copy engine; copies that already made their
    /// first pass are not affected.
    pub fn set_copy_engine(&self, engine: crate::rereplication::CopyEngine) {
        tracing::info!(engine = %engine, "re-replication copy engine set");
        *self.copy_engine.lock().unwrap_or_else(|p| p.into_inner()) = engine;
    }

    /// Runs `f` on the locked catalog with the current time.
    pub fn with<T>(&self, f: impl FnOnce(&mut Catalog, u64) -> T) -> T {
        let now = self.clock.now_ms();
        let mut c = self.catalog.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut c, now)
    }

    /// The cluster stats (blocking: it may scrape every memnode and the accelerator). A
    /// recent answer is served again unless the memnodes registered since.
    pub fn cluster_stats(&self) -> crate::cluster::ClusterStats {
        let (memnodes, stats) = self.with(|c, now| (c.memnodes(now), c.stats(now)));
        let inputs = crate::cluster::Inputs {
            memnodes,
            requests: self.metrics.totals(),
            leases_active: stats.leases_active as u64,
            tables: stats.tables.values().sum::<usize>() as u64,
            uptime_seconds: self.started.elapsed().as_secs(),
        };
        self.cluster.stats(inputs)
    }

    /// Returns the memory of leases past expiry and grace; how many.
    pub fn sweep(&self) -> Result<usize, CatalogError> {
        if !self.copier_fails_over.load(Ordering::Relaxed) {
            for (memnode, reason, f) in self.with(|c, now| c.fail_over_down(now))? {
                log_failover(memnode, &reason, &f);
            }
        }
        let sweep = self.with(|c, now| c.reclaim_expired(now))?;
        if !sweep.adopted.is_empty() {
            let bytes = sweep.adopted.iter().map(|l| l.len).sum();
            self.metrics.on_adopted(sweep.adopted.len() as u64, bytes);
        }
        for l in &sweep.adopted {
            tracing::info!(
                lease = l.id,
                client = %l.client,
                table = ?l.table,
                memnode = l.memnode_id,
                bytes = l.len,
                "expired data lease adopted by its table (its memory may hold live values)"
            );
        }
        let reclaimed = sweep.reclaimed;
        if !reclaimed.is_empty() {
            let bytes = reclaimed.iter().map(|l| l.len).sum();
            self.metrics.on_reclaimed(reclaimed.len() as u64, bytes);
            for l in &reclaimed {
                tracing::info!(
                    lease = l.id,
                    client = %l.client,
                    memnode = l.memnode_id,
                    bytes = l.len,
                    "expired lease reclaimed"
                );
            }
        }
        Ok(reclaimed.len())
    }
}

/// Logs what failing memnode `memnode` over changed.
pub fn log_failover(memnode: u64, reason: &str, f: &crate::catalog::Failover) {
    for t in &f.tables {
        let health = crate::catalog::table_health(t);
        tracing::error!(
            table = %t.name,
            memnode,
            reason = %reason,
            state = crate::catalog::table_state_name(health.state),
            replica_sets = ?t.replica_sets,
            "memnode taken out of the table's replica sets; its backups serve in its place"
        );
    }
    if !f.tables.is_empty() {
        tracing::warn!(memnode, leases = f.leases, "failover done");
    }
}

/// The handlers' state.
pub type AppState = Arc<Shared>;

/// Runs `f` on the catalog off the async threads (it may wait for a disk flush).
pub(super) async fn blocking<T: Send + 'static>(
    s: &AppState,
    f: impl FnOnce(&mut Catalog, u64) -> Result<T, CatalogError> + Send + 'static,
) -> Result<T, ApiError> {
    let s = s.clone();
    tokio::task::spawn_blocking(move || s.with(f))
        .await
        .map_err(ApiError::internal)?
        .map_err(ApiError::from)
}
