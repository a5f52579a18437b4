//! The copy engine: the running copies by slot, fed with the data plane's digests and
//! polled for the READs to issue (the switch CPU plays the role of a Tofino's packet
//! generator and recirculation loop here).

use std::collections::BTreeMap;

use super::job::{CopyJob, CopyState};
use super::read_request::{ReadTarget, read_request};
use super::request::{CopyQp, CopyRequest};
use crate::functions::zero_copy::CopyDigest;
use crate::model::{Packet, RouteKey};
use crate::spec::COPY_SLOTS;

/// A running copy: its job, where its READs go, and the offset it resumed from.
#[derive(Debug, Clone)]
pub struct ActiveCopy {
    /// The copy's id.
    pub id: u64,
    /// What was asked.
    pub request: CopyRequest,
    /// The state machine (over the bytes from `resumed_from` on).
    pub job: CopyJob,
    /// Where its READs go (addresses already advanced by `resumed_from`).
    pub reads: ReadTarget,
    /// Bytes done before this incarnation (a restarted switch's checkpoint).
    pub resumed_from: u64,
    /// How many times a restarted switch resumed it.
    pub resumed: u32,
    /// Its `copy_src` and `copy_dst` table keys.
    pub keys: (RouteKey, RouteKey),
    /// Its queue pairs on the memnodes.
    pub qps: Vec<CopyQp>,
}

pub use dmkv_api::switch_copy::CopyStatus;

/// The status of a copy that is not running in this incarnation (finished, failed,
/// or not resumed), from its record, in state `state`.
pub fn status_at_rest(record: &crate::copy::request::CopyRecord, state: CopyState) -> CopyStatus {
    CopyStatus {
        id: record.id,
        request: record.request.clone(),
        state,
        bytes_done: record.checkpoint,
        reads: 0,
        rereads: 0,
        go_backs: 0,
        resumed: record.resumed,
        resumed_from: record.checkpoint,
    }
}

impl ActiveCopy {
    /// Its progress.
    pub fn status(&self) -> CopyStatus {
        let (reads, rereads, go_backs) = self.job.reads();
        let state = self.job.state().clone();
        CopyStatus {
            id: self.id,
            request: self.request.clone(),
            bytes_done: if state == CopyState::Done {
                self.request.len
            } else {
                self.resumed_from + self.job.bytes_done()
            },
            state,
            reads,
            rereads,
            go_backs,
            resumed: self.resumed,
            resumed_from: self.resumed_from,
        }
    }
}

/// Every copy the switch drives, by slot.
#[derive(Debug, Default)]
pub struct CopyEngine {
    slots: BTreeMap<u8, Option<ActiveCopy>>,
    finished: BTreeMap<u64, CopyStatus>,
}

impl CopyEngine {
    /// Take a free slot (its copy is installed with [`CopyEngine::activate`]).
    pub fn reserve(&mut self) -> Option<u8> {
        let slot = (0..COPY_SLOTS as u8).find(|s| !self.slots.contains_key(s))?;
        self.slots.insert(slot, None);
        Some(slot)
    }

    /// Give a reserved slot back without running a copy in it.
    pub fn release(&mut self, slot: u8) {
        self.slots.remove(&slot);
    }

    /// Start driving `copy` in `slot`.
    pub fn activate(&mut self, slot: u8, copy: ActiveCopy) {
        self.slots.insert(slot, Some(copy));
    }

    /// Feed the data plane's digests.
    pub fn on_digests(&mut self, digests: &[CopyDigest], now_us: u64) {
        for d in digests {
            let slot = match d {
                CopyDigest::Acked { slot, .. }
                | CopyDigest::TargetNak { slot, .. }
                | CopyDigest::SourceNak { slot, .. } => *slot,
            };
            let Some(Some(copy)) = self.slots.get_mut(&slot) else {
                continue;
            };
            match *d {
                CopyDigest::Acked { packets, .. } => copy.job.on_acked(packets, now_us),
                CopyDigest::TargetNak {
                    packet, sequence, ..
                } => copy.job.on_target_nak(packet, sequence, now_us),
                CopyDigest::SourceNak { psn, sequence, .. } => {
                    copy.job.on_source_nak(psn, sequence, now_us)
                }
            }
        }
    }

    /// The READs to issue now.
    pub fn poll(&mut self, now_us: u64) -> Vec<Packet> {
        let mut out = Vec::new();
        for copy in self.slots.values_mut().flatten() {
            for r in copy.job.poll(now_us) {
                out.push(read_request(&copy.reads, r.offset, r.len, r.psn));
            }
        }
        out
    }

    /// Take the copies that ended (done or failed) out of their slots; they are
    /// reported from then on by [`CopyEngine::status`].
    pub fn take_ended(&mut self) -> Vec<(u8, ActiveCopy)> {
        let ended: Vec<u8> = self
            .slots
            .iter()
            .filter(|(_, c)| {
                c.as_ref()
                    .is_some_and(|c| *c.job.state() != CopyState::Running)
            })
            .map(|(s, _)| *s)
            .collect();
        let mut out = Vec::new();
        for slot in ended {
            if let Some(Some(copy)) = self.slots.remove(&slot) {
                self.finished.insert(copy.id, copy.status());
                out.push((slot, copy));
            }
        }
        out
    }

    /// Remember an ended copy (one the state file says ended before a restart).
    pub fn remember(&mut self, status: CopyStatus) {
        self.finished.insert(status.id, status);
    }

    /// One copy's progress.
    pub fn status(&self, id: u64) -> Option<CopyStatus> {
        self.slots
            .values()
            .flatten()
            .find(|c| c.id == id)
            .map(ActiveCopy::status)
            .or_else(|| self.finished.get(&id).cloned())
    }

    /// Every copy's progress, by id.
    pub fn statuses(&self) -> Vec<CopyStatus> {
        let mut v: Vec<CopyStatus> = self
            .slots
            .values()
            .flatten()
            .map(ActiveCopy::status)
            .chain(self.finished.values().cloned())
            .collect();
        v.sort_by_key(|s| s.id);
        v
    }

    /// Whether any copy is running (the switch drives the engine on a timer then).
    pub fn busy(&self) -> bool {
        self.slots.values().any(Option::is_some)
    }
}
