//! Switch replication of writes driven in process: a client requester (the verbs
//! crate's RC protocol core), the pipeline model and three soft-RoCE responders — a
//! primary and two backups — on a virtual clock, with seeded loss, duplication and
//! reordering in both directions.
//!
//! The client WRITEs each block once, to the primary under the set's alias key, one
//! replicated WRITE at a time with READs of other memory in between, as a session
//! does. The property checked is the replication protocols' invariant: **when the
//! client sees a WRITE complete, every member holds its bytes**; and at the end each
//! backup alone holds every block byte for byte.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::time::{Duration, Instant};

use accel_p4::model::{
    Counters, Emitted, FaultPolicy, MirrorAckAction, MirrorLaneAction, MirrorRkeyAction,
    RouteAction, RouteKey,
};
use accel_p4::pipeline::Pipeline;
use accel_p4::spec::{self, PORT_CLIENT, PORT_MEMNODE};
use proptest::prelude::*;
use verbs::mem::{AccessFlags, MemoryTable, Region};
use verbs::rc::{RcConfig, Requester, Responder};
use verbs::wire::{EthernetFrame, FrameRepr, IcrcPath};
use verbs::wr::{CompletionValue, RemoteAddr, WorkRequest};

const CLIENT: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 40_000);
const SWITCH_CLIENT: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 100), 4791);
const SWITCH_MEM: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 100), 50_001);
const MEMBERS: [SocketAddrV4; 3] = [
    SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 4791),
    SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 3), 4791),
    SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 4), 4791),
];
const CLIENT_QPN: u32 = 0x11;
const PRIMARY_QPN: u32 = 0x21;
const MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
/// Each member's region starts somewhere else: copies are at the same offset.
const BASE_VA: [u64; 3] = [0x10_0000, 0x40_0000, 0x7_0000];
const ALIAS: u32 = 0xA123_4500;
const BLOCK: usize = 192;

struct Node {
    mem: MemoryTable,
    region: Arc<Region>,
    rkey: u32,
    responder: Responder,
    addr: SocketAddrV4,
}

impl Node {
    fn new(i: usize, qpn: u32, peer_qpn: u32, psn: u32) -> Node {
        let region = Arc::new(Region::anonymous(1 << 20).expect("region"));
        let mem = MemoryTable::new();
        let info = mem
            .register(region.clone(), BASE_VA[i], AccessFlags::ALL)
            .expect("register");
        let addr = MEMBERS[i];
        let responder = Responder::new(
            RcConfig::default(),
            qpn,
            peer_qpn,
            psn,
            IcrcPath::new(SWITCH_MEM, addr),
        );
        Node {
            mem,
            region,
            rkey: info.rkey,
            responder,
            addr,
        }
    }

    /// A fresh queue pair on the same memory (a switch restart gives lanes new ones).
    fn reconnect(&mut self, qpn: u32, peer_qpn: u32, psn: u32) {
        self.responder = Responder::new(
            RcConfig::default(),
            qpn,
            peer_qpn,
            psn,
            IcrcPath::new(SWITCH_MEM, self.addr),
        );
    }

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
        let mut buf = vec![0u8; 8192];
        while let Some(n) = self.responder.poll_transmit(&mut buf) {
            let path = IcrcPath::new(self.addr, SWITCH_MEM);
            out.push(FrameRepr::build(MAC, MAC, 0x02, &path, &buf[..n]));
        }
        out
    }

    fn bytes(&self, offset: u64, len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        self.region.read(offset, &mut b).expect("read");
        b
    }
}

/// Lane queue pair numbers and first PSNs of incarnation `incarnation` of the switch.
fn lane(incarnation: u32, backup: u32) -> (u32, u32, u32) {
    let switch_qpn = 0xE8_0000 | (incarnation << 4) | backup;
    let memnode_qpn = 0x31 + 0x10 * backup + 0x100 * incarnation;
    let psn = (0xFF_FFF0 + 7 * incarnation + backup) & 0xFF_FFFF;
    (switch_qpn, memnode_qpn, psn)
}

