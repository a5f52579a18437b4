//! The Markdown results page `read_balance_bench --results-md PATH` writes: the page
//! header, the run's settings and the table the example prints, from the same rows.

use testbed::results_page::{PageHeader, markdown_table};

/// How the repository's page is written.
pub const WRITTEN_BY: &str = "cargo run --release -p accel-p4 --example read_balance_bench -- --results-md docs/results/read-balance.md";

/// One run: balancing off or on.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Row {
    /// `off` (the primary serves every READ) or `on` (the switch picks a member).
    pub balancing: &'static str,
    /// GETs measured.
    pub gets: u64,
    /// GETs per second of the session.
    pub gets_per_sec: f64,
    /// Round trips per GET (the session's count).
    pub round_trips_per_get: f64,
    /// Balanced READs per member during the run, primary first (the switch's counters).
    pub per_member: [u64; 3],
    /// Retransmitted packets in the run (the client's transport).
    pub retransmissions: u64,
}

/// The page.
pub fn render(header: &PageHeader, settings: &str, rows: &[Row]) -> String {
    let mut s = header.render("Results: load-balanced READs", WRITTEN_BY);
    s.push_str(settings);
    s.push_str("\n\n## GETs of a replicated RACE table, balancing off and on\n\n");
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let total: u64 = r.per_member.iter().sum();
            let share = |m: u64| {
                if total == 0 {
                    "–".to_string()
                } else {
                    format!("{:.0} %", 100.0 * m as f64 / total as f64)
                }
            };
            vec![
                r.balancing.to_string(),
                r.gets.to_string(),
                format!("{:.0}", r.gets_per_sec),
                format!("{:.2}", r.round_trips_per_get),
                format!(
                    "{} / {} / {}",
                    r.per_member[0], r.per_member[1], r.per_member[2]
                ),
                format!(
                    "{} / {} / {}",
                    share(r.per_member[0]),
                    share(r.per_member[1]),
                    share(r.per_member[2])
                ),
                r.retransmissions.to_string(),
            ]
        })
        .collect();
    s.push_str(&markdown_table(
        &[
            "balancing",
            "GETs",
            "GETs/s",
            "round trips / GET",
            "balanced READs: primary / backup 1 / backup 2",
            "share",
            "retransmissions",
        ],
        &cells,
    ));
    s
}
