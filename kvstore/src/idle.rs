//! When a queue pair has been idle long enough that its memory node may reclaim it.
//!
//! A memory node destroys a responder that carried no request for its idle timeout
//! (`CreateQpResponse::idle_timeout_ms`). A session that posts on such a queue pair
//! would wait out the retransmission window and fail the operation, so it replaces
//! the queue pair first once it has been idle for [`REFRESH_PERCENT`] of the
//! timeout. This is the decision only: time is passed in, nothing here reads a clock.

use std::time::{Duration, Instant};

/// Share of the memory node's idle timeout, in percent, after which a session
/// replaces an idle queue pair before posting on it.
pub(crate) const REFRESH_PERCENT: u32 = 80;

/// Tracks the requests of one queue pair against its memory node's idle timeout.
#[derive(Debug, Clone)]
pub(crate) struct IdleWatch {
    /// The memory node's idle timeout; `None`: it never reclaims idle queue pairs.
    timeout: Option<Duration>,
    /// When the last request was posted (or the queue pair was created).
    last_request: Instant,
    /// Work requests posted and not completed: while any is outstanding the
    /// requester keeps sending it, so the queue pair is not idle.
    outstanding: usize,
}

impl IdleWatch {
    /// A queue pair created at `now` on a memory node with idle timeout `timeout`.
    pub(crate) fn new(timeout: Option<Duration>, now: Instant) -> IdleWatch {
        IdleWatch {
            timeout,
            last_request: now,
            outstanding: 0,
        }
    }

    /// `n` work requests were posted at `now`.
    pub(crate) fn posted(&mut self, n: usize, now: Instant) {
        self.outstanding = self.outstanding.saturating_add(n);
        self.last_request = self.last_request.max(now);
    }

    /// One work request completed.
    pub(crate) fn completed(&mut self) {
        self.outstanding = self.outstanding.saturating_sub(1);
    }

    /// The memory node's idle timeout.
    pub(crate) fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// Whether the queue pair should be replaced before the next post at `now`: it
    /// has nothing outstanding and has been idle for at least [`REFRESH_PERCENT`] of
    /// the timeout.
    pub(crate) fn should_refresh(&self, now: Instant) -> bool {
        let Some(timeout) = self.timeout else {
            return false;
        };
        let threshold = timeout.saturating_mul(REFRESH_PERCENT) / 100;
        self.outstanding == 0 && now.saturating_duration_since(self.last_request) >= threshold
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn without_a_timeout_a_queue_pair_is_never_refreshed() {
        let t0 = Instant::now();
        let w = IdleWatch::new(None, t0);
        assert!(!w.should_refresh(t0 + Duration::from_secs(86_400)));
    }

    #[test]
    fn refreshes_at_eighty_percent_of_the_timeout_and_not_before() {
        let t0 = Instant::now();
        let w = IdleWatch::new(Some(1000 * MS), t0);
        assert!(!w.should_refresh(t0));
        assert!(!w.should_refresh(t0 + 799 * MS));
        assert!(w.should_refresh(t0 + 800 * MS));
        assert!(w.should_refresh(t0 + 5000 * MS));
    }

    #[test]
    fn a_request_restarts_the_idle_time() {
        let t0 = Instant::now();
        let mut w = IdleWatch::new(Some(1000 * MS), t0);
        w.posted(2, t0 + 700 * MS);
        w.completed();
        w.completed();
        assert!(!w.should_refresh(t0 + 1000 * MS), "idle for 300 ms only");
        assert!(w.should_refresh(t0 + 1500 * MS));
        // A post stamped earlier than the last one (clock read before it) does not
        // move the idle time back.
        w.posted(1, t0 + 100 * MS);
        w.completed();
        assert!(!w.should_refresh(t0 + 1400 * MS));
    }

    #[test]
    fn outstanding_requests_keep_it_alive() {
        let t0 = Instant::now();
        let mut w = IdleWatch::new(Some(100 * MS), t0);
        w.posted(1, t0);
        assert!(
            !w.should_refresh(t0 + 10_000 * MS),
            "a request being retransmitted reaches the node"
        );
        w.completed();
        assert!(w.should_refresh(t0 + 10_000 * MS));
        // More completions than posts (a flushed queue pair) never underflow.
        w.completed();
        assert!(w.should_refresh(t0 + 10_000 * MS));
        assert_eq!(w.timeout(), Some(100 * MS));
    }
}
