//! Work-request credits with an adaptive maximum (SMART Algorithm 1).
//!
//! Each worker thread owns one [`CreditPool`]. Before a batch of `n` work
//! requests is posted (one doorbell), the worker takes `n` credits with
//! [`CreditPool::try_acquire`]; when their completions are polled it gives
//! them back with [`CreditPool::release`]. At most `C_max` work requests are
//! therefore outstanding per thread, which keeps the NIC's on-chip work
//! request cache from thrashing when many threads post at once.
//!
//! # Admitting oversize batches
//!
//! A batch larger than `C_max` could never fit and would wait forever. Such
//! a batch is admitted when the pool is idle (nothing in flight, i.e.
//! `credit == C_max`); the credit then goes negative and no further batch is
//! admitted until the completions bring it back. Outstanding work requests
//! are thus bounded by `max(C_max, largest batch)`.
//!
//! # Adapting `C_max`
//!
//! The best `C_max` depends on the thread count and the workload, so when
//! `adaptive` is on the pool runs epochs, each made of
//!
//! 1. an **update phase**: every candidate value is put in force in turn for
//!    one interval Δ (8 ms by default) while the completions returned during
//!    that interval are counted; at the end the candidate with the highest
//!    throughput (completions per unit of time, ties going to the earlier
//!    candidate) becomes `C_max`;
//! 2. a **stable phase** of `stable_epochs · Δ` (60 · 8 ms = 480 ms by
//!    default) during which `C_max` stays fixed.
//!
//! Then the next epoch starts with a fresh update phase. The first update
//! phase begins when the pool is created. Changing `C_max` to `target`
//! shifts the available credit by `target − C_max` (Algorithm 1's
//! `UpdateCMax`), so work already in flight keeps its credits and the credit
//! may be temporarily negative after a decrease.
//!
//! The state machine advances on [`CreditPool::tick`] and also on every
//! [`CreditPool::release`] (both are given the current time), so
//! completions are attributed to the interval they arrived in. An interval
//! closes at the first call at or after its end; throughput is normalised by
//! the interval's actual length so a late call does not favour a candidate.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Shortest accepted Δ; a zero Δ is clamped up to this.
pub const MIN_DELTA: Duration = Duration::from_micros(1);

/// Number of chosen `C_max` values kept in [`CreditStats::cmax_history`].
pub const CMAX_HISTORY_LEN: usize = 64;

/// Configuration of a [`CreditPool`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreditConfig {
    /// Whether credits limit posting at all. When `false` every request is
    /// admitted at once (unlimited), for ablation runs.
    pub enabled: bool,
    /// `C_max` in force when `adaptive` is off or `candidates` is empty.
    /// Zero is treated as 1.
    pub initial_cmax: u32,
    /// Whether `C_max` is re-chosen every epoch from `candidates`.
    pub adaptive: bool,
    /// Candidate `C_max` values tried, in order, during each update phase.
    /// Zeros are treated as 1; an empty list disables adaptation and keeps
    /// `initial_cmax`.
    pub candidates: Vec<u32>,
    /// How long each candidate is measured (Δ). Clamped to at least
    /// [`MIN_DELTA`].
    pub delta: Duration,
    /// Length of the stable phase, in units of Δ.
    pub stable_epochs: u32,
}

impl Default for CreditConfig {
    /// Enabled and adaptive; Δ = 8 ms and a stable phase of 60 · Δ as in
    /// SMART; candidates 4 to 128 in powers of two.
    ///
    /// `initial_cmax` is 32: in SMART's measurements a moderate thread count
    /// (36 threads) needs about 32 outstanding requests per thread to hide
    /// the round trip, while 8 suffices at 96 threads; our deployments run
    /// few threads per client, so 32 is the safer fixed value. It only
    /// governs non-adaptive pools, since an adaptive pool starts measuring
    /// its candidates right away.
    fn default() -> Self {
        Self {
            enabled: true,
            initial_cmax: 32,
            adaptive: true,
            candidates: vec![4, 8, 16, 32, 64, 128],
            delta: Duration::from_millis(8),
            stable_epochs: 60,
        }
    }
}

