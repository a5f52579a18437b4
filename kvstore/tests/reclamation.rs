//! Reclamation under a hammer: writers update one key thousands of times while
//! readers hold stale hints (they pause between reads, so the node they last saw
//! is superseded, reclaimed and reused). Memory stays bounded — superseded nodes
//! are reused after the grace period instead of new memory being carved — and no
//! reader ever returns data from a reused node: every value read is one a writer
//! wrote, and per writer the values a reader sees never go back in time.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kvstore::{ClientOptions, TableSpec, TransportKind};
use testbed::EmbeddedOptions;

const WRITERS: usize = 2;
const UPDATES: usize = 2500;
const GRACE: Duration = Duration::from_millis(5);
/// Writers go on past `UPDATES` until this much time has passed: replaced nodes
/// wait a grace period before reuse, so "memory stays bounded" needs a run many
/// grace periods long, however fast the machine writes (a fast writer otherwise
/// finishes its updates within a few grace periods, most of its nodes still
/// waiting).
const MIN_RUN: Duration = Duration::from_millis(250);

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

fn options(transport: TransportKind) -> ClientOptions {
    ClientOptions::with_transport(transport)
        .with_grace(GRACE)
        // Patient retransmission: the memory node's thread may stay descheduled
        // longer than the default 7 × 10 ms on a loaded machine.
        .with_rc(verbs::rc::RcConfig {
            retransmit_timeout: Duration::from_millis(20),
            max_retries: 30,
            ..verbs::rc::RcConfig::default()
        })
}

/// A client of `embedded` (memory reached in process over `local`).
fn client_of(embedded: &testbed::Embedded, transport: TransportKind) -> kvstore::Client {
    kvstore::Client::in_process(
        &embedded.metadata_url(),
        options(transport),
        embedded.local_memory(),
        Box::new(()),
    )
    .expect("client")
}

fn hammer(transport: TransportKind) {
    let embedded = testbed::Embedded::start(&EmbeddedOptions {
        memnodes: 1,
        transport,
        client: options(transport),
        ..EmbeddedOptions::default()
    })
    .expect("cluster");
    let client = client_of(&embedded, transport);
    client
        .create_table("h", &TableSpec::clover(512))
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
        // A client of its own: a session starts from the latest tail another session
        // of its client saw, so the writers' client's readers would hold no stale
        // hints.
        let client = client_of(&embedded, transport);
        let done = done.clone();
        readers.push(std::thread::spawn(move || {
            let s = client.session().expect("session");
            let t = s.table("h").expect("table");
            let mut last = [0usize; WRITERS];
            let mut reads = 0u64;
            while !done.load(Ordering::Relaxed) {
                let v = s.block_on(t.get(b"hammer")).expect("get").expect("a value");
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
            while seq < UPDATES || started.elapsed() < MIN_RUN {
                seq += 1;
                s.block_on(t.update(b"hammer", &value(w, seq)))
                    .expect("update");
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
            "[{transport}] reader: {reads} reads, {} stale hints rejected, {} restarts, {} round trips",
            stats.foreground.stale_hints, stats.foreground.restarts, stats.foreground.round_trips
        );
        rejected += stats.foreground.stale_hints + stats.foreground.restarts;
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
    assert!(
        superseded < 64,
        "few superseded nodes wait for the shortcut ({superseded})"
    );
    assert!(
        rejected > 0,
        "readers met pointers into reclaimed memory and rejected them"
    );
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
fn hammer_local() {
    hammer(TransportKind::Local);
}

#[test]
fn hammer_udp() {
    hammer(TransportKind::Udp);
}
