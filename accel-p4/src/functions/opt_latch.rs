//! `OptLatch`: switch-assisted optimistic latching (sync seed §5.5, Table 2).
//!
//! The control plane declares regions of fixed-size tuples (`latch_region`: rkey →
//! base VA, stride, count). Tuple `i`'s first 8 bytes are its *latch/version word*;
//! the switch holds the tuple's version in `tuple_version` (even: free, odd: latched,
//! with the holder's connection) and the memnode's copy of that word is never used.
//! The packet types of Table 2:
//!
//! | packet | handled | registers |
//! |---|---|---|
//! | CAS on the latch word (*latch tuple*) | answered: ATOMIC ACK with the version before; even = latched by you, odd = refused (someone holds it) | `tuple_version` |
//! | 8-byte READ of the latch word (*read version*) | answered: READ RESPONSE with the version | `tuple_version` |
//! | READ of the tuple (*read tuple* request) | forwarded; the version now is remembered for the connection and PSN | `client_tuple`, `tuple_version`, `client_version` |
//! | every packet of its response | the first 8 bytes of the packet's payload are overwritten by the **stamp**: `STAMP_PRESENT \| STAMP_INVALID if the version changed or was odd \| packet bytes << 32 \| version`; Middle/Last packets find their READ through `read_cursor` | `read_cursor`, `client_tuple`, `tuple_version`, `client_version` |
//! | WRITE of the tuple (*write tuple*) | forwarded; remembered under the PSN its ACK will carry | `client_tuple` |
//! | its ACK (*unlatch*) | forwarded; the version is advanced to even if the writer holds the latch | `client_tuple`, `tuple_version` |
//!
//! Answers are admitted by `SwitchAtomics` (quiet connection); each new answer leaves a
//! 0-byte WRITE *filler* at its PSN on the client's own QP (as atomic replacement does),
//! so the memnode's QP stays in step with the client's and no PSN/MSN offset is kept. A retransmitted latch request is
//! answered from the state (latched by this connection → success again), never
//! re-applied. A READ retransmitted before its response keeps the version its first
//! copy saw, so a response is judged against the oldest version it could reflect.
//!
//! # Multi-packet responses: a stamp per packet
//!
//! A tuple larger than the path MTU comes back in several packets, and the requester
//! assembles the READ from whichever copy of each packet arrives first: after a loss it
//! retransmits the READ, the memnode executes it again, and the requester keeps the
//! packets it already has and takes the missing ones from the new execution. A stamp on
//! one packet therefore says nothing about the others (the old first half under a valid
//! stamp with a new second half was accepted as valid). So **every** packet is stamped,
//! each judged on its own: valid iff the tuple's version when this packet passes the
//! switch equals the version recorded when the READ first went up, and is even. The
//! stamp carries the packet's payload length, so a reader knows the packet boundaries
//! (multiples of the first packet's length) and finds every stamp; tuples reserve an
//! 8-byte stamp word at every 256-byte boundary (the smallest path MTU), so the stamps
//! never overwrite data at any path MTU.
//!
//! A reader accepts a READ only if every packet's stamp is present, valid, of the same
//! version and says the right length. Why that is enough, under loss, duplication and
//! reordering: a packet's data was read by the memnode *after* some copy of the READ
//! request passed the switch (no earlier than the first copy, whose version `v` is the
//! one recorded: a retransmitted request keeps it) and *before* the packet passed the
//! switch. A valid stamp says the version was `v` (even) at both ends of that interval;
//! versions only grow (latch: odd, unlatch or lease break: next even), so no latch was
//! held at any time in between. A WRITE is executed at the memnode only inside its
//! latch (latched at the switch before the WRITE goes up, unlatched only when its ACK
//! comes back through the switch), so no WRITE ran while the packet's data was read,
//! and every WRITE before it had finished: the packet holds the tuple as it was at
//! version `v`. All packets carry `v`, so the assembled tuple is the tuple at version
//! `v`, whichever execution each packet came from and in whatever order the packets
//! arrived; a duplicate is one of those packets again. (A version repeats only after
//! 2^22 writes of the tuple within one READ.)
//!
//! Middle and Last packets carry no address and no first PSN: `read_cursor` holds, per
//! connection, the first PSN of the response in progress and the PSN its next packet
//! must have. A First packet starts it; a Middle or Last packet is stamped only if its
//! PSN is exactly the next one (so it belongs to that READ — PSN ranges of requests do
//! not overlap and a Middle/Last PSN is never the start of a request); otherwise it
//! passes unstamped (`parts_unstamped`) and the reader rejects the response. The
//! memnode sends a response's packets in order, so this only happens when a packet is
//! lost between the memnode and the switch.
//!
//! A tuple READ response the switch did not stamp at all (its request went up before a
//! switch restart) is treated as invalid. Correctness rests on the switch seeing every
//! access to the tuples.
//!
//! A holder that dies leaves its tuple latched until the control plane's lease releases
//! it ([`crate::latch_lease`]).
//!
//! After a restart the versions are lost; the control plane then reports every tuple
//! latched (odd, no holder) for a grace period so that writes latched before the
//! restart finish before anyone can latch again, then versions restart at 0 (see
//! `Control::set_latch_region`).

