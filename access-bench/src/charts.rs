//! The sweeps as line charts (SVG, beside the results page): throughput and READ p99
//! against the swept setting, one line per access mode, one chart per index. The
//! contention sweep is drawn against what it varies in Storm's terms: the share of
//! operations the one-sided path could not finish in one round trip (measured on the
//! one-sided cell of the same index and record count).

use std::path::Path;

use testbed::plot::{Chart, Series, Written, write_chart};

use crate::cell::Cell;
use crate::plan::Experiment;

/// What a chart plots on y.
#[derive(Debug, Clone, Copy)]
enum Measure {
    Throughput,
    ReadP99,
}

impl Measure {
    fn of(self, c: &Cell) -> f64 {
        match self {
            Measure::Throughput => c.ops_per_sec,
            Measure::ReadP99 => c.read_p99_us,
        }
    }

    fn axis(self) -> &'static str {
        match self {
            Measure::Throughput => "operations per second",
            Measure::ReadP99 => "READ p99 (µs)",
        }
    }

    fn suffix(self) -> &'static str {
        match self {
            Measure::Throughput => "",
            Measure::ReadP99 => "-p99",
        }
    }
}

/// The x of `c` in its sweep (`None`: not in a swept experiment, or no one-sided cell
/// to measure the contention of).
fn x_of(c: &Cell, cells: &[Cell]) -> Option<f64> {
    match c.spec.experiment {
        Experiment::Workloads => None,
        Experiment::Threads => Some(c.spec.threads as f64),
        Experiment::Workers => Some(c.spec.workers as f64),
        Experiment::Contention => cells
            .iter()
            .find(|o| {
                o.spec.experiment == Experiment::Contention
                    && o.spec.index == c.spec.index
                    && o.spec.records == c.spec.records
                    && o.spec.mode == kvstore::AccessMode::OneSided
            })
            .map(|o| o.multi_round_trip_share * 100.0),
    }
}

fn x_axis(e: Experiment) -> &'static str {
    match e {
        Experiment::Workloads => "workload",
        Experiment::Contention => {
            "operations taking more than one round trip one-sided (%), workload A"
        }
        Experiment::Threads => "client threads, workload C",
        Experiment::Workers => "RPC workers, workload C",
    }
}

/// One line per access mode of `index` in experiment `e`.
fn series(cells: &[Cell], e: Experiment, index: &str, m: Measure) -> Vec<Series> {
    let mut labels: Vec<String> = Vec::new();
    for c in cells
        .iter()
        .filter(|c| c.spec.experiment == e && c.spec.index == index)
    {
        if !labels.contains(&c.spec.access()) {
            labels.push(c.spec.access());
        }
    }
    labels
        .into_iter()
        .map(|label| {
            let mut points: Vec<(f64, f64)> = cells
                .iter()
                .filter(|c| {
                    c.spec.experiment == e && c.spec.index == index && c.spec.access() == label
                })
                .filter_map(|c| Some((x_of(c, cells)?, m.of(c))))
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series { label, points }
        })
        .filter(|s| !s.points.is_empty())
        .collect()
}

/// Write every sweep's charts into `dir` (created if missing); returns what was
/// written, in page order.
pub fn write(cells: &[Cell], dir: &Path) -> Result<Vec<Written>, String> {
    let mut out = Vec::new();
    for e in [
        Experiment::Contention,
        Experiment::Threads,
        Experiment::Workers,
    ] {
        let mut indexes: Vec<&str> = Vec::new();
        for c in cells.iter().filter(|c| c.spec.experiment == e) {
            if !indexes.contains(&c.spec.index) {
                indexes.push(c.spec.index);
            }
        }
        for index in indexes {
            for m in [Measure::Throughput, Measure::ReadP99] {
                let lines = series(cells, e, index, m);
                if lines.is_empty() {
                    continue;
                }
                let file = format!("access-bench-{}-{index}{}.svg", e.name(), m.suffix());
                let title = format!("{index}: {} against {}", m.axis(), x_axis(e));
                let chart = Chart {
                    title: &title,
                    x_desc: x_axis(e),
                    y_desc: m.axis(),
                    log2_x: false,
                };
                out.push(write_chart(dir, &file, &chart, &lines)?);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::CellSpec;
    use kvstore::{AccessMode, RpcTransport};

    fn cell(e: Experiment, mode: AccessMode, records: u64, ops: f64, share: f64) -> Cell {
        let mut c = Cell::single(
            CellSpec {
                experiment: e,
                index: "race",
                mode,
                transport: RpcTransport::Send,
                workload: "A",
                records,
                threads: 2,
                workers: 2,
            },
            ops,
        );
        c.multi_round_trip_share = share;
        c
    }

    #[test]
    fn contention_is_drawn_against_the_one_sided_share() {
        let cells = vec![
            cell(
                Experiment::Contention,
                AccessMode::OneSided,
                2000,
                100.0,
                0.2,
            ),
            cell(Experiment::Contention, AccessMode::Rpc, 2000, 90.0, 0.0),
            cell(Experiment::Contention, AccessMode::OneSided, 4, 50.0, 0.7),
            cell(Experiment::Contention, AccessMode::Rpc, 4, 80.0, 0.0),
            cell(Experiment::Workloads, AccessMode::Rpc, 4, 80.0, 0.0),
        ];
        let s = series(&cells, Experiment::Contention, "race", Measure::Throughput);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].label, "one-sided");
        assert_eq!(s[0].points, vec![(20.0, 100.0), (70.0, 50.0)]);
        assert_eq!(s[1].label, "rpc");
        assert_eq!(s[1].points, vec![(20.0, 90.0), (70.0, 80.0)]);
        let dir = tempfile::tempdir().expect("dir");
        let written = write(&cells, dir.path()).expect("charts");
        let files: Vec<&str> = written.iter().map(|w| w.file.as_str()).collect();
        assert_eq!(
            files,
            [
                "access-bench-contention-race.svg",
                "access-bench-contention-race-p99.svg"
            ]
        );
        assert!(dir.path().join(files[0]).exists());
    }
}
