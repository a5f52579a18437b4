//! The control plane: connections (routes), the switch-owned range, fault settings, and
//! queue-pair creation through the switch.
//!
//! The soft switch is a UDP middlebox with two sockets: the *client side* address that
//! clients send to (for every memnode it fronts), and the *memnode side* address it
//! forwards from. A memnode's responder QP authenticates its requester by the IPv4/UDP
//! addressing covered by the ICRC, so it must be created with the switch's memnode-side
//! address as the client address. `POST /v1/qps` does that: it takes a client's
//! [`memnode::api::CreateQpRequest`] plus the memnode's admin URL, creates the responder
//! on the memnode with `addr` = the switch's memnode-side socket and `server_addr` = the
//! memnode's data address, installs both routes, and answers with the switch's
//! client-side address as the address to send to. `POST /v1/routes` installs routes for a
//! QP created some other way.
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

use memnode::api::{CreateQpRequest, CreateQpResponse};
use serde::{Deserialize, Serialize};

use crate::model::{AtomicRange, FaultPolicy, Pipeline, RouteAction, RouteKey, TableError};
use crate::spec::{self, DIR_DOWN, DIR_UP, MAX_CONNS};

/// One connection through the switch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Route {
    /// Connection id (allocated when absent).
    #[serde(default)]
    pub conn: Option<u8>,
    /// The client's UDP address.
    pub client: SocketAddrV4,
    /// The client's QPN.
    pub client_qpn: u32,
    /// The client's first PSN.
    pub client_psn: u32,
    /// The memnode's soft-RoCE address.
    pub memnode: SocketAddrV4,
    /// The memnode's responder QPN.
    pub memnode_qpn: u32,
    /// Path MTU in bytes.
    #[serde(default = "default_pmtu")]
    pub pmtu: u32,
}

fn default_pmtu() -> u32 {
    1024
}

/// `POST /v1/qps`: a client's QP request and the memnode it is for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwitchQpRequest {
    /// The memnode's admin URL (`host:port` or `http://host:port`).
    pub memnode: String,
    /// The client's queue pair number.
    pub qpn: u32,
    /// The client's first PSN.
    pub psn: u32,
    /// The client's UDP address.
    pub addr: SocketAddrV4,
    /// Path MTU (default 1024).
    #[serde(default = "default_pmtu")]
    pub pmtu: u32,
}

/// Fault settings (`PUT /v1/faults`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
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
}

impl From<TableError> for ControlError {
    fn from(e: TableError) -> ControlError {
        ControlError::Conflict(e.to_string())
    }
}

/// The control plane of one switch.
#[derive(Debug)]
pub struct Control {
    pipeline: Arc<Mutex<Pipeline>>,
    state: Mutex<ControlState>,
    state_file: Option<PathBuf>,
    client_side: SocketAddrV4,
    memnode_side: SocketAddrV4,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Control {
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
        Ok(control)
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
            if init {
                p.init_connection(conn, route.client_psn);
            }
        }
        state.routes.retain(|r| r.conn != Some(conn));
        state.routes.push(route.clone());
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
        }
        self.persist(&state)?;
        Ok(route)
    }

    /// Create a responder QP on the memnode for a client QP that goes through the switch
    /// and install its routes (blocking: talks HTTP to the memnode).
    pub fn create_qp(&self, req: &SwitchQpRequest) -> Result<CreateQpResponse, ControlError> {
        let node = memnode::client::node_info(&req.memnode)
            .map_err(|e| ControlError::Memnode(e.to_string()))?;
        let memnode_addr = match node.data_addr {
            Some(a) => a,
            None => {
                let host = req
                    .memnode
                    .trim_start_matches("http://")
                    .split(':')
                    .next()
                    .unwrap_or_default()
                    .parse()
                    .map_err(|_| {
                        ControlError::Invalid(format!(
                            "the memnode listens on {}; give its admin URL as an IPv4 address",
                            node.listen
                        ))
                    })?;
                SocketAddrV4::new(host, node.data_port)
            }
        };
        let resp = memnode::client::create_qp(
            &req.memnode,
            &CreateQpRequest {
                qpn: req.qpn,
                psn: req.psn,
                addr: self.memnode_side,
                pmtu: req.pmtu,
                server_addr: Some(memnode_addr),
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
        };
        if let Err(e) = self.install(route, true) {
            let _ = memnode::client::delete_qp(&req.memnode, resp.qpn);
            return Err(e);
        }
        Ok(CreateQpResponse {
            addr: self.client_side,
            ..resp
        })
    }
}
