//! Load-balanced READs driven in process: a client requester (the verbs crate's RC
//! protocol core), the pipeline model and three soft-RoCE responders — a primary and
//! two backups holding the same blocks at the same offsets — on a virtual clock, with
//! seeded loss, duplication and reordering in both directions.
//!
//! The client READs blocks under the set's read alias key, with WRITEs of other memory
//! and two-packet READs of the primary in between, several requests in flight. Checked:
//! every READ completes with its own block's bytes (a response mapped to the wrong
//! client PSN would carry another block), the WRITEs complete (the primary's PSNs and
//! MSNs stayed in step with the client's), READs are spread over the serving members,
//! and a member that does not serve (syncing) executes none.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::time::{Duration, Instant};

use accel_p4::functions::read_balance::{
    BalanceAnswerAction, BalanceLaneAction, BalanceSetAction, ReadBalanceCounters,
};
use accel_p4::model::{Counters, Emitted, FaultPolicy, RouteAction, RouteKey};
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
const READ_ALIAS: u32 = 0xB123_4500;
const BLOCK: usize = 192;
const BLOCKS: u64 = 64;
/// WRITEs go here, past the blocks.
const SCRATCH: u64 = 0x8_0000;

struct Node {
    mem: MemoryTable,
    rkey: u32,
    responder: Responder,
    addr: SocketAddrV4,
    reads: u64,
}

