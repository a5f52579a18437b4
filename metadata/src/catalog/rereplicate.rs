//! Re-replication in the catalog: a replica set that is short of members (a
//! failover removed one) or holds a draining member gets a new member. The member
//! joins as *syncing* (clients write to it but never read it), the table's
//! mirrored extents of that set are reserved on it at the same offsets, and the
//! configuration epoch is bumped; the copier (`crate::rereplication`) then copies
//! the set's data and asks for the promotion, which makes it an ordinary member
//! and lets a draining member go.
//!
//! The new member is distinct from every member of the set, healthy, not draining,
//! in a zone no member is in where one is free, and has every extent free at the
//! mirrored offsets. A memnode that held copies of the table before (it has a loss
//! record: it came back with its region file) is preferred: its memory still holds
//! most of the data, and the copy writes only the difference.

use std::collections::BTreeSet;

use super::error::{CatalogError, conflict, not_found};
use super::keys::{lkey, tkey};
use super::records::{CopyRecord, LeaseRecord, Owner, TableRecord};
use super::state::Catalog;
use crate::api::{DrainProgress, IndexKind};
use crate::store::Batch;

/// A replica set that a new member joined, for the copier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncTarget {
    /// The table.
    pub table: String,
    /// The set's position in the table's `replica_sets` (and `memnodes`).
    pub set: usize,
    /// The set's home memnode.
    pub home: u64,
    /// The syncing member.
    pub target: u64,
    /// `failover`, `drain` or `rejoin` (see [`crate::api::RereplicationStatus`]).
    pub reason: &'static str,
}

/// One extent to copy: a mirrored lease's copy on the acting primary and on the
/// syncing member, `len` bytes each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncExtent {
    /// The lease.
    pub lease: u64,
    /// Its copy on the acting primary.
    pub source: CopyRecord,
    /// Its copy on the syncing member.
    pub target: CopyRecord,
    /// Length.
    pub len: u64,
}

/// Where a memnode is reached, for the copier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Id.
    pub id: u64,
    /// Admin URL.
    pub admin_url: String,
}

/// What a sync pass needs: the primary, the extents, and the members to fence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncPlan {
    /// The acting primary.
    pub source: Endpoint,
    /// The syncing member.
    pub target: Endpoint,
    /// Every extent of the set, on both.
    pub extents: Vec<SyncExtent>,
    /// Every memnode of the set (members and syncing ones).
    pub members: Vec<Endpoint>,
    /// The table's configuration epoch.
    pub epoch: u64,
    /// The table's index (whose copy rule applies).
    pub index: IndexKind,
    /// The set's home memnode: remote pointers into the set name it.
    pub home: u64,
    /// The base address of the acting primary's region (offsets in remote
    /// pointers count from it).
    pub source_base_va: u64,
    /// A RACE table's directory area on the acting primary of its own set, where
    /// the copier finds the subtables (and so the slot words) it must copy as
    /// the backups hold them.
    pub race_directory: Option<AreaOnMember>,
}

/// A table-owned area on one memnode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AreaOnMember {
    /// The memnode.
    pub member: Endpoint,
    /// Its region's rkey.
    pub rkey: u32,
    /// First byte.
    pub va: u64,
    /// Length.
    pub len: u64,
}

/// The table whose memory lease `l` holds, if any.
fn table_of(l: &LeaseRecord) -> Option<&str> {
    match &l.owner {
        Owner::Table(t) => Some(t.as_str()),
        Owner::Client => l.table.as_deref(),
    }
}

impl Catalog {
    /// Replica sets that want a new member and have none joining: `(table, set)`.
    /// A set wants one when it has fewer members than the table has copies, or a
    /// member is draining. Emptied sets (their data is lost) want none.
    pub fn rereplication_wanted(&self) -> Vec<(String, usize)> {
        let mut out = Vec::new();
        for t in self.tables.values() {
            if t.replication <= 1 {
                continue;
            }
            for (k, set) in t.replica_sets.iter().enumerate() {
                if set.is_empty() || !t.syncing_of(k).is_empty() {
                    continue;
                }
                let draining = set.iter().any(|id| self.is_draining(*id));
                if set.len() < t.replication as usize || draining || t.move_of(k).is_some() {
                    out.push((t.name.clone(), k));
                }
            }
        }
        out
    }

