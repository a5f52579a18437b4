//! Bad input at a live memory node: 10^5 random and mutated datagrams from a raw UDP
//! socket, while a well-behaved client on another queue pair keeps doing verbs.
//!
//! At the end: the client saw only correct results, the node still serves, every datagram
//! is accounted for exactly (dropped for one reason or accepted by a queue pair), and no
//! byte of the region outside the client's zone and the fuzzer's scratch zone changed.

mod common;

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use memnode::api::CreateQpRequest;
use memnode::client;
use memnode::metrics::{AcceptOutcome, DropKind, NakKind};
use memnode::{Memnode, MemnodeConfig, MemnodeHandle};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use verbs::rc::RcConfig;
use verbs::transport::udp::UdpTransport;
use verbs::wire::{
    AethRepr, AtomicAckEthRepr, AtomicEthRepr, BthRepr, IcrcPath, Opcode, PacketRepr, RethRepr,
    Syndrome,
};
use verbs::worker::{Worker, WorkerConfig};
use verbs::wr::RemoteAddr;

const SEED: u64 = 0x00f0_22ed;
const DATAGRAMS: u64 = 100_000;
/// Datagrams sent before waiting for the node to catch up (bounds what sits in the
/// node's socket buffer, so loopback loses nothing and the accounting is exact).
const ROUND: u64 = 64;
const CAPACITY: u64 = 1 << 20;
/// The well-behaved client's zone: counter word at 0, CAS word at 8, data from 4096.
const CLIENT_END: u64 = 64 * 1024;
const CLIENT_DATA: u64 = 4096;
/// The only place the fuzzer's well-formed accesses with the right rkey may write.
const SCRATCH: (u64, u64) = (512 * 1024, 576 * 1024);
const PMTU: u64 = 1024;
const PSN_MASK: u32 = 0x00FF_FFFF;

/// What the client thread reports.
struct ClientReport {
    ops: u64,
    errors: Vec<String>,
    packets_sent: u64,
    counter: u64,
    cas_word: u64,
    mirror: Vec<u8>,
}

fn note(r: &mut ClientReport, what: String) {
    if r.errors.len() < 20 {
        r.errors.push(what);
    }
}

fn run_client(
    admin: String,
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
    qpn_tx: mpsc::Sender<u32>,
) -> ClientReport {
    // Lenient timers: this test is about the node, not the client's retransmissions.
    let config = RcConfig {
        retransmit_timeout: Duration::from_millis(200),
        max_retries: 50,
        ..RcConfig::default()
    };
    let mut transport = UdpTransport::bind(Ipv4Addr::LOCALHOST, config).unwrap();
    let conn = client::connect_udp_qp(&admin, &mut transport).unwrap();
    qpn_tx.send(conn.remote_qpn).unwrap();
    let region = conn.regions[0].clone();
    let base = RemoteAddr::new(region.rkey, region.base_va);
    let worker = Worker::new(Box::new(transport), WorkerConfig::default());
    let qp = worker.qp(conn.handle);
    let mut report = ClientReport {
        ops: 0,
        errors: Vec::new(),
        packets_sent: 0,
        counter: 0,
        cas_word: 0,
        mirror: vec![0u8; (CLIENT_END - CLIENT_DATA) as usize],
    };
    let mut rng = SmallRng::seed_from_u64(SEED ^ 0xc11e47);
    worker.block_on(async {
        let r = &mut report;
        while !stop.load(Ordering::SeqCst) {
            match rng.random_range(0..5u32) {
                0 => match qp.faa(base, 1).await {
                    Ok(v) if v == r.counter => r.counter += 1,
                    other => note(r, format!("FAA: {other:?}, expected Ok({})", r.counter)),
                },
                1 => {
                    let new: u64 = rng.random();
                    match qp.cas(base.offset(8), r.cas_word, new).await {
                        Ok(v) if v == r.cas_word => r.cas_word = new,
                        other => note(r, format!("CAS: {other:?}, expected Ok({})", r.cas_word)),
                    }
                }
                2 => {
                    // A CAS that must fail and leave the word alone.
                    let wrong = r.cas_word ^ 1;
                    match qp.cas(base.offset(8), wrong, 42).await {
                        Ok(v) if v == r.cas_word => {}
                        other => note(r, format!("failing CAS: {other:?}")),
                    }
                }
                3 => {
                    let len = rng.random_range(1..3000usize);
                    let off = rng.random_range(0..r.mirror.len() - len);
                    let data: Vec<u8> = (0..len).map(|_| rng.random()).collect();
                    match qp
                        .write(base.offset(CLIENT_DATA + off as u64), data.clone())
                        .await
                    {
                        Ok(()) => r.mirror[off..off + len].copy_from_slice(&data),
                        Err(e) => note(r, format!("WRITE: {e}")),
                    }
                }
                _ => {
                    let len = rng.random_range(1..5000usize);
                    let off = rng.random_range(0..r.mirror.len() - len);
                    match qp
                        .read(base.offset(CLIENT_DATA + off as u64), len as u32)
                        .await
                    {
                        Ok(b) if b == r.mirror[off..off + len] => {}
                        Ok(_) => note(r, format!("READ of {len} B at +{off}: wrong bytes")),
                        Err(e) => note(r, format!("READ: {e}")),
                    }
                }
            }
            r.ops += 1;
            sent.store(worker.transport_stats().packets_sent, Ordering::SeqCst);
        }
    });
    report.packets_sent = worker.transport_stats().packets_sent;
    sent.store(report.packets_sent, Ordering::SeqCst);
    report
}

