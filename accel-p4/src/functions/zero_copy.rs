//! `ZeroCopy`: the data-plane half of switch-initiated copies (zero-sided RDMA).
//!
//! The switch owns two queue pairs per copy: one to the source memnode, on which it
//! issues READs, and one to the target memnode, on which it WRITEs. The central rule:
//! a READ response packet arriving on a copy's source QP is rewritten in flight into a
//! WRITE ONLY on its target QP — the payload is not touched or buffered, only headers
//! change — so data moves memnode → memnode with no CPU at either end.
//!
//! Both PSN spaces advance one per PMTU of the copy, so the rewrite is arithmetic on
//! static table data (`copy_src`): the response at source PSN `src_psn + k` carries the
//! copy's bytes from `k << pmtu_log2`, and leaves at target PSN `dst_psn + k` for
//! address `dst_va + (k << pmtu_log2)`. Reordered, duplicated or re-read responses map
//! to the same target PSN and address every time: the target's responder executes
//! each PSN once and acknowledges duplicates again. Every packet becomes a WRITE ONLY
//! carrying its own RETH (the switch adds the header to middle and last packets), so
//! each one is a whole message and any of them can be re-sent alone.
//!
//! The target's ACKs (`copy_dst`) advance `copy_acked` (packets acknowledged from the
//! copy's first PSN, cumulative) and, like NAKs from either end, are reported to the
//! copy engine as digests ([`CopyDigest`]); the engine (the switch CPU here, the packet
//! generator and recirculation on a Tofino) issues the READs. Copy responses are never
//! forwarded to a client.
//!
//! A copy may be *multicast*: `copy_mcast` names further targets of the slot (replica
//! 1 up, keyed by copy slot and replica). Every converted response then also leaves as
//! one WRITE ONLY per replica, at that target's PSN `dst_psn + k` and address
//! `dst_va + (k << pmtu_log2)` — the same arithmetic on static entry data, so one READ
//! of the source feeds every target, and a re-READ re-sends every replica at the same
//! PSNs and addresses (each target executes each PSN once). Each target's QP has its
//! own `copy_dst` entry and slot, so its ACKs and NAKs are digested apart. On a Tofino
//! the `copy_src` action picks the slot's multicast group and egress rewrites each
//! replica by its replication id (`ZeroCopyReplica` in `p4/common/zero_copy.p4`); the
//! model makes the replicas right after the conversion ([`ZeroCopy::take_replicas`]).

use verbs::wire::{BthRepr, IPV4_DF, Opcode, RethRepr, Syndrome};

use crate::model::{Ctx, Metadata, Packet, Register, RegisterAccess, RouteKey, psn_diff};
use crate::spec::{COPY_REPLICAS, COPY_SLOTS, DIR_UP, PORT_MEMNODE, PSN_VALID, REG_COPY_ACKED};

/// What the data plane tells the copy engine (a P4 digest).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyDigest {
    /// The target acknowledged the copy's packets up to `packets` (cumulative, counted
    /// from the copy's first target PSN).
    Acked {
        /// Copy slot.
        slot: u8,
        /// Packets acknowledged.
        packets: u32,
    },
    /// The target refused the packet `packet` of the copy (a sequence NAK: a packet
    /// before it is missing).
    TargetNak {
        /// Copy slot.
        slot: u8,
        /// Packet index (from the copy's first target PSN).
        packet: u32,
        /// Whether it is a sequence NAK (anything else is an error the copy fails on).
        sequence: bool,
    },
    /// The source refused a READ at source PSN `psn`.
    SourceNak {
        /// Copy slot.
        slot: u8,
        /// The refused READ's source PSN.
        psn: u32,
        /// Whether it is a sequence NAK (an earlier READ was lost).
        sequence: bool,
    },
}

/// The `ZeroCopy` control.
#[derive(Debug)]
pub struct ZeroCopy {
    copy_acked: Register<COPY_SLOTS>,
    digests: Vec<CopyDigest>,
    replicas: Vec<Packet>,
}

impl Default for ZeroCopy {
    fn default() -> ZeroCopy {
        ZeroCopy::new()
    }
}

impl ZeroCopy {
    /// Zeroed registers, no digests.
    pub fn new() -> ZeroCopy {
        ZeroCopy {
            copy_acked: Register::new(&REG_COPY_ACKED),
            digests: Vec::new(),
            replicas: Vec::new(),
        }
    }

    /// The replicas of the last converted response of a multicast copy (one WRITE
    /// ONLY per `copy_mcast` entry of its slot; each a packet of its own, with the
    /// original's packet id — the caller gives each its own).
    pub fn take_replicas(&mut self) -> Vec<Packet> {
        std::mem::take(&mut self.replicas)
    }

    /// Control plane: a copy starts in `slot` (nothing acknowledged yet).
    pub fn init_copy(&mut self, slot: u8) {
        self.copy_acked.cp_write(usize::from(slot), 0);
    }

    /// Control plane: the digests reported since the last call.
    pub fn take_digests(&mut self) -> Vec<CopyDigest> {
        std::mem::take(&mut self.digests)
    }

    /// The registers.
    pub fn registers(&self) -> Vec<&dyn RegisterAccess> {
        vec![&self.copy_acked]
    }

    /// The registers, mutable.
    pub fn registers_mut(&mut self) -> Vec<&mut dyn RegisterAccess> {
        vec![&mut self.copy_acked]
    }

