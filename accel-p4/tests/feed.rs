//! Change feeds end to end: a Clover table of an embedded cluster over soft RoCE, two
//! writer threads each holding a producer lane, a soft switch running the feed's
//! ordered-replication flow into two consumer rings, and a mirror built from one
//! consumer. Checked: each consumer sees every record exactly once, both in the same
//! order, each lane's records in lane order, each key's versions without a gap or a
//! repeat, and the mirror equals the table — under 5 % loss, duplication and
//! reordering between switch and memory nodes, and across a switch restart.

use std::collections::{BTreeMap, BTreeSet};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use accel_p4::control::{ControlState, FaultSettings};
use accel_p4::flow::{FlowKind, FlowRequest, FlowRing};
use accel_p4::model::FaultPolicy;
use accel_p4::spec;
use accel_p4::switch::{SoftSwitch, SwitchConfig};
use kvstore::feed::{
    FeedConsumer, FeedLayout, FeedMirror, FeedOp, FeedRecord, FeedSpec, FeedWriter, TableMirror,
};
use kvstore::{Client, ClientOptions, KvError, TableSpec, TransportKind};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use testbed::{Embedded, EmbeddedOptions};

const KEYS: u8 = 12;

fn cluster() -> (Embedded, Client) {
    let cluster = Embedded::start(&EmbeddedOptions {
        memnodes: 2,
        transport: TransportKind::Udp,
        ..EmbeddedOptions::default()
    })
    .expect("cluster");
    let client =
        Client::connect(&cluster.metadata_url(), ClientOptions::default()).expect("client");
    client
        .create_table("t", &TableSpec::clover(1024))
        .expect("table");
    client
        .create_table("copy", &TableSpec::race(1024))
        .expect("the mirror's table");
    (cluster, client)
}

fn create_feed(client: &Client, slots: u32) -> FeedLayout {
    let s = client.session().expect("session");
    let feed = s
        .create_feed(
            "t",
            &FeedSpec {
                lanes: 2,
                consumers: 2,
                slot_size: 256,
                slots,
                memnode: None,
            },
        )
        .expect("create the feed");
    assert_eq!((feed.lanes.len(), feed.consumers.len()), (2, 2));
    feed
}

fn flow(feed: &FeedLayout) -> FlowRequest {
    let ring = |r: &kvstore::feed::FeedRing| FlowRing {
        memnode: r.admin_url.clone(),
        va: r.va,
        rkey: r.rkey,
        slot_size: r.slot_size,
        slots: r.slots,
        doorbell_from: None,
    };
    FlowRequest {
        kind: FlowKind::OrderedReplication,
        producers: feed.lanes.iter().map(ring).collect(),
        consumers: feed.consumers.iter().map(ring).collect(),
        poll_interval_us: Some(200),
        rto_us: Some(5_000),
    }
}

fn key(k: u8) -> Vec<u8> {
    format!("key-{k:02}").into_bytes()
}

/// A writer thread: `ops` seeded random puts, updates and deletes over the shared keys
/// through its own lane; returns how many took effect (each made one record).
fn writer(client: &Client, feed: &FeedLayout, seed: u64, ops: usize) -> JoinHandle<u64> {
    let client = client.clone();
    let feed = feed.clone();
    std::thread::spawn(move || {
        let s = client.session().expect("session");
        let mut rng = StdRng::seed_from_u64(seed);
        s.block_on(async {
            let mut w = FeedWriter::open(&s, &feed).await.expect("a lane");
            let mut done = 0;
            for i in 0..ops {
                let k = key(rng.random_range(0..KEYS));
                let value = format!("w{seed}-{i}-{}", "x".repeat(rng.random_range(0..40)));
                let r = match rng.random_range(0..10) {
                    0..=5 => w.put(&k, value.as_bytes()).await,
                    6..=7 => w.update(&k, value.as_bytes()).await,
                    _ => w.delete(&k).await,
                };
                match r {
                    Ok(()) => done += 1,
                    Err(KvError::NotFound) => {}
                    Err(e) => panic!("writer {seed}: {e}"),
                }
            }
            w.close().await.expect("close");
            done
        })
    })
}

/// The consumers' side: what each consumer ring gave, in order.
struct Readers {
    session: kvstore::Session,
    consumers: Vec<FeedConsumer>,
    seen: Vec<Vec<FeedRecord>>,
}

impl Readers {
    fn open(client: &Client, feed: &FeedLayout) -> Readers {
        let session = client.session().expect("session");
        let consumers = session.block_on(async {
            let mut v = Vec::new();
            for i in 0..feed.consumers.len() {
                v.push(
                    FeedConsumer::open(&session, feed, i)
                        .await
                        .expect("consumer"),
                );
            }
            v
        });
        let n = consumers.len();
        Readers {
            session,
            consumers,
            seen: vec![Vec::new(); n],
        }
    }

    fn round(&mut self) {
        let Readers {
            session,
            consumers,
            seen,
        } = self;
        session.block_on(async {
            for (c, seen) in consumers.iter_mut().zip(seen.iter_mut()) {
                seen.extend(c.poll().await.expect("poll"));
            }
        });
    }

