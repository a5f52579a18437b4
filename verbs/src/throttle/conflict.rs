//! The combined conflict-avoidance controller of SMART §4.3.
//!
//! [`ConflictAvoidance`] owns one thread's [`Backoff`] and [`Admission`] and
//! drives both from a single retry-rate meter. Each finished operation is
//! reported with its number of retries; γ is the fraction of operations in a
//! window (1 ms by default) that needed at least one retry. When a window
//! closes:
//!
//! - **γ > γ_H** (contention): halve the concurrency depth `c_max`. Only if
//!   `c_max` was already at its lower bound (so it cannot shrink) double the
//!   backoff limit `t_max`, capped at `t_M`.
//! - **γ < γ_L** (calm): double `c_max`. Only if `c_max` was already at its
//!   upper bound halve `t_max`, floored at `t0`.
//! - otherwise nothing changes.
//!
//! So at most one of the two knobs moves per window, and the cheaper one
//! goes first in both directions: contention first costs the thread its
//! concurrency and only then lengthens the waits; when contention fades,
//! concurrency comes back first and only then do the waits shorten. With
//! the defaults, `c_max` starts at its upper bound and `t_max` at `t0`,
//! the calm end of both ranges.
//!
//! Switching a technique off pins its knob: with admission disabled `c_max`
//! counts as being at both bounds, so `t_max` follows γ directly (plain
//! dynamic backoff); with backoff disabled or its limit static, only `c_max`
//! adapts.

use std::time::{Duration, Instant};

use super::admission::{Admission, AdmissionConfig};
use super::backoff::{Backoff, BackoffConfig};
use super::retry_rate::RetryRate;

/// Counters and current settings of a [`ConflictAvoidance`] controller.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ConflictStats {
    /// Operations reported finished.
    pub ops: u64,
    /// Total retries over those operations.
    pub retries: u64,
    /// Operations that needed at least one retry.
    pub retried_ops: u64,
    /// Retry-rate windows closed.
    pub windows: u64,
    /// γ of the last closed window.
    pub retry_rate: f64,
    /// Current backoff limit `t_max`.
    pub t_max: Duration,
    /// Current concurrency depth `c_max` (`u32::MAX` when admission is
    /// disabled).
    pub c_max: u32,
    /// Times `c_max` was halved.
    pub c_max_shrinks: u64,
    /// Times `c_max` was doubled.
    pub c_max_expansions: u64,
    /// Times `t_max` was doubled.
    pub t_max_raises: u64,
    /// Times `t_max` was halved.
    pub t_max_lowers: u64,
    /// Times admission refused an operation.
    pub admission_deferred: u64,
}

/// What one closed window changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Adjustment {
    /// Neither knob moved.
    Unchanged,
    /// `c_max` was halved.
    DepthShrunk,
    /// `c_max` was doubled.
    DepthExpanded,
    /// `t_max` was doubled (`c_max` at its lower bound).
    LimitRaised,
    /// `t_max` was halved (`c_max` at its upper bound).
    LimitLowered,
}

/// Per-thread backoff plus concurrency-depth throttling, coupled through
/// the retry rate (see the [module docs](self)).
#[derive(Clone, Debug)]
pub struct ConflictAvoidance {
    backoff: Backoff,
    admission: Admission,
    rate: RetryRate,
    ops: u64,
    retries: u64,
    retried_ops: u64,
    last_adjustment: Adjustment,
}

impl ConflictAvoidance {
    /// Creates a controller; the backoff jitter is seeded with `seed`. The
    /// retry-rate window and the marks γ_H, γ_L come from `backoff`.
    pub fn new(backoff: BackoffConfig, admission: AdmissionConfig, seed: u64) -> Self {
        let rate = RetryRate::new(backoff.window);
        Self {
            backoff: Backoff::new(backoff, seed),
            admission: Admission::new(admission),
            rate,
            ops: 0,
            retries: 0,
            retried_ops: 0,
            last_adjustment: Adjustment::Unchanged,
        }
    }

    /// Reports an operation that finished at `now` after `retries` retries
    /// (0 = succeeded at the first attempt). If this closes a window, the
    /// knobs are adjusted and the window's γ is returned.
    ///
    /// This only feeds the statistics; call [`ConflictAvoidance::finish`]
    /// as well if the operation was admitted.
    pub fn on_operation_done(&mut self, retries: u32, now: Instant) -> Option<f64> {
        self.ops = self.ops.saturating_add(1);
        self.retries = self.retries.saturating_add(u64::from(retries));
        if retries > 0 {
            self.retried_ops = self.retried_ops.saturating_add(1);
        }
        let gamma = self.rate.record(retries > 0, now)?;
        self.adjust(gamma);
        Some(gamma)
    }

