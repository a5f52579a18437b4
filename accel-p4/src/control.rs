//! The control plane: connections (routes), the switch-owned range, fault settings, and
//! queue-pair creation through the switch.
//!
//! The soft switch is a UDP middlebox with two sockets: the *client side* address that
//! clients send to (for every memnode it fronts), and the *memnode side* address it
//! forwards from. A memnode's responder QP authenticates its requester by the IPv4/UDP
//! addressing covered by the ICRC, so it must be created with the switch's memnode-side
//! address as the client address. `POST /v1/qps` does that: it takes a client's
//! [`CreateQpRequest`] plus the memnode's admin URL ([`SwitchQpRequest`]), creates the responder
//! on the memnode with `addr` = the switch's memnode-side socket and `server_addr` = the
//! memnode's data address, installs both routes, and answers with the switch's
//! client-side address as the address to send to. `POST /v1/routes` installs routes for a
//! QP created some other way.
//!
//! Atomic replacement (`functions::atomic_replace`): `create_mux` creates the
//! multiplexed QP to a memnode (the switch is its requester), `track_lock` declares a
//! lock word whose atomics go over it. Optimistic latching (`functions::opt_latch`):
//! `set_latch_region` declares a region of tuples whose versions the switch holds.
//!
//! Restart: routes, tracked locks, latch regions, the mode and the fault settings are
//! reinstalled from the state file. Each multiplexed QP is created anew on the memnode
//! (a fresh switch QPN and PSN: the old QP's position is unknown), and tracked words
//! start uncached (their next atomic goes up unconverted and refills the cache). Latch
//! regions restart with every tuple *latched by nobody* (odd version) for
//! `latch_grace`, so that writes latched before the restart reach the memnode before a
//! new latch can be granted; then versions restart at 0.
//!
//! Routes, the switch-owned range, the mode and the fault settings are persisted to the
//! state file (when configured), so a restarted switch reinstalls them. Register state
//! is not persisted: connection tracking relearns PSNs from the traffic. Values of
//! switch-owned words and the PSN offsets of connections that had switch answers are
//! lost on restart (they are hard state; see the crate README).

use std::collections::BTreeMap;
use std::net::SocketAddrV4;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use dmkv_api::memnode::{CreateQpRequest, CreateQpResponse};
use dmkv_api::memnode_admin;
use serde::{Deserialize, Serialize};

use crate::coalescing_peers::CoalescingPeers;
use crate::copy::{
    ActiveCopy, CopyEngine, CopyJob, CopyQp, CopyRecord, CopyRequest, CopyShape, CopyState,
    CopyStatus, ReadTarget,
};
use crate::model::{
    AtomicRange, CopyDstAction, CopySrcAction, Emitted, FaultPolicy, FillerAction, LatchRegion,
    LockKey, MuxAction, RouteAction, RouteKey, TableError, TrackedLock,
};
use crate::pipeline::Pipeline;
use crate::spec::{self, DIR_DOWN, DIR_UP, LATCH_TUPLES, LOCK_SLOTS, MAX_CONNS, MUX_QPS};

/// How long tuples stay reported latched after a restart (writes latched before it
/// finish meanwhile).
pub const LATCH_GRACE: std::time::Duration = std::time::Duration::from_millis(1000);

/// A multiplexed upstream QP (atomic replacement).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Mux {
    /// Index in `mux_up`.
    pub mux: u8,
    /// The memnode's admin URL.
    pub memnode: String,
    /// The memnode's soft-RoCE address.
    #[serde(default)]
    #[schema(value_type = Option<dmkv_api::schemas::SocketAddrV4String>)]
    pub memnode_addr: Option<SocketAddrV4>,
    /// The memnode's responder QPN.
    #[serde(default)]
    pub memnode_qpn: u32,
    /// The switch's QPN as requester.
    #[serde(default)]
    pub switch_qpn: u32,
    /// First upstream PSN.
    #[serde(default)]
    pub psn: u32,
}

/// `POST /v1/replace/mux`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct MuxRequest {
    /// The memnode's admin URL.
    pub memnode: String,
}

/// A tracked lock word (atomic replacement).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct LockEntry {
    /// Remote key of the region.
    pub rkey: u32,
    /// Address of the 8-byte word (8-byte aligned).
    pub va: u64,
    /// Multiplexed QP its atomics go over.
    #[serde(default)]
    pub mux: u8,
    /// Cache slot (allocated when absent).
    #[serde(default)]
    pub slot: Option<u32>,
}

/// One connection through the switch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Route {
    /// Connection id (allocated when absent).
    #[serde(default)]
    pub conn: Option<u8>,
    /// The client's UDP address.
    #[schema(value_type = dmkv_api::schemas::SocketAddrV4String)]
    pub client: SocketAddrV4,
    /// The client's QPN.
    pub client_qpn: u32,
    /// The client's first PSN.
    pub client_psn: u32,
    /// The memnode's soft-RoCE address.
    #[schema(value_type = dmkv_api::schemas::SocketAddrV4String)]
    pub memnode: SocketAddrV4,
    /// The memnode's responder QPN.
    pub memnode_qpn: u32,
    /// Path MTU in bytes: 256, 512, 1024, 2048 or 4096 (default 1024).
    #[serde(default = "default_pmtu")]
    #[schema(schema_with = dmkv_api::schemas::pmtu_schema)]
    pub pmtu: u32,
    /// The client said its socket receives coalesced buffers: runs to it may be
    /// segmented (see [`crate::coalescing_peers`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub coalesce_client: bool,
    /// The memory node said its socket receives coalesced buffers.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub coalesce_memnode: bool,
}

fn default_pmtu() -> u32 {
    1024
}

pub use dmkv_api::switch::{SwitchQpRequest, SwitchQpResponse};

use crate::conn_grants::{ConnGrants, RegionSpan};
use dmkv_api::grant::Grant;

/// Fault settings (`PUT /v1/faults`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FaultSettings {
    /// Generator seed.
    #[serde(default)]
    pub seed: u64,
    /// Client → memnode policy.
    #[serde(default)]
    pub up: FaultPolicy,
    /// Memnode → client policy.
    #[serde(default)]
    pub down: FaultPolicy,
}

