//! Most free: the memnode with the most free bytes (ties: lowest id), which balances
//! memory use across memnodes of different sizes.

use super::{Candidate, Placement};

/// Picks the candidate with the most free bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct MostFree;

impl Placement for MostFree {
    fn name(&self) -> &'static str {
        "most_free"
    }

    fn choose(&self, candidates: &[Candidate]) -> usize {
        candidates
            .iter()
            .enumerate()
            .max_by_key(|(i, c)| (c.free_bytes, std::cmp::Reverse(*i)))
            .map(|(i, _)| i)
            .unwrap_or(0)
    }
}