use verbs::wire::{Opcode, PSN_MASK, Syndrome};

use crate::functions::answer::{answer, answer_atomic, filler_of};
use crate::model::{
    Ctx, FillerAction, Intercept, Packet, PairRegister, Register, RegisterAccess, Stage,
};
use crate::spec::{
    self, DIR_UP, LATCH_CONN_SLOTS, LATCH_PER_CONN, LATCH_PER_CONN_LOG2, LATCH_TUPLES, MAX_CONNS,
    PSN_VALID, REG_CLIENT_TUPLE, REG_CLIENT_VERSION, REG_READ_CURSOR, REG_TUPLE_VERSION,
    STAMP_BYTES_MASK, STAMP_BYTES_SHIFT, STAMP_INVALID, STAMP_PRESENT,
};

/// Version bits of a `tuple_version` cell.
pub const VERSION_MASK: u32 = (1 << 23) - 1;
const HOLDER_SHIFT: u32 = 23;
const CT_VALID: u32 = 1 << 31;
const CT_WRITE: u32 = 1 << 30;
const CT_TAG_MASK: u32 = 0x3FFF;
const CT_TUPLE_MASK: u32 = 0xFFFF;

fn slot(conn: u32, psn: u32) -> u32 {
    conn * LATCH_PER_CONN as u32 + (psn & (LATCH_PER_CONN as u32 - 1))
}

fn tag(psn: u32) -> u32 {
    ((psn >> LATCH_PER_CONN_LOG2) & CT_TAG_MASK) << 16
}

/// The stamp word a tuple READ response packet of `bytes` payload bytes carries in its
/// first 8 bytes.
pub fn stamp(valid: bool, version: u32, bytes: usize) -> u64 {
    STAMP_PRESENT
        | if valid { 0 } else { STAMP_INVALID }
        | ((bytes as u64 & STAMP_BYTES_MASK) << STAMP_BYTES_SHIFT)
        | u64::from(version & VERSION_MASK)
}

/// Whether a stamp word says its packet was read consistently (for the whole READ,
/// every packet's stamp must say so, with the same version: see the module docs).
pub fn stamp_valid(word: u64) -> bool {
    word & STAMP_PRESENT != 0 && word & STAMP_INVALID == 0
}

/// The `OptLatch` control and its registers.
#[derive(Debug)]
pub struct OptLatch {
    tuple_version: Register<LATCH_TUPLES>,
    client_tuple: Register<LATCH_CONN_SLOTS>,
    client_version: Register<LATCH_CONN_SLOTS>,
    read_cursor: PairRegister<MAX_CONNS>,
}

