//! `verbs-bench`: one-sided verbs on every transport, side by side with a raw UDP echo.
//!
//! Starts a memory node in this process (or uses a running one with `--memnode`),
//! measures READ and WRITE at several sizes and CAS/FAA with and without contention
//! over threads × outstanding depth for the `local`, `shm` and `udp` transports, runs a
//! raw UDP request/response echo with the same datagram sizes, threads, depth and
//! batching in the same run, and prints a table plus the soft-RoCE / raw-UDP ratios.
//! Results are also written as JSON and, with `--results-md PATH`, as a Markdown page.
//!
//! `verbs-bench threads` measures SMART's thread-aware resource allocation instead:
//! shared against per-thread queue pairs, batched against single doorbells and
//! blocking against spinning completion polling over thread counts (see [`alloc`]).

mod alloc;
mod alloc_charts;
mod alloc_report;
mod cpu;
mod echo;
mod measure;
mod results_md;
mod send_count;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};
use serde_json::json;
use verbs::mem::{AccessFlags, MemoryTable, Region};
use verbs::rc::Pmtu;
use verbs::transport::{TransportKind, wire_cost};
use verbs::wr::{RemoteAddr, WorkRequest};

use measure::{CellResult, CellSpec, Targets, Verb};
use results_md::{CellLine, EchoLine};
use send_count::SendCount;

/// Measure dmkv's one-sided verbs on the local, shm and udp transports against a raw UDP echo.
#[derive(Parser, Debug)]
#[command(version, about, long_about = None, args_conflicts_with_subcommands = true)]
struct Args {
    /// Another experiment instead of the verb matrix.
    #[command(subcommand)]
    cmd: Option<Cmd>,
    /// Transports to measure (comma list of local, shm, udp).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "local,shm,udp",
        env = "DMKV_BENCH_TRANSPORTS"
    )]
    transports: Vec<TransportKind>,
    /// READ/WRITE payload sizes in bytes.
    #[arg(long, value_delimiter = ',', default_value = "8,64,256,1024,4096")]
    sizes: Vec<usize>,
    /// Client thread counts.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    threads: Vec<usize>,
    /// Outstanding operations per thread.
    #[arg(long, value_delimiter = ',', default_value = "1,16")]
    depths: Vec<usize>,
    /// Verbs to measure (read, write, cas, faa).
    #[arg(long, value_delimiter = ',', default_value = "read,write,cas,faa")]
    verbs: Vec<String>,
    /// Measurement time per cell, in milliseconds.
    #[arg(long, default_value_t = 300, env = "DMKV_BENCH_DURATION_MS")]
    duration_ms: u64,
    /// Short run for smoke tests: 60 ms per cell, one repetition, sizes 64 and 1024.
    #[arg(long)]
    quick: bool,
    /// Switch SMART's credits, backoff and admission off (ablation baseline).
    #[arg(long)]
    no_smart: bool,
    /// Path MTU of soft-RoCE queue pairs (256, 512, 1024, 2048 or 4096): larger transfers
    /// are segmented into packets of this size.
    #[arg(long, default_value = "1024")]
    pmtu: Pmtu,
    /// Skip the raw UDP echo baseline.
    #[arg(long)]
    no_echo: bool,
    /// Use a running memory node (its admin address, e.g. 127.0.0.1:9791) instead of
    /// starting one; `shm` then needs the node to run with `--shm` on this host.
    #[arg(long, env = "DMKV_MEMNODE_ADMIN")]
    memnode: Option<String>,
    /// Repetitions of each cell (medians are reported; udp cells alternate with the echo).
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Where to write the JSON results.
    #[arg(long, default_value = "results/verbs-bench.json")]
    json: PathBuf,
    /// Also write the tables as a Markdown results page (date, machine, command line) to
    /// this file, replacing it.
    #[arg(long, value_name = "PATH")]
    results_md: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Thread-aware resource allocation (SMART Figs. 3 and 13a): 64-byte READs and
    /// contended CAS over thread counts with shared or per-thread queue pairs,
    /// batched or single doorbells, blocking or spinning completion polling.
    Threads(alloc_report::ThreadsArgs),
}

