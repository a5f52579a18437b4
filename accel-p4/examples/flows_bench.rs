//! Zero-sided flows on this machine (the shape of the seed's Figs. 12 and 13): the soft
//! switch and two memory nodes of an embedded cluster over soft RoCE; the producer and
//! consumer applications act on the rings in the nodes' memory from this thread.
//!
//! 1. Ordered replication from one producer to N = 1..4 consumers: per-consumer
//!    bandwidth, by the switch and by a software replicator (a CPU thread moving the
//!    items with one-sided verbs), with ordering and without.
//! 2. Draining a fixed number of items from two producers into two consumers, one of
//!    which takes an item only every `SLOW_US` µs: one load-balancing flow against
//!    static partitioning (two 1:1 flows, producer i → consumer i).
//!
//! `cargo run --release -p accel-p4 --example flows_bench -- [ITEMS] [--json PATH] [--results-md PATH] [--charts DIR]`
//!
//! Prints both tables; `--json PATH` writes them as JSON, `--results-md PATH` as a
//! Markdown results page (date, machine, command line).

use std::time::{Duration, Instant};

use accel_p4::flow::ring::{HEAD_OFFSET, SLOTS_OFFSET, TAIL_OFFSET};
use accel_p4::flow::{FlowKind, FlowRequest, FlowRing};
use accel_p4::switch::{SoftSwitch, SwitchConfig};
use kvstore::TransportKind;
use serde_json::json;
use testbed::{Embedded, EmbeddedOptions};

#[path = "results_md/flows_bench.rs"]
mod results_md;
#[path = "software_replicator/replicator.rs"]
mod software_replicator;

const SLOT: u32 = 4096;
const SLOTS: u32 = 64;
/// The slow consumer takes one item per this many microseconds.
const SLOW_US: u64 = 2000;

#[derive(Clone, Copy)]
struct RingAt {
    node: usize,
    offset: u64,
}

struct Bench {
    cluster: Embedded,
    token: Option<String>,
}

impl Bench {
    fn node(&self, i: usize) -> (&memnode::MemnodeHandle, String) {
        let id = self.cluster.memnode_ids()[i];
        (
            self.cluster.memnode(id).expect("memnode"),
            self.cluster.admin_url(id).expect("admin url"),
        )
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

    /// Zero a ring's counters (each run starts with empty rings).
    fn reset(&self, at: RingAt) {
        self.set_word(at, HEAD_OFFSET, 0);
        self.set_word(at, TAIL_OFFSET, 0);
    }

    fn slot(at: RingAt, i: u64) -> u64 {
        at.offset + SLOTS_OFFSET + (i % u64::from(SLOTS)) * u64::from(SLOT)
    }
}

/// Producers putting in `items` each, consumers taking out (one every `every` µs, 0:
/// as fast as they can), until `want` items were taken; returns seconds and items per
/// consumer.
fn pump(
    b: &Bench,
    producers: &[RingAt],
    consumers: &[RingAt],
    items: u64,
    every_us: &[u64],
    want: u64,
    in_order: bool,
) -> (f64, Vec<u64>) {
    let mut produced = vec![0u64; producers.len()];
    let mut taken = vec![0u64; consumers.len()];
    let mut last = vec![Instant::now(); consumers.len()];
    let body = vec![0xA5u8; SLOT as usize];
    let started = Instant::now();
    while taken.iter().sum::<u64>() < want {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no progress: produced {produced:?}, taken {taken:?}"
        );
        for (p, &ring) in producers.iter().enumerate() {
            let tail = b.word(ring, TAIL_OFFSET);
            while produced[p] < items && produced[p] - tail < u64::from(SLOTS) {
                let mut item = body.clone();
                item[..8].copy_from_slice(&produced[p].to_le_bytes());
                b.node(ring.node)
                    .0
                    .memory()
                    .region
                    .write(Bench::slot(ring, produced[p]), &item)
                    .expect("write item");
                produced[p] += 1;
                b.set_word(ring, HEAD_OFFSET, produced[p]);
            }
        }
        for (c, &ring) in consumers.iter().enumerate() {
            let head = b.word(ring, HEAD_OFFSET);
            let mut tail = b.word(ring, TAIL_OFFSET);
            while tail < head {
                if every_us[c] > 0 {
                    if last[c].elapsed() < Duration::from_micros(every_us[c]) {
                        break;
                    }
                    last[c] = Instant::now();
                }
                let mut item = vec![0u8; SLOT as usize];
                b.node(ring.node)
                    .0
                    .memory()
                    .region
                    .read(Bench::slot(ring, tail), &mut item)
                    .expect("read item");
                // Replication: every consumer gets the producer's items in its order.
                if in_order {
                    let seq = u64::from_le_bytes(item[..8].try_into().expect("8 bytes"));
                    assert_eq!(seq, tail, "consumer {c} got item {seq} as its item {tail}");
                }
                tail += 1;
                taken[c] += 1;
                b.set_word(ring, TAIL_OFFSET, tail);
            }
        }
        std::thread::yield_now();
    }
    (started.elapsed().as_secs_f64(), taken)
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut flag = |name: &str| match args.iter().position(|a| a == name) {
        Some(i) if i + 1 < args.len() => {
            let v = args.remove(i + 1);
            args.remove(i);
            Some(std::path::PathBuf::from(v))
        }
        Some(_) => {
            eprintln!("flows_bench: {name} needs a path");
            std::process::exit(2);
        }
        None => None,
    };
    let results_md = flag("--results-md");
    let json_path = flag("--json");
    let chart_flag = flag("--charts");
    let items: u64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(2000);

