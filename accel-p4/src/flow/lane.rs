//! A lane: the path from one producer ring to one consumer ring through the switch —
//! a queue pair to the producer's memory node (READs), one to the consumer's (the
//! WRITEs made of the READ responses), and one copy slot of the data plane's
//! READ→WRITE rule (`functions::zero_copy`).
//!
//! A lane moves one item at a time. For each item it points its `copy_src` entry at
//! the item: the response PSNs of this item's READ, the next target PSNs, and the
//! consumer slot's address. The item is then an ordinary one-chunk copy
//! ([`crate::copy::CopyJob`]) with its go-back-N on NAKs and timeouts. Responses of an
//! earlier item that arrive late fall before the entry's first PSN and are dropped by
//! the rule, so they can never be written into the new slot.

use std::collections::VecDeque;
use std::net::SocketAddrV4;

use super::checkpoint::Delivery;
use super::ring::RingLayout;
use crate::copy::{CopyJob, CopyShape, CopyState, ReadTarget, read_request};
use crate::functions::zero_copy::CopyDigest;
use crate::model::{CopyDstAction, CopySrcAction, Packet, RouteKey, psn_add};

/// log2 of the path MTU every lane uses.
pub const LANE_PMTU_LOG2: u8 = 10;

/// Where a lane's queue pairs run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LanePath {
    /// The data plane's copy slot it uses.
    pub copy_slot: u8,
    /// The switch's memnode-side address.
    pub switch: SocketAddrV4,
    /// The producer's memory node.
    pub src_memnode: SocketAddrV4,
    /// The switch's QPN of the producer-side queue pair.
    pub src_switch_qpn: u32,
    /// The producer memnode's QPN of it.
    pub src_memnode_qpn: u32,
    /// Its first PSN.
    pub src_psn: u32,
    /// The consumer's memory node.
    pub dst_memnode: SocketAddrV4,
    /// The switch's QPN of the consumer-side queue pair.
    pub dst_switch_qpn: u32,
    /// The consumer memnode's QPN of it.
    pub dst_memnode_qpn: u32,
    /// Its first PSN.
    pub dst_psn: u32,
}

impl LanePath {
    /// The `copy_src` and `copy_dst` keys of the lane.
    pub fn keys(&self) -> (RouteKey, RouteKey) {
        (
            RouteKey {
                src: self.src_memnode,
                qpn: self.src_switch_qpn,
            },
            RouteKey {
                src: self.dst_memnode,
                qpn: self.dst_switch_qpn,
            },
        )
    }
}

/// The table entries a lane needs for its current item (the control plane installs
/// them, replacing the previous item's, and zeroes the slot's `copy_acked`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaneEntry {
    /// The copy slot.
    pub copy_slot: u8,
    /// `copy_src` key and action.
    pub src: (RouteKey, CopySrcAction),
    /// `copy_dst` key and action.
    pub dst: (RouteKey, CopyDstAction),
}

/// One lane.
#[derive(Debug)]
pub struct Lane {
    path: LanePath,
    queue: VecDeque<Delivery>,
    current: Option<(Delivery, CopyJob, ReadTarget)>,
    next_src_psn: u32,
    next_dst_psn: u32,
    reads: u64,
    rereads: u64,
}

impl Lane {
    /// A lane with nothing to move.
    pub fn new(path: LanePath) -> Lane {
        Lane {
            next_src_psn: path.src_psn,
            next_dst_psn: path.dst_psn,
            path,
            queue: VecDeque::new(),
            current: None,
            reads: 0,
            rereads: 0,
        }
    }

    /// The path.
    pub fn path(&self) -> &LanePath {
        &self.path
    }

    /// Queue a move.
    pub fn push(&mut self, d: Delivery) {
        self.queue.push_back(d);
    }

    /// READs issued, of which re-issued (by finished and current items).
    pub fn reads(&self) -> (u64, u64) {
        let (r, rr) = self
            .current
            .as_ref()
            .map(|(_, j, _)| {
                let (r, rr, _) = j.reads();
                (r, rr)
            })
            .unwrap_or((0, 0));
        (self.reads + r, self.rereads + rr)
    }

    /// Start the next item if idle (returning the entries to install first), then
    /// the READs to issue now.
    pub fn poll(
        &mut self,
        now_us: u64,
        producers: &[RingLayout],
        consumers: &[RingLayout],
        rto_us: u64,
    ) -> (Option<LaneEntry>, Vec<Packet>) {
        let mut entry = None;
        if self.current.is_none()
            && let Some(d) = self.queue.pop_front()
        {
            let (Some(p), Some(c)) = (
                producers.get(d.producer as usize),
                consumers.get(d.consumer as usize),
            ) else {
                return (None, Vec::new());
            };
            let len = u64::from(p.slot_size);
            let packets = len.div_ceil(1 << LANE_PMTU_LOG2) as u32;
            let shape = CopyShape {
                len,
                pmtu_log2: LANE_PMTU_LOG2,
                chunk_packets: packets,
                window: 1,
                src_psn: self.next_src_psn,
                rto_us,
            };
            let (src_key, dst_key) = self.path.keys();
            entry = Some(LaneEntry {
                copy_slot: self.path.copy_slot,
                src: (
                    src_key,
                    CopySrcAction {
                        slot: self.path.copy_slot,
                        src_psn: self.next_src_psn,
                        dst_psn: self.next_dst_psn,
                        dst_va: c.slot_va(d.slot),
                        dst_rkey: c.rkey,
                        src: self.path.switch,
                        dst: self.path.dst_memnode,
                        dst_qpn: self.path.dst_memnode_qpn,
                        pmtu_log2: LANE_PMTU_LOG2,
                        len,
                    },
                ),
                dst: (
                    dst_key,
                    CopyDstAction {
                        slot: self.path.copy_slot,
                        dst_psn: self.next_dst_psn,
                    },
                ),
            });
            let reads = ReadTarget {
                switch: self.path.switch,
                memnode: self.path.src_memnode,
                memnode_qpn: self.path.src_memnode_qpn,
                va: p.slot_va(d.item),
                rkey: p.rkey,
            };
            self.current = Some((d, CopyJob::new(shape, now_us), reads));
        }
        let mut out = Vec::new();
        if let Some((_, job, reads)) = self.current.as_mut() {
            for r in job.poll(now_us) {
                out.push(read_request(reads, r.offset, r.len, r.psn));
            }
        }
        (entry, out)
    }

    /// A digest of this lane's copy slot. Returns the delivery when its move is
    /// acknowledged, or the reason when it failed.
    pub fn on_digest(&mut self, d: &CopyDigest, now_us: u64) -> Option<Result<Delivery, String>> {
        let (_, job, _) = self.current.as_mut()?;
        match *d {
            CopyDigest::Acked { packets, .. } => job.on_acked(packets, now_us),
            CopyDigest::TargetNak {
                packet, sequence, ..
            } => job.on_target_nak(packet, sequence, now_us),
            CopyDigest::SourceNak { psn, sequence, .. } => job.on_source_nak(psn, sequence, now_us),
        }
        let state = job.state().clone();
        match state {
            CopyState::Running => None,
            CopyState::Done => {
                let (delivery, job, _) = self.current.take()?;
                let (r, rr, _) = job.reads();
                self.reads += r;
                self.rereads += rr;
                let packets = job.shape().packets();
                self.next_src_psn = psn_add(self.next_src_psn, packets);
                self.next_dst_psn = psn_add(self.next_dst_psn, packets);
                Some(Ok(delivery))
            }
            CopyState::Failed(why) => Some(Err(why)),
        }
    }
}
