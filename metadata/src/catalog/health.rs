//! Membership and table health: what a memnode's state is (up, down, draining), what
//! lives on it, what happens to the tables when its memory is lost (a loss record per
//! table and memnode, never a silent re-homing to empty memory), draining, and
//! resetting a lost table once an admin acknowledged the loss.

use std::collections::{BTreeMap, BTreeSet};

use super::error::{CatalogError, conflict, memnode_not_found};
use super::keys::{IDS_KEY, lkey, mkey, tkey};
use super::records::{LeaseRecord, Owner, RecordLayout, TableRecord};
use super::state::{Catalog, Node};
use crate::api::{
    DrainResponse, InPlaceRequest, LostCopy, MemnodeState, RegionSpec, TableDescription,
    TableHealth, TableState,
};
use crate::store::Batch;

/// Counts of tables by health and memnodes by state (for metrics).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Membership {
    /// Tables by health state (`healthy`, `degraded`, `lost`), every state present.
    pub tables: BTreeMap<&'static str, usize>,
    /// Memnodes by state (`up`, `down`, `draining`), every state present.
    pub memnodes: BTreeMap<&'static str, usize>,
}

/// The name of a table state in metrics and logs.
pub fn table_state_name(s: TableState) -> &'static str {
    match s {
        TableState::Healthy => "healthy",
        TableState::Degraded => "degraded",
        TableState::Lost => "lost",
    }
}

/// The health a table's loss records give: healthy without any, lost once as many
/// memnodes lost its memory as it has copies, degraded before that.
pub fn table_health(t: &TableRecord) -> TableHealth {
    let memnodes: BTreeSet<u64> = t.lost.iter().map(|l| l.memnode_id).collect();
    let state = if memnodes.is_empty() {
        TableState::Healthy
    } else if memnodes.len() >= t.replication.max(1) as usize {
        TableState::Lost
    } else {
        TableState::Degraded
    };
    TableHealth {
        state,
        lost: t.lost.clone(),
    }
}

/// Why a memnode that registers again with `new` regions lost what it held in `old`.
pub(super) fn new_memory_reason(name: &str, old: &[RegionSpec], new: &[RegionSpec]) -> String {
    let instance = |r: &[RegionSpec]| r.first().map_or(0, |r| r.instance);
    match (instance(old), instance(new)) {
        (0, _) => format!(
            "memnode {name} restarted and registered new memory (it ran without --region-file)"
        ),
        (o, 0) => format!(
            "memnode {name} restarted without its region file (region instance {o:#x} is gone)"
        ),
        (o, n) if o != n => format!(
            "memnode {name} restarted with a new region file (instance {n:#x} instead of {o:#x})"
        ),
        _ => format!("memnode {name} registered its region under another rkey or address"),
    }
}

/// The table whose memory lease `l` holds (table-owned, or a data lease), if any.
fn holds_data_of(l: &LeaseRecord) -> Option<&str> {
    match &l.owner {
        Owner::Table(t) => Some(t.as_str()),
        Owner::Client => l.table.as_deref(),
    }
}

impl Catalog {
    /// The state of `node` at `now_ms`: down without a recent heartbeat, else draining
    /// if asked to, else up.
    pub(super) fn memnode_state(&self, node: &Node, now_ms: u64) -> MemnodeState {
        if !self.healthy(node, now_ms) {
            MemnodeState::Down
        } else if node.rec.draining {
            MemnodeState::Draining
        } else {
            MemnodeState::Up
        }
    }

    /// Leases with an extent on memnode `id` (for mirrored memory: a copy there;
    /// a replicated lease whose home failed over holds none on its home).
    fn leases_on(&self, id: u64) -> Vec<&LeaseRecord> {
        self.leases
            .values()
            .filter(|l| l.extents().iter().any(|&(m, _, _)| m == id))
            .collect()
    }

    /// Tables with data on memnode `id`, sorted by name.
    pub(super) fn tables_on(&self, id: u64) -> Vec<String> {
        let names: BTreeSet<&str> = self
            .leases_on(id)
            .into_iter()
            .filter_map(holds_data_of)
            .filter(|t| self.tables.contains_key(*t))
            .collect();
        names.into_iter().map(str::to_owned).collect()
    }

