//! Clover's one-sided insert path: a new key's chain is claimed by CAS in the
//! table's chain directory, with chain ids leased in blocks and the mappings
//! published to the metadata service in batches — far fewer than one metadata
//! call per insert, one chain per key however many clients race for it, nothing a
//! crashed client leaves behind in anyone's way, and key listings that see it all.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use dmkv_api::HttpClient;
use dmkv_api::metadata::{PublishedChain, TailHint};
use kvstore::{Client, ClientOptions, CloverOptions, KvError, TableSpec, TransportKind};
use testbed::EmbeddedOptions;
use testbed::lincheck::{Config, check};
use testbed::workload::{Workload, run};

fn options(clover: CloverOptions) -> ClientOptions {
    ClientOptions::with_transport(TransportKind::Udp).with_clover(clover)
}

fn cluster(clover: CloverOptions) -> Client {
    let client = testbed::embedded_client(EmbeddedOptions {
        memnodes: 2,
        capacity: 64 << 20,
        transport: TransportKind::Udp,
        client: options(clover),
        prefault: false,
    })
    .expect("cluster");
    client
        .create_table("t", &TableSpec::clover(256))
        .expect("table");
    client
}

/// Another client of the same cluster, with caches and a chain id block of its own.
fn fresh(client: &Client, clover: CloverOptions) -> Client {
    Client::connect(&client.metadata_url(), options(clover)).expect("client")
}

