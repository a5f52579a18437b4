//! A whole memory node: memory, data plane thread and admin HTTP server, started together
//! and stopped together. Used by the binary, by tests and by embedded clusters.

use std::net::{SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use dmkv_service::{HttpServer, Listener, SpawnError};
use verbs::mem::ScopeViolations;
use verbs::net::{BatchSocket, PacketSocket, discard_incoming, interface_of};

use crate::admin::{self, AdminState};
use crate::api::{NodeInfo, RegionDescriptor};
use crate::config::{ConfigError, MemnodeConfig};
use crate::dataplane::{DataPlane, DataPlaneShared, RpcLink};
use crate::memory::{MemoryError, NodeMemory};
use crate::metrics::{Metrics, MetricsSnapshot};
use crate::qp_reclaim::IdleReclaimer;
use crate::qps::QpTable;
use crate::rdma_serving::{RdmaServeConfig, RdmaServing};
use crate::receive_path::ReceivePath;
use crate::rpc::pool::PoolShared;
use crate::rpc::rings::RequestRings;
use crate::rpc::{ReadyQps, RpcPool, RpcStats, RpcStatsSnapshot};

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
    /// `--transport rdma`: the RDMA device cannot be used (the message names it and
    /// the `udp` transport), or this build has no `rdma` feature.
    #[error("cannot serve RDMA: {0}")]
    Rdma(String),
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

/// The packet socket of the packet receive path, on the interface of the UDP socket's
/// address; the UDP socket then discards what it receives (it stays bound to send and
/// so that the port is taken).
fn open_packet_path(socket: &BatchSocket) -> Result<PacketSocket, StartError> {
    let local = socket.local_addr();
    let fail = |source: std::io::Error| StartError::BindData {
        addr: SocketAddr::V4(local),
        source: std::io::Error::new(
            source.kind(),
            format!(
                "opening the packet receive path: {source}{}",
                if source.kind() == std::io::ErrorKind::PermissionDenied {
                    " (it needs CAP_NET_RAW; --receive udp needs no privileges)"
                } else {
                    ""
                }
            ),
        ),
    };
    let interface = interface_of(*local.ip()).map_err(fail)?;
    let packets = PacketSocket::bind(interface.as_deref(), local.port()).map_err(fail)?;
    discard_incoming(socket).map_err(fail)?;
    tracing::info!(
        interface = packets.interface(),
        port = local.port(),
        "requests are read as whole frames; ICRCs are checked against the headers sent"
    );
    Ok(packets)
}

/// The NIC serving path `config` asks for, if any.
#[cfg(feature = "rdma")]
fn open_rdma(
    config: Option<&RdmaServeConfig>,
    memory: &NodeMemory,
    max_qps: usize,
) -> Result<Option<Arc<dyn RdmaServing>>, StartError> {
    let Some(config) = config else {
        return Ok(None);
    };
    let path =
        crate::rdma_path::RdmaPath::open(config, memory, max_qps).map_err(StartError::Rdma)?;
    tracing::info!(
        device = %config.device,
        ib_port = config.ib_port,
        gid_index = path.gid_index(),
        rkey = format_args!("{:#010x}", path.region_rkey()),
        "region registered with the RDMA device; RDMA queue pairs at POST /v1/rdma/qps"
    );
    Ok(Some(path))
}

/// Without the `rdma` feature, `--transport rdma` is refused with what to do instead.
#[cfg(not(feature = "rdma"))]
fn open_rdma(
    config: Option<&RdmaServeConfig>,
    _memory: &NodeMemory,
    _max_qps: usize,
) -> Result<Option<Arc<dyn RdmaServing>>, StartError> {
    match config {
        None => Ok(None),
        Some(c) => Err(StartError::Rdma(crate::rdma_serving::not_built(&c.device))),
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
        let mut socket = BatchSocket::bind_with(listen, config.udp_offload).map_err(|source| {
            StartError::BindData {
                addr: config.listen,
                source,
            }
        })?;
        socket.set_carries_roce(true);
        let packets = match config.receive {
            ReceivePath::Udp => None,
            ReceivePath::Packet => Some(open_packet_path(&socket)?),
        };
        let admin_listener = Listener::bind(config.admin)
            .map_err(|source| StartError::BindAdmin {
                addr: config.admin,
                source,
            })?
            .with_tls(config.tls.clone());

        let rdma = open_rdma(config.rdma.as_ref(), &memory, config.max_qps)?;
        let metrics = Arc::new(Metrics::new());
        metrics.set_memory(memory.capacity(), memory.table.regions().len());
        let rings = match memory.descriptors().first() {
            Some(region) if config.rpc_workers > 0 && config.rpc_rings > 0 => Some(Arc::new(
                RequestRings::new(config.rpc_rings, region)
                    .map_err(|e| StartError::Config(ConfigError::Invalid(e.to_string())))?,
            )),
            _ => None,
        };
        let qps = Arc::new(
            QpTable::new(config.max_qps)
                .with_response_port(config.response_port)
                .with_idle_timeout(config.qp_idle_timeout)
                .with_rpc(config.rpc_workers > 0)
                .with_rings(rings)
                // Requests read from a packet socket see a coalesced run as one frame.
                .with_coalescing(socket.coalesces() && config.receive == ReceivePath::Udp),
        );
        let socket = Arc::new(socket);
        let rpc_stats = Arc::new(RpcStats::default());
        let rpc_crash = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let rpc_link = (config.rpc_workers > 0).then(|| RpcLink {
            ready: Arc::new(ReadyQps::default()),
            stats: rpc_stats.clone(),
        });
        let rpc_pool = match &rpc_link {
            Some(link) => Some(
                RpcPool::spawn(
                    config.rpc_workers,
                    PoolShared {
                        qps: qps.clone(),
                        memory: memory.table.clone(),
                        socket: socket.clone(),
                        ready: link.ready.clone(),
                        stats: rpc_stats.clone(),
                        metrics: metrics.clone(),
                        crash: rpc_crash.clone(),
                    },
                )
                .map_err(|source| StartError::Runtime {
                    what: "the RPC worker threads",
                    source,
                })?,
            ),
            None => None,
        };
        let dataplane = DataPlane::spawn(
            socket,
            packets,
            DataPlaneShared {
                qps: qps.clone(),
                memory: memory.table.clone(),
                metrics: metrics.clone(),
                rpc: rpc_link,
            },
        )
        .map_err(|source| StartError::Runtime {
            what: "the data plane thread",
            source,
        })?;
        let data_addr = dataplane.local_addr();
        let reclaimer = IdleReclaimer::spawn(qps.clone(), metrics.clone()).map_err(|source| {
            StartError::Runtime {
                what: "the queue-pair reclaim thread",
                source,
            }
        })?;

        let state = AdminState {
            qps: qps.clone(),
            metrics: metrics.clone(),
            memory: memory.clone(),
            listen: data_addr,
            started: Instant::now(),
            dataplane_running: dataplane.running_flag(),
            dataplane_panics: dataplane.panic_count(),
            auth: Arc::new(config.auth.clone()),
            node_id: Arc::new(AtomicU64::new(0)),
            violations: Arc::new(ScopeViolations::default()),
            rpc: (config.rpc_workers > 0).then(|| rpc_stats.clone()),
            rdma,
        };
        let admin = HttpServer::spawn(
            "memnode-admin",
            admin_listener,
            admin::router(state.clone()),
            ADMIN_DRAIN,
        )
        .map_err(|SpawnError { what, source }| StartError::Runtime { what, source })?;

        Ok(MemnodeHandle {
            data_addr,
            admin_addr: admin.addr(),
            admin_url: admin.url(),
            state,
            dataplane: Some(dataplane),
            admin: Some(admin),
            reclaimer,
            rpc_pool,
            rpc_stats,
            rpc_crash,
        })
    }
}

/// A running memory node.
#[derive(Debug)]
pub struct MemnodeHandle {
    data_addr: SocketAddrV4,
    admin_addr: SocketAddr,
    admin_url: String,
    state: AdminState,
    dataplane: Option<DataPlane>,
    admin: Option<HttpServer>,
    reclaimer: Option<IdleReclaimer>,
    rpc_pool: Option<RpcPool>,
    rpc_stats: Arc<RpcStats>,
    rpc_crash: Arc<std::sync::atomic::AtomicBool>,
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

    /// The admin base URL, `http://ip:port` (`https://` when it serves TLS): what the
    /// node registers with the metadata service.
    pub fn admin_url(&self) -> String {
        self.admin_url.clone()
    }

    /// The node's memory (for in-process inspection).
    pub fn memory(&self) -> &NodeMemory {
        &self.state.memory
    }

    /// The registered regions.
    pub fn regions(&self) -> Vec<RegionDescriptor> {
        self.state.memory.descriptors()
    }

    /// Where the node keeps the id the metadata service gave it (0 while unregistered):
    /// grants name the node by it, so grants are refused until it is set. A registrar
    /// stores it here ([`crate::registrar::HttpRegistrar::with_id_sink`]).
    pub fn memnode_id_sink(&self) -> Arc<AtomicU64> {
        self.state.node_id.clone()
    }

    /// Sets the id the metadata service gave the node.
    pub fn set_memnode_id(&self, id: u64) {
        self.state.node_id.store(id, Ordering::Release);
    }

    /// Requests of scoped queue pairs refused so far, by reason.
    pub fn access_violations(&self) -> &ScopeViolations {
        &self.state.violations
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

    /// The RPC counters (all zero on a passive node).
    pub fn rpc_stats(&self) -> RpcStatsSnapshot {
        self.rpc_stats.snapshot()
    }

    /// RPC worker threads running (0: passive).
    pub fn rpc_workers(&self) -> usize {
        self.rpc_pool.as_ref().map_or(0, RpcPool::workers)
    }

    /// Stops the RPC workers (each finishes the request it executes; requests still
    /// queued stay unanswered), as when the workers die: the data plane keeps serving
    /// one-sided verbs and acknowledging SENDs. For tests of what clients see.
    pub fn stop_rpc_workers(&mut self) {
        if let Some(pool) = self.rpc_pool.take() {
            pool.shutdown();
        }
    }

    /// A test hook: the next RPC index write that changes a slot stops right after
    /// that change, and the worker executing it exits without replying (as a worker
    /// that dies in the middle of a request). The other workers go on.
    pub fn crash_next_rpc_write(&self) {
        self.rpc_crash
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether the hook of [`MemnodeHandle::crash_next_rpc_write`] is still armed
    /// (no index write has changed a slot since).
    pub fn rpc_crash_armed(&self) -> bool {
        self.rpc_crash.load(std::sync::atomic::Ordering::SeqCst)
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
        if let Some(mut r) = self.reclaimer.take() {
            r.stop();
        }
        if let Some(admin) = self.admin.take() {
            admin.stop();
        }
        if let Some(pool) = self.rpc_pool.take() {
            pool.shutdown();
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
