//! Frames the pipeline asked to hold back (fault injection's delay), released in due
//! order, frames due at the same instant in the order they were held.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use crate::model::Emitted;

struct Delayed {
    due: Instant,
    seq: u64,
    out: Emitted,
}

impl PartialEq for Delayed {
    fn eq(&self, o: &Delayed) -> bool {
        (self.due, self.seq) == (o.due, o.seq)
    }
}
impl Eq for Delayed {}
impl PartialOrd for Delayed {
    fn partial_cmp(&self, o: &Delayed) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Delayed {
    fn cmp(&self, o: &Delayed) -> std::cmp::Ordering {
        (self.due, self.seq).cmp(&(o.due, o.seq))
    }
}

/// Held frames by due time.
#[derive(Default)]
pub struct DelayQueue {
    heap: BinaryHeap<Reverse<Delayed>>,
    seq: u64,
}

impl DelayQueue {
    /// Hold `out` for its `delay_us` from `now`.
    pub fn hold(&mut self, out: Emitted, now: Instant) {
        self.seq += 1;
        self.heap.push(Reverse(Delayed {
            due: now + Duration::from_micros(u64::from(out.delay_us)),
            seq: self.seq,
            out,
        }));
    }

    /// Move every frame due by `now` to `into`, in due order.
    pub fn release_due(&mut self, now: Instant, into: &mut Vec<Emitted>) {
        while self.heap.peek().is_some_and(|Reverse(x)| x.due <= now) {
            if let Some(Reverse(x)) = self.heap.pop() {
                into.push(x.out);
            }
        }
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(tag: u8, delay_us: u32) -> Emitted {
        Emitted {
            port: 0,
            frame: vec![tag],
            delay_us,
        }
    }

    #[test]
    fn releases_in_due_order_and_ties_in_holding_order() {
        let mut q = DelayQueue::default();
        let t0 = Instant::now();
        q.hold(frame(1, 300), t0);
        q.hold(frame(2, 100), t0);
        q.hold(frame(3, 100), t0);
        let mut out = Vec::new();
        q.release_due(t0, &mut out);
        assert!(out.is_empty());
        q.release_due(t0 + Duration::from_micros(100), &mut out);
        assert_eq!(out.iter().map(|e| e.frame[0]).collect::<Vec<_>>(), [2, 3]);
        assert!(!q.is_empty());
        q.release_due(t0 + Duration::from_micros(300), &mut out);
        assert_eq!(out.len(), 3);
        assert!(q.is_empty());
    }
}
