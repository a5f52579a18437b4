//! The catalog: memnode registry, leases, tables and Clover chains, in memory, with
//! every acknowledged change written to the [`MetaStore`] first (one atomic batch, then
//! a flush). Time is an argument (`now_ms`), never read inside, so everything here is
//! testable with a fake clock.
//!
//! Stored keys: `n/ids` (id counters), `m/<id>` memnodes, `l/<id>` leases, `t/<name>`
//! tables, `c/<table>\0<key>` chain ids, `ci/<table>\0<chain id>` their keys,
//! `h/<table>\0<chain id>` tail hints. Free-extent maps are not stored: they are the
//! regions minus the leases, rebuilt on [`Catalog::open`].
//!
//! Creating a table zeroes the memory it owns from the start (RACE directory, in-place
//! tuple area and latch array) through a [`Scrubber`] before anything is stored: the one
//! place the catalog talks to a memnode, while it is locked (a memset of the area on
//! the memnode; 64 KiB for a directory).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::alloc::{Allocator, AllocatorKind, ExtentMap};
use crate::api::{
    ChainInfo, ChainResponse, CreateLeaseRequest, CreateTableRequest, DirectoryLocation,
    HeartbeatResponse, InPlaceInfo, IndexKind, LatchPlacement, Lease, MemnodeInfo, RaceInfo,
    RegionInfo, RegionSpec, RegisterMemnodeRequest, RegisterMemnodeResponse, RootResponse,
    TableDescription, TableMemory, TailHint, TailResponse, UpdateMode,
};
use crate::expiry::{self, Disposal, LeaseState};
use crate::placement::{Candidate, Placement, PlacementKind};
use crate::scrub::{MemnodeScrubber, ScrubTarget, Scrubber};
use crate::store::{Batch, MetaStore, StoreError, decode, encode};

/// Smallest table value limit.
pub const MIN_VALUE_LIMIT: u64 = 64;
/// Largest table value limit.
pub const MAX_VALUE_LIMIT: u64 = 1 << 20;
/// Smallest configurable chunk size.
pub const MIN_CHUNK_SIZE: u64 = 1 << 20;
/// Largest configurable chunk size.
pub const MAX_CHUNK_SIZE: u64 = 64 << 20;
/// Default chunk size.
pub const DEFAULT_CHUNK_SIZE: u64 = 4 << 20;
/// Smallest lease granularity, for small regions.
pub const MIN_GRANULE: u64 = 4096;
/// Longest Clover key.
pub const MAX_KEY_LEN: usize = 1024;

/// Settings of the catalog.
#[derive(Debug, Clone)]
pub struct CatalogConfig {
    /// Lease granularity for regions of at least 16 chunks (power of two, 1–64 MiB).
    pub chunk_size: u64,
    /// After how long without a heartbeat a memnode is unhealthy.
    pub heartbeat_timeout_ms: u64,
    /// How often memnodes are told to heartbeat.
    pub heartbeat_interval_ms: u64,
    /// TTL of a lease that asks for none.
    pub default_lease_ttl_ms: u64,
    /// Shortest TTL accepted.
    pub min_lease_ttl_ms: u64,
    /// Longest TTL accepted.
    pub max_lease_ttl_ms: u64,
    /// Time between a lease's expiry and the reuse of its memory.
    pub grace_ms: u64,
    /// Size of a RACE table's directory.
    pub directory_bytes: u64,
    /// Where in a region a lease goes.
    pub allocator: AllocatorKind,
    /// Which memnode serves a lease.
    pub placement: PlacementKind,
}

impl Default for CatalogConfig {
    fn default() -> CatalogConfig {
        CatalogConfig {
            chunk_size: DEFAULT_CHUNK_SIZE,
            heartbeat_timeout_ms: 3000,
            heartbeat_interval_ms: 1000,
            default_lease_ttl_ms: 30_000,
            min_lease_ttl_ms: 100,
            max_lease_ttl_ms: 24 * 3600 * 1000,
            grace_ms: 5000,
            directory_bytes: 64 << 10,
            allocator: AllocatorKind::FirstFit,
            placement: PlacementKind::MostFree,
        }
    }
}

