//! Round robin: spread leases evenly over the memnodes that can take them.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::{Candidate, Placement};

/// Rotates through candidates; the cursor is not persisted (after a restart it starts
/// again at the first memnode).
#[derive(Debug, Default)]
pub struct RoundRobin {
    next: AtomicUsize,
}

impl Placement for RoundRobin {
    fn name(&self) -> &'static str {
        "round_robin"
    }

    fn choose(&self, candidates: &[Candidate]) -> usize {
        self.next.fetch_add(1, Ordering::Relaxed) % candidates.len().max(1)
    }
}
