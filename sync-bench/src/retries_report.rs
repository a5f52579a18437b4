//! The `sync-bench retries` command: runs the [`crate::retries`] cells in interleaved
//! repetitions, prints the table and the off → on comparison, writes JSON and SVG
//! charts and, on request, the results page.

use std::path::Path;
use std::time::Duration;

use serde_json::json;
use testbed::results_page::{PageHeader, markdown_table};

use crate::median;
use crate::results_md::{self, Table};
use crate::retries::{Bench, Index, Mode, RetriesCell, RetriesSpec};
use testbed::plot::{Chart, Series, line_chart};

/// Options of `sync-bench retries`.
#[derive(clap::Args, Debug, Clone)]
pub struct RetriesArgs {
    /// Indexes (clover, race).
    #[arg(long, value_delimiter = ',', default_value = "clover,race")]
    pub indexes: Vec<Index>,
    /// Conflict-avoidance modes (off, backoff, on).
    #[arg(long, value_delimiter = ',', default_value = "off,on")]
    pub modes: Vec<Mode>,
    /// Backoff units t0 to measure the backoff modes with, µs (the library's default
    /// is 2 µs; a soft-RoCE round trip on one host takes 10 µs and more).
    #[arg(long, value_delimiter = ',', default_value = "2,16")]
    pub t0_us: Vec<u64>,
    /// Threads, one session each.
    #[arg(long, value_delimiter = ',', default_value = "1,4,8")]
    pub threads: Vec<usize>,
    /// Concurrent update loops per session (SMART's Fig. 5 uses depth 8).
    #[arg(long, value_delimiter = ',', default_value = "8,32")]
    pub tasks: Vec<usize>,
    /// Keys in each table.
    #[arg(long, default_value_t = 1000)]
    pub keys: u64,
    /// Zipf exponent of the key choice (0 = uniform).
    #[arg(long, default_value_t = 0.99)]
    pub theta: f64,
    /// Measured time per cell and repetition, ms.
    #[arg(long, default_value_t = 600)]
    pub duration_ms: u64,
    /// Repetitions, interleaved over every cell (medians are reported).
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// Memory-node capacity, MiB.
    #[arg(long, default_value_t = 512)]
    pub capacity_mb: u64,
    /// Seed of the key choice.
    #[arg(long, default_value_t = 0x5eed)]
    pub seed: u64,
}

/// Medians of one (index, mode, threads) cell over the repetitions.
#[derive(Debug, Clone)]
pub struct Summary {
    /// Index.
    pub index: Index,
    /// Mode.
    pub mode: Mode,
    /// Backoff unit, µs (0 without backoff).
    pub t0_us: u64,
    /// Threads.
    pub threads: usize,
    /// Update loops per session.
    pub tasks: usize,
    /// Successful updates per second.
    pub ops_per_sec: f64,
    /// Failed index CASes per update.
    pub retries_per_op: f64,
    /// Restarted traversals per update.
    pub restarts_per_op: f64,
    /// Round trips per update.
    pub round_trips_per_op: f64,
    /// Work requests per update.
    pub verbs_per_op: f64,
    /// Retransmitted packets per update.
    pub retransmissions_per_op: f64,
    /// Failed updates, summed over the repetitions.
    pub errors: u64,
    /// Updates, summed over the repetitions.
    pub updates: u64,
}

/// The medians of `runs`, each figure on its own.
pub fn summarize(
    index: Index,
    (mode, t0_us): (Mode, u64),
    (threads, tasks): (usize, usize),
    runs: &[RetriesCell],
) -> Summary {
    let m = |f: &dyn Fn(&RetriesCell) -> f64| median(&mut runs.iter().map(f).collect::<Vec<_>>());
    Summary {
        index,
        mode,
        t0_us,
        threads,
        tasks,
        ops_per_sec: m(&|c| c.ops_per_sec()),
        retries_per_op: m(&|c| c.retries_per_op()),
        restarts_per_op: m(&|c| c.restarts_per_op()),
        round_trips_per_op: m(&|c| c.round_trips_per_op()),
        verbs_per_op: m(&|c| c.verbs_per_op()),
        retransmissions_per_op: m(&|c| c.retransmissions_per_op()),
        errors: runs.iter().map(|c| c.errors).sum(),
        updates: runs.iter().map(|c| c.updates).sum(),
    }
}

