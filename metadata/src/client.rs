//! A small blocking client of the metadata service (HTTP/1.1 over
//! `std::net::TcpStream`), for clients, memnodes and tests.
//!
//! Connections are kept alive and reused: a client (and its clones) keeps up to
//! [`MAX_IDLE`] idle connections. A request that fails on a reused connection
//! before any byte of an answer arrived (the service closed the idle connection,
//! or restarted) is sent once more on a new connection at once; the usual retry
//! rules ([`MetadataClient::with_retry`]) apply to that attempt.
//!
//! URLs are `host:port` or `http://host:port` (a trailing `/` is fine).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::api::{
    AcceleratorInfo, AdoptLeaseRequest, ChainInfo, ChainRequest, ChainResponse, CreateLeaseRequest,
    CreateTableRequest, ErrorBody, Health, HeartbeatResponse, Lease, LeasesResponse, MemnodeInfo,
    MemnodesResponse, RegisterMemnodeRequest, RegisterMemnodeResponse, RenewLeaseRequest,
    RootResponse, TableDescription, TablesResponse, TailHint, TailResponse,
};

/// Largest response accepted.
const MAX_RESPONSE: usize = 64 << 20;

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The URL could not be understood.
    #[error("invalid metadata service address {0:?}: expected host:port or http://host:port")]
    InvalidAddress(String),
    /// Connecting, sending or receiving failed (the service may be down).
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// Why.
        source: std::io::Error,
    },
    /// The service answered with an error.
    #[error("{method} {path} failed with HTTP {status} ({code}): {message}")]
    Http {
        /// Method.
        method: &'static str,
        /// Path.
        path: String,
        /// Status.
        status: u16,
        /// Error code (`unknown` if the body was not an error document).
        code: String,
        /// Message.
        message: String,
    },
    /// The answer was not HTTP or not the expected JSON.
    #[error("unexpected answer from the metadata service: {0}")]
    Protocol(String),
}

impl ClientError {
    /// The HTTP status, if the service answered with an error.
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Http { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The error code, if the service answered with an error.
    pub fn code(&self) -> Option<&str> {
        match self {
            ClientError::Http { code, .. } => Some(code),
            _ => None,
        }
    }
}

/// A raw HTTP answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawResponse {
    /// Status code.
    pub status: u16,
    /// Headers as (lower-case name, value).
    pub headers: Vec<(String, String)>,
    /// Body.
    pub body: Vec<u8>,
}

