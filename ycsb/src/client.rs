//! The driver (YCSB's `Client` and `ClientThread`): N OS threads, each with its own binding
//! session ([`Db`]) running M concurrent operation loops; throttling to `-target`, stopping at
//! `maxexecutiontime`, status lines every `status.interval` seconds and a progress bar.
//!
//! The operation count is split over the N×M loops as YCSB splits it over its threads, and so is
//! the target rate; each loop paces itself on its own schedule (`start + k × tick`), as YCSB's
//! `throttleNanos` does.

use crate::db::{Binding, Db, DbError, LocalBoxFuture, ProtocolCounters};
use crate::executor::{join_all, sleep_until};
use crate::measure::{
    Measurements, ProtocolReport, Recorder, RunReport, decimal_2, interval_summary,
};
use crate::measurement_type::MeasurementConfig;
use crate::props::{PropError, Properties};
use crate::workload::CoreWorkload;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A failure that stops a run.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    #[error(transparent)]
    Props(#[from] PropError),
    #[error("{0}")]
    Db(#[from] DbError),
    #[error("{0}")]
    Unsupported(String),
}

/// Which phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Load,
    Run,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Load => "load",
            Phase::Run => "run",
        }
    }
}

/// Options of one phase beyond the workload properties.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub phase: Phase,
    /// Print YCSB status lines on stderr (`-s`).
    pub status: bool,
    /// Draw a progress bar (default: when stderr is a terminal).
    pub progress: bool,
    /// A label for the report (the workload file's name).
    pub workload_label: String,
}

impl RunOptions {
    pub fn new(phase: Phase) -> Self {
        RunOptions {
            phase,
            status: false,
            progress: std::io::stderr().is_terminal(),
            workload_label: String::new(),
        }
    }
}

struct Shared {
    workload: CoreWorkload,
    ops_done: AtomicU64,
    stop: AtomicBool,
}

/// Run one phase against `binding` and return its report.
pub fn run_phase(
    binding: &dyn Binding,
    props: &Properties,
    opts: &RunOptions,
) -> Result<RunReport, DriverError> {
    let threads = props.get_u64("threadcount", 1)?.max(1) as usize;
    let concurrency = props.get_u64("concurrency", 1)?.max(1) as usize;
    let target = props.get_f64("target", 0.0)?.max(0.0);
    let max_exec = props.get_u64("maxexecutiontime", 0)?;
    let status_interval = props.get_f64("status.interval", 10.0)?.max(0.001);
    let measurement = MeasurementConfig::from_props(props)?;
    let percentiles = parse_percentiles_of(props, measurement.kind.percentiles_property())?;

    let workload = CoreWorkload::new(props)?;
    if opts.phase == Phase::Run && workload.scanproportion > 0.0 && !binding.supports_scan() {
        return Err(DriverError::Unsupported(format!(
            "this workload scans (scanproportion={}), which needs records in key order, but the \
             {} binding's index is a hash index without key order: it cannot run ordered scans \
             (YCSB workload E). Use a binding with ordered scans (memory, redis) or set \
             scanproportion=0.",
            workload.scanproportion,
            binding.name()
        )));
    }
    let opcount: u64 = match opts.phase {
        Phase::Load => {
            if props.contains("insertcount") {
                props.get_u64("insertcount", 0)?
            } else {
                workload.recordcount.max(0) as u64
            }
        }
        Phase::Run => props.get_u64("operationcount", 0)?,
    };

    let shared = Arc::new(Shared {
        workload,
        ops_done: AtomicU64::new(0),
        stop: AtomicBool::new(false),
    });
    let measurements = Measurements::with_config(measurement);
    let slots = (threads * concurrency) as u64;
    let per_loop_target = if target > 0.0 {
        target / slots as f64
    } else {
        0.0
    };

    eprintln!("Loading workload...");
    eprintln!("Starting test.");
    let start = Instant::now();
    let done = Arc::new((Mutex::new(false), Condvar::new()));
    let results = std::thread::scope(|scope| {
        // The monitor: status lines, progress bar, maxexecutiontime.
        let monitor = {
            let shared = shared.clone();
            let measurements = measurements.clone();
            let done = done.clone();
            let status = opts.status;
            let progress = opts.progress;
            scope.spawn(move || {
                monitor(
                    &shared,
                    &measurements,
                    &done,
                    start,
                    opcount,
                    max_exec,
                    status.then(|| Duration::from_secs_f64(status_interval)),
                    progress,
                )
            })
        };
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let shared = shared.clone();
                let recorder = measurements.recorder();
                let phase = opts.phase;
                scope.spawn(move || -> Result<Option<ProtocolCounters>, DbError> {
                    let mut db = match binding.create(props, t).and_then(|mut db| {
                        db.init()?;
                        Ok(db)
                    }) {
                        Ok(db) => db,
                        Err(e) => {
                            shared.stop.store(true, Ordering::Relaxed);
                            return Err(e);
                        }
                    };
                    let loops: Vec<LocalBoxFuture<'_, ()>> = (0..concurrency)
                        .map(|m| {
                            let slot = (t * concurrency + m) as u64;
                            let n = loop_share(opcount, slots, slot);
                            Box::pin(op_loop(
                                &shared,
                                &*db,
                                &recorder,
                                phase,
                                slot,
                                n,
                                per_loop_target,
                            )) as LocalBoxFuture<'_, ()>
                        })
                        .collect();
                    db.run(Box::pin(join_all(loops)));
                    let counters = db.counters();
                    let c0 = Instant::now();
                    let r = db.cleanup();
                    recorder.measure("CLEANUP", c0.elapsed().as_micros() as u64);
                    r?;
                    Ok(counters)
                })
            })
            .collect();
        let results: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().expect("driver thread panicked"))
            .collect();
        *done.0.lock().unwrap() = true;
        done.1.notify_all();
        monitor.join().expect("monitor thread panicked");
        results
    });
    let runtime = start.elapsed();

    let mut protocol: Option<ProtocolCounters> = None;
    for r in results {
        if let Some(c) = r? {
            protocol
                .get_or_insert_with(ProtocolCounters::default)
                .add(&c);
        }
    }
    let operations = shared.ops_done.load(Ordering::Relaxed);
    let runtime_ms = runtime.as_millis() as u64;
    let throughput = if runtime_ms == 0 {
        0.0
    } else {
        1000.0 * operations as f64 / runtime_ms as f64
    };
    Ok(RunReport {
        system: binding.name().to_string(),
        phase: opts.phase.name().to_string(),
        workload: opts.workload_label.clone(),
        threads,
        concurrency,
        target,
        runtime_ms,
        operations,
        throughput,
        ops: measurements.op_reports(&percentiles),
        protocol: protocol.map(|c| ProtocolReport::new(c, operations)),
        properties: props.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        measurement_type: measurement.kind,
    })
}

