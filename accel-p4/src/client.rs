//! Client side: create a soft-RoCE queue pair to a memnode *through* the switch, with
//! the one queue-pair setup ([`dmkv_api::qp::QpPath::ViaSwitch`]).

use dmkv_api::ClientError;
use dmkv_api::qp::{QpPath, UdpConnection};
use verbs::transport::udp::UdpTransport;

/// Like a direct queue pair to the memnode at `memnode_admin`, but through the switch
/// at `switch_admin`: the switch creates the memnode's responder (`POST /v1/qps`) and
/// answers with its client-side address, which the client sends to.
pub fn connect_udp_qp(
    switch_admin: &str,
    memnode_admin: &str,
    transport: &mut UdpTransport,
) -> Result<UdpConnection, ClientError> {
    dmkv_api::qp::connect_udp_qp(QpPath::ViaSwitch(switch_admin), memnode_admin, transport)
}
