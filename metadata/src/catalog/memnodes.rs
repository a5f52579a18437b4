//! Memnodes: registration (and re-registration after a restart: with the same region
//! instance the memnode rejoined with its data; with new memory its leases are revoked
//! and the tables that had data there are marked lost), heartbeats, deregistration
//! (refused while data lives there unless forced), and what the API shows of them.

use std::net::SocketAddr;

use super::config::granule;
use super::error::{CatalogError, conflict, memnode_not_found};
use super::health::new_memory_reason;
use super::keys::{IDS_KEY, mkey, tkey};
use super::records::{MemnodeRecord, TableRecord};
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
    /// Re-registration with the same regions (same rkeys, addresses, lengths and
    /// instance ids — a memnode that restarted on its region file) keeps every lease
    /// and table and the epoch. With different regions (the memnode restarted and its
    /// memory is new) every lease on the memnode is revoked, its `epoch` increases,
    /// and every table with data there gets a loss record (state `lost`).
    pub fn register_memnode(
        &mut self,
        req: RegisterMemnodeRequest,
        now_ms: u64,
    ) -> Result<(RegisterMemnodeResponse, bool), CatalogError> {
        validate_memnode_name(&req.name)?;
        let admin = req.admin_url.trim().trim_end_matches('/').to_owned();
        let rest = admin
            .strip_prefix("http://")
            .or_else(|| admin.strip_prefix("https://"));
        if rest.is_none_or(str::is_empty) {
            return Err(CatalogError::Invalid(format!(
                "admin_url {:?} must look like http://host:port or https://host:port",
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
            let key = |r: &RegionSpec| (r.rkey, r.base_va, r.len, r.instance);
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
                    draining: false,
                    retired: false,
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

    /// Re-registration with new regions (the memnode's memory is new): its leases are
    /// revoked, its epoch increases, and every table with data there is marked lost
    /// with the memnode's name and the reason (see `health`); nothing is re-homed.
    fn replace_regions(
        &mut self,
        id: u64,
        req: RegisterMemnodeRequest,
        admin: String,
        data: SocketAddr,
        now_ms: u64,
    ) -> Result<u64, CatalogError> {
        let old = &self
            .memnodes
            .get(&id)
            .ok_or_else(|| memnode_not_found(id))?
            .rec;
        let reason = new_memory_reason(&old.name, &old.regions, &req.regions);
        // Its copies in replicated tables are gone: the other members take over.
        self.fail_over(id, &reason, now_ms)?;
        let old = &self
            .memnodes
            .get(&id)
            .ok_or_else(|| memnode_not_found(id))?
            .rec;
        let mut rec = old.clone();
        rec.admin_url = admin;
        rec.data_addr = data.to_string();
        rec.capacity = req.capacity;
        rec.regions = req.regions;
        rec.zone = req.zone;
        rec.epoch += 1;
        let mut batch = Batch::new();
        batch.put(mkey(id), &rec);
        let (revoked, lost) = self.lose_memory(id, &rec.name, &reason, now_ms, &mut batch);
        self.commit(&batch)?;
        let epoch = rec.epoch;
        self.memnodes.insert(id, Node::new(rec, now_ms));
        for l in &revoked {
            self.leases.remove(&l.id);
        }
        self.log_losses(&lost, id);
        for t in lost {
            self.tables.insert(t.name.clone(), t);
        }
        tracing::warn!(
            memnode = id,
            epoch,
            revoked = revoked.len(),
            reason = %reason,
            "memnode re-registered with new memory; its leases were revoked"
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

    /// Removes a memnode. Refused (409 `memnode_in_use`) while leases live on it,
    /// unless `force`: then its leases are revoked, every table with data there is
    /// marked lost, and tables stop listing it.
    pub fn deregister_memnode(
        &mut self,
        id: u64,
        force: bool,
        now_ms: u64,
    ) -> Result<(), CatalogError> {
        let node = self
            .memnodes
            .get(&id)
            .ok_or_else(|| memnode_not_found(id))?;
        if !force {
            self.check_deletable(id)?;
        }
        let name = node.rec.name.clone();
        if !force && let Some(table) = self.home_of_replicated(id) {
            // Its copies are gone (drained), but the replica set it is the home of
            // is addressed in its coordinates: keep the record, retired.
            let mut rec = node.rec.clone();
            rec.retired = true;
            rec.draining = true;
            let mut batch = Batch::new();
            batch.put(mkey(id), &rec);
            self.commit(&batch)?;
            if let Some(n) = self.memnodes.get_mut(&id) {
                n.rec = rec;
            }
            tracing::warn!(
                memnode = id,
                table = %table,
                "memnode deleted after its copies moved; its record stays, retired, as the home that names a replica set's memory"
            );
            return Ok(());
        }
        let reason = format!("memnode {name} was deleted with ?force=true while holding it");
        self.fail_over(id, &reason, now_ms)?;
        let mut batch = Batch::new();
        batch.delete(mkey(id));
        let (revoked, lost) = self.lose_memory(id, &name, &reason, now_ms, &mut batch);
        let mut changed: Vec<TableRecord> = Vec::new();
        for t in self.tables.values() {
            let mut t2 = lost.iter().find(|l| l.name == t.name).unwrap_or(t).clone();
            if !t2.memnodes.contains(&id) && !lost.iter().any(|l| l.name == t.name) {
                continue;
            }
            t2.memnodes.retain(|m| *m != id);
            batch.put(tkey(&t2.name), &t2);
            changed.push(t2);
        }
        self.commit(&batch)?;
        self.memnodes.remove(&id);
        for l in &revoked {
            self.leases.remove(&l.id);
        }
        self.log_losses(&lost, id);
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
            state: self.memnode_state(node, now_ms),
            draining: node.rec.draining,
            retired: node.rec.retired,
            persistent: node.rec.regions.iter().all(|r| r.instance != 0),
            drain_progress: self.drain_progress(node.rec.id),
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
