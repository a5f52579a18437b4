//! `ycsb plot`: charts from `--json` results files, as SVG.
//!
//! - `throughput_vs_threads.svg`: run-phase throughput against `-threads`, one line per system
//!   (and per workload and per concurrency when the files hold several); when every run has the
//!   same thread count, a grouped bar chart instead: one group per workload, one bar per system;
//! - `latency_cdf_<op>.svg`: for each operation, the latency CDF of every run-phase run
//!   (log-scale latency).
//!
//! Every chart colours a system the same way ([`Palette`]); its other series (workloads,
//! concurrencies, thread counts) are lighter shades of that colour.
//!
//! Only the SVG backend is built (no font or image libraries: text is left to the viewer).

use crate::measure::RunReport;
use crate::palette::Palette;
use plotters::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

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
    let palette = Palette::for_systems(selected.iter().map(|r| r.system.as_str()));
    let mut written = Vec::new();
    let p = out.join("throughput_vs_threads.svg");
    let threads: BTreeSet<usize> = selected.iter().map(|r| r.threads).collect();
    if threads.len() == 1 {
        throughput_bars(&selected, &palette, &p)
    } else {
        throughput_chart(&selected, &palette, &p)
    }
    .map_err(|e| format!("{}: {e}", p.display()))?;
    written.push(p);
    let ops: BTreeSet<&str> = selected
        .iter()
        .flat_map(|r| r.ops.iter())
        .filter(|o| o.name != "CLEANUP" && !o.cdf.is_empty())
        .map(|o| o.name.as_str())
        .collect();
    for op in ops {
        let p = out.join(format!("latency_cdf_{}.svg", op.to_lowercase()));
        cdf_chart(&selected, &palette, op, &p).map_err(|e| format!("{}: {e}", p.display()))?;
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

/// For each series label, the shade of its system: the k-th label of a system gets shade k.
fn shades(labels: &[(String, String)], palette: &Palette) -> BTreeMap<String, RGBColor> {
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    labels
        .iter()
        .map(|(label, system)| {
            let k = seen.entry(system.as_str()).or_default();
            let c = palette.shade(system, *k);
            *k += 1;
            (label.clone(), c)
        })
        .collect()
}

/// One thread count: throughput as grouped bars, a group per workload, a bar per system (and
/// per concurrency when there are several).
fn throughput_bars(runs: &[&RunReport], palette: &Palette, path: &Path) -> Result<(), String> {
    let workloads: Vec<&str> = runs
        .iter()
        .map(|r| r.workload.as_str())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let many_c = runs
        .iter()
        .map(|r| r.concurrency)
        .collect::<BTreeSet<_>>()
        .len()
        > 1;
    // Bar label → (system, workload index → throughput).
    let mut bars: BTreeMap<String, (String, BTreeMap<usize, f64>)> = BTreeMap::new();
    for r in runs {
        let w = workloads.iter().position(|w| *w == r.workload).unwrap_or(0);
        bars.entry(series_label(r, false, many_c))
            .or_insert_with(|| (r.system.clone(), BTreeMap::new()))
            .1
            .insert(w, r.throughput);
    }
    let labels: Vec<(String, String)> = bars
        .iter()
        .map(|(l, (s, _))| (l.clone(), s.clone()))
        .collect();
    let colors = shades(&labels, palette);
    let threads = runs.first().map_or(1, |r| r.threads);
    let max_y = runs
        .iter()
        .map(|r| r.throughput)
        .fold(0.0, f64::max)
        .max(1.0)
        * 1.3; // headroom for the legend
    let n = workloads.len();

    let root = SVGBackend::new(path, (900, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "Throughput, {threads} thread{}",
                if threads == 1 { "" } else { "s" }
            ),
            ("sans-serif", 26),
        )
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(90)
        .build_cartesian_2d(-0.5f64..n as f64 - 0.5, 0f64..max_y)
        .map_err(|e| e.to_string())?;
    let names: Vec<String> = workloads.iter().map(|w| w.to_string()).collect();
    let workload_at = move |x: &f64| -> String {
        let i = x.round();
        if (x - i).abs() < 1e-6 && i >= 0.0 {
            names.get(i as usize).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_desc("workload")
        .y_desc("throughput (ops/s)")
        .x_labels(n + 1)
        .x_label_formatter(&workload_at)
        .y_label_formatter(&|y| format!("{y:.0}"))
        .label_style(("sans-serif", 16))
        .axis_desc_style(("sans-serif", 18))
        .draw()
        .map_err(|e| e.to_string())?;
    let width = 0.8 / bars.len() as f64;
    for (j, (label, (_, values))) in bars.iter().enumerate() {
        let c = colors.get(label).copied().unwrap_or(BLACK);
        let x0 = -0.4 + j as f64 * width;
        chart
            .draw_series(values.iter().map(|(&w, &y)| {
                let left = w as f64 + x0;
                Rectangle::new([(left, 0.0), (left + width * 0.92, y)], c.filled())
            }))
            .map_err(|e| e.to_string())?
            .label(format!("{label}   "))
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 18, y + 6)], c.filled()));
    }
    chart
        .configure_series_labels()
        .label_font(("sans-serif", 16))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

