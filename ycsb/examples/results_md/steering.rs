//! The Markdown results page `steering --results-md PATH` writes: the page header, the
//! run's settings and the table the example prints, from the same rows.

use testbed::results_page::{PageHeader, markdown_table};

/// How the repository's page is written.
pub const WRITTEN_BY: &str = "cargo run --release -p ycsb --example steering -- 10000 results --results-md docs/results/accel-p4-steering.md";

/// One cell: a write fraction, skew and steering mode.
#[derive(Clone, Debug)]
pub struct Row {
    /// Fraction of operations that are updates (0–1).
    pub write: f64,
    /// Zipf constant.
    pub zipf: f64,
    /// Steering mode (`off`, `write`, `read+write`, `r+w hot N`).
    pub steering: &'static str,
    /// Throughput of the whole client.
    pub ops_per_sec: f64,
    /// p99 READ latency, µs (none without reads).
    pub p99_read_us: Option<u64>,
    /// p99 UPDATE latency, µs (none without updates).
    pub p99_write_us: Option<u64>,
    /// RoCE bytes per operation, both directions.
    pub bytes_per_op: f64,
    /// Failed link CASes and restarted traversals per operation.
    pub retries_per_op: f64,
    /// Round trips per operation.
    pub round_trips_per_op: f64,
}

/// The page: header, `settings` (one paragraph) and the table.
pub fn render(header: &PageHeader, settings: &str, rows: &[Row]) -> String {
    let mut s = header.render(
        "Results: the Clover steering experiment (`ycsb --example steering`)",
        WRITTEN_BY,
    );
    s.push_str(settings);
    s.push_str("\n\n");
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                format!("{:.0} %", r.write * 100.0),
                r.zipf.to_string(),
                r.steering.to_string(),
                format!("{:.0}", r.ops_per_sec),
                r.p99_read_us.map_or("–".into(), |v| v.to_string()),
                r.p99_write_us.map_or("–".into(), |v| v.to_string()),
                format!("{:.0}", r.bytes_per_op),
                format!("{:.3}", r.retries_per_op),
                format!("{:.2}", r.round_trips_per_op),
            ]
        })
        .collect();
    s.push_str(&markdown_table(
        &[
            "writes",
            "zipf",
            "steering",
            "ops/s",
            "p99 read µs",
            "p99 write µs",
            "bytes/op",
            "retries/op",
            "round trips/op",
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
        let header = PageHeader::fixed("steering 100 /tmp/s --results-md s.md");
        let rows = [
            Row {
                write: 0.0,
                zipf: 0.99,
                steering: "off",
                ops_per_sec: 23_810.0,
                p99_read_us: Some(4001),
                p99_write_us: None,
                bytes_per_op: 375.0,
                retries_per_op: 0.0,
                round_trips_per_op: 1.2,
            },
            Row {
                write: 0.05,
                zipf: 0.99,
                steering: "write",
                ops_per_sec: 33_670.0,
                p99_read_us: Some(1171),
                p99_write_us: Some(2325),
                bytes_per_op: 405.0,
                retries_per_op: 0.0,
                round_trips_per_op: 1.27,
            },
        ];
        let page = render(&header, "100 operations per cell", &rows);
        assert!(
            page.starts_with(&header.render(
                "Results: the Clover steering experiment (`ycsb --example steering`)",
                WRITTEN_BY
            )),
            "{page}"
        );
        assert!(page.ends_with(
            "100 operations per cell\n\n\
             | writes | zipf | steering | ops/s | p99 read µs | p99 write µs | bytes/op | retries/op | round trips/op |\n\
             |---|---|---|---|---|---|---|---|---|\n\
             | 0 % | 0.99 | off | 23810 | 4001 | – | 375 | 0.000 | 1.20 |\n\
             | 5 % | 0.99 | write | 33670 | 1171 | 2325 | 405 | 0.000 | 1.27 |\n"
        ), "{page}");
    }
}
