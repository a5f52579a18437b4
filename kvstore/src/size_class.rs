//! Allocation size classes shared by both indexes.
//!
//! Remote objects (Clover version nodes, RACE KV blocks) are carved from leased
//! chunks in fixed size classes, so a freed object can be reused by any later
//! object of the same class. The table runs from 64 B to 1 MiB: every power of two
//! plus the midpoint 1.5 × 2ⁿ between neighbours from 128 B up (64, 128, 192, 256,
//! 384, 512, 768, …, 786432, 1048576), 28 classes in all. Every class is a whole
//! number of 64-byte lines, so objects carved back to back stay line-aligned (a
//! Clover node must be, and a RACE slot records lengths in lines); that is why
//! there is no 96-byte class. Above 128 B internal fragmentation stays below one
//! third. Every class is usable: there is no gap in the table.

/// The table itself is shared with the memory node's RPC workers ([`dmkv_api::layout`]).
pub(crate) use dmkv_api::layout::{MAX_CLASS, NUM_CLASSES, SIZE_CLASSES};

/// The smallest size class holding `len` bytes, or `None` above [`MAX_CLASS`].
pub(crate) fn class_for_len(len: usize) -> Option<usize> {
    let i = SIZE_CLASSES.partition_point(|&c| c < len);
    SIZE_CLASSES.get(i).copied()
}

/// The position of `size` in [`SIZE_CLASSES`], or `None` when it is not a class.
pub(crate) fn class_index(size: usize) -> Option<usize> {
    SIZE_CLASSES.binary_search(&size).ok()
}

/// Whether `size` is one of the size classes.
#[cfg(test)]
pub fn is_size_class(size: usize) -> bool {
    class_index(size).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_shape() {
        assert_eq!(SIZE_CLASSES[0], 64);
        assert_eq!(SIZE_CLASSES[1], 128);
        assert_eq!(SIZE_CLASSES[2], 192);
        assert_eq!(SIZE_CLASSES[NUM_CLASSES - 1], MAX_CLASS);
        for w in SIZE_CLASSES[1..].windows(2) {
            assert!(w[0] < w[1]);
            // Growth at most 1.5x between neighbours: fragmentation below a third.
            assert!(w[1] * 2 <= w[0] * 3, "{} -> {}", w[0], w[1]);
        }
        for c in SIZE_CLASSES {
            assert_eq!(c % 64, 0, "{c} is not line-aligned");
        }
        for c in [
            384,
            768,
            1536,
            3 << 10,
            6 << 10,
            12 << 10,
            24 << 10,
            48 << 10,
            768 << 10,
        ] {
            assert!(is_size_class(c), "{c} missing");
        }
    }

    #[test]
    fn class_for_len_picks_smallest_fit() {
        assert_eq!(class_for_len(0), Some(64));
        assert_eq!(class_for_len(64), Some(64));
        assert_eq!(class_for_len(65), Some(128));
        assert_eq!(class_for_len(129), Some(192));
        assert_eq!(class_for_len(2049), Some(3072));
        assert_eq!(class_for_len(MAX_CLASS), Some(MAX_CLASS));
        assert_eq!(class_for_len(MAX_CLASS + 1), None);
        for (i, c) in SIZE_CLASSES.iter().enumerate() {
            assert_eq!(class_for_len(*c), Some(*c));
            assert_eq!(class_index(*c), Some(i));
            if i > 0 {
                assert_eq!(class_for_len(SIZE_CLASSES[i - 1] + 1), Some(*c));
            }
        }
        assert_eq!(class_index(100), None);
    }
}
