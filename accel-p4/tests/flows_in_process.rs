//! Zero-sided flows driven in process: the pipeline model and the flow job between
//! soft-RoCE responders (the memory nodes' protocol core) on a virtual clock, with
//! producer and consumer applications writing and reading their rings in memory only.
//! Seeded loss, duplication and reordering in both directions; a switch restart from
//! the flow's checkpoint on fresh queue pairs. Every item carries its producer and
//! sequence number and a body derived from them, checked byte for byte.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::time::Instant;

use accel_p4::flow::ring::{HEAD_OFFSET, TAIL_OFFSET};
use accel_p4::flow::{
    ControlPath, FlowCheckpoint, FlowJob, FlowKind, FlowShape, FlowState, LanePath, RingLayout,
};
use accel_p4::model::{Counters, FaultPolicy, FlowPuntAction, RouteKey};
use accel_p4::pipeline::Pipeline;
use accel_p4::spec::{self, PORT_CLIENT, PORT_CPU, PORT_MEMNODE};
use proptest::prelude::*;
use verbs::mem::{AccessFlags, MemoryTable, Region};
use verbs::rc::{RcConfig, Responder};
use verbs::wire::{BthRepr, EthernetFrame, FrameRepr, IcrcPath, Opcode, PacketRepr, RethRepr};

const SWITCH: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 100), 50_001);
const MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
const BASE_VA: u64 = 0x10_0000;
const SLOT: u32 = 1500;
const STEP_US: u64 = 50;

/// A memory node: one region holding one ring at `BASE_VA`, and a responder per
/// queue pair of the switch.
struct Node {
    addr: SocketAddrV4,
    mem: MemoryTable,
    region: Arc<Region>,
    rkey: u32,
    qps: BTreeMap<u32, Responder>,
}

impl Node {
    fn new(addr: SocketAddrV4) -> Node {
        let region = Arc::new(Region::anonymous(1 << 20).expect("region"));
        let mem = MemoryTable::new();
        let info = mem
            .register(region.clone(), BASE_VA, AccessFlags::ALL)
            .expect("register");
        Node {
            addr,
            mem,
            region,
            rkey: info.rkey,
            qps: BTreeMap::new(),
        }
    }

    fn add_qp(&mut self, qpn: u32, switch_qpn: u32, psn: u32) {
        let r = Responder::new(
            RcConfig::default(),
            qpn,
            switch_qpn,
            psn,
            IcrcPath::new(SWITCH, self.addr),
        );
        self.qps.insert(qpn, r);
    }

    fn receive(&mut self, frame: &[u8]) -> Vec<Vec<u8>> {
        let Ok(eth) = EthernetFrame::parse_port(frame, self.addr.port()) else {
            return Vec::new();
        };
        let Ok(repr) = PacketRepr::parse(eth.roce) else {
            return Vec::new();
        };
        let Some(qp) = self.qps.get_mut(&repr.bth.dest_qpn) else {
            return Vec::new();
        };
        let path = eth.path();
        let _ = qp.handle_datagram_sent_with(eth.roce, path.ip_id, path.ip_flags, &self.mem);
        let mut out = Vec::new();
        let mut buf = vec![0u8; 4096];
        while let Some(n) = qp.poll_transmit(&mut buf) {
            let path = IcrcPath::new(self.addr, SWITCH);
            out.push(FrameRepr::build(MAC, MAC, 0x02, &path, &buf[..n]));
        }
        out
    }

    fn word(&self, offset: u64) -> u64 {
        let mut b = [0u8; 8];
        self.region.read(offset, &mut b).expect("read word");
        u64::from_le_bytes(b)
    }

    fn set_word(&self, offset: u64, v: u64) {
        self.region
            .write(offset, &v.to_le_bytes())
            .expect("write word");
    }

    fn slot_offset(&self, ring: &RingLayout, i: u64) -> u64 {
        ring.slot_va(i) - BASE_VA
    }
}

