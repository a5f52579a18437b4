//! RACE duplicate inserts: several threads (one session each, several tasks per
//! session) insert the same keys at the same time while readers read them. An
//! insert is confirmed only after it checked for a concurrent insert of its key
//! (slots are tentative until then, and readers ignore tentative slots), so:
//! exactly one insert per key succeeds, every read returns that insert's value
//! or `NotFound`, never the value of an insert that reported `AlreadyExists`,
//! and the history is linearizable (`testbed::lincheck`).

use std::cell::Cell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use kvstore::{ClientOptions, KvError, TableSpec, TransportKind};
use testbed::EmbeddedOptions;
use testbed::history::{History, Op, Outcome};
use testbed::lincheck::{Config, Verdict, check};

const THREADS: usize = 3;
const INSERTERS: usize = 2;
const READERS: usize = 2;
const KEYS: usize = 150;

struct Results {
    history: History,
    /// Per key: the values of inserts that returned `Ok`, and of those that
    /// returned `AlreadyExists`.
    won: HashMap<String, Vec<Vec<u8>>>,
    lost: HashMap<String, Vec<Vec<u8>>>,
    reads: HashMap<String, Vec<Vec<u8>>>,
    unresolved: Vec<String>,
}

fn race(transport: TransportKind) {
    let client = testbed::embedded_client(EmbeddedOptions {
        memnodes: 2,
        transport,
        client: ClientOptions::default()
            .with_grace(Duration::from_millis(20))
            // One bucket group per subtable: every key shares the same 21 slots
            // until the table splits, so churn of other keys keeps changing which
            // empty slot an insert picks, and concurrent inserts of one key land
            // in different slots (a duplicate to resolve) rather than colliding
            // on one CAS.
            .with_race(kvstore::RaceOptions::default().with_subtable_groups(1)),
        ..EmbeddedOptions::default()
    })
    .expect("cluster");
    client
        .create_table("dup", &TableSpec::race(256))
        .expect("table");
    let results = Arc::new(Mutex::new(Results {
        history: History::new(),
        won: HashMap::new(),
        lost: HashMap::new(),
        reads: HashMap::new(),
        unresolved: Vec::new(),
    }));
    let base = Instant::now();
    let now = move || base.elapsed().as_nanos() as u64;
    let barrier = Arc::new(Barrier::new(THREADS));
    let mut handles = Vec::new();
    for th in 0..THREADS {
        let client = client.clone();
        let results = results.clone();
        let barrier = barrier.clone();
        handles.push(std::thread::spawn(move || {
            let s = client.session().expect("session");
            let t = s.table("dup").expect("table");
            // Bootstrap the table's state before the race starts.
            let _ = s.block_on(t.get(b"warm-up"));
            barrier.wait();
            let left = Rc::new(Cell::new(INSERTERS + READERS));
            for task in 0..INSERTERS + READERS {
                let t = t.clone();
                let results = results.clone();
                let left = left.clone();
                let id = (th * (INSERTERS + READERS) + task) as u64;
                s.spawn(async move {
                    for k in 0..KEYS {
                        let key = format!("dup{k}");
                        if task < INSERTERS {
                            let value = format!("t{th}-{task}-{k}").into_bytes();
                            let op = Op::Insert(value.clone());
                            let h = results.lock().unwrap().history.invoke(
                                id,
                                key.clone().into_bytes(),
                                op,
                                now(),
                            );
                            let r = t.insert(key.as_bytes(), &value).await;
                            let at = now();
                            let mut g = results.lock().unwrap();
                            match r {
                                Ok(()) => {
                                    g.history.respond(h, at, Outcome::Ok).unwrap();
                                    g.won.entry(key).or_default().push(value);
                                }
                                Err(KvError::AlreadyExists) => {
                                    g.history.respond(h, at, Outcome::AlreadyExists).unwrap();
                                    g.lost.entry(key).or_default().push(value);
                                }
                                Err(e) => g.unresolved.push(format!("insert {key}: {e}")),
                            }
                        } else {
                            // Churn: a key of this task's own comes and goes.
                            let mine = format!("churn{id}");
                            if k % 2 == 0 {
                                let _ = t.put(mine.as_bytes(), b"x").await;
                            } else {
                                let _ = t.delete(mine.as_bytes()).await;
                            }
                            for _ in 0..3 {
                                let h = results.lock().unwrap().history.invoke(
                                    id,
                                    key.clone().into_bytes(),
                                    Op::Get,
                                    now(),
                                );
                                let r = t.get(key.as_bytes()).await;
                                let at = now();
                                let mut g = results.lock().unwrap();
                                match r {
                                    Ok(Some(v)) => {
                                        g.history
                                            .respond(h, at, Outcome::Value(v.clone()))
                                            .unwrap();
                                        g.reads.entry(key.clone()).or_default().push(v);
                                    }
                                    Ok(None) => {
                                        g.history.respond(h, at, Outcome::NotFound).unwrap();
                                    }
                                    Err(e) => g.unresolved.push(format!("get {key}: {e}")),
                                }
                            }
                        }
                    }
                    left.set(left.get() - 1);
                });
            }
            let worker = s.worker().clone();
            s.block_on(async move {
                while left.get() > 0 {
                    worker.sleep(Duration::from_micros(100)).await;
                }
            });
            s.quiesce();
            s.stats()
        }));
    }
    let mut cas_failures = 0;
    for h in handles {
        cas_failures += h.join().expect("thread").foreground.cas_failures;
    }
    let r = Arc::try_unwrap(results)
        .ok()
        .expect("results")
        .into_inner()
        .unwrap();
    let lost: usize = r.lost.values().map(Vec::len).sum();
    println!(
        "[{transport}] {} operations, {lost} inserts lost to a concurrent insert, {cas_failures} \
         slot CAS failures, {} unresolved",
        r.history.len(),
        r.unresolved.len()
    );
    assert!(r.unresolved.is_empty(), "{:?}", r.unresolved);
    for k in 0..KEYS {
        let key = format!("dup{k}");
        let won = r.won.get(&key).cloned().unwrap_or_default();
        assert_eq!(won.len(), 1, "{key}: exactly one insert succeeds: {won:?}");
        for v in r.reads.get(&key).into_iter().flatten() {
            assert_eq!(
                v,
                &won[0],
                "{key}: a read returned {:?}, not the successful insert's value",
                String::from_utf8_lossy(v)
            );
        }
    }
    assert!(lost > 0, "inserts did race");
    let report = check(&r.history, &Config::default()).expect("well-formed history");
    if let Verdict::Violation(v) = &report.verdict {
        panic!("[{transport}] not linearizable:\n{v}");
    }
    assert!(report.is_linearizable(), "{:?}", report.verdict);
    // A fresh session agrees.
    let s = client.session().expect("session");
    let t = s.table("dup").expect("table");
    for k in 0..KEYS {
        let key = format!("dup{k}");
        assert_eq!(
            s.block_on(t.get(key.as_bytes())).expect("get"),
            Some(r.won[&key][0].clone())
        );
    }
}

#[test]
fn racing_inserts_of_one_key_local() {
    race(TransportKind::Local);
}

#[test]
fn racing_inserts_of_one_key_udp() {
    race(TransportKind::Udp);
}