fn throughput_chart(runs: &[&RunReport], palette: &Palette, path: &Path) -> Result<(), String> {
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
    let mut system_of: BTreeMap<String, String> = BTreeMap::new();
    for r in runs {
        let label = series_label(r, many_w, many_c);
        system_of.insert(label.clone(), r.system.clone());
        series
            .entry(label)
            .or_default()
            .insert(r.threads, r.throughput);
    }
    let colors = shades(&system_of.into_iter().collect::<Vec<_>>(), palette);
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
    for (label, pts) in series.iter() {
        let c = colors.get(label).copied().unwrap_or(BLACK);
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

fn cdf_chart(runs: &[&RunReport], palette: &Palette, op: &str, path: &Path) -> Result<(), String> {
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
    let mut labels: Vec<(String, String)> = Vec::new();
    for r in runs {
        if let Some(o) = r.ops.iter().find(|o| o.name == op && !o.cdf.is_empty()) {
            let label = format!("{} t={}", series_label(r, many_w, many_c), r.threads);
            // Start at 0 just below the fastest operation so each curve rises from the axis.
            let mut pts: Vec<(f64, f64)> = Vec::with_capacity(o.cdf.len() + 1);
            if let Some(&(v, _)) = o.cdf.first() {
                pts.push((v.max(1) as f64, 0.0));
            }
            pts.extend(o.cdf.iter().map(|&(v, q)| (v.max(1) as f64, q)));
            labels.push((label.clone(), r.system.clone()));
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
    let colors = shades(&labels, palette);
    for (label, pts) in lines {
        let c = colors.get(&label).copied().unwrap_or(BLACK);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::OpReport;

    fn run(system: &str, workload: &str, threads: usize, ops: &[&str]) -> RunReport {
        RunReport {
            system: system.into(),
            phase: "run".into(),
            workload: workload.into(),
            threads,
            concurrency: 8,
            target: 0.0,
            runtime_ms: 1000,
            operations: 1000,
            throughput: 1000.0 * threads as f64 + system.len() as f64,
            ops: ops
                .iter()
                .map(|name| OpReport {
                    name: name.to_string(),
                    operations: 500,
                    average_us: 20.0,
                    min_us: 5,
                    max_us: 90,
                    percentiles: vec![(99.0, 80)],
                    returns: vec![("OK".into(), 500)],
                    cdf: vec![(5, 0.1), (20, 0.5), (90, 1.0)],
                    exact: None,
                })
                .collect(),
            protocol: None,
            properties: BTreeMap::new(),
            measurement_type: Default::default(),
        }
    }

    fn hex(c: RGBColor) -> String {
        format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
    }

    fn tempdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ycsb-plot-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    /// `<rect .../>` elements of `svg` filled with `color`.
    fn filled_rects(svg: &str, color: &str) -> usize {
        svg.split("<rect")
            .skip(1)
            .filter(|r| {
                let tag = &r[..r.find("/>").unwrap_or(r.len())];
                tag.contains(&format!("fill=\"{color}\""))
            })
            .count()
    }

    #[test]
    fn one_thread_count_draws_grouped_bars() {
        let systems = ["redis", "dmkv-clover", "dmkv-race"];
        let runs: Vec<RunReport> = ["workloada", "workloadb", "workloadc"]
            .iter()
            .flat_map(|w| systems.iter().map(move |s| run(s, w, 1, &["READ"])))
            .collect();
        let out = tempdir("bars");
        plot_runs(&runs, &out).unwrap();
        let svg = std::fs::read_to_string(out.join("throughput_vs_threads.svg")).unwrap();
        let palette = Palette::for_systems(systems);
        for s in systems {
            // Three bars and the legend's swatch.
            assert_eq!(filled_rects(&svg, &hex(palette.color(s))), 4, "{s}\n{svg}");
        }
        assert!(!svg.contains("<circle"), "no points on a bar chart");
        assert!(svg.contains("workloadb"));
        let _ = std::fs::remove_dir_all(&out);
    }

    #[test]
    fn a_system_has_one_colour_in_every_chart() {
        // "zeta" alone runs SCAN: drawn first in that chart, it still keeps its own colour.
        let runs = vec![
            run("alpha", "w", 1, &["READ"]),
            run("alpha", "w", 2, &["READ"]),
            run("zeta", "w", 1, &["READ", "SCAN"]),
            run("zeta", "w", 2, &["READ", "SCAN"]),
        ];
        let out = tempdir("palette");
        plot_runs(&runs, &out).unwrap();
        let palette = Palette::for_systems(["alpha", "zeta"]);
        let (alpha, zeta) = (hex(palette.color("alpha")), hex(palette.color("zeta")));
        assert_ne!(alpha, zeta);
        let read = |f: &str| std::fs::read_to_string(out.join(f)).unwrap();
        let throughput = read("throughput_vs_threads.svg");
        let reads = read("latency_cdf_read.svg");
        let scans = read("latency_cdf_scan.svg");
        for svg in [&throughput, &reads] {
            assert!(svg.contains(&alpha) && svg.contains(&zeta));
        }
        assert!(scans.contains(&zeta) && !scans.contains(&alpha), "{scans}");
        // Its second series (t=2) is a shade of the same colour.
        assert!(scans.contains(&hex(palette.shade("zeta", 1))));
        let _ = std::fs::remove_dir_all(&out);
    }
}
