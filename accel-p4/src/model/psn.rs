//! 24-bit PSN arithmetic, as the stages' ALUs do it.

/// 24-bit PSN arithmetic: `a - b` as a signed distance.
pub fn psn_diff(a: u32, b: u32) -> i32 {
    ((a.wrapping_sub(b) << 8) as i32) >> 8
}

/// 24-bit PSN arithmetic: `a + b`.
pub fn psn_add(a: u32, b: u32) -> u32 {
    a.wrapping_add(b) & verbs::wire::PSN_MASK
}

/// 24-bit PSN arithmetic: `a - b`.
pub fn psn_sub(a: u32, b: u32) -> u32 {
    a.wrapping_sub(b) & verbs::wire::PSN_MASK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psn_arithmetic_wraps_at_24_bits() {
        assert_eq!(psn_diff(0, 0xFF_FFFF), 1);
        assert_eq!(psn_diff(0xFF_FFFF, 0), -1);
        assert_eq!(psn_add(0xFF_FFFF, 2), 1);
        assert_eq!(psn_sub(1, 2), 0xFF_FFFF);
    }
}
