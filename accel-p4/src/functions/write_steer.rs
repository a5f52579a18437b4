//! `WriteSteer`: Clover write steering (SwordBox §4.4.2); it fills and owns the
//! [`SteerCache`] (the committed tail of every tracked key) that both steering functions
//! use.
//!
//! A Clover write is a node WRITE whose length is the node's size class (the chain id
//! at node offset 8, the header word at 0, the version at 24) followed on the same
//! connection by a CAS on the predecessor's header word (compare: that header with no
//! successor; swap: the same plus the link). For a tracked key (`steer_keys`, chain id →
//! slot) and a tracked class (`steer_classes`):
//!
//! | packet | what happens | registers |
//! |---|---|---|
//! | node WRITE, first transmission | remembered for the connection (`steer_pend*`); with `write_steer`, if the writer's version is behind the committed tail's, the node's version is rewritten to the tail's + 1 (*versioned*) | `steer_epsn`, `steer_pend*`, `steer_tail_va`, `steer_tail_ver` |
//! | the CAS right after it (PSN + 1) | with `write_steer`, when the committed tail is elsewhere and the node's version is the tail's + 1: address, compare and swap redirected to the tail (*steered*), else unchanged (*missed*); remembered by PSN for its ACK | `steer_pend*`, `steer_tail_*`, `steer_cas*` |
//! | its ATOMIC ACK | success (original = compare as sent) commits the node as the key's tail; a steered CAS's original value is replaced by a marker (*converted*) | `steer_cas*`, `steer_tail_*` |
//!
//! A CAS is only steered to a tail whose tombstone flag is the one the writer
//! compared against: the writer checked its condition (insert: absent; update,
//! delete: present) on the node it read, and linking after a tail of the same
//! liveness keeps that decision true at the moment the CAS executes.
//!
//! The cache only holds *committed* tails (their link CAS succeeded at the memnode), so
//! a CAS is only ever steered to a node that is complete and linked.
//!
//! **What the client sees.** A steered CAS's ACK carries, instead of the raw original
//! value, one of two markers that no real header has (no successor flag, non-zero
//! successor fields): on success `own generation of the tail | tail VA >> 6` (the client
//! learns where its node was linked), on failure [`MARK_STEER_FAILED`] (the node is not
//! linked; the client locates the tail again and retries). A client that receives the
//! raw value of a steered CAS (its record was lost: ring slot reused, switch restarted)
//! sees a header without successor that differs from its compare, and must treat the
//! outcome as unknown; the switch never steers when the tail's header equals the
//! client's compare, so a raw success is never mistaken for the client's own.
//!
//! **Retransmissions** are never steered: the switch acts only on a connection's
//! packets in PSN order (`steer_epsn`); a retransmitted CAS passes unchanged (it goes to
//! the writer's own, stale, predecessor and fails there). A retransmitted node WRITE
//! is made to agree with its CAS: before the CAS went by, the pending record is
//! dropped (the CAS will not be steered); after a steered CAS, the copy gets the
//! version the first transmission was given (the memnode executes whichever copy
//! arrives first, and a steered CAS delivered late must find the version it links).
//! After a restart the switch does not act for a quiet period, so that packets sent
//! before the restart and retransmitted after it are never taken for first
//! transmissions.

use verbs::wire::{Opcode, PSN_MASK};

use crate::functions::steer_cache::{SteerCache, Tail, version_after};
use crate::model::{Ctx, Packet, PairRegister, Register, RegisterAccess, join, psn_add, split};
use crate::spec::{
    self, CLOVER_CHAIN_ID_AT, CLOVER_HAS_SUCCESSOR, CLOVER_SUCCESSOR_FIELDS, CLOVER_TOMBSTONE,
    CLOVER_VERSION_AT, DIR_UP, MAX_CONNS, PSN_VALID, REG_STEER_CAS, REG_STEER_CAS_CMP,
    REG_STEER_CAS_NODE_HDR, REG_STEER_CAS_NODE_VA, REG_STEER_CAS_NODE_VER, REG_STEER_CAS_TGT,
    REG_STEER_EPSN, REG_STEER_PEND, REG_STEER_PEND_HDR_HI, REG_STEER_PEND_NODE, REG_STEER_PEND_VA,
    STEER_CONN_SLOTS, STEER_RING,
};

