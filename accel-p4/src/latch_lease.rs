//! Leases on switch-held latches: a client that dies while it holds a tuple latched
//! (`OptLatch`) would leave the tuple latched forever, since only its WRITE's ACK
//! releases it. The control plane watches the latched tuples and releases one whose
//! register cell — version *and* holder — has not changed for the lease
//! ([`LatchLease::sweep`], driven by the soft switch every [`LatchLease::interval`]).
//!
//! As with the software leases of in-place tables, breaking restores liveness, not the
//! tuple: a holder that died in the middle of a multi-packet WRITE may leave a partial
//! value behind, and a holder that was merely slow for longer than the lease may still
//! land its WRITE after the release. The lease must therefore exceed the longest time a
//! live client holds a latch: one WRITE with its retransmissions (the verbs RC gives
//! up after about 1.9 s by default), hence the 2-s default.
//!
//! On Tofino the sweep is a control-plane register read; the release is a conditional
//! update (compare the cell, then write) done by the data plane on a control packet
//! ([`crate::spec::LATCH_RELEASE`], `lease_release` in `p4/common/opt_latch.p4`), since
//! a plain register write could clobber a latch taken between the read and the write.
//! The model's pipeline lock makes its release conditional.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::model::LatchRegion;
use crate::pipeline::Pipeline;

/// Default lease of a switch-held latch.
pub const DEFAULT_LATCH_LEASE: Duration = Duration::from_secs(2);

/// The watcher: for each latched tuple, the cell seen and since when.
#[derive(Debug)]
pub struct LatchLease {
    lease: Duration,
    seen: HashMap<u32, (u32, Instant)>,
}

impl LatchLease {
    /// A watcher with `lease` (zero: latches are never broken).
    pub fn new(lease: Duration) -> LatchLease {
        LatchLease {
            lease,
            seen: HashMap::new(),
        }
    }

    /// How often to sweep: a quarter of the lease, at least every 10 ms; `None` when
    /// leases are off.
    pub fn interval(&self) -> Option<Duration> {
        (!self.lease.is_zero()).then(|| (self.lease / 4).max(Duration::from_millis(10)))
    }

    /// Look at every tuple of `regions` at `now`; release the latches whose cell has
    /// stayed the same for the lease. Returns the tuples released.
    pub fn sweep(
        &mut self,
        pipeline: &mut Pipeline,
        regions: &[LatchRegion],
        now: Instant,
    ) -> Vec<u32> {
        if self.lease.is_zero() {
            return Vec::new();
        }
        let mut held = HashMap::new();
        for r in regions {
            held.extend(pipeline.held_latches(r.first_tuple, r.tuples));
        }
        // Forget tuples no longer latched, restart the clock of those that changed.
        self.seen.retain(|t, _| held.contains_key(t));
        let mut broken = Vec::new();
        for (t, cell) in held {
            match self.seen.get(&t) {
                Some(&(c, since)) if c == cell => {
                    if now.saturating_duration_since(since) >= self.lease
                        && pipeline.break_latch(t, cell)
                    {
                        tracing::warn!(
                            tuple = t,
                            cell = format_args!("{cell:#x}"),
                            lease_ms = self.lease.as_millis() as u64,
                            "switch latch held past its lease: released"
                        );
                        self.seen.remove(&t);
                        broken.push(t);
                    }
                }
                _ => {
                    self.seen.insert(t, (cell, now));
                }
            }
        }
        broken.sort_unstable();
        broken
    }
}
