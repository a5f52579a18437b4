//! CPU time of a process (every thread, user and system) and of the calling thread.

use std::time::Duration;

/// CPU time process `pid` has spent so far: the sum of its threads' run times in
/// `/proc/PID/task/*/schedstat` (nanoseconds), or, where the scheduler statistics are
/// not available, user plus system time from `/proc/PID/stat` (clock ticks).
pub fn process_cpu(pid: u32) -> Option<Duration> {
    schedstat_total(pid).or_else(|| stat_total(pid))
}

fn schedstat_total(pid: u32) -> Option<Duration> {
    let dir = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut total = 0u64;
    let mut any = false;
    for entry in dir.flatten() {
        let path = entry.path().join("schedstat");
        // A thread that exits between the listing and the read is skipped.
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        if let Some(ns) = text
            .split_whitespace()
            .next()
            .and_then(|f| f.parse::<u64>().ok())
        {
            total = total.saturating_add(ns);
            any = true;
        }
    }
    any.then(|| Duration::from_nanos(total))
}

fn stat_total(pid: u32) -> Option<Duration> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields follow the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After ')': state is field 3 of stat(5), utime 14 and stime 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let ticks = u64::try_from(ticks).ok().filter(|t| *t > 0)?;
    Some(Duration::from_nanos(
        (utime + stime) * 1_000_000_000 / ticks,
    ))
}

/// CPU time the calling thread has spent so far.
pub fn thread_cpu() -> Option<Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a pointer to a live timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return None;
    }
    let secs = u64::try_from(ts.tv_sec).ok()?;
    let nanos = u32::try_from(ts.tv_nsec).ok()?;
    Some(Duration::new(secs, nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_and_thread_spend_cpu_while_spinning() {
        let pid = std::process::id();
        let (p0, t0) = (process_cpu(pid).unwrap(), thread_cpu().unwrap());
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < Duration::from_millis(50) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let (p1, t1) = (process_cpu(pid).unwrap(), thread_cpu().unwrap());
        assert!(t1 - t0 >= Duration::from_millis(20), "{:?}", t1 - t0);
        assert!(p1 - p0 >= Duration::from_millis(20), "{:?}", p1 - p0);
        assert!(stat_total(pid).is_some());
        assert!(process_cpu(u32::MAX).is_none());
    }
}
