//! The tables an experiment prints, kept for the Markdown results page `--results-md PATH`
//! writes: each [`Table`] prints its rows as they are measured and [`render`] turns the
//! same rows into the page.

use testbed::results_page::{PageHeader, markdown_table};

/// How an experiment's page is written (`experiment` is `torn`, `ablation`, ...).
pub fn written_by(experiment: &str) -> String {
    format!(
        "cargo run --release -p sync-bench -- {experiment} --results-md docs/results/sync-bench-{experiment}.md"
    )
}

/// One printed table: its columns (name and console width, negative for left-aligned)
/// and the rows printed so far, as the console shows their cells.
#[derive(Clone, Debug)]
pub struct Table {
    /// A heading for the page (may be empty).
    pub title: String,
    /// Column names and console widths (negative: left-aligned).
    pub columns: Vec<(&'static str, isize)>,
    /// The rows, one formatted cell per column.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// An empty table.
    pub fn new(title: &str, columns: &[(&'static str, isize)]) -> Table {
        Table {
            title: title.to_string(),
            columns: columns.to_vec(),
            rows: Vec::new(),
        }
    }

    fn line(&self, cells: &[&str]) -> String {
        cells
            .iter()
            .zip(&self.columns)
            .map(|(c, &(_, w))| {
                if w < 0 {
                    format!("{c:<width$}", width = w.unsigned_abs())
                } else {
                    format!("{c:>width$}", width = w as usize)
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Print the column names to stdout.
    pub fn print_header(&self) {
        let names: Vec<&str> = self.columns.iter().map(|c| c.0).collect();
        println!("{}", self.line(&names));
    }

    /// Print `row` to stdout and keep it.
    pub fn push(&mut self, row: Vec<String>) {
        let cells: Vec<&str> = row.iter().map(String::as_str).collect();
        println!("{}", self.line(&cells));
        self.rows.push(row);
    }
}

/// The page of one experiment: the header, then every table.
pub fn render(header: &PageHeader, experiment: &str, tables: &[Table]) -> String {
    let mut s = header.render(
        &format!("Results: `sync-bench {experiment}`"),
        &written_by(experiment),
    );
    for (i, t) in tables.iter().enumerate() {
        if i > 0 {
            s.push('\n');
        }
        if !t.title.is_empty() {
            s.push_str(&format!("## {}\n\n", t.title));
        }
        let names: Vec<&str> = t.columns.iter().map(|c| c.0).collect();
        s.push_str(&markdown_table(&names, &t.rows));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_rows_render_and_print_aligned() {
        let mut t = Table::new("Latch alignment", &[("placement", -9), ("CAS/s", 8)]);
        t.push(vec!["embedded".into(), "1200".into()]);
        t.push(vec!["padded".into(), "900".into()]);
        assert_eq!(t.line(&["padded", "900"]), "padded         900");
        let header = PageHeader::fixed("sync-bench align --results-md a.md");
        let page = render(&header, "align", &[t]);
        assert!(
            page.starts_with(&header.render("Results: `sync-bench align`", &written_by("align"))),
            "{page}"
        );
        assert!(page.ends_with(
            "## Latch alignment\n\n| placement | CAS/s |\n|---|---|\n| embedded | 1200 |\n| padded | 900 |\n"
        ));
    }
}
