//! A multicast lane: the path from one producer ring to *every* consumer ring of an
//! ordered-replication flow. An item is READ once from the producer; the data plane
//! turns each response packet into one WRITE per consumer (`copy_src` for the first
//! target, `copy_mcast` for the others: `functions::zero_copy`).
//!
//! It reuses the queue pairs of the flow's per-pair lanes: the READs go on the
//! producer-side QP of the producer's first lane, and the WRITE to consumer `c` on the
//! consumer-side QP of lane (producer, `c`), whose copy slot digests that consumer's
//! ACKs and NAKs. One item moves at a time. Its READs follow one [`CopyJob`]: the job
//! sees a target's packet as acknowledged when *every* target acknowledged it (the
//! minimum of their cumulative counts), and any target's sequence NAK or a timeout
//! sends it back — the re-READ re-sends every replica at the same PSNs and addresses,
//! which the targets that have them already execute no more and acknowledge again.

use std::collections::VecDeque;

use super::checkpoint::Delivery;
use super::lane::{LANE_PMTU_LOG2, LanePath};
use super::ring::RingLayout;
use crate::copy::{CopyJob, CopyShape, CopyState, ReadTarget, read_request};
use crate::functions::zero_copy::CopyDigest;
use crate::model::{CopyDstAction, CopyReplicaAction, CopySrcAction, Packet, RouteKey, psn_add};

/// The table entries a multicast lane needs for its current item (the control plane
/// installs them, replacing the previous item's, removes the slot's `copy_mcast`
/// entries beyond `replicas`, and zeroes the `copy_acked` of every `dsts` slot).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McastEntry {
    /// `copy_src` key and action (the first target's WRITE).
    pub src: (RouteKey, CopySrcAction),
    /// `copy_mcast` keys and actions of the other targets (replica 1 up).
    pub replicas: Vec<((u8, u8), CopyReplicaAction)>,
    /// Per target: its copy slot, `copy_dst` key and action.
    pub dsts: Vec<(u8, RouteKey, CopyDstAction)>,
}

struct Current {
    group: Vec<Delivery>,
    job: CopyJob,
    read: ReadTarget,
    acked: Vec<u32>,
}

/// One producer's multicast lane.
pub struct McastLane {
    src: LanePath,
    targets: Vec<LanePath>,
    queue: VecDeque<Vec<Delivery>>,
    current: Option<Current>,
    next_src_psn: u32,
    next_dst_psn: Vec<u32>,
    reads: u64,
    rereads: u64,
}

impl std::fmt::Debug for McastLane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McastLane")
            .field("src", &self.src)
            .field("queued", &self.queue.len())
            .field("moving", &self.current.is_some())
            .finish()
    }
}

impl McastLane {
    /// A lane reading from `targets[0]`'s producer-side QP and writing to consumer `c`
    /// on `targets[c]`'s consumer-side QP. `None` without targets.
    pub fn new(targets: Vec<LanePath>) -> Option<McastLane> {
        let src = *targets.first()?;
        Some(McastLane {
            next_src_psn: src.src_psn,
            next_dst_psn: targets.iter().map(|t| t.dst_psn).collect(),
            src,
            targets,
            queue: VecDeque::new(),
            current: None,
            reads: 0,
            rereads: 0,
        })
    }

    /// Whether `copy_slot` is one of its targets' slots.
    pub fn owns_copy_slot(&self, copy_slot: u8) -> bool {
        self.targets.iter().any(|t| t.copy_slot == copy_slot)
    }

    /// Queue an item: its deliveries (one per consumer it goes to, all of one item).
    pub fn push(&mut self, group: Vec<Delivery>) {
        if !group.is_empty() {
            self.queue.push_back(group);
        }
    }

    /// READs issued, of which re-issued (by finished and current items).
    pub fn reads(&self) -> (u64, u64) {
        let (r, rr) = self
            .current
            .as_ref()
            .map(|c| {
                let (r, rr, _) = c.job.reads();
                (r, rr)
            })
            .unwrap_or((0, 0));
        (self.reads + r, self.rereads + rr)
    }

    /// Start the next item if idle (returning the entries to install first), then the
    /// READs to issue now.
    pub fn poll(
        &mut self,
        now_us: u64,
        producers: &[RingLayout],
        consumers: &[RingLayout],
        rto_us: u64,
    ) -> (Option<McastEntry>, Vec<Packet>) {
        let mut entry = None;
        if self.current.is_none()
            && let Some(group) = self.queue.pop_front()
        {
            match self.start(group, now_us, producers, consumers, rto_us) {
                Some((e, c)) => {
                    entry = Some(e);
                    self.current = Some(c);
                }
                None => return (None, Vec::new()),
            }
        }
        let mut out = Vec::new();
        if let Some(c) = self.current.as_mut() {
            for r in c.job.poll(now_us) {
                out.push(read_request(&c.read, r.offset, r.len, r.psn));
            }
        }
        (entry, out)
    }

