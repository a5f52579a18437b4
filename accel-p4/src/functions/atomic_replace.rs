//! `AtomicReplace`: atomics on tracked lock words are multiplexed onto one upstream QP
//! per memnode, in the order the switch sees them, and a CAS or FAA whose outcome the
//! switch can compute from its cached value of the word goes up as an 8-byte WRITE of
//! that outcome; the WRITE's ACK comes back as an ATOMIC ACKNOWLEDGE carrying the
//! original value (SwordBox §4.1–§4.4.1).
//!
//! # The multiplexed QP
//!
//! The control plane creates one responder QP per memnode whose requester is the
//! switch itself (`mux_up` / `mux_down`; `POST /v1/replace/mux`). Every request for a
//! tracked word leaves on it with the next upstream PSN (`mux_next_psn`), so the memnode
//! executes them in exactly the order in which the switch applied them to its cache
//! (`lock_word`), whatever happens to the packets afterwards: a lost or reordered one
//! draws a sequence NAK and nothing behind it executes until it is re-sent.
//!
//! # The client side
//!
//! `SwitchAtomics` admits a diverted request only when every earlier request of its
//! connection has been answered. Its PSN on the client's own QP is not left empty: a
//! *filler* — a 0-byte WRITE (`conn_filler`) — goes up there in its place, so the
//! client's QP and the memnode's stay in step (no PSN/MSN offset: nothing about the
//! connection is lost when the switch restarts). The filler's ACK is dropped; a sequence
//! NAK saying the filler never arrived is turned back into the filler. The client's
//! answer is the ATOMIC ACK made from the multiplexed QP's response. Meanwhile the
//! connection is *pending*
//! (`CONN_PENDING`): **one outstanding request per client QP** while it has a request on
//! a tracked word — new requests on it are dropped (`held`) and come back as
//! retransmissions, because any answer on the client's own QP would acknowledge the
//! diverted request cumulatively before its result is known. Clients that keep one
//! request in flight per QP on tracked words (closed loop, as lock loops are) never
//! see this.
//!
//! # Map entries and retransmissions
//!
//! `mux_ring` maps an upstream PSN to its connection; `repl_up` holds the upstream PSN
//! of each connection's diverted request, `repl_orig` its original value. A client
//! retransmitting a pending request makes the switch re-send the *same* upstream
//! request (same PSN, same payload), recorded in `mux_resend`: if the memnode had
//! already executed it, it answers the duplicate WRITE with a cumulative ACK for its
//! latest PSN, which then completes the re-sender (everything up to that PSN was
//! executed). Sequence NAKs on the multiplexed QP are dropped; the clients' retransmissions
//! fill the gap.
//!
//! # The cache
//!
//! `lock_state` says whether `lock_word` holds the word's value. While it does not
//! (after tracking starts, or after a restart), atomics go up unconverted on the
//! multiplexed QP and `lock_state` remembers the upstream PSN of the latest one; when
//! that one's ATOMIC ACK returns, its outcome is the word's value (nothing later was
//! sent for it) and the cache is valid. The cache is soft state: losing it costs one
//! unconverted atomic per word.
//!
//! Limits (see `p4/README.md`): every access to a tracked word must be a CAS or FAA
//! through the switch (a WRITE to it would leave the cache stale); at most `MUX_RING`
//! requests may be issued on a multiplexed QP while one of them is still unanswered
//! (older map entries are overwritten); the memnode acknowledges every request (no
//! coalesced ACKs).

use verbs::wire::{BthRepr, Opcode, PSN_MASK, RethRepr, Syndrome};

use crate::functions::answer::{answer_atomic, atomic_ack_for, filler_of};
use crate::model::{
    Ctx, FillerAction, Intercept, LockKey, Packet, PairRegister, Register, RegisterAccess, Stage,
    join, psn_add, psn_diff, split,
};
use crate::spec::{
    self, DIR_UP, LOCK_CACHED, LOCK_SLOTS, MAX_CONNS, MUX_QPS, MUX_RING, PORT_MEMNODE, PSN_VALID,
    REG_LOCK_STATE, REG_LOCK_WORD, REG_MUX_NEXT_PSN, REG_MUX_RESEND, REG_MUX_RING, REG_REPL_CMP,
    REG_REPL_ORIG, REG_REPL_SLOT, REG_REPL_SWP, REG_REPL_UP,
};

