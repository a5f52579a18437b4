//! The shape of SwordBox Figs. 11–14 on this machine: Clover through the soft switch with
//! the YCSB driver, 1 024 keys of 128 B, zipf 0.99, write fractions 0/5/50/100 %, steering
//! off / write / read+write; plus, at zipf 1.5 and 50 % writes, steering off, read+write on
//! every key and partial steering (read+write on the hottest 8 and 64 keys).
//! Prints a table and writes `results/steering.json` and `results/steering.svg`.
//!
//! `cargo run --release -p ycsb --example steering -- [OPS_PER_CELL] [OUT_DIR] [--results-md PATH]`
//!
//! With `--results-md PATH` the table is also written as a Markdown results page (date,
//! machine, command line) to `PATH`, replacing it.
//!
//! Zipf 1.5 is drawn exactly (the driver's rejection-inversion sampler for constants of 1
//! or more). Throughput is ops/s of the whole client (2 threads × 4
//! operations in flight); bytes/op and retries/op are the session's protocol counters
//! (RoCE bytes both ways; failed link CASes + restarted traversals); p99 latencies are
//! per operation type. Figures measured with it: `accel-p4/README.md`.

use std::path::PathBuf;

use accel_p4::control::SteerSettings;
use accel_p4::spec::mode;
use plotters::prelude::*;
use serde_json::json;
use ycsb::bindings::dmkv::DmkvBinding;
use ycsb::client::{Phase, RunOptions, run_phase};
use ycsb::generator::{build_key_name, fnvhash64};
use ycsb::measure::RunReport;
use ycsb::props::Properties;

#[path = "results_md/steering.rs"]
mod results_md;

const RECORDS: i64 = 1024;

fn props(write: f64, zipf: f64, ops: u64) -> Properties {
    let mut p = Properties::new();
    for (k, v) in [
        ("zipfianconstant", format!("{zipf}")),
        ("recordcount", RECORDS.to_string()),
        ("operationcount", ops.to_string()),
        ("fieldcount", "1".into()),
        ("fieldlength", "128".into()),
        ("requestdistribution", "zipfian".into()),
        ("readproportion", format!("{}", 1.0 - write)),
        ("updateproportion", format!("{write}")),
        ("insertproportion", "0".into()),
        ("scanproportion", "0".into()),
        ("readallfields", "true".into()),
        ("threadcount", "2".into()),
        ("concurrency", "4".into()),
        ("dmkv.transport", "udp".into()),
        ("dmkv.switch", "true".into()),
        ("dmkv.update", "overwrite".into()),
    ] {
        p.set(k, &v);
    }
    p
}

fn opts(phase: Phase) -> RunOptions {
    let mut o = RunOptions::new(phase);
    o.progress = false;
    o.status = false;
    o
}

fn p99(r: &RunReport, op: &str) -> Option<u64> {
    r.ops.iter().find(|o| o.name == op).and_then(|o| {
        o.percentiles
            .iter()
            .find(|(p, _)| *p >= 99.0)
            .map(|(_, v)| *v)
    })
}

/// The `n` most requested keys of YCSB's scrambled zipfian over `RECORDS` keys. As in
/// YCSB, the generator's item space is one larger than the record count (its upper bound
/// is inclusive), and a draw past the last record is drawn again.
fn hottest(n: usize) -> Vec<i64> {
    let mut out = Vec::new();
    let mut rank = 0;
    while out.len() < n {
        let k = fnvhash64(rank) % (RECORDS + 1);
        if k < RECORDS && !out.contains(&k) {
            out.push(k);
        }
        rank += 1;
    }
    out
}

struct Cell {
    label: String,
    write: f64,
    zipf: f64,
    steering: &'static str,
    report: RunReport,
}

