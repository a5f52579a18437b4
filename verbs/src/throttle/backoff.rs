//! Truncated exponential backoff with jitter and a dynamic limit (SMART
//! §4.3).
//!
//! When an operation has to be retried (typically an RDMA CAS that lost a
//! race), the retry numbered `i` (0 for the first retry) waits
//!
//! ```text
//! t = min(t0 · 2^i, t_max) + uniform[0, t0)
//! ```
//!
//! The doubling spreads out competing retries, the truncation at `t_max`
//! bounds the added latency, and the jitter breaks ties between threads
//! that collided at the same moment.
//!
//! # The backoff unit
//!
//! SMART uses `t0` = 4096 CPU cycles, about one RDMA round trip on its
//! hardware. Our default of 2 µs is about one round trip of the soft-RoCE
//! transport on one host, and the default ceiling is `t_M = 2^10 · t0`.
//!
//! # The dynamic limit
//!
//! With `dynamic_limit` on, `t_max` starts at `t0` and moves between `t0`
//! and `t_M`, driven by the retry rate γ measured over windows of `window`
//! (1 ms): when a window closes with γ > γ_H (0.5) `t_max` doubles, with
//! γ < γ_L (0.1) it halves, otherwise it stays. Under heavy contention it
//! thus climbs to `t_M`, and with rare conflicts it sinks to `t0`. With
//! `dynamic_limit` off, `t_max` is fixed at `t_M` (plain truncated
//! backoff).
//!
//! [`Backoff::record`] applies that rule on its own. The combined
//! controller [`ConflictAvoidance`](super::ConflictAvoidance) instead measures γ itself and
//! moves the limit with [`Backoff::raise_limit`] and
//! [`Backoff::lower_limit`] only when its concurrency depth is at a bound.

use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::retry_rate::RetryRate;

/// Configuration of a [`Backoff`].
#[derive(Clone, Debug, PartialEq)]
pub struct BackoffConfig {
    /// Whether retries are delayed at all. When `false`,
    /// [`Backoff::delay`] is always zero, for ablation runs.
    pub enabled: bool,
    /// The backoff unit `t0` (also the jitter range and the lower bound of
    /// `t_max`).
    pub t0: Duration,
    /// The ceiling `t_M` of `t_max`. Raised to `t0` if smaller.
    pub t_max_limit: Duration,
    /// Whether `t_max` follows the retry rate (otherwise it is `t_M`).
    pub dynamic_limit: bool,
    /// High-water mark γ_H: a window with a larger retry rate raises the
    /// limit.
    pub gamma_high: f64,
    /// Low-water mark γ_L: a window with a smaller retry rate lowers the
    /// limit.
    pub gamma_low: f64,
    /// Length of a retry-rate window. Zero is clamped to
    /// [`MIN_WINDOW`](super::MIN_WINDOW).
    pub window: Duration,
}

/// Default backoff unit: about one soft-RoCE round trip on one host.
pub const DEFAULT_T0: Duration = Duration::from_micros(2);

impl Default for BackoffConfig {
    /// Enabled, `t0` = 2 µs, `t_M` = 1024 · `t0`, dynamic limit with
    /// γ_H = 0.5, γ_L = 0.1 over 1 ms windows.
    fn default() -> Self {
        Self {
            enabled: true,
            t0: DEFAULT_T0,
            t_max_limit: DEFAULT_T0 * 1024,
            dynamic_limit: true,
            gamma_high: 0.5,
            gamma_low: 0.1,
            window: Duration::from_millis(1),
        }
    }
}

impl BackoffConfig {
    /// Backoff switched off: retries are issued without delay.
    pub fn disabled() -> Self {
        Self {
            enabled: false,
            ..Self::default()
        }
    }

    /// Backoff on with a fixed limit `t_max = t_M` (no adaptation).
    pub fn static_limit() -> Self {
        Self {
            dynamic_limit: false,
            ..Self::default()
        }
    }
}

/// How a retry-rate window moved the backoff limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitChange {
    /// `t_max` did not move (γ between the marks, already at a bound, or
    /// the limit is not dynamic).
    Unchanged,
    /// `t_max` doubled.
    Raised,
    /// `t_max` halved.
    Lowered,
}

/// Counters kept by a [`Backoff`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BackoffStats {
    /// Delays handed out by [`Backoff::delay`] (including zero ones when
    /// disabled).
    pub delays: u64,
    /// Operations recorded with [`Backoff::record`].
    pub ops: u64,
    /// Of those, operations that needed a retry.
    pub retried_ops: u64,
    /// Retry-rate windows closed.
    pub windows: u64,
    /// Times `t_max` doubled.
    pub raises: u64,
    /// Times `t_max` halved.
    pub lowers: u64,
}

