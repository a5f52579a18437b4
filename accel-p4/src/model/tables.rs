//! Match-action tables: exact-match, fixed capacity, written only by the control plane.

use std::collections::BTreeMap;
use std::net::SocketAddrV4;

use serde::{Deserialize, Serialize};

use crate::spec::TABLE_COPY_MCAST;
use crate::spec::{
    self, TABLE_ATOMIC_RANGE, TABLE_CONN_CLIENT, TABLE_CONN_FILLER, TABLE_FAULT_POLICY,
    TABLE_LATCH_REGION, TABLE_MUX_DOWN, TABLE_MUX_UP, TABLE_ROUTE_DOWN, TABLE_ROUTE_UP,
    TABLE_TRACKED_LOCK, TableSpec,
};
use crate::spec::{TABLE_CONN_SCOPED, TABLE_CONN_WINDOW, TABLE_STEER_CLASSES, TABLE_STEER_KEYS};
use crate::spec::{TABLE_COPY_DST, TABLE_COPY_SRC, TABLE_FLOW_PUNT};
use crate::spec::{TABLE_MIRROR_ACK, TABLE_MIRROR_LANE, TABLE_MIRROR_RKEY};

use super::range_table::RangeTable;

/// Why a table write failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    /// The table has no free entry.
    #[error("table {0} is full")]
    Full(&'static str),
}

/// An exact-match table of at most `spec.size` entries.
#[derive(Debug, Clone)]
pub struct ExactTable<K: Ord, A> {
    spec: &'static TableSpec,
    entries: BTreeMap<K, A>,
}

impl<K: Ord + Clone, A: Clone> ExactTable<K, A> {
    /// An empty table.
    pub fn new(spec: &'static TableSpec) -> ExactTable<K, A> {
        ExactTable {
            spec,
            entries: BTreeMap::new(),
        }
    }

    /// The table's spec.
    pub fn spec(&self) -> &'static TableSpec {
        self.spec
    }

    /// Look a key up (the data-plane match).
    pub fn lookup(&self, key: &K) -> Option<&A> {
        self.entries.get(key)
    }

    /// Add or replace an entry.
    pub fn insert(&mut self, key: K, action: A) -> Result<(), TableError> {
        if !self.entries.contains_key(&key) && self.entries.len() >= self.spec.size {
            return Err(TableError::Full(self.spec.name));
        }
        self.entries.insert(key, action);
        Ok(())
    }

    /// Remove an entry.
    pub fn remove(&mut self, key: &K) -> Option<A> {
        self.entries.remove(key)
    }

    /// Every entry, in key order.
    pub fn entries(&self) -> impl Iterator<Item = (&K, &A)> {
        self.entries.iter()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Remove every entry.
    pub fn clear(&mut self) {
        self.entries.clear();
    }
}

/// Key of `route_up` and `route_down`: where the packet comes from and its destination
/// QPN.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RouteKey {
    /// IPv4 source and UDP source port.
    pub src: SocketAddrV4,
    /// BTH destination QPN.
    pub qpn: u32,
}

/// Action `to_memnode` / `to_client`: rewrite the addressing and tag the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteAction {
    /// Connection id (indexes the per-connection registers).
    pub conn: u8,
    /// New IPv4 source and UDP source port (the switch's own socket on that side).
    pub src: SocketAddrV4,
    /// New IPv4 destination and UDP destination port.
    pub dst: SocketAddrV4,
    /// The client's QPN (`route_up` only; answers go to it).
    #[serde(default)]
    pub client_qpn: u32,
    /// log2 of the path MTU (`route_up` only; READ requests consume one PSN per MTU).
    #[serde(default = "default_pmtu_log2")]
    pub pmtu_log2: u8,
}

fn default_pmtu_log2() -> u8 {
    10
}