/// The fuzzer: builds datagrams and counts what the node must conclude about them.
struct Fuzzer {
    rng: SmallRng,
    socket: UdpSocket,
    path: IcrcPath,
    qpn: u32,
    client_qpn: u32,
    rkey: u32,
    base: u64,
    epsn: u32,
    sent: u64,
    truncated: u64,
    unknown_qpn: u64,
    to_fuzz_qp: u64,
    to_client_qp: u64,
    by_category: [u64; 12],
}

impl Fuzzer {
    fn build(
        &self,
        op: Opcode,
        qpn: u32,
        psn: u32,
        reth: Option<RethRepr>,
        atomic_eth: Option<AtomicEthRepr>,
        payload: &[u8],
    ) -> Vec<u8> {
        let mut repr = PacketRepr::new(BthRepr::new(op, qpn, psn, true));
        repr.reth = reth;
        repr.atomic_eth = atomic_eth;
        repr.payload = payload;
        if op.has_immdt() {
            repr.immdt = Some(0xdead_beef);
        }
        if op.has_aeth() {
            repr.aeth = Some(AethRepr {
                syndrome: Syndrome::Ack { credits: 0x1f },
                msn: 1,
            });
        }
        if op.has_atomic_ack_eth() {
            repr.atomic_ack_eth = Some(AtomicAckEthRepr { original: 5 });
        }
        let mut buf = vec![0u8; repr.buffer_len()];
        let n = repr.emit(&mut buf, &self.path).expect("test packets emit");
        buf.truncate(n);
        buf
    }

    fn reth(&self, offset: u64, len: u32) -> Option<RethRepr> {
        Some(RethRepr {
            va: self.base.wrapping_add(offset),
            rkey: self.rkey,
            dma_len: len,
        })
    }

    fn atomic(&self, offset: u64, swap_add: u64, compare: u64) -> Option<AtomicEthRepr> {
        Some(AtomicEthRepr {
            va: self.base.wrapping_add(offset),
            rkey: self.rkey,
            swap_add,
            compare,
        })
    }

    fn scratch_offset(&mut self, len: u64, align: u64) -> u64 {
        let o = self.rng.random_range(SCRATCH.0..SCRATCH.1 - len);
        o - o % align
    }

