//! Re-replication of replicated tables of every index (Clover, RACE, in-place): a
//! replica set that lost a member to a crash gets a new one while a writer runs,
//! and the new member alone holds every acknowledged write; the history stays
//! linearizable when a memnode crashes mid-run and the copy runs under the
//! workload; a memnode that rejoins on its region file after missing writes is
//! resynchronised; a drained memnode's copies move elsewhere so that it can be
//! deleted.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use dmkv_api::metadata::{IndexKind, TableDescription};
use kvstore::{Client, ClientOptions, ReconnectOptions, SchemeSpec, TableSpec, TransportKind};
use testbed::lincheck::{Config, Verdict, check};
use testbed::table_watch::{is_whole, wait_for_table};
use testbed::workload::{Workload, run};
use testbed::{Embedded, EmbeddedOptions};

const HEARTBEAT_TIMEOUT: Duration = Duration::from_millis(1500);

fn options() -> ClientOptions {
    ClientOptions::with_transport(TransportKind::Udp)
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

fn embedded_options(memnodes: usize) -> EmbeddedOptions {
    EmbeddedOptions {
        memnodes,
        capacity: 8 << 20,
        transport: TransportKind::Udp,
        ..EmbeddedOptions::default()
    }
}

fn client_of(embedded: &Embedded) -> Client {
    Client::in_process(
        &embedded.metadata_url(),
        options(),
        HashMap::new(),
        Box::new(()),
    )
    .expect("client")
}

/// Most keys a writer writes (an in-place table has a fixed number of tuples).
const MAX_KEYS: u64 = 1500;

/// A table of `index` for the tests' keys.
fn spec(index: IndexKind) -> TableSpec {
    match index {
        IndexKind::Clover => TableSpec::clover(256),
        IndexKind::Race => TableSpec::race(256),
        IndexKind::InPlace => {
            let scheme: SchemeSpec = "pessimistic-rw-basic-embedded".parse().expect("scheme");
            TableSpec::in_place(scheme, 64, 2 * MAX_KEYS)
        }
    }
}

/// A table of `index` of two copies homed on `home` alone (one replica set).
fn table_on(client: &Client, name: &str, home: u64, index: IndexKind) -> TableDescription {
    let mut req = spec(index).request(name).expect("request");
    req.memnodes = Some(vec![home]);
    req.replication = Some(2);
    client.metadata().create_table(&req).expect("table")
}

/// Waits until `done` holds for the table's description, or panics after `limit`.
fn wait_for(
    client: &Client,
    name: &str,
    limit: Duration,
    what: &str,
    done: impl Fn(&TableDescription) -> bool,
) -> TableDescription {
    let start = Instant::now();
    let t = wait_for_table(client, name, limit, what, done).unwrap_or_else(|e| panic!("{e}"));
    println!("{what} after {:?}: {:?}", start.elapsed(), t.replica_sets);
    t
}

fn whole(t: &TableDescription) -> bool {
    is_whole(t)
}

/// Writes `key{i}` = `value{i}` for rising i until `stop`; the acknowledged ones.
fn writer(client: &Client, name: &str, stop: &AtomicBool) -> Vec<u64> {
    let s = client.session().expect("session");
    let t = s.table(name).expect("handle");
    let mut acked = Vec::new();
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) && i < MAX_KEYS {
        let key = format!("key{i}");
        if s.block_on(t.put(key.as_bytes(), format!("value{i}").as_bytes()))
            .is_ok()
        {
            acked.push(i);
        }
        i += 1;
    }
    acked
}

fn read_all(client: &Client, name: &str, acked: &[u64]) {
    let s = client.session().expect("session");
    let t = s.table(name).expect("handle");
    for i in acked {
        let key = format!("key{i}");
        assert_eq!(
            s.block_on(t.get(key.as_bytes())).expect("get"),
            Some(format!("value{i}").into_bytes()),
            "{key}"
        );
    }
}