impl CreditConfig {
    /// Credits switched off: every request is admitted.
    pub fn disabled() -> Self {
        Self {
            enabled: false,
            ..Self::default()
        }
    }

    /// Credits on with a fixed `C_max` (no adaptation).
    pub fn fixed(cmax: u32) -> Self {
        Self {
            initial_cmax: cmax,
            adaptive: false,
            ..Self::default()
        }
    }
}

/// Which part of its epoch a [`CreditPool`] is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CreditPhase {
    /// `C_max` never changes (credits disabled, adaptation off or no
    /// candidates).
    Fixed,
    /// Measuring the candidate at this index of the candidate list.
    Update {
        /// Index into the (sanitised) candidate list.
        candidate: usize,
    },
    /// Holding the chosen `C_max` until the next update phase.
    Stable,
}

/// Counters kept by a [`CreditPool`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CreditStats {
    /// Successful [`CreditPool::try_acquire`] calls (with `n > 0`).
    pub acquired: u64,
    /// Credits handed out by successful acquisitions.
    pub acquired_credits: u64,
    /// Times [`CreditPool::try_acquire`] refused (the caller must defer).
    pub deferred: u64,
    /// Credits returned by completions.
    pub completed: u64,
    /// Transitions between the update and the stable phase (both ways).
    pub phase_changes: u64,
    /// Update phases completed.
    pub epochs: u64,
    /// `C_max` chosen at the end of each update phase, oldest first; only
    /// the last [`CMAX_HISTORY_LEN`] values are kept.
    pub cmax_history: VecDeque<u32>,
}

#[derive(Clone, Copy, Debug)]
struct Measurement {
    cmax: u32,
    completions: u64,
    elapsed: Duration,
}

impl Measurement {
    /// Strictly higher throughput than `other` (cross-multiplied to stay in
    /// integers).
    fn beats(&self, other: &Measurement) -> bool {
        let mine = u128::from(self.completions) * other.elapsed.as_nanos();
        let theirs = u128::from(other.completions) * self.elapsed.as_nanos();
        mine > theirs
    }
}

#[derive(Clone, Debug)]
enum State {
    Fixed,
    Update {
        index: usize,
        start: Instant,
        completions: u64,
        best: Option<Measurement>,
    },
    Stable {
        start: Instant,
    },
}

/// Per-thread work-request credits (see the [module docs](self)).
#[derive(Clone, Debug)]
pub struct CreditPool {
    enabled: bool,
    candidates: Vec<u32>,
    delta: Duration,
    stable_len: Duration,
    cmax: u32,
    credit: i64,
    in_flight: u64,
    state: State,
    stats: CreditStats,
}

impl CreditPool {
    /// Creates a pool; with adaptation on, the first update phase starts at
    /// `now` with the first candidate.
    pub fn new(config: CreditConfig, now: Instant) -> Self {
        let initial = config.initial_cmax.max(1);
        let candidates: Vec<u32> = config.candidates.iter().map(|&c| c.max(1)).collect();
        let delta = config.delta.max(MIN_DELTA);
        let stable_len = delta
            .checked_mul(config.stable_epochs)
            .unwrap_or(Duration::MAX);
        let mut pool = Self {
            enabled: config.enabled,
            candidates,
            delta,
            stable_len,
            cmax: initial,
            credit: i64::from(initial),
            in_flight: 0,
            state: State::Fixed,
            stats: CreditStats::default(),
        };
        if config.enabled && config.adaptive && !pool.candidates.is_empty() {
            pool.begin_update(now);
        }
        pool
    }

