//! Switch-assisted optimistic latching with tuples that span several READ response
//! packets: tuples from 64 B to 16 KiB at path MTUs from 256 to 4096 bytes, clean and
//! with seeded loss, duplication and reordering in both directions. Writers latch at
//! the switch and WRITE the whole tuple (one value in every word but the stamp words);
//! readers READ it whole and accept it only under the client's rule
//! (`kvstore::latch_schemes::verify_stamps`: every packet of the response
//! stamped valid with the same version). The memnode observes the lines of a READ in
//! random order, and a lost packet makes the requester complete the READ from a later
//! execution, so a rule that trusted one packet's stamp would accept torn tuples; no
//! accepted read may be torn.
//!
//! In-place `switch-optimistic` tables with values of 1–4 KB (tuples of 2–8 KiB) at
//! path MTUs 256 and 1024 are checked for linearizability through the switch with
//! faults: the client library's reads (every packet's stamp) and its tuple layout (a
//! stamp word every 256 bytes) end to end.
//!
//! `LATCH_MP_TUPLE`, `LATCH_MP_PMTU`, `LATCH_MP_LOSS` (percent, also used for
//! duplication and reordering) and `LATCH_MP_SEED` run one extra configuration in
//! `configured_multi_packet_run`.

#[path = "support/switch_rig.rs"]
mod switch_rig;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use accel_p4::control::{ControlState, FaultSettings};
use accel_p4::model::FaultPolicy;
use accel_p4::spec;
use accel_p4::switch::{SoftSwitch, SwitchConfig};
use kvstore::latch_schemes::{STAMP_EVERY, register_with_switch, verify_stamps};
use kvstore::{AcceleratorUse, ClientOptions, SchemeSpec, TableSpec, TransportKind};
use memnode::{Memnode, MemnodeConfig};
use verbs::mem::ReadOrder;
use verbs::rc::{Pmtu, RcConfig};
use verbs::worker::Worker;
use verbs::wr::RemoteAddr;

const TUPLES_OFFSET: u64 = 64 * 1024;
const TUPLES: u32 = 4;

/// One configuration of a run.
#[derive(Debug, Clone, Copy)]
struct Run {
    tuple: u64,
    pmtu: u32,
    /// Probability of each of drop, duplicate and reorder, per packet and direction.
    faults: f64,
    seed: u64,
    writes_each: u64,
}

/// What a run saw.
#[derive(Debug, Default)]
struct Seen {
    accepted: u64,
    rejected: u64,
    torn: u64,
}

fn client(sw: &str, node: &str, pmtu: u32) -> (Worker, verbs::transport::QpHandle, u32, u64) {
    let config = RcConfig {
        pmtu: Pmtu::new(pmtu).expect("pmtu"),
        max_retries: 60,
        ..RcConfig::default()
    };
    switch_rig::client_through_switch(sw, node, config)
}

/// A tuple image: zero in every stamp word (each `STAMP_EVERY` bytes), `value` elsewhere.
fn image(tuple: u64, value: u64) -> Vec<u8> {
    let mut data = Vec::with_capacity(tuple as usize);
    for k in 0..tuple / 8 {
        let w = if (k * 8) % STAMP_EVERY as u64 == 0 {
            0
        } else {
            value
        };
        data.extend_from_slice(&w.to_le_bytes());
    }
    data
}

/// Whether the words outside the stamp words differ (a torn tuple).
fn torn(data: &[u8]) -> bool {
    let words: Vec<u64> = data
        .chunks_exact(8)
        .enumerate()
        .filter(|(k, _)| (k * 8) % STAMP_EVERY != 0)
        .map(|(_, w)| u64::from_le_bytes(w.try_into().unwrap_or([0; 8])))
        .collect();
    words.windows(2).any(|w| w[0] != w[1])
}

