//! `zero-bench`: zero-sided data movement measured. `copy` copies memory between two
//! memory nodes with the soft switch (READ responses turned into WRITEs) and with a
//! client's CPU, over item sizes, and prints bandwidth and CPU seconds per GB at each
//! memory node, the switch and the client; `--json` and `--results-md` write them.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use zero_bench::copy_run::{self, CopyPlan};
use zero_bench::report;

#[derive(Debug, Parser)]
#[command(name = "zero-bench", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Copy bandwidth and CPU per GB: switch-driven against CPU-driven copies.
    Copy(CopyArgs),
    /// Run one component of the experiment in this process (started by `copy`).
    #[command(hide = true)]
    Serve {
        #[command(subcommand)]
        role: Role,
    },
}

#[derive(Debug, clap::Args)]
struct CopyArgs {
    /// Item sizes in bytes (bytes per READ and WRITE): powers of two from 64 to 512, or
    /// multiples of 1024.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "64,256,1024,4096,16384,65536"
    )]
    items: Vec<u32>,
    /// Bytes copied per cell.
    #[arg(long, default_value_t = 8 << 20)]
    bytes: u64,
    /// READs in flight (1–16).
    #[arg(long, default_value_t = 8)]
    window: u32,
    /// Repetitions of every cell (the engines alternate which goes first).
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Write every cell and the summary as JSON here.
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// Write the results page (Markdown) here.
    #[arg(long, value_name = "PATH")]
    results_md: Option<PathBuf>,
    /// Write the charts (SVG) into this directory [default: the results page's
    /// directory when --results-md is given, else none].
    #[arg(long, value_name = "DIR")]
    charts: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Role {
    /// A memory node with `capacity` bytes.
    Memnode {
        #[arg(long)]
        capacity: u64,
    },
    /// A soft switch.
    Switch,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Copy(args) => copy(args),
        Command::Serve { role } => serve(role),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("zero-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn serve(role: Role) -> Result<(), String> {
    match role {
        Role::Memnode { capacity } => {
            let node = memnode::Memnode::start(memnode::MemnodeConfig::local(capacity))
                .map_err(|e| format!("memnode: {e}"))?;
            zero_bench::child::announce_and_serve(node.admin_url())?;
            node.shutdown();
        }
        Role::Switch => {
            let sw = accel_p4::switch::SoftSwitch::start(accel_p4::switch::SwitchConfig::local())
                .map_err(|e| format!("switch: {e}"))?;
            zero_bench::child::announce_and_serve(sw.admin_url())?;
            sw.shutdown();
        }
    }
    Ok(())
}

fn copy(args: CopyArgs) -> Result<(), String> {
    if args.items.is_empty() || args.repeat == 0 || args.bytes == 0 {
        return Err("--items, --repeat and --bytes must not be empty or zero".into());
    }
    if !(1..=16).contains(&args.window) {
        return Err(format!(
            "--window {} is out of range: 1 ..= 16",
            args.window
        ));
    }
    let program = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
    let plan = CopyPlan {
        items: args.items.clone(),
        bytes: args.bytes,
        window: args.window,
        repeat: args.repeat,
        program,
    };
    let total = plan.items.len() * 2 * plan.repeat;
    let mut done = 0;
    let cells = copy_run::run(&plan, |c| {
        done += 1;
        eprintln!(
            "[{done}/{total}] round {} {:>6} B {:>6}: {:8.1} MB/s",
            c.round,
            c.item,
            c.engine.name(),
            c.mb_per_s()
        );
    })?;
    let summaries = report::summarize(&cells);
    println!(
        "{}",
        testbed::results_page::markdown_table(&report::HEADERS, &report::rows(&summaries))
    );
    if let Some(path) = &args.json {
        let doc = serde_json::json!({
            "bytes": plan.bytes,
            "window": plan.window,
            "repeat": plan.repeat,
            "cells": cells,
            "summary": summaries,
        });
        let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let charts = match testbed::plot::chart_dir(args.charts.as_deref(), args.results_md.as_deref())
    {
        Some(dir) => {
            let written = zero_bench::charts::write(&summaries, &dir)?;
            for w in &written {
                eprintln!("zero-bench: wrote {}", dir.join(&w.file).display());
            }
            written
        }
        None => Vec::new(),
    };
    if let Some(path) = &args.results_md {
        let header = testbed::results_page::PageHeader::current();
        testbed::results_page::write_page(
            path,
            &report::page(&header, plan.bytes, plan.window, &summaries, &charts),
        )?;
    }
    Ok(())
}
