//! The JSON documents of the metadata service's HTTP API (requests, answers), shared
//! by the service, [`crate::metadata_client`] and the OpenAPI document (feature
//! `openapi`). Some are also the persisted records' building blocks. Errors are
//! [`crate::ErrorBody`].

use serde::{Deserialize, Serialize};

pub use crate::error_body::ErrorBody;

pub use crate::schemas::{BASE64_PATTERN, TABLE_NAME_MAX, TABLE_NAME_PATTERN};
#[cfg(feature = "openapi")]
pub use crate::schemas::{Base64Key, TableName};

/// `GET /v1/accelerator`: the switch accelerator clients should create their
/// queue pairs through, when the cluster has one.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AcceleratorInfo {
    /// Whether an accelerator is configured (the other fields are absent when not).
    pub enabled: bool,
    /// Its admin URL (`http://host:port`): clients `POST /v1/qps` there to create a
    /// memnode queue pair through it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin_url: Option<String>,
    /// The UDP address clients send to (`ip:port`), when configured; the answer of
    /// `POST /v1/qps` on the accelerator carries it too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_addr: Option<String>,
}

/// `GET /healthz`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Health {
    /// `ok` while the service serves.
    pub status: String,
    /// Registered memnodes.
    pub memnodes: usize,
    /// Memnodes whose last heartbeat is recent enough.
    pub healthy_memnodes: usize,
    /// Tables in the catalog.
    pub tables: usize,
    /// Leases held (including expired ones still in their grace period).
    pub leases: usize,
    /// Whether the service has a root token (then every request but the public ones
    /// needs it or a credential issued with it).
    pub auth: bool,
    /// Seconds since start.
    pub uptime_seconds: u64,
}

/// One registered memory region of a memnode, as the memnode reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RegionSpec {
    /// Remote key.
    pub rkey: u32,
    /// Virtual address of the first byte (64-byte aligned).
    pub base_va: u64,
    /// Length in bytes.
    pub len: u64,
    /// For a file-backed region, the file clients on the memnode's host can map.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The region's instance id: a random number made when the memory was created
    /// (a `--region-file` region keeps it across restarts). A memnode that registers
    /// again with the same instance (and rkey, address, length) rejoined with its
    /// data; with another one its memory is new. 0: none (memory that does not
    /// outlive the process).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub instance: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// `POST /v1/memnodes`: a memnode announces itself (idempotent by `name`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RegisterMemnodeRequest {
    /// Stable name (1–128 characters `[A-Za-z0-9_.:-]`); the memnode binary uses
    /// `--name` or its data address.
    #[cfg_attr(feature = "openapi", schema(pattern = "^[A-Za-z0-9_.:-]{1,128}$"))]
    pub name: String,
    /// Admin HTTP base URL (`http://host:port`), where clients create queue pairs.
    pub admin_url: String,
    /// Soft-RoCE data address (`ip:port`).
    pub data_addr: String,
    /// Bytes of registered memory.
    pub capacity: u64,
    /// The registered regions (at least one).
    #[cfg_attr(feature = "openapi", schema(min_items = 1))]
    pub regions: Vec<RegionSpec>,
    /// Failure domain (rack, zone); replicas of a table go to distinct zones
    /// where the memnodes declare them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
}

/// `POST /v1/memnodes` → 201 (new) or 200 (re-registration).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RegisterMemnodeResponse {
    /// The memnode's id (the same for every registration under one name).
    pub id: u64,
    /// Whether this registration created the memnode.
    pub created: bool,
    /// Incremented whenever the memnode's regions change (e.g. after it restarted).
    pub epoch: u64,
    /// Leases revoked because the regions changed.
    pub revoked_leases: u64,
    /// How often the memnode should heartbeat.
    pub heartbeat_interval_ms: u64,
    /// After how long without a heartbeat it counts as unhealthy.
    pub heartbeat_timeout_ms: u64,
}

/// `POST /v1/memnodes/{id}/heartbeat` → 200.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HeartbeatResponse {
    /// The memnode's id.
    pub id: u64,
    /// Its epoch.
    pub epoch: u64,
}

/// A region of a registered memnode with its allocation state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RegionInfo {
    /// Remote key.
    pub rkey: u32,
    /// First byte.
    pub base_va: u64,
    /// Length.
    pub len: u64,
    /// Backing file, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Lease granularity in this region (see the crate documentation).
    pub chunk_size: u64,
    /// Bytes not leased.
    pub free_bytes: u64,
    /// Bytes leased (including expired leases in their grace period).
    pub leased_bytes: u64,
}

