//! Where a new allocation goes: a memnode chosen by the placement policy and an
//! extent of one of its regions chosen by the allocator, reserved in the free map;
//! and giving an extent back.
//!
//! Client leases are aligned to 64 bytes only (what the client's carving needs:
//! every size class is a whole number of 64-byte lines), so memory handed back at
//! 64-byte granularity is reusable at that granularity. A lease request names what
//! it wants (rounded up to the region's chunk granule) and the least it can use;
//! where it lands, in order of preference:
//!
//! 1. for a data lease, right after a run of memory its table adopted already, when
//!    the free extent there holds at least [`RUN_CONTINUATION_MIN`] (or the whole
//!    request): the next session's data then extends the same run, and its
//!    hand-over merges into the run's record instead of adding one;
//! 2. a full chunk where the allocator strategy says (a data lease at the top
//!    of the free extent the strategy picks: it starts a new run there, with room
//!    to grow, away from where other tables' runs end);
//! 3. the largest free extent that still holds the minimum, so fragmentation never
//!    makes a memnode with free memory report out of memory.
//!
//! Memory of a replicated table is mirrored ([`Catalog::place_mirrored`]): the same
//! offset range from the region base is reserved on every member of one of the
//! table's replica sets (first fit over the intersection of the members' free
//! maps, else the largest common range that holds the minimum; runs are not
//! continued there).

use super::config::granule;
use super::error::{CatalogError, conflict, memnode_not_found};
use super::records::{CopyRecord, LeaseRecord, Owner};
use super::state::{Catalog, Node};
use crate::alloc::{ExtentMap, MIN_ALIGN, mirrored_fit};
use crate::placement::Candidate;

use super::config::MIN_GRANULE;

/// A data lease continues its table's run when the free extent after the run holds
/// at least this much (or the whole request): smaller tails are left for the
/// partial grants of a nearly full memnode, so a session does not start with a
/// sliver.
pub const RUN_CONTINUATION_MIN: u64 = 64 << 10;

/// How a new allocation is sized and aligned.
#[derive(Debug, Clone, Copy)]
pub(super) enum Sizing<'a> {
    /// Client leases: `bytes` rounded up to the region's chunk granule, 64-byte
    /// aligned; at least `min` bytes when no free extent holds the whole request.
    Chunks {
        /// The least the holder can use.
        min: u64,
        /// The table a data lease holds data of (its runs are continued).
        table: Option<&'a str>,
    },
    /// Rounded up to 4 KiB, 4 KiB aligned: table-owned memory (a RACE directory,
    /// an in-place tuple area), all or nothing.
    Exact,
}

/// What one region of a memnode can be asked for: the wanted length, the least
/// acceptable length, and the alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Shape {
    want: u64,
    min: u64,
    align: u64,
}

impl Sizing<'_> {
    fn shape(self, bytes: u64, region_len: u64, chunk: u64) -> Shape {
        match self {
            Sizing::Chunks { min, .. } => {
                let g = granule(region_len, chunk);
                let want = bytes.div_ceil(g).saturating_mul(g);
                let min = min
                    .max(1)
                    .checked_next_multiple_of(MIN_ALIGN)
                    .unwrap_or(u64::MAX)
                    .min(want);
                Shape {
                    want,
                    min,
                    align: MIN_ALIGN,
                }
            }
            Sizing::Exact => {
                let want = bytes
                    .checked_next_multiple_of(MIN_GRANULE)
                    .unwrap_or(u64::MAX);
                Shape {
                    want,
                    min: want,
                    align: MIN_GRANULE,
                }
            }
        }
    }
}