    fn start(
        &self,
        group: Vec<Delivery>,
        now_us: u64,
        producers: &[RingLayout],
        consumers: &[RingLayout],
        rto_us: u64,
    ) -> Option<(McastEntry, Current)> {
        let first = *group.first()?;
        let p = producers.get(first.producer as usize)?;
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
        let mut src = None;
        let mut replicas = Vec::new();
        let mut dsts = Vec::new();
        for (r, d) in group.iter().enumerate() {
            let c = d.consumer as usize;
            let (ring, path, dst_psn) = (
                consumers.get(c)?,
                self.targets.get(c)?,
                *self.next_dst_psn.get(c)?,
            );
            let (_, dst_key) = path.keys();
            dsts.push((
                path.copy_slot,
                dst_key,
                CopyDstAction {
                    slot: path.copy_slot,
                    dst_psn,
                },
            ));
            if r == 0 {
                src = Some((
                    self.src.keys().0,
                    CopySrcAction {
                        slot: self.src.copy_slot,
                        src_psn: self.next_src_psn,
                        dst_psn,
                        dst_va: ring.slot_va(d.slot),
                        dst_rkey: ring.rkey,
                        src: self.src.switch,
                        dst: path.dst_memnode,
                        dst_qpn: path.dst_memnode_qpn,
                        pmtu_log2: LANE_PMTU_LOG2,
                        len,
                    },
                ));
            } else {
                replicas.push((
                    (self.src.copy_slot, u8::try_from(r).ok()?),
                    CopyReplicaAction {
                        dst_psn,
                        dst_va: ring.slot_va(d.slot),
                        dst_rkey: ring.rkey,
                        dst: path.dst_memnode,
                        dst_qpn: path.dst_memnode_qpn,
                    },
                ));
            }
        }
        let read = ReadTarget {
            switch: self.src.switch,
            memnode: self.src.src_memnode,
            memnode_qpn: self.src.src_memnode_qpn,
            va: p.slot_va(first.item),
            rkey: p.rkey,
        };
        let acked = vec![0; group.len()];
        Some((
            McastEntry {
                src: src?,
                replicas,
                dsts,
            },
            Current {
                group,
                job: CopyJob::new(shape, now_us),
                read,
                acked,
            },
        ))
    }

    /// A digest of one of its copy slots. Returns the item's deliveries when every
    /// target acknowledged it, or the reason when it failed.
    pub fn on_digest(
        &mut self,
        d: &CopyDigest,
        now_us: u64,
    ) -> Option<Result<Vec<Delivery>, String>> {
        let cur = self.current.as_mut()?;
        // The group position of the target whose slot this is.
        let target_of = |slot: u8| {
            cur.group.iter().position(|d| {
                self.targets
                    .get(d.consumer as usize)
                    .is_some_and(|t| t.copy_slot == slot)
            })
        };
        match *d {
            CopyDigest::Acked { slot, packets } => {
                let i = target_of(slot)?;
                if let Some(a) = cur.acked.get_mut(i) {
                    *a = (*a).max(packets);
                }
                let min = cur.acked.iter().copied().min().unwrap_or(0);
                cur.job.on_acked(min, now_us);
            }
            CopyDigest::TargetNak {
                slot,
                packet,
                sequence,
            } => {
                target_of(slot)?;
                cur.job.on_target_nak(packet, sequence, now_us);
            }
            CopyDigest::SourceNak {
                slot,
                psn,
                sequence,
            } => {
                if slot != self.src.copy_slot {
                    return None;
                }
                cur.job.on_source_nak(psn, sequence, now_us);
            }
        }
        match cur.job.state().clone() {
            CopyState::Running => None,
            CopyState::Done => {
                let cur = self.current.take()?;
                let (r, rr, _) = cur.job.reads();
                self.reads += r;
                self.rereads += rr;
                let packets = cur.job.shape().packets();
                self.next_src_psn = psn_add(self.next_src_psn, packets);
                for d in &cur.group {
                    if let Some(n) = self.next_dst_psn.get_mut(d.consumer as usize) {
                        *n = psn_add(*n, packets);
                    }
                }
                Some(Ok(cur.group))
            }
            CopyState::Failed(why) => Some(Err(why)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, SocketAddrV4};

    use super::*;

    fn addr(last: u8) -> SocketAddrV4 {
        SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, last), 4791)
    }

    fn path(c: u8) -> LanePath {
        LanePath {
            copy_slot: c,
            switch: addr(100),
            src_memnode: addr(2),
            src_switch_qpn: 0x100 + 2 * u32::from(c),
            src_memnode_qpn: 0x200 + u32::from(c),
            src_psn: 0xFF_FFFF - u32::from(c),
            dst_memnode: addr(10 + c),
            dst_switch_qpn: 0x101 + 2 * u32::from(c),
            dst_memnode_qpn: 0x300 + u32::from(c),
            dst_psn: 0x1000 * (u32::from(c) + 1),
        }
    }

