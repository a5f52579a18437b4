//! A small blocking client of the admin API (HTTP/1.1 over `std::net::TcpStream`), and
//! [`connect_udp`], which sets up a soft-RoCE queue pair to a memory node.
//!
//! `admin` arguments are `host:port` or `http://host:port` (a trailing `/` is fine).

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, SocketAddrV4, TcpStream, ToSocketAddrs};
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use verbs::transport::udp::{RemoteQpParams, UdpTransport};
use verbs::transport::{ConnectError, QpHandle};

use crate::api::{
    CreateQpRequest, CreateQpResponse, ErrorBody, NodeInfo, QpInfo, QpsResponse, RegionDescriptor,
    RegionsResponse, ZeroRequest, ZeroResponse,
};

/// Connect, read and write timeout of admin requests.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// Largest response accepted.
const MAX_RESPONSE: usize = 16 << 20;

/// Why an admin request failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The admin address could not be understood.
    #[error("invalid admin address {0:?}: expected host:port or http://host:port")]
    InvalidAddress(String),
    /// Connecting, sending or receiving failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// Why.
        source: std::io::Error,
    },
    /// The node answered with an error.
    #[error("{method} {path} failed with HTTP {status} ({code}): {message}")]
    Http {
        /// Request method.
        method: &'static str,
        /// Request path.
        path: String,
        /// HTTP status.
        status: u16,
        /// The error code of the body (`unknown` if the body was not an error document).
        code: String,
        /// The message of the body.
        message: String,
    },
    /// The answer was not valid HTTP or not the expected JSON.
    #[error("unexpected answer from the memory node: {0}")]
    Protocol(String),
    /// The queue pair could not be set up on the client side.
    #[error("setting up the client queue pair: {0}")]
    Connect(#[from] ConnectError),
}

impl ClientError {
    /// The HTTP status, if the node answered with an error.
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Http { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// A raw HTTP answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawResponse {
    /// Status code.
    pub status: u16,
    /// Header lines as (lower-case name, value).
    pub headers: Vec<(String, String)>,
    /// The body (de-chunked).
    pub body: Vec<u8>,
}

impl RawResponse {
    /// The value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// `host:port` of an admin address.
fn host_port(admin: &str) -> Result<String, ClientError> {
    let t = admin.trim();
    let t = t.strip_prefix("http://").unwrap_or(t);
    let t = t.trim_end_matches('/');
    if t.is_empty() || t.contains('/') || t.contains("://") || !t.contains(':') {
        return Err(ClientError::InvalidAddress(admin.to_owned()));
    }
    Ok(t.to_owned())
}

fn resolve(admin: &str) -> Result<Vec<SocketAddr>, ClientError> {
    let hp = host_port(admin)?;
    let addrs: Vec<SocketAddr> = hp
        .to_socket_addrs()
        .map_err(|source| ClientError::Io {
            context: format!("resolving {hp}"),
            source,
        })?
        .collect();
    if addrs.is_empty() {
        return Err(ClientError::InvalidAddress(admin.to_owned()));
    }
    Ok(addrs)
}

/// Sends one request and returns the raw answer, whatever its status.
///
/// `body` is sent as `application/json` when given.
pub fn request(
    admin: &str,
    method: &'static str,
    path: &str,
    body: Option<&[u8]>,
) -> Result<RawResponse, ClientError> {
    let hp = host_port(admin)?;
    let io = |what: &str| {
        let context = format!("{what} {method} {path} to {hp}");
        move |source| ClientError::Io { context, source }
    };
    let mut last = None;
    let mut stream = None;
    for addr in resolve(admin)? {
        match TcpStream::connect_timeout(&addr, TIMEOUT) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    let mut stream = match stream {
        Some(s) => s,
        None => {
            let e = last.unwrap_or_else(|| std::io::Error::other("no address to connect to"));
            return Err(io("connecting for")(e));
        }
    };
    stream
        .set_read_timeout(Some(TIMEOUT))
        .map_err(io("configuring"))?;
    stream
        .set_write_timeout(Some(TIMEOUT))
        .map_err(io("configuring"))?;
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {hp}\r\nConnection: close\r\nAccept: application/json\r\nUser-Agent: dmkv-memnode-client\r\n"
    );
    if let Some(b) = body {
        head.push_str("Content-Type: application/json\r\n");
        head.push_str(&format!("Content-Length: {}\r\n", b.len()));
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    if let Some(b) = body {
        out.extend_from_slice(b);
    }
    stream.write_all(&out).map_err(io("sending"))?;
    stream.flush().map_err(io("sending"))?;
    let mut raw = Vec::new();
    Read::by_ref(&mut stream)
        .take(MAX_RESPONSE as u64 + 1)
        .read_to_end(&mut raw)
        .map_err(io("reading the answer to"))?;
    if raw.len() > MAX_RESPONSE {
        return Err(ClientError::Protocol(format!(
            "answer to {method} {path} exceeds {MAX_RESPONSE} bytes"
        )));
    }
    parse_response(&raw)
}

/// Parses an HTTP/1.1 response (status line, headers, body with Content-Length,
/// chunked encoding or read-to-close).
pub fn parse_response(raw: &[u8]) -> Result<RawResponse, ClientError> {
    let bad = |why: &str| ClientError::Protocol(why.to_owned());
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bad("no end of headers"))?;
    let head = std::str::from_utf8(&raw[..split]).map_err(|_| bad("headers are not UTF-8"))?;
    let rest = &raw[split + 4..];
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or_default();
    if !version.starts_with("HTTP/1.") {
        return Err(bad(&format!(
            "not an HTTP/1.x status line: {status_line:?}"
        )));
    }
    let status: u16 = parts
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad(&format!("bad status line {status_line:?}")))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| {
            l.split_once(':')
                .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        })
        .collect();
    let find = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    let chunked =
        find("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    let body = if chunked {
        dechunk(rest)?
    } else if let Some(len) = find("content-length") {
        let len: usize = len.parse().map_err(|_| bad("bad Content-Length"))?;
        rest.get(..len)
            .ok_or_else(|| bad("body shorter than Content-Length"))?
            .to_vec()
    } else {
        rest.to_vec()
    };
    Ok(RawResponse {
        status,
        headers,
        body,
    })
}

