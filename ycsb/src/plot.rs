//! `ycsb plot`: charts from `--json` results files, as SVG.
//!
//! - `throughput_vs_threads.svg`: run-phase throughput against `-threads`, one line per system
//!   (and per workload and per concurrency when the files hold several);
//! - `latency_cdf_<op>.svg`: for each operation, the latency CDF of every run-phase run
//!   (log-scale latency).
//!
//! Only the SVG backend is built (no font or image libraries: text is left to the viewer).

use crate::measure::RunReport;
use plotters::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

fn color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

/// Read the runs of every results file.
pub fn load_runs(inputs: &[PathBuf]) -> Result<Vec<RunReport>, String> {
    #[derive(serde::Deserialize)]
    struct Doc {
        runs: Vec<RunReport>,
    }
    let mut runs = Vec::new();
    for p in inputs {
        let text =
            std::fs::read_to_string(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
        let doc: Doc = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not a ycsb results file: {e}", p.display()))?;
        runs.extend(doc.runs);
    }
    Ok(runs)
}

/// Render every chart into `out`; returns the files written.
pub fn plot_files(inputs: &[PathBuf], out: &Path) -> Result<Vec<PathBuf>, String> {
    let runs = load_runs(inputs)?;
    plot_runs(&runs, out)
}

/// Render the charts of `runs` into `out`.
pub fn plot_runs(runs: &[RunReport], out: &Path) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let mut selected: Vec<&RunReport> = runs.iter().filter(|r| r.phase == "run").collect();
    if selected.is_empty() {
        selected = runs.iter().collect();
    }
    if selected.is_empty() {
        return Err("the results files hold no runs".into());
    }
    let mut written = Vec::new();
    let p = out.join("throughput_vs_threads.svg");
    throughput_chart(&selected, &p).map_err(|e| format!("{}: {e}", p.display()))?;
    written.push(p);
    let ops: BTreeSet<&str> = selected
        .iter()
        .flat_map(|r| r.ops.iter())
        .filter(|o| o.name != "CLEANUP" && !o.cdf.is_empty())
        .map(|o| o.name.as_str())
        .collect();
    for op in ops {
        let p = out.join(format!("latency_cdf_{}.svg", op.to_lowercase()));
        cdf_chart(&selected, op, &p).map_err(|e| format!("{}: {e}", p.display()))?;
        written.push(p);
    }
    Ok(written)
}

fn series_label(r: &RunReport, many_workloads: bool, many_conc: bool) -> String {
    let mut s = r.system.clone();
    if many_workloads {
        s.push_str(&format!(" {}", r.workload));
    }
    if many_conc {
        s.push_str(&format!(" M={}", r.concurrency));
    }
    s
}

fn throughput_chart(runs: &[&RunReport], path: &Path) -> Result<(), String> {
    let many_w = runs
        .iter()
        .map(|r| &r.workload)
        .collect::<BTreeSet<_>>()
        .len()
        > 1;
    let many_c = runs
        .iter()
        .map(|r| r.concurrency)
        .collect::<BTreeSet<_>>()
        .len()
        > 1;
    let mut series: BTreeMap<String, BTreeMap<usize, f64>> = BTreeMap::new();
    for r in runs {
        series
            .entry(series_label(r, many_w, many_c))
            .or_default()
            .insert(r.threads, r.throughput);
    }
    let max_t = runs.iter().map(|r| r.threads).max().unwrap_or(1).max(2);
    let max_y = runs
        .iter()
        .map(|r| r.throughput)
        .fold(0.0, f64::max)
        .max(1.0)
        * 1.3; // headroom for the legend

    let root = SVGBackend::new(path, (900, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut chart = ChartBuilder::on(&root)
        .caption("Throughput vs threads", ("sans-serif", 26))
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(90)
        .build_cartesian_2d(0.5f64..max_t as f64 + 0.5, 0f64..max_y)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("threads")
        .y_desc("throughput (ops/s)")
        .x_labels(max_t.min(16))
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .label_style(("sans-serif", 16))
        .axis_desc_style(("sans-serif", 18))
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, (label, pts)) in series.iter().enumerate() {
        let c = color(i);
        let pts: Vec<(f64, f64)> = pts.iter().map(|(&t, &y)| (t as f64, y)).collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), c.stroke_width(3)))
            .map_err(|e| e.to_string())?
            .label(format!("{label}   "))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], c.stroke_width(3)));
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 5, c.filled())))
            .map_err(|e| e.to_string())?;
    }
    chart
        .configure_series_labels()
        .label_font(("sans-serif", 16))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

fn cdf_chart(runs: &[&RunReport], op: &str, path: &Path) -> Result<(), String> {
    let many_w = runs
        .iter()
        .map(|r| &r.workload)
        .collect::<BTreeSet<_>>()
        .len()
        > 1;
    let many_c = runs
        .iter()
        .map(|r| r.concurrency)
        .collect::<BTreeSet<_>>()
        .len()
        > 1;
    let mut lines: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for r in runs {
        if let Some(o) = r.ops.iter().find(|o| o.name == op && !o.cdf.is_empty()) {
            let label = format!("{} t={}", series_label(r, many_w, many_c), r.threads);
            // Start at 0 just below the fastest operation so each curve rises from the axis.
            let mut pts: Vec<(f64, f64)> = Vec::with_capacity(o.cdf.len() + 1);
            if let Some(&(v, _)) = o.cdf.first() {
                pts.push((v.max(1) as f64, 0.0));
            }
            pts.extend(o.cdf.iter().map(|&(v, q)| (v.max(1) as f64, q)));
            lines.push((label, pts));
        }
    }
    let lo = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|x| x.0))
        .fold(f64::MAX, f64::min)
        .max(1.0);
    let hi = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|x| x.0))
        .fold(1.0, f64::max);
    let (lo, hi) = (lo / 1.5, (hi * 1.5).max(lo * 10.0));

    let root = SVGBackend::new(path, (900, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{op} latency CDF"), ("sans-serif", 26))
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d((lo..hi).log_scale(), 0f64..1.0)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("latency (µs, log scale)")
        .y_desc("fraction of operations ≤ latency")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.1}"))
        .label_style(("sans-serif", 16))
        .axis_desc_style(("sans-serif", 18))
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, (label, pts)) in lines.into_iter().enumerate() {
        let c = color(i);
        chart
            .draw_series(LineSeries::new(pts, c.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(format!("{label}   "))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], c.stroke_width(3)));
    }
    chart
        .configure_series_labels()
        .label_font(("sans-serif", 16))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}
