//! The Markdown results page `kv_figures --results-md PATH` writes: the page header, the
//! run's settings and the table the example prints, from the same rows.

use testbed::results_page::{PageHeader, markdown_table};

/// How the repository's page is written.
pub const WRITTEN_BY: &str = "cargo run --release -p testbed --example kv_figures -- --results-md docs/results/kv-figures.md";

/// One row of the table: an index, transport, thread count and operation.
#[derive(Clone, Debug)]
pub struct Row {
    /// Index name (`clover`, `race`).
    pub index: String,
    /// Transport name.
    pub transport: String,
    /// Client threads (one session each).
    pub threads: usize,
    /// `get` or `put`.
    pub op: &'static str,
    /// Throughput.
    pub ops_per_sec: f64,
    /// Median latency, µs.
    pub p50_us: f64,
    /// 99th percentile latency, µs.
    pub p99_us: f64,
    /// Foreground round trips per operation.
    pub round_trips: f64,
    /// RoCE bytes per operation, both directions (`+Nbg`: background shortcut CASes).
    pub bytes: String,
    /// Bytes the tables lease per key.
    pub leased_per_key: f64,
}

/// The page: header, `settings` (one paragraph) and the table.
pub fn render(header: &PageHeader, settings: &str, rows: &[Row]) -> String {
    let mut s = header.render("Results: `kv_figures`", WRITTEN_BY);
    s.push_str(settings);
    s.push_str("\n\n");
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.index.clone(),
                r.transport.clone(),
                r.threads.to_string(),
                r.op.to_string(),
                format!("{:.0}", r.ops_per_sec),
                format!("{:.1}", r.p50_us),
                format!("{:.1}", r.p99_us),
                format!("{:.2}", r.round_trips),
                r.bytes.clone(),
                format!("{:.0}", r.leased_per_key),
            ]
        })
        .collect();
    s.push_str(&markdown_table(
        &[
            "index",
            "transport",
            "threads",
            "op",
            "ops/s",
            "p50 µs",
            "p99 µs",
            "round trips/op",
            "RoCE bytes/op",
            "leased bytes/key",
        ],
        &cells,
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_rows_render() {
        let header = PageHeader::fixed("kv_figures --secs 0.1 --results-md k.md");
        let row = |op, bytes: &str| Row {
            index: "clover".into(),
            transport: "local".into(),
            threads: 1,
            op,
            ops_per_sec: 157_500.0,
            p50_us: 7.6,
            p99_us: 19.4,
            round_trips: 1.0,
            bytes: bytes.into(),
            leased_per_key: 258.0,
        };
        let page = render(
            &header,
            "10000 keys",
            &[row("get", "312"), row("put", "628+72bg")],
        );
        assert!(
            page.starts_with(&header.render("Results: `kv_figures`", WRITTEN_BY)),
            "{page}"
        );
        assert!(page.ends_with(
            "10000 keys\n\n\
             | index | transport | threads | op | ops/s | p50 µs | p99 µs | round trips/op | RoCE bytes/op | leased bytes/key |\n\
             |---|---|---|---|---|---|---|---|---|---|\n\
             | clover | local | 1 | get | 157500 | 7.6 | 19.4 | 1.00 | 312 | 258 |\n\
             | clover | local | 1 | put | 157500 | 7.6 | 19.4 | 1.00 | 628+72bg | 258 |\n"
        ), "{page}");
    }
}
