//! Leases: granting chunks to clients, renewing, freeing, the expiry sweep, and
//! handing data leases over to their table.

use std::collections::{BTreeMap, BTreeSet};

use super::error::{CatalogError, conflict, not_found};
use super::keys::{IDS_KEY, lkey};
use super::memory::Sizing;
use super::records::{LeaseRecord, Owner};
use super::runs::coalesce;
use super::state::Catalog;
use crate::alloc::MIN_ALIGN;
use crate::api::{CreateLeaseRequest, Lease, LeaseCopy};
use crate::expiry::{self, Disposal, LeaseState};
use crate::store::Batch;

/// What a sweep did ([`Catalog::reclaim_expired`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sweep {
    /// Leases whose memory returned to the free map.
    pub reclaimed: Vec<LeaseRecord>,
    /// Data leases their table adopted, as each was adopted (before it merged
    /// into a neighbouring run of the table: see `runs`).
    pub adopted: Vec<LeaseRecord>,
}

/// `l` as its table's memory from `now_ms` on.
fn adopted(l: &LeaseRecord, table: String, now_ms: u64) -> LeaseRecord {
    let mut a = l.clone();
    a.owner = Owner::Table(table.clone());
    a.table = Some(table);
    a.expires_at_ms = None;
    a.ttl_ms = 0;
    a.adopted_at_ms = Some(now_ms);
    a
}

impl Catalog {
    fn lease_view(&self, l: &LeaseRecord, now_ms: u64) -> Lease {
        let node = self.memnodes.get(&l.memnode_id);
        Lease {
            lease_id: l.id,
            client: l.client.clone(),
            owner: match &l.owner {
                Owner::Client => "client".to_owned(),
                Owner::Table(t) => format!("table:{t}"),
            },
            table: l.table.clone(),
            adopted_at_ms: l.adopted_at_ms,
            memnode_id: l.memnode_id,
            data_addr: node.map(|n| n.rec.data_addr.clone()).unwrap_or_default(),
            admin_url: node.map(|n| n.rec.admin_url.clone()).unwrap_or_default(),
            rkey: l.rkey,
            va: l.va,
            len: l.len,
            ttl_ms: l.ttl_ms,
            expires_at_ms: l.expires_at_ms,
            replicas: l
                .replicas
                .iter()
                .map(|c| {
                    let n = self.memnodes.get(&c.memnode_id);
                    LeaseCopy {
                        memnode_id: c.memnode_id,
                        rkey: c.rkey,
                        va: c.va,
                        admin_url: n.map(|n| n.rec.admin_url.clone()).unwrap_or_default(),
                        data_addr: n.map(|n| n.rec.data_addr.clone()).unwrap_or_default(),
                    }
                })
                .collect(),
            state: match l.owner {
                Owner::Table(_) => "table".to_owned(),
                Owner::Client => expiry::state(l.expires_at_ms, now_ms, self.cfg.grace_ms)
                    .label()
                    .to_owned(),
            },
        }
    }

    fn ttl(&self, ttl: Option<u64>) -> Result<u64, CatalogError> {
        let ttl = ttl.unwrap_or(self.cfg.default_lease_ttl_ms);
        if !(self.cfg.min_lease_ttl_ms..=self.cfg.max_lease_ttl_ms).contains(&ttl) {
            return Err(CatalogError::Invalid(format!(
                "ttl_ms {ttl} is outside {} ..= {}",
                self.cfg.min_lease_ttl_ms, self.cfg.max_lease_ttl_ms
            )));
        }
        Ok(ttl)
    }