/// Clover steering settings (`PUT /v1/steer`): which keys and node sizes are tracked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SteerSettings {
    /// Chain ids of the tracked keys (e.g. the hottest 8 or 64), at most
    /// [`spec::STEER_KEYS`]; key `i` gets slot `i`.
    #[serde(default)]
    pub keys: Vec<u64>,
    /// Node size classes (WRITE/READ lengths in bytes), at most [`spec::STEER_CLASSES`].
    #[serde(default)]
    pub classes: Vec<u32>,
    /// After a restart, nothing is rewritten for this long (packets sent before the
    /// restart may still be retransmitted); milliseconds.
    #[serde(default = "default_steer_quiet_ms")]
    pub quiet_ms: u64,
}

fn default_steer_quiet_ms() -> u64 {
    2000
}

impl Default for SteerSettings {
    fn default() -> Self {
        SteerSettings {
            keys: Vec::new(),
            classes: Vec::new(),
            quiet_ms: default_steer_quiet_ms(),
        }
    }
}

/// What the state file holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControlState {
    /// The mode bits.
    #[serde(default)]
    pub mode: u32,
    /// Every connection.
    #[serde(default)]
    pub routes: Vec<Route>,
    /// Switch-owned ranges by rkey.
    #[serde(default)]
    pub atomic_ranges: BTreeMap<u32, AtomicRange>,
    /// Fault settings.
    #[serde(default)]
    pub faults: FaultSettings,
    /// Multiplexed upstream QPs (atomic replacement).
    #[serde(default)]
    pub muxes: Vec<Mux>,
    /// Tracked lock words (atomic replacement).
    #[serde(default)]
    pub locks: Vec<LockEntry>,
    /// Regions of switch-latched tuples by rkey (optimistic latching).
    #[serde(default)]
    pub latch_regions: BTreeMap<u32, LatchRegion>,
    /// Clover steering: tracked keys and size classes.
    #[serde(default)]
    pub steer: SteerSettings,
    /// Where each connection's fillers write (atomic replacement), by connection id.
    #[serde(default)]
    pub fillers: BTreeMap<u8, FillerAction>,
    /// The grants of connections made with one (scoped to their windows), by
    /// connection id.
    #[serde(default)]
    pub scopes: BTreeMap<u8, ConnGrants>,
    /// Switch-initiated copies (zero-sided RDMA), running and ended.
    #[serde(default)]
    pub copies: Vec<CopyRecord>,
    /// Producer/consumer flows (zero-sided RDMA), running and ended.
    #[serde(default)]
    pub flows: Vec<crate::flow::FlowRecord>,
    /// Replica sets the switch replicates WRITEs to, with their lanes' queue pairs.
    #[serde(default)]
    pub mirrors: Vec<MirrorRecord>,
}

/// Control-plane failures.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// Invalid input.
    #[error("{0}")]
    Invalid(String),
    /// A table or the connection space is full, or a key is taken.
    #[error("{0}")]
    Conflict(String),
    /// No such connection.
    #[error("no connection {0}")]
    NotFound(u8),
    /// The memnode refused or could not be reached.
    #[error("memnode: {0}")]
    Memnode(String),
    /// The state file could not be written.
    #[error("state file: {0}")]
    State(String),
    /// The caller's grant does not allow this.
    #[error("{0}")]
    Forbidden(String),
}

impl From<TableError> for ControlError {
    fn from(e: TableError) -> ControlError {
        ControlError::Conflict(e.to_string())
    }
}

/// Where the switch forwards a memnode's traffic: its soft-RoCE address, asked of its
/// admin API at `admin`.
fn memnode_data_addr(admin: &str, token: Option<&str>) -> Result<SocketAddrV4, ControlError> {
    memnode_node(admin, token).map(|(addr, _)| addr)
}

/// The memnode's soft-RoCE address and the id the metadata service gave it.
fn memnode_node(
    admin: &str,
    token: Option<&str>,
) -> Result<(SocketAddrV4, Option<u64>), ControlError> {
    let node = memnode_admin::node_info_as(admin, token)
        .map_err(|e| ControlError::Memnode(e.to_string()))?;
    let addr =
        memnode_admin::data_addr(admin, &node).map_err(|e| ControlError::Invalid(e.to_string()))?;
    Ok((addr, node.memnode_id))
}

/// The control plane of one switch.
#[derive(Debug)]
pub struct Control {
    pipeline: Arc<Mutex<Pipeline>>,
    state: Mutex<ControlState>,
    state_file: Option<PathBuf>,
    client_side: SocketAddrV4,
    memnode_side: SocketAddrV4,
    /// The memory node admin token the switch presents when it creates and deletes
    /// responder queue pairs (`None`: memory nodes without authentication).
    memnode_token: Option<String>,
    /// The running copies (zero-sided RDMA).
    copies: Mutex<CopyEngine>,
    /// When running copies' progress was last written to the state file (µs).
    checkpointed_us: Mutex<u64>,
    /// The last copy id handed out (ids are never reused while the switch runs).
    last_copy_id: Mutex<u64>,
    /// The running flows (zero-sided RDMA).
    flows: Mutex<crate::flow::FlowEngine>,
    /// The last flow id handed out.
    last_flow_id: Mutex<u64>,
    /// Whether the client-side and memnode-side sockets receive coalesced buffers
    /// (what the switch tells clients and memory nodes).
    coalescing: [bool; 2],
    /// The peers that said they receive coalesced buffers.
    peers: Arc<CoalescingPeers>,
}

mod flows;
mod mirrors;
mod read_balance;

