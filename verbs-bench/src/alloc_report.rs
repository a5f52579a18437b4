//! The `verbs-bench threads` command: runs the [`crate::alloc`] cells in interleaved
//! repetitions, prints the table and the per-thread / shared ratios, writes JSON and,
//! with `--results-md PATH`, the results page (with what this transport can and cannot
//! show of SMART's figures).

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;
use testbed::results_page::{PageHeader, markdown_table};
use verbs::rc::Pmtu;
use verbs::transport::TransportKind;

use crate::alloc::{self, AllocResult, AllocSpec, AllocVerb, Completions, Doorbell, Policy};

/// How the repository's page is written.
pub const WRITTEN_BY: &str = "cargo run --release -p verbs-bench -- threads --results-md docs/results/verbs-bench-threads.md";

/// Options of `verbs-bench threads`.
#[derive(clap::Args, Debug, Clone)]
pub struct ThreadsArgs {
    /// Transports (comma list of udp, shm, local).
    #[arg(long, value_delimiter = ',', default_value = "udp,shm")]
    transports: Vec<TransportKind>,
    /// Verbs (read: 64-byte READs at random addresses; cas: CAS on one shared word).
    #[arg(long, value_delimiter = ',', default_value = "read,cas")]
    verbs: Vec<AllocVerb>,
    /// Client thread counts.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    threads: Vec<usize>,
    /// Queue-pair allocation policies (shared, multiplexed, per-thread).
    #[arg(long, value_delimiter = ',', default_value = "shared,per-thread")]
    policies: Vec<Policy>,
    /// Doorbells (batched: one per batch of `depth`; single: one per work request).
    #[arg(long, value_delimiter = ',', default_value = "batched,single")]
    doorbells: Vec<Doorbell>,
    /// Completion waiting (block in the transport, or spin).
    #[arg(long, value_delimiter = ',', default_value = "block,spin")]
    completions: Vec<Completions>,
    /// Work requests per batch (outstanding per thread), as in SMART's Fig. 3.
    #[arg(long, default_value_t = 8)]
    depth: usize,
    /// Measured time per cell and repetition, in milliseconds.
    #[arg(long, default_value_t = 150)]
    duration_ms: u64,
    /// Repetitions, interleaved over all cells (medians are reported).
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Path MTU of udp queue pairs.
    #[arg(long, default_value = "1024")]
    pmtu: Pmtu,
    /// Use a running memory node (its admin address) instead of starting one.
    #[arg(long, env = "DMKV_MEMNODE_ADMIN")]
    memnode: Option<String>,
    /// Where to write the JSON results.
    #[arg(long, default_value = "results/verbs-bench-threads.json")]
    json: PathBuf,
    /// Also write the results page (date, machine, command line) to this file.
    #[arg(long, value_name = "PATH")]
    results_md: Option<PathBuf>,
    /// Write the charts (SVG) into this directory [default: the results page's
    /// directory when --results-md is given, else none].
    #[arg(long, value_name = "DIR")]
    charts: Option<PathBuf>,
}

/// One cell's median repetition.
struct Line {
    spec: AllocSpec,
    result: AllocResult,
}

impl Line {
    fn cas_failure_share(&self) -> f64 {
        let r = &self.result;
        if r.ops == 0 {
            0.0
        } else {
            1.0 - r.swaps as f64 / r.ops as f64
        }
    }

    fn per_op(&self, v: u64) -> f64 {
        v as f64 / self.result.ops.max(1) as f64
    }