/// An item: producer, sequence number, then bytes derived from both.
fn item(producer: u32, seq: u64) -> Vec<u8> {
    let mut v = vec![0u8; SLOT as usize];
    v[..4].copy_from_slice(&producer.to_le_bytes());
    v[4..12].copy_from_slice(&seq.to_le_bytes());
    let mut x = (u64::from(producer) << 40) ^ seq ^ 0x9E37_79B9_7F4A_7C15;
    for b in &mut v[12..] {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    v
}

struct Rig {
    kind: FlowKind,
    producers: Vec<Node>,
    consumers: Vec<Node>,
    rings_p: Vec<RingLayout>,
    rings_c: Vec<RingLayout>,
    /// Items each producer still has to put in, and the next sequence number.
    to_produce: Vec<u64>,
    produced: Vec<u64>,
    /// What each consumer took out, in order, as (producer, seq).
    seen: Vec<Vec<(u32, u64)>>,
    /// A consumer takes at most one item every this many steps.
    consume_every: Vec<u64>,
    pipeline: Pipeline,
    job: FlowJob,
    checkpoint: FlowCheckpoint,
    incarnation: u32,
    epoch: Instant,
    now: u64,
    step: u64,
    to_switch: Vec<Vec<u8>>,
    faults: f64,
    seed: u64,
    counters: Counters,
    /// How often the switch polls ring counters.
    poll_interval_us: u64,
    /// Whether producers ring the switch's doorbell after putting items in.
    doorbells: bool,
    /// The step each producer last rang its doorbell.
    rang: Vec<u64>,
}

fn producer_addr(p: usize) -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::new(10, 0, 1, p as u8 + 1), 4791)
}

fn consumer_addr(c: usize) -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::new(10, 0, 2, c as u8 + 1), 4791)
}

impl Rig {
    #[allow(clippy::too_many_arguments)]
    fn new(
        kind: FlowKind,
        items: &[u64],
        consumers: usize,
        producer_slots: u32,
        consumer_slots: u32,
        consume_every: Vec<u64>,
        faults: f64,
        seed: u64,
    ) -> Rig {
        let producers: Vec<Node> = (0..items.len())
            .map(|p| Node::new(producer_addr(p)))
            .collect();
        let cons: Vec<Node> = (0..consumers)
            .map(|c| Node::new(consumer_addr(c)))
            .collect();
        let ring = |n: &Node, slots| RingLayout {
            va: BASE_VA,
            rkey: n.rkey,
            slot_size: SLOT,
            slots,
        };
        let rings_p = producers.iter().map(|n| ring(n, producer_slots)).collect();
        let rings_c = cons.iter().map(|n| ring(n, consumer_slots)).collect();
        let epoch = Instant::now();
        let placeholder = FlowJob::new(
            FlowShape {
                kind: FlowKind::LoadBalance,
                producers: vec![],
                consumers: vec![],
                poll_interval_us: 1,
                rto_us: 1,
            },
            vec![],
            vec![],
            None,
            epoch,
        );
        assert!(placeholder.is_err(), "a flow without rings is refused");
        let mut rig = Rig {
            kind,
            producers,
            consumers: cons,
            rings_p,
            rings_c,
            to_produce: items.to_vec(),
            produced: vec![0; items.len()],
            seen: vec![Vec::new(); consumers],
            consume_every,
            pipeline: Pipeline::new(),
            // Replaced by `start` right away.
            job: dummy_job(epoch),
            checkpoint: FlowCheckpoint::default(),
            incarnation: 0,
            epoch,
            now: 0,
            step: 0,
            to_switch: Vec::new(),
            faults,
            seed,
            counters: Counters::default(),
            poll_interval_us: 200,
            doorbells: false,
            rang: vec![0; items.len()],
        };
        rig.start(None);
        rig
    }

