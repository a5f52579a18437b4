//! Figures of the two indexes: throughput and latency of GET and PUT for Clover
//! and RACE tables over the `local`, `shm` and `udp` transports, with 1 and 2
//! client threads (one session per thread, several tasks per session), plus the
//! exact protocol costs from the session counters (round trips and RoCE bytes per
//! operation) and the memory leased per key.
//!
//! ```text
//! cargo run --release -p testbed --example kv_figures [-- --keys N --secs S --tasks T] [--results-md PATH]
//! ```
//!
//! With `--results-md PATH` the table is also written as a Markdown results page (date,
//! machine, command line) to `PATH`, replacing it.
//!
//! Each configuration gets a fresh embedded cluster (metadata service and two
//! memory nodes in this process), loads `keys` keys with 100-byte values, then
//! runs a GET-only and a PUT-only phase of `secs` seconds each on uniformly random
//! keys. The machine is shared and noisy: compare rows of one run, not runs.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use kvstore::{Client, SessionStats, TableSpec, TransportKind};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use testbed::EmbeddedOptions;

#[path = "results_md/kv_figures.rs"]
mod results_md;

const VALUE: usize = 100;

#[derive(Clone, Copy)]
struct Settings {
    keys: usize,
    secs: f64,
    tasks: usize,
}

#[derive(Default)]
struct Phase {
    ops: u64,
    latencies: Vec<u64>,
    stats: SessionStats,
}

fn key(i: usize) -> Vec<u8> {
    format!("user{i:08}").into_bytes()
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)] as f64 / 1000.0
}

fn diff(after: SessionStats, before: SessionStats) -> SessionStats {
    let mut d = after;
    d.operations -= before.operations;
    d.foreground.round_trips -= before.foreground.round_trips;
    d.foreground.bytes_sent -= before.foreground.bytes_sent;
    d.foreground.bytes_received -= before.foreground.bytes_received;
    d.background.round_trips -= before.background.round_trips;
    d.background.bytes_sent -= before.background.bytes_sent;
    d.background.bytes_received -= before.background.bytes_received;
    d
}

/// Run `put` (or get) for `secs` on `threads` threads; returns the merged phase.
fn phase(client: &Client, threads: usize, put: bool, s: Settings, seed: u64) -> (Phase, f64) {
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|th| {
            let client = client.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let session = client.session().expect("session");
                let table = session.table("figures").expect("table");
                // Warm the session's caches (tail hints, directory) with one pass.
                let left = Rc::new(std::cell::Cell::new(s.tasks));
                for task in 0..s.tasks {
                    let (table, left) = (table.clone(), left.clone());
                    session.spawn(async move {
                        for i in (task..s.keys).step_by(s.tasks) {
                            let _ = table.get(&key(i)).await;
                        }
                        left.set(left.get() - 1);
                    });
                }
                let worker = session.worker().clone();
                session.block_on(async move {
                    while left.get() > 0 {
                        worker.sleep(Duration::from_millis(1)).await;
                    }
                });
                session.quiesce();
                barrier.wait();
                let before = session.stats();
                let out = Rc::new(RefCell::new(Phase::default()));
                let started = Instant::now();
                let deadline = Instant::now() + Duration::from_secs_f64(s.secs);
                let left = Rc::new(std::cell::Cell::new(s.tasks));
                for task in 0..s.tasks {
                    let (table, out, left) = (table.clone(), out.clone(), left.clone());
                    let mut rng = SmallRng::seed_from_u64(seed ^ ((th * 64 + task) as u64) << 8);
                    session.spawn(async move {
                        let value = vec![b'v'; VALUE];
                        while Instant::now() < deadline {
                            let k = key(rng.random_range(0..s.keys));
                            let t0 = Instant::now();
                            let r = if put {
                                table.put(&k, &value).await.map(|_| ())
                            } else {
                                table.get(&k).await.map(|_| ())
                            };
                            let ns = t0.elapsed().as_nanos() as u64;
                            if r.is_ok() {
                                let mut o = out.borrow_mut();
                                o.ops += 1;
                                o.latencies.push(ns);
                            }
                        }
                        left.set(left.get() - 1);
                    });
                }
                let worker = session.worker().clone();
                let l = left.clone();
                session.block_on(async move {
                    while l.get() > 0 {
                        worker.sleep(Duration::from_millis(1)).await;
                    }
                });
                session.quiesce();
                let stats = diff(session.stats(), before);
                let mut p = out.take();
                p.stats = stats;
                (p, started.elapsed().as_secs_f64())
            })
        })
        .collect();
    let mut total = Phase::default();
    let mut secs: f64 = 0.0;
    for h in handles {
        let (p, took) = h.join().expect("thread");
        secs = secs.max(took);
        total.ops += p.ops;
        total.latencies.extend(p.latencies);
        total.stats.operations += p.stats.operations;
        total.stats.foreground.add(&p.stats.foreground);
        total.stats.background.add(&p.stats.background);
    }
    (total, secs)
}

