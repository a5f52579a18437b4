//! The cluster view behind the dashboard: `GET /v1/cluster/stats` scrapes the admin
//! `/metrics` of every registered memnode (and of the accelerator, with `--accelerator`)
//! server-side and turns counter deltas between two scrapes into rates.
//!
//! Scrapes run in parallel with short timeouts (a dead memnode shows as `up: false` with
//! its error, it does not hold the answer up), and answers are cached for
//! [`MIN_INTERVAL`] so that several open dashboards do not multiply the scrapes.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use dmkv_api::HttpClient;
use dmkv_api::http::Timeouts;
use telemetry::prom::Exposition;

use crate::api::MemnodeInfo;
use crate::metrics::Latency;
pub use dmkv_api::cluster::{AcceleratorStats, ClusterStats, MemnodeStats, MetadataStats, Totals};

/// Answers younger than this are served again instead of scraping.
pub const MIN_INTERVAL: Duration = Duration::from_millis(400);
/// Connect timeout of a scrape.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
/// Read timeout of a scrape.
const READ_TIMEOUT: Duration = Duration::from_millis(1500);
/// Largest `/metrics` answer read.
const MAX_SCRAPE: u64 = 4 << 20;

/// Counter values of one target at one moment.
#[derive(Debug, Clone, Default)]
struct Raw {
    at: Option<Instant>,
    values: BTreeMap<String, f64>,
}

/// The previous scrape of every target, and the last answer.
#[derive(Debug, Default)]
struct State {
    previous: BTreeMap<String, Raw>,
    metadata: Option<(Instant, u64, Latency)>,
    last: Option<(Instant, ClusterStats)>,
}

/// What [`ClusterView::stats`] needs from the catalog and the request counters.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    /// Registered memnodes.
    pub memnodes: Vec<MemnodeInfo>,
    /// Every request latency so far, requests answered, 5xx answers.
    pub requests: (Latency, u64, u64),
    /// Active leases.
    pub leases_active: u64,
    /// Tables.
    pub tables: u64,
    /// Seconds since start.
    pub uptime_seconds: u64,
}

/// Scrapes and rates, shared by the handlers.
#[derive(Debug, Default)]
pub struct ClusterView {
    accelerator: Option<String>,
    state: Mutex<State>,
}

impl ClusterView {
    /// A view that also scrapes the accelerator at `accelerator` (an admin base URL).
    pub fn new(accelerator: Option<String>) -> ClusterView {
        ClusterView {
            accelerator: accelerator.filter(|u| !u.trim().is_empty()),
            state: Mutex::default(),
        }
    }

    /// The accelerator's admin URL, if configured.
    pub fn accelerator(&self) -> Option<&str> {
        self.accelerator.as_deref()
    }

    /// Whether an answer computed now would be served from the cache.
    pub fn cached(&self) -> Option<ClusterStats> {
        let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.last
            .as_ref()
            .filter(|(t, _)| t.elapsed() < MIN_INTERVAL)
            .map(|(_, s)| s.clone())
    }

