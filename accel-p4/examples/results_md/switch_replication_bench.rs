//! The Markdown results page `switch_replication_bench --results-md PATH` writes: the
//! page header, the run's settings and the table the example prints, from the same
//! rows.

use testbed::results_page::{PageHeader, markdown_table};

/// How the repository's page is written.
pub const WRITTEN_BY: &str = "cargo run --release -p accel-p4 --example switch_replication_bench -- --results-md docs/results/switch-replication.md";

/// One run: an index, a replication factor, who writes the backups' copies.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Row {
    /// `clover` or `race`.
    pub index: &'static str,
    /// Copies of the table's data.
    pub replication: u32,
    /// `client` (the client WRITEs every copy) or `switch` (one WRITE; the switch
    /// copies it to the backups).
    pub writer: &'static str,
    /// Updates measured.
    pub ops: u64,
    /// RoCE bytes the client's socket sent per update (exact: the transport's count).
    pub sent_per_op: f64,
    /// RoCE bytes the client's socket received per update.
    pub received_per_op: f64,
    /// Packets the client's socket sent per update.
    pub packets_per_op: f64,
    /// Round trips per update (the session's count).
    pub round_trips_per_op: f64,
    /// Retransmitted packets in the run.
    pub retransmissions: u64,
    /// Updates per second of the one session.
    pub ops_per_sec: f64,
}

/// The page.
pub fn render(
    header: &PageHeader,
    settings: &str,
    rows: &[Row],
    charts: &[testbed::plot::Written],
) -> String {
    let mut s = header.render("Results: switch replication of writes", WRITTEN_BY);
    s.push_str(settings);
    s.push_str("\n\n## Client link bytes per update\n\n");
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.index.to_string(),
                r.replication.to_string(),
                r.writer.to_string(),
                format!("{:.1}", r.sent_per_op),
                format!("{:.1}", r.received_per_op),
                format!("{:.2}", r.packets_per_op),
                format!("{:.2}", r.round_trips_per_op),
                r.retransmissions.to_string(),
                format!("{:.0}", r.ops_per_sec),
            ]
        })
        .collect();
    s.push_str(&markdown_table(
        &[
            "index",
            "copies",
            "backups written by",
            "bytes sent / op",
            "bytes received / op",
            "packets sent / op",
            "round trips / op",
            "retransmissions",
            "ops/s",
        ],
        &cells,
    ));
    s.push('\n');
    s.push_str(&testbed::plot::charts_section(charts));
    s
}

/// The chart of client link bytes per update against the number of copies, one line
/// per index and writer, in `dir`, as the page links it.
pub fn charts(dir: &std::path::Path, rows: &[Row]) -> Result<Vec<testbed::plot::Written>, String> {
    use testbed::plot::{Chart, Series, write_chart};
    let mut lines: Vec<Series> = Vec::new();
    for r in rows {
        let label = format!("{}, {} writes the copies", r.index, r.writer);
        let point = (f64::from(r.replication), r.sent_per_op);
        match lines.iter_mut().find(|l| l.label == label) {
            Some(l) => l.points.push(point),
            None => lines.push(Series {
                label,
                points: vec![point],
            }),
        }
    }
    // One copy is written by the client whoever replicates: it starts both lines.
    for index in ["clover", "race"] {
        let single: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r.index == index && r.replication == 1)
            .map(|r| (1.0, r.sent_per_op))
            .collect();
        for l in lines.iter_mut().filter(|l| l.label.starts_with(index)) {
            if !l.points.iter().any(|p| p.0 == 1.0) {
                l.points.extend(single.iter().copied());
            }
            l.points.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
    }
    let chart = Chart {
        title: "client link bytes sent per update against the number of copies",
        x_desc: "copies (replication factor)",
        y_desc: "bytes sent per update",
        log2_x: false,
    };
    Ok(vec![write_chart(
        dir,
        "switch-replication-bytes.svg",
        &chart,
        &lines,
    )?])
}
