//! Request counters and the metric families of the service's state (encoded by
//! `prometheus-client` in [`telemetry::exposition`]).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use telemetry::family::{Family, HistogramValue, Number, labels};

use crate::catalog::Stats;

/// Upper bounds (seconds) of the request latency histogram's buckets.
pub const LATENCY_BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// A latency histogram: counts per bucket (not cumulative; the last is `+Inf`), count
/// and sum.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Latency {
    /// Observations per bucket of [`LATENCY_BUCKETS`], then above the last bound.
    pub buckets: [u64; LATENCY_BUCKETS.len() + 1],
    /// Observations.
    pub count: u64,
    /// Sum of the observations in seconds.
    pub sum: f64,
}

impl Latency {
    /// Adds one observation.
    pub fn observe(&mut self, seconds: f64) {
        let i = LATENCY_BUCKETS
            .iter()
            .position(|b| seconds <= *b)
            .unwrap_or(LATENCY_BUCKETS.len());
        self.buckets[i] += 1;
        self.count += 1;
        self.sum += seconds;
    }

    /// Adds every observation of `other`.
    pub fn merge(&mut self, other: &Latency) {
        for (a, b) in self.buckets.iter_mut().zip(other.buckets) {
            *a += b;
        }
        self.count += other.count;
        self.sum += other.sum;
    }

    /// What was observed since `earlier` (a previous copy of this histogram).
    pub fn since(&self, earlier: &Latency) -> Latency {
        let mut d = self.clone();
        for (a, b) in d.buckets.iter_mut().zip(earlier.buckets) {
            *a = a.saturating_sub(b);
        }
        d.count = self.count.saturating_sub(earlier.count);
        d.sum = (self.sum - earlier.sum).max(0.0);
        d
    }

    /// The histogram's buckets (bounds of [`LATENCY_BUCKETS`], then `+Inf`), sum and
    /// count, for the exposition.
    pub fn value(&self) -> HistogramValue {
        HistogramValue {
            buckets: self
                .buckets
                .iter()
                .enumerate()
                .map(|(i, n)| (LATENCY_BUCKETS.get(i).copied().unwrap_or(f64::INFINITY), *n))
                .collect(),
            sum: self.sum,
            count: self.count,
        }
    }

    /// The `q` quantile (0..=1) as the upper bound of its bucket (the largest finite
    /// bound for the `+Inf` bucket); `None` without observations.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let rank = (q.clamp(0.0, 1.0) * self.count as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(
                    LATENCY_BUCKETS
                        .get(i)
                        .copied()
                        .unwrap_or(LATENCY_BUCKETS[LATENCY_BUCKETS.len() - 1]),
                );
            }
        }
        LATENCY_BUCKETS.last().copied()
    }
}

/// Counters kept by the HTTP layer.
#[derive(Debug, Default)]
pub struct RequestMetrics {
    requests: Mutex<BTreeMap<(String, String, u16), u64>>,
    latency: Mutex<BTreeMap<(String, String), Latency>>,
    reclaimed: AtomicU64,
    reclaimed_bytes: AtomicU64,
    adopted: AtomicU64,
    adopted_bytes: AtomicU64,
}

impl RequestMetrics {
    /// Counts one answered request. `route` is the route template (`/v1/leases/{id}`),
    /// or `unmatched`.
    pub fn on_request(&self, method: &str, route: &str, status: u16) {
        let mut m = self.requests.lock().unwrap_or_else(|p| p.into_inner());
        *m.entry((route.to_owned(), method.to_owned(), status))
            .or_default() += 1;
    }

    /// Records how long a request on `route` took (from the router's view).
    pub fn on_latency(&self, method: &str, route: &str, elapsed: Duration) {
        let mut m = self.latency.lock().unwrap_or_else(|p| p.into_inner());
        m.entry((route.to_owned(), method.to_owned()))
            .or_default()
            .observe(elapsed.as_secs_f64());
    }

    /// Every route's latency histogram merged, and the number of answers with a 5xx
    /// status (for the dashboard).
    pub fn totals(&self) -> (Latency, u64, u64) {
        let mut all = Latency::default();
        for h in self
            .latency
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
        {
            all.merge(h);
        }
        let reqs = self.requests.lock().unwrap_or_else(|p| p.into_inner());
        let total = reqs.values().sum();
        let errors = reqs
            .iter()
            .filter(|((_, _, status), _)| *status >= 500)
            .map(|(_, n)| n)
            .sum();
        (all, total, errors)
    }

