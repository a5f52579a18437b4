//! Clover roots on the metadata path (clients that decline the chain directory):
//! reads never create chains, a creator that dies before publishing its key's root
//! blocks nobody (a writer publishes its own after `root_wait`), and clients racing
//! to publish agree on exactly one root per key.

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use kvstore::{Client, ClientOptions, TableSpec, TransportKind};
use testbed::EmbeddedOptions;
use testbed::lincheck::{Config, check};
use testbed::workload::{Workload, run};

fn options(root_wait: Duration) -> ClientOptions {
    ClientOptions::with_transport(TransportKind::Udp).with_clover(
        kvstore::CloverOptions::default()
            .with_root_wait(root_wait)
            .with_chain_directory(false),
    )
}

fn cluster(root_wait: Duration) -> Client {
    let client = testbed::embedded_client(EmbeddedOptions {
        memnodes: 2,
        transport: TransportKind::Udp,
        client: options(root_wait),
        ..EmbeddedOptions::default()
    })
    .expect("cluster");
    client
        .create_table("t", &TableSpec::clover(256))
        .expect("table");
    client
}

/// Another client of the same cluster, with caches of its own.
fn fresh(client: &Client, root_wait: Duration) -> Client {
    Client::connect(&client.metadata_url(), options(root_wait)).expect("client")
}

#[test]
fn reading_an_absent_key_creates_no_chain() {
    let client = cluster(Duration::from_secs(2));
    let s = client.session().expect("session");
    let t = s.table("t").expect("table");
    for _ in 0..2 {
        assert_eq!(s.block_on(t.get(b"absent")), Ok(None));
        assert_eq!(s.last_op().round_trips, 0, "decided by the metadata lookup");
    }
    assert_eq!(
        client.metadata().lookup_chain("t", b"absent").unwrap(),
        None
    );
    s.block_on(t.put(b"absent", b"now present")).expect("put");
    let info = client
        .metadata()
        .lookup_chain("t", b"absent")
        .unwrap()
        .expect("the write created the chain");
    assert!(info.tail.is_some(), "and published its root");
    // Another client (no caches) finds the root with one lookup.
    let other = fresh(&client, Duration::from_secs(2));
    let s2 = other.session().expect("session");
    let t2 = s2.table("t").expect("table");
    assert_eq!(
        s2.block_on(t2.get(b"absent")).unwrap().unwrap(),
        b"now present"
    );
    // One lookup, after the client's first operation on the table learnt that the
    // table has no chain directory.
    assert_eq!(s2.last_op().metadata_calls, 2);
    assert_eq!(
        s2.block_on(t2.get(b"absent")).unwrap().unwrap(),
        b"now present"
    );
    assert_eq!(s2.last_op().metadata_calls, 0, "cached");
}

#[test]
fn a_creator_that_never_publishes_is_taken_over() {
    let wait = Duration::from_millis(300);
    let client = cluster(wait);
    // A client opened (created) the chain and died before publishing its root.
    let opened = client.metadata().open_chain("t", b"orphan").unwrap();
    assert!(opened.created);
    let s = client.session().expect("session");
    let t = s.table("t").expect("table");
    assert_eq!(
        s.block_on(t.get(b"orphan")),
        Ok(None),
        "a chain without a root holds no completed write"
    );
    // A writer waits `root_wait` for the creator, then publishes its own root.
    let started = Instant::now();
    s.block_on(t.insert(b"orphan", b"v1")).expect("insert");
    let took = started.elapsed();
    assert!(took >= wait, "waited for the creator first ({took:?})");
    assert!(
        took < wait + Duration::from_secs(5),
        "then took over ({took:?})"
    );
    let info = client
        .metadata()
        .lookup_chain("t", b"orphan")
        .unwrap()
        .unwrap();
    let root = info.tail.expect("published");
    // The creator coming back late loses the put-if-absent and learns the winner.
    let late = client
        .metadata()
        .publish_root(
            "t",
            opened.chain_id,
            &kvstore_hint(root.memnode_id, root.va + 4096),
        )
        .unwrap();
    assert!(!late.created);
    assert_eq!(late.tail, root);
    // Everyone else reads and writes through the published root.
    let other = fresh(&client, wait);
    let s2 = other.session().expect("session");
    let t2 = s2.table("t").expect("table");
    assert_eq!(s2.block_on(t2.get(b"orphan")).unwrap().unwrap(), b"v1");
    let started = Instant::now();
    s2.block_on(t2.update(b"orphan", b"v2")).expect("update");
    assert!(started.elapsed() < wait, "no wait once a root is published");
    assert_eq!(s.block_on(t.get(b"orphan")).unwrap().unwrap(), b"v2");
}

fn kvstore_hint(memnode_id: u64, va: u64) -> dmkv_api::metadata::TailHint {
    dmkv_api::metadata::TailHint {
        memnode_id,
        va,
        generation: 0,
    }
}

#[test]
fn racing_publishers_agree_on_one_root() {
    // No wait: every client that is not the creator publishes a root of its own at
    // once, so first writes of a key race on the put-if-absent.
    let client = cluster(Duration::ZERO);
    const THREADS: usize = 4;
    const KEYS: usize = 40;
    let barrier = Arc::new(Barrier::new(THREADS));
    let mut handles = Vec::new();
    for th in 0..THREADS {
        let client = client.clone();
        let barrier = barrier.clone();
        handles.push(std::thread::spawn(move || {
            let s = client.session().expect("session");
            let t = s.table("t").expect("table");
            barrier.wait();
            for k in 0..KEYS {
                let key = format!("race{k}");
                s.block_on(t.put(key.as_bytes(), format!("t{th}").as_bytes()))
                    .expect("every first write succeeds");
            }
            s.quiesce();
            s.memory_stats()
        }));
    }
    for h in handles {
        h.join().expect("thread");
    }
    let s = client.session().expect("session");
    let t = s.table("t").expect("table");
    for k in 0..KEYS {
        let key = format!("race{k}");
        let v = s
            .block_on(t.get(key.as_bytes()))
            .expect("get")
            .expect("a value");
        assert!(
            (0..THREADS).any(|th| v == format!("t{th}").as_bytes()),
            "{key}: {v:?}"
        );
        let info = client
            .metadata()
            .lookup_chain("t", key.as_bytes())
            .unwrap()
            .unwrap();
        assert!(info.tail.is_some());
    }
}

#[test]
fn first_touch_races_are_linearizable() {
    let client = cluster(Duration::ZERO);
    let r = run(
        &client,
        "t",
        Workload {
            threads: 3,
            tasks: 3,
            ops_per_task: 80,
            keys: 60,
            seed: 11,
        },
    );
    let report = check(&r.history, &Config::default()).expect("well-formed history");
    assert!(report.is_linearizable(), "{:?}", report.verdict);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
}