    /// Closes the open window if `now` is past its end even though no
    /// operation finished, adjusting the knobs. Returns its γ, if closed.
    pub fn poll(&mut self, now: Instant) -> Option<f64> {
        let gamma = self.rate.poll(now)?;
        self.adjust(gamma);
        Some(gamma)
    }

    fn adjust(&mut self, gamma: f64) {
        self.last_adjustment = match self.backoff.classify(gamma) {
            Some(true) => {
                if self.admission.shrink() {
                    Adjustment::DepthShrunk
                } else if self.backoff.raise_limit() {
                    Adjustment::LimitRaised
                } else {
                    Adjustment::Unchanged
                }
            }
            Some(false) => {
                if self.admission.expand() {
                    Adjustment::DepthExpanded
                } else if self.backoff.lower_limit() {
                    Adjustment::LimitLowered
                } else {
                    Adjustment::Unchanged
                }
            }
            None => Adjustment::Unchanged,
        };
    }

    /// The delay before retry `attempt` (0 = the first retry); see
    /// [`Backoff::delay`]. Zero when backoff is disabled.
    pub fn retry_delay(&mut self, attempt: u32) -> Duration {
        self.backoff.delay(attempt)
    }

    /// Starts an operation if the depth limit allows; see
    /// [`Admission::try_admit`].
    pub fn try_admit(&mut self) -> bool {
        self.admission.try_admit()
    }

    /// Ends an admitted operation; see [`Admission::finish`].
    pub fn finish(&mut self) {
        self.admission.finish();
    }

    /// The current backoff limit `t_max`.
    pub fn t_max(&self) -> Duration {
        self.backoff.t_max()
    }

    /// The current concurrency depth `c_max` (`u32::MAX` when admission is
    /// disabled).
    pub fn depth_limit(&self) -> u32 {
        self.admission.depth_limit()
    }

    /// Operations admitted and not yet finished.
    pub fn in_flight(&self) -> u32 {
        self.admission.in_flight()
    }

    /// γ of the last closed window (0 before any closed).
    pub fn retry_rate(&self) -> f64 {
        self.rate.last_rate()
    }

    /// What the last closed window changed.
    pub fn last_adjustment(&self) -> Adjustment {
        self.last_adjustment
    }

    /// The owned backoff.
    pub fn backoff(&self) -> &Backoff {
        &self.backoff
    }

    /// The owned admission controller.
    pub fn admission(&self) -> &Admission {
        &self.admission
    }