struct Row {
    spec: CellSpec,
    result: CellResult,
    /// The memory node's sends during the cell (when it runs in this process).
    node_sends: Option<SendCount>,
}

fn parse_verbs(names: &[String]) -> Result<Vec<Verb>, String> {
    names
        .iter()
        .map(|n| match n.as_str() {
            "read" => Ok(Verb::Read),
            "write" => Ok(Verb::Write),
            "cas" => Ok(Verb::Cas),
            "faa" => Ok(Verb::Faa),
            other => Err(format!(
                "unknown verb {other:?}: use read, write, cas or faa"
            )),
        })
        .collect()
}

fn percentile_us(h: &hdrhistogram::Histogram<u64>, q: f64) -> f64 {
    if h.is_empty() {
        0.0
    } else {
        h.value_at_quantile(q) as f64 / 1000.0
    }
}

fn main() {
    if let Err(e) = run() {
        eprintln!("verbs-bench: error: {e}");
        std::process::exit(1);
    }
}

/// A memory node to measure against (started here unless external).
pub struct Node {
    handle: Option<memnode::server::MemnodeHandle>,
    _shm_dir: Option<PathBuf>,
    targets_admin: String,
    data_addr: std::net::SocketAddrV4,
    base: RemoteAddr,
    shm: Option<verbs::transport::shm::ShmTarget>,
}

impl Node {
    /// What the memory node has sent so far (when it runs in this process).
    fn sends(&self) -> Option<SendCount> {
        self.handle
            .as_ref()
            .map(|h| SendCount::of_memnode(&h.metrics()))
    }
}

