//! Deterministic network simulation of the RC protocol core.
//!
//! A requester and a responder talk through a simulated network with seeded
//! loss, duplication, reordering and latency, on a simulated clock. One client
//! issues a random mix of READs, WRITEs (including multi-packet ones), CASes
//! and FAAs; because a responder executes in PSN order, every completion's
//! exact result can be predicted by applying the same operations in posting
//! order to a shadow copy of memory. Any lost, doubled or reordered effect
//! shows up as a mismatch.

use std::collections::VecDeque;
use std::net::SocketAddrV4;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use verbs::mem::{AccessFlags, MemoryTable, Region};
use verbs::rc::{MAX_PACKET, Pmtu, QpState, RcConfig, Requester, Responder};
use verbs::wire::IcrcPath;
use verbs::wr::{Completion, CompletionError, CompletionValue, RemoteAddr, WorkRequest};

const REGION_LEN: usize = 64 * 1024;
const BASE_VA: u64 = 0x7f00_0000_0000;
const COUNTERS: u64 = 16;

#[derive(Clone, Copy, Debug)]
struct Faults {
    loss: f64,
    dup: f64,
    reorder: f64,
}

struct Net {
    rng: SmallRng,
    faults: Faults,
    latency: Duration,
    /// (deliver at, send order, to responder?, bytes)
    in_flight: Vec<(Instant, u64, bool, Vec<u8>)>,
    sent: u64,
    delivered: u64,
    dropped: u64,
}

impl Net {
    fn send(&mut self, now: Instant, to_responder: bool, bytes: &[u8]) {
        if self.rng.random_bool(self.faults.loss) {
            self.dropped += 1;
            return;
        }
        let copies = if self.rng.random_bool(self.faults.dup) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let mut at = now + self.latency;
            if self.rng.random_bool(self.faults.reorder) {
                at += Duration::from_micros(self.rng.random_range(1..40));
            }
            self.sent += 1;
            self.in_flight
                .push((at, self.sent, to_responder, bytes.to_vec()));
        }
    }

    fn next_due(&self) -> Option<Instant> {
        self.in_flight.iter().map(|(t, _, _, _)| *t).min()
    }

    fn take_due(&mut self, now: Instant) -> Vec<(bool, Vec<u8>)> {
        // Deliver in (time, send order): without injected reordering the network is FIFO.
        let mut due: Vec<(Instant, u64, bool, Vec<u8>)> = Vec::new();
        let mut i = 0;
        while i < self.in_flight.len() {
            if self.in_flight[i].0 <= now {
                due.push(self.in_flight.swap_remove(i));
            } else {
                i += 1;
            }
        }
        due.sort_by_key(|(t, seq, _, _)| (*t, *seq));
        self.delivered += due.len() as u64;
        due.into_iter().map(|(_, _, to, b)| (to, b)).collect()
    }
}

type Expected = Result<CompletionValue, CompletionError>;

/// A random work request and the completion it must produce, computed on `shadow`.
///
/// With `refusals`, about one request in twenty is one the responder must refuse (a
/// wrong rkey, or a misaligned atomic): it must complete with that error, never as done,
/// even when its NAK is lost and later requests are acknowledged.
fn random_op(
    rng: &mut SmallRng,
    rkey: u32,
    shadow: &mut [u8],
    refusals: bool,
) -> (WorkRequest, Expected) {
    if refusals && rng.random_bool(0.05) {
        let off = rng.random_range(COUNTERS as usize * 8..REGION_LEN - 4096) as u64;
        return match rng.random_range(0..4) {
            0 => (
                WorkRequest::write(RemoteAddr::new(rkey ^ 1, BASE_VA + off), vec![0xEE; 64]),
                Err(CompletionError::RemoteAccess),
            ),
            1 => (
                WorkRequest::write(RemoteAddr::new(rkey ^ 1, BASE_VA + off), vec![0xEE; 3000]),
                Err(CompletionError::RemoteAccess),
            ),
            2 => (
                WorkRequest::read(RemoteAddr::new(rkey ^ 1, BASE_VA + off), 2000),
                Err(CompletionError::RemoteAccess),
            ),
            _ => (
                WorkRequest::faa(RemoteAddr::new(rkey, BASE_VA + 4), 1),
                Err(CompletionError::RemoteInvalidRequest),
            ),
        };
    }
    let (wr, v) = random_valid_op(rng, rkey, shadow);
    (wr, Ok(v))
}

