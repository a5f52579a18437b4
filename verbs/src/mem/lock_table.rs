//! Model of the NIC's atomic lock table (Jasny et al., TODS 2025, §3.2, Fig. 5/6).
//!
//! ConnectX NICs serialize RDMA atomics through an internal table of lock
//! slots indexed by the low 12 bits of the target address. Atomics to
//! different words whose addresses agree in those bits (e.g. latches placed
//! 4 KiB apart) land in the same slot and are serialized even though they
//! are logically uncontended. This model reproduces that: slot
//! `(va & 0xFFF) >> 3` of 512, held for the duration of the atomic plus a
//! configurable busy-wait modelling the NIC's atomic latency. Slots are
//! FIFO (ticket locks), like a hardware queue: waiting atomics are served
//! in arrival order.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::seqlock::backoff;

/// Number of slots: one per 8-byte word of a 4 KiB page.
pub const NIC_LOCK_SLOTS: usize = 512;

/// Counters of a [`NicLockTable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NicLockStats {
    /// Atomics that went through the table.
    pub acquisitions: u64,
    /// Atomics that found their slot held and had to wait.
    pub collisions: u64,
}

/// The NIC's table of atomic lock slots.
#[derive(Debug)]
pub struct NicLockTable {
    slots: Box<[Slot]>,
    hold: Duration,
    acquisitions: AtomicU64,
    collisions: AtomicU64,
}

impl Default for NicLockTable {
    fn default() -> NicLockTable {
        NicLockTable::new(Duration::ZERO)
    }
}

impl NicLockTable {
    /// A table whose slots stay held for `hold` (busy wait) per atomic, in
    /// addition to the atomic itself. `Duration::ZERO` models only the
    /// serialization.
    pub fn new(hold: Duration) -> NicLockTable {
        NicLockTable {
            slots: (0..NIC_LOCK_SLOTS).map(|_| Slot::default()).collect(),
            hold,
            acquisitions: AtomicU64::new(0),
            collisions: AtomicU64::new(0),
        }
    }

    /// How long each atomic holds its slot beyond the operation itself.
    pub fn hold(&self) -> Duration {
        self.hold
    }

    /// The slot an atomic at `va` maps to: `(va & 0xFFF) >> 3`.
    pub const fn slot_of(va: u64) -> usize {
        ((va & 0xFFF) >> 3) as usize
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> NicLockStats {
        NicLockStats {
            acquisitions: self.acquisitions.load(Ordering::Relaxed),
            collisions: self.collisions.load(Ordering::Relaxed),
        }
    }

    /// Resets the counters to zero.
    pub fn reset_stats(&self) {
        self.acquisitions.store(0, Ordering::Relaxed);
        self.collisions.store(0, Ordering::Relaxed);
    }

    /// Runs `op` (an atomic at `va`) while holding the slot of `va`, then
    /// keeps holding it for [`hold`](NicLockTable::hold).
    pub fn with_slot<R>(&self, va: u64, op: impl FnOnce() -> R) -> R {
        let Some(slot) = self.slots.get(Self::slot_of(va)) else {
            // Unreachable: slot_of is always below NIC_LOCK_SLOTS.
            return op();
        };
        self.acquisitions.fetch_add(1, Ordering::Relaxed);
        let ticket = slot.next.fetch_add(1, Ordering::Relaxed);
        if slot.serving.load(Ordering::Acquire) != ticket {
            self.collisions.fetch_add(1, Ordering::Relaxed);
            let mut spins = 0;
            while slot.serving.load(Ordering::Acquire) != ticket {
                backoff(&mut spins);
            }
        }
        let _release = SlotGuard(slot);
        let result = op();
        if !self.hold.is_zero() {
            let start = Instant::now();
            while start.elapsed() < self.hold {
                std::hint::spin_loop();
            }
        }
        result
    }
}

/// One lock slot: a ticket lock (tickets wrap around harmlessly).
#[derive(Debug, Default)]
struct Slot {
    /// Next ticket to hand out.
    next: AtomicU32,
    /// Ticket currently allowed to hold the slot.
    serving: AtomicU32,
}

/// Passes a slot to the next ticket on drop.
struct SlotGuard<'a>(&'a Slot);

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        self.0.serving.fetch_add(1, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_use_low_twelve_bits() {
        assert_eq!(NicLockTable::slot_of(0), 0);
        assert_eq!(NicLockTable::slot_of(4096), 0);
        assert_eq!(NicLockTable::slot_of(8), 1);
        assert_eq!(NicLockTable::slot_of(4096 * 7 + 8), 1);
        assert_eq!(NicLockTable::slot_of(0xFF8), 511);
        assert_eq!(NicLockTable::slot_of(u64::MAX), 511);
    }

    #[test]
    fn counts_acquisitions() {
        let t = NicLockTable::default();
        assert_eq!(t.with_slot(0, || 7), 7);
        t.with_slot(4096, || ());
        assert_eq!(
            t.stats(),
            NicLockStats {
                acquisitions: 2,
                collisions: 0
            }
        );
        t.reset_stats();
        assert_eq!(t.stats(), NicLockStats::default());
    }
}
