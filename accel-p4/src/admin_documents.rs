//! The JSON documents of the switch's admin API that are its own (the control plane's
//! records — routes, muxes, lock entries, fault and steering settings — are
//! [`crate::control`]'s): typed, so that the answers and the OpenAPI document come
//! from one declaration.

use std::net::SocketAddrV4;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::control::{LockEntry, Mux, Route, SteerSettings};
use crate::model::{AtomicRange, LatchRegion, ReadSteerCounters, WriteSteerCounters};
use crate::spec;

/// `GET /healthz`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Health {
    /// `ok` while the switch serves.
    pub status: String,
    /// Seconds since start.
    pub uptime_seconds: u64,
    /// Connections installed.
    pub routes: usize,
}

/// The pipeline's mode: its bits and the functions they turn on (`GET /v1/mode`, the
/// answer of `PUT /v1/mode`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ModeInfo {
    /// The mode bits.
    pub mode: u32,
    /// The functions they turn on, by name.
    #[schema(schema_with = function_names_schema)]
    pub functions: Vec<String>,
}

impl ModeInfo {
    /// The mode `bits` with their functions' names.
    pub fn of(bits: u32) -> ModeInfo {
        ModeInfo {
            mode: bits,
            functions: spec::mode::ALL
                .iter()
                .filter(|(_, b)| bits & b != 0)
                .map(|(n, _)| (*n).to_owned())
                .collect(),
        }
    }
}

/// The functions' names ([`spec::mode::ALL`]) as an array of an enumeration.
fn function_names_schema() -> utoipa::openapi::schema::Array {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Type};
    ArrayBuilder::new()
        .items(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some(spec::mode::ALL.iter().map(|(n, _)| *n))),
        )
        .build()
}

/// [`function_names_schema`], or `null`.
fn optional_function_names_schema() -> utoipa::openapi::schema::Array {
    use utoipa::openapi::schema::{SchemaType, Type};
    let mut a = function_names_schema();
    a.schema_type = SchemaType::from_iter([Type::Array, Type::Null]);
    a
}

/// `PUT /v1/mode`: exactly one of `mode` (bits) and `functions` (names); every
/// function named must be implemented (422 `not_implemented` otherwise).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct ModeRequest {
    /// The mode bits.
    #[serde(default)]
    pub mode: Option<u32>,
    /// The functions to turn on, by name.
    #[serde(default)]
    #[schema(schema_with = optional_function_names_schema)]
    pub functions: Option<Vec<String>>,
}

/// `GET /v1/switch`: the switch's addresses and mode.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SwitchInfo {
    /// Where clients send.
    #[schema(value_type = dmkv_api::schemas::SocketAddrV4String)]
    pub client_side: SocketAddrV4,
    /// Where the switch sends to memory nodes from.
    #[schema(value_type = dmkv_api::schemas::SocketAddrV4String)]
    pub memnode_side: SocketAddrV4,
    /// The pipeline's mode.
    pub mode: ModeInfo,
    /// The version of the data-plane specification the pipeline implements.
    pub spec_version: u32,
}

/// Whether a register's cells are single or lo/hi pairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RegisterKindName {
    /// Single cells.
    Single,
    /// Lo/hi pairs.
    Pair,
}

/// One register of the pipeline, in `GET /v1/registers`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RegisterInfo {
    /// Name.
    pub name: String,
    /// Width of one cell in bits.
    pub width: u32,
    /// Number of cells.
    pub size: usize,
    /// Single cells or pairs.
    pub kind: RegisterKindName,
    /// The control block that owns it.
    pub control: String,
    /// What it holds.
    pub doc: String,
}

/// `GET /v1/registers`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RegistersResponse {
    /// Every register.
    pub registers: Vec<RegisterInfo>,
    /// Register accesses the pipeline refused (out of its stage), summed.
    pub access_violations: u64,
}

/// `GET /v1/registers/{name}`: the register's non-zero cells.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RegisterValues {
    /// The register.
    pub name: String,
    /// Its number of cells.
    pub size: usize,
    /// `[index, value]` of every non-zero cell.
    #[schema(value_type = Vec<Vec<u64>>)]
    pub values: Vec<(usize, u64)>,
}