pub use mirrors::{MirrorLaneQp, MirrorRecord};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Control {
    /// Presents `token` (the memory node admin token) to the memory nodes: the switch's
    /// responder queue pairs have whole-region access, as the switch rewrites keys and
    /// addresses when it steers.
    pub fn with_memnode_token(mut self, token: Option<String>) -> Control {
        self.memnode_token = token;
        self
    }

    /// A control plane for `pipeline`, whose sockets are `client_side` (clients send
    /// here) and `memnode_side` (forwarding source). Loads `state_file` if it exists.
    pub fn new(
        pipeline: Arc<Mutex<Pipeline>>,
        client_side: SocketAddrV4,
        memnode_side: SocketAddrV4,
        state_file: Option<PathBuf>,
        initial: ControlState,
    ) -> Result<Control, ControlError> {
        let loaded = match &state_file {
            Some(path) if path.exists() => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| ControlError::State(format!("{}: {e}", path.display())))?;
                Some(
                    serde_json::from_str::<ControlState>(&text)
                        .map_err(|e| ControlError::State(format!("{}: {e}", path.display())))?,
                )
            }
            _ => None,
        };
        let restarted = loaded.is_some();
        let state = loaded.unwrap_or(initial);
        let control = Control {
            pipeline,
            state: Mutex::new(ControlState::default()),
            state_file,
            client_side,
            memnode_side,
            memnode_token: None,
            copies: Mutex::new(CopyEngine::default()),
            checkpointed_us: Mutex::new(0),
            last_copy_id: Mutex::new(0),
            flows: Mutex::new(crate::flow::FlowEngine::default()),
            last_flow_id: Mutex::new(0),
            coalescing: [false; 2],
            peers: Arc::new(CoalescingPeers::default()),
        };
        control.set_mode(state.mode)?;
        control.set_faults(state.faults)?;
        for (rkey, range) in &state.atomic_ranges {
            control.set_atomic_range(*rkey, *range)?;
        }
        for route in state.routes {
            // After a restart the registers relearn PSNs from the traffic.
            control.install(route, !restarted)?;
        }
        for mux in state.muxes {
            // A fresh QP: the old one's PSN is unknown. A memnode that is down leaves the
            // mux absent (tracked atomics then go up on the clients' own QPs).
            if let Err(e) = control.create_mux(&MuxRequest {
                memnode: mux.memnode.clone(),
            }) {
                tracing::warn!(memnode = %mux.memnode, error = %e, "multiplexed QP not recreated");
            }
        }
        for lock in state.locks {
            control.track_lock(lock)?;
        }
        for (conn, filler) in state.fillers {
            control.set_filler(conn, filler)?;
        }
        for (rkey, region) in state.latch_regions {
            control.set_latch_region(rkey, region, restarted)?;
        }
        for (conn, scope) in state.scopes {
            control.install_scope(conn, scope)?;
        }
        if restarted {
            let quiet = state.steer.quiet_ms.saturating_mul(1000);
            control.pipeline().steer_quiet_for(quiet);
        }
        control.set_steering(state.steer)?;
        lock(&control.state).copies = state.copies;
        lock(&control.state).flows = state.flows;
        for record in state.mirrors {
            // Fresh lanes: the old queue pairs' PSNs are gone with the registers.
            control.restore_mirror(record);
        }
        Ok(control)
    }

    /// Tells new clients (`[0]`) and memory nodes (`[1]`) whether the switch's
    /// sockets on their side receive coalesced buffers, so they may send it segmented
    /// runs (`verbs::net::BatchSocket::coalesces`).
    pub fn with_coalescing(mut self, sides: [bool; 2]) -> Control {
        self.coalescing = sides;
        self
    }

    /// The peers that said they receive coalesced buffers.
    pub fn coalescing_peers(&self) -> &Arc<CoalescingPeers> {
        &self.peers
    }

    /// Where clients send.
    pub fn client_side(&self) -> SocketAddrV4 {
        self.client_side
    }

    /// Where forwarded requests come from.
    pub fn memnode_side(&self) -> SocketAddrV4 {
        self.memnode_side
    }

    /// The pipeline.
    pub fn pipeline(&self) -> MutexGuard<'_, Pipeline> {
        lock(&self.pipeline)
    }

    /// A copy of the control state.
    pub fn state(&self) -> ControlState {
        lock(&self.state).clone()
    }

    /// The declared regions of switch-latched tuples.
    pub fn latch_regions(&self) -> Vec<LatchRegion> {
        lock(&self.state).latch_regions.values().copied().collect()
    }

    fn persist(&self, state: &ControlState) -> Result<(), ControlError> {
        let Some(path) = &self.state_file else {
            return Ok(());
        };
        let text =
            serde_json::to_string_pretty(state).map_err(|e| ControlError::State(e.to_string()))?;
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, path))
            .map_err(|e| ControlError::State(format!("{}: {e}", path.display())))
    }

    /// Set the mode bits.
    pub fn set_mode(&self, mode: u32) -> Result<(), ControlError> {
        let mut state = lock(&self.state);
        self.pipeline().set_mode(mode);
        state.mode = mode;
        self.persist(&state)
    }

    /// Set the fault policies and reseed the generators.
    pub fn set_faults(&self, faults: FaultSettings) -> Result<(), ControlError> {
        let mut state = lock(&self.state);
        {
            let mut p = self.pipeline();
            p.seed_faults(faults.seed);
            p.tables.fault_policy.insert(DIR_UP, faults.up)?;
            p.tables.fault_policy.insert(DIR_DOWN, faults.down)?;
        }
        state.faults = faults;
        self.persist(&state)
    }

    /// Declare `[base_va, base_va + 8 * slots)` under `rkey` switch-owned.
    pub fn set_atomic_range(&self, rkey: u32, range: AtomicRange) -> Result<(), ControlError> {
        if !range.base_va.is_multiple_of(8) {
            return Err(ControlError::Invalid(
                "base_va must be 8-byte aligned".into(),
            ));
        }
        let end = u64::from(range.first_slot) + u64::from(range.slots);
        if range.slots == 0 || end > spec::ATOMIC_SLOTS as u64 {
            return Err(ControlError::Invalid(format!(
                "slots must be 1..={} words from first_slot",
                spec::ATOMIC_SLOTS
            )));
        }
        let mut state = lock(&self.state);
        self.pipeline().tables.atomic_range.insert(rkey, range)?;
        state.atomic_ranges.insert(rkey, range);
        self.persist(&state)
    }

    /// Install a connection's routes. With `init`, its tracking registers start at the
    /// client's first PSN; otherwise they relearn from traffic.
    pub fn install(&self, mut route: Route, init: bool) -> Result<Route, ControlError> {
        if !route.pmtu.is_power_of_two() || !(256..=4096).contains(&route.pmtu) {
            return Err(ControlError::Invalid(format!(
                "bad path MTU {}",
                route.pmtu
            )));
        }
        let mut state = lock(&self.state);
        let up_key = RouteKey {
            src: route.client,
            qpn: route.memnode_qpn,
        };
        let down_key = RouteKey {
            src: route.memnode,
            qpn: route.client_qpn,
        };
        let clash = state.routes.iter().any(|r| {
            r.conn != route.conn
                && ((r.client, r.memnode_qpn) == (up_key.src, up_key.qpn)
                    || (r.memnode, r.client_qpn) == (down_key.src, down_key.qpn))
        });
        if clash {
            return Err(ControlError::Conflict(format!(
                "a connection with client {} QPN {:#x} or memnode {} QPN {:#x} exists",
                route.client, route.client_qpn, route.memnode, route.memnode_qpn
            )));
        }
        let conn = match route.conn {
            Some(c) => c,
            None => (0..MAX_CONNS)
                .map(|c| c as u8)
                .find(|c| state.routes.iter().all(|r| r.conn != Some(*c)))
                .ok_or_else(|| ControlError::Conflict("all connection ids are in use".into()))?,
        };
        route.conn = Some(conn);
        {
            let mut p = self.pipeline();
            p.tables.route_up.insert(
                up_key,
                RouteAction {
                    conn,
                    src: self.memnode_side,
                    dst: route.memnode,
                    client_qpn: route.client_qpn,
                    pmtu_log2: route.pmtu.trailing_zeros() as u8,
                },
            )?;
            if let Err(e) = p.tables.route_down.insert(
                down_key,
                RouteAction {
                    conn,
                    src: self.client_side,
                    dst: route.client,
                    client_qpn: 0,
                    pmtu_log2: 0,
                },
            ) {
                p.tables.route_up.remove(&up_key);
                return Err(e.into());
            }
            p.tables.conn_client.insert(
                conn,
                RouteAction {
                    conn,
                    src: self.client_side,
                    dst: route.client,
                    client_qpn: route.client_qpn,
                    pmtu_log2: 0,
                },
            )?;
            if init {
                p.init_connection(conn, route.client_psn);
            }
        }
        state.routes.retain(|r| r.conn != Some(conn));
        state.routes.push(route.clone());
        self.peers.rebuild(&state.routes);
        self.persist(&state)?;
        Ok(route)
    }

    /// Remove a connection.
    pub fn remove(&self, conn: u8) -> Result<Route, ControlError> {
        let mut state = lock(&self.state);
        let idx = state
            .routes
            .iter()
            .position(|r| r.conn == Some(conn))
            .ok_or(ControlError::NotFound(conn))?;
        let route = state.routes.remove(idx);
        self.peers.rebuild(&state.routes);
        {
            let mut p = self.pipeline();
            p.tables.route_up.remove(&RouteKey {
                src: route.client,
                qpn: route.memnode_qpn,
            });
            p.tables.route_down.remove(&RouteKey {
                src: route.memnode,
                qpn: route.client_qpn,
            });
            p.tables.conn_client.remove(&conn);
            p.tables.conn_filler.remove(&conn);
            p.tables.conn_scoped.remove(&conn);
            p.tables.conn_window.remove_conn(conn);
        }
        state.fillers.remove(&conn);
        state.scopes.remove(&conn);
        self.persist(&state)?;
        Ok(route)
    }

    /// Create a responder QP on the memnode for a client QP that goes through the switch
    /// and install its routes (blocking: talks HTTP to the memnode).
    /// The answer is the memnode's, with the switch's client-side address to send to
    /// and the connection id (to remove its routes when the client is done).
    ///
    /// With `grant` (a client's, verified by the caller), the connection is scoped: it
    /// belongs to the grant's client, must go to the grant's memory node, and its
    /// requests are confined to the grant's windows (more grants come with
    /// [`Control::give_grant`]). Without, it has the switch's whole-region access.
    pub fn create_qp(
        &self,
        req: &SwitchQpRequest,
        grant: Option<&Grant>,
    ) -> Result<SwitchQpResponse, ControlError> {
        if req.qpn == 0 || req.qpn > verbs::wire::QPN_MASK {
            return Err(ControlError::Invalid(format!(
                "qpn {} is out of range: queue pair numbers are 24-bit and non-zero",
                req.qpn
            )));
        }
        if req.psn > verbs::wire::PSN_MASK {
            return Err(ControlError::Invalid(format!(
                "psn {} is out of range: PSNs are 24-bit",
                req.psn
            )));
        }
        verbs::rc::Pmtu::new(req.pmtu).map_err(ControlError::Invalid)?;
        let (memnode_addr, memnode_id) = memnode_node(&req.memnode, self.memnode_token.as_deref())?;
        if let Some(g) = grant
            && memnode_id != Some(g.memnode_id)
        {
            return Err(ControlError::Forbidden(format!(
                "the grant is for memory node {}, and {} is {}",
                g.memnode_id,
                req.memnode,
                memnode_id.map_or_else(
                    || "not registered with a metadata service".to_owned(),
                    |id| format!("memory node {id}")
                )
            )));
        }
        let resp = memnode_admin::create_qp_as(
            &req.memnode,
            self.memnode_token.as_deref(),
            &CreateQpRequest {
                qpn: req.qpn,
                psn: req.psn,
                addr: self.memnode_side,
                pmtu: req.pmtu,
                server_addr: Some(memnode_addr),
                coalesce: self.coalescing[1],
            },
        )
        .map_err(|e| ControlError::Memnode(e.to_string()))?;
        let route = Route {
            conn: None,
            client: req.addr,
            client_qpn: req.qpn,
            client_psn: req.psn,
            memnode: resp.addr,
            memnode_qpn: resp.qpn,
            pmtu: resp.pmtu,
            coalesce_client: req.coalesce && self.coalescing[0],
            coalesce_memnode: resp.coalesce && self.coalescing[1],
        };
        let route = match self.install(route, true) {
            Ok(r) => r,
            Err(e) => {
                let _ = memnode_admin::delete_qp_as(
                    &req.memnode,
                    self.memnode_token.as_deref(),
                    resp.qpn,
                );
                return Err(e);
            }
        };
        // Fillers (atomic replacement) write 0 bytes at the start of the first region.
        if let (Some(conn), Some(region)) = (route.conn, resp.regions.first()) {
            self.set_filler(
                conn,
                FillerAction {
                    rkey: region.rkey,
                    va: region.base_va,
                    memnode_qpn: resp.qpn,
                },
            )?;
        }
        if let Some(g) = grant {
            let scoped = match (route.conn, resp.regions.first()) {
                (Some(conn), Some(region)) => self.install_scope(
                    conn,
                    ConnGrants::new(
                        g,
                        RegionSpan {
                            rkey: region.rkey,
                            base_va: region.base_va,
                            len: region.len,
                        },
                    ),
                ),
                _ => Err(ControlError::Memnode(
                    "the memory node answered without a region or connection id".into(),
                )),
            };
            if let Err(e) = scoped {
                if let Some(conn) = route.conn {
                    let _ = self.remove(conn);
                }
                let _ = memnode_admin::delete_qp_as(
                    &req.memnode,
                    self.memnode_token.as_deref(),
                    resp.qpn,
                );
                return Err(e);
            }
        }
        Ok(SwitchQpResponse {
            qp: CreateQpResponse {
                addr: self.client_side,
                coalesce: self.coalescing[0],
                ..resp
            },
            conn: route.conn,
        })
    }
}