impl Catalog {
    /// Chooses a memnode (policy) and a place in one of its regions (mechanism), and
    /// reserves it. Memnodes that can take the whole request are preferred; when
    /// none can, those with a free extent of at least the minimum. Returns
    /// (memnode, region index, va, len).
    pub(super) fn place(
        &mut self,
        allowed: Option<&[u64]>,
        explicit: Option<u64>,
        bytes: u64,
        sizing: Sizing<'_>,
        now_ms: u64,
    ) -> Result<(u64, usize, u64, u64), CatalogError> {
        let chunk = self.cfg.chunk_size;
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
        let fits = |n: &Node, whole: bool| {
            n.maps.iter().any(|m| {
                let s = sizing.shape(bytes, m.len(), chunk);
                let need = if whole { s.want } else { s.min };
                need <= m.largest_fit(s.align)
            })
        };
        let candidates = |whole: bool| -> Vec<Candidate> {
            eligible
                .iter()
                .map(|id| &self.memnodes[id])
                .filter(|n| fits(n, whole))
                .map(|n| Candidate {
                    memnode_id: n.rec.id,
                    free_bytes: n.maps.iter().map(ExtentMap::free_bytes).sum(),
                })
                .collect()
        };
        let mut cands = candidates(true);
        if cands.is_empty() {
            cands = candidates(false);
        }
        if cands.is_empty() {
            let free: u64 = eligible
                .iter()
                .flat_map(|id| &self.memnodes[id].maps)
                .map(ExtentMap::free_bytes)
                .sum();
            let largest = eligible
                .iter()
                .flat_map(|id| &self.memnodes[id].maps)
                .map(|m| m.largest_fit(MIN_ALIGN))
                .max()
                .unwrap_or(0);
            let least = match sizing {
                Sizing::Chunks { min, .. } => min.min(bytes),
                Sizing::Exact => bytes,
            };
            return Err(CatalogError::OutOfMemory(format!(
                "out of memory: no healthy memnode has a free extent for {least} bytes; {free} bytes free on {} memnode(s), largest free extent {largest} bytes",
                eligible.len()
            )));
        }
        let chosen = cands[self.placement.choose(&cands).min(cands.len() - 1)].memnode_id;
        let run_ends = match sizing {
            Sizing::Chunks { table: Some(t), .. } => self.run_ends(chosen, t),
            _ => Vec::new(),
        };
        let allocator = &self.allocator;
        let Some(node) = self.memnodes.get_mut(&chosen) else {
            return Err(memnode_not_found(chosen));
        };
        let shapes: Vec<Shape> = node
            .maps
            .iter()
            .map(|m| sizing.shape(bytes, m.len(), chunk))
            .collect();
        // 1. Continue one of the table's runs.
        for &(rkey, end) in &run_ends {
            let Some(idx) = node.rec.regions.iter().position(|r| r.rkey == rkey) else {
                continue;
            };
            let s = shapes[idx];
            let map = &mut node.maps[idx];
            let Some(ext) = map.free_at(end) else {
                continue;
            };
            let len = grant_len(ext, s);
            if len >= s.min.max(RUN_CONTINUATION_MIN.min(s.want)) && map.reserve(end, len).is_ok() {
                return Ok((chosen, idx, end, len));
            }
        }
        // 2. A whole chunk; a data lease starts a new run of its table at the top
        // of the extent the strategy picks, so the run has room to grow and the
        // next table's new run does not start right after this one.
        let new_run = matches!(sizing, Sizing::Chunks { table: Some(_), .. });
        for (idx, map) in node.maps.iter_mut().enumerate() {
            let s = shapes[idx];
            let va = if new_run {
                map.allocate_high(allocator.as_ref(), s.want, s.align)
            } else {
                map.allocate(allocator.as_ref(), s.want, s.align)
            };
            if let Some(va) = va {
                return Ok((chosen, idx, va, s.want));
            }
        }
        // 3. The largest extent that holds the minimum.
        let best = node
            .maps
            .iter()
            .enumerate()
            .filter_map(|(idx, m)| {
                let s = shapes[idx];
                let (va, len) = m.largest_extent(s.min, s.align)?;
                Some((idx, va, grant_len(len, s)))
            })
            .filter(|&(idx, _, len)| len >= shapes[idx].min)
            .max_by_key(|&(idx, _, len)| (len, std::cmp::Reverse(idx)));
        if let Some((idx, va, len)) = best
            && node.maps[idx].reserve(va, len).is_ok()
        {
            return Ok((chosen, idx, va, len));
        }
        Err(CatalogError::OutOfMemory(format!(
            "out of memory on memnode {chosen}"
        )))
    }