    /// Everything memnode `id` held is gone: its leases are revoked and every table with
    /// data there gets a loss record (once per memnode); a RACE directory or in-place
    /// area that lived there is forgotten (not re-homed: the table is lost, not empty).
    /// Writes the changes to `batch`; the caller commits and then applies them.
    pub(super) fn lose_memory(
        &self,
        id: u64,
        name: &str,
        reason: &str,
        now_ms: u64,
        batch: &mut Batch,
    ) -> (Vec<LeaseRecord>, Vec<TableRecord>) {
        let revoked: Vec<LeaseRecord> = self.leases_on(id).into_iter().cloned().collect();
        let gone: BTreeSet<u64> = revoked.iter().map(|l| l.id).collect();
        for l in &revoked {
            batch.delete(lkey(l.id));
        }
        let mut changed = Vec::new();
        for table in self.tables_on(id) {
            let Some(t) = self.tables.get(&table) else {
                continue;
            };
            let mut t2 = t.clone();
            if !t2.lost.iter().any(|l| l.memnode_id == id) {
                t2.lost.push(LostCopy {
                    memnode_id: id,
                    memnode_name: name.to_owned(),
                    since_ms: now_ms,
                    reason: reason.to_owned(),
                });
            }
            let lost = |lease: &mut Option<u64>| {
                if lease.is_some_and(|l| gone.contains(&l)) {
                    *lease = None;
                }
            };
            match &mut t2.layout {
                RecordLayout::Clover => {}
                RecordLayout::Race(r) => {
                    if r.directory_lease.is_some_and(|l| gone.contains(&l)) {
                        r.directory_lease = None;
                        r.generation += 1;
                    }
                }
                RecordLayout::InPlace(p) => {
                    lost(&mut p.area_lease);
                    lost(&mut p.latch_lease);
                }
            }
            batch.put(tkey(&t2.name), &t2);
            changed.push(t2);
        }
        (revoked, changed)
    }

    /// Logs the tables that just lost memory, loudly.
    pub(super) fn log_losses(&self, tables: &[TableRecord], memnode: u64) {
        for t in tables {
            let health = table_health(t);
            if let Some(l) = t.lost.iter().find(|l| l.memnode_id == memnode) {
                tracing::error!(
                    table = %t.name,
                    state = table_state_name(health.state),
                    memnode = memnode,
                    memnode_name = %l.memnode_name,
                    reason = %l.reason,
                    "table data lost with its memnode; reset (POST /v1/tables/{{name}}/reset) or drop the table"
                );
            }
        }
    }

    /// `POST /v1/memnodes/{id}/drain`: no new leases or table memory go to memnode
    /// `id` any more; answers what still lives there.
    pub fn drain_memnode(&mut self, id: u64, now_ms: u64) -> Result<DrainResponse, CatalogError> {
        let node = self
            .memnodes
            .get(&id)
            .ok_or_else(|| memnode_not_found(id))?;
        if !node.rec.draining {
            let mut rec = node.rec.clone();
            rec.draining = true;
            let mut batch = Batch::new();
            batch.put(mkey(id), &rec);
            self.commit(&batch)?;
            if let Some(n) = self.memnodes.get_mut(&id) {
                n.rec = rec;
            }
        }
        let node = self
            .memnodes
            .get(&id)
            .ok_or_else(|| memnode_not_found(id))?;
        let leases = self.leases_on(id);
        Ok(DrainResponse {
            id,
            name: node.rec.name.clone(),
            state: self.memnode_state(node, now_ms),
            tables: self.tables_on(id),
            leases: leases.len() as u64,
            leased_bytes: leases.iter().map(|l| l.len).sum(),
            deletable: leases.is_empty(),
        })
    }

    /// Refuses to delete memnode `id` (409 `memnode_in_use`) while leases live on it,
    /// naming the tables and the drain route.
    pub(super) fn check_deletable(&self, id: u64) -> Result<(), CatalogError> {
        let node = self
            .memnodes
            .get(&id)
            .ok_or_else(|| memnode_not_found(id))?;
        let leases = self.leases_on(id);
        if leases.is_empty() {
            return Ok(());
        }
        let tables = self.tables_on(id);
        let clients = leases.iter().filter(|l| holds_data_of(l).is_none()).count();
        let bytes: u64 = leases.iter().map(|l| l.len).sum();
        let what = if tables.is_empty() {
            "no table data".to_owned()
        } else {
            format!("data of table(s) {}", tables.join(", "))
        };
        Err(conflict(
            "memnode_in_use",
            format!(
                "memnode {id} ({}) still holds {what} and {clients} other client lease(s), {bytes} bytes under {} lease(s) in all; drain it with POST /v1/memnodes/{id}/drain and delete it once nothing lives there, or delete it with ?force=true to accept losing that data",
                node.rec.name,
                leases.len()
            ),
        ))
    }

    /// Counts of tables by health and memnodes by state.
    pub fn membership(&self, now_ms: u64) -> Membership {
        let mut m = Membership::default();
        for s in [TableState::Healthy, TableState::Degraded, TableState::Lost] {
            m.tables.insert(table_state_name(s), 0);
        }
        for s in [MemnodeState::Up, MemnodeState::Down, MemnodeState::Draining] {
            m.memnodes.insert(s.as_str(), 0);
        }
        for t in self.tables.values() {
            *m.tables
                .entry(table_state_name(table_health(t).state))
                .or_default() += 1;
        }
        for n in self.memnodes.values() {
            *m.memnodes
                .entry(self.memnode_state(n, now_ms).as_str())
                .or_default() += 1;
        }
        m
    }