    /// Poll until every consumer has `total` records (or fail after `within`).
    fn pump_until(&mut self, total: usize, within: Duration) {
        let started = Instant::now();
        while self.seen.iter().any(|s| s.len() < total) {
            assert!(
                started.elapsed() < within,
                "consumers have {:?} of {total} records",
                self.seen.iter().map(Vec::len).collect::<Vec<_>>()
            );
            self.round();
            std::thread::sleep(Duration::from_micros(300));
        }
    }
}

/// Poll while the writers run; their total of records.
fn pump_while_writing(readers: &mut Readers, writers: Vec<JoinHandle<u64>>) -> u64 {
    while writers.iter().any(|w| !w.is_finished()) {
        readers.round();
        std::thread::sleep(Duration::from_micros(300));
    }
    writers.into_iter().map(|w| w.join().expect("writer")).sum()
}

/// The feed's guarantees on what the consumers saw, and the mirror against the table.
fn check(client: &Client, seen: &[Vec<FeedRecord>], total: usize) {
    for (c, s) in seen.iter().enumerate() {
        assert_eq!(s.len(), total, "consumer {c}: every record once");
    }
    assert_eq!(seen[0], seen[1], "both consumers in the same order");
    let records = &seen[0];
    let mut lanes: BTreeMap<u8, Vec<u64>> = BTreeMap::new();
    let mut versions: BTreeMap<Vec<u8>, Vec<u32>> = BTreeMap::new();
    for r in records {
        lanes.entry(r.lane).or_default().push(r.lane_seq);
        versions.entry(r.key.clone()).or_default().push(r.version);
    }
    assert_eq!(lanes.len(), 2, "both lanes wrote");
    for (lane, seqs) in &lanes {
        let want: Vec<u64> = (0..seqs.len() as u64).collect();
        assert_eq!(seqs, &want, "lane {lane}: each record once, in lane order");
    }
    for (k, v) in &versions {
        let distinct: BTreeSet<u32> = v.iter().copied().collect();
        assert_eq!(distinct.len(), v.len(), "key {k:?}: a version twice");
        let (lo, hi) = (distinct.first().copied(), distinct.last().copied());
        if let (Some(lo), Some(hi)) = (lo, hi) {
            assert_eq!(
                (hi - lo + 1) as usize,
                v.len(),
                "key {k:?}: versions with a hole {v:?}"
            );
        }
    }
    let mut mirror = FeedMirror::new();
    for r in records {
        mirror.apply(r);
    }
    assert_eq!(mirror.holes(), 0);
    assert!(
        records.iter().any(|r| r.op == FeedOp::Delete),
        "the workload deleted"
    );
    let s = client.session().expect("session");
    let t = s.table("t").expect("table");
    let mut table = BTreeMap::new();
    s.block_on(async {
        for k in 0..KEYS {
            if let Some(v) = t.get(&key(k)).await.expect("get") {
                table.insert(key(k), v);
            }
        }
    });
    assert!(!table.is_empty());
    assert_eq!(mirror.snapshot(), table, "the mirror equals the table");

    // The other consumer's records applied to a second table (RACE) give it the same
    // contents.
    let copy = s.table("copy").expect("copy table");
    let mut applier = TableMirror::new(copy.clone());
    let mut copied = BTreeMap::new();
    s.block_on(async {
        for r in &seen[1] {
            applier.apply(r).await.expect("apply");
        }
        for k in 0..KEYS {
            if let Some(v) = copy.get(&key(k)).await.expect("get") {
                copied.insert(key(k), v);
            }
        }
    });
    assert_eq!(copied, table, "the second table equals the table");
}

#[test]
fn two_writers_feed_two_consumers_in_one_order_under_faults() {
    let (_cluster, client) = cluster();
    let feed = create_feed(&client, 16);
    let sw = SoftSwitch::start(SwitchConfig {
        initial: ControlState {
            mode: spec::mode::FAULTS,
            ..ControlState::default()
        },
        ..SwitchConfig::local()
    })
    .expect("switch");
    let policy = FaultPolicy::from_probabilities(0.05, 0.05, 0.05, 0.0);
    sw.control()
        .set_faults(FaultSettings {
            seed: 11,
            up: policy,
            down: policy,
        })
        .expect("faults");
    sw.control()
        .start_flow(&flow(&feed))
        .expect("start the flow");

    // Two lanes: a third writer finds none free until one is given back.
    let s = client.session().expect("session");
    s.block_on(async {
        let a = FeedWriter::open(&s, &feed).await.expect("lane");
        let b = FeedWriter::open(&s, &feed).await.expect("lane");
        assert_ne!(a.lane(), b.lane());
        let e = FeedWriter::open(&s, &feed)
            .await
            .expect_err("both lanes are held");
        assert!(e.to_string().contains("lanes"), "{e}");
        a.close().await.expect("close");
        b.close().await.expect("close");
    });

    let mut readers = Readers::open(&client, &feed);
    let writers = vec![
        writer(&client, &feed, 1, 150),
        writer(&client, &feed, 2, 150),
    ];
    let total = pump_while_writing(&mut readers, writers);
    readers.pump_until(total as usize, Duration::from_secs(60));
    check(&client, &readers.seen, total as usize);
    let c = sw.control().pipeline().counters();
    assert!(c.faults.dropped > 0 && c.faults.duplicated > 0, "{c:?}");
    sw.shutdown();
}

