//! `SwitchAtomics`: connection tracking with PSN/MSN offsets, and CAS/FAA on a
//! switch-owned address range answered from registers in half a round trip (sync seed
//! §5.4).
//!
//! A queue pair may mix requests for memnode memory (forwarded) with atomics on
//! switch-owned words (answered by the switch). Every switch answer consumes a client
//! PSN and a message the memnode never sees, so the switch keeps per connection:
//!
//! * `conn_acked` — the memnode-side PSN up to which the memnode has answered;
//! * `conn_epsn` — lo: the next expected client PSN; hi: the PSN offset (client PSN
//!   minus memnode PSN). Forwarded requests leave with `psn - offset`, responses come
//!   back with `psn + offset`;
//! * `conn_sw` — lo: client PSN of the last switch answer; hi: the memnode-side PSN
//!   boundary at that moment;
//! * `conn_msn` — lo: MSN offset (switch answers); hi: the last MSN from the memnode;
//! * `answer_psn` / `answer_result` — the connection's switch answers, a ring of
//!   [`ANSWER_RING`] cells indexed by client PSN: the PSN of each answer and, for a
//!   switch-owned atomic, the value it returned.
//!
//! Rules:
//! 1. An atomic on a switch-owned word is answered only when every earlier request of
//!    its connection has been answered (its memnode-side PSN equals `conn_acked`):
//!    RC acknowledgements are cumulative, so answering early would complete earlier
//!    requests the memnode may not have executed. Otherwise it is dropped (`deferred`)
//!    and the requester's retransmission brings it back.
//! 2. A retransmitted atomic whose PSN is still in the answer ring is answered from
//!    `answer_result` and never re-applied (`replayed`). Any of the connection's
//!    answers is replayed, not only the last: with several requests in flight on one
//!    queue pair, a lost answer comes back as a retransmission *behind* later answers
//!    (go-back-N from the first request without a response), and must be answered
//!    again or the queue pair runs out of retries. An intercepted request is replayed
//!    the same way (its function answers it from its state); a diverted one (atomic
//!    replacement) only while it is the connection's last answer, since its answer
//!    comes from per-connection state that a later diverted request replaces. A
//!    retransmission whose cell a later answer took (more than [`ANSWER_RING`] PSNs in
//!    flight) is dropped like a deferred request.
//! 3. Duplicates and responses from before the last switch answer cannot be translated
//!    with the current offset; they are dropped (`stale`).
//! 4. A misaligned atomic on a switch-owned word is refused with NAK(invalid request),
//!    which consumes its PSN like an answer, as a responder's NAK does.
//!
//! The tracking runs on every routed packet; only answering needs the mode bit.
//!
//! Other functions reuse this tracking for requests they answer or divert
//! ([`crate::model::Intercept`], classified by table lookups before this stage): such a
//! request is admitted under rule 1 like a switch-owned atomic, consumes a client PSN
//! and message the memnode's QP never sees, and gets its MSN here
//! ([`crate::model::AnswerSlot`]); the function's own stage builds the answer. A
//! diverted request (atomic replacement) additionally sets [`CONN_PENDING`] in
//! `conn_epsn`: until its answer comes back from the multiplexed QP, new requests on
//! the connection are dropped (`atomic_replace.held`; the client retransmits), since an
//! answer on the client's own QP would acknowledge the diverted request cumulatively.
//!
//! # Restarts
//!
//! The registers are lost with the switch; the first packet of a connection afterwards
//! teaches `conn_acked` and `conn_epsn` again (offsets restart at 0, so switch-owned
//! atomics answered before the restart leave the connection out of step: hard state).
//! A diverted request whose filler the previous incarnation had sent may find the
//! memnode's answer to that filler first (`conn_acked` one past the request's PSN):
//! nothing else will ever answer that PSN, so the request is admitted again on its
//! first retransmission — its filler is then a duplicate the memnode acknowledges, and
//! the request is executed on the multiplexed QP. It may have executed there before the
//! restart too: after a restart a diverted atomic is executed *at least* once, which
//! owner-tagged lock words tolerate (an acquire that finds its own tag holds the lock).

use verbs::wire::{NakCode, Opcode, PSN_MASK, Syndrome};

