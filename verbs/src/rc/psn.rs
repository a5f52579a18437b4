//! 24-bit packet sequence numbers with wrap-around arithmetic.

use crate::wire::PSN_MASK;

/// A packet sequence number (24 bits, modulo 2^24).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Psn(u32);

/// Half the PSN space: sequence comparisons are meaningful within this window.
pub const PSN_HALF: u32 = 1 << 23;

impl Psn {
    /// A PSN from any u32 (masked to 24 bits).
    pub fn new(v: u32) -> Psn {
        Psn(v & PSN_MASK)
    }

    /// The raw 24-bit value.
    pub fn get(self) -> u32 {
        self.0
    }

    /// `self + n` modulo 2^24.
    pub fn plus(self, n: u32) -> Psn {
        Psn(self.0.wrapping_add(n) & PSN_MASK)
    }

    /// `self − n` modulo 2^24.
    pub fn minus(self, n: u32) -> Psn {
        Psn(self.0.wrapping_sub(n) & PSN_MASK)
    }

    /// Forward distance from `base` to `self` modulo 2^24 (0..2^24).
    pub fn distance_from(self, base: Psn) -> u32 {
        self.0.wrapping_sub(base.0) & PSN_MASK
    }

    /// Signed difference `self − other` interpreted within ±2^23.
    pub fn diff(self, other: Psn) -> i32 {
        let d = self.distance_from(other);
        if d >= PSN_HALF {
            d as i32 - (1 << 24)
        } else {
            d as i32
        }
    }

    /// Whether `self` comes strictly before `other` in sequence order.
    pub fn before(self, other: Psn) -> bool {
        self.diff(other) < 0
    }
}

impl std::fmt::Display for Psn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_at_2_pow_24() {
        let p = Psn::new(PSN_MASK);
        assert_eq!(p.plus(1).get(), 0);
        assert_eq!(Psn::new(0).minus(1).get(), PSN_MASK);
        assert_eq!(Psn::new(2).diff(Psn::new(PSN_MASK)), 3);
        assert!(Psn::new(PSN_MASK).before(Psn::new(2)));
        assert!(!Psn::new(2).before(Psn::new(PSN_MASK)));
        assert_eq!(Psn::new(5).distance_from(Psn::new(PSN_MASK - 1)), 7);
    }

    #[test]
    fn masks_input() {
        assert_eq!(Psn::new(0x0123_4567).get(), 0x23_4567);
    }
}
