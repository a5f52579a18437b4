//! Measurements (YCSB's `Measurements` with `measurementtype=hdrhistogram`) and the report.
//!
//! Each driver thread records into its own [`Recorder`] (a mutex only the status thread ever
//! contends); [`Measurements::collect_interval`] drains the thread histograms into the totals and
//! returns the interval, as YCSB's `getIntervalHistogramAndAccumulate` does. The text report is
//! YCSB's `TextMeasurementsExporter` output: `[NAME], Measurement, value` lines, doubles printed
//! like Java's `Double.toString`.

use crate::db::{ProtocolCounters, Status};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

fn new_hist() -> Histogram<u64> {
    Histogram::new(3).expect("3 significant digits is valid")
}

/// Record `v`, growing the histogram as needed. (`saturating_record` does not grow an
/// auto-resizing histogram: it would clamp every value above the current range to the range's
/// initial bound, 2 µs.)
fn record(h: &mut Histogram<u64>, v: u64) {
    if h.record(v).is_err() {
        h.saturating_record(v);
    }
}

#[derive(Default)]
struct ThreadStats {
    hists: BTreeMap<String, Histogram<u64>>,
    returns: BTreeMap<String, BTreeMap<Status, u64>>,
}

/// A thread's handle for recording latencies and statuses.
#[derive(Clone)]
pub struct Recorder {
    stats: Arc<Mutex<ThreadStats>>,
}

impl Recorder {
    /// Record a latency in microseconds under `name` (`READ`, `READ-FAILED`, `VERIFY`, …).
    pub fn measure(&self, name: &str, micros: u64) {
        let mut s = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(h) = s.hists.get_mut(name) {
            record(h, micros);
        } else {
            let mut h = new_hist();
            record(&mut h, micros);
            s.hists.insert(name.to_string(), h);
        }
    }

    /// Count a status under `name` (`Return=OK` lines).
    pub fn report_status(&self, name: &str, status: Status) {
        let mut s = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = s.returns.get_mut(name) {
            *r.entry(status).or_default() += 1;
        } else {
            s.returns
                .insert(name.to_string(), BTreeMap::from([(status, 1)]));
        }
    }
}

#[derive(Default)]
struct Totals {
    hists: BTreeMap<String, Histogram<u64>>,
    returns: BTreeMap<String, BTreeMap<Status, u64>>,
}

/// All threads' measurements.
#[derive(Default)]
pub struct Measurements {
    threads: Mutex<Vec<Arc<Mutex<ThreadStats>>>>,
    totals: Mutex<Totals>,
}

impl Measurements {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub fn recorder(&self) -> Recorder {
        let stats = Arc::new(Mutex::new(ThreadStats::default()));
        self.threads.lock().unwrap().push(stats.clone());
        Recorder { stats }
    }

    /// Move what the threads recorded since the last call into the totals; return that interval.
    pub fn collect_interval(&self) -> BTreeMap<String, Histogram<u64>> {
        let threads: Vec<_> = self.threads.lock().unwrap().clone();
        let mut interval: BTreeMap<String, Histogram<u64>> = BTreeMap::new();
        let mut returns: BTreeMap<String, BTreeMap<Status, u64>> = BTreeMap::new();
        for t in threads {
            let mut s = t.lock().unwrap_or_else(|e| e.into_inner());
            for (name, h) in s.hists.iter_mut() {
                interval
                    .entry(name.clone())
                    .or_insert_with(new_hist)
                    .add(&*h)
                    .expect("auto-resizing histogram");
                h.reset();
            }
            for (name, r) in std::mem::take(&mut s.returns) {
                let dst = returns.entry(name).or_default();
                for (st, n) in r {
                    *dst.entry(st).or_default() += n;
                }
            }
        }
        let mut totals = self.totals.lock().unwrap();
        for (name, h) in &interval {
            totals
                .hists
                .entry(name.clone())
                .or_insert_with(new_hist)
                .add(h)
                .expect("auto-resizing histogram");
        }
        for (name, r) in returns {
            let dst = totals.returns.entry(name).or_default();
            for (st, n) in r {
                *dst.entry(st).or_default() += n;
            }
        }
        interval
    }

