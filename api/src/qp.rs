//! The one queue-pair setup: a soft-RoCE queue pair from a client's [`UdpTransport`]
//! to a memory node, along one of the [`QpPath`]s.
//!
//! Every path reserves a QPN and PSN in the transport, has a responder created for
//! them (by the memory node's admin API, or by the switch's, which creates it on the
//! node itself) and connects the transport to it. The transport must be bound to a
//! specific IPv4 address (e.g. with [`UdpTransport::for_remote`]), because the
//! addresses are covered by the ICRC.

use std::net::SocketAddrV4;

use verbs::transport::udp::{LocalQpParams, RemoteQpParams, UdpTransport};
use verbs::transport::{ConnectError, QpHandle};

use crate::error::ClientError;
use crate::memnode::{CreateQpRequest, RegionDescriptor, RpcRingInfo};
use crate::{memnode_admin, switch};

/// Where a session sends a queue pair's datagrams instead of the memory node itself,
/// and the address the memory node sees them come from: a middlebox on the path
/// (a switch, a test's fault-injecting relay).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpRoute {
    /// Where the client sends (and whence it receives) the queue pair's datagrams.
    pub client_side: SocketAddrV4,
    /// The address the memory node exchanges the queue pair's datagrams with.
    pub memnode_side: SocketAddrV4,
}

/// Puts a middlebox between a session's `udp` queue pairs and the memory nodes.
///
/// The middlebox must rewrite the ICRC of what it forwards, since the addresses
/// are covered by it.
pub trait UdpRelay: Send + Sync {
    /// A route for a queue pair from `client` (the session's socket) to the memory
    /// node's soft-RoCE address `memnode`.
    fn route(&self, client: SocketAddrV4, memnode: SocketAddrV4) -> Result<UdpRoute, String>;
}

/// How a queue pair reaches its memory node.
#[derive(Clone, Copy)]
pub enum QpPath<'a> {
    /// Straight to the memory node, at the data address its admin API reports.
    Direct,
    /// Through the switch accelerator whose admin URL this is: the switch creates the
    /// node's responder and routes the connection.
    ViaSwitch(&'a str),
    /// Through a relay, to the memory node whose soft-RoCE address is `memnode`.
    Relay {
        /// The relay.
        relay: &'a dyn UdpRelay,
        /// The memory node's soft-RoCE address.
        memnode: SocketAddrV4,
    },
}

impl std::fmt::Debug for QpPath<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QpPath::Direct => write!(f, "Direct"),
            QpPath::ViaSwitch(url) => f.debug_tuple("ViaSwitch").field(url).finish(),
            QpPath::Relay { memnode, .. } => {
                f.debug_struct("Relay").field("memnode", memnode).finish()
            }
        }
    }
}

/// A soft-RoCE queue pair set up by [`connect_udp_qp`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpConnection {
    /// The queue pair in the client's transport.
    pub handle: QpHandle,
    /// The client's QPN.
    pub local_qpn: u32,
    /// The memory node's responder QPN (what [`memnode_admin::delete_qp`] takes).
    pub remote_qpn: u32,
    /// Where the client sends requests.
    pub remote_addr: SocketAddrV4,
    /// The node's regions.
    pub regions: Vec<RegionDescriptor>,
    /// With [`QpPath::ViaSwitch`]: the switch's connection id, when it reports one
    /// ([`switch::remove_route_as`] takes it).
    pub switch_conn: Option<u8>,
    /// How long the responder may stay without requests before the memory node
    /// destroys it ([`crate::memnode::CreateQpResponse::idle_timeout_ms`]); `None`: never.
    pub idle_timeout_ms: Option<u64>,
    /// The queue pair's own memory key when it was created with a grant
    /// ([`crate::memnode::CreateQpResponse::rkey`]): every remote address on it uses
    /// this key. `None`: the region's keys.
    pub rkey: Option<u32>,
    /// When the memory node runs RPC workers, the first PSN of its replies
    /// ([`crate::memnode::CreateQpResponse::rpc_psn`]): give it to
    /// `UdpTransport::set_recv_queue` to receive them. `None`: a passive node.
    pub rpc_psn: Option<u32>,
    /// The queue pair's write-based RPC request ring, when it asked for one
    /// ([`connect_udp_qp_with_ring_as`]) and the node had one free.
    pub rpc_ring: Option<RpcRingInfo>,
}

/// Creates a queue pair from `transport` to the memory node whose admin URL is
/// `memnode_admin`, along `path`. On failure nothing is left on the memory node.
pub fn connect_udp_qp(
    path: QpPath<'_>,
    memnode_admin: &str,
    transport: &mut UdpTransport,
) -> Result<UdpConnection, ClientError> {
    connect_udp_qp_as(path, memnode_admin, transport, None)
}

/// [`connect_udp_qp`], presenting `credential` to the memory node: its admin token (a
/// whole-region queue pair) or a grant (a queue pair scoped to the grant's extents,
/// with its own key in [`UdpConnection::rkey`]). Through the switch accelerator the
/// credential goes to the switch: its control plane creates the responder with its own
/// credential, and confines a connection made with a grant to the grant's windows in
/// its pipeline.
pub fn connect_udp_qp_as(
    path: QpPath<'_>,
    memnode_admin: &str,
    transport: &mut UdpTransport,
    credential: Option<&str>,
) -> Result<UdpConnection, ClientError> {
    connect_udp_qp_with_ring_as(path, memnode_admin, transport, credential, false)
}