fn main() -> Result<(), String> {
    let mut args: Vec<String> = std::env::args().collect();
    let results_md = match args.iter().position(|a| a == "--results-md") {
        Some(i) if i + 1 < args.len() => {
            let path = PathBuf::from(args.remove(i + 1));
            args.remove(i);
            Some(path)
        }
        Some(_) => return Err("--results-md needs a path".into()),
        None => None,
    };
    let ops: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let out = PathBuf::from(args.get(2).cloned().unwrap_or_else(|| "results".into()));
    std::fs::create_dir_all(&out).map_err(|e| e.to_string())?;

    let mut cells = Vec::new();
    let modes: [(&str, u32, Option<usize>); 5] = [
        ("off", 0, None),
        ("write", mode::WRITE_STEER, None),
        ("read+write", mode::WRITE_STEER | mode::READ_STEER, None),
        ("r+w hot 8", mode::WRITE_STEER | mode::READ_STEER, Some(8)),
        ("r+w hot 64", mode::WRITE_STEER | mode::READ_STEER, Some(64)),
    ];
    let mut plan = Vec::new();
    for write in [0.0, 0.05, 0.5, 1.0] {
        for m in &modes[..3] {
            plan.push((write, 0.99, *m));
        }
    }
    for m in [modes[0], modes[2], modes[3], modes[4]] {
        plan.push((0.5, 1.5, m));
    }
    for (write, zipf, (steering, bits, partial)) in plan {
        // A fresh cluster and switch per cell.
        let p = props(write, zipf, ops);
        let binding = DmkvBinding::new(&p).map_err(|e| e.to_string())?;
        run_phase(&binding, &p, &opts(Phase::Load)).map_err(|e| e.to_string())?;
        let switch = binding.switch().ok_or("no switch")?.clone();
        let table = binding.config().table.clone();
        let keys: Vec<i64> = match partial {
            Some(n) => hottest(n),
            None => (0..RECORDS).collect(),
        };
        let meta = binding.client().metadata();
        let mut chains = Vec::new();
        for k in keys {
            let name = build_key_name(k, false, 1);
            if let Some(c) = meta
                .lookup_chain(&table, name.as_bytes())
                .map_err(|e| e.to_string())?
            {
                chains.push(c.chain_id);
            }
        }
        switch
            .control()
            .set_steering(SteerSettings {
                keys: chains,
                classes: vec![64, 128, 256, 512],
                quiet_ms: 2000,
            })
            .map_err(|e| e.to_string())?;
        switch.control().set_mode(bits).map_err(|e| e.to_string())?;
        let report = run_phase(&binding, &p, &opts(Phase::Run)).map_err(|e| e.to_string())?;
        let c = switch.control().pipeline().counters();
        eprintln!(
            "{:>4.0}% writes, zipf {zipf}, {steering}: {:.0} ops/s; write_steer {:?}; read_steer {:?}",
            write * 100.0,
            report.throughput,
            c.write_steer,
            c.read_steer
        );
        cells.push(Cell {
            label: format!("{:.0}% z{zipf} {steering}", write * 100.0),
            write,
            zipf,
            steering,
            report,
        });
    }

    println!(
        "{:<24} {:>10} {:>12} {:>12} {:>10} {:>10} {:>8}",
        "cell", "ops/s", "p99 read us", "p99 write us", "bytes/op", "retries/op", "rt/op"
    );
    let mut rows = Vec::new();
    let mut md_rows = Vec::new();
    for c in &cells {
        let proto = c.report.protocol.as_ref();
        let row = json!({
            "write_fraction": c.write,
            "zipf": c.zipf,
            "steering": c.steering,
            "ops_per_s": c.report.throughput,
            "p99_read_us": p99(&c.report, "READ"),
            "p99_write_us": p99(&c.report, "UPDATE"),
            "bytes_per_op": proto.map(|p| p.bytes_per_op),
            "retries_per_op": proto.map(|p| p.retries_per_op),
            "round_trips_per_op": proto.map(|p| p.round_trips_per_op),
            "operations": c.report.operations,
        });
        let r = results_md::Row {
            write: c.write,
            zipf: c.zipf,
            steering: c.steering,
            ops_per_sec: c.report.throughput,
            p99_read_us: p99(&c.report, "READ"),
            p99_write_us: p99(&c.report, "UPDATE"),
            bytes_per_op: proto.map_or(0.0, |p| p.bytes_per_op),
            retries_per_op: proto.map_or(0.0, |p| p.retries_per_op),
            round_trips_per_op: proto.map_or(0.0, |p| p.round_trips_per_op),
        };
        println!(
            "{:<24} {:>10.0} {:>12} {:>12} {:>10.0} {:>10.3} {:>8.2}",
            c.label,
            r.ops_per_sec,
            r.p99_read_us.map_or("-".into(), |v| v.to_string()),
            r.p99_write_us.map_or("-".into(), |v| v.to_string()),
            r.bytes_per_op,
            r.retries_per_op,
            r.round_trips_per_op,
        );
        rows.push(row);
        md_rows.push(r);
    }
    let doc = json!({
        "experiment": "Clover steering through the soft switch (SwordBox Figs. 11-14 shape)",
        "records": RECORDS,
        "value_bytes": 128,
        "zipf": "per cell (0.99, and 1.5 for the partial-steering comparison)",
        "operations_per_cell": ops,
        "threads": 2,
        "concurrency": 4,
        "cells": rows,
    });
    let json_path = out.join("steering.json");
    std::fs::write(
        &json_path,
        serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    let svg = out.join("steering.svg");
    plot(&cells, &svg).map_err(|e| e.to_string())?;
    println!("wrote {} and {}", json_path.display(), svg.display());
    if let Some(path) = results_md {
        let settings = format!(
            "The YCSB driver on the dmkv binding (`dmkv.switch=true`: embedded cluster, one \
             memnode, in-process soft switch on udp/loopback), {RECORDS} keys of 128 B, {ops} \
             operations per cell, 2 driver threads × 4 operations in flight, a fresh cluster \
             per cell; writes are `overwrite` updates."
        );
        let page = results_md::render(
            &testbed::results_page::PageHeader::current(),
            &settings,
            &md_rows,
        );
        testbed::results_page::write_page(&path, &page)?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

fn plot(cells: &[Cell], path: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (960, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(480);
    for (area, title, value) in [(left, "ops/s", 0usize), (right, "bytes/op", 1usize)] {
        let get = |c: &Cell| match value {
            0 => c.report.throughput,
            _ => c.report.protocol.as_ref().map_or(0.0, |p| p.bytes_per_op),
        };
        let max = cells.iter().map(get).fold(1.0, f64::max) * 1.1;
        let mut chart = ChartBuilder::on(&area)
            .caption(format!("{title} vs write %"), ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..100f64, 0f64..max)?;
        chart.configure_mesh().x_desc("write %").draw()?;
        for (i, steering) in ["off", "write", "read+write"].iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let pts: Vec<(f64, f64)> = cells
                .iter()
                .filter(|c| c.steering == *steering && c.zipf < 1.0)
                .map(|c| (c.write * 100.0, get(c)))
                .collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?
                .label(*steering)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
            chart.draw_series(pts.iter().map(|p| Circle::new(*p, 3, color.filled())))?;
        }
        chart
            .configure_series_labels()
            .border_style(BLACK)
            .background_style(WHITE.mix(0.8))
            .draw()?;
    }
    root.present()?;
    Ok(())
}
