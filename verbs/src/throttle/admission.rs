//! Per-thread concurrency-depth throttling (SMART §4.3).
//!
//! A worker thread runs many tasks (coroutines) over its queue pairs. Under
//! heavy contention, more concurrent operations from the same thread mostly
//! produce more conflicting CAS retries. [`Admission`] caps the number of
//! operations a thread runs at once at `c_max`: a task calls
//! [`Admission::try_admit`] before starting an operation and
//! [`Admission::finish`] when it is done; a refused task must wait (yield)
//! until another finishes.
//!
//! `c_max` itself is moved by the combined controller
//! [`ConflictAvoidance`](super::ConflictAvoidance): [`Admission::shrink`]
//! halves it (down to `min_depth`) and [`Admission::expand`] doubles it (up
//! to `max_depth`). It starts at `max_depth`, i.e. full concurrency.
//! Lowering `c_max` below the current number of running operations does not
//! cancel them; new ones are refused until enough finish.

/// Configuration of an [`Admission`] controller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdmissionConfig {
    /// Whether the depth is limited at all. When `false` every operation is
    /// admitted (unlimited), for ablation runs.
    pub enabled: bool,
    /// Upper bound of `c_max`, and its initial value. Raised to `min_depth`
    /// if smaller.
    pub max_depth: u32,
    /// Lower bound of `c_max`. Zero is treated as 1 so a thread can always
    /// make progress.
    pub min_depth: u32,
}

impl Default for AdmissionConfig {
    /// Enabled, `c_max` between 1 (SMART's lower bound: one operation at a
    /// time under heavy contention) and 32 concurrent operations per thread.
    fn default() -> Self {
        Self {
            enabled: true,
            max_depth: 32,
            min_depth: 1,
        }
    }
}

impl AdmissionConfig {
    /// Depth throttling switched off: every operation is admitted.
    pub fn disabled() -> Self {
        Self {
            enabled: false,
            ..Self::default()
        }
    }
}

/// Counters kept by an [`Admission`] controller.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AdmissionStats {
    /// Operations admitted.
    pub admitted: u64,
    /// Times [`Admission::try_admit`] refused.
    pub deferred: u64,
    /// Times `c_max` was halved.
    pub shrinks: u64,
    /// Times `c_max` was doubled.
    pub expansions: u64,
}

/// Per-thread cap on concurrent operations (see the [module docs](self)).
#[derive(Clone, Debug)]
pub struct Admission {
    enabled: bool,
    min: u32,
    max: u32,
    limit: u32,
    in_flight: u32,
    stats: AdmissionStats,
}

impl Admission {
    /// Creates a controller with `c_max = max_depth`.
    pub fn new(config: AdmissionConfig) -> Self {
        let min = config.min_depth.max(1);
        let max = config.max_depth.max(min);
        Self {
            enabled: config.enabled,
            min,
            max,
            limit: max,
            in_flight: 0,
            stats: AdmissionStats::default(),
        }
    }

    /// Starts an operation if fewer than `c_max` are running. Always `true`
    /// when disabled. A `true` must be paired with one [`Admission::finish`].
    pub fn try_admit(&mut self) -> bool {
        if self.enabled && self.in_flight >= self.limit {
            self.stats.deferred = self.stats.deferred.saturating_add(1);
            return false;
        }
        self.in_flight = self.in_flight.saturating_add(1);
        self.stats.admitted = self.stats.admitted.saturating_add(1);
        true
    }