impl RawResponse {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Percent-encodes a query value.
pub fn encode_query(v: &str) -> String {
    let mut out = String::new();
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Idle connections a client (with its clones) keeps for reuse.
pub const MAX_IDLE: usize = 16;

/// A client of one metadata service.
#[derive(Debug, Clone)]
pub struct MetadataClient {
    host_port: String,
    token: Option<String>,
    timeout: Duration,
    retry: Duration,
    idle: Arc<Mutex<Vec<TcpStream>>>,
}

/// First pause between retries of a request that could not reach the service.
const RETRY_PAUSE: Duration = Duration::from_millis(10);
/// Longest pause between retries.
const MAX_RETRY_PAUSE: Duration = Duration::from_millis(250);

/// Whether sending a request twice does no more than sending it once: reads, and the
/// writes whose effect does not depend on how often they arrive (PUT, insert-or-open
/// of a chain, put-if-absent of a root, renewals, heartbeats).
fn idempotent(method: &str, path: &str) -> bool {
    let path = path.split('?').next().unwrap_or_default();
    match method {
        "GET" | "PUT" => true,
        "POST" => {
            path.ends_with("/chains")
                || path.ends_with("/root")
                || path.ends_with("/renew")
                || path.ends_with("/heartbeat")
        }
        _ => false,
    }
}

impl MetadataClient {
    /// A client of the service at `url`.
    pub fn new(url: &str) -> Result<MetadataClient, ClientError> {
        let t = url.trim();
        let t = t.strip_prefix("http://").unwrap_or(t).trim_end_matches('/');
        if t.is_empty() || t.contains('/') || t.contains("://") || !t.contains(':') {
            return Err(ClientError::InvalidAddress(url.to_owned()));
        }
        Ok(MetadataClient {
            host_port: t.to_owned(),
            token: None,
            timeout: Duration::from_secs(10),
            retry: Duration::ZERO,
            idle: Arc::new(Mutex::new(Vec::new())),
        })
    }

    /// Sends `Authorization: Bearer <token>` with every request.
    pub fn with_token(mut self, token: Option<String>) -> MetadataClient {
        self.token = token;
        self
    }

    /// Connect, read and write timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> MetadataClient {
        self.timeout = timeout;
        self
    }

    /// Retry requests that fail because the service cannot be reached (it is
    /// restarting, say) for up to `window`, pausing 10 ms, doubling up to 250 ms,
    /// between attempts. A request that could not connect is always retried; one
    /// that failed after it was sent only when sending it twice is harmless (GET,
    /// PUT, opening a chain, publishing a root, renewing a lease, a heartbeat), since
    /// the service may have executed it. Answers with an error status are never
    /// retried. The default window is zero: fail at once.
    pub fn with_retry(mut self, window: Duration) -> MetadataClient {
        self.retry = window;
        self
    }

    /// The retry window (see [`MetadataClient::with_retry`]).
    pub fn retry_window(&self) -> Duration {
        self.retry
    }

    /// The service's base URL.
    pub fn url(&self) -> String {
        format!("http://{}", self.host_port)
    }

    /// Sends one request and returns the answer, whatever its status (retrying as
    /// [`MetadataClient::with_retry`] says).
    pub fn request(
        &self,
        method: &'static str,
        path: &str,
        body: Option<&[u8]>,
    ) -> Result<RawResponse, ClientError> {
        let started = std::time::Instant::now();
        let mut pause = RETRY_PAUSE;
        loop {
            match self.exchange(method, path, body) {
                Ok(r) => return Ok(r),
                Err((e, sent)) => {
                    let retry =
                        matches!(e, ClientError::Io { .. }) && (!sent || idempotent(method, path));
                    if !retry || started.elapsed() + pause > self.retry {
                        return Err(e);
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(MAX_RETRY_PAUSE);
                }
            }
        }
    }

    /// One attempt; a failure says whether the request may have reached the service.
    /// A reused connection that fails before any answer arrived is replaced by a
    /// new one within the attempt.
    fn exchange(
        &self,
        method: &'static str,
        path: &str,
        body: Option<&[u8]>,
    ) -> Result<RawResponse, (ClientError, bool)> {
        let request = self.encode(method, path, body);
        if let Some(stream) = self.take_idle() {
            match self.send_on(stream, method, path, &request) {
                Ok(r) => return Ok(r),
                Err(Failure { error, answered }) if answered => return Err((error, true)),
                // Closed while idle (or the service restarted): try a new connection.
                Err(_) => {}
            }
        }
        let stream = self.connect(method, path).map_err(|e| (e, false))?;
        self.send_on(stream, method, path, &request)
            .map_err(|f| (f.error, true))
    }

    fn take_idle(&self) -> Option<TcpStream> {
        match self.idle.lock() {
            Ok(mut v) => v.pop(),
            Err(poisoned) => poisoned.into_inner().pop(),
        }
    }

    fn put_idle(&self, stream: TcpStream) {
        let mut v = match self.idle.lock() {
            Ok(v) => v,
            Err(poisoned) => poisoned.into_inner(),
        };
        if v.len() < MAX_IDLE {
            v.push(stream);
        }
    }

    fn io_error(
        &self,
        what: &str,
        method: &str,
        path: &str,
        source: std::io::Error,
    ) -> ClientError {
        ClientError::Io {
            context: format!(
                "{what} {method} {path} to the metadata service at {}",
                self.host_port
            ),
            source,
        }
    }

    fn connect(&self, method: &str, path: &str) -> Result<TcpStream, ClientError> {
        let addrs: Vec<SocketAddr> = self
            .host_port
            .to_socket_addrs()
            .map_err(|e| self.io_error("resolving the address for", method, path, e))?
            .collect();
        let mut last = None;
        for a in addrs {
            match TcpStream::connect_timeout(&a, self.timeout) {
                Ok(s) => {
                    let configured = s
                        .set_read_timeout(Some(self.timeout))
                        .and_then(|()| s.set_write_timeout(Some(self.timeout)))
                        .and_then(|()| s.set_nodelay(true));
                    return match configured {
                        Ok(()) => Ok(s),
                        Err(e) => Err(self.io_error("configuring", method, path, e)),
                    };
                }
                Err(e) => last = Some(e),
            }
        }
        Err(self.io_error(
            "connecting for",
            method,
            path,
            last.unwrap_or_else(|| std::io::Error::other("no address to connect to")),
        ))
    }

    fn encode(&self, method: &str, path: &str, body: Option<&[u8]>) -> Vec<u8> {
        let hp = &self.host_port;
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {hp}\r\nAccept: application/json\r\nUser-Agent: dmkv-metadata-client\r\n"
        );
        if let Some(t) = &self.token {
            head.push_str(&format!("Authorization: Bearer {t}\r\n"));
        }
        let body = body.unwrap_or_default();
        if method != "GET" {
            head.push_str("Content-Type: application/json\r\n");
            head.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        head.push_str("\r\n");
        let mut out = head.into_bytes();
        out.extend_from_slice(body);
        out
    }

    /// Send `request` on `stream` and read one answer; the connection goes back to
    /// the idle set when the answer was complete and the service keeps it open.
    fn send_on(
        &self,
        mut stream: TcpStream,
        method: &str,
        path: &str,
        request: &[u8],
    ) -> Result<RawResponse, Failure> {
        let unanswered = |error| Failure {
            error,
            answered: false,
        };
        stream
            .write_all(request)
            .map_err(|e| unanswered(self.io_error("sending", method, path, e)))?;
        let mut raw = Vec::with_capacity(1024);
        let mut buf = [0u8; 8192];
        let reusable = loop {
            match framing(&raw) {
                Framing::Complete { len, keep_alive } => {
                    raw.truncate(len);
                    break keep_alive;
                }
                Framing::Incomplete | Framing::UntilClose => {}
            }
            if raw.len() > MAX_RESPONSE {
                return Err(Failure {
                    error: ClientError::Protocol(format!(
                        "answer to {method} {path} exceeds {MAX_RESPONSE} bytes"
                    )),
                    answered: true,
                });
            }
            let n = match stream.read(&mut buf) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(Failure {
                        error: self.io_error("reading the answer to", method, path, e),
                        answered: !raw.is_empty(),
                    });
                }
            };
            if n == 0 {
                // A connection closed before any answer (the service stopped while
                // the request was in flight, or it closed an idle connection) is an
                // I/O failure, not a malformed answer.
                if raw.is_empty() {
                    return Err(unanswered(self.io_error(
                        "reading the answer to",
                        method,
                        path,
                        std::io::Error::new(
                            std::io::ErrorKind::UnexpectedEof,
                            "the connection closed without an answer",
                        ),
                    )));
                }
                break false;
            }
            raw.extend_from_slice(&buf[..n]);
        };
        let parsed = parse_response(&raw).map_err(|error| Failure {
            error,
            answered: true,
        })?;
        if reusable {
            self.put_idle(stream);
        }
        Ok(parsed)
    }

