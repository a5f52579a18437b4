//! Starting and stopping the service: store, catalog, HTTP server and the lease sweeper,
//! on their own thread. Used by the binary and by in-process tests.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dmkv_service::{HttpServer, Listener, ServerTls, SpawnError, Stop};

use crate::catalog::{Catalog, CatalogConfig, CatalogError};
use crate::clock::{Clock, SystemClock};
use crate::grant_issuer::GrantIssuer;
use crate::history::{HistoryConfig, HistorySample, StatsHistory};
use crate::http::{self, Shared};
use crate::metrics::RequestMetrics;
use crate::rereplication::{RereplicationConfig, Rereplicator, VerbsMemory};
use crate::scrub::{MemnodeScrubber, Scrubber};
use crate::store::{MemStore, MetaStore, SledStore, StoreError};

/// Default listen address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9700";

/// How long a shutdown waits for requests in flight.
const DRAIN: Duration = Duration::from_secs(5);

/// Where the state lives.
#[derive(Debug, Clone)]
pub enum StoreConfig {
    /// A sled database in this directory (created if missing).
    Sled(PathBuf),
    /// In memory; clones of the [`MemStore`] share it (tests).
    Memory(MemStore),
}

/// Everything the service needs to start.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// HTTP listen address (port 0 picks one).
    pub listen: SocketAddr,
    /// Persistence.
    pub store: StoreConfig,
    /// Bearer token of mutating requests (`None`: open, with a warning).
    pub token: Option<String>,
    /// Catalog settings.
    pub catalog: CatalogConfig,
    /// How often expired leases are swept.
    pub sweep_interval: Duration,
    /// Time source.
    pub clock: Arc<dyn Clock>,
    /// Admin URL of the accelerator (soft switch) whose counters the dashboard shows.
    pub accelerator: Option<String>,
    /// The accelerator's client-side UDP address, advertised with its admin URL.
    pub accelerator_data: Option<String>,
    /// How table-owned memory is zeroed before a table gets it.
    pub scrubber: Arc<dyn Scrubber>,
    /// Serve HTTPS only with this certificate and key (`None`: plain HTTP).
    pub tls: Option<ServerTls>,
    /// How often the cluster stats are sampled for the dashboard's charts, and for how
    /// long the samples are kept.
    pub stats_history: HistoryConfig,
    /// Re-replication of replica sets that lost a member (rate 0: off).
    pub rereplication: RereplicationConfig,
    /// Signs grants for clients (`None`: none are issued; memory nodes then run
    /// without grants).
    pub grants: Option<GrantIssuer>,
    /// The memory node admin token the service presents to memory nodes' admin APIs
    /// when it re-replicates (`None`: memory nodes without authentication).
    pub memnode_token: Option<String>,
    /// Who moves the bulk of re-replicated bytes: the service (`Cpu`) or the switch.
    pub copy_engine: crate::rereplication::CopyEngine,
}

impl ServerConfig {
    /// A service on 127.0.0.1 with an ephemeral port, default settings, the system
    /// clock and no token.
    pub fn local(store: StoreConfig) -> ServerConfig {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            store,
            token: None,
            catalog: CatalogConfig::default(),
            sweep_interval: Duration::from_millis(250),
            clock: Arc::new(SystemClock),
            accelerator: None,
            accelerator_data: None,
            scrubber: Arc::new(MemnodeScrubber::default()),
            tls: None,
            stats_history: HistoryConfig::default(),
            rereplication: RereplicationConfig::default(),
            grants: None,
            memnode_token: None,
            copy_engine: Default::default(),
        }
    }
}

/// Why the service could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The state could not be opened or loaded.
    #[error("cannot load the catalog: {0}")]
    Store(#[from] StoreError),
    /// A setting is invalid or the stored state is inconsistent.
    #[error("{0}")]
    Catalog(String),
    /// The listener could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// Address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The runtime or thread could not be started.
    #[error("cannot start {what}: {source}")]
    Runtime {
        /// What.
        what: &'static str,
        /// Why.
        source: std::io::Error,
    },
}

impl From<CatalogError> for StartError {
    fn from(e: CatalogError) -> StartError {
        match e {
            CatalogError::Store(s) => StartError::Store(s),
            other => StartError::Catalog(other.to_string()),
        }
    }
}

/// Starts the metadata service.
#[derive(Debug)]
pub struct MetadataServer;