/// `repl_slot` bit: the request went up as the original atomic (cache fill).
const SLOT_FILL: u32 = 1 << 16;
/// `repl_slot` bit: the request is a FAA.
const SLOT_FAA: u32 = 1 << 17;
const SLOT_MASK: u32 = 0xFFFF;
/// `repl_up`: the multiplexed QP's index sits at this bit.
const UP_MUX_SHIFT: u32 = 25;
/// `repl_up` bit: the request went up as the original atomic (cache fill).
const UP_FILL: u32 = 1 << 28;
const RING_CELLS: usize = MUX_RING * MUX_QPS;

/// The value a CAS or FAA leaves in a word that held `old`.
pub fn outcome(faa: bool, old: u64, compare: u64, swap_add: u64) -> u64 {
    if faa {
        old.wrapping_add(swap_add)
    } else if old == compare {
        swap_add
    } else {
        old
    }
}

fn ring_index(mux: u8, psn: u32) -> u32 {
    u32::from(mux) * MUX_RING as u32 + (psn & (MUX_RING as u32 - 1))
}

/// The `AtomicReplace` control and its registers.
#[derive(Debug)]
pub struct AtomicReplace {
    mux_next_psn: Register<MUX_QPS>,
    mux_ring: Register<RING_CELLS>,
    mux_resend: PairRegister<MUX_QPS>,
    repl_up: Register<MAX_CONNS>,
    repl_slot: Register<MAX_CONNS>,
    repl_orig: PairRegister<MAX_CONNS>,
    repl_cmp: PairRegister<MAX_CONNS>,
    repl_swp: PairRegister<MAX_CONNS>,
    lock_state: Register<LOCK_SLOTS>,
    lock_word: PairRegister<LOCK_SLOTS>,
}

impl Default for AtomicReplace {
    fn default() -> AtomicReplace {
        AtomicReplace::new()
    }
}

impl AtomicReplace {
    /// Zeroed registers.
    pub fn new() -> AtomicReplace {
        AtomicReplace {
            mux_next_psn: Register::new(&REG_MUX_NEXT_PSN),
            mux_ring: Register::new(&REG_MUX_RING),
            mux_resend: PairRegister::new(&REG_MUX_RESEND),
            repl_up: Register::new(&REG_REPL_UP),
            repl_slot: Register::new(&REG_REPL_SLOT),
            repl_orig: PairRegister::new(&REG_REPL_ORIG),
            repl_cmp: PairRegister::new(&REG_REPL_CMP),
            repl_swp: PairRegister::new(&REG_REPL_SWP),
            lock_state: Register::new(&REG_LOCK_STATE),
            lock_word: PairRegister::new(&REG_LOCK_WORD),
        }
    }

    /// Control plane: the multiplexed QP `mux` starts at upstream PSN `psn`.
    pub fn init_mux(&mut self, mux: u8, psn: u32) {
        self.mux_next_psn
            .cp_write(usize::from(mux), u64::from((psn & PSN_MASK) | PSN_VALID));
        self.mux_resend.cp_write(usize::from(mux), 0);
    }

    /// Control plane: forget the cached value of `slot` (tracking changed).
    pub fn invalidate(&mut self, slot: u32) {
        self.lock_state.cp_write(slot as usize, 0);
        self.lock_word.cp_write(slot as usize, 0);
    }

    /// Before `SwitchAtomics`, requests: an atomic on a tracked word is intercepted
    /// (table lookup only).
    pub fn classify(pkt: &mut Packet, ctx: &Ctx<'_>) {
        if ctx.mode & spec::mode::ATOMIC_REPLACE == 0 || pkt.meta.dir != DIR_UP {
            return;
        }
        if !matches!(pkt.bth.opcode, Opcode::CompareSwap | Opcode::FetchAdd) {
            return;
        }
        let Some(eth) = pkt.atomic_eth else {
            return;
        };
        let key = LockKey {
            rkey: eth.rkey,
            va: eth.va,
        };
        if let Some(t) = ctx.tables.tracked_lock.lookup(&key)
            && ctx.tables.mux_up.lookup(&t.mux).is_some()
        {
            pkt.meta.intercept = Some(Intercept::Divert {
                slot: t.slot,
                mux: t.mux,
            });
        }
    }

