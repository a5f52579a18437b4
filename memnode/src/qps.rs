//! The node's queue pairs: creation from a client's parameters, lookup, deletion.
//!
//! The table is shared by the data plane (which executes requests under its lock, one
//! receive batch at a time) and the admin API (which creates and deletes entries).

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::net::SocketAddrV4;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};
use verbs::transport::qpn_map::QpnMap;

use std::sync::Arc;

use dmkv_api::grant::Grant;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use verbs::mem::ScopeViolations;
use verbs::rc::{Pmtu, RcConfig, Responder};
use verbs::wire::{IcrcPath, PSN_MASK, QPN_MASK};

use crate::api::{CreateQpRequest, QpCounters, QpInfo, RegionDescriptor};
use crate::qp_grants::{GrantMismatch, QpGrants};
use crate::response_port::ResponsePort;
use crate::rpc::RpcChannel;
use crate::rpc::rings::{RequestRings, RingGrant};

/// A grant a queue pair is created with or given, and what its scope is built over.
#[derive(Debug, Clone, Copy)]
pub struct GrantContext<'a> {
    /// The node's region (grant offsets are into it).
    pub region: &'a RegionDescriptor,
    /// The node-wide refusal counters.
    pub violations: &'a Arc<ScopeViolations>,
    /// Whether the queue pair is restricted to the grants' windows (off: whole-region
    /// access under the region's key, for measuring what scoping costs).
    pub scoping: bool,
    /// The current time, unix milliseconds.
    pub now_ms: u64,
}

/// One responder queue pair and where its client is.
#[derive(Debug)]
pub struct QpEntry {
    /// The RC responder state machine.
    pub responder: Responder,
    /// The client's UDP address (its requests come from there).
    pub client_addr: SocketAddrV4,
    /// Where responses go: the client's address, or its port 4791 (see [`ResponsePort`]).
    pub response_addr: SocketAddrV4,
    /// The node address the client sends to (the ICRC path's destination).
    pub server_addr: SocketAddrV4,
    /// Path MTU.
    pub pmtu: Pmtu,
    /// Datagrams the responder accepted.
    pub accepted: u64,
    /// Datagrams addressed to this QP that the responder dropped.
    pub dropped: u64,
    /// When its client last sent it a datagram (or when it was created).
    pub last_request: Instant,
    /// Its grants, when it was created with one (`None`: the admin token's whole-region
    /// access).
    pub grants: Option<QpGrants>,
    /// Its receive queue and reply requester, when the node runs RPC workers.
    pub rpc: Option<RpcChannel>,
    /// Its write-based RPC request ring, when it asked for one and got it.
    pub ring: Option<RingGrant>,
    /// Runs of responses to `response_addr` may leave as one segmented send: the
    /// client said its socket coalesces, the node's does too, and both are on
    /// loopback (see [`verbs::net::OffloadMode::Auto`]).
    pub segment: bool,
}

impl QpEntry {
    /// The admin API's view of this queue pair, whose ring (if any) is one of `rings`.
    pub fn info_with(&self, rings: Option<&RequestRings>) -> QpInfo {
        let mut info = self.info();
        info.rpc_ring = match (rings, &self.ring) {
            (Some(rings), Some(ring)) => {
                let rkey = self
                    .responder
                    .scope()
                    .map_or(rings.region_rkey(), |s| s.rkey());
                Some(rings.info(ring, rkey))
            }
            _ => None,
        };
        info
    }

    /// The admin API's view of this queue pair, without its ring.
    pub fn info(&self) -> QpInfo {
        let s = self.responder.stats();
        QpInfo {
            qpn: self.responder.local_qpn(),
            client_qpn: self.responder.remote_qpn(),
            client_addr: self.client_addr,
            server_addr: self.server_addr,
            pmtu: self.pmtu.bytes(),
            expected_psn: self.responder.expected_psn(),
            counters: QpCounters {
                accepted: self.accepted,
                dropped: self.dropped,
                messages: s.messages,
                reads: s.reads,
                writes: s.writes,
                atomics: s.atomics,
                duplicates: s.duplicates,
                naks_sequence: s.naks_sequence,
                naks_access: s.naks_access,
                naks_invalid: s.naks_invalid,
                packets_sent: s.packets_sent,
                bytes_sent: s.bytes_sent,
            },
            rkey: self.responder.scope().map(|s| s.rkey()),
            client_id: self.grants.as_ref().map(|g| g.client_id().to_owned()),
            grants: self.grants.as_ref().map(QpGrants::info).unwrap_or_default(),
            rpc_psn: self.rpc.as_ref().map(RpcChannel::psn),
            rpc_ring: None,
        }
    }