    /// Scrapes every target (blocking, in parallel) and computes the answer; a recent
    /// answer is served again unless the memnodes changed since.
    pub fn stats(&self, inputs: Inputs) -> ClusterStats {
        if let Some(s) = self.cached()
            && s.memnodes
                .iter()
                .map(|m| m.id)
                .eq(inputs.memnodes.iter().map(|m| m.id))
        {
            return s;
        }
        let mut targets: Vec<(String, String)> = inputs
            .memnodes
            .iter()
            .map(|m| (format!("memnode/{}", m.id), m.admin_url.clone()))
            .collect();
        if let Some(a) = &self.accelerator {
            targets.push(("accelerator".to_owned(), a.clone()));
        }
        let scraped: Vec<Result<Exposition, String>> = std::thread::scope(|scope| {
            let handles: Vec<_> = targets
                .iter()
                .map(|(_, url)| scope.spawn(move || scrape(url)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err("scrape panicked".to_owned()))
                })
                .collect()
        });
        let now = Instant::now();
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = ClusterStats {
            at_ms: unix_ms(),
            ..ClusterStats::default()
        };
        let mut interval = None;
        for ((key, url), result) in targets.iter().zip(scraped) {
            let prev = st.previous.get(key).cloned().unwrap_or_default();
            let (raw, exp, error) = match result {
                Ok(exp) => (Some(counters(&exp)), Some(exp), None),
                Err(e) => (None, None, Some(e)),
            };
            let dt = prev.at.map(|t| now.duration_since(t).as_secs_f64());
            if let Some(dt) = dt {
                interval.get_or_insert(dt);
            }
            let rate = |name: &str| -> f64 {
                match (&raw, dt) {
                    (Some(r), Some(dt)) if dt > 0.0 => {
                        let cur = r.get(name).copied().unwrap_or(0.0);
                        let before = prev.values.get(name).copied().unwrap_or(cur);
                        ((cur - before) / dt).max(0.0)
                    }
                    _ => 0.0,
                }
            };
            let delta = |name: &str| -> f64 {
                match &raw {
                    Some(r) if dt.is_some() => {
                        let cur = r.get(name).copied().unwrap_or(0.0);
                        (cur - prev.values.get(name).copied().unwrap_or(cur)).max(0.0)
                    }
                    _ => 0.0,
                }
            };
            if key == "accelerator" {
                out.accelerator = Some(accelerator_stats(url, exp.as_ref(), error, &rate));
            } else if let Some(m) = inputs
                .memnodes
                .iter()
                .find(|m| format!("memnode/{}", m.id) == *key)
            {
                let mut stats = memnode_stats(m, exp.as_ref(), error, &rate);
                let (mean, p99) =
                    interval_latency(exp.as_ref(), "dmkv_memnode_batch_duration_seconds", &delta);
                stats.batch_latency_mean_us = mean.map(|s| s * 1e6);
                stats.batch_latency_p99_us = p99.map(|s| s * 1e6);
                out.memnodes.push(stats);
            }
            match raw {
                Some(values) => {
                    st.previous.insert(
                        key.clone(),
                        Raw {
                            at: Some(now),
                            values,
                        },
                    );
                }
                None => {
                    st.previous.remove(key);
                }
            }
        }
        st.previous
            .retain(|k, _| targets.iter().any(|(key, _)| key == k));
        // The metadata service's own requests.
        let (latency, requests, errors) = inputs.requests;
        let mut meta = MetadataStats {
            requests_total: requests,
            server_errors_total: errors,
            leases_active: inputs.leases_active,
            tables: inputs.tables,
            uptime_seconds: inputs.uptime_seconds,
            ..MetadataStats::default()
        };
        if let Some((t, n, before)) = &st.metadata {
            let dt = now.duration_since(*t).as_secs_f64();
            interval.get_or_insert(dt);
            if dt > 0.0 {
                meta.requests_per_s = requests.saturating_sub(*n) as f64 / dt;
            }
            let d = latency.since(before);
            if d.count > 0 {
                meta.latency_mean_ms = Some(d.sum / d.count as f64 * 1000.0);
                meta.latency_p99_ms = d.quantile(0.99).map(|s| s * 1000.0);
            }
        }
        st.metadata = Some((now, requests, latency));
        out.metadata = meta;
        out.interval_ms = interval.map(|s| (s * 1000.0) as u64).unwrap_or(0);
        let t = &mut out.totals;
        for m in &out.memnodes {
            t.memnodes += 1;
            t.healthy += u64::from(m.healthy);
            t.capacity_bytes += m.capacity_bytes;
            t.leased_bytes += m.leased_bytes;
            t.free_bytes += m.free_bytes;
            t.datagrams_in_per_s += m.datagrams_in_per_s;
            t.messages_per_s += m.messages_per_s.values().sum::<f64>();
            t.naks_per_s += m.naks_per_s;
            t.dropped_per_s += m.dropped_per_s;
            t.bytes_in_per_s += m.bytes_in_per_s;
            t.bytes_out_per_s += m.bytes_out_per_s;
        }
        st.last = Some((now, out.clone()));
        out
    }
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Every sample as `name` or `name:label=value,...` → value.
fn counters(exp: &Exposition) -> BTreeMap<String, f64> {
    exp.samples
        .iter()
        .map(|s| {
            let mut key = s.name.clone();
            for (i, (k, v)) in s.labels.iter().enumerate() {
                key.push(if i == 0 { ':' } else { ',' });
                key.push_str(k);
                key.push('=');
                key.push_str(v);
            }
            (key, s.value)
        })
        .collect()
}

fn by_label(exp: Option<&Exposition>, name: &str, label: &str) -> BTreeMap<String, u64> {
    exp.map(|e| {
        e.get(name)
            .filter_map(|s| Some((s.label(label)?.to_owned(), s.value as u64)))
            .collect()
    })
    .unwrap_or_default()
}

fn scalar(exp: Option<&Exposition>, name: &str) -> u64 {
    exp.and_then(|e| e.scalar(name)).unwrap_or(0.0) as u64
}