impl Node {
    fn new(i: usize, qpn: u32, peer_qpn: u32, psn: u32, seed: u64) -> Node {
        let region = Arc::new(Region::anonymous(1 << 20).expect("region"));
        for k in 0..BLOCKS {
            region
                .write(k * BLOCK as u64, &block(k, seed))
                .expect("fill");
        }
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
            rkey: info.rkey,
            responder,
            addr,
            reads: 0,
        }
    }

    fn receive(&mut self, frame: &[u8]) -> Vec<Vec<u8>> {
        let Ok(eth) = EthernetFrame::parse_port(frame, self.addr.port()) else {
            return Vec::new();
        };
        if eth.roce.first() == Some(&0x0C) {
            self.reads += 1;
        }
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

/// Lane queue pair numbers and first PSN of backup `backup` (near the 24-bit wrap).
fn lane(backup: u32) -> (u32, u32, u32) {
    (0xE9_0000 | backup, 0x51 + 0x10 * backup, 0xFF_FFF8 + backup)
}

/// A pipeline with the client's connection and the set's read lanes installed;
/// `serving`: the backups that serve (bit per backup).
fn switch(nodes: &mut [Node; 3], seed: u64, faults: f64, serving: u8) -> Pipeline {
    let mut p = Pipeline::new();
    p.set_mode(spec::mode::FAULTS);
    let policy = FaultPolicy::from_probabilities(faults, faults, faults, 0.0);
    for dir in [spec::DIR_UP, spec::DIR_DOWN] {
        p.tables.fault_policy.insert(dir, policy).expect("policy");
    }
    p.seed_faults(seed);
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
    p.init_connection(3, 0x40);
    let set = 7u8;
    let primary_rkey = nodes[0].rkey;
    let lb = p.read_balance_mut();
    lb.balance_rkey.insert(
        READ_ALIAS,
        BalanceSetAction {
            set,
            rkey: primary_rkey,
            backups: 2,
            serving,
        },
    );
    for b in 0..2u32 {
        let (switch_qpn, memnode_qpn, psn) = lane(b);
        let node = &mut nodes[b as usize + 1];
        node.responder = Responder::new(
            RcConfig::default(),
            memnode_qpn,
            switch_qpn,
            psn,
            IcrcPath::new(SWITCH_MEM, node.addr),
        );
        let lb = p.read_balance_mut();
        lb.balance_lane.insert(
            (set, b as u8),
            BalanceLaneAction {
                src: SWITCH_MEM,
                dst: node.addr,
                qpn: memnode_qpn,
                rkey: node.rkey,
                va_delta: BASE_VA[b as usize + 1].wrapping_sub(BASE_VA[0]),
            },
        );
        lb.balance_answer.insert(
            RouteKey {
                src: node.addr,
                qpn: switch_qpn,
            },
            BalanceAnswerAction {
                set,
                backup: b as u8,
            },
        );
        lb.init_lane(set, b as u8, psn);
    }
    p
}

/// How a run ended.
struct Run {
    counters: Counters,
    balance: ReadBalanceCounters,
    /// READ requests each member's responder received.
    reads: [u64; 3],
}

/// `ops` operations, up to `window` in flight: READs of blocks under the read alias
/// key, every fifth a WRITE to scratch memory on the primary, every seventh a two-packet
/// READ of the primary. Panics when a READ completes with the wrong bytes or anything fails.
fn run(seed: u64, faults: f64, ops: u64, window: u64, serving: u8) -> Run {
    let mut nodes = [
        Node::new(0, PRIMARY_QPN, CLIENT_QPN, 0x40, seed),
        Node::new(1, 0, 0, 0, seed),
        Node::new(2, 0, 0, 0, seed),
    ];
    let mut p = switch(&mut nodes, seed, faults, serving);
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
    let mut now_us = 0u64;
    let mut next = 0u64;
    let mut completed = 0u64;
    let mut to_switch: Vec<(u8, Vec<u8>)> = Vec::new();
    for _ in 0..2_000_000 {
        if completed == ops && client.is_idle() {
            break;
        }
        now_us += 20;
        let now = epoch + Duration::from_micros(now_us);
        while next < ops && next - completed < window {
            let k = (next * 7 + seed) % BLOCKS;
            let va = BASE_VA[0] + k * BLOCK as u64;
            let wr = if next % 5 == 4 {
                WorkRequest::write(
                    RemoteAddr {
                        rkey: nodes[0].rkey,
                        va: BASE_VA[0] + SCRATCH + (next % 32) * 64,
                    },
                    vec![next as u8; 64],
                )
            } else if next % 7 == 6 {
                // Two packets: read under the primary's own key (a READ this long is
                // never balanced).
                WorkRequest::read(
                    RemoteAddr {
                        rkey: nodes[0].rkey,
                        va: BASE_VA[0],
                    },
                    2048,
                )
            } else {
                WorkRequest::read(
                    RemoteAddr {
                        rkey: READ_ALIAS,
                        va,
                    },
                    BLOCK as u32,
                )
            };
            client.post(next, wr).expect("post");
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
            let i = c.wr_id;
            if i % 5 == 4 {
                assert_eq!(
                    c.result,
                    Ok(CompletionValue::Write),
                    "WRITE {i} (seed {seed})"
                );
            } else if i % 7 == 6 {
                let Ok(CompletionValue::Read(bytes)) = &c.result else {
                    panic!("long READ {i}: {:?} (seed {seed})", c.result);
                };
                assert_eq!(&bytes[..BLOCK], &block(0, seed)[..], "long READ {i}");
            } else {
                let k = (i * 7 + seed) % BLOCKS;
                let Ok(CompletionValue::Read(bytes)) = &c.result else {
                    panic!(
                        "READ {i}: {:?} (seed {seed}) {:?}",
                        c.result,
                        p.read_balance().counters
                    );
                };
                assert_eq!(
                    bytes,
                    &block(k, seed),
                    "READ {i} got another block (seed {seed})"
                );
            }
            completed += 1;
        }
    }
    assert_eq!(
        completed, ops,
        "not every operation completed (seed {seed})"
    );
    Run {
        counters: p.counters(),
        balance: p.read_balance().counters,
        reads: [nodes[0].reads, nodes[1].reads, nodes[2].reads],
    }
}

/// Balanceable READs among `ops` operations (not WRITEs, not long READs).
fn balanceable(ops: u64) -> u64 {
    (0..ops).filter(|i| i % 5 != 4 && i % 7 != 6).count() as u64
}

#[test]
fn a_clean_run_spreads_reads_over_every_member_with_the_right_bytes() {
    let r = run(1, 0.0, 300, 4, 0b11);
    let b = r.balance;
    assert_eq!(b.per_member.iter().sum::<u64>(), balanceable(300));
    for (m, n) in b.per_member.iter().enumerate() {
        assert!(
            *n * 4 >= balanceable(300),
            "member {m} served {n} of {} READs",
            balanceable(300)
        );
    }
    assert_eq!(b.answered, b.per_member[1] + b.per_member[2]);
    assert_eq!(r.reads[1], b.per_member[1]);
    assert_eq!(r.reads[2], b.per_member[2]);
    assert_eq!(
        (b.stale, b.resent, b.renewed, b.orphans, b.refused),
        (0, 0, 0, 0, 0)
    );
}

#[test]
fn a_syncing_backup_serves_no_read() {
    let r = run(3, 0.0, 200, 4, 0b01);
    assert_eq!(r.balance.per_member[2], 0);
    assert_eq!(r.reads[2], 0, "the syncing backup executed READs");
    assert!(r.balance.per_member[1] > 0 && r.balance.per_member[0] > 0);
}

#[test]
fn loss_duplication_and_reordering_are_repaired_with_the_right_bytes() {
    let r = run(7, 0.05, 400, 4, 0b11);
    let c = &r.counters;
    assert!(c.faults.dropped > 0 && c.faults.duplicated > 0 && c.faults.reordered > 0);
    let b = r.balance;
    assert!(
        b.resent > 0,
        "retransmissions went to the same member: {b:?}"
    );
    assert!(b.refilled > 0, "lost fillers were sent again: {b:?}");
    assert!(b.per_member[1] > 0 && b.per_member[2] > 0);
}

#[test]
fn a_read_longer_than_one_packet_under_the_alias_is_refused() {
    let mut nodes = [
        Node::new(0, PRIMARY_QPN, CLIENT_QPN, 0x40, 1),
        Node::new(1, 0, 0, 0, 1),
        Node::new(2, 0, 0, 0, 1),
    ];
    let mut p = switch(&mut nodes, 1, 0.0, 0b11);
    let mut client = Requester::new(
        RcConfig::default(),
        CLIENT_QPN,
        PRIMARY_QPN,
        0x40,
        IcrcPath::new(CLIENT, SWITCH_CLIENT),
    );
    let alias = RemoteAddr {
        rkey: READ_ALIAS,
        va: BASE_VA[0],
    };
    client
        .post(0, WorkRequest::read(alias, 2048))
        .expect("post");
    let now = Instant::now();
    let mut buf = vec![0u8; 8192];
    let mut out = Vec::new();
    while let Some(n) = client.poll_transmit(now, &mut buf) {
        let path = IcrcPath::new(CLIENT, SWITCH_CLIENT);
        let frame = FrameRepr::build(MAC, MAC, 0x02, &path, &buf[..n]);
        out.extend(p.process(PORT_CLIENT, &frame));
    }
    assert!(out.is_empty(), "a refused READ leaves nowhere");
    assert_eq!(p.read_balance().counters.refused, 1);
    assert_eq!(p.read_balance().counters.per_member, [0; 3]);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, rng_seed: proptest::test_runner::RngSeed::Fixed(0x1bad), ..ProptestConfig::default() })]

    #[test]
    fn balanced_reads_return_their_own_bytes_under_faults(
        seed in 0u64..1_000_000,
        ops in 1u64..120,
        window in 1u64..8,
        serving in 0u8..4,
    ) {
        run(seed, 0.05, ops, window, serving);
    }
}
