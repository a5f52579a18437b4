//! Switch replication of writes on this machine: the bytes a client's link carries per
//! update of a replicated table when the client WRITEs every copy itself, against when
//! it WRITEs the data once and the soft switch copies it to the backups
//! (`MirrorWrite`), for one, two and three copies, Clover and RACE.
//!
//! An embedded cluster of three memory nodes and the soft switch over soft RoCE on
//! loopback; both clients go through the switch (the same path), one with switch
//! replication on. Bytes and packets are the client transport's own counts (what its
//! socket sent and received), round trips the session's.
//!
//! `cargo run --release -p accel-p4 --example switch_replication_bench -- [UPDATES] [--json PATH] [--results-md PATH]`

use std::collections::HashMap;
use std::time::{Duration, Instant};

use accel_p4::switch::{SoftSwitch, SwitchConfig};
use dmkv_api::switch::{MirrorRequest, add_mirror_as};
use kvstore::{AcceleratorUse, Client, ClientOptions, TableSpec, TransportKind};
use testbed::{Embedded, EmbeddedOptions};

#[path = "results_md/switch_replication_bench.rs"]
mod results_md;

use results_md::Row;

/// Bytes of every value written.
const VALUE: usize = 200;
/// Keys the updates cycle over.
const KEYS: u64 = 200;

fn client(cluster: &Embedded, switch: &str, replicate: bool) -> Client {
    let mut o = ClientOptions::with_transport(TransportKind::Udp).with_rc(verbs::rc::RcConfig {
        retransmit_timeout: Duration::from_millis(20),
        ..verbs::rc::RcConfig::default()
    });
    o.connection.accelerator = AcceleratorUse::Via(switch.to_owned());
    o.connection.switch_replication = replicate;
    Client::in_process(&cluster.metadata_url(), o, HashMap::new(), Box::new(())).expect("client")
}

fn value(i: u64, round: u64) -> Vec<u8> {
    let mut v = format!("{i}:{round}:").into_bytes();
    v.resize(VALUE, b'v');
    v
}