fn random_valid_op(
    rng: &mut SmallRng,
    rkey: u32,
    shadow: &mut [u8],
) -> (WorkRequest, CompletionValue) {
    let word = |shadow: &[u8], off: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&shadow[off..off + 8]);
        u64::from_le_bytes(b)
    };
    match rng.random_range(0..10) {
        0..=2 => {
            let len = *[0usize, 8, 64, 200, 1024, 1500, 3000, 5000]
                .get(rng.random_range(0..8))
                .unwrap_or(&8);
            let off = rng.random_range(COUNTERS as usize * 8..REGION_LEN - len);
            let expect = shadow[off..off + len].to_vec();
            (
                WorkRequest::read(RemoteAddr::new(rkey, BASE_VA + off as u64), len as u32),
                CompletionValue::Read(expect),
            )
        }
        3..=5 => {
            let len = *[1usize, 8, 64, 300, 1024, 2049, 4100]
                .get(rng.random_range(0..7))
                .unwrap_or(&8);
            let off = rng.random_range(COUNTERS as usize * 8..REGION_LEN - len);
            let data: Vec<u8> = (0..len).map(|_| rng.random()).collect();
            shadow[off..off + len].copy_from_slice(&data);
            (
                WorkRequest::write(RemoteAddr::new(rkey, BASE_VA + off as u64), data),
                CompletionValue::Write,
            )
        }
        6..=7 => {
            let off = rng.random_range(0..COUNTERS) as usize * 8;
            let old = word(shadow, off);
            shadow[off..off + 8].copy_from_slice(&old.wrapping_add(1).to_le_bytes());
            (
                WorkRequest::faa(RemoteAddr::new(rkey, BASE_VA + off as u64), 1),
                CompletionValue::Atomic(old),
            )
        }
        _ => {
            let off = rng.random_range(0..COUNTERS) as usize * 8;
            let old = word(shadow, off);
            // Half the CASes are expected to succeed, half to fail.
            let compare = if rng.random_bool(0.5) { old } else { old ^ 1 };
            let swap = rng.random::<u64>();
            if compare == old {
                shadow[off..off + 8].copy_from_slice(&swap.to_le_bytes());
            }
            (
                WorkRequest::cas(RemoteAddr::new(rkey, BASE_VA + off as u64), compare, swap),
                CompletionValue::Atomic(old),
            )
        }
    }
}

struct Outcome {
    completions: Vec<Completion>,
    expected: Vec<Expected>,
    requester: Requester,
    responder: Responder,
    final_memory: Vec<u8>,
    shadow: Vec<u8>,
}

fn path() -> IcrcPath {
    IcrcPath::new(
        "10.0.0.1:49152".parse::<SocketAddrV4>().expect("addr"),
        "10.0.0.2:4791".parse::<SocketAddrV4>().expect("addr"),
    )
}