    /// The per-operation part of the report, after a final [`Self::collect_interval`].
    pub fn op_reports(&self, percentiles: &[f64]) -> Vec<OpReport> {
        self.collect_interval();
        let totals = self.totals.lock().unwrap();
        let mut names: Vec<&String> = totals.hists.keys().chain(totals.returns.keys()).collect();
        names.sort();
        names.dedup();
        names
            .into_iter()
            .map(|name| {
                let empty = new_hist();
                let h = totals.hists.get(name).unwrap_or(&empty);
                let count = h.len();
                OpReport {
                    name: name.clone(),
                    operations: count,
                    average_us: if count == 0 { 0.0 } else { h.mean() },
                    min_us: if count == 0 { 0 } else { h.min() },
                    max_us: if count == 0 { 0 } else { h.max() },
                    percentiles: percentiles
                        .iter()
                        .map(|&p| (p, h.value_at_quantile(p / 100.0)))
                        .collect(),
                    returns: totals
                        .returns
                        .get(name)
                        .map(|r| r.iter().map(|(s, n)| (s.name().to_string(), *n)).collect())
                        .unwrap_or_default(),
                    cdf: cdf(h),
                }
            })
            .collect()
    }
}

/// The latency CDF of `h` as (latency µs, fraction ≤ it), from every recorded bucket.
fn cdf(h: &Histogram<u64>) -> Vec<(u64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    let total = h.len() as f64;
    let mut seen = 0u64;
    let mut points: Vec<(u64, f64)> = h
        .iter_recorded()
        .map(|v| {
            seen += v.count_since_last_iteration();
            (
                h.highest_equivalent(v.value_iterated_to()),
                seen as f64 / total,
            )
        })
        .collect();
    // Thin the body to steps of 0.25 % and keep the whole tail above the 99th percentile.
    let last = points.len() - 1;
    let mut kept_q = -1.0;
    let mut i = 0;
    points.retain(|&(_, q)| {
        let keep = i == last || q >= 0.99 || q - kept_q >= 0.0025;
        if keep {
            kept_q = q;
        }
        i += 1;
        keep
    });
    points
}

/// One operation's block of the report (`[READ], …`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OpReport {
    pub name: String,
    pub operations: u64,
    pub average_us: f64,
    pub min_us: u64,
    pub max_us: u64,
    /// (percentile, latency µs).
    pub percentiles: Vec<(f64, u64)>,
    /// (status name, count).
    pub returns: Vec<(String, u64)>,
    /// (latency µs, cumulative fraction).
    pub cdf: Vec<(u64, f64)>,
}

/// Protocol figures from transport counters, per operation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ProtocolReport {
    pub totals: ProtocolCounters,
    pub round_trips_per_op: f64,
    pub bytes_per_op: f64,
    pub retries_per_op: f64,
}

impl ProtocolReport {
    pub fn new(totals: ProtocolCounters, operations: u64) -> Self {
        let per = |x: u64| {
            if operations == 0 {
                0.0
            } else {
                x as f64 / operations as f64
            }
        };
        ProtocolReport {
            totals,
            round_trips_per_op: per(totals.round_trips),
            bytes_per_op: per(totals.bytes_sent + totals.bytes_received),
            retries_per_op: per(totals.retries),
        }
    }
}

/// One run (a load or a run phase) as reported and written by `--json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunReport {
    /// Binding name (`memory`, `redis`, `dmkv`, …).
    pub system: String,
    /// `load` or `run`.
    pub phase: String,
    /// The `workload` label: the last `-P` file's name, or the `workload` property.
    pub workload: String,
    pub threads: usize,
    pub concurrency: usize,
    /// `-target` ops/s, 0 when unthrottled.
    pub target: f64,
    pub runtime_ms: u64,
    pub operations: u64,
    pub throughput: f64,
    pub ops: Vec<OpReport>,
    pub protocol: Option<ProtocolReport>,
    /// The effective properties.
    pub properties: BTreeMap<String, String>,
}