impl Default for OptLatch {
    fn default() -> OptLatch {
        OptLatch::new()
    }
}

/// Where a request lands in a latch region.
#[derive(Debug, Clone, Copy)]
struct Hit {
    tuple: u32,
}

impl OptLatch {
    /// Zeroed registers.
    pub fn new() -> OptLatch {
        OptLatch {
            tuple_version: Register::new(&REG_TUPLE_VERSION),
            client_tuple: Register::new(&REG_CLIENT_TUPLE),
            client_version: Register::new(&REG_CLIENT_VERSION),
            read_cursor: PairRegister::new(&REG_READ_CURSOR),
        }
    }

    fn hit(ctx: &Ctx<'_>, rkey: u32, va: u64) -> Option<Hit> {
        let r = ctx.tables.latch_region.lookup(&rkey)?;
        let off = va.checked_sub(r.base_va)?;
        let shift = u32::from(r.stride_log2.clamp(3, 31));
        if off & ((1u64 << shift) - 1) != 0 || off >> shift >= u64::from(r.tuples) {
            return None;
        }
        Some(Hit {
            tuple: r.first_tuple.wrapping_add((off >> shift) as u32) & (LATCH_TUPLES as u32 - 1),
        })
    }

    /// Before `SwitchAtomics`, requests: latch CASes and version READs are intercepted
    /// (table lookup only).
    pub fn classify(pkt: &mut Packet, ctx: &Ctx<'_>) {
        if ctx.mode & spec::mode::OPT_LATCH == 0
            || pkt.meta.dir != DIR_UP
            || pkt.meta.intercept.is_some()
        {
            return;
        }
        let intercept = match (pkt.bth.opcode, pkt.atomic_eth, pkt.reth) {
            (Opcode::CompareSwap, Some(eth), _) => {
                Self::hit(ctx, eth.rkey, eth.va).map(|h| Intercept::Latch { tuple: h.tuple })
            }
            (Opcode::ReadRequest, _, Some(reth)) if reth.dma_len == 8 => {
                Self::hit(ctx, reth.rkey, reth.va)
                    .map(|h| Intercept::ReadVersion { tuple: h.tuple })
            }
            _ => None,
        };
        pkt.meta.intercept = intercept;
    }

    /// A new answer's filler: a 0-byte WRITE at its PSN on the client's own QP, so
    /// the memnode's QP stays in step with the client's (no PSN offset to lose).
    fn add_filler(pkt: &mut Packet, ctx: &mut Ctx<'_>, c: u32, rkey: u32, va: u64) {
        let Some(ans) = pkt.meta.answer else {
            return;
        };
        if ans.replay {
            return;
        }
        let target = ctx
            .tables
            .conn_filler
            .lookup(&(c as u8))
            .copied()
            .unwrap_or(FillerAction {
                rkey,
                va,
                memnode_qpn: pkt.bth.dest_qpn,
            });
        let mut filler = filler_of(pkt, &target, ans.upstream_psn);
        filler.meta.egress_port = crate::spec::PORT_MEMNODE;
        pkt.meta.extra = Some(Box::new(filler));
        ctx.counters.opt_latch.fillers += 1;
    }

