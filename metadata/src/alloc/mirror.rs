//! Mirrored placement: one offset range, relative to each region's base, that is
//! free in every one of several regions (the members of a replica set), so a
//! replicated table's data lies at the same offset on every member.

use super::ExtentMap;

/// The free offset ranges `(offset, len)` common to every map, in offset order
/// (the intersection of their free extents, each taken relative to its base).
pub fn common_free(maps: &[&ExtentMap]) -> Vec<(u64, u64)> {
    let Some((first, rest)) = maps.split_first() else {
        return Vec::new();
    };
    let relative = |m: &ExtentMap| -> Vec<(u64, u64)> {
        m.extents().map(|(s, l)| (s - m.base(), l)).collect()
    };
    let mut common = relative(first);
    for m in rest {
        common = intersect(&common, &relative(m));
    }
    common
}

/// The intersection of two sorted lists of disjoint ranges `(start, len)`.
fn intersect(a: &[(u64, u64)], b: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < a.len() && j < b.len() {
        let (a0, a1) = (a[i].0, a[i].0 + a[i].1);
        let (b0, b1) = (b[j].0, b[j].0 + b[j].1);
        let (lo, hi) = (a0.max(b0), a1.min(b1));
        if lo < hi {
            out.push((lo, hi - lo));
        }
        if a1 <= b1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

/// Where a mirrored allocation goes in `maps`: the first common free range (lowest
/// offset) that holds `want` bytes at an `align`-aligned offset, granting `want`;
/// else the largest common range that holds `min`, granting all of it (whole
/// 64-byte lines) up to `want`. Returns (offset, len); reserve it in every map.
pub fn mirrored_fit(maps: &[&ExtentMap], want: u64, min: u64, align: u64) -> Option<(u64, u64)> {
    let align = align.max(super::MIN_ALIGN);
    let aligned = |(off, len): (u64, u64)| -> Option<(u64, u64)> {
        let a = off.checked_next_multiple_of(align)?;
        let room = (off + len).checked_sub(a)?;
        Some((a, room - room % super::MIN_ALIGN))
    };
    let common = common_free(maps);
    if let Some((off, _)) = common
        .iter()
        .filter_map(|&r| aligned(r))
        .find(|&(_, room)| room >= want)
    {
        return Some((off, want));
    }
    common
        .iter()
        .filter_map(|&r| aligned(r))
        .filter(|&(_, room)| room >= min.max(1))
        .fold(None, |best: Option<(u64, u64)>, (off, room)| match best {
            Some((_, b)) if b >= room => best,
            _ => Some((off, room.min(want))),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_same_offsets_free_everywhere() {
        let mut a = ExtentMap::new(0x1000, 0x10000);
        let mut b = ExtentMap::new(0x9000_0000, 0x8000);
        a.reserve(0x1000, 0x400).unwrap(); // a: offsets 0x400..0x10000 free
        b.reserve(0x9000_0800, 0x400).unwrap(); // b: 0..0x800, 0xc00..0x8000
        assert_eq!(
            common_free(&[&a, &b]),
            vec![(0x400, 0x400), (0xc00, 0x8000 - 0xc00)]
        );
        assert_eq!(
            mirrored_fit(&[&a, &b], 0x400, 0x400, 64),
            Some((0x400, 0x400))
        );
        assert_eq!(
            mirrored_fit(&[&a, &b], 0x800, 0x800, 64),
            Some((0xc00, 0x800))
        );
        assert_eq!(
            mirrored_fit(&[&a, &b], 0x8000, 0x100, 64),
            Some((0xc00, 0x8000 - 0xc00)),
            "the largest common range when no whole one fits"
        );
        assert_eq!(mirrored_fit(&[&a, &b], 0x8000, 0x8000, 64), None);
        assert_eq!(
            mirrored_fit(&[&a, &b], 0x100, 0x100, 0x1000),
            Some((0x1000, 0x100))
        );
    }

    proptest! {
        /// Random reservations in three maps: every mirrored fit is free at the same
        /// offset in all of them, and when none is found no common range fits.
        #[test]
        fn a_mirrored_fit_is_free_in_every_map(
            taken in proptest::collection::vec((0usize..3, 0u64..1024, 1u64..64), 0..40),
            want in 1u64..256,
        ) {
            let mut maps = [
                ExtentMap::new(0, 64 * 1024),
                ExtentMap::new(0x10_0000, 64 * 1024),
                ExtentMap::new(0x7000_0000, 48 * 1024),
            ];
            for (m, at, lines) in taken {
                let base = maps[m].base();
                let _ = maps[m].reserve(base + at * 64, lines * 64);
            }
            let refs: Vec<&ExtentMap> = maps.iter().collect();
            let want = want * 64;
            match mirrored_fit(&refs, want, want, 64) {
                Some((off, len)) => {
                    prop_assert_eq!(len, want);
                    for m in &mut maps {
                        let base = m.base();
                        prop_assert!(m.reserve(base + off, len).is_ok());
                    }
                }
                None => prop_assert!(common_free(&refs).iter().all(|&(_, l)| l < want)),
            }
        }
    }
}