use crate::functions::answer::{answer_atomic, answer_nak, filler_of};
use crate::model::{
    AnswerSlot, Ctx, Intercept, Packet, PairRegister, Register, RegisterAccess, Stage, psn_add,
    psn_diff, psn_sub,
};
use crate::spec::{
    self, ANSWER_RING, ANSWER_SLOTS, ATOMIC_SLOTS, CONN_FILLER_LAST, CONN_PENDING, DIR_UP,
    MAX_CONNS, PSN_VALID, REG_ANSWER_PSN, REG_ANSWER_RESULT, REG_ATOMIC_WORD, REG_CONN_ACKED,
    REG_CONN_EPSN, REG_CONN_MSN, REG_CONN_SW,
};

const MSN_MASK: u32 = 0x00FF_FFFF;
/// Bit of `conn_sw.lo`: the last admitted request was diverted (atomic replacement) and
/// a filler took its PSN on the client's own QP, at memnode-side PSN `conn_sw.hi`.
pub const SW_FILLER: u32 = 1 << 25;

/// The answer-ring cell of connection `c`'s request at client PSN `psn`.
pub fn answer_cell(c: u32, psn: u32) -> u32 {
    c * ANSWER_RING as u32 + (psn & (ANSWER_RING as u32 - 1))
}

/// The `SwitchAtomics` control and its registers.
#[derive(Debug)]
pub struct SwitchAtomics {
    conn_acked: Register<MAX_CONNS>,
    conn_epsn: PairRegister<MAX_CONNS>,
    conn_sw: PairRegister<MAX_CONNS>,
    answer_psn: Register<ANSWER_SLOTS>,
    conn_msn: PairRegister<MAX_CONNS>,
    atomic_word: PairRegister<ATOMIC_SLOTS>,
    answer_result: PairRegister<ANSWER_SLOTS>,
}

impl Default for SwitchAtomics {
    fn default() -> SwitchAtomics {
        SwitchAtomics::new()
    }
}

/// What the `conn_epsn` stage decided for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// A new request for the memnode.
    Forward,
    /// A retransmitted request for the memnode.
    Duplicate,
    /// An atomic on a switch-owned word to execute and answer now.
    Answer,
    /// An already-answered switch atomic, if `conn_sw` confirms it.
    Replay,
    /// An atomic on a switch-owned word that must wait.
    Defer,
    /// A new request behind a diverted one still in flight.
    Held,
}

impl Class {
    /// `self` if `ok`, else [`Class::Defer`].
    fn or_defer(self, ok: bool) -> Class {
        if ok { self } else { Class::Defer }
    }
}

/// Where a switch-owned atomic lands.
#[derive(Debug, Clone, Copy)]
struct Owned {
    slot: u32,
    aligned: bool,
}

impl SwitchAtomics {
    /// Zeroed registers.
    pub fn new() -> SwitchAtomics {
        SwitchAtomics {
            conn_acked: Register::new(&REG_CONN_ACKED),
            conn_epsn: PairRegister::new(&REG_CONN_EPSN),
            conn_sw: PairRegister::new(&REG_CONN_SW),
            answer_psn: Register::new(&REG_ANSWER_PSN),
            conn_msn: PairRegister::new(&REG_CONN_MSN),
            atomic_word: PairRegister::new(&REG_ATOMIC_WORD),
            answer_result: PairRegister::new(&REG_ANSWER_RESULT),
        }
    }

    /// Control plane: start tracking connection `conn` whose first client PSN is `psn`.
    pub fn init_connection(&mut self, conn: u8, psn: u32) {
        let c = usize::from(conn);
        let psn = psn & PSN_MASK;
        self.conn_acked.cp_write(c, u64::from(psn | PSN_VALID));
        self.conn_epsn.cp_write(c, u64::from(psn | PSN_VALID));
        self.conn_sw.cp_write(c, 0);
        self.conn_msn.cp_write(c, 0);
        for p in 0..ANSWER_RING as u32 {
            let cell = answer_cell(u32::from(conn), p) as usize;
            self.answer_psn.cp_write(cell, 0);
            self.answer_result.cp_write(cell, 0);
        }
    }

    fn owned(pkt: &Packet, ctx: &Ctx<'_>) -> Option<Owned> {
        if ctx.mode & spec::mode::SWITCH_ATOMICS == 0 {
            return None;
        }
        let eth = pkt.atomic_eth?;
        let range = ctx.tables.atomic_range.lookup(&eth.rkey)?;
        let offset = eth.va.checked_sub(range.base_va)?;
        if offset >= u64::from(range.slots) * 8 {
            return None;
        }
        Some(Owned {
            slot: range.first_slot.wrapping_add((offset >> 3) as u32),
            aligned: eth.va & 7 == 0,
        })
    }

