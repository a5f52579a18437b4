//! Tables: creating them (with the memory a RACE or in-place table owns from the
//! start, zeroed), describing them, and dropping them with their chains and memory.

use super::config::{MAX_REPLICATION, MAX_VALUE_LIMIT, MIN_VALUE_LIMIT};
use super::error::{CatalogError, conflict, not_found};
use super::keys::{IDS_KEY, chain_prefix, lkey, tkey};
use super::memory::Sizing;
use super::records::{InPlaceRecord, LeaseRecord, Owner, RaceRecord, RecordLayout, TableRecord};
use super::state::Catalog;
use crate::api::{
    CreateTableRequest, DirectoryLocation, InPlaceInfo, IndexKind, RaceInfo, TableDescription,
    TableLayout, TableMemory, UpdateMode,
};
use crate::store::Batch;

/// Checks a table name: 1–64 characters `[A-Za-z0-9_.-]`, not only dots (`.` and
/// `..` are path segments in the table's URL, `/v1/tables/{name}`).
pub fn validate_table_name(name: &str) -> Result<(), CatalogError> {
    if !name.is_empty() && name.chars().all(|c| c == '.') {
        return Err(CatalogError::Invalid(format!(
            "table name {name:?} is only dots, which URLs treat as path segments; use a name \
             with a letter, digit, '_' or '-'"
        )));
    }
    if name.is_empty() || name.len() > dmkv_api::metadata::TABLE_NAME_MAX {
        return Err(CatalogError::Invalid(format!(
            "table name {name:?} must be 1 to 64 characters long"
        )));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
    {
        return Err(CatalogError::Invalid(format!(
            "table name {name:?} contains {c:?}; allowed are A-Z, a-z, 0-9, '_', '.' and '-'"
        )));
    }
    Ok(())
}

impl Catalog {
    fn table_memory(&self, name: &str) -> TableMemory {
        let mut m = TableMemory::default();
        for l in self.leases.values() {
            match &l.owner {
                Owner::Table(t) if t == name => {
                    m.table_owned_bytes += l.len;
                    m.table_owned_leases += 1;
                    if l.adopted_at_ms.is_some() {
                        m.adopted_bytes += l.len;
                        m.adopted_leases += 1;
                    }
                }
                Owner::Client if l.table.as_deref() == Some(name) => {
                    m.client_bytes += l.len;
                    m.client_leases += 1;
                }
                _ => {}
            }
        }
        m
    }

    pub(super) fn location(&self, lease: u64) -> Option<DirectoryLocation> {
        let l = self.leases.get(&lease)?;
        let n = self.memnodes.get(&l.memnode_id)?;
        Some(DirectoryLocation {
            lease_id: lease,
            memnode_id: l.memnode_id,
            data_addr: n.rec.data_addr.clone(),
            admin_url: n.rec.admin_url.clone(),
            rkey: l.rkey,
            va: l.va,
            len: l.len,
        })
    }

    /// Allocates `bytes` of table-owned memory for table `name` (4 KiB granules)
    /// on one of `allowed`, or on `explicit` — mirrored on every member of one of
    /// `sets` for a replicated table; reserved in the free maps, not yet stored or
    /// listed.
    pub(super) fn table_lease(
        &mut self,
        name: &str,
        (allowed, sets): (&[u64], &[Vec<u64>]),
        explicit: Option<u64>,
        bytes: u64,
        now_ms: u64,
    ) -> Result<LeaseRecord, CatalogError> {
        let (mid, idx, va, len, replicas) = if sets.is_empty() {
            let (mid, idx, va, len) =
                self.place(Some(allowed), explicit, bytes, Sizing::Exact, now_ms)?;
            (mid, idx, va, len, Vec::new())
        } else {
            self.place_mirrored(allowed, sets, explicit, bytes, Sizing::Exact, now_ms)?
        };
        self.ids.lease += 1;
        Ok(LeaseRecord {
            id: self.ids.lease,
            client: format!("table:{name}"),
            owner: Owner::Table(name.to_owned()),
            memnode_id: mid,
            rkey: self.memnodes[&mid].rec.regions[idx].rkey,
            va,
            len,
            ttl_ms: 0,
            created_at_ms: now_ms,
            expires_at_ms: None,
            table: Some(name.to_owned()),
            adopted_at_ms: None,
            replicas,
        })
    }

    pub(super) fn describe(&self, t: &TableRecord) -> TableDescription {
        TableDescription {
            name: t.name.clone(),
            id: t.id,
            value_limit: t.value_limit,
            memnodes: t.memnodes.clone(),
            replication: t.replication,
            replica_sets: t.replica_sets.clone(),
            created_at_ms: t.created_at_ms,
            memory: self.table_memory(&t.name),
            health: super::health::table_health(t),
            syncing: t.syncing.clone(),
            config_epoch: t.config_epoch,
            writes_paused: t.writes_paused,
            feed: t.feed.clone(),
            rereplication: Vec::new(),
            layout: match &t.layout {
                RecordLayout::Clover => TableLayout::Clover,
                RecordLayout::Race(r) => TableLayout::Race(RaceInfo {
                    generation: r.generation,
                    directory: r.directory_lease.and_then(|lid| self.location(lid)),
                }),
                RecordLayout::InPlace(p) => TableLayout::InPlace(InPlaceInfo {
                    scheme: p.scheme.clone(),
                    capacity: p.capacity,
                    tuple_bytes: p.tuple_bytes,
                    latch_placement: p.latch_placement,
                    unsafe_demo: p.unsafe_demo,
                    area: p.area_lease.and_then(|l| self.location(l)),
                    latches: p.latch_lease.and_then(|l| self.location(l)),
                }),
            },
        }
    }

    /// Creates a table; a RACE table gets its directory allocated, an in-place
    /// table its tuple area (and latch array) sized from capacity and tuple size.
    pub fn create_table(
        &mut self,
        req: CreateTableRequest,
        now_ms: u64,
    ) -> Result<TableDescription, CatalogError> {
        validate_table_name(&req.name)?;
        if !(MIN_VALUE_LIMIT..=MAX_VALUE_LIMIT).contains(&req.value_limit) {
            return Err(CatalogError::Invalid(format!(
                "value_limit {} must be from {MIN_VALUE_LIMIT} bytes to {MAX_VALUE_LIMIT} bytes (1 MiB)",
                req.value_limit
            )));
        }
        let replication = req.replication.unwrap_or(1);
        if !(1..=MAX_REPLICATION).contains(&replication) {
            return Err(CatalogError::Invalid(format!(
                "replication {replication} must be from 1 to {MAX_REPLICATION}"
            )));
        }
        let inplace = match (req.index, &req.inplace) {
            (IndexKind::InPlace, Some(p)) => {
                Some(crate::inplace::check(p, req.value_limit).map_err(CatalogError::Invalid)?)
            }
            (IndexKind::InPlace, None) => {
                return Err(CatalogError::Invalid(
                    "an inplace table needs `inplace`: {\"scheme\", \"capacity\", \"tuple_bytes\"[, \"latch_placement\", \"unsafe_demo\"]}".into(),
                ));
            }
            (_, Some(_)) => {
                return Err(CatalogError::Invalid(format!(
                    "`inplace` applies only to index inplace, not {}",
                    req.index.as_str()
                )));
            }
            (_, None) => None,
        };
        // The update mode follows from the index; a request may repeat it, not contradict it.
        match (&inplace, req.update_mode) {
            (Some(_), None) | (None, None) | (None, Some(UpdateMode::OutOfPlace)) => {}
            (Some(_), Some(UpdateMode::InPlace { scheme })) => {
                let given = req
                    .inplace
                    .as_ref()
                    .map(|p| p.scheme.trim().to_ascii_lowercase());
                if given.as_deref() != Some(scheme.trim().to_ascii_lowercase().as_str()) {
                    return Err(CatalogError::Invalid(format!(
                        "update_mode names scheme {scheme:?} but inplace names {:?}",
                        given.unwrap_or_default()
                    )));
                }
            }
            (Some(_), Some(UpdateMode::OutOfPlace)) => {
                return Err(CatalogError::Invalid(
                    "an inplace table is updated in place; update_mode out_of_place contradicts it"
                        .into(),
                ));
            }
            (None, Some(UpdateMode::InPlace { .. })) => {
                return Err(CatalogError::Invalid(format!(
                    "in-place updates need index inplace (with `inplace`: scheme, capacity, \
                     tuple_bytes), not {}",
                    req.index.as_str()
                )));
            }
        }
        let memnodes = match req.memnodes {
            Some(list) => {
                if list.is_empty() {
                    return Err(CatalogError::Invalid(
                        "memnodes, when given, must name at least one memnode".into(),
                    ));
                }
                for id in &list {
                    if !self.memnodes.contains_key(id) {
                        return Err(CatalogError::Invalid(format!(
                            "memnodes: no memnode {id} is registered"
                        )));
                    }
                }
                let mut l = list;
                l.sort_unstable();
                l.dedup();
                l
            }
            None => self.memnodes.keys().copied().collect(),
        };
        if self.tables.contains_key(&req.name) {
            return Err(conflict(
                "table_exists",
                format!("table {:?} already exists", req.name),
            ));
        }
        let replica_sets = self.replica_sets_for(&req.name, &memnodes, replication)?;
        let homes = (memnodes.as_slice(), replica_sets.as_slice());
        let mut batch = Batch::new();
        let mut dir_lease = None;
        if req.index == IndexKind::Race {
            let l = self.table_lease(&req.name, homes, None, self.cfg.directory_bytes, now_ms)?;
            batch.put(lkey(l.id), &l);
            dir_lease = Some(l);
        }
        let mut inplace_leases = Vec::new();
        let inplace_rec = match (&inplace, &req.inplace) {
            (Some(c), Some(p)) => {
                let area = self.table_lease(&req.name, homes, None, c.area_bytes, now_ms)?;
                let latches = match c.latch_bytes {
                    Some(b) => {
                        match self.table_lease(&req.name, homes, Some(area.memnode_id), b, now_ms) {
                            Ok(l) => Some(l),
                            Err(e) => {
                                self.release(&area);
                                return Err(e);
                            }
                        }
                    }
                    None => None,
                };
                let rec = InPlaceRecord {
                    scheme: c.scheme.clone(),
                    capacity: p.capacity,
                    tuple_bytes: p.tuple_bytes,
                    latch_placement: c.placement,
                    unsafe_demo: p.unsafe_demo,
                    area_lease: Some(area.id),
                    latch_lease: latches.as_ref().map(|l| l.id),
                };
                inplace_leases.push(area);
                inplace_leases.extend(latches);
                for l in &inplace_leases {
                    batch.put(lkey(l.id), l);
                }
                Some(rec)
            }
            _ => None,
        };
        // A new table reads zero as "nobody initialised this": zero the memory it owns
        // (a dropped table's directory, fingerprint or tuples may still be there).
        if let Some(e) = dir_lease
            .iter()
            .chain(&inplace_leases)
            .find_map(|l| self.scrub(l).err())
        {
            for l in dir_lease.iter().chain(&inplace_leases) {
                self.release(l);
            }
            return Err(e);
        }
        self.ids.table += 1;
        // `inplace_rec` is there exactly for index inplace (checked above).
        let layout = match (inplace_rec, req.index) {
            (Some(rec), _) => RecordLayout::InPlace(rec),
            (None, IndexKind::Race) => RecordLayout::Race(RaceRecord {
                directory_lease: dir_lease.as_ref().map(|l| l.id),
                generation: 1,
            }),
            (None, _) => RecordLayout::Clover,
        };
        let t = TableRecord {
            id: self.ids.table,
            name: req.name.clone(),
            value_limit: req.value_limit,
            memnodes,
            replication,
            replica_sets,
            created_at_ms: now_ms,
            layout,
            lost: Vec::new(),
            syncing: Vec::new(),
            config_epoch: 0,
            writes_paused: false,
            moves: Vec::new(),
            feed: None,
        };
        batch.put(tkey(&t.name), &t).put(IDS_KEY, &self.ids);
        if let Err(e) = self.commit(&batch) {
            for l in dir_lease.iter().chain(&inplace_leases) {
                self.release(l);
            }
            return Err(e);
        }
        for l in dir_lease.into_iter().chain(inplace_leases) {
            self.leases.insert(l.id, l);
        }
        let desc = self.describe(&t);
        self.tables.insert(t.name.clone(), t);
        Ok(desc)
    }

    /// The record of table `name`, or `table_not_found`.
    pub(super) fn table_rec(&self, name: &str) -> Result<&TableRecord, CatalogError> {
        self.tables
            .get(name)
            .ok_or_else(|| not_found("table_not_found", format!("no table {name:?}")))
    }

    /// One table.
    pub fn table(&self, name: &str) -> Result<TableDescription, CatalogError> {
        Ok(self.describe(self.table_rec(name)?))
    }

    /// Every table, by name.
    pub fn tables(&self) -> Vec<TableDescription> {
        self.tables.values().map(|t| self.describe(t)).collect()
    }

    /// Sets (or with `None` removes) the change feed of Clover table `name`: every
    /// writer that sees it records its writes there. The feed must name the table
    /// (name and id) and have 1 to 8 lanes and consumer rings.
    pub fn set_table_feed(
        &mut self,
        name: &str,
        feed: Option<dmkv_api::feed_layout::FeedLayout>,
    ) -> Result<TableDescription, CatalogError> {
        let mut t = self.table_rec(name)?.clone();
        if !matches!(t.layout, RecordLayout::Clover) {
            return Err(super::error::conflict(
                "wrong_index",
                format!(
                    "table {name:?} is not a Clover table: change feeds record Clover tables only"
                ),
            ));
        }
        if let Some(f) = &feed {
            if f.table != t.name || f.table_id != t.id {
                return Err(CatalogError::Invalid(format!(
                    "the feed names table {:?} id {}, not {:?} id {}",
                    f.table, f.table_id, t.name, t.id
                )));
            }
            let max = dmkv_api::feed_layout::MAX_RINGS;
            if f.lanes.is_empty()
                || f.lanes.len() > max
                || f.consumers.is_empty()
                || f.consumers.len() > max
            {
                return Err(CatalogError::Invalid(format!(
                    "a feed has 1 to {max} lanes and 1 to {max} consumer rings"
                )));
            }
        }
        t.feed = feed;
        let mut batch = Batch::new();
        batch.put(tkey(&t.name), &t);
        self.commit(&batch)?;
        let desc = self.describe(&t);
        self.tables.insert(t.name.clone(), t);
        Ok(desc)
    }

    /// Drops a table: its record, its chains and tail hints, and its memory. Memory
    /// the table owns (directory, tuple area, adopted data leases) returns to the
    /// free map at once. Data leases clients still hold for it expire now: they
    /// cannot be renewed, and their memory returns after the grace period (so that
    /// writes in flight cannot land in memory someone else got).
    pub fn drop_table(&mut self, name: &str, now_ms: u64) -> Result<(), CatalogError> {
        let t = self.table_rec(name)?.clone();
        let mut batch = Batch::new();
        batch.delete(tkey(name));
        let emptied = self.stage_emptying(name, now_ms, &mut batch)?;
        self.commit(&batch)?;
        self.apply_emptying(emptied);
        self.tables.remove(&t.name);
        Ok(())
    }

    /// Stages in `batch` what emptying table `name` changes — its table-owned leases
    /// deleted, its clients' data leases detached and expiring at `now_ms`, its chains
    /// and tail hints deleted — for [`Catalog::apply_emptying`] once committed.
    pub(super) fn stage_emptying(
        &self,
        name: &str,
        now_ms: u64,
        batch: &mut Batch,
    ) -> Result<Emptied, CatalogError> {
        let owned: Vec<LeaseRecord> = self
            .leases
            .values()
            .filter(|l| l.owner == Owner::Table(name.to_owned()))
            .cloned()
            .collect();
        for l in &owned {
            batch.delete(lkey(l.id));
        }
        let detached: Vec<LeaseRecord> = self
            .leases
            .values()
            .filter(|l| l.owner == Owner::Client && l.table.as_deref() == Some(name))
            .map(|l| {
                let mut d = l.clone();
                d.table = None;
                d.expires_at_ms = Some(l.expires_at_ms.map_or(now_ms, |e| e.min(now_ms)));
                d
            })
            .collect();
        for l in &detached {
            batch.put(lkey(l.id), l);
        }
        for kind in ["c", "ci", "h", "cd"] {
            for (k, _) in self.store.scan_prefix(&chain_prefix(kind, name))? {
                batch.delete(k);
            }
        }
        Ok(Emptied { owned, detached })
    }

    /// Applies a committed [`Catalog::stage_emptying`]: the table-owned memory returns
    /// to the free maps, the detached leases stay (expiring).
    pub(super) fn apply_emptying(&mut self, e: Emptied) {
        for l in &e.owned {
            self.leases.remove(&l.id);
            self.release(l);
        }
        for l in e.detached {
            self.leases.insert(l.id, l);
        }
    }
}

/// What emptying a table changes in the lease map ([`Catalog::stage_emptying`]).
pub(super) struct Emptied {
    owned: Vec<LeaseRecord>,
    detached: Vec<LeaseRecord>,
}

#[cfg(test)]
mod name_tests {
    use super::validate_table_name;

    #[test]
    fn names_that_are_path_segments_are_refused() {
        for bad in [".", "..", "...", "", "a/b", "a b", &"x".repeat(65)] {
            assert!(validate_table_name(bad).is_err(), "{bad:?}");
        }
        for good in [
            "users",
            "a.b",
            ".hidden",
            "v1..2",
            "_",
            "-",
            &"x".repeat(64),
        ] {
            assert!(validate_table_name(good).is_ok(), "{good:?}");
        }
    }
}