impl Control {
    /// Makes `conn` a scoped connection holding `scope`'s grants: listed in
    /// `conn_scoped`, its windows in `conn_window`. Its old windows go first.
    fn install_scope(&self, conn: u8, scope: ConnGrants) -> Result<(), ControlError> {
        let windows = scope.windows(crate::auth::now_ms());
        let mut state = lock(&self.state);
        let written = {
            let mut p = self.pipeline();
            p.tables.conn_window.remove_conn(conn);
            // Scoped before any window: a connection with no windows is denied all.
            p.tables.conn_scoped.insert(conn, ())?;
            windows
                .iter()
                .try_for_each(|&(start, end, action)| {
                    p.tables.conn_window.insert(conn, start, end, action)
                })
                .map_err(|e| ControlError::Conflict(e.to_string()))
        };
        state.scopes.insert(conn, scope);
        self.persist(&state)?;
        // A full window table leaves the connection scoped with fewer windows: the
        // rest of its memory is denied, never opened.
        written
    }

    /// Gives scoped connection `conn` another verified grant (another table's, or a
    /// newer one of a table it holds).
    pub fn give_grant(&self, conn: u8, grant: &Grant) -> Result<(), ControlError> {
        let mut scope = self.scope(conn).ok_or_else(|| {
            ControlError::Forbidden(format!(
                "connection {conn} was not made with a grant and takes none"
            ))
        })?;
        scope
            .replace(conn, grant)
            .map_err(|e| ControlError::Forbidden(e.to_string()))?;
        self.install_scope(conn, scope)
    }

