//! Deterministic network simulation of two-sided verbs in the RC protocol core.
//!
//! A requester posts SENDs (single- and multi-packet, with and without immediate data)
//! mixed with WRITEs and READs; the responder delivers the SENDs into the buffers of a
//! receive queue whose owner posts buffers slowly, so SENDs regularly find none and
//! draw RNR NAKs. The network loses, duplicates and reorders packets (seeded). Every
//! message must arrive exactly once, whole, in order, with its immediate data, and
//! every SEND must complete successfully in posting order.

use std::collections::VecDeque;
use std::net::SocketAddrV4;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use verbs::mem::{AccessFlags, MemoryTable, Region};
use verbs::rc::{MAX_PACKET, Pmtu, QpState, RcConfig, Requester, Responder};
use verbs::recv::{RecvCompletion, RecvError, RecvQueue};
use verbs::wire::{IcrcPath, Opcode, PacketRepr, Syndrome};
use verbs::wr::{Completion, CompletionError, CompletionValue, RemoteAddr, WorkRequest};

const BASE_VA: u64 = 0x10_0000;
const REGION_LEN: usize = 64 * 1024;
const REQ_QPN: u32 = 0x11;
const RESP_QPN: u32 = 0x22;

fn path() -> IcrcPath {
    IcrcPath::new(
        "10.0.0.1:49152".parse::<SocketAddrV4>().expect("addr"),
        "10.0.0.2:4791".parse::<SocketAddrV4>().expect("addr"),
    )
}

#[derive(Clone, Copy, Debug)]
struct Faults {
    loss: f64,
    dup: f64,
    reorder: f64,
}

const CLEAN: Faults = Faults {
    loss: 0.0,
    dup: 0.0,
    reorder: 0.0,
};

/// A lossy, duplicating, reordering network on a simulated clock.
struct Net {
    rng: SmallRng,
    faults: Faults,
    in_flight: Vec<(Instant, u64, bool, Vec<u8>)>,
    seq: u64,
}

impl Net {
    fn new(seed: u64, faults: Faults) -> Net {
        Net {
            rng: SmallRng::seed_from_u64(seed),
            faults,
            in_flight: Vec::new(),
            seq: 0,
        }
    }

    fn send(&mut self, now: Instant, to_responder: bool, bytes: &[u8]) {
        if self.rng.random_bool(self.faults.loss) {
            return;
        }
        let copies = if self.rng.random_bool(self.faults.dup) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let mut at = now + Duration::from_micros(5);
            if self.rng.random_bool(self.faults.reorder) {
                at += Duration::from_micros(self.rng.random_range(1..40));
            }
            self.seq += 1;
            self.in_flight
                .push((at, self.seq, to_responder, bytes.to_vec()));
        }
    }

    fn next_due(&self) -> Option<Instant> {
        self.in_flight.iter().map(|p| p.0).min()
    }

    fn take_due(&mut self, now: Instant) -> Vec<(bool, Vec<u8>)> {
        let mut due = Vec::new();
        let mut i = 0;
        while i < self.in_flight.len() {
            if self.in_flight[i].0 <= now {
                due.push(self.in_flight.swap_remove(i));
            } else {
                i += 1;
            }
        }
        due.sort_by_key(|p| (p.0, p.1));
        due.into_iter().map(|p| (p.2, p.3)).collect()
    }
}

/// One requester, one responder with a receive queue, a network and memory.
struct Rig {
    req: Requester,
    resp: Responder,
    recv: RecvQueue,
    table: MemoryTable,
    rkey: u32,
    net: Net,
    now: Instant,
    buf: Vec<u8>,
    /// Every packet the requester transmitted (for checking opcodes).
    sent_opcodes: Vec<Opcode>,
    /// Every syndrome the responder sent.
    syndromes: Vec<Syndrome>,
}

impl Rig {
    fn new(seed: u64, faults: Faults, config: RcConfig, start_psn: u32) -> Rig {
        let table = MemoryTable::new();
        let region = Arc::new(Region::anonymous(REGION_LEN).expect("region"));
        let info = table
            .register(region, BASE_VA, AccessFlags::ALL)
            .expect("register");
        let recv = RecvQueue::new(64);
        let mut resp = Responder::new(config.clone(), RESP_QPN, REQ_QPN, start_psn, path());
        resp.set_recv_queue(Some(recv.clone()));
        Rig {
            req: Requester::new(config, REQ_QPN, RESP_QPN, start_psn, path()),
            resp,
            recv,
            table,
            rkey: info.rkey,
            net: Net::new(seed, faults),
            now: Instant::now(),
            buf: vec![0u8; MAX_PACKET],
            sent_opcodes: Vec::new(),
            syndromes: Vec::new(),
        }
    }

