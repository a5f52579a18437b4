//! Results pages: the Markdown a benchmark writes when asked (`--results-md PATH` or the
//! program's own equivalent) — a header naming the date, the machine and the command line,
//! then the program's tables.
//!
//! Every program's renderer builds its page from a [`PageHeader`] (taken from this process
//! with [`PageHeader::current`], or given in full by tests) and [`markdown_table`], and
//! writes it with [`write_page`].

use std::fmt::Write as _;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// The one-line caveat every results page carries.
pub const NOISE_NOTE: &str = "Figures measured on shared 2-vCPU machines are noisy: compare ratios \
     and protocol columns (round trips, packets, bytes, retries per operation), which are \
     exact, rather than absolute throughput across runs.";

/// The machine a page was measured on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Machine {
    /// Host name.
    pub host: String,
    /// CPUs available to the process (`std::thread::available_parallelism`).
    pub cpus: usize,
    /// Kernel release (`/proc/sys/kernel/osrelease` or `uname -r`).
    pub kernel: String,
}

impl Machine {
    /// This machine.
    pub fn current() -> Machine {
        let host = read_trimmed("/proc/sys/kernel/hostname")
            .or_else(|| command_output("hostname", &[]))
            .or_else(|| std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()))
            .unwrap_or_else(|| "unknown".to_string());
        let kernel = read_trimmed("/proc/sys/kernel/osrelease")
            .or_else(|| command_output("uname", &["-r"]))
            .unwrap_or_else(|| "unknown".to_string());
        Machine {
            host,
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            kernel,
        }
    }
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

fn command_output(program: &str, args: &[&str]) -> Option<String> {
    let out = std::process::Command::new(program)
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (!s.is_empty()).then_some(s)
}

/// What a page's header states: when, where and by which command it was measured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageHeader {
    /// UTC date and time, `YYYY-MM-DD HH:MM UTC`.
    pub date: String,
    /// The machine.
    pub machine: Machine,
    /// The command line that produced the page, shell-quoted.
    pub command: String,
}

impl PageHeader {
    /// The header for this process: the system clock, this machine, this command line.
    pub fn current() -> PageHeader {
        PageHeader {
            date: utc_date_time(SystemTime::now()),
            machine: Machine::current(),
            command: command_line(std::env::args()),
        }
    }

    /// A header with a fixed date (2026-11-25 15:00 UTC) and machine (`vm`, 2 CPUs,
    /// kernel 6.8.0) and the given command line: what renderers' tests build pages with.
    pub fn fixed(command: &str) -> PageHeader {
        PageHeader {
            date: "2026-11-25 15:00 UTC".into(),
            machine: Machine {
                host: "vm".into(),
                cpus: 2,
                kernel: "6.8.0".into(),
            },
            command: command.into(),
        }
    }

    /// The top of a page: the `title` heading, a line saying how the page is written
    /// (`written_by`, a command line shown as code), then the date, machine and command
    /// and the noise note.
    pub fn render(&self, title: &str, written_by: &str) -> String {
        let mut s = String::new();
        let m = &self.machine;
        let _ = writeln!(s, "# {title}\n");
        let _ = writeln!(s, "Written by `{written_by}`.\n");
        let _ = writeln!(s, "- date: {}", self.date);
        let _ = writeln!(
            s,
            "- machine: `{}`, {} CPU{}, kernel {}",
            m.host,
            m.cpus,
            if m.cpus == 1 { "" } else { "s" },
            m.kernel
        );
        let _ = writeln!(s, "- command: `{}`\n", self.command);
        let _ = writeln!(s, "{NOISE_NOTE}\n");
        s
    }
}

/// `YYYY-MM-DD HH:MM UTC` for `t` (times before the epoch read as the epoch).
pub fn utc_date_time(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, mo, d) = civil_from_days(days);
    format!(
        "{y:04}-{mo:02}-{d:02} {:02}:{:02} UTC",
        rem / 3600,
        (rem % 3600) / 60
    )
}

