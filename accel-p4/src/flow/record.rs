//! What an operator asks for when starting a flow (`POST /v1/flows`), what the switch
//! remembers of it across restarts, and what it reports.

use serde::{Deserialize, Serialize};

use super::checkpoint::FlowCheckpoint;
use super::job::{FlowProgress, FlowState};
use super::policy::FlowKind;
use super::request::{DEFAULT_POLL_INTERVAL_US, FlowShape};
use super::ring::RingLayout;
use crate::copy::CopyQp;

/// Retransmission timeout of an item move when the request does not say, in
/// microseconds.
pub const DEFAULT_FLOW_RTO_US: u64 = 20_000;

/// One ring of a flow: a memory node and the ring's layout there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FlowRing {
    /// The memory node's admin URL (the switch creates its queue pairs there).
    pub memnode: String,
    /// Address of the ring's head word (see `docs/zero-sided.md` for the layout).
    pub va: u64,
    /// Memory key covering the ring.
    pub rkey: u32,
    /// Bytes per slot.
    pub slot_size: u32,
    /// Number of slots.
    pub slots: u32,
    /// For a producer: the address (IPv4:port) its doorbells come from. The switch then
    /// gives it a doorbell QPN on its client-side address (in the flow's status); a
    /// RoCE packet from there to that QPN makes the switch read the producer's head at
    /// once. Without it the producer's head is learned by polling only.
    #[serde(default)]
    #[schema(value_type = Option<dmkv_api::schemas::SocketAddrV4String>)]
    pub doorbell_from: Option<std::net::SocketAddrV4>,
}

impl FlowRing {
    /// The layout.
    pub fn layout(&self) -> RingLayout {
        RingLayout {
            va: self.va,
            rkey: self.rkey,
            slot_size: self.slot_size,
            slots: self.slots,
        }
    }
}

/// `POST /v1/flows`: move items from producer rings to consumer rings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FlowRequest {
    /// Which flow.
    pub kind: FlowKind,
    /// Producer rings.
    pub producers: Vec<FlowRing>,
    /// Consumer rings.
    pub consumers: Vec<FlowRing>,
    /// How often ring counters are polled, in microseconds (default 100).
    #[serde(default)]
    pub poll_interval_us: Option<u64>,
    /// Retransmission timeout of an item move, in microseconds (default 20000).
    #[serde(default)]
    pub rto_us: Option<u64>,
}

impl FlowRequest {
    /// The flow's shape, checked.
    pub fn shape(&self) -> Result<FlowShape, String> {
        let shape = FlowShape {
            kind: self.kind,
            producers: self.producers.iter().map(FlowRing::layout).collect(),
            consumers: self.consumers.iter().map(FlowRing::layout).collect(),
            poll_interval_us: self.poll_interval_us.unwrap_or(DEFAULT_POLL_INTERVAL_US),
            rto_us: self.rto_us.unwrap_or(DEFAULT_FLOW_RTO_US),
        };
        shape.checked()?;
        Ok(shape)
    }
}

/// A flow as the state file keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FlowRecord {
    /// The flow's id.
    pub id: u64,
    /// What was asked.
    pub request: FlowRequest,
    /// What survives a restart (written before the moves it decides leave the switch).
    pub checkpoint: FlowCheckpoint,
    /// Where it stands.
    pub state: FlowState,
    /// The queue pairs of its current incarnation.
    #[serde(default)]
    pub qps: Vec<CopyQp>,
    /// How many times a restarted switch resumed it.
    #[serde(default)]
    pub resumed: u32,
}

/// A flow's status, as the admin API reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FlowStatus {
    /// The flow's id.
    pub id: u64,
    /// What was asked.
    pub request: FlowRequest,
    /// Progress: state, items moved, retries, waiting items, free space per consumer.
    pub progress: FlowProgress,
    /// How many times a restarted switch resumed it.
    pub resumed: u32,
    /// Per producer, the switch QPN its doorbells go to (on the switch's client-side
    /// address), if it has one.
    #[serde(default)]
    pub doorbell_qpns: Vec<Option<u32>>,
}

impl FlowStatus {
    /// The status of a flow not running in this incarnation, from its record.
    pub fn at_rest(record: &FlowRecord) -> FlowStatus {
        FlowStatus {
            id: record.id,
            request: record.request.clone(),
            progress: FlowProgress {
                state: record.state.clone(),
                delivered: record.checkpoint.delivered,
                reads: 0,
                rereads: 0,
                waiting: Vec::new(),
                room: Vec::new(),
                polls: 0,
                doorbells: 0,
            },
            resumed: record.resumed,
            doorbell_qpns: Vec::new(),
        }
    }
}