fn run(r: Run) -> Seen {
    let mut nc = MemnodeConfig::local(1 << 20);
    nc.read_order = ReadOrder::Random;
    let node = Memnode::start(nc).expect("memnode");
    let mut config = SwitchConfig::local();
    let faults = r.faults > 0.0;
    config.initial = ControlState {
        mode: spec::mode::OPT_LATCH | if faults { spec::mode::FAULTS } else { 0 },
        ..ControlState::default()
    };
    let sw = SoftSwitch::start(config).expect("switch");
    switch_rig::latch_tuples(
        &sw,
        &node,
        TUPLES_OFFSET,
        r.tuple.trailing_zeros() as u8,
        TUPLES,
    );
    if faults {
        let p = FaultPolicy::from_probabilities(r.faults, r.faults, r.faults, 0.0);
        sw.control()
            .set_faults(FaultSettings {
                seed: r.seed,
                up: p,
                down: p,
            })
            .expect("faults");
    }
    let stop = Arc::new(AtomicBool::new(false));
    let (accepted, rejected, torn_reads) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let mut writers = Vec::new();
    for w in 0..2u64 {
        let (sa, na) = (sw.admin_url(), node.admin_url());
        writers.push(std::thread::spawn(move || {
            let (worker, qp, rkey, base) = client(&sa, &na, r.pmtu);
            let q = worker.qp(qp);
            worker.block_on(async {
                for i in 0..r.writes_each {
                    let t = (i + w) % u64::from(TUPLES);
                    let at = RemoteAddr::new(rkey, base + TUPLES_OFFSET + t * r.tuple);
                    loop {
                        if q.cas(at, 0, 1).await.expect("latch") & 1 == 0 {
                            break;
                        }
                        worker.sleep(Duration::from_micros(30)).await;
                    }
                    // The ACK of this WRITE releases the latch.
                    let value = ((w + 1) << 32) | (i + 1);
                    q.write(at, image(r.tuple, value)).await.expect("write");
                }
            });
        }));
    }
    let mut readers = Vec::new();
    for k in 0..2u64 {
        let (sa, na) = (sw.admin_url(), node.admin_url());
        let (stop, accepted, rejected, torn_reads) = (
            stop.clone(),
            accepted.clone(),
            rejected.clone(),
            torn_reads.clone(),
        );
        readers.push(std::thread::spawn(move || {
            let (worker, qp, rkey, base) = client(&sa, &na, r.pmtu);
            let q = worker.qp(qp);
            worker.block_on(async {
                let mut i = k;
                while !stop.load(Ordering::Relaxed) {
                    let t = i % u64::from(TUPLES);
                    i += 1;
                    let at = RemoteAddr::new(rkey, base + TUPLES_OFFSET + t * r.tuple);
                    let data = q.read(at, r.tuple as u32).await.expect("read");
                    if verify_stamps(&data).is_err() {
                        rejected.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    accepted.fetch_add(1, Ordering::Relaxed);
                    if torn(&data) {
                        torn_reads.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }));
    }
    for w in writers {
        w.join().expect("writer");
    }
    stop.store(true, Ordering::Relaxed);
    for h in readers {
        h.join().expect("reader");
    }
    let c = sw.control().pipeline().counters();
    let seen = Seen {
        accepted: accepted.load(Ordering::Relaxed),
        rejected: rejected.load(Ordering::Relaxed),
        torn: torn_reads.load(Ordering::Relaxed),
    };
    eprintln!("{r:?}: {seen:?} {:?} {:?}", c.opt_latch, c.faults);
    assert_eq!(c.opt_latch.unlatched, 2 * r.writes_each, "{c:?}");
    let p = sw.control().pipeline();
    let versions = p.register("tuple_version").expect("tuple_version");
    for t in 0..TUPLES as usize {
        assert_eq!(versions.cp_read(t) & 1, 0, "tuple {t} still latched");
    }
    drop(p);
    sw.shutdown();
    node.shutdown();
    seen
}

fn check(r: Run) {
    let seen = run(r);
    assert_eq!(seen.torn, 0, "{r:?}: reads accepted torn: {seen:?}");
    assert!(
        seen.accepted > 0,
        "{r:?}: no read accepted ({} rejected)",
        seen.rejected
    );
}

/// The sizes of the YCSB default (1 KB records: 2 KiB tuples) and beyond, at the
/// default path MTU, with 3 % loss, duplication and reordering.
#[test]
fn multi_packet_tuples_are_never_accepted_torn_under_faults() {
    for (tuple, seed) in [(2048, 11), (4096, 12), (8192, 13)] {
        check(Run {
            tuple,
            pmtu: 1024,
            faults: 0.03,
            seed,
            writes_each: 40,
        });
    }
}

/// Every path MTU, from single-packet tuples to 64-packet READs.
#[test]
fn every_path_mtu_and_tuple_size_under_faults() {
    for (tuple, pmtu, seed) in [
        (64, 256, 21),
        (512, 256, 22),
        (1024, 256, 23),
        (16384, 256, 24),
        (1024, 512, 25),
        (16384, 2048, 26),
        (4096, 4096, 27),
        (16384, 4096, 28),
    ] {
        check(Run {
            tuple,
            pmtu,
            faults: 0.02,
            seed,
            writes_each: 20,
        });
    }
}

/// Without faults, multi-packet reads are accepted and never torn.
#[test]
fn multi_packet_tuples_clean() {
    check(Run {
        tuple: 4096,
        pmtu: 1024,
        faults: 0.0,
        seed: 1,
        writes_each: 100,
    });
}

/// One configuration from the environment (see the module docs); a no-op without it.
#[test]
fn configured_multi_packet_run() {
    let var = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<f64>().ok());
    let (Some(tuple), Some(pmtu)) = (var("LATCH_MP_TUPLE"), var("LATCH_MP_PMTU")) else {
        return;
    };
    check(Run {
        tuple: tuple as u64,
        pmtu: pmtu as u32,
        faults: var("LATCH_MP_LOSS").unwrap_or(3.0) / 100.0,
        seed: var("LATCH_MP_SEED").unwrap_or(7.0) as u64,
        writes_each: 40,
    });
}

/// An in-place `switch-optimistic` table with `value`-byte values, at path MTU `pmtu`,
/// through the switch with `faults` loss, duplication and reordering: linearizable (a
/// torn value is never a written one, see `testbed::workload::run_with_values`).
fn table_run(value: usize, pmtu: u32, faults: f64, seed: u64) {
    let mut config = SwitchConfig::local();
    config.initial = ControlState {
        mode: spec::mode::OPT_LATCH | spec::mode::FAULTS,
        ..ControlState::default()
    };
    let sw = SoftSwitch::start(config).expect("switch");
    let p = FaultPolicy::from_probabilities(faults, faults, faults, 0.0);
    sw.control()
        .set_faults(FaultSettings {
            seed,
            up: p,
            down: p,
        })
        .expect("faults");
    let client = testbed::embedded_client(testbed::EmbeddedOptions {
        memnodes: 1,
        transport: TransportKind::Udp,
        client: ClientOptions::default()
            .with_grace(Duration::from_millis(20))
            .with_connection(
                kvstore::ConnectionOptions::default()
                    .with_accelerator(AcceleratorUse::Via(sw.admin_url())),
            )
            .with_rc(RcConfig {
                pmtu: Pmtu::new(pmtu).expect("pmtu"),
                max_retries: 60,
                ..RcConfig::default()
            }),
        ..testbed::EmbeddedOptions::default()
    })
    .expect("cluster");
    client
        .create_table(
            "t",
            &TableSpec::in_place(SchemeSpec::SwitchOptimistic, value as u64, 16),
        )
        .expect("table");
    let region = register_with_switch(&client, "t", &sw.admin_url(), 0).expect("register");
    let w = testbed::workload::Workload {
        threads: 3,
        tasks: 1,
        ops_per_task: 40,
        keys: 2,
        seed,
    };
    let r = testbed::workload::run_with_values(&client, "t", w, value);
    let report = testbed::lincheck::check(&r.history, &testbed::lincheck::Config::default())
        .expect("history");
    let c = sw.control().pipeline().counters();
    eprintln!(
        "value {value} (tuple {}), pmtu {pmtu}: {} operations, {} unresolved, {:?}; {:?} {:?}",
        1u64 << region.stride_log2,
        r.history.len(),
        r.errors.len(),
        report.verdict,
        c.opt_latch,
        c.faults
    );
    assert!(report.is_linearizable(), "{:?}", report.verdict);
    assert!(
        r.errors.len() * 10 <= r.history.len(),
        "too many unresolved operations: {:?}",
        r.errors.iter().take(5).collect::<Vec<_>>()
    );
    assert!(c.opt_latch.reads_valid > 0, "{c:?}");
    sw.shutdown();
}

#[test]
fn switch_optimistic_tables_with_multi_packet_tuples_are_linearizable_with_faults() {
    table_run(1000, 1024, 0.02, 31);
    table_run(4000, 1024, 0.02, 32);
    table_run(1000, 256, 0.01, 33);
}