/// A pipeline with the client's connection and the replica set installed.
fn switch(
    nodes: &mut [Node; 3],
    incarnation: u32,
    seed: u64,
    faults: f64,
    client_psn: u32,
) -> Pipeline {
    let mut p = Pipeline::new();
    p.set_mode(spec::mode::FAULTS);
    let policy = FaultPolicy::from_probabilities(faults, faults, faults, 0.0);
    for dir in [spec::DIR_UP, spec::DIR_DOWN] {
        p.tables.fault_policy.insert(dir, policy).expect("policy");
    }
    p.seed_faults(seed ^ u64::from(incarnation));
    p.tables
        .route_up
        .insert(
            RouteKey {
                src: CLIENT,
                qpn: PRIMARY_QPN,
            },
            RouteAction {
                conn: 3,
                src: SWITCH_MEM,
                dst: MEMBERS[0],
                client_qpn: CLIENT_QPN,
                pmtu_log2: 10,
            },
        )
        .expect("route_up");
    let down = RouteAction {
        conn: 3,
        src: SWITCH_CLIENT,
        dst: CLIENT,
        client_qpn: CLIENT_QPN,
        pmtu_log2: 10,
    };
    p.tables
        .route_down
        .insert(
            RouteKey {
                src: MEMBERS[0],
                qpn: CLIENT_QPN,
            },
            down,
        )
        .expect("route_down");
    p.tables.conn_client.insert(3, down).expect("conn_client");
    p.init_connection(3, client_psn);
    let set = 5u8;
    p.tables
        .mirror_rkey
        .insert(
            ALIAS,
            MirrorRkeyAction {
                set,
                rkey: nodes[0].rkey,
                backups: 2,
            },
        )
        .expect("mirror_rkey");
    for b in 0..2u32 {
        let (switch_qpn, memnode_qpn, psn) = lane(incarnation, b);
        let node = &mut nodes[b as usize + 1];
        node.reconnect(memnode_qpn, switch_qpn, psn);
        p.tables
            .mirror_lane
            .insert(
                (set, b as u8),
                MirrorLaneAction {
                    src: SWITCH_MEM,
                    dst: node.addr,
                    qpn: memnode_qpn,
                    rkey: node.rkey,
                    va_delta: BASE_VA[b as usize + 1].wrapping_sub(BASE_VA[0]),
                },
            )
            .expect("mirror_lane");
        p.tables
            .mirror_ack
            .insert(
                RouteKey {
                    src: node.addr,
                    qpn: switch_qpn,
                },
                MirrorAckAction {
                    set,
                    backup: b as u8,
                },
            )
            .expect("mirror_ack");
        p.init_mirror_lane(set, b as u8, psn);
    }
    p
}