/// Mean and 99th percentile (seconds) of histogram `name` over an interval, from the
/// growth (`delta`) of its `_sum`, `_count` and cumulative `_bucket` samples; the
/// percentile is the upper bound of the bucket it falls in (the largest finite bound
/// when it falls above them all).
fn interval_latency(
    exp: Option<&Exposition>,
    name: &str,
    delta: &dyn Fn(&str) -> f64,
) -> (Option<f64>, Option<f64>) {
    let count = delta(&format!("{name}_count"));
    let Some(exp) = exp.filter(|_| count > 0.0) else {
        return (None, None);
    };
    let mean = delta(&format!("{name}_sum")) / count;
    let mut buckets: Vec<(f64, f64)> = exp
        .get(&format!("{name}_bucket"))
        .filter_map(|s| {
            let le = s.label("le")?;
            let bound = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((bound, delta(&format!("{name}_bucket:le={le}"))))
        })
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    let largest = buckets
        .iter()
        .map(|b| b.0)
        .filter(|b| b.is_finite())
        .fold(None, |m: Option<f64>, b| Some(m.map_or(b, |m| m.max(b))));
    let p99 = buckets
        .iter()
        .find(|(_, n)| *n >= 0.99 * count)
        .and_then(|(b, _)| if b.is_finite() { Some(*b) } else { largest });
    (Some(mean), p99)
}

fn memnode_stats(
    m: &MemnodeInfo,
    exp: Option<&Exposition>,
    error: Option<String>,
    rate: &dyn Fn(&str) -> f64,
) -> MemnodeStats {
    let messages_total = by_label(exp, "dmkv_memnode_messages_total", "verb");
    let messages_per_s = messages_total
        .keys()
        .map(|v| {
            (
                v.clone(),
                rate(&format!("dmkv_memnode_messages_total:verb={v}")),
            )
        })
        .collect();
    let naks_total = by_label(exp, "dmkv_memnode_naks_total", "reason");
    let dropped_total = by_label(exp, "dmkv_memnode_datagrams_dropped_total", "reason");
    let sum_rate = |name: &str, keys: &BTreeMap<String, u64>| -> f64 {
        keys.keys()
            .map(|r| rate(&format!("{name}:reason={r}")))
            .sum()
    };
    MemnodeStats {
        id: m.id,
        name: m.name.clone(),
        admin_url: m.admin_url.clone(),
        data_addr: m.data_addr.clone(),
        healthy: m.healthy,
        last_heartbeat_age_ms: m.last_heartbeat_age_ms,
        capacity_bytes: m.capacity,
        leased_bytes: m.leased_bytes,
        free_bytes: m.free_bytes,
        up: exp.is_some(),
        error,
        qps: scalar(exp, "dmkv_memnode_queue_pairs"),
        datagrams_in_total: scalar(exp, "dmkv_memnode_datagrams_received_total"),
        datagrams_out_total: scalar(exp, "dmkv_memnode_datagrams_sent_total"),
        datagrams_in_per_s: rate("dmkv_memnode_datagrams_received_total"),
        datagrams_out_per_s: rate("dmkv_memnode_datagrams_sent_total"),
        messages_total,
        messages_per_s,
        naks_per_s: sum_rate("dmkv_memnode_naks_total", &naks_total),
        naks_total,
        dropped_per_s: sum_rate("dmkv_memnode_datagrams_dropped_total", &dropped_total),
        dropped_total,
        retransmissions_total: scalar(exp, "dmkv_memnode_retransmitted_requests_total"),
        retransmissions_per_s: rate("dmkv_memnode_retransmitted_requests_total"),
        batch_latency_mean_us: None,
        batch_latency_p99_us: None,
        bytes_in_per_s: rate(MEMNODE_BYTES_IN),
        bytes_out_per_s: rate(MEMNODE_BYTES_OUT),
    }
}

fn accelerator_stats(
    url: &str,
    exp: Option<&Exposition>,
    error: Option<String>,
    rate: &dyn Fn(&str) -> f64,
) -> AcceleratorStats {
    let mut counters = BTreeMap::new();
    let mut counters_per_s = BTreeMap::new();
    if let Some(e) = exp {
        for s in e.get("dmkv_switch_packets_total") {
            let (Some(f), Some(c)) = (s.label("function"), s.label("counter")) else {
                continue;
            };
            let key = format!("{f}.{c}");
            counters.insert(key.clone(), s.value as u64);
            counters_per_s.insert(
                key,
                rate(&format!(
                    "dmkv_switch_packets_total:function={f},counter={c}"
                )),
            );
        }
    }
    AcceleratorStats {
        url: url.to_owned(),
        up: exp.is_some(),
        error,
        routes: scalar(exp, "dmkv_switch_routes"),
        datagrams_in_total: scalar(exp, "dmkv_switch_datagrams_received_total"),
        datagrams_in_per_s: rate("dmkv_switch_datagrams_received_total"),
        datagrams_out_per_s: rate("dmkv_switch_datagrams_sent_total"),
        steering_hits_total: counters.get("forward.forwarded").copied().unwrap_or(0),
        steering_misses_total: counters.get("forward.missed").copied().unwrap_or(0),
        counters,
        counters_per_s,
        enabled_functions: enabled_functions(exp),
    }
}

