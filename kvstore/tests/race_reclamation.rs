//! RACE reclamation under a hammer: writers replace (and now and then delete and
//! re-insert) one key thousands of times while readers read it, pausing between
//! reads. Replaced and deleted KV blocks are handed back and reused after the
//! grace period, so memory stays bounded (few objects carved for thousands of
//! writes), and no reader ever returns data from a reused block — blocks carry a
//! CRC and the key, and a block read a grace period after its bucket READ is
//! discarded: every value read is one a writer wrote, and per writer the values a
//! reader sees never go back in time.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kvstore::{ClientOptions, TableSpec, TransportKind};
use testbed::EmbeddedOptions;

const WRITERS: usize = 2;
const UPDATES: usize = 3500;
const GRACE: Duration = Duration::from_millis(5);
/// Over `udp`, writers go on past `UPDATES` until this much time has passed: a
/// replaced block waits for stale CASes to die (about 270 ms with these queue-pair
/// settings) before reuse, so "memory stays bounded" needs a run many such waits
/// long however fast the machine writes (a fast writer otherwise finishes while a
/// third of its blocks are still waiting). `local` applies verbs at once: its
/// blocks wait only the grace period, and its runs last many of those.
const MIN_RUN_UDP: Duration = Duration::from_millis(4000);
const MIN_RUN_LOCAL: Duration = Duration::from_millis(250);

fn value(writer: usize, seq: usize) -> Vec<u8> {
    // Sizes vary so reused memory holds nodes of other lengths too.
    let pad = 20 + (seq * 37) % 150;
    let mut v = format!("w{writer}:{seq:08}:").into_bytes();
    v.extend(std::iter::repeat_n(b'a' + (seq % 26) as u8, pad));
    v
}

/// (writer, seq) of a value, if it is exactly one a writer wrote.
fn parse(v: &[u8]) -> Option<(usize, usize)> {
    let s = std::str::from_utf8(v).ok()?;
    let mut parts = s.splitn(3, ':');
    let writer: usize = parts.next()?.strip_prefix('w')?.parse().ok()?;
    let seq: usize = parts.next()?.parse().ok()?;
    (value(writer, seq) == v).then_some((writer, seq))
}