/// A registered memnode (`GET /v1/memnodes`, `GET /v1/memnodes/{id}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MemnodeInfo {
    /// Id.
    pub id: u64,
    /// Name.
    pub name: String,
    /// Admin base URL.
    pub admin_url: String,
    /// Soft-RoCE data address.
    pub data_addr: String,
    /// Bytes of registered memory.
    pub capacity: u64,
    /// Region generation (see [`RegisterMemnodeResponse::epoch`]).
    pub epoch: u64,
    /// Whether the last heartbeat is at most the heartbeat timeout old.
    pub healthy: bool,
    /// Milliseconds since the last heartbeat (or registration, or service start).
    pub last_heartbeat_age_ms: u64,
    /// When it first registered (Unix ms).
    pub registered_at_ms: u64,
    /// Free bytes over all regions.
    pub free_bytes: u64,
    /// Leased bytes over all regions.
    pub leased_bytes: u64,
    /// Regions.
    pub regions: Vec<RegionInfo>,
    /// Failure domain it declared, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// `up`, `down` (no heartbeat within the timeout) or `draining`.
    #[serde(default)]
    pub state: MemnodeState,
    /// Whether an admin asked to drain it (`POST /v1/memnodes/{id}/drain`): no new
    /// leases or table memory go there. Stays true while it is down.
    #[serde(default)]
    pub draining: bool,
    /// Whether it ever registered with memory whose region file kept it across
    /// restarts (every region carries an instance id).
    #[serde(default)]
    pub persistent: bool,
    /// Deleted (`DELETE /v1/memnodes/{id}`) after its copies moved, but still the
    /// home whose coordinates name a replicated table's replica set: listed so
    /// that clients can address that memory; it holds nothing and takes nothing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retired: bool,
    /// For a draining memnode: how far moving its copies got.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_progress: Option<crate::rereplication::DrainProgress>,
}

/// The state of a memnode in [`MemnodeInfo`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum MemnodeState {
    /// Heartbeating, taking new leases.
    #[default]
    Up,
    /// No heartbeat within the heartbeat timeout (crashed, stopped or cut off).
    Down,
    /// Heartbeating, but draining: no new leases or table memory go there.
    Draining,
}

impl MemnodeState {
    /// The JSON name.
    pub fn as_str(self) -> &'static str {
        match self {
            MemnodeState::Up => "up",
            MemnodeState::Down => "down",
            MemnodeState::Draining => "draining",
        }
    }
}

/// `POST /v1/memnodes/{id}/drain` → 202: the memnode takes no new leases or table
/// memory; what still lives there is listed. It can be deleted once nothing does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DrainResponse {
    /// The memnode.
    pub id: u64,
    /// Its name.
    pub name: String,
    /// Its state after the call.
    pub state: MemnodeState,
    /// Tables with data on it (names, sorted).
    pub tables: Vec<String>,
    /// Leases on it (table-owned memory and clients' leases).
    pub leases: u64,
    /// Bytes under those leases.
    pub leased_bytes: u64,
    /// Whether `DELETE /v1/memnodes/{id}` would succeed now (nothing lives there).
    pub deletable: bool,
}

/// `GET /v1/memnodes`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MemnodesResponse {
    /// Every registered memnode, by id.
    pub memnodes: Vec<MemnodeInfo>,
}

/// `POST /v1/leases`: lease a chunk of remote memory.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateLeaseRequest {
    /// Who holds the lease (1–128 characters), for listing and metrics.
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 128))]
    pub client: String,
    /// Bytes wanted (at least 1); rounded up to the chunk size of the region that
    /// serves it.
    #[cfg_attr(feature = "openapi", schema(minimum = 1))]
    pub bytes: u64,
    /// The least the holder can use (e.g. the object it is about to place): when no
    /// free extent holds all of `bytes`, the service grants the largest free extent
    /// of at least this many bytes (rounded up to 64) instead of failing. Default:
    /// `bytes` (all or nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_bytes: Option<u64>,
    /// Lease on this memnode only (default: the placement policy chooses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memnode: Option<u64>,
    /// Time to live in ms (default and bounds: see the service's configuration);
    /// renew before it runs out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// The table whose data the chunk will hold (a *data lease*). When a data lease
    /// expires, its memory is not reused: the table adopts it (see the crate
    /// documentation). Leases without a table are reclaimed on expiry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
}

/// `POST /v1/leases/{id}/adopt`: hand a data lease's memory over to its table now
/// (a client that stops cleanly), keeping only the first `keep_bytes`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AdoptLeaseRequest {
    /// Bytes from the start of the chunk that may hold table data (the carved
    /// prefix); rounded up to 64 bytes. The rest returns to the free map at once; 0
    /// frees the whole lease. Default: the whole chunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_bytes: Option<u64>,
}