/// [`connect_udp_qp_as`], asking the memory node for a write-based RPC request ring
/// when `rpc_ring` ([`UdpConnection::rpc_ring`] names it if the node had one). Through
/// the switch accelerator no ring is asked for.
pub fn connect_udp_qp_with_ring_as(
    path: QpPath<'_>,
    memnode_admin: &str,
    transport: &mut UdpTransport,
    credential: Option<&str>,
    rpc_ring: bool,
) -> Result<UdpConnection, ClientError> {
    let server = match path {
        QpPath::Direct => {
            let node = memnode_admin::node_info_as(memnode_admin, credential)?;
            Some(memnode_admin::data_addr(memnode_admin, &node)?)
        }
        QpPath::Relay { memnode, .. } => Some(memnode),
        QpPath::ViaSwitch(_) => None,
    };
    let local = transport.prepare();
    if local.addr.ip().is_unspecified() {
        return Err(ClientError::Connect(ConnectError::Invalid(format!(
            "the transport is bound to {}; bind it to a specific IPv4 address \
             (UdpTransport::for_remote)",
            local.addr
        ))));
    }
    let pmtu = transport.config().pmtu.bytes();
    match (path, server) {
        (QpPath::ViaSwitch(switch_admin), _) => {
            let resp = switch::create_qp_as(
                switch_admin,
                credential,
                &switch::SwitchQpRequest {
                    memnode: memnode_admin.to_owned(),
                    qpn: local.qpn,
                    psn: local.psn,
                    addr: local.addr,
                    pmtu,
                    coalesce: local.coalesce,
                },
            )?;
            // The switch's client-side socket is the peer: runs go segmented when it
            // says it coalesces.
            let remote = RemoteQpParams {
                addr: resp.qp.addr,
                qpn: resp.qp.qpn,
                coalesce: resp.qp.coalesce,
            };
            let handle = transport.connect(local, remote).inspect_err(|_| {
                if let Some(conn) = resp.conn {
                    let _ = switch::remove_route_as(switch_admin, credential, conn);
                }
            })?;
            Ok(UdpConnection {
                handle,
                local_qpn: local.qpn,
                remote_qpn: resp.qp.qpn,
                remote_addr: resp.qp.addr,
                regions: resp.qp.regions,
                switch_conn: resp.conn,
                idle_timeout_ms: resp.qp.idle_timeout_ms,
                rkey: resp.qp.rkey,
                rpc_psn: resp.qp.rpc_psn,
                rpc_ring: None,
            })
        }
        (QpPath::Relay { relay, .. }, Some(server)) => {
            let route = relay
                .route(local.addr, server)
                .map_err(|e| ClientError::Connect(ConnectError::Invalid(format!("relay: {e}"))))?;
            to_memnode(
                memnode_admin,
                credential,
                transport,
                local,
                (route.memnode_side, server),
                Some(route.client_side),
                rpc_ring,
            )
        }
        (_, Some(server)) => to_memnode(
            memnode_admin,
            credential,
            transport,
            local,
            (local.addr, server),
            None,
            rpc_ring,
        ),
        (_, None) => Err(ClientError::Protocol(
            "no memory-node address for the queue pair".into(),
        )),
    }
}

/// Has the memory node create the responder of `local` (whose datagrams it exchanges
/// with `requester`, sent to `server`; `ends` is the pair of them) with a request
/// ring if `rpc_ring`, checks the path MTU it agreed to, and connects `transport` to
/// it (at `send_to`, else the responder's own address).
fn to_memnode(
    admin: &str,
    credential: Option<&str>,
    transport: &mut UdpTransport,
    local: LocalQpParams,
    ends: (SocketAddrV4, SocketAddrV4),
    send_to: Option<SocketAddrV4>,
    rpc_ring: bool,
) -> Result<UdpConnection, ClientError> {
    let (requester, server) = ends;
    let pmtu = transport.config().pmtu.bytes();
    // Segmented runs only between the two ends themselves: a relay in between reads
    // datagrams its own way.
    let direct = send_to.is_none();
    let created = memnode_admin::create_qp_with_ring_as(
        admin,
        credential,
        &CreateQpRequest {
            qpn: local.qpn,
            psn: local.psn,
            addr: requester,
            pmtu,
            server_addr: Some(server),
            coalesce: direct && local.coalesce,
        },
        rpc_ring,
    )?;
    let ring = created.rpc_ring;
    let resp = created.qp;
    if resp.pmtu != pmtu {
        let _ = memnode_admin::delete_qp_as(admin, credential, resp.qpn);
        return Err(ClientError::Protocol(format!(
            "the node agreed to path MTU {} instead of {pmtu}",
            resp.pmtu
        )));
    }
    let remote = RemoteQpParams {
        addr: send_to.unwrap_or(resp.addr),
        qpn: resp.qpn,
        coalesce: direct && resp.coalesce,
    };
    let handle = transport.connect(local, remote).inspect_err(|_| {
        let _ = memnode_admin::delete_qp_as(admin, credential, resp.qpn);
    })?;
    Ok(UdpConnection {
        handle,
        local_qpn: local.qpn,
        remote_qpn: resp.qpn,
        remote_addr: remote.addr,
        regions: resp.regions,
        switch_conn: None,
        idle_timeout_ms: resp.idle_timeout_ms,
        rkey: resp.rkey,
        rpc_psn: resp.rpc_psn,
        rpc_ring: ring,
    })
}