    /// `POST /v1/tables/{name}/reset`: an admin acknowledges that table `name` lost
    /// data. The table keeps its name, id and settings but is empty again: its chains
    /// and memory are dropped (as by a drop), a RACE table gets a new zeroed
    /// directory, an in-place table a new zeroed tuple area, and the loss records are
    /// cleared. 409 `table_not_lost` for a table that lost nothing.
    pub fn reset_table(
        &mut self,
        name: &str,
        now_ms: u64,
    ) -> Result<TableDescription, CatalogError> {
        let t = self.table_rec(name)?.clone();
        if t.lost.is_empty() {
            return Err(conflict(
                "table_not_lost",
                format!(
                    "table {name:?} lost nothing: reset applies to a lost or degraded table (drop it to empty it)"
                ),
            ));
        }
        let mut t2 = t.clone();
        t2.lost.clear();
        let mut fresh: Vec<LeaseRecord> = Vec::new();
        let allocated = match &mut t2.layout {
            RecordLayout::Clover => Ok(()),
            RecordLayout::Race(r) => self
                .table_lease(
                    name,
                    (&t.memnodes, &t.replica_sets),
                    None,
                    self.cfg.directory_bytes,
                    now_ms,
                )
                .map(|l| {
                    r.directory_lease = Some(l.id);
                    r.generation += 1;
                    fresh.push(l);
                }),
            RecordLayout::InPlace(p) => {
                let req = InPlaceRequest {
                    scheme: p.scheme.clone(),
                    capacity: p.capacity,
                    tuple_bytes: p.tuple_bytes,
                    latch_placement: Some(p.latch_placement),
                    unsafe_demo: p.unsafe_demo,
                };
                match crate::inplace::check(&req, t.value_limit) {
                    Err(e) => Err(CatalogError::Invalid(format!(
                        "table {name:?}: its in-place settings no longer check: {e}"
                    ))),
                    Ok(c) => self
                        .table_lease(
                            name,
                            (&t.memnodes, &t.replica_sets),
                            None,
                            c.area_bytes,
                            now_ms,
                        )
                        .and_then(|area| {
                            p.area_lease = Some(area.id);
                            let mid = area.memnode_id;
                            fresh.push(area);
                            p.latch_lease = None;
                            match c.latch_bytes {
                                Some(b) => self
                                    .table_lease(
                                        name,
                                        (&t.memnodes, &t.replica_sets),
                                        Some(mid),
                                        b,
                                        now_ms,
                                    )
                                    .map(|l| {
                                        p.latch_lease = Some(l.id);
                                        fresh.push(l);
                                    }),
                                None => Ok(()),
                            }
                        }),
                }
            }
        };
        let undo = |c: &mut Catalog, fresh: &[LeaseRecord]| {
            for l in fresh {
                c.release(l);
            }
        };
        if let Err(e) = allocated.and_then(|()| {
            fresh
                .iter()
                .find_map(|l| self.scrub(l).err())
                .map_or(Ok(()), Err)
        }) {
            undo(self, &fresh);
            return Err(e);
        }
        let mut batch = Batch::new();
        let emptied = match self.stage_emptying(name, now_ms, &mut batch) {
            Ok(e) => e,
            Err(e) => {
                undo(self, &fresh);
                return Err(e);
            }
        };
        for l in &fresh {
            batch.put(lkey(l.id), l);
        }
        batch.put(tkey(name), &t2).put(IDS_KEY, &self.ids);
        if let Err(e) = self.commit(&batch) {
            undo(self, &fresh);
            return Err(e);
        }
        self.apply_emptying(emptied);
        for l in fresh {
            self.leases.insert(l.id, l);
        }
        tracing::warn!(
            table = %name,
            losses = t.lost.len(),
            "lost table reset: its loss was acknowledged and it is empty again"
        );
        let desc = self.describe(&t2);
        self.tables.insert(t2.name.clone(), t2);
        Ok(desc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(rkey: u32, instance: u64) -> RegionSpec {
        RegionSpec {
            rkey,
            base_va: 4096,
            len: 4096,
            path: None,
            instance,
        }
    }

    #[test]
    fn reasons_say_what_happened() {
        let r = new_memory_reason("a", &[spec(1, 0)], &[spec(2, 0)]);
        assert!(r.contains("without --region-file"), "{r}");
        let r = new_memory_reason("a", &[spec(1, 7)], &[spec(2, 0)]);
        assert!(r.contains("without its region file"), "{r}");
        let r = new_memory_reason("a", &[spec(1, 7)], &[spec(2, 8)]);
        assert!(r.contains("new region file"), "{r}");
    }
}