fn simulate(
    seed: u64,
    faults: Faults,
    ops: usize,
    start_psn: u32,
    pmtu: u32,
    refusals: bool,
) -> Outcome {
    let mut rng = SmallRng::seed_from_u64(seed);
    let table = MemoryTable::new();
    let region = Arc::new(Region::anonymous(REGION_LEN).expect("region"));
    let info = table
        .register(region.clone(), BASE_VA, AccessFlags::ALL)
        .expect("register");
    let config = RcConfig {
        pmtu: Pmtu::new(pmtu).expect("pmtu"),
        retransmit_timeout: Duration::from_micros(200),
        max_retries: 1000,
        max_outstanding: 32,
        atomic_ring: 64,
        ..RcConfig::default()
    };
    let mut req = Requester::new(config.clone(), 0x11, 0x22, start_psn, path());
    let mut resp = Responder::new(config, 0x22, 0x11, start_psn, path());
    let mut net = Net {
        rng: SmallRng::seed_from_u64(seed ^ 0x5eed),
        faults,
        latency: Duration::from_micros(5),
        in_flight: Vec::new(),
        sent: 0,
        delivered: 0,
        dropped: 0,
    };
    let mut shadow = vec![0u8; REGION_LEN];
    let mut expected = Vec::new();
    let mut completions = Vec::new();
    let mut buf = vec![0u8; MAX_PACKET];
    let start = Instant::now();
    let mut now = start;
    let mut posted = 0usize;
    let mut backlog: VecDeque<(WorkRequest, Expected)> = VecDeque::new();
    let mut steps = 0u64;
    while completions.len() < ops {
        steps += 1;
        assert!(
            steps < 5_000_000,
            "simulation does not converge (seed {seed})"
        );
        // Post in bursts, as a client would.
        while posted < ops && backlog.len() < 4 {
            backlog.push_back(random_op(&mut rng, info.rkey, &mut shadow, refusals));
            posted += 1;
        }
        while req.send_queue_room() > 0 {
            let Some((wr, exp)) = backlog.pop_front() else {
                break;
            };
            req.post(expected.len() as u64, wr).expect("post");
            expected.push(exp);
        }
        let mut busy = false;
        while let Some(n) = req.poll_transmit(now, &mut buf) {
            net.send(now, true, &buf[..n]);
            busy = true;
        }
        while let Some(n) = resp.poll_transmit(&mut buf) {
            net.send(now, false, &buf[..n]);
            busy = true;
        }
        for (to_responder, bytes) in net.take_due(now) {
            busy = true;
            if to_responder {
                resp.handle_datagram(&bytes, &table)
                    .expect("responder accepts");
            } else {
                req.handle_datagram(now, &bytes).expect("requester accepts");
            }
        }
        req.handle_timeout(now);
        while let Some(c) = req.poll_completion() {
            completions.push(c);
        }
        assert_eq!(
            req.state(),
            QpState::Ready,
            "QP failed (seed {seed}) after {} completions: {:?} {:?} last {:?}",
            completions.len(),
            req.stats(),
            resp.stats(),
            completions.last()
        );
        if !busy {
            let next = [net.next_due(), req.poll_timeout()]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(now + Duration::from_micros(1));
            now = next.max(now + Duration::from_nanos(100));
        }
    }
    let mut final_memory = vec![0u8; REGION_LEN];
    region.read(0, &mut final_memory).expect("read back");
    Outcome {
        completions,
        expected,
        requester: req,
        responder: resp,
        final_memory,
        shadow,
    }
}

fn check(seed: u64, faults: Faults, ops: usize, start_psn: u32, pmtu: u32) -> Outcome {
    check_with(seed, faults, ops, start_psn, pmtu, false)
}

fn check_with(
    seed: u64,
    faults: Faults,
    ops: usize,
    start_psn: u32,
    pmtu: u32,
    refusals: bool,
) -> Outcome {
    let out = simulate(seed, faults, ops, start_psn, pmtu, refusals);
    assert_eq!(out.completions.len(), out.expected.len());
    for (i, (c, e)) in out.completions.iter().zip(&out.expected).enumerate() {
        assert_eq!(c.wr_id, i as u64, "completion order (seed {seed})");
        assert_eq!(
            &c.result, e,
            "wr {i} ({:?}) result differs (seed {seed}, faults {faults:?})",
            c.kind
        );
    }
    assert!(
        out.final_memory == out.shadow,
        "memory differs from the shadow (seed {seed})"
    );
    out
}

#[test]
fn clean_network_completes_everything_in_order() {
    let out = check(
        1,
        Faults {
            loss: 0.0,
            dup: 0.0,
            reorder: 0.0,
        },
        2000,
        0,
        1024,
    );
    assert_eq!(out.requester.stats().retransmitted_packets, 0);
    assert_eq!(out.responder.stats().duplicates, 0);
}

#[test]
fn loss_duplication_and_reordering_up_to_20_percent() {
    for (i, rate) in [0.01, 0.05, 0.10, 0.20].into_iter().enumerate() {
        for seed in 0..4u64 {
            let faults = Faults {
                loss: rate,
                dup: rate,
                reorder: rate,
            };
            let out = check(100 + seed * 7 + i as u64, faults, 600, 1000, 1024);
            let rs = out.requester.stats();
            assert!(
                rs.retransmitted_packets > 0,
                "loss must cause retransmission"
            );
            let ds = out.responder.stats();
            // Atomics were never applied twice: the shadow comparison proves it, and
            // retransmitted atomics were answered from the ring.
            assert_eq!(ds.duplicate_atomics_dropped, 0);
        }
    }
}