/// The proleptic Gregorian (year, month, day) of `z` days since 1970-01-01 (Howard
/// Hinnant's civil-from-days).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// `args` as one shell-quoted line; the program is named by its file name only.
pub fn command_line(args: impl IntoIterator<Item = String>) -> String {
    args.into_iter()
        .enumerate()
        .map(|(i, a)| {
            let a = if i == 0 {
                Path::new(&a)
                    .file_name()
                    .map_or(a.clone(), |f| f.to_string_lossy().into_owned())
            } else {
                a
            };
            shell_quote(&a)
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn shell_quote(a: &str) -> String {
    let plain = !a.is_empty()
        && a.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=,:+@%".contains(c));
    if plain {
        a.to_string()
    } else {
        format!("'{}'", a.replace('\'', r"'\''"))
    }
}

/// A Markdown table: a header row, the separator and one line per row (`|` in cells is
/// escaped; short rows are padded with empty cells).
pub fn markdown_table<S: AsRef<str>>(headers: &[&str], rows: &[Vec<S>]) -> String {
    let cell = |c: &str| c.replace('|', "\\|").replace('\n', " ");
    let mut s = String::new();
    let _ = writeln!(s, "| {} |", headers.join(" | "));
    let _ = writeln!(s, "|{}", "---|".repeat(headers.len()));
    for row in rows {
        let mut cells: Vec<String> = row.iter().map(|c| cell(c.as_ref())).collect();
        cells.resize(headers.len().max(cells.len()), String::new());
        let _ = writeln!(s, "| {} |", cells.join(" | "));
    }
    s
}

/// Write `text` to `path` (replacing it), creating its directory; errors name the path.
pub fn write_page(path: &Path, text: &str) -> Result<(), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("creating the directory of {}: {e}", path.display()))?;
    }
    std::fs::write(path, text)
        .map_err(|e| format!("writing the results page {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn dates_are_utc_civil_dates() {
        assert_eq!(utc_date_time(UNIX_EPOCH), "1970-01-01 00:00 UTC");
        // 2000-02-29 12:34:56 UTC (a leap day in a century leap year).
        let t = UNIX_EPOCH + Duration::from_secs(951_827_696);
        assert_eq!(utc_date_time(t), "2000-02-29 12:34 UTC");
        // 2026-11-25 15:03:00 UTC.
        let t = UNIX_EPOCH + Duration::from_secs(1_795_618_980);
        assert_eq!(utc_date_time(t), "2026-11-25 15:03 UTC");
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
    }

    #[test]
    fn command_lines_are_quoted() {
        let args = ["/x/target/release/verbs-bench", "--quick", "a b", "it's"];
        assert_eq!(
            command_line(args.iter().map(|s| s.to_string())),
            r"verbs-bench --quick 'a b' 'it'\''s'"
        );
    }

    #[test]
    fn tables_and_headers_render() {
        let t = markdown_table(&["a", "b"], &[vec!["1", "x|y"], vec!["2"]]);
        assert_eq!(t, "| a | b |\n|---|---|\n| 1 | x\\|y |\n| 2 |  |\n");
        let h = PageHeader::fixed("prog --results-md out.md");
        let page = h.render(
            "Results: `prog`",
            "cargo run -p prog -- --results-md out.md",
        );
        assert!(page.starts_with("# Results: `prog`\n\nWritten by `cargo run"));
        assert!(page.contains("- date: 2026-11-25 15:00 UTC\n"));
        assert!(page.contains("- machine: `vm`, 2 CPUs, kernel 6.8.0\n"));
        assert!(page.contains("- command: `prog --results-md out.md`\n"));
        assert!(page.contains(NOISE_NOTE));
        let m = Machine::current();
        assert!(m.cpus >= 1 && !m.host.is_empty() && !m.kernel.is_empty());
    }
}
