//! Calls of a memory node's admin API ([`crate::memnode`] documents), over the one
//! HTTP client. `admin` arguments are `host:port` or `http://host:port`.

use std::net::{IpAddr, SocketAddrV4, ToSocketAddrs};

use crate::error::ClientError;
use crate::http::{HttpClient, RawResponse, json};
use crate::memnode::{
    CreateQpRequest, CreateQpResponse, CreatedQp, NodeInfo, QpInfo, QpsResponse, RegionDescriptor,
    RegionsResponse, UpdateGrantRequest, ZeroRequest, ZeroResponse,
};
use crate::memnode_rdma::{CreateRdmaQpRequest, CreateRdmaQpResponse, RdmaQpsResponse};

fn client(admin: &str) -> Result<HttpClient, ClientError> {
    HttpClient::new(admin)
}

/// A client of the admin API at `admin` presenting `credential` (the node's admin
/// token, or a grant) as `Authorization: Bearer`.
fn client_as(admin: &str, credential: Option<&str>) -> Result<HttpClient, ClientError> {
    Ok(HttpClient::new(admin)?.with_token(credential.map(str::to_owned)))
}

/// Sends one request to the admin API at `admin` and returns the raw answer, whatever
/// its status. `body` is sent as `application/json` when given.
pub fn request(
    admin: &str,
    method: &'static str,
    path: &str,
    body: Option<&[u8]>,
) -> Result<RawResponse, ClientError> {
    client(admin)?.request(method, path, body)
}

/// [`request`] presenting `credential` (admin token or grant).
pub fn request_as(
    admin: &str,
    credential: Option<&str>,
    method: &'static str,
    path: &str,
    body: Option<&[u8]>,
) -> Result<RawResponse, ClientError> {
    client_as(admin, credential)?.request(method, path, body)
}

/// `GET /v1/node`.
pub fn node_info(admin: &str) -> Result<NodeInfo, ClientError> {
    node_info_as(admin, None)
}

/// `GET /v1/node`, presenting `credential`.
pub fn node_info_as(admin: &str, credential: Option<&str>) -> Result<NodeInfo, ClientError> {
    client_as(admin, credential)?.call("GET", "/v1/node", None, &[200])
}

/// `GET /v1/regions`.
pub fn regions(admin: &str) -> Result<Vec<RegionDescriptor>, ClientError> {
    regions_as(admin, None)
}

/// `GET /v1/regions`, presenting `credential`.
pub fn regions_as(
    admin: &str,
    credential: Option<&str>,
) -> Result<Vec<RegionDescriptor>, ClientError> {
    client_as(admin, credential)?
        .call::<RegionsResponse>("GET", "/v1/regions", None, &[200])
        .map(|r| r.regions)
}

/// `GET /v1/qps`.
pub fn list_qps(admin: &str) -> Result<Vec<QpInfo>, ClientError> {
    list_qps_as(admin, None)
}

/// `GET /v1/qps`, presenting `credential` (the admin token).
pub fn list_qps_as(admin: &str, credential: Option<&str>) -> Result<Vec<QpInfo>, ClientError> {
    client_as(admin, credential)?
        .call::<QpsResponse>("GET", "/v1/qps", None, &[200])
        .map(|r| r.qps)
}

/// `GET /v1/qps/{qpn}`.
pub fn qp_info(admin: &str, qpn: u32) -> Result<QpInfo, ClientError> {
    qp_info_as(admin, None, qpn)
}

/// `GET /v1/qps/{qpn}`, presenting `credential`.
pub fn qp_info_as(admin: &str, credential: Option<&str>, qpn: u32) -> Result<QpInfo, ClientError> {
    client_as(admin, credential)?.call("GET", &format!("/v1/qps/{qpn}"), None, &[200])
}

/// `POST /v1/regions/{rkey}/zero`: zero `len` bytes at `va` of region `rkey`;
/// returns the bytes zeroed.
pub fn zero_range(admin: &str, rkey: u32, va: u64, len: u64) -> Result<u64, ClientError> {
    zero_range_as(admin, None, rkey, va, len)
}

/// [`zero_range`], presenting `credential` (the admin token).
pub fn zero_range_as(
    admin: &str,
    credential: Option<&str>,
    rkey: u32,
    va: u64,
    len: u64,
) -> Result<u64, ClientError> {
    let req = ZeroRequest { va, len };
    client_as(admin, credential)?
        .call::<ZeroResponse>(
            "POST",
            &format!("/v1/regions/{rkey:#x}/zero"),
            Some(&json(&req)?),
            &[200],
        )
        .map(|r| r.zeroed)
}