    let cluster = Embedded::start_secured(&EmbeddedOptions {
        memnodes: 2,
        capacity: 32 << 20,
        transport: TransportKind::Udp,
        ..EmbeddedOptions::default()
    })
    .expect("cluster");
    let token = cluster.admin_token().map(str::to_owned);
    let b = Bench { cluster, token };
    let sw = SoftSwitch::start(SwitchConfig {
        memnode_token: b.token.clone(),
        ..SwitchConfig::local()
    })
    .expect("switch");
    let ring_bytes = SLOTS_OFFSET + u64::from(SLOT) * u64::from(SLOTS);
    let at = |node: usize, k: u64| RingAt {
        node,
        offset: 4096 + k * ring_bytes.next_multiple_of(4096),
    };

    // 1. Ordered replication, 1 → N.
    let mut replication = Vec::new();
    for n in 1..=4usize {
        let producer = at(0, 0);
        // Consumers alternate between the nodes.
        let consumers: Vec<RingAt> = (0..n).map(|c| at(1 - c % 2, 1 + c as u64)).collect();
        for &r in std::iter::once(&producer).chain(&consumers) {
            b.reset(r);
        }
        let req = FlowRequest {
            kind: FlowKind::OrderedReplication,
            producers: vec![b.ring(producer)],
            consumers: consumers.iter().map(|&c| b.ring(c)).collect(),
            poll_interval_us: Some(50),
            rto_us: Some(20_000),
        };
        let id = sw.control().start_flow(&req).expect("start").id;
        let (secs, _) = pump(
            &b,
            &[producer],
            &consumers,
            items,
            &vec![0; n],
            items * n as u64,
            true,
        );
        let status = sw.control().stop_flow(id).expect("stop");
        let row = results_md::ReplicationRow {
            consumers: n,
            secs,
            items_per_sec: items as f64 / secs,
            mb_per_sec: items as f64 * f64::from(SLOT) / secs / 1e6,
            rereads: status.progress.rereads,
            reads_per_item: status.progress.reads as f64 / items as f64,
        };
        println!(
            "replication 1 → {n}: {:.3} s, {:.0} items/s and {:.2} MB/s per consumer, {} re-reads, {:.3} producer READs per item",
            row.secs, row.items_per_sec, row.mb_per_sec, row.rereads, row.reads_per_item
        );
        replication.push(row);
    }

    // 1b. The software baseline: a thread with one-sided verbs, ordered and not.
    let urls: Vec<String> = (0..2).map(|i| b.node(i).1).collect();
    let remote = |at: RingAt| {
        let r = b.ring(at);
        software_replicator::RemoteRing {
            node: at.node,
            va: r.va,
            rkey: r.rkey,
        }
    };
    let mut software = Vec::new();
    for ordered in [true, false] {
        for n in 1..=4usize {
            let producer = at(0, 0);
            let consumers: Vec<RingAt> = (0..n).map(|c| at(1 - c % 2, 1 + c as u64)).collect();
            for &r in std::iter::once(&producer).chain(&consumers) {
                b.reset(r);
            }
            let mut rep =
                software_replicator::Replicator::connect(&urls, b.token.as_deref(), SLOT, SLOTS)
                    .expect("software replicator");
            let (p, cs) = (
                remote(producer),
                consumers.iter().map(|&c| remote(c)).collect::<Vec<_>>(),
            );
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let worker = {
                let stop = stop.clone();
                std::thread::spawn(move || rep.run(p, &cs, ordered, items, &stop))
            };
            let (secs, _) = pump(
                &b,
                &[producer],
                &consumers,
                items,
                &vec![0; n],
                items * n as u64,
                true,
            );
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            let moved = worker
                .join()
                .expect("replicator thread")
                .expect("replicator");
            let row = results_md::SoftwareRow {
                ordered,
                consumers: n,
                secs,
                mb_per_sec: items as f64 * f64::from(SLOT) / secs / 1e6,
                round_trips_per_item: moved.round_trips as f64 / moved.items.max(1) as f64,
            };
            println!(
                "software replication 1 → {n} ({}): {:.3} s, {:.2} MB/s per consumer, {:.2} round trips per item",
                if ordered { "ordered" } else { "unordered" },
                row.secs,
                row.mb_per_sec,
                row.round_trips_per_item
            );
            software.push(row);
        }
    }