// The write-cache tag and its hash cell live with the cache; the vector tests name them
// here.
pub use crate::functions::steer_cache::{addr_cell, addr_tag};

/// `steer_cas` lo: the CAS was redirected.
const CAS_STEERED: u32 = 1 << 25;
/// `steer_cas` lo: its ACK went by.
const CAS_ANSWERED: u32 = 1 << 26;
/// Own-generation bits of a Clover header word.
pub const OWN_GEN_FIELD: u64 = 0xFFFF << 46;
/// The original value a client receives when its steered link CAS failed: tombstone
/// flag without successor flag and successor field 1 — not a header any node has.
pub const MARK_STEER_FAILED: u64 = CLOVER_TOMBSTONE | 1;

/// The original value a client receives when its steered link CAS succeeded: the
/// tail's own generation and the tail's address / 64 (non-zero) in the successor
/// fields, no successor flag.
pub fn steered_success(tail_hdr: u64, tail_va: u64) -> u64 {
    (tail_hdr & OWN_GEN_FIELD) | (tail_va >> 6)
}

/// Put `ver` in the version field of the node a WRITE carries; whether it changed.
fn set_node_version(pkt: &mut Packet, ver: u32) -> bool {
    let new = ver.to_le_bytes();
    match pkt
        .payload
        .get_mut(CLOVER_VERSION_AT..CLOVER_VERSION_AT + 4)
    {
        Some(field) if field != new => {
            field.copy_from_slice(&new);
            true
        }
        _ => false,
    }
}

fn le_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn le_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// What `WriteSteer` tells `ReadSteer` about the packet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SteerInfo {
    /// A request on its connection's next expected PSN, outside the quiet period.
    pub in_order: bool,
    /// A tracked node WRITE: key slot, node address, node version (as sent).
    pub write: Option<(u32, u64, u32)>,
}

/// The `WriteSteer` control (with the `SteerCache` it shares with `ReadSteer`).
#[derive(Debug, Clone)]
pub struct WriteSteer {
    epsn: Register<MAX_CONNS>,
    pend: PairRegister<MAX_CONNS>,
    pend_va: PairRegister<MAX_CONNS>,
    pend_node: PairRegister<MAX_CONNS>,
    pend_hdr_hi: Register<MAX_CONNS>,
    /// The committed tails.
    pub cache: SteerCache,
    cas: PairRegister<STEER_CONN_SLOTS>,
    cas_cmp: PairRegister<STEER_CONN_SLOTS>,
    cas_tgt: PairRegister<STEER_CONN_SLOTS>,
    cas_node_va: PairRegister<STEER_CONN_SLOTS>,
    cas_node_hdr: PairRegister<STEER_CONN_SLOTS>,
    cas_node_ver: Register<STEER_CONN_SLOTS>,
    /// Nothing is rewritten before this time (µs of the pipeline clock).
    quiet_until_us: u64,
}

impl Default for WriteSteer {
    fn default() -> Self {
        WriteSteer::new()
    }
}

/// Ring cell of (`conn`, `psn`).
pub fn ring_slot(conn: u8, psn: u32) -> u32 {
    u32::from(conn) * STEER_RING as u32 + (psn & (STEER_RING as u32 - 1))
}

