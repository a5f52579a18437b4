//! Replicated RACE tables: linearizable with r = 2 and r = 3 under concurrency
//! (splits included), a second copy costs one round trip on inserts and updates
//! and nothing on reads, and when a memory node crashes mid-run the running
//! clients follow the failover without losing an acknowledged write (the checker
//! rejects lost acknowledged writes and reads of values never written). With
//! three copies, two successive crashes.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use dmkv_api::metadata::{CreateTableRequest, IndexKind, TableDescription, TableState};
use kvstore::{Client, ClientOptions, ReconnectOptions, TableSpec, TransportKind};
use testbed::lincheck::{Config, Verdict, check};
use testbed::workload::{Run, Workload, run};
use testbed::{Embedded, EmbeddedOptions};

/// A memnode without heartbeats for this long is failed over.
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

/// Options whose subtables are small, so that a few hundred keys split them.
fn splitting_options() -> ClientOptions {
    options().with_race(kvstore::RaceOptions::default().with_subtable_groups(1))
}

fn cluster(memnodes: usize, options: ClientOptions) -> (Embedded, Client) {
    cluster_of(memnodes, 16 << 20, options)
}

/// `memnodes` nodes of `capacity` bytes and a client of them.
fn cluster_of(memnodes: usize, capacity: u64, options: ClientOptions) -> (Embedded, Client) {
    let embedded = Embedded::start_with_heartbeat_timeout(
        &EmbeddedOptions {
            memnodes,
            capacity,
            transport: TransportKind::Udp,
            ..EmbeddedOptions::default()
        },
        HEARTBEAT_TIMEOUT,
    )
    .expect("cluster");
    let client = client_of(&embedded, options);
    (embedded, client)
}

