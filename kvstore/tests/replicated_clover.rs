//! Replicated Clover tables: linearizable with r = 2 and r = 3 under concurrency,
//! a second copy costs one round trip on writes and nothing on reads, and when a
//! memory node crashes mid-run the metadata service fails the table over to the
//! backups and the running clients follow without being restarted — no
//! acknowledged write is lost (the checker rejects lost acknowledged writes and
//! reads of values never written).
//! With three copies, two successive crashes.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use dmkv_api::metadata::TableState;
use kvstore::{Client, ClientOptions, ReconnectOptions, TableSpec, TransportKind};
use testbed::lincheck::{Config, Verdict, check};
use testbed::workload::{Run, Workload, run};
use testbed::{Embedded, EmbeddedOptions};

/// A memnode without heartbeats for this long is failed over (long enough that a
/// busy machine does not fail a live memnode over).
const HEARTBEAT_TIMEOUT: Duration = Duration::from_millis(1500);

fn options() -> ClientOptions {
    ClientOptions::with_transport(TransportKind::Udp)
        // A crashed responder is noticed after 5 × (1 + 2 + 4 + 8 + 16) ms.
        .with_rc(verbs::rc::RcConfig {
            retransmit_timeout: Duration::from_millis(5),
            max_retries: 4,
            ..verbs::rc::RcConfig::default()
        })
        .with_reconnect(
            ReconnectOptions::default()
                .with_timeout(Duration::from_secs(8))
                .with_interval(Duration::from_millis(100)),
        )
        .with_grace(Duration::from_millis(20))
}

fn cluster(memnodes: usize) -> (Embedded, Client) {
    let embedded = Embedded::start_with_heartbeat_timeout(
        &EmbeddedOptions {
            memnodes,
            capacity: 16 << 20,
            transport: TransportKind::Udp,
            ..EmbeddedOptions::default()
        },
        HEARTBEAT_TIMEOUT,
    )
    .expect("cluster");
    let client = Client::in_process(
        &embedded.metadata_url(),
        options(),
        HashMap::new(),
        Box::new(()),
    )
    .expect("client");
    (embedded, client)
}

fn workload(seed: u64) -> Workload {
    Workload {
        threads: 2,
        tasks: 3,
        ops_per_task: 60,
        keys: 3,
        seed,
    }
}

fn assert_linearizable(r: &Run, label: &str, max_unresolved_percent: usize) {
    let report = check(&r.history, &Config::default()).expect("well-formed history");
    println!(
        "[{label}] {} operations, {} unresolved ({:?}), checker after {} steps",
        r.history.len(),
        r.errors.len(),
        r.errors.iter().take(3).collect::<Vec<_>>(),
        report.steps
    );
    if let Verdict::Violation(v) = &report.verdict {
        panic!("[{label}] not linearizable:\n{v}");
    }
    assert!(report.is_linearizable(), "[{label}] {:?}", report.verdict);
    assert!(
        r.errors.len() * 100 <= r.history.len() * max_unresolved_percent,
        "[{label}] too many unresolved operations: {:?}",
        r.errors.iter().take(5).collect::<Vec<_>>()
    );
}

#[test]
fn two_and_three_copies_are_linearizable() {
    let (_embedded, client) = cluster(3);
    for r in [2u32, 3] {
        let name = format!("hot{r}");
        let t = client
            .create_replicated_table(&name, &TableSpec::clover(256), r)
            .expect("replicated table");
        assert_eq!(t.replica_sets.len(), 3);
        assert!(t.replica_sets.iter().all(|s| s.len() == r as usize));
        let run = run(&client, &name, workload(u64::from(r)));
        assert_linearizable(&run, &format!("r={r}"), 5);
    }
}

#[test]
fn a_second_copy_costs_one_round_trip_on_writes_and_none_on_reads() {
    let (_embedded, client) = cluster(2);
    client
        .create_table("single", &TableSpec::clover(256))
        .expect("table");
    client
        .create_replicated_table("double", &TableSpec::clover(256), 2)
        .expect("replicated table");
    let s = client.session().expect("session");
    let mut costs = HashMap::new();
    for name in ["single", "double"] {
        let t = s.table(name).expect("handle");
        s.block_on(t.put(b"k", b"first")).expect("put");
        // Past half the grace period, so that the unreplicated put searches for the
        // tail as a replicated one always does (a write right after the session
        // verified the tail skips the search on unreplicated tables).
        std::thread::sleep(std::time::Duration::from_millis(80));
        s.block_on(t.put(b"k", b"second")).expect("put");
        let put = s.last_op();
        s.block_on(t.get(b"k")).expect("get");
        let get = s.last_op();
        assert_eq!(
            s.block_on(t.get(b"k")).expect("get"),
            Some(b"second".to_vec())
        );
        costs.insert(name, (put.round_trips, get.round_trips));
    }
    let (put1, get1) = costs["single"];
    let (put2, get2) = costs["double"];
    println!("round trips: r=1 put {put1} get {get1}; r=2 put {put2} get {get2}");
    assert_eq!(put2, put1 + 1, "an r=2 put costs one round trip more");
    assert_eq!(get2, get1, "an r=2 get costs the same");
}