    fn payload(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.rng.random()).collect()
    }

    /// A well-formed request with a valid ICRC that may touch only the scratch zone,
    /// and the number of PSNs it consumes.
    fn valid_request(&mut self, psn: u32) -> (Vec<u8>, u32) {
        match self.rng.random_range(0..5u32) {
            0 => {
                let len = self.rng.random_range(0..=PMTU as usize);
                let off = self.scratch_offset(len as u64 + 1, 1);
                let data = self.payload(len);
                let reth = self.reth(off, len as u32);
                (
                    self.build(Opcode::WriteOnly, self.qpn, psn, reth, None, &data),
                    1,
                )
            }
            1 => {
                let len = self.rng.random_range(0..4096u32);
                let off = self.rng.random_range(0..CAPACITY - u64::from(len));
                let reth = self.reth(off, len);
                let npsn = (u64::from(len).div_ceil(PMTU)).max(1) as u32;
                (
                    self.build(Opcode::ReadRequest, self.qpn, psn, reth, None, &[]),
                    npsn,
                )
            }
            2 => {
                let off = self.scratch_offset(8, 8);
                let (swap, compare) = (self.rng.random(), self.rng.random_range(0..2));
                let a = self.atomic(off, swap, compare);
                (
                    self.build(Opcode::CompareSwap, self.qpn, psn, None, a, &[]),
                    1,
                )
            }
            3 => {
                let off = self.scratch_offset(8, 8);
                let add = self.rng.random();
                let a = self.atomic(off, add, 0);
                (self.build(Opcode::FetchAdd, self.qpn, psn, None, a, &[]), 1)
            }
            _ => {
                let len = self.rng.random_range(0..=PMTU as usize);
                let off = self.scratch_offset(len as u64 + 1, 1);
                let data = self.payload(len);
                let reth = self.reth(off, len as u32);
                (
                    self.build(Opcode::WriteOnlyImm, self.qpn, psn, reth, None, &data),
                    1,
                )
            }
        }
    }

    /// A well-formed request with a valid ICRC that the node must refuse: out of bounds,
    /// wrong rkey, misaligned atomic, bad lengths. Returns it and its PSN consumption.
    fn bad_request(&mut self, psn: u32) -> (Vec<u8>, u32) {
        let qpn = self.qpn;
        match self.rng.random_range(0..10u32) {
            0 => {
                // WRITE straddling the end of the region, or before its start.
                let data = self.payload(64);
                let off = if self.rng.random() {
                    CAPACITY - self.rng.random_range(1..64u64)
                } else {
                    0u64.wrapping_sub(self.rng.random_range(1..64u64))
                };
                let reth = self.reth(off, 64);
                (
                    self.build(Opcode::WriteOnly, qpn, psn, reth, None, &data),
                    1,
                )
            }
            1 => {
                // WRITE with a wrong rkey into the client's zone.
                let data = self.payload(32);
                let reth = Some(RethRepr {
                    va: self.base + 64,
                    rkey: self.rkey ^ self.rng.random_range(1..u32::MAX),
                    dma_len: 32,
                });
                (
                    self.build(Opcode::WriteOnly, qpn, psn, reth, None, &data),
                    1,
                )
            }
            2 => {
                // Misaligned atomic inside the client's zone.
                let off = 8 * self.rng.random_range(0..64u64) + self.rng.random_range(1..8u64);
                let a = self.atomic(off, 1, 0);
                let op = if self.rng.random() {
                    Opcode::FetchAdd
                } else {
                    Opcode::CompareSwap
                };
                (self.build(op, qpn, psn, None, a, &[]), 1)
            }
            3 => {
                // Atomic out of bounds (far away, or wrapping around the address space).
                let off = if self.rng.random() {
                    CAPACITY + 8 * self.rng.random_range(0..1000u64)
                } else {
                    u64::MAX - 7
                };
                let a = self.atomic(off, 1, 0);
                (self.build(Opcode::FetchAdd, qpn, psn, None, a, &[]), 1)
            }
            4 => {
                // READ beyond the end / longer than the region / wrong rkey.
                let (off, len, rkey) = match self.rng.random_range(0..3u32) {
                    0 => (CAPACITY - 8, 64u32, self.rkey),
                    1 => (0, (CAPACITY as u32) + 64, self.rkey),
                    _ => (0, 64, self.rkey.wrapping_add(1)),
                };
                let reth = Some(RethRepr {
                    va: self.base.wrapping_add(off),
                    rkey,
                    dma_len: len,
                });
                let npsn = (u64::from(len).div_ceil(PMTU)).max(1) as u32;
                (
                    self.build(Opcode::ReadRequest, qpn, psn, reth, None, &[]),
                    npsn,
                )
            }
            5 => {
                // WRITE ONLY whose payload disagrees with its DMA length (into the client zone).
                let data = self.payload(16);
                let reth = self.reth(128, 32);
                (
                    self.build(Opcode::WriteOnly, qpn, psn, reth, None, &data),
                    1,
                )
            }
            6 => {
                // WRITE FIRST with a short first packet (into the client zone).
                let data = self.payload(100);
                let reth = self.reth(256, 4000);
                (
                    self.build(Opcode::WriteFirst, qpn, psn, reth, None, &data),
                    1,
                )
            }
            7 => {
                // WRITE MIDDLE / LAST with no message in progress.
                let data = self.payload(PMTU as usize);
                let op = if self.rng.random() {
                    Opcode::WriteMiddle
                } else {
                    Opcode::WriteLast
                };
                (self.build(op, qpn, psn, None, None, &data), 1)
            }
            8 => {
                // WRITE ONLY longer than the path MTU.
                let data = self.payload(2 * PMTU as usize);
                let off = self.scratch_offset(2 * PMTU, 1);
                let reth = self.reth(off, 2 * PMTU as u32);
                (
                    self.build(Opcode::WriteOnly, qpn, psn, reth, None, &data),
                    1,
                )
            }
            _ => {
                // A multi-packet WRITE out of bounds, first packet only.
                let data = self.payload(PMTU as usize);
                let reth = self.reth(CAPACITY - PMTU, 4 * PMTU as u32);
                (
                    self.build(Opcode::WriteFirst, qpn, psn, reth, None, &data),
                    1,
                )
            }
        }
    }

    /// Rewrites a request so that, if it carries the right rkey, it can only write the
    /// scratch zone (and reads stay short), then recomputes the ICRC.
    fn sanitize_and_seal(&mut self, pkt: &mut [u8]) {
        if pkt.len() < 4 {
            return;
        }
        if let Some(op) = Opcode::from_u8(pkt[0]) {
            let ext_ok = (op.has_reth() && pkt.len() >= 12 + 16 + 4)
                || (op.has_atomic_eth() && pkt.len() >= 12 + 28 + 4);
            if ext_ok {
                let va = u64::from_be_bytes(pkt[12..20].try_into().unwrap());
                let rkey = u32::from_be_bytes(pkt[20..24].try_into().unwrap());
                let mut len = if op.has_reth() {
                    u64::from(u32::from_be_bytes(pkt[24..28].try_into().unwrap()))
                } else {
                    8
                };
                if op == Opcode::ReadRequest {
                    // Keep READs short whatever their rkey: the responder allocates the
                    // whole READ before checking access, so a wrong-rkey READ of up to
                    // 1 GiB costs that much memory and time (see the verbs responder).
                    if len > 16 * 1024 {
                        let short: u32 = self.rng.random_range(0..4096);
                        pkt[24..28].copy_from_slice(&short.to_be_bytes());
                    }
                } else if rkey == self.rkey {
                    let (lo, hi) = (self.base + SCRATCH.0, self.base + SCRATCH.1);
                    let inside = va >= lo && va.checked_add(len).is_some_and(|e| e <= hi);
                    if !inside {
                        if len > SCRATCH.1 - SCRATCH.0 - 64 {
                            len = self.rng.random_range(0..2 * PMTU);
                            if op.has_reth() {
                                pkt[24..28].copy_from_slice(&(len as u32).to_be_bytes());
                            }
                        }
                        let new_va =
                            lo + self.rng.random_range(0..SCRATCH.1 - SCRATCH.0 - len) + (va % 8);
                        let new_va = new_va.min(hi - len);
                        pkt[12..20].copy_from_slice(&new_va.to_be_bytes());
                    }
                }
            }
        }
        let n = pkt.len();
        let icrc = self.path.icrc(&pkt[..n - 4]);
        pkt[n - 4..].copy_from_slice(&icrc.to_le_bytes());
    }

    fn send(&mut self, category: usize, pkt: &[u8]) {
        if pkt.len() < 12 {
            self.truncated += 1;
        } else {
            let qpn = u32::from_be_bytes([0, pkt[5], pkt[6], pkt[7]]);
            if qpn == self.qpn {
                self.to_fuzz_qp += 1;
            } else if qpn == self.client_qpn {
                self.to_client_qp += 1;
            } else {
                self.unknown_qpn += 1;
            }
        }
        self.by_category[category] += 1;
        self.sent += 1;
        loop {
            match self.socket.send_to(pkt, self.path.dst) {
                Ok(_) => return,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_micros(100))
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => panic!("sending a fuzz datagram: {e}"),
            }
        }
    }

    fn other_qpn(&mut self) -> u32 {
        loop {
            let q = self.rng.random_range(0..=PSN_MASK);
            if q != self.qpn && q != self.client_qpn {
                return q;
            }
        }
    }

    /// Sends one datagram of a random category.
    fn one(&mut self) {
        let psn = self.epsn;
        let category = self.rng.random_range(0..12usize);
        match category {
            0 => {
                // Random bytes, often shorter than a BTH.
                let len = self.rng.random_range(0..80usize);
                let pkt = self.payload(len);
                self.send(category, &pkt);
            }
            1 => {
                // A valid packet to a QPN nobody owns.
                let (mut pkt, _) = self.valid_request(psn);
                let q = self.other_qpn().to_be_bytes();
                pkt[5..8].copy_from_slice(&q[1..4]);
                self.sanitize_and_seal(&mut pkt);
                self.send(category, &pkt);
            }
            2 | 3 => {
                let (pkt, npsn) = self.bad_request(psn);
                self.send(category, &pkt);
                self.epsn = psn.wrapping_add(npsn) & PSN_MASK;
            }
            4 => {
                let (pkt, npsn) = self.valid_request(psn);
                self.send(category, &pkt);
                self.epsn = psn.wrapping_add(npsn) & PSN_MASK;
            }
            5 => {
                // PSN far ahead.
                let ahead = psn.wrapping_add(self.rng.random_range(2..(1 << 23))) & PSN_MASK;
                let (pkt, _) = self.valid_request(ahead);
                self.send(category, &pkt);
            }
            6 => {
                // Duplicates (PSN behind).
                let behind = psn.wrapping_sub(self.rng.random_range(1..200)) & PSN_MASK;
                let (pkt, _) = self.valid_request(behind);
                self.send(category, &pkt);
            }
            7 => {
                // Bit flips, ICRC left stale.
                let (mut pkt, _) = self.valid_request(psn);
                for _ in 0..self.rng.random_range(1..=3) {
                    let bit = self.rng.random_range(0..pkt.len() * 8);
                    pkt[bit / 8] ^= 1 << (bit % 8);
                }
                self.send(category, &pkt);
            }
            8 => {
                // Truncated or extended.
                let (mut pkt, _) = self.valid_request(psn);
                if self.rng.random() {
                    let keep = self.rng.random_range(0..pkt.len());
                    pkt.truncate(keep);
                } else {
                    let extra = self.rng.random_range(1..64usize);
                    let more = self.payload(extra);
                    pkt.extend_from_slice(&more);
                }
                self.send(category, &pkt);
            }
            9 => {
                // Header bytes mutated, ICRC recomputed: the parser and the responder see
                // arbitrary opcodes, pad counts, lengths and addresses with a valid ICRC.
                let (mut pkt, _) = self.valid_request(psn);
                let header = pkt.len().saturating_sub(4).min(12 + 28);
                for _ in 0..self.rng.random_range(1..=4) {
                    let i = self.rng.random_range(0..header);
                    pkt[i] = self.rng.random();
                }
                if self.rng.random_range(0..10) < 8 && pkt.len() >= 12 {
                    let q = self.qpn.to_be_bytes();
                    pkt[5..8].copy_from_slice(&q[1..4]);
                }
                if self.rng.random_range(0..4) == 0 {
                    let keep = self.rng.random_range(4..=pkt.len());
                    pkt.truncate(keep);
                }
                self.sanitize_and_seal(&mut pkt);
                self.send(category, &pkt);
            }
            11 => {
                // A valid request to the well-behaved client's queue pair, from the
                // fuzzer's own address: a stranger who learned the QPN.
                let any_psn = self.rng.random_range(0..=PSN_MASK);
                let (mut pkt, _) = self.valid_request(any_psn);
                let q = self.client_qpn.to_be_bytes();
                pkt[5..8].copy_from_slice(&q[1..4]);
                self.sanitize_and_seal(&mut pkt);
                self.send(category, &pkt);
            }
            _ => {
                // Responses sent to a responder.
                let op = [
                    Opcode::Acknowledge,
                    Opcode::AtomicAcknowledge,
                    Opcode::ReadResponseOnly,
                    Opcode::ReadResponseMiddle,
                ][self.rng.random_range(0..4)];
                let payload = if op.has_payload() {
                    self.payload(16)
                } else {
                    Vec::new()
                };
                let pkt = self.build(op, self.qpn, psn, None, None, &payload);
                self.send(category, &pkt);
            }
        }
    }

    fn drain_responses(&self) -> u64 {
        let mut buf = [0u8; 8192];
        let mut n = 0;
        while self.socket.recv_from(&mut buf).is_ok() {
            n += 1;
        }
        n
    }
}