fn a_crashed_copy_is_rereplicated_under_a_writer_and_the_new_member_alone_holds_every_write(
    index: IndexKind,
) {
    let embedded = Embedded::start_with_heartbeat_timeout(&embedded_options(3), HEARTBEAT_TIMEOUT)
        .expect("cluster");
    let client = client_of(&embedded);
    let ids = embedded.memnode_ids();
    let t = table_on(&client, "t", ids[0], index);
    let original = t.replica_sets[0].clone();
    let spare = *ids.iter().find(|m| !original.contains(m)).expect("spare");
    let embedded = Mutex::new(embedded);
    let stop = AtomicBool::new(false);
    let (acked, t) = std::thread::scope(|scope| {
        let w = scope.spawn(|| writer(&client, "t", &stop));
        std::thread::sleep(Duration::from_millis(300));
        embedded.lock().unwrap().crash(original[0]).expect("crash");
        let t = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            wait_for(
                &client,
                "t",
                Duration::from_secs(20),
                "re-replicated",
                |t| whole(t) && !t.replica_sets[0].contains(&original[0]),
            )
        }));
        std::thread::sleep(Duration::from_millis(200));
        stop.store(true, Ordering::Relaxed);
        (w.join().expect("writer"), t)
    });
    let t = t.expect("re-replicated");
    assert_eq!(t.replica_sets[0], vec![original[1], spare]);
    assert!(
        acked.len() >= 5,
        "the writer made progress: {}",
        acked.len()
    );
    // The other original member goes too: the new member alone serves.
    let mut embedded = embedded.into_inner().unwrap();
    embedded.crash(original[1]).expect("crash");
    wait_for(&client, "t", Duration::from_secs(10), "failed over", |t| {
        t.replica_sets[0] == vec![spare]
    });
    read_all(&client, "t", &acked);
    println!(
        "{} acknowledged writes read back from memnode {spare}",
        acked.len()
    );
}

fn two_copies_stay_linearizable_while_a_crash_is_rereplicated_mid_run(index: IndexKind) {
    let embedded = Embedded::start_with_heartbeat_timeout(&embedded_options(3), HEARTBEAT_TIMEOUT)
        .expect("cluster");
    let client = client_of(&embedded);
    let ids = embedded.memnode_ids();
    client
        .create_replicated_table("hot", &spec(index), 2)
        .expect("table");
    let embedded = Mutex::new(embedded);
    let result = std::thread::scope(|scope| {
        let killer = scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(300));
            embedded.lock().unwrap().crash(ids[0]).expect("crash");
        });
        let r = run(
            &client,
            "hot",
            Workload {
                threads: 2,
                tasks: 2,
                ops_per_task: 400,
                keys: 4,
                seed: 11,
            },
        );
        killer.join().expect("killer");
        r
    });
    let report = check(&result.history, &Config::default()).expect("well-formed history");
    println!(
        "{} operations, {} unresolved",
        result.history.len(),
        result.errors.len()
    );
    if let Verdict::Violation(v) = &report.verdict {
        panic!("not linearizable:\n{v}");
    }
    assert!(report.is_linearizable());
    assert!(
        result.errors.len() * 100 <= result.history.len() * 25,
        "too many unresolved: {:?}",
        result.errors.iter().take(5).collect::<Vec<_>>()
    );
    let t = wait_for(
        &client,
        "hot",
        Duration::from_secs(15),
        "re-replicated",
        |t| whole(t) && t.replica_sets.iter().all(|s| !s.contains(&ids[0])),
    );
    assert!(t.replica_sets.iter().all(|s| !s.contains(&ids[0])));
}

fn a_memnode_that_rejoins_on_its_region_file_after_missed_writes_is_resynchronised(
    index: IndexKind,
) {
    let mut embedded = Embedded::start_with_region_files(&embedded_options(2), HEARTBEAT_TIMEOUT)
        .expect("cluster");
    let client = client_of(&embedded);
    let ids = embedded.memnode_ids();
    table_on(&client, "t", ids[0], index);
    let s = client.session().expect("session");
    let h = s.table("t").expect("handle");
    for i in 0..50 {
        s.block_on(h.put(format!("key{i}").as_bytes(), format!("value{i}").as_bytes()))
            .expect("put");
    }
    // The backup crashes; the primary serves alone and takes writes it misses.
    embedded.crash(ids[1]).expect("crash");
    wait_for(&client, "t", Duration::from_secs(10), "failed over", |t| {
        t.replica_sets[0] == vec![ids[0]]
    });
    let mut acked: Vec<u64> = (0..50).collect();
    for i in 50..100 {
        if s.block_on(h.put(format!("key{i}").as_bytes(), format!("value{i}").as_bytes()))
            .is_ok()
        {
            acked.push(i);
        }
    }
    // It restarts on its region file: same id, same memory, resynchronised.
    embedded.restart(ids[1]).expect("restart");
    let info = client
        .memnodes()
        .expect("memnodes")
        .into_iter()
        .find(|m| m.id == ids[1])
        .expect("listed");
    assert!(info.persistent, "{info:?}");
    let t = wait_for(
        &client,
        "t",
        Duration::from_secs(15),
        "resynchronised",
        |t| whole(t) && t.replica_sets[0].len() == 2,
    );
    assert_eq!(t.replica_sets[0], vec![ids[0], ids[1]]);
    // Now the primary goes: the rejoined member alone holds everything.
    embedded.crash(ids[0]).expect("crash");
    wait_for(&client, "t", Duration::from_secs(10), "failed over", |t| {
        t.replica_sets[0] == vec![ids[1]]
    });
    read_all(&client, "t", &acked);
}