fn t0_label(s: &Summary) -> String {
    if s.mode == Mode::Off {
        "-".into()
    } else {
        s.t0_us.to_string()
    }
}

fn row(s: &Summary) -> Vec<String> {
    vec![
        s.index.name().to_string(),
        s.mode.name().to_string(),
        t0_label(s),
        s.threads.to_string(),
        s.tasks.to_string(),
        format!("{:.0}", s.ops_per_sec),
        format!("{:.2}", s.retries_per_op),
        format!("{:.3}", s.restarts_per_op),
        format!("{:.2}", s.round_trips_per_op),
        format!("{:.2}", s.verbs_per_op),
        format!("{:.3}", s.retransmissions_per_op),
        s.errors.to_string(),
    ]
}

/// The off → on comparison: for every index and thread count with both modes, the
/// figures without and with SMART's conflict avoidance.
pub fn comparison(summaries: &[Summary]) -> Table {
    let mut t = Table::new(
        "Conflict avoidance off → on",
        &[
            ("index", -6),
            ("thr", 3),
            ("tasks", 5),
            ("t0 µs", 5),
            ("retries/op off", 14),
            ("retries/op on", 13),
            ("round trips/op off", 18),
            ("round trips/op on", 17),
            ("updates/s off", 13),
            ("updates/s on", 12),
            ("on ÷ off", 8),
        ],
    );
    for off in summaries.iter().filter(|s| s.mode == Mode::Off) {
        for on in summaries.iter().filter(|s| {
            s.mode == Mode::On
                && s.index == off.index
                && s.threads == off.threads
                && s.tasks == off.tasks
        }) {
            t.rows.push(vec![
                off.index.name().to_string(),
                off.threads.to_string(),
                off.tasks.to_string(),
                on.t0_us.to_string(),
                format!("{:.2}", off.retries_per_op),
                format!("{:.2}", on.retries_per_op),
                format!("{:.2}", off.round_trips_per_op),
                format!("{:.2}", on.round_trips_per_op),
                format!("{:.0}", off.ops_per_sec),
                format!("{:.0}", on.ops_per_sec),
                format!("{:.2}×", on.ops_per_sec / off.ops_per_sec.max(1e-9)),
            ]);
        }
    }
    t
}

const ABOUT: &str = "\
SMART (ASPLOS'24) §4.3, Fig. 14: with 100 % updates on Zipf(0.99) keys, a RACE table \
saw 11.5 failed-CAS retries per update without conflict avoidance and 1.1 with it (96 \
threads on RDMA hardware). Here an embedded cluster with one memory node over soft RoCE \
(udp, loopback) holds a Clover table and a RACE table; each thread is one session \
running the given number of concurrent update loops (64-byte values). *off*: a failed \
CAS is retried at once and every loop runs concurrently; *backoff*: truncated \
exponential backoff with the dynamic limit (unit t0 as the t0 column says, up to \
1024·t0; the library's default t0 is 2 µs, SMART's is about one RDMA round trip); *on*: backoff \
plus per-thread admission throttling of concurrent operations (c_max between 1 and 32, \
moved by the retry rate), the library's default. Work-request credits are off in every \
mode. A retry is a failed index CAS (Clover's link CAS, RACE's slot CAS), which costs the \
update at least one more round trip; restarts are traversals begun again. Round trips, \
verbs and retries per update are counted by the sessions, not timed, but how often \
updates collide depends on their timing, so these figures move between runs too, less \
than updates per second do. Each figure is the median of the interleaved \
repetitions.\n";