/// Every HTTP request the metadata service has answered so far (its own counter),
/// leaving out scrapes of `/metrics`.
fn metadata_requests(client: &Client) -> u64 {
    let http = HttpClient::new(&client.metadata_url()).expect("http client");
    let r = http.request("GET", "/metrics", None).expect("metrics");
    assert_eq!(r.status, 200);
    String::from_utf8(r.body)
        .expect("text")
        .lines()
        .filter(|l| l.starts_with("dmkv_metadata_requests_total{") && !l.contains("/metrics"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// The service's listing of table `t` (one page: the tests list fewer than 1000
/// keys), as base64 key → chain id.
fn service_keys(client: &Client) -> BTreeMap<String, u64> {
    let page = client
        .metadata()
        .chain_keys("t", b"", None, 1000)
        .expect("keys");
    assert_eq!(page.next_after, None);
    let mut out = BTreeMap::new();
    for k in page.keys {
        assert!(
            out.insert(k.key, k.chain_id).is_none(),
            "a key listed twice"
        );
    }
    out
}

/// `key` as the service lists it (standard base64).
fn b64(key: &str) -> String {
    PublishedChain::new(
        key.as_bytes(),
        1,
        TailHint {
            memnode_id: 0,
            va: 0,
            generation: 0,
        },
    )
    .key
}

#[test]
fn inserts_make_far_fewer_metadata_calls_than_keys() {
    let client = cluster(CloverOptions::default());
    let s = client.session().expect("session");
    let t = s.table("t").expect("table");
    // Warm up: the directory, the first chain id block, the first memory chunks.
    s.block_on(t.insert(b"warm", b"up")).expect("insert");
    let before = metadata_requests(&client);
    const N: u64 = 2000;
    let mut counted = 0;
    for i in 0..N {
        s.block_on(t.insert(format!("user{i:06}").as_bytes(), b"value"))
            .expect("insert");
        counted += s.last_op().metadata_calls;
    }
    let http = metadata_requests(&client) - before;
    println!("{N} inserts: {counted} metadata calls by the operations, {http} HTTP requests");
    // Publishing in batches of 4096 is one call at most; leases of memory chunks a few more.
    assert!(
        counted <= N / 100,
        "{counted} metadata calls for {N} inserts"
    );
    assert!(http <= N / 50, "{http} HTTP requests for {N} inserts");
    // Nothing on the metadata path was asked for: no chain opened per key.
    assert!(
        client.metadata().lookup_chain("t", b"user000000").is_ok(),
        "the service answers lookups"
    );
}

/// With many inserts in flight on one session, mappings queued while a batch is
/// being published wait for their own full batch: they are not published a few at
/// a time behind it.
#[test]
fn concurrent_inserts_publish_in_full_batches() {
    let client = cluster(CloverOptions::default());
    let s = client.session().expect("session");
    let t = s.table("t").expect("table");
    s.block_on(t.insert(b"warm", b"up")).expect("insert");
    let before = metadata_requests(&client);
    const LOOPS: u64 = 8;
    const N: u64 = 2048;
    let done = std::rc::Rc::new(std::cell::Cell::new(0u64));
    for l in 0..LOOPS {
        let (t, done) = (t.clone(), done.clone());
        s.spawn(async move {
            for i in (l..N).step_by(LOOPS as usize) {
                t.insert(format!("user{i:06}").as_bytes(), b"value")
                    .await
                    .expect("insert");
            }
            done.set(done.get() + 1);
        });
    }
    s.block_on(std::future::poll_fn(|cx| {
        if done.get() == LOOPS {
            std::task::Poll::Ready(())
        } else {
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    }));
    let http = metadata_requests(&client) - before;
    println!("{N} inserts, {LOOPS} in flight: {http} HTTP requests");
    // At most a batch (2048 < 4096, unless the 1 s delay passes), a few chunk leases
    // and chain id blocks beside them (a flush that kept publishing what arrived
    // meanwhile made hundreds).
    assert!(http <= 24, "{http} HTTP requests for {N} inserts");
    assert_eq!(
        s.block_on(t.get(b"user000777")),
        Ok(Some(b"value".to_vec()))
    );
}

#[test]
fn a_new_keys_first_write_is_its_claim_in_two_round_trips() {
    // One memory node: the directory, the root and the node share a queue pair.
    let client = testbed::embedded_client(EmbeddedOptions {
        memnodes: 1,
        capacity: 64 << 20,
        transport: TransportKind::Udp,
        client: options(CloverOptions::default()),
        prefault: false,
    })
    .expect("cluster");
    client
        .create_table("t", &TableSpec::clover(256))
        .expect("table");
    let s = client.session().expect("session");
    let t = s.table("t").expect("table");
    s.block_on(t.insert(b"warm", b"up")).expect("insert");
    for i in 0..50 {
        let key = format!("new{i}");
        s.block_on(t.insert(key.as_bytes(), key.as_bytes()))
            .expect("insert");
        let op = s.last_op();
        // READ the bucket; WRITE node and root and CAS the slot in one doorbell.
        assert_eq!(op.round_trips, 2, "{key}: {op:?}");
        assert_eq!(op.metadata_calls, 0, "{key}");
        let put = format!("put{i}");
        s.block_on(t.put(put.as_bytes(), b"first")).expect("put");
        assert_eq!(s.last_op().round_trips, 2, "{put}");
    }
    // The first version is the value: this session, another client, later versions.
    let other = fresh(&client, CloverOptions::default());
    let o = other.session().expect("session");
    let ot = o.table("t").expect("table");
    for i in 0..50 {
        let key = format!("new{i}");
        assert_eq!(
            s.block_on(t.get(key.as_bytes())).expect("get"),
            Some(key.clone().into_bytes())
        );
        assert_eq!(
            o.block_on(ot.get(key.as_bytes())).expect("get"),
            Some(key.clone().into_bytes())
        );
        assert!(matches!(
            o.block_on(ot.insert(key.as_bytes(), b"again")),
            Err(KvError::AlreadyExists)
        ));
        o.block_on(ot.update(key.as_bytes(), b"second"))
            .expect("update");
        assert_eq!(
            s.block_on(t.get(key.as_bytes())).expect("get"),
            Some(b"second".to_vec())
        );
        s.block_on(t.delete(format!("put{i}").as_bytes()))
            .expect("delete");
        assert_eq!(
            o.block_on(ot.get(format!("put{i}").as_bytes()))
                .expect("get"),
            None
        );
    }
    // Updates and deletes of keys that never existed still fail, creating nothing visible.
    assert!(matches!(
        s.block_on(t.update(b"never", b"x")),
        Err(KvError::NotFound)
    ));
    assert_eq!(o.block_on(ot.get(b"never")).expect("get"), None);
}

#[test]
fn racing_first_inserts_of_the_same_keys_end_with_one_chain() {
    const CLIENTS: usize = 4;
    const KEYS: usize = 60;
    let first = cluster(CloverOptions::default());
    let mut clients = vec![first.clone()];
    for _ in 1..CLIENTS {
        clients.push(fresh(&first, CloverOptions::default()));
    }
    let barrier = Arc::new(Barrier::new(CLIENTS));
    let mut handles = Vec::new();
    for (c, client) in clients.iter().enumerate() {
        let client = client.clone();
        let barrier = barrier.clone();
        handles.push(std::thread::spawn(move || {
            let s = client.session().expect("session");
            let t = s.table("t").expect("table");
            barrier.wait();
            let mut won = Vec::new();
            for k in 0..KEYS {
                let key = format!("race{k}");
                match s.block_on(t.insert(key.as_bytes(), format!("c{c}").as_bytes())) {
                    Ok(()) => won.push(k),
                    Err(KvError::AlreadyExists) => {}
                    Err(e) => panic!("{key}: {e}"),
                }
            }
            // Publishes what this client claimed.
            s.block_on(t.keys(b"", None)).expect("keys");
            won
        }));
    }
    let mut winners = vec![0; KEYS];
    for h in handles {
        for k in h.join().expect("thread") {
            winners[k] += 1;
        }
    }
    assert!(winners.iter().all(|w| *w == 1), "{winners:?}");
    // Every client reads the one value each key has.
    let values: Vec<Vec<Option<Vec<u8>>>> = clients
        .iter()
        .map(|c| {
            let s = c.session().expect("session");
            let t = s.table("t").expect("table");
            (0..KEYS)
                .map(|k| {
                    s.block_on(t.get(format!("race{k}").as_bytes()))
                        .expect("get")
                })
                .collect()
        })
        .collect();
    assert!(values.iter().all(|v| *v == values[0]));
    assert!(values[0].iter().all(Option::is_some));
    // The service lists each key once, with one chain, and chain ids are distinct.
    let listed = service_keys(&first);
    assert_eq!(listed.len(), KEYS);
    let ids: BTreeSet<u64> = listed.values().copied().collect();
    assert_eq!(ids.len(), KEYS);
}

#[test]
fn racing_first_touches_through_the_directory_are_linearizable() {
    let client = cluster(CloverOptions::default());
    let r = run(
        &client,
        "t",
        Workload {
            threads: 3,
            tasks: 3,
            ops_per_task: 80,
            keys: 40,
            seed: 23,
        },
    );
    let report = check(&r.history, &Config::default()).expect("well-formed history");
    assert!(report.is_linearizable(), "{:?}", report.verdict);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
}

#[test]
fn a_client_that_crashes_mid_block_is_in_nobodys_way() {
    // Publishing only in batches of 10 000: the crashed client publishes nothing.
    let quiet = CloverOptions::default().with_publishing(10_000, Duration::from_secs(3600));
    let client = cluster(CloverOptions::default());
    let crashed = fresh(&client, quiet);
    {
        let s = crashed.session().expect("session");
        let t = s.table("t").expect("table");
        for i in 0..10 {
            s.block_on(t.insert(format!("early{i}").as_bytes(), b"v"))
                .expect("insert");
        }
        // Stops as a crash would, without publishing: most of its block of chain
        // ids is unused.
        s.abandon();
    }
    drop(crashed);
    let s = client.session().expect("session");
    let t = s.table("t").expect("table");
    for i in 0..10 {
        let key = format!("early{i}");
        // Its keys are there for everyone (the directory names them) …
        assert_eq!(
            s.block_on(t.get(key.as_bytes())).unwrap().as_deref(),
            Some(&b"v"[..])
        );
        assert_eq!(
            s.block_on(t.insert(key.as_bytes(), b"again")),
            Err(KvError::AlreadyExists)
        );
        s.block_on(t.put(key.as_bytes(), b"updated")).expect("put");
    }
    for i in 0..20 {
        s.block_on(t.insert(format!("late{i}").as_bytes(), b"w"))
            .expect("insert");
    }
    s.block_on(t.keys(b"", None)).expect("keys");
    // … the service lists what the live client published, under chain ids no
    // other client was given; the crashed client's keys stay unlisted.
    let listed = service_keys(&client);
    assert_eq!(listed.len(), 20, "{listed:?}");
    let late: BTreeSet<String> = (0..20).map(|i| b64(&format!("late{i}"))).collect();
    assert_eq!(listed.keys().cloned().collect::<BTreeSet<_>>(), late);
    let ids: BTreeSet<u64> = listed.values().copied().collect();
    assert_eq!(ids.len(), 20);
}

#[test]
fn key_listings_see_published_batches() {
    let batched = CloverOptions::default().with_publishing(100, Duration::from_secs(3600));
    let client = cluster(batched.clone());
    let other = fresh(&client, batched);
    let s = client.session().expect("session");
    let t = s.table("t").expect("table");
    for i in 0..250 {
        s.block_on(t.insert(format!("k{i:03}").as_bytes(), b"v"))
            .expect("insert");
    }
    // Two batches of 100 are published; 50 wait for the next.
    assert_eq!(service_keys(&client).len(), 200);
    // Another client's listing shows what the service has …
    let s2 = other.session().expect("session");
    let t2 = s2.table("t").expect("table");
    assert_eq!(s2.block_on(t2.keys(b"", None)).unwrap().len(), 200);
    // … and reads everything, published or not.
    assert_eq!(
        s2.block_on(t2.get(b"k249")).unwrap().as_deref(),
        Some(&b"v"[..])
    );
    // The inserting client publishes its own before listing.
    let keys = s.block_on(t.keys(b"", None)).unwrap();
    assert_eq!(keys.len(), 250);
    assert_eq!(service_keys(&client).len(), 250);
    assert_eq!(s2.block_on(t2.keys(b"k24", None)).unwrap().len(), 10);
}

#[test]
fn the_oldest_waiting_mapping_is_published_after_the_delay() {
    let client =
        cluster(CloverOptions::default().with_publishing(10_000, Duration::from_millis(200)));
    let s = client.session().expect("session");
    let t = s.table("t").expect("table");
    s.block_on(t.insert(b"a", b"1")).expect("insert");
    s.block_on(t.insert(b"b", b"2")).expect("insert");
    assert_eq!(service_keys(&client).len(), 0);
    std::thread::sleep(Duration::from_millis(250));
    s.block_on(t.insert(b"c", b"3")).expect("insert");
    assert_eq!(service_keys(&client).len(), 3);
}

#[test]
fn a_client_declining_the_directory_keeps_the_table_on_the_metadata_path() {
    let client = cluster(CloverOptions::default().with_chain_directory(false));
    let s = client.session().expect("session");
    let t = s.table("t").expect("table");
    s.block_on(t.put(b"k", b"v")).expect("put");
    assert!(s.last_op().metadata_calls >= 2, "open and publish");
    // A client that would take the directory follows the table's choice.
    let other = fresh(&client, CloverOptions::default());
    let s2 = other.session().expect("session");
    let t2 = s2.table("t").expect("table");
    assert_eq!(
        s2.block_on(t2.insert(b"k", b"w")),
        Err(KvError::AlreadyExists)
    );
    s2.block_on(t2.put(b"k2", b"w")).expect("put");
    assert!(
        client
            .metadata()
            .lookup_chain("t", b"k2")
            .unwrap()
            .is_some()
    );
    let e = client.metadata().chain_directory("t", true).unwrap_err();
    assert_eq!(e.code(), Some("chain_directory_unavailable"));
}

#[test]
fn a_closing_session_publishes_what_its_client_claimed() {
    let client =
        cluster(CloverOptions::default().with_publishing(10_000, Duration::from_secs(3600)));
    {
        let s = client.session().expect("session");
        let t = s.table("t").expect("table");
        for i in 0..5 {
            s.block_on(t.insert(format!("k{i}").as_bytes(), b"v"))
                .expect("insert");
        }
        assert_eq!(service_keys(&client).len(), 0);
    }
    // Closed (as a command-line client does when it exits): listed at once.
    assert_eq!(service_keys(&client).len(), 5);
}

/// Mappings of long keys are published in calls whose bodies the service takes (at
/// most 1 MiB): 2500 keys of 250 bytes make more than one call's worth.
#[test]
fn long_keys_are_published_in_calls_the_service_takes() {
    let quiet = CloverOptions::default().with_publishing(10_000, Duration::from_secs(3600));
    let client = cluster(quiet);
    let s = client.session().expect("session");
    let t = s.table("t").expect("table");
    const N: usize = 2500;
    let key = |i: usize| format!("{i:05}{}", "k".repeat(245));
    for i in 0..N {
        s.block_on(t.insert(key(i).as_bytes(), b"v"))
            .expect("insert");
    }
    // The listing publishes whatever still waits first, and fails if a call does.
    let listed = s.block_on(t.keys(b"", None)).expect("keys");
    assert_eq!(listed.len(), N);
    let mut served = 0;
    let mut after: Option<Vec<u8>> = None;
    loop {
        let page = client
            .metadata()
            .chain_keys("t", b"", after.as_deref(), 1000)
            .expect("keys");
        served += page.keys.len();
        if page.next_after.is_none() || page.keys.is_empty() {
            break;
        }
        // Keys list in byte order: the page ended at the `served`-th.
        after = Some(key(served - 1).into_bytes());
    }
    assert_eq!(served, N, "the service lists every key");
}