    fn shape(&self) -> FlowShape {
        FlowShape {
            kind: self.kind,
            producers: self.rings_p.clone(),
            consumers: self.rings_c.clone(),
            poll_interval_us: self.poll_interval_us,
            rto_us: 2_000,
        }
    }

    /// Start an incarnation of the switch: fresh pipeline, fresh queue pairs on every
    /// memnode (the old ones deleted), the flow job resumed from `checkpoint`.
    fn start(&mut self, checkpoint: Option<FlowCheckpoint>) {
        self.incarnation += 1;
        let inc = self.incarnation;
        let salt = (self.seed as u32 & 0xFFF) ^ inc;
        let mut p = Pipeline::new();
        p.set_mode(spec::mode::FAULTS);
        let policy = FaultPolicy::from_probabilities(self.faults, self.faults, self.faults, 0.0);
        for dir in [spec::DIR_UP, spec::DIR_DOWN] {
            p.tables.fault_policy.insert(dir, policy).expect("policy");
        }
        p.seed_faults(self.seed ^ u64::from(inc));
        let (n, m) = (self.producers.len(), self.consumers.len());
        let mut control = Vec::new();
        for r in 0..n + m {
            let switch_qpn = 0xF0_0000 + (inc << 8) + r as u32;
            let memnode_qpn = 0x1000 + (inc << 8) + r as u32;
            let psn = 0xFF_FF00 + salt * 7 + r as u32;
            let node = if r < n {
                &mut self.producers[r]
            } else {
                &mut self.consumers[r - n]
            };
            node.qps.retain(|&q, _| q >> 8 == 0);
            control.push(ControlPath {
                switch: SWITCH,
                memnode: node.addr,
                switch_qpn,
                memnode_qpn,
                psn: psn & 0xFF_FFFF,
            });
            p.tables
                .flow_punt
                .insert(
                    RouteKey {
                        src: node.addr,
                        qpn: switch_qpn,
                    },
                    FlowPuntAction { ring: r as u16 },
                )
                .expect("flow_punt");
        }
        for pi in 0..n {
            p.tables
                .flow_punt
                .insert(
                    RouteKey {
                        src: doorbell_addr(pi),
                        qpn: DOORBELL_QPN,
                    },
                    FlowPuntAction {
                        ring: (n + m + pi) as u16,
                    },
                )
                .expect("flow_punt");
        }
        // Old queue pairs of every kind go (a restarted switch deletes them).
        for node in self.producers.iter_mut().chain(self.consumers.iter_mut()) {
            node.qps.clear();
        }
        for (r, c) in control.iter().enumerate() {
            let node = if r < n {
                &mut self.producers[r]
            } else {
                &mut self.consumers[r - n]
            };
            node.add_qp(c.memnode_qpn, c.switch_qpn, c.psn);
        }
        let mut lanes = Vec::new();
        for pi in 0..n {
            for ci in 0..m {
                let l = (pi * m + ci) as u32;
                let lane = LanePath {
                    copy_slot: l as u8,
                    switch: SWITCH,
                    src_memnode: self.producers[pi].addr,
                    src_switch_qpn: 0xE0_0000 + (inc << 8) + 2 * l,
                    src_memnode_qpn: 0x2000 + (inc << 8) + l,
                    src_psn: (0xFF_FFF0 + salt + l) & 0xFF_FFFF,
                    dst_memnode: self.consumers[ci].addr,
                    dst_switch_qpn: 0xE0_0000 + (inc << 8) + 2 * l + 1,
                    dst_memnode_qpn: 0x3000 + (inc << 8) + l,
                    dst_psn: (0x100 + salt * 3 + l) & 0xFF_FFFF,
                };
                self.producers[pi].add_qp(lane.src_memnode_qpn, lane.src_switch_qpn, lane.src_psn);
                self.consumers[ci].add_qp(lane.dst_memnode_qpn, lane.dst_switch_qpn, lane.dst_psn);
                lanes.push(lane);
            }
        }
        self.job =
            FlowJob::new(self.shape(), control, lanes, checkpoint, self.epoch).expect("flow");
        self.pipeline = p;
        self.to_switch.clear();
    }

