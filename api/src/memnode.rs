//! The JSON documents of a memory node's admin HTTP API, shared by the node and
//! [`crate::memnode_admin`]. Errors are [`crate::ErrorBody`].

use std::net::SocketAddrV4;

use serde::{Deserialize, Serialize};

/// A registered region as clients need to know it (`GET /v1/regions`, and in QP creation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RegionDescriptor {
    /// Remote key.
    pub rkey: u32,
    /// Virtual address of the first byte.
    pub base_va: u64,
    /// Length in bytes.
    pub len: u64,
    /// Rights granted to remote peers, as a comma list (`local_write,read,write,atomic`).
    pub flags: String,
    /// Order in which multi-line READs observe their lines (`ascending|descending|random`).
    pub read_order: String,
    /// What backs the region: `anonymous`, `hugepages` or `file`.
    pub backing: String,
    /// For a file-backed region, the file a client on this host can map (`shm` transport).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The region's instance id, kept across restarts by a `--region-file` region
    /// (0: none; the memory does not outlive the process).
    #[serde(default)]
    pub instance: u64,
}

impl RegionDescriptor {
    /// The `shm` transport target of a file-backed region.
    pub fn shm_target(&self) -> Option<verbs::transport::shm::ShmTarget> {
        self.path
            .as_ref()
            .map(|p| verbs::transport::shm::ShmTarget {
                path: p.into(),
                rkey: self.rkey,
                base_va: self.base_va,
            })
    }

    /// Whether `[va, va + len)` lies inside this region.
    pub fn contains(&self, va: u64, len: u64) -> bool {
        va >= self.base_va
            && va
                .checked_add(len)
                .is_some_and(|end| end <= self.base_va.saturating_add(self.len))
    }
}

/// `GET /v1/regions`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RegionsResponse {
    /// Every registered region.
    pub regions: Vec<RegionDescriptor>,
}

/// `POST /v1/regions/{rkey}/zero`: zero `[va, va + len)` of region `rkey`.
///
/// The metadata service sends it before handing out memory whose first bytes must
/// read as zero (a RACE directory area, an in-place tuple area or latch array), so a
/// new table never finds a dropped table's structures in memory it reuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ZeroRequest {
    /// First byte (a virtual address inside the region, as in `GET /v1/regions`).
    pub va: u64,
    /// Bytes to zero.
    pub len: u64,
}

/// The answer to a [`ZeroRequest`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ZeroResponse {
    /// Bytes zeroed.
    pub zeroed: u64,
}

/// `GET /v1/node`: where the node's data plane is and what it serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NodeInfo {
    /// The soft-RoCE UDP address as bound (may be `0.0.0.0:port`).
    #[cfg_attr(feature = "openapi", schema(value_type = crate::schemas::SocketAddrV4String))]
    pub listen: SocketAddrV4,
    /// The address clients should send to, when the node knows it (listen address not
    /// `0.0.0.0`); otherwise clients use the admin host with [`NodeInfo::data_port`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::schemas::SocketAddrV4String>))]
    pub data_addr: Option<SocketAddrV4>,
    /// The soft-RoCE UDP port.
    pub data_port: u16,
    /// Bytes of registered memory.
    pub capacity: u64,
    /// Queue pairs currently served.
    pub qps: usize,
    /// The crate version.
    pub version: String,
    /// Every registered region.
    pub regions: Vec<RegionDescriptor>,
    /// The id the metadata service gave this node (absent until it registered): what
    /// a grant for this node names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memnode_id: Option<u64>,
}

/// `POST /v1/qps`: the client half of a queue pair asks for a responder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateQpRequest {
    /// The client's queue pair number (24-bit, non-zero).
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 16777215))]
    pub qpn: u32,
    /// The first PSN the client will send (24-bit).
    #[cfg_attr(feature = "openapi", schema(maximum = 16777215))]
    pub psn: u32,
    /// The UDP address the client's datagrams come from (and responses go to).
    #[cfg_attr(feature = "openapi", schema(value_type = crate::schemas::SocketAddrV4String))]
    pub addr: SocketAddrV4,
    /// Path MTU: 256, 512, 1024, 2048 or 4096 (default 1024).
    #[serde(default = "default_pmtu")]
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::schemas::pmtu_schema))]
    pub pmtu: u32,
    /// The memory-node address the client sends to, as the client sees it (needed for
    /// the ICRC when the node listens on `0.0.0.0`; defaults to the listen address).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::schemas::SocketAddrV4String>))]
    pub server_addr: Option<SocketAddrV4>,
    /// The client's socket receives coalesced buffers (UDP GRO; on loopback only): the
    /// node may send it runs of responses as one segmented send. Default `false`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub coalesce: bool,
}

fn default_pmtu() -> u32 {
    1024
}