    // 2. Draining with one slow consumer.
    let mut drain = Vec::new();
    let per_producer = items / 2;
    let producers = [at(0, 0), at(0, 1)];
    let consumers = [at(1, 2), at(1, 3)];
    let every = [0, SLOW_US];
    for policy in ["load_balance", "static"] {
        for &r in producers.iter().chain(&consumers) {
            b.reset(r);
        }
        let ids: Vec<u64> = if policy == "load_balance" {
            let req = FlowRequest {
                kind: FlowKind::LoadBalance,
                producers: producers.iter().map(|&p| b.ring(p)).collect(),
                consumers: consumers.iter().map(|&c| b.ring(c)).collect(),
                poll_interval_us: Some(50),
                rto_us: Some(20_000),
            };
            vec![sw.control().start_flow(&req).expect("start").id]
        } else {
            (0..2)
                .map(|i| {
                    let req = FlowRequest {
                        kind: FlowKind::OneToOne,
                        producers: vec![b.ring(producers[i])],
                        consumers: vec![b.ring(consumers[i])],
                        poll_interval_us: Some(50),
                        rto_us: Some(20_000),
                    };
                    sw.control().start_flow(&req).expect("start").id
                })
                .collect()
        };
        let (secs, taken) = pump(
            &b,
            &producers,
            &consumers,
            per_producer,
            &every,
            2 * per_producer,
            false,
        );
        for id in ids {
            sw.control().stop_flow(id).expect("stop");
        }
        println!("drain {policy}: {secs:.3} s, items per consumer {taken:?}");
        drain.push(results_md::DrainRow {
            policy,
            secs,
            per_consumer: taken,
        });
    }
    sw.shutdown();

    let settings = format!(
        "Items of {SLOT} B in rings of {SLOTS} slots; the switch polls every 50 µs. \
         Replication: {items} items from one producer, consumers taking items as fast as \
         this one thread reads them. Drain: {per_producer} items from each of two producers \
         into two consumers, consumer 1 taking one item per {SLOW_US} µs; `load_balance` \
         is one flow 2 → 2, `static` two 1:1 flows (producer i → consumer i). One run \
         each, soft switch and both memory nodes in this process over soft RoCE on \
         loopback; the applications poll from one thread. The software replicator is \
         one more thread of this process with its own soft-RoCE queue pairs to both \
         nodes, moving up to 16 items per step of three round trips."
    );
    println!("{settings}");
    if let Some(path) = json_path {
        let doc = json!({
            "settings": settings,
            "replication": replication.iter().map(|r| json!({
                "consumers": r.consumers, "seconds": r.secs,
                "items_per_sec_per_consumer": r.items_per_sec,
                "mb_per_sec_per_consumer": r.mb_per_sec, "rereads": r.rereads,
                "producer_reads_per_item": r.reads_per_item,
            })).collect::<Vec<_>>(),
            "software_replication": software.iter().map(|r| json!({
                "ordered": r.ordered, "consumers": r.consumers, "seconds": r.secs,
                "mb_per_sec_per_consumer": r.mb_per_sec,
                "round_trips_per_item": r.round_trips_per_item,
            })).collect::<Vec<_>>(),
            "drain": drain.iter().map(|r| json!({
                "policy": r.policy, "seconds": r.secs, "items_per_consumer": r.per_consumer,
            })).collect::<Vec<_>>(),
        });
        let text = serde_json::to_string_pretty(&doc).expect("json");
        if let Err(e) = std::fs::write(&path, text) {
            eprintln!("flows_bench: {}: {e}", path.display());
            std::process::exit(1);
        }
        eprintln!("flows_bench: wrote {}", path.display());
    }
    let charts = match testbed::plot::chart_dir(chart_flag.as_deref(), results_md.as_deref()) {
        Some(dir) => match results_md::charts(&dir, &replication, &software) {
            Ok(written) => written,
            Err(e) => {
                eprintln!("flows_bench: charts: {e}");
                std::process::exit(1);
            }
        },
        None => Vec::new(),
    };
    if let Some(path) = results_md {
        let page = results_md::render(
            &testbed::results_page::PageHeader::current(),
            &settings,
            &replication,
            &software,
            &drain,
            &charts,
        );
        if let Err(e) = testbed::results_page::write_page(&path, &page) {
            eprintln!("flows_bench: {e}");
            std::process::exit(1);
        }
        eprintln!("flows_bench: wrote {}", path.display());
    }
}