    /// Before `SwitchAtomics`, responses on a multiplexed QP: find the connection whose
    /// request this answers (`mux_ring`, or `mux_resend` for a cumulative ACK after a
    /// re-send) and check it is that connection's diverted request (`repl_up`).
    pub fn map_down(&mut self, pkt: &mut Packet, ctx: &mut Ctx<'_>) {
        let Some(mux) = pkt.meta.mux else {
            return;
        };
        let id = pkt.id;
        let a = pkt.bth.psn & PSN_MASK;
        let is_ack = matches!(pkt.aeth.map(|x| x.syndrome), Some(Syndrome::Ack { .. }))
            && matches!(
                pkt.bth.opcode,
                Opcode::Acknowledge | Opcode::AtomicAcknowledge
            );
        if !is_ack || ctx.mode & spec::mode::ATOMIC_REPLACE == 0 {
            // Sequence NAKs: the clients' retransmissions re-send the missing request.
            ctx.counters.atomic_replace.stale += 1;
            pkt.meta.drop = true;
            return;
        }
        // Stage A: mux_ring.
        let from_ring = self
            .mux_ring
            .read(id, ring_index(mux, a))
            .filter(|cell| cell >> 8 == a)
            .map(|cell| cell & 0xFF);
        // Stage B: mux_resend. An ACK at or past a re-sent request's PSN answers the
        // re-sender: the memnode answers a duplicate WRITE with a cumulative ACK for its
        // latest PSN, whose map entry belongs to someone else (who, if still waiting,
        // retransmits and is answered the same way).
        let resent = self
            .mux_resend
            .rmw(id, u32::from(mux), |lo, hi| {
                if lo & PSN_VALID != 0 && psn_diff(a, lo & PSN_MASK) >= 0 {
                    (0, 0, Some(hi & 0xFF))
                } else {
                    (lo, hi, None)
                }
            })
            .flatten();
        let Some(conn) = resent.or(from_ring) else {
            ctx.counters.atomic_replace.stale += 1;
            pkt.meta.drop = true;
            return;
        };
        // Stage C: repl_up (the connection's diverted request must be covered by `a`; a
        // cache-filling atomic needs its own ATOMIC ACK, which carries the value).
        let atomic_ack = pkt.bth.opcode == Opcode::AtomicAcknowledge;
        let ok = self.repl_up.read(id, conn).is_some_and(|u| {
            let exact = a == u & PSN_MASK;
            u & PSN_VALID != 0
                && (u >> UP_MUX_SHIFT) & 0x3 == u32::from(mux)
                && psn_diff(a, u & PSN_MASK) >= 0
                && (resent == Some(conn) || exact)
                && (u & UP_FILL == 0 || (exact && atomic_ack))
        });
        if !ok {
            ctx.counters.atomic_replace.stale += 1;
            pkt.meta.drop = true;
            return;
        }
        pkt.meta.conn = Some(conn as u8);
        pkt.meta.converted = true;
    }