    /// Counters and current settings.
    pub fn stats(&self) -> ConflictStats {
        let b = self.backoff.stats();
        let a = self.admission.stats();
        ConflictStats {
            ops: self.ops,
            retries: self.retries,
            retried_ops: self.retried_ops,
            windows: self.rate.windows_closed(),
            retry_rate: self.rate.last_rate(),
            t_max: self.backoff.t_max(),
            c_max: self.admission.depth_limit(),
            c_max_shrinks: a.shrinks,
            c_max_expansions: a.expansions,
            t_max_raises: b.raises,
            t_max_lowers: b.lowers,
            admission_deferred: a.deferred,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);
    const T0: Duration = super::super::backoff::DEFAULT_T0;

    fn admission(max_depth: u32) -> AdmissionConfig {
        AdmissionConfig {
            enabled: true,
            max_depth,
            min_depth: 1,
        }
    }

    /// Reports ten operations in the window starting at `start`, the first
    /// `retried_of_10` of them with two retries each. The first report
    /// closes the previous window.
    fn feed_window(ca: &mut ConflictAvoidance, start: Instant, retried_of_10: u32) {
        for i in 0..10u32 {
            let retries = if i < retried_of_10 { 2 } else { 0 };
            ca.on_operation_done(retries, start + Duration::from_micros(u64::from(i)));
        }
    }

    #[test]
    fn depth_shrinks_first_and_limit_moves_only_at_depth_bounds() {
        let t0 = Instant::now();
        let mut ca = ConflictAvoidance::new(BackoffConfig::default(), admission(16), 1);
        assert_eq!((ca.depth_limit(), ca.t_max()), (16, T0));
        let mut t = t0;
        feed_window(&mut ca, t, 9);
        let mut trace = Vec::new();
        for _ in 0..16 {
            t += MS;
            feed_window(&mut ca, t, 9);
            trace.push((ca.depth_limit(), ca.t_max()));
        }
        // c_max 16 → 1 in four windows with t_max untouched, then t_max
        // doubles ten times to t_M = 1024 t0 and stays there.
        let mut expect = vec![(8, T0), (4, T0), (2, T0), (1, T0)];
        expect.extend((1..=10).map(|k| (1, T0 * 2u32.pow(k))));
        expect.extend([(1, T0 * 1024), (1, T0 * 1024)]);
        assert_eq!(trace, expect);
        assert_eq!(ca.last_adjustment(), Adjustment::Unchanged);

        // Calm: c_max grows back to 16 first, t_max unchanged, then t_max
        // halves down to t0.
        trace.clear();
        for _ in 0..16 {
            t += MS;
            feed_window(&mut ca, t, 0);
            trace.push((ca.depth_limit(), ca.t_max()));
        }
        let mut expect = vec![(1, T0 * 1024)]; // closes the last hot window
        expect.extend([
            (2, T0 * 1024),
            (4, T0 * 1024),
            (8, T0 * 1024),
            (16, T0 * 1024),
        ]);
        expect.extend((1..=10).map(|k| (16, T0 * 1024 / 2u32.pow(k))));
        expect.push((16, T0));
        assert_eq!(trace, expect);

        let s = ca.stats();
        assert_eq!((s.c_max_shrinks, s.c_max_expansions), (4, 4));
        assert_eq!((s.t_max_raises, s.t_max_lowers), (10, 10));
        assert_eq!(s.windows, 32);
        assert_eq!(s.ops, 330);
        assert_eq!(s.retried_ops, 17 * 9);
        assert_eq!(s.retries, 17 * 9 * 2);
        assert!((s.retry_rate - 0.0).abs() < 1e-12);
    }

    #[test]
    fn middle_band_changes_nothing() {
        let t0 = Instant::now();
        let mut ca = ConflictAvoidance::new(BackoffConfig::default(), admission(8), 1);
        for w in 0..5 {
            feed_window(&mut ca, t0 + MS * w, 3);
        }
        assert_eq!((ca.depth_limit(), ca.t_max()), (8, T0));
        assert!((ca.retry_rate() - 0.3).abs() < 1e-12);
    }

    #[test]
    fn admission_limits_concurrency_as_depth_shrinks() {
        let t0 = Instant::now();
        let mut ca = ConflictAvoidance::new(BackoffConfig::default(), admission(4), 1);
        for _ in 0..4 {
            assert!(ca.try_admit());
        }
        assert!(!ca.try_admit());
        feed_window(&mut ca, t0, 10);
        assert_eq!(ca.poll(t0 + MS), Some(1.0));
        assert_eq!(ca.depth_limit(), 2);
        ca.finish();
        ca.finish();
        assert!(!ca.try_admit(), "2 still running, c_max = 2");
        ca.finish();
        assert!(ca.try_admit());
        assert_eq!(ca.in_flight(), 2);
        assert_eq!(ca.stats().admission_deferred, 2);
    }

    #[test]
    fn without_admission_t_max_follows_gamma_directly() {
        let t0 = Instant::now();
        let mut ca =
            ConflictAvoidance::new(BackoffConfig::default(), AdmissionConfig::disabled(), 1);
        feed_window(&mut ca, t0, 6);
        feed_window(&mut ca, t0 + MS, 6);
        assert_eq!(ca.t_max(), T0 * 2);
        assert_eq!(ca.last_adjustment(), Adjustment::LimitRaised);
        feed_window(&mut ca, t0 + MS * 2, 0);
        assert_eq!(ca.t_max(), T0 * 4);
        feed_window(&mut ca, t0 + MS * 3, 0);
        assert_eq!(ca.t_max(), T0 * 2);
        assert_eq!(ca.depth_limit(), u32::MAX);
    }

    #[test]
    fn without_backoff_depth_still_adapts_and_delays_are_zero() {
        let t0 = Instant::now();
        let mut ca = ConflictAvoidance::new(BackoffConfig::disabled(), admission(8), 1);
        for w in 0..10 {
            feed_window(&mut ca, t0 + MS * w, 10);
        }
        assert_eq!(ca.depth_limit(), 1);
        assert_eq!(ca.stats().t_max_raises, 0);
        assert_eq!(ca.retry_delay(5), Duration::ZERO);
    }

    #[test]
    fn seeded_runs_are_reproducible() {
        let run = |seed| {
            let t0 = Instant::now();
            let mut ca = ConflictAvoidance::new(BackoffConfig::default(), admission(8), seed);
            let mut out = Vec::new();
            for w in 0..12u32 {
                feed_window(&mut ca, t0 + MS * w, 8);
                out.push((ca.depth_limit(), ca.retry_delay(w)));
            }
            out
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
    }
}