fn a_drained_memnode_hands_its_copies_over_and_can_then_be_deleted(index: IndexKind) {
    let embedded = Embedded::start_with_heartbeat_timeout(&embedded_options(3), HEARTBEAT_TIMEOUT)
        .expect("cluster");
    let client = client_of(&embedded);
    let ids = embedded.memnode_ids();
    let t = table_on(&client, "t", ids[0], index);
    let drained = t.replica_sets[0][0];
    let s = client.session().expect("session");
    let h = s.table("t").expect("handle");
    for i in 0..100 {
        s.block_on(h.put(format!("key{i}").as_bytes(), format!("value{i}").as_bytes()))
            .expect("put");
    }
    let meta = client.metadata();
    let e = meta.deregister_memnode(drained).unwrap_err();
    assert_eq!(e.status(), Some(409));
    assert!(e.to_string().contains("drain"), "{e}");
    meta.drain_memnode(drained).expect("drain");
    let t = wait_for(&client, "t", Duration::from_secs(15), "drained", |t| {
        whole(t) && !t.replica_sets[0].contains(&drained)
    });
    assert_eq!(t.replica_sets[0].len(), 2);
    read_all(&client, "t", &(0..100).collect::<Vec<_>>());
    let info = client
        .memnodes()
        .expect("memnodes")
        .into_iter()
        .find(|m| m.id == drained)
        .expect("listed");
    let progress = info.drain_progress.expect("drain progress");
    assert_eq!(progress.replica_sets_left, 0, "{progress:?}");
    assert!(progress.done, "{progress:?}");
    meta.deregister_memnode(drained)
        .expect("DELETE after the drain");
    // It was the set's home: its record stays, retired, naming the set's memory.
    let info = client
        .memnodes()
        .expect("memnodes")
        .into_iter()
        .find(|m| m.id == drained)
        .expect("listed");
    assert!(info.retired && info.leased_bytes == 0, "{info:?}");
    // The fences of the drain replaced the session's queue pairs: a write that
    // finds its queue pair failed may report OutcomeUnknown (once per queue pair it finds failed); it is repeated.
    for i in 100..120 {
        let (k, v) = (format!("key{i}"), format!("value{i}"));
        let mut tries = 0;
        while let Err(e) = s.block_on(h.put(k.as_bytes(), v.as_bytes())) {
            tries += 1;
            assert!(
                tries < 6 && e.kind() == "outcome_unknown",
                "put after the drain: {e}"
            );
        }
    }
    read_all(&client, "t", &(0..120).collect::<Vec<_>>());
}

/// The tests above, once per index.
macro_rules! per_index {
    ($($module:ident => $index:expr),* $(,)?) => {$(
        mod $module {
            use super::*;

            #[test]
            fn crash_rereplicated_under_a_writer() {
                a_crashed_copy_is_rereplicated_under_a_writer_and_the_new_member_alone_holds_every_write($index);
            }

            #[test]
            fn linearizable_while_a_crash_is_rereplicated() {
                two_copies_stay_linearizable_while_a_crash_is_rereplicated_mid_run($index);
            }

            #[test]
            fn rejoin_on_the_region_file_is_resynchronised() {
                a_memnode_that_rejoins_on_its_region_file_after_missed_writes_is_resynchronised($index);
            }

            #[test]
            fn drain_then_delete() {
                a_drained_memnode_hands_its_copies_over_and_can_then_be_deleted($index);
            }
        }
    )*};
}

per_index! {
    clover => IndexKind::Clover,
    race => IndexKind::Race,
    in_place => IndexKind::InPlace,
}
