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
pub fn render(header: &PageHeader, settings: &str, rows: &[Row]) -> String {
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
    s
}