/// Java's `Double.toString`.
pub fn java_double(d: f64) -> String {
    if d.is_nan() {
        return "NaN".into();
    }
    if d.is_infinite() {
        return if d > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if d == 0.0 {
        return if d.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    let a = d.abs();
    if (1e-3..1e7).contains(&a) {
        let s = format!("{d}");
        if s.contains('.') { s } else { s + ".0" }
    } else {
        let s = format!("{d:e}");
        let (m, e) = s.split_once('e').expect("exponent format");
        let m = if m.contains('.') {
            m.to_string()
        } else {
            format!("{m}.0")
        };
        format!("{m}E{e}")
    }
}

/// Java's `DecimalFormat("#.##")`.
pub fn decimal_2(d: f64) -> String {
    let s = format!("{d:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() || s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

/// YCSB's percentile label: `95th`, `99th`, `1st`, `99.9`.
pub fn ordinal(p: f64) -> String {
    if p.fract() == 0.0 {
        let j = p as i64;
        let suffixes = ["th", "st", "nd", "rd", "th", "th", "th", "th", "th", "th"];
        match j % 100 {
            11..=13 => format!("{j}th"),
            _ => format!("{j}{}", suffixes[(j % 10) as usize]),
        }
    } else {
        java_double(p)
    }
}

/// YCSB's text report for `r`.
pub fn text_report(r: &RunReport) -> String {
    let mut out = String::new();
    let mut line = |metric: &str, measurement: &str, value: String| {
        out.push_str(&format!("[{metric}], {measurement}, {value}\n"));
    };
    line("OVERALL", "RunTime(ms)", r.runtime_ms.to_string());
    line("OVERALL", "Throughput(ops/sec)", java_double(r.throughput));
    if let Some(p) = &r.protocol {
        line("PROTOCOL", "RoundTrips", p.totals.round_trips.to_string());
        line("PROTOCOL", "BytesSent", p.totals.bytes_sent.to_string());
        line(
            "PROTOCOL",
            "BytesReceived",
            p.totals.bytes_received.to_string(),
        );
        line("PROTOCOL", "Retries", p.totals.retries.to_string());
        line(
            "PROTOCOL",
            "RoundTripsPerOp",
            java_double(p.round_trips_per_op),
        );
        line("PROTOCOL", "BytesPerOp", java_double(p.bytes_per_op));
        line("PROTOCOL", "RetriesPerOp", java_double(p.retries_per_op));
    }
    for op in &r.ops {
        line(&op.name, "Operations", op.operations.to_string());
        line(&op.name, "AverageLatency(us)", java_double(op.average_us));
        line(&op.name, "MinLatency(us)", op.min_us.to_string());
        line(&op.name, "MaxLatency(us)", op.max_us.to_string());
        for (p, v) in &op.percentiles {
            line(
                &op.name,
                &format!("{}PercentileLatency(us)", ordinal(*p)),
                v.to_string(),
            );
        }
        for (s, n) in &op.returns {
            line(&op.name, &format!("Return={s}"), n.to_string());
        }
    }
    out
}

/// YCSB's status-line summary of one interval histogram.
pub fn interval_summary(name: &str, h: &Histogram<u64>) -> String {
    if h.is_empty() {
        return format!("[{name}: Count=0, Max=0, Min=0, Avg=0, 90=0, 99=0, 99.9=0, 99.99=0]");
    }
    format!(
        "[{name}: Count={}, Max={}, Min={}, Avg={}, 90={}, 99={}, 99.9={}, 99.99={}]",
        h.len(),
        h.max(),
        h.min(),
        decimal_2(h.mean()),
        h.value_at_quantile(0.90),
        h.value_at_quantile(0.99),
        h.value_at_quantile(0.999),
        h.value_at_quantile(0.9999),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_latencies_are_recorded_as_they_are() {
        let m = Measurements::new();
        let r = m.recorder();
        for v in [3, 1500, 2500, 80_000, 5_000_000] {
            r.measure("READ", v);
        }
        let ops = m.op_reports(&[50.0]);
        let read = &ops[0];
        assert_eq!(read.operations, 5);
        assert_eq!(read.min_us, 3);
        assert!(read.max_us >= 4_995_000, "{}", read.max_us);
        assert!(
            (2495..=2505).contains(&read.percentiles[0].1),
            "{:?}",
            read.percentiles
        );
    }

    #[test]
    fn java_formatting() {
        assert_eq!(java_double(1.0), "1.0");
        assert_eq!(java_double(98.91196834817013), "98.91196834817013");
        assert_eq!(java_double(1.0e7), "1.0E7");
        assert_eq!(java_double(12345678.9), "1.23456789E7");
        assert_eq!(java_double(0.0001), "1.0E-4");
        assert_eq!(java_double(0.0), "0.0");
        assert_eq!(ordinal(95.0), "95th");
        assert_eq!(ordinal(99.0), "99th");
        assert_eq!(ordinal(99.9), "99.9");
        assert_eq!(ordinal(1.0), "1st");
        assert_eq!(ordinal(12.0), "12th");
        assert_eq!(ordinal(22.0), "22nd");
        assert_eq!(decimal_2(5345.3), "5345.3");
        assert_eq!(decimal_2(2.0), "2");
        assert_eq!(decimal_2(1.005), "1");
    }
}