/// `POST /v1/qps` → 201: the responder queue pair that was created.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreateQpResponse {
    /// The responder's queue pair number (destination QPN of the client's requests).
    pub qpn: u32,
    /// The responder's UDP address (where to send requests).
    #[cfg_attr(feature = "openapi", schema(value_type = crate::schemas::SocketAddrV4String))]
    pub addr: SocketAddrV4,
    /// The path MTU agreed.
    pub pmtu: u32,
    /// The client's queue pair number, echoed.
    pub client_qpn: u32,
    /// Every registered region.
    pub regions: Vec<RegionDescriptor>,
    /// The responder destroys a queue pair that carried no request for this long
    /// (so queue pairs of crashed clients do not pile up); a client that stays idle
    /// longer creates a new one before its next request. `None`: never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout_ms: Option<u64>,
    /// The queue pair's own memory key, when it was created with a grant: every request
    /// on it must carry this key instead of the region's, and may touch only the
    /// granted extents. `None`: the region's keys, whole-region access.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rkey: Option<u32>,
    /// When the node runs RPC workers: the first PSN of the replies it SENDs on this
    /// queue pair, which the client's receiving side must expect (see
    /// [`crate::rpc`]). `None`: the node is passive and refuses SENDs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpc_psn: Option<u32>,
    /// The node's socket receives coalesced buffers (UDP GRO; on loopback only): a
    /// client that said it coalesces too may send it runs of requests as one
    /// segmented send, and gets runs of responses that way. Default `false`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub coalesce: bool,
}

/// A queue pair's write-based RPC request ring: where the client WRITEs its requests
/// (framed as in [`crate::rpc`], each in a slot laid out as in [`crate::rpc_ring`]).
///
/// Only the queue pair the ring belongs to may write it, and only with WRITEs; the
/// node's workers poll it and answer each request with a SEND on the queue pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RpcRingInfo {
    /// Virtual address of the ring's first slot.
    pub va: u64,
    /// The memory key WRITEs to the ring carry (the queue pair's own key when it was
    /// created with a grant, else the region's).
    pub rkey: u32,
    /// Slots in the ring: at most this many requests outstanding.
    pub slots: u32,
    /// Bytes of one slot (request `s` starts at `va + ((s - 1) % slots) * slot_bytes`).
    pub slot_bytes: u32,
}

/// The query of `POST /v1/qps`: `?rpc_ring=true` asks for a write-based RPC request
/// ring on a node with RPC workers and rings (absent: no ring).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct CreateQpQuery {
    /// Ask for a request ring.
    #[serde(default)]
    pub rpc_ring: bool,
}

/// `POST /v1/qps` → 201: [`CreateQpResponse`] with the queue pair's request ring,
/// when it asked for one and the node had one free.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreatedQp {
    /// The queue pair.
    #[serde(flatten)]
    pub qp: CreateQpResponse,
    /// Its request ring (`None`: not asked for, rings off, or none free).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpc_ring: Option<RpcRingInfo>,
}

/// `POST /v1/qps/{qpn}/grant`: a newer grant for a queue pair's client (same client;
/// replaces the windows of its table, or adds a table).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UpdateGrantRequest {
    /// The signed grant, as the metadata service issued it.
    pub grant: String,
}

/// One queue pair in `GET /v1/qps` and `GET /v1/qps/{qpn}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct QpInfo {
    /// The responder's queue pair number.
    pub qpn: u32,
    /// The client's queue pair number.
    pub client_qpn: u32,
    /// The client's UDP address.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::schemas::SocketAddrV4String))]
    pub client_addr: SocketAddrV4,
    /// The node address the client sends to (ICRC path).
    #[cfg_attr(feature = "openapi", schema(value_type = crate::schemas::SocketAddrV4String))]
    pub server_addr: SocketAddrV4,
    /// Path MTU.
    pub pmtu: u32,
    /// The PSN the responder expects next.
    pub expected_psn: u32,
    /// Counters of this queue pair.
    pub counters: QpCounters,
    /// Its own memory key, when it was created with a grant (`None`: whole-region access).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rkey: Option<u32>,
    /// The client its grants were issued to, when it was created with one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// The tables whose memory its grants cover, with each grant's expiry (unix ms).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<QpGrantInfo>,
    /// When the node runs RPC workers: the first PSN of the replies it SENDs on this
    /// queue pair (what the client's receiving side expects first). `None`: the node
    /// is passive and refuses SENDs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpc_psn: Option<u32>,
    /// Its write-based RPC request ring, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpc_ring: Option<RpcRingInfo>,
}

/// One grant a queue pair holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct QpGrantInfo {
    /// The table.
    pub table: String,
    /// Read-only or read-write.
    pub access: crate::grant::GrantAccess,
    /// Its windows.
    pub windows: usize,
    /// When it expires, unix milliseconds.
    pub expires_at_ms: u64,
}

/// Per-queue-pair counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct QpCounters {
    /// Datagrams addressed to this QP that the responder accepted.
    pub accepted: u64,
    /// Datagrams addressed to this QP that were dropped (malformed, bad ICRC, not a request).
    pub dropped: u64,
    /// Messages executed.
    pub messages: u64,
    /// READs executed (first time).
    pub reads: u64,
    /// WRITEs completed.
    pub writes: u64,
    /// Atomics executed.
    pub atomics: u64,
    /// Duplicate request packets.
    pub duplicates: u64,
    /// NAK(PSN sequence error) sent.
    pub naks_sequence: u64,
    /// NAK(remote access error) sent.
    pub naks_access: u64,
    /// NAK(invalid request) sent.
    pub naks_invalid: u64,
    /// Packets sent.
    pub packets_sent: u64,
    /// Bytes sent.
    pub bytes_sent: u64,
}

/// `GET /v1/qps`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct QpsResponse {
    /// Every queue pair, by QPN.
    pub qps: Vec<QpInfo>,
}

pub use crate::error_body::ErrorBody;

/// `GET /healthz`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Health {
    /// `ok` while the data plane runs.
    pub status: String,
    /// Queue pairs served.
    pub qps: usize,
    /// Seconds since start.
    pub uptime_seconds: u64,
}