impl WriteSteer {
    /// Zeroed registers.
    pub fn new() -> WriteSteer {
        WriteSteer {
            epsn: Register::new(&REG_STEER_EPSN),
            pend: PairRegister::new(&REG_STEER_PEND),
            pend_va: PairRegister::new(&REG_STEER_PEND_VA),
            pend_node: PairRegister::new(&REG_STEER_PEND_NODE),
            pend_hdr_hi: Register::new(&REG_STEER_PEND_HDR_HI),
            cache: SteerCache::default(),
            cas: PairRegister::new(&REG_STEER_CAS),
            cas_cmp: PairRegister::new(&REG_STEER_CAS_CMP),
            cas_tgt: PairRegister::new(&REG_STEER_CAS_TGT),
            cas_node_va: PairRegister::new(&REG_STEER_CAS_NODE_VA),
            cas_node_hdr: PairRegister::new(&REG_STEER_CAS_NODE_HDR),
            cas_node_ver: Register::new(&REG_STEER_CAS_NODE_VER),
            quiet_until_us: 0,
        }
    }

    /// Rewrite nothing before `until_us` (set by the control plane after a restart).
    pub fn set_quiet_until(&mut self, until_us: u64) {
        self.quiet_until_us = until_us;
    }

    /// Every register, in spec order (the cache's interleaved: the write cache's key
    /// and the tails before the pending node, the write cache's version after it).
    pub fn registers(&self) -> Vec<&dyn RegisterAccess> {
        let mut v: Vec<&dyn RegisterAccess> = vec![&self.epsn, &self.pend];
        let (front, addr_ver) = self.cache.registers();
        v.extend(front);
        v.extend([
            &self.pend_va as &dyn RegisterAccess,
            &self.pend_node,
            &self.pend_hdr_hi,
            addr_ver,
            &self.cas,
            &self.cas_cmp,
            &self.cas_tgt,
            &self.cas_node_va,
            &self.cas_node_hdr,
            &self.cas_node_ver,
        ]);
        v
    }

    /// The same, mutable.
    pub fn registers_mut(&mut self) -> Vec<&mut dyn RegisterAccess> {
        let mut v: Vec<&mut dyn RegisterAccess> = vec![&mut self.epsn, &mut self.pend];
        let (front, addr_ver) = self.cache.registers_mut();
        v.extend(front);
        v.extend([
            &mut self.pend_va as &mut dyn RegisterAccess,
            &mut self.pend_node,
            &mut self.pend_hdr_hi,
            addr_ver,
            &mut self.cas,
            &mut self.cas_cmp,
            &mut self.cas_tgt,
            &mut self.cas_node_va,
            &mut self.cas_node_hdr,
            &mut self.cas_node_ver,
        ]);
        v
    }

    /// Process one packet at pipeline time `now_us`.
    pub fn apply(&mut self, pkt: &mut Packet, ctx: &mut Ctx<'_>, now_us: u64) -> SteerInfo {
        let mut info = SteerInfo::default();
        let on = ctx.mode & (spec::mode::WRITE_STEER | spec::mode::READ_STEER) != 0;
        let Some(conn) = pkt.meta.conn else {
            return info;
        };
        if !on {
            return info;
        }
        if pkt.meta.dir == DIR_UP {
            self.up(pkt, ctx, conn, now_us, &mut info);
        } else {
            self.down(pkt, ctx, conn, now_us);
        }
        info
    }

