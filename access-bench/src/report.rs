//! The program's output: one table per experiment (printed, and on the results page),
//! each cell beside the one-sided cell of the same settings.

use std::fmt::Write as _;

use kvstore::AccessMode;
use testbed::results_page::{PageHeader, markdown_table};

use crate::cell::Cell;
use crate::plan::{Experiment, Plan};
use testbed::plot::{Written, charts_section};

/// The page's "Written by" line.
pub const WRITTEN_BY: &str =
    "cargo run --release -p access-bench -- --results-md docs/results/access-bench.md";

/// The table headers; the third column names the swept setting.
fn headers(e: Experiment) -> [&'static str; 15] {
    let x = match e {
        Experiment::Workloads => "workload",
        Experiment::Contention => "records (A)",
        Experiment::Threads => "threads (C)",
        Experiment::Workers => "RPC workers (C)",
    };
    [
        "index",
        "mode",
        x,
        "ops/s",
        "ops/s range",
        "÷ one-sided",
        "read p50 µs",
        "read p99 µs",
        "update p99 µs",
        "round trips/op",
        "RPCs/op",
        "ops > 1 round trip",
        "memnode CPU µs/op",
        "client CPU µs/op",
        "failed",
    ]
}

fn x_of(c: &Cell) -> String {
    match c.spec.experiment {
        Experiment::Workloads => c.spec.workload.to_owned(),
        Experiment::Contention => c.spec.records.to_string(),
        Experiment::Threads => c.spec.threads.to_string(),
        Experiment::Workers => c.spec.workers.to_string(),
    }
}

/// The rows of experiment `e`'s table.
pub fn rows(cells: &[Cell], e: Experiment) -> Vec<Vec<String>> {
    let of: Vec<&Cell> = cells.iter().filter(|c| c.spec.experiment == e).collect();
    of.iter()
        .map(|c| {
            let base = of.iter().find(|o| {
                o.spec.mode == AccessMode::OneSided
                    && o.spec.index == c.spec.index
                    && x_of(o) == x_of(c)
            });
            let ratio = match base {
                Some(b) if b.ops_per_sec > 0.0 => format!("{:.2}", c.ops_per_sec / b.ops_per_sec),
                _ => String::new(),
            };
            vec![
                c.spec.index.to_owned(),
                c.spec.access(),
                x_of(c),
                format!("{:.0}", c.ops_per_sec),
                format!("{:.0}–{:.0}", c.ops_per_sec_min, c.ops_per_sec_max),
                ratio,
                format!("{:.0}", c.read_p50_us),
                format!("{:.0}", c.read_p99_us),
                c.update_p99_us.map_or("–".into(), |u| format!("{u:.0}")),
                format!("{:.2}", c.round_trips_per_op),
                format!("{:.2}", c.rpcs_per_op),
                format!("{:.0} %", c.multi_round_trip_share * 100.0),
                format!("{:.1}", c.memnode_cpu_us_per_op),
                format!("{:.1}", c.client_cpu_us_per_op),
                c.failed.to_string(),
            ]
        })
        .collect()
}

/// Every experiment's table, as Markdown, with a heading each.
pub fn tables(cells: &[Cell]) -> String {
    let mut s = String::new();
    for e in [
        Experiment::Workloads,
        Experiment::Contention,
        Experiment::Threads,
        Experiment::Workers,
    ] {
        let rows = rows(cells, e);
        if rows.is_empty() {
            continue;
        }
        let _ = writeln!(s, "## {}\n", e.name());
        s.push_str(&markdown_table(&headers(e), &rows));
        s.push('\n');
    }
    s
}

/// The results page, linking `charts` (files beside the page).
pub fn page(header: &PageHeader, plan: &Plan, cells: &[Cell], charts: &[Written]) -> String {
    let mut s = header.render("Results: `access-bench`", WRITTEN_BY);
    let _ = writeln!(
        s,
        "One embedded cluster (one memory node, soft RoCE on loopback) per RPC worker count; \
         clients of the three access modes take turns on the same tables, `rpc` and `hybrid` \
         once with RPC requests by SEND and once WRITTEN into the queue pair's request ring \
         (`/write`). {} records of one \
         {}-byte field, {} operations per cell, {} key distribution, {} threads × {} in \
         flight, {} RPC workers and hybrid k = {} unless the table sweeps them; updates \
         overwrite. `÷ one-sided` is the cell's throughput over the one-sided cell of the \
         same index and setting. `ops > 1 round trip`: the share of the store's operations \
         (a read-modify-write is two) that took more than one round trip, an RPC counting \
         as one — on one-sided rows, how often the one-sided path could not finish at \
         once. CPU per operation: the memory node's threads (data plane \
         and RPC workers) and the rest of the process (clients and metadata service). {} \
         run(s) per cell, the plan run through once per repetition; every figure is the \
         median over the runs, `ops/s range` the lowest and highest throughput.\n",
        plan.records,
        plan.value_bytes,
        plan.operations,
        plan.distribution,
        plan.threads,
        plan.concurrency,
        plan.workers,
        plan.hybrid_k,
        cells.first().map_or(1, |c| c.repetitions)
    );
    s.push_str(&tables(cells));
    s.push_str(&charts_section(charts));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::CellSpec;

    fn cell(mode: AccessMode, ops: f64) -> Cell {
        Cell {
            spec: CellSpec {
                experiment: Experiment::Workloads,
                index: "race",
                mode,
                transport: kvstore::RpcTransport::Send,
                workload: "A",
                records: 10,
                threads: 1,
                workers: 2,
            },
            ops_per_sec: ops,
            ops_per_sec_min: ops,
            ops_per_sec_max: ops,
            repetitions: 1,
            read_p50_us: 50.0,
            read_p99_us: 200.0,
            update_p99_us: Some(300.0),
            round_trips_per_op: 2.5,
            rpcs_per_op: 0.0,
            multi_round_trip_share: 0.25,
            memnode_cpu_us_per_op: 3.0,
            client_cpu_us_per_op: 7.0,
            failed: 0,
        }
    }

    #[test]
    fn rows_compare_with_the_one_sided_cell() {
        let mut by_write = cell(AccessMode::Rpc, 500.0);
        by_write.spec.transport = kvstore::RpcTransport::Write;
        let cells = vec![
            cell(AccessMode::OneSided, 1000.0),
            cell(AccessMode::Rpc, 1500.0),
            by_write,
        ];
        let r = rows(&cells, Experiment::Workloads);
        assert_eq!(r[0][5], "1.00");
        assert_eq!(r[1][5], "1.50");
        assert_eq!(r[1][1], "rpc");
        assert_eq!((r[2][1].as_str(), r[2][5].as_str()), ("rpc/write", "0.50"));
        assert!(rows(&cells, Experiment::Threads).is_empty());
        let t = tables(&cells);
        assert!(t.contains("## workloads"), "{t}");
        assert!(
            t.contains("| race | rpc | A | 1500 | 1500–1500 | 1.50 |"),
            "{t}"
        );
        assert!(t.contains("| 2.50 | 0.00 | 25 % | 3.0 |"), "{t}");
    }
}