/// `POST /v1/qps`.
pub fn create_qp(admin: &str, req: &CreateQpRequest) -> Result<CreateQpResponse, ClientError> {
    create_qp_as(admin, None, req)
}

/// `POST /v1/qps`, presenting `credential`: the admin token (a whole-region queue
/// pair) or a grant (a queue pair scoped to the grant's extents, with its own key).
pub fn create_qp_as(
    admin: &str,
    credential: Option<&str>,
    req: &CreateQpRequest,
) -> Result<CreateQpResponse, ClientError> {
    client_as(admin, credential)?.call("POST", "/v1/qps", Some(&json(req)?), &[201])
}

/// [`create_qp_as`], asking for a write-based RPC request ring when `rpc_ring`
/// (`POST /v1/qps?rpc_ring=true`); the answer names the ring if the node had one.
pub fn create_qp_with_ring_as(
    admin: &str,
    credential: Option<&str>,
    req: &CreateQpRequest,
    rpc_ring: bool,
) -> Result<CreatedQp, ClientError> {
    let path = if rpc_ring {
        "/v1/qps?rpc_ring=true"
    } else {
        "/v1/qps"
    };
    client_as(admin, credential)?.call("POST", path, Some(&json(req)?), &[201])
}

/// `POST /v1/rdma/qps`, presenting `credential`: the node creates and connects the
/// responder half of an RC queue pair on its RDMA NIC (the admin token: whole-region
/// access; a grant: the grant's extents under keys only this queue pair can use).
pub fn create_rdma_qp_as(
    admin: &str,
    credential: Option<&str>,
    req: &CreateRdmaQpRequest,
) -> Result<CreateRdmaQpResponse, ClientError> {
    client_as(admin, credential)?.call("POST", "/v1/rdma/qps", Some(&json(req)?), &[201])
}

/// `GET /v1/rdma/qps` (admin token).
pub fn list_rdma_qps_as(
    admin: &str,
    credential: Option<&str>,
) -> Result<RdmaQpsResponse, ClientError> {
    client_as(admin, credential)?.call("GET", "/v1/rdma/qps", None, &[200])
}

/// `DELETE /v1/rdma/qps/{qpn}`: destroys an RDMA responder queue pair (the admin
/// token, or the grant of the client it belongs to).
pub fn delete_rdma_qp_as(
    admin: &str,
    credential: Option<&str>,
    qpn: u32,
) -> Result<(), ClientError> {
    client_as(admin, credential)?.no_content("DELETE", &format!("/v1/rdma/qps/{qpn}"))
}

/// `POST /v1/qps/{qpn}/grant`: gives queue pair `qpn` a newer `grant` (for the same
/// client), presenting `credential`; returns the queue pair as it is now.
pub fn update_grant_as(
    admin: &str,
    credential: Option<&str>,
    qpn: u32,
    grant: &str,
) -> Result<QpInfo, ClientError> {
    let req = UpdateGrantRequest {
        grant: grant.to_owned(),
    };
    client_as(admin, credential)?.call(
        "POST",
        &format!("/v1/qps/{qpn}/grant"),
        Some(&json(&req)?),
        &[200],
    )
}

/// `DELETE /v1/qps/{qpn}`.
pub fn delete_qp(admin: &str, qpn: u32) -> Result<(), ClientError> {
    delete_qp_as(admin, None, qpn)
}

/// `DELETE /v1/qps/{qpn}`, presenting `credential`.
pub fn delete_qp_as(admin: &str, credential: Option<&str>, qpn: u32) -> Result<(), ClientError> {
    client_as(admin, credential)?.no_content("DELETE", &format!("/v1/qps/{qpn}"))
}

/// Where to send a node's soft-RoCE datagrams: the node's own data address, or the
/// admin host's IPv4 address with the data port when the node listens on 0.0.0.0.
pub fn data_addr(admin: &str, node: &NodeInfo) -> Result<SocketAddrV4, ClientError> {
    if let Some(a) = node.data_addr {
        return Ok(a);
    }
    let host_port = client(admin)?.host_port().to_owned();
    let ip = host_port
        .to_socket_addrs()
        .map_err(|source| ClientError::Io {
            context: format!("resolving {host_port}"),
            source,
        })?
        .find_map(|a| match a.ip() {
            IpAddr::V4(ip) if !ip.is_unspecified() => Some(ip),
            _ => None,
        })
        .ok_or_else(|| {
            ClientError::Protocol(format!(
                "the node listens on {} and its admin host {admin} has no IPv4 address to send to",
                node.listen
            ))
        })?;
    Ok(SocketAddrV4::new(ip, node.data_port))
}
