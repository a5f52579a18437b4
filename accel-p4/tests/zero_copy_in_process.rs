//! Switch-initiated copies driven in process: the pipeline model and the copy engine
//! between two soft-RoCE responders (the memory nodes' protocol core) on a virtual
//! clock, with seeded loss, duplication and reordering in both directions. For every
//! seed the copy must finish and the target must equal the source byte for byte.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;

use accel_p4::copy::{ActiveCopy, CopyEnd, CopyEngine, CopyJob, CopyRequest, CopyShape, CopyState};
use accel_p4::copy::{CopyStatus, ReadTarget};
use accel_p4::model::{CopyDstAction, CopySrcAction, Counters, Emitted, FaultPolicy, RouteKey};
use accel_p4::pipeline::Pipeline;
use accel_p4::spec::{self, PORT_MEMNODE};
use proptest::prelude::*;
use verbs::mem::{AccessFlags, MemoryTable, Region};
use verbs::rc::{RcConfig, Responder};
use verbs::wire::{EthernetFrame, FrameRepr, IcrcPath};

const SWITCH: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 100), 50_001);
const SOURCE: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 4791);
const TARGET: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 3), 4791);
const MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
const SWITCH_SRC_QPN: u32 = 0xE0_0001;
const SWITCH_DST_QPN: u32 = 0xE0_0003;
const SOURCE_QPN: u32 = 0x21;
const TARGET_QPN: u32 = 0x31;
const BASE_VA: u64 = 0x10_0000;

struct Node {
    mem: MemoryTable,
    region: Arc<Region>,
    rkey: u32,
    responder: Responder,
    addr: SocketAddrV4,
}

impl Node {
    fn new(addr: SocketAddrV4, qpn: u32, switch_qpn: u32, psn: u32) -> Node {
        let region = Arc::new(Region::anonymous(1 << 20).expect("region"));
        let mem = MemoryTable::new();
        let info = mem
            .register(region.clone(), BASE_VA, AccessFlags::ALL)
            .expect("register");
        let responder = Responder::new(
            RcConfig::default(),
            qpn,
            switch_qpn,
            psn,
            IcrcPath::new(SWITCH, addr),
        );
        Node {
            mem,
            region,
            rkey: info.rkey,
            responder,
            addr,
        }
    }

    /// Execute a frame the switch sent here; return the responses as frames arriving
    /// at the switch.
    fn receive(&mut self, frame: &[u8]) -> Vec<Vec<u8>> {
        let Ok(eth) = EthernetFrame::parse_port(frame, self.addr.port()) else {
            return Vec::new();
        };
        let path = eth.path();
        let _ = self.responder.handle_datagram_sent_with(
            eth.roce,
            path.ip_id,
            path.ip_flags,
            &self.mem,
        );
        let mut out = Vec::new();
        let mut buf = vec![0u8; 4096];
        while let Some(n) = self.responder.poll_transmit(&mut buf) {
            let path = IcrcPath::new(self.addr, SWITCH);
            out.push(FrameRepr::build(MAC, MAC, 0x02, &path, &buf[..n]));
        }
        out
    }
}

/// What a run ended with: the copy's status, the source bytes, the target bytes, the
/// pipeline's counters.
type Outcome = (CopyStatus, Vec<u8>, Vec<u8>, Counters);

