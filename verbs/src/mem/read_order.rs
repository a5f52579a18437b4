//! The order in which a multi-line READ observes its 64-byte lines, and the
//! knob that widens the window between two lines on purpose.
//!
//! PCIe orders the lines of a DMA write by address, but the read requests a
//! NIC issues for one RDMA READ may be served in any order (Jasny et al., TODS 2025, §4.2,
//! Fig. 1b). A region's read order decides which order the model uses, so a
//! synchronisation scheme can be tested against the orders real hardware may
//! produce.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use rand::Rng;

use super::rng::with_rng;

/// Order in which a READ spanning several 64-byte lines observes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ReadOrder {
    /// Lowest address first (what many papers wrongly assume hardware does).
    #[default]
    Ascending,
    /// Highest address first.
    Descending,
    /// A fresh random permutation for every READ.
    Random,
}

impl ReadOrder {
    /// Encoding used in the shared region header.
    pub(crate) const fn to_code(self) -> u64 {
        match self {
            ReadOrder::Ascending => 0,
            ReadOrder::Descending => 1,
            ReadOrder::Random => 2,
        }
    }

    /// Decodes [`ReadOrder::to_code`]; `None` for an unknown code.
    pub(crate) const fn from_code(code: u64) -> Option<ReadOrder> {
        match code {
            0 => Some(ReadOrder::Ascending),
            1 => Some(ReadOrder::Descending),
            2 => Some(ReadOrder::Random),
            _ => None,
        }
    }
}

impl fmt::Display for ReadOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ReadOrder::Ascending => "ascending",
            ReadOrder::Descending => "descending",
            ReadOrder::Random => "random",
        })
    }
}

/// Error returned when parsing a [`ReadOrder`] fails.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown read order {0:?} (expected ascending, descending or random)")]
pub struct ParseReadOrderError(pub String);

impl FromStr for ReadOrder {
    type Err = ParseReadOrderError;

    fn from_str(s: &str) -> Result<ReadOrder, ParseReadOrderError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "ascending" | "asc" => Ok(ReadOrder::Ascending),
            "descending" | "desc" => Ok(ReadOrder::Descending),
            "random" => Ok(ReadOrder::Random),
            _ => Err(ParseReadOrderError(s.to_owned())),
        }
    }
}

/// What a multi-line READ does between two lines.
///
/// Real NICs fetch the lines of one READ with several PCIe read requests
/// that are in flight at the same time, so a concurrent writer can land
/// between them. On a host with few cores, a software model would rarely be
/// preempted exactly between two lines; this knob widens that window **on
/// purpose** so torn multi-line reads become reproducible in tests and
/// experiments. It never affects single-line atomicity and costs nothing
/// when left at [`LineGap::None`] (the default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum LineGap {
    /// Go straight to the next line.
    #[default]
    None,
    /// Yield the thread (`std::thread::yield_now`) between lines.
    Yield,
    /// Busy-wait this many spin-loop iterations between lines.
    Spin(u32),
    /// Sleep this many microseconds between lines.
    SleepMicros(u32),
}

impl LineGap {
    const TAG_YIELD: u64 = 1 << 32;
    const TAG_SPIN: u64 = 2 << 32;
    const TAG_SLEEP: u64 = 3 << 32;

    /// Encodes the gap in one word (tag in the high half, argument in the low).
    pub(crate) const fn to_code(self) -> u64 {
        match self {
            LineGap::None => 0,
            LineGap::Yield => Self::TAG_YIELD,
            LineGap::Spin(n) => Self::TAG_SPIN | n as u64,
            LineGap::SleepMicros(n) => Self::TAG_SLEEP | n as u64,
        }
    }

    /// Decodes [`LineGap::to_code`]; unknown tags decode as `None`.
    pub(crate) const fn from_code(code: u64) -> LineGap {
        let arg = (code & 0xFFFF_FFFF) as u32;
        match code >> 32 {
            1 => LineGap::Yield,
            2 => LineGap::Spin(arg),
            3 => LineGap::SleepMicros(arg),
            _ => LineGap::None,
        }
    }

    /// Performs the gap.
    pub(crate) fn pause(self) {
        match self {
            LineGap::None => {}
            LineGap::Yield => std::thread::yield_now(),
            LineGap::Spin(n) => {
                for _ in 0..n {
                    std::hint::spin_loop();
                }
            }
            LineGap::SleepMicros(n) => std::thread::sleep(Duration::from_micros(u64::from(n))),
        }
    }
}

