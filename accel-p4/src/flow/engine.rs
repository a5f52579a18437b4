//! The flows the switch runs: fed with the CPU-bound packets of `flow_punt` and the
//! copy slots' digests, polled for table entries and packets.

use std::collections::BTreeMap;

use super::checkpoint::FlowCheckpoint;
use super::job::{FlowJob, FlowOutput, FlowState};
use super::record::{FlowRequest, FlowStatus};
use crate::copy::CopyQp;
use crate::functions::zero_copy::CopyDigest;
use crate::model::RouteKey;

/// A running flow and what the control plane installed for it.
#[derive(Debug)]
pub struct ActiveFlow {
    /// The flow's id.
    pub id: u64,
    /// What was asked.
    pub request: FlowRequest,
    /// The state machine.
    pub job: FlowJob,
    /// The copy slots its lanes use.
    pub copy_slots: Vec<u8>,
    /// Its `flow_punt` keys (control QPs, then doorbells).
    pub punt_keys: Vec<RouteKey>,
    /// Doorbells: (source address, switch QPN) → producer.
    pub doorbells: Vec<(RouteKey, usize)>,
    /// Its lanes' `copy_src` / `copy_dst` keys.
    pub lane_keys: Vec<(RouteKey, RouteKey)>,
    /// Its queue pairs on the memnodes.
    pub qps: Vec<CopyQp>,
    /// How many times a restarted switch resumed it.
    pub resumed: u32,
    /// The checkpoint last written to the state file.
    pub persisted: FlowCheckpoint,
}

impl ActiveFlow {
    /// Its status.
    pub fn status(&self) -> FlowStatus {
        FlowStatus {
            id: self.id,
            request: self.request.clone(),
            progress: self.job.progress(),
            resumed: self.resumed,
            doorbell_qpns: (0..self.request.producers.len())
                .map(|p| {
                    self.doorbells
                        .iter()
                        .find(|(_, q)| *q == p)
                        .map(|(k, _)| k.qpn)
                })
                .collect(),
        }
    }
}

/// Every flow of the switch.
#[derive(Debug, Default)]
pub struct FlowEngine {
    running: BTreeMap<u64, ActiveFlow>,
    ended: BTreeMap<u64, FlowStatus>,
}

impl FlowEngine {
    /// Start driving `flow`.
    pub fn activate(&mut self, flow: ActiveFlow) {
        self.running.insert(flow.id, flow);
    }

    /// Whether any flow runs.
    pub fn busy(&self) -> bool {
        !self.running.is_empty()
    }

    /// A frame `flow_punt` sent to the CPU: a control answer or a doorbell of some
    /// flow. Returns whether a flow took it.
    pub fn on_cpu_frame(&mut self, frame: &[u8], now_us: u64) -> bool {
        let Some((src, qpn)) = punt_key(frame) else {
            return false;
        };
        for flow in self.running.values_mut() {
            if let Some(i) = flow.job.control_index(src, qpn) {
                flow.job.on_control_frame(i, frame, now_us);
                return true;
            }
            if let Some((_, p)) = flow
                .doorbells
                .iter()
                .find(|(k, _)| k.src == src && k.qpn == qpn)
            {
                flow.job.on_doorbell(*p);
                return true;
            }
        }
        false
    }

    /// The data plane's copy digests (each flow takes those of its lanes).
    pub fn on_digests(&mut self, digests: &[CopyDigest], now_us: u64) {
        for flow in self.running.values_mut() {
            flow.job.on_copy_digests(digests, now_us);
        }
    }

    /// What every flow wants done now, by flow id.
    pub fn poll(&mut self, now_us: u64) -> Vec<(u64, FlowOutput)> {
        self.running
            .values_mut()
            .map(|f| (f.id, f.job.poll(now_us)))
            .collect()
    }

    /// The running flows.
    pub fn running_mut(&mut self) -> impl Iterator<Item = &mut ActiveFlow> {
        self.running.values_mut()
    }

    /// Take the flows that failed out of the engine.
    pub fn take_failed(&mut self) -> Vec<ActiveFlow> {
        let failed: Vec<u64> = self
            .running
            .values()
            .filter(|f| matches!(f.job.state(), FlowState::Failed(_)))
            .map(|f| f.id)
            .collect();
        failed.into_iter().filter_map(|id| self.take(id)).collect()
    }

    /// Take a running flow out of the engine (it is reported as ended from then on).
    pub fn take(&mut self, id: u64) -> Option<ActiveFlow> {
        let flow = self.running.remove(&id)?;
        self.ended.insert(id, flow.status());
        Some(flow)
    }

    /// Remember an ended flow (with its final status).
    pub fn remember(&mut self, status: FlowStatus) {
        self.ended.insert(status.id, status);
    }

    /// One flow's status.
    pub fn status(&self, id: u64) -> Option<FlowStatus> {
        self.running
            .get(&id)
            .map(ActiveFlow::status)
            .or_else(|| self.ended.get(&id).cloned())
    }

    /// Every flow's status, by id.
    pub fn statuses(&self) -> Vec<FlowStatus> {
        let mut v: Vec<FlowStatus> = self
            .running
            .values()
            .map(ActiveFlow::status)
            .chain(self.ended.values().cloned())
            .collect();
        v.sort_by_key(|s| s.id);
        v
    }
}

/// The `flow_punt` key of a frame: its source address and destination QPN.
fn punt_key(frame: &[u8]) -> Option<(std::net::SocketAddrV4, u32)> {
    let sport = u16::from_be_bytes([*frame.get(34)?, *frame.get(35)?]);
    let eth = verbs::wire::EthernetFrame::parse_port(frame, sport).ok()?;
    let repr = verbs::wire::PacketRepr::parse(eth.roce).ok()?;
    Some((eth.src, repr.bth.dest_qpn))
}