    fn cells(&self) -> Vec<String> {
        let s = &self.spec;
        let r = &self.result;
        let cas = s.verb == AllocVerb::Cas;
        vec![
            s.transport.name().to_string(),
            s.verb.name().to_string(),
            s.policy.name().to_string(),
            s.doorbell.name().to_string(),
            s.completions.name().to_string(),
            s.threads.to_string(),
            format!("{:.0}", r.ops_per_sec()),
            if cas {
                format!("{:.0}", r.swaps_per_sec())
            } else {
                "-".into()
            },
            if cas {
                format!("{:.1}", self.cas_failure_share() * 100.0)
            } else {
                "-".into()
            },
            format!("{:.3}", self.per_op(r.transport.doorbells)),
            format!(
                "{:.2}",
                self.per_op(r.transport.packets_sent + r.transport.packets_received)
            ),
            format!("{:.1}", r.lock_wait_share() * 100.0),
            format!("{:.2}", crate::cpu::micros_per_op(r.cpu, r.ops)),
        ]
    }
}

const HEADERS: [&str; 13] = [
    "transport",
    "verb",
    "queue pairs",
    "doorbell",
    "completions",
    "threads",
    "verbs/s",
    "CAS swaps/s",
    "CAS failed %",
    "doorbells/verb",
    "packets/verb",
    "lock wait %",
    "CPU µs/verb",
];

const WIDTHS: [usize; 13] = [5, 4, 11, 8, 11, 7, 10, 11, 12, 14, 12, 11, 11];

fn print_row(cells: &[String]) {
    let line: Vec<String> = cells
        .iter()
        .zip(WIDTHS)
        .enumerate()
        .map(|(i, (c, w))| {
            if i < 5 {
                format!("{c:<w$}")
            } else {
                format!("{c:>w$}")
            }
        })
        .collect();
    println!("{}", line.join(" "));
}

/// Per-thread throughput over shared throughput for cells that differ only in policy.
struct Ratio {
    transport: &'static str,
    verb: &'static str,
    doorbell: &'static str,
    completions: &'static str,
    threads: usize,
    shared: f64,
    per_thread: f64,
}

fn ratios(lines: &[Line]) -> Vec<Ratio> {
    let mut out = Vec::new();
    for p in lines.iter().filter(|l| l.spec.policy == Policy::PerThread) {
        let Some(s) = lines.iter().find(|l| {
            l.spec.policy == Policy::Shared
                && l.spec.transport == p.spec.transport
                && l.spec.verb == p.spec.verb
                && l.spec.doorbell == p.spec.doorbell
                && l.spec.completions == p.spec.completions
                && l.spec.threads == p.spec.threads
        }) else {
            continue;
        };
        // For CAS the useful work is the swaps; for READ every verb.
        let useful = |l: &Line| match l.spec.verb {
            AllocVerb::Read => l.result.ops_per_sec(),
            AllocVerb::Cas => l.result.swaps_per_sec(),
        };
        out.push(Ratio {
            transport: p.spec.transport.name(),
            verb: p.spec.verb.name(),
            doorbell: p.spec.doorbell.name(),
            completions: p.spec.completions.name(),
            threads: p.spec.threads,
            shared: useful(s),
            per_thread: useful(p),
        });
    }
    out
}