/// `POST /v1/leases/{id}/renew` (the body is optional).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RenewLeaseRequest {
    /// New time to live from now, in ms (default: the lease's own TTL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
}

/// A leased chunk of remote memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Lease {
    /// Lease id.
    pub lease_id: u64,
    /// Holder.
    pub client: String,
    /// `client`, or `table:<name>` for memory a table owns (a RACE directory or an
    /// in-place tuple area, or a data lease the table adopted).
    pub owner: String,
    /// For a data lease: the table whose data it holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    /// When the table adopted this data lease (its holder let it expire or handed
    /// it over), if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adopted_at_ms: Option<u64>,
    /// Memnode serving the chunk.
    pub memnode_id: u64,
    /// Its soft-RoCE data address.
    pub data_addr: String,
    /// Its admin URL (for queue-pair setup).
    pub admin_url: String,
    /// Remote key of the region.
    pub rkey: u32,
    /// First byte of the chunk.
    pub va: u64,
    /// Length of the chunk.
    pub len: u64,
    /// Time to live used by renewals without a TTL.
    pub ttl_ms: u64,
    /// When the lease expires (Unix ms); absent for table-owned memory, which lives as
    /// long as its table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<u64>,
    /// `active`, `expired` (in its grace period: the memory is not reused yet, but
    /// the lease cannot be renewed), or `table` (owned by a table: never expires).
    pub state: String,
    /// For memory of a replicated table: every copy of the extent, one per member
    /// of the replica set in the set's order (the first is this lease's own
    /// memnode and address); each copy lies at the same offset from its region's
    /// base and is `len` bytes long. Empty for unreplicated memory.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replicas: Vec<LeaseCopy>,
}

/// One copy of a mirrored lease ([`Lease::replicas`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LeaseCopy {
    /// Memnode holding the copy.
    pub memnode_id: u64,
    /// Remote key of its region.
    pub rkey: u32,
    /// First byte of the copy.
    pub va: u64,
    /// The memnode's admin URL (for queue-pair setup).
    pub admin_url: String,
    /// The memnode's soft-RoCE data address.
    pub data_addr: String,
}

/// `GET /v1/leases`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LeasesResponse {
    /// Matching leases, by id.
    pub leases: Vec<Lease>,
}

/// Which index a table uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum IndexKind {
    /// Clover: per-key append-only chains of immutable versions.
    Clover,
    /// RACE: one-sided extendible hashing with a directory.
    Race,
    /// In-place: a fixed array of tuples updated in place under a latch scheme
    /// (see [`InPlaceRequest`]).
    #[serde(rename = "inplace")]
    InPlace,
}

impl IndexKind {
    /// The JSON name.
    pub fn as_str(self) -> &'static str {
        match self {
            IndexKind::Clover => "clover",
            IndexKind::Race => "race",
            IndexKind::InPlace => "inplace",
        }
    }
}

/// How values are updated: `"out_of_place"` or `{"in_place": {"scheme": "..."}}`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum UpdateMode {
    /// New versions are written elsewhere and linked (the default).
    #[default]
    OutOfPlace,
    /// Values are overwritten in place under a latch scheme.
    InPlace {
        /// The latch scheme's name (1–64 characters `[a-z0-9_-]`).
        scheme: String,
    },
}

/// `POST /v1/tables`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateTableRequest {
    /// Name: 1–64 characters `[A-Za-z0-9_.-]`, not only dots ([`TABLE_NAME_PATTERN`]).
    #[cfg_attr(feature = "openapi", schema(value_type = TableName))]
    pub name: String,
    /// Index: `clover`, `race` or `inplace`.
    pub index: IndexKind,
    /// Largest value in bytes, 64 B … 1 MiB.
    #[cfg_attr(feature = "openapi", schema(minimum = 64, maximum = 1048576))]
    pub value_limit: u64,
    /// Memnodes the table's memory lives on (default: every registered memnode; when
    /// given, at least one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(min_items = 1))]
    pub memnodes: Option<Vec<u64>>,
    /// Replication factor, 1 to 3 (default 1): the table gets a replica set per home
    /// memnode ([`TableDescription::replica_sets`]), and its memory is mirrored on
    /// every member. 409 when fewer memnodes are registered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 3))]
    pub replication: Option<u32>,
    /// Update mode (default `out_of_place`; `inplace` tables are in place with the
    /// scheme of `inplace`, which this may repeat).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_mode: Option<UpdateMode>,
    /// For `inplace` tables (required there, refused elsewhere): latch scheme,
    /// capacity, tuple size and latch placement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inplace: Option<InPlaceRequest>,
}