impl CatalogConfig {
    /// Checks the values.
    pub fn validate(&self) -> Result<(), String> {
        if !self.chunk_size.is_power_of_two()
            || !(MIN_CHUNK_SIZE..=MAX_CHUNK_SIZE).contains(&self.chunk_size)
        {
            return Err(format!(
                "chunk size {} must be a power of two from 1 MiB to 64 MiB",
                self.chunk_size
            ));
        }
        if self.heartbeat_timeout_ms == 0 || self.heartbeat_interval_ms == 0 {
            return Err("heartbeat interval and timeout must be positive".into());
        }
        if self.min_lease_ttl_ms == 0
            || self.min_lease_ttl_ms > self.default_lease_ttl_ms
            || self.default_lease_ttl_ms > self.max_lease_ttl_ms
        {
            return Err("lease TTLs must satisfy 0 < min <= default <= max".into());
        }
        if self.directory_bytes == 0 || !self.directory_bytes.is_multiple_of(MIN_GRANULE) {
            return Err("the RACE directory size must be a positive multiple of 4 KiB".into());
        }
        Ok(())
    }
}

/// The lease granularity (and alignment) of a region of `region_len` bytes: the chunk
/// size, or for small regions the power of two that gives at least 16 chunks per
/// region, but never below 4 KiB.
pub fn granule(region_len: u64, chunk_size: u64) -> u64 {
    let sixteenth = (region_len / 16).max(1);
    let pow = 1u64 << (63 - sixteenth.leading_zeros());
    pow.clamp(MIN_GRANULE, chunk_size.max(MIN_GRANULE))
}

/// Why a catalog operation failed; each maps to one HTTP status.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The request is well-formed but invalid (422).
    #[error("{0}")]
    Invalid(String),
    /// Something named does not exist (404); `code` names what.
    #[error("{message}")]
    NotFound {
        /// `memnode_not_found`, `lease_not_found`, `table_not_found`, `chain_not_found`,
        /// `tail_not_found`.
        code: &'static str,
        /// Message.
        message: String,
    },
    /// The request conflicts with the state (409).
    #[error("{message}")]
    Conflict {
        /// `table_exists`, `memnode_conflict`, `memnode_unhealthy`, `wrong_index`,
        /// `lease_owned_by_table`, `not_a_data_lease`.
        code: &'static str,
        /// Message.
        message: String,
    },
    /// The lease expired (410).
    #[error("{0}")]
    Expired(String),
    /// No memnode has room (507).
    #[error("{0}")]
    OutOfMemory(String),
    /// No healthy memnode is registered (503).
    #[error("{0}")]
    NoMemnodes(String),
    /// Memory for the table could not be zeroed on its memnode (503); nothing was
    /// changed.
    #[error("{0}")]
    Scrub(String),
    /// Persistence failed (500); nothing was changed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn not_found(code: &'static str, message: String) -> CatalogError {
    CatalogError::NotFound { code, message }
}

fn conflict(code: &'static str, message: String) -> CatalogError {
    CatalogError::Conflict { code, message }
}

/// Who owns a lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Owner {
    /// A client; expires unless renewed.
    Client,
    /// A table (its RACE directory or in-place tuple area, or a data lease it
    /// adopted); lives as long as the table.
    Table(String),
}

/// A persisted lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseRecord {
    /// Id.
    pub id: u64,
    /// Holder's name.
    pub client: String,
    /// Owner.
    pub owner: Owner,
    /// Memnode.
    pub memnode_id: u64,
    /// Region's rkey.
    pub rkey: u32,
    /// First byte.
    pub va: u64,
    /// Length.
    pub len: u64,
    /// TTL used by renewals without one.
    pub ttl_ms: u64,
    /// Creation time.
    pub created_at_ms: u64,
    /// Expiry (`None` for table-owned memory).
    pub expires_at_ms: Option<u64>,
    /// For a data lease: the table whose data it holds. Its memory is adopted by the
    /// table instead of reclaimed when the lease expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    /// When the table adopted the lease (it was a client's data lease until then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adopted_at_ms: Option<u64>,
}

/// What a sweep did ([`Catalog::reclaim_expired`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sweep {
    /// Leases whose memory returned to the free map.
    pub reclaimed: Vec<LeaseRecord>,
    /// Data leases their table adopted (as they are now).
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

/// A persisted memnode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemnodeRecord {
    /// Id.
    pub id: u64,
    /// Name.
    pub name: String,
    /// Admin URL.
    pub admin_url: String,
    /// Data address.
    pub data_addr: String,
    /// Capacity.
    pub capacity: u64,
    /// Regions.
    pub regions: Vec<RegionSpec>,
    /// Region generation.
    pub epoch: u64,
    /// First registration.
    pub registered_at_ms: u64,
}

