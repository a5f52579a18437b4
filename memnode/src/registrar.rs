//! Registering a memory node with the metadata service.
//!
//! The binary calls [`Registrar::register`] once the node serves and
//! [`Registrar::deregister`] before it stops. [`HttpRegistrar`] talks to the metadata
//! service (`POST /v1/memnodes`, a heartbeat every second, `DELETE /v1/memnodes/{id}` on
//! shutdown) from a background thread, retrying with backoff while the service is
//! unreachable — a memnode never exits because the metadata service is down.
//! [`LogRegistrar`] only logs (standalone nodes, tests, embedded clusters).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::api::{NodeInfo, RegionDescriptor};
use crate::client::{RawResponse, parse_response};

/// Why registering with the metadata service failed.
#[derive(Debug, thiserror::Error)]
#[error("registration with the metadata service failed: {0}")]
pub struct RegistrarError(pub String);

/// Announces a memory node to whoever hands out its memory.
pub trait Registrar: Send + Sync {
    /// The node serves and can be used (called once after startup).
    fn register(&self, node: &NodeInfo, admin_url: &str) -> Result<(), RegistrarError>;

    /// The node is about to stop (called once during a graceful shutdown).
    fn deregister(&self, node: &NodeInfo, admin_url: &str) -> Result<(), RegistrarError>;
}

/// A registrar that only logs: standalone nodes, tests and embedded clusters.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogRegistrar;

impl Registrar for LogRegistrar {
    fn register(&self, node: &NodeInfo, admin_url: &str) -> Result<(), RegistrarError> {
        tracing::info!(
            admin = admin_url,
            data = %node.listen,
            capacity = node.capacity,
            "no metadata service configured; serving standalone"
        );
        Ok(())
    }

    fn deregister(&self, _node: &NodeInfo, _admin_url: &str) -> Result<(), RegistrarError> {
        Ok(())
    }
}

/// A region as the metadata service's `POST /v1/memnodes` takes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegionSpec {
    /// Remote key.
    pub rkey: u32,
    /// First byte.
    pub base_va: u64,
    /// Length.
    pub len: u64,
    /// Backing file, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// The body of the metadata service's `POST /v1/memnodes`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisterRequest {
    /// Stable name: re-registrations under it keep the memnode's id.
    pub name: String,
    /// Admin base URL.
    pub admin_url: String,
    /// Soft-RoCE address clients send to.
    pub data_addr: String,
    /// Bytes of registered memory.
    pub capacity: u64,
    /// Regions.
    pub regions: Vec<RegionSpec>,
}

#[derive(Debug, Clone, Deserialize)]
struct RegisterAnswer {
    id: u64,
    #[serde(default)]
    epoch: u64,
    #[serde(default)]
    heartbeat_interval_ms: Option<u64>,
}

/// Where clients reach the node's data plane: its own address, or the admin host's IP
/// with the data port when it listens on 0.0.0.0.
pub fn data_addr(node: &NodeInfo, admin_url: &str) -> String {
    if let Some(a) = node.data_addr {
        return a.to_string();
    }
    let host = admin_url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .rsplit_once(':')
        .map(|(h, _)| h.to_owned())
        .unwrap_or_else(|| "127.0.0.1".to_owned());
    format!("{host}:{}", node.data_port)
}

/// The registration document of `node`.
pub fn register_request(name: &str, node: &NodeInfo, admin_url: &str) -> RegisterRequest {
    RegisterRequest {
        name: name.to_owned(),
        admin_url: admin_url.trim_end_matches('/').to_owned(),
        data_addr: data_addr(node, admin_url),
        capacity: node.capacity,
        regions: node.regions.iter().map(region).collect(),
    }
}

fn region(r: &RegionDescriptor) -> RegionSpec {
    RegionSpec {
        rkey: r.rkey,
        base_va: r.base_va,
        len: r.len,
        path: r.path.clone(),
    }
}

#[derive(Debug)]
struct State {
    id: Option<u64>,
    stop: bool,
    registrations: u64,
    heartbeats: u64,
    interval: Duration,
    max_backoff: Duration,
}