    fn upstream(&mut self, pkt: &mut Packet, ctx: &mut Ctx<'_>, c: u32) {
        let op = pkt.bth.opcode;
        if !op.is_request() {
            return;
        }
        let id = pkt.id;
        let p = pkt.bth.psn & PSN_MASK;
        let owned = SwitchAtomics::owned(pkt, ctx);
        let npsn = match (op, pkt.reth) {
            (Opcode::ReadRequest, Some(reth)) => {
                let shift = u32::from(pkt.meta.pmtu_log2.min(31));
                let len = u64::from(reth.dma_len);
                let n = (len + (1u64 << shift) - 1) >> shift;
                n.clamp(1, u64::from(PSN_MASK)) as u32
            }
            _ => 1,
        };
        // Stage 1: conn_acked (read; learnt from this packet after a restart).
        let Some(acked) = self.conn_acked.rmw(id, c, |v| {
            if v & PSN_VALID == 0 {
                (p | PSN_VALID, p)
            } else {
                (v, v & PSN_MASK)
            }
        }) else {
            pkt.meta.drop = true;
            return;
        };
        // Stage 2: conn_epsn (expected PSN, offset, diverted request pending).
        let intercept = pkt.meta.intercept;
        let is_owned = owned.is_some() || intercept.is_some();
        let divert = matches!(intercept, Some(Intercept::Divert { .. }));
        // Intercepted requests leave a filler on the client's own QP in their place.
        let filled = intercept.is_some();
        let Some((class, off, pending)) = self.conn_epsn.rmw(id, c, |lo, hi| {
            let learning = lo & PSN_VALID == 0;
            let (e, off) = if learning {
                (p, 0)
            } else {
                (lo & PSN_MASK, hi & PSN_MASK)
            };
            let pending = lo & CONN_PENDING;
            let filler_last = lo & CONN_FILLER_LAST;
            let keep = pending | filler_last;
            let d = psn_diff(p, e);
            // Quiet: everything before this request was answered — or all but the
            // filler of a diverted request just before it (invisible to the client) —
            // or, on the first request after a restart, the memnode has already
            // answered this very PSN: a filler sent by the previous incarnation took
            // it, and the diverted request it stood for is admitted again (see the
            // module docs on restarts).
            let quiet = psn_sub(p, off) == acked
                || (filler_last != 0 && d == 0 && psn_sub(p, off) == psn_add(acked, 1))
                || (learning && filled && psn_add(p, 1) == acked);
            if pending != 0 && d >= 0 {
                (lo, hi, (Class::Held, off, true))
            } else if is_owned {
                // (A retransmitted diverted request is quiet too — the offset did not
                // move — but must be replayed, not applied again.)
                if (d == 0 || (d < 0 && !filled)) && quiet {
                    let e2 = if d == 0 { psn_add(p, 1) } else { e };
                    // An intercepted request keeps its PSN on the client's own QP (a
                    // filler goes up there), so the offset stays; a switch-owned atomic's
                    // answer shifts it.
                    let (flag, off2) = if divert {
                        (CONN_PENDING | CONN_FILLER_LAST, off)
                    } else if filled {
                        (CONN_FILLER_LAST, off)
                    } else {
                        (filler_last, psn_add(off, 1))
                    };
                    (e2 | PSN_VALID | flag, off2, (Class::Answer, off, divert))
                } else if d < 0 {
                    let lo2 = e | PSN_VALID | keep;
                    (lo2, off, (Class::Replay, off, pending != 0))
                } else {
                    (e | PSN_VALID | keep, off, (Class::Defer, off, false))
                }
            } else if d >= 0 {
                let lo2 = psn_add(p, npsn) | PSN_VALID;
                (lo2, off, (Class::Forward, off, false))
            } else {
                (e | PSN_VALID | keep, off, (Class::Duplicate, off, false))
            }
        }) else {
            pkt.meta.drop = true;
            return;
        };
        // Stage 3: conn_sw (record an answer; check duplicates against the last one).
        let class = match class {
            Class::Answer => {
                let up = psn_sub(p, off);
                let flag = if filled { SW_FILLER } else { 0 };
                self.conn_sw
                    .rmw(id, c, |_, _| (p | PSN_VALID | flag, up | PSN_VALID, ()));
                Class::Answer
            }
            Class::Replay => {
                let last = self
                    .conn_sw
                    .rmw(id, c, |lo, hi| (lo, hi, lo & !SW_FILLER == p | PSN_VALID))
                    .unwrap_or(false);
                Class::Replay.or_defer(last || !divert)
            }
            Class::Duplicate | Class::Defer => {
                // After an intercepted request the offset is unchanged: older duplicates
                // still translate. A retransmission while the memnode still misses a
                // filler (it NAKs a gap only once, and the re-sent filler may be lost
                // too) sends the filler again.
                let (stale, refill) = self
                    .conn_sw
                    .rmw(id, c, |lo, hi| {
                        let filler = lo & SW_FILLER != 0 && hi & PSN_VALID != 0;
                        let stale = class == Class::Duplicate
                            && lo & PSN_VALID != 0
                            && !filler
                            && psn_diff(p, lo & PSN_MASK) < 0;
                        let last = hi & PSN_MASK;
                        let refill = filler && (acked == last || psn_add(acked, 1) == last);
                        (lo, hi, (stale, refill))
                    })
                    .unwrap_or((true, false));
                if refill && let Some(target) = ctx.tables.conn_filler.lookup(&(c as u8)) {
                    let mut f = filler_of(pkt, target, acked);
                    f.meta.egress_port = crate::spec::PORT_MEMNODE;
                    f.meta.intercept = None;
                    ctx.counters.atomic_replace.fillers += 1;
                    if class == Class::Defer || stale {
                        // The request itself waits; the filler goes in its place.
                        *pkt = f;
                        return;
                    }
                    pkt.meta.extra = Some(Box::new(f));
                }
                if stale {
                    ctx.counters.switch_atomics.stale += 1;
                    pkt.meta.drop = true;
                    return;
                }
                class
            }
            other => other,
        };
        // Stage 3b: answer_psn (record a new answer; a replay needs its PSN there).
        let class = match class {
            Class::Answer => {
                self.answer_psn
                    .rmw(id, answer_cell(c, p), |_| (p | PSN_VALID, ()));
                Class::Answer
            }
            Class::Replay => {
                let answered = self
                    .answer_psn
                    .rmw(id, answer_cell(c, p), |v| (v, v == p | PSN_VALID))
                    .unwrap_or(false);
                Class::Replay.or_defer(answered)
            }
            other => other,
        };
        match class {
            Class::Forward | Class::Duplicate => {
                if off != 0 {
                    ctx.counters.switch_atomics.translated += 1;
                }
                pkt.bth.psn = psn_sub(p, off);
            }
            Class::Defer => {
                if is_owned && psn_diff(p, acked) >= 0 {
                    ctx.counters.switch_atomics.deferred += 1;
                } else {
                    ctx.counters.switch_atomics.stale += 1;
                }
                pkt.meta.drop = true;
            }
            Class::Held => {
                ctx.counters.atomic_replace.held += 1;
                pkt.meta.drop = true;
            }
            Class::Answer | Class::Replay => {
                let replay = class == Class::Replay;
                match owned {
                    Some(owned) => self.answer(pkt, ctx, c, owned, replay),
                    None => self.admit(pkt, c, replay, pending, psn_sub(p, off)),
                }
            }
        }
    }