    /// Leases a chunk to a client: `bytes` rounded up to the chunk granule, or when
    /// no free extent holds that, the largest one of at least `min_bytes` (see
    /// `memory`).
    pub fn create_lease(
        &mut self,
        req: CreateLeaseRequest,
        now_ms: u64,
    ) -> Result<Lease, CatalogError> {
        if req.client.is_empty() || req.client.len() > 128 {
            return Err(CatalogError::Invalid(
                "client must be 1 to 128 characters long".into(),
            ));
        }
        if req.bytes == 0 {
            return Err(CatalogError::Invalid("bytes must be at least 1".into()));
        }
        let ttl = self.ttl(req.ttl_ms)?;
        let (homes, sets) = match &req.table {
            Some(t) => {
                let t = self.table_rec(t)?;
                (t.memnodes.clone(), t.mirror_sets())
            }
            None => (Vec::new(), Vec::new()),
        };
        let sizing = Sizing::Chunks {
            min: req.min_bytes.unwrap_or(req.bytes).clamp(1, req.bytes),
            table: req.table.as_deref(),
        };
        let (mid, idx, va, len, replicas) = if sets.is_empty() {
            let (mid, idx, va, len) = self.place(None, req.memnode, req.bytes, sizing, now_ms)?;
            (mid, idx, va, len, Vec::new())
        } else {
            self.place_mirrored(&homes, &sets, req.memnode, req.bytes, sizing, now_ms)?
        };
        self.ids.lease += 1;
        let l = LeaseRecord {
            id: self.ids.lease,
            client: req.client,
            owner: Owner::Client,
            memnode_id: mid,
            rkey: self.memnodes[&mid].rec.regions[idx].rkey,
            va,
            len,
            ttl_ms: ttl,
            created_at_ms: now_ms,
            expires_at_ms: Some(now_ms.saturating_add(ttl)),
            table: req.table,
            adopted_at_ms: None,
            replicas,
        };
        let mut batch = Batch::new();
        batch.put(lkey(l.id), &l).put(IDS_KEY, &self.ids);
        if let Err(e) = self.commit(&batch) {
            self.release(&l);
            return Err(e);
        }
        let view = self.lease_view(&l, now_ms);
        self.leases.insert(l.id, l);
        Ok(view)
    }

    fn lease_rec(&self, id: u64) -> Result<&LeaseRecord, CatalogError> {
        self.leases.get(&id).ok_or_else(|| {
            not_found(
                "lease_not_found",
                format!("no lease {id} (never granted, freed, revoked or reclaimed)"),
            )
        })
    }

    /// Extends a client lease to `now + ttl`.
    pub fn renew_lease(
        &mut self,
        id: u64,
        ttl: Option<u64>,
        now_ms: u64,
    ) -> Result<Lease, CatalogError> {
        let l = self.lease_rec(id)?;
        if let Owner::Table(t) = &l.owner {
            return Err(conflict(
                "lease_owned_by_table",
                format!("lease {id} belongs to table {t:?} and does not expire"),
            ));
        }
        if expiry::state(l.expires_at_ms, now_ms, self.cfg.grace_ms) != LeaseState::Active {
            return Err(CatalogError::Expired(format!(
                "lease {id} expired at {} ms (now {now_ms} ms); its memory will be reused: lease a new chunk",
                l.expires_at_ms.unwrap_or(0)
            )));
        }
        let ttl = self.ttl(ttl.or(Some(l.ttl_ms)))?;
        let mut l = l.clone();
        l.ttl_ms = ttl;
        l.expires_at_ms = Some(now_ms.saturating_add(ttl));
        let mut batch = Batch::new();
        batch.put(lkey(id), &l);
        self.commit(&batch)?;
        let view = self.lease_view(&l, now_ms);
        self.leases.insert(id, l);
        Ok(view)
    }

    /// Frees a client lease at once.
    pub fn free_lease(&mut self, id: u64) -> Result<(), CatalogError> {
        let l = self.lease_rec(id)?.clone();
        if let Owner::Table(t) = &l.owner {
            return Err(conflict(
                "lease_owned_by_table",
                format!("lease {id} belongs to table {t:?}; drop the table to free it"),
            ));
        }
        let mut batch = Batch::new();
        batch.delete(lkey(id));
        self.commit(&batch)?;
        self.leases.remove(&id);
        self.release(&l);
        Ok(())
    }

    /// One lease.
    pub fn lease(&self, id: u64, now_ms: u64) -> Result<Lease, CatalogError> {
        Ok(self.lease_view(self.lease_rec(id)?, now_ms))
    }

    /// Leases, optionally only those of `client`.
    pub fn leases(&self, client: Option<&str>, now_ms: u64) -> Vec<Lease> {
        self.leases
            .values()
            .filter(|l| client.is_none_or(|c| c == l.client))
            .map(|l| self.lease_view(l, now_ms))
            .collect()
    }

