//! Zero-sided flows end to end: rings in two real memory nodes of an embedded cluster
//! over soft RoCE, a soft switch with their admin token started on its admin API. The
//! test plays the producer and consumer applications directly in the nodes' memory
//! (no verbs of their own); every item carries its sequence number and a body derived
//! from it, checked byte for byte — under 5 % loss, duplication and reordering, and
//! across a switch restart.

#[path = "support/secured_pair.rs"]
mod secured_pair;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use accel_p4::admin::FlowsResponse;
use accel_p4::control::{ControlState, FaultSettings};
use accel_p4::flow::job::FlowState;
use accel_p4::flow::ring::{HEAD_OFFSET, SLOTS_OFFSET, TAIL_OFFSET};
use accel_p4::flow::{FlowKind, FlowRequest, FlowRing, FlowStatus};
use accel_p4::model::FaultPolicy;
use accel_p4::spec;
use accel_p4::switch::{SoftSwitch, SwitchConfig, SwitchHandle};
use dmkv_api::http::HttpClient;
use memnode::MemnodeHandle;
use testbed::Embedded;
use verbs::wire::{BthRepr, IcrcPath, Opcode, PacketRepr, RethRepr};

const SLOT: u32 = 512;
const SLOTS: u32 = 8;

/// A ring: which node, at which offset of its first region.
#[derive(Clone, Copy)]
struct RingAt {
    node: usize,
    offset: u64,
}

struct Rig {
    cluster: Embedded,
    token: Option<String>,
}

impl Rig {
    fn start() -> Rig {
        let (cluster, token) = secured_pair::start(8 << 20);
        Rig { cluster, token }
    }

    fn node(&self, i: usize) -> (&MemnodeHandle, String) {
        secured_pair::node(&self.cluster, i)
    }

    fn config(&self) -> SwitchConfig {
        secured_pair::switch_config(&self.token)
    }

    fn ring(&self, at: RingAt) -> FlowRing {
        let (_, url) = self.node(at.node);
        let info =
            dmkv_api::memnode_admin::node_info_as(&url, self.token.as_deref()).expect("node info");
        let region = &info.regions[0];
        FlowRing {
            memnode: url,
            va: region.base_va + at.offset,
            rkey: region.rkey,
            slot_size: SLOT,
            slots: SLOTS,
            doorbell_from: None,
        }
    }

    fn word(&self, at: RingAt, which: u64) -> u64 {
        let mut b = [0u8; 8];
        self.node(at.node)
            .0
            .memory()
            .region
            .read(at.offset + which, &mut b)
            .expect("read word");
        u64::from_le_bytes(b)
    }

    fn set_word(&self, at: RingAt, which: u64, v: u64) {
        self.node(at.node)
            .0
            .memory()
            .region
            .write(at.offset + which, &v.to_le_bytes())
            .expect("write word");
    }

    fn slot(&self, at: RingAt, i: u64, slots: u32) -> u64 {
        at.offset + SLOTS_OFFSET + (i % u64::from(slots)) * u64::from(SLOT)
    }
}

