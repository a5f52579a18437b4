//! The standard `process_*` metrics of the Prometheus client libraries (CPU seconds,
//! resident and virtual memory, open and maximum file descriptors, start time), read from
//! `/proc/self` on Linux; every service exposes them beside its own.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use crate::family::{Families, Family};

/// The standard `process_*` metrics of this process, read from `/proc` at each scrape
/// (nothing where `/proc` is not available).
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let families = ProcessStats::read()
            .map(|p| p.families())
            .unwrap_or_default();
        Families(families).encode(encoder)
    }
}

/// What `/proc/self` says about this process.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcessStats {
    /// User plus system CPU seconds.
    pub cpu_seconds: f64,
    /// Resident set size in bytes.
    pub resident_bytes: u64,
    /// Virtual memory size in bytes.
    pub virtual_bytes: u64,
    /// Open file descriptors.
    pub open_fds: u64,
    /// The soft limit on open file descriptors, when it is not unlimited.
    pub max_fds: Option<u64>,
    /// Start time, seconds since the Unix epoch.
    pub start_time_seconds: f64,
}

impl ProcessStats {
    /// Read them, or `None` where `/proc` is not available.
    pub fn read() -> Option<ProcessStats> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let boot = std::fs::read_to_string("/proc/stat").ok()?;
        let open_fds = std::fs::read_dir("/proc/self/fd").ok()?.count() as u64;
        let mut stats = parse(&stat, &boot, open_fds, clock_ticks(), page_size())?;
        stats.max_fds = std::fs::read_to_string("/proc/self/limits")
            .ok()
            .and_then(|l| max_open_files(&l));
        Some(stats)
    }

    /// The `process_*` families.
    pub fn families(&self) -> Vec<Family> {
        let mut out = vec![
            Family::counter_value(
                "process_cpu_seconds_total",
                "Total user and system CPU time spent in seconds",
                self.cpu_seconds,
            ),
            Family::gauge_value(
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
                self.resident_bytes,
            ),
            Family::gauge_value(
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes",
                self.virtual_bytes,
            ),
            Family::gauge_value(
                "process_open_fds",
                "Number of open file descriptors",
                self.open_fds,
            ),
        ];
        if let Some(max) = self.max_fds {
            out.push(Family::gauge_value(
                "process_max_fds",
                "Maximum number of open file descriptors",
                max,
            ));
        }
        out.push(Family::gauge_value(
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds",
            self.start_time_seconds,
        ));
        out
    }
}

/// The soft `Max open files` limit of a `/proc/<pid>/limits` text (`None` if unlimited
/// or not found).
fn max_open_files(limits: &str) -> Option<u64> {
    let rest = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))?;
    rest.split_whitespace().next()?.parse().ok()
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`; 100 where it cannot be asked).
fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

/// The memory page size in bytes.
fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as u64 } else { 4096 }
}

/// Parse `/proc/self/stat` (fields after the parenthesised command name, which may
/// hold spaces) and the `btime` line of `/proc/stat`.
fn parse(
    stat: &str,
    proc_stat: &str,
    open_fds: u64,
    ticks: f64,
    page: u64,
) -> Option<ProcessStats> {
    let after = &stat[stat.rfind(')')? + 1..];
    // Field 3 (state) is the first after the command name.
    let fields: Vec<&str> = after.split_whitespace().collect();
    let field = |n: usize| -> Option<u64> { fields.get(n - 3)?.parse().ok() };
    let (utime, stime) = (field(14)?, field(15)?);
    let start_ticks = field(22)?;
    let vsize = field(23)?;
    let rss_pages = field(24)?;
    let btime: u64 = proc_stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    Some(ProcessStats {
        cpu_seconds: (utime + stime) as f64 / ticks,
        resident_bytes: rss_pages.saturating_mul(page),
        virtual_bytes: vsize,
        open_fds,
        max_fds: None,
        start_time_seconds: btime as f64 + start_ticks as f64 / ticks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_stat_line_whose_name_has_spaces() {
        let stat = "4242 (my (odd) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 150 50 0 0 20 0 \
                    3 0 1000 123456789 300 18446744073709551615";
        let p = parse(stat, "cpu 1 2 3\nbtime 1700000000\n", 7, 100.0, 4096).unwrap();
        assert_eq!(p.cpu_seconds, 2.0);
        assert_eq!(p.resident_bytes, 300 * 4096);
        assert_eq!(p.virtual_bytes, 123_456_789);
        assert_eq!(p.open_fds, 7);
        assert_eq!(p.start_time_seconds, 1_700_000_010.0);
        assert!(parse("garbage", "", 0, 100.0, 4096).is_none());
    }

    #[test]
    fn reads_the_open_files_limit() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max cpu time              unlimited            unlimited            seconds\n\
                      Max open files            1024                 524288               files\n";
        assert_eq!(max_open_files(limits), Some(1024));
        assert_eq!(
            max_open_files(
                "Max open files            unlimited            unlimited            files\n"
            ),
            None
        );
        assert_eq!(max_open_files(""), None);
    }

    #[test]
    fn this_process_is_read_and_named_as_the_client_libraries_do() {
        let p = ProcessStats::read().unwrap();
        assert!(p.max_fds.unwrap() >= p.open_fds);
        let names: Vec<String> = p.families().iter().map(Family::name).collect();
        for want in [
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_virtual_memory_bytes",
            "process_open_fds",
            "process_max_fds",
            "process_start_time_seconds",
        ] {
            assert!(
                names.iter().any(|n| n == want),
                "{want} missing from {names:?}"
            );
        }
    }
}