/// Per-thread truncated exponential backoff (see the [module docs](self)).
#[derive(Clone, Debug)]
pub struct Backoff {
    enabled: bool,
    dynamic: bool,
    t0: Duration,
    t_m: Duration,
    gamma_high: f64,
    gamma_low: f64,
    t_max: Duration,
    rng: SmallRng,
    rate: RetryRate,
    stats: BackoffStats,
}

impl Backoff {
    /// Creates a backoff whose jitter comes from a [`SmallRng`] seeded with
    /// `rng_seed`; equal seeds give equal delay sequences.
    pub fn new(config: BackoffConfig, rng_seed: u64) -> Self {
        let t_m = config.t_max_limit.max(config.t0);
        let t_max = if config.dynamic_limit { config.t0 } else { t_m };
        Self {
            enabled: config.enabled,
            dynamic: config.dynamic_limit,
            t0: config.t0,
            t_m,
            gamma_high: config.gamma_high,
            gamma_low: config.gamma_low,
            t_max,
            rng: SmallRng::seed_from_u64(rng_seed),
            rate: RetryRate::new(config.window),
            stats: BackoffStats::default(),
        }
    }

    /// The deterministic part of the delay before retry `attempt` (0 = the
    /// first retry): `min(t0 · 2^attempt, t_max)`, computed without
    /// overflow for any `attempt`.
    pub fn base_delay(&self, attempt: u32) -> Duration {
        if !self.enabled {
            return Duration::ZERO;
        }
        let limit = self.t_max.as_nanos();
        let exp = if attempt < 128 {
            self.t0.as_nanos().checked_mul(1u128 << attempt)
        } else {
            None
        };
        match exp {
            Some(ns) if ns < limit => nanos_to_duration(ns),
            _ => self.t_max,
        }
    }

    /// The delay before retry `attempt` (0 = the first retry):
    /// `min(t0 · 2^attempt, t_max) + uniform[0, t0)`. Zero when disabled.
    pub fn delay(&mut self, attempt: u32) -> Duration {
        self.stats.delays = self.stats.delays.saturating_add(1);
        if !self.enabled {
            return Duration::ZERO;
        }
        let base = self.base_delay(attempt);
        let t0_ns = u64::try_from(self.t0.as_nanos()).unwrap_or(u64::MAX);
        let jitter = if t0_ns == 0 {
            0
        } else {
            self.rng.random_range(0..t0_ns)
        };
        base.saturating_add(Duration::from_nanos(jitter))
    }

    /// Records one finished operation at `now`: whether it needed at least
    /// one retry. When this closes a retry-rate window and the limit is
    /// dynamic, `t_max` is doubled or halved by the γ rule. Returns the
    /// closed window's γ, if one closed.
    pub fn record(&mut self, retried: bool, now: Instant) -> Option<f64> {
        self.stats.ops = self.stats.ops.saturating_add(1);
        if retried {
            self.stats.retried_ops = self.stats.retried_ops.saturating_add(1);
        }
        let gamma = self.rate.record(retried, now)?;
        self.stats.windows = self.stats.windows.saturating_add(1);
        self.apply_retry_rate(gamma);
        Some(gamma)
    }

    /// Applies the γ rule once: doubles `t_max` if `gamma > γ_H`, halves it
    /// if `gamma < γ_L`, within `[t0, t_M]`. Does nothing unless the backoff
    /// is enabled with a dynamic limit. NaN changes nothing.
    pub fn apply_retry_rate(&mut self, gamma: f64) -> LimitChange {
        match self.classify(gamma) {
            Some(true) if self.raise_limit() => LimitChange::Raised,
            Some(false) if self.lower_limit() => LimitChange::Lowered,
            _ => LimitChange::Unchanged,
        }
    }

    /// `Some(true)` above γ_H, `Some(false)` below γ_L, `None` in between.
    pub(crate) fn classify(&self, gamma: f64) -> Option<bool> {
        if gamma > self.gamma_high {
            Some(true)
        } else if gamma < self.gamma_low {
            Some(false)
        } else {
            None
        }
    }

    /// Doubles `t_max`, capped at `t_M`. Returns whether it moved; never
    /// moves unless the backoff is enabled with a dynamic limit.
    pub fn raise_limit(&mut self) -> bool {
        if !self.enabled || !self.dynamic {
            return false;
        }
        let next = self.t_max.saturating_mul(2).min(self.t_m);
        let moved = next != self.t_max;
        if moved {
            self.t_max = next;
            self.stats.raises = self.stats.raises.saturating_add(1);
        }
        moved
    }

