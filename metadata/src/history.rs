//! The cluster's recent past for the dashboard's charts: every [`HistoryConfig::interval`]
//! the service takes the cluster stats it serves at `/v1/cluster/stats` and keeps a
//! summary of them ([`HistorySample`]) for [`HistoryConfig::span`], in memory (a restart
//! starts empty). `GET /v1/cluster/history?range=` answers the samples of the last
//! `range` ([`ClusterHistory`]).

use std::collections::VecDeque;
use std::fmt;
use std::str::FromStr;
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::cluster::ClusterStats;

/// Shortest sampling interval accepted.
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);
/// Most samples kept (about 100 bytes each).
pub const MAX_SAMPLES: u64 = 100_000;

/// How often the stats are sampled and for how long samples are kept; written
/// `SPAN/INTERVAL` (`1h/5s`, the default) or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryConfig {
    /// How long samples are kept (zero: no history).
    pub span: Duration,
    /// Time between two samples.
    pub interval: Duration,
}

impl Default for HistoryConfig {
    fn default() -> HistoryConfig {
        HistoryConfig {
            span: Duration::from_secs(3600),
            interval: Duration::from_secs(5),
        }
    }
}

impl HistoryConfig {
    /// No history: nothing is sampled.
    pub const OFF: HistoryConfig = HistoryConfig {
        span: Duration::ZERO,
        interval: Duration::from_secs(5),
    };

    /// Whether samples are taken at all.
    pub fn enabled(&self) -> bool {
        !self.span.is_zero()
    }

    /// How many samples the span holds.
    pub fn capacity(&self) -> usize {
        if !self.enabled() {
            return 0;
        }
        let n = self.span.as_millis() / self.interval.as_millis().max(1);
        usize::try_from(n).unwrap_or(usize::MAX).max(1)
    }

    /// Checks the limits: an interval of at least [`MIN_INTERVAL`], a span of at least
    /// one interval and at most [`MAX_SAMPLES`] of them.
    pub fn validate(&self) -> Result<(), String> {
        if !self.enabled() {
            return Ok(());
        }
        if self.interval < MIN_INTERVAL {
            return Err(format!(
                "the history interval must be at least {}",
                format_duration(MIN_INTERVAL)
            ));
        }
        if self.span < self.interval {
            return Err("the history span must be at least one interval".to_owned());
        }
        if self.capacity() as u64 > MAX_SAMPLES {
            return Err(format!(
                "{} every {} is more than {MAX_SAMPLES} samples",
                format_duration(self.span),
                format_duration(self.interval)
            ));
        }
        Ok(())
    }
}

impl FromStr for HistoryConfig {
    type Err = String;

    fn from_str(s: &str) -> Result<HistoryConfig, String> {
        let s = s.trim();
        if s == "off" || s == "0" {
            return Ok(HistoryConfig::OFF);
        }
        let (span, interval) = s.split_once('/').ok_or_else(|| {
            format!("invalid history {s:?}: expected SPAN/INTERVAL (e.g. 1h/5s) or off")
        })?;
        let config = HistoryConfig {
            span: parse_duration(span)?,
            interval: parse_duration(interval)?,
        };
        if config.span.is_zero() {
            return Err(format!(
                "invalid history {s:?}: a zero span keeps nothing (write off)"
            ));
        }
        config
            .validate()
            .map_err(|e| format!("invalid history {s:?}: {e}"))?;
        Ok(config)
    }
}

impl fmt::Display for HistoryConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.enabled() {
            return f.write_str("off");
        }
        write!(
            f,
            "{}/{}",
            format_duration(self.span),
            format_duration(self.interval)
        )
    }
}