    /// The switch stops (everything in flight is lost) and a new one resumes the flow
    /// from the last checkpoint it persisted.
    fn restart(&mut self) {
        let c = self.pipeline.counters();
        add_counters(&mut self.counters, &c);
        let ckpt = self.checkpoint.clone();
        self.start(Some(ckpt));
    }

    /// Producers and consumers do their part; returns the doorbells producers ring.
    fn apps(&mut self) -> Vec<(usize, u64)> {
        let mut doorbells = Vec::new();
        for (p, node) in self.producers.iter().enumerate() {
            let ring = self.rings_p[p];
            let tail = node.word(TAIL_OFFSET);
            let head = self.produced[p];
            if self.to_produce[p] > 0 && ring.room(head, tail) > 0 {
                let off = node.slot_offset(&ring, head);
                node.region
                    .write(off, &item(p as u32, head))
                    .expect("write item");
                self.produced[p] += 1;
                self.to_produce[p] -= 1;
                node.set_word(HEAD_OFFSET, self.produced[p]);
                if self.doorbells {
                    doorbells.push((p, self.produced[p]));
                    self.rang[p] = self.step;
                }
            } else if self.doorbells && tail < self.produced[p] && self.step - self.rang[p] >= 100 {
                // Items wait and the tail has not moved for a while: ring again (a
                // doorbell is a datagram; it may have been lost).
                doorbells.push((p, self.produced[p]));
                self.rang[p] = self.step;
            }
        }
        for (c, node) in self.consumers.iter().enumerate() {
            if !self.step.is_multiple_of(self.consume_every[c]) {
                continue;
            }
            let ring = self.rings_c[c];
            let head = node.word(HEAD_OFFSET);
            let tail = node.word(TAIL_OFFSET);
            if head > tail {
                let mut got = vec![0u8; SLOT as usize];
                node.region
                    .read(node.slot_offset(&ring, tail), &mut got)
                    .expect("read item");
                let producer = u32::from_le_bytes(got[..4].try_into().expect("4 bytes"));
                let seq = u64::from_le_bytes(got[4..12].try_into().expect("8 bytes"));
                assert!(
                    got == item(producer, seq),
                    "consumer {c} slot {tail}: the item's bytes are not producer {producer}'s item {seq}"
                );
                self.seen[c].push((producer, seq));
                node.set_word(TAIL_OFFSET, tail + 1);
            }
        }
        doorbells
    }

