//! `ReadBalance`: READs of replicated, immutable data served by any serving member of
//! the replica set, chosen by the switch.
//!
//! A client marks a READ as balanceable by sending it to the primary under the set's
//! *read alias* memory key (table `balance_rkey`). The switch picks a member with the
//! set's policy ([`super::read_balance_policy`]); syncing members are never picked.
//!
//! * **The primary**: the READ goes on under the primary's real key, as any READ.
//! * **A backup**: the READ leaves on the switch's own queue pair to that backup (a
//!   *read lane*: `balance_lane`, its own PSNs `lb_next0/1`), at the same offset of
//!   the backup's region under the backup's key. In its place a *filler* — a 0-byte
//!   WRITE at the READ's PSN — goes to the primary on the client's queue pair, so the
//!   primary's expected PSN and MSN stay in step with the client's. The backup's READ
//!   RESPONSE ONLY comes back on the lane (`balance_answer`) and leaves to the client
//!   as the response at the client's PSN, on the client's queue pair and addressing.
//!   The primary's ACK of the filler reaches the client too; the soft-RoCE requester
//!   never completes a READ from an ACK, and the MSN it checks counts the filler as the
//!   READ's message, so the ACK is harmless.
//!
//! Only single-packet READs are balanced (1 to [`BALANCE_MAX_LEN`] bytes, at most the
//! client's path MTU). A longer READ under a read alias key is dropped (counted
//! `refused`): clients mark single-packet READs only. Sending it on to the primary
//! would not be safe — a retransmission resuming it from its second packet looks
//! exactly like a short balanceable READ at a PSN inside it.
//!
//! # Retransmissions and loss
//!
//! The switch keeps no bytes. Per connection, `lb_map` remembers for the last
//! [`MAP_SLOTS`] balanced client PSNs (one cell per PSN modulo the slot count) which
//! member served it, and `lb_mapq` the lane PSN its READ took:
//!
//! * a retransmission of a READ that a member served goes to the *same* member — a
//!   READ the primary executed is re-executed there; one that a filler replaced on the
//!   primary must never reach the primary as a READ (the primary's responder would
//!   refuse a READ at a PSN where it executed a WRITE);
//! * on a lane, the retransmission reuses the READ's lane PSN while the lane has not
//!   answered it: a lane READ lost before the backup leaves the backup expecting that
//!   PSN (later lane READs are dropped there with one sequence NAK), and only that
//!   PSN fills the gap. Once the lane answered it (the client lost the response, or
//!   the backup refused a duplicate it no longer remembers), the retransmission takes
//!   a fresh lane PSN;
//! * a client PSN older than its slot's owner is dropped (`stale`): it cannot be
//!   told apart from a retransmission of a READ whose record is gone. Clients keep
//!   fewer than [`MAP_SLOTS`] PSNs outstanding per queue pair.
//!
//! * the primary's sequence NAK at a PSN whose READ went to a backup means the
//!   filler there was lost; the client may already have the READ's response and
//!   never send it again, so the switch turns the NAK into the filler (to the key,
//!   address and QPN of the connection's last balanced READ: `lb_fill_key`,
//!   `lb_fill_va`).
//!
//! Lane PSNs map back to their connection and client PSN through `lb_owner0/1`
//! ([`OWNER_SLOTS`] per set and backup; a lane with more READs outstanding would
//! overwrite entries and lose answers, which come back by retransmission).
//!
//! # What may be balanced (the client's side)
//!
//! Only bytes that are identical on every serving member whenever a reader can reach
//! them: RACE KV blocks and the immutable part of Clover nodes are written to every
//! copy before anything links them, and never change until reclaimed. Words that
//! change after publication — bucket slots, Clover headers, in-place tuples — differ
//! between members while a write is in progress and must be read from the primary.
//! `docs/zero-sided.md` ("Load-balanced READs") has the argument.
//!
//! Limits: a lane PSN whose READ is lost and whose owner never sends it again (the
//! client gone, or a network duplicate of an answered READ that was lost on the lane)
//! stalls the lane until its queue pair is replaced; the READ of a client in flight
//! when the switch restarts may be refused by the primary (the record of a filler is
//! soft state). Not used with switch atomics or atomic replacement on the same
//! connection (their connection tracking does not know the fillers).