    fn up(
        &mut self,
        pkt: &mut Packet,
        ctx: &mut Ctx<'_>,
        conn: u8,
        now_us: u64,
        info: &mut SteerInfo,
    ) {
        let id = pkt.id;
        let psn = pkt.bth.psn;
        let npsn = match (pkt.bth.opcode, pkt.reth) {
            (Opcode::ReadRequest, Some(r)) => r.dma_len.div_ceil(1 << pkt.meta.pmtu_log2).max(1),
            _ => 1,
        };
        let in_order = self
            .epsn
            .rmw(id, u32::from(conn), |e| {
                let next = PSN_VALID | psn_add(psn, npsn);
                if e & PSN_VALID == 0 {
                    // First packet seen on the connection: it may be a retransmission.
                    (next, false)
                } else if e & PSN_MASK == psn {
                    (next, true)
                } else if crate::model::psn_diff(psn, e & PSN_MASK) > 0 {
                    // A gap (loss before the switch): resynchronise, do not act.
                    (next, false)
                } else {
                    (e, false)
                }
            })
            .unwrap_or(false);
        info.in_order = in_order && now_us >= self.quiet_until_us;
        let write_steer = ctx.mode & spec::mode::WRITE_STEER != 0;
        match pkt.bth.opcode {
            Opcode::WriteOnly => {
                let Some(reth) = pkt.reth else { return };
                if ctx.tables.steer_classes.lookup(&reth.dma_len).is_none() {
                    return;
                }
                let Some(chain_id) = le_u64(&pkt.payload, CLOVER_CHAIN_ID_AT) else {
                    return;
                };
                let Some(&slot) = ctx.tables.steer_keys.lookup(&chain_id) else {
                    // A node of an untracked key: whatever the write cache said about
                    // this address is stale now.
                    self.cache
                        .record_node(id, addr_tag(reth.va, pkt.dst), None, 0);
                    return;
                };
                let slot = u32::from(slot);
                if !info.in_order {
                    self.cache
                        .record_node(id, addr_tag(reth.va, pkt.dst), None, 0);
                    self.retransmitted_node(pkt, ctx, conn, reth.va);
                    return;
                }
                let (Some(hdr), Some(mut ver)) = (
                    le_u64(&pkt.payload, 0),
                    le_u32(&pkt.payload, CLOVER_VERSION_AT),
                ) else {
                    return;
                };
                let tail_va = self.cache.read_va(id, slot);
                let tail_ver = self.cache.read_ver(id, slot);
                if write_steer && tail_va != 0 && version_after(tail_ver, ver.wrapping_sub(1)) {
                    // The writer is behind the committed tail: give its node the version
                    // it will have when linked after that tail.
                    ver = tail_ver.wrapping_add(1);
                    if set_node_version(pkt, ver) {
                        ctx.counters.write_steer.versioned += 1;
                    }
                }
                let cas_psn = PSN_VALID | psn_add(psn, 1);
                let c = u32::from(conn);
                let _ = self.pend.rmw(id, c, |_, _| (cas_psn, slot, ()));
                let (lo, hi) = split(reth.va);
                let _ = self.pend_va.rmw(id, c, |_, _| (lo, hi, ()));
                let (hlo, hhi) = split(hdr);
                let _ = self.pend_node.rmw(id, c, |_, _| (hlo, ver, ()));
                let _ = self.pend_hdr_hi.write(id, c, hhi);
                self.cache
                    .record_node(id, addr_tag(reth.va, pkt.dst), Some(slot), ver);
                info.write = Some((slot, reth.va, ver));
            }
            Opcode::CompareSwap => {
                let Some(mut eth) = pkt.atomic_eth else {
                    return;
                };
                if !info.in_order {
                    return;
                }
                let c = u32::from(conn);
                let Some((plo, slot)) = self.pend.rmw(id, c, |lo, hi| (0, 0, (lo, hi))) else {
                    return;
                };
                if plo != PSN_VALID | psn {
                    return;
                }
                let node_va = self
                    .pend_va
                    .rmw(id, c, |lo, hi| (lo, hi, join(lo, hi)))
                    .unwrap_or(0);
                let (hdr_lo, node_ver) = self
                    .pend_node
                    .rmw(id, c, |lo, hi| (lo, hi, (lo, hi)))
                    .unwrap_or((0, 0));
                let hdr_hi = self.pend_hdr_hi.read(id, c).unwrap_or(0);
                let node_hdr = join(hdr_lo, hdr_hi);
                let link_bits = CLOVER_HAS_SUCCESSOR | CLOVER_SUCCESSOR_FIELDS;
                let shaped = eth.compare & link_bits == 0
                    && eth.swap_add & CLOVER_HAS_SUCCESSOR != 0
                    && eth.swap_add & !link_bits == eth.compare
                    // The link names the pending node's generation (low 8 bits)...
                    && (eth.swap_add >> 38) & 0xFF == (node_hdr >> 46) & 0xFF;
                if !shaped {
                    return;
                }
                // ...and the CAS targets a node of the pending WRITE's key: a CAS of
                // another operation that happens to follow the WRITE is never paired
                // with it.
                if self.cache.slot_at(id, addr_tag(eth.va, pkt.dst)) != Some(slot) {
                    if write_steer {
                        ctx.counters.write_steer.missed += 1;
                    }
                    return;
                }
                let tail = Tail {
                    va: self.cache.read_va(id, slot),
                    hdr: self.cache.read_hdr(id, slot),
                    ver: self.cache.read_ver(id, slot),
                };
                let line = tail.va >> 6;
                let steer = write_steer
                    && tail.va != 0
                    && tail.va != eth.va
                    && tail.ver.wrapping_add(1) == node_ver
                    && tail.hdr != eth.compare
                    && tail.hdr & link_bits == 0
                    && tail.hdr & CLOVER_TOMBSTONE == eth.compare & CLOVER_TOMBSTONE
                    && line != 0
                    && line <= CLOVER_SUCCESSOR_FIELDS;
                let r = ring_slot(conn, psn);
                let flags = PSN_VALID | psn | if steer { CAS_STEERED } else { 0 };
                let recorded = self
                    .cas
                    .rmw(id, r, |lo, hi| {
                        let busy =
                            lo & PSN_VALID != 0 && lo & CAS_STEERED != 0 && lo & CAS_ANSWERED == 0;
                        if busy {
                            (lo, hi, false)
                        } else {
                            (flags, slot, true)
                        }
                    })
                    .unwrap_or(false);
                if !recorded {
                    if write_steer {
                        ctx.counters.write_steer.missed += 1;
                    }
                    return;
                }
                let (cmp, tgt, swap) = if steer {
                    (tail.hdr, tail.va, tail.hdr | (eth.swap_add & link_bits))
                } else {
                    (eth.compare, eth.va, eth.swap_add)
                };
                let (lo, hi) = split(cmp);
                let _ = self.cas_cmp.rmw(id, r, |_, _| (lo, hi, ()));
                let (lo, hi) = split(tgt);
                let _ = self.cas_tgt.rmw(id, r, |_, _| (lo, hi, ()));
                let (lo, hi) = split(node_va);
                let _ = self.cas_node_va.rmw(id, r, |_, _| (lo, hi, ()));
                let (lo, hi) = split(node_hdr);
                let _ = self.cas_node_hdr.rmw(id, r, |_, _| (lo, hi, ()));
                let _ = self.cas_node_ver.write(id, r, node_ver);
                if steer {
                    eth.va = tgt;
                    eth.compare = cmp;
                    eth.swap_add = swap;
                    pkt.atomic_eth = Some(eth);
                    ctx.counters.write_steer.steered += 1;
                } else if write_steer {
                    ctx.counters.write_steer.missed += 1;
                }
            }
            _ => {}
        }
    }