#[test]
fn refused_requests_stay_refused_under_loss() {
    // Lost NAKs, duplicated requests and later cumulative ACKs must never turn a refused
    // WRITE into a completed one, nor re-execute anything.
    let mut mismatches = 0;
    for seed in 0..6u64 {
        let faults = Faults {
            loss: 0.15,
            dup: 0.1,
            reorder: 0.1,
        };
        let out = check_with(500 + seed, faults, 800, 4242, 1024, true);
        mismatches += out.requester.stats().msn_mismatches;
        let refused = out.expected.iter().filter(|e| e.is_err()).count();
        assert!(
            refused > 10,
            "seed {seed}: only {refused} refusals generated"
        );
    }
    assert!(
        mismatches > 0,
        "no lost NAK was ever caught by the MSN check: the test did not exercise it"
    );
}

#[test]
fn psn_wraps_at_2_pow_24() {
    let faults = Faults {
        loss: 0.05,
        dup: 0.05,
        reorder: 0.05,
    };
    let out = check(7, faults, 1500, (1 << 24) - 300, 256);
    let end = out.responder.expected_psn();
    assert!(end < (1 << 24) - 300, "PSN space wrapped (ended at {end})");
}

#[test]
fn go_back_n_recovers_from_a_lost_packet_train() {
    let faults = Faults {
        loss: 0.2,
        dup: 0.0,
        reorder: 0.0,
    };
    let out = check(99, faults, 500, 5, 512);
    let rs = out.requester.stats();
    assert!(
        rs.naks_sequence > 0,
        "gaps must draw NAK(PSN sequence error)"
    );
    assert!(rs.rewinds > 0);
}

#[test]
fn every_pmtu_segments_and_reassembles() {
    for pmtu in [256, 512, 1024, 2048, 4096] {
        check(
            pmtu as u64,
            Faults {
                loss: 0.03,
                dup: 0.03,
                reorder: 0.03,
            },
            300,
            77,
            pmtu,
        );
    }
}

/// Run one request list to completion on a lossless network.
fn run_requests(
    wrs: impl FnOnce(u32) -> Vec<WorkRequest>,
    config: RcConfig,
    drop_all: bool,
) -> Vec<Completion> {
    let table = MemoryTable::new();
    let region = Arc::new(Region::anonymous(4096).expect("region"));
    let info = table
        .register(region, BASE_VA, AccessFlags::ALL)
        .expect("register");
    let wrs = wrs(info.rkey);
    let mut req = Requester::new(config.clone(), 1, 2, 0, path());
    let mut resp = Responder::new(config, 2, 1, 0, path());
    let n = wrs.len();
    for (i, wr) in wrs.into_iter().enumerate() {
        req.post(i as u64, wr).expect("post");
    }
    let mut buf = vec![0u8; MAX_PACKET];
    let mut now = Instant::now();
    let mut out = Vec::new();
    for _ in 0..100_000 {
        while let Some(len) = req.poll_transmit(now, &mut buf) {
            if !drop_all {
                resp.handle_datagram(&buf[..len], &table).expect("accept");
            }
        }
        while let Some(len) = resp.poll_transmit(&mut buf) {
            req.handle_datagram(now, &buf[..len]).expect("accept");
        }
        while let Some(c) = req.poll_completion() {
            out.push(c);
        }
        if out.len() == n {
            break;
        }
        now += Duration::from_millis(1);
        req.handle_timeout(now);
    }
    out
}

#[test]
fn remote_errors_complete_with_errors_and_the_qp_continues() {
    let wrs = |rkey: u32| {
        vec![
            WorkRequest::read(RemoteAddr::new(rkey ^ 0x5a5a, BASE_VA), 8),
            WorkRequest::faa(RemoteAddr::new(rkey, BASE_VA + 3), 1),
            WorkRequest::read(RemoteAddr::new(rkey, BASE_VA + 4090), 64),
            WorkRequest::write(RemoteAddr::new(rkey, BASE_VA), 7u64.to_le_bytes().to_vec()),
            WorkRequest::faa(RemoteAddr::new(rkey, BASE_VA), 1),
        ]
    };
    let out = run_requests(wrs, RcConfig::default(), false);
    assert_eq!(out.len(), 5);
    assert_eq!(out[0].result, Err(CompletionError::RemoteAccess));
    assert_eq!(out[1].result, Err(CompletionError::RemoteInvalidRequest));
    assert_eq!(out[2].result, Err(CompletionError::RemoteAccess));
    assert_eq!(out[3].result, Ok(CompletionValue::Write));
    assert_eq!(out[4].result, Ok(CompletionValue::Atomic(7)));
}