fn dechunk(mut data: &[u8]) -> Result<Vec<u8>, ClientError> {
    let bad = |why: &str| ClientError::Protocol(format!("bad chunked body: {why}"));
    let mut out = Vec::new();
    loop {
        let eol = data
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or_else(|| bad("missing chunk size"))?;
        let size_text = std::str::from_utf8(&data[..eol]).map_err(|_| bad("size not UTF-8"))?;
        let size_text = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| bad("size not hex"))?;
        data = &data[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        let chunk = data.get(..size).ok_or_else(|| bad("chunk truncated"))?;
        out.extend_from_slice(chunk);
        data = data
            .get(size + 2..)
            .ok_or_else(|| bad("chunk not terminated"))?;
    }
}

fn call<T: DeserializeOwned>(
    admin: &str,
    method: &'static str,
    path: &str,
    body: Option<&[u8]>,
    expect: u16,
) -> Result<T, ClientError> {
    let r = request(admin, method, path, body)?;
    if r.status != expect {
        return Err(http_error(method, path, &r));
    }
    serde_json::from_slice(&r.body).map_err(|e| {
        ClientError::Protocol(format!(
            "{method} {path}: body is not the expected JSON: {e}"
        ))
    })
}

fn http_error(method: &'static str, path: &str, r: &RawResponse) -> ClientError {
    let (code, message) = match serde_json::from_slice::<ErrorBody>(&r.body) {
        Ok(e) => (e.code, e.error),
        Err(_) => (
            "unknown".to_owned(),
            String::from_utf8_lossy(&r.body).chars().take(200).collect(),
        ),
    };
    ClientError::Http {
        method,
        path: path.to_owned(),
        status: r.status,
        code,
        message,
    }
}

fn json<T: Serialize>(v: &T) -> Result<Vec<u8>, ClientError> {
    serde_json::to_vec(v).map_err(|e| ClientError::Protocol(format!("encoding the request: {e}")))
}

/// `GET /v1/node`.
pub fn node_info(admin: &str) -> Result<NodeInfo, ClientError> {
    call(admin, "GET", "/v1/node", None, 200)
}

/// `GET /v1/regions`.
pub fn regions(admin: &str) -> Result<Vec<RegionDescriptor>, ClientError> {
    call::<RegionsResponse>(admin, "GET", "/v1/regions", None, 200).map(|r| r.regions)
}

/// `GET /v1/qps`.
pub fn list_qps(admin: &str) -> Result<Vec<QpInfo>, ClientError> {
    call::<QpsResponse>(admin, "GET", "/v1/qps", None, 200).map(|r| r.qps)
}

/// `GET /v1/qps/{qpn}`.
pub fn qp_info(admin: &str, qpn: u32) -> Result<QpInfo, ClientError> {
    call(admin, "GET", &format!("/v1/qps/{qpn}"), None, 200)
}

