//! `memnode`: the dmkv memory node binary.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use dmkv_api::grant::GrantKey;
use dmkv_service::secrets::read_secret;
use dmkv_service::{Signals, TlsArgs};
use memnode::auth::AdminAuth;
use memnode::config::{self, DEFAULT_ADMIN, DEFAULT_LISTEN, MemnodeConfig, format_size};
use memnode::rdma_serving::{RdmaServeConfig, ServeTransport};
use memnode::registrar::{HttpRegistrar, LogRegistrar, Registrar};
use memnode::{Memnode, MemnodeHandle};
use verbs::mem::ReadOrder;

/// dmkv memory node: serves registered memory to one-sided RDMA verbs (READ, WRITE, CAS,
/// FAA) over soft RoCE (RoCEv2 on UDP), with an admin HTTP API for health, Prometheus
/// metrics, regions and queue-pair setup.
#[derive(Debug, Parser)]
#[command(name = "memnode", version, about, long_about = None)]
#[command(after_help = "\
With --metadata, the node registers with the metadata service, heartbeats every second
(retrying with backoff while the service is unreachable) and deregisters on shutdown
unless table data lives on it (then it keeps its id and rejoins under it).
With --region-file, the memory survives restarts: the node comes back with the same
rkey, base VA and region instance, and the metadata service keeps its tables.
Admin API: GET /healthz, GET /metrics, GET /v1/node, GET /v1/regions, GET /v1/qps,
POST /v1/qps, GET /v1/qps/{qpn}, POST /v1/qps/{qpn}/grant, DELETE /v1/qps/{qpn};
with --transport rdma also GET/POST /v1/rdma/qps, DELETE /v1/rdma/qps/{qpn}.
Every route but /healthz and /metrics needs `Authorization: Bearer <admin token or
grant>`: the admin token from --admin-token-file or $DMKV_MEMNODE_ADMIN_TOKEN (the node
refuses to start without one unless --insecure-no-auth), grants verified with the key
from --grant-key-file or $DMKV_GRANT_KEY (default: derived from the admin token).
Logging: RUST_LOG (default info), --log-format human|json; spans are exported over
OTLP/gRPC when OTEL_EXPORTER_OTLP_ENDPOINT is set. Stops gracefully on SIGTERM or SIGINT.")]
struct Cli {
    /// Soft-RoCE UDP listen address (IPv4). Use an explicit address (e.g. 127.0.0.2:4791)
    /// to run several memory nodes on one host.
    #[arg(long, env = "DMKV_MEMNODE_LISTEN", default_value = DEFAULT_LISTEN, value_name = "ADDR")]
    listen: SocketAddr,

