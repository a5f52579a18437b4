//! Starting and stopping the service: store, catalog, HTTP server and the lease sweeper,
//! on their own thread. Used by the binary and by in-process tests.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dmkv_service::{HttpServer, Listener, SpawnError, Stop};

use crate::catalog::{Catalog, CatalogConfig, CatalogError};
use crate::clock::{Clock, SystemClock};
use crate::grant_issuer::GrantIssuer;
use crate::http::{self, Shared};
use crate::metrics::RequestMetrics;
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
    /// Signs grants for clients (`None`: none are issued; memory nodes then run
    /// without grants).
    pub grants: Option<GrantIssuer>,
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
            grants: None,
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
        let mut catalog = Catalog::open(store, config.catalog.clone(), config.clock.now_ms())?;
        catalog.set_scrubber(config.scrubber.clone());
        let listener = Listener::bind(config.listen).map_err(|source| StartError::Bind {
            addr: config.listen,
            source,
        })?;
        let shared = Arc::new(Shared {
            catalog: Mutex::new(catalog),
            clock: config.clock.clone(),
            token: config.token.clone(),
            metrics: RequestMetrics::default(),
            started: Instant::now(),
            cluster: crate::cluster::ClusterView::new(config.accelerator.clone()),
            accelerator_data: config.accelerator_data.clone(),
            grants: config.grants.clone(),
        });
        let s2 = shared.clone();
        let sweep = config.sweep_interval;
        let http = HttpServer::spawn_with(
            "metadata-http",
            listener,
            http::router(shared.clone()),
            DRAIN,
            move |stop| sweep_leases(s2, sweep, stop),
        )
        .map_err(|SpawnError { what, source }| StartError::Runtime { what, source })?;
        Ok(ServerHandle {
            addr: http.addr(),
            shared: Some(shared),
            http: Some(http),
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

/// A running metadata service.
#[derive(Debug)]
pub struct ServerHandle {
    addr: SocketAddr,
    shared: Option<Arc<Shared>>,
    http: Option<HttpServer>,
}

impl ServerHandle {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL, `http://ip:port`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
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