/// Run `verbs-bench threads`.
pub fn run(args: ThreadsArgs) -> Result<(), String> {
    if args.threads.is_empty() || args.threads.contains(&0) || args.threads.iter().any(|&t| t > 256)
    {
        return Err("threads must be between 1 and 256".into());
    }
    if args.depth == 0 || args.depth > 64 {
        return Err("depth must be between 1 and 64".into());
    }
    if args.transports.contains(&TransportKind::Rdma) {
        return Err("the rdma transport is not benchmarked here".into());
    }
    let node = crate::start_node(args.memnode.as_deref())?;
    let targets = crate::targets_of(&node, args.transports.contains(&TransportKind::Shm))?;
    let duration = Duration::from_millis(args.duration_ms.max(1));
    let mut specs = Vec::new();
    for &transport in &args.transports {
        for &verb in &args.verbs {
            for &doorbell in &args.doorbells {
                for &completions in &args.completions {
                    for &policy in &args.policies {
                        for &threads in &args.threads {
                            specs.push(AllocSpec {
                                transport,
                                verb,
                                policy,
                                doorbell,
                                completions,
                                threads,
                                depth: args.depth,
                                duration,
                                pmtu: args.pmtu,
                            });
                        }
                    }
                }
            }
        }
    }
    let repeat = args.repeat.max(1);
    eprintln!(
        "verbs-bench threads: {} cells × {repeat} interleaved repetitions of {} ms, depth {}",
        specs.len(),
        args.duration_ms,
        args.depth
    );
    let mut runs: Vec<Vec<AllocResult>> = vec![Vec::new(); specs.len()];
    for rep in 0..repeat {
        for (i, spec) in specs.iter().enumerate() {
            let r = alloc::run_cell(*spec, &targets)?;
            eprintln!(
                "[{}/{repeat} {:>3}/{}] {:<4} {:<4} {:<11} {:<7} {:<5} t={} {:>10.0} verbs/s",
                rep + 1,
                i + 1,
                specs.len(),
                spec.transport.name(),
                spec.verb.name(),
                spec.policy.name(),
                spec.doorbell.name(),
                spec.completions.name(),
                spec.threads,
                r.ops_per_sec()
            );
            runs[i].push(r);
        }
    }
    let lines: Vec<Line> = specs
        .into_iter()
        .zip(runs)
        .map(|(spec, mut rs)| {
            rs.sort_by(|a, b| a.ops_per_sec().total_cmp(&b.ops_per_sec()));
            let result = rs.swap_remove(rs.len() / 2);
            Line { spec, result }
        })
        .collect();

    print_row(&HEADERS.map(String::from));
    for l in &lines {
        print_row(&l.cells());
    }
    let ratios = ratios(&lines);
    if !ratios.is_empty() {
        println!();
        println!(
            "per-thread queue pairs over one shared queue pair (READs: verbs/s; CAS: swaps/s)"
        );
        for r in &ratios {
            println!(
                "{:<5} {:<4} {:<7} {:<5} t={} shared {:>10.0}  per-thread {:>10.0}  {:>5.2}x",
                r.transport,
                r.verb,
                r.doorbell,
                r.completions,
                r.threads,
                r.shared,
                r.per_thread,
                r.per_thread / r.shared.max(1e-9)
            );
        }
    }

    let doc = json!({
        "benchmark": "verbs-bench threads",
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "depth": args.depth,
        "duration_ms": args.duration_ms,
        "repeat": repeat,
        "read_bytes": alloc::READ_BYTES,
        "cells": lines.iter().map(|l| {
            let s = &l.spec;
            let r = &l.result;
            json!({
                "transport": s.transport.name(), "verb": s.verb.name(),
                "policy": s.policy.name(), "doorbell": s.doorbell.name(),
                "completions": s.completions.name(), "threads": s.threads, "depth": s.depth,
                "verbs": r.ops, "errors": r.errors, "seconds": r.elapsed.as_secs_f64(),
                "verbs_per_sec": r.ops_per_sec(),
                "cas_swaps": r.swaps, "cas_swaps_per_sec": r.swaps_per_sec(),
                "cas_failed_share": if s.verb == AllocVerb::Cas { l.cas_failure_share() } else { 0.0 },
                "doorbells_per_verb": l.per_op(r.transport.doorbells),
                "packets_per_verb": l.per_op(r.transport.packets_sent + r.transport.packets_received),
                "retransmissions_per_verb": l.per_op(r.transport.retransmissions),
                "lock_wait_share": r.lock_wait_share(),
                "cpu_us_per_verb": crate::cpu::micros_per_op(r.cpu, r.ops),
            })
        }).collect::<Vec<_>>(),
        "per_thread_over_shared": ratios.iter().map(|r| json!({
            "transport": r.transport, "verb": r.verb, "doorbell": r.doorbell,
            "completions": r.completions, "threads": r.threads,
            "shared_per_sec": r.shared, "per_thread_per_sec": r.per_thread,
            "ratio": r.per_thread / r.shared.max(1e-9),
        })).collect::<Vec<_>>(),
    });
    if let Some(dir) = args.json.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
    std::fs::write(&args.json, text)
        .map_err(|e| format!("writing {}: {e}", args.json.display()))?;
    eprintln!("verbs-bench: wrote {}", args.json.display());
    let charts = match testbed::plot::chart_dir(args.charts.as_deref(), args.results_md.as_deref())
    {
        Some(dir) => {
            let points: Vec<crate::alloc_charts::Point> = lines
                .iter()
                .map(|l| crate::alloc_charts::Point {
                    transport: l.spec.transport.name().to_owned(),
                    verb: l.spec.verb.name().to_owned(),
                    setting: format!(
                        "{}, {} doorbell, {}",
                        l.spec.policy.name(),
                        l.spec.doorbell.name(),
                        l.spec.completions.name()
                    ),
                    threads: l.spec.threads,
                    per_sec: if l.spec.verb == AllocVerb::Cas {
                        l.result.swaps_per_sec()
                    } else {
                        l.result.ops_per_sec()
                    },
                })
                .collect();
            let written = crate::alloc_charts::write(&points, &dir)?;
            for w in &written {
                eprintln!("verbs-bench: wrote {}", dir.join(&w.file).display());
            }
            written
        }
        None => Vec::new(),
    };
    if let Some(path) = &args.results_md {
        let mut page = render(&PageHeader::current(), args.depth, &lines, &ratios);
        page.push('\n');
        page.push_str(&testbed::plot::charts_section(&charts));
        testbed::results_page::write_page(path, &page)?;
        eprintln!("verbs-bench: wrote {}", path.display());
    }
    Ok(())
}