/// `PUT /v1/registers/{name}/{index}`: the value to write.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
pub struct RegisterWrite {
    /// The value (truncated to the register's width).
    pub value: u64,
}

/// The answer of `PUT /v1/registers/{name}/{index}`: the cell as it now reads.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RegisterCell {
    /// The register.
    pub name: String,
    /// The cell.
    pub index: usize,
    /// Its value.
    pub value: u64,
}

/// One entry of a match-action table in `GET /v1/tables`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TableEntry {
    /// The match key (its shape is the table's).
    pub key: Value,
    /// The action and its data (its shape is the table's).
    pub action: Value,
}

/// `GET /v1/tables`: every match-action table's entries.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct TablesResponse {
    /// Client → memnode routing.
    pub route_up: Vec<TableEntry>,
    /// Memnode → client routing.
    pub route_down: Vec<TableEntry>,
    /// Switch-owned atomic ranges.
    pub atomic_range: Vec<TableEntry>,
    /// Fault injection policies.
    pub fault_policy: Vec<TableEntry>,
    /// Tracked lock words.
    pub tracked_lock: Vec<TableEntry>,
    /// Multiplexed upstream QPs.
    pub mux_up: Vec<TableEntry>,
    /// Multiplexed QPs' answers.
    pub mux_down: Vec<TableEntry>,
    /// Connections by client.
    pub conn_client: Vec<TableEntry>,
    /// Clover steering's tracked keys.
    pub steer_keys: Vec<TableEntry>,
    /// Clover steering's node size classes (keys only).
    pub steer_classes: Vec<Value>,
    /// Switch-latched tuple regions.
    pub latch_region: Vec<TableEntry>,
    /// Switch-initiated copies' source QPs (READ→WRITE conversion).
    #[serde(default)]
    pub copy_src: Vec<TableEntry>,
    /// Switch-initiated copies' target QPs.
    #[serde(default)]
    pub copy_dst: Vec<TableEntry>,
    /// Flows' ring control QPs and doorbells (answers to the CPU).
    #[serde(default)]
    pub flow_punt: Vec<TableEntry>,
}

/// `GET /v1/routes`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RoutesResponse {
    /// Every connection.
    pub routes: Vec<Route>,
}

/// `PUT /v1/atomics/range`: the words of region `rkey` the switch owns.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
pub struct RangeRequest {
    /// Remote key of the region.
    pub rkey: u32,
    /// The range.
    #[serde(flatten)]
    pub range: AtomicRange,
}

/// The answer of `PUT /v1/atomics/range`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
pub struct RangeResponse {
    /// Remote key of the region.
    pub rkey: u32,
    /// The range installed.
    pub range: AtomicRange,
}

/// `GET /v1/steer`: the steering settings and counters.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SteerResponse {
    /// The settings.
    pub settings: SteerSettings,
    /// Write steering's counters.
    pub write_steer: WriteSteerCounters,
    /// Read steering's counters.
    pub read_steer: ReadSteerCounters,
}

/// `GET /v1/replace/mux`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MuxesResponse {
    /// Every multiplexed upstream QP.
    pub muxes: Vec<Mux>,
}

/// `GET /v1/replace/locks`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LocksResponse {
    /// Every tracked lock word.
    pub locks: Vec<LockEntry>,
}

/// One switch-latched region, in `GET /v1/latch/regions` and the answer of `PUT`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
pub struct LatchRegionEntry {
    /// Remote key of the region.
    pub rkey: u32,
    /// The region.
    pub region: LatchRegion,
}

/// `GET /v1/latch/regions`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LatchRegionsResponse {
    /// Every switch-latched region.
    pub regions: Vec<LatchRegionEntry>,
}

/// `POST /v1/routes/{conn}/grant`: the tables the connection holds grants for now.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RouteGrantResponse {
    /// The connection.
    pub conn: u8,
    /// The tables its grants cover.
    pub tables: Vec<String>,
}