use std::collections::HashMap;
use std::net::SocketAddrV4;

use verbs::wire::{AethRepr, BthRepr, IPV4_DF, Opcode, RethRepr, Syndrome};

use crate::functions::answer::filler_of;
use crate::functions::read_balance_policy::{MAX_MEMBERS, MemberState, ReadBalancePolicy};
use crate::model::{
    Ctx, FillerAction, Packet, PairRegister, Register, RegisterAccess, RouteKey, join, psn_add,
    psn_diff, split,
};
use crate::spec::{
    DIR_DOWN, DIR_UP, LB_MAP_ANSWERED, LB_MAP_MEMBER_SHIFT, LB_MAP_SLOTS, LB_MAX_LEN,
    LB_OWNER_SLOTS, MAX_CONNS, MIRROR_SETS, PORT_CLIENT, PORT_MEMNODE, PSN_VALID, REG_LB_CURSOR,
    REG_LB_FILL_KEY, REG_LB_FILL_VA, REG_LB_MAP, REG_LB_MAPQ, REG_LB_NEXT0, REG_LB_NEXT1,
    REG_LB_OWNER0, REG_LB_OWNER1,
};

const PSN_MASK: u32 = verbs::wire::PSN_MASK;
/// The longest READ that is balanced: one response packet at the lanes' path MTU.
pub const BALANCE_MAX_LEN: u32 = LB_MAX_LEN;
/// Balanced client PSNs remembered per connection.
pub const MAP_SLOTS: usize = LB_MAP_SLOTS;
/// Lane PSNs mapped back to their client per set and backup.
pub const OWNER_SLOTS: usize = LB_OWNER_SLOTS;
const MAP_CELLS: usize = MAX_CONNS * MAP_SLOTS;
const OWNER_CELLS: usize = MIRROR_SETS * OWNER_SLOTS;
/// `lb_map`: the member at these bits (0 = primary).
const MAP_MEMBER_SHIFT: u32 = LB_MAP_MEMBER_SHIFT;
/// `lb_map`: the lane answered the READ's lane PSN (a retransmission needs a new one).
const MAP_ANSWERED: u32 = LB_MAP_ANSWERED;

/// Action of table `balance_rkey` (key: a set's read alias key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BalanceSetAction {
    /// The set's index.
    pub set: u8,
    /// The primary's real key.
    pub rkey: u32,
    /// How many backups the set has (0–2).
    pub backups: u8,
    /// Which backups serve balanced READs (bit `b` for backup `b`); a syncing backup's
    /// bit is clear.
    pub serving: u8,
}

/// Action of table `balance_lane` (key: set and backup): the switch's read lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BalanceLaneAction {
    /// The switch's memnode-side address.
    pub src: SocketAddrV4,
    /// The backup's address.
    pub dst: SocketAddrV4,
    /// The backup's responder QPN of the lane.
    pub qpn: u32,
    /// The backup's key for the set's region.
    pub rkey: u32,
    /// Backup VA minus primary VA of the same object.
    pub va_delta: u64,
}

/// Action of table `balance_answer` (key: backup address and the switch's lane QPN).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BalanceAnswerAction {
    /// The set.
    pub set: u8,
    /// The backup (0 or 1).
    pub backup: u8,
}

/// What `ReadBalance` counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadBalanceCounters {
    /// Balanced READs (first transmissions) per member, primary first.
    pub per_member: [u64; MAX_MEMBERS],
    /// Retransmissions sent to the member that served the first transmission.
    pub resent: u64,
    /// Retransmissions that took a fresh lane PSN (the lane had answered).
    pub renewed: u64,
    /// READs under a read alias key too long for one response packet (or empty),
    /// dropped: clients mark only single-packet READs.
    pub refused: u64,
    /// Fillers sent again in place of the primary's sequence NAK.
    pub refilled: u64,
    /// Client PSNs older than their slot's record, dropped.
    pub stale: u64,
    /// Lane responses turned into the client's responses.
    pub answered: u64,
    /// Lane answers that map to no client (dropped).
    pub orphans: u64,
    /// NAKs on lanes (dropped; a refused duplicate makes the next retransmission
    /// take a fresh lane PSN).
    pub lane_naks: u64,
}

