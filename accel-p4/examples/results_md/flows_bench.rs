//! The Markdown results page `flows_bench --results-md PATH` writes: the page header,
//! the run's settings and the two tables the example prints, from the same rows.

use testbed::results_page::{PageHeader, markdown_table};

/// How the repository's page is written.
pub const WRITTEN_BY: &str = "cargo run --release -p accel-p4 --example flows_bench -- --results-md docs/results/zero-sided-flows.md";

/// One ordered-replication run: 1 producer to `consumers` consumers.
#[derive(Clone, Debug)]
pub struct ReplicationRow {
    /// Consumers.
    pub consumers: usize,
    /// Seconds from the first item put in to the last item taken out everywhere.
    pub secs: f64,
    /// Items per second each consumer received.
    pub items_per_sec: f64,
    /// MB/s each consumer received (item bytes).
    pub mb_per_sec: f64,
    /// Item moves re-issued after a NAK or a timeout.
    pub rereads: u64,
    /// Producer READs per item, re-reads included (the data plane multicasts each
    /// READ response to every consumer).
    pub reads_per_item: f64,
}

/// One run of the software replicator: 1 producer to `consumers` consumers.
#[derive(Clone, Debug)]
pub struct SoftwareRow {
    /// In lockstep (one global order, all-or-nothing per item) or not.
    pub ordered: bool,
    /// Consumers.
    pub consumers: usize,
    /// Seconds from the first item put in to the last item taken out everywhere.
    pub secs: f64,
    /// MB/s each consumer received (item bytes).
    pub mb_per_sec: f64,
    /// The replicator's round trips per item it moved.
    pub round_trips_per_item: f64,
}

/// One drain run: load balancing or static partitioning.
#[derive(Clone, Debug)]
pub struct DrainRow {
    /// `load_balance` or `static`.
    pub policy: &'static str,
    /// Seconds to drain every item.
    pub secs: f64,
    /// Items each consumer took.
    pub per_consumer: Vec<u64>,
}

/// The page.
pub fn render(
    header: &PageHeader,
    settings: &str,
    replication: &[ReplicationRow],
    software: &[SoftwareRow],
    drain: &[DrainRow],
    charts: &[testbed::plot::Written],
) -> String {
    let mut s = header.render("Results: zero-sided flows", WRITTEN_BY);
    s.push_str(settings);
    s.push_str("\n\n## Ordered replication, 1 producer → N consumers\n\n");
    let cells: Vec<Vec<String>> = replication
        .iter()
        .map(|r| {
            vec![
                r.consumers.to_string(),
                format!("{:.3}", r.secs),
                format!("{:.0}", r.items_per_sec),
                format!("{:.2}", r.mb_per_sec),
                r.rereads.to_string(),
                format!("{:.3}", r.reads_per_item),
            ]
        })
        .collect();
    s.push_str(&markdown_table(
        &[
            "consumers",
            "seconds",
            "items/s per consumer",
            "MB/s per consumer",
            "re-reads",
            "producer READs per item",
        ],
        &cells,
    ));
    s.push_str("\n## The software baseline: a CPU thread replicating with one-sided verbs\n\n");
    let cells: Vec<Vec<String>> = software
        .iter()
        .map(|r| {
            let switch = replication
                .iter()
                .find(|x| x.consumers == r.consumers)
                .filter(|_| r.mb_per_sec > 0.0)
                .map_or(String::new(), |x| {
                    format!("{:.2}", x.mb_per_sec / r.mb_per_sec)
                });
            vec![
                if r.ordered { "ordered" } else { "unordered" }.to_string(),
                r.consumers.to_string(),
                format!("{:.3}", r.secs),
                format!("{:.2}", r.mb_per_sec),
                format!("{:.2}", r.round_trips_per_item),
                switch,
            ]
        })
        .collect();
    s.push_str(&markdown_table(
        &[
            "replication",
            "consumers",
            "seconds",
            "MB/s per consumer",
            "round trips per item",
            "switch (ordered) ÷ this",
        ],
        &cells,
    ));
    s.push_str("\n## Draining with one slow consumer\n\n");
    let cells: Vec<Vec<String>> = drain
        .iter()
        .map(|r| {
            vec![
                r.policy.to_string(),
                format!("{:.3}", r.secs),
                r.per_consumer
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(" / "),
            ]
        })
        .collect();
    s.push_str(&markdown_table(
        &["policy", "seconds to drain", "items per consumer"],
        &cells,
    ));
    s.push('\n');
    s.push_str(&testbed::plot::charts_section(charts));
    s
}

/// The ordered-replication chart (per-consumer bandwidth against the number of
/// consumers: the switch's flow and the software replicator, ordered and not) in
/// `dir`, as the page links it.
pub fn charts(
    dir: &std::path::Path,
    replication: &[ReplicationRow],
    software: &[SoftwareRow],
) -> Result<Vec<testbed::plot::Written>, String> {
    use testbed::plot::{Chart, Series, write_chart};
    let mut lines = vec![Series {
        label: "switch flow (ordered)".into(),
        points: replication
            .iter()
            .map(|r| (r.consumers as f64, r.mb_per_sec))
            .collect(),
    }];
    for ordered in [true, false] {
        lines.push(Series {
            label: format!(
                "software replicator ({})",
                if ordered { "ordered" } else { "unordered" }
            ),
            points: software
                .iter()
                .filter(|r| r.ordered == ordered)
                .map(|r| (r.consumers as f64, r.mb_per_sec))
                .collect(),
        });
    }
    lines.retain(|l| !l.points.is_empty());
    let chart = Chart {
        title: "1 → N replication: MB/s per consumer against N",
        x_desc: "consumers",
        y_desc: "MB/s per consumer",
        log2_x: false,
    };
    Ok(vec![write_chart(
        dir,
        "zero-sided-flows-replication.svg",
        &chart,
        &lines,
    )?])
}
