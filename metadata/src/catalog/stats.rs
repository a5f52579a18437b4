//! What the catalog shows of itself: counts for metrics and health, and the
//! allocation invariants tests check.

use std::collections::BTreeMap;

use super::records::LeaseRecord;
use super::state::Catalog;
use crate::alloc::ExtentMap;
use crate::expiry::{self, LeaseState};

/// Counts for metrics and health.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Per memnode: (id, name, healthy, capacity, leased bytes, free bytes).
    pub memnodes: Vec<(u64, String, bool, u64, u64, u64)>,
    /// Active leases.
    pub leases_active: usize,
    /// Expired leases in their grace period.
    pub leases_expired: usize,
    /// Tables by index.
    pub tables: BTreeMap<&'static str, usize>,
    /// Tables by health and memnodes by state.
    pub membership: super::health::Membership,
}

impl Catalog {
    /// Counts for metrics and health.
    pub fn stats(&self, now_ms: u64) -> Stats {
        let mut s = Stats::default();
        for n in self.memnodes.values() {
            let free: u64 = n.maps.iter().map(ExtentMap::free_bytes).sum();
            let used: u64 = n.maps.iter().map(ExtentMap::used_bytes).sum();
            s.memnodes.push((
                n.rec.id,
                n.rec.name.clone(),
                self.healthy(n, now_ms),
                n.rec.capacity,
                used,
                free,
            ));
        }
        for l in self.leases.values() {
            match expiry::state(l.expires_at_ms, now_ms, self.cfg.grace_ms) {
                LeaseState::Active => s.leases_active += 1,
                _ => s.leases_expired += 1,
            }
        }
        for k in ["clover", "race", "inplace"] {
            s.tables.insert(k, 0);
        }
        for t in self.tables.values() {
            *s.tables.entry(t.index().as_str()).or_default() += 1;
        }
        s.membership = self.membership(now_ms);
        s
    }

    /// Checks the allocation invariants (tests): leases do not overlap, and for every
    /// region free + leased bytes equal its length.
    pub fn check_invariants(&self) -> Result<(), String> {
        for n in self.memnodes.values() {
            for (r, m) in n.rec.regions.iter().zip(&n.maps) {
                let mut ls: Vec<&LeaseRecord> = self
                    .leases
                    .values()
                    .filter(|l| l.memnode_id == n.rec.id && l.rkey == r.rkey)
                    .collect();
                ls.sort_by_key(|l| l.va);
                for w in ls.windows(2) {
                    if w[0].va + w[0].len > w[1].va {
                        return Err(format!("leases {} and {} overlap", w[0].id, w[1].id));
                    }
                }
                let leased: u64 = ls.iter().map(|l| l.len).sum();
                if leased + m.free_bytes() != r.len {
                    return Err(format!(
                        "memnode {} region {:#x}: leased {leased} + free {} != {}",
                        n.rec.id,
                        r.rkey,
                        m.free_bytes(),
                        r.len
                    ));
                }
            }
        }
        Ok(())
    }
}
