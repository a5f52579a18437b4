//! The soft switch: the pipeline model run as a UDP middlebox between clients and
//! memnodes.
//!
//! Two UDP sockets play the two switch ports: the client side (port 0; clients send
//! their requests here, for every memnode) and the memnode side (port 1; requests leave
//! from here and responses come back here). One thread serves both
//! ([`crate::data_plane`]): each received datagram is wrapped in the Ethernet/IPv4/UDP
//! frame Linux put on the wire (source: the sender; destination: the receiving socket),
//! run through the pipeline, and every frame the pipeline emits is sent from the socket
//! of its egress port to the frame's destination. The pipeline
//! rewrites the addressing and recomputes the ICRC for it — what a switch rewriting
//! headers in flight must do, since the ICRC covers the IP addresses and UDP ports.

use std::net::{SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use dmkv_service::{HttpServer, Listener};
use verbs::net::BatchSocket;

use crate::admin;
use crate::auth::SwitchAuth;
use crate::control::{Control, ControlError, ControlState};
use crate::data_plane::{DataPlane, DataPlaneParts};
use crate::io_stats::IoStats;
use crate::latch_lease::{DEFAULT_LATCH_LEASE, LatchLease};
use crate::model::Counters;
use crate::pipeline::Pipeline;

/// How long the data plane busy-polls for the next datagram before sleeping in the
/// kernel, unless configured otherwise ([`SwitchConfig::busy_poll`]).
pub const DEFAULT_BUSY_POLL: Duration = Duration::from_micros(50);
/// How often expired grants' windows are dropped.
const GRANT_EXPIRY_STEP: Duration = Duration::from_millis(200);

/// How to run a soft switch.
#[derive(Debug, Clone)]
pub struct SwitchConfig {
    /// Client-side UDP address (a specific IPv4 address: the ICRC covers it).
    pub client_side: SocketAddrV4,
    /// Memnode-side UDP address.
    pub memnode_side: SocketAddrV4,
    /// Admin HTTP address.
    pub admin: SocketAddr,
    /// Where routes and settings persist across restarts.
    pub state_file: Option<PathBuf>,
    /// Settings used when there is no state file yet.
    pub initial: ControlState,
    /// How long a tuple may stay latched by one holder before the control plane
    /// releases it (switch-assisted optimistic latching); zero: never
    /// ([`crate::latch_lease`]).
    pub latch_lease: Duration,
    /// Serve the admin API over HTTPS only with this certificate and key (`None`:
    /// plain HTTP).
    pub tls: Option<dmkv_service::ServerTls>,
    /// The memory node admin token presented when the switch creates responder queue
    /// pairs for its clients (`None`: memory nodes without authentication). It also
    /// guards the switch's own admin API, and grants are verified with the key derived
    /// from it (or `grant_key`) ([`crate::auth`]).
    pub memnode_token: Option<String>,
    /// The key grants are verified with, when the memory nodes were given one
    /// (`--grant-key-file`); `None`: derived from `memnode_token`.
    pub grant_key: Option<dmkv_api::grant::GrantKey>,
    /// Serve the admin API to anyone even though the switch has `memnode_token`
    /// (`--insecure-no-auth`); connections made with a grant are still confined.
    pub open_admin: bool,
    /// How long the data plane busy-polls its sockets (yielding the processor between
    /// looks) before sleeping in the kernel; zero: sleep at once.
    pub busy_poll: Duration,
}

impl SwitchConfig {
    /// Everything on 127.0.0.1 with ephemeral ports.
    pub fn local() -> SwitchConfig {
        SwitchConfig {
            client_side: SocketAddrV4::new([127, 0, 0, 1].into(), 0),
            memnode_side: SocketAddrV4::new([127, 0, 0, 1].into(), 0),
            admin: SocketAddr::from(([127, 0, 0, 1], 0)),
            state_file: None,
            initial: ControlState::default(),
            latch_lease: DEFAULT_LATCH_LEASE,
            tls: None,
            memnode_token: None,
            grant_key: None,
            open_admin: false,
            busy_poll: DEFAULT_BUSY_POLL,
        }
    }

    /// Who may call the admin API, from `memnode_token`, `grant_key` and `open_admin`.
    pub fn auth(&self) -> Result<SwitchAuth, dmkv_api::grant::GrantError> {
        let key = match (&self.grant_key, &self.memnode_token) {
            (Some(k), _) => Some(k.clone()),
            (None, Some(t)) => Some(dmkv_api::grant::GrantKey::derive_from_admin_token(t)?),
            (None, None) => None,
        };
        Ok(match (&self.memnode_token, key) {
            (Some(token), key) if !self.open_admin => SwitchAuth::secured(token, key)?,
            (_, Some(key)) => SwitchAuth::open_with_grants(key),
            (_, None) => SwitchAuth::open(),
        })
    }
}

/// Why a switch did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A socket could not be bound.
    #[error("binding {what} {addr}: {source}")]
    Bind {
        /// Which socket.
        what: &'static str,
        /// Its address.
        addr: String,
        /// The error.
        source: std::io::Error,
    },
    /// The control plane refused the configuration or state file.
    #[error("control plane: {0}")]
    Control(#[from] ControlError),
    /// The credentials are unusable (a memory node admin token too short to derive a
    /// grant key from).
    #[error("credentials: {0}")]
    Auth(String),
    /// The admin server could not start.
    #[error("admin server: {0}")]
    Admin(std::io::Error),
}

/// The pipeline clock: microseconds since this process first asked (the ingress
/// timestamp a switch stamps on packets).
pub fn clock_us() -> u64 {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_micros() as u64
}

/// What the pipeline did with one packet, from its counters before and after (the
/// most specific change wins).
pub fn decision(before: &Counters, after: &Counters) -> &'static str {
    let (b, a) = (before, after);
    let steps: [(u64, u64, &'static str); 16] = [
        (b.forward.malformed, a.forward.malformed, "malformed"),
        (b.forward.bad_icrc, a.forward.bad_icrc, "bad_icrc"),
        (b.forward.missed, a.forward.missed, "route_miss"),
        (
            b.switch_atomics.refused,
            a.switch_atomics.refused,
            "atomic_refused",
        ),
        (
            b.switch_atomics.answered,
            a.switch_atomics.answered,
            "atomic_answered",
        ),
        (
            b.switch_atomics.replayed,
            a.switch_atomics.replayed,
            "atomic_replayed",
        ),
        (
            b.switch_atomics.deferred,
            a.switch_atomics.deferred,
            "atomic_deferred",
        ),
        (
            b.switch_atomics.stale,
            a.switch_atomics.stale,
            "atomic_stale",
        ),
        (b.zero_copy.stale, a.zero_copy.stale, "copy_stale"),
        (b.zero_copy.naks, a.zero_copy.naks, "copy_nak"),
        (b.zero_copy.acked, a.zero_copy.acked, "copy_acked"),
        (b.faults.dropped, a.faults.dropped, "fault_dropped"),
        (b.faults.duplicated, a.faults.duplicated, "fault_duplicated"),
        (b.faults.reordered, a.faults.reordered, "fault_reordered"),
        (b.faults.delayed, a.faults.delayed, "fault_delayed"),
        (
            b.zero_copy.converted,
            a.zero_copy.converted,
            "copy_converted",
        ),
    ];
    steps
        .iter()
        .find(|(x, y, _)| y > x)
        .map(|(_, _, d)| *d)
        .unwrap_or(if a.forward.forwarded > b.forward.forwarded {
            "forwarded"
        } else {
            "consumed"
        })
}

/// How long a shutdown waits for admin requests in flight before closing them.
const ADMIN_DRAIN: Duration = Duration::from_secs(1);

/// Starts soft switches.
#[derive(Debug)]
pub struct SoftSwitch;

/// A running soft switch.
pub struct SwitchHandle {
    control: Arc<Control>,
    stats: Arc<IoStats>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    admin_addr: SocketAddr,
    admin_url: String,
    admin: Option<HttpServer>,
}

impl std::fmt::Debug for SwitchHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SwitchHandle")
            .field("client_side", &self.control.client_side())
            .field("memnode_side", &self.control.memnode_side())
            .field("admin", &self.admin_addr)
            .finish_non_exhaustive()
    }
}

