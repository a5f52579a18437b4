//! First fit: the lowest-addressed free extent that can hold the allocation.

use super::{Allocator, ExtentMap};

/// Lowest address first: simple, and keeps the top of a region free for large leases.
#[derive(Debug, Clone, Copy, Default)]
pub struct FirstFit;

impl Allocator for FirstFit {
    fn name(&self) -> &'static str {
        "first_fit"
    }

    fn place(&self, map: &ExtentMap, len: u64, align: u64) -> Option<u64> {
        map.extents()
            .find_map(|(start, ext)| map.fit_in(start, ext, len, align))
    }
}