/// `POST /v1/regions/{rkey}/zero`: zero `len` bytes at `va` of region `rkey`;
/// returns the bytes zeroed.
pub fn zero_range(admin: &str, rkey: u32, va: u64, len: u64) -> Result<u64, ClientError> {
    let req = ZeroRequest { va, len };
    call::<ZeroResponse>(
        admin,
        "POST",
        &format!("/v1/regions/{rkey:#x}/zero"),
        Some(&json(&req)?),
        200,
    )
    .map(|r| r.zeroed)
}

/// `POST /v1/qps`.
pub fn create_qp(admin: &str, req: &CreateQpRequest) -> Result<CreateQpResponse, ClientError> {
    call(admin, "POST", "/v1/qps", Some(&json(req)?), 201)
}

/// `DELETE /v1/qps/{qpn}`.
pub fn delete_qp(admin: &str, qpn: u32) -> Result<(), ClientError> {
    let path = format!("/v1/qps/{qpn}");
    let r = request(admin, "DELETE", &path, None)?;
    if r.status == 204 {
        Ok(())
    } else {
        Err(http_error("DELETE", &path, &r))
    }
}

/// A soft-RoCE queue pair set up by [`connect_udp_qp`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpConnection {
    /// The queue pair in the client's transport.
    pub handle: QpHandle,
    /// The client's QPN.
    pub local_qpn: u32,
    /// The memory node's responder QPN (what [`delete_qp`] takes).
    pub remote_qpn: u32,
    /// Where the client sends requests.
    pub remote_addr: SocketAddrV4,
    /// The node's regions.
    pub regions: Vec<RegionDescriptor>,
}

/// Which node address the client should send to: the node's own data address, or the
/// admin host's IPv4 address with the data port when the node listens on 0.0.0.0.
fn server_addr(admin: &str, node: &NodeInfo) -> Result<SocketAddrV4, ClientError> {
    if let Some(a) = node.data_addr {
        return Ok(a);
    }
    let ip = resolve(admin)?
        .into_iter()
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
    let node = node_info(admin)?;
    let server = server_addr(admin, &node)?;
    let local = transport.prepare();
    if local.addr.ip().is_unspecified() {
        return Err(ClientError::Connect(ConnectError::Invalid(format!(
            "the transport is bound to {}; bind it to a specific IPv4 address (UdpTransport::for_remote)",
            local.addr
        ))));
    }
    let pmtu = transport.config().pmtu.bytes();
    let resp = create_qp(
        admin,
        &CreateQpRequest {
            qpn: local.qpn,
            psn: local.psn,
            addr: local.addr,
            pmtu,
            server_addr: Some(server),
        },
    )?;
    if resp.pmtu != pmtu {
        let _ = delete_qp(admin, resp.qpn);
        return Err(ClientError::Protocol(format!(
            "the node agreed to path MTU {} instead of {pmtu}",
            resp.pmtu
        )));
    }
    let remote = RemoteQpParams {
        addr: resp.addr,
        qpn: resp.qpn,
    };
    let handle = match transport.connect(local, remote) {
        Ok(h) => h,
        Err(e) => {
            let _ = delete_qp(admin, resp.qpn);
            return Err(e.into());
        }
    };
    Ok(UdpConnection {
        handle,
        local_qpn: local.qpn,
        remote_qpn: resp.qpn,
        remote_addr: resp.addr,
        regions: resp.regions,
    })
}

/// [`connect_udp_qp`], returning just the queue pair handle and the node's regions.
pub fn connect_udp(
    admin: &str,
    transport: &mut UdpTransport,
) -> Result<(QpHandle, Vec<RegionDescriptor>), ClientError> {
    connect_udp_qp(admin, transport).map(|c| (c.handle, c.regions))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_addresses() {
        assert_eq!(host_port("127.0.0.1:80").unwrap(), "127.0.0.1:80");
        assert_eq!(host_port("http://localhost:9/").unwrap(), "localhost:9");
        assert!(host_port("https://x:1").is_err());
        assert!(host_port("x").is_err());
        assert!(host_port("http://x:1/v1").is_err());
    }

    #[test]
    fn responses() {
        let r = parse_response(b"HTTP/1.1 201 Created\r\ncontent-length: 2\r\n\r\n{}xx").unwrap();
        assert_eq!(r.status, 201);
        assert_eq!(r.body, b"{}");
        let r = parse_response(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!(r.body, b"abcde");
        assert!(parse_response(b"garbage").is_err());
        assert!(parse_response(b"SMTP 200\r\n\r\n").is_err());
        assert!(
            parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").is_err()
        );
    }
}
