//! A lock-free latency histogram with fixed bucket bounds, exposed as a histogram
//! [`Family`] (`_bucket{le=…}`, `_sum`, `_count`).
//!
//! Recording is two relaxed atomic additions (the bucket and the sum in nanoseconds), so
//! data-plane threads can record every batch or packet. `_count` is the sum of the
//! buckets read at scrape time, so the `+Inf` bucket always equals it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::family::{Family, HistogramValue, Labels};

/// Upper bounds (seconds) for data-plane work: 1 µs to 100 ms.
pub const DATA_PLANE_BUCKETS: &[f64] = &[
    1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 1e-1,
];

/// Upper bounds (seconds) for per-packet work, sub-microsecond: 100 ns to 10 ms.
pub const PER_PACKET_BUCKETS: &[f64] = &[
    1e-7, 2.5e-7, 5e-7, 7.5e-7, 1e-6, 1.5e-6, 2e-6, 3e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 1e-3, 1e-2,
];

/// Observations per bucket (the last one is above every bound) and their sum.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    buckets: Box<[AtomicU64]>,
    sum_ns: AtomicU64,
}

impl Default for Histogram {
    /// A histogram over [`DATA_PLANE_BUCKETS`].
    fn default() -> Histogram {
        Histogram::new(DATA_PLANE_BUCKETS)
    }
}

impl Histogram {
    /// An empty histogram with upper bounds `bounds` (seconds, increasing).
    pub fn new(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            buckets: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_ns: AtomicU64::new(0),
        }
    }

    /// Record one observation.
    pub fn observe(&self, d: Duration) {
        let s = d.as_secs_f64();
        let i = self
            .bounds
            .iter()
            .position(|b| s <= *b)
            .unwrap_or(self.bounds.len());
        if let Some(b) = self.buckets.get(i) {
            b.fetch_add(1, Ordering::Relaxed);
        }
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).sum()
    }

    /// The buckets (bounds, then `+Inf`), sum and count now.
    pub fn value(&self) -> HistogramValue {
        let buckets: Vec<(f64, u64)> = self
            .buckets
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let le = self.bounds.get(i).copied().unwrap_or(f64::INFINITY);
                (le, b.load(Ordering::Relaxed))
            })
            .collect();
        HistogramValue {
            count: buckets.iter().map(|(_, n)| n).sum(),
            buckets,
            sum: self.sum_ns.load(Ordering::Relaxed) as f64 / 1e9,
        }
    }

    /// The unlabelled histogram family `name` with `help`.
    pub fn family(&self, name: &str, help: &str) -> Family {
        Family::histogram(name, help, vec![(Labels::new(), self.value())])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_a_strict_cumulative_histogram() {
        let h = Histogram::default();
        h.observe(Duration::from_nanos(500));
        h.observe(Duration::from_micros(3));
        h.observe(Duration::from_micros(3));
        h.observe(Duration::from_secs(2));
        assert_eq!(h.count(), 4);
        let mut r = prometheus_client::registry::Registry::default();
        r.register_collector(Box::new(crate::family::Families(vec![
            h.family("x_seconds", "X"),
        ])));
        let text = crate::exposition::encode(&r, crate::exposition::Format::Prometheus).unwrap();
        let e = crate::prom::parse(&text).unwrap();
        assert_eq!(e.types["x_seconds"], "histogram");
        assert_eq!(e.value("x_seconds_bucket", "le", "1e-06"), Some(1.0));
        assert_eq!(e.value("x_seconds_bucket", "le", "5e-06"), Some(3.0));
        assert_eq!(e.value("x_seconds_bucket", "le", "0.1"), Some(3.0));
        assert_eq!(e.value("x_seconds_bucket", "le", "+Inf"), Some(4.0));
        assert_eq!(e.scalar("x_seconds_count"), Some(4.0));
        let sum = e.scalar("x_seconds_sum").unwrap();
        assert!((sum - 2.0000065).abs() < 1e-9, "{sum}");
    }

    #[test]
    fn per_packet_buckets_resolve_sub_microsecond_work() {
        let h = Histogram::new(PER_PACKET_BUCKETS);
        h.observe(Duration::from_nanos(80));
        h.observe(Duration::from_nanos(300));
        h.observe(Duration::from_nanos(700));
        h.observe(Duration::from_nanos(1200));
        let mut r = prometheus_client::registry::Registry::default();
        r.register_collector(Box::new(crate::family::Families(vec![
            h.family("p_seconds", "P"),
        ])));
        let text = crate::exposition::encode(&r, crate::exposition::Format::Prometheus).unwrap();
        let e = crate::prom::parse(&text).unwrap();
        assert_eq!(e.value("p_seconds_bucket", "le", "1e-07"), Some(1.0));
        assert_eq!(e.value("p_seconds_bucket", "le", "5e-07"), Some(2.0));
        assert_eq!(e.value("p_seconds_bucket", "le", "7.5e-07"), Some(3.0));
        assert_eq!(e.value("p_seconds_bucket", "le", "1.5e-06"), Some(4.0));
    }
}