    /// Sweeps leases whose grace period is over: a data lease whose table exists is
    /// adopted by the table (its memory may hold live values, so it is never
    /// reused while the table lives) and merged into the table's runs it touches;
    /// every other lease's memory returns to the free map.
    pub fn reclaim_expired(&mut self, now_ms: u64) -> Result<Sweep, CatalogError> {
        let due = expiry::due_for_reclaim(self.leases.values(), now_ms, self.cfg.grace_ms);
        if due.is_empty() {
            return Ok(Sweep::default());
        }
        let mut sweep = Sweep::default();
        let mut next = self.leases.clone();
        let mut touched = BTreeSet::new();
        for id in &due {
            let Some(l) = next.get(id) else {
                continue;
            };
            touched.insert(*id);
            match expiry::disposal(l, |t| self.tables.contains_key(t)) {
                Disposal::Adopt(table) => {
                    let a = adopted(l, table, now_ms);
                    sweep.adopted.push(a.clone());
                    merge_into(&mut next, &mut touched, a);
                }
                Disposal::Reclaim => {
                    sweep.reclaimed.push(l.clone());
                    next.remove(id);
                }
            }
        }
        self.commit(&changes(&next, &touched))?;
        self.leases = next;
        for l in &sweep.reclaimed {
            self.release(l);
        }
        Ok(sweep)
    }

    /// Hands a client's data lease over to its table now (the client stops and
    /// knows its table data lies in the first `keep_bytes` of the chunk): the lease
    /// becomes table-owned, trimmed to `keep_bytes` rounded up to 64 bytes, and
    /// merges into the table's runs it touches (the answer is the merged record,
    /// which may carry an older id); the rest returns to the free map.
    /// `keep_bytes` 0 frees the lease.
    pub fn adopt_lease(
        &mut self,
        id: u64,
        keep_bytes: Option<u64>,
        now_ms: u64,
    ) -> Result<Option<Lease>, CatalogError> {
        let l = self.lease_rec(id)?.clone();
        let table = match (&l.owner, &l.table) {
            (Owner::Table(t), _) => {
                return Err(conflict(
                    "lease_owned_by_table",
                    format!("lease {id} already belongs to table {t:?}"),
                ));
            }
            (Owner::Client, None) => {
                return Err(conflict(
                    "not_a_data_lease",
                    format!("lease {id} names no table; free it instead"),
                ));
            }
            (Owner::Client, Some(t)) => t.clone(),
        };
        if !self.tables.contains_key(&table) {
            return Err(not_found(
                "table_not_found",
                format!("lease {id} names table {table:?}, which no longer exists"),
            ));
        }
        let keep = keep_bytes
            .unwrap_or(l.len)
            .min(l.len)
            .next_multiple_of(MIN_ALIGN)
            .min(l.len);
        if keep == 0 {
            self.free_lease(id)?;
            return Ok(None);
        }
        let mut a = adopted(&l, table, now_ms);
        a.len = keep;
        let mut next = self.leases.clone();
        let mut touched = BTreeSet::from([id]);
        let merged = merge_into(&mut next, &mut touched, a);
        self.commit(&changes(&next, &touched))?;
        self.leases = next;
        if keep < l.len {
            self.release(&l.slice(keep, l.len - keep));
        }
        let view = self.leases.get(&merged).map(|m| self.lease_view(m, now_ms));
        Ok(view)
    }
}

/// Puts `adopted` into `leases`, merged with the runs of its table it touches;
/// every id whose record changed or went is added to `touched`. Returns the id of
/// the record now holding the memory.
fn merge_into(
    leases: &mut BTreeMap<u64, LeaseRecord>,
    touched: &mut BTreeSet<u64>,
    adopted: LeaseRecord,
) -> u64 {
    let (merged, absorbed) = coalesce(leases, adopted);
    for id in absorbed {
        leases.remove(&id);
        touched.insert(id);
    }
    touched.insert(merged.id);
    let id = merged.id;
    leases.insert(id, merged);
    id
}

/// The batch that stores the `touched` records of `leases` as they are now (a put
/// for each that is there, a delete for each that is gone).
fn changes(leases: &BTreeMap<u64, LeaseRecord>, touched: &BTreeSet<u64>) -> Batch {
    let mut batch = Batch::new();
    for id in touched {
        match leases.get(id) {
            Some(l) => batch.put(lkey(*id), l),
            None => batch.delete(lkey(*id)),
        };
    }
    batch
}