    /// The grants of connection `conn`, if it is scoped.
    pub fn scope(&self, conn: u8) -> Option<ConnGrants> {
        lock(&self.state).scopes.get(&conn).cloned()
    }

    /// Drops the windows of grants expired at `now_ms` from every scoped connection
    /// (the switch calls this a few times a second): a client whose grants are not
    /// renewed loses access within one grant TTL.
    pub fn expire_grants(&self, now_ms: u64) -> Result<(), ControlError> {
        let due: Vec<(u8, ConnGrants)> = lock(&self.state)
            .scopes
            .iter()
            .filter(|(_, s)| s.next_expiry().is_some_and(|t| t <= now_ms))
            .map(|(c, s)| (*c, s.clone()))
            .collect();
        for (conn, mut scope) in due {
            scope.expire(now_ms);
            tracing::info!(conn, client = %scope.client_id, "a grant of a scoped connection expired: its windows are gone");
            self.install_scope(conn, scope)?;
        }
        Ok(())
    }

    /// Where connection `conn`'s fillers write (atomic replacement).
    pub fn set_filler(&self, conn: u8, filler: FillerAction) -> Result<(), ControlError> {
        let mut state = lock(&self.state);
        self.pipeline().tables.conn_filler.insert(conn, filler)?;
        state.fillers.insert(conn, filler);
        self.persist(&state)
    }

    /// Create (or re-create) the multiplexed QP to the memnode at admin URL `req.memnode`
    /// and install its tables (blocking: talks HTTP to the memnode). A memnode that
    /// already has one gets a fresh one in the same slot.
    pub fn create_mux(&self, req: &MuxRequest) -> Result<Mux, ControlError> {
        let memnode_addr = memnode_data_addr(&req.memnode, self.memnode_token.as_deref())?;
        let mux = {
            let state = lock(&self.state);
            match state.muxes.iter().find(|m| m.memnode == req.memnode) {
                Some(m) => m.mux,
                None => (0..MUX_QPS as u8)
                    .find(|i| state.muxes.iter().all(|m| m.mux != *i))
                    .ok_or_else(|| {
                        ControlError::Conflict(format!("all {MUX_QPS} multiplexed QPs are in use"))
                    })?,
            }
        };
        // A QPN and PSN of this incarnation: stray answers to an earlier one never match.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos() ^ (d.as_secs() as u32).rotate_left(7))
            .unwrap_or(1);
        let switch_qpn = 0x00F0_0000 | (u32::from(mux) << 16) | (nanos & 0xFFFF) | 1;
        let psn = (nanos >> 8) & verbs::wire::PSN_MASK;
        let resp = memnode_admin::create_qp_as(
            &req.memnode,
            self.memnode_token.as_deref(),
            &CreateQpRequest {
                qpn: switch_qpn,
                psn,
                addr: self.memnode_side,
                pmtu: 1024,
                server_addr: Some(memnode_addr),
                coalesce: false,
            },
        )
        .map_err(|e| ControlError::Memnode(e.to_string()))?;
        let entry = Mux {
            mux,
            memnode: req.memnode.clone(),
            memnode_addr: Some(resp.addr),
            memnode_qpn: resp.qpn,
            switch_qpn,
            psn,
        };
        let mut state = lock(&self.state);
        {
            let mut p = self.pipeline();
            if let Some(old) = state.muxes.iter().find(|m| m.mux == mux)
                && let Some(addr) = old.memnode_addr
            {
                p.tables.mux_down.remove(&RouteKey {
                    src: addr,
                    qpn: old.switch_qpn,
                });
            }
            p.tables.mux_up.insert(
                mux,
                MuxAction {
                    src: self.memnode_side,
                    dst: resp.addr,
                    memnode_qpn: resp.qpn,
                },
            )?;
            p.tables.mux_down.insert(
                RouteKey {
                    src: resp.addr,
                    qpn: switch_qpn,
                },
                mux,
            )?;
            p.init_mux(mux, psn);
            // The new QP starts empty: every cached word is refilled through it.
            for l in &state.locks {
                if l.mux == mux
                    && let Some(slot) = l.slot
                {
                    p.invalidate_lock(slot);
                }
            }
        }
        state.muxes.retain(|m| m.mux != mux);
        state.muxes.push(entry.clone());
        self.persist(&state)?;
        Ok(entry)
    }

