//! Registering a memory node with the metadata service.
//!
//! The binary calls [`Registrar::register`] once the node serves and
//! [`Registrar::deregister`] before it stops. [`HttpRegistrar`] talks to the metadata
//! service (`POST /v1/memnodes`, a heartbeat every second, `DELETE /v1/memnodes/{id}` on
//! shutdown) from a background thread, retrying with backoff while the service is
//! unreachable — a memnode never exits because the metadata service is down. The
//! service refuses the shutdown's deletion (409) while table data or leases live on
//! the node: the node then just stops heartbeating and keeps its id, so that it
//! rejoins under it (with its data, when its region file kept it).
//! [`LogRegistrar`] only logs (standalone nodes, tests, embedded clusters).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use dmkv_api::metadata::{RegionSpec, RegisterMemnodeRequest, RegisterMemnodeResponse};
use dmkv_api::{ClientError, MetadataClient};

use crate::api::{NodeInfo, RegionDescriptor};

/// Why registering with the metadata service failed.
#[derive(Debug, thiserror::Error)]
#[error("registration with the metadata service failed: {0}")]
pub struct RegistrarError(pub String);

/// Connect, read and write timeout of the requests to the metadata service.
const TIMEOUT: Duration = Duration::from_secs(3);

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

/// Where clients reach the node's data plane: its own address, or the admin host's IP
/// with the data port when it listens on 0.0.0.0.
pub fn data_addr(node: &NodeInfo, admin_url: &str) -> String {
    if let Some(a) = node.data_addr {
        return a.to_string();
    }
    let host = admin_url
        .trim_start_matches("https://")
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .rsplit_once(':')
        .map(|(h, _)| h.to_owned())
        .unwrap_or_else(|| "127.0.0.1".to_owned());
    format!("{host}:{}", node.data_port)
}

/// The registration document of `node`.
pub fn register_request(name: &str, node: &NodeInfo, admin_url: &str) -> RegisterMemnodeRequest {
    RegisterMemnodeRequest {
        name: name.to_owned(),
        admin_url: admin_url.trim_end_matches('/').to_owned(),
        data_addr: data_addr(node, admin_url),
        capacity: node.capacity,
        regions: node.regions.iter().map(region).collect(),
        zone: None,
    }
}

fn region(r: &RegionDescriptor) -> RegionSpec {
    RegionSpec {
        rkey: r.rkey,
        base_va: r.base_va,
        len: r.len,
        path: r.path.clone(),
        instance: r.instance,
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
    zone: Option<String>,
    /// Where the id is published each time the service gives one.
    id_sink: Option<Arc<AtomicU64>>,
}

#[derive(Debug)]
struct Inner {
    metadata: MetadataClient,
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
        let metadata = MetadataClient::new(url)
            .map_err(|e| match e {
                ClientError::InvalidAddress(_) => RegistrarError(format!(
                    "invalid metadata service URL {url:?}: expected http://host:port or https://host:port"
                )),
                other => RegistrarError(format!("metadata service {url}: {other}")),
            })?
            .with_token(token)
            .with_timeout(TIMEOUT);
        Ok(HttpRegistrar {
            inner: Arc::new(Inner {
                metadata,
                name,
                state: Mutex::new(State {
                    id: None,
                    stop: false,
                    registrations: 0,
                    heartbeats: 0,
                    interval: Duration::from_secs(1),
                    max_backoff: Duration::from_secs(5),
                    zone: None,
                    id_sink: None,
                }),
                wake: Condvar::new(),
                thread: Mutex::new(None),
            }),
        })
    }

    /// The failure domain (rack, zone) to declare when registering; the metadata
    /// service puts replicas of a table in distinct zones where it can.
    pub fn with_zone(self, zone: Option<String>) -> HttpRegistrar {
        self.inner.lock().zone = zone.filter(|z| !z.trim().is_empty());
        self
    }

    /// Publishes the id the service gives the node into `sink` (the node checks grants
    /// against it: [`crate::MemnodeHandle::memnode_id_sink`]).
    pub fn with_id_sink(self, sink: Arc<AtomicU64>) -> HttpRegistrar {
        self.inner.lock().id_sink = Some(sink);
        self
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

    fn register_once(
        &self,
        req: &RegisterMemnodeRequest,
    ) -> Result<RegisterMemnodeResponse, ClientError> {
        self.metadata.register_memnode(req)
    }

    /// The background loop: register, then heartbeat; re-register when forgotten.
    fn run(&self, req: RegisterMemnodeRequest) {
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
                    if a.heartbeat_interval_ms > 0 {
                        interval = interval.min(Duration::from_millis(a.heartbeat_interval_ms));
                    }
                    let mut s = self.lock();
                    s.id = Some(a.id);
                    s.registrations += 1;
                    if let Some(sink) = &s.id_sink {
                        sink.store(a.id, Ordering::Release);
                    }
                    tracing::info!(
                        memnode_id = a.id,
                        epoch = a.epoch,
                        metadata = %self.metadata.url(),
                        "registered with the metadata service"
                    );
                }),
                Some(id) => match self.metadata.heartbeat(id) {
                    Ok(_) => {
                        self.lock().heartbeats += 1;
                        Ok(())
                    }
                    Err(e) if e.status() == Some(404) => {
                        tracing::warn!(
                            memnode_id = id,
                            "the metadata service does not know this memnode any more; registering again"
                        );
                        self.lock().id = None;
                        continue;
                    }
                    Err(e) => Err(e),
                },
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
                        metadata = %self.metadata.url(),
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
        let mut req = register_request(&name, node, admin_url);
        req.zone = self.inner.lock().zone.clone();
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
        match self.inner.metadata.deregister_memnode(id) {
            Ok(()) => {
                tracing::info!(memnode_id = id, "deregistered from the metadata service");
                Ok(())
            }
            Err(e) if e.status() == Some(404) => {
                tracing::info!(memnode_id = id, "deregistered from the metadata service");
                Ok(())
            }
            Err(e) if e.status() == Some(409) => {
                tracing::info!(
                    memnode_id = id,
                    reason = %e,
                    "table data lives on this memnode: it stays registered (down until it restarts) and rejoins under the same id"
                );
                Ok(())
            }
            Err(e) => Err(RegistrarError(e.to_string())),
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
        assert!(HttpRegistrar::new("https://x:1", None, None).is_ok());
        assert!(HttpRegistrar::new("ftp://x:1", None, None).is_err());
        assert!(HttpRegistrar::new("nohost", None, None).is_err());
        let node = NodeInfo {
            listen: "0.0.0.0:4791".parse::<SocketAddrV4>().unwrap(),
            data_addr: None,
            data_port: 4791,
            capacity: 1,
            qps: 0,
            version: "x".into(),
            regions: vec![],
            memnode_id: None,
        };
        assert_eq!(data_addr(&node, "http://10.0.0.5:9791"), "10.0.0.5:4791");
        assert_eq!(data_addr(&node, "https://10.0.0.6:9791/"), "10.0.0.6:4791");
        let mut n2 = node.clone();
        n2.data_addr = Some("127.0.0.2:4791".parse().unwrap());
        assert_eq!(data_addr(&n2, "http://127.0.0.1:9791"), "127.0.0.2:4791");
    }
}
