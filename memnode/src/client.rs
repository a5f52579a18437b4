//! The admin API's client side: the calls of [`dmkv_api::memnode_admin`] over the one
//! control-plane HTTP client, and [`connect_udp_qp`], which sets up a soft-RoCE queue
//! pair straight to a memory node with the one queue-pair setup ([`dmkv_api::qp`]).
//!
//! `admin` arguments are `host:port` or `http://host:port` (a trailing `/` is fine).

use verbs::transport::QpHandle;
use verbs::transport::udp::UdpTransport;

pub use dmkv_api::memnode_admin::{
    create_qp, data_addr, delete_qp, list_qps, node_info, qp_info, regions, request, zero_range,
};
pub use dmkv_api::qp::UdpConnection;
pub use dmkv_api::{ClientError, RawResponse};

use crate::api::RegionDescriptor;
use dmkv_api::qp::QpPath;

/// Creates a queue pair to the memory node at `admin`: reserves a QPN and PSN in
/// `transport`, asks the node for a responder (`POST /v1/qps`) and connects.
///
/// The transport must be bound to a specific IPv4 address (e.g. with
/// [`UdpTransport::for_remote`] or `UdpTransport::bind(127.0.0.1, …)`), because the
/// addresses are covered by the ICRC.
pub fn connect_udp_qp(
    admin: &str,
    transport: &mut UdpTransport,
) -> Result<UdpConnection, ClientError> {
    dmkv_api::qp::connect_udp_qp(QpPath::Direct, admin, transport)
}

/// [`connect_udp_qp`], returning just the queue pair handle and the node's regions.
pub fn connect_udp(
    admin: &str,
    transport: &mut UdpTransport,
) -> Result<(QpHandle, Vec<RegionDescriptor>), ClientError> {
    connect_udp_qp(admin, transport).map(|c| (c.handle, c.regions))
}
