//! Measurements (YCSB's `Measurements` with `measurementtype=hdrhistogram`) and the report.
//!
//! Each driver thread records into its own [`Recorder`] (a mutex only the status thread ever
//! contends); [`Measurements::collect_interval`] drains the thread histograms into the totals and
//! returns the interval, as YCSB's `getIntervalHistogramAndAccumulate` does. The text report is
//! YCSB's `TextMeasurementsExporter` output: `[NAME], Measurement, value` lines, doubles printed
//! like Java's `Double.toString`. Besides the HdrHistogram, exact figures (sum, sum of squares,
//! min, max) and, as `measurementtype` asks, millisecond buckets or a time series are kept (see
//! [`crate::measurement_type`]).

use crate::db::{ProtocolCounters, Status};
use crate::exporter::Exporter;
use crate::measurement_type::{MeasurementConfig, MeasurementType};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

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

/// Exact figures of one operation: what YCSB's `OneMeasurementHistogram` and
/// `OneMeasurementTimeSeries` keep.
#[derive(Default, Clone, Debug, PartialEq)]
struct Exact {
    count: u64,
    sum: u64,
    sum_sq: f64,
    min: u64,
    max: u64,
    /// Latencies per millisecond, `histogram.buckets` of them and the overflow last (empty when
    /// the measurement type keeps no buckets).
    buckets: Vec<u64>,
    /// Time unit start (ms since the phase began) → (count, sum µs).
    series: BTreeMap<u64, (u64, u64)>,
}

impl Exact {
    fn new(config: &MeasurementConfig) -> Exact {
        Exact {
            buckets: if config.kind.keeps_buckets() {
                vec![0; config.buckets + 1]
            } else {
                Vec::new()
            },
            ..Exact::default()
        }
    }

    fn record(&mut self, micros: u64, unit_ms: Option<u64>) {
        if self.count == 0 || micros < self.min {
            self.min = micros;
        }
        self.max = self.max.max(micros);
        self.count += 1;
        self.sum = self.sum.saturating_add(micros);
        self.sum_sq += (micros as f64) * (micros as f64);
        if let Some(last) = self.buckets.len().checked_sub(1) {
            let ms = usize::try_from(micros / 1000).unwrap_or(usize::MAX);
            self.buckets[ms.min(last)] += 1;
        }
        if let Some(unit) = unit_ms {
            let e = self.series.entry(unit).or_default();
            e.0 += 1;
            e.1 = e.1.saturating_add(micros);
        }
    }

    fn merge(&mut self, other: &Exact) {
        if other.count == 0 {
            return;
        }
        if self.count == 0 || other.min < self.min {
            self.min = other.min;
        }
        self.max = self.max.max(other.max);
        self.count += other.count;
        self.sum = self.sum.saturating_add(other.sum);
        self.sum_sq += other.sum_sq;
        if self.buckets.len() < other.buckets.len() {
            self.buckets.resize(other.buckets.len(), 0);
        }
        for (d, s) in self.buckets.iter_mut().zip(&other.buckets) {
            *d += s;
        }
        for (unit, (n, sum)) in &other.series {
            let e = self.series.entry(*unit).or_default();
            e.0 += n;
            e.1 = e.1.saturating_add(*sum);
        }
    }
}

#[derive(Default)]
struct ThreadStats {
    hists: BTreeMap<String, Histogram<u64>>,
    exact: BTreeMap<String, Exact>,
    returns: BTreeMap<String, BTreeMap<Status, u64>>,
}

/// A thread's handle for recording latencies and statuses.
#[derive(Clone)]
pub struct Recorder {
    stats: Arc<Mutex<ThreadStats>>,
    config: MeasurementConfig,
    start: Instant,
}

impl Recorder {
    /// Record a latency in microseconds under `name` (`READ`, `READ-FAILED`, `VERIFY`, …).
    pub fn measure(&self, name: &str, micros: u64) {
        self.measure_at(name, micros, self.start.elapsed());
    }