fn block(i: u64, seed: u64) -> Vec<u8> {
    let mut x = (seed ^ (i << 20)) | 1;
    (0..BLOCK)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// How a run ended.
struct Run {
    counters: Vec<Counters>,
    completed: u64,
}

/// `writes` replicated WRITEs of fresh blocks, each followed by a READ of another
/// block; the switch restarts (fresh registers and lanes) after each write in
/// `restarts`. Panics when a completed WRITE is missing on a member.
fn run(seed: u64, faults: f64, writes: u64, restarts: &[u64]) -> Run {
    let mut nodes = [
        Node::new(0, PRIMARY_QPN, CLIENT_QPN, 0x40),
        Node::new(1, 0, 0, 0),
        Node::new(2, 0, 0, 0),
    ];
    let mut incarnation = 0u32;
    let mut p = switch(&mut nodes, incarnation, seed, faults, 0x40);
    let config = RcConfig {
        retransmit_timeout: Duration::from_millis(2),
        max_retries: 64,
        ..RcConfig::default()
    };
    let mut client = Requester::new(
        config,
        CLIENT_QPN,
        PRIMARY_QPN,
        0x40,
        IcrcPath::new(CLIENT, SWITCH_CLIENT),
    );
    let epoch = Instant::now();
    let mut counters = Vec::new();
    let mut now_us = 0u64;
    let mut next = 0u64;
    let mut waiting: Option<u64> = None;
    let mut completed = 0u64;
    let mut to_switch: Vec<(u8, Vec<u8>)> = Vec::new();
    let mut restart_at: Option<u64> = None;
    for _ in 0..2_000_000 {
        if completed == writes && waiting.is_none() && client.is_idle() {
            break;
        }
        now_us += 20;
        let now = epoch + Duration::from_micros(now_us);
        if restart_at.is_some_and(|t| now_us >= t) {
            // The switch restarts while a WRITE is in flight: registers and lanes are
            // new, packets it held are lost.
            restart_at = None;
            counters.push(p.counters());
            incarnation += 1;
            to_switch.clear();
            p = switch(&mut nodes, incarnation, seed, faults, 0);
        }
        if waiting.is_none() && next < writes {
            if restarts.contains(&next) {
                restart_at = Some(now_us + 30);
            }
            let va = BASE_VA[0] + next * BLOCK as u64;
            client
                .post(
                    next * 2,
                    WorkRequest::write(RemoteAddr { rkey: ALIAS, va }, block(next, seed)),
                )
                .expect("post");
            let other = BASE_VA[0] + 0x8_0000 + (next % 16) * 64;
            client
                .post(
                    next * 2 + 1,
                    WorkRequest::read(
                        RemoteAddr {
                            rkey: nodes[0].rkey,
                            va: other,
                        },
                        64,
                    ),
                )
                .expect("post");
            waiting = Some(next);
            next += 1;
        }
        if client.poll_timeout().is_some_and(|t| t <= now) {
            client.handle_timeout(now);
        }
        let mut buf = vec![0u8; 8192];
        while let Some(n) = client.poll_transmit(now, &mut buf) {
            let path = IcrcPath::new(CLIENT, SWITCH_CLIENT);
            to_switch.push((
                PORT_CLIENT,
                FrameRepr::build(MAC, MAC, 0x02, &path, &buf[..n]),
            ));
        }
        let mut out: Vec<Emitted> = Vec::new();
        p.set_clock_us(now_us);
        for (port, frame) in std::mem::take(&mut to_switch) {
            out.extend(p.process(port, &frame));
        }
        if out.is_empty() {
            out.extend(p.flush());
        }
        for e in out {
            if e.port == PORT_CLIENT {
                if let Ok(eth) = EthernetFrame::parse_port(&e.frame, CLIENT.port()) {
                    let _ = client.handle_datagram(now, eth.roce);
                }
                continue;
            }
            let Some(dport) = e
                .frame
                .get(36..38)
                .map(|b| u16::from_be_bytes([b[0], b[1]]))
            else {
                continue;
            };
            let Ok(eth) = EthernetFrame::parse_port(&e.frame, dport) else {
                continue;
            };
            if let Some(node) = nodes.iter_mut().find(|n| n.addr == eth.dst) {
                for r in node.receive(&e.frame) {
                    to_switch.push((PORT_MEMNODE, r));
                }
            }
        }
        while let Some(c) = client.poll_completion() {
            let i = c.wr_id / 2;
            if c.wr_id % 2 == 1 {
                assert!(c.result.is_ok(), "READ {i}: {:?}", c.result);
                continue;
            }
            assert_eq!(
                c.result,
                Ok(CompletionValue::Write),
                "replicated WRITE {i} failed"
            );
            let want = block(i, seed);
            let offset = i * BLOCK as u64;
            for (m, node) in nodes.iter().enumerate() {
                assert_eq!(
                    node.bytes(offset, BLOCK),
                    want,
                    "WRITE {i} completed while member {m} did not hold it (seed {seed})"
                );
            }
            completed += 1;
            if waiting == Some(i) {
                waiting = None;
            }
        }
    }
    assert_eq!(completed, writes, "not every WRITE completed (seed {seed})");
    for (m, node) in nodes.iter().enumerate().skip(1) {
        for i in 0..writes {
            assert_eq!(
                node.bytes(i * BLOCK as u64, BLOCK),
                block(i, seed),
                "backup {m} alone lacks block {i}"
            );
        }
    }
    counters.push(p.counters());
    Run {
        counters,
        completed,
    }
}

fn total(counters: &[Counters], f: impl Fn(&Counters) -> u64) -> u64 {
    counters.iter().map(f).sum()
}

#[test]
fn a_clean_run_holds_every_ack_until_both_backups_have_the_write() {
    let r = run(1, 0.0, 100, &[]);
    assert_eq!(r.completed, 100);
    let c = &r.counters;
    assert_eq!(total(c, |c| c.mirror_write.replicated), 100);
    assert_eq!(total(c, |c| c.mirror_write.copies), 200);
    assert_eq!(total(c, |c| c.mirror_write.lane_acks), 200);
    // Each ACK of the primary is either held until the last backup's ACK, which is then
    // turned into the client's, or comes after both backups and goes on at once.
    assert_eq!(
        total(c, |c| c.mirror_write.released + c.mirror_write.passed),
        100
    );
    assert_eq!(total(c, |c| c.mirror_write.busy), 0);
}

#[test]
fn every_kind_of_fault_is_repaired_and_no_write_completes_early() {
    let r = run(7, 0.05, 300, &[]);
    let c = &r.counters;
    assert!(total(c, |c| c.faults.dropped) > 0);
    assert!(total(c, |c| c.faults.duplicated) > 0);
    assert!(total(c, |c| c.faults.reordered) > 0);
    assert!(
        total(c, |c| c.mirror_write.recopied) > 0,
        "lost copies were made again from the client's retransmissions"
    );
    assert_eq!(total(c, |c| c.mirror_write.busy), 0);
}

#[test]
fn writes_in_flight_across_switch_restarts_complete_on_every_member() {
    let r = run(11, 0.05, 200, &[50, 120, 121]);
    assert_eq!(r.counters.len(), 4);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, rng_seed: proptest::test_runner::RngSeed::Fixed(0x5eed), ..ProptestConfig::default() })]

    #[test]
    fn replicated_writes_complete_only_on_every_member(seed in 0u64..1_000_000, writes in 1u64..80) {
        run(seed, 0.05, writes, &[]);
    }
}