/// Where the latches of an in-place table lie.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum LatchPlacement {
    /// In the tuple.
    Embedded,
    /// In the tuple, tuples 8 bytes further apart than their size (so latch
    /// addresses of 4 KiB tuples differ in their low 12 bits).
    Padded,
    /// In a separate array of 8-byte latches (its own table-owned memory).
    Separate,
}

/// The in-place part of `POST /v1/tables` (`index: inplace`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct InPlaceRequest {
    /// The latch scheme's name as `kvstore::SchemeSpec` spells it: a
    /// family (`pessimistic`, `versioning`, `crc`, `farm`, `bookend`, …) and
    /// `-`-separated options (e.g. `pessimistic-x-wc-wu`, `farm-consistent`).
    /// Write-unlatch (`-wu`) needs the exclusive-only latch (`-x`).
    pub scheme: String,
    /// Number of tuples (1 … 2^24); fixed for the table's life.
    pub capacity: u64,
    /// Bytes from one tuple to the next in memory: the value limit plus the key,
    /// tuple header and the scheme's latch, versions and padding (the client
    /// library computes it from the scheme's layout). A multiple of 8.
    pub tuple_bytes: u64,
    /// Latch placement (default: the one the scheme name gives, else `embedded`);
    /// only the pessimistic latch can be `padded` or `separate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latch_placement: Option<LatchPlacement>,
    /// Acknowledges that the scheme returns torn values: required for (and only
    /// accepted with) the bookend scheme, which exists to demonstrate that.
    #[serde(default)]
    pub unsafe_demo: bool,
}

/// The in-place part of a table description.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InPlaceInfo {
    /// The latch scheme's name (with the latch placement spelled out).
    pub scheme: String,
    /// Number of tuples.
    pub capacity: u64,
    /// Bytes from one tuple to the next.
    pub tuple_bytes: u64,
    /// Latch placement.
    pub latch_placement: LatchPlacement,
    /// Whether the scheme is the unsafe bookend demonstration.
    pub unsafe_demo: bool,
    /// The tuple area: one 64-byte header line, then `capacity` tuples
    /// `tuple_bytes` apart. Absent if its memnode left.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub area: Option<DirectoryLocation>,
    /// The separate latch array (8 bytes per tuple, on the area's memnode), for
    /// `latch_placement: separate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latches: Option<DirectoryLocation>,
}

/// Where a piece of table-owned memory lives: a RACE table's directory (the RACE
/// bootstrap), an in-place table's tuple area or latch array.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DirectoryLocation {
    /// The table-owned lease holding it.
    pub lease_id: u64,
    /// Memnode.
    pub memnode_id: u64,
    /// Its soft-RoCE data address.
    pub data_addr: String,
    /// Its admin URL.
    pub admin_url: String,
    /// Remote key.
    pub rkey: u32,
    /// First byte.
    pub va: u64,
    /// Length.
    pub len: u64,
}

/// RACE-specific part of a table description.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RaceInfo {
    /// The directory, or absent if its memnode left (see the crate documentation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directory: Option<DirectoryLocation>,
    /// Incremented whenever the directory moves (memnode re-registered with new regions).
    pub generation: u64,
}

/// A table (`POST /v1/tables` → 201, `GET /v1/tables/{name}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TableDescription {
    /// Name.
    pub name: String,
    /// Unique id (never reused, also not after a drop).
    pub id: u64,
    /// Largest value in bytes.
    pub value_limit: u64,
    /// Memnodes the table's memory lives on.
    pub memnodes: Vec<u64>,
    /// Replication factor.
    pub replication: u32,
    /// For replication above 1: per home memnode, in `memnodes` order, its replica
    /// set — `replication` distinct memnodes, the home first, then its backups (in
    /// distinct zones where the memnodes declare enough of them). Data a client
    /// places on a home memnode is mirrored at the same offset from the region
    /// base on every member of its set. The first member is the set's primary
    /// (the copy readers read); a failure may remove members, and the set keeps
    /// its position. Empty for unreplicated tables.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replica_sets: Vec<Vec<u64>>,
    /// Creation time (Unix ms).
    pub created_at_ms: u64,
    /// The index and what it needs (in JSON the fields `index`, `update_mode`, `race`
    /// and `inplace`, as [`TableLayout`] says).
    #[serde(flatten)]
    pub layout: TableLayout,
    /// The memory holding the table's data.
    #[serde(default)]
    pub memory: TableMemory,
    /// Whether every copy of the table's data is there.
    #[serde(default)]
    pub health: TableHealth,
    /// Per replica set (parallel to `replica_sets`): members joining it, whose
    /// copy is being synchronised. Clients include them in every write (node
    /// WRITEs and header CASes) but never read from them and ignore their CAS
    /// results; they become ordinary members when the copy is done.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub syncing: Vec<Vec<u64>>,
    /// The configuration epoch: bumped whenever a member joins, is promoted or
    /// leaves a replica set (omitted while 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub config_epoch: u64,
    /// Writes are paused while a new member's copy is finished with nobody writing
    /// (RACE and in-place tables, for well under a second per replica set): a
    /// writer that sees it waits before sending anything; reads go on. Omitted
    /// while false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub writes_paused: bool,
    /// Running re-replications of the table's replica sets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rereplication: Vec<crate::rereplication::RereplicationStatus>,
    /// The table's change feed (Clover tables): where its rings are. While set,
    /// every writer of the table records each committed write in a lane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feed: Option<crate::feed_layout::FeedLayout>,
}