    /// Takes `n` credits for a batch of `n` work requests.
    ///
    /// Returns `true` if the batch may be posted now: when enough credit is
    /// left, or when the pool is idle (nothing in flight) even if `n`
    /// exceeds `C_max`, so that an oversize batch cannot wait forever.
    /// Returns `false` if the caller must defer the batch until completions
    /// are released. Disabled pools always return `true` (in-flight work is
    /// still counted). `n == 0` is always admitted and changes nothing.
    pub fn try_acquire(&mut self, n: u32) -> bool {
        if n == 0 {
            return true;
        }
        let need = i64::from(n);
        if self.enabled && self.credit < need && self.in_flight > 0 {
            self.stats.deferred = self.stats.deferred.saturating_add(1);
            return false;
        }
        self.credit = self.credit.saturating_sub(need);
        self.in_flight = self.in_flight.saturating_add(u64::from(n));
        self.stats.acquired = self.stats.acquired.saturating_add(1);
        self.stats.acquired_credits = self.stats.acquired_credits.saturating_add(u64::from(n));
        true
    }

    /// Returns `n` credits for `n` completed work requests polled at `now`.
    ///
    /// The completions count towards the throughput of the candidate being
    /// measured. The epoch state machine is advanced to `now` first.
    /// Releasing more than is in flight (a caller bug) is clamped to what is
    /// in flight.
    pub fn release(&mut self, n: u32, now: Instant) {
        self.advance(now);
        let n = u64::from(n).min(self.in_flight);
        if n == 0 {
            return;
        }
        self.in_flight -= n;
        self.credit = self.credit.saturating_add(n as i64);
        self.stats.completed = self.stats.completed.saturating_add(n);
        if let State::Update { completions, .. } = &mut self.state {
            *completions = completions.saturating_add(n);
        }
    }

    /// Advances the epoch state machine to `now`: closes a finished
    /// candidate interval, ends the update phase, or ends the stable phase.
    /// At most one transition happens per call. Call it regularly (e.g. from
    /// the poll loop) even when nothing completes.
    pub fn tick(&mut self, now: Instant) {
        self.advance(now);
    }

    /// The maximum credit `C_max` currently in force.
    pub fn cmax(&self) -> u32 {
        self.cmax
    }

    /// Credits still available (`C_max − in_flight`); negative after an
    /// oversize batch or a decrease of `C_max` while work was in flight.
    pub fn available(&self) -> i64 {
        self.credit
    }

    /// Work requests acquired but not yet released.
    pub fn in_flight(&self) -> u64 {
        self.in_flight
    }

    /// Whether credits limit posting.
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// Where the pool is in its epoch.
    pub fn phase(&self) -> CreditPhase {
        match self.state {
            State::Fixed => CreditPhase::Fixed,
            State::Update { index, .. } => CreditPhase::Update { candidate: index },
            State::Stable { .. } => CreditPhase::Stable,
        }
    }

    /// The candidate list after sanitising (zeros raised to 1).
    pub fn candidates(&self) -> &[u32] {
        &self.candidates
    }

    /// Counters since creation.
    pub fn stats(&self) -> &CreditStats {
        &self.stats
    }

    fn advance(&mut self, now: Instant) {
        match self.state {
            State::Fixed => {}
            State::Stable { start } => {
                if now.saturating_duration_since(start) >= self.stable_len {
                    self.stats.phase_changes = self.stats.phase_changes.saturating_add(1);
                    self.begin_update(now);
                }
            }
            State::Update {
                index,
                start,
                completions,
                best,
            } => {
                let elapsed = now.saturating_duration_since(start);
                if elapsed < self.delta {
                    return;
                }
                let measured = Measurement {
                    cmax: self.cmax,
                    completions,
                    elapsed,
                };
                let best = match best {
                    Some(b) if !measured.beats(&b) => b,
                    _ => measured,
                };
                match self.candidates.get(index + 1) {
                    Some(&next) => {
                        self.update_cmax(next);
                        self.state = State::Update {
                            index: index + 1,
                            start: now,
                            completions: 0,
                            best: Some(best),
                        };
                    }
                    None => {
                        self.update_cmax(best.cmax);
                        if self.stats.cmax_history.len() >= CMAX_HISTORY_LEN {
                            self.stats.cmax_history.pop_front();
                        }
                        self.stats.cmax_history.push_back(best.cmax);
                        self.stats.epochs = self.stats.epochs.saturating_add(1);
                        self.stats.phase_changes = self.stats.phase_changes.saturating_add(1);
                        self.state = State::Stable { start: now };
                    }
                }
            }
        }
    }