    /// Data-plane transports: udp (soft RoCE only) or rdma (an RDMA NIC serves the
    /// region too, with --rdma-device; the soft-RoCE listener keeps running beside it;
    /// needs a build with the `rdma` cargo feature).
    #[arg(
        long,
        env = "DMKV_MEMNODE_TRANSPORT",
        default_value = "udp",
        value_name = "TRANSPORT"
    )]
    transport: memnode::rdma_serving::ServeTransport,

    /// The RDMA device to serve from with --transport rdma (e.g. mlx5_0, rxe0; see
    /// `ibv_devices` or `rdma link`).
    #[arg(long, env = "DMKV_MEMNODE_RDMA_DEVICE", value_name = "NAME")]
    rdma_device: Option<String>,

    /// The GID table index RDMA packets are sourced from (default: the first RoCE v2
    /// GID holding an IPv4-mapped address; see `show_gids`).
    #[arg(long, env = "DMKV_MEMNODE_GID_INDEX", value_name = "N")]
    gid_index: Option<u8>,

    /// The RDMA device's physical port (numbered from 1).
    #[arg(
        long,
        env = "DMKV_MEMNODE_IB_PORT",
        default_value_t = 1,
        value_name = "N"
    )]
    ib_port: u8,

    /// Admin HTTP listen address.
    #[arg(long, env = "DMKV_MEMNODE_ADMIN", default_value = DEFAULT_ADMIN, value_name = "ADDR")]
    admin: SocketAddr,

    /// Memory to serve: bytes, or with a unit: 512k, 64MiB, 1GiB (powers of 1024),
    /// 100MB (powers of 1000).
    #[arg(long, env = "DMKV_MEMNODE_CAPACITY", default_value = "64MiB", value_name = "SIZE",
          value_parser = config::parse_size)]
    capacity: u64,

    /// Keep the memory in a shared-memory file at PATH (e.g. /dev/shm/dmkv-0), so clients
    /// on this host can use the `shm` transport. An existing file is replaced.
    #[arg(
        long,
        env = "DMKV_MEMNODE_SHM",
        value_name = "PATH",
        conflicts_with = "hugepages"
    )]
    shm: Option<PathBuf>,

    /// Keep the memory in the file PATH across restarts (created and sized on first
    /// start, mapped as it is afterwards), with its identity — instance id, rkey,
    /// base VA, length, name — in PATH.meta. A restart on the same file rejoins the
    /// metadata service with the data; a capacity, --name or --base-va that differs
    /// from the recorded one is refused.
    #[arg(
        long,
        env = "DMKV_REGION_FILE",
        value_name = "PATH",
        conflicts_with_all = ["shm", "hugepages"]
    )]
    region_file: Option<PathBuf>,

    /// Destroy a queue pair whose client sent no request for SECS seconds (crashed
    /// clients' queue pairs are reclaimed); 0 = never.
    #[arg(
        long,
        env = "DMKV_MEMNODE_QP_IDLE_TIMEOUT",
        default_value_t = config::DEFAULT_QP_IDLE_TIMEOUT_SECS,
        value_name = "SECS"
    )]
    qp_idle_timeout: u64,

    /// Use 2 MiB huge pages (falls back to normal pages with a warning if none are reserved).
    #[arg(long, env = "DMKV_MEMNODE_HUGEPAGES")]
    hugepages: bool,

    /// Make all of the memory resident at start, as registering it with an RDMA NIC pins
    /// it: requests then take no first-touch page faults (a load into fresh memory runs
    /// faster), and the process holds --capacity bytes from the start.
    #[arg(long, env = "DMKV_MEMNODE_PREFAULT")]
    prefault: bool,

    /// Order in which multi-line READs observe their 64-byte lines: ascending, descending
    /// or random (reproduces torn reads on purpose).
    #[arg(
        long,
        env = "DMKV_MEMNODE_READ_ORDER",
        default_value = "ascending",
        value_name = "ORDER"
    )]
    read_order: ReadOrder,

    /// Where requests are read from: udp (a UDP socket; each ICRC is checked against
    /// the header a Linux UDP socket sends, IP id 0 and DF: interoperates with dmkv's
    /// clients and other UDP-socket senders) or packet (a packet socket on the listen
    /// address's interface that sees every request's real IPv4 header, so senders that
    /// number their datagrams, such as RoCE NICs and scapy, interoperate too; needs
    /// CAP_NET_RAW).
    #[arg(
        long,
        env = "DMKV_MEMNODE_RECEIVE",
        default_value = "udp",
        value_name = "PATH"
    )]
    receive: memnode::ReceivePath,

    /// Where responses go on the client's host: client (back to the UDP port its
    /// requests come from; what dmkv's clients need) or roce (UDP port 4791, as RoCEv2
    /// NICs send both directions, for peers and tools that receive there).
    #[arg(
        long,
        env = "DMKV_MEMNODE_RESPONSE_PORT",
        default_value = "client",
        value_name = "PORT"
    )]
    response_port: memnode::ResponsePort,

    /// UDP segmentation offload of the soft-RoCE socket: auto (on a loopback address,
    /// runs of datagrams to and from clients that coalesce too move as one buffer
    /// through the kernel; elsewhere off), on (every run segmented, coalesced
    /// receives, whatever the address and peer) or off.
    #[arg(
        long,
        env = "DMKV_UDP_OFFLOAD",
        default_value = "auto",
        value_name = "MODE"
    )]
    udp_offload: verbs::net::OffloadMode,

    /// Model the NIC's atomic lock table (atomics whose addresses share their low 12 bits
    /// are serialised).
    #[arg(long, env = "DMKV_MEMNODE_LOCK_TABLE")]
    lock_table: bool,

    /// With the lock-table model, hold each slot this many extra nanoseconds per atomic
    /// (modelled NIC atomic latency). A non-zero value implies --lock-table.
    #[arg(
        long,
        env = "DMKV_MEMNODE_LOCK_TABLE_HOLD_NS",
        default_value_t = 0,
        value_name = "NS"
    )]
    lock_table_hold_ns: u64,

    /// Virtual address of the region's first byte (non-zero, 64-byte aligned).
    #[arg(long, env = "DMKV_MEMNODE_BASE_VA", default_value = "0x100000000000", value_name = "VA",
          value_parser = config::parse_va)]
    base_va: u64,

    /// RPC worker threads executing requests clients SEND (see docs/rpc.md); 0 keeps
    /// the node passive: SENDs are refused with NAK invalid request.
    #[arg(
        long,
        env = "DMKV_MEMNODE_RPC_WORKERS",
        default_value_t = 0,
        value_name = "N"
    )]
    rpc_workers: usize,

    /// Write-based RPC request rings (with --rpc-workers): queue pairs that ask for
    /// one WRITE their requests into it and the workers poll it (see docs/rpc.md);
    /// 0: requests only by SEND.
    #[arg(
        long,
        env = "DMKV_MEMNODE_RPC_RINGS",
        default_value_t = config::DEFAULT_RPC_RINGS,
        value_name = "N"
    )]
    rpc_rings: usize,

    /// Most queue pairs served at once.
    #[arg(long, env = "DMKV_MEMNODE_MAX_QPS", default_value_t = config::DEFAULT_MAX_QPS, value_name = "N")]
    max_qps: usize,

    /// Register with the metadata service at URL (http://host:port or
    /// https://host:port) and heartbeat.
    #[arg(long, env = "DMKV_MEMNODE_METADATA", value_name = "URL")]
    metadata: Option<String>,

    /// File holding the metadata service's root token (or an admin credential) to
    /// register with; else the environment variable DMKV_MEMNODE_METADATA_TOKEN holding
    /// it. No flag takes the token itself: the command line shows in `ps`.
    #[arg(long, env = "DMKV_MEMNODE_METADATA_TOKEN_FILE", value_name = "PATH")]
    metadata_token_file: Option<std::path::PathBuf>,

    /// Name to register under (default: the data address). Re-registrations under the
    /// same name keep the node's id.
    #[arg(long, env = "DMKV_MEMNODE_NAME", value_name = "NAME")]
    name: Option<String>,

    /// Failure domain (rack, zone) to declare when registering: the metadata service
    /// puts the copies of a replicated table's data in distinct zones where it can.
    #[arg(long, env = "DMKV_ZONE", value_name = "NAME")]
    zone: Option<String>,

    /// Read the admin token (which the metadata service and operators present) from
    /// PATH; without it, from $DMKV_MEMNODE_ADMIN_TOKEN. Never given on the command line.
    #[arg(long, env = "DMKV_MEMNODE_ADMIN_TOKEN_FILE", value_name = "PATH")]
    admin_token_file: Option<PathBuf>,

    /// Read the key grants are verified with (shared with the metadata service, at
    /// least 16 bytes) from PATH; without it, from $DMKV_GRANT_KEY; without either, it
    /// is derived from the admin token (HMAC-SHA256 over "dmkv grant key v1").
    #[arg(long, env = "DMKV_GRANT_KEY_FILE", value_name = "PATH")]
    grant_key_file: Option<PathBuf>,

    /// Serve the admin API without authentication (anyone may zero memory, create and
    /// delete queue pairs). Only for isolated test setups.
    #[arg(long, env = "DMKV_MEMNODE_INSECURE_NO_AUTH")]
    insecure_no_auth: bool,

    /// Give queue pairs created with a grant whole-region access under the region's key
    /// instead of scoping them to the grant's windows. Only for measuring what scoping
    /// costs: it removes the isolation between tables.
    #[arg(long, env = "DMKV_MEMNODE_UNSCOPED_GRANTS")]
    unscoped_grants: bool,

    /// Log format on standard error: human or json (one object per line, with spans).
    #[arg(
        long,
        env = "DMKV_LOG_FORMAT",
        default_value = "human",
        value_name = "FORMAT"
    )]
    log_format: telemetry::LogFormat,

    #[command(flatten)]
    tls: TlsArgs,
}