    fn step(&mut self) {
        self.step += 1;
        self.now += STEP_US;
        let doorbells = self.apps();
        let mut out = Vec::new();
        for (p, head) in doorbells {
            out.extend(self.pipeline.process(PORT_CLIENT, &doorbell(p, head)));
        }
        for frame in std::mem::take(&mut self.to_switch) {
            out.extend(self.pipeline.process(PORT_MEMNODE, &frame));
        }
        if out.is_empty() {
            out.extend(self.pipeline.flush());
        }
        let digests = self.pipeline.take_copy_digests();
        self.job.on_copy_digests(&digests, self.now);
        let mut to_nodes = Vec::new();
        for e in out {
            if e.port == PORT_CPU {
                let Ok(eth) = EthernetFrame::parse_port(&e.frame, 4791) else {
                    continue;
                };
                let Ok(repr) = PacketRepr::parse(eth.roce) else {
                    continue;
                };
                if let Some(i) = self.job.control_index(eth.src, repr.bth.dest_qpn) {
                    self.job.on_control_frame(i, &e.frame, self.now);
                } else if repr.bth.dest_qpn == DOORBELL_QPN
                    && let Some(p) =
                        (0..self.producers.len()).find(|&p| doorbell_addr(p) == eth.src)
                {
                    self.job.on_doorbell(p);
                }
            } else {
                to_nodes.push(e.frame);
            }
        }
        let output = self.job.poll(self.now);
        for entry in output.entries {
            self.pipeline
                .tables
                .copy_src
                .insert(entry.src.0, entry.src.1)
                .expect("copy_src");
            self.pipeline
                .tables
                .copy_dst
                .insert(entry.dst.0, entry.dst.1)
                .expect("copy_dst");
            self.pipeline.init_copy(entry.copy_slot);
        }
        for entry in output.mcast_entries {
            let slot = entry.src.1.slot;
            self.pipeline
                .tables
                .copy_src
                .insert(entry.src.0, entry.src.1)
                .expect("copy_src");
            for r in 1..=spec::COPY_REPLICAS as u8 {
                self.pipeline.tables.copy_mcast.remove(&(slot, r));
            }
            for (k, a) in entry.replicas {
                self.pipeline
                    .tables
                    .copy_mcast
                    .insert(k, a)
                    .expect("copy_mcast");
            }
            for (dst_slot, k, a) in entry.dsts {
                self.pipeline
                    .tables
                    .copy_dst
                    .insert(k, a)
                    .expect("copy_dst");
                self.pipeline.init_copy(dst_slot);
            }
        }
        // Write-ahead: the checkpoint is kept before the packets leave.
        self.checkpoint = self.job.checkpoint();
        for pkt in output.packets {
            to_nodes.extend(self.pipeline.generate(pkt).into_iter().map(|e| e.frame));
        }
        for frame in to_nodes {
            let dst = frame
                .get(30..34)
                .map(|b| Ipv4Addr::new(b[0], b[1], b[2], b[3]));
            let node = self
                .producers
                .iter_mut()
                .chain(self.consumers.iter_mut())
                .find(|n| Some(*n.addr.ip()) == dst);
            if let Some(node) = node {
                self.to_switch.extend(node.receive(&frame));
            }
        }
    }

    fn total(&self) -> u64 {
        self.produced.iter().sum::<u64>() + self.to_produce.iter().sum::<u64>()
    }

    fn consumed(&self) -> u64 {
        self.seen.iter().map(|s| s.len() as u64).sum()
    }

    /// Run until every item was consumed as the flow's kind says, then until the
    /// producers' tails caught up.
    fn run(&mut self, max_steps: u64) {
        let want = match self.kind {
            FlowKind::OrderedReplication => self.total() * self.consumers.len() as u64,
            _ => self.total(),
        };
        for _ in 0..max_steps {
            self.step();
            assert!(
                !matches!(self.job.state(), FlowState::Failed(_)),
                "{:?}",
                self.job.progress()
            );
            let tails_done = self
                .producers
                .iter()
                .enumerate()
                .all(|(p, n)| n.word(TAIL_OFFSET) == self.produced[p]);
            if self.consumed() >= want && tails_done {
                break;
            }
        }
        let c = self.pipeline.counters();
        add_counters(&mut self.counters, &c);
        self.pipeline = Pipeline::new();
        assert_eq!(
            self.consumed(),
            want,
            "consumed {} of {want}: {:?}",
            self.consumed(),
            self.job.progress()
        );
    }
}

/// The switch's doorbell QPN, and where producer `p` rings it from.
const DOORBELL_QPN: u32 = 0xD0_0001;

fn doorbell_addr(p: usize) -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::new(10, 0, 1, p as u8 + 1), 50_500)
}