/// Runs the lincheck workload on a replicated table while `kills` memnodes crash
/// one after another, then checks the history, that the table reports the lost
/// copies as degraded, and that a new session reads every key.
fn survives_crashes(memnodes: usize, replication: u32, kills: usize) {
    let (embedded, client) = cluster(memnodes);
    client
        .create_replicated_table("t", &TableSpec::clover(256), replication)
        .expect("replicated table");
    let ids = embedded.memnode_ids();
    let embedded = Mutex::new(embedded);
    let started = Instant::now();
    let result = std::thread::scope(|scope| {
        let killer = scope.spawn(|| {
            for id in ids.iter().take(kills) {
                std::thread::sleep(Duration::from_millis(300));
                embedded
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .crash(*id)
                    .expect("crash");
                println!("crashed memnode {id} at {:?}", started.elapsed());
                // Let the failover happen before the next crash.
                std::thread::sleep(HEARTBEAT_TIMEOUT * 2);
            }
        });
        let r = run(
            &client,
            "t",
            Workload {
                threads: 2,
                tasks: 2,
                ops_per_task: 150 * kills,
                keys: 4,
                seed: 7 + kills as u64,
            },
        );
        killer.join().expect("killer");
        r
    });
    println!("workload done in {:?}", started.elapsed());
    assert_linearizable(&result, &format!("r={replication}, {kills} crash(es)"), 20);
    let fresh = kvstore::Client::in_process(
        &embedded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .metadata_url(),
        options(),
        HashMap::new(),
        Box::new(()),
    )
    .expect("client");
    let described = fresh.table("t").expect("table");
    println!("after the crashes: {:?}", described.replica_sets);
    let before = replication as usize;
    for (i, set) in described.replica_sets.iter().enumerate() {
        assert!(!set.is_empty() && set.len() <= before, "set {i}: {set:?}");
        assert!(ids.iter().take(kills).all(|dead| !set.contains(dead)));
    }
    if memnodes - kills >= before {
        // Enough memnodes survive for every set to get a new member back
        // (re-replication, `rereplication.rs`): degraded until it has, then healthy.
        assert!(
            matches!(
                described.health.state,
                TableState::Degraded | TableState::Healthy
            ),
            "{described:?}"
        );
    } else {
        assert_eq!(
            described.health.state,
            TableState::Degraded,
            "{described:?}"
        );
        assert_eq!(described.health.lost.len(), kills);
    }
    // A session opened now reads every key and writes new values.
    let s = fresh.session().expect("session");
    let handle = s.table("t").expect("handle");
    for k in 0..4 {
        let key = format!("hot{k}");
        match s.block_on(handle.get(key.as_bytes())) {
            Ok(_) => {}
            Err(e) => panic!("reading {key} after failover: {e}"),
        }
        s.block_on(handle.put(key.as_bytes(), b"after"))
            .expect("put after failover");
        assert_eq!(
            s.block_on(handle.get(key.as_bytes())).expect("get"),
            Some(b"after".to_vec())
        );
    }
}

#[test]
fn two_copies_survive_a_crash_mid_run() {
    survives_crashes(2, 2, 1);
}

#[test]
fn two_copies_on_three_memnodes_survive_a_crash_mid_run() {
    survives_crashes(3, 2, 1);
}

#[test]
fn three_copies_survive_two_successive_crashes() {
    survives_crashes(3, 3, 2);
}

#[test]
fn more_copies_than_memory_nodes_are_refused_clearly() {
    let (_embedded, client) = cluster(2);
    // More copies than memory nodes: a clear refusal, not "already exists".
    match client.create_replicated_table("r3", &TableSpec::clover(256), 3) {
        Err(kvstore::KvError::InvalidArgument(m)) => {
            assert!(
                m.contains("replication 3 needs 3 memnodes, 2 registered"),
                "{m}"
            )
        }
        other => panic!("unexpected {other:?}"),
    }
}