/// Parses `500ms`, `5s`, `15m`, `1h`, `2d` (a whole number and a unit).
pub fn parse_duration(input: &str) -> Result<Duration, String> {
    let s = input.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().map_err(|_| {
        format!("invalid duration {input:?}: expected a number and a unit (e.g. 5s, 15m, 1h)")
    })?;
    let ms: u64 = match unit {
        "ms" => 1,
        "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => {
            return Err(format!(
                "invalid duration {input:?}: unknown unit {unit:?} (ms, s, m, h or d)"
            ));
        }
    };
    n.checked_mul(ms)
        .map(Duration::from_millis)
        .ok_or_else(|| format!("invalid duration {input:?}: too long"))
}

/// `d` in the largest unit that writes it whole (`1h`, `90s`, `250ms`).
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1000),
    ] {
        if ms >= size && ms.is_multiple_of(size) {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

/// One sample of the cluster: sums over the memnodes at one moment, rates over the
/// scrape interval before it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct HistorySample {
    /// When the stats were taken (Unix ms).
    pub at_ms: u64,
    /// Messages executed per second (every verb, every memnode).
    pub ops_per_s: f64,
    /// Bytes received per second by the memnodes.
    pub bytes_in_per_s: f64,
    /// Bytes sent per second by the memnodes.
    pub bytes_out_per_s: f64,
    /// NAKs per second.
    pub naks_per_s: f64,
    /// Datagrams dropped per second.
    pub dropped_per_s: f64,
    /// Free bytes (registered, not leased).
    pub free_bytes: u64,
    /// Registered bytes.
    pub capacity_bytes: u64,
    /// Memnodes with a recent heartbeat.
    pub healthy: u64,
    /// Registered memnodes.
    pub memnodes: u64,
}

impl HistorySample {
    /// The summary of `stats`.
    pub fn of(stats: &ClusterStats) -> HistorySample {
        let t = &stats.totals;
        HistorySample {
            at_ms: stats.at_ms,
            ops_per_s: t.messages_per_s,
            bytes_in_per_s: t.bytes_in_per_s,
            bytes_out_per_s: t.bytes_out_per_s,
            naks_per_s: t.naks_per_s,
            dropped_per_s: t.dropped_per_s,
            free_bytes: t.free_bytes,
            capacity_bytes: t.capacity_bytes,
            healthy: t.healthy,
            memnodes: t.memnodes,
        }
    }
}

/// `GET /v1/cluster/history`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ClusterHistory {
    /// Time between two samples (ms).
    pub interval_ms: u64,
    /// How far back the service keeps samples (ms; 0: no history is kept).
    pub span_ms: u64,
    /// The range answered (ms).
    pub range_ms: u64,
    /// The samples of the range, oldest first.
    pub samples: Vec<HistorySample>,
}

/// The samples kept, oldest first, at most [`HistoryConfig::capacity`] of them.
#[derive(Debug)]
pub struct StatsHistory {
    config: HistoryConfig,
    samples: Mutex<VecDeque<HistorySample>>,
}

impl StatsHistory {
    /// An empty history.
    pub fn new(config: HistoryConfig) -> StatsHistory {
        StatsHistory {
            config,
            samples: Mutex::new(VecDeque::with_capacity(config.capacity().min(4096))),
        }
    }

    /// Its settings.
    pub fn config(&self) -> HistoryConfig {
        self.config
    }

    /// Keeps `sample`, dropping the oldest when full.
    pub fn record(&self, sample: HistorySample) {
        let cap = self.config.capacity();
        if cap == 0 {
            return;
        }
        let mut q = self.samples.lock().unwrap_or_else(|p| p.into_inner());
        while q.len() >= cap {
            q.pop_front();
        }
        q.push_back(sample);
    }

