//! Zero-sided flows on the control plane: queue pairs on the rings' memory nodes, the
//! tables of their lanes and control QPs, write-ahead checkpoints in the state file,
//! and the restart rule (see `flow::checkpoint`).

use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

use dmkv_api::memnode::CreateQpRequest;
use dmkv_api::memnode_admin;

use super::{Control, ControlError, lock, memnode_data_addr};
use crate::copy::CopyQp;
use crate::flow::job::FlowState;
use crate::flow::{
    ActiveFlow, ControlPath, FlowCheckpoint, FlowJob, FlowRecord, FlowRequest, FlowStatus, LanePath,
};
use crate::functions::zero_copy::CopyDigest;
use crate::model::{Emitted, FlowPuntAction, RouteKey};

/// Path MTU of the switch's flow queue pairs.
const FLOW_PMTU: u32 = 1024;

/// A QPN and PSN for the switch's queue pair number `index` of flow `id`, fresh for
/// this incarnation (stray answers to an earlier one never match).
fn flow_qpn_psn(id: u64, index: u32) -> (u32, u32) {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() ^ (d.as_secs() as u32).rotate_left(13))
        .unwrap_or(11);
    let qpn = 0x00F0_0000 | (((id as u32) & 0xF) << 16) | ((nanos & 0x3F) << 10) | (index & 0x3FF);
    let psn = (nanos.rotate_right(7) ^ (index << 12)) & verbs::wire::PSN_MASK;
    (qpn, psn)
}

/// The instant the pipeline clock counts from.
fn clock_epoch() -> Instant {
    let now = crate::switch::clock_us();
    let at = Instant::now();
    at.checked_sub(Duration::from_micros(now)).unwrap_or(at)
}

impl Control {
    /// Start a flow (blocking: creates the switch's queue pairs on the rings' memory
    /// nodes over HTTP).
    pub fn start_flow(&self, req: &FlowRequest) -> Result<FlowStatus, ControlError> {
        req.shape().map_err(ControlError::Invalid)?;
        let id = {
            let state = lock(&self.state);
            let mut last = lock(&self.last_flow_id);
            *last = (*last).max(state.flows.iter().map(|f| f.id).max().unwrap_or(0)) + 1;
            *last
        };
        self.run_flow(id, req, None, 0)
    }

    /// Resume the flows a state file says were running (after a restart; blocking):
    /// their old queue pairs are deleted and they continue from their checkpoints on
    /// fresh ones. A flow that cannot be resumed is marked failed.
    pub fn resume_flows(&self) {
        let records = lock(&self.state).flows.clone();
        for r in records {
            if r.state != FlowState::Running && r.state != FlowState::Syncing {
                lock(&self.flows).remember(FlowStatus::at_rest(&r));
                continue;
            }
            for qp in &r.qps {
                let _ =
                    memnode_admin::delete_qp_as(&qp.memnode, self.memnode_token.as_deref(), qp.qpn);
            }
            if let Err(e) =
                self.run_flow(r.id, &r.request, Some(r.checkpoint.clone()), r.resumed + 1)
            {
                tracing::warn!(flow = r.id, error = %e, "flow not resumed");
                let failed = FlowState::Failed(format!("not resumed after a restart: {e}"));
                let mut state = lock(&self.state);
                if let Some(rec) = state.flows.iter_mut().find(|f| f.id == r.id) {
                    rec.state = failed.clone();
                    rec.qps.clear();
                }
                let _ = self.persist(&state);
                drop(state);
                let mut rec = r.clone();
                rec.state = failed;
                lock(&self.flows).remember(FlowStatus::at_rest(&rec));
            }
        }
    }

