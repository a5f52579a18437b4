//! A whole memory node: memory, data plane thread and admin HTTP server, started together
//! and stopped together. Used by the binary, by tests and by embedded clusters.

use std::net::{SocketAddr, SocketAddrV4, TcpListener};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use verbs::net::BatchSocket;

use crate::admin::{self, AdminState};
use crate::api::{NodeInfo, RegionDescriptor};
use crate::config::{ConfigError, MemnodeConfig};
use crate::dataplane::{DataPlane, DataPlaneShared};
use crate::memory::{MemoryError, NodeMemory};
use crate::metrics::{Metrics, MetricsSnapshot};
use crate::qps::QpTable;

/// How long a shutdown waits for admin requests in flight before closing them.
const ADMIN_DRAIN: Duration = Duration::from_secs(5);

/// Why a memory node could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configuration is invalid.
    #[error("invalid configuration: {0}")]
    Config(#[from] ConfigError),
    /// The memory could not be set up.
    #[error(transparent)]
    Memory(#[from] MemoryError),
    /// The soft-RoCE UDP socket could not be bound.
    #[error("cannot bind the soft-RoCE UDP socket on {addr}: {source}{hint}", hint = bind_hint(source))]
    BindData {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The admin TCP listener could not be bound.
    #[error("cannot bind the admin HTTP listener on {addr}: {source}{hint}", hint = bind_hint(source))]
    BindAdmin {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// A thread or the async runtime could not be started.
    #[error("cannot start {what}: {source}")]
    Runtime {
        /// What was being started.
        what: &'static str,
        /// Why.
        source: std::io::Error,
    },
}

fn bind_hint(e: &std::io::Error) -> &'static str {
    match e.kind() {
        std::io::ErrorKind::AddrInUse => " (is another memnode or program using this port?)",
        std::io::ErrorKind::AddrNotAvailable => " (this host has no such address)",
        std::io::ErrorKind::PermissionDenied => " (ports below 1024 need privileges)",
        _ => "",
    }
}

/// Starts memory nodes.
#[derive(Debug)]
pub struct Memnode;

impl Memnode {
    /// Allocates the memory, binds both sockets and starts serving. The returned handle
    /// reports the bound addresses (so port 0 works) and stops the node on
    /// [`MemnodeHandle::shutdown`] or when dropped.
    pub fn start(config: MemnodeConfig) -> Result<MemnodeHandle, StartError> {
        config.validate()?;
        let listen = match config.listen {
            SocketAddr::V4(a) => a,
            SocketAddr::V6(_) => {
                return Err(StartError::Config(ConfigError::Invalid(format!(
                    "listen address {} is not IPv4",
                    config.listen
                ))));
            }
        };
        let memory = NodeMemory::allocate(&config)?;
        let mut socket = BatchSocket::bind(listen).map_err(|source| StartError::BindData {
            addr: config.listen,
            source,
        })?;
        socket.set_carries_roce(true);
        let admin_listener =
            TcpListener::bind(config.admin).map_err(|source| StartError::BindAdmin {
                addr: config.admin,
                source,
            })?;
        let admin_addr = admin_listener
            .local_addr()
            .map_err(|source| StartError::BindAdmin {
                addr: config.admin,
                source,
            })?;
        admin_listener
            .set_nonblocking(true)
            .map_err(|source| StartError::BindAdmin {
                addr: config.admin,
                source,
            })?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|source| StartError::Runtime {
                what: "the admin runtime",
                source,
            })?;

        let metrics = Arc::new(Metrics::new());
        metrics.set_memory(memory.capacity(), memory.table.regions().len());
        let qps = Arc::new(QpTable::new(config.max_qps));
        let dataplane = DataPlane::spawn(
            socket,
            DataPlaneShared {
                qps: qps.clone(),
                memory: memory.table.clone(),
                metrics: metrics.clone(),
            },
        )
        .map_err(|source| StartError::Runtime {
            what: "the data plane thread",
            source,
        })?;
        let data_addr = dataplane.local_addr();

        let state = AdminState {
            qps: qps.clone(),
            metrics: metrics.clone(),
            memory: memory.clone(),
            listen: data_addr,
            started: Instant::now(),
            dataplane_running: dataplane.running_flag(),
            dataplane_panics: dataplane.panic_count(),
        };
        let app = admin::router(state.clone());
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let admin_thread = std::thread::Builder::new()
            .name("memnode-admin".into())
            .spawn(move || serve_admin(runtime, admin_listener, app, stop_rx))
            .map_err(|source| StartError::Runtime {
                what: "the admin thread",
                source,
            })?;

        Ok(MemnodeHandle {
            data_addr,
            admin_addr,
            state,
            dataplane: Some(dataplane),
            stop: Some(stop_tx),
            admin_thread: Some(admin_thread),
        })
    }
}

fn serve_admin(
    runtime: tokio::runtime::Runtime,
    listener: TcpListener,
    app: axum::Router,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    runtime.block_on(async move {
        let listener = match tokio::net::TcpListener::from_std(listener) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(error = %e, "cannot serve the admin listener");
                return;
            }
        };
        let mut graceful = stop.clone();
        let mut deadline = stop;
        let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
            let _ = graceful.wait_for(|v| *v).await;
        });
        tokio::select! {
            r = serve => {
                if let Err(e) = r {
                    tracing::error!(error = %e, "admin server failed");
                }
            }
            _ = async move {
                let _ = deadline.wait_for(|v| *v).await;
                tokio::time::sleep(ADMIN_DRAIN).await;
            } => {
                tracing::warn!("admin connections still open after {ADMIN_DRAIN:?}; closing them");
            }
        }
    });
}