/// `PUT /v1/tables/{name}/feed`: the table's change feed, or `null` to remove it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SetFeedRequest {
    /// Where the feed's rings are.
    pub feed: Option<crate::feed_layout::FeedLayout>,
}

/// Whether a table's data is all there (`GET /v1/tables/{name}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TableHealth {
    /// Summary over all copies.
    pub state: TableState,
    /// Copies of the table's data that were lost with a memnode, oldest first.
    #[serde(default)]
    pub lost: Vec<LostCopy>,
}

/// The summary of [`TableHealth`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum TableState {
    /// Every copy is there.
    #[default]
    Healthy,
    /// A copy was lost but another holds the data; it is being re-replicated.
    Degraded,
    /// Data was lost: some of the table's memory was on a memnode that lost it and
    /// had no other copy. Operations that reach that memory fail with this state
    /// named; nothing reads as "not found" because of it.
    Lost,
}

/// One copy of a table's memory lost with a memnode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LostCopy {
    /// The memnode (id) that held it.
    pub memnode_id: u64,
    /// Its name.
    pub memnode_name: String,
    /// When the loss was detected (Unix ms).
    pub since_ms: u64,
    /// What happened (e.g. "the memnode restarted without its region file").
    pub reason: String,
}

impl TableDescription {
    /// The table's index.
    pub fn index(&self) -> IndexKind {
        self.layout.index()
    }
}

/// A table's index and what that index needs: a RACE table its directory, an
/// in-place table its scheme, geometry and memory.
///
/// In JSON it keeps the fields it always had — `index`, `update_mode`, and `race` or
/// `inplace` for those indexes — so documents of older services and clients read as
/// before; a document whose fields contradict each other (an in-place table without
/// its `inplace` part, a `race` part on a Clover table, an update mode other than
/// the index's) is refused when it is read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "LayoutFields", into = "LayoutFields")]
pub enum TableLayout {
    /// Clover chains (updated out of place).
    Clover,
    /// RACE hashing (updated out of place), with where its directory lives.
    Race(RaceInfo),
    /// Tuples updated in place under a latch scheme.
    InPlace(InPlaceInfo),
}

impl TableLayout {
    /// The index.
    pub fn index(&self) -> IndexKind {
        match self {
            TableLayout::Clover => IndexKind::Clover,
            TableLayout::Race(_) => IndexKind::Race,
            TableLayout::InPlace(_) => IndexKind::InPlace,
        }
    }

    /// How values are updated (in place exactly for in-place tables).
    pub fn update_mode(&self) -> UpdateMode {
        match self {
            TableLayout::Clover | TableLayout::Race(_) => UpdateMode::OutOfPlace,
            TableLayout::InPlace(p) => UpdateMode::InPlace {
                scheme: p.scheme.clone(),
            },
        }
    }

    /// The RACE part, for a RACE table.
    pub fn race(&self) -> Option<&RaceInfo> {
        match self {
            TableLayout::Race(r) => Some(r),
            _ => None,
        }
    }

    /// The in-place part, for an in-place table.
    pub fn in_place(&self) -> Option<&InPlaceInfo> {
        match self {
            TableLayout::InPlace(p) => Some(p),
            _ => None,
        }
    }
}

