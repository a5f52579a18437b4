//! Memnodes: registration (and re-registration after a restart, which revokes the
//! memnode's leases and re-homes the RACE directories that lived on it),
//! heartbeats, deregistration, and what the API shows of them.

use std::net::SocketAddr;

use super::config::granule;
use super::error::{CatalogError, conflict, memnode_not_found};
use super::keys::{IDS_KEY, lkey, mkey, tkey};
use super::memory::Sizing;
use super::records::{LeaseRecord, MemnodeRecord, Owner, RaceRecord, RecordLayout, TableRecord};
use super::state::{Catalog, Node};
use crate::api::{
    HeartbeatResponse, MemnodeInfo, RegionInfo, RegionSpec, RegisterMemnodeRequest,
    RegisterMemnodeResponse,
};
use crate::store::Batch;

fn validate_memnode_name(name: &str) -> Result<(), CatalogError> {
    if name.is_empty()
        || name.len() > 128
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | ':'))
    {
        return Err(CatalogError::Invalid(format!(
            "memnode name {name:?} must be 1 to 128 characters from A-Z, a-z, 0-9, '_', '.', '-', ':'"
        )));
    }
    Ok(())
}

impl Catalog {
    /// Registers a memnode, or re-registers one under the same name.
    ///
    /// Re-registration with the same regions (same rkeys, addresses and lengths) keeps
    /// every lease. With different regions (the memnode restarted and its memory is
    /// new) every lease on the memnode is revoked, its `epoch` increases, and RACE
    /// directories that lived on it are allocated afresh (their `generation` increases).
    pub fn register_memnode(
        &mut self,
        req: RegisterMemnodeRequest,
        now_ms: u64,
    ) -> Result<(RegisterMemnodeResponse, bool), CatalogError> {
        validate_memnode_name(&req.name)?;
        let admin = req.admin_url.trim().trim_end_matches('/').to_owned();
        if !admin.starts_with("http://") || admin.len() <= "http://".len() {
            return Err(CatalogError::Invalid(format!(
                "admin_url {:?} must look like http://host:port",
                req.admin_url
            )));
        }
        let data: SocketAddr = req.data_addr.parse().map_err(|_| {
            CatalogError::Invalid(format!(
                "data_addr {:?} is not an ip:port address",
                req.data_addr
            ))
        })?;
        if req.regions.is_empty() {
            return Err(CatalogError::Invalid(
                "a memnode must register at least one region".into(),
            ));
        }
        let mut sorted: Vec<&RegionSpec> = req.regions.iter().collect();
        sorted.sort_by_key(|r| r.base_va);
        for (i, r) in sorted.iter().enumerate() {
            if r.len == 0 || !r.base_va.is_multiple_of(64) || r.base_va.checked_add(r.len).is_none()
            {
                return Err(CatalogError::Invalid(format!(
                    "region rkey {:#x}: base_va {:#x} must be 64-byte aligned and len {} positive without overflow",
                    r.rkey, r.base_va, r.len
                )));
            }
            if i > 0 && sorted[i - 1].base_va + sorted[i - 1].len > r.base_va {
                return Err(CatalogError::Invalid("regions overlap".into()));
            }
            if sorted[..i].iter().any(|o| o.rkey == r.rkey) {
                return Err(CatalogError::Invalid(format!(
                    "rkey {:#x} appears twice",
                    r.rkey
                )));
            }
        }
        if let Some(other) = self
            .memnodes
            .values()
            .find(|n| n.rec.name != req.name && n.rec.data_addr == data.to_string())
        {
            return Err(conflict(
                "memnode_conflict",
                format!(
                    "data address {data} is already registered by memnode {} ({:?}); deregister it first",
                    other.rec.id, other.rec.name
                ),
            ));
        }
        let same_regions = |a: &[RegionSpec], b: &[RegionSpec]| {
            let key = |r: &RegionSpec| (r.rkey, r.base_va, r.len);
            let mut x: Vec<_> = a.iter().map(key).collect();
            let mut y: Vec<_> = b.iter().map(key).collect();
            x.sort();
            y.sort();
            x == y
        };
        let existing = self
            .memnodes
            .values()
            .find(|n| n.rec.name == req.name)
            .map(|n| n.rec.id);
        let mut batch = Batch::new();
        let (id, created, revoked);
        match existing {
            Some(mid) => {
                id = mid;
                created = false;
                let node = self.memnodes.get_mut(&mid).expect("found above");
                if same_regions(&node.rec.regions, &req.regions) {
                    let mut rec = node.rec.clone();
                    rec.admin_url = admin;
                    rec.data_addr = data.to_string();
                    rec.capacity = req.capacity;
                    rec.regions = req.regions;
                    rec.zone = req.zone;
                    batch.put(mkey(mid), &rec);
                    self.commit(&batch)?;
                    let node = self.memnodes.get_mut(&mid).expect("found above");
                    node.rec = rec;
                    node.last_heartbeat_ms = now_ms;
                    revoked = 0;
                } else {
                    revoked = self.replace_regions(mid, req, admin, data, now_ms)?;
                }
            }
            None => {
                self.ids.memnode += 1;
                id = self.ids.memnode;
                created = true;
                revoked = 0;
                let rec = MemnodeRecord {
                    id,
                    name: req.name,
                    admin_url: admin,
                    data_addr: data.to_string(),
                    capacity: req.capacity,
                    regions: req.regions,
                    epoch: 1,
                    registered_at_ms: now_ms,
                    zone: req.zone,
                };
                batch.put(mkey(id), &rec).put(IDS_KEY, &self.ids);
                self.commit(&batch)?;
                self.memnodes.insert(id, Node::new(rec, now_ms));
            }
        }
        let node = &self.memnodes[&id];
        Ok((
            RegisterMemnodeResponse {
                id,
                created,
                epoch: node.rec.epoch,
                revoked_leases: revoked,
                heartbeat_interval_ms: self.cfg.heartbeat_interval_ms,
                heartbeat_timeout_ms: self.cfg.heartbeat_timeout_ms,
            },
            created,
        ))
    }