#[test]
fn silent_responder_fails_the_qp_after_bounded_retries() {
    let config = RcConfig {
        max_retries: 3,
        ..RcConfig::default()
    };
    let wrs = |rkey: u32| {
        vec![
            WorkRequest::read(RemoteAddr::new(rkey, BASE_VA), 8),
            WorkRequest::write(RemoteAddr::new(rkey, BASE_VA), vec![1; 8]),
        ]
    };
    let out = run_requests(wrs, config, true);
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].result, Err(CompletionError::RetryExceeded));
    assert_eq!(out[1].result, Err(CompletionError::Flushed));
}

/// A duplicate READ request is served only for the bytes of the READ first executed at
/// its PSN — the same length and memory key, or the rest resumed from a later response
/// packet — and refused (NAK invalid request, nothing read) with a longer length or
/// another key: replaying a READ can never draw more than it did.
#[test]
fn duplicate_reads_draw_no_more_than_the_original() {
    use verbs::wire::{BthRepr, NakCode, Opcode, PacketRepr, RethRepr, Syndrome};
    let table = MemoryTable::new();
    let region = Arc::new(Region::anonymous(16384).expect("region"));
    let info = table
        .register(region, BASE_VA, AccessFlags::ALL)
        .expect("register");
    let config = RcConfig {
        pmtu: Pmtu::new(256).expect("pmtu"),
        ..RcConfig::default()
    };
    let mut resp = Responder::new(config, 2, 1, 0, path());
    let read = |psn: u32, va: u64, len: u32| {
        let mut repr = PacketRepr::new(BthRepr::new(Opcode::ReadRequest, 2, psn, true));
        repr.reth = Some(RethRepr {
            va,
            rkey: info.rkey,
            dma_len: len,
        });
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut buf, &path()).expect("emit");
        buf
    };
    // What the responder answers to one request: (response packets, payload bytes, NAK).
    let answer = |resp: &mut Responder, pkt: Vec<u8>| {
        resp.handle_datagram(&pkt, &table).expect("accepted");
        let (mut packets, mut bytes, mut nak) = (0, 0, None);
        let mut buf = vec![0u8; MAX_PACKET];
        while let Some(n) = resp.poll_transmit(&mut buf) {
            let r = PacketRepr::parse(&buf[..n]).expect("a response");
            packets += 1;
            bytes += r.payload.len();
            if let Some(a) = r.aeth
                && let Syndrome::Nak(code) = a.syndrome
            {
                nak = Some(code);
            }
        }
        (packets, bytes, nak)
    };
    // The original: 1024 bytes, four response packets, PSNs 0..4.
    assert_eq!(answer(&mut resp, read(0, BASE_VA, 1024)), (4, 1024, None));
    let executed = resp.stats().reads;
    // The same request again: served again.
    assert_eq!(answer(&mut resp, read(0, BASE_VA, 1024)), (4, 1024, None));
    // Resumed from its third response packet: the rest, served.
    assert_eq!(
        answer(&mut resp, read(2, BASE_VA + 512, 512)),
        (2, 512, None)
    );
    // The same length elsewhere under the same key (a switch that steered the first
    // copy to another address sends the retransmission to the client's own): served.
    assert_eq!(
        answer(&mut resp, read(0, BASE_VA + 4096, 1024)),
        (4, 1024, None)
    );
    assert_eq!(resp.stats().duplicate_reads, 3);
    // Longer, the rest claimed longer than it is, another key, or past the READ: refused.
    let other_key = {
        let mut repr = PacketRepr::new(BthRepr::new(Opcode::ReadRequest, 2, 0, true));
        repr.reth = Some(RethRepr {
            va: BASE_VA,
            rkey: info.rkey ^ 1,
            dma_len: 1024,
        });
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut buf, &path()).expect("emit");
        buf
    };
    let refused = [
        read(0, BASE_VA, 8192),
        read(0, BASE_VA, 1025),
        read(2, BASE_VA + 512, 1024),
        read(3, BASE_VA + 768, 512),
        other_key,
    ];
    for pkt in refused {
        let (packets, bytes, nak) = answer(&mut resp, pkt);
        assert_eq!((packets, bytes, nak), (1, 0, Some(NakCode::InvalidRequest)));
    }
    assert_eq!(resp.stats().duplicate_reads_refused, 5);
    assert_eq!(
        resp.stats().reads,
        executed,
        "no duplicate counted as a new READ"
    );
    // The queue pair carries on: the next new READ at PSN 4 is served.
    assert_eq!(answer(&mut resp, read(4, BASE_VA + 64, 64)), (1, 64, None));
}