    /// Chooses one of a replicated table's replica `sets` (the one whose home is
    /// `explicit`, if given; else by the placement policy among the sets whose
    /// members are all healthy and share a free range) and reserves the same
    /// offset range, relative to the region base, on every member: the first
    /// common range that holds the whole request, else the largest that holds the
    /// minimum. Returns (home, region index, va on the home, len, every copy in the
    /// set's order).
    ///
    /// `homes[k]` is the home memnode of `sets[k]` (the table's `memnodes`): a set
    /// keeps its home when a failure removes members, and the answer is given in
    /// the home's coordinates (its id and the va of the range in its region), which
    /// is how clients name the memory whichever members hold it now.
    pub(super) fn place_mirrored(
        &mut self,
        homes: &[u64],
        sets: &[Vec<u64>],
        explicit: Option<u64>,
        bytes: u64,
        sizing: Sizing<'_>,
        now_ms: u64,
    ) -> Result<(u64, usize, u64, u64, Vec<CopyRecord>), CatalogError> {
        let chunk = self.cfg.chunk_size;
        if let Some(id) = explicit
            && !homes.contains(&id)
        {
            return Err(CatalogError::Invalid(format!(
                "memnode {id} is not a home memnode of this replicated table; its homes are {homes:?}"
            )));
        }
        // (set, region index, offset, len) that would be granted, per usable set.
        let mut options: Vec<(usize, usize, u64, u64, bool)> = Vec::new();
        let mut unhealthy = Vec::new();
        let mut emptied = Vec::new();
        for (k, set) in sets.iter().enumerate() {
            let home = homes.get(k).copied();
            if home.is_none() || explicit.is_some_and(|e| home != Some(e)) {
                continue;
            }
            if set.is_empty() {
                emptied.extend(home);
                continue;
            }
            let nodes: Option<Vec<&Node>> = set.iter().map(|id| self.memnodes.get(id)).collect();
            let Some(nodes) = nodes else {
                continue;
            };
            if let Some(n) = nodes.iter().find(|n| !self.healthy(n, now_ms)) {
                unhealthy.push(n.rec.id);
                continue;
            }
            let regions = nodes.iter().map(|n| n.maps.len()).min().unwrap_or(0);
            for idx in 0..regions {
                let maps: Vec<&ExtentMap> = nodes.iter().map(|n| &n.maps[idx]).collect();
                let region_len = maps.iter().map(|m| m.len()).min().unwrap_or(0);
                let s = sizing.shape(bytes, region_len, chunk);
                if let Some((off, len)) = mirrored_fit(&maps, s.want, s.min, s.align) {
                    options.push((k, idx, off, len, len >= s.want));
                    break;
                }
            }
        }
        if options.is_empty() {
            if !emptied.is_empty() && unhealthy.is_empty() {
                return Err(conflict(
                    "replica_set_lost",
                    format!(
                        "every copy of the table's memory on home memnode(s) {emptied:?} was lost \
                         (their replica sets have no member left); reset or drop the table"
                    ),
                ));
            }
            if !unhealthy.is_empty() {
                return Err(conflict(
                    "memnode_unhealthy",
                    format!(
                        "memnode(s) {unhealthy:?} of the table's replica sets have not heartbeated recently; mirrored memory needs every member"
                    ),
                ));
            }
            return Err(CatalogError::OutOfMemory(format!(
                "out of memory: no replica set of the table has {bytes} bytes free at the same offset on every member"
            )));
        }
        if options.iter().any(|o| o.4) {
            options.retain(|o| o.4);
        }
        let cands: Vec<Candidate> = options
            .iter()
            .map(|&(k, idx, ..)| Candidate {
                memnode_id: homes.get(k).copied().unwrap_or_default(),
                free_bytes: sets[k]
                    .iter()
                    .filter_map(|id| self.memnodes.get(id))
                    .map(|n| n.maps[idx].free_bytes())
                    .min()
                    .unwrap_or(0),
            })
            .collect();
        let (k, idx, off, len, _) = options[self.placement.choose(&cands).min(options.len() - 1)];
        let mut copies = Vec::with_capacity(sets[k].len());
        for &id in &sets[k] {
            let Some(node) = self.memnodes.get_mut(&id) else {
                continue;
            };
            let va = node.maps[idx].base() + off;
            if let Err(e) = node.maps[idx].reserve(va, len) {
                // Free in the common map a moment ago: undo what was reserved.
                for c in &copies {
                    self.release_copy(c, len);
                }
                return Err(CatalogError::OutOfMemory(format!(
                    "mirrored reservation on memnode {id} failed: {e}"
                )));
            }
            copies.push(CopyRecord {
                memnode_id: id,
                rkey: node.rec.regions[idx].rkey,
                va,
            });
        }
        let home = homes.get(k).copied().unwrap_or_default();
        let home_base = self
            .memnodes
            .get(&home)
            .and_then(|n| n.maps.get(idx))
            .map(|m| m.base());
        let Some(home_base) = home_base else {
            for c in &copies {
                self.release_copy(c, len);
            }
            return Err(CatalogError::Invalid(format!(
                "the home memnode {home} of the replica set is no longer registered"
            )));
        };
        Ok((home, idx, home_base + off, len, copies))
    }

    /// Returns one copy's extent of `len` bytes to its region's free map.
    pub(super) fn release_copy(&mut self, c: &CopyRecord, len: u64) {
        if let Some(node) = self.memnodes.get_mut(&c.memnode_id)
            && let Some(idx) = node.rec.regions.iter().position(|r| r.rkey == c.rkey)
            && let Err(e) = node.maps[idx].release(c.va, len)
        {
            tracing::error!(memnode = c.memnode_id, error = %e, "releasing a copy's extent failed");
        }
    }

    /// Where the runs of memory `table` adopted on memnode `memnode` end: (region
    /// rkey, first byte after the run), lowest address first.
    fn run_ends(&self, memnode: u64, table: &str) -> Vec<(u32, u64)> {
        let mut ends: Vec<(u32, u64)> = self
            .leases
            .values()
            .filter(|l| l.memnode_id == memnode && l.adopted_at_ms.is_some())
            .filter(|l| matches!(&l.owner, Owner::Table(t) if t == table))
            .map(|l| (l.rkey, l.va.saturating_add(l.len)))
            .collect();
        ends.sort_unstable_by_key(|&(rkey, end)| (end, rkey));
        ends
    }

    /// Returns the extent of `l` (every copy of it) to its region's free map.
    pub(super) fn release(&mut self, l: &LeaseRecord) {
        for (memnode_id, rkey, va) in l.extents() {
            self.release_copy(
                &CopyRecord {
                    memnode_id,
                    rkey,
                    va,
                },
                l.len,
            );
        }
    }
}

/// How much of a free extent of `ext` bytes a request of shape `s` gets: all it
/// wants if the extent holds it, else the extent in whole 64-byte lines.
fn grant_len(ext: u64, s: Shape) -> u64 {
    if ext >= s.want {
        s.want
    } else {
        ext - ext % MIN_ALIGN
    }
}