/// A persisted table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableRecord {
    /// Id.
    pub id: u64,
    /// Name.
    pub name: String,
    /// Index.
    pub index: IndexKind,
    /// Value limit.
    pub value_limit: u64,
    /// Memnodes.
    pub memnodes: Vec<u64>,
    /// Replication factor.
    pub replication: u32,
    /// Update mode.
    pub update_mode: UpdateMode,
    /// Creation time.
    pub created_at_ms: u64,
    /// RACE: the directory lease and its generation.
    pub race: Option<RaceRecord>,
    /// In-place: scheme, geometry and memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inplace: Option<InPlaceRecord>,
}

/// The in-place part of a [`TableRecord`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InPlaceRecord {
    /// Scheme name (placement spelled out).
    pub scheme: String,
    /// Tuples.
    pub capacity: u64,
    /// Tuple stride.
    pub tuple_bytes: u64,
    /// Latch placement.
    pub latch_placement: LatchPlacement,
    /// Bookend demonstration.
    pub unsafe_demo: bool,
    /// The tuple area's table-owned lease.
    pub area_lease: Option<u64>,
    /// The separate latch array's table-owned lease.
    pub latch_lease: Option<u64>,
}

/// The RACE part of a [`TableRecord`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaceRecord {
    /// The directory's table-owned lease.
    pub directory_lease: Option<u64>,
    /// Bumped when the directory moves.
    pub generation: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Ids {
    memnode: u64,
    lease: u64,
    table: u64,
    chain: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct TailRecord {
    hint: TailHint,
    updated_at_ms: u64,
}

#[derive(Debug)]
struct Node {
    rec: MemnodeRecord,
    maps: Vec<ExtentMap>,
    last_heartbeat_ms: u64,
}

/// How a new allocation is sized and aligned.
#[derive(Debug, Clone, Copy)]
enum Sizing {
    /// Rounded up to (and aligned to) the region's chunk granule: client leases.
    Chunks,
    /// Rounded up to 4 KiB, 4 KiB aligned: table-owned memory.
    Exact,
}

/// Counts for metrics and health.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Per memnode: (id, name, healthy, capacity, leased bytes, free bytes).
    pub memnodes: Vec<(u64, String, bool, u64, u64, u64)>,
    /// Active leases.
    pub leases_active: usize,
    /// Expired leases in their grace period.
    pub leases_expired: usize,
    /// Tables by index.
    pub tables: BTreeMap<&'static str, usize>,
}

fn mkey(id: u64) -> Vec<u8> {
    format!("m/{id:016x}").into_bytes()
}
fn lkey(id: u64) -> Vec<u8> {
    format!("l/{id:016x}").into_bytes()
}
fn tkey(name: &str) -> Vec<u8> {
    format!("t/{name}").into_bytes()
}
fn chain_prefix(kind: &str, table: &str) -> Vec<u8> {
    let mut k = format!("{kind}/{table}").into_bytes();
    k.push(0);
    k
}
fn ckey(table: &str, key: &[u8]) -> Vec<u8> {
    let mut k = chain_prefix("c", table);
    k.extend_from_slice(key);
    k
}
fn cikey(table: &str, chain_id: u64) -> Vec<u8> {
    let mut k = chain_prefix("ci", table);
    k.extend_from_slice(format!("{chain_id:016x}").as_bytes());
    k
}
fn hkey(table: &str, chain_id: u64) -> Vec<u8> {
    let mut k = chain_prefix("h", table);
    k.extend_from_slice(format!("{chain_id:016x}").as_bytes());
    k
}
const IDS_KEY: &[u8] = b"n/ids";