/// Action `switch_owned`: the words `[base_va, base_va + 8 * slots)` under this rkey
/// live in `atomic_word[first_slot ..]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AtomicRange {
    /// First byte of the range (8-byte aligned).
    pub base_va: u64,
    /// Number of 64-bit words.
    pub slots: u32,
    /// Index of the first word in `atomic_word`.
    #[serde(default)]
    pub first_slot: u32,
}

/// Key of `tracked_lock`: a lock word by rkey and VA.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct LockKey {
    /// Remote key of the region.
    pub rkey: u32,
    /// Address of the 8-byte word.
    pub va: u64,
}

/// Action `tracked`: where a tracked lock word's cached value lives and which
/// multiplexed QP its requests go up on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrackedLock {
    /// Index in `lock_word` / `lock_state`.
    pub slot: u32,
    /// Multiplexed QP (index in `mux_up`).
    pub mux: u8,
}

/// Action `to_mux`: the addressing of a multiplexed upstream QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MuxAction {
    /// The switch's memnode-side socket.
    pub src: SocketAddrV4,
    /// The memnode's soft-RoCE address.
    pub dst: SocketAddrV4,
    /// The memnode's responder QPN for the multiplexed QP.
    pub memnode_qpn: u32,
}

/// Action `filler`: a diverted request's filler on the client's own QP is a 0-byte
/// WRITE to `(rkey, va)` (any valid address of that memnode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FillerAction {
    /// Remote key.
    pub rkey: u32,
    /// Address.
    pub va: u64,
    /// The memnode's responder QPN of the connection.
    pub memnode_qpn: u32,
}

/// Action `latched_tuples`: a region of fixed-size tuples whose versions the switch
/// holds. Tuple `i` starts at `base_va + (i << stride_log2)`; its first 8 bytes are the
/// latch/version word (answered by the switch) and the stamp word of READ responses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct LatchRegion {
    /// Address of tuple 0.
    pub base_va: u64,
    /// log2 of the tuple stride in bytes (at least 3).
    pub stride_log2: u8,
    /// Number of tuples.
    pub tuples: u32,
    /// Index of tuple 0 in `tuple_version`.
    #[serde(default)]
    pub first_tuple: u32,
}

/// Action `faults`: probabilities in 1/`FAULT_SCALE`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FaultPolicy {
    /// Drop probability.
    #[serde(default)]
    pub drop: u32,
    /// Duplicate probability.
    #[serde(default)]
    pub duplicate: u32,
    /// Reorder probability (held back until the next packet in the same direction).
    #[serde(default)]
    pub reorder: u32,
    /// Delay probability.
    #[serde(default)]
    pub delay: u32,
    /// Delay in microseconds.
    #[serde(default)]
    pub delay_us: u32,
}

impl FaultPolicy {
    /// A policy from probabilities in `[0, 1]`.
    pub fn from_probabilities(drop: f64, duplicate: f64, reorder: f64, delay: f64) -> Self {
        let scale = |p: f64| (p.clamp(0.0, 1.0) * f64::from(spec::FAULT_SCALE)).round() as u32;
        FaultPolicy {
            drop: scale(drop),
            duplicate: scale(duplicate),
            reorder: scale(reorder),
            delay: scale(delay),
            delay_us: 0,
        }
    }
}

