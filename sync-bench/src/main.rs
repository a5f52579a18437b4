//! `sync-bench`: experiments on dmkv's in-place latch schemes.
//!
//! ```text
//! sync-bench torn       # torn reads per scheme and block size (local, random read order)
//! sync-bench ablation   # latch optimisation levels, one thread, 256-B tuple (udp)
//! sync-bench compare    # schemes × tuple sizes × threads × skew, read-only / write-only
//! sync-bench align      # CAS throughput over latch strides, NIC lock-table model on
//! sync-bench retries    # failed-CAS retries per update, Clover and RACE, conflict avoidance off/on
//! ```
//!
//! Each prints a table, writes `<out>/sync-<experiment>.json` and SVG charts and, with
//! `--results-md PATH`, its tables as a Markdown results page.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};
use kvstore::{Placement, SchemeSpec};
use serde_json::{Value, json};
use sync_bench::results_md::{self, Table};
use sync_bench::setup::Mem;
use sync_bench::{ablation, align, compare, median, torn};
use testbed::plot::{Chart, Series, line_chart};
use verbs::mem::{LineGap, ReadOrder};

#[derive(Parser, Debug)]
#[command(version, about = "Experiments on dmkv's in-place latch schemes")]
struct Args {
    /// Directory for JSON results and SVG charts.
    #[arg(long, default_value = "results", global = true)]
    out: PathBuf,
    /// Also write the experiment's tables as a Markdown results page (date, machine,
    /// command line) to this file, replacing it.
    #[arg(long, value_name = "PATH", global = true)]
    results_md: Option<PathBuf>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Retries per update under Zipf(0.99) updates on Clover and RACE tables with SMART's
    /// conflict avoidance (backoff, admission throttling) off and on (SMART, ASPLOS'24,
    /// Fig. 14), over soft RoCE.
    Retries(sync_bench::retries_report::RetriesArgs),
    /// Switch functions (Jasny et al., TODS 2025, Figs. 22/26, SwordBox Fig. 10): contended CAS at the
    /// memnode vs switch-resident atomics vs atomic replacement; optimistic latching via
    /// the switch vs software CRC-64 on a small hot set. Every client goes through the
    /// soft switch.
    Switch {
        /// Client threads (one QP each).
        #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
        threads: Vec<usize>,
        /// Measured time per cell.
        #[arg(long, default_value_t = 1000)]
        duration_ms: u64,
        /// Repetitions per cell (the median is reported).
        #[arg(long, default_value_t = 3)]
        reps: usize,
        /// Hot tuples for the latching cells.
        #[arg(long, default_value_t = 8)]
        tuples: u32,
        /// Tuple size in bytes (a power of two, at least 64).
        #[arg(long, default_value_t = 256)]
        tuple_size: u64,
        /// The memnode's NIC lock-table model: ns each atomic holds its slot (0: off).
        #[arg(long, default_value_t = 500)]
        lock_hold_ns: u64,
    },
    /// Undetected torn reads per scheme and block size (Jasny et al., TODS 2025, Fig. 1b).
    Torn {
        /// Reads per scheme, split evenly over the block sizes.
        #[arg(long, default_value_t = 10_000_000)]
        reads: u64,
        /// Block sizes in bytes (multiples of 64).
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "64,128,192,256,512,1024,2048,4096"
        )]
        blocks: Vec<usize>,
        /// Schemes (default: every correct one and bookend-unsafe-demo).
        #[arg(long, value_delimiter = ',')]
        schemes: Vec<SchemeSpec>,
        /// Spin iterations between the lines of one READ (0: none).
        #[arg(long, default_value_t = 64)]
        gap_spins: u32,
        /// Read order of the memory.
        #[arg(long, default_value = "random")]
        read_order: ReadOrder,
    },
    /// Latch acquisitions per optimisation level (Jasny et al., TODS 2025, Fig. 8).
    Ablation {
        /// Tuple size in bytes (payload + latch).
        #[arg(long, default_value_t = 256)]
        tuple: usize,
        /// Measurement time per cell, ms.
        #[arg(long, default_value_t = 1000)]
        duration_ms: u64,
        /// Repetitions (medians reported).
        #[arg(long, default_value_t = 3)]
        repeat: usize,
        /// Transport: udp (soft RoCE to an in-process memory node) or local.
        #[arg(long, default_value = "udp")]
        transport: String,
    },
    /// Scheme comparison (Jasny et al., TODS 2025, Figs. 14–15).
    Compare {
        /// Payload sizes in bytes.
        #[arg(long, value_delimiter = ',', default_value = "64,256,1024,4096,16384")]
        sizes: Vec<usize>,
        /// Thread counts.
        #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
        threads: Vec<usize>,
        /// Zipf exponents (0 = uniform).
        #[arg(long, value_delimiter = ',', default_value = "0,0.99,1.5,2")]
        thetas: Vec<f64>,
        /// Schemes (default: every correct one).
        #[arg(long, value_delimiter = ',')]
        schemes: Vec<SchemeSpec>,
        /// Tuples in the table.
        #[arg(long, default_value_t = 1024)]
        slots: u64,
        /// Measurement time per cell, ms.
        #[arg(long, default_value_t = 250)]
        duration_ms: u64,
        /// Transport: udp or local.
        #[arg(long, default_value = "udp")]
        transport: String,
    },
    /// CAS throughput over latch strides with the NIC lock-table model (Jasny et al., TODS 2025, Fig. 5).
    Align {
        /// Strides in bytes.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "64,128,256,512,1024,2048,4096"
        )]
        strides: Vec<u64>,
        /// Threads.
        #[arg(long, default_value_t = 4)]
        threads: usize,
        /// Private latches per thread.
        #[arg(long, default_value_t = 16)]
        latches: u64,
        /// Lock-slot hold time per atomic, ns (the modelled NIC atomic latency).
        #[arg(long, default_value_t = 500)]
        hold_ns: u64,
        /// Measurement time per cell, ms.
        #[arg(long, default_value_t = 300)]
        duration_ms: u64,
    },
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(args) {
        eprintln!("sync-bench: error: {e}");
        std::process::exit(1);
    }
}