/// The tag [`ReadBalance::classify`] gives a balanceable READ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BalanceTag {
    action: BalanceSetAction,
}

/// The `ReadBalance` control: its tables, registers and counters.
#[derive(Debug)]
pub struct ReadBalance {
    /// Table `balance_rkey`.
    pub balance_rkey: HashMap<u32, BalanceSetAction>,
    /// Table `balance_lane`.
    pub balance_lane: HashMap<(u8, u8), BalanceLaneAction>,
    /// Table `balance_answer`.
    pub balance_answer: HashMap<RouteKey, BalanceAnswerAction>,
    /// The member-choosing policy (the data plane runs round robin; see `choose`).
    pub policy: ReadBalancePolicy,
    /// Counters.
    pub counters: ReadBalanceCounters,
    cursor: Register<MIRROR_SETS>,
    map: Register<MAP_CELLS>,
    mapq: Register<MAP_CELLS>,
    next: [Register<MIRROR_SETS>; 2],
    fill_key: PairRegister<MAX_CONNS>,
    fill_va: PairRegister<MAX_CONNS>,
    owner: [PairRegister<OWNER_CELLS>; 2],
}

impl Default for ReadBalance {
    fn default() -> ReadBalance {
        ReadBalance::new()
    }
}

fn map_index(conn: u8, psn: u32) -> u32 {
    (u32::from(conn) << 6) | (psn & (MAP_SLOTS as u32 - 1))
}

fn owner_index(set: u8, lane_psn: u32) -> u32 {
    (u32::from(set) << 8) | (lane_psn & (OWNER_SLOTS as u32 - 1))
}

/// How a balanceable READ is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    /// To the primary; `first`: a first transmission.
    Primary {
        first: bool,
    },
    /// To backup `b`: `reuse` the READ's lane PSN, else take a fresh one.
    Backup {
        b: u8,
        reuse: bool,
        first: bool,
    },
    Stale,
}

impl ReadBalance {
    /// Empty tables, zeroed registers.
    pub fn new() -> ReadBalance {
        ReadBalance {
            balance_rkey: HashMap::new(),
            balance_lane: HashMap::new(),
            balance_answer: HashMap::new(),
            policy: ReadBalancePolicy::RoundRobin,
            counters: ReadBalanceCounters::default(),
            cursor: Register::new(&REG_LB_CURSOR),
            map: Register::new(&REG_LB_MAP),
            mapq: Register::new(&REG_LB_MAPQ),
            next: [Register::new(&REG_LB_NEXT0), Register::new(&REG_LB_NEXT1)],
            fill_key: PairRegister::new(&REG_LB_FILL_KEY),
            fill_va: PairRegister::new(&REG_LB_FILL_VA),
            owner: [
                PairRegister::new(&REG_LB_OWNER0),
                PairRegister::new(&REG_LB_OWNER1),
            ],
        }
    }

    /// The registers, in spec order.
    pub fn registers(&self) -> Vec<&dyn RegisterAccess> {
        vec![
            &self.cursor,
            &self.map,
            &self.mapq,
            &self.fill_key,
            &self.fill_va,
            &self.next[0],
            &self.next[1],
            &self.owner[0],
            &self.owner[1],
        ]
    }

    /// The registers, mutable.
    pub fn registers_mut(&mut self) -> Vec<&mut dyn RegisterAccess> {
        let [n0, n1] = &mut self.next;
        let [o0, o1] = &mut self.owner;
        vec![
            &mut self.cursor,
            &mut self.map,
            &mut self.mapq,
            &mut self.fill_key,
            &mut self.fill_va,
            n0,
            n1,
            o0,
            o1,
        ]
    }

    /// Control plane: the read lane to backup `backup` of set `set` starts at PSN
    /// `psn` (a fresh queue pair).
    pub fn init_lane(&mut self, set: u8, backup: u8, psn: u32) {
        self.next[usize::from(backup & 1)].cp_write(usize::from(set), u64::from(psn & PSN_MASK));
    }

    /// Control plane: connection `conn` starts (no balanced READ remembered).
    pub fn init_connection(&mut self, conn: u8) {
        self.fill_key.cp_write(usize::from(conn), 0);
        self.fill_va.cp_write(usize::from(conn), 0);
        for slot in 0..MAP_SLOTS as u32 {
            let i = map_index(conn, slot) as usize;
            self.map.cp_write(i, 0);
            self.mapq.cp_write(i, 0);
        }
    }