/// For each index and loops per session, the range over thread counts and backoff
/// units of on ÷ off for retries, round trips and updates per second.
pub fn in_short(summaries: &[Summary]) -> Vec<String> {
    let mut keys: Vec<(Index, usize)> = Vec::new();
    for s in summaries {
        if !keys.contains(&(s.index, s.tasks)) {
            keys.push((s.index, s.tasks));
        }
    }
    let mut out = Vec::new();
    for (index, tasks) in keys {
        let mut ratios: [Vec<f64>; 3] = [Vec::new(), Vec::new(), Vec::new()];
        for off in summaries
            .iter()
            .filter(|s| s.mode == Mode::Off && s.index == index && s.tasks == tasks)
        {
            for on in summaries.iter().filter(|s| {
                s.mode == Mode::On
                    && s.index == index
                    && s.tasks == tasks
                    && s.threads == off.threads
            }) {
                let r = |a: f64, b: f64| if a > 0.0 { b / a } else { 1.0 };
                ratios[0].push(r(off.retries_per_op, on.retries_per_op));
                ratios[1].push(r(off.round_trips_per_op, on.round_trips_per_op));
                ratios[2].push(r(off.ops_per_sec, on.ops_per_sec));
            }
        }
        if ratios[0].is_empty() {
            continue;
        }
        let range = |v: &[f64]| {
            let lo = v.iter().copied().fold(f64::MAX, f64::min);
            let hi = v.iter().copied().fold(f64::MIN, f64::max);
            format!("{lo:.2}–{hi:.2}×")
        };
        out.push(format!(
            "{}, {tasks} loops per session: on ÷ off is {} for retries per update, {} for round trips per update, {} for updates per second",
            index.name(),
            range(&ratios[0]),
            range(&ratios[1]),
            range(&ratios[2]),
        ));
    }
    out
}

/// One cell's index, (mode, backoff unit in µs), (threads, loops per session) and its
/// repetitions.
type CellRuns = (Index, (Mode, u64), (usize, usize), Vec<RetriesCell>);

/// The (mode, backoff unit) pairs to measure: `off` once, the others once per unit.
pub fn variants(modes: &[Mode], t0_us: &[u64]) -> Vec<(Mode, u64)> {
    let mut out = Vec::new();
    for &m in modes {
        if m == Mode::Off {
            out.push((m, 0));
        } else {
            out.extend(t0_us.iter().map(|&t| (m, t)));
        }
    }
    out
}

