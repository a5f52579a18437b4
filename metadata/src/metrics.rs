//! Request counters and the Prometheus text exposition of the service's state.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::catalog::Stats;

/// Counters kept by the HTTP layer.
#[derive(Debug, Default)]
pub struct RequestMetrics {
    requests: Mutex<BTreeMap<(String, String, u16), u64>>,
    reclaimed: AtomicU64,
    reclaimed_bytes: AtomicU64,
}

impl RequestMetrics {
    /// Counts one answered request. `route` is the route template (`/v1/leases/{id}`),
    /// or `unmatched`.
    pub fn on_request(&self, method: &str, route: &str, status: u16) {
        let mut m = self.requests.lock().unwrap_or_else(|p| p.into_inner());
        *m.entry((route.to_owned(), method.to_owned(), status))
            .or_default() += 1;
    }

    /// Counts leases whose memory was returned after expiry.
    pub fn on_reclaimed(&self, leases: u64, bytes: u64) {
        self.reclaimed.fetch_add(leases, Ordering::Relaxed);
        self.reclaimed_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Leases reclaimed so far.
    pub fn reclaimed(&self) -> u64 {
        self.reclaimed.load(Ordering::Relaxed)
    }

    /// Renders everything.
    pub fn render(&self, stats: &Stats, uptime_seconds: u64) -> String {
        let mut out = String::new();
        let healthy = stats.memnodes.iter().filter(|m| m.2).count();
        family(
            &mut out,
            "dmkv_metadata_memnodes",
            "gauge",
            "Registered memnodes by health.",
        );
        sample(
            &mut out,
            "dmkv_metadata_memnodes",
            &[("health", "healthy")],
            healthy as u64,
        );
        sample(
            &mut out,
            "dmkv_metadata_memnodes",
            &[("health", "unhealthy")],
            (stats.memnodes.len() - healthy) as u64,
        );
        for (name, help, pick) in [
            (
                "dmkv_metadata_memnode_capacity_bytes",
                "Registered memory of a memnode.",
                3usize,
            ),
            (
                "dmkv_metadata_memnode_leased_bytes",
                "Bytes of a memnode under lease (including expired leases in their grace period).",
                4,
            ),
            (
                "dmkv_metadata_memnode_free_bytes",
                "Bytes of a memnode not under lease.",
                5,
            ),
        ] {
            family(&mut out, name, "gauge", help);
            for m in &stats.memnodes {
                let id = m.0.to_string();
                let v = match pick {
                    3 => m.3,
                    4 => m.4,
                    _ => m.5,
                };
                sample(&mut out, name, &[("memnode", &id), ("name", &m.1)], v);
            }
        }
        family(
            &mut out,
            "dmkv_metadata_leases",
            "gauge",
            "Leases by state.",
        );
        sample(
            &mut out,
            "dmkv_metadata_leases",
            &[("state", "active")],
            stats.leases_active as u64,
        );
        sample(
            &mut out,
            "dmkv_metadata_leases",
            &[("state", "expired")],
            stats.leases_expired as u64,
        );
        family(
            &mut out,
            "dmkv_metadata_leases_reclaimed_total",
            "counter",
            "Expired leases whose memory was returned after the grace period.",
        );
        sample(
            &mut out,
            "dmkv_metadata_leases_reclaimed_total",
            &[],
            self.reclaimed(),
        );
        family(
            &mut out,
            "dmkv_metadata_reclaimed_bytes_total",
            "counter",
            "Bytes returned by reclaimed leases.",
        );
        sample(
            &mut out,
            "dmkv_metadata_reclaimed_bytes_total",
            &[],
            self.reclaimed_bytes.load(Ordering::Relaxed),
        );
        family(
            &mut out,
            "dmkv_metadata_tables",
            "gauge",
            "Tables by index.",
        );
        for (index, n) in &stats.tables {
            sample(
                &mut out,
                "dmkv_metadata_tables",
                &[("index", index)],
                *n as u64,
            );
        }
        family(
            &mut out,
            "dmkv_metadata_requests_total",
            "counter",
            "HTTP requests answered, by route template, method and status.",
        );
        let reqs = self.requests.lock().unwrap_or_else(|p| p.into_inner());
        for ((route, method, status), n) in reqs.iter() {
            sample(
                &mut out,
                "dmkv_metadata_requests_total",
                &[
                    ("route", route),
                    ("method", method),
                    ("status", &status.to_string()),
                ],
                *n,
            );
        }
        family(
            &mut out,
            "dmkv_metadata_uptime_seconds",
            "gauge",
            "Seconds since start.",
        );
        sample(
            &mut out,
            "dmkv_metadata_uptime_seconds",
            &[],
            uptime_seconds,
        );
        out
    }
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn sample(out: &mut String, name: &str, labels: &[(&str, &str)], value: u64) {
    if labels.is_empty() {
        let _ = writeln!(out, "{name} {value}");
        return;
    }
    let labels: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect();
    let _ = writeln!(out, "{name}{{{}}} {value}", labels.join(","));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_labels_escaped() {
        let m = RequestMetrics::default();
        m.on_request("GET", "/v1/tables", 200);
        m.on_request("GET", "/v1/tables", 200);
        let stats = Stats {
            memnodes: vec![(1, "a\"b".into(), true, 10, 4, 6)],
            ..Stats::default()
        };
        let text = m.render(&stats, 5);
        assert!(text.contains(
            "dmkv_metadata_requests_total{route=\"/v1/tables\",method=\"GET\",status=\"200\"} 2"
        ));
        assert!(text.contains("dmkv_metadata_memnode_free_bytes{memnode=\"1\",name=\"a\\\"b\"} 6"));
        assert!(text.contains("dmkv_metadata_memnodes{health=\"healthy\"} 1"));
    }
}