    /// Before `Scope`, on a request from a client: a READ under a read alias key is
    /// tagged and carries the primary's real key from here on.
    pub fn classify(&self, pkt: &mut Packet) -> Option<BalanceTag> {
        if pkt.ingress_port == PORT_MEMNODE || pkt.bth.opcode != Opcode::ReadRequest {
            return None;
        }
        let reth = pkt.reth.as_mut()?;
        let action = *self.balance_rkey.get(&reth.rkey)?;
        reth.rkey = action.rkey;
        Some(BalanceTag { action })
    }

    /// After `Route` and `Scope`, on a tagged READ: send it to the chosen member.
    /// Returns whether it left on a read lane (the later stages do not apply to it).
    pub fn upstream(&mut self, pkt: &mut Packet, tag: BalanceTag) -> bool {
        let Some(conn) = pkt.meta.conn else {
            return false;
        };
        let Some(reth) = pkt.reth else {
            return false;
        };
        let a = tag.action;
        if reth.rkey != a.rkey {
            // The scope check replaced the key: the READ is refused as it stands.
            return false;
        }
        // One response packet on the lane and on the client's path. A longer READ is
        // dropped: sent on to the primary, a retransmission resuming it from its second
        // packet would look like a short balanceable READ at a PSN inside it.
        let client_mtu = 1u32 << pkt.meta.pmtu_log2.min(12);
        if reth.dma_len == 0 || reth.dma_len > BALANCE_MAX_LEN.min(client_mtu) {
            self.counters.refused += 1;
            pkt.meta.drop = true;
            return false;
        }
        let id = pkt.id;
        let p = pkt.bth.psn & PSN_MASK;
        // Stage 1: lb_cursor (the policy's choice for a first transmission).
        let mut members = [MemberState::default(); MAX_MEMBERS];
        members[0].serving = true;
        for b in 0..usize::from(a.backups.min(2)) {
            members[b + 1].serving =
                a.serving & (1 << b) != 0 && self.balance_lane.contains_key(&(a.set, b as u8));
        }
        let policy = self.policy;
        let chosen = self
            .cursor
            .rmw(id, u32::from(a.set), |c| {
                let choice = policy.choose(c, &members);
                (choice.cursor, choice.member)
            })
            .unwrap_or(0);
        // Stage 2: lb_map (first transmission, retransmission or stale).
        let route = self
            .map
            .rmw(id, map_index(conn, p), |cell| {
                let valid = cell & PSN_VALID != 0;
                let owner = cell & PSN_MASK;
                if valid && owner == p {
                    let member = ((cell >> MAP_MEMBER_SHIFT) & 0x3) as u8;
                    if member == 0 {
                        (cell, Route::Primary { first: false })
                    } else {
                        let b = member - 1;
                        let reuse = cell & MAP_ANSWERED == 0;
                        let route = Route::Backup {
                            b,
                            reuse,
                            first: false,
                        };
                        (cell & !MAP_ANSWERED, route)
                    }
                } else if valid && psn_diff(owner, p) > 0 {
                    (cell, Route::Stale)
                } else {
                    let new = p | PSN_VALID | ((chosen as u32) << MAP_MEMBER_SHIFT);
                    let route = if chosen == 0 {
                        Route::Primary { first: true }
                    } else {
                        Route::Backup {
                            b: chosen as u8 - 1,
                            reuse: false,
                            first: true,
                        }
                    };
                    (new, route)
                }
            })
            .unwrap_or(Route::Stale);
        let (b, reuse) = match route {
            Route::Stale => {
                self.counters.stale += 1;
                pkt.meta.drop = true;
                return false;
            }
            Route::Primary { first } => {
                // As any READ: the real key is already in place.
                if first {
                    self.counters.per_member[0] += 1;
                } else {
                    self.counters.resent += 1;
                }
                return false;
            }
            Route::Backup { b, reuse, first } => {
                if first {
                    self.counters.per_member[usize::from(b & 1) + 1] += 1;
                } else if reuse {
                    self.counters.resent += 1;
                } else {
                    self.counters.renewed += 1;
                }
                (b, reuse)
            }
        };
        let Some(lane) = self.balance_lane.get(&(a.set, b)).copied() else {
            pkt.meta.drop = true;
            return false;
        };
        // Stage 3: lb_next (a fresh lane PSN) or stage 4: lb_mapq (the READ's one).
        let q = if reuse {
            self.mapq.read(id, map_index(conn, p))
        } else {
            let q = self.next[usize::from(b & 1)]
                .rmw(id, u32::from(a.set), |n| (psn_add(n, 1), n & PSN_MASK));
            if let Some(q) = q {
                let _ = self.mapq.write(id, map_index(conn, p), q);
            }
            q
        };
        let Some(q) = q else {
            pkt.meta.drop = true;
            return false;
        };
        // Stage 5: lb_owner (lane PSN → connection and client PSN).
        let _ = self.owner[usize::from(b & 1)].rmw(id, owner_index(a.set, q), |_, _| {
            (u32::from(conn) | (p << 8), q | PSN_VALID, ())
        });
        // The filler takes the READ's PSN on the client's queue pair to the primary.
        let target = FillerAction {
            rkey: a.rkey,
            va: reth.va,
            memnode_qpn: pkt.bth.dest_qpn,
        };
        // Stage 6: lb_fill_key, lb_fill_va (for fillers sent again later).
        let _ = self.fill_key.rmw(id, u32::from(conn), |_, _| {
            (target.rkey, target.memnode_qpn, ())
        });
        let _ = self.fill_va.rmw(id, u32::from(conn), |_, _| {
            let (lo, hi) = split(target.va);
            (lo, hi, ())
        });
        let mut filler = filler_of(pkt, &target, p);
        filler.meta.egress_port = PORT_MEMNODE;
        filler.meta.dir = DIR_UP;
        // The READ leaves on the lane.
        let mut bth = BthRepr::new(Opcode::ReadRequest, lane.qpn, q, true);
        bth.pkey = pkt.bth.pkey;
        pkt.bth = bth;
        pkt.reth = Some(RethRepr {
            va: reth.va.wrapping_add(lane.va_delta),
            rkey: lane.rkey,
            dma_len: reth.dma_len,
        });
        pkt.src = lane.src;
        pkt.dst = lane.dst;
        pkt.ip_id = 0;
        pkt.ip_flags = IPV4_DF;
        pkt.meta.egress_port = PORT_MEMNODE;
        pkt.meta.dir = DIR_UP;
        pkt.meta.wire_psn = q;
        pkt.meta.extra = Some(Box::new(filler));
        true
    }