    fn upstream(&mut self, pkt: &mut Packet, ctx: &mut Ctx<'_>, c: u32) {
        let id = pkt.id;
        let (rkey, va) = match (pkt.atomic_eth, pkt.reth) {
            (Some(e), _) => (e.rkey, e.va),
            (None, Some(r)) => (r.rkey, r.va),
            _ => (0, 0),
        };
        if matches!(
            pkt.meta.intercept,
            Some(Intercept::Latch { .. } | Intercept::ReadVersion { .. })
        ) {
            Self::add_filler(pkt, ctx, c, rkey, va);
        }
        match pkt.meta.intercept {
            Some(Intercept::Latch { tuple }) => {
                let Some(ans) = pkt.meta.answer else {
                    return;
                };
                let holder = (c + 1) << HOLDER_SHIFT;
                let replay = ans.replay;
                let Some((before, latched)) = self.tuple_version.rmw(id, tuple, |v| {
                    let version = v & VERSION_MASK;
                    if replay {
                        // Answer from the state: still held by us → it succeeded.
                        if version & 1 == 1 && v & !VERSION_MASK == holder {
                            (v, (version.wrapping_sub(1) & VERSION_MASK, true))
                        } else {
                            (v, (version | 1, false))
                        }
                    } else if version & 1 == 0 {
                        (((version + 1) & VERSION_MASK) | holder, (version, true))
                    } else {
                        (v, (version, false))
                    }
                }) else {
                    pkt.meta.drop = true;
                    return;
                };
                if latched {
                    ctx.counters.opt_latch.latched += 1;
                } else {
                    ctx.counters.opt_latch.latch_refused += 1;
                }
                answer_atomic(pkt, ans.msn, u64::from(before));
            }
            Some(Intercept::ReadVersion { tuple }) => {
                let Some(ans) = pkt.meta.answer else {
                    return;
                };
                let v = self.tuple_version.read(id, tuple).unwrap_or(1) & VERSION_MASK;
                ctx.counters.opt_latch.versions_read += 1;
                answer(pkt, Opcode::ReadResponseOnly, ans.msn);
                pkt.payload = u64::from(v).to_le_bytes().to_vec();
            }
            Some(Intercept::Divert { .. }) => {}
            None => self.forwarded(pkt, ctx, c),
        }
    }

    /// A tuple READ or WRITE going up (already carrying its memnode-side PSN).
    fn forwarded(&mut self, pkt: &mut Packet, ctx: &mut Ctx<'_>, c: u32) {
        if ctx.mode & spec::mode::OPT_LATCH == 0 {
            return;
        }
        let Some(reth) = pkt.reth else {
            return;
        };
        let write = match pkt.bth.opcode {
            Opcode::ReadRequest => false,
            Opcode::WriteOnly | Opcode::WriteFirst => true,
            _ => return,
        };
        let Some(hit) = Self::hit(ctx, reth.rkey, reth.va) else {
            return;
        };
        let id = pkt.id;
        let psn = pkt.bth.psn & PSN_MASK;
        // A WRITE is acknowledged with the PSN of its last packet.
        let at = if write {
            let shift = u32::from(pkt.meta.pmtu_log2.min(31));
            let len = u64::from(reth.dma_len.max(1));
            let n = ((len + (1u64 << shift) - 1) >> shift).max(1);
            psn.wrapping_add(n as u32 - 1) & PSN_MASK
        } else {
            psn
        };
        let cell = CT_VALID | if write { CT_WRITE } else { 0 } | tag(at) | hit.tuple;
        // Stage 1: client_tuple (a retransmitted READ finds its own entry).
        let again = self
            .client_tuple
            .rmw(id, slot(c, at), |old| (cell, old == cell))
            .unwrap_or(false);
        if write {
            let holder = self.tuple_version.read(id, hit.tuple).unwrap_or(0) >> HOLDER_SHIFT;
            if holder != c + 1 {
                ctx.counters.opt_latch.unlatched_writes += 1;
            }
            return;
        }
        // Stage 2: tuple_version; stage 3: client_version.
        let v = self.tuple_version.read(id, hit.tuple).unwrap_or(1);
        self.client_version
            .rmw(id, slot(c, at), |old| (if again { old } else { v }, ()));
    }