fn measure(
    client: &Client,
    table: &str,
    updates: u64,
    round: u64,
) -> (verbs::transport::TransportStats, u64, f64) {
    let s = client.session().expect("session");
    let t = s.table(table).expect("handle");
    // Warm: the session's queue pairs, the table's cached tails and directory.
    for i in 0..KEYS.min(updates) {
        s.block_on(t.put(format!("k{i}").as_bytes(), &value(i, round)))
            .expect("warm-up put");
    }
    let before = s.transport_stats();
    let rt_before = s.stats().foreground.round_trips;
    let start = Instant::now();
    for n in 0..updates {
        let i = n % KEYS;
        s.block_on(t.put(format!("k{i}").as_bytes(), &value(i, round + 1 + n)))
            .expect("put");
    }
    let secs = start.elapsed().as_secs_f64();
    let stats = s.transport_stats().since(&before);
    let rts = s.stats().foreground.round_trips - rt_before;
    s.quiesce();
    (stats, rts, updates as f64 / secs)
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut flag = |name: &str| match args.iter().position(|a| a == name) {
        Some(i) if i + 1 < args.len() => {
            let v = args.remove(i + 1);
            args.remove(i);
            Some(std::path::PathBuf::from(v))
        }
        Some(_) => {
            eprintln!("switch_replication_bench: {name} needs a path");
            std::process::exit(2);
        }
        None => None,
    };
    let results_md = flag("--results-md");
    let chart_flag = flag("--charts");
    let json_path = flag("--json");
    let updates: u64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(3000);

    let cluster = Embedded::start(&EmbeddedOptions {
        memnodes: 3,
        capacity: 64 << 20,
        transport: TransportKind::Udp,
        ..EmbeddedOptions::default()
    })
    .expect("cluster");
    let sw = SoftSwitch::start(SwitchConfig::local()).expect("switch");
    let url = sw.admin_url();
    let by_client = client(&cluster, &url, false);
    let by_switch = client(&cluster, &url, true);

    let mut rows = Vec::new();
    for (index, spec) in [
        ("clover", TableSpec::clover(256)),
        ("race", TableSpec::race(256)),
    ] {
        for r in 1..=3u32 {
            let name = format!("{index}{r}");
            let t = by_client
                .create_replicated_table(&name, &spec, r)
                .expect("table");
            if r > 1 {
                for set in &t.replica_sets {
                    let urls: Vec<String> = set
                        .iter()
                        .map(|id| cluster.admin_url(*id).expect("admin url"))
                        .collect();
                    add_mirror_as(
                        &url,
                        None,
                        &MirrorRequest {
                            primary: urls[0].clone(),
                            backups: urls[1..].to_vec(),
                            balance_reads: false,
                            non_serving: Vec::new(),
                        },
                    )
                    .expect("install the replica set on the switch");
                }
            }
            let writers: &[(&'static str, &Client)] = if r == 1 {
                &[("client", &by_client)]
            } else {
                &[("client", &by_client), ("switch", &by_switch)]
            };
            for (k, (writer, c)) in writers.iter().enumerate() {
                let before = sw.control().pipeline().counters().mirror_write;
                let (stats, rts, ops_per_sec) =
                    measure(c, &name, updates, 1_000_000 * (k as u64 + 1));
                let after = sw.control().pipeline().counters().mirror_write;
                if *writer == "switch" {
                    assert!(
                        after.replicated - before.replicated >= updates,
                        "the switch replicated every update's WRITE"
                    );
                }
                let n = updates as f64;
                let row = Row {
                    index,
                    replication: r,
                    writer,
                    ops: updates,
                    sent_per_op: stats.bytes_sent as f64 / n,
                    received_per_op: stats.bytes_received as f64 / n,
                    packets_per_op: stats.packets_sent as f64 / n,
                    round_trips_per_op: rts as f64 / n,
                    retransmissions: stats.retransmissions,
                    ops_per_sec,
                };
                println!(
                    "{:<6} r={} {:<6} sent {:>7.1} B/op  received {:>6.1} B/op  packets {:>5.2}/op  round trips {:>4.2}/op  {:>7.0} ops/s",
                    row.index,
                    row.replication,
                    row.writer,
                    row.sent_per_op,
                    row.received_per_op,
                    row.packets_per_op,
                    row.round_trips_per_op,
                    row.ops_per_sec
                );
                rows.push(row);
            }
        }
    }
    let settings = format!(
        "Updates of {VALUE}-byte values, {updates} per run cycling over {KEYS} keys (each written once before the run), one session issuing one update at a time. Tables of 256 key slots; three memory nodes, every set of a table of r copies spread over them (`replica_sets`), installed on the switch with `POST /v1/mirrors` for r > 1. Both clients go through the soft switch; `client`: the client WRITEs every copy, `switch`: the client WRITEs the data once, to the primary, under the set's alias key, and the switch copies it. Bytes are RoCE bytes (BTH through ICRC) the client's socket sent and received, counted by its transport. Soft switch and memory nodes in this process over soft RoCE on loopback; one run each."
    );
    if let Some(path) = json_path {
        let doc = serde_json::json!({ "settings": settings, "rows": rows });
        let text = serde_json::to_string_pretty(&doc).expect("json");
        if let Err(e) = std::fs::write(&path, text) {
            eprintln!("switch_replication_bench: {}: {e}", path.display());
            std::process::exit(1);
        }
        eprintln!("switch_replication_bench: wrote {}", path.display());
    }
    let charts = match testbed::plot::chart_dir(chart_flag.as_deref(), results_md.as_deref()) {
        Some(dir) => match results_md::charts(&dir, &rows) {
            Ok(written) => written,
            Err(e) => {
                eprintln!("switch_replication_bench: charts: {e}");
                std::process::exit(1);
            }
        },
        None => Vec::new(),
    };
    if let Some(path) = results_md {
        let page = results_md::render(
            &testbed::results_page::PageHeader::current(),
            &settings,
            &rows,
            &charts,
        );
        if let Err(e) = testbed::results_page::write_page(&path, &page) {
            eprintln!("switch_replication_bench: {e}");
            std::process::exit(1);
        }
        eprintln!("switch_replication_bench: wrote {}", path.display());
    }
}
