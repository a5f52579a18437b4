//! Best fit: the smallest free extent that can hold the allocation (ties: lowest address).

use super::{Allocator, ExtentMap};

/// Smallest hole first: fewer large extents get split.
#[derive(Debug, Clone, Copy, Default)]
pub struct BestFit;

impl Allocator for BestFit {
    fn name(&self) -> &'static str {
        "best_fit"
    }

    fn place(&self, map: &ExtentMap, len: u64, align: u64) -> Option<u64> {
        map.extents()
            .filter_map(|(start, ext)| map.fit_in(start, ext, len, align).map(|va| (ext, va)))
            .min_by_key(|&(ext, va)| (ext, va))
            .map(|(_, va)| va)
    }
}