    fn call<T: DeserializeOwned>(
        &self,
        method: &'static str,
        path: &str,
        body: Option<&[u8]>,
        expect: &[u16],
    ) -> Result<T, ClientError> {
        let r = self.request(method, path, body)?;
        if !expect.contains(&r.status) {
            return Err(http_error(method, path, &r));
        }
        serde_json::from_slice(&r.body).map_err(|e| {
            ClientError::Protocol(format!(
                "{method} {path}: body is not the expected JSON: {e}"
            ))
        })
    }

    fn no_content(&self, method: &'static str, path: &str) -> Result<(), ClientError> {
        let r = self.request(method, path, None)?;
        if r.status == 204 {
            Ok(())
        } else {
            Err(http_error(method, path, &r))
        }
    }

    /// `GET /healthz`.
    pub fn health(&self) -> Result<Health, ClientError> {
        self.call("GET", "/healthz", None, &[200])
    }

    /// `POST /v1/memnodes`.
    pub fn register_memnode(
        &self,
        req: &RegisterMemnodeRequest,
    ) -> Result<RegisterMemnodeResponse, ClientError> {
        self.call("POST", "/v1/memnodes", Some(&json(req)?), &[200, 201])
    }

    /// `POST /v1/memnodes/{id}/heartbeat`.
    pub fn heartbeat(&self, id: u64) -> Result<HeartbeatResponse, ClientError> {
        self.call(
            "POST",
            &format!("/v1/memnodes/{id}/heartbeat"),
            None,
            &[200],
        )
    }