    fn downstream(&mut self, pkt: &mut Packet, ctx: &mut Ctx<'_>, c: u32) {
        if ctx.mode & spec::mode::OPT_LATCH == 0 || pkt.meta.converted {
            return;
        }
        let op = pkt.bth.opcode;
        let read = matches!(
            op,
            Opcode::ReadResponseFirst
                | Opcode::ReadResponseMiddle
                | Opcode::ReadResponseLast
                | Opcode::ReadResponseOnly
        );
        let ack = op == Opcode::Acknowledge
            && matches!(pkt.aeth.map(|a| a.syndrome), Some(Syndrome::Ack { .. }));
        if !read && !ack {
            return;
        }
        let id = pkt.id;
        let u = pkt.meta.wire_psn & PSN_MASK;
        // Stage 0: read_cursor (READ responses): a First starts a response, an Only ends
        // any; a Middle or Last must have the next PSN of the response in progress and
        // is then stamped against that READ (found by its first PSN).
        let first = if read {
            let next = (u + 1) & PSN_MASK;
            let at = self.read_cursor.rmw(id, c, |lo, hi| match op {
                Opcode::ReadResponseFirst => (u | PSN_VALID, next, Some(u)),
                Opcode::ReadResponseOnly => (0, 0, Some(u)),
                _ if lo & PSN_VALID != 0 && hi & PSN_MASK == u => {
                    let first = Some(lo & PSN_MASK);
                    if op == Opcode::ReadResponseLast {
                        (0, 0, first)
                    } else {
                        (lo, next, first)
                    }
                }
                _ => (lo, hi, None),
            });
            match at {
                Some(Some(first)) => first,
                _ => {
                    ctx.counters.opt_latch.parts_unstamped += 1;
                    return;
                }
            }
        } else {
            u
        };
        let starts = matches!(op, Opcode::ReadResponseFirst | Opcode::ReadResponseOnly);
        let i = slot(c, first);
        let want = CT_VALID | if read { 0 } else { CT_WRITE } | tag(first);
        // Stage 1: client_tuple (a WRITE's entry is consumed by its first ACK).
        let Some(Some(tuple)) = self.client_tuple.rmw(id, i, |cell| {
            if cell & !CT_TUPLE_MASK == want {
                let keep = if read { cell } else { 0 };
                (keep, Some(cell & CT_TUPLE_MASK))
            } else {
                (cell, None)
            }
        }) else {
            if read && !starts {
                ctx.counters.opt_latch.parts_unstamped += 1;
            }
            return;
        };
        if read {
            // Stages 2 and 3: this packet is judged on its own — the version now
            // against the version when the READ first went up.
            let now = self.tuple_version.read(id, tuple).unwrap_or(1);
            let then = self.client_version.read(id, i).unwrap_or(1);
            let version = then & VERSION_MASK;
            let valid = version & 1 == 0 && (now & VERSION_MASK) == version;
            let bytes = pkt.payload.len();
            if bytes >= 8 {
                pkt.payload[..8].copy_from_slice(&stamp(valid, version, bytes).to_le_bytes());
                if starts && valid {
                    ctx.counters.opt_latch.reads_valid += 1;
                } else if starts {
                    ctx.counters.opt_latch.reads_invalid += 1;
                }
            }
            return;
        }
        // The memnode executed the WRITE: unlatch if the writer holds the latch.
        let holder = (c + 1) << HOLDER_SHIFT;
        let unlatched = self
            .tuple_version
            .rmw(id, tuple, |v| {
                if v & VERSION_MASK & 1 == 1 && v & !VERSION_MASK == holder {
                    (((v & VERSION_MASK) + 1) & VERSION_MASK, true)
                } else {
                    (v, false)
                }
            })
            .unwrap_or(false);
        if unlatched {
            ctx.counters.opt_latch.unlatched += 1;
        }
    }

    /// Control plane: forget connection `conn`'s READ response in progress (a new
    /// connection under that id starts with none).
    pub fn init_connection(&mut self, conn: u8) {
        self.read_cursor.cp_write(usize::from(conn), 0);
    }

    /// Control plane: set tuples `[first, first + count)` to `version` with no holder.
    pub fn set_versions(&mut self, first: u32, count: u32, version: u32) {
        for t in first..first.saturating_add(count).min(LATCH_TUPLES as u32) {
            self.tuple_version
                .cp_write(t as usize, u64::from(version & VERSION_MASK));
        }
    }

