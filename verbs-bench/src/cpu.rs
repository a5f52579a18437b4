//! CPU time the whole process spends (user + system, every thread), from `getrusage`.
//!
//! The memory node's data plane, the echo server and the client threads all run in
//! this process, so the CPU time of a cell divided by its operations is the CPU an
//! operation costs on both ends together — the figure that bounds throughput on a
//! machine whose cores are all busy.

use std::time::Duration;

pub use testbed::cpu_time::threads_cpu;

/// User plus system CPU time of this process so far, or `None` if `getrusage` fails.
pub fn process_cpu() -> Option<Duration> {
    // SAFETY: all-zero is a valid `rusage`; `getrusage` only writes into it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid `who` and a pointer to a live `rusage`.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    if rc != 0 {
        return None;
    }
    Some(timeval(usage.ru_utime) + timeval(usage.ru_stime))
}

fn timeval(t: libc::timeval) -> Duration {
    let secs = u64::try_from(t.tv_sec).unwrap_or(0);
    let micros = u32::try_from(t.tv_usec).unwrap_or(0).min(999_999);
    Duration::new(secs, micros * 1000)
}

/// The server threads' prefixes: the memory node's and the echo server's.
pub const SERVER_THREADS: [&str; 2] = ["memnode-", "echo-server"];

/// CPU time the process and its server threads ([`SERVER_THREADS`]) spend while `f`
/// runs: (value, whole process, server threads).
pub fn split_during<T>(f: impl FnOnce() -> T) -> (T, Duration, Duration) {
    let before = threads_cpu(&SERVER_THREADS);
    let (value, total) = spent_during(f);
    let server = match (before, threads_cpu(&SERVER_THREADS)) {
        (Some(a), Some(b)) => b.saturating_sub(a),
        _ => Duration::ZERO,
    };
    (value, total, server.min(total))
}

/// Microseconds of CPU per operation for `cpu` spent on `ops` operations (0 without
/// operations).
pub fn micros_per_op(cpu: Duration, ops: u64) -> f64 {
    if ops == 0 {
        0.0
    } else {
        cpu.as_secs_f64() * 1e6 / ops as f64
    }
}

/// CPU time spent by this process while `f` runs (zero if it cannot be read).
pub fn spent_during<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    spent_on(process_cpu, f)
}

/// CPU time `clock` advanced by while `f` runs (zero if it cannot be read).
fn spent_on<T>(clock: fn() -> Option<Duration>, f: impl FnOnce() -> T) -> (T, Duration) {
    let before = clock();
    let value = f();
    let spent = match (before, clock()) {
        (Some(a), Some(b)) => b.saturating_sub(a),
        _ => Duration::ZERO,
    };
    (value, spent)
}

#[cfg(test)]
mod tests {
    use super::*;

    // This thread's CPU: the other tests of this binary run beside this one, so the
    // process's CPU moves while this thread sleeps.
    use testbed::cpu_time::thread_cpu;

    #[test]
    fn spinning_costs_cpu_and_sleeping_does_not() {
        let ((), spun) = spent_on(thread_cpu, || {
            let end = std::time::Instant::now() + Duration::from_millis(30);
            let mut x = 0u64;
            while std::time::Instant::now() < end {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        });
        // A loaded machine may not give the thread the whole 30 ms.
        assert!(spun >= Duration::from_millis(5), "{spun:?}");
        let ((), slept) = spent_on(thread_cpu, || std::thread::sleep(Duration::from_millis(30)));
        assert!(slept < Duration::from_millis(20), "{slept:?}");
        // The process clock counts at least what this thread spent.
        let ((), total) = spent_during(|| {
            let end = std::time::Instant::now() + Duration::from_millis(10);
            while std::time::Instant::now() < end {
                std::hint::black_box(0u64);
            }
        });
        assert!(total > Duration::ZERO, "{total:?}");
    }

    #[test]
    fn a_named_server_thread_is_told_apart_from_the_rest() {
        let ((), total, server) = split_during(|| {
            let t = std::thread::Builder::new()
                .name("echo-server".into())
                .spawn(|| {
                    let end = std::time::Instant::now() + Duration::from_millis(40);
                    while std::time::Instant::now() < end {
                        std::hint::black_box(0u64);
                    }
                })
                .unwrap();
            t.join().unwrap();
        });
        // The thread has exited by the second reading: its time is gone from the
        // listing, so a server thread must outlive the measurement, as the memory
        // node's and the echo server's do.
        assert_eq!(server, Duration::ZERO);
        assert!(total >= Duration::from_millis(5), "{total:?}");
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let t = std::thread::Builder::new()
            .name("memnode-test".into())
            .spawn(move || {
                while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::black_box(0u64);
                }
            })
            .unwrap();
        let ((), _, server) = split_during(|| std::thread::sleep(Duration::from_millis(60)));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        t.join().unwrap();
        assert!(server >= Duration::from_millis(5), "{server:?}");
    }

    #[test]
    fn per_operation_figures() {
        assert_eq!(micros_per_op(Duration::from_millis(3), 1000), 3.0);
        assert_eq!(micros_per_op(Duration::from_millis(3), 0), 0.0);
    }
}