/// How a [`TableLayout`] is spelled in JSON (the fields of a table description
/// before the layout was typed).
#[derive(Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
struct LayoutFields {
    /// Index.
    index: IndexKind,
    /// Update mode: `in_place` with the scheme exactly for `inplace` tables.
    #[serde(default)]
    update_mode: UpdateMode,
    /// For `race` tables: where the directory lives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    race: Option<RaceInfo>,
    /// For `inplace` tables: the scheme, geometry and memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    inplace: Option<InPlaceInfo>,
}

impl TryFrom<LayoutFields> for TableLayout {
    type Error = String;

    fn try_from(f: LayoutFields) -> Result<TableLayout, String> {
        let layout = match (f.index, f.race, f.inplace) {
            (IndexKind::Clover, None, None) => TableLayout::Clover,
            (IndexKind::Race, Some(r), None) => TableLayout::Race(r),
            (IndexKind::InPlace, None, Some(p)) => TableLayout::InPlace(p),
            (index, race, inplace) => {
                return Err(format!(
                    "a table of index {} described with{} a race part and with{} an inplace part",
                    index.as_str(),
                    if race.is_some() { "" } else { "out" },
                    if inplace.is_some() { "" } else { "out" },
                ));
            }
        };
        if f.update_mode != layout.update_mode() {
            return Err(format!(
                "a table of index {} described with update mode {:?}",
                layout.index().as_str(),
                f.update_mode
            ));
        }
        Ok(layout)
    }
}

impl From<TableLayout> for LayoutFields {
    fn from(l: TableLayout) -> LayoutFields {
        let (index, update_mode) = (l.index(), l.update_mode());
        let (race, inplace) = match l {
            TableLayout::Clover => (None, None),
            TableLayout::Race(r) => (Some(r), None),
            TableLayout::InPlace(p) => (None, Some(p)),
        };
        LayoutFields {
            index,
            update_mode,
            race,
            inplace,
        }
    }
}

#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for TableLayout {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        <LayoutFields as utoipa::PartialSchema>::schema()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for TableLayout {
    fn schemas(
        schemas: &mut Vec<(
            String,
            utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>,
        )>,
    ) {
        <LayoutFields as utoipa::ToSchema>::schemas(schemas)
    }
}

/// Memory figures of a table (`GET /v1/tables/{name}`). Everything counted here is
/// never handed to anyone else while the table lives; dropping the table frees it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TableMemory {
    /// Bytes the table owns: its directory or tuple area and the data leases it
    /// adopted.
    pub table_owned_bytes: u64,
    /// Table-owned leases.
    pub table_owned_leases: u64,
    /// Of `table_owned_bytes`: bytes adopted from data leases whose holders stopped
    /// renewing them (exited or crashed) or handed them over.
    pub adopted_bytes: u64,
    /// Adopted leases.
    pub adopted_leases: u64,
    /// Bytes in data leases that clients hold for this table (active, or expired
    /// and about to be adopted).
    pub client_bytes: u64,
    /// Those leases.
    pub client_leases: u64,
}

/// `GET /v1/tables`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TablesResponse {
    /// Every table, by name.
    pub tables: Vec<TableDescription>,
}

/// `POST /v1/tables/{name}/chains`: insert or open the chain of a key (Clover tables).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ChainRequest {
    /// The key, standard base64 (1 … 1024 bytes once decoded).
    #[cfg_attr(feature = "openapi", schema(value_type = Base64Key))]
    pub key: String,
}

/// `POST /v1/tables/{name}/chains` → 201 (created) or 200 (opened).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChainResponse {
    /// The key's unique 64-bit chain id (never 0).
    pub chain_id: u64,
    /// Whether this call created it.
    pub created: bool,
}

/// `PUT /v1/tables/{name}/chains/{chain_id}/tail`: where a chain's tail was last seen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TailHint {
    /// Memnode holding the tail node.
    pub memnode_id: u64,
    /// Address of the tail node (64-byte aligned).
    pub va: u64,
    /// The node's generation.
    #[serde(default)]
    pub generation: u64,
}

/// `GET /v1/tables/{name}/chains?key=`: a key's chain, if it has one (read-only: a
/// lookup never creates a chain).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChainInfo {
    /// The key's chain id.
    pub chain_id: u64,
    /// The chain's tail hint, when one is stored (Clover stores the key's root
    /// there once, with `POST .../root`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tail: Option<TailHint>,
}

/// Most keys one `GET /v1/tables/{name}/keys` page returns (and its default `limit`).
pub const MAX_KEYS_PAGE: usize = 1000;

/// A session about to write a replicated table asks the metadata service for the
/// table again when it last did longer ago than this, so it learns within this
/// long that the table's writes are paused ([`TableDescription::writes_paused`]).
/// The service waits a few times this long after pausing a table's writes before
/// it fences the replica set, so that writes in flight finish first.
pub const WRITER_CONFIG_MAX_AGE_MS: u64 = 100;