fn bind(what: &'static str, addr: SocketAddrV4) -> Result<(BatchSocket, SocketAddrV4), StartError> {
    let err = |source| StartError::Bind {
        what,
        addr: addr.to_string(),
        source,
    };
    if addr.ip().is_unspecified() {
        return Err(err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "use a specific IPv4 address: the ICRC covers it",
        )));
    }
    let mut sock = BatchSocket::bind(addr).map_err(err)?;
    // Every datagram is a RoCE packet: with segmentation offload on (DMKV_UDP_OFFLOAD),
    // each keeps an ICRC true to the IP id it travels with.
    sock.set_carries_roce(true);
    let local = sock.local_addr();
    Ok((sock, local))
}

impl SoftSwitch {
    /// Bind the sockets, load the control state, start the data-plane threads and the
    /// admin server.
    pub fn start(config: SwitchConfig) -> Result<SwitchHandle, StartError> {
        let (client_sock, client_side) = bind("the client-side socket", config.client_side)?;
        let (memnode_sock, memnode_side) = bind("the memnode-side socket", config.memnode_side)?;
        let mut fresh = Pipeline::new();
        fresh.set_clock_us(clock_us());
        let pipeline = Arc::new(Mutex::new(fresh));
        let control = Arc::new(
            Control::new(
                pipeline.clone(),
                client_side,
                memnode_side,
                config.state_file.clone(),
                config.initial.clone(),
            )?
            .with_memnode_token(config.memnode_token.clone())
            .with_coalescing([client_sock.coalesces(), memnode_sock.coalesces()]),
        );
        let stats = Arc::new(IoStats::default());
        let stop = Arc::new(AtomicBool::new(false));
        control.resume_copies();
        control.resume_flows();
        let plane = DataPlane::new(DataPlaneParts {
            pipeline,
            control: control.clone(),
            sockets: [client_sock, memnode_sock],
            busy_poll: config.busy_poll,
            stats: stats.clone(),
            stop: stop.clone(),
        });
        let mut threads = vec![
            std::thread::Builder::new()
                .name("accel-p4-dataplane".into())
                .spawn(move || plane.run())
                .map_err(StartError::Admin)?,
        ];
        let mut lease = LatchLease::new(config.latch_lease);
        if let Some(every) = lease.interval() {
            let (control, stop) = (control.clone(), stop.clone());
            threads.push(
                std::thread::Builder::new()
                    .name("accel-p4-latch-lease".into())
                    .spawn(move || {
                        let step = Duration::from_millis(10);
                        let mut next = Instant::now() + every;
                        while !stop.load(Ordering::Relaxed) {
                            std::thread::sleep(step);
                            let now = Instant::now();
                            if now < next {
                                continue;
                            }
                            next = now + every;
                            let regions = control.latch_regions();
                            if !regions.is_empty() {
                                lease.sweep(&mut control.pipeline(), &regions, now);
                            }
                        }
                    })
                    .map_err(StartError::Admin)?,
            );
        }
        let listener = Listener::bind(config.admin)
            .map_err(StartError::Admin)?
            .with_tls(config.tls.clone());
        let auth = Arc::new(config.auth().map_err(|e| StartError::Auth(e.to_string()))?);
        if auth.grant_key.is_some() {
            let (control, stop) = (control.clone(), stop.clone());
            threads.push(
                std::thread::Builder::new()
                    .name("accel-p4-grant-expiry".into())
                    .spawn(move || {
                        while !stop.load(Ordering::Relaxed) {
                            std::thread::sleep(GRANT_EXPIRY_STEP);
                            if let Err(error) = control.expire_grants(crate::auth::now_ms()) {
                                tracing::warn!(%error, "could not drop expired grants' windows");
                            }
                        }
                    })
                    .map_err(StartError::Admin)?,
            );
        }
        let app = admin::router(admin::AdminState {
            control: control.clone(),
            io: stats.clone(),
            started: Instant::now(),
            auth,
        });
        let admin = HttpServer::spawn("accel-p4-admin", listener, app, ADMIN_DRAIN)
            .map_err(|e| StartError::Admin(e.source))?;
        let admin_addr = admin.addr();
        let admin_url = admin.url();
        tracing::info!(%client_side, %memnode_side, %admin_addr, "soft switch running");
        Ok(SwitchHandle {
            control,
            stats,
            stop,
            threads,
            admin_addr,
            admin_url,
            admin: Some(admin),
        })
    }
}

impl SwitchHandle {
    /// Where clients send.
    pub fn client_side(&self) -> SocketAddrV4 {
        self.control.client_side()
    }

    /// Where forwarded requests come from.
    pub fn memnode_side(&self) -> SocketAddrV4 {
        self.control.memnode_side()
    }

    /// The admin address.
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin_addr
    }

    /// The admin base URL (`http://host:port`, `https://` when it serves TLS).
    pub fn admin_url(&self) -> String {
        self.admin_url.clone()
    }

    /// The control plane.
    pub fn control(&self) -> &Arc<Control> {
        &self.control
    }

    /// Socket statistics.
    pub fn io_stats(&self) -> &IoStats {
        &self.stats
    }

    /// Stop the data plane and the admin server, and release the sockets.
    pub fn shutdown(mut self) {
        self.stop_all();
    }

    fn stop_all(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        if let Some(admin) = self.admin.take() {
            admin.stop();
        }
    }
}

impl Drop for SwitchHandle {
    fn drop(&mut self) {
        self.stop_all();
    }
}