/// Another client of `embedded`.
fn client_of(embedded: &Embedded, options: ClientOptions) -> Client {
    Client::in_process(
        &embedded.metadata_url(),
        options,
        HashMap::new(),
        Box::new(()),
    )
    .expect("client")
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
fn two_copies_are_linearizable() {
    copies_are_linearizable(2);
}

/// Three copies: a slot has two backups, so rounds split among them, and the
/// workload's three keys make concurrent deletes of one key frequent (only one of
/// them may succeed, `replication/settle.rs`).
#[test]
fn three_copies_are_linearizable() {
    copies_are_linearizable(3);
}

fn copies_are_linearizable(r: u32) {
    let (_embedded, client) = cluster(3, options());
    let name = format!("hot{r}");
    let t = client
        .create_replicated_table(&name, &TableSpec::race(256), r)
        .expect("replicated table");
    assert!(t.replica_sets.iter().all(|s| s.len() == r as usize));
    let w = Workload {
        threads: 2,
        tasks: 3,
        ops_per_task: 60,
        keys: 3,
        seed: u64::from(r),
    };
    assert_linearizable(&run(&client, &name, w), &format!("r={r}"), 5);
}

#[test]
fn splits_of_a_replicated_table_keep_every_key_on_every_copy() {
    let (embedded, client) = cluster(3, splitting_options());
    client
        .create_replicated_table("split", &TableSpec::race(64), 2)
        .expect("replicated table");
    let started = Instant::now();
    // Two writers insert at once, so splits run while the other writer's inserts
    // and splits land.
    let keys = 160u32;
    std::thread::scope(|scope| {
        for w in 0..2u32 {
            let client = &client;
            scope.spawn(move || {
                let s = client.session().expect("session");
                let t = s.table("split").expect("handle");
                for k in (w..keys).step_by(2) {
                    s.block_on(t.insert(format!("key{k}").as_bytes(), format!("v{k}").as_bytes()))
                        .expect("insert");
                }
            });
        }
    });
    // A subtable of one bucket group holds about twenty keys: the table split
    // many times. Every key is on the backups too: crash a memnode and read
    // everything from the survivors after the failover.
    println!("inserted at {:?}", started.elapsed());
    let mut embedded = embedded;
    let victim = embedded.memnode_ids()[0];
    embedded.crash(victim).expect("crash");
    let meta = dmkv_api::MetadataClient::new(&embedded.metadata_url()).expect("metadata client");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let d = meta.table("split").expect("table");
        if d.replica_sets.iter().all(|set| !set.contains(&victim)) {
            break;
        }
        assert!(Instant::now() < deadline, "no failover: {d:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let fresh = Client::in_process(
        &embedded.metadata_url(),
        splitting_options(),
        HashMap::new(),
        Box::new(()),
    )
    .expect("client");
    println!("failed over at {:?}", started.elapsed());
    let s2 = fresh.session().expect("session");
    let t2 = s2.table("split").expect("handle");
    for k in 0..keys {
        assert_eq!(
            s2.block_on(t2.get(format!("key{k}").as_bytes()))
                .expect("get after failover"),
            Some(format!("v{k}").into_bytes()),
            "key{k}"
        );
    }
}

#[test]
fn a_second_copy_costs_one_round_trip_on_writes_and_none_on_reads() {
    // The default grace period and a generous view age: a busy machine must not make
    // a write look again.
    let patient = ClientOptions::with_transport(TransportKind::Udp)
        .with_race(kvstore::RaceOptions::default().with_insert_view_age(Duration::from_secs(1)));
    // Two clients lease chunks for three tables on every node: larger nodes than
    // `cluster`'s.
    let (embedded, client) = cluster_of(3, 192 << 20, patient.clone());
    // The updates come from another client, which has not seen the keys' slots: an
    // update right after the writer's own write would CAS the slot it saw in one
    // round trip on a single copy (asserted below), which replicated tables do not.
    let other = client_of(&embedded, patient);
    client
        .create_table("single", &TableSpec::race(256))
        .expect("table");
    for r in [2u32, 3] {
        client
            .create_replicated_table(&format!("r{r}"), &TableSpec::race(256), r)
            .expect("replicated table");
    }
    let s = client.session().expect("session");
    let s_other = other.session().expect("session");
    let mut costs = HashMap::new();
    let mut known_slot = HashMap::new();
    for name in ["single", "r2", "r3"] {
        let t = s.table(name).expect("handle");
        let t_other = s_other.table(name).expect("handle");
        // Open the table (the directory is read once per session).
        let _ = s.block_on(t.get(b"warm")).expect("get");
        let _ = s_other.block_on(t_other.get(b"warm")).expect("get");
        // The fewest of a few tries: a busy machine may make a write look again.
        let (mut insert, mut update, mut get) = (u64::MAX, u64::MAX, u64::MAX);
        let mut known = u64::MAX;
        for k in 0..5 {
            let key = format!("k{k}");
            s.block_on(t.insert(key.as_bytes(), b"first"))
                .expect("insert");
            insert = insert.min(s.last_op().round_trips);
            s_other
                .block_on(t_other.update(key.as_bytes(), b"second"))
                .expect("update");
            update = update.min(s_other.last_op().round_trips);
            assert_eq!(
                s_other.block_on(t_other.get(key.as_bytes())).expect("get"),
                Some(b"second".to_vec())
            );
            get = get.min(s_other.last_op().round_trips);
            s_other
                .block_on(t_other.update(key.as_bytes(), b"third"))
                .expect("update");
            known = known.min(s_other.last_op().round_trips);
            assert_eq!(
                s.block_on(t.get(key.as_bytes())).expect("get"),
                Some(b"third".to_vec())
            );
        }
        costs.insert(name, (insert, update, get));
        known_slot.insert(name, known);
    }
    println!("round trips (insert, update, get): {costs:?}; update after a get: {known_slot:?}");
    let (i1, u1, g1) = costs["single"];
    for name in ["r2", "r3"] {
        let (i, u, g) = costs[name];
        assert_eq!(i, i1 + 1, "{name}: an insert costs one round trip more");
        assert_eq!(u, u1 + 1, "{name}: an update costs one round trip more");
        assert_eq!(g, g1, "{name}: a get costs the same");
        assert!(
            known_slot[name] > 1,
            "{name}: a replicated slot's CAS is decided across its copies"
        );
    }
    assert_eq!(
        known_slot["single"], 1,
        "a single copy's slot seen just before is CASed with the block's WRITE"
    );
}

/// Runs the lincheck workload on a replicated RACE table while `kills` memnodes
/// crash one after another, then checks the history, the table's health, and
/// that a new session reads and writes every key.
fn survives_crashes(memnodes: usize, replication: u32, kills: usize) {
    let (embedded, client) = cluster(memnodes, options());
    client
        .create_replicated_table("t", &TableSpec::race(256), replication)
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
                seed: 11 + kills as u64,
            },
        );
        killer.join().expect("killer");
        r
    });
    println!("workload done in {:?}", started.elapsed());
    assert_linearizable(&result, &format!("r={replication}, {kills} crash(es)"), 20);
    let fresh = Client::in_process(
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
    // With a memnode to spare, a set gets a new member back (re-replication,
    // `rereplication.rs`): degraded until it has, then healthy.
    match described.health.state {
        TableState::Healthy => assert!(described.health.lost.is_empty(), "{described:?}"),
        TableState::Degraded => assert_eq!(described.health.lost.len(), kills, "{described:?}"),
        TableState::Lost => panic!("data lost: {described:?}"),
    }
    let s = fresh.session().expect("session");
    let handle = s.table("t").expect("handle");
    for k in 0..4 {
        let key = format!("hot{k}");
        if let Err(e) = s.block_on(handle.get(key.as_bytes())) {
            panic!("reading {key} after failover: {e}");
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

/// The survivors of a failed primary are resynchronised before the failover is
/// committed, so the second crash promotes a copy that holds what readers saw.
#[test]
fn three_copies_survive_two_successive_crashes() {
    survives_crashes(3, 3, 2);
}

/// Waits until the replica set of `table`'s only home is `members`.
fn wait_for_set(client: &Client, table: &str, members: &[u64]) -> TableDescription {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let t = client.metadata().table(table).expect("table");
        if t.replica_sets.first().map(Vec::as_slice) == Some(members) {
            return t;
        }
        assert!(
            Instant::now() < deadline,
            "no failover to {members:?}: {t:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A read of `key` by a client that has never seen the table before.
fn fresh_get(embedded: &Embedded, table: &str, key: &[u8]) -> Option<Vec<u8>> {
    let client = Client::in_process(
        &embedded.metadata_url(),
        options(),
        HashMap::new(),
        Box::new(()),
    )
    .expect("client");
    let s = client.session().expect("session");
    let t = s.table(table).expect("handle");
    s.block_on(t.get(key)).expect("get after failover")
}

/// A survivor of a failed primary that missed the last round on a slot (as when
/// the writer failed between its CASes on the two backups) is brought level with
/// the member promoted in its place before the set serves again: when a second
/// failure promotes that survivor, the slot still holds the value readers saw,
/// not the older one.
#[test]
fn a_survivor_behind_the_new_primary_is_resynchronised_before_a_second_failover() {
    let (mut embedded, client) = cluster(3, options());
    let home = embedded.memnode_ids()[0];
    let req = CreateTableRequest {
        name: "behind".to_owned(),
        index: IndexKind::Race,
        value_limit: 256,
        memnodes: Some(vec![home]),
        replication: Some(3),
        update_mode: None,
        inplace: None,
    };
    let t = client.metadata().create_table(&req).expect("table");
    let set = t.replica_sets[0].clone();
    assert_eq!(set.len(), 3, "{t:?}");
    let s = client.session().expect("session");
    let h = s.table("behind").expect("handle");
    s.block_on(h.insert(b"k", b"older")).expect("insert");
    // The last member's memory as it is before the update...
    let memory = embedded.local_memory();
    let behind = memory[&set[2]].clone();
    let snapshot: Vec<(u32, Vec<u8>)> = behind
        .regions()
        .iter()
        .map(|r| {
            let mut bytes = vec![0u8; r.len as usize];
            behind
                .region(r.rkey)
                .expect("region")
                .read(0, &mut bytes)
                .expect("read");
            (r.rkey, bytes)
        })
        .collect();
    s.block_on(h.update(b"k", b"newer")).expect("update");
    // ...is what it holds after it: it missed the update's round.
    for (rkey, bytes) in &snapshot {
        behind
            .region(*rkey)
            .expect("region")
            .write(0, bytes)
            .expect("write");
    }
    drop((h, s));
    // The primary fails: the next member serves, and readers see the update.
    embedded.crash(set[0]).expect("crash");
    wait_for_set(&client, "behind", &set[1..]);
    assert_eq!(
        fresh_get(&embedded, "behind", b"k"),
        Some(b"newer".to_vec())
    );
    // The new primary fails too: the survivor that missed the round serves, and
    // it must hold what readers already saw.
    embedded.crash(set[1]).expect("crash");
    wait_for_set(&client, "behind", &set[2..]);
    assert_eq!(
        fresh_get(&embedded, "behind", b"k"),
        Some(b"newer".to_vec()),
        "the second failover exposed a survivor that missed the last round"
    );
}