    /// After `Route`, on the primary's answer on a client's connection: a sequence NAK
    /// at a PSN whose READ went to a backup says the filler there was lost. The client
    /// may already hold the READ's response and never send it again, so the switch
    /// sends the filler again in the NAK's place (to the key, address and QPN of the
    /// connection's last balanced READ, `lb_fill_key` / `lb_fill_va`). Returns whether
    /// it did.
    pub fn downstream(&mut self, pkt: &mut Packet) -> bool {
        let Some(conn) = pkt.meta.conn else {
            return false;
        };
        if pkt.ingress_port != PORT_MEMNODE
            || pkt.bth.opcode != Opcode::Acknowledge
            || self.balance_rkey.is_empty()
        {
            return false;
        }
        let sequence_nak = matches!(
            pkt.aeth.map(|x| x.syndrome),
            Some(Syndrome::Nak(verbs::wire::NakCode::PsnSequenceError))
        );
        if !sequence_nak {
            return false;
        }
        let e = pkt.bth.psn & PSN_MASK;
        // Stage 2: lb_map.
        let diverted = self
            .map
            .read(pkt.id, map_index(conn, e))
            .is_some_and(|cell| {
                cell & PSN_VALID != 0
                    && cell & PSN_MASK == e
                    && (cell >> MAP_MEMBER_SHIFT) & 0x3 != 0
            });
        if !diverted {
            return false;
        }
        // Stage 6: lb_fill_key, lb_fill_va (set by the connection's balanced READs).
        let key = self
            .fill_key
            .rmw(pkt.id, u32::from(conn), |lo, hi| (lo, hi, (lo, hi)));
        let va = self
            .fill_va
            .rmw(pkt.id, u32::from(conn), |lo, hi| (lo, hi, join(lo, hi)));
        let (Some((rkey, memnode_qpn)), Some(va)) = (key, va) else {
            return false;
        };
        let target = FillerAction {
            rkey,
            va,
            memnode_qpn,
        };
        let mut filler = filler_of(pkt, &target, e);
        filler.src = pkt.ingress_dst;
        filler.dst = pkt.ingress_src;
        std::mem::swap(&mut filler.src_mac, &mut filler.dst_mac);
        filler.meta.egress_port = PORT_MEMNODE;
        filler.meta.dir = DIR_UP;
        filler.meta.answered = true;
        *pkt = filler;
        self.counters.refilled += 1;
        true
    }