    /// Track a lock word: its CAS/FAA go over multiplexed QP `entry.mux`. The cache
    /// starts empty.
    pub fn track_lock(&self, mut entry: LockEntry) -> Result<LockEntry, ControlError> {
        if !entry.va.is_multiple_of(8) {
            return Err(ControlError::Invalid("va must be 8-byte aligned".into()));
        }
        if usize::from(entry.mux) >= MUX_QPS {
            return Err(ControlError::Invalid(format!(
                "mux must be below {MUX_QPS}"
            )));
        }
        let mut state = lock(&self.state);
        let existing = state
            .locks
            .iter()
            .find(|l| (l.rkey, l.va) == (entry.rkey, entry.va))
            .and_then(|l| l.slot);
        let slot = match (existing, entry.slot) {
            (Some(s), _) => s,
            (None, Some(s)) if (s as usize) < LOCK_SLOTS => s,
            (None, Some(s)) => {
                return Err(ControlError::Invalid(format!(
                    "slot {s} beyond {LOCK_SLOTS}"
                )));
            }
            (None, None) => (0..LOCK_SLOTS as u32)
                .find(|s| state.locks.iter().all(|l| l.slot != Some(*s)))
                .ok_or_else(|| {
                    ControlError::Conflict(format!("all {LOCK_SLOTS} lock slots are in use"))
                })?,
        };
        entry.slot = Some(slot);
        {
            let mut p = self.pipeline();
            p.tables.tracked_lock.insert(
                LockKey {
                    rkey: entry.rkey,
                    va: entry.va,
                },
                TrackedLock {
                    slot,
                    mux: entry.mux,
                },
            )?;
            p.invalidate_lock(slot);
        }
        state
            .locks
            .retain(|l| (l.rkey, l.va) != (entry.rkey, entry.va));
        state.locks.push(entry);
        self.persist(&state)?;
        Ok(entry)
    }

    /// Stop tracking the lock word in `slot`.
    pub fn untrack_lock(&self, slot: u32) -> Result<LockEntry, ControlError> {
        let mut state = lock(&self.state);
        let idx = state
            .locks
            .iter()
            .position(|l| l.slot == Some(slot))
            .ok_or_else(|| ControlError::Invalid(format!("no tracked lock in slot {slot}")))?;
        let entry = state.locks.remove(idx);
        {
            let mut p = self.pipeline();
            p.tables.tracked_lock.remove(&LockKey {
                rkey: entry.rkey,
                va: entry.va,
            });
            p.invalidate_lock(slot);
        }
        self.persist(&state)?;
        Ok(entry)
    }

    /// Track `settings.keys` and `settings.classes` for Clover steering. The steering
    /// registers (tails, in-flight records, write cache) are cleared, since slots may
    /// now belong to other keys: in-flight steered CASes then reach their clients
    /// unconverted, which they treat as an unknown outcome.
    pub fn set_steering(&self, settings: SteerSettings) -> Result<(), ControlError> {
        if settings.keys.len() > spec::STEER_KEYS {
            return Err(ControlError::Invalid(format!(
                "at most {} tracked keys",
                spec::STEER_KEYS
            )));
        }
        if settings.classes.len() > spec::STEER_CLASSES {
            return Err(ControlError::Invalid(format!(
                "at most {} tracked size classes",
                spec::STEER_CLASSES
            )));
        }
        if let Some(c) = settings.classes.iter().find(|c| **c < 32) {
            return Err(ControlError::Invalid(format!(
                "size class {c} is shorter than a Clover node prefix (32 bytes)"
            )));
        }
        let mut seen = std::collections::BTreeSet::new();
        if let Some(k) = settings.keys.iter().find(|k| !seen.insert(**k)) {
            return Err(ControlError::Invalid(format!(
                "chain id {k} is listed twice"
            )));
        }
        let mut state = lock(&self.state);
        {
            let mut p = self.pipeline();
            p.tables.steer_keys.clear();
            p.tables.steer_classes.clear();
            for (slot, key) in settings.keys.iter().enumerate() {
                p.tables.steer_keys.insert(*key, slot as u16)?;
            }
            for class in &settings.classes {
                p.tables.steer_classes.insert(*class, ())?;
            }
            p.reset_steering();
        }
        state.steer = settings;
        self.persist(&state)
    }

    /// Declare a region of switch-latched tuples under `rkey`. Its versions start at 0;
    /// with `recovering` (after a restart) every tuple is reported latched for
    /// [`LATCH_GRACE`] first (see the module docs).
    pub fn set_latch_region(
        &self,
        rkey: u32,
        region: LatchRegion,
        recovering: bool,
    ) -> Result<(), ControlError> {
        if !(3..=30).contains(&region.stride_log2) {
            return Err(ControlError::Invalid(
                "stride_log2 must be 3..=30 (tuples of 8 B .. 1 GiB)".into(),
            ));
        }
        let end = u64::from(region.first_tuple) + u64::from(region.tuples);
        if region.tuples == 0 || end > LATCH_TUPLES as u64 {
            return Err(ControlError::Invalid(format!(
                "tuples must be 1..={LATCH_TUPLES} from first_tuple"
            )));
        }
        if !region.base_va.is_multiple_of(8) {
            return Err(ControlError::Invalid(
                "base_va must be 8-byte aligned".into(),
            ));
        }
        let mut state = lock(&self.state);
        {
            let mut p = self.pipeline();
            p.tables.latch_region.insert(rkey, region)?;
            p.set_tuple_versions(region.first_tuple, region.tuples, u32::from(recovering));
        }
        state.latch_regions.insert(rkey, region);
        self.persist(&state)?;
        if recovering {
            let pipeline = self.pipeline.clone();
            std::thread::spawn(move || {
                std::thread::sleep(LATCH_GRACE);
                lock(&pipeline).set_tuple_versions(region.first_tuple, region.tuples, 0);
                tracing::info!(
                    rkey,
                    tuples = region.tuples,
                    "latch grace over: tuples free"
                );
            });
        }
        Ok(())
    }
}