/// Start a memory node in this process, or describe the running one at `external`.
pub fn start_node(external: Option<&str>) -> Result<Node, String> {
    if let Some(admin) = external {
        let info = memnode::client::node_info(admin).map_err(|e| e.to_string())?;
        let regions = memnode::client::regions(admin).map_err(|e| e.to_string())?;
        let r = regions
            .first()
            .ok_or_else(|| format!("memory node {admin} has no regions"))?;
        let data_addr = info
            .data_addr
            .ok_or("the memory node listens on 0.0.0.0; start it with an explicit --listen")?;
        return Ok(Node {
            handle: None,
            _shm_dir: None,
            targets_admin: admin.to_string(),
            data_addr,
            base: RemoteAddr::new(r.rkey, r.base_va),
            shm: r.shm_target(),
        });
    }
    let dir = std::env::temp_dir().join(format!("dmkv-verbs-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let mut config = memnode::config::MemnodeConfig::local(64 << 20);
    config.shm = Some(dir.join("region"));
    let handle = memnode::server::Memnode::start(config).map_err(|e| e.to_string())?;
    let regions = handle.regions();
    let r = regions.first().ok_or("the memory node has no region")?;
    Ok(Node {
        targets_admin: handle.admin_url(),
        data_addr: handle.data_addr(),
        base: RemoteAddr::new(r.rkey, r.base_va),
        shm: r.shm_target(),
        handle: Some(handle),
        _shm_dir: Some(dir),
    })
}

/// What cells need to reach `node` (and the in-process memory of `local`).
pub fn targets_of(node: &Node, needs_shm: bool) -> Result<Targets, String> {
    let local_table = MemoryTable::new();
    let region = Region::anonymous(64 << 20).map_err(|e| e.to_string())?;
    let local_info = local_table
        .register(Arc::new(region), 0x1000_0000, AccessFlags::ALL)
        .map_err(|e| e.to_string())?;
    let shm = match (&node.shm, needs_shm) {
        (Some(s), _) => s.clone(),
        (None, false) => verbs::transport::shm::ShmTarget {
            path: PathBuf::new(),
            rkey: 0,
            base_va: 0,
        },
        (None, true) => {
            return Err("the memory node's region is not file-backed, so shm cannot be measured; drop shm from --transports".into());
        }
    };
    Ok(Targets {
        local: Arc::new(local_table),
        local_base: RemoteAddr::new(local_info.rkey, local_info.base_va),
        shm,
        admin: node.targets_admin.clone(),
        data_addr: node.data_addr,
        node_base: node.base,
    })
}

fn run() -> Result<(), String> {
    let mut args = Args::parse();
    if let Some(Cmd::Threads(t)) = args.cmd.take() {
        return alloc_report::run(t);
    }
    if args.quick {
        args.duration_ms = 60;
        args.repeat = 1;
        args.sizes = vec![64, 1024];
        args.depths = vec![1, 16];
    }
    let verbs_list = parse_verbs(&args.verbs)?;
    if args.threads.contains(&0) || args.depths.contains(&0) {
        return Err("threads and depths must be at least 1".into());
    }
    if args.sizes.iter().any(|&s| s == 0 || s > 1 << 20) {
        return Err("sizes must be between 1 byte and 1 MiB".into());
    }
    let duration = Duration::from_millis(args.duration_ms.max(1));

    let node = start_node(args.memnode.as_deref())?;
    let targets = targets_of(&node, args.transports.contains(&TransportKind::Shm))?;
    let echo_server = if args.no_echo {
        None
    } else {
        Some(echo::EchoServer::start().map_err(|e| format!("echo server: {e}"))?)
    };

    let mut specs = Vec::new();
    for &transport in &args.transports {
        for &verb in &verbs_list {
            let variants: Vec<(usize, bool)> = match verb {
                Verb::Read | Verb::Write => args.sizes.iter().map(|&s| (s, false)).collect(),
                Verb::Cas | Verb::Faa => vec![(8, false), (8, true)],
            };
            for (size, contended) in variants {
                for &threads in &args.threads {
                    for &depth in &args.depths {
                        specs.push(CellSpec {
                            transport,
                            verb,
                            size,
                            contended,
                            threads,
                            depth,
                            duration,
                            smart: !args.no_smart,
                            pmtu: args.pmtu,
                        });
                    }
                }
            }
        }
    }
    let total = specs.len();
    eprintln!(
        "verbs-bench: {total} cells of {} ms on {} (memory node {}), echo baseline {}",
        args.duration_ms,
        args.transports
            .iter()
            .map(|t| t.name())
            .collect::<Vec<_>>()
            .join(", "),
        node.data_addr,
        if echo_server.is_some() { "on" } else { "off" }
    );
    let mut rows = Vec::new();
    let mut echoes = Vec::new();
    let repeat = args.repeat.max(1);
    for (i, spec) in specs.into_iter().enumerate() {
        // Each repetition measures the cell and, for udp READ/WRITE, the raw echo with the
        // same shape right after it, so both see the same machine conditions; medians of
        // the repetitions are reported.
        let with_echo = echo_server.as_ref().filter(|_| {
            spec.transport == TransportKind::Udp && matches!(spec.verb, Verb::Read | Verb::Write)
        });
        let mut runs = Vec::new();
        let mut echo_runs = Vec::new();
        for _ in 0..repeat {
            let before = node.sends();
            let result = measure::run_cell(spec, &targets)?;
            let node_sends = node.sends().zip(before).map(|(after, b)| after.since(b));
            runs.push((result, node_sends));
            if let Some(server) = with_echo {
                echo_runs.push(run_echo(server, spec)?);
            }
        }
        runs.sort_by(|a, b| a.0.ops_per_sec().total_cmp(&b.0.ops_per_sec()));
        let (result, node_sends) = runs.swap_remove(runs.len() / 2);
        eprintln!(
            "[{:>3}/{total}] {:<5} {:<5} {:>5} B{} t={} d={:<3} {:>10.0} ops/s  p50 {:>7.1} us",
            i + 1,
            spec.transport.name(),
            spec.verb.name(),
            spec.size,
            if spec.contended { " contended" } else { "" },
            spec.threads,
            spec.depth,
            result.ops_per_sec(),
            percentile_us(&result.latency, 0.5)
        );
        if !echo_runs.is_empty() {
            echo_runs.sort_by(|a, b| a.ops_per_sec.total_cmp(&b.ops_per_sec));
            let e = echo_runs.swap_remove(echo_runs.len() / 2);
            echoes.push((spec, e));
        }
        rows.push(Row {
            spec,
            result,
            node_sends,
        });
    }

    let lines: Vec<CellLine> = rows.iter().map(cell_line).collect();
    print_table(&lines);
    let mut ratios = Vec::new();
    let mut echo_lines = Vec::new();
    for (s, e) in &echoes {
        let Some(row) = rows.iter().find(|r| {
            r.spec.transport == TransportKind::Udp
                && r.spec.verb == s.verb
                && r.spec.size == s.size
                && r.spec.threads == s.threads
                && r.spec.depth == s.depth
        }) else {
            continue;
        };
        let udp_ops = row.result.ops_per_sec();
        let ratio = if e.ops_per_sec > 0.0 {
            udp_ops / e.ops_per_sec
        } else {
            0.0
        };
        let udp_client_per_send = SendCount::of_transport(&row.result.transport).per_call();
        let udp_node_per_send = row.node_sends.map(|n| n.per_call());
        echo_lines.push(EchoLine {
            verb: s.verb.name(),
            size: s.size,
            threads: s.threads,
            depth: s.depth,
            request_bytes: e.request_bytes,
            reply_bytes: e.reply_bytes,
            udp_ops_per_sec: udp_ops,
            echo_ops_per_sec: e.ops_per_sec,
            ratio,
            udp_p50_us: percentile_us(&row.result.latency, 0.5),
            echo_p50_us: percentile_us(&e.latency, 0.5),
            udp_cpu_us_per_op: cpu::micros_per_op(row.result.cpu, row.result.ops),
            udp_server_cpu_us_per_op: cpu::micros_per_op(row.result.server_cpu, row.result.ops),
            echo_cpu_us_per_op: e.cpu_us_per_op,
            echo_server_cpu_us_per_op: e.server_cpu_us_per_op,
            udp_client_per_send,
            udp_node_per_send,
            echo_client_per_send: e.client_sends.per_call(),
            echo_server_per_send: e.server_sends.per_call(),
        });
        ratios.push(json!({
            "verb": s.verb.name(), "size": s.size, "threads": s.threads, "depth": s.depth,
            "request_bytes": e.request_bytes, "response_bytes": e.reply_bytes,
            "udp_ops_per_sec": udp_ops, "echo_ops_per_sec": e.ops_per_sec, "ratio": ratio,
            "echo_p50_us": percentile_us(&e.latency, 0.5),
            "echo_p99_us": percentile_us(&e.latency, 0.99),
            "echo_lost": e.lost,
            "udp_cpu_us_per_op": cpu::micros_per_op(row.result.cpu, row.result.ops),
            "udp_memnode_cpu_us_per_op": cpu::micros_per_op(row.result.server_cpu, row.result.ops),
            "echo_cpu_us_per_op": e.cpu_us_per_op,
            "echo_server_cpu_us_per_op": e.server_cpu_us_per_op,
            "udp_client_datagrams_per_send": udp_client_per_send,
            "udp_memnode_datagrams_per_send": udp_node_per_send,
            "echo_client_datagrams_per_send": e.client_sends.per_call(),
            "echo_server_datagrams_per_send": e.server_sends.per_call(),
        }));
    }
    if !echoes.is_empty() {
        println!();
        println!("soft RoCE (udp) vs raw UDP echo, same datagram sizes, threads and depth");
        println!(
            "{:<6} {:>6} {:>3} {:>4} {:>9} {:>9} {:>12} {:>12} {:>7} {:>10} {:>10} {:>11} {:>11} {:>11} {:>11} {:>13} {:>13}",
            "verb",
            "size",
            "thr",
            "dep",
            "req B",
            "resp B",
            "udp ops/s",
            "echo ops/s",
            "ratio",
            "udp p50us",
            "echo p50us",
            "udp cpu/op",
            "(memnode)",
            "echo cpu/op",
            "(server)",
            "udp dg/send",
            "echo dg/send"
        );
        for e in &echo_lines {
            println!(
                "{:<6} {:>6} {:>3} {:>4} {:>9} {:>9} {:>12.0} {:>12.0} {:>6.0}% {:>10.1} {:>10.1} {:>9.2}us {:>9.2}us {:>9.2}us {:>9.2}us {:>13} {:>13}",
                e.verb,
                e.size,
                e.threads,
                e.depth,
                e.request_bytes,
                e.reply_bytes,
                e.udp_ops_per_sec,
                e.echo_ops_per_sec,
                e.ratio * 100.0,
                e.udp_p50_us,
                e.echo_p50_us,
                e.udp_cpu_us_per_op,
                e.udp_server_cpu_us_per_op,
                e.echo_cpu_us_per_op,
                e.echo_server_cpu_us_per_op,
                results_md::per_send_pair(e.udp_client_per_send, e.udp_node_per_send),
                results_md::per_send_pair(e.echo_client_per_send, Some(e.echo_server_per_send))
            );
        }
    }
    if let Some(path) = &args.results_md {
        let page = results_md::render(
            &testbed::results_page::PageHeader::current(),
            &lines,
            &echo_lines,
        );
        testbed::results_page::write_page(path, &page)?;
        eprintln!("verbs-bench: wrote {}", path.display());
    }

    let cells: Vec<_> = rows
        .iter()
        .map(|r| {
            let s = r.spec;
            let res = &r.result;
            let ops = res.ops.max(1) as f64;
            let t = res.transport;
            json!({
                "transport": s.transport.name(), "verb": s.verb.name(), "size": s.size,
                "contended": s.contended, "threads": s.threads, "depth": s.depth,
                "smart": s.smart,
                "ops": res.ops, "seconds": res.elapsed.as_secs_f64(),
                "ops_per_sec": res.ops as f64 / res.elapsed.as_secs_f64().max(1e-9),
                "p50_us": percentile_us(&res.latency, 0.5),
                "p99_us": percentile_us(&res.latency, 0.99),
                "p999_us": percentile_us(&res.latency, 0.999),
                "packets_per_op": (t.packets_sent + t.packets_received) as f64 / ops,
                "bytes_per_op": (t.bytes_sent + t.bytes_received) as f64 / ops,
                "retransmissions_per_op": t.retransmissions as f64 / ops,
                "timeouts": t.timeouts,
                "naks": t.naks,
                "dropped": t.dropped,
                "doorbells_per_op": t.doorbells as f64 / ops,
                "cas_failures_per_op": res.cas_failures as f64 / ops,
                "cas_gave_up": res.cas_gave_up,
                "errors": res.errors,
                "cpu_us_per_op": cpu::micros_per_op(res.cpu, res.ops),
                "memnode_cpu_us_per_op": cpu::micros_per_op(res.server_cpu, res.ops),
            })
        })
        .collect();
    let doc = json!({
        "benchmark": "verbs-bench",
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "duration_ms": args.duration_ms,
        "smart": !args.no_smart,
        "pmtu": args.pmtu.bytes(),
        "cells": cells,
        "udp_vs_echo": ratios,
    });
    if let Some(dir) = args.json.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
    std::fs::write(&args.json, text)
        .map_err(|e| format!("writing {}: {e}", args.json.display()))?;
    eprintln!("verbs-bench: wrote {}", args.json.display());
    Ok(())
}

/// The echo baseline of one cell.
struct EchoCell {
    ops_per_sec: f64,
    latency: hdrhistogram::Histogram<u64>,
    lost: u64,
    request_bytes: usize,
    reply_bytes: usize,
    cpu_us_per_op: f64,
    server_cpu_us_per_op: f64,
    /// The echo clients' requests per send call.
    client_sends: SendCount,
    /// The echo server's replies per send call.
    server_sends: SendCount,
}

/// Run the raw UDP echo with the datagram sizes the soft-RoCE cell `s` puts on the wire.
fn run_echo(server: &echo::EchoServer, s: CellSpec) -> Result<EchoCell, String> {
    let wr = match s.verb {
        Verb::Read => WorkRequest::read(RemoteAddr::new(0, 0), s.size as u32),
        _ => WorkRequest::write(RemoteAddr::new(0, 0), vec![0; s.size]),
    };
    let cost = wire_cost(&wr, s.pmtu);
    let request_bytes = cost.request_bytes as usize;
    let reply_bytes = cost.response_bytes as usize;
    let server_before = server.sends();
    let (results, cpu, server_cpu): (Vec<Result<echo::EchoResult, String>>, _, _) =
        cpu::split_during(|| {
            std::thread::scope(|scope| {
                let hs: Vec<_> = (0..s.threads)
                    .map(|_| {
                        scope.spawn(move || {
                            echo::client(
                                server.addr(),
                                request_bytes,
                                reply_bytes,
                                s.depth,
                                s.duration,
                            )
                            .map_err(|e| e.to_string())
                        })
                    })
                    .collect();
                hs.into_iter()
                    .map(|h| {
                        h.join()
                            .unwrap_or_else(|_| Err("echo thread panicked".into()))
                    })
                    .collect()
            })
        });
    let mut ops = 0;
    let mut lost = 0;
    let mut latency = measure::histogram()?;
    let mut elapsed = Duration::ZERO;
    let mut client_sends = SendCount::default();
    let server_sends = server.sends().since(server_before);
    for r in results {
        let r = r?;
        client_sends = client_sends.plus(r.sends);
        ops += r.ops;
        lost += r.lost;
        elapsed = elapsed.max(r.elapsed);
        let _ = latency.add(&r.latencies);
    }
    Ok(EchoCell {
        ops_per_sec: ops as f64 / elapsed.as_secs_f64().max(1e-9),
        latency,
        lost,
        request_bytes,
        reply_bytes,
        cpu_us_per_op: cpu::micros_per_op(cpu, ops),
        server_cpu_us_per_op: cpu::micros_per_op(server_cpu, ops),
        client_sends,
        server_sends,
    })
}

/// The figures of one cell as the tables show them.
fn cell_line(r: &Row) -> CellLine {
    let s = r.spec;
    let res = &r.result;
    let ops = res.ops.max(1) as f64;
    let t = res.transport;
    CellLine {
        transport: s.transport.name(),
        verb: s.verb.name(),
        size: s.size,
        contended: s.contended,
        threads: s.threads,
        depth: s.depth,
        ops_per_sec: res.ops as f64 / res.elapsed.as_secs_f64().max(1e-9),
        p50_us: percentile_us(&res.latency, 0.5),
        p99_us: percentile_us(&res.latency, 0.99),
        p999_us: percentile_us(&res.latency, 0.999),
        packets_per_op: (t.packets_sent + t.packets_received) as f64 / ops,
        bytes_per_op: (t.bytes_sent + t.bytes_received) as f64 / ops,
        retransmissions_per_op: t.retransmissions as f64 / ops,
        cas_failures_per_op: res.cas_failures as f64 / ops,
        cpu_us_per_op: cpu::micros_per_op(res.cpu, res.ops),
        memnode_cpu_us_per_op: cpu::micros_per_op(res.server_cpu, res.ops),
    }
}

fn print_table(lines: &[CellLine]) {
    println!(
        "{:<5} {:<5} {:>6} {:<4} {:>3} {:>4} {:>11} {:>9} {:>9} {:>9} {:>7} {:>8} {:>7} {:>7} {:>9} {:>9}",
        "trans",
        "verb",
        "size",
        "cont",
        "thr",
        "dep",
        "ops/s",
        "p50 us",
        "p99 us",
        "p99.9 us",
        "pkt/op",
        "B/op",
        "retx/op",
        "fail/op",
        "cpu us/op",
        "(memnode)"
    );
    for c in lines {
        println!(
            "{:<5} {:<5} {:>6} {:<4} {:>3} {:>4} {:>11.0} {:>9.1} {:>9.1} {:>9.1} {:>7.2} {:>8.0} {:>7.3} {:>7.3} {:>9.2} {:>9.2}",
            c.transport,
            c.verb,
            c.size,
            if c.contended { "yes" } else { "no" },
            c.threads,
            c.depth,
            c.ops_per_sec,
            c.p50_us,
            c.p99_us,
            c.p999_us,
            c.packets_per_op,
            c.bytes_per_op,
            c.retransmissions_per_op,
            c.cas_failures_per_op,
            c.cpu_us_per_op,
            c.memnode_cpu_us_per_op,
        );
    }
}