    /// `DELETE /v1/memnodes/{id}`.
    pub fn deregister_memnode(&self, id: u64) -> Result<(), ClientError> {
        self.no_content("DELETE", &format!("/v1/memnodes/{id}"))
    }

    /// `GET /v1/accelerator`: the switch accelerator to create queue pairs through, or
    /// `None` when the service advertises none (or predates the route).
    pub fn accelerator(&self) -> Result<Option<AcceleratorInfo>, ClientError> {
        match self.call::<AcceleratorInfo>("GET", "/v1/accelerator", None, &[200]) {
            Ok(info) if info.enabled && info.admin_url.is_some() => Ok(Some(info)),
            Ok(_) => Ok(None),
            Err(e) if e.status() == Some(404) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `GET /v1/memnodes`.
    pub fn memnodes(&self) -> Result<Vec<MemnodeInfo>, ClientError> {
        self.call::<MemnodesResponse>("GET", "/v1/memnodes", None, &[200])
            .map(|r| r.memnodes)
    }

    /// `POST /v1/leases` with the service's default TTL and placement.
    pub fn lease(&self, client: &str, bytes: u64) -> Result<Lease, ClientError> {
        self.create_lease(&CreateLeaseRequest {
            client: client.to_owned(),
            bytes,
            memnode: None,
            ttl_ms: None,
            table: None,
        })
    }

    /// `POST /v1/leases`.
    pub fn create_lease(&self, req: &CreateLeaseRequest) -> Result<Lease, ClientError> {
        self.call("POST", "/v1/leases", Some(&json(req)?), &[201])
    }

    /// `POST /v1/leases/{id}/renew`.
    pub fn renew(&self, lease_id: u64, ttl_ms: Option<u64>) -> Result<Lease, ClientError> {
        let body = json(&RenewLeaseRequest { ttl_ms })?;
        self.call(
            "POST",
            &format!("/v1/leases/{lease_id}/renew"),
            Some(&body),
            &[200],
        )
    }

    /// `POST /v1/leases/{id}/adopt`: hand a data lease over to its table, keeping
    /// its first `keep_bytes` (rounded up to 4 KiB; `None`: all of it). `None` in
    /// the answer: nothing was kept and the lease was freed.
    pub fn adopt(
        &self,
        lease_id: u64,
        keep_bytes: Option<u64>,
    ) -> Result<Option<Lease>, ClientError> {
        let path = format!("/v1/leases/{lease_id}/adopt");
        let body = json(&AdoptLeaseRequest { keep_bytes })?;
        let r = self.request("POST", &path, Some(&body))?;
        match r.status {
            204 => Ok(None),
            200 => serde_json::from_slice(&r.body).map(Some).map_err(|e| {
                ClientError::Protocol(format!("POST {path}: body is not the expected JSON: {e}"))
            }),
            _ => Err(http_error("POST", &path, &r)),
        }
    }

    /// `DELETE /v1/leases/{id}`.
    pub fn free(&self, lease_id: u64) -> Result<(), ClientError> {
        self.no_content("DELETE", &format!("/v1/leases/{lease_id}"))
    }

    /// `GET /v1/leases/{id}`.
    pub fn get_lease(&self, lease_id: u64) -> Result<Lease, ClientError> {
        self.call("GET", &format!("/v1/leases/{lease_id}"), None, &[200])
    }

    /// `GET /v1/leases[?client=]`.
    pub fn leases(&self, client: Option<&str>) -> Result<Vec<Lease>, ClientError> {
        let path = match client {
            Some(c) => format!("/v1/leases?client={}", encode_query(c)),
            None => "/v1/leases".to_owned(),
        };
        self.call::<LeasesResponse>("GET", &path, None, &[200])
            .map(|r| r.leases)
    }

    /// `POST /v1/tables`.
    pub fn create_table(&self, req: &CreateTableRequest) -> Result<TableDescription, ClientError> {
        self.call("POST", "/v1/tables", Some(&json(req)?), &[201])
    }

    /// `GET /v1/tables/{name}`.
    pub fn table(&self, name: &str) -> Result<TableDescription, ClientError> {
        self.call("GET", &format!("/v1/tables/{name}"), None, &[200])
    }

    /// `GET /v1/tables`.
    pub fn tables(&self) -> Result<Vec<TableDescription>, ClientError> {
        self.call::<TablesResponse>("GET", "/v1/tables", None, &[200])
            .map(|r| r.tables)
    }

    /// `DELETE /v1/tables/{name}`.
    pub fn drop_table(&self, name: &str) -> Result<(), ClientError> {
        self.no_content("DELETE", &format!("/v1/tables/{name}"))
    }

    /// `POST /v1/tables/{name}/chains`: the chain id of `key` (created if new).
    pub fn open_chain(&self, table: &str, key: &[u8]) -> Result<ChainResponse, ClientError> {
        let req = ChainRequest {
            key: base64::engine::general_purpose::STANDARD.encode(key),
        };
        self.call(
            "POST",
            &format!("/v1/tables/{table}/chains"),
            Some(&json(&req)?),
            &[200, 201],
        )
    }

    /// `PUT /v1/tables/{name}/chains/{id}/tail`.
    pub fn put_tail(
        &self,
        table: &str,
        chain_id: u64,
        hint: &TailHint,
    ) -> Result<TailResponse, ClientError> {
        self.call(
            "PUT",
            &format!("/v1/tables/{table}/chains/{chain_id}/tail"),
            Some(&json(hint)?),
            &[200],
        )
    }

    /// `GET /v1/tables/{name}/chains?key=`: the chain of `key` and its stored tail
    /// hint, or `None` when the key has no chain (nothing is created).
    pub fn lookup_chain(&self, table: &str, key: &[u8]) -> Result<Option<ChainInfo>, ClientError> {
        let key = base64::engine::general_purpose::STANDARD.encode(key);
        let path = format!("/v1/tables/{table}/chains?key={}", encode_query(&key));
        match self.call("GET", &path, None, &[200]) {
            Ok(info) => Ok(Some(info)),
            Err(e) if e.code() == Some("chain_not_found") => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `POST /v1/tables/{name}/chains/{id}/root`: store `hint` as the chain's tail
    /// hint unless one is stored; the answer carries the hint that is stored.
    ///
    /// Safe to retry: a retry of a call whose answer was lost finds its own hint
    /// stored (with `created` false), so compare the answer's hint with `hint`.
    pub fn publish_root(
        &self,
        table: &str,
        chain_id: u64,
        hint: &TailHint,
    ) -> Result<RootResponse, ClientError> {
        self.call(
            "POST",
            &format!("/v1/tables/{table}/chains/{chain_id}/root"),
            Some(&json(hint)?),
            &[200, 201],
        )
    }

    /// `GET /v1/tables/{name}/chains/{id}/tail`.
    pub fn tail(&self, table: &str, chain_id: u64) -> Result<TailResponse, ClientError> {
        self.call(
            "GET",
            &format!("/v1/tables/{table}/chains/{chain_id}/tail"),
            None,
            &[200],
        )
    }
}

fn json<T: Serialize>(v: &T) -> Result<Vec<u8>, ClientError> {
    serde_json::to_vec(v).map_err(|e| ClientError::Protocol(format!("encoding the request: {e}")))
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

/// How much of an answer has arrived.
enum Framing {
    /// Not all of it yet.
    Incomplete,
    /// All of it: `len` bytes; whether the connection may carry another request.
    Complete { len: usize, keep_alive: bool },
    /// Neither a length nor chunks: the body ends when the connection closes.
    UntilClose,
}

/// A request that failed, and whether any of an answer had arrived.
struct Failure {
    error: ClientError,
    answered: bool,
}

/// Where the answer in `raw` ends, as far as it can be told yet.
fn framing(raw: &[u8]) -> Framing {
    let Some(split) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Framing::Incomplete;
    };
    let Ok(head) = std::str::from_utf8(&raw[..split]) else {
        return Framing::UntilClose;
    };
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut length = None;
    let mut chunked = false;
    let mut keep_alive = true;
    for l in lines {
        let Some((name, value)) = l.split_once(':') else {
            continue;
        };
        let (name, value) = (
            name.trim().to_ascii_lowercase(),
            value.trim().to_ascii_lowercase(),
        );
        match name.as_str() {
            "content-length" => length = value.parse::<usize>().ok(),
            "transfer-encoding" => chunked = value.contains("chunked"),
            "connection" => keep_alive = !value.contains("close"),
            _ => {}
        }
    }
    let body = split + 4;
    if (100..200).contains(&status) || status == 204 || status == 304 {
        return Framing::Complete {
            len: body,
            keep_alive,
        };
    }
    if chunked {
        return match chunked_end(&raw[body..]) {
            Some(n) => Framing::Complete {
                len: body + n,
                keep_alive,
            },
            None => Framing::Incomplete,
        };
    }
    match length {
        Some(n) if raw.len() >= body + n => Framing::Complete {
            len: body + n,
            keep_alive,
        },
        Some(_) => Framing::Incomplete,
        None => Framing::UntilClose,
    }
}

/// The length of a complete chunked body at the start of `data` (through the last
/// chunk and the empty trailer line), if it has all arrived.
fn chunked_end(data: &[u8]) -> Option<usize> {
    let mut at = 0;
    loop {
        let eol = data.get(at..)?.windows(2).position(|w| w == b"\r\n")?;
        let text = std::str::from_utf8(&data[at..at + eol]).ok()?;
        let size =
            usize::from_str_radix(text.split(';').next().unwrap_or_default().trim(), 16).ok()?;
        at += eol + 2;
        if size == 0 {
            // Trailers (none expected) end with an empty line.
            loop {
                let eol = data.get(at..)?.windows(2).position(|w| w == b"\r\n")?;
                at += eol + 2;
                if eol == 0 {
                    return Some(at);
                }
            }
        }
        at = at.checked_add(size)?.checked_add(2)?;
        if at > data.len() {
            return None;
        }
    }
}

/// Parses an HTTP/1.1 response (Content-Length, chunked, or read-to-close body).
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
    if !parts.next().unwrap_or_default().starts_with("HTTP/1.") {
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
    let body =
        if find("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked")) {
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
        let text = std::str::from_utf8(&data[..eol]).map_err(|_| bad("size not UTF-8"))?;
        let size = usize::from_str_radix(text.split(';').next().unwrap_or_default().trim(), 16)
            .map_err(|_| bad("size not hex"))?;
        data = &data[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        out.extend_from_slice(data.get(..size).ok_or_else(|| bad("chunk truncated"))?);
        data = data
            .get(size + 2..)
            .ok_or_else(|| bad("chunk not terminated"))?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_responses() {
        assert!(MetadataClient::new("http://127.0.0.1:9700/").is_ok());
        assert!(MetadataClient::new("localhost:1").is_ok());
        assert!(MetadataClient::new("https://x:1").is_err());
        assert!(MetadataClient::new("x").is_err());
        let r = parse_response(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!(r.body, b"ab");
        assert!(parse_response(b"nope").is_err());
        assert_eq!(encode_query("a b/c"), "a%20b%2Fc");
    }

    fn complete(raw: &[u8]) -> Option<(usize, bool)> {
        match framing(raw) {
            Framing::Complete { len, keep_alive } => Some((len, keep_alive)),
            _ => None,
        }
    }

    #[test]
    fn answers_are_framed_for_reuse() {
        let r = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nab";
        assert_eq!(complete(r), Some((r.len(), true)));
        assert_eq!(complete(&r[..r.len() - 1]), None);
        let extra = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\nHTTP/1.1";
        assert_eq!(complete(extra), Some((38, true)));
        let close = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx";
        assert_eq!(complete(close), Some((close.len(), false)));
        let empty = b"HTTP/1.1 204 No Content\r\n\r\n";
        assert_eq!(complete(empty), Some((empty.len(), true)));
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n";
        assert_eq!(complete(chunked), Some((chunked.len(), true)));
        assert_eq!(complete(&chunked[..chunked.len() - 2]), None);
        assert!(matches!(
            framing(b"HTTP/1.1 200 OK\r\n\r\nstream"),
            Framing::UntilClose
        ));
        assert!(matches!(framing(b"HTTP/1.1 200"), Framing::Incomplete));
    }
}