    fn begin_update(&mut self, now: Instant) {
        match self.candidates.first() {
            Some(&first) => {
                self.update_cmax(first);
                self.state = State::Update {
                    index: 0,
                    start: now,
                    completions: 0,
                    best: None,
                };
            }
            None => self.state = State::Fixed,
        }
    }

    /// Algorithm 1 `UpdateCMax`: `credit += target − C_max; C_max = target`.
    fn update_cmax(&mut self, target: u32) {
        self.credit = self
            .credit
            .saturating_add(i64::from(target) - i64::from(self.cmax));
        self.cmax = target;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const DELTA: Duration = Duration::from_millis(8);

    /// Completions per Δ for a given C_max: peaks at 16.
    fn curve_peak_16(cmax: u32) -> u32 {
        match cmax {
            4 => 300,
            8 => 600,
            16 => 900,
            32 => 700,
            64 => 400,
            _ => 100,
        }
    }

    /// Completions per Δ for a given C_max: peaks at 64.
    fn curve_peak_64(cmax: u32) -> u32 {
        cmax * 10
    }

    /// Runs one Δ interval starting at `start`: the workload completes
    /// `curve(C_max)` single requests in the middle of the interval, then the
    /// pool is ticked at the interval's end.
    fn run_interval(pool: &mut CreditPool, start: Instant, curve: fn(u32) -> u32) {
        let mid = start + DELTA / 2;
        for _ in 0..curve(pool.cmax()) {
            assert!(pool.try_acquire(1));
            pool.release(1, mid);
        }
        pool.tick(start + DELTA);
    }

    #[test]
    fn in_flight_never_exceeds_cmax_when_enabled() {
        let t0 = Instant::now();
        let mut pool = CreditPool::new(CreditConfig::fixed(8), t0);
        let mut admitted = 0;
        for _ in 0..20 {
            if pool.try_acquire(1) {
                admitted += 1;
            }
            assert!(pool.in_flight() <= 8);
        }
        assert_eq!(admitted, 8);
        assert_eq!(pool.available(), 0);
        assert!(!pool.try_acquire(3));
        assert_eq!(pool.stats().deferred, 13);
    }

    #[test]
    fn deferred_request_is_admitted_after_release() {
        let t0 = Instant::now();
        let mut pool = CreditPool::new(CreditConfig::fixed(4), t0);
        assert!(pool.try_acquire(3));
        assert!(!pool.try_acquire(2), "only one credit left");
        assert_eq!(pool.stats().deferred, 1);
        pool.release(1, t0);
        assert!(pool.try_acquire(2));
        assert_eq!(pool.in_flight(), 4);
        assert_eq!(pool.available(), 0);
        assert_eq!(pool.stats().completed, 1);
        assert_eq!(pool.stats().acquired, 2);
    }

    #[test]
    fn disabled_pool_is_unlimited() {
        let t0 = Instant::now();
        let mut pool = CreditPool::new(CreditConfig::disabled(), t0);
        for _ in 0..10_000 {
            assert!(pool.try_acquire(7));
        }
        assert_eq!(pool.in_flight(), 70_000);
        assert_eq!(pool.stats().deferred, 0);
        assert_eq!(pool.phase(), CreditPhase::Fixed);
        pool.tick(t0 + Duration::from_secs(10));
        assert_eq!(pool.cmax(), 32, "disabled pools never adapt");
    }

    #[test]
    fn oversize_request_is_admitted_only_on_idle_pool() {
        let t0 = Instant::now();
        let mut pool = CreditPool::new(CreditConfig::fixed(4), t0);
        assert!(pool.try_acquire(10), "idle pool admits an oversize batch");
        assert_eq!(pool.available(), -6);
        assert!(!pool.try_acquire(1), "nothing more until it completes");
        pool.release(10, t0);
        assert_eq!(pool.available(), 4);
        assert!(pool.try_acquire(1));
        assert!(!pool.try_acquire(10), "busy pool defers an oversize batch");
    }

    #[test]
    fn release_beyond_in_flight_is_clamped() {
        let t0 = Instant::now();
        let mut pool = CreditPool::new(CreditConfig::fixed(4), t0);
        assert!(pool.try_acquire(2));
        pool.release(100, t0);
        assert_eq!(pool.in_flight(), 0);
        assert_eq!(pool.available(), 4);
        assert_eq!(pool.stats().completed, 2);
    }

    #[test]
    fn update_cmax_shifts_credit_and_may_go_negative() {
        let t0 = Instant::now();
        let config = CreditConfig {
            candidates: vec![16, 2],
            ..CreditConfig::default()
        };
        let mut pool = CreditPool::new(config, t0);
        assert_eq!(pool.cmax(), 16);
        assert!(pool.try_acquire(10));
        pool.tick(t0 + DELTA);
        assert_eq!(pool.cmax(), 2);
        assert_eq!(pool.available(), -8, "credit += 2 - 16 with 10 in flight");
        assert!(!pool.try_acquire(1));
        pool.release(9, t0 + DELTA);
        assert_eq!(pool.available(), 1);
        assert!(pool.try_acquire(1));
    }

    #[test]
    fn adaptive_update_picks_best_candidate_holds_it_and_reruns() {
        let t0 = Instant::now();
        let mut pool = CreditPool::new(CreditConfig::default(), t0);
        let n = pool.candidates().len() as u32;
        assert_eq!(n, 6);
        let mut t = t0;
        for i in 0..n {
            assert_eq!(
                pool.phase(),
                CreditPhase::Update {
                    candidate: i as usize
                }
            );
            assert_eq!(pool.cmax(), pool.candidates()[i as usize]);
            run_interval(&mut pool, t, curve_peak_16);
            t += DELTA;
        }
        assert_eq!(pool.phase(), CreditPhase::Stable);
        assert_eq!(pool.cmax(), 16);
        assert_eq!(pool.available(), 16);
        assert_eq!(pool.stats().cmax_history, VecDeque::from([16]));
        assert_eq!(pool.stats().epochs, 1);
        assert_eq!(pool.stats().phase_changes, 1);

        // The workload changes, but the stable phase holds C_max for 60 Δ.
        for _ in 0..59 {
            run_interval(&mut pool, t, curve_peak_64);
            t += DELTA;
            assert_eq!(pool.phase(), CreditPhase::Stable);
            assert_eq!(pool.cmax(), 16);
        }
        run_interval(&mut pool, t, curve_peak_64);
        t += DELTA;
        assert_eq!(pool.phase(), CreditPhase::Update { candidate: 0 });
        assert_eq!(pool.cmax(), 4);
        assert_eq!(pool.stats().phase_changes, 2);

        // The second update phase follows the new curve.
        for _ in 0..n {
            run_interval(&mut pool, t, curve_peak_64);
            t += DELTA;
        }
        assert_eq!(pool.phase(), CreditPhase::Stable);
        assert_eq!(pool.cmax(), 128);
        assert_eq!(pool.stats().cmax_history, VecDeque::from([16, 128]));
    }

    #[test]
    fn throughput_is_normalised_by_interval_length() {
        let t0 = Instant::now();
        let config = CreditConfig {
            candidates: vec![4, 8],
            ..CreditConfig::default()
        };
        let mut pool = CreditPool::new(config, t0);
        // Candidate 4: 100 completions over a late-closed 4 Δ interval.
        for _ in 0..100 {
            assert!(pool.try_acquire(1));
            pool.release(1, t0 + DELTA / 2);
        }
        pool.tick(t0 + 4 * DELTA);
        assert_eq!(pool.cmax(), 8);
        // Candidate 8: 30 completions over exactly Δ — a higher rate.
        for _ in 0..30 {
            assert!(pool.try_acquire(1));
            pool.release(1, t0 + 4 * DELTA);
        }
        pool.tick(t0 + 5 * DELTA);
        assert_eq!(pool.cmax(), 8);
        assert_eq!(pool.phase(), CreditPhase::Stable);
    }

    #[test]
    fn degenerate_configs_do_not_panic() {
        let t0 = Instant::now();
        let config = CreditConfig {
            initial_cmax: 0,
            candidates: vec![],
            delta: Duration::ZERO,
            stable_epochs: 0,
            ..CreditConfig::default()
        };
        let mut pool = CreditPool::new(config, t0);
        pool.tick(t0 + Duration::from_secs(1));
        assert_eq!(pool.phase(), CreditPhase::Fixed);
        assert_eq!(
            pool.cmax(),
            1,
            "empty candidates fall back to initial C_max"
        );

        let config = CreditConfig {
            candidates: vec![0, 0],
            delta: Duration::ZERO,
            stable_epochs: 0,
            ..CreditConfig::default()
        };
        let mut pool = CreditPool::new(config, t0);
        assert_eq!(pool.cmax(), 1);
        for i in 0..10 {
            pool.tick(t0 + Duration::from_micros(i));
        }
        assert!(pool.try_acquire(u32::MAX));
        pool.release(u32::MAX, t0 + Duration::from_micros(20));

        let config = CreditConfig {
            delta: Duration::MAX,
            stable_epochs: u32::MAX,
            ..CreditConfig::default()
        };
        let mut pool = CreditPool::new(config, t0);
        pool.tick(t0 + Duration::from_secs(1_000_000));
        assert_eq!(pool.phase(), CreditPhase::Update { candidate: 0 });
    }

    #[derive(Clone, Debug)]
    enum Op {
        Acquire(u32),
        Release(u32),
        Tick(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (1u32..40).prop_map(Op::Acquire),
            3 => (0u32..40).prop_map(Op::Release),
            2 => (0u64..20_000).prop_map(Op::Tick),
        ]
    }

    fn config() -> impl Strategy<Value = CreditConfig> {
        (
            any::<bool>(),
            0u32..64,
            any::<bool>(),
            prop::collection::vec(0u32..64, 0..6),
            0u64..5_000,
            0u32..5,
        )
            .prop_map(
                |(enabled, initial_cmax, adaptive, candidates, delta_us, stable_epochs)| {
                    CreditConfig {
                        enabled,
                        initial_cmax,
                        adaptive,
                        candidates,
                        delta: Duration::from_micros(delta_us),
                        stable_epochs,
                    }
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn in_flight_bounded_under_random_sequences(
            config in config(),
            ops in prop::collection::vec(op(), 0..200),
        ) {
            let t0 = Instant::now();
            let enabled = config.enabled;
            let mut pool = CreditPool::new(config, t0);
            let mut now = t0;
            let mut largest_request = 0u64;
            let mut largest_cmax = u64::from(pool.cmax());
            for op in ops {
                match op {
                    Op::Acquire(n) => {
                        let before = pool.in_flight();
                        if pool.try_acquire(n) {
                            largest_request = largest_request.max(u64::from(n));
                            prop_assert_eq!(pool.in_flight(), before + u64::from(n));
                            if enabled {
                                // Admission itself never overshoots the C_max in force.
                                prop_assert!(
                                    pool.in_flight() <= u64::from(pool.cmax()).max(u64::from(n))
                                );
                            }
                        } else {
                            prop_assert!(enabled);
                            prop_assert_eq!(pool.in_flight(), before);
                        }
                    }
                    Op::Release(n) => pool.release(n, now),
                    Op::Tick(us) => {
                        now += Duration::from_micros(us);
                        pool.tick(now);
                    }
                }
                largest_cmax = largest_cmax.max(u64::from(pool.cmax()));
                // Credit accounting invariant: credit = C_max - in_flight.
                prop_assert_eq!(
                    pool.available(),
                    i64::from(pool.cmax()) - pool.in_flight() as i64
                );
                if enabled {
                    prop_assert!(pool.in_flight() <= largest_cmax.max(largest_request));
                }
            }
        }
    }
}
