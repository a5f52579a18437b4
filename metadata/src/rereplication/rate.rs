//! Bounding the copier's bandwidth: a token bucket over the bytes it reads and
//! writes.

use std::time::{Duration, Instant};

/// Keeps the copier at or below `bytes_per_sec` on average.
#[derive(Debug)]
pub struct RateLimit {
    bytes_per_sec: f64,
    /// Bytes that may go without waiting (at most one second's worth).
    budget: f64,
    last: Instant,
}

impl RateLimit {
    /// A limit of `bytes_per_sec` (at least 1).
    pub fn new(bytes_per_sec: u64) -> RateLimit {
        RateLimit {
            bytes_per_sec: bytes_per_sec.max(1) as f64,
            budget: 0.0,
            last: Instant::now(),
        }
    }

    /// Accounts `bytes` moved; how long to wait before moving more.
    pub fn charge(&mut self, bytes: u64, now: Instant) -> Duration {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.budget = (self.budget + elapsed * self.bytes_per_sec).min(self.bytes_per_sec);
        self.budget -= bytes as f64;
        if self.budget >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.budget / self.bytes_per_sec)
        }
    }

    /// Accounts `bytes` and sleeps as long as the limit says.
    pub fn take(&mut self, bytes: u64) {
        let wait = self.charge(bytes, Instant::now());
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_average_stays_under_the_limit() {
        let start = Instant::now();
        let mut r = RateLimit::new(1000);
        r.last = start;
        // 500 bytes right away: half a second behind an empty bucket.
        assert_eq!(r.charge(500, start), Duration::from_millis(500));
        // After that half second, another 500 bytes: half a second again.
        let t = start + Duration::from_millis(500);
        assert_eq!(r.charge(500, t), Duration::from_millis(500));
        // A long idle time banks one second at most.
        let later = t + Duration::from_secs(100);
        assert_eq!(r.charge(500, later), Duration::ZERO);
        assert!(r.charge(1000, later) > Duration::ZERO);
    }
}