    /// Halves `t_max`, floored at `t0`. Returns whether it moved; never
    /// moves unless the backoff is enabled with a dynamic limit.
    pub fn lower_limit(&mut self) -> bool {
        if !self.enabled || !self.dynamic {
            return false;
        }
        let next = (self.t_max / 2).max(self.t0);
        let moved = next != self.t_max;
        if moved {
            self.t_max = next;
            self.stats.lowers = self.stats.lowers.saturating_add(1);
        }
        moved
    }

    /// The current truncation limit `t_max`.
    pub fn t_max(&self) -> Duration {
        self.t_max
    }

    /// The backoff unit `t0`.
    pub fn t0(&self) -> Duration {
        self.t0
    }

    /// The ceiling `t_M` of `t_max`.
    pub fn t_max_limit(&self) -> Duration {
        self.t_m
    }

    /// γ of the last retry-rate window closed by [`Backoff::record`] (0
    /// before any closed).
    pub fn retry_rate(&self) -> f64 {
        self.rate.last_rate()
    }

    /// Whether retries are delayed.
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// Whether `t_max` follows the retry rate.
    pub fn is_dynamic(&self) -> bool {
        self.dynamic
    }

    /// Counters since creation.
    pub fn stats(&self) -> BackoffStats {
        self.stats
    }
}

