//! The catalog: memnode registry, leases, tables and Clover chains, in memory, with
//! every acknowledged change written to the [`MetaStore`] first (one atomic batch, then
//! a flush). Time is an argument (`now_ms`), never read inside, so everything here is
//! testable with a fake clock.
//!
//! Free-extent maps are not stored: they are the regions minus the leases, rebuilt on
//! [`Catalog::open`].
//!
//! Creating a table zeroes the memory it owns from the start (RACE directory, in-place
//! tuple area and latch array) through a [`Scrubber`] before anything is stored: the one
//! place the catalog talks to a memnode, while it is locked (a memset of the area on
//! the memnode; 64 KiB for a directory).
//!
//! [`Catalog`] is defined here with what every operation shares (loading, committing a
//! batch, zeroing table memory, memnode health); its operations are one file per
//! resource:
//!
//! * [`memnodes`] — registration, heartbeats, deregistration;
//! * [`leases`] — client leases, their expiry sweep and adoption by tables;
//! * [`tables`] — creating, describing and dropping tables;
//! * [`chains`] — the Clover slow path: chain ids and tail hints;
//! * [`memory`] — where a new allocation goes, and giving it back;
//! * [`stats`] — counts for metrics and health, and the allocation invariants;
//!
//! and beside them [`config`] (settings and limits), [`error`], [`records`] (what is
//! persisted) and [`keys`] (under which store keys).

mod chains;
mod config;
mod error;
mod keys;
mod leases;
mod memnodes;
mod memory;
mod records;
mod stats;
mod tables;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use chains::MAX_KEY_LEN;
pub use config::{
    CatalogConfig, DEFAULT_CHUNK_SIZE, MAX_CHUNK_SIZE, MAX_VALUE_LIMIT, MIN_CHUNK_SIZE,
    MIN_GRANULE, MIN_VALUE_LIMIT, granule,
};
pub use error::CatalogError;
pub use leases::Sweep;
pub use records::{InPlaceRecord, LeaseRecord, MemnodeRecord, Owner, RaceRecord, TableRecord};
pub use stats::Stats;
pub use tables::validate_table_name;

use crate::alloc::{Allocator, ExtentMap};
use crate::placement::Placement;
use crate::scrub::{MemnodeScrubber, ScrubTarget, Scrubber};
use crate::store::{Batch, MetaStore, StoreError, decode};

/// The id counters (the last id given out of each kind).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Ids {
    memnode: u64,
    lease: u64,
    table: u64,
    chain: u64,
}

/// A memnode as the catalog holds it: its record, the free maps of its regions, and
/// when it last heartbeated (not persisted).
#[derive(Debug)]
struct Node {
    rec: MemnodeRecord,
    maps: Vec<ExtentMap>,
    last_heartbeat_ms: u64,
}

impl Node {
    /// `rec` with all of its regions free, heartbeated at `now_ms`.
    fn new(rec: MemnodeRecord, now_ms: u64) -> Node {
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
    store: Box<dyn MetaStore>,
    cfg: CatalogConfig,
    allocator: Box<dyn Allocator>,
    placement: Box<dyn Placement>,
    ids: Ids,
    memnodes: BTreeMap<u64, Node>,
    leases: BTreeMap<u64, LeaseRecord>,
    tables: BTreeMap<String, TableRecord>,
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
            let node = memnodes
                .get_mut(&l.memnode_id)
                .ok_or_else(|| corrupt(format!("unknown memnode {}", l.memnode_id)))?;
            let idx = node
                .rec
                .regions
                .iter()
                .position(|r| r.rkey == l.rkey)
                .ok_or_else(|| corrupt(format!("unknown rkey {:#x}", l.rkey)))?;
            node.maps[idx]
                .reserve(l.va, l.len)
                .map_err(|e| corrupt(e.to_string()))?;
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
            scrubber: Arc::new(MemnodeScrubber),
        })
    }

    /// How table-owned memory is zeroed before a table gets it (default: the memnode's
    /// admin API, [`MemnodeScrubber`]).
    pub fn set_scrubber(&mut self, scrubber: Arc<dyn Scrubber>) {
        self.scrubber = scrubber;
    }

    /// Zero the memory of `l` (a table-owned piece about to be handed out).
    fn scrub(&self, l: &LeaseRecord) -> Result<(), CatalogError> {
        let admin_url = self
            .memnodes
            .get(&l.memnode_id)
            .map(|n| n.rec.admin_url.clone())
            .unwrap_or_default();
        let target = ScrubTarget {
            memnode_id: l.memnode_id,
            admin_url,
            rkey: l.rkey,
            va: l.va,
            len: l.len,
        };
        self.scrubber.zero(&target).map_err(|why| {
            CatalogError::Scrub(format!(
                "memnode {} could not zero {} bytes at {:#x} for table memory: {why}",
                l.memnode_id, l.len, l.va
            ))
        })
    }

    /// The configuration.
    pub fn config(&self) -> &CatalogConfig {
        &self.cfg
    }

    /// Flushes the store (shutdown).
    pub fn flush(&self) -> Result<(), StoreError> {
        self.store.flush()
    }

    fn commit(&self, batch: &Batch) -> Result<(), CatalogError> {
        self.store.apply(batch)?;
        self.store.flush()?;
        Ok(())
    }

    fn healthy(&self, node: &Node, now_ms: u64) -> bool {
        now_ms.saturating_sub(node.last_heartbeat_ms) <= self.cfg.heartbeat_timeout_ms
    }
}
