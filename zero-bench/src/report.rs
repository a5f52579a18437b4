//! The copy experiment's output: a summary per engine and item size (medians over the
//! repetitions), printed as a table, written as JSON and as a results page.

use std::fmt::Write as _;
use testbed::median::median;

use serde::Serialize;
use testbed::results_page::{PageHeader, markdown_table};

use crate::copy_run::{CopyCell, Engine};

/// The page's "Written by" line.
pub const WRITTEN_BY: &str =
    "cargo run --release -p zero-bench -- copy --results-md docs/results/zero-bench-copy.md";

/// Medians of one engine at one item size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CopySummary {
    /// Who moved the bytes.
    pub engine: Engine,
    /// Bytes per READ and WRITE.
    pub item: u32,
    /// Repetitions.
    pub rounds: usize,
    /// Median MB/s.
    pub mb_per_s: f64,
    /// Median CPU seconds per GB at the source memory node.
    pub source_cpu_s_per_gb: f64,
    /// … at the target memory node.
    pub target_cpu_s_per_gb: f64,
    /// … at the switch.
    pub switch_cpu_s_per_gb: f64,
    /// … at the client.
    pub client_cpu_s_per_gb: f64,
    /// Median READs the switch re-issued.
    pub switch_rereads: f64,
}

/// The summaries of `cells`, by item size, switch first.
pub fn summarize(cells: &[CopyCell]) -> Vec<CopySummary> {
    let mut items: Vec<u32> = cells.iter().map(|c| c.item).collect();
    items.sort_unstable();
    items.dedup();
    let mut out = Vec::new();
    for item in items {
        for engine in [Engine::Switch, Engine::Cpu] {
            let of: Vec<&CopyCell> = cells
                .iter()
                .filter(|c| c.item == item && c.engine == engine)
                .collect();
            if of.is_empty() {
                continue;
            }
            let m = |f: &dyn Fn(&CopyCell) -> f64| median(of.iter().map(|c| f(c)).collect());
            out.push(CopySummary {
                engine,
                item,
                rounds: of.len(),
                mb_per_s: m(&|c| c.mb_per_s()),
                source_cpu_s_per_gb: m(&|c| c.per_gb(c.source_cpu)),
                target_cpu_s_per_gb: m(&|c| c.per_gb(c.target_cpu)),
                switch_cpu_s_per_gb: m(&|c| c.per_gb(c.switch_cpu)),
                client_cpu_s_per_gb: m(&|c| c.per_gb(c.client_cpu)),
                switch_rereads: m(&|c| c.switch_rereads as f64),
            });
        }
    }
    out
}

fn size(bytes: u32) -> String {
    if bytes >= 1024 && bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} B")
    }
}

/// The summary table's rows: item, engine, MB/s, the switch ÷ CPU bandwidth ratio and
/// CPU seconds per GB at each component.
pub fn rows(summaries: &[CopySummary]) -> Vec<Vec<String>> {
    summaries
        .iter()
        .map(|s| {
            let cpu = summaries
                .iter()
                .find(|o| o.item == s.item && o.engine == Engine::Cpu);
            let ratio = match (s.engine, cpu) {
                (Engine::Switch, Some(c)) if c.mb_per_s > 0.0 => {
                    format!("{:.2}×", s.mb_per_s / c.mb_per_s)
                }
                _ => String::new(),
            };
            vec![
                size(s.item),
                s.engine.name().to_owned(),
                format!("{:.1}", s.mb_per_s),
                ratio,
                format!("{:.1}", s.source_cpu_s_per_gb),
                format!("{:.1}", s.target_cpu_s_per_gb),
                format!("{:.1}", s.switch_cpu_s_per_gb),
                format!("{:.1}", s.client_cpu_s_per_gb),
            ]
        })
        .collect()
}

/// The table's headers.
pub const HEADERS: [&str; 8] = [
    "item",
    "engine",
    "MB/s",
    "switch ÷ cpu",
    "source memnode CPU s/GB",
    "target memnode CPU s/GB",
    "switch CPU s/GB",
    "client CPU s/GB",
];

/// The results page.
pub fn page(
    header: &PageHeader,
    bytes: u64,
    window: u32,
    summaries: &[CopySummary],
    charts: &[testbed::plot::Written],
) -> String {
    let mut s = header.render("Results: `zero-bench copy`", WRITTEN_BY);
    let _ = writeln!(
        s,
        "Copies of {bytes} bytes between two memory nodes, each in a process of its own, \
         on loopback soft RoCE: **switch** — the soft switch (a third process) READs the \
         source and turns every READ response into a WRITE to the target \
         (`POST /v1/copies`, chunk = item); **cpu** — a client READs each item into its \
         memory and WRITEs it to the target. {window} READs in flight either way. Every \
         copy is checked byte for byte afterwards. CPU seconds per GB copied are summed \
         over each process's threads (the client: the thread that copies, or that starts \
         the switch's copy and polls it every {} ms). Medians over the repetitions.\n",
        crate::switch_driven::POLL.as_millis()
    );
    s.push_str(&markdown_table(&HEADERS, &rows(summaries)));
    s.push_str(
        "\nOn this transport the switch is software on the same two cores: its CPU column \
         is what a Tofino does in its pipeline at line rate with no CPU; the memory nodes' \
         columns are the soft-RoCE responders' work, which an RDMA NIC does without the \
         host CPU. What the comparison shows here is where the bytes go through: with the \
         switch they never reach a client (the client column), and each item crosses the \
         network twice (memnode → switch → memnode) instead of four times (memnode → \
         switch → client → switch → memnode).\n\n",
    );
    s.push_str(&testbed::plot::charts_section(charts));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(engine: Engine, item: u32, seconds: f64, round: usize) -> CopyCell {
        CopyCell {
            engine,
            item,
            bytes: 1_000_000,
            round,
            seconds,
            source_cpu: 0.01,
            target_cpu: 0.02,
            switch_cpu: 0.0,
            client_cpu: 0.005,
            switch_reads: 0,
            switch_rereads: 0,
        }
    }

    #[test]
    fn medians_per_engine_and_item_and_the_ratio() {
        let cells = vec![
            cell(Engine::Cpu, 64, 1.0, 0),
            cell(Engine::Cpu, 64, 2.0, 1),
            cell(Engine::Cpu, 64, 4.0, 2),
            cell(Engine::Switch, 64, 0.5, 0),
            cell(Engine::Switch, 64, 0.5, 1),
            cell(Engine::Switch, 64, 0.25, 2),
        ];
        let s = summarize(&cells);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].engine, Engine::Switch);
        assert!((s[0].mb_per_s - 2.0).abs() < 1e-9);
        assert!((s[1].mb_per_s - 0.5).abs() < 1e-9);
        assert!((s[1].target_cpu_s_per_gb - 20.0).abs() < 1e-9);
        let r = rows(&s);
        assert_eq!(r[0][0], "64 B");
        assert_eq!(r[0][3], "4.00×");
        assert_eq!(r[1][3], "");
        let page = page(&PageHeader::fixed("zero-bench copy"), 1_000_000, 8, &s, &[]);
        assert!(page.contains("| 64 B | switch | 2.0 | 4.00× |"), "{page}");
    }
}