    /// Before `Route`, on a packet from the memnode port: a backup's answer on a read
    /// lane is consumed here — a READ response becomes the client's. Returns whether
    /// it was one.
    pub fn lane_answer(&mut self, pkt: &mut Packet, ctx: &mut Ctx<'_>) -> bool {
        if pkt.ingress_port != PORT_MEMNODE || self.balance_answer.is_empty() {
            return false;
        }
        let key = RouteKey {
            src: pkt.src,
            qpn: pkt.bth.dest_qpn,
        };
        let Some(&BalanceAnswerAction { set, backup }) = self.balance_answer.get(&key) else {
            return false;
        };
        pkt.meta.drop = true;
        let id = pkt.id;
        let q = pkt.bth.psn & PSN_MASK;
        let is_response = pkt.bth.opcode == Opcode::ReadResponseOnly;
        let refused = pkt.bth.opcode == Opcode::Acknowledge
            && matches!(
                pkt.aeth.map(|x| x.syndrome),
                Some(Syndrome::Nak(code)) if code != verbs::wire::NakCode::PsnSequenceError
            );
        if !is_response {
            self.counters.lane_naks += 1;
            if !refused {
                // A sequence NAK: the READ missing on the lane is sent again by its
                // client's retransmission, at the same lane PSN.
                return true;
            }
        }
        // Stage 5: lb_owner.
        let owner = self.owner[usize::from(backup & 1)]
            .rmw(id, owner_index(set, q), |lo, hi| (lo, hi, (lo, hi)))
            .filter(|&(_, hi)| hi == q | PSN_VALID);
        let Some((lo, _)) = owner else {
            self.counters.orphans += 1;
            return true;
        };
        let conn = (lo & 0xFF) as u8;
        let p = (lo >> 8) & PSN_MASK;
        if !is_response {
            // Stage 4: lb_mapq, stage 2: lb_map — the backup refused the READ at this
            // lane PSN (a duplicate it no longer remembers): the READ's next
            // retransmission takes a new lane PSN.
            if self.mapq.read(id, map_index(conn, p)) == Some(q) {
                let _ = self.map.rmw(id, map_index(conn, p), |cell| {
                    if cell & PSN_VALID != 0 && cell & PSN_MASK == p {
                        (cell | MAP_ANSWERED, ())
                    } else {
                        (cell, ())
                    }
                });
            }
            return true;
        }
        let Some(client) = ctx.tables.conn_client.lookup(&conn).copied() else {
            self.counters.orphans += 1;
            return true;
        };
        let mut bth = BthRepr::new(Opcode::ReadResponseOnly, client.client_qpn, p, false);
        bth.pkey = pkt.bth.pkey;
        pkt.bth = bth;
        pkt.reth = None;
        pkt.atomic_eth = None;
        pkt.atomic_ack_eth = None;
        pkt.immdt = None;
        // The soft-RoCE requester does not check a READ response's MSN; the lane's
        // means nothing to the client, so it carries none.
        pkt.aeth = Some(AethRepr {
            syndrome: Syndrome::Ack { credits: 31 },
            msn: 0,
        });
        pkt.src = client.src;
        pkt.dst = client.dst;
        pkt.ip_id = 0;
        pkt.ip_flags = IPV4_DF;
        pkt.meta.conn = Some(conn);
        pkt.meta.dir = DIR_DOWN;
        pkt.meta.egress_port = PORT_CLIENT;
        pkt.meta.drop = false;
        pkt.meta.answered = true;
        self.counters.answered += 1;
        true
    }
}
