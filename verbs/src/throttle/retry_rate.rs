//! The retry-rate window γ shared by the adaptive conflict-avoidance
//! controllers.
//!
//! Every finished operation is recorded together with whether it had to be
//! retried (for example because its RDMA CAS lost a race). Operations are
//! grouped into fixed-length windows of wall time (1 ms in SMART); when a
//! window closes its retry rate
//!
//! ```text
//! γ = (operations that needed at least one retry) / (operations)
//! ```
//!
//! becomes visible and the controllers react to it. γ is therefore always in
//! `[0, 1]`. The total number of individual retries is counted as well, for
//! statistics only.
//!
//! Windows are opened lazily by the first operation recorded after the
//! previous window closed, so idle periods do not produce empty windows and
//! a closed window always holds at least one operation.

use std::time::{Duration, Instant};

/// Shortest accepted window; a zero window is clamped up to this.
pub const MIN_WINDOW: Duration = Duration::from_micros(1);

/// Measures the retry rate γ over consecutive windows of time.
///
/// Sans-IO: the caller passes the current time with every record.
#[derive(Clone, Debug)]
pub struct RetryRate {
    window: Duration,
    start: Option<Instant>,
    ops: u64,
    retried_ops: u64,
    last_rate: f64,
    windows_closed: u64,
}

impl RetryRate {
    /// Creates a meter whose windows last `window` (clamped to at least
    /// [`MIN_WINDOW`]).
    pub fn new(window: Duration) -> Self {
        Self {
            window: window.max(MIN_WINDOW),
            start: None,
            ops: 0,
            retried_ops: 0,
            last_rate: 0.0,
            windows_closed: 0,
        }
    }

    /// Length of one window after clamping.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// Records one finished operation at `now`.
    ///
    /// If `now` lies at or beyond the end of the open window, that window is
    /// closed first and its γ is returned; the new operation then opens the
    /// next window. Returns `None` while the current window is still open.
    /// Times earlier than the window start (a clock passed out of order) are
    /// counted in the open window.
    pub fn record(&mut self, retried: bool, now: Instant) -> Option<f64> {
        let closed = match self.start {
            Some(start) if now.saturating_duration_since(start) >= self.window => {
                Some(self.close())
            }
            _ => None,
        };
        if self.start.is_none() {
            self.start = Some(now);
        }
        self.ops = self.ops.saturating_add(1);
        if retried {
            self.retried_ops = self.retried_ops.saturating_add(1);
        }
        closed
    }

    /// Closes the open window if `now` is at or past its end, without
    /// recording an operation. Useful for a worker that ticks its policies
    /// while no operation finishes. Returns the closed window's γ.
    pub fn poll(&mut self, now: Instant) -> Option<f64> {
        match self.start {
            Some(start) if now.saturating_duration_since(start) >= self.window => {
                Some(self.close())
            }
            _ => None,
        }
    }

    fn close(&mut self) -> f64 {
        // A window is only open after an operation was recorded, so ops > 0.
        let rate = if self.ops == 0 {
            0.0
        } else {
            self.retried_ops as f64 / self.ops as f64
        };
        self.last_rate = rate;
        self.windows_closed = self.windows_closed.saturating_add(1);
        self.start = None;
        self.ops = 0;
        self.retried_ops = 0;
        rate
    }

    /// γ of the most recently closed window (0 before any window closed).
    pub fn last_rate(&self) -> f64 {
        self.last_rate
    }

    /// Number of windows closed so far.
    pub fn windows_closed(&self) -> u64 {
        self.windows_closed
    }

    /// Operations recorded in the window that is still open.
    pub fn open_ops(&self) -> u64 {
        self.ops
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn window_reports_fraction_of_retried_ops_when_it_closes() {
        let t0 = Instant::now();
        let mut r = RetryRate::new(MS);
        for i in 0..10 {
            assert_eq!(r.record(i < 3, t0 + Duration::from_micros(i * 50)), None);
        }
        let gamma = r.record(false, t0 + MS).expect("window closes at its end");
        assert!((gamma - 0.3).abs() < 1e-12, "gamma = {gamma}");
        assert_eq!(r.windows_closed(), 1);
        assert_eq!(r.open_ops(), 1, "closing op opens the next window");
        assert!((r.last_rate() - 0.3).abs() < 1e-12);
    }

    #[test]
    fn idle_gap_does_not_create_empty_windows_and_zero_window_is_clamped() {
        let t0 = Instant::now();
        let mut r = RetryRate::new(Duration::ZERO);
        assert_eq!(r.window(), MIN_WINDOW);
        r.record(true, t0);
        assert_eq!(r.poll(t0), None);
        assert_eq!(r.poll(t0 + Duration::from_secs(5)), Some(1.0));
        assert_eq!(r.poll(t0 + Duration::from_secs(10)), None);
        assert_eq!(r.windows_closed(), 1);
    }
}