/// A doorbell from producer `p`: an 8-byte WRITE ONLY carrying its new head, sent
/// without expecting an acknowledgement.
fn doorbell(p: usize, head: u64) -> Vec<u8> {
    let word = head.to_le_bytes();
    let mut r = PacketRepr::new(BthRepr::new(
        Opcode::WriteOnly,
        DOORBELL_QPN,
        head as u32 & 0xFF_FFFF,
        false,
    ));
    r.reth = Some(RethRepr {
        va: 0,
        rkey: 0,
        dma_len: 8,
    });
    r.payload = &word;
    let path = IcrcPath::new(doorbell_addr(p), DOORBELL_SWITCH);
    let mut roce = vec![0u8; r.buffer_len()];
    r.emit(&mut roce, &path).expect("emit");
    FrameRepr::build(MAC, MAC, 0x02, &path, &roce)
}

/// The switch's client-side address doorbells go to.
const DOORBELL_SWITCH: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 100), 4791);

fn add_counters(total: &mut Counters, c: &Counters) {
    total.faults.dropped += c.faults.dropped;
    total.faults.duplicated += c.faults.duplicated;
    total.faults.reordered += c.faults.reordered;
    total.zero_copy.converted += c.zero_copy.converted;
    total.zero_copy.stale += c.zero_copy.stale;
    total.flow_punt.punted += c.flow_punt.punted;
}

fn dummy_job(epoch: Instant) -> FlowJob {
    let ring = RingLayout {
        va: BASE_VA,
        rkey: 1,
        slot_size: 64,
        slots: 1,
    };
    let path = ControlPath {
        switch: SWITCH,
        memnode: SWITCH,
        switch_qpn: 0,
        memnode_qpn: 0,
        psn: 0,
    };
    let lane = LanePath {
        copy_slot: 0,
        switch: SWITCH,
        src_memnode: SWITCH,
        src_switch_qpn: 0,
        src_memnode_qpn: 0,
        src_psn: 0,
        dst_memnode: SWITCH,
        dst_switch_qpn: 0,
        dst_memnode_qpn: 0,
        dst_psn: 0,
    };
    FlowJob::new(
        FlowShape {
            kind: FlowKind::OneToOne,
            producers: vec![ring],
            consumers: vec![ring],
            poll_interval_us: 1,
            rto_us: 1,
        },
        vec![path, path],
        vec![lane],
        None,
        epoch,
    )
    .expect("a 1:1 flow")
}

/// Every item of every producer exactly once over all consumers, each producer's
/// items in its order at every consumer.
fn assert_exactly_once(rig: &Rig) {
    let mut all = BTreeSet::new();
    for (c, seen) in rig.seen.iter().enumerate() {
        let mut last: BTreeMap<u32, u64> = BTreeMap::new();
        for &(p, seq) in seen {
            assert!(
                all.insert((p, seq)),
                "item {seq} of producer {p} delivered twice"
            );
            if let Some(&prev) = last.get(&p) {
                assert!(
                    seq > prev,
                    "consumer {c}: producer {p}'s item {seq} after {prev}"
                );
            }
            last.insert(p, seq);
        }
    }
    for (p, &n) in rig.produced.iter().enumerate() {
        for seq in 0..n {
            assert!(
                all.contains(&(p as u32, seq)),
                "item {seq} of producer {p} lost"
            );
        }
    }
}

/// Every consumer saw every item once, all in the same order.
fn assert_replicated_in_one_order(rig: &Rig) {
    let first = &rig.seen[0];
    let distinct: BTreeSet<_> = first.iter().collect();
    assert_eq!(distinct.len(), first.len(), "an item delivered twice");
    assert_eq!(first.len() as u64, rig.total());
    for (c, seen) in rig.seen.iter().enumerate() {
        assert!(
            seen == first,
            "consumer {c} saw another order than consumer 0"
        );
    }
}

#[test]
fn one_to_one_moves_every_item_in_order() {
    let mut rig = Rig::new(FlowKind::OneToOne, &[200], 1, 8, 4, vec![1], 0.0, 1);
    rig.run(50_000);
    let want: Vec<(u32, u64)> = (0..200).map(|s| (0, s)).collect();
    assert_eq!(rig.seen[0], want);
    assert_eq!(rig.job.progress().rereads, 0);
    assert!(rig.counters.flow_punt.punted > 0);
    assert_eq!(
        rig.counters.zero_copy.converted,
        200 * 2,
        "two packets per item"
    );
}

