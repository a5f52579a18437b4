//! Where a new allocation goes: a memnode chosen by the placement policy and an
//! extent of one of its regions chosen by the allocator, reserved in the free map;
//! and giving an extent back.

use super::config::{MIN_GRANULE, granule};
use super::error::{CatalogError, conflict, memnode_not_found};
use super::records::LeaseRecord;
use super::state::{Catalog, Node};
use crate::alloc::ExtentMap;
use crate::placement::Candidate;

/// How a new allocation is sized and aligned.
#[derive(Debug, Clone, Copy)]
pub(super) enum Sizing {
    /// Rounded up to (and aligned to) the region's chunk granule: client leases.
    Chunks,
    /// Rounded up to 4 KiB, 4 KiB aligned: table-owned memory.
    Exact,
}

impl Catalog {
    /// Chooses a memnode (policy) and a place in one of its regions (mechanism), and
    /// reserves it. Returns (memnode, region index, va, len).
    pub(super) fn place(
        &mut self,
        allowed: Option<&[u64]>,
        explicit: Option<u64>,
        bytes: u64,
        sizing: Sizing,
        now_ms: u64,
    ) -> Result<(u64, usize, u64, u64), CatalogError> {
        let chunk = self.cfg.chunk_size;
        let shape = |region_len: u64| -> (u64, u64) {
            match sizing {
                Sizing::Chunks => {
                    let g = granule(region_len, chunk);
                    (bytes.div_ceil(g).saturating_mul(g), g)
                }
                Sizing::Exact => (bytes.next_multiple_of(MIN_GRANULE), MIN_GRANULE),
            }
        };
        if let Some(id) = explicit {
            let node = self
                .memnodes
                .get(&id)
                .ok_or_else(|| memnode_not_found(id))?;
            if !self.healthy(node, now_ms) {
                return Err(conflict(
                    "memnode_unhealthy",
                    format!(
                        "memnode {id} ({}) has not heartbeated for {} ms",
                        node.rec.name,
                        now_ms.saturating_sub(node.last_heartbeat_ms)
                    ),
                ));
            }
            if node.rec.draining {
                return Err(conflict(
                    "memnode_draining",
                    format!(
                        "memnode {id} ({}) is draining: it takes no new memory",
                        node.rec.name
                    ),
                ));
            }
        }
        let eligible: Vec<u64> = self
            .memnodes
            .values()
            .filter(|n| explicit.is_none_or(|e| e == n.rec.id))
            .filter(|n| allowed.is_none_or(|a| a.is_empty() || a.contains(&n.rec.id)))
            .filter(|n| self.healthy(n, now_ms) && !n.rec.draining)
            .map(|n| n.rec.id)
            .collect();
        if eligible.is_empty() {
            return Err(CatalogError::NoMemnodes(
                "no healthy memnode is registered (for this request); start a memnode with --metadata"
                    .into(),
            ));
        }
        let fits = |n: &Node| {
            n.maps.iter().any(|m| {
                let (len, align) = shape(m.len());
                len <= m.largest_fit(align)
            })
        };
        let candidates: Vec<Candidate> = eligible
            .iter()
            .map(|id| &self.memnodes[id])
            .filter(|n| fits(n))
            .map(|n| Candidate {
                memnode_id: n.rec.id,
                free_bytes: n.maps.iter().map(ExtentMap::free_bytes).sum(),
            })
            .collect();
        if candidates.is_empty() {
            let free: u64 = eligible
                .iter()
                .flat_map(|id| &self.memnodes[id].maps)
                .map(ExtentMap::free_bytes)
                .sum();
            let largest = eligible
                .iter()
                .flat_map(|id| &self.memnodes[id].maps)
                .map(|m| m.largest_fit(MIN_GRANULE))
                .max()
                .unwrap_or(0);
            return Err(CatalogError::OutOfMemory(format!(
                "out of memory: no healthy memnode has a free extent for {bytes} bytes (rounded up to its chunk size); {free} bytes free on {} memnode(s), largest free extent {largest} bytes",
                eligible.len()
            )));
        }
        let chosen = candidates[self.placement.choose(&candidates).min(candidates.len() - 1)];
        let allocator = &self.allocator;
        let node = self
            .memnodes
            .get_mut(&chosen.memnode_id)
            .expect("candidate exists");
        for (idx, map) in node.maps.iter_mut().enumerate() {
            let (len, align) = shape(map.len());
            if let Some(va) = map.allocate(allocator.as_ref(), len, align) {
                return Ok((chosen.memnode_id, idx, va, len));
            }
        }
        Err(CatalogError::OutOfMemory(format!(
            "out of memory on memnode {}",
            chosen.memnode_id
        )))
    }

    /// Returns the extent of `l` to its region's free map.
    pub(super) fn release(&mut self, l: &LeaseRecord) {
        if let Some(node) = self.memnodes.get_mut(&l.memnode_id)
            && let Some(idx) = node.rec.regions.iter().position(|r| r.rkey == l.rkey)
            && let Err(e) = node.maps[idx].release(l.va, l.len)
        {
            tracing::error!(lease = l.id, error = %e, "releasing a lease's extent failed");
        }
    }
}
