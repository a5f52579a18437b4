//! Linearizability of Clover tables under concurrency: several threads (one
//! session each) with several tasks each hammer three hot keys with get, put,
//! insert, update and delete (unique values), and the recorded history is checked
//! with `testbed::lincheck`. The checker rejects lost acknowledged writes and
//! reads of values never written. Runs on `local`, on `udp`, and on `udp` through
//! a relay that drops, duplicates and reorders datagrams.

use std::time::Duration;

use kvstore::{Client, ClientOptions, TableSpec, TransportKind};
use testbed::EmbeddedOptions;
use testbed::lincheck::{Config, Verdict, check};
use testbed::relay::{FaultRelay, Faults};
use testbed::workload::{Workload, run};

fn check_run(client: &Client, w: Workload, label: &str) {
    client
        .create_table("hot", &TableSpec::clover(256))
        .expect("table");
    let started = std::time::Instant::now();
    let r = run(client, "hot", w);
    println!("[{label}] workload done in {:?}", started.elapsed());
    let report = check(&r.history, &Config::default()).expect("well-formed history");
    let mut total = kvstore::OpStats::default();
    for s in &r.stats {
        total.add(&s.foreground);
    }
    println!(
        "[{label}] {} operations, {} unresolved ({:?}), {} link CAS failures, {} restarts, \
         {} round trips; checker: {:?} after {} steps",
        r.history.len(),
        r.errors.len(),
        r.errors.iter().take(3).collect::<Vec<_>>(),
        total.cas_failures,
        total.restarts,
        total.round_trips,
        report.verdict_kind(),
        report.steps
    );
    if let Verdict::Violation(v) = &report.verdict {
        panic!("[{label}] not linearizable:\n{v}");
    }
    assert!(report.is_linearizable(), "[{label}] {:?}", report.verdict);
    assert!(
        r.errors.len() * 20 <= r.history.len(),
        "[{label}] too many unresolved operations: {:?}",
        r.errors.iter().take(5).collect::<Vec<_>>()
    );
}

trait VerdictKind {
    fn verdict_kind(&self) -> &'static str;
}

impl VerdictKind for testbed::lincheck::Report {
    fn verdict_kind(&self) -> &'static str {
        match self.verdict {
            Verdict::Linearizable => "linearizable",
            Verdict::Violation(_) => "violation",
            Verdict::Unknown { .. } => "unknown",
        }
    }
}

fn options() -> ClientOptions {
    ClientOptions::default()
        // Short grace period so reclaimed nodes are reused during the run.
        .with_grace(Duration::from_millis(20))
}

#[test]
fn hot_keys_local() {
    let client = testbed::embedded_client(EmbeddedOptions {
        memnodes: 2,
        transport: TransportKind::Local,
        client: options(),
        ..EmbeddedOptions::default()
    })
    .expect("cluster");
    check_run(
        &client,
        Workload {
            threads: 4,
            tasks: 4,
            ops_per_task: 150,
            keys: 3,
            seed: 1,
        },
        "local",
    );
}

#[test]
fn hot_keys_udp() {
    let client = testbed::embedded_client(EmbeddedOptions {
        memnodes: 2,
        transport: TransportKind::Udp,
        client: options(),
        ..EmbeddedOptions::default()
    })
    .expect("cluster");
    check_run(
        &client,
        Workload {
            threads: 3,
            tasks: 4,
            ops_per_task: 100,
            keys: 3,
            seed: 2,
        },
        "udp",
    );
}

/// With a grace period longer than the run, every write of a key its session read
/// or wrote before links after that tail without searching for it
/// (`clover/known_tail.rs`): on hot keys most of those links are lost to other
/// sessions and fall back to the ordinary path. The history stays linearizable.
#[test]
fn hot_keys_udp_writing_after_known_tails() {
    let client = testbed::embedded_client(EmbeddedOptions {
        memnodes: 2,
        transport: TransportKind::Udp,
        client: ClientOptions::default().with_grace(Duration::from_secs(30)),
        ..EmbeddedOptions::default()
    })
    .expect("cluster");
    check_run(
        &client,
        Workload {
            threads: 3,
            tasks: 4,
            ops_per_task: 100,
            keys: 3,
            seed: 4,
        },
        "udp, known tails",
    );
}

#[test]
fn hot_keys_udp_with_loss_duplication_reordering() {
    let relay = FaultRelay::new(Faults {
        drop: 0.03,
        duplicate: 0.03,
        reorder: 0.03,
        seed: 3,
    });
    let client = testbed::embedded_client(EmbeddedOptions {
        memnodes: 2,
        transport: TransportKind::Udp,
        client: {
            let mut o = options();
            o.connection.udp_relay = Some(relay.clone());
            o
        },
        ..EmbeddedOptions::default()
    })
    .expect("cluster");
    check_run(
        &client,
        Workload {
            threads: 3,
            tasks: 3,
            ops_per_task: 60,
            keys: 3,
            seed: 4,
        },
        "udp+faults",
    );
    let c = &relay.counts;
    use std::sync::atomic::Ordering::Relaxed;
    println!(
        "[udp+faults] relay: {} forwarded, {} dropped, {} duplicated, {} reordered",
        c.forwarded.load(Relaxed),
        c.dropped.load(Relaxed),
        c.duplicated.load(Relaxed),
        c.reordered.load(Relaxed)
    );
    assert!(c.dropped.load(Relaxed) > 0 && c.duplicated.load(Relaxed) > 0);
    assert!(c.reordered.load(Relaxed) > 0);
    drop(client);
    relay.stop();
}
