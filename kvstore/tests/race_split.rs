//! RACE subtable splitting under concurrency: a table that starts as one
//! four-group subtable (84 slots) is filled with 20 000 keys by four threads, so
//! it splits hundreds of times while the writers keep inserting. Meanwhile reader
//! threads search keys whose insert had already been acknowledged when the search
//! started: none may be missed, and each must have its value. Afterwards every key
//! is found, from the writers' sessions (caches updated along the way) and from a
//! fresh one.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use verbs::rc::RcConfig;

use kvstore::{ClientOptions, TableSpec, TransportKind};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use testbed::EmbeddedOptions;

fn key(writer: usize, i: usize) -> Vec<u8> {
    format!("w{writer}-key-{i:06}").into_bytes()
}

fn value(writer: usize, i: usize) -> Vec<u8> {
    let mut v = format!("value of {writer}/{i}:").into_bytes();
    v.extend(std::iter::repeat_n(b'a' + (i % 26) as u8, i % 90));
    v
}

/// The `udp` queue pairs give up only after 30 retransmissions starting at 20 ms:
/// this test runs tens of thousands of round trips from five threads on a shared
/// two-core machine, where a memory node's thread can stay descheduled for longer
/// than the default budget (seven retransmissions backing off from 10 ms).
fn patient_rc() -> RcConfig {
    RcConfig {
        retransmit_timeout: Duration::from_millis(20),
        max_retries: 30,
        ..RcConfig::default()
    }
}

fn fill(transport: TransportKind, writers: usize, per_writer: usize) {
    let client = testbed::embedded_client(EmbeddedOptions {
        memnodes: 2,
        capacity: 128 << 20,
        transport,
        client: ClientOptions::default()
            .with_race(kvstore::RaceOptions::default().with_subtable_groups(4))
            .with_rc(patient_rc()),
        prefault: false,
    })
    .expect("cluster");
    client
        .create_table("grow", &TableSpec::race(256))
        .expect("table");
    let acked: Arc<Vec<AtomicUsize>> =
        Arc::new((0..writers).map(|_| AtomicUsize::new(0)).collect());
    let done = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let mut readers = Vec::new();
    for r in 0..2u64 {
        let client = client.clone();
        let acked = acked.clone();
        let done = done.clone();
        readers.push(std::thread::spawn(move || {
            let s = client.session().expect("session");
            let t = s.table("grow").expect("table");
            let mut rng = SmallRng::seed_from_u64(r);
            let mut searches = 0u64;
            while !done.load(Ordering::Relaxed) {
                let w = rng.random_range(0..acked.len());
                let n = acked[w].load(Ordering::Acquire);
                if n == 0 {
                    std::thread::yield_now();
                    continue;
                }
                // Recent keys are the interesting ones (their subtables split now).
                let i = n - 1 - rng.random_range(0..n.min(200));
                let got = s.block_on(t.get(&key(w, i)));
                assert_eq!(
                    got,
                    Ok(Some(value(w, i))),
                    "reader {r}: key {w}/{i}, acknowledged before the search started"
                );
                searches += 1;
            }
            (searches, s.stats())
        }));
    }
    let mut handles = Vec::new();
    for w in 0..writers {
        let client = client.clone();
        let acked = acked.clone();
        handles.push(std::thread::spawn(move || {
            let s = client.session().expect("session");
            let t = s.table("grow").expect("table");
            for i in 0..per_writer {
                s.block_on(t.insert(&key(w, i), &value(w, i)))
                    .unwrap_or_else(|e| {
                        panic!(
                            "insert {w}/{i}: {e}; last op {:?}; transport {:?}",
                            s.last_op(),
                            s.transport_stats()
                        )
                    });
                acked[w].store(i + 1, Ordering::Release);
            }
            // This session's cache saw many splits: every key is still found.
            for i in 0..per_writer {
                assert_eq!(
                    s.block_on(t.get(&key(w, i))),
                    Ok(Some(value(w, i))),
                    "{w}/{i}"
                );
            }
            s.stats()
        }));
    }
    let mut total = kvstore::OpStats::default();
    for h in handles {
        let st = h.join().expect("writer");
        total.add(&st.foreground);
    }
    done.store(true, Ordering::Relaxed);
    let mut searches = 0;
    for h in readers {
        let (n, st) = h.join().expect("reader");
        searches += n;
        println!("[{transport}] reader: {n} searches, {:?}", st.foreground);
    }
    let n = writers * per_writer;
    println!(
        "[{transport}] {n} inserts by {writers} threads in {:?}: {} round trips, {} CAS failures, \
         {} restarts, {} metadata calls; {searches} concurrent searches",
        started.elapsed(),
        total.round_trips,
        total.cas_failures,
        total.restarts,
        total.metadata_calls
    );
    assert!(searches > 0, "readers ran during the fill");
    // A fresh session (cold cache) finds everything; absent keys stay absent.
    let s = client.session().expect("session");
    let t = s.table("grow").expect("table");
    s.block_on(async {
        for w in 0..writers {
            for i in 0..per_writer {
                assert_eq!(t.get(&key(w, i)).await, Ok(Some(value(w, i))), "{w}/{i}");
            }
        }
        assert_eq!(t.get(b"never inserted").await, Ok(None));
        // Writes keep working on the grown table.
        t.update(&key(0, 0), b"updated").await.expect("update");
        assert_eq!(t.get(&key(0, 0)).await, Ok(Some(b"updated".to_vec())));
        t.delete(&key(0, 1)).await.expect("delete");
        assert_eq!(t.get(&key(0, 1)).await, Ok(None));
    });
    // Warm cache, no split in progress: a search is two round trips again (one when
    // the client found the key's block before and it sits beside the buckets).
    s.block_on(t.get(&key(1, 7))).expect("get");
    assert!((1..=2).contains(&s.last_op().round_trips));
}

#[test]
fn race_split_fill_local() {
    fill(TransportKind::Local, 4, 5000);
}

#[test]
fn race_split_fill_udp() {
    fill(TransportKind::Udp, 3, 1500);
}