    fn run_flow(
        &self,
        id: u64,
        req: &FlowRequest,
        checkpoint: Option<FlowCheckpoint>,
        resumed: u32,
    ) -> Result<FlowStatus, ControlError> {
        let shape = req.shape().map_err(ControlError::Invalid)?;
        let (n, m) = (req.producers.len(), req.consumers.len());
        // One copy slot per lane.
        let mut slots = Vec::new();
        {
            let mut copies = lock(&self.copies);
            for _ in 0..n * m {
                match copies.reserve() {
                    Some(s) => slots.push(s),
                    None => {
                        for s in &slots {
                            copies.release(*s);
                        }
                        return Err(ControlError::Conflict(format!(
                            "a flow of {n} producers and {m} consumers needs {} copy slots; not enough are free",
                            n * m
                        )));
                    }
                }
            }
        }
        let mut created = Vec::new();
        let result = self.install_flow(id, req, shape, checkpoint, resumed, &slots, &mut created);
        if result.is_err() {
            let mut copies = lock(&self.copies);
            for s in &slots {
                copies.release(*s);
            }
            drop(copies);
            for qp in &created {
                let _ =
                    memnode_admin::delete_qp_as(&qp.memnode, self.memnode_token.as_deref(), qp.qpn);
            }
        }
        result
    }

    #[allow(clippy::too_many_arguments)]
    fn install_flow(
        &self,
        id: u64,
        req: &FlowRequest,
        shape: crate::flow::FlowShape,
        checkpoint: Option<FlowCheckpoint>,
        resumed: u32,
        slots: &[u8],
        created: &mut Vec<CopyQp>,
    ) -> Result<FlowStatus, ControlError> {
        let token = self.memnode_token.as_deref();
        let mut index = 0u32;
        let mut qp = |memnode: &str| -> Result<(SocketAddrV4, u32, u32, u32), ControlError> {
            let addr = memnode_data_addr(memnode, token)?;
            let (switch_qpn, psn) = flow_qpn_psn(id, index);
            index += 1;
            let resp = memnode_admin::create_qp_as(
                memnode,
                token,
                &CreateQpRequest {
                    qpn: switch_qpn,
                    psn,
                    addr: self.memnode_side,
                    pmtu: FLOW_PMTU,
                    server_addr: Some(addr),
                    coalesce: false,
                },
            )
            .map_err(|e| ControlError::Memnode(e.to_string()))?;
            created.push(CopyQp {
                memnode: memnode.to_owned(),
                qpn: resp.qpn,
            });
            Ok((resp.addr, resp.qpn, switch_qpn, psn))
        };
        let mut control = Vec::new();
        for ring in req.producers.iter().chain(&req.consumers) {
            let (addr, memnode_qpn, switch_qpn, psn) = qp(&ring.memnode)?;
            control.push(ControlPath {
                switch: self.memnode_side,
                memnode: addr,
                switch_qpn,
                memnode_qpn,
                psn,
            });
        }
        let mut lanes = Vec::new();
        for p in &req.producers {
            for c in &req.consumers {
                let (src, src_qpn, src_switch_qpn, src_psn) = qp(&p.memnode)?;
                let (dst, dst_qpn, dst_switch_qpn, dst_psn) = qp(&c.memnode)?;
                let copy_slot = slots
                    .get(lanes.len())
                    .copied()
                    .ok_or_else(|| ControlError::Conflict("a lane has no copy slot".into()))?;
                lanes.push(LanePath {
                    copy_slot,
                    switch: self.memnode_side,
                    src_memnode: src,
                    src_switch_qpn,
                    src_memnode_qpn: src_qpn,
                    src_psn,
                    dst_memnode: dst,
                    dst_switch_qpn,
                    dst_memnode_qpn: dst_qpn,
                    dst_psn,
                });
            }
        }
        let mut punt_keys: Vec<RouteKey> = control
            .iter()
            .map(|c| RouteKey {
                src: c.memnode,
                qpn: c.switch_qpn,
            })
            .collect();
        let mut doorbells = Vec::new();
        for (p, ring) in req.producers.iter().enumerate() {
            if let Some(from) = ring.doorbell_from {
                let (qpn, _) = flow_qpn_psn(id, 0x300 + p as u32);
                let key = RouteKey { src: from, qpn };
                punt_keys.push(key);
                doorbells.push((key, p));
            }
        }
        let lane_keys = lanes.iter().map(LanePath::keys).collect();
        let job = FlowJob::new(shape, control, lanes, checkpoint, clock_epoch())
            .map_err(ControlError::Invalid)?;
        {
            let mut p = self.pipeline();
            for (i, key) in punt_keys.iter().enumerate() {
                if let Err(e) = p.tables.flow_punt.insert(
                    *key,
                    FlowPuntAction {
                        ring: u16::try_from(i).unwrap_or(u16::MAX),
                    },
                ) {
                    for k in &punt_keys {
                        p.tables.flow_punt.remove(k);
                    }
                    return Err(e.into());
                }
            }
        }
        let persisted = job.checkpoint();
        let flow = ActiveFlow {
            id,
            request: req.clone(),
            job,
            copy_slots: slots.to_vec(),
            punt_keys,
            doorbells,
            lane_keys,
            qps: created.clone(),
            resumed,
            persisted: persisted.clone(),
        };
        let status = flow.status();
        lock(&self.flows).activate(flow);
        let mut state = lock(&self.state);
        let record = FlowRecord {
            id,
            request: req.clone(),
            checkpoint: persisted,
            state: FlowState::Running,
            qps: created.clone(),
            resumed,
        };
        match state.flows.iter_mut().find(|f| f.id == id) {
            Some(r) => *r = record,
            None => state.flows.push(record),
        }
        self.persist(&state)?;
        tracing::info!(
            flow = id,
            producers = req.producers.len(),
            consumers = req.consumers.len(),
            "flow started"
        );
        Ok(status)
    }

