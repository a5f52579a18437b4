//! The Markdown results page `span_cost --results-md PATH` writes: the page header and
//! the table the example prints, from the same rows.

use testbed::results_page::{PageHeader, markdown_table};

/// How the repository's page is written.
pub const WRITTEN_BY: &str =
    "cargo run --release -p testbed --example span_cost -- --results-md docs/results/span-cost.md";

/// One subscriber setting: medians of GET and PUT, and their ratio to no subscriber.
#[derive(Clone, Debug)]
pub struct Row {
    /// Setting name (`none`, `warn`, `info`, `debug`).
    pub setting: &'static str,
    /// GET throughput.
    pub get_ops: f64,
    /// GET median latency, µs.
    pub get_p50_us: f64,
    /// GET throughput over that of `none`.
    pub get_vs_none: f64,
    /// PUT throughput.
    pub put_ops: f64,
    /// PUT median latency, µs.
    pub put_p50_us: f64,
    /// PUT throughput over that of `none`.
    pub put_vs_none: f64,
}

/// The page: header, the table and `note` (how it was measured).
pub fn render(header: &PageHeader, rows: &[Row], note: &str) -> String {
    let mut s = header.render(
        "Results: the cost of tracing spans (`span_cost`)",
        WRITTEN_BY,
    );
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.setting.to_string(),
                format!("{:.0}", r.get_ops),
                format!("{:.2}", r.get_p50_us),
                format!("{:.2}", r.get_vs_none),
                format!("{:.0}", r.put_ops),
                format!("{:.2}", r.put_p50_us),
                format!("{:.2}", r.put_vs_none),
            ]
        })
        .collect();
    s.push_str(&markdown_table(
        &[
            "spans",
            "GET ops/s",
            "GET p50 µs",
            "GET vs none",
            "PUT ops/s",
            "PUT p50 µs",
            "PUT vs none",
        ],
        &cells,
    ));
    s.push('\n');
    s.push_str(note);
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_rows_render() {
        let header = PageHeader::fixed("span_cost 1 0.1 --results-md s.md");
        let rows = [
            Row {
                setting: "none",
                get_ops: 180_000.0,
                get_p50_us: 1.8,
                get_vs_none: 1.0,
                put_ops: 90_000.0,
                put_p50_us: 5.2,
                put_vs_none: 1.0,
            },
            Row {
                setting: "info",
                get_ops: 72_000.0,
                get_p50_us: 4.2,
                get_vs_none: 0.4,
                put_ops: 45_000.0,
                put_p50_us: 10.3,
                put_vs_none: 0.5,
            },
        ];
        let page = render(&header, &rows, "(1 round)");
        assert!(
            page.starts_with(&header.render(
                "Results: the cost of tracing spans (`span_cost`)",
                WRITTEN_BY
            )),
            "{page}"
        );
        assert!(page.ends_with(
            "| spans | GET ops/s | GET p50 µs | GET vs none | PUT ops/s | PUT p50 µs | PUT vs none |\n\
             |---|---|---|---|---|---|---|\n\
             | none | 180000 | 1.80 | 1.00 | 90000 | 5.20 | 1.00 |\n\
             | info | 72000 | 4.20 | 0.40 | 45000 | 10.30 | 0.50 |\n\n(1 round)\n"
        ), "{page}");
    }
}