#[derive(Debug)]
struct Inner {
    host_port: String,
    token: Option<String>,
    name: Option<String>,
    state: Mutex<State>,
    wake: Condvar,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// Registers with the metadata service over HTTP and heartbeats from a background thread.
///
/// `register` returns at once; the thread registers (retrying with exponential backoff
/// up to 5 s, logging each failure), then heartbeats every interval. If the service
/// forgets the node (404 on a heartbeat, e.g. it was deregistered), the thread
/// registers again. `deregister` stops the thread and deletes the registration;
/// dropping the registrar only stops the thread.
#[derive(Debug)]
pub struct HttpRegistrar {
    inner: Arc<Inner>,
}

impl HttpRegistrar {
    /// A registrar for the service at `url` (`http://host:port` or `host:port`), sending
    /// `token` as a bearer token, registering as `name` (default: the data address).
    pub fn new(
        url: &str,
        token: Option<String>,
        name: Option<String>,
    ) -> Result<HttpRegistrar, RegistrarError> {
        let t = url.trim();
        let t = t.strip_prefix("http://").unwrap_or(t).trim_end_matches('/');
        if t.is_empty() || t.contains('/') || t.contains("://") || !t.contains(':') {
            return Err(RegistrarError(format!(
                "invalid metadata service URL {url:?}: expected http://host:port"
            )));
        }
        Ok(HttpRegistrar {
            inner: Arc::new(Inner {
                host_port: t.to_owned(),
                token: token.filter(|t| !t.is_empty()),
                name,
                state: Mutex::new(State {
                    id: None,
                    stop: false,
                    registrations: 0,
                    heartbeats: 0,
                    interval: Duration::from_secs(1),
                    max_backoff: Duration::from_secs(5),
                }),
                wake: Condvar::new(),
                thread: Mutex::new(None),
            }),
        })
    }

    /// Heartbeat interval (default 1 s; the service's answer to registration overrides
    /// it when shorter).
    pub fn with_interval(self, interval: Duration) -> HttpRegistrar {
        {
            let mut s = self.inner.lock();
            s.interval = interval;
            s.max_backoff = (interval * 5).min(Duration::from_secs(5));
        }
        self
    }

    /// The id the service gave the node, once registered.
    pub fn memnode_id(&self) -> Option<u64> {
        self.inner.lock().id
    }

    /// Successful registrations and heartbeats so far.
    pub fn counts(&self) -> (u64, u64) {
        let s = self.inner.lock();
        (s.registrations, s.heartbeats)
    }

    /// Stops registering and heartbeating without deregistering (as if the node
    /// crashed); the service will mark it unhealthy.
    pub fn stop(&self) {
        {
            let mut s = self.inner.lock();
            s.stop = true;
        }
        self.inner.wake.notify_all();
        let t = self
            .inner
            .thread
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(t) = t {
            let _ = t.join();
        }
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sleeps `d` or until stopped; returns whether stopped.
    fn sleep(&self, d: Duration) -> bool {
        let s = self.lock();
        let (s, _) = self
            .wake
            .wait_timeout_while(s, d, |s| !s.stop)
            .unwrap_or_else(|p| p.into_inner());
        s.stop
    }

    fn send(
        &self,
        method: &'static str,
        path: &str,
        body: Option<&[u8]>,
    ) -> Result<RawResponse, String> {
        let timeout = Duration::from_secs(3);
        let addrs: Vec<SocketAddr> = self
            .host_port
            .to_socket_addrs()
            .map_err(|e| format!("resolving {}: {e}", self.host_port))?
            .collect();
        let mut stream = None;
        let mut last = String::from("no address");
        for a in addrs {
            match TcpStream::connect_timeout(&a, timeout) {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(e) => last = e.to_string(),
            }
        }
        let mut stream =
            stream.ok_or_else(|| format!("connecting to {}: {last}", self.host_port))?;
        let _ = stream.set_read_timeout(Some(timeout));
        let _ = stream.set_write_timeout(Some(timeout));
        let body = body.unwrap_or_default();
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nAccept: application/json\r\nUser-Agent: dmkv-memnode\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
            self.host_port,
            body.len()
        );
        if let Some(t) = &self.token {
            head.push_str(&format!("Authorization: Bearer {t}\r\n"));
        }
        head.push_str("\r\n");
        let mut out = head.into_bytes();
        out.extend_from_slice(body);
        stream
            .write_all(&out)
            .map_err(|e| format!("sending {method} {path}: {e}"))?;
        let mut raw = Vec::new();
        Read::by_ref(&mut stream)
            .take(1 << 20)
            .read_to_end(&mut raw)
            .map_err(|e| format!("reading the answer to {method} {path}: {e}"))?;
        parse_response(&raw).map_err(|e| e.to_string())
    }

    fn describe(r: &RawResponse) -> String {
        format!(
            "HTTP {}: {}",
            r.status,
            String::from_utf8_lossy(&r.body)
                .chars()
                .take(300)
                .collect::<String>()
        )
    }

    fn register_once(&self, req: &RegisterRequest) -> Result<RegisterAnswer, String> {
        let body = serde_json::to_vec(req).map_err(|e| e.to_string())?;
        let r = self.send("POST", "/v1/memnodes", Some(&body))?;
        if r.status != 200 && r.status != 201 {
            return Err(Self::describe(&r));
        }
        serde_json::from_slice(&r.body).map_err(|e| format!("unexpected answer: {e}"))
    }