    /// The client it belongs to, when it was created with a grant.
    pub fn client_id(&self) -> Option<&str> {
        self.grants.as_ref().map(QpGrants::client_id)
    }

    /// Rebuilds the responder's scope from the grants (and its own request ring, which
    /// it may write whatever the grants say).
    fn rescope(&mut self, ctx: &GrantContext<'_>) {
        let scope = match &self.grants {
            Some(g) if ctx.scoping => {
                let mut scope = g.scope(ctx.region, ctx.violations, ctx.now_ms, Instant::now());
                if let Some(ring) = &self.ring {
                    let mut windows = scope.windows().to_vec();
                    windows.push(RequestRings::window(ring));
                    scope = verbs::mem::AccessScope::new(
                        scope.rkey(),
                        scope.region_rkey(),
                        windows,
                        scope.violations().clone(),
                    );
                }
                Some(Arc::new(scope))
            }
            _ => None,
        };
        self.responder.set_scope(scope);
    }
}

/// Why a queue pair could not be created.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QpError {
    /// A parameter is out of range.
    #[error("{0}")]
    Invalid(String),
    /// The node listens on 0.0.0.0 and the request did not say which address it sends to.
    #[error(
        "the memory node listens on {0}, so it cannot tell which of its addresses you send to: add \"server_addr\": \"<node-ip>:{port}\" to the request",
        port = .0.port()
    )]
    MissingServerAddr(SocketAddrV4),
    /// The node serves its maximum number of queue pairs.
    #[error("too many queue pairs: this node serves at most {0}; delete unused ones first")]
    TooMany(usize),
}

/// A queue pair destroyed because its client sent nothing for the idle timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdleQp {
    /// Its QPN.
    pub qpn: u32,
    /// Its client's address.
    pub client_addr: SocketAddrV4,
    /// How long it had been idle.
    pub idle: Duration,
}

/// The queue pairs of a node, by responder QPN.
#[derive(Debug)]
pub struct QpTable {
    entries: Mutex<QpnMap<QpEntry>>,
    rng: Mutex<SmallRng>,
    max: usize,
    responses: ResponsePort,
    idle_timeout: Option<Duration>,
    rpc: bool,
    rings: Option<Arc<RequestRings>>,
    coalescing: bool,
}

fn random_seed() -> u64 {
    let mut h = RandomState::new().build_hasher();
    h.write_u64(u64::from(std::process::id()));
    h.finish()
}

impl QpTable {
    /// An empty table admitting at most `max` queue pairs.
    pub fn new(max: usize) -> QpTable {
        QpTable {
            entries: Mutex::new(QpnMap::default()),
            rng: Mutex::new(SmallRng::seed_from_u64(random_seed())),
            max,
            responses: ResponsePort::Client,
            idle_timeout: None,
            rpc: false,
            rings: None,
            coalescing: false,
        }
    }

    /// The same table, whose node socket receives coalesced buffers when `on`
    /// (`verbs::net::BatchSocket::coalesces`, and requests are read from it): clients
    /// that coalesce too get segmented runs of responses.
    pub fn with_coalescing(mut self, on: bool) -> QpTable {
        self.coalescing = on;
        self
    }

    /// Whether the node's socket receives coalesced buffers (what a new queue pair's
    /// client is told).
    pub fn coalescing(&self) -> bool {
        self.coalescing
    }

    /// The same table, giving queue pairs that ask for one a request ring of `rings`
    /// (only with [`QpTable::with_rpc`]).
    pub fn with_rings(mut self, rings: Option<Arc<RequestRings>>) -> QpTable {
        self.rings = rings;
        self
    }

    /// The request rings, when the node has them.
    pub fn rings(&self) -> Option<&Arc<RequestRings>> {
        self.rings.as_ref()
    }

    /// Frees the ring of a queue pair that is being destroyed.
    fn release_ring(&self, qpn: u32, entry: &QpEntry) {
        if let (Some(rings), Some(ring)) = (&self.rings, &entry.ring) {
            rings.release(ring, qpn);
        }
    }

    /// The same table, giving every new queue pair a receive queue and a reply
    /// requester ([`RpcChannel`]) when `on` (the node runs RPC workers).
    pub fn with_rpc(mut self, on: bool) -> QpTable {
        self.rpc = on;
        self
    }