fn hammer(transport: TransportKind) {
    let client = testbed::embedded_client(EmbeddedOptions {
        transport,
        client: ClientOptions::default()
            .with_grace(GRACE)
            // A search discards a block read more than GRACE after its bucket READ;
            // with a 5-ms grace, every attempt of a search can be late on a busy
            // two-core machine (the memory node's thread is descheduled between the
            // two reads), so readers may restart far more often than the default
            // allows. This test is about what they return, not how fast.
            .with_retry(kvstore::RetryOptions::default().with_max_restarts(100_000))
            // Patient retransmission (a queue pair gives up after 3.8 s without
            // progress, not 1.9 s): the memory node's thread may stay descheduled for
            // long on a loaded machine. Over udp, replaced blocks then wait a
            // sixteenth of that window plus the packet lifetime (270 ms) before reuse,
            // so that a stale CAS can never match a reused block.
            .with_rc(verbs::rc::RcConfig {
                retransmit_timeout: Duration::from_millis(20),
                max_retries: 7,
                ..verbs::rc::RcConfig::default()
            }),
        memnodes: 2,
        ..EmbeddedOptions::default()
    })
    .expect("cluster");
    client
        .create_table("h", &TableSpec::race(512))
        .expect("table");
    {
        let s = client.session().expect("session");
        let t = s.table("h").expect("table");
        s.block_on(t.put(b"hammer", &value(0, 0))).expect("seed");
        s.quiesce();
    }
    let done = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for r in 0..2u64 {
        let client = client.clone();
        let done = done.clone();
        readers.push(std::thread::spawn(move || {
            let s = client.session().expect("session");
            let t = s.table("h").expect("table");
            let mut last = [0usize; WRITERS];
            let mut reads = 0u64;
            while !done.load(Ordering::Relaxed) {
                let v = match s.block_on(t.get(b"hammer")) {
                    Ok(Some(v)) => v,
                    Ok(None) => {
                        reads += 1;
                        continue;
                    }
                    Err(e) => panic!("reader {r}: {e}"),
                };
                let (w, seq) = parse(&v).unwrap_or_else(|| {
                    panic!(
                        "reader {r} got a value nobody wrote: {:?}",
                        String::from_utf8_lossy(&v)
                    )
                });
                assert!(
                    seq >= last[w],
                    "reader {r}: writer {w} went back from {} to {seq}",
                    last[w]
                );
                last[w] = seq;
                reads += 1;
                // Hold the hint while the writers supersede its node, and now and
                // then long enough for the node to be reclaimed and reused.
                let pause = if reads.is_multiple_of(8) {
                    4 * GRACE
                } else {
                    Duration::from_micros(500 + 1500 * r)
                };
                std::thread::sleep(pause);
            }
            s.quiesce();
            (reads, s.stats())
        }));
    }
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let client = client.clone();
        writers.push(std::thread::spawn(move || {
            let s = client.session().expect("session");
            let t = s.table("h").expect("table");
            let started = std::time::Instant::now();
            let mut seq = 0;
            let min_run = match transport {
                TransportKind::Udp => MIN_RUN_UDP,
                _ => MIN_RUN_LOCAL,
            };
            while seq < UPDATES || started.elapsed() < min_run {
                seq += 1;
                if w == 1 && seq % 64 == 0 {
                    // Deleted blocks are reclaimed too.
                    match s.block_on(t.delete(b"hammer")) {
                        Ok(()) | Err(kvstore::KvError::NotFound) => {}
                        Err(e) => panic!("delete: {e}"),
                    }
                }
                s.block_on(t.put(b"hammer", &value(w, seq))).expect("put");
            }
            s.quiesce();
            (s.stats(), s.memory_stats(), seq)
        }));
    }
    let mut carved = 0;
    let mut reused = 0;
    let mut superseded = 0;
    let mut last = [0usize; WRITERS];
    for (w, h) in writers.into_iter().enumerate() {
        let (stats, mem, wrote) = h.join().expect("writer");
        last[w] = wrote;
        println!(
            "[{transport}] writer: {mem:?}; {} link CAS failures",
            stats.foreground.cas_failures
        );
        carved += mem.carved;
        reused += mem.reused;
        superseded += mem.superseded;
    }
    done.store(true, Ordering::Relaxed);
    let mut rejected = 0;
    for h in readers {
        let (reads, stats) = h.join().expect("reader");
        println!(
            "[{transport}] reader: {reads} reads, {} restarts, {} round trips",
            stats.foreground.restarts, stats.foreground.round_trips
        );
        rejected += stats.foreground.restarts;
    }
    let updates = last.iter().sum::<usize>() as u64;
    assert!(
        reused > updates / 2,
        "superseded nodes are reused ({reused} of {updates})"
    );
    assert!(
        carved < updates / 4,
        "memory stays bounded: {carved} objects carved for {updates} updates"
    );
    assert_eq!(superseded, 0, "RACE blocks do not wait for a shortcut");
    println!("[{transport}] readers restarted {rejected} times");
    // A fresh session reads the last value of one of the writers.
    let s = client.session().expect("session");
    let t = s.table("h").expect("table");
    let v = s
        .block_on(t.get(b"hammer"))
        .expect("final get")
        .expect("a value");
    let (w, seq) = parse(&v).expect("a value a writer wrote");
    assert_eq!(seq, last[w], "the last value of writer {w}");
}

#[test]
fn race_hammer_local() {
    hammer(TransportKind::Local);
}

#[test]
fn race_hammer_udp() {
    hammer(TransportKind::Udp);
}