/// A running memory node.
#[derive(Debug)]
pub struct MemnodeHandle {
    data_addr: SocketAddrV4,
    admin_addr: SocketAddr,
    state: AdminState,
    dataplane: Option<DataPlane>,
    stop: Option<tokio::sync::watch::Sender<bool>>,
    admin_thread: Option<JoinHandle<()>>,
}

impl MemnodeHandle {
    /// The bound soft-RoCE UDP address.
    pub fn data_addr(&self) -> SocketAddrV4 {
        self.data_addr
    }

    /// The bound admin HTTP address.
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin_addr
    }

    /// The admin base URL, `http://ip:port`.
    pub fn admin_url(&self) -> String {
        format!("http://{}", self.admin_addr)
    }

    /// The node's memory (for in-process inspection).
    pub fn memory(&self) -> &NodeMemory {
        &self.state.memory
    }

    /// The registered regions.
    pub fn regions(&self) -> Vec<RegionDescriptor> {
        self.state.memory.descriptors()
    }

    /// The queue pairs.
    pub fn qps(&self) -> &QpTable {
        &self.state.qps
    }

    /// A copy of the counters.
    pub fn metrics(&self) -> MetricsSnapshot {
        self.state.metrics.snapshot()
    }

    /// What `GET /v1/node` answers.
    pub fn node_info(&self) -> NodeInfo {
        admin::node_info(&self.state)
    }

    /// Whether the data plane thread is serving.
    pub fn is_running(&self) -> bool {
        self.dataplane.as_ref().is_some_and(DataPlane::is_running)
    }

    /// Stops the admin server (finishing requests in flight) and the data plane.
    pub fn shutdown(mut self) {
        self.stop_all();
    }

    fn stop_all(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(true);
        }
        if let Some(t) = self.admin_thread.take()
            && t.join().is_err()
        {
            tracing::error!("the admin thread panicked");
        }
        if let Some(dp) = self.dataplane.take() {
            dp.shutdown();
        }
    }
}

impl Drop for MemnodeHandle {
    fn drop(&mut self) {
        self.stop_all();
    }
}