    /// Whether new queue pairs accept RPCs.
    pub fn rpc(&self) -> bool {
        self.rpc
    }

    /// The same table, whose queue pairs are destroyed by
    /// [`reclaim_idle`](QpTable::reclaim_idle) once they received nothing for
    /// `timeout` (`None`: never).
    pub fn with_idle_timeout(mut self, timeout: Option<Duration>) -> QpTable {
        self.idle_timeout = timeout;
        self
    }

    /// The idle timeout, if queue pairs have one.
    pub fn idle_timeout(&self) -> Option<Duration> {
        self.idle_timeout
    }

    /// Destroys every queue pair whose client sent nothing for the idle timeout
    /// (as of `now`), and returns them. Nothing happens without a timeout.
    pub fn reclaim_idle(&self, now: Instant) -> Vec<IdleQp> {
        let Some(timeout) = self.idle_timeout else {
            return Vec::new();
        };
        let mut entries = self.lock();
        let mut idle = Vec::new();
        entries.retain(|&qpn, e| {
            let quiet = now.saturating_duration_since(e.last_request);
            if quiet < timeout {
                return true;
            }
            if let (Some(rings), Some(ring)) = (&self.rings, &e.ring) {
                rings.release(ring, qpn);
            }
            idle.push(IdleQp {
                qpn,
                client_addr: e.client_addr,
                idle: quiet,
            });
            false
        });
        idle.sort_by_key(|q| q.qpn);
        idle
    }

    /// The same table, sending every new queue pair's responses to `responses`.
    pub fn with_response_port(mut self, responses: ResponsePort) -> QpTable {
        self.responses = responses;
        self
    }

    /// Locks the table. A panic elsewhere while holding the lock cannot leave the map
    /// inconsistent (entries are inserted and removed whole), so poisoning is ignored.
    pub fn lock(&self) -> MutexGuard<'_, QpnMap<QpEntry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Number of queue pairs.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Creates a responder for the client described by `req`; `listen` is the node's
    /// bound soft-RoCE address. Returns the new entry's info.
    pub fn create(&self, req: &CreateQpRequest, listen: SocketAddrV4) -> Result<QpInfo, QpError> {
        self.create_with(req, listen, None)
    }