    /// Control plane: the `(tuple, cell)` of every tuple in `[first, first + count)`
    /// latched by a connection (odd version with a holder; the holderless "latched"
    /// state after a restart is not a client's latch).
    pub fn held(&self, first: u32, count: u32) -> Vec<(u32, u32)> {
        (first..first.saturating_add(count).min(LATCH_TUPLES as u32))
            .filter_map(|t| {
                let cell = self.tuple_version.cp_read(t as usize) as u32;
                (cell & 1 == 1 && cell >> HOLDER_SHIFT != 0).then_some((t, cell))
            })
            .collect()
    }

    /// Control plane: release tuple `t` if its cell is still exactly `cell` (a latch
    /// held past its lease): the version advances to even with no holder, so READs that
    /// overlapped the holder's latch are stamped invalid and a late ACK of its WRITE
    /// unlatches nothing. Returns whether it released.
    pub fn break_latch(&mut self, t: u32, cell: u32) -> bool {
        if t as usize >= LATCH_TUPLES
            || cell & 1 == 0
            || self.tuple_version.cp_read(t as usize) as u32 != cell
        {
            return false;
        }
        let next = ((cell & VERSION_MASK) + 1) & VERSION_MASK;
        self.tuple_version.cp_write(t as usize, u64::from(next));
        true
    }
}

impl Stage for OptLatch {
    fn name(&self) -> &'static str {
        "OptLatch"
    }

    fn apply(&mut self, pkt: &mut Packet, ctx: &mut Ctx<'_>) {
        let Some(conn) = pkt.meta.conn else {
            return;
        };
        let c = u32::from(conn);
        if pkt.meta.dir == DIR_UP && !pkt.meta.answered {
            self.upstream(pkt, ctx, c);
        } else if pkt.meta.dir != DIR_UP && !pkt.meta.answered {
            self.downstream(pkt, ctx, c);
        }
    }

    fn registers(&self) -> Vec<&dyn RegisterAccess> {
        vec![
            &self.tuple_version,
            &self.client_tuple,
            &self.client_version,
            &self.read_cursor,
        ]
    }

    fn registers_mut(&mut self) -> Vec<&mut dyn RegisterAccess> {
        vec![
            &mut self.tuple_version,
            &mut self.client_tuple,
            &mut self.client_version,
            &mut self.read_cursor,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_say_valid_only_when_present_and_clean() {
        assert!(stamp_valid(stamp(true, 4, 1024)));
        assert!(!stamp_valid(stamp(false, 4, 1024)));
        assert!(!stamp_valid(0));
        assert_eq!(stamp(true, 6, 256) & u64::from(VERSION_MASK), 6);
        assert_eq!(spec::STAMP_VERSION_MASK, u64::from(VERSION_MASK));
        assert_eq!(
            (stamp(true, 6, 4096) >> STAMP_BYTES_SHIFT) & STAMP_BYTES_MASK,
            4096
        );
    }

    #[test]
    fn a_lease_release_needs_the_latched_cell_it_saw() {
        let mut l = OptLatch::default();
        let latched = 5 | (3 << HOLDER_SHIFT);
        l.tuple_version.cp_write(7, u64::from(latched));
        // Another holder since the sweep looked: nothing happens.
        assert!(!l.break_latch(7, 5 | (4 << HOLDER_SHIFT)));
        // Not latched (even), or outside the array: refused.
        assert!(!l.break_latch(7, 4));
        assert!(!l.break_latch(LATCH_TUPLES as u32, latched));
        assert_eq!(l.tuple_version.cp_read(7) as u32, latched);
        // The cell it saw: released to the next even version, no holder.
        assert!(l.break_latch(7, latched));
        assert_eq!(l.tuple_version.cp_read(7), 6);
        assert!(!l.break_latch(7, latched));
    }
}