/// One key of a Clover table in a [`ChainKeysPage`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChainKey {
    /// The key as it was inserted, standard base64.
    pub key: String,
    /// The key's chain id.
    pub chain_id: u64,
}

impl ChainKey {
    /// The key's bytes; `None` when `key` is not standard base64.
    pub fn key_bytes(&self) -> Option<Vec<u8>> {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD
            .decode(&self.key)
            .ok()
    }
}

/// `GET /v1/tables/{name}/keys?prefix=&limit=&after=`: one page of the keys of a
/// Clover table that have a chain, i.e. were ever written (a deleted key keeps its
/// chain and is listed; clients read each key's tail to tell live keys), in byte
/// order of the keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChainKeysPage {
    /// The keys of this page, in byte order.
    #[serde(default)]
    pub keys: Vec<ChainKey>,
    /// When more keys follow: the `after` of the next page (the last key of this
    /// page, standard base64); absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_after: Option<String>,
}

/// `POST /v1/tables/{name}/chains/{chain_id}/root` → 201 (this hint was stored) or
/// 200 (a hint was already stored and is returned unchanged).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RootResponse {
    /// The chain.
    pub chain_id: u64,
    /// The chain's hint after the call: the one sent when `created`, else the one
    /// that was already stored (the winner of the race to publish).
    pub tail: TailHint,
    /// When the stored hint was stored (Unix ms).
    pub updated_at_ms: u64,
    /// Whether this call stored it.
    pub created: bool,
}

/// `GET /v1/tables/{name}/chains/{chain_id}/tail` → 200.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TailResponse {
    /// The chain.
    pub chain_id: u64,
    /// The last hint stored.
    pub tail: TailHint,
    /// When it was stored (Unix ms).
    pub updated_at_ms: u64,
}

/// `POST /v1/tables/{name}/chains/ids`: lease a block of chain ids to a client,
/// which names the chains it creates one-sidedly with them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ChainIdsRequest {
    /// How many ids: 1 to [`MAX_CHAIN_ID_BLOCK`].
    pub count: u64,
}

/// Most chain ids one [`ChainIdsRequest`] leases.
pub const MAX_CHAIN_ID_BLOCK: u64 = 1 << 20;

/// `POST /v1/tables/{name}/chains/ids` → 201: the ids `first .. first + count`,
/// never handed out before and never again. Ids a client does not use are simply
/// never seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChainIdBlock {
    /// The first id of the block (never 0).
    pub first: u64,
    /// How many ids.
    pub count: u64,
}

/// `POST /v1/tables/{name}/chains/directory`: ask for a Clover table's chain directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ChainDirectoryRequest {
    /// Whether to create it when the table has none yet (default true). False
    /// records that the table has none, for good: its keys are then created through
    /// `POST .../chains` by every client.
    #[serde(default = "yes")]
    pub create: bool,
}

fn yes() -> bool {
    true
}

/// `POST /v1/tables/{name}/chains/directory` → 201 (created) or 200: the Clover
/// table's chain directory, a table-owned array of 8-byte slots through which
/// clients claim a key's chain with one-sided CAS (no metadata call per key).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChainDirectoryResponse {
    /// Where the directory is (zeroed when created).
    pub directory: DirectoryLocation,
    /// Whether this call created it.
    pub created: bool,
}

/// One key → chain mapping a client claimed in a table's chain directory, in a
/// [`PublishChainsRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PublishedChain {
    /// The key, standard base64 (1 … 1024 bytes once decoded).
    #[cfg_attr(feature = "openapi", schema(value_type = Base64Key))]
    pub key: String,
    /// Its chain id (from a leased [`ChainIdBlock`]).
    pub chain_id: u64,
    /// The chain's root.
    pub root: TailHint,
}

impl PublishedChain {
    /// The mapping of `key` (raw bytes) to chain `chain_id` rooted at `root`.
    pub fn new(key: &[u8], chain_id: u64, root: TailHint) -> PublishedChain {
        use base64::Engine as _;
        PublishedChain {
            key: base64::engine::general_purpose::STANDARD.encode(key),
            chain_id,
            root,
        }
    }
}

/// `POST /v1/tables/{name}/chains/published`: mappings clients claimed in the
/// chain directory, recorded so that key listings and lookups by chain id see them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PublishChainsRequest {
    /// The mappings (at most [`MAX_PUBLISH_BATCH`]).
    #[cfg_attr(feature = "openapi", schema(max_items = 4096))]
    pub chains: Vec<PublishedChain>,
}