    /// One flow's status.
    pub fn flow_status(&self, id: u64) -> Option<FlowStatus> {
        lock(&self.flows).status(id)
    }

    /// Every flow's status.
    pub fn flow_statuses(&self) -> Vec<FlowStatus> {
        lock(&self.flows).statuses()
    }

    /// Stop a running flow: its tables go, its queue pairs are deleted (blocking), and
    /// it is remembered as stopped. Items already published stay where they are; items
    /// decided but not yet published are not delivered.
    pub fn stop_flow(&self, id: u64) -> Result<FlowStatus, ControlError> {
        let flow = lock(&self.flows)
            .take(id)
            .ok_or_else(|| ControlError::Conflict(format!("flow {id} is not running")))?;
        self.retire_flow(&flow, FlowState::Stopped);
        for qp in &flow.qps {
            let _ = memnode_admin::delete_qp_as(&qp.memnode, self.memnode_token.as_deref(), qp.qpn);
        }
        let mut status = flow.status();
        status.progress.state = FlowState::Stopped;
        lock(&self.flows).remember(status.clone());
        Ok(status)
    }

    fn retire_flow(&self, flow: &ActiveFlow, state_now: FlowState) {
        {
            let mut p = self.pipeline();
            for k in &flow.punt_keys {
                p.tables.flow_punt.remove(k);
            }
            for (s, d) in &flow.lane_keys {
                p.tables.copy_src.remove(s);
                p.tables.copy_dst.remove(d);
            }
            for s in &flow.copy_slots {
                for r in 1..=crate::spec::COPY_REPLICAS as u8 {
                    p.tables.copy_mcast.remove(&(*s, r));
                }
            }
        }
        {
            let mut copies = lock(&self.copies);
            for s in &flow.copy_slots {
                copies.release(*s);
            }
        }
        let mut state = lock(&self.state);
        if let Some(r) = state.flows.iter_mut().find(|r| r.id == flow.id) {
            r.state = state_now;
            r.checkpoint = flow.job.checkpoint();
            r.qps.clear();
        }
        if let Err(e) = self.persist(&state) {
            tracing::warn!(error = %e, "flow state not written to the state file");
        }
    }