    /// The background loop: register, then heartbeat; re-register when forgotten.
    fn run(&self, req: RegisterRequest) {
        let (mut interval, max_backoff) = {
            let s = self.lock();
            (s.interval, s.max_backoff)
        };
        let mut backoff = Duration::from_millis(100).min(interval);
        let mut failures = 0u64;
        loop {
            if self.lock().stop {
                return;
            }
            let id = self.lock().id;
            let outcome = match id {
                None => self.register_once(&req).map(|a| {
                    if let Some(ms) = a.heartbeat_interval_ms.filter(|&ms| ms > 0) {
                        interval = interval.min(Duration::from_millis(ms));
                    }
                    let mut s = self.lock();
                    s.id = Some(a.id);
                    s.registrations += 1;
                    tracing::info!(
                        memnode_id = a.id,
                        epoch = a.epoch,
                        metadata = %self.host_port,
                        "registered with the metadata service"
                    );
                }),
                Some(id) => {
                    match self.send("POST", &format!("/v1/memnodes/{id}/heartbeat"), None) {
                        Ok(r) if r.status == 200 => {
                            self.lock().heartbeats += 1;
                            Ok(())
                        }
                        Ok(r) if r.status == 404 => {
                            tracing::warn!(
                                memnode_id = id,
                                "the metadata service does not know this memnode any more; registering again"
                            );
                            self.lock().id = None;
                            continue;
                        }
                        Ok(r) => Err(Self::describe(&r)),
                        Err(e) => Err(e),
                    }
                }
            };
            let wait = match outcome {
                Ok(()) => {
                    if failures > 0 {
                        tracing::info!(
                            after_failures = failures,
                            "metadata service reachable again"
                        );
                    }
                    failures = 0;
                    backoff = Duration::from_millis(100).min(interval);
                    interval
                }
                Err(e) => {
                    failures += 1;
                    tracing::warn!(
                        metadata = %self.host_port,
                        attempt = failures,
                        retry_in_ms = backoff.as_millis() as u64,
                        error = %e,
                        "cannot reach the metadata service; retrying"
                    );
                    let w = backoff;
                    backoff = (backoff * 2).min(max_backoff);
                    w
                }
            };
            if self.sleep(wait) {
                return;
            }
        }
    }
}

impl Registrar for HttpRegistrar {
    fn register(&self, node: &NodeInfo, admin_url: &str) -> Result<(), RegistrarError> {
        let addr = data_addr(node, admin_url);
        let name = self.inner.name.clone().unwrap_or(addr);
        let req = register_request(&name, node, admin_url);
        let mut slot = self.inner.thread.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_some() {
            return Err(RegistrarError("already registering".into()));
        }
        self.inner.lock().stop = false;
        let inner = self.inner.clone();
        let t = std::thread::Builder::new()
            .name("memnode-registrar".into())
            .spawn(move || inner.run(req))
            .map_err(|e| RegistrarError(format!("cannot start the registrar thread: {e}")))?;
        *slot = Some(t);
        Ok(())
    }

    fn deregister(&self, _node: &NodeInfo, _admin_url: &str) -> Result<(), RegistrarError> {
        self.stop();
        let id = self.inner.lock().id.take();
        let Some(id) = id else {
            return Ok(());
        };
        match self
            .inner
            .send("DELETE", &format!("/v1/memnodes/{id}"), None)
        {
            Ok(r) if r.status == 204 || r.status == 404 => {
                tracing::info!(memnode_id = id, "deregistered from the metadata service");
                Ok(())
            }
            Ok(r) => Err(RegistrarError(Inner::describe(&r))),
            Err(e) => Err(RegistrarError(e)),
        }
    }
}

impl Drop for HttpRegistrar {
    /// Stops the background thread (without deregistering).
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddrV4;

    #[test]
    fn urls_and_data_addresses() {
        assert!(HttpRegistrar::new("http://127.0.0.1:9700/", None, None).is_ok());
        assert!(HttpRegistrar::new("https://x:1", None, None).is_err());
        assert!(HttpRegistrar::new("nohost", None, None).is_err());
        let node = NodeInfo {
            listen: "0.0.0.0:4791".parse::<SocketAddrV4>().unwrap(),
            data_addr: None,
            data_port: 4791,
            capacity: 1,
            qps: 0,
            version: "x".into(),
            regions: vec![],
        };
        assert_eq!(data_addr(&node, "http://10.0.0.5:9791"), "10.0.0.5:4791");
        let mut n2 = node.clone();
        n2.data_addr = Some("127.0.0.2:4791".parse().unwrap());
        assert_eq!(data_addr(&n2, "http://127.0.0.1:9791"), "127.0.0.2:4791");
    }
}