    /// A tracked node WRITE that is not its connection's next PSN: a retransmission
    /// (or a copy of one). The memnode executes whichever copy of a WRITE arrives first,
    /// so every copy must carry what the link CAS after it was steered for:
    ///
    /// * if the CAS (this PSN + 1) has not gone by yet, its pending record is dropped,
    ///   and the CAS passes unchanged (to the writer's own predecessor);
    /// * if it went by steered (its ring record is still there: a steered record is
    ///   kept until its ACK goes by, and an ACK means this WRITE executed), the copy
    ///   gets the version the first transmission was given.
    ///
    /// Without this, a first transmission rewritten and lost, its retransmission
    /// executed with the writer's version, and the steered CAS delivered late would
    /// link a node whose version does not follow the tail's: a chain no reader can
    /// walk.
    fn retransmitted_node(&mut self, pkt: &mut Packet, ctx: &mut Ctx<'_>, conn: u8, va: u64) {
        let id = pkt.id;
        let c = u32::from(conn);
        let cas_psn = psn_add(pkt.bth.psn, 1);
        let _ = self.pend.rmw(id, c, |lo, hi| {
            if lo == PSN_VALID | cas_psn {
                (0, 0, ())
            } else {
                (lo, hi, ())
            }
        });
        let r = ring_slot(conn, cas_psn);
        let steered = self
            .cas
            .rmw(id, r, |lo, hi| {
                let hit = lo & PSN_VALID != 0 && lo & PSN_MASK == cas_psn && lo & CAS_STEERED != 0;
                (lo, hi, hit)
            })
            .unwrap_or(false);
        let node_va = self
            .cas_node_va
            .rmw(id, r, |lo, hi| (lo, hi, join(lo, hi)))
            .unwrap_or(0);
        let Some(ver) = self.cas_node_ver.read(id, r) else {
            return;
        };
        if steered && node_va == va && set_node_version(pkt, ver) {
            ctx.counters.write_steer.versioned += 1;
        }
    }