fn wait_until_received(node: &MemnodeHandle, target: impl Fn() -> u64, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = node.metrics().received;
        if got >= target() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: node received {got} of {} datagrams (lost on loopback?)",
            target()
        );
        std::thread::sleep(Duration::from_micros(200));
    }
}

#[test]
fn ten_to_the_five_bad_datagrams_are_all_accounted_for() {
    let node = Memnode::start(MemnodeConfig::local(CAPACITY)).unwrap();
    let admin = node.admin_url();
    let region = node.regions()[0].clone();

    let stop = Arc::new(AtomicBool::new(false));
    let client_sent = Arc::new(AtomicU64::new(0));
    let (qpn_tx, qpn_rx) = mpsc::channel();
    let client = {
        let (admin, stop, sent) = (admin.clone(), stop.clone(), client_sent.clone());
        std::thread::spawn(move || run_client(admin, stop, sent, qpn_tx))
    };
    let client_qpn = qpn_rx.recv_timeout(Duration::from_secs(20)).unwrap();

    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_nonblocking(true).unwrap();
    let SocketAddr::V4(fuzz_addr) = socket.local_addr().unwrap() else {
        unreachable!("bound to IPv4")
    };
    let mut rng = SmallRng::seed_from_u64(SEED);
    let start_psn = rng.random_range(0..=PSN_MASK);
    let qp = client::create_qp(
        &admin,
        &CreateQpRequest {
            qpn: 0xbeef,
            psn: start_psn,
            addr: fuzz_addr,
            pmtu: PMTU as u32,
            server_addr: None,
            coalesce: false,
        },
    )
    .unwrap();
    let mut f = Fuzzer {
        rng,
        socket,
        path: IcrcPath::new(fuzz_addr, node.data_addr()),
        qpn: qp.qpn,
        client_qpn,
        rkey: region.rkey,
        base: region.base_va,
        epsn: start_psn,
        sent: 0,
        truncated: 0,
        unknown_qpn: 0,
        to_fuzz_qp: 0,
        to_client_qp: 0,
        by_category: [0; 12],
    };

    let started = Instant::now();
    let mut responses = 0;
    while f.sent < DATAGRAMS {
        for _ in 0..ROUND.min(DATAGRAMS - f.sent) {
            f.one();
        }
        let fuzz_sent = f.sent;
        wait_until_received(
            &node,
            || fuzz_sent + client_sent.load(Ordering::SeqCst),
            "pacing",
        );
        // Resynchronise with the responder's expected PSN.
        if let Some(info) = node.qps().info(f.qpn) {
            f.epsn = info.expected_psn;
        }
        responses += f.drain_responses();
        assert!(node.is_running(), "the data plane stopped");
    }
    let fuzz_time = started.elapsed();
    stop.store(true, Ordering::SeqCst);
    let report = client.join().expect("client thread");
    let total = f.sent + report.packets_sent;
    wait_until_received(&node, || total, "final");
    std::thread::sleep(Duration::from_millis(100));
    responses += f.drain_responses();

    // The well-behaved client saw only correct results.
    assert!(
        report.errors.is_empty(),
        "client errors: {:#?}",
        report.errors
    );
    assert!(
        report.ops >= 50,
        "client made only {} operations",
        report.ops
    );

    // The node is alive and answers its admin API.
    assert!(node.is_running());
    let health = client::request(&admin, "GET", "/healthz", None).unwrap();
    assert_eq!(health.status, 200);

    // Every datagram is accounted for, exactly.
    let m = node.metrics();
    let summary = format!(
        "{m:#?}\nfuzzer: sent {} truncated {} unknown {} to-fuzz-qp {} to-client-qp {} by category {:?}; client sent {} in {} ops; {} responses; fuzzing took {fuzz_time:?}",
        f.sent,
        f.truncated,
        f.unknown_qpn,
        f.to_fuzz_qp,
        f.to_client_qp,
        f.by_category,
        report.packets_sent,
        report.ops,
        responses
    );
    eprintln!("{summary}");
    assert_eq!(m.received, total, "{summary}");
    assert_eq!(
        m.dropped_total() + m.accepted_total(),
        m.received,
        "{summary}"
    );
    assert_eq!(m.dropped(DropKind::Truncated), f.truncated, "{summary}");
    assert_eq!(m.dropped(DropKind::UnknownQpn), f.unknown_qpn, "{summary}");
    let fuzz_qp = node.qps().info(f.qpn).unwrap();
    let client_qp = node.qps().info(client_qpn).unwrap();
    assert_eq!(
        fuzz_qp.counters.accepted + fuzz_qp.counters.dropped,
        f.to_fuzz_qp,
        "{summary}"
    );
    assert_eq!(
        client_qp.counters.accepted, report.packets_sent,
        "{summary}"
    );
    assert_eq!(client_qp.counters.dropped, f.to_client_qp, "{summary}");
    // Whatever reaches the client's queue pair from another address is refused as such.
    assert_eq!(
        m.dropped(DropKind::WrongSource),
        f.to_client_qp,
        "{summary}"
    );
    assert_eq!(
        m.dropped(DropKind::Malformed)
            + m.dropped(DropKind::BadIcrc)
            + m.dropped(DropKind::NotARequest)
            + m.dropped(DropKind::WrongSource),
        fuzz_qp.counters.dropped + client_qp.counters.dropped,
        "{summary}"
    );
    // NAKs by reason equal what the queue pairs report, and every reason occurred.
    let per_qp =
        |f: fn(&memnode::api::QpCounters) -> u64| f(&fuzz_qp.counters) + f(&client_qp.counters);
    assert_eq!(
        m.naks(NakKind::PsnSequence),
        per_qp(|c| c.naks_sequence),
        "{summary}"
    );
    assert_eq!(
        m.naks(NakKind::RemoteAccess),
        per_qp(|c| c.naks_access),
        "{summary}"
    );
    assert_eq!(
        m.naks(NakKind::InvalidRequest),
        per_qp(|c| c.naks_invalid),
        "{summary}"
    );
    assert_eq!(
        m.accepted(AcceptOutcome::Duplicate),
        per_qp(|c| c.duplicates),
        "{summary}"
    );
    for kind in DropKind::ALL {
        assert!(m.dropped(kind) > 0, "no {} drops\n{summary}", kind.label());
    }
    for kind in NakKind::ALL {
        assert!(m.naks(kind) > 0, "no {} NAKs\n{summary}", kind.label());
    }
    for outcome in AcceptOutcome::ALL {
        assert!(
            m.accepted(outcome) > 0,
            "no {} packets\n{summary}",
            outcome.label()
        );
    }
    // The Prometheus view says the same.
    let r = client::request(&admin, "GET", "/metrics", None).unwrap();
    let samples = common::parse_prometheus(&String::from_utf8(r.body).unwrap()).unwrap();
    for kind in DropKind::ALL {
        let key = format!(
            "dmkv_memnode_datagrams_dropped_total{{reason=\"{}\"}}",
            kind.label()
        );
        assert_eq!(samples.get(&key), Some(&(m.dropped(kind) as f64)), "{key}");
    }

    // Memory: the client's zone holds exactly what the client wrote; everything outside
    // the client's zone and the fuzzer's scratch zone is untouched (still zero).
    let mut mem = vec![0u8; CAPACITY as usize];
    node.memory().region.read(0, &mut mem).unwrap();
    assert_eq!(mem[0..8], report.counter.to_le_bytes(), "FAA counter");
    assert_eq!(mem[8..16], report.cas_word.to_le_bytes(), "CAS word");
    assert!(mem[16..CLIENT_DATA as usize].iter().all(|&b| b == 0));
    assert!(
        mem[CLIENT_DATA as usize..CLIENT_END as usize] == report.mirror[..],
        "client data zone differs from what the client wrote"
    );
    let outside = mem[CLIENT_END as usize..SCRATCH.0 as usize]
        .iter()
        .chain(&mem[SCRATCH.1 as usize..])
        .filter(|&&b| b != 0)
        .count();
    assert_eq!(
        outside, 0,
        "{outside} bytes outside the targeted zones changed"
    );
    node.shutdown();
}