    /// An intercepted request was admitted: count its message (unless it is a replay or
    /// diverted: a diverted request's message is its filler's) and leave the answer to
    /// its function's stage.
    fn admit(&mut self, pkt: &mut Packet, c: u32, replay: bool, pending: bool, up: u32) {
        // A new answer's message is its filler's, which the memnode counts (the filler's
        // ACK is dropped before it updates `hi`); a diverted request's is counted when
        // its answer comes back.
        let count = !replay && !matches!(pkt.meta.intercept, Some(Intercept::Divert { .. }));
        // Stage 4: conn_msn.
        let msn = self
            .conn_msn
            .rmw(pkt.id, c, |lo, hi| {
                let hi2 = if count {
                    hi.wrapping_add(1) & MSN_MASK
                } else {
                    hi
                };
                (lo, hi2, hi2.wrapping_add(lo) & MSN_MASK)
            })
            .unwrap_or(0);
        pkt.meta.answer = Some(AnswerSlot {
            msn,
            replay,
            pending,
            upstream_psn: up,
        });
    }

    /// A multiplexed QP's response for this connection's diverted request: it answers
    /// the client PSN of the connection's last admitted request, with its MSN, and ends
    /// the pending state. A response for a connection with nothing pending is a
    /// duplicate: dropped.
    fn converted(&mut self, pkt: &mut Packet, ctx: &mut Ctx<'_>, c: u32) {
        let id = pkt.id;
        // Stage 2: conn_epsn (clear the pending bit).
        let pending = self
            .conn_epsn
            .rmw(id, c, |lo, hi| {
                (lo & !CONN_PENDING, hi, lo & CONN_PENDING != 0)
            })
            .unwrap_or(false);
        if !pending {
            ctx.counters.atomic_replace.stale += 1;
            pkt.meta.drop = true;
            return;
        }
        // Stage 3: conn_sw (the client PSN of the diverted request).
        let psn = self
            .conn_sw
            .rmw(id, c, |lo, hi| (lo, hi, lo & PSN_MASK))
            .unwrap_or(0);
        // Stage 4: conn_msn.
        let msn = self
            .conn_msn
            .rmw(id, c, |lo, hi| {
                // The filler's message, which the memnode counted (its own ACK is
                // dropped before it updates `hi`).
                let hi2 = hi.wrapping_add(1) & MSN_MASK;
                (lo, hi2, hi2.wrapping_add(lo) & MSN_MASK)
            })
            .unwrap_or(0);
        pkt.bth.psn = psn;
        if let Some(aeth) = pkt.aeth.as_mut() {
            aeth.msn = msn;
        }
    }