#[test]
fn a_feed_goes_on_exactly_once_across_a_switch_restart() {
    let (_cluster, client) = cluster();
    let feed = create_feed(&client, 64);
    let dir = tempfile::tempdir().expect("tempdir");
    let config = SwitchConfig {
        state_file: Some(dir.path().join("switch.json")),
        ..SwitchConfig::local()
    };
    let sw = SoftSwitch::start(config.clone()).expect("switch");
    let id = sw.control().start_flow(&flow(&feed)).expect("start").id;
    let mut readers = Readers::open(&client, &feed);
    let first = pump_while_writing(
        &mut readers,
        vec![writer(&client, &feed, 3, 80), writer(&client, &feed, 4, 80)],
    );
    readers.pump_until(first as usize, Duration::from_secs(30));
    sw.shutdown();

    // The writers go on while no switch runs (their lanes hold what they write).
    let second = pump_while_writing(
        &mut readers,
        vec![writer(&client, &feed, 5, 40), writer(&client, &feed, 6, 40)],
    );
    assert!(
        readers.seen.iter().all(|s| s.len() == first as usize),
        "nothing moves without a switch"
    );
    let sw = SoftSwitch::start(config).expect("switch restarts");
    let total = (first + second) as usize;
    readers.pump_until(total, Duration::from_secs(60));
    check(&client, &readers.seen, total);
    assert_eq!(sw.control().flow_status(id).expect("status").resumed, 1);
    sw.shutdown();
}

/// A thread writing through the plain `Table` API (no `FeedWriter`): `ops` seeded
/// random puts, updates and deletes; returns how many took effect.
fn table_writer(client: &Client, seed: u64, ops: usize) -> JoinHandle<u64> {
    let client = client.clone();
    std::thread::spawn(move || {
        let s = client.session().expect("session");
        let t = s.table("t").expect("table");
        let mut rng = StdRng::seed_from_u64(seed);
        s.block_on(async {
            let mut done = 0;
            for i in 0..ops {
                let k = key(rng.random_range(0..KEYS));
                let value = format!("p{seed}-{i}-{}", "y".repeat(rng.random_range(0..40)));
                let r = match rng.random_range(0..10) {
                    0..=5 => t.put(&k, value.as_bytes()).await,
                    6..=7 => t.update(&k, value.as_bytes()).await,
                    _ => t.delete(&k).await,
                };
                match r {
                    Ok(()) => done += 1,
                    Err(KvError::NotFound) => {}
                    Err(e) => panic!("table writer {seed}: {e}"),
                }
            }
            done
        })
    })
}

#[test]
fn plain_table_writes_of_more_writers_than_lanes_reach_every_consumer_under_faults() {
    let (_cluster, client) = cluster();
    // A handle opened before the feed exists learns of it within FEED_MAX_AGE.
    let early = client.session().expect("session");
    let early_t = early.table("t").expect("table");
    let feed = create_feed(&client, 16);
    assert_eq!(
        client.session().expect("session").feed("t").expect("feed"),
        Some(feed.clone()),
        "the catalog keeps the feed"
    );
    let sw = SoftSwitch::start(SwitchConfig {
        initial: ControlState {
            mode: spec::mode::FAULTS,
            ..ControlState::default()
        },
        ..SwitchConfig::local()
    })
    .expect("switch");
    let policy = FaultPolicy::from_probabilities(0.05, 0.05, 0.05, 0.0);
    sw.control()
        .set_faults(FaultSettings {
            seed: 12,
            up: policy,
            down: policy,
        })
        .expect("faults");
    sw.control()
        .start_flow(&flow(&feed))
        .expect("start the flow");
    let mut readers = Readers::open(&client, &feed);
    std::thread::sleep(kvstore::FEED_MAX_AGE);
    early
        .block_on(early_t.put(&key(0), b"from a handle older than the feed"))
        .expect("put");
    // Four writers on two lanes, each taking a lane for one append at a time.
    let writers = (10..14)
        .map(|seed| table_writer(&client, seed, 80))
        .collect();
    let total = 1 + pump_while_writing(&mut readers, writers);
    readers.pump_until(total as usize, Duration::from_secs(60));
    check(&client, &readers.seen, total as usize);
    assert!(
        readers.seen[0]
            .iter()
            .any(|r| r.value == b"from a handle older than the feed"),
        "the early handle's write is in the feed"
    );
    let c = sw.control().pipeline().counters();
    assert!(c.faults.dropped > 0 && c.faults.duplicated > 0, "{c:?}");
    sw.shutdown();
}