    fn down(&mut self, pkt: &mut Packet, ctx: &mut Ctx<'_>, conn: u8, now_us: u64) {
        if pkt.bth.opcode != Opcode::AtomicAcknowledge {
            return;
        }
        let (Some(mut ack), Some(aeth)) = (pkt.atomic_ack_eth, pkt.aeth) else {
            return;
        };
        if !matches!(aeth.syndrome, verbs::wire::Syndrome::Ack { .. }) {
            return;
        }
        let id = pkt.id;
        let psn = pkt.bth.psn;
        let r = ring_slot(conn, psn);
        let Some(Some((lo, slot))) = self.cas.rmw(id, r, |lo, hi| {
            if lo & PSN_VALID != 0 && lo & PSN_MASK == psn {
                (lo | CAS_ANSWERED, hi, Some((lo, hi)))
            } else {
                (lo, hi, None)
            }
        }) else {
            return;
        };
        let read = |reg: &mut PairRegister<STEER_CONN_SLOTS>| {
            reg.rmw(id, r, |lo, hi| (lo, hi, join(lo, hi))).unwrap_or(0)
        };
        let cmp = read(&mut self.cas_cmp);
        let tgt = read(&mut self.cas_tgt);
        let node = Tail {
            va: read(&mut self.cas_node_va),
            hdr: read(&mut self.cas_node_hdr),
            ver: self.cas_node_ver.read(id, r).unwrap_or(0),
        };
        let success = ack.original == cmp;
        if success && self.cache.commit(id, slot, node, now_us as u32) {
            ctx.counters.write_steer.committed += 1;
        }
        if lo & CAS_STEERED != 0 {
            ack.original = if success {
                steered_success(cmp, tgt)
            } else {
                MARK_STEER_FAILED
            };
            pkt.atomic_ack_eth = Some(ack);
            ctx.counters.write_steer.converted += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_not_headers() {
        let tail_hdr = 0x0005u64 << 46;
        let m = steered_success(tail_hdr, 0x7f00_0000_1040);
        assert_eq!(m & CLOVER_HAS_SUCCESSOR, 0);
        assert_ne!(m & CLOVER_SUCCESSOR_FIELDS, 0);
        assert_eq!(m & OWN_GEN_FIELD, tail_hdr);
        assert_eq!((m & CLOVER_SUCCESSOR_FIELDS) << 6, 0x7f00_0000_1040);
        assert_eq!(MARK_STEER_FAILED & CLOVER_HAS_SUCCESSOR, 0);
        assert_ne!(MARK_STEER_FAILED & CLOVER_SUCCESSOR_FIELDS, 0);
    }
}