    /// The samples taken in the `range` before `now_ms` (all of them without a range),
    /// or why the range is refused (longer than the span kept, or zero).
    pub fn query(&self, range: Option<Duration>, now_ms: u64) -> Result<ClusterHistory, String> {
        let span = self.config.span;
        let range = match range {
            None => span,
            Some(r) if r.is_zero() => return Err("the range must be longer than 0".to_owned()),
            Some(r) if r > span => {
                return Err(if self.config.enabled() {
                    format!(
                        "range {} is longer than the history kept ({}; metadata --stats-history)",
                        format_duration(r),
                        format_duration(span)
                    )
                } else {
                    "no history is kept (metadata --stats-history off)".to_owned()
                });
            }
            Some(r) => r,
        };
        let since = now_ms.saturating_sub(range.as_millis() as u64);
        let q = self.samples.lock().unwrap_or_else(|p| p.into_inner());
        Ok(ClusterHistory {
            interval_ms: self.config.interval.as_millis() as u64,
            span_ms: span.as_millis() as u64,
            range_ms: range.as_millis() as u64,
            samples: q.iter().filter(|s| s.at_ms >= since).copied().collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at_ms: u64) -> HistorySample {
        HistorySample {
            at_ms,
            ops_per_s: at_ms as f64,
            ..HistorySample::default()
        }
    }

    #[test]
    fn configs_parse_and_print() {
        let c: HistoryConfig = "1h/5s".parse().unwrap();
        assert_eq!(c, HistoryConfig::default());
        assert_eq!(c.capacity(), 720);
        assert_eq!(c.to_string(), "1h/5s");
        let c: HistoryConfig = "15m/1s".parse().unwrap();
        assert_eq!(c.capacity(), 900);
        assert_eq!("off".parse::<HistoryConfig>().unwrap(), HistoryConfig::OFF);
        assert_eq!(HistoryConfig::OFF.capacity(), 0);
        assert_eq!(HistoryConfig::OFF.to_string(), "off");
    }

    #[test]
    fn bad_configs_say_why() {
        for (input, why) in [
            ("1h", "SPAN/INTERVAL"),
            ("1h/500ms", "at least 1s"),
            ("5s/1m", "at least one interval"),
            ("30d/1s", "more than 100000 samples"),
            ("1x/5s", "unknown unit"),
            ("h/5s", "expected a number"),
            ("0s/5s", "zero span"),
            ("99999999999999999d/5s", "too long"),
        ] {
            let e = input.parse::<HistoryConfig>().unwrap_err();
            assert!(e.contains(why), "{input}: {e}");
        }
    }

    #[test]
    fn the_oldest_samples_go_first_when_full() {
        let h = StatsHistory::new("10s/1s".parse().unwrap());
        for t in 0..25 {
            h.record(sample(t * 1000));
        }
        let all = h.query(None, 24_000).unwrap();
        assert_eq!(all.samples.len(), 10);
        assert_eq!(all.samples[0].at_ms, 15_000);
        assert_eq!(all.samples[9].at_ms, 24_000);
        assert_eq!(
            (all.interval_ms, all.span_ms, all.range_ms),
            (1000, 10_000, 10_000)
        );
    }

    #[test]
    fn a_range_selects_the_recent_samples_and_may_not_exceed_the_span() {
        let h = StatsHistory::new("1h/5s".parse().unwrap());
        for t in 0..100 {
            h.record(sample(t * 5000));
        }
        let now = 99 * 5000;
        let r = h.query(Some(Duration::from_secs(60)), now).unwrap();
        assert_eq!(r.samples.len(), 13, "{r:?}");
        assert_eq!(r.samples.last().unwrap().at_ms, now);
        assert_eq!(r.range_ms, 60_000);
        let e = h.query(Some(Duration::from_secs(7200)), now).unwrap_err();
        assert!(e.contains("longer than the history kept (1h"), "{e}");
        assert!(h.query(Some(Duration::ZERO), now).is_err());
    }

    #[test]
    fn without_history_nothing_is_kept() {
        let h = StatsHistory::new(HistoryConfig::OFF);
        h.record(sample(1));
        assert!(h.query(None, 1).unwrap().samples.is_empty());
        let e = h.query(Some(Duration::from_secs(60)), 1).unwrap_err();
        assert!(e.contains("no history is kept"), "{e}");
    }
}