/// How often running copies' progress is written to the state file.
const COPY_CHECKPOINT_US: u64 = 100_000;
/// Path MTU of the switch's copy queue pairs (log2).
const COPY_PMTU_LOG2: u8 = 10;

/// The bytes a copy's PSN stands for (log2): the path MTU, or the whole chunk when a
/// chunk is smaller than one (a power of two from 64 bytes, as `checked` allows).
fn copy_unit_log2(chunk: u32) -> u8 {
    if chunk >= 1 << COPY_PMTU_LOG2 {
        COPY_PMTU_LOG2
    } else {
        chunk.trailing_zeros() as u8
    }
}

/// A QPN and PSN for the switch's queue pair `role` (0: source, 1: target) of copy
/// `slot`, fresh for this incarnation: stray answers to an earlier one never match.
fn copy_qpn_psn(slot: u8, role: u32) -> (u32, u32) {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() ^ (d.as_secs() as u32).rotate_left(11))
        .unwrap_or(7);
    let qpn = 0x00E0_0000 | (u32::from(slot) << 15) | (nanos & 0x7FFC) | (role << 1) | 1;
    let psn = (nanos.rotate_right(5) ^ (role << 20)) & verbs::wire::PSN_MASK;
    (qpn, psn)
}

/// Switch-initiated copies (zero-sided RDMA).
///
/// Restart rule: the state file keeps every copy with a checkpoint — a prefix of bytes
/// the target acknowledged, written at most [`COPY_CHECKPOINT_US`] apart and when a copy
/// ends. A restarted switch deletes a running copy's old queue pairs on both memnodes
/// and resumes it from its checkpoint on fresh ones (new QPNs and PSNs). Bytes between
/// the checkpoint and where the old switch stopped are copied again: the same source
/// bytes to the same target addresses, so the target ends up with each byte written
/// from its source byte (idempotent WRITEs), never anything else. Ended copies are
/// remembered as they ended.
impl Control {
    /// Start copying `req.len` bytes from `req.source` to `req.target` (blocking: creates
    /// the switch's queue pairs on both memnodes over HTTP).
    pub fn start_copy(&self, req: &CopyRequest) -> Result<CopyStatus, ControlError> {
        req.checked().map_err(ControlError::Invalid)?;
        let id = {
            let state = lock(&self.state);
            let mut last = lock(&self.last_copy_id);
            *last = (*last).max(state.copies.iter().map(|c| c.id).max().unwrap_or(0)) + 1;
            *last
        };
        self.run_copy(id, req, 0, 0)
    }

    /// Resume the copies a state file says were running (after a restart; blocking).
    /// A copy that cannot be resumed (a memnode is gone) is marked failed.
    pub fn resume_copies(&self) {
        let records = lock(&self.state).copies.clone();
        for r in records {
            if r.state != CopyState::Running {
                lock(&self.copies)
                    .remember(crate::copy::engine::status_at_rest(&r, r.state.clone()));
                continue;
            }
            for qp in &r.qps {
                let _ =
                    memnode_admin::delete_qp_as(&qp.memnode, self.memnode_token.as_deref(), qp.qpn);
            }
            if let Err(e) = self.run_copy(r.id, &r.request, r.checkpoint, r.resumed + 1) {
                tracing::warn!(copy = r.id, error = %e, "copy not resumed");
                let mut state = lock(&self.state);
                if let Some(rec) = state.copies.iter_mut().find(|c| c.id == r.id) {
                    rec.state = CopyState::Failed(format!("not resumed after a restart: {e}"));
                    rec.qps.clear();
                }
                let _ = self.persist(&state);
                drop(state);
                lock(&self.copies).remember(crate::copy::engine::status_at_rest(
                    &r,
                    CopyState::Failed(format!("not resumed after a restart: {e}")),
                ));
            }
        }
    }

    fn run_copy(
        &self,
        id: u64,
        req: &CopyRequest,
        checkpoint: u64,
        resumed: u32,
    ) -> Result<CopyStatus, ControlError> {
        let (chunk, window, rto_ms) = req.checked().map_err(ControlError::Invalid)?;
        let slot = lock(&self.copies).reserve().ok_or_else(|| {
            ControlError::Conflict(format!("all {} copy slots are in use", spec::COPY_SLOTS))
        })?;
        let mut created: Vec<CopyQp> = Vec::new();
        let result = self.install_copy(
            id,
            req,
            checkpoint,
            resumed,
            slot,
            (chunk, window, rto_ms),
            &mut created,
        );
        if result.is_err() {
            lock(&self.copies).release(slot);
            for qp in &created {
                let _ =
                    memnode_admin::delete_qp_as(&qp.memnode, self.memnode_token.as_deref(), qp.qpn);
            }
        }
        result
    }