fn arg(args: &[String], name: &str, default: f64) -> f64 {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let results_md = args
        .iter()
        .position(|a| a == "--results-md")
        .and_then(|i| args.get(i + 1))
        .map(std::path::PathBuf::from);
    let s = Settings {
        keys: arg(&args, "--keys", 10_000.0) as usize,
        secs: arg(&args, "--secs", 1.5),
        tasks: arg(&args, "--tasks", 4.0) as usize,
    };
    let settings = format!(
        "{} keys, {VALUE}-byte values, {} s per phase, {} tasks per session; latencies in µs; \
         RTT and bytes per operation from the session counters (bytes: RoCE, both \
         directions, foreground; background shortcut CASes shown as +bg)",
        s.keys, s.secs, s.tasks
    );
    println!("{settings}");
    let mut rows = Vec::new();
    println!(
        "{:<7} {:<6} {:>3} {:<4} {:>9} {:>8} {:>8} {:>6} {:>11} {:>10}",
        "index", "trans", "thr", "op", "ops/s", "p50", "p99", "RTT", "bytes", "leased/key"
    );
    for spec in [TableSpec::clover(256), TableSpec::race(256)] {
        let index = spec.index();
        for transport in [TransportKind::Local, TransportKind::Shm, TransportKind::Udp] {
            let client = testbed::embedded_client(EmbeddedOptions {
                memnodes: 2,
                capacity: 256 << 20,
                transport,
                ..EmbeddedOptions::default()
            })
            .expect("cluster");
            client.create_table("figures", &spec).expect("table");
            // Load with a few tasks of one session.
            {
                let session = client.session().expect("session");
                let table = session.table("figures").expect("table");
                let left = Rc::new(std::cell::Cell::new(8usize));
                for task in 0..8 {
                    let (table, left) = (table.clone(), left.clone());
                    session.spawn(async move {
                        for i in (task..s.keys).step_by(8) {
                            table.put(&key(i), &[b'v'; VALUE]).await.expect("load");
                        }
                        left.set(left.get() - 1);
                    });
                }
                let worker = session.worker().clone();
                let l = left.clone();
                session.block_on(async move {
                    while l.get() > 0 {
                        worker.sleep(Duration::from_millis(1)).await;
                    }
                });
                session.quiesce();
            }
            let leased: u64 = client
                .metadata()
                .leases(None)
                .expect("leases")
                .iter()
                .map(|l| l.len)
                .sum();
            let per_key = leased as f64 / s.keys as f64;
            for threads in [1, 2] {
                for put in [false, true] {
                    let (mut p, secs) = phase(&client, threads, put, s, 7 + threads as u64);
                    p.latencies.sort_unstable();
                    let ops = p.stats.operations.max(1) as f64;
                    let fg = p.stats.foreground;
                    let bg = p.stats.background;
                    let bytes = format!(
                        "{:.0}{}",
                        fg.bytes() as f64 / ops,
                        if bg.bytes() > 0 {
                            format!("+{:.0}bg", bg.bytes() as f64 / ops)
                        } else {
                            String::new()
                        }
                    );
                    let r = results_md::Row {
                        index: index.as_str().to_string(),
                        transport: transport.to_string(),
                        threads,
                        op: if put { "put" } else { "get" },
                        ops_per_sec: p.ops as f64 / secs,
                        p50_us: percentile(&p.latencies, 0.50),
                        p99_us: percentile(&p.latencies, 0.99),
                        round_trips: fg.round_trips as f64 / ops,
                        bytes,
                        leased_per_key: per_key,
                    };
                    println!(
                        "{:<7} {:<6} {:>3} {:<4} {:>9.0} {:>8.1} {:>8.1} {:>6.2} {:>11} {:>10.0}",
                        r.index,
                        r.transport,
                        r.threads,
                        r.op,
                        r.ops_per_sec,
                        r.p50_us,
                        r.p99_us,
                        r.round_trips,
                        r.bytes,
                        r.leased_per_key
                    );
                    rows.push(r);
                }
            }
        }
    }
    if let Some(path) = results_md {
        let page = results_md::render(
            &testbed::results_page::PageHeader::current(),
            &settings,
            &rows,
        );
        if let Err(e) = testbed::results_page::write_page(&path, &page) {
            eprintln!("kv_figures: {e}");
            std::process::exit(1);
        }
        eprintln!("kv_figures: wrote {}", path.display());
    }
}