impl Cli {
    /// The admin API's credentials: token and grant key from files or the environment.
    fn auth(&self) -> Result<AdminAuth, String> {
        let token = read_secret(
            "memnode admin token",
            self.admin_token_file.as_deref(),
            "DMKV_MEMNODE_ADMIN_TOKEN",
        )
        .map_err(|e| e.to_string())?;
        let key = read_secret(
            "grant key",
            self.grant_key_file.as_deref(),
            "DMKV_GRANT_KEY",
        )
        .map_err(|e| e.to_string())?
        .map(|k| GrantKey::from_secret(k.as_bytes()))
        .transpose()
        .map_err(|e| format!("grant key: {e}"))?;
        let mut auth = match (token, self.insecure_no_auth) {
            (Some(token), _) => {
                AdminAuth::secured(&token, key).map_err(|e| format!("memnode admin token: {e}"))?
            }
            (None, true) => {
                tracing::warn!(
                    "the admin API is open (--insecure-no-auth): anyone who reaches it can zero memory and take queue pairs"
                );
                AdminAuth {
                    grant_key: key,
                    ..AdminAuth::open()
                }
            }
            (None, false) => {
                return Err("no memnode admin token: give --admin-token-file PATH or set DMKV_MEMNODE_ADMIN_TOKEN (or --insecure-no-auth for an isolated test setup)".into());
            }
        };
        if self.unscoped_grants {
            tracing::warn!(
                "--unscoped-grants: queue pairs created with a grant get whole-region access"
            );
            auth.scoping = false;
        }
        Ok(auth)
    }

