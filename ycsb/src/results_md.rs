//! The Markdown results pages `--results-md FILE` writes: for `ycsb load|run|loadrun` (and
//! the demo) each phase's report as a table of the lines YCSB's text report prints, for
//! `ycsb compare` its header, table and notes — each under the page header (date, machine,
//! command line).

use testbed::results_page::{PageHeader, markdown_table};

use crate::compare::Comparison;
use crate::measure::{RunReport, text_report};

/// How the repository's page is written (the demo).
pub const WRITTEN_BY: &str = "cargo run --release -p ycsb -- --results-md docs/results/ycsb.md";

/// How a `ycsb compare` page is written, when the command line is not one of `ycsb`'s.
pub const WRITTEN_BY_COMPARE: &str =
    "cargo run --release -p ycsb -- compare --results-md docs/results/ycsb-compare.md";

/// The "Written by" line of a `ycsb compare` page: the command that wrote it, run
/// through cargo (so a page of other settings names its own), else the default's.
pub fn compare_written_by(header: &PageHeader) -> String {
    header
        .command
        .strip_prefix("ycsb compare")
        .map(|rest| format!("cargo run --release -p ycsb -- compare{rest}"))
        .unwrap_or_else(|| WRITTEN_BY_COMPARE.to_string())
}

/// The page of a load/run invocation: one section per phase, its report's lines as a
/// table (`metric`, `measurement`, `value`, as in `[OVERALL], RunTime(ms), 13958`).
pub fn render_runs(header: &PageHeader, reports: &[RunReport]) -> String {
    let mut s = header.render("Results: `ycsb`", WRITTEN_BY);
    for (i, r) in reports.iter().enumerate() {
        if i > 0 {
            s.push('\n');
        }
        s.push_str(&format!(
            "## {} of {} on {} ({} thread{} × {} concurrent)\n\n",
            r.phase,
            r.workload,
            r.system,
            r.threads,
            if r.threads == 1 { "" } else { "s" },
            r.concurrency
        ));
        let rows: Vec<Vec<String>> = text_report(r)
            .lines()
            .map(|l| {
                let mut parts = l.splitn(3, ", ");
                let metric = parts.next().unwrap_or("");
                let metric = metric.trim_start_matches('[').trim_end_matches(']');
                vec![
                    metric.to_string(),
                    parts.next().unwrap_or("").to_string(),
                    parts.next().unwrap_or("").to_string(),
                ]
            })
            .collect();
        s.push_str(&markdown_table(&["metric", "measurement", "value"], &rows));
    }
    s
}

/// The page of `ycsb compare`: its report (settings, the table and the notes), which is
/// Markdown already.
pub fn render_compare(header: &PageHeader, cmp: &Comparison) -> String {
    let mut s = header.render("Results: `ycsb compare`", &compare_written_by(header));
    s.push_str(&cmp.report());
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::SystemRuns;
    use crate::measure::OpReport;
    use crate::props::Properties;

    fn header() -> PageHeader {
        PageHeader::fixed("ycsb --results-md y.md")
    }

    fn report(system: &str, phase: &str, throughput: f64, reads: u64) -> RunReport {
        RunReport {
            system: system.into(),
            phase: phase.into(),
            workload: "workloadc".into(),
            threads: 1,
            concurrency: 8,
            target: 0.0,
            runtime_ms: 1000,
            operations: reads,
            throughput,
            ops: vec![OpReport {
                name: "READ".into(),
                operations: reads,
                average_us: 12.5,
                min_us: 3,
                max_us: 90,
                percentiles: vec![(50.0, 10), (99.0, 40)],
                returns: vec![("OK".into(), reads)],
                cdf: Vec::new(),
                exact: None,
            }],
            protocol: None,
            properties: Default::default(),
            measurement_type: Default::default(),
        }
    }

    #[test]
    fn two_phases_render_as_tables() {
        let page = render_runs(
            &header(),
            &[
                report("memory", "load", 500.0, 0),
                report("memory", "run", 1000.0, 1000),
            ],
        );
        assert!(
            page.starts_with(&header().render("Results: `ycsb`", WRITTEN_BY)),
            "{page}"
        );
        assert!(
            page.contains(
                "## run of workloadc on memory (1 thread × 8 concurrent)\n\n\
             | metric | measurement | value |\n|---|---|---|\n\
             | OVERALL | RunTime(ms) | 1000 |\n\
             | OVERALL | Throughput(ops/sec) | 1000.0 |\n\
             | READ | Operations | 1000 |\n"
            ),
            "{page}"
        );
        assert!(
            page.contains("| READ | 99thPercentileLatency(us) | 40 |\n"),
            "{page}"
        );
        assert!(page.contains("| READ | Return=OK | 1000 |\n"), "{page}");
    }

    #[test]
    fn a_comparison_of_two_systems_renders() {
        let c = Comparison {
            date: "2026-11-25".into(),
            machine: "2 CPUs".into(),
            redis_version: "7.0.15".into(),
            workloads: vec!["workloadc".into()],
            settings: Properties::new(),
            systems: vec![
                SystemRuns {
                    runs: vec![report("redis", "run", 1000.0, 1000)],
                    round_throughputs: vec![vec![1000.0]],
                    ..SystemRuns::new("redis".into(), None)
                },
                SystemRuns {
                    runs: vec![report("dmkv-clover", "run", 2000.0, 2000)],
                    round_throughputs: vec![vec![2000.0]],
                    ..SystemRuns::new("dmkv-clover".into(), None)
                },
            ],
            rounds: 1,
        };
        let page = render_compare(&header(), &c);
        assert!(
            page.starts_with(&header().render("Results: `ycsb compare`", WRITTEN_BY_COMPARE)),
            "{page}"
        );
        let own = PageHeader::fixed("ycsb compare --quick --results-md q.md");
        assert!(
            render_compare(&own, &c).contains(
                "Written by `cargo run --release -p ycsb -- compare --quick --results-md q.md`."
            ),
            "the page names the command that wrote it"
        );
        assert!(page.ends_with(&c.report()), "{page}");
        assert!(page.contains("| C        | all  |"), "{page}");
        assert!(page.contains("| C        | READ |"), "{page}");
    }

    #[test]
    fn a_compare_page_names_the_command_that_wrote_it() {
        let own = PageHeader::fixed(
            "ycsb compare --rounds 3 -threads 2 --results-md docs/results/other.md",
        );
        assert_eq!(
            compare_written_by(&own),
            "cargo run --release -p ycsb -- compare --rounds 3 -threads 2 \
             --results-md docs/results/other.md"
        );
        // Not a compare command line (a page rendered elsewhere): the default's.
        assert_eq!(compare_written_by(&header()), WRITTEN_BY_COMPARE);
    }
}