    fn upstream(&mut self, pkt: &mut Packet, ctx: &mut Ctx<'_>, c: u32, slot: u32, mux: u8) {
        let (Some(ans), Some(eth)) = (pkt.meta.answer, pkt.atomic_eth) else {
            return;
        };
        let Some(up) = ctx.tables.mux_up.lookup(&mux).copied() else {
            pkt.meta.drop = true;
            return;
        };
        let id = pkt.id;
        let faa = pkt.bth.opcode == Opcode::FetchAdd;
        let filler_target = ctx.tables.conn_filler.lookup(&(c as u8)).copied();
        let counters = &mut ctx.counters.atomic_replace;
        if ans.replay && !ans.pending {
            // Already answered: answer again from the stored original value.
            let orig = self
                .repl_orig
                .rmw(id, c, |lo, hi| (lo, hi, join(lo, hi)))
                .unwrap_or(0);
            counters.replayed += 1;
            answer_atomic(pkt, ans.msn, orig);
            return;
        }
        let (u, fill, value) = if ans.replay {
            // Re-send the same upstream request.
            let up_cell = self.repl_up.read(id, c).unwrap_or(0);
            let u = up_cell & PSN_MASK;
            let fill = up_cell & UP_FILL != 0;
            self.mux_resend
                .rmw(id, u32::from(mux), |_, _| (u | PSN_VALID, c, ()));
            let orig = self
                .repl_orig
                .rmw(id, c, |lo, hi| (lo, hi, join(lo, hi)))
                .unwrap_or(0);
            counters.resent += 1;
            (u, fill, outcome(faa, orig, eth.compare, eth.swap_add))
        } else {
            // Stage 1: mux_next_psn (allocate the upstream PSN).
            let Some(u) = self.mux_next_psn.rmw(id, u32::from(mux), |v| {
                let u = v & PSN_MASK;
                (psn_add(u, 1) | PSN_VALID, u)
            }) else {
                pkt.meta.drop = true;
                return;
            };
            // Stage 2: mux_ring (map entry).
            self.mux_ring.write(id, ring_index(mux, u), (u << 8) | c);
            // Stage 3: lock_state (cached, or remember this unconverted atomic).
            let cached = self
                .lock_state
                .rmw(id, slot, |v| {
                    if v & LOCK_CACHED != 0 {
                        (v, true)
                    } else {
                        (u | PSN_VALID, false)
                    }
                })
                .unwrap_or(false);
            // Stage 4: repl_up.
            let fill_bit = if cached { 0 } else { UP_FILL };
            self.repl_up.write(
                id,
                c,
                u | PSN_VALID | (u32::from(mux) << UP_MUX_SHIFT) | fill_bit,
            );
            // Stage 5: lock_word (apply the atomic to the cached value).
            let (cmp, swp) = (eth.compare, eth.swap_add);
            let orig = if cached {
                self.lock_word.rmw(id, slot, |lo, hi| {
                    let old = join(lo, hi);
                    let (nlo, nhi) = split(outcome(faa, old, cmp, swp));
                    (nlo, nhi, old)
                })
            } else {
                None
            };
            // Stage 6-9: the connection's map state.
            let flags = if orig.is_none() { SLOT_FILL } else { 0 } | if faa { SLOT_FAA } else { 0 };
            self.repl_slot.write(id, c, (slot & SLOT_MASK) | flags);
            let stored = orig.unwrap_or(0);
            self.repl_orig.rmw(id, c, |_, _| {
                let (lo, hi) = split(stored);
                (lo, hi, ())
            });
            self.repl_cmp.rmw(id, c, |_, _| {
                let (lo, hi) = split(cmp);
                (lo, hi, ())
            });
            self.repl_swp.rmw(id, c, |_, _| {
                let (lo, hi) = split(swp);
                (lo, hi, ())
            });
            match orig {
                Some(old) => {
                    counters.converted += 1;
                    (u, false, outcome(faa, old, cmp, swp))
                }
                None => {
                    counters.filled += 1;
                    (u, true, 0)
                }
            }
        };
        // The filler takes the request's PSN on the client's own QP.
        let target = filler_target.unwrap_or(FillerAction {
            rkey: eth.rkey,
            va: eth.va,
            memnode_qpn: pkt.bth.dest_qpn,
        });
        let mut filler = filler_of(pkt, &target, ans.upstream_psn);
        filler.meta.egress_port = PORT_MEMNODE;
        pkt.meta.extra = Some(Box::new(filler));
        counters.fillers += 1;
        // The request leaves on the multiplexed QP.
        let mut bth = BthRepr::new(
            if fill {
                pkt.bth.opcode
            } else {
                Opcode::WriteOnly
            },
            up.memnode_qpn,
            u,
            true,
        );
        bth.pkey = pkt.bth.pkey;
        pkt.bth = bth;
        if !fill {
            pkt.atomic_eth = None;
            pkt.reth = Some(RethRepr {
                va: eth.va,
                rkey: eth.rkey,
                dma_len: 8,
            });
            pkt.payload = value.to_le_bytes().to_vec();
        }
        pkt.src = up.src;
        pkt.dst = up.dst;
        pkt.meta.egress_port = PORT_MEMNODE;
    }