    fn ring(va: u64) -> RingLayout {
        RingLayout {
            va,
            rkey: 0x77,
            slot_size: 1500,
            slots: 8,
        }
    }

    fn group(item: u64, consumers: &[u32]) -> Vec<Delivery> {
        consumers
            .iter()
            .map(|&c| Delivery {
                producer: 0,
                item,
                consumer: c,
                slot: item + 3,
            })
            .collect()
    }

    fn acked(slot: u8, packets: u32) -> CopyDigest {
        CopyDigest::Acked { slot, packets }
    }

    #[test]
    fn one_read_per_item_and_done_when_every_target_acknowledged() {
        let mut lane = McastLane::new(vec![path(0), path(1), path(2)]).expect("lane");
        let (producers, consumers) = ([ring(0x1000)], [ring(0xA000), ring(0xB000), ring(0xC000)]);
        lane.push(group(0, &[0, 1, 2]));
        lane.push(group(1, &[0, 1, 2]));
        let (entry, reads) = lane.poll(0, &producers, &consumers, 1000);
        let entry = entry.expect("entries for the first item");
        assert_eq!(reads.len(), 1, "one READ for three consumers");
        assert_eq!(entry.src.1.dst_psn, 0x1000);
        assert_eq!(entry.src.1.src_psn, 0xFF_FFFF);
        assert_eq!(entry.replicas.len(), 2);
        assert_eq!(entry.replicas[0].0, (0, 1));
        assert_eq!(entry.replicas[1].1.dst_psn, 0x3000);
        assert_eq!(entry.replicas[1].1.dst_va, consumers[2].slot_va(3));
        assert_eq!(
            entry.dsts.iter().map(|d| d.0).collect::<Vec<_>>(),
            [0, 1, 2]
        );
        // Two packets per item (1500 bytes, PMTU 1024): all three must have both.
        assert_eq!(lane.on_digest(&acked(0, 2), 10), None);
        assert_eq!(lane.on_digest(&acked(2, 2), 10), None);
        assert_eq!(lane.on_digest(&acked(1, 1), 10), None);
        let done = lane.on_digest(&acked(1, 2), 10).expect("done");
        assert_eq!(done, Ok(group(0, &[0, 1, 2])));
        // The next item: PSNs move on by two packets on every QP.
        let (entry, reads) = lane.poll(20, &producers, &consumers, 1000);
        let entry = entry.expect("entries for the second item");
        assert_eq!(reads.len(), 1);
        assert_eq!(entry.src.1.src_psn, 1);
        assert_eq!(entry.src.1.dst_psn, 0x1002);
        assert_eq!(entry.replicas[0].1.dst_psn, 0x2002);
        assert_eq!(entry.dsts[2].2.dst_psn, 0x3002);
        assert_eq!(lane.reads(), (2, 0));
    }

    #[test]
    fn any_targets_loss_re_reads_the_item_for_all() {
        let mut lane = McastLane::new(vec![path(0), path(1)]).expect("lane");
        let (producers, consumers) = ([ring(0x1000)], [ring(0xA000), ring(0xB000)]);
        lane.push(group(0, &[0, 1]));
        let (_, first) = lane.poll(0, &producers, &consumers, 1000);
        assert_eq!(lane.on_digest(&acked(0, 2), 5), None);
        // Target 1 missed packet 0: its sequence NAK of packet 1 sends the READ again,
        // with the same PSN (every replica is re-sent; target 0 acknowledges again).
        let nak = CopyDigest::TargetNak {
            slot: 1,
            packet: 1,
            sequence: true,
        };
        assert_eq!(lane.on_digest(&nak, 6), None);
        let (entry, again) = lane.poll(7, &producers, &consumers, 1000);
        assert_eq!(entry, None);
        assert_eq!(again, first);
        assert_eq!(lane.reads(), (2, 1));
        // A digest of a slot that is not one of the item's targets changes nothing.
        assert_eq!(lane.on_digest(&acked(9, 2), 8), None);
        assert!(lane.on_digest(&acked(1, 2), 9).is_some());
    }

    #[test]
    fn a_subset_of_consumers_after_a_restart() {
        // After a resync only consumer 1 still lacks the item: no replicas, the
        // copy_src entry writes to consumer 1.
        let mut lane = McastLane::new(vec![path(0), path(1)]).expect("lane");
        let (producers, consumers) = ([ring(0x1000)], [ring(0xA000), ring(0xB000)]);
        lane.push(group(4, &[1]));
        let (entry, reads) = lane.poll(0, &producers, &consumers, 1000);
        let entry = entry.expect("entry");
        assert_eq!(reads.len(), 1);
        assert!(entry.replicas.is_empty());
        assert_eq!(entry.src.1.dst, addr(11));
        assert_eq!(entry.src.1.slot, 0, "source NAKs report on the source slot");
        assert_eq!(lane.on_digest(&acked(0, 2), 1), None);
        assert_eq!(lane.on_digest(&acked(1, 2), 1), Some(Ok(group(4, &[1]))));
    }
}