/// Run `sync-bench retries`.
pub fn run(a: &RetriesArgs, out: &Path, results_md: Option<&Path>) -> Result<(), String> {
    if a.threads.is_empty() || a.threads.iter().any(|&t| t == 0 || t > 64) {
        return Err("threads must be between 1 and 64".into());
    }
    if a.tasks.is_empty() || a.tasks.iter().any(|&t| t == 0 || t > 256) {
        return Err("tasks must be between 1 and 256".into());
    }
    if a.keys == 0 || a.keys > 1_000_000 {
        return Err("keys must be between 1 and 1000000".into());
    }
    if !(0.0..=5.0).contains(&a.theta) {
        return Err("theta must be between 0 and 5".into());
    }
    if a.t0_us.is_empty() || a.t0_us.iter().any(|&t| t == 0 || t > 10_000) {
        return Err("backoff units must be between 1 and 10000 µs".into());
    }
    if a.modes.is_empty() || a.indexes.is_empty() {
        return Err("give at least one mode and one index".into());
    }
    let duration = Duration::from_millis(a.duration_ms.max(1));
    let variants = variants(&a.modes, &a.t0_us);
    eprintln!(
        "sync-bench retries: loading {} keys into each table, then {} cells × {} reps of {} ms",
        a.keys,
        a.indexes.len() * variants.len() * a.threads.len() * a.tasks.len(),
        a.reps.max(1),
        a.duration_ms
    );
    let bench = Bench::start(a.keys, a.capacity_mb.max(16) << 20, &variants)?;
    let mut cells: Vec<CellRuns> = Vec::new();
    for &tasks in &a.tasks {
        for &threads in &a.threads {
            for &index in &a.indexes {
                for &variant in &variants {
                    cells.push((index, variant, (threads, tasks), Vec::new()));
                }
            }
        }
    }
    for rep in 0..a.reps.max(1) {
        for (i, (index, (mode, t0_us), (threads, tasks), runs)) in cells.iter_mut().enumerate() {
            let c = bench.run(RetriesSpec {
                index: *index,
                mode: *mode,
                t0_us: *t0_us,
                threads: *threads,
                tasks: *tasks,
                theta: a.theta,
                duration,
                seed: a.seed ^ (rep as u64) << 48 ^ (i as u64) << 40,
            })?;
            eprintln!(
                "[rep {} cell {:>2}] {:<6} {:<7} t0={:<3} t={} tasks={} {:>8.0} updates/s {:>6.2} retries/op {:>5.2} round trips/op",
                rep + 1,
                i + 1,
                index.name(),
                mode.name(),
                t0_us,
                threads,
                tasks,
                c.ops_per_sec(),
                c.retries_per_op(),
                c.round_trips_per_op()
            );
            runs.push(c);
        }
    }
    let summaries: Vec<Summary> = cells
        .iter()
        .map(|(i, v, tk, runs)| summarize(*i, *v, *tk, runs))
        .collect();

    let mut table = Table::new(
        "Every cell (medians)",
        &[
            ("index", -6),
            ("mode", -7),
            ("t0 µs", 5),
            ("thr", 3),
            ("tasks", 5),
            ("updates/s", 10),
            ("retries/op", 10),
            ("restarts/op", 11),
            ("round trips/op", 14),
            ("verbs/op", 8),
            ("retransmits/op", 14),
            ("errors", 6),
        ],
    );
    table.print_header();
    for s in &summaries {
        table.push(row(s));
    }
    let cmp = comparison(&summaries);
    for line in in_short(&summaries) {
        println!("{line}");
    }
    if !cmp.rows.is_empty() {
        println!();
        cmp.print_header();
        for r in &cmp.rows {
            let cells: Vec<&str> = r.iter().map(String::as_str).collect();
            println!("{}", cells.join("  "));
        }
    }

    let doc = json!({
        "experiment": "conflict-avoidance-retries", "transport": "udp",
        "keys": a.keys, "theta": a.theta, "tasks_per_thread": a.tasks,
        "duration_ms": a.duration_ms, "reps": a.reps.max(1), "value_bytes": crate::retries::VALUE_LEN,
        "cores": std::thread::available_parallelism().map_or(1, |n| n.get()),
        "cells": summaries.iter().map(|s| json!({
            "index": s.index.name(), "mode": s.mode.name(), "t0_us": s.t0_us,
            "threads": s.threads, "tasks": s.tasks, "ops_per_sec": s.ops_per_sec, "retries_per_op": s.retries_per_op,
            "restarts_per_op": s.restarts_per_op, "round_trips_per_op": s.round_trips_per_op,
            "verbs_per_op": s.verbs_per_op, "retransmissions_per_op": s.retransmissions_per_op,
            "errors": s.errors, "updates": s.updates,
        })).collect::<Vec<_>>(),
        "runs": cells.iter().map(|(i, (m, t0), (t, k), runs)| json!({
            "index": i.name(), "mode": m.name(), "t0_us": t0, "threads": t, "tasks": k,
            "ops_per_sec": runs.iter().map(|c| c.ops_per_sec()).collect::<Vec<_>>(),
            "retries_per_op": runs.iter().map(|c| c.retries_per_op()).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    });
    std::fs::create_dir_all(out).map_err(|e| format!("creating {}: {e}", out.display()))?;
    let p = out.join("sync-retries.json");
    let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
    std::fs::write(&p, text).map_err(|e| format!("writing {}: {e}", p.display()))?;
    eprintln!("sync-bench: wrote {}", p.display());

    for (file, title, y, f, tasks) in a.tasks.iter().flat_map(|&k| {
        [
            (
                format!("sync-retries-per-op-tasks{k}.svg"),
                format!(
                    "Failed-CAS retries per update, zipf {}, 100 % updates, {k} loops per session",
                    a.theta
                ),
                "retries per update",
                (|s: &Summary| s.retries_per_op) as fn(&Summary) -> f64,
                k,
            ),
            (
                format!("sync-retries-throughput-tasks{k}.svg"),
                format!(
                    "Updates per second, zipf {}, 100 % updates, {k} loops per session",
                    a.theta
                ),
                "updates per second",
                |s: &Summary| s.ops_per_sec,
                k,
            ),
        ]
    }) {
        let mut series = Vec::new();
        for &index in &a.indexes {
            for &(mode, t0_us) in &variants {
                series.push(Series {
                    label: match mode {
                        Mode::Off => format!("{} off", index.name()),
                        m => format!("{} {} t0={t0_us}µs", index.name(), m.name()),
                    },
                    points: summaries
                        .iter()
                        .filter(|s| {
                            s.index == index
                                && s.mode == mode
                                && s.t0_us == t0_us
                                && s.tasks == tasks
                        })
                        .map(|s| (s.threads as f64, f(s)))
                        .collect(),
                });
            }
        }
        let path = out.join(file);
        line_chart(
            &path,
            &Chart {
                title: &title,
                x_desc: "threads (sessions)",
                y_desc: y,
                log2_x: false,
            },
            &series,
        )?;
        eprintln!("sync-bench: wrote {}", path.display());
    }

    if let Some(path) = results_md {
        let page = render(
            &PageHeader::current(),
            a,
            &in_short(&summaries),
            &[cmp, table],
        );
        testbed::results_page::write_page(path, &page)?;
        eprintln!("sync-bench: wrote {}", path.display());
    }
    Ok(())
}

/// The page: header, what was measured, then the tables.
pub fn render(header: &PageHeader, a: &RetriesArgs, short: &[String], tables: &[Table]) -> String {
    let mut s = header.render(
        "Results: `sync-bench retries`",
        &results_md::written_by("retries"),
    );
    s.push_str(&format!(
        "{} keys per table, zipf θ = {}, {:?} update loops per session, {} ms per cell, {} interleaved repetitions, backoff units {:?} µs.\n\n",
        a.keys, a.theta, a.tasks, a.duration_ms, a.reps.max(1), a.t0_us
    ));
    s.push_str(ABOUT);
    if !short.is_empty() {
        s.push_str("\n## In short\n\nOver the thread counts and backoff units measured:\n\n");
        for line in short {
            s.push_str(&format!("- {line}.\n"));
        }
    }
    for t in tables {
        s.push('\n');
        s.push_str(&format!("## {}\n\n", t.title));
        let names: Vec<&str> = t.columns.iter().map(|c| c.0).collect();
        s.push_str(&markdown_table(&names, &t.rows));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(updates: u64, cas_failures: u64, round_trips: u64) -> RetriesCell {
        RetriesCell {
            updates,
            operations: updates,
            elapsed: Duration::from_secs(1),
            cas_failures,
            round_trips,
            ..RetriesCell::default()
        }
    }

    #[test]
    fn medians_are_taken_per_figure_and_the_comparison_pairs_off_with_on() {
        let off = summarize(
            Index::Race,
            (Mode::Off, 0),
            (4, 8),
            &[
                cell(100, 900, 500),
                cell(300, 600, 900),
                cell(200, 2000, 600),
            ],
        );
        // Retries per op: 9, 2, 10 → 9; throughput 100, 300, 200 → 200.
        assert_eq!(off.retries_per_op, 9.0);
        assert_eq!(off.ops_per_sec, 200.0);
        assert_eq!(off.round_trips_per_op, 3.0);
        let on = summarize(Index::Race, (Mode::On, 16), (4, 8), &[cell(400, 40, 1200)]);
        let other = summarize(Index::Race, (Mode::On, 16), (4, 32), &[cell(400, 40, 1200)]);
        let backoff = summarize(
            Index::Race,
            (Mode::Backoff, 16),
            (4, 8),
            &[cell(400, 80, 1200)],
        );
        let all = [off, backoff, on, other];
        let short = in_short(&all);
        assert_eq!(
            short,
            vec![
                "race, 8 loops per session: on ÷ off is 0.01–0.01× for retries per update, \
                 1.00–1.00× for round trips per update, 2.00–2.00× for updates per second"
                    .to_string()
            ]
        );
        let t = comparison(&all);
        assert_eq!(
            t.rows,
            vec![vec![
                "race", "4", "8", "16", "9.00", "0.10", "3.00", "3.00", "200", "400", "2.00×"
            ]]
        );
        let args = RetriesArgs {
            indexes: vec![Index::Race],
            modes: vec![Mode::Off, Mode::On],
            t0_us: vec![16],
            threads: vec![4],
            tasks: vec![8],
            keys: 1000,
            theta: 0.99,
            duration_ms: 100,
            reps: 1,
            capacity_mb: 64,
            seed: 1,
        };
        let page = render(
            &PageHeader::fixed("sync-bench retries"),
            &args,
            &short,
            &[t],
        );
        assert!(
            page.starts_with("# Results: `sync-bench retries`\n"),
            "{page}"
        );
        assert!(
            page.contains("| race | 4 | 8 | 16 | 9.00 | 0.10 |"),
            "{page}"
        );
        assert_eq!(
            variants(&[Mode::Off, Mode::Backoff, Mode::On], &[2, 16]),
            vec![
                (Mode::Off, 0),
                (Mode::Backoff, 2),
                (Mode::Backoff, 16),
                (Mode::On, 2),
                (Mode::On, 16)
            ]
        );
    }
}