    #[allow(clippy::too_many_arguments)]
    fn install_copy(
        &self,
        id: u64,
        req: &CopyRequest,
        checkpoint: u64,
        resumed: u32,
        slot: u8,
        (chunk, window, rto_ms): (u32, u32, u64),
        created: &mut Vec<CopyQp>,
    ) -> Result<CopyStatus, ControlError> {
        // A chunk of at most one path MTU is one READ answered by one response packet,
        // which becomes one WRITE: the copy then advances a chunk per PSN.
        let unit_log2 = copy_unit_log2(chunk);
        let token = self.memnode_token.as_deref();
        let mut qp =
            |memnode: &str, role: u32| -> Result<(SocketAddrV4, u32, u32, u32), ControlError> {
                let addr = memnode_data_addr(memnode, token)?;
                let (switch_qpn, psn) = copy_qpn_psn(slot, role);
                let resp = memnode_admin::create_qp_as(
                    memnode,
                    token,
                    &CreateQpRequest {
                        qpn: switch_qpn,
                        psn,
                        addr: self.memnode_side,
                        pmtu: 1 << COPY_PMTU_LOG2,
                        server_addr: Some(addr),
                        coalesce: false,
                    },
                )
                .map_err(|e| ControlError::Memnode(e.to_string()))?;
                created.push(CopyQp {
                    memnode: memnode.to_owned(),
                    qpn: resp.qpn,
                });
                Ok((resp.addr, resp.qpn, switch_qpn, psn))
            };
        let (src_addr, src_qpn, src_switch_qpn, src_psn) = qp(&req.source.memnode, 0)?;
        let (dst_addr, dst_qpn, dst_switch_qpn, dst_psn) = qp(&req.target.memnode, 1)?;
        let len = req.len - checkpoint.min(req.len);
        let src_key = RouteKey {
            src: src_addr,
            qpn: src_switch_qpn,
        };
        let dst_key = RouteKey {
            src: dst_addr,
            qpn: dst_switch_qpn,
        };
        let now = crate::switch::clock_us();
        {
            let mut p = self.pipeline();
            p.tables.copy_src.insert(
                src_key,
                CopySrcAction {
                    slot,
                    src_psn,
                    dst_psn,
                    dst_va: req.target.va.wrapping_add(checkpoint),
                    dst_rkey: req.target.rkey,
                    src: self.memnode_side,
                    dst: dst_addr,
                    dst_qpn,
                    pmtu_log2: unit_log2,
                    len,
                },
            )?;
            if let Err(e) = p
                .tables
                .copy_dst
                .insert(dst_key, CopyDstAction { slot, dst_psn })
            {
                p.tables.copy_src.remove(&src_key);
                return Err(e.into());
            }
            p.init_copy(slot);
        }
        let shape = CopyShape {
            len,
            pmtu_log2: unit_log2,
            chunk_packets: chunk >> unit_log2,
            window,
            src_psn,
            rto_us: rto_ms * 1000,
        };
        let active = ActiveCopy {
            id,
            request: req.clone(),
            job: CopyJob::new(shape, now),
            reads: ReadTarget {
                switch: self.memnode_side,
                memnode: src_addr,
                memnode_qpn: src_qpn,
                va: req.source.va.wrapping_add(checkpoint),
                rkey: req.source.rkey,
            },
            resumed_from: checkpoint,
            resumed,
            keys: (src_key, dst_key),
            qps: created.clone(),
        };
        let status = active.status();
        lock(&self.copies).activate(slot, active);
        let mut state = lock(&self.state);
        let record = CopyRecord {
            id,
            request: req.clone(),
            checkpoint,
            state: CopyState::Running,
            qps: created.clone(),
            resumed,
        };
        match state.copies.iter_mut().find(|c| c.id == id) {
            Some(r) => *r = record,
            None => state.copies.push(record),
        }
        self.persist(&state)?;
        tracing::info!(copy = id, slot, len, checkpoint, "copy started");
        Ok(status)
    }

    /// One copy's progress.
    pub fn copy_status(&self, id: u64) -> Option<CopyStatus> {
        lock(&self.copies).status(id)
    }

    /// Every copy's progress.
    pub fn copy_statuses(&self) -> Vec<CopyStatus> {
        lock(&self.copies).statuses()
    }

    /// Drive the running copies and flows (the switch calls this after packets from the
    /// memnode side and on its timer): feed the data plane's digests to the copy engine
    /// and the flows, generate the READs they ask for, retire ended copies, write
    /// progress to the state file now and then (flows: before their moves leave).
    /// Returns the frames to send.
    pub fn drive_copies(&self) -> Vec<Emitted> {
        let now = crate::switch::clock_us();
        // The digests of every copy slot: copies take theirs, flows' lanes theirs.
        let digests = self.pipeline().take_copy_digests();
        let mut out = self.drive_flows(&digests);
        let (ended, progress) = {
            let mut engine = lock(&self.copies);
            if !engine.busy() {
                return out;
            }
            let mut p = self.pipeline();
            engine.on_digests(&digests, now);
            for read in engine.poll(now) {
                out.extend(p.generate(read));
            }
            let ended = engine.take_ended();
            for (_, copy) in &ended {
                p.tables.copy_src.remove(&copy.keys.0);
                p.tables.copy_dst.remove(&copy.keys.1);
            }
            drop(p);
            let due = {
                let mut last = lock(&self.checkpointed_us);
                let due = !ended.is_empty() || now.saturating_sub(*last) >= COPY_CHECKPOINT_US;
                if due {
                    *last = now;
                }
                due
            };
            let progress = if due { engine.statuses() } else { Vec::new() };
            (ended, progress)
        };
        if !progress.is_empty() {
            let mut state = lock(&self.state);
            for s in &progress {
                if let Some(r) = state.copies.iter_mut().find(|r| r.id == s.id) {
                    r.checkpoint = s.bytes_done;
                    r.state = s.state.clone();
                    if s.state != CopyState::Running {
                        r.qps.clear();
                    }
                }
            }
            if let Err(e) = self.persist(&state) {
                tracing::warn!(error = %e, "copy progress not written to the state file");
            }
        }
        if !ended.is_empty() {
            let token = self.memnode_token.clone();
            let qps: Vec<CopyQp> = ended.iter().flat_map(|(_, c)| c.qps.clone()).collect();
            for (_, c) in &ended {
                tracing::info!(copy = c.id, state = ?c.job.state(), "copy ended");
            }
            // Deleting the queue pairs talks HTTP: not on the data-plane thread.
            let _ = std::thread::Builder::new()
                .name("accel-p4-copy-cleanup".into())
                .spawn(move || {
                    for qp in qps {
                        let _ = memnode_admin::delete_qp_as(&qp.memnode, token.as_deref(), qp.qpn);
                    }
                });
        }
        out
    }
}