/// Payload bytes a memnode received.
const MEMNODE_BYTES_IN: &str = "dmkv_memnode_received_bytes_total";
/// Payload bytes a memnode sent.
const MEMNODE_BYTES_OUT: &str = "dmkv_memnode_sent_bytes_total";
/// The switch's mode register, one gauge per function (1 = enabled).
const SWITCH_MODE: &str = "dmkv_switch_function_enabled";

/// The functions whose mode gauge is 1, in the order the switch lists them.
fn enabled_functions(exp: Option<&Exposition>) -> Vec<String> {
    exp.map(|e| {
        e.get(SWITCH_MODE)
            .filter(|s| s.value == 1.0)
            .filter_map(|s| s.label("function").map(str::to_owned))
            .collect()
    })
    .unwrap_or_default()
}

/// `GET {base}/metrics` with the scrape's short timeouts, parsed strictly.
pub fn scrape(base: &str) -> Result<Exposition, String> {
    let client = HttpClient::new(base)
        .map_err(|e| e.to_string())?
        .with_timeouts(Timeouts {
            connect: CONNECT_TIMEOUT,
            io: READ_TIMEOUT,
        });
    let r = client
        .request("GET", "/metrics", None)
        .map_err(|e| e.to_string())?;
    if r.status != 200 {
        return Err(format!("GET /metrics answered {}", r.status));
    }
    if r.body.len() as u64 > MAX_SCRAPE {
        return Err(format!(
            "GET /metrics answered more than {MAX_SCRAPE} bytes"
        ));
    }
    let text = String::from_utf8(r.body).map_err(|_| "answer is not UTF-8".to_owned())?;
    telemetry::prom::parse(&text).map_err(|e| format!("bad exposition: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_latency_comes_from_the_growth_of_a_histogram() {
        let text = |b1: u64, b2: u64, inf: u64, sum: f64| {
            format!(
                "# HELP h H.\n# TYPE h histogram\nh_bucket{{le=\"0.00001\"}} {b1}\n\
                 h_bucket{{le=\"0.0001\"}} {b2}\nh_bucket{{le=\"+Inf\"}} {inf}\nh_sum {sum}\nh_count {inf}\n"
            )
        };
        let before = counters(&telemetry::prom::parse(&text(10, 10, 10, 0.00005)).unwrap());
        // 100 more: 98 under 10 µs, 2 under 100 µs, summing to 1 ms.
        let now = telemetry::prom::parse(&text(108, 110, 110, 0.00105)).unwrap();
        let cur = counters(&now);
        let delta = |name: &str| cur[name] - before[name];
        let (mean, p99) = interval_latency(Some(&now), "h", &delta);
        assert!((mean.unwrap() - 1e-5).abs() < 1e-12, "{mean:?}");
        assert_eq!(p99, Some(0.0001));
        // Above every bound: the largest finite one.
        let later = telemetry::prom::parse(&text(108, 110, 210, 1.0)).unwrap();
        let cur = counters(&later);
        let delta = |name: &str| cur[name] - counters(&now)[name];
        assert_eq!(interval_latency(Some(&later), "h", &delta).1, Some(0.0001));
        // Nothing happened: nothing to say.
        let none = |_: &str| 0.0;
        assert_eq!(interval_latency(Some(&later), "h", &none), (None, None));
    }

    #[test]
    fn enabled_functions_are_the_mode_gauges_set_to_one() {
        let e = telemetry::prom::parse(
            "# HELP dmkv_switch_function_enabled M.\n# TYPE dmkv_switch_function_enabled gauge\n\
             dmkv_switch_function_enabled{function=\"write_steer\"} 1\n\
             dmkv_switch_function_enabled{function=\"read_steer\"} 0\n\
             dmkv_switch_function_enabled{function=\"opt_latch\"} 1\n",
        )
        .unwrap();
        assert_eq!(enabled_functions(Some(&e)), ["write_steer", "opt_latch"]);
        assert!(enabled_functions(None).is_empty());
    }

    #[test]
    fn counter_keys_carry_labels() {
        let e = telemetry::prom::parse(
            "# HELP a_total A.\n# TYPE a_total counter\na_total{x=\"1\",y=\"2\"} 3\na_total 4\n",
        )
        .unwrap();
        let c = counters(&e);
        assert_eq!(c.get("a_total:x=1,y=2"), Some(&3.0));
        assert_eq!(c.get("a_total"), Some(&4.0));
    }

    #[test]
    fn unreachable_targets_are_reported_not_waited_for() {
        let started = Instant::now();
        let e = scrape("http://127.0.0.1:1").unwrap_err();
        assert!(e.contains("connect"), "{e}");
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}