    /// [`QpTable::create`], for the client of `grant` when one is given: the queue pair
    /// gets its own random memory key and serves only the grant's windows (unless
    /// scoping is off).
    pub fn create_with(
        &self,
        req: &CreateQpRequest,
        listen: SocketAddrV4,
        grant: Option<(Grant, GrantContext<'_>)>,
    ) -> Result<QpInfo, QpError> {
        self.create_with_ring(req, listen, grant, false)
    }

    /// [`QpTable::create_with`], giving the queue pair a request ring when `ring` is
    /// asked for, the node runs RPC workers with rings, and one is free (the info
    /// names it; without one the queue pair takes requests by SEND only).
    pub fn create_with_ring(
        &self,
        req: &CreateQpRequest,
        listen: SocketAddrV4,
        grant: Option<(Grant, GrantContext<'_>)>,
        ring: bool,
    ) -> Result<QpInfo, QpError> {
        if req.qpn == 0 || req.qpn > QPN_MASK {
            return Err(QpError::Invalid(format!(
                "qpn {} is out of range: queue pair numbers are 24-bit and non-zero (1..=16777215)",
                req.qpn
            )));
        }
        if req.psn > PSN_MASK {
            return Err(QpError::Invalid(format!(
                "psn {} is out of range: PSNs are 24-bit (0..=16777215)",
                req.psn
            )));
        }
        let pmtu = Pmtu::new(req.pmtu).map_err(QpError::Invalid)?;
        check_unicast("addr", req.addr)?;
        let server_addr = match req.server_addr {
            Some(a) => {
                check_unicast("server_addr", a)?;
                if a.port() != listen.port() {
                    return Err(QpError::Invalid(format!(
                        "server_addr {a} does not match this node's soft-RoCE port {}",
                        listen.port()
                    )));
                }
                if !listen.ip().is_unspecified() && a.ip() != listen.ip() {
                    return Err(QpError::Invalid(format!(
                        "server_addr {a} is not this node's soft-RoCE address {listen}"
                    )));
                }
                a
            }
            None if listen.ip().is_unspecified() => return Err(QpError::MissingServerAddr(listen)),
            None => listen,
        };
        let mut entries = self.lock();
        if entries.len() >= self.max {
            return Err(QpError::TooMany(self.max));
        }
        let (qpn, scope_rkey, rpc_psn) = {
            let mut rng = self.rng.lock().unwrap_or_else(|e| e.into_inner());
            let qpn = loop {
                let q = rng.random_range(2..=QPN_MASK);
                if !entries.contains_key(&q) {
                    break q;
                }
            };
            // A key no region and no other queue pair has.
            let rkey = loop {
                let k: u32 = rng.random();
                let taken = k == 0
                    || grant.as_ref().is_some_and(|(_, c)| c.region.rkey == k)
                    || entries
                        .values()
                        .any(|e| e.grants.as_ref().is_some_and(|g| g.rkey() == k));
                if !taken {
                    break k;
                }
            };
            (qpn, rkey, rng.random_range(0..=PSN_MASK))
        };
        let config = RcConfig {
            pmtu,
            ..RcConfig::default()
        };
        let path = IcrcPath::new(req.addr, server_addr);
        let response_addr = self.responses.response_addr(req.addr);
        let mut responder =
            Responder::new(config.clone(), qpn, req.qpn, req.psn, path).respond_to(response_addr);
        let rpc = self.rpc.then(|| {
            let channel = RpcChannel::new(
                config,
                qpn,
                req.qpn,
                rpc_psn,
                IcrcPath::new(server_addr, response_addr),
            );
            responder.set_recv_queue(Some(channel.recv().clone()));
            channel
        });
        let entry = QpEntry {
            responder,
            client_addr: req.addr,
            response_addr,
            server_addr,
            pmtu,
            accepted: 0,
            dropped: 0,
            last_request: Instant::now(),
            grants: None,
            ring: None,
            rpc,
            // Only to the socket that said it coalesces (responses to port 4791 go to
            // another), and only on loopback, where the kernel hands runs over whole.
            segment: self.coalescing
                && req.coalesce
                && response_addr == req.addr
                && req.addr.ip().is_loopback()
                && server_addr.ip().is_loopback(),
        };
        let mut entry = entry;
        if ring && entry.rpc.is_some() {
            entry.ring = self.rings.as_ref().and_then(|r| r.assign(qpn));
        }
        if let Some((g, ctx)) = grant {
            entry.grants = Some(QpGrants::new(g, scope_rkey));
            entry.rescope(&ctx);
        }
        let info = entry.info_with(self.rings.as_deref());
        entries.insert(qpn, entry);
        Ok(info)
    }

    /// Gives queue pair `qpn` a newer grant of its client (adding its table, or
    /// replacing the windows of that table) and rebuilds its scope.
    pub fn update_grant(
        &self,
        qpn: u32,
        grant: Grant,
        ctx: GrantContext<'_>,
    ) -> Result<QpInfo, GrantMismatch> {
        let mut entries = self.lock();
        let entry = entries.get_mut(&qpn).ok_or(GrantMismatch::NotFound(qpn))?;
        let grants = entry.grants.as_mut().ok_or(GrantMismatch::NotScoped(qpn))?;
        grants.replace(qpn, grant)?;
        entry.rescope(&ctx);
        Ok(entry.info_with(self.rings.as_deref()))
    }

    /// The client queue pair `qpn` belongs to: `None` if there is no such queue pair,
    /// `Some(None)` for one created with the admin token.
    pub fn owner(&self, qpn: u32) -> Option<Option<String>> {
        self.lock()
            .get(&qpn)
            .map(|e| e.client_id().map(str::to_owned))
    }

    /// Removes a queue pair; false if there was none.
    pub fn delete(&self, qpn: u32) -> bool {
        let Some(entry) = self.lock().remove(&qpn) else {
            return false;
        };
        self.release_ring(qpn, &entry);
        true
    }

    /// The info of one queue pair.
    pub fn info(&self, qpn: u32) -> Option<QpInfo> {
        let rings = self.rings.as_deref();
        self.lock().get(&qpn).map(|e| e.info_with(rings))
    }

    /// Every queue pair, by QPN.
    pub fn list(&self) -> Vec<QpInfo> {
        let rings = self.rings.as_deref();
        let mut v: Vec<QpInfo> = self.lock().values().map(|e| e.info_with(rings)).collect();
        v.sort_by_key(|i| i.qpn);
        v
    }
}

fn check_unicast(field: &str, a: SocketAddrV4) -> Result<(), QpError> {
    let ip = a.ip();
    if ip.is_unspecified() || ip.is_broadcast() || ip.is_multicast() {
        return Err(QpError::Invalid(format!(
            "{field} {a} is not a unicast address: give the exact IPv4 address datagrams use (it is covered by the ICRC)"
        )));
    }
    if a.port() == 0 {
        return Err(QpError::Invalid(format!("{field} {a} has port 0")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn req() -> CreateQpRequest {
        CreateQpRequest {
            qpn: 0x42,
            psn: 7,
            addr: SocketAddrV4::new(Ipv4Addr::LOCALHOST, 5000),
            pmtu: 1024,
            server_addr: None,
            coalesce: false,
        }
    }

    #[test]
    fn create_and_delete() {
        let t = QpTable::new(2);
        let listen = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 4791);
        let a = t.create(&req(), listen).unwrap();
        assert!(a.qpn >= 2 && a.qpn <= QPN_MASK);
        assert_eq!(a.expected_psn, 7);
        assert_eq!(a.server_addr, listen);
        let b = t.create(&req(), listen).unwrap();
        assert_ne!(a.qpn, b.qpn);
        assert_eq!(t.create(&req(), listen), Err(QpError::TooMany(2)));
        assert!(t.delete(a.qpn));
        assert!(!t.delete(a.qpn));
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn responses_go_to_the_chosen_port() {
        let listen = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 4791);
        let t = QpTable::new(2);
        let a = t.create(&req(), listen).unwrap();
        let entries = t.lock();
        let e = &entries[&a.qpn];
        assert_eq!(e.response_addr, req().addr);
        assert_eq!(e.responder.response_path().dst, req().addr);
        drop(entries);
        let t = QpTable::new(2).with_response_port(ResponsePort::Roce);
        let a = t.create(&req(), listen).unwrap();
        let entries = t.lock();
        let e = &entries[&a.qpn];
        let nic = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 4791);
        assert_eq!(e.response_addr, nic);
        assert_eq!(e.responder.response_path().dst, nic);
        assert_eq!(e.responder.response_path().src, listen);
    }

    #[test]
    fn idle_queue_pairs_are_reclaimed_and_busy_ones_kept() {
        let listen = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 4791);
        let never = QpTable::new(4);
        never.create(&req(), listen).unwrap();
        let later = Instant::now() + Duration::from_secs(3600);
        assert!(never.reclaim_idle(later).is_empty());
        assert_eq!(never.len(), 1);

        let t = QpTable::new(2).with_idle_timeout(Some(Duration::from_secs(10)));
        let a = t.create(&req(), listen).unwrap();
        let b = t.create(&req(), listen).unwrap();
        assert_eq!(t.create(&req(), listen), Err(QpError::TooMany(2)));
        let start = t.lock()[&a.qpn].last_request;
        t.lock().get_mut(&b.qpn).unwrap().last_request = start + Duration::from_secs(8);
        assert!(t.reclaim_idle(start + Duration::from_secs(9)).is_empty());
        let gone = t.reclaim_idle(start + Duration::from_secs(12));
        assert_eq!(gone.len(), 1);
        assert_eq!((gone[0].qpn, gone[0].client_addr), (a.qpn, req().addr));
        assert!(gone[0].idle >= Duration::from_secs(12));
        assert!(t.info(b.qpn).is_some());
        // The slot is free again.
        assert!(t.create(&req(), listen).is_ok());
    }

    #[test]
    fn validation() {
        let t = QpTable::new(8);
        let listen = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 4791);
        assert!(matches!(
            t.create(&req(), listen),
            Err(QpError::MissingServerAddr(_))
        ));
        let mut r = req();
        r.server_addr = Some(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 4791));
        assert!(t.create(&r, listen).is_ok());
        r.server_addr = Some(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 4792));
        assert!(t.create(&r, listen).is_err());
        for bad in [
            CreateQpRequest { qpn: 0, ..req() },
            CreateQpRequest {
                qpn: 1 << 24,
                ..req()
            },
            CreateQpRequest {
                psn: 1 << 24,
                ..req()
            },
            CreateQpRequest {
                pmtu: 1500,
                ..req()
            },
            CreateQpRequest {
                addr: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 5),
                ..req()
            },
        ] {
            let listen = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 4791);
            assert!(matches!(t.create(&bad, listen), Err(QpError::Invalid(_))));
        }
    }
}
