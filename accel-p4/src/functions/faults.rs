//! `FaultInject`: seeded drop, duplicate, reorder and delay per direction, for tests.
//!
//! The `fault_policy` table gives each direction its probabilities (in 1/65536); the
//! `fault_rng` register holds one xorshift32 state per direction, advanced once per
//! packet, so a seed reproduces the same decisions for the same packet sequence. A
//! reordered packet is held back and sent right after the next packet of its direction
//! (or when the switch flushes on idle) — that buffer is test machinery outside the
//! register model; on hardware the P4 port uses the `Random` extern and recirculation
//! instead (see `p4/README.md`).

use crate::model::{Ctx, Emitted, Metadata, Packet, Register, RegisterAccess, Stage};
use crate::spec::{self, REG_FAULT_RNG};

/// Seed used when a generator's state is zero (xorshift32 never leaves zero).
const NONZERO_SEED: u32 = 0x9E37_79B9;

fn xorshift32(mut x: u32) -> u32 {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    x
}

/// A second, independent 32-bit draw from the same state (a hash in P4).
fn mix32(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7FEB_352D);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846C_A68B);
    x ^ (x >> 16)
}

/// The `FaultInject` control.
#[derive(Debug)]
pub struct FaultInject {
    fault_rng: Register<2>,
    held: [Option<Emitted>; 2],
}

impl Default for FaultInject {
    fn default() -> FaultInject {
        FaultInject::new()
    }
}

impl FaultInject {
    /// Zeroed generators, nothing held.
    pub fn new() -> FaultInject {
        FaultInject {
            fault_rng: Register::new(&REG_FAULT_RNG),
            held: [None, None],
        }
    }

    /// Control plane: seed both generators from `seed`.
    pub fn seed(&mut self, seed: u64) {
        for dir in 0..2u64 {
            let s = mix32((seed as u32) ^ mix32((seed >> 32) as u32 ^ dir as u32));
            self.fault_rng.cp_write(
                dir as usize,
                u64::from(if s == 0 { NONZERO_SEED } else { s }),
            );
        }
    }

    /// After deparsing: send, duplicate or hold the frame as decided in `apply`.
    pub fn egress(&mut self, meta: &Metadata, frame: Emitted) -> Vec<Emitted> {
        let dir = (meta.dir & 1) as usize;
        let mut out = Vec::with_capacity(3);
        if meta.duplicate {
            out.push(frame.clone());
        }
        if meta.hold && self.held[dir].is_none() {
            self.held[dir] = Some(frame);
            return out;
        }
        out.push(frame);
        if let Some(h) = self.held[dir].take() {
            out.push(h);
        }
        out
    }

    /// Release held frames.
    pub fn flush(&mut self) -> Vec<Emitted> {
        self.held.iter_mut().filter_map(Option::take).collect()
    }
}

impl Stage for FaultInject {
    fn name(&self) -> &'static str {
        "FaultInject"
    }

    fn apply(&mut self, pkt: &mut Packet, ctx: &mut Ctx<'_>) {
        if ctx.mode & spec::mode::FAULTS == 0 {
            return;
        }
        let dir = pkt.meta.dir & 1;
        let Some(policy) = ctx.tables.fault_policy.lookup(&dir).copied() else {
            return;
        };
        let Some(x) = self.fault_rng.rmw(pkt.id, dir, |s| {
            let n = xorshift32(if s == 0 { NONZERO_SEED } else { s });
            (n, n)
        }) else {
            return;
        };
        let y = mix32(x);
        let draws = [x & 0xFFFF, x >> 16, y & 0xFFFF, y >> 16];
        let counters = &mut ctx.counters.faults;
        if draws[0] < policy.drop {
            counters.dropped += 1;
            pkt.meta.drop = true;
            return;
        }
        if draws[1] < policy.duplicate {
            counters.duplicated += 1;
            pkt.meta.duplicate = true;
        }
        if draws[2] < policy.reorder {
            counters.reordered += 1;
            pkt.meta.hold = true;
        }
        if draws[3] < policy.delay && policy.delay_us > 0 {
            counters.delayed += 1;
            pkt.meta.delay_us = policy.delay_us;
        }
    }

    fn registers(&self) -> Vec<&dyn RegisterAccess> {
        vec![&self.fault_rng]
    }

    fn registers_mut(&mut self) -> Vec<&mut dyn RegisterAccess> {
        vec![&mut self.fault_rng]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generators_never_stick_at_zero() {
        let mut x = NONZERO_SEED;
        for _ in 0..1000 {
            x = xorshift32(x);
            assert_ne!(x, 0);
        }
        let mut f = FaultInject::new();
        f.seed(0);
        assert!(f.fault_rng.dump().iter().all(|&v| v != 0));
    }
}