    /// Every syncing member of every table: what the copier works on.
    pub fn syncing(&self) -> Vec<SyncTarget> {
        let mut out = Vec::new();
        for t in self.tables.values() {
            for (k, s) in t.syncing.iter().enumerate() {
                for &target in s {
                    out.push(SyncTarget {
                        table: t.name.clone(),
                        set: k,
                        home: t.memnodes.get(k).copied().unwrap_or_default(),
                        target,
                        reason: self.sync_reason(t, k, target),
                    });
                }
            }
        }
        out
    }

    fn is_draining(&self, id: u64) -> bool {
        self.memnodes.get(&id).is_some_and(|n| n.rec.draining)
    }

    fn sync_reason(&self, t: &TableRecord, k: usize, target: u64) -> &'static str {
        if t.lost.iter().any(|l| l.memnode_id == target) {
            "rejoin"
        } else if t.move_of(k).is_some() {
            "move"
        } else if t
            .replica_sets
            .get(k)
            .is_some_and(|s| s.iter().any(|id| self.is_draining(*id)))
        {
            "drain"
        } else {
            "failover"
        }
    }

    /// The mirrored leases of `table` in replica set `k` (homed on its home).
    fn set_leases(&self, t: &TableRecord, k: usize) -> Vec<&LeaseRecord> {
        let Some(&home) = t.memnodes.get(k) else {
            return Vec::new();
        };
        self.leases
            .values()
            .filter(|l| l.memnode_id == home && !l.replicas.is_empty())
            .filter(|l| table_of(l) == Some(t.name.as_str()))
            .collect()
    }

    /// Where the copy of `from` (a copy on one member) lies on memnode `to`: the
    /// same region index and offset from the region base.
    fn mirror_of(&self, from: &CopyRecord, to: u64) -> Option<(usize, CopyRecord)> {
        let src = self.memnodes.get(&from.memnode_id)?;
        let idx = src.rec.regions.iter().position(|r| r.rkey == from.rkey)?;
        let off = from.va.checked_sub(src.rec.regions[idx].base_va)?;
        let dst = self.memnodes.get(&to)?;
        let region = dst.rec.regions.get(idx)?;
        Some((
            idx,
            CopyRecord {
                memnode_id: to,
                rkey: region.rkey,
                va: region.base_va.checked_add(off)?,
            },
        ))
    }

    /// Reserves every extent of `leases` on memnode `to` at the mirrored offsets;
    /// all or nothing. The copies made, by lease.
    fn reserve_mirrors(&mut self, leases: &[LeaseRecord], to: u64) -> Option<Vec<CopyRecord>> {
        let mut made: Vec<(CopyRecord, u64)> = Vec::new();
        for l in leases {
            let from = l.replicas.first().copied()?;
            let ok = self.mirror_of(&from, to).and_then(|(idx, c)| {
                let node = self.memnodes.get_mut(&to)?;
                node.maps.get_mut(idx)?.reserve(c.va, l.len).ok()?;
                Some(c)
            });
            match ok {
                Some(c) => made.push((c, l.len)),
                None => {
                    for (c, len) in &made {
                        self.release_copy(c, *len);
                    }
                    return None;
                }
            }
        }
        Some(made.into_iter().map(|(c, _)| c).collect())
    }

    /// Adds a syncing member to replica set `k` of `table`: picks it, reserves the
    /// set's extents on it, bumps the epoch. `Ok(None)` when the set wants no new
    /// member (any more) or no memnode can take it now.
    pub fn begin_sync(
        &mut self,
        table: &str,
        k: usize,
        now_ms: u64,
    ) -> Result<Option<SyncTarget>, CatalogError> {
        let t = self.table_rec(table)?.clone();
        let Some(set) = t.replica_sets.get(k).cloned() else {
            return Ok(None);
        };
        let moving = t.move_of(k);
        let wanted = !set.is_empty()
            && t.syncing_of(k).is_empty()
            && (set.len() < t.replication as usize
                || set.iter().any(|id| self.is_draining(*id))
                || moving.is_some());
        if !wanted {
            return Ok(None);
        }
        // A move to a named memnode waits for that one.
        let only = moving.and_then(|m| m.to);
        let leases: Vec<LeaseRecord> = self.set_leases(&t, k).into_iter().cloned().collect();
        let zones: BTreeSet<Option<String>> = set
            .iter()
            .filter_map(|id| self.memnodes.get(id))
            .map(|n| n.rec.zone.clone())
            .collect();
        let lost: BTreeSet<u64> = t.lost.iter().map(|l| l.memnode_id).collect();
        let mut candidates: Vec<(bool, bool, u64, u64)> = self
            .memnodes
            .values()
            .filter(|n| !set.contains(&n.rec.id) && !n.rec.draining)
            .filter(|n| only.is_none_or(|id| id == n.rec.id))
            .filter(|n| self.healthy(n, now_ms))
            .map(|n| {
                let free: u64 = n.maps.iter().map(|m| m.free_bytes()).sum();
                let new_zone = n.rec.zone.is_some() && !zones.contains(&n.rec.zone);
                (lost.contains(&n.rec.id), new_zone, free, n.rec.id)
            })
            .collect();
        // Rejoining memnodes first, then a new zone, then the most free memory.
        candidates.sort_by(|a, b| b.cmp(a));
        for (_, _, _, id) in candidates {
            let Some(copies) = self.reserve_mirrors(&leases, id) else {
                continue;
            };
            let mut t2 = t.clone();
            if t2.syncing.len() < t2.replica_sets.len() {
                t2.syncing.resize(t2.replica_sets.len(), Vec::new());
            }
            t2.syncing[k].push(id);
            t2.config_epoch += 1;
            let mut batch = Batch::new();
            let mut changed = Vec::new();
            for (l, c) in leases.iter().zip(&copies) {
                let mut l2 = l.clone();
                l2.replicas.push(*c);
                batch.put(lkey(l2.id), &l2);
                changed.push(l2);
            }
            batch.put(tkey(&t2.name), &t2);
            if let Err(e) = self.commit(&batch) {
                for (l, c) in leases.iter().zip(&copies) {
                    self.release_copy(c, l.len);
                }
                return Err(e);
            }
            for l in changed {
                self.leases.insert(l.id, l);
            }
            let target = SyncTarget {
                table: t2.name.clone(),
                set: k,
                home: t2.memnodes.get(k).copied().unwrap_or_default(),
                target: id,
                reason: self.sync_reason(&t2, k, id),
            };
            self.tables.insert(t2.name.clone(), t2);
            return Ok(Some(target));
        }
        Ok(None)
    }

    /// What a sync pass of `target` needs, or a 404/409 once it is no longer
    /// syncing in that set (promoted, failed over, table dropped).
    pub fn sync_plan(&self, target: &SyncTarget) -> Result<SyncPlan, CatalogError> {
        let t = self.table_rec(&target.table)?;
        if !t.syncing_of(target.set).contains(&target.target) {
            return Err(not_found(
                "sync_not_found",
                format!(
                    "memnode {} is not syncing in replica set {} of table {:?}",
                    target.target, target.set, target.table
                ),
            ));
        }
        let set = t.replica_sets.get(target.set).cloned().unwrap_or_default();
        let Some(&primary) = set.first() else {
            return Err(conflict(
                "replica_set_lost",
                format!(
                    "replica set {} of table {:?} has no member left to copy from",
                    target.set, target.table
                ),
            ));
        };
        let members = t.mirror_sets().get(target.set).cloned().unwrap_or_default();
        self.plan_between(t, target.set, primary, target.target, &members)
    }

    /// A plan copying replica set `k` of `t` from member `source` to `target`
    /// (every extent of the set that has a copy on both), fencing `members`.
    pub(super) fn plan_between(
        &self,
        t: &TableRecord,
        k: usize,
        source: u64,
        target: u64,
        members: &[u64],
    ) -> Result<SyncPlan, CatalogError> {
        let endpoint = |id: u64| -> Result<Endpoint, CatalogError> {
            let n = self
                .memnodes
                .get(&id)
                .ok_or_else(|| super::error::memnode_not_found(id))?;
            Ok(Endpoint {
                id,
                admin_url: n.rec.admin_url.clone(),
            })
        };
        let mut extents = Vec::new();
        for l in self.set_leases(t, k) {
            let on = |m: u64| l.replicas.iter().find(|c| c.memnode_id == m).copied();
            if let (Some(src), Some(dst)) = (on(source), on(target)) {
                extents.push(SyncExtent {
                    lease: l.id,
                    source: src,
                    target: dst,
                    len: l.len,
                });
            }
        }
        let members = members
            .iter()
            .map(|&m| endpoint(m))
            .collect::<Result<Vec<_>, _>>()?;
        let source_base_va = self
            .memnodes
            .get(&source)
            .and_then(|n| n.rec.regions.first())
            .map_or(0, |r| r.base_va);
        let race_directory = match t.layout.race().and_then(|r| r.directory_lease) {
            Some(lease) => self.area_on_primary(t, lease, &endpoint)?,
            None => None,
        };
        Ok(SyncPlan {
            source: endpoint(source)?,
            target: endpoint(target)?,
            extents,
            members,
            epoch: t.config_epoch,
            index: t.index(),
            home: t.memnodes.get(k).copied().unwrap_or(source),
            source_base_va,
            race_directory,
        })
    }

    /// Where table-owned lease `lease` of `t` lies on the acting primary of its
    /// replica set (the lease itself for an unreplicated one).
    fn area_on_primary(
        &self,
        t: &TableRecord,
        lease: u64,
        endpoint: &dyn Fn(u64) -> Result<Endpoint, CatalogError>,
    ) -> Result<Option<AreaOnMember>, CatalogError> {
        let Some(l) = self.leases.get(&lease) else {
            return Ok(None);
        };
        let primary = t
            .memnodes
            .iter()
            .position(|&h| h == l.memnode_id)
            .and_then(|k| t.replica_sets.get(k))
            .and_then(|set| set.first().copied())
            .unwrap_or(l.memnode_id);
        let (rkey, va) = match l.replicas.iter().find(|c| c.memnode_id == primary) {
            Some(c) => (c.rkey, c.va),
            None if primary == l.memnode_id => (l.rkey, l.va),
            None => return Ok(None),
        };
        Ok(Some(AreaOnMember {
            member: endpoint(primary)?,
            rkey,
            va,
            len: l.len,
        }))
    }

    /// Makes syncing member `target` an ordinary member of its set (last), lets
    /// draining members beyond the table's copy count go (their copies are
    /// released), bumps the epoch, and clears the table's loss records once every
    /// set is full again. Returns the members before the change (to fence).
    pub fn promote_sync(
        &mut self,
        target: &SyncTarget,
        now_ms: u64,
    ) -> Result<Vec<u64>, CatalogError> {
        let t = self.table_rec(&target.table)?.clone();
        let k = target.set;
        if !t.syncing_of(k).contains(&target.target) {
            return Err(not_found(
                "sync_not_found",
                format!(
                    "memnode {} is not syncing in replica set {k} of table {:?}",
                    target.target, target.table
                ),
            ));
        }
        let before = t.mirror_sets().get(k).cloned().unwrap_or_default();
        let mut t2 = t.clone();
        t2.syncing[k].retain(|&m| m != target.target);
        if t2.syncing.iter().all(Vec::is_empty) {
            t2.syncing.clear();
        }
        t2.replica_sets[k].push(target.target);
        t2.writes_paused = false;
        let mut leaving = Vec::new();
        // A member asked to move leaves first, then draining ones.
        let moved = t.move_of(k).map(|m| m.from);
        t2.moves.retain(|m| m.set != k);
        while t2.replica_sets[k].len() > t2.replication as usize {
            let Some(pos) = t2.replica_sets[k]
                .iter()
                .position(|id| Some(*id) == moved && !leaving.contains(id))
                .or_else(|| {
                    t2.replica_sets[k]
                        .iter()
                        .position(|id| self.is_draining(*id))
                })
            else {
                break;
            };
            leaving.push(t2.replica_sets[k].remove(pos));
        }
        t2.config_epoch += 1;
        let full = t2
            .replica_sets
            .iter()
            .all(|s| s.len() >= t2.replication as usize);
        if full {
            t2.lost.clear();
        }
        let mut batch = Batch::new();
        let mut released: Vec<(LeaseRecord, CopyRecord)> = Vec::new();
        for l in self.set_leases(&t, k) {
            let mut l2 = l.clone();
            let mut gone = Vec::new();
            l2.replicas.retain(|c| {
                let go = leaving.contains(&c.memnode_id);
                if go {
                    gone.push(*c);
                }
                !go
            });
            if !gone.is_empty() {
                batch.put(lkey(l2.id), &l2);
                for c in gone {
                    released.push((l2.clone(), c));
                }
            }
        }
        batch.put(tkey(&t2.name), &t2);
        self.commit(&batch)?;
        for (l2, c) in released {
            self.release_copy(&c, l2.len);
            self.leases.insert(l2.id, l2);
        }
        tracing::info!(
            table = %t2.name,
            set = k,
            member = target.target,
            left = ?leaving,
            replica_sets = ?t2.replica_sets,
            epoch = t2.config_epoch,
            at_ms = now_ms,
            "re-replication finished: the synchronised member serves as a backup"
        );
        self.tables.insert(t2.name.clone(), t2);
        Ok(before)
    }

    /// Asks member `from` of replica set `k` of `table` to hand its copy over to
    /// memnode `to` (or, `None`, to one the copier picks as for a failover): the
    /// copier adds the new member, copies the set to it and promotes it, and `from`
    /// leaves the set then (rebalancing; `docs/replication.md`). The table as it is
    /// now; the move is under way when it returns.
    pub fn move_copy(
        &mut self,
        table: &str,
        k: usize,
        from: u64,
        to: Option<u64>,
        now_ms: u64,
    ) -> Result<crate::api::TableDescription, CatalogError> {
        let t = self.table_rec(table)?.clone();
        if t.replication < 2 {
            return Err(conflict(
                "not_replicated",
                format!(
                    "table {table:?} keeps one copy: moving a copy needs replication 2 or more \
                     (its writers mirror to the new member while it is copied)"
                ),
            ));
        }
        let Some(set) = t.replica_sets.get(k) else {
            return Err(not_found(
                "replica_set_not_found",
                format!(
                    "table {table:?} has {} replica sets; there is no set {k}",
                    t.replica_sets.len()
                ),
            ));
        };
        if !set.contains(&from) {
            return Err(not_found(
                "member_not_found",
                format!(
                    "memnode {from} is not a member of replica set {k} of table {table:?} (members: {set:?})"
                ),
            ));
        }
        if !t.syncing_of(k).is_empty() || t.move_of(k).is_some() {
            return Err(conflict(
                "replica_set_busy",
                format!(
                    "replica set {k} of table {table:?} is already getting a new member; \
                     move again once GET /v1/rereplication no longer lists it"
                ),
            ));
        }
        if let Some(id) = to {
            let node = self.memnodes.get(&id).ok_or_else(|| {
                not_found(
                    "memnode_not_found",
                    format!("no memnode {id} is registered"),
                )
            })?;
            if set.contains(&id) {
                return Err(conflict(
                    "memnode_conflict",
                    format!("memnode {id} already holds a copy of replica set {k}"),
                ));
            }
            if node.rec.draining {
                return Err(conflict(
                    "memnode_draining",
                    format!("memnode {id} is draining"),
                ));
            }
            if !self.healthy(node, now_ms) {
                return Err(conflict(
                    "memnode_unhealthy",
                    format!("memnode {id} is not healthy"),
                ));
            }
            // Every copy of a set lives at the same offsets on every member: the
            // memnode must have them free (checked by reserving and releasing them).
            let leases: Vec<LeaseRecord> = self.set_leases(&t, k).into_iter().cloned().collect();
            match self.reserve_mirrors(&leases, id) {
                Some(copies) => {
                    for (l, c) in leases.iter().zip(&copies) {
                        self.release_copy(c, l.len);
                    }
                }
                None => {
                    return Err(conflict(
                        "memnode_conflict",
                        format!(
                            "memnode {id} has not got replica set {k}'s memory free at the same \
                             offsets (a copy lives at the same offsets on every member)"
                        ),
                    ));
                }
            }
        }
        let mut t2 = t.clone();
        t2.moves.push(super::records::SetMove { set: k, from, to });
        let mut batch = Batch::new();
        batch.put(tkey(&t2.name), &t2);
        self.commit(&batch)?;
        tracing::info!(table = %t2.name, set = k, from, to = ?to, "copy move asked");
        let described = self.describe(&t2);
        self.tables.insert(t2.name.clone(), t2);
        Ok(described)
    }

    /// Pauses (`paused`) or resumes the writes of `table` for the last copy pass
    /// of a syncing member, bumping the configuration epoch so that every writer
    /// asks for the table again after the fence that follows. Resuming a table
    /// that is not paused (or is gone) changes nothing.
    pub fn pause_writes(&mut self, table: &str, paused: bool) -> Result<(), CatalogError> {
        if !paused && !self.tables.contains_key(table) {
            return Ok(());
        }
        let t = self.table_rec(table)?;
        if t.writes_paused == paused {
            return Ok(());
        }
        let mut t2 = t.clone();
        t2.writes_paused = paused;
        t2.config_epoch += 1;
        let mut batch = Batch::new();
        batch.put(tkey(&t2.name), &t2);
        self.commit(&batch)?;
        tracing::warn!(
            table = %t2.name,
            epoch = t2.config_epoch,
            "{}",
            if paused {
                "writes paused for the last copy pass of a new replica"
            } else {
                "writes resumed"
            }
        );
        self.tables.insert(t2.name.clone(), t2);
        Ok(())
    }

    /// Tables whose writes are paused (after a restart: none should be).
    pub fn paused_tables(&self) -> Vec<String> {
        self.tables
            .values()
            .filter(|t| t.writes_paused)
            .map(|t| t.name.clone())
            .collect()
    }

    /// A replicated table whose replica sets memnode `id` is the home of (its
    /// position in `memnodes` names a set that still has members), if any.
    pub(super) fn home_of_replicated(&self, id: u64) -> Option<String> {
        self.tables
            .values()
            .filter(|t| t.replication > 1)
            .find(|t| {
                t.memnodes
                    .iter()
                    .zip(&t.replica_sets)
                    .any(|(&h, s)| h == id && !s.is_empty())
            })
            .map(|t| t.name.clone())
    }

    /// How far draining memnode `id` got (`None` when it is not draining).
    pub(super) fn drain_progress(&self, id: u64) -> Option<DrainProgress> {
        if !self.is_draining(id) {
            return None;
        }
        let mut left = 0u64;
        let mut moving = 0u64;
        let mut unreplicated = BTreeSet::new();
        for t in self.tables.values() {
            for (k, set) in t.replica_sets.iter().enumerate() {
                if set.contains(&id) {
                    left += 1;
                    if !t.syncing_of(k).is_empty() {
                        moving += 1;
                    }
                }
            }
        }
        for name in self.tables_on(id) {
            if self.tables.get(&name).is_some_and(|t| t.replication <= 1) {
                unreplicated.insert(name);
            }
        }
        Some(DrainProgress {
            replica_sets_left: left,
            moving,
            unreplicated_tables: unreplicated.into_iter().collect(),
            done: self.check_deletable(id).is_ok(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{CreateLeaseRequest, CreateTableRequest, RegionSpec, RegisterMemnodeRequest};
    use crate::catalog::CatalogConfig;
    use crate::store::MemStore;

    fn catalog(memnodes: u64) -> Catalog {
        let mut c = Catalog::open(Box::new(MemStore::new()), CatalogConfig::default(), 0).unwrap();
        for i in 1..=memnodes {
            c.register_memnode(
                RegisterMemnodeRequest {
                    name: format!("m{i}"),
                    admin_url: format!("http://127.0.0.1:{}", 9000 + i),
                    data_addr: format!("127.0.0.1:{}", 4790 + i),
                    capacity: 16 << 20,
                    regions: vec![RegionSpec {
                        rkey: i as u32,
                        base_va: 1 << 30,
                        len: 16 << 20,
                        path: None,
                        instance: 0,
                    }],
                    zone: None,
                },
                0,
            )
            .unwrap();
        }
        c
    }

    fn replicated(c: &mut Catalog) -> TableRecord {
        table_t(c, "clover", 2)
    }

    /// Table `t` of `index` homed on memnode 1 with `copies` copies, and a data
    /// lease of it.
    fn table_t(c: &mut Catalog, index: &str, copies: u32) -> TableRecord {
        let req: CreateTableRequest = serde_json::from_value(serde_json::json!({
            "name": "t", "index": index, "value_limit": 256, "memnodes": [1],
            "replication": copies
        }))
        .unwrap();
        c.create_table(req, 0).unwrap();
        let lease: CreateLeaseRequest = serde_json::from_value(serde_json::json!({
            "client": "app", "bytes": 65536, "table": "t"
        }))
        .unwrap();
        c.create_lease(lease, 0).unwrap();
        c.table_rec("t").unwrap().clone()
    }

    #[test]
    fn the_survivors_of_a_failed_primary_are_copied_from_the_member_promoted() {
        let mut c = catalog(3);
        let set = table_t(&mut c, "clover", 3).replica_sets[0].clone();
        assert_eq!(set.len(), 3);
        // A backup's failure leaves the primary in charge: nothing to copy.
        assert!(c.survivor_plans(set[1]).is_empty());
        assert!(c.survivor_plans(set[2]).is_empty());
        // The primary's: the next member is promoted, the last is copied from it
        // (every extent of the set), and both survivors are fenced.
        let plans = c.survivor_plans(set[0]);
        assert_eq!(plans.len(), 1);
        let p = &plans[0];
        assert_eq!((p.table.as_str(), p.set), ("t", 0));
        assert_eq!((p.plan.source.id, p.plan.target.id), (set[1], set[2]));
        let fenced: Vec<u64> = p.plan.members.iter().map(|m| m.id).collect();
        assert_eq!(fenced, set[1..].to_vec());
        assert!(!p.plan.extents.is_empty());
        for e in &p.plan.extents {
            assert_eq!(e.source.memnode_id, set[1]);
            assert_eq!(e.target.memnode_id, set[2]);
        }
        // After the failover the set has two members: a failure of its new
        // primary leaves one, with nobody to copy to.
        c.fail_over(set[0], "test", 1).unwrap();
        assert!(c.survivor_plans(set[1]).is_empty());
    }

    #[test]
    fn a_shrunken_set_gets_a_syncing_member_with_the_extents_mirrored() {
        let mut c = catalog(3);
        let t = replicated(&mut c);
        assert!(c.rereplication_wanted().is_empty());
        let victim = t.replica_sets[0][0];
        c.fail_over(victim, "test", 1).unwrap();
        assert_eq!(c.rereplication_wanted(), vec![("t".to_owned(), 0)]);
        let s = c.begin_sync("t", 0, 2).unwrap().unwrap();
        // The victim still heartbeats (its memory was lost, say): it held copies
        // before, so it is preferred and only the difference will be copied.
        assert_eq!((s.target, s.reason), (victim, "rejoin"));
        let t2 = c.table_rec("t").unwrap();
        assert_eq!(t2.syncing, vec![vec![s.target]]);
        assert!(t2.config_epoch > t.config_epoch);
        assert!(c.rereplication_wanted().is_empty());
        let plan = c.sync_plan(&s).unwrap();
        assert_eq!(plan.extents.len(), 1);
        let e = plan.extents[0];
        assert_eq!(e.target.memnode_id, s.target);
        assert_eq!(e.source.va - (1 << 30), e.target.va - (1 << 30));
        // The extent is taken on the new member: a second reservation fails.
        assert!(
            c.reserve_mirrors(&[c.leases[&e.lease].clone()], s.target)
                .is_none()
        );
        c.promote_sync(&s, 3).unwrap();
        let t3 = c.table_rec("t").unwrap();
        assert_eq!(t3.replica_sets[0].len(), 2);
        assert!(t3.syncing.is_empty());
        assert!(t3.lost.is_empty(), "every set is full again");
        assert!(c.sync_plan(&s).is_err());
    }

    #[test]
    fn a_paused_table_bumps_its_epoch_and_the_promotion_resumes_it() {
        let mut c = catalog(3);
        c.set_scrubber(std::sync::Arc::new(
            crate::scrub::RecordingScrubber::default(),
        ));
        let t = table_t(&mut c, "race", 2);
        let victim = t.replica_sets[0][1];
        c.fail_over(victim, "test", 1).unwrap();
        let s = c.begin_sync("t", 0, 2).unwrap().unwrap();
        // The plan names the directory on the acting primary, for the slot words.
        let plan = c.sync_plan(&s).unwrap();
        let dir = plan
            .race_directory
            .clone()
            .expect("a RACE plan names its directory");
        assert_eq!(dir.member.id, t.replica_sets[0][0]);
        assert!(dir.len > 0);
        assert_eq!((plan.home, plan.source_base_va), (1, 1 << 30));
        let epoch = c.table_rec("t").unwrap().config_epoch;
        c.pause_writes("t", true).unwrap();
        let paused = c.table("t").unwrap();
        assert!(paused.writes_paused);
        assert_eq!(paused.config_epoch, epoch + 1);
        assert_eq!(c.paused_tables(), vec!["t".to_owned()]);
        // Pausing twice changes nothing; the promotion resumes the writes.
        c.pause_writes("t", true).unwrap();
        assert_eq!(c.table_rec("t").unwrap().config_epoch, epoch + 1);
        c.promote_sync(&s, 3).unwrap();
        assert!(!c.table("t").unwrap().writes_paused);
        assert!(c.paused_tables().is_empty());
        // Resuming a table that is gone or not paused is no error; pausing one
        // that is gone is.
        c.pause_writes("t", false).unwrap();
        c.pause_writes("nope", false).unwrap();
        assert!(c.pause_writes("nope", true).is_err());
    }

    #[test]
    fn a_syncing_member_that_fails_leaves_no_loss_record_and_the_set_wants_another() {
        let mut c = catalog(3);
        let t = replicated(&mut c);
        let victim = t.replica_sets[0][1];
        c.fail_over(victim, "test", 1).unwrap();
        let s = c.begin_sync("t", 0, 2).unwrap().unwrap();
        c.fail_over(s.target, "down", 3).unwrap();
        let t2 = c.table_rec("t").unwrap();
        assert!(t2.syncing_of(0).is_empty());
        assert!(
            t2.lost
                .iter()
                .all(|l| l.memnode_id != s.target || s.target == victim)
        );
        assert_eq!(c.rereplication_wanted(), vec![("t".to_owned(), 0)]);
        // Its reserved extents went back: the lease lists no copy on it.
        assert!(
            c.leases
                .values()
                .all(|l| l.replicas.iter().all(|r| r.memnode_id != s.target))
        );
    }

    #[test]
    fn a_drained_home_hands_its_set_over_and_is_retired_when_deleted() {
        let mut c = catalog(3);
        let t = replicated(&mut c);
        let home = t.replica_sets[0][0];
        let backup = t.replica_sets[0][1];
        assert!(c.check_deletable(home).is_err());
        c.drain_memnode(home, 1).unwrap();
        assert_eq!(c.rereplication_wanted(), vec![("t".to_owned(), 0)]);
        let s = c.begin_sync("t", 0, 2).unwrap().unwrap();
        assert_eq!(s.reason, "drain");
        assert!(
            c.drain_progress(home)
                .is_some_and(|p| p.moving == 1 && !p.done)
        );
        c.promote_sync(&s, 3).unwrap();
        let t2 = c.table_rec("t").unwrap();
        assert_eq!(t2.replica_sets[0], vec![backup, s.target]);
        let p = c.drain_progress(home).unwrap();
        assert_eq!((p.replica_sets_left, p.moving, p.done), (0, 0, true));
        assert!(c.rereplication_wanted().is_empty());
        // Deleted, it stays listed as the retired home of the set.
        c.deregister_memnode(home, false, 4).unwrap();
        let info = c.memnode(home, 4).unwrap();
        assert!(info.retired && info.leased_bytes == 0, "{info:?}");
        assert_eq!(c.table_rec("t").unwrap().memnodes, vec![home]);
    }

    #[test]
    fn a_moved_member_hands_its_copy_to_the_memnode_named_and_leaves() {
        let mut c = catalog(4);
        let t = replicated(&mut c);
        let (home, backup) = (t.replica_sets[0][0], t.replica_sets[0][1]);
        let free: Vec<u64> = (1..=4)
            .filter(|id| !t.replica_sets[0].contains(id))
            .collect();
        let to = free[1];
        // What cannot be moved says why, and changes nothing.
        for (set, from, dest, code) in [
            (1, home, None, "replica_set_not_found"),
            (0, free[0], None, "member_not_found"),
            (0, home, Some(backup), "memnode_conflict"),
            (0, home, Some(99), "memnode_not_found"),
        ] {
            match c.move_copy("t", set, from, dest, 1) {
                Err(CatalogError::NotFound { code: got, .. })
                | Err(CatalogError::Conflict { code: got, .. }) => assert_eq!(got, code),
                other => panic!("{code}: {other:?}"),
            }
        }
        assert!(c.rereplication_wanted().is_empty());
        c.move_copy("t", 0, home, Some(to), 1).unwrap();
        assert_eq!(c.table_rec("t").unwrap().moves.len(), 1);
        match c.move_copy("t", 0, backup, None, 1) {
            Err(CatalogError::Conflict { code, .. }) => assert_eq!(code, "replica_set_busy"),
            other => panic!("{other:?}"),
        }
        assert_eq!(c.rereplication_wanted(), vec![("t".to_owned(), 0)]);
        let s = c.begin_sync("t", 0, 2).unwrap().unwrap();
        assert_eq!((s.target, s.reason), (to, "move"));
        c.promote_sync(&s, 3).unwrap();
        let t2 = c.table_rec("t").unwrap();
        assert_eq!(t2.replica_sets[0], vec![backup, to]);
        assert!(t2.moves.is_empty() && t2.syncing.is_empty());
        assert!(c.rereplication_wanted().is_empty());
        // The member that left holds nothing of the table any more.
        assert!(c.check_deletable(home).is_ok());
        // A table of one copy cannot move that way.
        let mut c = catalog(2);
        table_t(&mut c, "clover", 1);
        match c.move_copy("t", 0, 1, None, 1) {
            Err(CatalogError::Conflict { code, .. }) => assert_eq!(code, "not_replicated"),
            other => panic!("{other:?}"),
        }
    }
}