    /// Re-registration with new regions: revoke the memnode's leases, rebuild its maps,
    /// bump its epoch, and re-home RACE directories that lived on it.
    fn replace_regions(
        &mut self,
        id: u64,
        req: RegisterMemnodeRequest,
        admin: String,
        data: SocketAddr,
        now_ms: u64,
    ) -> Result<u64, CatalogError> {
        let old = self.memnodes.remove(&id).expect("caller checked");
        let mut rec = old.rec.clone();
        rec.admin_url = admin;
        rec.data_addr = data.to_string();
        rec.capacity = req.capacity;
        rec.regions = req.regions;
        rec.zone = req.zone;
        rec.epoch += 1;
        self.memnodes.insert(id, Node::new(rec.clone(), now_ms));
        let revoked: Vec<LeaseRecord> = self
            .leases
            .values()
            .filter(|l| l.memnode_id == id)
            .cloned()
            .collect();
        let mut batch = Batch::new();
        batch.put(mkey(id), &rec);
        for l in &revoked {
            batch.delete(lkey(l.id));
        }
        // Re-home directories of RACE tables that lived on this memnode.
        let mut new_leases = Vec::new();
        let mut new_tables = Vec::new();
        let homeless: Vec<TableRecord> = self
            .tables
            .values()
            .filter(|t| {
                t.layout
                    .race()
                    .and_then(|r| r.directory_lease)
                    .is_some_and(|lid| revoked.iter().any(|l| l.id == lid))
            })
            .cloned()
            .collect();
        for t in &homeless {
            let Some(race) = t.layout.race() else {
                continue;
            };
            let mut t2 = t.clone();
            let placed = self.place(
                Some(&t.memnodes),
                None,
                self.cfg.directory_bytes,
                Sizing::Exact,
                now_ms,
            );
            let dir = match placed {
                Ok((mid, idx, va, len)) => {
                    self.ids.lease += 1;
                    let node = &self.memnodes[&mid];
                    let l = LeaseRecord {
                        id: self.ids.lease,
                        client: format!("table:{}", t.name),
                        owner: Owner::Table(t.name.clone()),
                        memnode_id: mid,
                        rkey: node.rec.regions[idx].rkey,
                        va,
                        len,
                        ttl_ms: 0,
                        created_at_ms: now_ms,
                        expires_at_ms: None,
                        table: Some(t.name.clone()),
                        adopted_at_ms: None,
                        replicas: Vec::new(),
                    };
                    match self.scrub(&l) {
                        Ok(()) => Ok(l),
                        Err(e) => {
                            self.release(&l);
                            Err(e.to_string())
                        }
                    }
                }
                Err(e) => Err(e.to_string()),
            };
            let dir = match dir {
                Ok(l) => {
                    batch.put(lkey(l.id), &l);
                    let lid = l.id;
                    new_leases.push(l);
                    Some(lid)
                }
                Err(e) => {
                    tracing::warn!(table = %t.name, error = %e, "cannot re-home the RACE directory");
                    None
                }
            };
            t2.layout = RecordLayout::Race(RaceRecord {
                directory_lease: dir,
                generation: race.generation + 1,
            });
            batch.put(tkey(&t.name), &t2);
            new_tables.push(t2);
        }
        batch.put(IDS_KEY, &self.ids);
        if let Err(e) = self.commit(&batch) {
            // Undo: the old node and maps come back; new directory extents are dropped
            // with the new maps.
            self.memnodes.insert(id, old);
            return Err(e);
        }
        for l in &revoked {
            self.leases.remove(&l.id);
        }
        for l in new_leases {
            self.leases.insert(l.id, l);
        }
        for t in new_tables {
            self.tables.insert(t.name.clone(), t);
        }
        tracing::info!(
            memnode = id,
            epoch = rec.epoch,
            revoked = revoked.len(),
            "memnode re-registered with new regions; its leases were revoked"
        );
        Ok(revoked.len() as u64)
    }