    /// One step of the simulation; returns whether anything happened.
    fn step(&mut self) -> bool {
        let mut busy = false;
        while let Some(n) = self.req.poll_transmit(self.now, &mut self.buf) {
            let repr = PacketRepr::parse(&self.buf[..n]).expect("requester emits valid packets");
            self.sent_opcodes.push(repr.bth.opcode);
            self.net.send(self.now, true, &self.buf[..n]);
            busy = true;
        }
        while let Some(n) = self.resp.poll_transmit(&mut self.buf) {
            let repr = PacketRepr::parse(&self.buf[..n]).expect("responder emits valid packets");
            if let Some(aeth) = repr.aeth {
                self.syndromes.push(aeth.syndrome);
            }
            self.net.send(self.now, false, &self.buf[..n]);
            busy = true;
        }
        for (to_responder, bytes) in self.net.take_due(self.now) {
            busy = true;
            if to_responder {
                self.resp
                    .handle_datagram(&bytes, &self.table)
                    .expect("responder accepts");
            } else {
                self.req
                    .handle_datagram(self.now, &bytes)
                    .expect("requester accepts");
            }
        }
        self.req.handle_timeout(self.now);
        busy
    }

    /// Advance the clock to the next event when idle.
    fn advance(&mut self, busy: bool) {
        if !busy {
            let next = [self.net.next_due(), self.req.poll_timeout()]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(self.now + Duration::from_micros(1));
            self.now = next.max(self.now + Duration::from_nanos(100));
        }
    }

    /// Run until `n` requester completions are out (or the step budget is spent).
    fn run_until(&mut self, n: usize, mut each: impl FnMut(&mut Rig)) -> Vec<Completion> {
        let mut out = Vec::new();
        for _ in 0..2_000_000 {
            if out.len() >= n {
                return out;
            }
            each(self);
            let busy = self.step();
            while let Some(c) = self.req.poll_completion() {
                out.push(c);
            }
            self.advance(busy);
        }
        panic!(
            "no convergence: {} of {n} completions; {:?} {:?}",
            out.len(),
            self.req.stats(),
            self.resp.stats()
        );
    }
}

fn config(pmtu: u32) -> RcConfig {
    RcConfig {
        pmtu: Pmtu::new(pmtu).expect("pmtu"),
        retransmit_timeout: Duration::from_micros(300),
        max_retries: 1000,
        max_outstanding: 16,
        // 10 µs between RNR retries: many retries in little simulated time.
        min_rnr_timer: 1,
        ..RcConfig::default()
    }
}

fn message(rng: &mut SmallRng, pmtu: usize) -> Vec<u8> {
    let len = *[
        0usize,
        1,
        3,
        64,
        pmtu - 1,
        pmtu,
        pmtu + 1,
        2 * pmtu,
        3 * pmtu + 7,
    ]
    .get(rng.random_range(0..9))
    .unwrap_or(&1);
    (0..len).map(|_| rng.random()).collect()
}