#[test]
fn one_to_one_is_exactly_once_under_faults() {
    let mut rig = Rig::new(FlowKind::OneToOne, &[300], 1, 8, 4, vec![1], 0.05, 7);
    rig.run(200_000);
    let want: Vec<(u32, u64)> = (0..300).map(|s| (0, s)).collect();
    assert_eq!(rig.seen[0], want);
    let c = rig.counters;
    assert!(
        c.faults.dropped > 0 && c.faults.duplicated > 0 && c.faults.reordered > 0,
        "{c:?}"
    );
    assert!(rig.job.progress().rereads > 0, "{:?}", rig.job.progress());
}

#[test]
fn load_balancing_is_exactly_once_under_faults_and_favours_the_fast_consumer() {
    // Three producers, three consumers; consumer 2 takes an item every 20 steps only.
    let mut rig = Rig::new(
        FlowKind::LoadBalance,
        &[150, 150, 150],
        3,
        8,
        4,
        vec![1, 1, 20],
        0.05,
        11,
    );
    rig.run(300_000);
    assert_exactly_once(&rig);
    // Static partitioning would give each consumer 150 items.
    let counts: Vec<usize> = rig.seen.iter().map(Vec::len).collect();
    assert!(
        counts[2] < 120 && counts[0] > 150 && counts[1] > 150,
        "the slow consumer got a fair share anyway: {counts:?}"
    );
    assert!(rig.counters.faults.dropped > 0, "{:?}", rig.counters);
}

#[test]
fn ordered_replication_reads_each_item_once_for_all_consumers() {
    // Two producers, three consumers, no faults: the data plane multicasts each READ
    // response to all three consumers.
    let mut rig = Rig::new(
        FlowKind::OrderedReplication,
        &[100, 100],
        3,
        8,
        4,
        vec![1, 1, 1],
        0.0,
        3,
    );
    rig.run(100_000);
    assert_replicated_in_one_order(&rig);
    assert_exactly_once_per_consumer(&rig);
    let progress = rig.job.progress();
    assert_eq!(
        progress.reads, 200,
        "one producer READ per item: {progress:?}"
    );
    assert_eq!(progress.rereads, 0, "{progress:?}");
    assert_eq!(
        rig.counters.zero_copy.converted,
        200 * 2 * 3,
        "two packets per item, each written to three consumers"
    );
}

#[test]
fn ordered_replication_gives_every_consumer_the_same_order_under_faults() {
    let mut rig = Rig::new(
        FlowKind::OrderedReplication,
        &[120, 120],
        3,
        8,
        4,
        vec![1, 2, 3],
        0.05,
        23,
    );
    rig.run(400_000);
    assert_replicated_in_one_order(&rig);
    assert_exactly_once_per_consumer(&rig);
    assert!(rig.counters.faults.duplicated > 0, "{:?}", rig.counters);
    // Losses were repaired by re-READs, each re-sending every consumer's replica.
    assert!(rig.job.progress().rereads > 0, "{:?}", rig.job.progress());
}

/// For replication: each consumer has every item once, producers' orders kept.
fn assert_exactly_once_per_consumer(rig: &Rig) {
    for seen in &rig.seen {
        let set: BTreeSet<_> = seen.iter().copied().collect();
        for (p, &n) in rig.produced.iter().enumerate() {
            for seq in 0..n {
                assert!(set.contains(&(p as u32, seq)));
            }
        }
    }
}

