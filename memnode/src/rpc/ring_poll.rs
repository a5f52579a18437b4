//! When a worker looks at the request rings: the polling budget.
//!
//! Nothing tells a worker that a client WRITE landed in a ring (with a hardware NIC
//! the node's CPU does not see WRITEs), so the workers poll. A poll pass looks at the
//! expected slot of every owned ring: one try-lock and one 64-byte line read per ring,
//! a few tens of nanoseconds each. The schedule keeps that cheap when idle and fast
//! under load:
//!
//! - for [`RING_SPIN`] after a pass found work, a worker polls again at once (yielding
//!   the CPU between passes), so a client's next request is picked up within a pass;
//! - after that it sleeps between passes (waiting for SEND work meanwhile), starting
//!   at [`RING_SLEEP_MIN`] and doubling up to [`RING_SLEEP_MAX`].
//!
//! So an idle node with owned rings wakes each worker about 1000 times a second, and a
//! request arriving after a quiet spell waits up to [`RING_SLEEP_MAX`] (plus the
//! thread's wake-up) before a worker sees it. While no queue pair owns a ring the
//! workers do not poll at all.

use std::time::{Duration, Instant};

/// How long a worker keeps polling without sleeping after it last found a request.
pub const RING_SPIN: Duration = Duration::from_micros(200);

/// The first sleep between passes once the spin is over.
pub const RING_SLEEP_MIN: Duration = Duration::from_micros(20);

/// The longest sleep between passes.
pub const RING_SLEEP_MAX: Duration = Duration::from_millis(1);

/// One worker's ring polling schedule.
#[derive(Debug, Clone)]
pub struct PollSchedule {
    last_work: Instant,
    sleep: Duration,
}

impl PollSchedule {
    /// A schedule that starts spinning at `now`.
    pub fn new(now: Instant) -> PollSchedule {
        PollSchedule {
            last_work: now,
            sleep: RING_SLEEP_MIN,
        }
    }

    /// How long to wait (for SEND work) before the next pass at `now`: zero while
    /// spinning, then growing sleeps.
    pub fn next_wait(&mut self, now: Instant) -> Duration {
        if now.saturating_duration_since(self.last_work) < RING_SPIN {
            return Duration::ZERO;
        }
        let wait = self.sleep;
        self.sleep = (self.sleep * 2).min(RING_SLEEP_MAX);
        wait
    }

    /// A pass at `now` found requests (`worked`) or not.
    pub fn record(&mut self, worked: bool, now: Instant) {
        if worked {
            self.last_work = now;
            self.sleep = RING_SLEEP_MIN;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spins_after_work_then_backs_off_to_the_cap() {
        let t0 = Instant::now();
        let mut s = PollSchedule::new(t0);
        assert_eq!(s.next_wait(t0), Duration::ZERO);
        assert_eq!(s.next_wait(t0 + RING_SPIN / 2), Duration::ZERO);
        let idle = t0 + RING_SPIN;
        let waits: Vec<Duration> = (0..10).map(|_| s.next_wait(idle)).collect();
        assert_eq!(waits[0], RING_SLEEP_MIN);
        assert_eq!(waits[1], RING_SLEEP_MIN * 2);
        assert!(waits.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(*waits.last().unwrap(), RING_SLEEP_MAX);
        // Work found: spinning again, and the sleep starts over.
        s.record(true, idle);
        assert_eq!(s.next_wait(idle), Duration::ZERO);
        assert_eq!(s.next_wait(idle + RING_SPIN), RING_SLEEP_MIN);
        // A pass without work changes nothing.
        s.record(false, idle + RING_SPIN);
        assert_eq!(s.next_wait(idle + RING_SPIN), RING_SLEEP_MIN * 2);
    }
}