fn item(seq: u64) -> Vec<u8> {
    let mut v = vec![0u8; SLOT as usize];
    v[..8].copy_from_slice(&seq.to_le_bytes());
    let mut x = seq ^ 0x9E37_79B9_7F4A_7C15;
    for b in &mut v[8..] {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    v
}

/// The applications: one producer putting in `total` items, consumers taking them out.
struct Apps {
    producer: RingAt,
    consumers: Vec<RingAt>,
    produced: u64,
    total: u64,
    seen: Vec<Vec<u64>>,
    /// Slots of each consumer ring.
    consumer_slots: Vec<u32>,
}

impl Apps {
    fn new(producer: RingAt, consumers: Vec<RingAt>, total: u64) -> Apps {
        let n = consumers.len();
        Apps {
            producer,
            consumers,
            produced: 0,
            total,
            seen: vec![Vec::new(); n],
            consumer_slots: vec![SLOTS; n],
        }
    }

    /// One round: the producer fills what room it has, each consumer takes what is
    /// published.
    fn round(&mut self, rig: &Rig) {
        let tail = rig.word(self.producer, TAIL_OFFSET);
        while self.produced < self.total && self.produced - tail < u64::from(SLOTS) {
            let at = rig.slot(self.producer, self.produced, SLOTS);
            rig.node(self.producer.node)
                .0
                .memory()
                .region
                .write(at, &item(self.produced))
                .expect("write item");
            self.produced += 1;
            rig.set_word(self.producer, HEAD_OFFSET, self.produced);
        }
        for (c, &ring) in self.consumers.iter().enumerate() {
            let head = rig.word(ring, HEAD_OFFSET);
            let mut tail = rig.word(ring, TAIL_OFFSET);
            while tail < head {
                let mut got = vec![0u8; SLOT as usize];
                rig.node(ring.node)
                    .0
                    .memory()
                    .region
                    .read(rig.slot(ring, tail, self.consumer_slots[c]), &mut got)
                    .expect("read item");
                let seq = u64::from_le_bytes(got[..8].try_into().expect("8 bytes"));
                assert!(
                    got == item(seq),
                    "consumer {c} slot {tail}: not item {seq}'s bytes"
                );
                self.seen[c].push(seq);
                tail += 1;
                rig.set_word(ring, TAIL_OFFSET, tail);
            }
        }
    }

    fn consumed(&self) -> u64 {
        self.seen.iter().map(|s| s.len() as u64).sum()
    }

    /// Run rounds until `done` or `within` passes.
    fn pump(&mut self, rig: &Rig, within: Duration, done: impl Fn(&Apps) -> bool) {
        let started = Instant::now();
        while !done(self) {
            assert!(
                started.elapsed() < within,
                "no progress: produced {}, consumed {:?}",
                self.produced,
                self.seen.iter().map(Vec::len).collect::<Vec<_>>()
            );
            self.round(rig);
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

fn admin(sw: &SwitchHandle, token: Option<String>) -> HttpClient {
    HttpClient::new(&sw.admin_url())
        .expect("admin client")
        .with_token(token)
}

#[test]
fn an_ordered_replication_flow_started_on_the_admin_api_is_exact_under_faults() {
    let rig = Rig::start();
    let mut config = rig.config();
    config.initial = ControlState {
        mode: spec::mode::FAULTS,
        ..ControlState::default()
    };
    let sw = SoftSwitch::start(config).expect("switch");
    let policy = FaultPolicy::from_probabilities(0.05, 0.05, 0.05, 0.0);
    sw.control()
        .set_faults(FaultSettings {
            seed: 9,
            up: policy,
            down: policy,
        })
        .expect("faults");
    let producer = RingAt {
        node: 0,
        offset: 4096,
    };
    let consumers = vec![
        RingAt {
            node: 1,
            offset: 4096,
        },
        RingAt {
            node: 0,
            offset: 1 << 20,
        },
    ];
    let req = FlowRequest {
        kind: FlowKind::OrderedReplication,
        producers: vec![rig.ring(producer)],
        consumers: consumers.iter().map(|&c| rig.ring(c)).collect(),
        poll_interval_us: Some(200),
        rto_us: Some(5_000),
    };
    let body = serde_json::to_vec(&req).expect("json");
    let anonymous = admin(&sw, None)
        .request("POST", "/v1/flows", Some(&body))
        .expect("request");
    assert_eq!(anonymous.status, 401, "{}", anonymous.text());
    let api = admin(&sw, rig.token.clone());
    let started: FlowStatus = api
        .call("POST", "/v1/flows", Some(&body), &[201])
        .expect("start the flow");

    let total = 300;
    let mut apps = Apps::new(producer, consumers, total);
    apps.pump(&rig, Duration::from_secs(60), |a| a.consumed() == 2 * total);
    let want: Vec<u64> = (0..total).collect();
    assert_eq!(apps.seen[0], want, "consumer 0: every item once, in order");
    assert_eq!(apps.seen[1], want, "consumer 1: the same order");

    // The consumers have every item; the engine counts a delivery when the consumer's
    // node acknowledged it, which may come a moment after the consumer read the slot.
    let status_now = || -> FlowStatus {
        api.call("GET", &format!("/v1/flows/{}", started.id), None, &[200])
            .expect("status")
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut status = status_now();
    while status.progress.delivered < 2 * total && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        status = status_now();
    }
    assert_eq!(status.progress.state, FlowState::Running);
    assert!(status.progress.delivered >= 2 * total, "{status:?}");
    assert_eq!(status.progress.room.len(), 2);
    // One producer READ per item for both consumers (the data plane multicasts the
    // response); re-issued READs repair losses.
    assert_eq!(
        status.progress.reads - status.progress.rereads,
        total,
        "{status:?}"
    );
    let all: FlowsResponse = api.call("GET", "/v1/flows", None, &[200]).expect("list");
    assert_eq!(all.flows.len(), 1);
    assert_eq!(
        api.request("GET", "/v1/flows/99", None)
            .expect("request")
            .status,
        404
    );
    let c = sw.control().pipeline().counters();
    assert!(
        c.flow_punt.punted > 0 && c.zero_copy.converted >= 2 * total,
        "{c:?}"
    );
    assert!(c.faults.dropped > 0 && c.faults.duplicated > 0, "{c:?}");

    let stopped: FlowStatus = api
        .call("DELETE", &format!("/v1/flows/{}", started.id), None, &[200])
        .expect("stop");
    assert_eq!(stopped.progress.state, FlowState::Stopped);
    let p = sw.control().pipeline();
    assert!(p.tables.flow_punt.is_empty() && p.tables.copy_src.is_empty());
    assert!(p.tables.copy_mcast.is_empty());
}

#[test]
fn a_load_balancing_flow_resumes_exactly_once_after_a_switch_restart() {
    let rig = Rig::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = rig.config();
    config.state_file = Some(dir.path().join("switch.json"));
    let producer = RingAt {
        node: 0,
        offset: 4096,
    };
    let consumers = vec![
        RingAt {
            node: 1,
            offset: 4096,
        },
        RingAt {
            node: 1,
            offset: 1 << 20,
        },
    ];
    let req = FlowRequest {
        kind: FlowKind::LoadBalance,
        producers: vec![rig.ring(producer)],
        consumers: consumers.iter().map(|&c| rig.ring(c)).collect(),
        poll_interval_us: Some(200),
        rto_us: Some(5_000),
    };
    let sw = SoftSwitch::start(config.clone()).expect("switch");
    let id = sw.control().start_flow(&req).expect("start").id;
    let total = 400;
    let mut apps = Apps::new(producer, consumers, total);
    apps.pump(&rig, Duration::from_secs(30), |a| a.consumed() >= 100);
    sw.shutdown();
    let text = std::fs::read_to_string(dir.path().join("switch.json")).expect("state file");
    let saved: ControlState = serde_json::from_str(&text).expect("state");
    let record = saved.flows.iter().find(|f| f.id == id).expect("the flow");
    assert_eq!(record.state, FlowState::Running);
    assert!(record.checkpoint.delivered > 0, "{record:?}");

    // The applications go on while no switch runs; a new switch resumes the flow.
    for _ in 0..20 {
        apps.round(&rig);
    }
    let sw = SoftSwitch::start(config).expect("switch restarts");
    apps.pump(&rig, Duration::from_secs(60), |a| a.consumed() == total);
    let mut all: Vec<u64> = apps.seen.iter().flatten().copied().collect();
    all.sort_unstable();
    assert_eq!(
        all,
        (0..total).collect::<Vec<_>>(),
        "every item exactly once"
    );
    for (c, seen) in apps.seen.iter().enumerate() {
        assert!(
            seen.windows(2).all(|w| w[0] < w[1]),
            "consumer {c} out of order"
        );
    }
    let distinct: BTreeSet<usize> = apps
        .seen
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.is_empty())
        .map(|(c, _)| c)
        .collect();
    assert_eq!(distinct.len(), 2, "both consumers took items");
    let status = sw.control().flow_status(id).expect("status");
    assert_eq!(status.resumed, 1, "{status:?}");
    sw.shutdown();
}

#[test]
fn a_producer_rings_the_live_switch_instead_of_waiting_for_a_poll() {
    let rig = Rig::start();
    let sw = SoftSwitch::start(rig.config()).expect("switch");
    let bell = std::net::UdpSocket::bind("127.0.0.1:0").expect("doorbell socket");
    let std::net::SocketAddr::V4(from) = bell.local_addr().expect("local addr") else {
        panic!("an IPv4 socket");
    };
    let producer = RingAt {
        node: 0,
        offset: 4096,
    };
    let consumer = RingAt {
        node: 1,
        offset: 4096,
    };
    let mut p = rig.ring(producer);
    p.doorbell_from = Some(from);
    let mut c = rig.ring(consumer);
    c.slots = 128;
    // Polls every 10 s: within the test only doorbells can tell the switch of items.
    let req = FlowRequest {
        kind: FlowKind::OneToOne,
        producers: vec![p],
        consumers: vec![c],
        poll_interval_us: Some(10_000_000),
        rto_us: Some(5_000),
    };
    let started = sw.control().start_flow(&req).expect("start");
    let qpn = started.doorbell_qpns[0].expect("a doorbell QPN");
    // Let the flow read the rings' counters once before anything is put in.
    std::thread::sleep(Duration::from_millis(50));
    let switch = sw.control().client_side();
    let ring = |head: u64| {
        let word = head.to_le_bytes();
        let mut r = PacketRepr::new(BthRepr::new(Opcode::WriteOnly, qpn, head as u32, false));
        r.reth = Some(RethRepr {
            va: 0,
            rkey: 0,
            dma_len: 8,
        });
        r.payload = &word;
        let mut roce = vec![0u8; r.buffer_len()];
        r.emit(&mut roce, &IcrcPath::new(from, switch))
            .expect("emit");
        bell.send_to(&roce, switch).expect("ring");
    };
    let total = 100;
    let mut apps = Apps::new(producer, vec![consumer], total);
    apps.consumer_slots = vec![128];
    let t0 = Instant::now();
    let mut rung = 0;
    while apps.consumed() < total {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "{:?}",
            sw.control().flow_status(started.id)
        );
        apps.round(&rig);
        if apps.produced > rung {
            rung = apps.produced;
            ring(rung);
        }
        std::thread::sleep(Duration::from_micros(300));
    }
    assert_eq!(apps.seen[0], (0..total).collect::<Vec<_>>());
    let status = sw.control().flow_status(started.id).expect("status");
    assert!(status.progress.doorbells > 0, "{status:?}");
    sw.shutdown();
}

#[test]
fn a_key_shuffle_flow_on_the_live_switch_sends_each_key_to_its_consumer() {
    let rig = Rig::start();
    let sw = SoftSwitch::start(rig.config()).expect("switch");
    let producer = RingAt {
        node: 0,
        offset: 4096,
    };
    let consumers = vec![
        RingAt {
            node: 1,
            offset: 4096,
        },
        RingAt {
            node: 1,
            offset: 1 << 20,
        },
    ];
    let req = FlowRequest {
        kind: FlowKind::KeyShuffle,
        producers: vec![rig.ring(producer)],
        consumers: consumers.iter().map(|&c| rig.ring(c)).collect(),
        poll_interval_us: Some(200),
        rto_us: Some(5_000),
    };
    sw.control().start_flow(&req).expect("start");
    let total = 200;
    let mut apps = Apps::new(producer, consumers, total);
    apps.pump(&rig, Duration::from_secs(30), |a| a.consumed() == total);
    // An item's key is its first 8 bytes: here its sequence number.
    for (c, seen) in apps.seen.iter().enumerate() {
        assert!(!seen.is_empty(), "consumer {c} got no key");
        for &seq in seen {
            assert_eq!(
                accel_p4::flow::key_shuffle::consumer_of(seq, 2),
                c,
                "item {seq}"
            );
        }
        assert!(
            seen.windows(2).all(|w| w[0] < w[1]),
            "consumer {c} out of order"
        );
    }
    let mut all: Vec<u64> = apps.seen.iter().flatten().copied().collect();
    all.sort_unstable();
    assert_eq!(
        all,
        (0..total).collect::<Vec<_>>(),
        "every item exactly once"
    );
    sw.shutdown();
}