    fn downstream(&mut self, pkt: &mut Packet, ctx: &mut Ctx<'_>, c: u32) {
        if pkt.meta.resend_filler {
            // The memnode says the filler never arrived: send it again.
            let Some(target) = ctx.tables.conn_filler.lookup(&(c as u8)).copied() else {
                pkt.meta.drop = true;
                return;
            };
            let psn = pkt.meta.wire_psn & PSN_MASK;
            let mut filler = filler_of(pkt, &target, psn);
            filler.src = pkt.ingress_dst;
            filler.dst = pkt.ingress_src;
            std::mem::swap(&mut filler.src_mac, &mut filler.dst_mac);
            filler.meta.egress_port = PORT_MEMNODE;
            filler.meta.dir = DIR_UP;
            filler.meta.answered = true;
            *pkt = filler;
            return;
        }
        if !pkt.meta.converted {
            return;
        }
        let Some(client) = ctx.tables.conn_client.lookup(&(c as u8)).copied() else {
            pkt.meta.drop = true;
            return;
        };
        let id = pkt.id;
        let a = pkt.meta.wire_psn & PSN_MASK;
        // Stage 6: repl_slot.
        let s = self.repl_slot.read(id, c).unwrap_or(0);
        let counters = &mut ctx.counters.atomic_replace;
        let original = if s & SLOT_FILL != 0 {
            // The memnode executed the original atomic: its value fills the cache if no
            // later atomic went up for the word meanwhile.
            let o = pkt.atomic_ack_eth.map(|x| x.original).unwrap_or(0);
            let slot = s & SLOT_MASK;
            let fills = self
                .lock_state
                .rmw(id, slot, |v| {
                    if v & LOCK_CACHED == 0 && v == a | PSN_VALID {
                        (LOCK_CACHED, true)
                    } else {
                        (v, false)
                    }
                })
                .unwrap_or(false);
            let cmp = self
                .repl_cmp
                .rmw(id, c, |lo, hi| (lo, hi, join(lo, hi)))
                .unwrap_or(0);
            let swp = self
                .repl_swp
                .rmw(id, c, |lo, hi| (lo, hi, join(lo, hi)))
                .unwrap_or(0);
            if fills {
                let (lo, hi) = split(outcome(s & SLOT_FAA != 0, o, cmp, swp));
                self.lock_word.rmw(id, slot, |_, _| (lo, hi, ()));
            }
            self.repl_orig.rmw(id, c, |_, _| {
                let (lo, hi) = split(o);
                (lo, hi, ())
            });
            o
        } else {
            self.repl_orig
                .rmw(id, c, |lo, hi| (lo, hi, join(lo, hi)))
                .unwrap_or(0)
        };
        counters.answered += 1;
        let msn = pkt.aeth.map(|x| x.msn).unwrap_or(0);
        atomic_ack_for(pkt, &client, msn, original);
    }
}

impl Stage for AtomicReplace {
    fn name(&self) -> &'static str {
        "AtomicReplace"
    }

    fn apply(&mut self, pkt: &mut Packet, ctx: &mut Ctx<'_>) {
        let Some(conn) = pkt.meta.conn else {
            return;
        };
        let c = u32::from(conn);
        if pkt.meta.dir == DIR_UP {
            if let Some(Intercept::Divert { slot, mux }) = pkt.meta.intercept {
                self.upstream(pkt, ctx, c, slot, mux);
            }
        } else {
            self.downstream(pkt, ctx, c);
        }
    }

    fn registers(&self) -> Vec<&dyn RegisterAccess> {
        vec![
            &self.mux_next_psn,
            &self.mux_ring,
            &self.mux_resend,
            &self.repl_up,
            &self.repl_slot,
            &self.repl_orig,
            &self.repl_cmp,
            &self.repl_swp,
            &self.lock_state,
            &self.lock_word,
        ]
    }

    fn registers_mut(&mut self) -> Vec<&mut dyn RegisterAccess> {
        vec![
            &mut self.mux_next_psn,
            &mut self.mux_ring,
            &mut self.mux_resend,
            &mut self.repl_up,
            &mut self.repl_slot,
            &mut self.repl_orig,
            &mut self.repl_cmp,
            &mut self.repl_swp,
            &mut self.lock_state,
            &mut self.lock_word,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_of_cas_and_faa() {
        assert_eq!(outcome(false, 0, 0, 1), 1);
        assert_eq!(outcome(false, 1, 0, 1), 1);
        assert_eq!(outcome(false, 7, 0, 1), 7);
        assert_eq!(outcome(true, u64::MAX, 0, 2), 1);
    }
}
