//! What every service exposes about itself besides its own counters: a build-info
//! gauge and the standard `process_*` metrics of the Prometheus client libraries
//! (CPU seconds, resident and virtual memory, open file descriptors, start time),
//! read from `/proc/self` on Linux.

use std::fmt::Write as _;

/// Appends `<prefix>_build_info{version,service} 1` and the `process_*` family to `out`
/// in the Prometheus text format. On a system without `/proc` only the build info
/// is written.
pub fn render_process_metrics(out: &mut String, prefix: &str, service: &str, version: &str) {
    let _ = writeln!(
        out,
        "# HELP {prefix}_build_info The running build: always 1, the version in a label.\n\
         # TYPE {prefix}_build_info gauge\n\
         {prefix}_build_info{{service=\"{}\",version=\"{}\"}} 1",
        crate::prom::escape(service),
        crate::prom::escape(version),
    );
    let Some(p) = ProcessStats::read() else {
        return;
    };
    let gauge = |out: &mut String, name: &str, help: &str, kind: &str, value: f64| {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
        );
    };
    gauge(
        out,
        "process_cpu_seconds_total",
        "Total user and system CPU time spent in seconds.",
        "counter",
        p.cpu_seconds,
    );
    gauge(
        out,
        "process_resident_memory_bytes",
        "Resident memory size in bytes.",
        "gauge",
        p.resident_bytes as f64,
    );
    gauge(
        out,
        "process_virtual_memory_bytes",
        "Virtual memory size in bytes.",
        "gauge",
        p.virtual_bytes as f64,
    );
    gauge(
        out,
        "process_open_fds",
        "Number of open file descriptors.",
        "gauge",
        p.open_fds as f64,
    );
    gauge(
        out,
        "process_start_time_seconds",
        "Start time of the process since the Unix epoch in seconds.",
        "gauge",
        p.start_time_seconds,
    );
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
    /// Start time, seconds since the Unix epoch.
    pub start_time_seconds: f64,
}

impl ProcessStats {
    /// Read them, or `None` where `/proc` is not available.
    pub fn read() -> Option<ProcessStats> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let boot = std::fs::read_to_string("/proc/stat").ok()?;
        let open_fds = std::fs::read_dir("/proc/self/fd").ok()?.count() as u64;
        parse(&stat, &boot, open_fds, clock_ticks(), page_size())
    }
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
    fn renders_build_info_and_this_process() {
        let mut out = String::new();
        render_process_metrics(&mut out, "dmkv_memnode", "memnode", "0.1.0");
        assert!(out.contains("dmkv_memnode_build_info{service=\"memnode\",version=\"0.1.0\"} 1"));
        let parsed = crate::prom::parse(&out).unwrap();
        assert!(parsed.scalar("process_open_fds").unwrap() >= 1.0);
        assert!(parsed.scalar("process_resident_memory_bytes").unwrap() > 0.0);
        assert!(parsed.scalar("process_start_time_seconds").unwrap() > 1.6e9);
    }
}