/// What the page says about the experiment and about what only hardware shows.
const ABOUT: &str = "\
SMART's bench-tool loop (ASPLOS'24 §3.1): each thread posts `depth` work requests, \
rings the doorbell and waits for all of their completions, over and over. 64-byte READs \
go to random addresses in 16 MiB; CASes all hit one word, each thread's k-th CAS of a \
batch expecting the value its earlier ones would leave, so a thread alone always swaps \
and a failure is another thread's interference. *shared*: one queue pair (socket, \
completion queue) for every thread behind a lock that posting and polling take; \
*per-thread*: each thread owns its queue pair, socket and completion polling (SMART's \
thread-aware allocation, what `verbs::worker::Worker` does). *batched*: one doorbell \
per batch; *single*: one per work request. *block*: a thread with nothing completed \
sleeps in the transport; *spin*: it polls again at once. Lock wait is the share of the \
threads' time spent acquiring a shared queue pair's lock; with *block*, the holder of a \
shared queue pair's lock sleeps in its socket until an answer arrives (one waiter on a \
shared completion channel), so the others' lock wait includes that network wait, while \
with *spin* the lock is held only for one post or poll. CPU is the whole process's \
(clients and the in-process memory node) per verb. Each cell's figures are those of its \
median repetition by verbs per second.\n\n\
## What this transport can and cannot show\n\n\
SMART's Figs. 3 and 13 are about the RNIC: per-thread queue pairs that still share a \
*doorbell register* (a UAR page) serialise on the driver's spinlock, and too many \
outstanding work requests thrash the NIC's WQE and MTT caches. Neither exists here. \
Soft RoCE has no doorbell registers: a doorbell is a `sendmmsg` system call, and \
queue pairs share nothing but what the code shares, so SMART's fourth policy \
(per-thread doorbell, against per-thread queue pairs with shared doorbells) has no \
counterpart and is not measured. There is no NIC cache to thrash, so the throughput \
drop at high thread × depth products (Fig. 4, and the work-request throttling of \
Fig. 13) cannot appear and the credits are not measured here. What this transport \
does show is the software side of Fig. 3: the cost of sharing a queue pair across \
threads (the lock, the completion hand-off between threads, one socket's system calls \
serialised) against per-thread queue pairs, the saving of one doorbell per batch \
against one per work request, and what busy-polling costs when threads outnumber \
cores. On a 2-CPU machine the memory node, the client threads and the kernel's \
loopback share two cores, so thread counts above two measure oversubscription, not \
scaling: the ratios between policies at equal thread counts are the result, not the \
absolute curves.\n";