    fn answer(&mut self, pkt: &mut Packet, ctx: &mut Ctx<'_>, c: u32, owned: Owned, replay: bool) {
        let id = pkt.id;
        // Stage 4: conn_msn.
        let msn = self
            .conn_msn
            .rmw(id, c, |lo, hi| {
                let lo2 = if replay {
                    lo
                } else {
                    lo.wrapping_add(1) & MSN_MASK
                };
                (lo2, hi, hi.wrapping_add(lo2) & MSN_MASK)
            })
            .unwrap_or(0);
        let Some(eth) = pkt.atomic_eth else {
            pkt.meta.drop = true;
            return;
        };
        let mut nak = None;
        // Stage 5: atomic_word (one dual-width ALU action: CAS compares both halves,
        // FAA carries from lo into hi).
        let result = if replay {
            None
        } else if !owned.aligned {
            nak = Some(NakCode::InvalidRequest);
            None
        } else {
            let (cmp_lo, cmp_hi) = (eth.compare as u32, (eth.compare >> 32) as u32);
            let (arg_lo, arg_hi) = (eth.swap_add as u32, (eth.swap_add >> 32) as u32);
            let cas = pkt.bth.opcode == Opcode::CompareSwap;
            self.atomic_word.rmw(id, owned.slot, |lo, hi| {
                let (lo2, hi2) = if cas {
                    if lo == cmp_lo && hi == cmp_hi {
                        (arg_lo, arg_hi)
                    } else {
                        (lo, hi)
                    }
                } else {
                    let carry = u32::from(lo > !arg_lo);
                    (
                        lo.wrapping_add(arg_lo),
                        hi.wrapping_add(arg_hi).wrapping_add(carry),
                    )
                };
                (lo2, hi2, (u64::from(hi) << 32) | u64::from(lo))
            })
        };
        // Stage 6: answer_result (store a new answer's value; replays read it back).
        let cell = answer_cell(c, pkt.bth.psn & PSN_MASK);
        let original = if replay {
            self.answer_result
                .rmw(id, cell, |lo, hi| {
                    (lo, hi, (u64::from(hi) << 32) | u64::from(lo))
                })
                .unwrap_or(0)
        } else if let Some(v) = result {
            self.answer_result
                .rmw(id, cell, |_, _| (v as u32, (v >> 32) as u32, v))
                .unwrap_or(v)
        } else {
            0
        };
        // Turn the request into the answer, sent back out of the ingress port.
        match nak {
            Some(code) => answer_nak(pkt, code, msn),
            None => answer_atomic(pkt, msn, original),
        }
        let counters = &mut ctx.counters.switch_atomics;
        match (replay, nak) {
            (true, _) => counters.replayed += 1,
            (false, Some(_)) => counters.refused += 1,
            (false, None) => counters.answered += 1,
        }
    }