    /// Counts leases whose memory was returned after expiry.
    pub fn on_reclaimed(&self, leases: u64, bytes: u64) {
        self.reclaimed.fetch_add(leases, Ordering::Relaxed);
        self.reclaimed_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Counts expired data leases their table adopted.
    pub fn on_adopted(&self, leases: u64, bytes: u64) {
        self.adopted.fetch_add(leases, Ordering::Relaxed);
        self.adopted_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Leases reclaimed so far.
    pub fn reclaimed(&self) -> u64 {
        self.reclaimed.load(Ordering::Relaxed)
    }

    /// Every metric of the service as families (encoded by `prometheus-client` in
    /// [`telemetry::exposition`]).
    pub fn families(&self, stats: &Stats, uptime_seconds: u64) -> Vec<Family> {
        let int = |n: usize| Number::Int(n as u64);
        let healthy = stats.memnodes.iter().filter(|m| m.2).count();
        let mut memnodes = vec![
            (labels(&[("health", "healthy")]), int(healthy)),
            (
                labels(&[("health", "unhealthy")]),
                int(stats.memnodes.len() - healthy),
            ),
        ];
        for (state, n) in &stats.membership.memnodes {
            memnodes.push((labels(&[("state", state)]), int(*n)));
        }
        let mut out = vec![Family::gauge(
            "dmkv_metadata_memnodes",
            "Registered memnodes by health (label health: healthy|unhealthy) and by state (label state: up|down|draining); sum over one label only",
            memnodes,
        )];
        for (name, help, pick) in [
            (
                "dmkv_metadata_memnode_capacity_bytes",
                "Registered memory of a memnode",
                3usize,
            ),
            (
                "dmkv_metadata_memnode_leased_bytes",
                "Bytes of a memnode under lease (including expired leases in their grace period)",
                4,
            ),
            (
                "dmkv_metadata_memnode_free_bytes",
                "Bytes of a memnode not under lease",
                5,
            ),
        ] {
            let series = stats
                .memnodes
                .iter()
                .map(|m| {
                    let v = match pick {
                        3 => m.3,
                        4 => m.4,
                        _ => m.5,
                    };
                    let id = m.0.to_string();
                    (labels(&[("memnode", &id), ("name", &m.1)]), Number::Int(v))
                })
                .collect();
            out.push(Family::gauge(name, help, series));
        }
        out.push(Family::gauge(
            "dmkv_metadata_leases",
            "Leases by state",
            vec![
                (labels(&[("state", "active")]), int(stats.leases_active)),
                (labels(&[("state", "expired")]), int(stats.leases_expired)),
            ],
        ));
        out.push(Family::counter_value(
            "dmkv_metadata_leases_reclaimed_total",
            "Expired leases whose memory was returned after the grace period",
            self.reclaimed(),
        ));
        out.push(Family::counter_value(
            "dmkv_metadata_reclaimed_bytes_total",
            "Bytes returned by reclaimed leases",
            self.reclaimed_bytes.load(Ordering::Relaxed),
        ));
        out.push(Family::counter_value(
            "dmkv_metadata_leases_adopted_total",
            "Expired data leases their table adopted instead of reclaiming (memory that may hold live values)",
            self.adopted.load(Ordering::Relaxed),
        ));
        out.push(Family::counter_value(
            "dmkv_metadata_adopted_bytes_total",
            "Bytes of adopted data leases",
            self.adopted_bytes.load(Ordering::Relaxed),
        ));
        let mut tables = Vec::new();
        for (index, n) in &stats.tables {
            tables.push((labels(&[("index", index)]), int(*n)));
        }
        for (state, n) in &stats.membership.tables {
            tables.push((labels(&[("state", state)]), int(*n)));
        }
        out.push(Family::gauge(
            "dmkv_metadata_tables",
            "Tables by index (label index) and by health (label state: healthy|degraded|lost); sum over one label only",
            tables,
        ));
        let requests = self
            .requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|((route, method, status), n)| {
                let status = status.to_string();
                (
                    labels(&[("route", route), ("method", method), ("status", &status)]),
                    Number::Int(*n),
                )
            })
            .collect();
        out.push(Family::counter(
            "dmkv_metadata_requests_total",
            "HTTP requests answered, by route template, method and status",
            requests,
        ));
        let latency = self
            .latency
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|((route, method), h)| {
                (labels(&[("route", route), ("method", method)]), h.value())
            })
            .collect();
        out.push(Family::histogram(
            "dmkv_metadata_request_duration_seconds",
            "Time to answer HTTP requests, by route template and method",
            latency,
        ));
        out.push(Family::gauge_value(
            "dmkv_metadata_uptime_seconds",
            "Seconds since start",
            uptime_seconds,
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_labels_escaped() {
        let m = RequestMetrics::default();
        m.on_request("GET", "/v1/tables", 200);
        m.on_request("GET", "/v1/tables", 200);
        let mut stats = Stats {
            memnodes: vec![(1, "a\"b".into(), true, 10, 4, 6)],
            ..Stats::default()
        };
        stats.membership.tables.insert("lost", 2);
        stats.membership.memnodes.insert("down", 1);
        m.on_latency("GET", "/v1/tables", std::time::Duration::from_millis(3));
        let (_, text) =
            telemetry::exposition::render("metadata", "0.1.0", m.families(&stats, 5), None)
                .unwrap();
        let e = telemetry::prom::parse(&text).unwrap_or_else(|err| panic!("{err}\n{text}"));
        assert_eq!(
            e.value(
                "dmkv_metadata_request_duration_seconds_count",
                "route",
                "/v1/tables"
            ),
            Some(1.0)
        );
        assert!(text.contains(
            "dmkv_metadata_requests_total{route=\"/v1/tables\",method=\"GET\",status=\"200\"} 2"
        ));
        assert!(text.contains("dmkv_metadata_memnode_free_bytes{memnode=\"1\",name=\"a\\\"b\"} 6"));
        assert!(text.contains("dmkv_metadata_memnodes{health=\"healthy\"} 1"));
        assert!(text.contains("dmkv_metadata_tables{state=\"lost\"} 2"));
        assert!(text.contains("dmkv_metadata_memnodes{state=\"down\"} 1"));
    }
}