    /// A frame the pipeline sent to the CPU port: a flow's control answer or doorbell.
    /// Returns whether a flow took it.
    pub fn take_cpu_frame(&self, frame: &[u8]) -> bool {
        let mut flows = lock(&self.flows);
        if !flows.busy() {
            return false;
        }
        flows.on_cpu_frame(frame, crate::switch::clock_us())
    }

    /// Drive the running flows with the copy slots' digests: install the entries of
    /// items starting now, write the checkpoints that changed to the state file
    /// *before* the packets acting on them leave (write-ahead), and return the
    /// packets.
    pub(super) fn drive_flows(&self, digests: &[CopyDigest]) -> Vec<Emitted> {
        let now = crate::switch::clock_us();
        let mut out = Vec::new();
        let mut flows = lock(&self.flows);
        if !flows.busy() {
            return out;
        }
        flows.on_digests(digests, now);
        let outputs = flows.poll(now);
        let changed: Vec<(u64, FlowCheckpoint)> = flows
            .running_mut()
            .filter_map(|f| {
                let ckpt = f.job.checkpoint();
                (ckpt != f.persisted).then_some((f.id, ckpt))
            })
            .collect();
        let mut written = true;
        if !changed.is_empty() {
            let mut state = lock(&self.state);
            for (id, ckpt) in &changed {
                if let Some(r) = state.flows.iter_mut().find(|r| r.id == *id) {
                    r.checkpoint = ckpt.clone();
                }
            }
            if let Err(e) = self.persist(&state) {
                // Without the write-ahead record nothing may leave: the packets of
                // this round are dropped (the queue pairs send them again later, after
                // another attempt to write the record).
                tracing::warn!(error = %e, "flow checkpoint not written; its moves wait");
                written = false;
            }
            drop(state);
            if written {
                for flow in flows.running_mut() {
                    if let Some((_, ckpt)) = changed.iter().find(|(id, _)| *id == flow.id) {
                        flow.persisted = ckpt.clone();
                    }
                }
            }
        }
        {
            let mut p = self.pipeline();
            for (_, output) in outputs {
                // Table entries are the switch's own state: installed either way.
                for entry in output.entries {
                    let _ = p.tables.copy_src.insert(entry.src.0, entry.src.1);
                    let _ = p.tables.copy_dst.insert(entry.dst.0, entry.dst.1);
                    p.init_copy(entry.copy_slot);
                }
                for entry in output.mcast_entries {
                    let slot = entry.src.1.slot;
                    let _ = p.tables.copy_src.insert(entry.src.0, entry.src.1);
                    for r in 1..=crate::spec::COPY_REPLICAS as u8 {
                        p.tables.copy_mcast.remove(&(slot, r));
                    }
                    for (k, a) in entry.replicas {
                        let _ = p.tables.copy_mcast.insert(k, a);
                    }
                    for (dst_slot, k, a) in entry.dsts {
                        let _ = p.tables.copy_dst.insert(k, a);
                        p.init_copy(dst_slot);
                    }
                }
                if written {
                    for pkt in output.packets {
                        out.extend(p.generate(pkt));
                    }
                }
            }
        }
        let failed = flows.take_failed();
        drop(flows);
        for flow in failed {
            tracing::warn!(flow = flow.id, state = ?flow.job.state(), "flow failed");
            self.retire_flow(&flow, flow.job.state().clone());
            let token = self.memnode_token.clone();
            let qps = flow.qps.clone();
            let _ = std::thread::Builder::new()
                .name("accel-p4-flow-cleanup".into())
                .spawn(move || {
                    for qp in qps {
                        let _ = memnode_admin::delete_qp_as(&qp.memnode, token.as_deref(), qp.qpn);
                    }
                });
        }
        out
    }
}
