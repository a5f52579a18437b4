//! What the catalog persists about memnodes, leases and tables (one record per
//! stored key; the key layout is in [`super::keys`]).

use serde::{Deserialize, Serialize};

use crate::api::{IndexKind, LatchPlacement, RegionSpec, UpdateMode};

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