/// Most mappings in one [`PublishChainsRequest`].
pub const MAX_PUBLISH_BATCH: usize = 4096;

/// Largest request body the metadata service takes (bytes); larger ones get 413.
pub const MAX_REQUEST_BODY: usize = 1 << 20;

/// `POST /v1/tables/{name}/chains/published` → 200.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PublishChainsResponse {
    /// Mappings recorded by this call (the others were recorded already).
    pub stored: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Table descriptions as services before the typed layout wrote them.
    const OLD_CLOVER: &str = r#"{"name":"c","id":1,"index":"clover","value_limit":256,
        "memnodes":[1],"replication":1,"update_mode":"out_of_place","created_at_ms":5,
        "memory":{"table_owned_bytes":0,"table_owned_leases":0,"adopted_bytes":0,
        "adopted_leases":0,"client_bytes":0,"client_leases":0}}"#;
    const OLD_RACE: &str = r#"{"name":"r","id":2,"index":"race","value_limit":256,
        "memnodes":[1],"replication":1,"update_mode":"out_of_place","created_at_ms":5,
        "race":{"directory":{"lease_id":3,"memnode_id":1,"data_addr":"127.0.0.1:4791",
        "admin_url":"http://127.0.0.1:9000","rkey":7,"va":4096,"len":65536},"generation":1}}"#;
    const OLD_INPLACE: &str = r#"{"name":"i","id":3,"index":"inplace","value_limit":128,
        "memnodes":[1],"replication":1,"update_mode":{"in_place":{"scheme":"versioning"}},
        "created_at_ms":5,"inplace":{"scheme":"versioning","capacity":10,"tuple_bytes":256,
        "latch_placement":"embedded","unsafe_demo":false}}"#;

    #[test]
    fn descriptions_of_older_services_read_as_typed_layouts() {
        let c: TableDescription = serde_json::from_str(OLD_CLOVER).unwrap();
        assert_eq!(c.layout, TableLayout::Clover);
        assert_eq!(c.index(), IndexKind::Clover);
        let r: TableDescription = serde_json::from_str(OLD_RACE).unwrap();
        let race = r.layout.race().expect("race part");
        assert_eq!(
            (race.generation, race.directory.as_ref().unwrap().rkey),
            (1, 7)
        );
        let i: TableDescription = serde_json::from_str(OLD_INPLACE).unwrap();
        let ip = i.layout.in_place().expect("inplace part");
        assert_eq!((ip.scheme.as_str(), ip.capacity), ("versioning", 10));
        assert_eq!(i.memory, TableMemory::default());
        // What is written reads back as it was, with the fields it always had.
        for (d, old) in [(c, OLD_CLOVER), (r, OLD_RACE), (i, OLD_INPLACE)] {
            let json = serde_json::to_value(&d).unwrap();
            let mut want: serde_json::Value = serde_json::from_str(old).unwrap();
            want["memory"] = serde_json::to_value(TableMemory::default()).unwrap();
            want["health"] = serde_json::to_value(TableHealth::default()).unwrap();
            assert_eq!(json, want);
            assert_eq!(serde_json::from_value::<TableDescription>(json).unwrap(), d);
        }
    }

    #[test]
    fn contradictory_layouts_are_refused() {
        let edit = |old: &str, f: &dyn Fn(&mut serde_json::Value)| {
            let mut v: serde_json::Value = serde_json::from_str(old).unwrap();
            f(&mut v);
            serde_json::from_value::<TableDescription>(v)
        };
        // An in-place table without its in-place part.
        assert!(edit(OLD_INPLACE, &|v| v["inplace"] = serde_json::Value::Null).is_err());
        // A Clover table with a RACE directory.
        let race: serde_json::Value = serde_json::from_str(OLD_RACE).unwrap();
        assert!(edit(OLD_CLOVER, &|v| v["race"] = race["race"].clone()).is_err());
        // Out-of-place updates of an in-place table, or another scheme than its own.
        assert!(edit(OLD_INPLACE, &|v| v["update_mode"] = "out_of_place".into()).is_err());
        assert!(
            edit(OLD_INPLACE, &|v| {
                v["update_mode"] = serde_json::json!({"in_place": {"scheme": "farm"}})
            })
            .is_err()
        );
        // In-place updates of a RACE table.
        assert!(
            edit(OLD_RACE, &|v| {
                v["update_mode"] = serde_json::json!({"in_place": {"scheme": "farm"}})
            })
            .is_err()
        );
    }
}
