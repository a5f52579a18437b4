//! Calls of a memory node's admin API ([`crate::memnode`] documents), over the one
//! HTTP client. `admin` arguments are `host:port` or `http://host:port`.

use std::net::{IpAddr, SocketAddrV4, ToSocketAddrs};

use crate::error::ClientError;
use crate::http::{HttpClient, RawResponse, json};
use crate::memnode::{
    CreateQpRequest, CreateQpResponse, NodeInfo, QpInfo, QpsResponse, RegionDescriptor,
    RegionsResponse, ZeroRequest, ZeroResponse,
};

fn client(admin: &str) -> Result<HttpClient, ClientError> {
    HttpClient::new(admin)
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

/// `GET /v1/node`.
pub fn node_info(admin: &str) -> Result<NodeInfo, ClientError> {
    client(admin)?.call("GET", "/v1/node", None, &[200])
}

/// `GET /v1/regions`.
pub fn regions(admin: &str) -> Result<Vec<RegionDescriptor>, ClientError> {
    client(admin)?
        .call::<RegionsResponse>("GET", "/v1/regions", None, &[200])
        .map(|r| r.regions)
}

/// `GET /v1/qps`.
pub fn list_qps(admin: &str) -> Result<Vec<QpInfo>, ClientError> {
    client(admin)?
        .call::<QpsResponse>("GET", "/v1/qps", None, &[200])
        .map(|r| r.qps)
}

/// `GET /v1/qps/{qpn}`.
pub fn qp_info(admin: &str, qpn: u32) -> Result<QpInfo, ClientError> {
    client(admin)?.call("GET", &format!("/v1/qps/{qpn}"), None, &[200])
}

/// `POST /v1/regions/{rkey}/zero`: zero `len` bytes at `va` of region `rkey`;
/// returns the bytes zeroed.
pub fn zero_range(admin: &str, rkey: u32, va: u64, len: u64) -> Result<u64, ClientError> {
    let req = ZeroRequest { va, len };
    client(admin)?
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
    client(admin)?.call("POST", "/v1/qps", Some(&json(req)?), &[201])
}

/// `DELETE /v1/qps/{qpn}`.
pub fn delete_qp(admin: &str, qpn: u32) -> Result<(), ClientError> {
    client(admin)?.no_content("DELETE", &format!("/v1/qps/{qpn}"))
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
