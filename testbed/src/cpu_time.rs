//! CPU time, for the benchmark programs, from the kernel's per-thread scheduler
//! statistics: of the calling thread, of this process's threads with given names (so a
//! memory node's share of a cell's CPU is told apart from its clients' when both run in
//! one process), and of another process (every thread of it).

use std::time::Duration;

/// CPU time the calling thread has spent so far (`/proc/thread-self/schedstat`).
pub fn thread_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns = stat.split_whitespace().next()?.parse::<u64>().ok()?;
    Some(Duration::from_nanos(ns))
}

/// The run time of the threads listed in `task_dir` (`/proc/PID/task`) whose names
/// start with one of `prefixes` (every thread when `prefixes` is empty), from their
/// `schedstat` (nanoseconds). A thread that exits meanwhile is skipped, and with it
/// the time it spent: measure threads that outlive the measurement.
fn tasks_cpu(task_dir: &str, prefixes: &[&str]) -> Option<Duration> {
    let dir = std::fs::read_dir(task_dir).ok()?;
    let mut total = 0u64;
    let mut any = false;
    for entry in dir.flatten() {
        if !prefixes.is_empty() {
            let Ok(comm) = std::fs::read_to_string(entry.path().join("comm")) else {
                continue;
            };
            if !prefixes.iter().any(|p| comm.trim_end().starts_with(p)) {
                continue;
            }
        }
        let Ok(stat) = std::fs::read_to_string(entry.path().join("schedstat")) else {
            continue;
        };
        if let Some(ns) = stat
            .split_whitespace()
            .next()
            .and_then(|f| f.parse::<u64>().ok())
        {
            total = total.saturating_add(ns);
            any = true;
        }
    }
    (any || !prefixes.is_empty()).then(|| Duration::from_nanos(total))
}

/// CPU time the threads of this process whose names start with one of `prefixes`
/// have spent so far (e.g. `["memnode-"]`: a memory node's data plane and workers).
/// `None` where the scheduler statistics are not available.
pub fn threads_cpu(prefixes: &[&str]) -> Option<Duration> {
    tasks_cpu("/proc/self/task", prefixes)
}

/// CPU time process `pid` has spent so far: the sum of its threads' run times, or,
/// without scheduler statistics, user plus system time from `/proc/PID/stat`.
pub fn pid_cpu(pid: u32) -> Option<Duration> {
    tasks_cpu(&format!("/proc/{pid}/task"), &[]).or_else(|| stat_total(pid))
}

/// CPU time this process has spent so far, threads that exited included (from
/// `/proc/self/stat`, in 10 ms steps).
pub fn process_cpu() -> Option<Duration> {
    stat_total(std::process::id())
}

fn stat_total(pid: u32) -> Option<Duration> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields follow the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After ')': utime and stime are the 12th and 13th fields.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    // /proc counts in USER_HZ, 100 per second on every Linux architecture.
    Some(Duration::from_millis((utime + stime) * 10))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spin(d: Duration) {
        let start = std::time::Instant::now();
        while start.elapsed() < d {
            std::hint::black_box(0u64);
        }
    }

    #[test]
    fn spinning_shows_in_the_process_the_thread_and_named_threads() {
        let pid = std::process::id();
        let (t0, q0) = (thread_cpu().unwrap(), pid_cpu(pid).unwrap());
        spin(Duration::from_millis(50));
        assert!(thread_cpu().unwrap() - t0 >= Duration::from_millis(10));
        assert!(pid_cpu(pid).unwrap() - q0 >= Duration::from_millis(10));
        assert!(stat_total(pid).is_some());
        assert!(pid_cpu(u32::MAX).is_none());

        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let t = std::thread::Builder::new()
            .name("cpu-time-probe".into())
            .spawn(move || {
                while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::black_box(0u64);
                }
            })
            .unwrap();
        let n0 = threads_cpu(&["cpu-time-probe"]).unwrap();
        std::thread::sleep(Duration::from_millis(60));
        let n1 = threads_cpu(&["cpu-time-probe"]).unwrap();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        t.join().unwrap();
        assert!(n1 - n0 >= Duration::from_millis(5), "{:?}", n1 - n0);
        assert_eq!(threads_cpu(&["no-such-thread"]), Some(Duration::ZERO));
    }
}