    /// Ends an admitted operation. Extra calls are ignored.
    pub fn finish(&mut self) {
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    /// The current cap `c_max`; `u32::MAX` when disabled (unlimited).
    pub fn depth_limit(&self) -> u32 {
        if self.enabled { self.limit } else { u32::MAX }
    }

    /// Operations admitted and not yet finished.
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// Halves `c_max`, floored at `min_depth`. Returns whether it moved
    /// (never when disabled or already at the lower bound).
    pub fn shrink(&mut self) -> bool {
        if !self.enabled {
            return false;
        }
        let next = (self.limit / 2).max(self.min);
        let moved = next != self.limit;
        if moved {
            self.limit = next;
            self.stats.shrinks = self.stats.shrinks.saturating_add(1);
        }
        moved
    }

    /// Doubles `c_max`, capped at `max_depth`. Returns whether it moved
    /// (never when disabled or already at the upper bound).
    pub fn expand(&mut self) -> bool {
        if !self.enabled {
            return false;
        }
        let next = self.limit.saturating_mul(2).min(self.max);
        let moved = next != self.limit;
        if moved {
            self.limit = next;
            self.stats.expansions = self.stats.expansions.saturating_add(1);
        }
        moved
    }

    /// Whether `c_max` cannot shrink further (always `true` when disabled:
    /// the cap is pinned).
    pub fn at_lower_bound(&self) -> bool {
        !self.enabled || self.limit <= self.min
    }

    /// Whether `c_max` cannot grow further (always `true` when disabled:
    /// the cap is pinned).
    pub fn at_upper_bound(&self) -> bool {
        !self.enabled || self.limit >= self.max
    }

    /// Lower bound of `c_max` after sanitising.
    pub fn min_depth(&self) -> u32 {
        self.min
    }

    /// Upper bound of `c_max` after sanitising.
    pub fn max_depth(&self) -> u32 {
        self.max
    }

    /// Whether the depth is limited.
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// Counters since creation.
    pub fn stats(&self) -> AdmissionStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admits_up_to_depth_limit_then_defers_until_finish() {
        let mut a = Admission::new(AdmissionConfig {
            enabled: true,
            max_depth: 3,
            min_depth: 1,
        });
        assert!(a.try_admit() && a.try_admit() && a.try_admit());
        assert!(!a.try_admit());
        assert_eq!(a.in_flight(), 3);
        a.finish();
        assert!(a.try_admit());
        assert_eq!(a.stats().admitted, 4);
        assert_eq!(a.stats().deferred, 1);
    }

    #[test]
    fn shrink_and_expand_stay_within_bounds() {
        let mut a = Admission::new(AdmissionConfig {
            enabled: true,
            max_depth: 12,
            min_depth: 2,
        });
        assert!(a.at_upper_bound());
        let mut seen = vec![a.depth_limit()];
        while a.shrink() {
            seen.push(a.depth_limit());
        }
        assert_eq!(seen, [12, 6, 3, 2]);
        assert!(a.at_lower_bound());
        while a.expand() {
            seen.push(a.depth_limit());
        }
        assert_eq!(seen, [12, 6, 3, 2, 4, 8, 12]);
        assert!(a.at_upper_bound());
    }

    #[test]
    fn shrinking_below_running_ops_refuses_new_ones() {
        let mut a = Admission::new(AdmissionConfig::default());
        for _ in 0..8 {
            assert!(a.try_admit());
        }
        while a.shrink() {}
        assert_eq!(a.depth_limit(), 1);
        assert!(!a.try_admit());
        for _ in 0..7 {
            a.finish();
        }
        assert!(!a.try_admit());
        a.finish();
        assert!(a.try_admit());
    }

    #[test]
    fn disabled_is_unlimited_and_pinned() {
        let mut a = Admission::new(AdmissionConfig::disabled());
        for _ in 0..100_000 {
            assert!(a.try_admit());
        }
        assert_eq!(a.depth_limit(), u32::MAX);
        assert!(!a.shrink() && !a.expand());
        assert!(a.at_lower_bound() && a.at_upper_bound());
    }

    #[test]
    fn degenerate_bounds_are_sanitised() {
        let mut a = Admission::new(AdmissionConfig {
            enabled: true,
            max_depth: 0,
            min_depth: 0,
        });
        assert_eq!((a.min_depth(), a.max_depth(), a.depth_limit()), (1, 1, 1));
        assert!(a.try_admit());
        assert!(!a.try_admit());
        a.finish();
        a.finish();
        assert_eq!(a.in_flight(), 0);
    }
}