/// The page: header, what was measured, the table and the ratios.
fn render(header: &PageHeader, depth: usize, lines: &[Line], ratios: &[Ratio]) -> String {
    let mut s = header.render("Results: `verbs-bench threads`", WRITTEN_BY);
    s.push_str(&format!(
        "Thread-aware resource allocation (SMART, ASPLOS'24, Figs. 3 and 13a), depth {depth}.\n\n"
    ));
    s.push_str(ABOUT);
    if !ratios.is_empty() {
        s.push_str(
            "\n## Per-thread queue pairs over one shared queue pair\n\n\
             READs: verbs per second; CAS: successful swaps per second.\n\n",
        );
        let rows: Vec<Vec<String>> = ratios
            .iter()
            .map(|r| {
                vec![
                    r.transport.to_string(),
                    r.verb.to_string(),
                    r.doorbell.to_string(),
                    r.completions.to_string(),
                    r.threads.to_string(),
                    format!("{:.0}", r.shared),
                    format!("{:.0}", r.per_thread),
                    format!("{:.2}×", r.per_thread / r.shared.max(1e-9)),
                ]
            })
            .collect();
        s.push_str(&markdown_table(
            &[
                "transport",
                "verb",
                "doorbell",
                "completions",
                "threads",
                "shared /s",
                "per-thread /s",
                "per-thread ÷ shared",
            ],
            &rows,
        ));
    }
    s.push_str("\n## Every cell (medians)\n\n");
    let rows: Vec<Vec<String>> = lines.iter().map(Line::cells).collect();
    s.push_str(&markdown_table(&HEADERS, &rows));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(policy: Policy, verb: AllocVerb, ops: u64, swaps: u64) -> Line {
        Line {
            spec: AllocSpec {
                transport: TransportKind::Udp,
                verb,
                policy,
                doorbell: Doorbell::Batched,
                completions: Completions::Block,
                threads: 4,
                depth: 8,
                duration: Duration::from_millis(100),
                pmtu: Pmtu::DEFAULT,
            },
            result: AllocResult {
                ops,
                swaps,
                elapsed: Duration::from_secs(1),
                ..AllocResult::default()
            },
        }
    }

    #[test]
    fn ratios_pair_cells_that_differ_only_in_policy_and_count_swaps_for_cas() {
        let lines = [
            line(Policy::Shared, AllocVerb::Read, 1000, 0),
            line(Policy::PerThread, AllocVerb::Read, 3000, 0),
            line(Policy::Shared, AllocVerb::Cas, 1000, 100),
            line(Policy::PerThread, AllocVerb::Cas, 2000, 400),
            line(Policy::Multiplexed, AllocVerb::Read, 2000, 0),
        ];
        let r = ratios(&lines);
        assert_eq!(r.len(), 2);
        assert_eq!(
            (r[0].verb, r[0].shared, r[0].per_thread),
            ("read", 1000.0, 3000.0)
        );
        assert_eq!(
            (r[1].verb, r[1].shared, r[1].per_thread),
            ("cas", 100.0, 400.0)
        );
        let page = render(&PageHeader::fixed("verbs-bench threads"), 8, &lines, &r);
        assert!(
            page.starts_with("# Results: `verbs-bench threads`\n"),
            "{page}"
        );
        assert!(
            page.contains("| udp | cas | batched | block | 4 | 100 | 400 | 4.00× |"),
            "{page}"
        );
        assert!(page.contains("doorbell register"), "{page}");
        assert!(
            page.contains("| udp | cas | shared | batched | block | 4 | 1000 | 100 | 90.0 |"),
            "{page}"
        );
    }
}
