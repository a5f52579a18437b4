//! The copy experiment as line charts (SVG, beside the results page): bandwidth
//! against item size per engine, and CPU seconds per GB against item size at each
//! process (the client's and the switch's for each engine) — the shape of the
//! zero-sided seed's copy figures.

use std::path::Path;

use testbed::plot::{Chart, Series, Written, write_chart};

use crate::copy_run::Engine;
use crate::report::CopySummary;

fn line(
    summaries: &[CopySummary],
    engine: Engine,
    label: String,
    y: fn(&CopySummary) -> f64,
) -> Series {
    Series {
        label,
        points: summaries
            .iter()
            .filter(|s| s.engine == engine)
            .map(|s| (f64::from(s.item), y(s)))
            .collect(),
    }
}

/// The series of both charts: bandwidth, then CPU per GB.
fn series(summaries: &[CopySummary]) -> (Vec<Series>, Vec<Series>) {
    let engines = [Engine::Switch, Engine::Cpu];
    let bandwidth = engines
        .iter()
        .map(|&e| line(summaries, e, format!("{}-driven", e.name()), |s| s.mb_per_s))
        .filter(|s| !s.points.is_empty())
        .collect();
    let mut cpu = Vec::new();
    for &e in &engines {
        cpu.push(line(
            summaries,
            e,
            format!("{}-driven: client", e.name()),
            |s| s.client_cpu_s_per_gb,
        ));
        cpu.push(line(
            summaries,
            e,
            format!("{}-driven: switch", e.name()),
            |s| s.switch_cpu_s_per_gb,
        ));
        cpu.push(line(
            summaries,
            e,
            format!("{}-driven: both memory nodes", e.name()),
            |s| s.source_cpu_s_per_gb + s.target_cpu_s_per_gb,
        ));
    }
    cpu.retain(|s| !s.points.is_empty());
    (bandwidth, cpu)
}

/// Write both charts into `dir`.
pub fn write(summaries: &[CopySummary], dir: &Path) -> Result<Vec<Written>, String> {
    let (bandwidth, cpu) = series(summaries);
    let mut out = Vec::new();
    for (file, title, y, lines) in [
        (
            "zero-bench-copy-bandwidth.svg",
            "memnode → memnode copy: bandwidth against item size",
            "MB/s",
            bandwidth,
        ),
        (
            "zero-bench-copy-cpu.svg",
            "memnode → memnode copy: CPU seconds per GB against item size",
            "CPU s/GB",
            cpu,
        ),
    ] {
        let chart = Chart {
            title,
            x_desc: "item size (bytes)",
            y_desc: y,
            log2_x: true,
        };
        out.push(write_chart(dir, file, &chart, &lines)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(engine: Engine, item: u32, mb: f64) -> CopySummary {
        CopySummary {
            engine,
            item,
            rounds: 1,
            mb_per_s: mb,
            source_cpu_s_per_gb: 1.0,
            target_cpu_s_per_gb: 2.0,
            switch_cpu_s_per_gb: 3.0,
            client_cpu_s_per_gb: 4.0,
            switch_rereads: 0.0,
        }
    }

    #[test]
    fn one_line_per_engine_and_process() {
        let s = vec![
            summary(Engine::Switch, 64, 5.0),
            summary(Engine::Cpu, 64, 9.0),
            summary(Engine::Switch, 65536, 100.0),
        ];
        let (bw, cpu) = series(&s);
        assert_eq!(bw.len(), 2);
        assert_eq!(bw[0].points, vec![(64.0, 5.0), (65536.0, 100.0)]);
        assert_eq!(bw[1].label, "cpu-driven");
        assert_eq!(cpu.len(), 6);
        assert_eq!(cpu[2].points, vec![(64.0, 3.0), (65536.0, 3.0)]);
        let dir = tempfile::tempdir().expect("dir");
        let written = write(&s, dir.path()).expect("charts");
        assert_eq!(written.len(), 2);
        assert!(dir.path().join("zero-bench-copy-cpu.svg").exists());
    }
}