/// Converts nanoseconds known to fit a `Duration` (they came from one).
fn nanos_to_duration(ns: u128) -> Duration {
    const NANOS_PER_SEC: u128 = 1_000_000_000;
    let secs = u64::try_from(ns / NANOS_PER_SEC).unwrap_or(u64::MAX);
    // The remainder is below 10^9 and fits in u32.
    let sub = (ns % NANOS_PER_SEC) as u32;
    Duration::new(secs, sub)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Duration = DEFAULT_T0;
    const MS: Duration = Duration::from_millis(1);

    fn fixed_limit(t_m: Duration) -> BackoffConfig {
        BackoffConfig {
            t_max_limit: t_m,
            ..BackoffConfig::static_limit()
        }
    }

    /// Feeds one full window with the given retry fraction (out of 10 ops)
    /// starting at `start`; the op closing it lands at `start + window`.
    fn feed_window(b: &mut Backoff, start: Instant, retried_of_10: u32) {
        for i in 0..10u32 {
            b.record(
                i < retried_of_10,
                start + Duration::from_micros(u64::from(i)),
            );
        }
    }

    #[test]
    fn delay_lies_within_truncated_bounds() {
        let mut b = Backoff::new(fixed_limit(T0 * 64), 7);
        for attempt in 0..20u32 {
            let base = (T0 * 2u32.pow(attempt.min(20))).min(T0 * 64);
            assert_eq!(b.base_delay(attempt), base);
            for _ in 0..200 {
                let d = b.delay(attempt);
                assert!(d >= base && d < base + T0, "attempt {attempt}: {d:?}");
            }
        }
    }

    #[test]
    fn delay_grows_in_expectation_and_is_truncated() {
        let mut b = Backoff::new(fixed_limit(T0 * 32), 11);
        let mean = |b: &mut Backoff, attempt: u32| {
            (0..500).map(|_| b.delay(attempt)).sum::<Duration>() / 500
        };
        let means: Vec<Duration> = (0..10).map(|a| mean(&mut b, a)).collect();
        // Below the truncation point the mean roughly doubles per attempt.
        for w in means[..=5].windows(2) {
            assert!(w[1] > w[0] * 3 / 2, "means not growing: {means:?}");
        }
        // From attempt 5 on, t0·2^i ≥ t_max = 32 t0: all truncated, so the
        // means stay flat in [32 t0, 33 t0).
        assert_eq!(b.base_delay(5), T0 * 32);
        assert_eq!(b.base_delay(9), T0 * 32);
        for m in &means[5..] {
            assert!(*m >= T0 * 32 && *m < T0 * 33, "means: {means:?}");
        }
    }

    #[test]
    fn huge_attempts_do_not_overflow() {
        let mut b = Backoff::new(fixed_limit(Duration::MAX), 1);
        for attempt in [31, 32, 63, 64, 127, 128, 1000, u32::MAX] {
            let d = b.delay(attempt);
            assert!(d >= b.base_delay(attempt));
            assert!(b.base_delay(attempt) <= Duration::MAX);
        }
        let mut b = Backoff::new(BackoffConfig::default(), 1);
        let d = b.delay(u32::MAX);
        assert!(d >= T0 && d < T0 * 2, "dynamic limit starts at t0: {d:?}");
        let mut b = Backoff::new(BackoffConfig::static_limit(), 1);
        let d = b.delay(u32::MAX);
        assert!(d >= T0 * 1024 && d < T0 * 1025);
    }

    #[test]
    fn disabled_backoff_has_zero_delay_and_fixed_limit() {
        let t0 = Instant::now();
        let mut b = Backoff::new(BackoffConfig::disabled(), 3);
        for attempt in [0, 5, u32::MAX] {
            assert_eq!(b.delay(attempt), Duration::ZERO);
        }
        let before = b.t_max();
        for w in 0..20 {
            feed_window(&mut b, t0 + MS * w, 10);
        }
        assert_eq!(b.t_max(), before);
        assert!((b.retry_rate() - 1.0).abs() < 1e-12, "still measured");
    }

    #[test]
    fn t_max_doubles_under_contention_and_halves_when_quiet_within_bounds() {
        let t0 = Instant::now();
        let mut b = Backoff::new(BackoffConfig::default(), 5);
        assert_eq!(b.t_max(), T0);
        let mut t = t0;
        // First window has γ = 0.8 (> 0.5): it closes when the next one starts.
        feed_window(&mut b, t, 8);
        for k in 1..=12u32 {
            t += MS;
            feed_window(&mut b, t, 8);
            let expect = (T0 * 2u32.pow(k.min(10))).min(T0 * 1024);
            assert_eq!(b.t_max(), expect, "after {k} hot windows");
            assert!((b.retry_rate() - 0.8).abs() < 1e-12);
        }
        assert_eq!(b.t_max(), b.t_max_limit());
        // Between the marks nothing moves.
        t += MS;
        feed_window(&mut b, t, 3);
        t += MS;
        feed_window(&mut b, t, 3);
        assert_eq!(b.t_max(), T0 * 1024);
        // γ = 0 (< 0.1) halves it back down to t0 and no further.
        for k in 1..=12u32 {
            t += MS;
            feed_window(&mut b, t, 0);
            let expect = if k == 1 {
                T0 * 1024 // closes the γ = 0.3 window
            } else {
                (T0 * 1024 / 2u32.pow((k - 1).min(10))).max(T0)
            };
            assert_eq!(b.t_max(), expect, "after {k} quiet windows");
        }
        assert_eq!(b.t_max(), T0);
        assert_eq!(b.stats().raises, 10);
        assert_eq!(b.stats().lowers, 10);
    }

    #[test]
    fn apply_retry_rate_follows_marks_and_ignores_nan() {
        let mut b = Backoff::new(BackoffConfig::default(), 0);
        assert_eq!(b.apply_retry_rate(0.51), LimitChange::Raised);
        assert_eq!(b.apply_retry_rate(0.5), LimitChange::Unchanged);
        assert_eq!(b.apply_retry_rate(0.1), LimitChange::Unchanged);
        assert_eq!(b.apply_retry_rate(f64::NAN), LimitChange::Unchanged);
        assert_eq!(b.apply_retry_rate(0.09), LimitChange::Lowered);
        assert_eq!(b.apply_retry_rate(0.0), LimitChange::Unchanged, "at t0");
        let mut s = Backoff::new(BackoffConfig::static_limit(), 0);
        assert_eq!(s.apply_retry_rate(1.0), LimitChange::Unchanged);
        assert_eq!(s.t_max(), T0 * 1024);
    }

    #[test]
    fn seeded_runs_are_reproducible() {
        let run = |seed| {
            let mut b = Backoff::new(BackoffConfig::static_limit(), seed);
            (0..64).map(|i| b.delay(i % 12)).collect::<Vec<_>>()
        };
        assert_eq!(run(42), run(42));
        assert_ne!(run(42), run(43));
    }

    #[test]
    fn degenerate_configs_do_not_panic() {
        let t0 = Instant::now();
        let config = BackoffConfig {
            t0: Duration::ZERO,
            t_max_limit: Duration::ZERO,
            window: Duration::ZERO,
            gamma_high: f64::NAN,
            gamma_low: f64::INFINITY,
            ..BackoffConfig::default()
        };
        let mut b = Backoff::new(config, 9);
        assert_eq!(b.delay(u32::MAX), Duration::ZERO);
        for i in 0..10 {
            b.record(true, t0 + Duration::from_micros(i));
        }
        assert_eq!(b.t_max(), Duration::ZERO);
        let config = BackoffConfig {
            t0: Duration::MAX,
            t_max_limit: Duration::from_secs(1),
            ..BackoffConfig::default()
        };
        let mut b = Backoff::new(config, 9);
        assert_eq!(b.t_max_limit(), Duration::MAX, "t_M raised to t0");
        let _ = b.delay(3);
        assert!(!b.raise_limit());
    }
}