/// Checks a table name: 1–64 characters `[A-Za-z0-9_.-]`.
pub fn validate_table_name(name: &str) -> Result<(), CatalogError> {
    if name.is_empty() || name.len() > 64 {
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
        let ids = match store.get(IDS_KEY)? {
            Some(v) => decode(IDS_KEY, &v)?,
            None => Ids::default(),
        };
        let mut memnodes = BTreeMap::new();
        for (k, v) in store.scan_prefix(b"m/")? {
            let rec: MemnodeRecord = decode(&k, &v)?;
            let maps = rec
                .regions
                .iter()
                .map(|r| ExtentMap::new(r.base_va, r.len))
                .collect();
            memnodes.insert(
                rec.id,
                Node {
                    rec,
                    maps,
                    last_heartbeat_ms: now_ms,
                },
            );
        }
        let mut leases = BTreeMap::new();
        for (k, v) in store.scan_prefix(b"l/")? {
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
        for (k, v) in store.scan_prefix(b"t/")? {
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

    // ---- memnodes ----

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
                };
                batch.put(mkey(id), &rec).put(IDS_KEY, &self.ids);
                self.commit(&batch)?;
                let maps = rec
                    .regions
                    .iter()
                    .map(|r| ExtentMap::new(r.base_va, r.len))
                    .collect();
                self.memnodes.insert(
                    id,
                    Node {
                        rec,
                        maps,
                        last_heartbeat_ms: now_ms,
                    },
                );
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
        rec.epoch += 1;
        let maps = rec
            .regions
            .iter()
            .map(|r| ExtentMap::new(r.base_va, r.len))
            .collect();
        self.memnodes.insert(
            id,
            Node {
                rec: rec.clone(),
                maps,
                last_heartbeat_ms: now_ms,
            },
        );
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
                t.race
                    .as_ref()
                    .and_then(|r| r.directory_lease)
                    .is_some_and(|lid| revoked.iter().any(|l| l.id == lid))
            })
            .cloned()
            .collect();
        for t in &homeless {
            let Some(race) = &t.race else { continue };
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
            t2.race = Some(RaceRecord {
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
                .race
                .as_ref()
                .and_then(|r| r.directory_lease)
                .is_some_and(|d| revoked.contains(&d));
            if !lost_dir && !t.memnodes.contains(&id) {
                continue;
            }
            let mut t2 = t.clone();
            t2.memnodes.retain(|m| *m != id);
            if lost_dir && let Some(r) = &mut t2.race {
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

    // ---- allocation ----

    /// Chooses a memnode (policy) and a place in one of its regions (mechanism), and
    /// reserves it. Returns (memnode, region index, va, len).
    fn place(
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
        }
        let eligible: Vec<u64> = self
            .memnodes
            .values()
            .filter(|n| explicit.is_none_or(|e| e == n.rec.id))
            .filter(|n| allowed.is_none_or(|a| a.is_empty() || a.contains(&n.rec.id)))
            .filter(|n| self.healthy(n, now_ms))
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

    fn release(&mut self, l: &LeaseRecord) {
        if let Some(node) = self.memnodes.get_mut(&l.memnode_id)
            && let Some(idx) = node.rec.regions.iter().position(|r| r.rkey == l.rkey)
            && let Err(e) = node.maps[idx].release(l.va, l.len)
        {
            tracing::error!(lease = l.id, error = %e, "releasing a lease's extent failed");
        }
    }

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

    /// Leases a chunk to a client.
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
        if let Some(t) = &req.table {
            self.table_rec(t)?;
        }
        let (mid, idx, va, len) =
            self.place(None, req.memnode, req.bytes, Sizing::Chunks, now_ms)?;
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
    /// reused while the table lives); every other lease's memory returns to the
    /// free map.
    pub fn reclaim_expired(&mut self, now_ms: u64) -> Result<Sweep, CatalogError> {
        let due = expiry::due_for_reclaim(self.leases.values(), now_ms, self.cfg.grace_ms);
        if due.is_empty() {
            return Ok(Sweep::default());
        }
        let mut batch = Batch::new();
        let mut sweep = Sweep::default();
        for id in &due {
            let Some(l) = self.leases.get(id) else {
                continue;
            };
            match expiry::disposal(l, |t| self.tables.contains_key(t)) {
                Disposal::Adopt(table) => {
                    let a = adopted(l, table, now_ms);
                    batch.put(lkey(a.id), &a);
                    sweep.adopted.push(a);
                }
                Disposal::Reclaim => {
                    batch.delete(lkey(l.id));
                    sweep.reclaimed.push(l.clone());
                }
            }
        }
        self.commit(&batch)?;
        for l in &sweep.reclaimed {
            self.leases.remove(&l.id);
            self.release(l);
        }
        for a in &sweep.adopted {
            self.leases.insert(a.id, a.clone());
        }
        Ok(sweep)
    }

    /// Hands a client's data lease over to its table now (the client stops and
    /// knows its table data lies in the first `keep_bytes` of the chunk): the lease
    /// becomes table-owned, trimmed to `keep_bytes` rounded up to 4 KiB; the rest
    /// returns to the free map. `keep_bytes` 0 frees the lease.
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
            .next_multiple_of(MIN_GRANULE)
            .min(l.len);
        if keep == 0 {
            self.free_lease(id)?;
            return Ok(None);
        }
        let mut a = adopted(&l, table, now_ms);
        a.len = keep;
        let mut batch = Batch::new();
        batch.put(lkey(id), &a);
        self.commit(&batch)?;
        if keep < l.len {
            let mut tail = l.clone();
            tail.va = l.va + keep;
            tail.len = l.len - keep;
            self.release(&tail);
        }
        let view = self.lease_view(&a, now_ms);
        self.leases.insert(id, a);
        Ok(Some(view))
    }

    // ---- tables ----

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

    fn location(&self, lease: u64) -> Option<DirectoryLocation> {
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
    /// on one of `allowed`, or on `explicit`; reserved in the free map, not yet
    /// stored or listed.
    fn table_lease(
        &mut self,
        name: &str,
        allowed: &[u64],
        explicit: Option<u64>,
        bytes: u64,
        now_ms: u64,
    ) -> Result<LeaseRecord, CatalogError> {
        let (mid, idx, va, len) =
            self.place(Some(allowed), explicit, bytes, Sizing::Exact, now_ms)?;
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
        })
    }

    fn describe(&self, t: &TableRecord) -> TableDescription {
        TableDescription {
            name: t.name.clone(),
            id: t.id,
            index: t.index,
            value_limit: t.value_limit,
            memnodes: t.memnodes.clone(),
            replication: t.replication,
            update_mode: t.update_mode.clone(),
            created_at_ms: t.created_at_ms,
            memory: self.table_memory(&t.name),
            inplace: t.inplace.as_ref().map(|p| InPlaceInfo {
                scheme: p.scheme.clone(),
                capacity: p.capacity,
                tuple_bytes: p.tuple_bytes,
                latch_placement: p.latch_placement,
                unsafe_demo: p.unsafe_demo,
                area: p.area_lease.and_then(|l| self.location(l)),
                latches: p.latch_lease.and_then(|l| self.location(l)),
            }),
            race: t.race.as_ref().map(|r| RaceInfo {
                generation: r.generation,
                directory: r.directory_lease.and_then(|lid| self.location(lid)),
            }),
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
        if replication != 1 {
            return Err(CatalogError::Invalid(format!(
                "replication {replication} is not supported: only 1 (no replication) is implemented"
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
        let update_mode = match (&inplace, req.update_mode) {
            (Some(c), None) => UpdateMode::InPlace {
                scheme: c.scheme.clone(),
            },
            (Some(c), Some(UpdateMode::InPlace { scheme })) => {
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
                UpdateMode::InPlace {
                    scheme: c.scheme.clone(),
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
            (None, m) => m.unwrap_or_default(),
        };
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
        let mut batch = Batch::new();
        let mut dir_lease = None;
        if req.index == IndexKind::Race {
            let l =
                self.table_lease(&req.name, &memnodes, None, self.cfg.directory_bytes, now_ms)?;
            batch.put(lkey(l.id), &l);
            dir_lease = Some(l);
        }
        let mut inplace_leases = Vec::new();
        let inplace_rec = match (&inplace, &req.inplace) {
            (Some(c), Some(p)) => {
                let area = self.table_lease(&req.name, &memnodes, None, c.area_bytes, now_ms)?;
                let latches = match c.latch_bytes {
                    Some(b) => {
                        match self.table_lease(
                            &req.name,
                            &memnodes,
                            Some(area.memnode_id),
                            b,
                            now_ms,
                        ) {
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
        let t = TableRecord {
            id: self.ids.table,
            name: req.name.clone(),
            index: req.index,
            value_limit: req.value_limit,
            memnodes,
            replication,
            update_mode,
            created_at_ms: now_ms,
            race: (req.index == IndexKind::Race).then(|| RaceRecord {
                directory_lease: dir_lease.as_ref().map(|l| l.id),
                generation: 1,
            }),
            inplace: inplace_rec,
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

    fn table_rec(&self, name: &str) -> Result<&TableRecord, CatalogError> {
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

    /// Drops a table: its record, its chains and tail hints, and its memory. Memory
    /// the table owns (directory, tuple area, adopted data leases) returns to the
    /// free map at once. Data leases clients still hold for it expire now: they
    /// cannot be renewed, and their memory returns after the grace period (so that
    /// writes in flight cannot land in memory someone else got).
    pub fn drop_table(&mut self, name: &str, now_ms: u64) -> Result<(), CatalogError> {
        let t = self.table_rec(name)?.clone();
        let mut batch = Batch::new();
        batch.delete(tkey(name));
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
        for kind in ["c", "ci", "h"] {
            for (k, _) in self.store.scan_prefix(&chain_prefix(kind, name))? {
                batch.delete(k);
            }
        }
        self.commit(&batch)?;
        for l in &owned {
            self.leases.remove(&l.id);
            self.release(l);
        }
        for l in detached {
            self.leases.insert(l.id, l);
        }
        self.tables.remove(&t.name);
        Ok(())
    }

    // ---- Clover slow path ----

    fn clover_table(&self, name: &str) -> Result<&TableRecord, CatalogError> {
        let t = self.table_rec(name)?;
        if t.index != IndexKind::Clover {
            return Err(conflict(
                "wrong_index",
                format!(
                    "table {name:?} uses the {} index; chains exist only in clover tables",
                    t.index.as_str()
                ),
            ));
        }
        Ok(t)
    }

    /// Insert-or-open: the unique chain id of `key` in a Clover table.
    pub fn open_chain(&mut self, table: &str, key: &[u8]) -> Result<ChainResponse, CatalogError> {
        self.clover_table(table)?;
        check_chain_key(key)?;
        let k = ckey(table, key);
        if let Some(v) = self.store.get(&k)? {
            return Ok(ChainResponse {
                chain_id: decode(&k, &v)?,
                created: false,
            });
        }
        self.ids.chain += 1;
        let id = self.ids.chain;
        let mut batch = Batch::new();
        batch
            .put(k, &id)
            .put_raw(cikey(table, id), key.to_vec())
            .put(IDS_KEY, &self.ids);
        self.commit(&batch)?;
        Ok(ChainResponse {
            chain_id: id,
            created: true,
        })
    }

    /// The chain of `key` in a Clover table and its tail hint, without creating it:
    /// `chain_not_found` when the key has none.
    pub fn lookup_chain(&self, table: &str, key: &[u8]) -> Result<ChainInfo, CatalogError> {
        self.clover_table(table)?;
        check_chain_key(key)?;
        let k = ckey(table, key);
        let v = self.store.get(&k)?.ok_or_else(|| {
            not_found(
                "chain_not_found",
                format!("table {table:?} has no chain for this key"),
            )
        })?;
        let chain_id: u64 = decode(&k, &v)?;
        let h = hkey(table, chain_id);
        let tail = match self.store.get(&h)? {
            Some(v) => Some(decode::<TailRecord>(&h, &v)?.hint),
            None => None,
        };
        Ok(ChainInfo { chain_id, tail })
    }

    fn chain_exists(&self, table: &str, chain_id: u64) -> Result<(), CatalogError> {
        self.clover_table(table)?;
        if self.store.get(&cikey(table, chain_id))?.is_none() {
            return Err(not_found(
                "chain_not_found",
                format!("table {table:?} has no chain {chain_id}"),
            ));
        }
        Ok(())
    }

    fn check_hint(&self, hint: &TailHint) -> Result<(), CatalogError> {
        if !self.memnodes.contains_key(&hint.memnode_id) {
            return Err(CatalogError::Invalid(format!(
                "memnode_id: no memnode {} is registered",
                hint.memnode_id
            )));
        }
        if !hint.va.is_multiple_of(64) {
            return Err(CatalogError::Invalid(format!(
                "va {:#x} is not 64-byte aligned",
                hint.va
            )));
        }
        Ok(())
    }

    /// Stores where a chain's tail was last seen (unconditionally).
    pub fn put_tail(
        &mut self,
        table: &str,
        chain_id: u64,
        hint: TailHint,
        now_ms: u64,
    ) -> Result<TailResponse, CatalogError> {
        self.chain_exists(table, chain_id)?;
        self.check_hint(&hint)?;
        let rec = TailRecord {
            hint,
            updated_at_ms: now_ms,
        };
        self.store.put(&hkey(table, chain_id), &encode(&rec))?;
        self.store.flush()?;
        Ok(TailResponse {
            chain_id,
            tail: rec.hint,
            updated_at_ms: rec.updated_at_ms,
        })
    }

    /// Stores `hint` as the chain's tail hint unless one is stored (put-if-absent):
    /// exactly one of several clients racing to publish a chain's root wins, and
    /// every one of them learns which hint won. The answer's `created` says whether
    /// this call stored it.
    pub fn publish_root(
        &mut self,
        table: &str,
        chain_id: u64,
        hint: TailHint,
        now_ms: u64,
    ) -> Result<RootResponse, CatalogError> {
        self.chain_exists(table, chain_id)?;
        self.check_hint(&hint)?;
        let k = hkey(table, chain_id);
        if let Some(v) = self.store.get(&k)? {
            let rec: TailRecord = decode(&k, &v)?;
            return Ok(RootResponse {
                chain_id,
                tail: rec.hint,
                updated_at_ms: rec.updated_at_ms,
                created: false,
            });
        }
        let rec = TailRecord {
            hint,
            updated_at_ms: now_ms,
        };
        self.store.put(&k, &encode(&rec))?;
        self.store.flush()?;
        Ok(RootResponse {
            chain_id,
            tail: rec.hint,
            updated_at_ms: rec.updated_at_ms,
            created: true,
        })
    }

    /// The last tail hint of a chain.
    pub fn tail(&self, table: &str, chain_id: u64) -> Result<TailResponse, CatalogError> {
        self.chain_exists(table, chain_id)?;
        let k = hkey(table, chain_id);
        let v = self.store.get(&k)?.ok_or_else(|| {
            not_found(
                "tail_not_found",
                format!("no tail hint stored for chain {chain_id} of table {table:?}"),
            )
        })?;
        let rec: TailRecord = decode(&k, &v)?;
        Ok(TailResponse {
            chain_id,
            tail: rec.hint,
            updated_at_ms: rec.updated_at_ms,
        })
    }

    // ---- observation ----

    /// Counts for metrics and health.
    pub fn stats(&self, now_ms: u64) -> Stats {
        let mut s = Stats::default();
        for n in self.memnodes.values() {
            let free: u64 = n.maps.iter().map(ExtentMap::free_bytes).sum();
            let used: u64 = n.maps.iter().map(ExtentMap::used_bytes).sum();
            s.memnodes.push((
                n.rec.id,
                n.rec.name.clone(),
                self.healthy(n, now_ms),
                n.rec.capacity,
                used,
                free,
            ));
        }
        for l in self.leases.values() {
            match expiry::state(l.expires_at_ms, now_ms, self.cfg.grace_ms) {
                LeaseState::Active => s.leases_active += 1,
                _ => s.leases_expired += 1,
            }
        }
        for k in ["clover", "race", "inplace"] {
            s.tables.insert(k, 0);
        }
        for t in self.tables.values() {
            *s.tables.entry(t.index.as_str()).or_default() += 1;
        }
        s
    }

    /// Checks the allocation invariants (tests): leases do not overlap, and for every
    /// region free + leased bytes equal its length.
    pub fn check_invariants(&self) -> Result<(), String> {
        for n in self.memnodes.values() {
            for (r, m) in n.rec.regions.iter().zip(&n.maps) {
                let mut ls: Vec<&LeaseRecord> = self
                    .leases
                    .values()
                    .filter(|l| l.memnode_id == n.rec.id && l.rkey == r.rkey)
                    .collect();
                ls.sort_by_key(|l| l.va);
                for w in ls.windows(2) {
                    if w[0].va + w[0].len > w[1].va {
                        return Err(format!("leases {} and {} overlap", w[0].id, w[1].id));
                    }
                }
                let leased: u64 = ls.iter().map(|l| l.len).sum();
                if leased + m.free_bytes() != r.len {
                    return Err(format!(
                        "memnode {} region {:#x}: leased {leased} + free {} != {}",
                        n.rec.id,
                        r.rkey,
                        m.free_bytes(),
                        r.len
                    ));
                }
            }
        }
        Ok(())
    }
}

fn check_chain_key(key: &[u8]) -> Result<(), CatalogError> {
    if key.is_empty() || key.len() > MAX_KEY_LEN {
        return Err(CatalogError::Invalid(format!(
            "key must be 1 to {MAX_KEY_LEN} bytes long (got {})",
            key.len()
        )));
    }
    Ok(())
}

fn memnode_not_found(id: u64) -> CatalogError {
    not_found(
        "memnode_not_found",
        format!("no memnode {id} is registered (re-register with POST /v1/memnodes)"),
    )
}
