//! `access-bench`: one-sided, RPC and hybrid access to Clover and RACE tables, side by
//! side — YCSB A, B and C, then throughput against contention, client threads and RPC
//! workers — printed as tables, written as JSON (`--json`) and as a results page
//! (`--results-md`).

use std::path::PathBuf;
use std::process::ExitCode;

use access_bench::plan::{Experiment, Plan};
use access_bench::{charts, repeat, report, run};
use clap::Parser;

#[derive(Debug, Parser)]
#[command(name = "access-bench", version, about, long_about = None)]
struct Cli {
    /// Records per table (the contention sweep uses --record-counts).
    #[arg(long, default_value_t = Plan::standard().records)]
    records: u64,
    /// Operations per cell.
    #[arg(long, default_value_t = Plan::standard().operations)]
    operations: u64,
    /// Driver threads (except in the thread sweep).
    #[arg(long, default_value_t = Plan::standard().threads)]
    threads: usize,
    /// Operations in flight per thread.
    #[arg(long, default_value_t = Plan::standard().concurrency)]
    concurrency: usize,
    /// Key distribution: uniform or zipfian.
    #[arg(long, default_value = "zipfian")]
    distribution: String,
    /// RPC workers per memory node (except in the worker sweep).
    #[arg(long, default_value_t = Plan::standard().workers)]
    workers: usize,
    /// Thread counts of the thread sweep.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    thread_counts: Vec<usize>,
    /// Worker counts of the worker sweep.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    worker_counts: Vec<usize>,
    /// Record counts of the contention sweep (workload A).
    #[arg(long, value_delimiter = ',', default_value = "2000,200,20,4")]
    record_counts: Vec<u64>,
    /// Round trips hybrid spends one-sided before it turns to an RPC.
    #[arg(long, default_value_t = Plan::standard().hybrid_k)]
    hybrid_k: u32,
    /// Experiments to run: workloads, contention, threads, workers.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "workloads,contention,threads,workers"
    )]
    experiments: Vec<String>,
    /// Runs of the whole plan; every figure reported is the median over them.
    #[arg(long, default_value_t = 3)]
    repetitions: usize,
    /// Write every cell as JSON here.
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// Write the results page (Markdown) here.
    #[arg(long, value_name = "PATH")]
    results_md: Option<PathBuf>,
    /// Write the sweeps' charts (SVG) into this directory [default: the results page's
    /// directory when --results-md is given, else none].
    #[arg(long, value_name = "DIR")]
    charts: Option<PathBuf>,
}

fn experiment(name: &str) -> Result<Experiment, String> {
    [
        Experiment::Workloads,
        Experiment::Contention,
        Experiment::Threads,
        Experiment::Workers,
    ]
    .into_iter()
    .find(|e| e.name() == name.trim())
    .ok_or_else(|| {
        format!("unknown experiment {name:?}: use workloads, contention, threads or workers")
    })
}

fn main() -> ExitCode {
    match run_cli(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("access-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_cli(cli: Cli) -> Result<(), String> {
    let plan = Plan {
        records: cli.records,
        operations: cli.operations,
        threads: cli.threads,
        concurrency: cli.concurrency,
        distribution: cli.distribution,
        workers: cli.workers,
        thread_counts: cli.thread_counts,
        worker_counts: cli.worker_counts,
        record_counts: cli.record_counts,
        hybrid_k: cli.hybrid_k,
        value_bytes: Plan::standard().value_bytes,
        experiments: cli
            .experiments
            .iter()
            .map(|e| experiment(e))
            .collect::<Result<_, _>>()?,
    };
    plan.check()?;
    if cli.repetitions == 0 {
        return Err("--repetitions must be at least 1".into());
    }
    let mut runs = Vec::with_capacity(cli.repetitions);
    for rep in 1..=cli.repetitions {
        runs.push(run_once(&plan, rep, cli.repetitions)?);
    }
    let cells = repeat::fold(&runs);
    println!("{}", report::tables(&cells));
    if let Some(path) = &cli.json {
        let doc = serde_json::json!({ "plan": plan, "repetitions": cli.repetitions, "cells": cells, "runs": runs });
        let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let chart_dir = testbed::plot::chart_dir(cli.charts.as_deref(), cli.results_md.as_deref());
    let charts = match &chart_dir {
        Some(dir) => {
            let written = charts::write(&cells, dir)?;
            for w in &written {
                eprintln!("access-bench: wrote {}", dir.join(&w.file).display());
            }
            written
        }
        None => Vec::new(),
    };
    if let Some(path) = &cli.results_md {
        let header = testbed::results_page::PageHeader::current();
        testbed::results_page::write_page(path, &report::page(&header, &plan, &cells, &charts))?;
    }
    Ok(())
}

/// One pass over the plan, with a progress line per cell.
fn run_once(plan: &Plan, rep: usize, reps: usize) -> Result<Vec<access_bench::cell::Cell>, String> {
    let mut n = 0;
    run::run(plan, |c| {
        n += 1;
        eprintln!(
            "[run {rep}/{reps}, cell {n}] {} {} {} {}: {:.0} ops/s, {:.2} round trips/op, {:.2} RPCs/op",
            c.spec.experiment.name(),
            c.spec.index,
            c.spec.access(),
            match c.spec.experiment {
                Experiment::Workloads => format!("workload {}", c.spec.workload),
                Experiment::Contention => format!("{} records", c.spec.records),
                Experiment::Threads => format!("{} threads", c.spec.threads),
                Experiment::Workers => format!("{} workers", c.spec.workers),
            },
            c.ops_per_sec,
            c.round_trips_per_op,
            c.rpcs_per_op
        );
    })
}
