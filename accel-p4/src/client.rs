//! Client side: create a soft-RoCE queue pair to a memnode *through* the switch.

use memnode::api::CreateQpResponse;
use memnode::client::{ClientError, UdpConnection, request};
use verbs::transport::ConnectError;
use verbs::transport::udp::{RemoteQpParams, UdpTransport};

use crate::control::SwitchQpRequest;

/// Like [`memnode::client::connect_udp_qp`], but the QP goes through the switch at
/// `switch_admin`: the switch creates the memnode's responder (`POST /v1/qps`) and
/// answers with its client-side address, which the client sends to.
pub fn connect_udp_qp(
    switch_admin: &str,
    memnode_admin: &str,
    transport: &mut UdpTransport,
) -> Result<UdpConnection, ClientError> {
    let local = transport.prepare();
    if local.addr.ip().is_unspecified() {
        return Err(ClientError::Connect(ConnectError::Invalid(format!(
            "the transport is bound to {}; bind it to a specific IPv4 address",
            local.addr
        ))));
    }
    let body = serde_json::to_vec(&SwitchQpRequest {
        memnode: memnode_admin.to_owned(),
        qpn: local.qpn,
        psn: local.psn,
        addr: local.addr,
        pmtu: transport.config().pmtu.bytes(),
    })
    .map_err(|e| ClientError::Protocol(e.to_string()))?;
    let r = request(switch_admin, "POST", "/v1/qps", Some(&body))?;
    if r.status != 201 {
        return Err(ClientError::Protocol(format!(
            "POST /v1/qps on the switch: {} {}",
            r.status,
            String::from_utf8_lossy(&r.body)
        )));
    }
    let resp: CreateQpResponse =
        serde_json::from_slice(&r.body).map_err(|e| ClientError::Protocol(e.to_string()))?;
    let handle = transport.connect(
        local,
        RemoteQpParams {
            addr: resp.addr,
            qpn: resp.qpn,
        },
    )?;
    Ok(UdpConnection {
        handle,
        local_qpn: local.qpn,
        remote_qpn: resp.qpn,
        remote_addr: resp.addr,
        regions: resp.regions,
    })
}
