//! A queue pair on an RDMA NIC to a memory node (cargo feature `rdma`): the client
//! half is prepared on the client's [`RdmaTransport`], the node creates and connects
//! its half on `POST /v1/rdma/qps`, and the client half is connected to it. On failure
//! nothing is left on the memory node.

use verbs::transport::QpHandle;
use verbs::transport::rdma::{RdmaRemoteParams, RdmaTransport};

use crate::error::ClientError;
use crate::memnode_admin::{create_rdma_qp_as, delete_rdma_qp_as};
use crate::memnode_rdma::{CreateRdmaQpRequest, RdmaWindow, gid_from_hex, gid_to_hex};

/// A connected RDMA queue pair to a memory node.
#[derive(Debug, Clone)]
pub struct RdmaConnection {
    /// The queue pair in the client's transport.
    pub handle: QpHandle,
    /// The node's queue pair number (for `DELETE /v1/rdma/qps/{qpn}`).
    pub remote_qpn: u32,
    /// The client's queue pair number.
    pub local_qpn: u32,
    /// What memory the queue pair reaches, under which keys and NIC addresses.
    pub windows: Vec<RdmaWindow>,
    /// When the node destroys the queue pair (its grant expires; unix ms).
    pub expires_at_ms: Option<u64>,
}

/// Creates an RDMA queue pair from `transport` to the memory node whose admin URL is
/// `memnode_admin`, presenting `credential` (admin token or grant).
pub fn connect_rdma_qp_as(
    memnode_admin: &str,
    transport: &mut RdmaTransport,
    credential: Option<&str>,
) -> Result<RdmaConnection, ClientError> {
    connect_rdma_qp_with(memnode_admin, transport, credential, Vec::new())
}

/// [`connect_rdma_qp_as`] with more grants of the same client (`credential` being a
/// grant): the queue pair reaches the extents of all of them.
pub fn connect_rdma_qp_with(
    memnode_admin: &str,
    transport: &mut RdmaTransport,
    credential: Option<&str>,
    grants: Vec<String>,
) -> Result<RdmaConnection, ClientError> {
    let local = transport.prepare()?;
    let req = CreateRdmaQpRequest {
        qpn: local.qpn,
        psn: local.psn,
        gid: gid_to_hex(&local.gid),
        lid: local.lid,
        mtu: local.mtu.bytes(),
        grants,
    };
    let made = match create_rdma_qp_as(memnode_admin, credential, &req) {
        Ok(made) => made,
        Err(e) => {
            transport.discard(local.qpn);
            return Err(e);
        }
    };
    let undo = |e: ClientError, transport: &mut RdmaTransport| {
        transport.discard(local.qpn);
        let _ = delete_rdma_qp_as(memnode_admin, credential, made.qpn);
        e
    };
    let Some(gid) = gid_from_hex(&made.gid) else {
        return Err(undo(
            ClientError::Protocol(format!(
                "the node's GID {:?} is not 32 hex digits",
                made.gid
            )),
            transport,
        ));
    };
    let mtu = match verbs::rc::Pmtu::new(made.mtu) {
        Ok(m) => m,
        Err(e) => return Err(undo(ClientError::Protocol(e), transport)),
    };
    let remote = RdmaRemoteParams {
        qpn: made.qpn,
        psn: made.psn,
        gid,
        lid: made.lid,
        mtu,
    };
    match transport.connect(local, remote) {
        Ok(handle) => Ok(RdmaConnection {
            handle,
            remote_qpn: made.qpn,
            local_qpn: local.qpn,
            windows: made.windows,
            expires_at_ms: made.expires_at_ms,
        }),
        Err(e) => Err(undo(ClientError::Connect(e), transport)),
    }
}
