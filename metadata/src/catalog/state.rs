//! The catalog's state — memnodes with their free maps, leases, tables, id counters —
//! and what every operation shares: loading it from the store, committing a batch,
//! zeroing table memory, memnode health.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::config::CatalogConfig;
use super::error::CatalogError;
use super::keys;
use super::records::{LeaseRecord, MemnodeRecord, TableRecord};
use crate::alloc::{Allocator, ExtentMap};
use crate::placement::Placement;
use crate::scrub::{MemnodeScrubber, ScrubTarget, Scrubber};
use crate::store::{Batch, MetaStore, StoreError, decode};

/// The id counters (the last id given out of each kind).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Ids {
    pub(super) memnode: u64,
    pub(super) lease: u64,
    pub(super) table: u64,
    pub(super) chain: u64,
}

/// A memnode as the catalog holds it: its record, the free maps of its regions, and
/// when it last heartbeated (not persisted).
#[derive(Debug)]
pub(super) struct Node {
    pub(super) rec: MemnodeRecord,
    pub(super) maps: Vec<ExtentMap>,
    pub(super) last_heartbeat_ms: u64,
}

impl Node {
    /// `rec` with all of its regions free, heartbeated at `now_ms`.
    pub(super) fn new(rec: MemnodeRecord, now_ms: u64) -> Node {
        let maps = rec
            .regions
            .iter()
            .map(|r| ExtentMap::new(r.base_va, r.len))
            .collect();
        Node {
            rec,
            maps,
            last_heartbeat_ms: now_ms,
        }
    }
}

/// The catalog. Not synchronised: the server keeps it behind a mutex.
#[derive(Debug)]
pub struct Catalog {
    pub(super) store: Box<dyn MetaStore>,
    pub(super) cfg: CatalogConfig,
    pub(super) allocator: Box<dyn Allocator>,
    pub(super) placement: Box<dyn Placement>,
    pub(super) ids: Ids,
    pub(super) memnodes: BTreeMap<u64, Node>,
    pub(super) leases: BTreeMap<u64, LeaseRecord>,
    pub(super) tables: BTreeMap<String, TableRecord>,
    scrubber: Arc<dyn Scrubber>,
}

impl Catalog {
    /// Loads the catalog from `store` (empty on first start). Memnodes count as having
    /// heartbeated at `now_ms`, so they get one timeout to check in after a restart.
    pub fn open(
        store: Box<dyn MetaStore>,
        cfg: CatalogConfig,
        now_ms: u64,
    ) -> Result<Catalog, CatalogError> {
        cfg.validate().map_err(CatalogError::Invalid)?;
        let ids = match store.get(keys::IDS_KEY)? {
            Some(v) => decode(keys::IDS_KEY, &v)?,
            None => Ids::default(),
        };
        let mut memnodes = BTreeMap::new();
        for (k, v) in store.scan_prefix(keys::MEMNODES)? {
            let rec: MemnodeRecord = decode(&k, &v)?;
            memnodes.insert(rec.id, Node::new(rec, now_ms));
        }
        let mut leases = BTreeMap::new();
        for (k, v) in store.scan_prefix(keys::LEASES)? {
            let l: LeaseRecord = decode(&k, &v)?;
            let corrupt = |reason: String| StoreError::Corrupt {
                key: String::from_utf8_lossy(&k).into_owned(),
                reason,
            };
            for (memnode_id, rkey, va) in l.extents() {
                let node = memnodes
                    .get_mut(&memnode_id)
                    .ok_or_else(|| corrupt(format!("unknown memnode {memnode_id}")))?;
                let idx = node
                    .rec
                    .regions
                    .iter()
                    .position(|r| r.rkey == rkey)
                    .ok_or_else(|| corrupt(format!("unknown rkey {rkey:#x}")))?;
                node.maps[idx]
                    .reserve(va, l.len)
                    .map_err(|e| corrupt(e.to_string()))?;
            }
            leases.insert(l.id, l);
        }
        let mut tables = BTreeMap::new();
        for (k, v) in store.scan_prefix(keys::TABLES)? {
            let t: TableRecord = decode(&k, &v)?;
            tables.insert(t.name.clone(), t);
        }
        Ok(Catalog {
            store,
            allocator: cfg.allocator.build(),
            placement: cfg.placement.build(),
            cfg,
            ids,
            memnodes,
            leases,
            tables,
            scrubber: Arc::new(MemnodeScrubber::default()),
        })
    }

    /// How table-owned memory is zeroed before a table gets it (default: the memnode's
    /// admin API, [`MemnodeScrubber`]).
    pub fn set_scrubber(&mut self, scrubber: Arc<dyn Scrubber>) {
        self.scrubber = scrubber;
    }

    /// Zero the memory of `l` (a table-owned piece about to be handed out), every
    /// copy of it.
    pub(super) fn scrub(&self, l: &LeaseRecord) -> Result<(), CatalogError> {
        for (memnode_id, rkey, va) in l.extents() {
            let admin_url = self
                .memnodes
                .get(&memnode_id)
                .map(|n| n.rec.admin_url.clone())
                .unwrap_or_default();
            let target = ScrubTarget {
                memnode_id,
                admin_url,
                rkey,
                va,
                len: l.len,
            };
            self.scrubber.zero(&target).map_err(|why| {
                CatalogError::Scrub(format!(
                    "memnode {memnode_id} could not zero {} bytes at {va:#x} for table memory: {why}",
                    l.len
                ))
            })?;
        }
        Ok(())
    }

    /// The configuration.
    pub fn config(&self) -> &CatalogConfig {
        &self.cfg
    }

    /// Flushes the store (shutdown).
    pub fn flush(&self) -> Result<(), StoreError> {
        self.store.flush()
    }

    pub(super) fn commit(&self, batch: &Batch) -> Result<(), CatalogError> {
        self.store.apply(batch)?;
        self.store.flush()?;
        Ok(())
    }

    pub(super) fn healthy(&self, node: &Node, now_ms: u64) -> bool {
        now_ms.saturating_sub(node.last_heartbeat_ms) <= self.cfg.heartbeat_timeout_ms
    }
}