    /// Records a heartbeat.
    pub fn heartbeat(&mut self, id: u64, now_ms: u64) -> Result<HeartbeatResponse, CatalogError> {
        let node = self
            .memnodes
            .get_mut(&id)
            .ok_or_else(|| memnode_not_found(id))?;
        node.last_heartbeat_ms = now_ms;
        Ok(HeartbeatResponse {
            id,
            epoch: node.rec.epoch,
        })
    }

    /// Removes a memnode. Its leases are revoked (its memory is gone); RACE tables whose
    /// directory lived on it lose their directory; tables stop listing it.
    pub fn deregister_memnode(&mut self, id: u64) -> Result<(), CatalogError> {
        if !self.memnodes.contains_key(&id) {
            return Err(memnode_not_found(id));
        }
        let revoked: Vec<u64> = self
            .leases
            .values()
            .filter(|l| l.memnode_id == id)
            .map(|l| l.id)
            .collect();
        let mut batch = Batch::new();
        batch.delete(mkey(id));
        for l in &revoked {
            batch.delete(lkey(*l));
        }
        let mut changed = Vec::new();
        for t in self.tables.values() {
            let lost_dir = t
                .layout
                .race()
                .and_then(|r| r.directory_lease)
                .is_some_and(|d| revoked.contains(&d));
            if !lost_dir && !t.memnodes.contains(&id) {
                continue;
            }
            let mut t2 = t.clone();
            t2.memnodes.retain(|m| *m != id);
            if lost_dir && let Some(r) = t2.layout.race_mut() {
                r.directory_lease = None;
                r.generation += 1;
            }
            batch.put(tkey(&t2.name), &t2);
            changed.push(t2);
        }
        self.commit(&batch)?;
        self.memnodes.remove(&id);
        for l in revoked {
            self.leases.remove(&l);
        }
        for t in changed {
            self.tables.insert(t.name.clone(), t);
        }
        Ok(())
    }

    fn memnode_info(&self, node: &Node, now_ms: u64) -> MemnodeInfo {
        let regions: Vec<RegionInfo> = node
            .rec
            .regions
            .iter()
            .zip(&node.maps)
            .map(|(r, m)| RegionInfo {
                rkey: r.rkey,
                base_va: r.base_va,
                len: r.len,
                path: r.path.clone(),
                chunk_size: granule(r.len, self.cfg.chunk_size),
                free_bytes: m.free_bytes(),
                leased_bytes: m.used_bytes(),
            })
            .collect();
        MemnodeInfo {
            id: node.rec.id,
            name: node.rec.name.clone(),
            admin_url: node.rec.admin_url.clone(),
            data_addr: node.rec.data_addr.clone(),
            capacity: node.rec.capacity,
            epoch: node.rec.epoch,
            healthy: self.healthy(node, now_ms),
            last_heartbeat_age_ms: now_ms.saturating_sub(node.last_heartbeat_ms),
            registered_at_ms: node.rec.registered_at_ms,
            free_bytes: regions.iter().map(|r| r.free_bytes).sum(),
            leased_bytes: regions.iter().map(|r| r.leased_bytes).sum(),
            regions,
            zone: node.rec.zone.clone(),
        }
    }

    /// Every memnode.
    pub fn memnodes(&self, now_ms: u64) -> Vec<MemnodeInfo> {
        self.memnodes
            .values()
            .map(|n| self.memnode_info(n, now_ms))
            .collect()
    }

    /// One memnode.
    pub fn memnode(&self, id: u64, now_ms: u64) -> Result<MemnodeInfo, CatalogError> {
        self.memnodes
            .get(&id)
            .map(|n| self.memnode_info(n, now_ms))
            .ok_or_else(|| memnode_not_found(id))
    }
}