/// A random SEND workload under faults: returns the rig for further checks.
fn send_workload(seed: u64, faults: Faults, pmtu: u32, sends: usize) -> Rig {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut rig = Rig::new(seed ^ 0xFA17, faults, config(pmtu), 0xFF_FFF0);
    let mut expected_msgs: Vec<(Vec<u8>, Option<u32>)> = Vec::new();
    let mut expected: Vec<CompletionValue> = Vec::new();
    let mut backlog: VecDeque<(WorkRequest, CompletionValue)> = VecDeque::new();
    let mut shadow = vec![0u8; 4096];
    for i in 0..sends {
        let data = message(&mut rng, pmtu as usize);
        let imm = rng.random_bool(0.5).then(|| rng.random::<u32>());
        expected_msgs.push((data.clone(), imm));
        let wr = match imm {
            Some(imm) => WorkRequest::send_with_imm(data, imm),
            None => WorkRequest::send(data),
        };
        backlog.push_back((wr, CompletionValue::Send));
        // One-sided verbs interleaved on the same queue pair.
        if i % 3 == 0 {
            let off = rng.random_range(0..2048usize);
            let data: Vec<u8> = (0..rng.random_range(1..1500))
                .map(|_| rng.random())
                .collect();
            shadow[off..off + data.len()].copy_from_slice(&data);
            let at = RemoteAddr::new(rig.rkey, BASE_VA + off as u64);
            backlog.push_back((WorkRequest::write(at, data), CompletionValue::Write));
            let back = shadow[off..off + 700].to_vec();
            backlog.push_back((WorkRequest::read(at, 700), CompletionValue::Read(back)));
        }
    }
    let total = backlog.len();
    let mut next_wr = 0u64;
    let mut buffers = 0u64;
    let mut received: Vec<RecvCompletion> = Vec::new();
    let cap = 3 * pmtu as usize + 7;
    let completions = rig.run_until(total, |rig| {
        while rig.req.send_queue_room() > 0 {
            let Some((wr, value)) = backlog.pop_front() else {
                break;
            };
            rig.req.post(next_wr, wr).expect("post");
            expected.push(value);
            next_wr += 1;
        }
        // The owner posts buffers slowly: SENDs often find none.
        if rig.recv.posted() < 2 && rng.random_bool(0.02) {
            rig.recv
                .post_recv(buffers, vec![0u8; cap])
                .expect("post_recv");
            buffers += 1;
        }
        while let Some(c) = rig.recv.poll() {
            received.push(c);
        }
    });
    while let Some(c) = rig.recv.poll() {
        received.push(c);
    }
    assert_eq!(rig.req.state(), QpState::Ready);
    for (i, (c, e)) in completions.iter().zip(&expected).enumerate() {
        assert_eq!(c.wr_id, i as u64, "completion order (seed {seed})");
        assert_eq!(c.result.as_ref(), Ok(e), "wr {i} (seed {seed}, {faults:?})");
    }
    assert_eq!(
        received.len(),
        expected_msgs.len(),
        "each SEND delivered exactly once (seed {seed})"
    );
    for (i, (r, (data, imm))) in received.iter().zip(&expected_msgs).enumerate() {
        assert_eq!(r.result, Ok(()), "message {i} (seed {seed})");
        assert_eq!(r.wr_id, i as u64, "buffers used in posting order");
        assert_eq!(&r.data, data, "message {i} bytes (seed {seed})");
        assert_eq!(r.byte_len as usize, data.len());
        assert_eq!(r.imm, *imm, "message {i} immediate (seed {seed})");
        assert_eq!((r.qpn, r.remote_qpn), (RESP_QPN, REQ_QPN));
    }
    assert_eq!(rig.resp.stats().sends, expected_msgs.len() as u64);
    rig
}

#[test]
fn sends_arrive_once_in_order_on_a_clean_network_despite_rnr() {
    let rig = send_workload(1, CLEAN, 1024, 200);
    assert!(
        rig.req.stats().naks_rnr > 10,
        "the slow owner must cause RNR NAKs: {:?}",
        rig.req.stats()
    );
    assert_eq!(rig.req.stats().naks_rnr, rig.resp.stats().naks_rnr);
    assert_eq!(rig.resp.stats().duplicates, 0);
    assert!(rig.sent_opcodes.contains(&Opcode::SendMiddle));
    assert!(rig.sent_opcodes.contains(&Opcode::SendLastImm));
    assert!(rig.sent_opcodes.contains(&Opcode::SendOnlyImm));
    assert!(rig.sent_opcodes.contains(&Opcode::SendFirst));
}

#[test]
fn sends_survive_loss_duplication_and_reordering() {
    for (i, rate) in [0.02, 0.1, 0.2].into_iter().enumerate() {
        for seed in 0..3u64 {
            let faults = Faults {
                loss: rate,
                dup: rate,
                reorder: rate,
            };
            let rig = send_workload(40 + seed * 5 + i as u64, faults, 256, 150);
            assert!(rig.req.stats().retransmitted_packets > 0);
            assert!(
                rig.resp.stats().duplicates > 0,
                "duplicates must reach the responder and be suppressed"
            );
        }
    }
}

#[test]
fn every_pmtu_segments_sends() {
    for pmtu in [256, 512, 1024, 2048, 4096] {
        send_workload(
            pmtu as u64,
            Faults {
                loss: 0.05,
                dup: 0.05,
                reorder: 0.05,
            },
            pmtu,
            60,
        );
    }
}