impl MetadataServer {
    /// Opens the store, loads the catalog, binds and serves. The handle reports the bound
    /// address and stops the service on [`ServerHandle::shutdown`] or drop.
    pub fn start(config: ServerConfig) -> Result<ServerHandle, StartError> {
        let store: Box<dyn MetaStore> = match &config.store {
            StoreConfig::Sled(dir) => {
                std::fs::create_dir_all(dir).map_err(|e| {
                    StoreError::Engine(format!("cannot create {}: {e}", dir.display()))
                })?;
                Box::new(SledStore::open(dir)?)
            }
            StoreConfig::Memory(m) => Box::new(m.clone()),
        };
        config
            .stats_history
            .validate()
            .map_err(StartError::Catalog)?;
        let mut catalog = Catalog::open(store, config.catalog.clone(), config.clock.now_ms())?;
        catalog.set_scrubber(config.scrubber.clone());
        let listener = Listener::bind(config.listen)
            .map_err(|source| StartError::Bind {
                addr: config.listen,
                source,
            })?
            .with_tls(config.tls.clone());
        let shared = Arc::new(Shared {
            catalog: Mutex::new(catalog),
            clock: config.clock.clone(),
            token: config.token.clone(),
            metrics: RequestMetrics::default(),
            started: Instant::now(),
            cluster: crate::cluster::ClusterView::new(config.accelerator.clone()),
            accelerator_data: config.accelerator_data.clone(),
            history: StatsHistory::new(config.stats_history),
            url: self_url(listener.addr()),
            key_lookup: Default::default(),
            rereplication: Arc::default(),
            grants: config.grants.clone(),
            copier_fails_over: Default::default(),
            copy_engine: Mutex::new(config.copy_engine.clone()),
        });
        let s2 = shared.clone();
        let sweep = config.sweep_interval;
        let http = HttpServer::spawn_with(
            "metadata-http",
            listener,
            http::router(shared.clone()),
            DRAIN,
            move |stop| async move {
                tokio::join!(
                    sweep_leases(s2.clone(), sweep, stop.clone()),
                    sample_stats(s2, stop)
                );
            },
        )
        .map_err(|SpawnError { what, source }| StartError::Runtime { what, source })?;
        let copier = crate::rereplication::start(
            shared.clone(),
            config.rereplication,
            Box::new(VerbsMemory::with_token(config.memnode_token.clone())),
            Box::new(VerbsMemory::with_token(config.memnode_token.clone())),
            config.memnode_token.clone(),
        )
        .map_err(|source| StartError::Runtime {
            what: "the re-replication thread",
            source,
        })?;
        Ok(ServerHandle {
            addr: http.addr(),
            url: http.url(),
            shared: Some(shared),
            http: Some(http),
            copier,
        })
    }
}

/// Sweeps expired leases every `interval` until the server stops.
async fn sweep_leases(shared: Arc<Shared>, interval: Duration, mut stop: Stop) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.requested() => return,
        }
        let s = shared.clone();
        match tokio::task::spawn_blocking(move || s.sweep()).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "lease sweep failed"),
            Err(e) => tracing::error!(error = %e, "lease sweep panicked"),
        }
    }
}

/// The URL the service reaches itself at: its address, loopback for an unspecified one.
fn self_url(addr: SocketAddr) -> String {
    let ip = match addr.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => std::net::Ipv4Addr::LOCALHOST.into(),
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => std::net::Ipv6Addr::LOCALHOST.into(),
        ip => ip,
    };
    format!("http://{}", SocketAddr::new(ip, addr.port()))
}

/// Takes the cluster stats every history interval and keeps their summary, until the
/// server stops (nothing when no history is kept).
async fn sample_stats(shared: Arc<Shared>, mut stop: Stop) {
    let config = shared.history.config();
    if !config.enabled() {
        return;
    }
    let mut tick = tokio::time::interval(config.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.requested() => return,
        }
        let s = shared.clone();
        match tokio::task::spawn_blocking(move || s.cluster_stats()).await {
            Ok(stats) => shared.history.record(HistorySample::of(&stats)),
            Err(e) => tracing::error!(error = %e, "sampling the cluster stats panicked"),
        }
    }
}

/// A running metadata service.
#[derive(Debug)]
pub struct ServerHandle {
    addr: SocketAddr,
    url: String,
    shared: Option<Arc<Shared>>,
    http: Option<HttpServer>,
    copier: Option<Rereplicator>,
}

impl ServerHandle {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL, `http://ip:port` (`https://` when serving TLS).
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// The shared state (catalog, clock, counters) for in-process inspection.
    pub fn shared(&self) -> &Shared {
        self.shared.as_ref().expect("running")
    }

    /// Runs one lease sweep now (what the background task does every interval);
    /// returns how many leases were reclaimed.
    pub fn sweep(&self) -> Result<usize, CatalogError> {
        self.shared().sweep()
    }

    /// Stops serving (finishing requests in flight), flushes and closes the store.
    pub fn shutdown(mut self) {
        self.stop_all();
    }

    fn stop_all(&mut self) {
        if let Some(copier) = self.copier.take() {
            copier.stop();
        }
        if let Some(http) = self.http.take() {
            http.stop();
        }
        if let Some(shared) = self.shared.take() {
            let flushed = shared.with(|c, _| c.flush());
            if let Err(e) = flushed {
                tracing::error!(error = %e, "flushing the store failed");
            }
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.stop_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_reaches_itself_over_loopback_when_it_listens_everywhere() {
        let url = |a: &str| self_url(a.parse().unwrap());
        assert_eq!(url("0.0.0.0:9700"), "http://127.0.0.1:9700");
        assert_eq!(url("[::]:9700"), "http://[::1]:9700");
        assert_eq!(url("10.0.0.5:9700"), "http://10.0.0.5:9700");
    }
}