    /// Run on a packet from the memnode port before `Route`. Returns whether the packet
    /// belonged to a copy (then it is converted or consumed, and `Route` must not see
    /// it).
    pub fn apply(&mut self, pkt: &mut Packet, ctx: &mut Ctx<'_>) -> bool {
        if pkt.ingress_port != PORT_MEMNODE {
            return false;
        }
        let key = RouteKey {
            src: pkt.src,
            qpn: pkt.bth.dest_qpn,
        };
        if let Some(action) = ctx.tables.copy_src.lookup(&key).copied() {
            self.convert_response(pkt, ctx, &action);
            return true;
        }
        if let Some(action) = ctx.tables.copy_dst.lookup(&key).copied() {
            self.target_answer(pkt, ctx, action.slot, action.dst_psn);
            return true;
        }
        false
    }

    fn convert_response(
        &mut self,
        pkt: &mut Packet,
        ctx: &mut Ctx<'_>,
        action: &crate::model::CopySrcAction,
    ) {
        let is_response = matches!(
            pkt.bth.opcode,
            Opcode::ReadResponseFirst
                | Opcode::ReadResponseMiddle
                | Opcode::ReadResponseLast
                | Opcode::ReadResponseOnly
        );
        if !is_response {
            if pkt.bth.opcode == Opcode::Acknowledge
                && let Some(aeth) = pkt.aeth
                && let Syndrome::Nak(code) = aeth.syndrome
            {
                ctx.counters.zero_copy.naks += 1;
                self.digests.push(CopyDigest::SourceNak {
                    slot: action.slot,
                    psn: pkt.bth.psn,
                    sequence: code == verbs::wire::NakCode::PsnSequenceError,
                });
            } else {
                ctx.counters.zero_copy.stale += 1;
            }
            pkt.meta.drop = true;
            return;
        }
        let k = psn_diff(pkt.bth.psn, action.src_psn);
        let len = pkt.payload.len() as u64;
        let Ok(k) = u32::try_from(k) else {
            ctx.counters.zero_copy.stale += 1;
            pkt.meta.drop = true;
            return;
        };
        let offset = u64::from(k) << action.pmtu_log2;
        if offset.saturating_add(len) > action.len {
            ctx.counters.zero_copy.stale += 1;
            pkt.meta.drop = true;
            return;
        }
        let mut bth = BthRepr::new(
            Opcode::WriteOnly,
            action.dst_qpn,
            crate::model::psn_add(action.dst_psn, k),
            true,
        );
        bth.pkey = pkt.bth.pkey;
        pkt.bth = bth;
        pkt.reth = Some(RethRepr {
            va: action.dst_va.wrapping_add(offset),
            rkey: action.dst_rkey,
            dma_len: pkt.payload.len() as u32,
        });
        pkt.aeth = None;
        pkt.atomic_ack_eth = None;
        pkt.immdt = None;
        pkt.src = action.src;
        pkt.dst = action.dst;
        pkt.ip_id = 0;
        pkt.ip_flags = IPV4_DF;
        pkt.meta.dir = DIR_UP;
        pkt.meta.egress_port = PORT_MEMNODE;
        pkt.meta.copy = true;
        ctx.counters.zero_copy.converted += 1;
        for r in 1..=COPY_REPLICAS as u8 {
            let Some(rep) = ctx.tables.copy_mcast.lookup(&(action.slot, r)) else {
                break;
            };
            let mut c = pkt.clone();
            let mut bth = BthRepr::new(
                Opcode::WriteOnly,
                rep.dst_qpn,
                crate::model::psn_add(rep.dst_psn, k),
                true,
            );
            bth.pkey = pkt.bth.pkey;
            c.bth = bth;
            c.reth = Some(RethRepr {
                va: rep.dst_va.wrapping_add(offset),
                rkey: rep.dst_rkey,
                dma_len: pkt.payload.len() as u32,
            });
            c.dst = rep.dst;
            // A packet of its own: none of the original's fate (drop, duplicate, delay).
            c.meta = Metadata {
                dir: DIR_UP,
                egress_port: PORT_MEMNODE,
                copy: true,
                ..Metadata::default()
            };
            self.replicas.push(c);
            ctx.counters.zero_copy.converted += 1;
        }
    }

    fn target_answer(&mut self, pkt: &mut Packet, ctx: &mut Ctx<'_>, slot: u8, dst_psn: u32) {
        pkt.meta.drop = true;
        let (Opcode::Acknowledge, Some(aeth)) = (pkt.bth.opcode, pkt.aeth) else {
            ctx.counters.zero_copy.stale += 1;
            return;
        };
        let Ok(k) = u32::try_from(psn_diff(pkt.bth.psn, dst_psn)) else {
            ctx.counters.zero_copy.stale += 1;
            return;
        };
        match aeth.syndrome {
            Syndrome::Ack { .. } => {
                // Cumulative: the ACK of packet k acknowledges every packet up to it.
                let packets = k + 1;
                let acked = self
                    .copy_acked
                    .rmw(pkt.id, u32::from(slot), |old| {
                        let prev = if old & PSN_VALID != 0 {
                            old & !PSN_VALID
                        } else {
                            0
                        };
                        let now = prev.max(packets);
                        (now | PSN_VALID, now)
                    })
                    .unwrap_or(packets);
                ctx.counters.zero_copy.acked += 1;
                self.digests.push(CopyDigest::Acked {
                    slot,
                    packets: acked,
                });
            }
            Syndrome::Nak(code) => {
                ctx.counters.zero_copy.naks += 1;
                self.digests.push(CopyDigest::TargetNak {
                    slot,
                    packet: k,
                    sequence: code == verbs::wire::NakCode::PsnSequenceError,
                });
            }
            Syndrome::RnrNak { .. } => {
                ctx.counters.zero_copy.stale += 1;
            }
        }
    }
}