/// `hdrhistogram.percentiles`, default `95,99`.
pub fn parse_percentiles(props: &Properties) -> Result<Vec<f64>, PropError> {
    parse_percentiles_of(props, "hdrhistogram.percentiles")
}

/// The percentile list in property `key` (`hdrhistogram.percentiles` or
/// `timeseries.percentiles`), default `95,99`.
pub fn parse_percentiles_of(props: &Properties, key: &str) -> Result<Vec<f64>, PropError> {
    props
        .get_or(key, "95,99")
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            let v: f64 = s
                .trim()
                .parse()
                .map_err(|_| props.invalid(key, "expected numbers"))?;
            if !(0.0..=100.0).contains(&v) {
                return Err(props.invalid(key, "must be in 0..100"));
            }
            Ok(v)
        })
        .collect()
}

/// The operations loop `slot` of `slots` runs out of `opcount`: an even share, the first
/// `opcount % slots` loops one more. An `opcount` of 0 means no limit (the run ends at
/// `maxexecutiontime`): `None`. With more loops than operations some loops get `Some(0)`
/// and run nothing.
fn loop_share(opcount: u64, slots: u64, slot: u64) -> Option<u64> {
    if opcount == 0 {
        return None;
    }
    let slots = slots.max(1);
    Some(opcount / slots + u64::from(slot < opcount % slots))
}