    fn downstream(&mut self, pkt: &mut Packet, ctx: &mut Ctx<'_>, c: u32) {
        if pkt.bth.opcode.is_request() {
            return;
        }
        if pkt.meta.converted {
            self.converted(pkt, ctx, c);
            return;
        }
        let id = pkt.id;
        let u = pkt.bth.psn & PSN_MASK;
        let seq_nak = matches!(
            pkt.aeth.map(|a| a.syndrome),
            Some(Syndrome::Nak(NakCode::PsnSequenceError))
        );
        // A NAK(sequence) says everything before `u` was executed; any other response
        // answers `u` itself.
        let answered = if seq_nak { u } else { psn_add(u, 1) };
        // Stage 1: conn_acked.
        self.conn_acked.rmw(id, c, |v| {
            if v & PSN_VALID == 0 || psn_diff(answered, v & PSN_MASK) > 0 {
                (answered | PSN_VALID, ())
            } else {
                (v, ())
            }
        });
        // Stage 2: conn_epsn (read the offset).
        let off = self
            .conn_epsn
            .rmw(id, c, |lo, hi| {
                let off = if lo & PSN_VALID == 0 {
                    0
                } else {
                    hi & PSN_MASK
                };
                (lo, hi, off)
            })
            .unwrap_or(0);
        // Stage 3: conn_sw (responses from before the last switch answer are stale; the
        // response to a diverted request's filler is dropped, and a sequence NAK saying
        // the filler never arrived sends it again).
        let (stale, filler) = self
            .conn_sw
            .rmw(id, c, |lo, hi| {
                let filler = lo & SW_FILLER != 0 && hi & PSN_VALID != 0;
                let stale = hi & PSN_VALID != 0 && !filler && psn_diff(u, hi & PSN_MASK) < 0;
                // The last filler, or (sequence NAK only) the one before it, which
                // `CONN_FILLER_LAST` may have let stay unanswered.
                let last = u == hi & PSN_MASK;
                let before = seq_nak && psn_add(u, 1) == hi & PSN_MASK;
                (lo, hi, (stale, filler && (last || before)))
            })
            .unwrap_or((false, false));
        if filler {
            if seq_nak {
                ctx.counters.atomic_replace.fillers += 1;
                pkt.meta.resend_filler = true;
            } else {
                pkt.meta.drop = true;
            }
            return;
        }
        if stale {
            ctx.counters.switch_atomics.stale += 1;
            pkt.meta.drop = true;
            return;
        }
        // Stage 4: conn_msn.
        let msn_in = pkt.aeth.map(|a| a.msn);
        let msn_off = self
            .conn_msn
            .rmw(id, c, |lo, hi| match msn_in {
                Some(m) => (lo, m & MSN_MASK, lo),
                None => (lo, hi, lo),
            })
            .unwrap_or(0);
        if off != 0 || msn_off != 0 {
            ctx.counters.switch_atomics.translated += 1;
        }
        pkt.bth.psn = psn_add(u, off);
        if let Some(aeth) = pkt.aeth.as_mut() {
            aeth.msn = aeth.msn.wrapping_add(msn_off) & MSN_MASK;
        }
    }
}

impl Stage for SwitchAtomics {
    fn name(&self) -> &'static str {
        "SwitchAtomics"
    }

    fn apply(&mut self, pkt: &mut Packet, ctx: &mut Ctx<'_>) {
        let Some(conn) = pkt.meta.conn else {
            return;
        };
        let c = u32::from(conn);
        if pkt.meta.dir == DIR_UP {
            self.upstream(pkt, ctx, c);
        } else {
            self.downstream(pkt, ctx, c);
        }
    }

    fn registers(&self) -> Vec<&dyn RegisterAccess> {
        vec![
            &self.conn_acked,
            &self.conn_epsn,
            &self.conn_sw,
            &self.answer_psn,
            &self.conn_msn,
            &self.atomic_word,
            &self.answer_result,
        ]
    }

    fn registers_mut(&mut self) -> Vec<&mut dyn RegisterAccess> {
        vec![
            &mut self.conn_acked,
            &mut self.conn_epsn,
            &mut self.conn_sw,
            &mut self.answer_psn,
            &mut self.conn_msn,
            &mut self.atomic_word,
            &mut self.answer_result,
        ]
    }
}