    /// Record a latency of `micros` µs under `name`, for an operation that ended `at` after the
    /// measurements began (the time series puts it in that unit).
    pub fn measure_at(&self, name: &str, micros: u64, at: std::time::Duration) {
        let mut s = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(h) = s.hists.get_mut(name) {
            record(h, micros);
        } else {
            let mut h = new_hist();
            record(&mut h, micros);
            s.hists.insert(name.to_string(), h);
        }
        let unit = self.config.kind.keeps_series().then(|| {
            let ms = u64::try_from(at.as_millis()).unwrap_or(u64::MAX);
            ms / self.config.granularity_ms * self.config.granularity_ms
        });
        if let Some(e) = s.exact.get_mut(name) {
            e.record(micros, unit);
        } else {
            let mut e = Exact::new(&self.config);
            e.record(micros, unit);
            s.exact.insert(name.to_string(), e);
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
    exact: BTreeMap<String, Exact>,
    returns: BTreeMap<String, BTreeMap<Status, u64>>,
}

/// All threads' measurements.
pub struct Measurements {
    threads: Mutex<Vec<Arc<Mutex<ThreadStats>>>>,
    totals: Mutex<Totals>,
    config: MeasurementConfig,
    /// Time series units count from here.
    start: Instant,
}

impl Measurements {
    /// Measurements of the default type (`hdrhistogram`).
    pub fn new() -> Arc<Self> {
        Self::with_config(MeasurementConfig::default())
    }

    /// Measurements of the type `config` says; time series count from now.
    pub fn with_config(config: MeasurementConfig) -> Arc<Self> {
        Arc::new(Measurements {
            threads: Mutex::new(Vec::new()),
            totals: Mutex::new(Totals::default()),
            config,
            start: Instant::now(),
        })
    }

    /// A new thread's recorder.
    pub fn recorder(&self) -> Recorder {
        let stats = Arc::new(Mutex::new(ThreadStats::default()));
        self.threads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(stats.clone());
        Recorder {
            stats,
            config: self.config,
            start: self.start,
        }
    }

    /// Move what the threads recorded since the last call into the totals; return that interval.
    pub fn collect_interval(&self) -> BTreeMap<String, Histogram<u64>> {
        let threads: Vec<_> = self
            .threads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let mut interval: BTreeMap<String, Histogram<u64>> = BTreeMap::new();
        let mut returns: BTreeMap<String, BTreeMap<Status, u64>> = BTreeMap::new();
        let mut exact: BTreeMap<String, Exact> = BTreeMap::new();
        for t in threads {
            let mut s = t.lock().unwrap_or_else(|e| e.into_inner());
            for (name, e) in std::mem::take(&mut s.exact) {
                exact.entry(name).or_default().merge(&e);
            }
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
        let mut totals = self.totals.lock().unwrap_or_else(|e| e.into_inner());
        for (name, e) in &exact {
            totals.exact.entry(name.clone()).or_default().merge(e);
        }
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
        let totals = self.totals.lock().unwrap_or_else(|e| e.into_inner());
        let kind = self.config.kind;
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
                    exact: totals
                        .exact
                        .get(name)
                        .filter(|_| kind != MeasurementType::HdrHistogram)
                        .map(|e| ExactSummary::of(e, &self.config)),
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
    /// Exact figures, buckets and time series; absent for `measurementtype=hdrhistogram`.
    #[serde(default)]
    pub exact: Option<ExactSummary>,
}

/// What `measurementtype=histogram` and `timeseries` report of one operation, from exact sums.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ExactSummary {
    /// Operations measured.
    pub operations: u64,
    /// Mean latency, µs (NaN when nothing was measured, as YCSB prints it).
    pub average_us: f64,
    /// Population variance of the latency, µs².
    pub variance_us: f64,
    /// Fastest operation, µs.
    pub min_us: u64,
    /// Slowest operation, µs.
    pub max_us: u64,
    /// Operations per millisecond bucket `0..N`, then the `>N` overflow; empty unless the
    /// measurement type keeps buckets.
    #[serde(default)]
    pub buckets: Vec<u64>,
    /// Whether the report lists the buckets (`histogram.verbose`).
    #[serde(default)]
    pub buckets_listed: bool,
    /// (unit start, ms since the phase began; average latency µs) per `timeseries.granularity`;
    /// empty unless the measurement type is `timeseries`.
    #[serde(default)]
    pub series: Vec<(u64, f64)>,
}

impl ExactSummary {
    fn of(e: &Exact, config: &MeasurementConfig) -> ExactSummary {
        let n = e.count as f64;
        let mean = e.sum as f64 / n;
        ExactSummary {
            operations: e.count,
            average_us: mean,
            variance_us: e.sum_sq / n - mean * mean,
            min_us: e.min,
            max_us: e.max,
            buckets: e.buckets.clone(),
            buckets_listed: config.verbose_buckets,
            series: e
                .series
                .iter()
                .map(|(&unit, &(count, sum))| (unit, sum as f64 / count as f64))
                .collect(),
        }
    }

    /// YCSB's bucket percentile: the first millisecond bucket where the cumulative share
    /// reaches `p` %, times 1000; `None` when it falls in the overflow.
    pub fn bucket_percentile(&self, p: f64) -> Option<u64> {
        let n = self.buckets.len().checked_sub(1)?;
        let mut seen = 0u64;
        for (i, c) in self.buckets[..n].iter().enumerate() {
            seen += c;
            if seen as f64 / self.operations as f64 >= p / 100.0 {
                return Some(i as u64 * 1000);
            }
        }
        None
    }
}

/// Protocol figures from transport counters, per operation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ProtocolReport {
    pub totals: ProtocolCounters,
    pub round_trips_per_op: f64,
    /// RPCs to memory nodes' workers per operation.
    #[serde(default)]
    pub rpcs_per_op: f64,
    pub bytes_per_op: f64,
    pub retries_per_op: f64,
    /// Share of the store's operations that took more than one round trip (0 when
    /// the binding does not count them).
    #[serde(default)]
    pub multi_round_trip_share: f64,
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
            rpcs_per_op: per(totals.rpcs),
            bytes_per_op: per(totals.bytes_sent + totals.bytes_received),
            retries_per_op: per(totals.retries),
            multi_round_trip_share: if totals.store_operations == 0 {
                0.0
            } else {
                totals.multi_round_trip_operations as f64 / totals.store_operations as f64
            },
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
    /// `measurementtype`: which blocks the report has for each operation.
    #[serde(default)]
    pub measurement_type: MeasurementType,
}

impl RunReport {
    /// The `p`th latency percentile of operation `op` (`READ`, `UPDATE`, …) in µs, when
    /// the report lists it (`hdrhistogram.percentiles`).
    pub fn percentile_us(&self, op: &str, p: f64) -> Option<f64> {
        self.ops
            .iter()
            .find(|o| o.name == op)?
            .percentiles
            .iter()
            .find(|(q, _)| (*q - p).abs() < 1e-9)
            .map(|(_, us)| *us as f64)
    }

    /// Operations that failed (YCSB's `…-FAILED` blocks).
    pub fn failed_operations(&self) -> u64 {
        self.ops
            .iter()
            .filter(|o| o.name.ends_with("-FAILED"))
            .map(|o| o.operations)
            .sum()
    }
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

/// YCSB's text report for `r` (the `TextMeasurementsExporter` format).
pub fn text_report(r: &RunReport) -> String {
    Exporter::Text.render(&crate::report::report_metrics(r))
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

    fn config(kind: MeasurementType, buckets: usize, granularity_ms: u64) -> MeasurementConfig {
        MeasurementConfig {
            kind,
            buckets,
            granularity_ms,
            ..MeasurementConfig::default()
        }
    }

    fn run_report(kind: MeasurementType, ops: Vec<OpReport>) -> RunReport {
        RunReport {
            system: "memory".into(),
            phase: "run".into(),
            workload: "w".into(),
            threads: 1,
            concurrency: 1,
            target: 0.0,
            runtime_ms: 10,
            operations: 1,
            throughput: 1.0,
            ops,
            protocol: None,
            properties: BTreeMap::new(),
            measurement_type: kind,
        }
    }

    #[test]
    fn histogram_counts_milliseconds_like_ycsb() {
        let m = Measurements::with_config(config(MeasurementType::Histogram, 3, 1000));
        let (a, b) = (m.recorder(), m.recorder());
        for v in [500, 1500, 1999] {
            a.measure("READ", v);
        }
        for v in [2500, 3000, 10_000] {
            b.measure("READ", v);
        }
        let ops = m.op_reports(&[95.0]);
        let e = ops[0].exact.as_ref().unwrap();
        assert_eq!(e.buckets, [1, 2, 1, 2]);
        assert_eq!((e.operations, e.min_us, e.max_us), (6, 500, 10_000));
        assert_eq!(e.average_us, 19_499.0 / 6.0);
        // 95 % is reached only in the overflow: YCSB then prints no percentile line.
        assert_eq!(e.bucket_percentile(95.0), None);
        assert_eq!(e.bucket_percentile(50.0), Some(1000));
        let text = text_report(&run_report(MeasurementType::Histogram, ops));
        let lines: Vec<&str> = text.lines().skip(2).collect();
        assert_eq!(lines[0], "[READ], Operations, 6");
        assert!(
            lines[2].starts_with("[READ], LatencyVariance(us), "),
            "{text}"
        );
        assert!(!text.contains("PercentileLatency"), "{text}");
        assert_eq!(
            &lines[lines.len() - 4..],
            [
                "[READ], 0, 1",
                "[READ], 1, 2",
                "[READ], 2, 1",
                "[READ], >3, 2"
            ]
        );
    }

    #[test]
    fn histogram_percentiles_are_bucket_starts() {
        let m = Measurements::with_config(config(MeasurementType::Histogram, 10, 1000));
        let r = m.recorder();
        for i in 0..100u64 {
            r.measure("UPDATE", if i < 96 { 100 } else { 4200 });
        }
        let ops = m.op_reports(&[]);
        let text = text_report(&run_report(MeasurementType::Histogram, ops));
        assert!(
            text.contains("[UPDATE], 95thPercentileLatency(us), 0\n"),
            "{text}"
        );
        assert!(
            text.contains("[UPDATE], 99thPercentileLatency(us), 4000\n"),
            "{text}"
        );
        assert!(text.contains("[UPDATE], 4, 4\n[UPDATE], 5, 0\n"), "{text}");
        assert!(text.ends_with("[UPDATE], >10, 0\n"), "{text}");
        // Both blocks for hdrhistogram+histogram, HdrHistogram's first.
        let m = Measurements::with_config(config(MeasurementType::HdrAndHistogram, 2, 1000));
        m.recorder().measure("READ", 1200);
        let text = text_report(&run_report(
            MeasurementType::HdrAndHistogram,
            m.op_reports(&[50.0]),
        ));
        assert_eq!(text.matches("[READ], Operations, 1").count(), 2, "{text}");
        assert!(text.contains("50thPercentileLatency(us), 1200"), "{text}");
        assert!(
            text.ends_with("[READ], 0, 0\n[READ], 1, 1\n[READ], >2, 0\n"),
            "{text}"
        );
    }

    #[test]
    fn timeseries_averages_each_unit() {
        use std::time::Duration;
        let m = Measurements::with_config(config(MeasurementType::TimeSeries, 1000, 100));
        let (a, b) = (m.recorder(), m.recorder());
        a.measure_at("READ", 10, Duration::from_millis(0));
        b.measure_at("READ", 30, Duration::from_millis(99));
        a.measure_at("READ", 100, Duration::from_millis(150));
        b.measure_at("READ", 7, Duration::from_millis(420));
        let ops = m.op_reports(&[99.0]);
        let e = ops[0].exact.as_ref().unwrap();
        assert_eq!(e.series, [(0, 20.0), (100, 100.0), (400, 7.0)]);
        assert!(e.buckets.is_empty());
        let text = text_report(&run_report(MeasurementType::TimeSeries, ops));
        assert!(
            text.ends_with(
                "[READ], 99thPercentileLatency(us), 100\n\
                 [READ], 0, 20.0\n[READ], 100, 100.0\n[READ], 400, 7.0\n"
            ),
            "{text}"
        );
        assert!(!text.contains("LatencyVariance"), "{text}");
    }

    #[test]
    fn hdrhistogram_reports_keep_no_exact_block() {
        let m = Measurements::new();
        m.recorder().measure("READ", 5);
        let ops = m.op_reports(&[50.0]);
        assert!(ops[0].exact.is_none());
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