/// Every table of the pipeline.
#[derive(Debug, Clone)]
pub struct Tables {
    /// Client → memnode routes.
    pub route_up: ExactTable<RouteKey, RouteAction>,
    /// Memnode → client routes.
    pub route_down: ExactTable<RouteKey, RouteAction>,
    /// Switch-owned ranges by rkey.
    pub atomic_range: ExactTable<u32, AtomicRange>,
    /// Tracked lock words (atomic replacement).
    pub tracked_lock: ExactTable<LockKey, TrackedLock>,
    /// Multiplexed upstream QPs by mux id.
    pub mux_up: ExactTable<u8, MuxAction>,
    /// Responses on multiplexed QPs: (memnode address, switch QPN) → mux id.
    pub mux_down: ExactTable<RouteKey, u8>,
    /// Connection → client addressing for answers built from multiplexed responses
    /// (`client_qpn` is the client's QPN).
    pub conn_client: ExactTable<u8, RouteAction>,
    /// Connection → filler target (atomic replacement).
    pub conn_filler: ExactTable<u8, FillerAction>,
    /// Regions of switch-latched tuples by rkey (optimistic latching).
    pub latch_region: ExactTable<u32, LatchRegion>,
    /// Tracked Clover keys: chain id → key slot (steering).
    pub steer_keys: ExactTable<u64, u16>,
    /// Tracked node size classes (steering).
    pub steer_classes: ExactTable<u32, ()>,
    /// Fault policy by direction.
    pub fault_policy: ExactTable<u32, FaultPolicy>,
    /// Connections confined to their windows (made with a grant).
    pub conn_scoped: ExactTable<u8, ()>,
    /// The windows of scoped connections (the P4 program holds them twice,
    /// `conn_window` and `conn_window_last`, to match a request's first and last byte).
    pub conn_window: RangeTable<WindowAction>,
    /// Responses on copies' source QPs: (memnode address, switch QPN) → READ→WRITE
    /// conversion (zero-sided copies).
    pub copy_src: ExactTable<RouteKey, CopySrcAction>,
    /// Responses on copies' target QPs: (memnode address, switch QPN) → copy slot.
    pub copy_dst: ExactTable<RouteKey, CopyDstAction>,
    /// Packets the switch CPU takes: answers on flows' ring control QPs and doorbells,
    /// (source address, switch QPN) → ring.
    pub flow_punt: ExactTable<RouteKey, FlowPuntAction>,
    /// Replicated WRITEs: alias memory key → replica set and the primary's key.
    pub mirror_rkey: ExactTable<u32, MirrorRkeyAction>,
    /// A replica set's lanes: (set, backup) → the backup's addressing.
    pub mirror_lane: ExactTable<(u8, u8), MirrorLaneAction>,
    /// Answers on lanes: (backup address, switch QPN) → (set, backup).
    pub mirror_ack: ExactTable<RouteKey, MirrorAckAction>,
    /// Multicast copies: (copy slot, replica 1..) → the WRITE target of one more
    /// replica of every READ response the slot's `copy_src` entry converts.
    pub copy_mcast: ExactTable<(u8, u8), CopyReplicaAction>,
}

/// Action `replicate`: a WRITE under an alias key is replicated to set `set`; it goes
/// to the primary under its real key `rkey`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MirrorRkeyAction {
    /// The replica set (index of the per-set registers).
    pub set: u8,
    /// The primary's memory key.
    pub rkey: u32,
    /// Backups the set has (0 to [`spec::MIRROR_BACKUPS`]).
    pub backups: u8,
}

/// Action `lane`: how the switch addresses the copy of a replicated WRITE for one
/// backup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MirrorLaneAction {
    /// The switch's address the WRITE leaves from (its memnode-side socket).
    pub src: SocketAddrV4,
    /// The backup's soft-RoCE address.
    pub dst: SocketAddrV4,
    /// The backup's QPN of the lane.
    pub qpn: u32,
    /// The backup's memory key.
    pub rkey: u32,
    /// Added to the primary's VA (wrapping) to address the backup's copy.
    pub va_delta: u64,
}

/// Action `lane_answer`: which set and backup a lane's answers belong to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MirrorAckAction {
    /// The replica set.
    pub set: u8,
    /// The backup (0 or 1).
    pub backup: u8,
}

