//! A soft-RoCE responder on its own thread and UDP socket, with a receive queue for
//! SENDs and seeded fault injection (loss, duplication, reordering) in both
//! directions: the far end of a `udp` queue pair for tests of two-sided verbs.
#![allow(dead_code)]

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use verbs::mem::{AccessFlags, MemoryTable, Region, RegionInfo};
use verbs::net::{BATCH, BatchSocket};
use verbs::rc::{MAX_PACKET, RcConfig, Responder, ResponderStats};
use verbs::recv::RecvQueue;
use verbs::transport::udp::{LocalQpParams, RemoteQpParams};
use verbs::wire::IcrcPath;

/// Fault rates applied to every datagram, each way.
#[derive(Debug, Clone, Copy)]
pub struct Faults {
    /// Probability a datagram is dropped.
    pub loss: f64,
    /// Probability a datagram is delivered twice.
    pub dup: f64,
    /// Probability a datagram is held back behind the next one.
    pub reorder: f64,
    /// RNG seed.
    pub seed: u64,
}

impl Faults {
    /// No faults.
    pub const NONE: Faults = Faults {
        loss: 0.0,
        dup: 0.0,
        reorder: 0.0,
        seed: 0,
    };
}

/// The running responder.
pub struct ResponderHost {
    /// Where the client's queue pair sends.
    pub remote: RemoteQpParams,
    /// The registered region's key and address.
    pub region: RegionInfo,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<ResponderStats>>,
}

const QPN: u32 = 0x4242;

/// Turns one datagram into zero, one or two, possibly held behind the next.
struct Mangler {
    rng: SmallRng,
    faults: Faults,
    held: Option<Vec<u8>>,
}

impl Mangler {
    fn apply(&mut self, bytes: &[u8], out: &mut Vec<Vec<u8>>) {
        if self.rng.random_bool(self.faults.loss) {
            return;
        }
        let copies = if self.rng.random_bool(self.faults.dup) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            if self.held.is_none() && self.rng.random_bool(self.faults.reorder) {
                self.held = Some(bytes.to_vec());
            } else {
                out.push(bytes.to_vec());
                if let Some(h) = self.held.take() {
                    out.push(h);
                }
            }
        }
    }

    /// Release what is held (so a held datagram is never stuck forever).
    fn flush(&mut self, out: &mut Vec<Vec<u8>>) {
        if let Some(h) = self.held.take() {
            out.push(h);
        }
    }
}

impl ResponderHost {
    /// Start a responder for the client queue pair `client`, whose SENDs land in `recv`.
    pub fn start(
        client: LocalQpParams,
        config: RcConfig,
        region_len: usize,
        recv: RecvQueue,
        faults: Faults,
    ) -> ResponderHost {
        let table = MemoryTable::new();
        let region = Arc::new(Region::anonymous(region_len).expect("region"));
        let info = table
            .register(region, 0x4000_0000, AccessFlags::ALL)
            .expect("register");
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel();
        let halt = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut socket =
                BatchSocket::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)).expect("bind");
            socket.set_carries_roce(true);
            let me = socket.local_addr();
            tx.send(me).expect("report the address");
            let path = IcrcPath::new(client.addr, me);
            let mut resp = Responder::new(config, QPN, client.qpn, client.psn, path);
            resp.set_recv_queue(Some(recv));
            let mut rx_bufs: Vec<Vec<u8>> = (0..BATCH).map(|_| vec![0u8; MAX_PACKET]).collect();
            let mut meta = Vec::new();
            let mut out = vec![0u8; MAX_PACKET];
            let mut requests = Mangler {
                rng: SmallRng::seed_from_u64(faults.seed),
                faults,
                held: None,
            };
            let mut responses = Mangler {
                rng: SmallRng::seed_from_u64(faults.seed ^ 0xBEEF),
                faults,
                held: None,
            };
            let mut incoming = Vec::new();
            let mut outgoing = Vec::new();
            while !halt.load(Ordering::Relaxed) {
                let readable = socket
                    .wait_readable(Some(Duration::from_millis(2)))
                    .unwrap_or(false);
                incoming.clear();
                if readable && socket.recv_batch(&mut rx_bufs, &mut meta).is_ok() {
                    for (i, &(len, _)) in meta.iter().enumerate() {
                        if let Some(b) = rx_bufs.get(i).and_then(|b| b.get(..len)) {
                            requests.apply(b, &mut incoming);
                        }
                    }
                } else {
                    requests.flush(&mut incoming);
                }
                for d in &incoming {
                    let _ = resp.handle_datagram(d, &table);
                }
                outgoing.clear();
                while let Some(n) = resp.poll_transmit(&mut out) {
                    responses.apply(&out[..n], &mut outgoing);
                }
                if incoming.is_empty() {
                    responses.flush(&mut outgoing);
                }
                let batch: Vec<(&[u8], SocketAddrV4)> =
                    outgoing.iter().map(|d| (&d[..], client.addr)).collect();
                if !batch.is_empty() {
                    let _ = socket.send_batch(&batch);
                }
            }
            *resp.stats()
        });
        let addr = rx.recv().expect("the host's address");
        ResponderHost {
            remote: RemoteQpParams {
                addr,
                qpn: QPN,
                coalesce: false,
            },
            region: info,
            stop,
            thread: Some(thread),
        }
    }

    /// Stop the thread and return the responder's counters.
    pub fn stop(mut self) -> ResponderStats {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for ResponderHost {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