/// Copy `len` bytes with faults seeded by `seed`.
fn run(len: u64, chunk: u32, window: u32, seed: u64, faults: f64) -> Outcome {
    let (src_psn, dst_psn) = (
        0xFF_FF00 ^ (seed as u32 & 0xFF),
        0x77 + (seed as u32 & 0xFFF),
    );
    let mut source = Node::new(SOURCE, SOURCE_QPN, SWITCH_SRC_QPN, src_psn);
    let mut target = Node::new(TARGET, TARGET_QPN, SWITCH_DST_QPN, dst_psn);
    let mut data = vec![0u8; len as usize];
    let mut x = seed | 1;
    for b in &mut data {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    source.region.write(0, &data).expect("fill the source");

    let mut p = Pipeline::new();
    p.set_mode(spec::mode::FAULTS);
    let policy = FaultPolicy::from_probabilities(faults, faults, faults, 0.0);
    for dir in [spec::DIR_UP, spec::DIR_DOWN] {
        p.tables.fault_policy.insert(dir, policy).expect("policy");
    }
    p.seed_faults(seed);
    let src_key = RouteKey {
        src: SOURCE,
        qpn: SWITCH_SRC_QPN,
    };
    let dst_key = RouteKey {
        src: TARGET,
        qpn: SWITCH_DST_QPN,
    };
    p.tables
        .copy_src
        .insert(
            src_key,
            CopySrcAction {
                slot: 0,
                src_psn,
                dst_psn,
                dst_va: BASE_VA,
                dst_rkey: target.rkey,
                src: SWITCH,
                dst: TARGET,
                dst_qpn: TARGET_QPN,
                pmtu_log2: 10,
                len,
            },
        )
        .expect("copy_src");
    p.tables
        .copy_dst
        .insert(dst_key, CopyDstAction { slot: 0, dst_psn })
        .expect("copy_dst");
    p.init_copy(0);

    let end = |rkey| CopyEnd {
        memnode: String::new(),
        va: BASE_VA,
        rkey,
    };
    let mut engine = CopyEngine::default();
    let slot = engine.reserve().expect("slot");
    let shape = CopyShape {
        len,
        pmtu_log2: 10,
        chunk_packets: chunk / 1024,
        window,
        src_psn,
        rto_us: 2_000,
    };
    engine.activate(
        slot,
        ActiveCopy {
            id: 1,
            request: CopyRequest {
                source: end(source.rkey),
                target: end(target.rkey),
                len,
                chunk: Some(chunk),
                window: Some(window),
                rto_ms: Some(2),
            },
            job: CopyJob::new(shape, 0),
            reads: ReadTarget {
                switch: SWITCH,
                memnode: SOURCE,
                memnode_qpn: SOURCE_QPN,
                va: BASE_VA,
                rkey: source.rkey,
            },
            resumed_from: 0,
            resumed: 0,
            keys: (src_key, dst_key),
            qps: Vec::new(),
        },
    );

    let mut now = 0u64;
    let mut to_switch: Vec<Vec<u8>> = Vec::new();
    for _ in 0..200_000 {
        now += 50;
        let mut out: Vec<Emitted> = Vec::new();
        for frame in std::mem::take(&mut to_switch) {
            out.extend(p.process(PORT_MEMNODE, &frame));
        }
        if out.is_empty() {
            out.extend(p.flush());
        }
        let digests = p.take_copy_digests();
        engine.on_digests(&digests, now);
        for read in engine.poll(now) {
            out.extend(p.generate(read));
        }
        for e in out {
            let dst = e
                .frame
                .get(30..34)
                .map(|b| Ipv4Addr::new(b[0], b[1], b[2], b[3]));
            if dst == Some(*SOURCE.ip()) {
                to_switch.extend(source.receive(&e.frame));
            } else if dst == Some(*TARGET.ip()) {
                to_switch.extend(target.receive(&e.frame));
            }
        }
        let status = engine.status(1).expect("status");
        if status.state != CopyState::Running {
            break;
        }
    }
    let status = engine.status(1).expect("status");
    let mut got = vec![0u8; len as usize];
    target.region.read(0, &mut got).expect("read the target");
    (status, data, got, p.counters())
}

#[test]
fn a_clean_copy_finishes_exact() {
    let (status, want, got, c) = run(64 * 1024 + 5, 4096, 4, 1, 0.0);
    assert_eq!(status.state, CopyState::Done);
    assert!(got == want, "the target differs from the source");
    assert_eq!(c.zero_copy.converted, 65, "{c:?}");
    assert_eq!(status.rereads, 0, "{status:?}");
}

#[test]
fn every_kind_of_fault_is_repaired() {
    let (status, want, got, c) = run(256 * 1024, 4096, 8, 42, 0.05);
    assert_eq!(status.state, CopyState::Done, "{status:?}");
    assert!(got == want, "the target differs from the source");
    assert!(
        c.faults.dropped > 0 && c.faults.duplicated > 0 && c.faults.reordered > 0,
        "{c:?}"
    );
    assert!(status.rereads > 0 && status.go_backs > 0, "{status:?}");
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 12,
        rng_algorithm: proptest::test_runner::RngAlgorithm::ChaCha,
        ..ProptestConfig::default()
    })]

    /// 5 % loss, duplication and reordering both ways, any seed, any size and window:
    /// the copy finishes and every target byte is its source byte.
    #[test]
    fn copies_are_exact_under_faults(
        seed in any::<u64>(),
        len in 1u64..(96 * 1024),
        chunk_kib in 1u32..8,
        window in 1u32..16,
    ) {
        let (status, want, got, _) = run(len, chunk_kib * 1024, window, seed, 0.05);
        prop_assert_eq!(status.state, CopyState::Done);
        prop_assert!(got == want, "the target differs from the source");
    }
}
