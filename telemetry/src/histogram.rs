//! A lock-free latency histogram with fixed bucket bounds, rendered as a Prometheus
//! histogram family (`_bucket{le=…}`, `_sum`, `_count`).
//!
//! Recording is two relaxed atomic additions (the bucket and the sum in nanoseconds), so
//! data-plane threads can record every batch or packet. `_count` is the sum of the
//! buckets read at render time, so the `+Inf` bucket always equals it.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds (seconds) for data-plane work: 1 µs to 100 ms.
pub const DATA_PLANE_BUCKETS: &[f64] = &[
    1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 1e-1,
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

    /// Append the family `name` with `help` in the Prometheus text format.
    pub fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cumulative = 0u64;
        for (i, b) in self.buckets.iter().enumerate() {
            cumulative += b.load(Ordering::Relaxed);
            match self.bounds.get(i) {
                Some(le) => {
                    let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {cumulative}");
                }
                None => {
                    let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {cumulative}");
                }
            }
        }
        let sum = self.sum_ns.load(Ordering::Relaxed) as f64 / 1e9;
        let _ = writeln!(out, "{name}_sum {sum}\n{name}_count {cumulative}");
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
        let mut text = String::new();
        h.render(&mut text, "x_seconds", "X.");
        let e = crate::prom::parse(&text).unwrap();
        assert_eq!(e.types["x_seconds"], "histogram");
        assert_eq!(e.value("x_seconds_bucket", "le", "0.000001"), Some(1.0));
        assert_eq!(e.value("x_seconds_bucket", "le", "0.000005"), Some(3.0));
        assert_eq!(e.value("x_seconds_bucket", "le", "0.1"), Some(3.0));
        assert_eq!(e.value("x_seconds_bucket", "le", "+Inf"), Some(4.0));
        assert_eq!(e.scalar("x_seconds_count"), Some(4.0));
        let sum = e.scalar("x_seconds_sum").unwrap();
        assert!((sum - 2.0000065).abs() < 1e-9, "{sum}");
    }
}
