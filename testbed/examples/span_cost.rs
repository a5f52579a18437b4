//! What the client-side spans cost: GET and PUT on a Clover table over the `local`
//! transport (the cheapest path, where per-operation overhead shows most), one task in
//! one session, under four subscriber settings, interleaved and repeated:
//!
//! - `none`: no subscriber (the default of a program that installs none);
//! - `warn`: a formatting subscriber filtered at `warn` (spans off, one filter check);
//! - `info`: the same at `info`: a `kv.op` span per operation with its fields;
//! - `debug`: `info,verbs::worker=debug`: also a `verbs.batch` span per doorbell batch.
//!
//! The subscriber is what `telemetry::init` installs (registry, formatter to a sink);
//! nothing is printed because spans have no events. Prints median operations per
//! second and median latency per setting, and the ratio to `none`.
//!
//! ```text
//! cargo run --release -p testbed --example span_cost [-- ROUNDS SECONDS] [--results-md PATH]
//! ```
//!
//! With `--results-md PATH` the table is also written as a Markdown results page (date,
//! machine, command line) to `PATH`, replacing it.

use std::time::{Duration, Instant};

use kvstore::{Session, Table, TableSpec, TransportKind};
use testbed::EmbeddedOptions;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::{EnvFilter, Layer};

#[path = "results_md/span_cost.rs"]
mod results_md;

const KEYS: usize = 256;

fn key(i: usize) -> Vec<u8> {
    format!("user{i:08}").into_bytes()
}

/// Operations per second and median latency (ns) of `secs` of GETs or PUTs.
fn run(s: &Session, t: &Table, put: bool, secs: f64) -> (f64, u64) {
    let value = vec![b'v'; 100];
    let mut lat = Vec::new();
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(secs);
    s.block_on(async {
        let mut i = 0usize;
        while Instant::now() < deadline {
            let k = key(i % KEYS);
            i += 1;
            let t0 = Instant::now();
            let r = if put {
                t.put(&k, &value).await
            } else {
                t.get(&k).await.map(|_| ())
            };
            r.expect("operation");
            lat.push(t0.elapsed().as_nanos() as u64);
        }
    });
    s.quiesce();
    let ops = lat.len() as f64 / started.elapsed().as_secs_f64();
    lat.sort_unstable();
    (ops, lat.get(lat.len() / 2).copied().unwrap_or(0))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let results_md = match args.iter().position(|a| a == "--results-md") {
        Some(i) if i + 1 < args.len() => {
            let path = std::path::PathBuf::from(args.remove(i + 1));
            args.remove(i);
            Some(path)
        }
        Some(_) => {
            eprintln!("span_cost: --results-md needs a path");
            std::process::exit(2);
        }
        None => None,
    };
    let rounds: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(5);
    let secs: f64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(0.5);
    let client = testbed::embedded_client(EmbeddedOptions {
        memnodes: 1,
        capacity: 64 << 20,
        transport: TransportKind::Local,
        ..EmbeddedOptions::default()
    })
    .expect("embedded cluster");
    client
        .create_table("cost", &TableSpec::clover(1024))
        .expect("table");
    let s = client.session().expect("session");
    let t = s.table("cost").expect("table");
    s.block_on(async {
        for i in 0..KEYS {
            t.put(&key(i), b"initial").await.expect("load");
        }
    });
    s.quiesce();
    let settings: [(&str, Option<&str>); 4] = [
        ("none", None),
        ("warn", Some("warn")),
        ("info", Some("info")),
        ("debug", Some("info,verbs::worker=debug")),
    ];
    // [setting][get, put] → per-round (ops/s, median ns).
    let mut results = vec![[Vec::new(), Vec::new()]; settings.len()];
    for _ in 0..rounds {
        for (i, (_, filter)) in settings.iter().enumerate() {
            for (j, put) in [false, true].into_iter().enumerate() {
                let r = match filter {
                    None => run(&s, &t, put, secs),
                    Some(f) => {
                        let subscriber = tracing_subscriber::registry().with(
                            tracing_subscriber::fmt::layer()
                                .with_writer(std::io::sink)
                                .with_filter(EnvFilter::new(f)),
                        );
                        tracing::subscriber::with_default(subscriber, || run(&s, &t, put, secs))
                    }
                };
                results[i][j].push(r);
            }
        }
    }
    println!(
        "{:<6} {:>12} {:>10} {:>8} {:>12} {:>10} {:>8}",
        "spans", "GET ops/s", "p50 µs", "vs none", "PUT ops/s", "p50 µs", "vs none"
    );
    let mut base = [0.0f64; 2];
    let mut rows = Vec::new();
    for (i, (name, _)) in settings.iter().enumerate() {
        // [get, put] → (ops/s, p50 µs, ops/s over `none`).
        let mut m = [(0.0, 0.0, 0.0); 2];
        for (j, cell) in results[i].iter().enumerate() {
            let mut ops: Vec<f64> = cell.iter().map(|r| r.0).collect();
            let mut p50: Vec<f64> = cell.iter().map(|r| r.1 as f64 / 1000.0).collect();
            let (ops, p50) = (median(&mut ops), median(&mut p50));
            if i == 0 {
                base[j] = ops;
            }
            m[j] = (ops, p50, ops / base[j].max(1.0));
        }
        let r = results_md::Row {
            setting: name,
            get_ops: m[0].0,
            get_p50_us: m[0].1,
            get_vs_none: m[0].2,
            put_ops: m[1].0,
            put_p50_us: m[1].1,
            put_vs_none: m[1].2,
        };
        println!(
            "{:<6} {:>12.0} {:>10.2} {:>8.2} {:>12.0} {:>10.2} {:>8.2}",
            r.setting,
            r.get_ops,
            r.get_p50_us,
            r.get_vs_none,
            r.put_ops,
            r.put_p50_us,
            r.put_vs_none
        );
        rows.push(r);
    }
    let note = format!(
        "({rounds} interleaved rounds of {secs} s per cell, medians; local transport, one task)"
    );
    println!("{note}");
    if let Some(path) = results_md {
        let page = results_md::render(&testbed::results_page::PageHeader::current(), &rows, &note);
        if let Err(e) = testbed::results_page::write_page(&path, &page) {
            eprintln!("span_cost: {e}");
            std::process::exit(1);
        }
        eprintln!("span_cost: wrote {}", path.display());
    }
}