/// Reads of at most this many lines get a uniformly random permutation
/// (Fisher-Yates on a stack array); longer reads use a random affine
/// permutation `i -> (start + i * stride) mod n` with `gcd(stride, n) = 1`.
const SHUFFLE_MAX: usize = 64;

/// Calls `visit` with every index in `0..n` exactly once, in `order`,
/// without allocating. Stops at the first error.
pub(crate) fn for_each_line<E>(
    order: ReadOrder,
    n: u64,
    mut visit: impl FnMut(u64) -> Result<(), E>,
) -> Result<(), E> {
    match order {
        ReadOrder::Ascending => (0..n).try_for_each(visit),
        ReadOrder::Descending => (0..n).rev().try_for_each(visit),
        ReadOrder::Random if n <= 1 => (0..n).try_for_each(visit),
        ReadOrder::Random => {
            // Draw the permutation first: `visit` must not run while the
            // thread's generator is borrowed.
            let mut perm = [0u8; SHUFFLE_MAX];
            let affine = with_rng(|rng| {
                if let Ok(small) = usize::try_from(n)
                    && small <= SHUFFLE_MAX
                {
                    for (i, slot) in perm.iter_mut().enumerate().take(small) {
                        // `small <= 64`, so every index fits in a u8.
                        *slot = i as u8;
                    }
                    for i in (1..small).rev() {
                        let j = rng.random_range(0..=i);
                        perm.swap(i, j);
                    }
                    return None;
                }
                let start = rng.random_range(0..n);
                let mut stride = rng.random_range(1..n);
                while gcd(stride, n) != 1 {
                    stride = rng.random_range(1..n);
                }
                Some((start, stride))
            });
            let Some((start, stride)) = affine else {
                // n <= SHUFFLE_MAX here, so the cast is lossless.
                return perm[..n as usize]
                    .iter()
                    .try_for_each(|&i| visit(u64::from(i)));
            };
            let mut idx = start;
            for _ in 0..n {
                visit(idx)?;
                // idx, stride < n, so the sum is below 2n and the u128 add
                // cannot overflow.
                idx = ((u128::from(idx) + u128::from(stride)) % u128::from(n)) as u64;
            }
            Ok(())
        }
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(order: ReadOrder, n: u64) -> Vec<u64> {
        let mut v = Vec::new();
        for_each_line::<()>(order, n, |i| {
            v.push(i);
            Ok(())
        })
        .unwrap();
        v
    }

    #[test]
    fn orders_are_permutations() {
        for n in [0u64, 1, 2, 3, 4, 17, 64, 65, 100, 1000] {
            let asc: Vec<u64> = (0..n).collect();
            assert_eq!(collect(ReadOrder::Ascending, n), asc);
            let mut desc = asc.clone();
            desc.reverse();
            assert_eq!(collect(ReadOrder::Descending, n), desc);
            for _ in 0..20 {
                let mut r = collect(ReadOrder::Random, n);
                r.sort_unstable();
                assert_eq!(r, asc, "n={n}");
            }
        }
    }

    #[test]
    fn random_produces_all_permutations_of_four() {
        let mut seen = std::collections::HashSet::new();
        for _ in 0..5000 {
            seen.insert(collect(ReadOrder::Random, 4));
        }
        assert_eq!(seen.len(), 24);
    }

    #[test]
    fn random_long_reads_are_not_always_ascending() {
        let asc: Vec<u64> = (0..200).collect();
        assert!((0..10).any(|_| collect(ReadOrder::Random, 200) != asc));
    }

    #[test]
    fn visit_stops_at_first_error() {
        let mut count = 0;
        let r = for_each_line(ReadOrder::Random, 10, |_| {
            count += 1;
            if count == 3 { Err(()) } else { Ok(()) }
        });
        assert_eq!(r, Err(()));
        assert_eq!(count, 3);
    }

    #[test]
    fn parse_and_display() {
        for o in [
            ReadOrder::Ascending,
            ReadOrder::Descending,
            ReadOrder::Random,
        ] {
            assert_eq!(o.to_string().parse::<ReadOrder>().unwrap(), o);
            assert_eq!(ReadOrder::from_code(o.to_code()), Some(o));
        }
        assert_eq!(ReadOrder::default(), ReadOrder::Ascending);
        assert!("sideways".parse::<ReadOrder>().is_err());
        assert_eq!(ReadOrder::from_code(3), None);
    }

    #[test]
    fn line_gap_codes_roundtrip() {
        for g in [
            LineGap::None,
            LineGap::Yield,
            LineGap::Spin(0),
            LineGap::Spin(u32::MAX),
            LineGap::SleepMicros(7),
        ] {
            assert_eq!(LineGap::from_code(g.to_code()), g);
        }
    }
}