#[test]
fn the_rnr_retry_count_bounds_the_wait_for_a_buffer() {
    let cfg = RcConfig {
        rnr_retry: 2,
        ..config(1024)
    };
    let mut rig = Rig::new(3, CLEAN, cfg, 100);
    rig.req.post(1, WorkRequest::send(vec![1; 2000])).unwrap();
    rig.req.post(2, WorkRequest::send(vec![2; 10])).unwrap();
    let out = rig.run_until(2, |_| {});
    assert_eq!(out[0].result, Err(CompletionError::RnrRetryExceeded));
    assert_eq!(out[1].result, Err(CompletionError::Flushed));
    assert_eq!(rig.req.state(), QpState::Error);
    // The first try and two retries, each answered by an RNR NAK naming the timer.
    assert_eq!(rig.req.stats().naks_rnr, 3);
    assert_eq!(rig.resp.stats().naks_rnr, 3);
    assert!(
        rig.syndromes
            .iter()
            .all(|s| *s == Syndrome::RnrNak { timer: 1 })
    );
    // Every try starts the message again from SEND First.
    let firsts = rig
        .sent_opcodes
        .iter()
        .filter(|o| **o == Opcode::SendFirst)
        .count();
    assert_eq!(firsts, 3, "{:?}", rig.sent_opcodes);
    assert_eq!(rig.recv.stats().not_ready, 3);
}

#[test]
fn a_buffer_posted_during_the_rnr_wait_takes_the_message() {
    let mut rig = Rig::new(4, CLEAN, config(1024), 7);
    rig.req
        .post(1, WorkRequest::send_with_imm(b"hello".to_vec(), 0xABCD))
        .unwrap();
    let mut steps = 0;
    let out = rig.run_until(1, |rig| {
        steps += 1;
        if rig.req.stats().naks_rnr == 2 && rig.recv.posted() == 0 && rig.recv.ready() == 0 {
            rig.recv.post_recv(9, vec![0; 64]).unwrap();
        }
    });
    assert_eq!(out[0].result, Ok(CompletionValue::Send));
    let got = rig.recv.poll().expect("delivered");
    assert_eq!(
        (got.wr_id, got.data.as_slice(), got.imm),
        (9, &b"hello"[..], Some(0xABCD))
    );
    assert_eq!(rig.req.stats().naks_rnr, 2);
}

#[test]
fn a_message_longer_than_the_buffer_fails_both_sides_and_the_qp_goes_on() {
    for faults in [
        CLEAN,
        Faults {
            loss: 0.2,
            dup: 0.2,
            reorder: 0.2,
        },
    ] {
        let mut rig = Rig::new(5, faults, config(256), 300);
        rig.recv.post_recv(1, vec![0; 600]).unwrap();
        rig.recv.post_recv(2, vec![0; 600]).unwrap();
        // 1000 bytes: SEND First, Middle, Middle, Last at PMTU 256; the buffer is full
        // after the third packet.
        rig.req.post(10, WorkRequest::send(vec![7; 1000])).unwrap();
        rig.req.post(11, WorkRequest::send(vec![8; 500])).unwrap();
        let out = rig.run_until(2, |_| {});
        assert_eq!(
            out[0].result,
            Err(CompletionError::RemoteInvalidRequest),
            "{faults:?}"
        );
        assert_eq!(out[1].result, Ok(CompletionValue::Send), "{faults:?}");
        let first = rig.recv.poll().expect("the failed buffer comes back");
        assert_eq!(
            (first.wr_id, first.result, first.data.len()),
            (1, Err(RecvError::LocalLength), 600)
        );
        let second = rig.recv.poll().expect("the next message");
        assert_eq!((second.wr_id, second.data), (2, vec![8; 500]));
        assert_eq!(rig.recv.poll(), None, "{faults:?}");
        assert_eq!(rig.req.state(), QpState::Ready);
    }
}

#[test]
fn a_queue_pair_without_a_receive_queue_refuses_sends() {
    let mut rig = Rig::new(6, CLEAN, config(1024), 0);
    rig.resp.set_recv_queue(None);
    rig.req.post(1, WorkRequest::send(vec![1; 3000])).unwrap();
    let at = RemoteAddr::new(rig.rkey, BASE_VA);
    rig.req.post(2, WorkRequest::write(at, vec![5; 8])).unwrap();
    let out = rig.run_until(2, |_| {});
    assert_eq!(out[0].result, Err(CompletionError::RemoteInvalidRequest));
    assert_eq!(out[1].result, Ok(CompletionValue::Write));
    assert_eq!(rig.req.stats().naks_rnr, 0);
}