/// Action `read_to_write`: the static state of one copy's READ→WRITE conversion. A READ
/// response packet at source PSN `src_psn + k` carries the copy's bytes from
/// `k << pmtu_log2` on; it leaves as a WRITE ONLY of those bytes at target PSN
/// `dst_psn + k` and address `dst_va + (k << pmtu_log2)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopySrcAction {
    /// The copy's slot (index of its registers).
    pub slot: u8,
    /// Source-side PSN of the copy's first byte.
    pub src_psn: u32,
    /// Target-side PSN of the copy's first byte.
    pub dst_psn: u32,
    /// Target address of the copy's first byte.
    pub dst_va: u64,
    /// Target memory key.
    pub dst_rkey: u32,
    /// The switch's address the WRITEs leave from (its memnode-side socket).
    pub src: SocketAddrV4,
    /// The target memnode's soft-RoCE address.
    pub dst: SocketAddrV4,
    /// The target memnode's QPN of the switch's target QP.
    pub dst_qpn: u32,
    /// log2 of the path MTU both QPs use.
    pub pmtu_log2: u8,
    /// Length of the copy in bytes (responses beyond it are stale).
    pub len: u64,
}

/// Action `punt`: the packet goes to the switch CPU for the flow ring `ring` (a
/// control-plane index).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowPuntAction {
    /// The ring (control-plane index of the ring's control QP or doorbell).
    pub ring: u16,
}

/// Action `write_answer`: which copy a target QP's ACKs and NAKs belong to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopyDstAction {
    /// The copy's slot.
    pub slot: u8,
    /// Target-side PSN of the copy's first byte.
    pub dst_psn: u32,
}

/// Action `replica_write`: one more target of a multicast copy. The response at
/// source PSN `src_psn + k` of the slot's `copy_src` entry also leaves as a WRITE ONLY
/// at this target's PSN `dst_psn + k` and address `dst_va + (k << pmtu_log2)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopyReplicaAction {
    /// Target-side PSN of the copy's first byte.
    pub dst_psn: u32,
    /// Target address of the copy's first byte.
    pub dst_va: u64,
    /// Target memory key.
    pub dst_rkey: u32,
    /// The target memnode's soft-RoCE address.
    pub dst: SocketAddrV4,
    /// The target memnode's QPN of the switch's target QP.
    pub dst_qpn: u32,
}

/// Action `window`: which window matched and what it allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowAction {
    /// The window's id (the same in both window tables).
    pub id: u16,
    /// READ allowed.
    pub read: bool,
    /// WRITE, compare-and-swap and fetch-and-add allowed.
    pub write: bool,
}

impl Default for Tables {
    fn default() -> Tables {
        Tables {
            route_up: ExactTable::new(&TABLE_ROUTE_UP),
            route_down: ExactTable::new(&TABLE_ROUTE_DOWN),
            atomic_range: ExactTable::new(&TABLE_ATOMIC_RANGE),
            tracked_lock: ExactTable::new(&TABLE_TRACKED_LOCK),
            mux_up: ExactTable::new(&TABLE_MUX_UP),
            mux_down: ExactTable::new(&TABLE_MUX_DOWN),
            conn_client: ExactTable::new(&TABLE_CONN_CLIENT),
            conn_filler: ExactTable::new(&TABLE_CONN_FILLER),
            latch_region: ExactTable::new(&TABLE_LATCH_REGION),
            steer_keys: ExactTable::new(&TABLE_STEER_KEYS),
            steer_classes: ExactTable::new(&TABLE_STEER_CLASSES),
            fault_policy: ExactTable::new(&TABLE_FAULT_POLICY),
            conn_scoped: ExactTable::new(&TABLE_CONN_SCOPED),
            conn_window: RangeTable::new(&TABLE_CONN_WINDOW),
            copy_src: ExactTable::new(&TABLE_COPY_SRC),
            copy_dst: ExactTable::new(&TABLE_COPY_DST),
            flow_punt: ExactTable::new(&TABLE_FLOW_PUNT),
            mirror_rkey: ExactTable::new(&TABLE_MIRROR_RKEY),
            mirror_lane: ExactTable::new(&TABLE_MIRROR_LANE),
            mirror_ack: ExactTable::new(&TABLE_MIRROR_ACK),
            copy_mcast: ExactTable::new(&TABLE_COPY_MCAST),
        }
    }
}
