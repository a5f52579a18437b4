//! `ReadSteer`: Clover read steering with partial key tracking (SwordBox §4.4.2).
//!
//! Every tracked node WRITE records its address in a hash array (`steer_addr_tag`:
//! address tag, `steer_addr_key`: key slot, `steer_addr_ver`: the node's version; kept by
//! `SteerCache`, whose `WriteSteer` side also checks link CASes against it) — the
//! write cache; a node WRITE of an untracked key clears its address's cell;
//! a later write hashing to the same cell replaces it, so hot keys keep the longest
//! histories. A READ whose length is a tracked size class and whose address hits the
//! write cache belongs to that key: if the key's committed tail (`SteerCache`) is
//! another node with a later version, committed less than [`STEER_MAX_AGE_US`] ago, the
//! READ is redirected there (*steered*) and remembered by PSN (`steer_rd*`). Misses
//! pass unchanged (*missed*: tracked-length READs not steered). A retransmission is
//! never steered, and it removes the record of its PSN: it reads the address the
//! client asked for, so its response must not be marked as the tail's.
//!
//! The READ response of a steered READ is *converted*: when the node it returns has no
//! successor (it was still the tail when read), the address it was read from (/ 64)
//! goes into the header's successor fields — a marker no real header carries — so the
//! client learns where the node it got lives. A client accepts a node of its chain
//! with a later version than it asked for only with that marker; anything else
//! (a response whose record was lost, a node that gained a successor) is a stale read
//! it retries, so a lost record costs a retry, never correctness.
//!
//! Why the age bound: only a committed tail is ever steered to, and its memory cannot
//! be reused before the clients' grace period has passed after it was superseded; a
//! tail steered to within [`STEER_MAX_AGE_US`] of its commit is therefore the node that
//! was committed, even if writes the switch did not see superseded it since.

use verbs::wire::{Opcode, PSN_MASK};

use crate::functions::steer_cache::{SteerCache, addr_tag, version_after};
use crate::functions::write_steer::{SteerInfo, ring_slot};
use crate::model::{Ctx, Packet, PairRegister, Register, RegisterAccess};
use crate::spec::{
    self, CLOVER_HAS_SUCCESSOR, CLOVER_SUCCESSOR_FIELDS, DIR_UP, PSN_VALID, REG_STEER_RD,
    REG_STEER_RD_HI, STEER_CONN_SLOTS, STEER_MAX_AGE_US,
};

/// The `ReadSteer` control.
#[derive(Debug, Clone)]
pub struct ReadSteer {
    rd: PairRegister<STEER_CONN_SLOTS>,
    rd_hi: Register<STEER_CONN_SLOTS>,
}

impl Default for ReadSteer {
    fn default() -> Self {
        ReadSteer::new()
    }
}

impl ReadSteer {
    /// Zeroed registers.
    pub fn new() -> ReadSteer {
        ReadSteer {
            rd: PairRegister::new(&REG_STEER_RD),
            rd_hi: Register::new(&REG_STEER_RD_HI),
        }
    }

    /// Every register, in spec order.
    pub fn registers(&self) -> Vec<&dyn RegisterAccess> {
        vec![&self.rd, &self.rd_hi]
    }

    /// The same, mutable.
    pub fn registers_mut(&mut self) -> Vec<&mut dyn RegisterAccess> {
        vec![&mut self.rd, &mut self.rd_hi]
    }

    /// Where a node READ of `va` is steered to: the key's committed tail, when the
    /// write cache knows `va`, the tail is later and fresh, and the READ is a first
    /// transmission.
    fn target(
        pkt: &Packet,
        info: SteerInfo,
        cache: &mut SteerCache,
        va: u64,
        now_us: u64,
    ) -> Option<u64> {
        let id = pkt.id;
        let tag = addr_tag(va, pkt.dst);
        let slot = cache.slot_at(id, tag)?;
        let tail_va = cache.read_va(id, slot);
        let tail_ver = cache.read_ver(id, slot);
        let tail_ts = cache.read_ts(id, slot);
        let ver_at_addr = cache.version_at(id, tag)?;
        let fresh = (now_us as u32).wrapping_sub(tail_ts) < STEER_MAX_AGE_US;
        let line = tail_va >> 6;
        let steer = info.in_order
            && tail_va != 0
            && tail_va != va
            && version_after(tail_ver, ver_at_addr)
            && fresh
            && line != 0
            && line <= CLOVER_SUCCESSOR_FIELDS;
        steer.then_some(tail_va)
    }

    /// Process one packet after `WriteSteer` (which reported `info`) at `now_us`.
    pub fn apply(
        &mut self,
        pkt: &mut Packet,
        ctx: &mut Ctx<'_>,
        info: SteerInfo,
        cache: &mut SteerCache,
        now_us: u64,
    ) {
        if ctx.mode & spec::mode::READ_STEER == 0 {
            return;
        }
        let Some(conn) = pkt.meta.conn else { return };
        let id = pkt.id;
        if pkt.meta.dir == DIR_UP {
            if info.write.is_some() {
                return;
            }
            let (Opcode::ReadRequest, Some(mut reth)) = (pkt.bth.opcode, pkt.reth) else {
                return;
            };
            if ctx.tables.steer_classes.lookup(&reth.dma_len).is_none() {
                return;
            }
            let target = Self::target(pkt, info, cache, reth.va, now_us);
            let r = ring_slot(conn, pkt.bth.psn);
            let psn = pkt.bth.psn;
            let line = target.map_or(0, |va| va >> 6);
            // One access either way: a steered READ is recorded; any other READ on the
            // PSN of a record (a retransmission of a steered READ, which is never
            // steered) removes it, so the response of the copy that read the address
            // asked for is not marked with the tail's.
            let _ = self.rd.rmw(id, r, |lo, hi| {
                if target.is_some() {
                    (PSN_VALID | psn, line as u32, ())
                } else if lo == PSN_VALID | psn {
                    (0, 0, ())
                } else {
                    (lo, hi, ())
                }
            });
            let Some(tail_va) = target else {
                ctx.counters.read_steer.missed += 1;
                return;
            };
            let _ = self.rd_hi.write(id, r, (line >> 32) as u32);
            reth.va = tail_va;
            pkt.reth = Some(reth);
            ctx.counters.read_steer.steered += 1;
        } else {
            if !matches!(
                pkt.bth.opcode,
                Opcode::ReadResponseOnly | Opcode::ReadResponseFirst
            ) {
                return;
            }
            let psn = pkt.bth.psn;
            let r = ring_slot(conn, psn);
            let Some(Some(lo_line)) = self.rd.rmw(id, r, |lo, hi| {
                if lo & PSN_VALID != 0 && lo & PSN_MASK == psn {
                    (lo, hi, Some(hi))
                } else {
                    (lo, hi, None)
                }
            }) else {
                return;
            };
            let hi_line = self.rd_hi.read(id, r).unwrap_or(0);
            let line = (u64::from(hi_line) << 32) | u64::from(lo_line);
            let Some(word) = pkt.payload.get(0..8) else {
                return;
            };
            let mut hdr = [0u8; 8];
            hdr.copy_from_slice(word);
            let hdr = u64::from_le_bytes(hdr);
            if hdr & (CLOVER_HAS_SUCCESSOR | CLOVER_SUCCESSOR_FIELDS) != 0 {
                return;
            }
            let marked = hdr | line;
            pkt.payload[0..8].copy_from_slice(&marked.to_le_bytes());
            ctx.counters.read_steer.converted += 1;
        }
    }
}