async fn op_loop(
    shared: &Shared,
    db: &dyn Db,
    rec: &Recorder,
    phase: Phase,
    slot: u64,
    opcount: Option<u64>,
    target_per_sec: f64,
) {
    let w = &shared.workload;
    let mut st = w.loop_state(slot);
    let tick = (target_per_sec > 0.0).then(|| Duration::from_secs_f64(1.0 / target_per_sec));
    if let Some(tick) = tick {
        // Spread the loops' first operations over one tick, as YCSB does for slow targets.
        let frac = crate::generator::next_f64(&mut rand::rng());
        sleep_until(Instant::now() + tick.mul_f64(frac)).await;
    }
    let start = Instant::now();
    let mut done: u64 = 0;
    while opcount.is_none_or(|n| done < n) && !shared.stop.load(Ordering::Relaxed) {
        let ok = match phase {
            Phase::Load => w.do_insert(db, rec, &mut st).await,
            Phase::Run => w.do_transaction(db, rec, &mut st).await,
        };
        if !ok {
            break;
        }
        done += 1;
        shared.ops_done.fetch_add(1, Ordering::Relaxed);
        if let Some(tick) = tick {
            sleep_until(start + tick.mul_f64(done as f64)).await;
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn monitor(
    shared: &Shared,
    measurements: &Measurements,
    done: &(Mutex<bool>, Condvar),
    start: Instant,
    opcount: u64,
    max_exec: u64,
    status_every: Option<Duration>,
    progress: bool,
) {
    let bar = progress.then(|| {
        let bar = if opcount > 0 {
            ProgressBar::with_draw_target(Some(opcount), ProgressDrawTarget::stderr())
        } else {
            ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr())
        };
        if let Ok(style) = ProgressStyle::with_template(
            "{elapsed_precise} [{wide_bar}] {pos}/{len} ops {per_sec} eta {eta}",
        ) {
            bar.set_style(style);
        }
        bar
    });
    let mut next_status = status_every.map(|d| start + d);
    let mut last_ops = 0u64;
    let mut last_time = start;
    let print = |line: String| match &bar {
        Some(b) => b.println(line),
        None => eprintln!("{line}"),
    };
    let mut status_line = |now: Instant| {
        let total = shared.ops_done.load(Ordering::Relaxed);
        let interval = measurements.collect_interval();
        let secs = now.duration_since(last_time).as_secs_f64();
        let cur = if secs > 0.0 {
            (total - last_ops) as f64 / secs
        } else {
            0.0
        };
        last_ops = total;
        last_time = now;
        let elapsed = now.duration_since(start);
        let mut msg = format!(
            "{} {} sec: {} operations; ",
            timestamp(),
            elapsed.as_secs(),
            total
        );
        if total != 0 {
            msg.push_str(&format!("{} current ops/sec; ", decimal_2(cur)));
        }
        if opcount != 0 && total != 0 {
            let rate = total as f64 / elapsed.as_secs_f64().max(1e-9);
            let remaining = ((opcount.saturating_sub(total)) as f64 / rate) as u64;
            msg.push_str(&format!(
                "est completion in {}",
                remaining_format(remaining)
            ));
        }
        for (name, h) in &interval {
            msg.push_str(&interval_summary(name, h));
            msg.push(' ');
        }
        msg
    };
    loop {
        let now = Instant::now();
        if max_exec > 0 && now.duration_since(start) >= Duration::from_secs(max_exec) {
            shared.stop.store(true, Ordering::Relaxed);
        }
        if let Some(b) = &bar {
            b.set_position(shared.ops_done.load(Ordering::Relaxed));
        }
        if let Some(t) = next_status
            && now >= t
        {
            print(status_line(now));
            let every = status_every.unwrap_or_default();
            // Like YCSB's status thread: on schedule, but never a burst to catch up.
            next_status = Some(if t + every > now {
                t + every
            } else {
                now + every
            });
        }
        let mut wait = Duration::from_millis(if bar.is_some() { 100 } else { 250 });
        if let Some(t) = next_status {
            wait = wait.min(t.saturating_duration_since(now));
        }
        let finished = done.0.lock().unwrap();
        if *finished {
            break;
        }
        let (finished, _) = done.1.wait_timeout(finished, wait).unwrap();
        if *finished {
            break;
        }
    }
    if let Some(b) = &bar {
        b.set_position(shared.ops_done.load(Ordering::Relaxed));
        b.finish_and_clear();
    }
    if status_every.is_some() {
        // YCSB's final status line after the threads finish.
        let line = status_line(Instant::now());
        eprintln!("{line}");
    }
}

/// YCSB's `RemainingFormatter`.
pub fn remaining_format(mut seconds: u64) -> String {
    let mut t = String::new();
    let days = seconds / 86400;
    if days > 0 {
        t.push_str(&format!(
            "{days} {}",
            if days == 1 { "day " } else { "days " }
        ));
        seconds -= days * 86400;
    }
    let hours = seconds / 3600;
    if hours > 0 {
        t.push_str(&format!(
            "{hours} {}",
            if hours == 1 { "hour " } else { "hours " }
        ));
        seconds -= hours * 3600;
    }
    if days < 1 {
        let minutes = seconds / 60;
        if minutes > 0 {
            t.push_str(&format!(
                "{minutes} {}",
                if minutes == 1 { "minute " } else { "minutes " }
            ));
            seconds -= minutes * 60;
        }
    }
    if t.is_empty() {
        t.push_str(&format!("{seconds} seconds "));
    }
    t
}

/// `yyyy-MM-dd HH:mm:ss:SSS` (UTC).
pub fn timestamp() -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let ms = now.as_millis() as i64;
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86400);
    let sod = secs.rem_euclid(86400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}:{:03}",
        sod / 3600,
        sod % 3600 / 60,
        sod % 60,
        ms.rem_euclid(1000)
    )
}

#[cfg(test)]
mod tests {
    use super::loop_share;

    #[test]
    fn loops_share_the_operations_exactly() {
        for (ops, slots) in [(4u64, 8u64), (3, 8), (100, 7), (8, 8), (1, 1), (5, 2)] {
            let shares: Vec<_> = (0..slots).map(|s| loop_share(ops, slots, s)).collect();
            assert_eq!(shares.iter().map(|n| n.unwrap()).sum::<u64>(), ops);
            let (min, max) = (
                shares.iter().min().unwrap().unwrap(),
                shares.iter().max().unwrap().unwrap(),
            );
            assert!(max - min <= 1, "{ops} over {slots}: {shares:?}");
        }
        assert_eq!(loop_share(0, 4, 2), None, "0 operations: no limit");
    }
}
