//! The report of one phase as YCSB's `(metric, measurement, value)` triples, in YCSB's order:
//! `[OVERALL]`, then (ours) `[PROTOCOL]`, then every operation's block as its
//! `measurementtype` writes it. An [`crate::exporter::Exporter`] turns them into text or JSON.

use crate::exporter::Metric;
use crate::measure::{ExactSummary, OpReport, RunReport, ordinal};
use crate::measurement_type::MeasurementType;

/// Every line of `r`'s report.
pub fn report_metrics(r: &RunReport) -> Vec<Metric> {
    let mut out = vec![
        Metric::uint("OVERALL", "RunTime(ms)", r.runtime_ms),
        Metric::float("OVERALL", "Throughput(ops/sec)", r.throughput),
    ];
    if let Some(p) = &r.protocol {
        out.extend([
            Metric::uint("PROTOCOL", "RoundTrips", p.totals.round_trips),
            Metric::uint("PROTOCOL", "Rpcs", p.totals.rpcs),
            Metric::uint("PROTOCOL", "BytesSent", p.totals.bytes_sent),
            Metric::uint("PROTOCOL", "BytesReceived", p.totals.bytes_received),
            Metric::uint("PROTOCOL", "Retries", p.totals.retries),
            Metric::float("PROTOCOL", "RoundTripsPerOp", p.round_trips_per_op),
            Metric::float("PROTOCOL", "RpcsPerOp", p.rpcs_per_op),
            Metric::float("PROTOCOL", "BytesPerOp", p.bytes_per_op),
            Metric::float("PROTOCOL", "RetriesPerOp", p.retries_per_op),
            Metric::float("PROTOCOL", "MultiRoundTripShare", p.multi_round_trip_share),
        ]);
    }
    for op in &r.ops {
        match (r.measurement_type, &op.exact) {
            (MeasurementType::Histogram, Some(e)) => histogram_block(&mut out, op, e),
            (MeasurementType::TimeSeries, Some(e)) => timeseries_block(&mut out, op, e),
            (MeasurementType::HdrAndHistogram, Some(e)) => {
                hdr_block(&mut out, op);
                histogram_block(&mut out, op, e);
            }
            _ => hdr_block(&mut out, op),
        }
    }
    out
}

fn returns(out: &mut Vec<Metric>, op: &OpReport) {
    for (s, n) in &op.returns {
        out.push(Metric::uint(&op.name, format!("Return={s}"), *n));
    }
}

/// YCSB's `OneMeasurementHdrHistogram` block.
fn hdr_block(out: &mut Vec<Metric>, op: &OpReport) {
    let name = op.name.as_str();
    out.push(Metric::uint(name, "Operations", op.operations));
    out.push(Metric::float(name, "AverageLatency(us)", op.average_us));
    out.push(Metric::uint(name, "MinLatency(us)", op.min_us));
    out.push(Metric::uint(name, "MaxLatency(us)", op.max_us));
    for (p, v) in &op.percentiles {
        out.push(Metric::uint(
            name,
            format!("{}PercentileLatency(us)", ordinal(*p)),
            *v,
        ));
    }
    returns(out, op);
}

/// YCSB's `OneMeasurementHistogram` block: exact figures, the 95th and 99th percentiles to the
/// millisecond bucket (left out when they fall in the overflow, as in YCSB), the statuses, and
/// the buckets `0` … `N-1`, `>N` when `histogram.verbose` is on.
fn histogram_block(out: &mut Vec<Metric>, op: &OpReport, e: &ExactSummary) {
    let name = op.name.as_str();
    out.push(Metric::uint(name, "Operations", e.operations));
    out.push(Metric::float(name, "AverageLatency(us)", e.average_us));
    out.push(Metric::float(name, "LatencyVariance(us)", e.variance_us));
    out.push(Metric::uint(name, "MinLatency(us)", e.min_us));
    out.push(Metric::uint(name, "MaxLatency(us)", e.max_us));
    for p in [95.0, 99.0] {
        if let Some(v) = e.bucket_percentile(p) {
            out.push(Metric::uint(
                name,
                format!("{}PercentileLatency(us)", ordinal(p)),
                v,
            ));
        }
    }
    returns(out, op);
    if let Some((overflow, buckets)) = e.buckets.split_last().filter(|_| e.buckets_listed) {
        for (i, c) in buckets.iter().enumerate() {
            out.push(Metric::uint(name, i.to_string(), *c));
        }
        out.push(Metric::uint(name, format!(">{}", buckets.len()), *overflow));
    }
}

/// YCSB's `OneMeasurementTimeSeries` block: exact figures, HdrHistogram percentiles
/// (`timeseries.percentiles`), the statuses, then `time-ms, average-us` per unit.
fn timeseries_block(out: &mut Vec<Metric>, op: &OpReport, e: &ExactSummary) {
    let name = op.name.as_str();
    out.push(Metric::uint(name, "Operations", e.operations));
    out.push(Metric::float(name, "AverageLatency(us)", e.average_us));
    out.push(Metric::uint(name, "MinLatency(us)", e.min_us));
    out.push(Metric::uint(name, "MaxLatency(us)", e.max_us));
    for (p, v) in &op.percentiles {
        out.push(Metric::uint(
            name,
            format!("{}PercentileLatency(us)", ordinal(*p)),
            *v,
        ));
    }
    returns(out, op);
    for (t, avg) in &e.series {
        out.push(Metric::float(name, t.to_string(), *avg));
    }
}
