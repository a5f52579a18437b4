//! What the catalog shows of itself: counts for metrics and health, and the
//! allocation invariants tests check.

use std::collections::BTreeMap;

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

    /// Checks the allocation invariants (tests): leases (every copy of each) do not
    /// overlap, copies of a lease lie at the same offset from their region's base,
    /// and for every region free + leased bytes equal its length.
    pub fn check_invariants(&self) -> Result<(), String> {
        for l in self.leases.values().filter(|l| !l.replicas.is_empty()) {
            let offsets: Vec<Option<u64>> = l
                .extents()
                .iter()
                .map(|&(m, rkey, va)| {
                    let region = self
                        .memnodes
                        .get(&m)?
                        .rec
                        .regions
                        .iter()
                        .find(|r| r.rkey == rkey)?;
                    va.checked_sub(region.base_va)
                })
                .collect();
            if offsets.iter().any(|o| *o != offsets[0]) || offsets[0].is_none() {
                return Err(format!(
                    "copies of lease {} differ in offset: {offsets:?}",
                    l.id
                ));
            }
        }
        for n in self.memnodes.values() {
            for (r, m) in n.rec.regions.iter().zip(&n.maps) {
                let mut ls: Vec<(u64, u64, u64)> = self
                    .leases
                    .values()
                    .flat_map(|l| {
                        l.extents()
                            .into_iter()
                            .filter(|&(mid, rkey, _)| mid == n.rec.id && rkey == r.rkey)
                            .map(|(_, _, va)| (va, l.len, l.id))
                    })
                    .collect();
                ls.sort_unstable();
                for w in ls.windows(2) {
                    if w[0].0 + w[0].1 > w[1].0 {
                        return Err(format!("leases {} and {} overlap", w[0].2, w[1].2));
                    }
                }
                let leased: u64 = ls.iter().map(|l| l.1).sum();
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