    /// The NIC to serve from, if `--transport rdma`.
    fn rdma(&self) -> Result<Option<RdmaServeConfig>, String> {
        match (self.transport, &self.rdma_device) {
            (ServeTransport::Udp, None) => Ok(None),
            (ServeTransport::Udp, Some(_)) => {
                Err("--rdma-device needs --transport rdma (the default transport is udp)".into())
            }
            (ServeTransport::Rdma, None) => Err(
                "--transport rdma needs --rdma-device NAME (e.g. mlx5_0 or rxe0; `ibv_devices` lists them); without a device use --transport udp".into(),
            ),
            (ServeTransport::Rdma, Some(device)) => Ok(Some(RdmaServeConfig {
                device: device.clone(),
                gid_index: self.gid_index,
                ib_port: self.ib_port,
            })),
        }
    }

    fn config(&self, auth: AdminAuth) -> MemnodeConfig {
        let lock_table = self.lock_table || self.lock_table_hold_ns > 0;
        MemnodeConfig {
            listen: self.listen,
            admin: self.admin,
            capacity: self.capacity,
            shm: self.shm.clone(),
            hugepages: self.hugepages,
            prefault: self.prefault,
            read_order: self.read_order,
            receive: self.receive,
            response_port: self.response_port,
            udp_offload: self.udp_offload,
            lock_table_hold: lock_table.then(|| Duration::from_nanos(self.lock_table_hold_ns)),
            base_va: self.base_va,
            max_qps: self.max_qps,
            region_file: self.region_file.clone(),
            name: self.name.clone(),
            qp_idle_timeout: (self.qp_idle_timeout > 0)
                .then(|| Duration::from_secs(self.qp_idle_timeout)),
            tls: None,
            auth,
            rpc_workers: self.rpc_workers,
            rpc_rings: self.rpc_rings,
            rdma: None,
        }
    }
}

fn log_started(node: &MemnodeHandle) {
    tracing::info!(
        data = %node.data_addr(),
        admin = %node.admin_url(),
        coalescing = node.qps().coalescing(),
        "memnode serving soft RoCE"
    );
    let memory = node.memory();
    if memory.instance != 0 {
        tracing::info!(
            instance = format_args!("{:#018x}", memory.instance),
            reopened = memory.reopened,
            "{}",
            if memory.reopened {
                "region file reopened with its data"
            } else {
                "region file created"
            }
        );
    }
    if memory.hugepage_fallback {
        tracing::warn!("running on normal pages: huge pages were requested but unavailable");
    }
    for r in node.regions() {
        tracing::info!(
            rkey = format_args!("{:#010x}", r.rkey),
            base_va = format_args!("{:#x}", r.base_va),
            size = %format_size(r.len),
            backing = %r.backing,
            path = r.path.as_deref().unwrap_or("-"),
            read_order = %r.read_order,
            "region registered"
        );
    }
}

fn run(cli: Cli) -> Result<(), String> {
    let auth = cli.auth()?;
    let mut config = cli.config(auth);
    config.rdma = cli.rdma()?;
    config.tls = cli.tls.server_tls().map_err(|e| format!("TLS: {e}"))?;
    dmkv_api::tls::set_default_ca_file(cli.tls.tls_ca_file.as_deref())
        .map_err(|e| format!("TLS: {e}"))?;
    let token = match &cli.metadata_token_file {
        Some(path) => Some(dmkv_api::secret_file::read_secret_file(path)?),
        None => dmkv_api::secret_file::secret_from_env("DMKV_MEMNODE_METADATA_TOKEN"),
    };
    let http = match &cli.metadata {
        Some(url) => Some(
            HttpRegistrar::new(url, token, cli.name.clone())
                .map_err(|e| e.to_string())?
                .with_zone(cli.zone.clone()),
        ),
        None => None,
    };
    let node = Memnode::start(config).map_err(|e| e.to_string())?;
    let registrar: Box<dyn Registrar> = match http {
        Some(r) => Box::new(r.with_id_sink(node.memnode_id_sink())),
        None => Box::new(LogRegistrar),
    };
    let signals = Signals::install().map_err(|e| format!("cannot wait for signals: {e}"))?;
    log_started(&node);
    let info = node.node_info();
    registrar
        .register(&info, &node.admin_url())
        .map_err(|e| e.to_string())?;
    let signal = signals.wait();
    tracing::info!(signal, "shutting down");
    if let Err(e) = registrar.deregister(&node.node_info(), &node.admin_url()) {
        tracing::warn!(error = %e, "deregistration failed");
    }
    node.shutdown();
    tracing::info!("stopped");
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let _telemetry = telemetry::init_instance("memnode", cli.log_format, cli.name.as_deref());
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("memnode: error: {e}");
            ExitCode::FAILURE
        }
    }
}