#[test]
fn flows_survive_switch_restarts_exactly_once() {
    for (kind, seed) in [
        (FlowKind::LoadBalance, 31u64),
        (FlowKind::OrderedReplication, 37),
        (FlowKind::KeyShuffle, 43),
    ] {
        let mut rig = Rig::new(kind, &[120, 120], 2, 8, 4, vec![1, 3], 0.05, seed);
        // Restart the switch three times while items are in flight.
        for k in 0..3u64 {
            for _ in 0..(700 + 97 * k) {
                rig.step();
            }
            assert!(
                !rig.checkpoint.pending.is_empty() || rig.consumed() > 0,
                "the flow was moving when the switch stopped"
            );
            rig.restart();
        }
        rig.run(400_000);
        assert!(rig.incarnation == 4);
        match kind {
            FlowKind::OrderedReplication => {
                assert_replicated_in_one_order(&rig);
                assert_exactly_once_per_consumer(&rig);
            }
            _ => assert_exactly_once(&rig),
        }
    }
}

#[test]
fn doorbells_stand_in_for_slow_polls() {
    // Polls every 250 ms (5000 steps); the producer rings a doorbell with each item
    // (and again while its items wait), under 5 % faults.
    let mut rig = Rig::new(FlowKind::OneToOne, &[150], 1, 256, 256, vec![1], 0.05, 5);
    rig.poll_interval_us = 250_000;
    rig.doorbells = true;
    rig.start(None);
    rig.run(4_000);
    let want: Vec<(u32, u64)> = (0..150).map(|s| (0, s)).collect();
    assert_eq!(rig.seen[0], want);
    let progress = rig.job.progress();
    assert!(progress.doorbells > 0, "{progress:?}");
    assert!(rig.step < 4_000, "finished in {} steps", rig.step);
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 8,
        rng_algorithm: proptest::test_runner::RngAlgorithm::ChaCha,
        ..ProptestConfig::default()
    })]

    /// Any kind, seed and ring sizes under 5 % loss, duplication and reordering both
    /// ways: every item exactly once (per consumer for replication, in one order).
    #[test]
    fn flows_are_exactly_once_under_faults(
        seed in any::<u64>(),
        kind in prop_oneof![
            Just(FlowKind::OneToOne),
            Just(FlowKind::LoadBalance),
            Just(FlowKind::OrderedReplication),
            Just(FlowKind::KeyShuffle),
        ],
        producer_slots in 1u32..6,
        consumer_slots in 1u32..6,
        slow in 1u64..4,
    ) {
        let (items, consumers): (&[u64], usize) = match kind {
            FlowKind::OneToOne => (&[40], 1),
            _ => (&[30, 30], 2),
        };
        let every = if consumers == 1 { vec![slow] } else { vec![1, slow] };
        let mut rig = Rig::new(kind, items, consumers, producer_slots, consumer_slots, every, 0.05, seed);
        rig.run(200_000);
        match kind {
            FlowKind::OrderedReplication => {
                assert_replicated_in_one_order(&rig);
                assert_exactly_once_per_consumer(&rig);
            }
            _ => assert_exactly_once(&rig),
        }
    }
}

#[test]
fn key_shuffle_sends_every_item_to_its_keys_consumer_exactly_once_under_faults() {
    let mut rig = Rig::new(
        FlowKind::KeyShuffle,
        &[120, 120, 120],
        3,
        8,
        4,
        vec![1, 2, 1],
        0.05,
        41,
    );
    rig.run(400_000);
    assert_exactly_once(&rig);
    for (c, seen) in rig.seen.iter().enumerate() {
        for &(p, seq) in seen {
            // The key is the item's first 8 bytes: producer, then the low half of seq.
            let key = u64::from(p) | (seq << 32);
            assert_eq!(
                accel_p4::flow::key_shuffle::consumer_of(key, 3),
                c,
                "item {seq} of producer {p} at the wrong consumer"
            );
        }
    }
    assert!(rig.seen.iter().all(|s| !s.is_empty()), "keys spread");
    assert!(rig.counters.faults.dropped > 0, "{:?}", rig.counters);
}