fn write_json(out: &Path, name: &str, doc: &Value) -> Result<(), String> {
    std::fs::create_dir_all(out).map_err(|e| format!("creating {}: {e}", out.display()))?;
    let p = out.join(format!("sync-{name}.json"));
    let text = serde_json::to_string_pretty(doc).map_err(|e| e.to_string())?;
    std::fs::write(&p, text).map_err(|e| format!("writing {}: {e}", p.display()))?;
    eprintln!("sync-bench: wrote {}", p.display());
    Ok(())
}

fn mem_for(transport: &str, bytes: u64) -> Result<Mem, String> {
    match transport {
        "udp" => Mem::udp(bytes, ReadOrder::Ascending),
        "local" => Mem::local(bytes, ReadOrder::Ascending, LineGap::None, None),
        t => Err(format!("unknown transport {t:?}: use udp or local")),
    }
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn median_cell(
    reps: usize,
    mut f: impl FnMut() -> Result<sync_bench::switch::Cell, String>,
) -> Result<sync_bench::switch::Cell, String> {
    let mut cells = Vec::new();
    for _ in 0..reps.max(1) {
        cells.push(f()?);
    }
    cells.sort_by(|a, b| a.ops_per_sec.total_cmp(&b.ops_per_sec));
    Ok(cells.swap_remove(cells.len() / 2))
}

fn run_switch(
    out: &std::path::Path,
    threads: &[usize],
    duration: Duration,
    reps: usize,
    tuples: u32,
    tuple_size: u64,
    lock_hold_ns: u64,
) -> Result<Vec<Table>, String> {
    use sync_bench::switch::{CasMode, Env, LatchMode, cas_cell, latch_cell};
    let env = Env {
        lock_hold: (lock_hold_ns > 0).then(|| Duration::from_nanos(lock_hold_ns)),
    };
    let mut table = Table::new(
        "Contended CAS and optimistic latching through the switch",
        &[
            ("mode", -16),
            ("work", -6),
            ("thr", 3),
            ("ops/s", 12),
            ("verbs/op", 8),
            ("RTT/op", 8),
            ("retries/op", 9),
        ],
    );
    table.print_header();
    let mut rows = Vec::new();
    let mut show = |c: sync_bench::switch::Cell| {
        table.push(vec![
            c.mode.to_string(),
            c.workload.to_string(),
            c.threads.to_string(),
            format!("{:.0}", c.ops_per_sec),
            format!("{:.2}", c.verbs_per_op),
            format!("{:.2}", c.rtt_per_op),
            format!("{:.3}", c.retries_per_op),
        ]);
        rows.push(c);
    };
    for &t in threads {
        for mode in CasMode::ALL {
            show(median_cell(reps, || cas_cell(mode, t, duration, &env))?);
        }
    }
    for write in [false, true] {
        for &t in threads {
            for mode in [LatchMode::Switch, LatchMode::Software] {
                show(median_cell(reps, || {
                    latch_cell(mode, write, t, tuples, tuple_size, duration, &env)
                })?);
            }
        }
    }
    let doc = json!({
        "experiment": "switch", "transport": "udp through the soft switch",
        "duration_ms": duration.as_millis() as u64, "reps": reps, "statistic": "median ops/s",
        "tuples": tuples, "tuple_size": tuple_size, "lock_hold_ns": lock_hold_ns,
        "memnode_read_order": "random", "cores": cores(),
        "cells": rows.iter().map(|c| json!({
            "mode": c.mode, "workload": c.workload, "threads": c.threads,
            "ops_per_sec": c.ops_per_sec, "verbs_per_op": c.verbs_per_op,
            "rtt_per_op": c.rtt_per_op, "retries_per_op": c.retries_per_op,
        })).collect::<Vec<_>>(),
    });
    write_json(out, "switch", &doc)?;
    let series = |workload: &str, modes: &[&str]| -> Vec<Series> {
        modes
            .iter()
            .map(|m| Series {
                label: format!("{m} {workload}"),
                points: rows
                    .iter()
                    .filter(|c| c.mode == *m && c.workload == workload)
                    .map(|c| (c.threads as f64, c.ops_per_sec))
                    .collect(),
            })
            .collect()
    };
    let p = out.join("sync-switch-cas.svg");
    line_chart(
        &p,
        &Chart {
            title: "Contended CAS on one word (successful increments)",
            x_desc: "client threads (one QP each)",
            y_desc: "operations per second",
            log2_x: true,
        },
        &series("cas", &["memnode", "switch-resident", "atomic-replace"]),
    )?;
    eprintln!("sync-bench: wrote {}", p.display());
    let mut latch = series("read", &["switch", "software-crc"]);
    latch.extend(series("write", &["switch", "software-crc"]));
    let p = out.join("sync-switch-latch.svg");
    line_chart(
        &p,
        &Chart {
            title: "Optimistic latching on a hot set: switch vs software CRC-64",
            x_desc: "client threads (one QP each)",
            y_desc: "operations per second",
            log2_x: true,
        },
        &latch,
    )?;
    eprintln!("sync-bench: wrote {}", p.display());
    Ok(vec![table])
}

fn run(args: Args) -> Result<(), String> {
    if let Cmd::Retries(r) = &args.cmd {
        return sync_bench::retries_report::run(r, &args.out, args.results_md.as_deref());
    }
    let (experiment, tables) = match args.cmd {
        Cmd::Retries(_) => return Ok(()),
        Cmd::Switch {
            threads,
            duration_ms,
            reps,
            tuples,
            tuple_size,
            lock_hold_ns,
        } => run_switch(
            &args.out,
            &threads,
            Duration::from_millis(duration_ms.max(1)),
            reps,
            tuples,
            tuple_size,
            lock_hold_ns,
        )
        .map(|t| ("switch", t))?,
        Cmd::Torn {
            reads,
            blocks,
            schemes,
            gap_spins,
            read_order,
        } => {
            let cfg = torn::TornConfig {
                schemes: if schemes.is_empty() {
                    SchemeSpec::catalog(true)
                } else {
                    schemes
                },
                reads: reads.div_ceil(blocks.len().max(1) as u64),
                blocks,
                order: read_order,
                gap: if gap_spins == 0 {
                    LineGap::None
                } else {
                    LineGap::Spin(gap_spins)
                },
                ..torn::TornConfig::default()
            };
            eprintln!(
                "sync-bench torn: {} reads per (scheme, block), read order {}, gap {:?}",
                cfg.reads, cfg.order, cfg.gap
            );
            let mut by_cell = Table::new(
                "Torn reads per scheme and block size",
                &[
                    ("scheme", -34),
                    ("block", 6),
                    ("lines", 5),
                    ("reads", 10),
                    ("torn", 9),
                    ("torn frac", 12),
                    ("detected", 10),
                    ("writes", 9),
                    ("s", 7),
                ],
            );
            by_cell.print_header();
            let cells = torn::run(&cfg, |c| {
                by_cell.push(vec![
                    c.scheme.clone(),
                    c.block.to_string(),
                    c.lines.to_string(),
                    c.reads.to_string(),
                    c.torn.to_string(),
                    format!("{:.3e}", c.fraction()),
                    c.detected.to_string(),
                    c.writes.to_string(),
                    format!("{:.1}", c.seconds),
                ]);
            })?;
            let mut per_scheme: Vec<(String, u64, u64)> = Vec::new();
            for c in &cells {
                match per_scheme.iter_mut().find(|s| s.0 == c.scheme) {
                    Some(s) => {
                        s.1 += c.reads;
                        s.2 += c.torn;
                    }
                    None => per_scheme.push((c.scheme.clone(), c.reads, c.torn)),
                }
            }
            println!();
            let mut totals = Table::new(
                "Undetected torn reads per scheme",
                &[("scheme", -34), ("reads", 12), ("undetected", 10)],
            );
            totals.print_header();
            for (s, r, t) in &per_scheme {
                totals.push(vec![s.clone(), r.to_string(), t.to_string()]);
            }
            let doc = json!({
                "experiment": "torn-reads",
                "transport": "local",
                "read_order": cfg.order.to_string(),
                "line_gap_spins": gap_spins,
                "reads_per_cell": cfg.reads,
                "cores": cores(),
                "cells": cells.iter().map(|c| json!({
                    "scheme": c.scheme, "unsafe_demo": c.unsafe_demo, "block": c.block,
                    "tuple_lines": c.lines, "reads": c.reads, "torn_undetected": c.torn,
                    "torn_fraction": c.fraction(), "detected_retries": c.detected,
                    "writes": c.writes, "seconds": c.seconds,
                })).collect::<Vec<_>>(),
                "totals": per_scheme.iter().map(|(s, r, t)| json!({
                    "scheme": s, "reads": r, "torn_undetected": t
                })).collect::<Vec<_>>(),
            });
            write_json(&args.out, "torn", &doc)?;
            let series: Vec<Series> = per_scheme
                .iter()
                .map(|(s, _, _)| Series {
                    label: s.clone(),
                    points: cells
                        .iter()
                        .filter(|c| &c.scheme == s)
                        .map(|c| (c.block as f64, 100.0 * c.fraction()))
                        .collect(),
                })
                .collect();
            let p = args.out.join("sync-torn.svg");
            line_chart(
                &p,
                &Chart {
                    title: "Undetected torn reads (random read order)",
                    x_desc: "block size (bytes)",
                    y_desc: "torn reads returned (%)",
                    log2_x: true,
                },
                &series,
            )?;
            eprintln!("sync-bench: wrote {}", p.display());
            ("torn", vec![by_cell, totals])
        }
        Cmd::Ablation {
            tuple,
            duration_ms,
            repeat,
            transport,
        } => {
            let mem = mem_for(&transport, 1 << 20)?;
            let duration = Duration::from_millis(duration_ms.max(1));
            let mut table = Table::new(
                "Latch acquisitions per optimisation level",
                &[
                    ("scheme", -32),
                    ("mode", -9),
                    ("acq/s", 12),
                    ("RTT/op", 8),
                    ("verbs/op", 8),
                    ("B/op", 8),
                ],
            );
            table.print_header();
            let mut rows = Vec::new();
            for spec in ablation::schemes() {
                let mut runs: Vec<Vec<ablation::AblationCell>> = Vec::new();
                for _ in 0..repeat.max(1) {
                    runs.push(ablation::run_scheme(&mem, &spec, tuple, duration)?);
                }
                for (i, first) in runs[0].iter().enumerate() {
                    let mut rates: Vec<f64> = runs.iter().map(|r| r[i].ops_per_sec).collect();
                    let rate = median(&mut rates);
                    let ops = first.ops.max(1) as f64;
                    table.push(vec![
                        first.scheme.to_string(),
                        first.mode.to_string(),
                        format!("{rate:.0}"),
                        format!("{:.2}", first.round_trips_per_op()),
                        format!("{:.2}", first.verbs_per_op()),
                        format!("{:.0}", first.stats.bytes() as f64 / ops),
                    ]);
                    rows.push(json!({
                        "scheme": first.scheme, "mode": first.mode, "ops_per_sec": rate,
                        "round_trips_per_op": first.round_trips_per_op(),
                        "verbs_per_op": first.verbs_per_op(),
                        "bytes_per_op": first.stats.bytes() as f64 / ops,
                        "latch_retries_per_op": first.stats.cas_failures as f64 / ops,
                    }));
                }
            }
            let doc = json!({
                "experiment": "latch-ablation", "transport": transport, "tuple": tuple,
                "duration_ms": duration_ms, "repeat": repeat, "cores": cores(), "cells": rows,
            });
            write_json(&args.out, "ablation", &doc)?;
            let mut series = Vec::new();
            for mode in ["exclusive", "shared"] {
                series.push(Series {
                    label: format!("{mode} (acquisitions/s)"),
                    points: rows
                        .iter()
                        .filter(|r| r["mode"] == mode)
                        .enumerate()
                        .map(|(i, r)| (i as f64 + 1.0, r["ops_per_sec"].as_f64().unwrap_or(0.0)))
                        .collect(),
                });
            }
            let p = args.out.join("sync-ablation.svg");
            line_chart(
                &p,
                &Chart {
                    title: "Latch ablation: 1 basic, 2 spec, 3 wc, 4 async, 5 x+wu+wc, 6 x+wu+async",
                    x_desc: "optimisation level",
                    y_desc: "acquisitions per second",
                    log2_x: false,
                },
                &series,
            )?;
            eprintln!("sync-bench: wrote {}", p.display());
            ("ablation", vec![table])
        }
        Cmd::Compare {
            sizes,
            threads,
            thetas,
            schemes,
            slots,
            duration_ms,
            transport,
        } => {
            let schemes = if schemes.is_empty() {
                SchemeSpec::catalog(false)
            } else {
                schemes
            };
            let biggest = schemes
                .iter()
                .flat_map(|s| sizes.iter().map(move |&z| (s, z)))
                .filter_map(|(s, z)| s.build(z).ok().map(|b| b.layout().area_bytes(slots)))
                .max()
                .unwrap_or(1 << 20);
            let mem = Arc::new(mem_for(&transport, biggest + (1 << 20))?);
            let duration = Duration::from_millis(duration_ms.max(1));
            let mut table = Table::new(
                "Scheme comparison",
                &[
                    ("scheme", -32),
                    ("op", -5),
                    ("size", 6),
                    ("thr", 3),
                    ("zipf", 5),
                    ("ops/s", 11),
                    ("RTT/op", 7),
                    ("verbs/op", 8),
                    ("retry/op", 9),
                    ("errors", 6),
                ],
            );
            table.print_header();
            let mut rows = Vec::new();
            for write in [false, true] {
                for scheme in &schemes {
                    for &size in &sizes {
                        for &theta in &thetas {
                            for &t in &threads {
                                let c = compare::run_cell(
                                    &mem,
                                    compare::CompareSpec {
                                        scheme: *scheme,
                                        size,
                                        threads: t,
                                        theta,
                                        write,
                                        slots,
                                        duration,
                                    },
                                )?;
                                let ops = c.ops.max(1) as f64;
                                let retries =
                                    (c.stats.restarts + c.stats.cas_failures) as f64 / ops;
                                table.push(vec![
                                    scheme.name(),
                                    if write { "write" } else { "read" }.to_string(),
                                    size.to_string(),
                                    t.to_string(),
                                    theta.to_string(),
                                    format!("{:.0}", c.ops_per_sec),
                                    format!("{:.2}", c.stats.round_trips as f64 / ops),
                                    format!("{:.2}", c.stats.work_requests as f64 / ops),
                                    format!("{retries:.3}"),
                                    c.errors.to_string(),
                                ]);
                                rows.push(json!({
                                    "scheme": scheme.name(), "op": if write { "write" } else { "read" },
                                    "size": size, "threads": t, "zipf": theta,
                                    "ops_per_sec": c.ops_per_sec,
                                    "round_trips_per_op": c.stats.round_trips as f64 / ops,
                                    "verbs_per_op": c.stats.work_requests as f64 / ops,
                                    "bytes_per_op": c.stats.bytes() as f64 / ops,
                                    "retries_per_op": retries, "errors": c.errors,
                                }));
                            }
                        }
                    }
                }
            }
            let doc = json!({
                "experiment": "scheme-comparison", "transport": transport, "slots": slots,
                "duration_ms": duration_ms, "cores": cores(), "cells": rows,
            });
            write_json(&args.out, "compare", &doc)?;
            // Charts: throughput vs size (1 thread, uniform) and vs threads (smallest size, uniform).
            let t1 = threads.first().copied().unwrap_or(1);
            let z0 = thetas.first().copied().unwrap_or(0.0);
            let s0 = sizes.first().copied().unwrap_or(64);
            for op in ["read", "write"] {
                let by_size: Vec<Series> = schemes
                    .iter()
                    .map(|s| Series {
                        label: s.name(),
                        points: rows
                            .iter()
                            .filter(|r| {
                                r["scheme"] == s.name().as_str()
                                    && r["op"] == op
                                    && r["threads"] == t1
                                    && r["zipf"].as_f64() == Some(z0)
                            })
                            .map(|r| {
                                (
                                    r["size"].as_f64().unwrap_or(1.0),
                                    r["ops_per_sec"].as_f64().unwrap_or(0.0),
                                )
                            })
                            .collect(),
                    })
                    .collect();
                let p = args.out.join(format!("sync-compare-{op}-size.svg"));
                line_chart(
                    &p,
                    &Chart {
                        title: &format!("{op}-only, {t1} thread(s), zipf {z0}"),
                        x_desc: "payload (bytes)",
                        y_desc: "operations per second",
                        log2_x: true,
                    },
                    &by_size,
                )?;
                let by_threads: Vec<Series> = schemes
                    .iter()
                    .map(|s| Series {
                        label: s.name(),
                        points: rows
                            .iter()
                            .filter(|r| {
                                r["scheme"] == s.name().as_str()
                                    && r["op"] == op
                                    && r["size"] == s0
                                    && r["zipf"].as_f64() == Some(z0)
                            })
                            .map(|r| {
                                (
                                    r["threads"].as_f64().unwrap_or(1.0),
                                    r["ops_per_sec"].as_f64().unwrap_or(0.0),
                                )
                            })
                            .collect(),
                    })
                    .collect();
                let p2 = args.out.join(format!("sync-compare-{op}-threads.svg"));
                line_chart(
                    &p2,
                    &Chart {
                        title: &format!("{op}-only, {s0}-byte payloads, zipf {z0}"),
                        x_desc: "threads",
                        y_desc: "operations per second",
                        log2_x: false,
                    },
                    &by_threads,
                )?;
                eprintln!("sync-bench: wrote {} and {}", p.display(), p2.display());
            }
            ("compare", vec![table])
        }
        Cmd::Align {
            strides,
            threads,
            latches,
            hold_ns,
            duration_ms,
        } => {
            let duration = Duration::from_millis(duration_ms.max(1));
            let hold = Duration::from_nanos(hold_ns);
            let mut table = Table::new(
                "Uncontended CAS over latch strides",
                &[
                    ("placement", -9),
                    ("stride", 6),
                    ("thr", 3),
                    ("CAS/s", 12),
                    ("collisions/CAS", 14),
                ],
            );
            table.print_header();
            let mut rows = Vec::new();
            for placement in [Placement::Embedded, Placement::Padded, Placement::Separate] {
                for &stride in &strides {
                    let c = align::run_cell(stride, placement, threads, latches, hold, duration)?;
                    table.push(vec![
                        c.placement.to_string(),
                        c.stride.to_string(),
                        c.threads.to_string(),
                        format!("{:.0}", c.cas_per_sec),
                        format!("{:.3}", c.collisions_per_cas),
                    ]);
                    rows.push(c);
                }
            }
            let doc = json!({
                "experiment": "latch-alignment", "transport": "local", "lock_table_hold_ns": hold_ns,
                "threads": threads, "latches_per_thread": latches, "duration_ms": duration_ms,
                "cores": cores(),
                "cells": rows.iter().map(|c| json!({
                    "placement": c.placement, "stride": c.stride, "threads": c.threads,
                    "cas": c.cas, "cas_per_sec": c.cas_per_sec,
                    "collisions_per_cas": c.collisions_per_cas,
                })).collect::<Vec<_>>(),
            });
            write_json(&args.out, "align", &doc)?;
            let series: Vec<Series> = ["embedded", "padded", "separate"]
                .iter()
                .map(|p| Series {
                    label: (*p).to_string(),
                    points: rows
                        .iter()
                        .filter(|c| c.placement == *p)
                        .map(|c| (c.stride as f64, c.cas_per_sec))
                        .collect(),
                })
                .collect();
            let p = args.out.join("sync-align.svg");
            line_chart(
                &p,
                &Chart {
                    title: "Uncontended CAS with the NIC lock-table model",
                    x_desc: "latch stride (bytes)",
                    y_desc: "CAS per second",
                    log2_x: true,
                },
                &series,
            )?;
            eprintln!("sync-bench: wrote {}", p.display());
            ("align", vec![table])
        }
    };
    if let Some(path) = &args.results_md {
        let page = results_md::render(
            &testbed::results_page::PageHeader::current(),
            experiment,
            &tables,
        );
        testbed::results_page::write_page(path, &page)?;
        eprintln!("sync-bench: wrote {}", path.display());
    }
    Ok(())
}
