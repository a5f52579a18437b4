//! A fault-injecting UDP relay between sessions and memory nodes on loopback.
//!
//! Each queue pair gets its own pair of sockets: the session talks to the
//! client-facing one, the memory node to the node-facing one. Datagrams in both
//! directions are dropped, duplicated or held back and delivered after the next
//! one (reordering), with seeded probabilities, and get a new ICRC for the path
//! they continue on (the addresses are covered by it).

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use kvstore::{UdpRelay, UdpRoute};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use verbs::wire::IcrcPath;

/// Fault probabilities per datagram.
#[derive(Debug, Clone, Copy)]
pub struct Faults {
    /// Probability that a datagram is dropped.
    pub drop: f64,
    /// Probability that a forwarded datagram is sent twice.
    pub duplicate: f64,
    /// Probability that a datagram is held back and sent after the next one.
    pub reorder: f64,
    /// Seed of the per-direction generators.
    pub seed: u64,
}

/// Counters over all routes.
#[derive(Debug, Default)]
pub struct FaultCounts {
    /// Datagrams forwarded (first copies).
    pub forwarded: AtomicU64,
    /// Datagrams dropped.
    pub dropped: AtomicU64,
    /// Datagrams sent twice.
    pub duplicated: AtomicU64,
    /// Datagrams held back behind the next one.
    pub reordered: AtomicU64,
}

/// The relay: a [`UdpRelay`] whose routes forward with [`Faults`] from threads of
/// their own, until [`FaultRelay::stop`].
pub struct FaultRelay {
    faults: Faults,
    /// What the routes did so far.
    pub counts: Arc<FaultCounts>,
    stop: Arc<AtomicBool>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    routes: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl FaultRelay {
    /// A relay with `faults`; it routes nothing until a session asks.
    pub fn new(faults: Faults) -> Arc<FaultRelay> {
        Arc::new(FaultRelay {
            faults,
            counts: Arc::new(FaultCounts::default()),
            stop: Arc::new(AtomicBool::new(false)),
            threads: Mutex::new(Vec::new()),
            routes: AtomicU64::new(0),
        })
    }

    /// Stops forwarding on every route and waits for the threads.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in lock(&self.threads).drain(..) {
            let _ = t.join();
        }
    }
}

fn bind() -> Result<UdpSocket, String> {
    let s =
        UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_millis(20)))
        .map_err(|e| e.to_string())?;
    Ok(s)
}

fn local(s: &UdpSocket) -> Result<SocketAddrV4, String> {
    match s.local_addr().map_err(|e| e.to_string())? {
        std::net::SocketAddr::V4(a) => Ok(a),
        other => Err(format!("not IPv4: {other}")),
    }
}

/// Forward datagrams arriving on `from` out of `to` towards `dest`, re-ICRC'd for
/// the path `to` → `dest`, with faults.
fn pump(
    from: UdpSocket,
    to: UdpSocket,
    dest: SocketAddrV4,
    faults: Faults,
    seed: u64,
    counts: Arc<FaultCounts>,
    stop: Arc<AtomicBool>,
) -> Result<(), String> {
    let path = IcrcPath::new(local(&to)?, dest);
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut buf = vec![0u8; 65536];
    let mut held: Option<Vec<u8>> = None;
    while !stop.load(Ordering::Relaxed) {
        let n = match from.recv_from(&mut buf) {
            Ok((n, _)) => n,
            Err(_) => {
                // Idle: release a held datagram rather than keep it forever.
                if let Some(h) = held.take() {
                    let _ = to.send_to(&h, dest);
                }
                continue;
            }
        };
        let Some(mut pkt) = buf.get(..n).map(<[u8]>::to_vec) else {
            continue;
        };
        if n >= 16 {
            let icrc = path.icrc(&pkt[..n - 4]);
            pkt[n - 4..].copy_from_slice(&icrc.to_le_bytes());
        }
        if rng.random_bool(faults.drop) {
            counts.dropped.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        if held.is_none() && rng.random_bool(faults.reorder) {
            counts.reordered.fetch_add(1, Ordering::Relaxed);
            held = Some(pkt);
            continue;
        }
        let _ = to.send_to(&pkt, dest);
        counts.forwarded.fetch_add(1, Ordering::Relaxed);
        if rng.random_bool(faults.duplicate) {
            counts.duplicated.fetch_add(1, Ordering::Relaxed);
            let _ = to.send_to(&pkt, dest);
        }
        if let Some(h) = held.take() {
            let _ = to.send_to(&h, dest);
        }
    }
    Ok(())
}

impl UdpRelay for FaultRelay {
    fn route(&self, client: SocketAddrV4, memnode: SocketAddrV4) -> Result<UdpRoute, String> {
        let down = bind()?;
        let up = bind()?;
        let route = UdpRoute {
            client_side: local(&down)?,
            memnode_side: local(&up)?,
        };
        let n = self.routes.fetch_add(1, Ordering::Relaxed);
        let mut threads = lock(&self.threads);
        let pairs = [
            (
                down.try_clone().map_err(|e| e.to_string())?,
                up.try_clone().map_err(|e| e.to_string())?,
                memnode,
            ),
            (up, down, client),
        ];
        for (i, (from, to, dest)) in pairs.into_iter().enumerate() {
            let faults = self.faults;
            let counts = self.counts.clone();
            let stop = self.stop.clone();
            let seed = faults.seed ^ (n << 8) ^ i as u64;
            threads.push(std::thread::spawn(move || {
                let _ = pump(from, to, dest, faults, seed, counts, stop);
            }));
        }
        Ok(route)
    }
}
