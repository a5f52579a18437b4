//! Load-balanced READs on this machine: GETs of a replicated RACE table (three copies)
//! through the soft switch, with the client's KV block READs unmarked (the primary
//! serves every READ) and marked under the replica set's read alias key (the switch
//! picks a member, `ReadBalance`), side by side: GETs per second, round trips per GET
//! and the balanced READs each member served (the switch's counters).
//!
//! An embedded cluster of three memory nodes and the soft switch over soft RoCE on
//! loopback, in this process; every replica set installed with `balance_reads`.
//!
//! `cargo run --release -p accel-p4 --example read_balance_bench -- [GETS] [--json PATH] [--results-md PATH]`

use std::collections::HashMap;
use std::time::{Duration, Instant};

use accel_p4::switch::{SoftSwitch, SwitchConfig};
use dmkv_api::switch::{MirrorRequest, add_mirror_as};
use kvstore::{AcceleratorUse, Client, ClientOptions, TableSpec, TransportKind};
use testbed::{Embedded, EmbeddedOptions};

#[path = "results_md/read_balance_bench.rs"]
mod results_md;

use results_md::Row;

/// Bytes of every value.
const VALUE: usize = 200;
/// Keys the GETs cycle over.
const KEYS: u64 = 500;

fn client(cluster: &Embedded, switch: &str, balance: bool) -> Client {
    let mut o = ClientOptions::with_transport(TransportKind::Udp).with_rc(verbs::rc::RcConfig {
        retransmit_timeout: Duration::from_millis(20),
        ..verbs::rc::RcConfig::default()
    });
    o.connection.accelerator = AcceleratorUse::Via(switch.to_owned());
    o.connection.balance_reads = balance;
    Client::in_process(&cluster.metadata_url(), o, HashMap::new(), Box::new(())).expect("client")
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
            eprintln!("read_balance_bench: {name} needs a path");
            std::process::exit(2);
        }
        None => None,
    };
    let results_md = flag("--results-md");
    let json_path = flag("--json");
    let gets: u64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(6000);

    let cluster = Embedded::start(&EmbeddedOptions {
        memnodes: 3,
        capacity: 64 << 20,
        transport: TransportKind::Udp,
        ..EmbeddedOptions::default()
    })
    .expect("cluster");
    let sw = SoftSwitch::start(SwitchConfig::local()).expect("switch");
    let url = sw.admin_url();
    let plain = client(&cluster, &url, false);
    let balanced = client(&cluster, &url, true);
    let t = plain
        .create_replicated_table("t", &TableSpec::race(1024), 3)
        .expect("table");
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
                balance_reads: true,
                non_serving: Vec::new(),
            },
        )
        .expect("install the replica set on the switch");
    }
    {
        let s = plain.session().expect("session");
        let h = s.table("t").expect("handle");
        for i in 0..KEYS {
            let mut v = format!("{i}:").into_bytes();
            v.resize(VALUE, b'v');
            s.block_on(h.put(format!("k{i}").as_bytes(), &v))
                .expect("load");
        }
    }

    let mut rows = Vec::new();
    for (balancing, c) in [("off", &plain), ("on", &balanced)] {
        let s = c.session().expect("session");
        let h = s.table("t").expect("handle");
        // Warm: the session's queue pairs and directory.
        for i in 0..KEYS.min(gets) {
            s.block_on(h.get(format!("k{i}").as_bytes()))
                .expect("warm-up get");
        }
        let before = sw.control().read_balance_counters();
        let transport_before = s.transport_stats();
        let rt_before = s.stats().foreground.round_trips;
        let start = Instant::now();
        for n in 0..gets {
            let i = n % KEYS;
            let got = s.block_on(h.get(format!("k{i}").as_bytes())).expect("get");
            assert!(got.is_some_and(|v| v.starts_with(format!("{i}:").as_bytes())));
        }
        let secs = start.elapsed().as_secs_f64();
        let after = sw.control().read_balance_counters();
        let transport = s.transport_stats().since(&transport_before);
        let rts = s.stats().foreground.round_trips - rt_before;
        let mut per_member = [0u64; 3];
        for (m, slot) in per_member.iter_mut().enumerate() {
            *slot = after.per_member[m] - before.per_member[m];
        }
        let row = Row {
            balancing,
            gets,
            gets_per_sec: gets as f64 / secs,
            round_trips_per_get: rts as f64 / gets as f64,
            per_member,
            retransmissions: transport.retransmissions,
        };
        println!(
            "balancing {:<3}  {:>7.0} GETs/s  {:.2} round trips/GET  balanced READs {:?}  retransmissions {}",
            row.balancing,
            row.gets_per_sec,
            row.round_trips_per_get,
            row.per_member,
            row.retransmissions
        );
        rows.push(row);
    }
    let settings = format!(
        "{gets} GETs per run cycling over {KEYS} keys of {VALUE}-byte values (each read once before the run), one session issuing one GET at a time, of a RACE table with three copies on three memory nodes, every replica set installed on the soft switch with `balance_reads`. Both clients go through the switch; `off`: the client's KV block READs go to the primary under its key; `on`: the client (`ConnectionOptions::balance_reads`) sends them under the set's read alias key and the switch picks a member round robin (bucket READs stay on the primary). Balanced READs per member are the switch's counters over the run. Soft switch and memory nodes in this process over soft RoCE on loopback; one run each."
    );
    if let Some(path) = json_path {
        let doc = serde_json::json!({ "settings": settings, "rows": rows });
        let text = serde_json::to_string_pretty(&doc).expect("json");
        if let Err(e) = std::fs::write(&path, text) {
            eprintln!("read_balance_bench: {}: {e}", path.display());
            std::process::exit(1);
        }
        eprintln!("read_balance_bench: wrote {}", path.display());
    }
    if let Some(path) = results_md {
        let page = results_md::render(
            &testbed::results_page::PageHeader::current(),
            &settings,
            &rows,
        );
        if let Err(e) = testbed::results_page::write_page(&path, &page) {
            eprintln!("read_balance_bench: {e}");
            std::process::exit(1);
        }
        eprintln!("read_balance_bench: wrote {}", path.display());
    }
    sw.shutdown();
}
