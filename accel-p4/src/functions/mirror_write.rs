//! `MirrorWrite`: switch replication of writes.
//!
//! A client of a replicated table sends a data WRITE (a Clover node, a RACE KV block)
//! once, to the primary of the replica set, under the set's *alias* memory key. The
//! switch sends it on to the primary under the real key and makes one WRITE ONLY of the
//! same bytes for every backup, on a queue pair of its own to that backup (a *lane*,
//! with its own PSNs), at the same offset of the backup's region. The primary's
//! acknowledgement of the WRITE is held back until every backup acknowledged its copy,
//! so the client sees the WRITE complete only once it is on every member: the
//! replication protocols' "complete before linked, on every copy" holds unchanged.
//!
//! Per connection the switch tracks one waiting WRITE (`mirror_conn`: its client PSN,
//! `MIRROR_ACTIVE` while it waits); the client sends the next replicated WRITE on the
//! queue pair only after the previous one completed. A second one arriving while one
//! waits is dropped and the connection *poisoned* (every later replicated WRITE on it
//! is dropped too, the client's queue pair fails and is replaced): forwarding it
//! without copies could let the primary acknowledge it, and holding two is not built.
//!
//! Holding: while a WRITE at client PSN `p` waits, every ACK (or NAK) from the primary
//! on that connection whose cumulative meaning covers `p` is dropped, the latest of
//! them remembered (`mirror_held`, `mirror_held_aeth`). When the last backup's ACK
//! arrives it is rewritten into that remembered ACK, to the client; when the primary's
//! ACK comes after the backups', it goes on at once. READ responses and ATOMIC ACKs are
//! not held: the soft-RoCE requester completes a WRITE only from an ACK (a hardware
//! requester that takes a later READ response as implying earlier WRITEs would need
//! those held too).
//!
//! Loss: a backup's copy or its ACK lost, the held ACK never comes and the client's
//! retransmission timer sends the WRITE again. The switch recognises the waiting PSN
//! and copies the bytes again *at the lane PSNs the first copies took*
//! (`mirror_bpsn0/1`) for the backups that have not acknowledged; a backup that had
//! executed the copy answers the duplicate with an ACK, one that had not executes it.
//! So every lane PSN carries one fixed WRITE, and no byte is buffered in the switch.
//! A retransmission of a WRITE that is no longer waiting (its released ACK was lost) is
//! sent to the primary alone, which answers the duplicate.

use verbs::wire::{AethRepr, BthRepr, IPV4_DF, Opcode, RethRepr, Syndrome};

use crate::model::{
    Ctx, Metadata, MirrorAckAction, MirrorCopies, MirrorTag, Packet, PacketId, Register,
    RegisterAccess, RouteKey, psn_add, psn_diff,
};
use crate::spec::{
    DIR_DOWN, DIR_UP, MAX_CONNS, MIRROR_ACTIVE, MIRROR_OWNERS, MIRROR_POISONED, MIRROR_SETS,
    PORT_CLIENT, PORT_MEMNODE, PSN_VALID,
};
use crate::spec::{
    REG_MIRROR_ACKED0, REG_MIRROR_ACKED1, REG_MIRROR_BPSN0, REG_MIRROR_BPSN1, REG_MIRROR_CONN,
    REG_MIRROR_CONN_SET, REG_MIRROR_HELD, REG_MIRROR_HELD_AETH, REG_MIRROR_NEXT0, REG_MIRROR_NEXT1,
    REG_MIRROR_OWNER0, REG_MIRROR_OWNER1,
};

const PSN_MASK: u32 = verbs::wire::PSN_MASK;
/// `mirror_owner*` cells: the connection id plus this bit.
const OWNER_VALID: u32 = 0x100;
const OWNERS: usize = MIRROR_SETS * MIRROR_OWNERS;

/// The `MirrorWrite` control.
#[derive(Debug)]
pub struct MirrorWrite {
    conn: Register<MAX_CONNS>,
    conn_set: Register<MAX_CONNS>,
    bpsn: [Register<MAX_CONNS>; 2],
    held: Register<MAX_CONNS>,
    held_aeth: Register<MAX_CONNS>,
    next: [Register<MIRROR_SETS>; 2],
    acked: [Register<MIRROR_SETS>; 2],
    owner: [Register<OWNERS>; 2],
}

impl Default for MirrorWrite {
    fn default() -> MirrorWrite {
        MirrorWrite::new()
    }
}

/// The cumulative reach of an acknowledgement: the last PSN it says was executed, or
/// `None` for answers that complete nothing by themselves.
fn covers(pkt: &Packet) -> Option<u32> {
    if pkt.bth.opcode != Opcode::Acknowledge {
        return None;
    }
    let aeth = pkt.aeth?;
    Some(match aeth.syndrome {
        Syndrome::Ack { .. } => pkt.bth.psn,
        // A NAK says everything before its PSN was executed.
        _ => pkt.bth.psn.wrapping_sub(1) & PSN_MASK,
    })
}

/// Whether `acked` (a `mirror_acked*` cell) covers lane PSN `psn`.
fn lane_covers(acked: u32, psn: u32) -> bool {
    acked & PSN_VALID != 0 && psn_diff(acked & PSN_MASK, psn) >= 0
}

fn aeth_word(aeth: &AethRepr) -> u32 {
    (u32::from(aeth.syndrome.to_u8()) << 24) | (aeth.msn & PSN_MASK)
}

/// A `mirror_conn_set` cell: the set and how many backups it has.
fn set_word(set: u8, backups: u8) -> u32 {
    u32::from(set) | (u32::from(backups) << 5)
}

/// The set and backup count of a `mirror_conn_set` cell.
fn set_of(word: u32) -> (u8, u8) {
    ((word & 0x1F) as u8, ((word >> 5) & 0x3) as u8)
}

fn owner_index(set: u8, psn: u32) -> u32 {
    (u32::from(set) << 8) | (psn & (MIRROR_OWNERS as u32 - 1))
}

impl MirrorWrite {
    /// Zeroed registers.
    pub fn new() -> MirrorWrite {
        MirrorWrite {
            conn: Register::new(&REG_MIRROR_CONN),
            conn_set: Register::new(&REG_MIRROR_CONN_SET),
            bpsn: [
                Register::new(&REG_MIRROR_BPSN0),
                Register::new(&REG_MIRROR_BPSN1),
            ],
            held: Register::new(&REG_MIRROR_HELD),
            held_aeth: Register::new(&REG_MIRROR_HELD_AETH),
            next: [
                Register::new(&REG_MIRROR_NEXT0),
                Register::new(&REG_MIRROR_NEXT1),
            ],
            acked: [
                Register::new(&REG_MIRROR_ACKED0),
                Register::new(&REG_MIRROR_ACKED1),
            ],
            owner: [
                Register::new(&REG_MIRROR_OWNER0),
                Register::new(&REG_MIRROR_OWNER1),
            ],
        }
    }

    /// The registers, in spec order.
    pub fn registers(&self) -> Vec<&dyn RegisterAccess> {
        vec![
            &self.conn,
            &self.conn_set,
            &self.bpsn[0],
            &self.bpsn[1],
            &self.held,
            &self.held_aeth,
            &self.next[0],
            &self.next[1],
            &self.acked[0],
            &self.acked[1],
            &self.owner[0],
            &self.owner[1],
        ]
    }

    /// The registers, mutable.
    pub fn registers_mut(&mut self) -> Vec<&mut dyn RegisterAccess> {
        let [b0, b1] = &mut self.bpsn;
        let [n0, n1] = &mut self.next;
        let [a0, a1] = &mut self.acked;
        let [o0, o1] = &mut self.owner;
        vec![
            &mut self.conn,
            &mut self.conn_set,
            b0,
            b1,
            &mut self.held,
            &mut self.held_aeth,
            n0,
            n1,
            a0,
            a1,
            o0,
            o1,
        ]
    }

    /// Control plane: connection `conn` starts (nothing waiting).
    pub fn init_connection(&mut self, conn: u8) {
        let c = usize::from(conn);
        self.conn.cp_write(c, 0);
        self.held.cp_write(c, 0);
    }

    /// Control plane: the lane to backup `backup` of set `set` starts at PSN `psn`
    /// (a fresh queue pair: nothing acknowledged).
    pub fn init_lane(&mut self, set: u8, backup: u8, psn: u32) {
        let b = usize::from(backup & 1);
        self.next[b].cp_write(usize::from(set), u64::from(psn & PSN_MASK));
        self.acked[b].cp_write(usize::from(set), 0);
    }

    /// Before `Scope`, on a request from a client: a WRITE ONLY under an alias key of
    /// `mirror_rkey` is tagged and carries the primary's real key from here on.
    pub fn classify(pkt: &mut Packet, ctx: &Ctx<'_>) {
        if pkt.ingress_port != PORT_MEMNODE
            && let Some(reth) = pkt.reth.as_mut()
            && let Some(a) = ctx.tables.mirror_rkey.lookup(&reth.rkey)
        {
            reth.rkey = a.rkey;
            pkt.meta.mirror = Some(MirrorTag {
                set: a.set,
                rkey: a.rkey,
                backups: a.backups,
                copies: MirrorCopies::Undecided,
            });
        }
    }

    /// After `Scope`, on a tagged request: decide what the backups get. A request that
    /// is not a single-packet WRITE, or whose key the scope check replaced, is
    /// dropped (a client never sends one).
    pub fn upstream(&mut self, pkt: &mut Packet, ctx: &mut Ctx<'_>) {
        let (Some(mut tag), Some(conn)) = (pkt.meta.mirror, pkt.meta.conn) else {
            return;
        };
        let single = pkt.bth.opcode == Opcode::WriteOnly;
        if !single || pkt.reth.map(|r| r.rkey) != Some(tag.rkey) {
            ctx.counters.mirror_write.busy += 1;
            pkt.meta.drop = true;
            pkt.meta.mirror = None;
            return;
        }
        let psn = pkt.bth.psn;
        let decided = self.conn.rmw(pkt.id, u32::from(conn), |old| {
            let valid = old & PSN_VALID != 0;
            let active = valid && old & MIRROR_ACTIVE != 0;
            let last = old & PSN_MASK;
            if old & MIRROR_POISONED != 0 {
                (old, None)
            } else if active && last == psn {
                (old, Some(MirrorCopies::Again))
            } else if active && psn_diff(psn, last) < 0 {
                // Before the waiting one: complete everywhere already.
                (old, Some(MirrorCopies::None))
            } else if active {
                (old | MIRROR_POISONED, None)
            } else if valid && psn_diff(psn, last) <= 0 {
                (old, Some(MirrorCopies::None))
            } else {
                (psn | PSN_VALID | MIRROR_ACTIVE, Some(MirrorCopies::Fresh))
            }
        });
        let Some(Some(copies)) = decided else {
            ctx.counters.mirror_write.busy += 1;
            pkt.meta.drop = true;
            pkt.meta.mirror = None;
            return;
        };
        match copies {
            MirrorCopies::Fresh => {
                let _ = self.held.write(pkt.id, u32::from(conn), 0);
                let _ =
                    self.conn_set
                        .write(pkt.id, u32::from(conn), set_word(tag.set, tag.backups));
                ctx.counters.mirror_write.replicated += 1;
            }
            MirrorCopies::None => ctx.counters.mirror_write.stale += 1,
            _ => {}
        }
        tag.copies = copies;
        pkt.meta.mirror = Some(tag);
    }

    /// The WRITE for backup `backup` of the replicated WRITE `orig` (on its way to the
    /// primary), as a new packet `id` (on a Tofino: the egress pass of one replica of a
    /// multicast group). `None` when that backup gets nothing.
    pub fn copy_for(
        &mut self,
        orig: &Packet,
        backup: u8,
        id: PacketId,
        ctx: &mut Ctx<'_>,
    ) -> Option<Packet> {
        let tag = orig.meta.mirror?;
        let conn = orig.meta.conn?;
        let b = usize::from(backup & 1);
        let lane = *ctx.tables.mirror_lane.lookup(&(tag.set, backup))?;
        let lane_psn = match tag.copies {
            MirrorCopies::Fresh => {
                let q = self.next[b].rmw(id, u32::from(tag.set), |old| {
                    (psn_add(old, 1), old & PSN_MASK)
                })?;
                let _ =
                    self.owner[b].write(id, owner_index(tag.set, q), u32::from(conn) | OWNER_VALID);
                let _ = self.bpsn[b].write(id, u32::from(conn), q);
                ctx.counters.mirror_write.copies += 1;
                q
            }
            MirrorCopies::Again => {
                let q = self.bpsn[b].read(id, u32::from(conn))?;
                let acked = self.acked[b].read(id, u32::from(tag.set))?;
                if lane_covers(acked, q) {
                    return None;
                }
                ctx.counters.mirror_write.recopied += 1;
                q
            }
            MirrorCopies::None | MirrorCopies::Undecided => return None,
        };
        let reth = orig.reth?;
        let mut c = orig.clone();
        c.id = id;
        let mut bth = BthRepr::new(Opcode::WriteOnly, lane.qpn, lane_psn, true);
        bth.pkey = orig.bth.pkey;
        c.bth = bth;
        c.reth = Some(RethRepr {
            va: reth.va.wrapping_add(lane.va_delta),
            rkey: lane.rkey,
            dma_len: reth.dma_len,
        });
        c.src = lane.src;
        c.dst = lane.dst;
        c.ip_id = 0;
        c.ip_flags = IPV4_DF;
        // A packet of its own: none of the original's fate (drop, duplicate, delay).
        c.meta = Metadata {
            dir: DIR_UP,
            egress_port: PORT_MEMNODE,
            wire_psn: lane_psn,
            ..Metadata::default()
        };
        Some(c)
    }

    /// Before `Route`, on a packet from the memnode port: a backup's answer on a lane
    /// is consumed here. Returns whether it was one.
    pub fn lane_answer(&mut self, pkt: &mut Packet, ctx: &mut Ctx<'_>) -> bool {
        if pkt.ingress_port != PORT_MEMNODE {
            return false;
        }
        let key = RouteKey {
            src: pkt.src,
            qpn: pkt.bth.dest_qpn,
        };
        let Some(&MirrorAckAction { set, backup }) = ctx.tables.mirror_ack.lookup(&key) else {
            return false;
        };
        pkt.meta.drop = true;
        let is_ack = pkt.bth.opcode == Opcode::Acknowledge
            && matches!(pkt.aeth.map(|a| a.syndrome), Some(Syndrome::Ack { .. }));
        if !is_ack {
            ctx.counters.mirror_write.lane_naks += 1;
            return true;
        }
        ctx.counters.mirror_write.lane_acks += 1;
        let b = usize::from(backup & 1);
        let a = pkt.bth.psn;
        let Some(acked) = self.acked[b].rmw(pkt.id, u32::from(set), |old| {
            let new = if lane_covers(old, a) {
                old
            } else {
                a | PSN_VALID
            };
            (new, new)
        }) else {
            return true;
        };
        let Some(owner) = self.owner[b].read(pkt.id, owner_index(set, a)) else {
            return true;
        };
        if owner & OWNER_VALID == 0 {
            return true;
        }
        let conn = (owner & 0xFF) as u8;
        let Some((conn_set, backups)) = self.conn_set.read(pkt.id, u32::from(conn)).map(set_of)
        else {
            return true;
        };
        if conn_set != set {
            return true;
        }
        let mut all = true;
        for other in 0..usize::from(backups).min(2) {
            let Some(q) = self.bpsn[other].read(pkt.id, u32::from(conn)) else {
                return true;
            };
            let reach = if other == b {
                Some(acked)
            } else {
                self.acked[other].read(pkt.id, u32::from(set))
            };
            all &= reach.is_some_and(|r| lane_covers(r, q));
        }
        let Some(held) = self.held.read(pkt.id, u32::from(conn)) else {
            return true;
        };
        let Some(held_aeth) = self.held_aeth.read(pkt.id, u32::from(conn)) else {
            return true;
        };
        let released = self.conn.rmw(pkt.id, u32::from(conn), |old| {
            let active = old & PSN_VALID != 0 && old & MIRROR_ACTIVE != 0;
            let held_covers = held & PSN_VALID != 0 && {
                let syndrome = Syndrome::from_u8((held_aeth >> 24) as u8).ok();
                let reach = match syndrome {
                    Some(Syndrome::Ack { .. }) => held & PSN_MASK,
                    _ => (held & PSN_MASK).wrapping_sub(1) & PSN_MASK,
                };
                psn_diff(reach, old & PSN_MASK) >= 0
            };
            if active && all && held_covers {
                (old & !MIRROR_ACTIVE, true)
            } else {
                (old, false)
            }
        });
        if released != Some(true) {
            return true;
        }
        let Some(client) = ctx.tables.conn_client.lookup(&conn).copied() else {
            return true;
        };
        let Ok(syndrome) = Syndrome::from_u8((held_aeth >> 24) as u8) else {
            return true;
        };
        let mut bth = BthRepr::new(
            Opcode::Acknowledge,
            client.client_qpn,
            held & PSN_MASK,
            false,
        );
        bth.pkey = pkt.bth.pkey;
        pkt.bth = bth;
        pkt.reth = None;
        pkt.atomic_eth = None;
        pkt.atomic_ack_eth = None;
        pkt.immdt = None;
        pkt.payload.clear();
        pkt.aeth = Some(AethRepr {
            syndrome,
            msn: held_aeth & PSN_MASK,
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
        ctx.counters.mirror_write.released += 1;
        true
    }

    /// After `Route`, on a primary's answer to a client: an acknowledgement that would
    /// complete the connection's waiting WRITE is held while a backup has not
    /// acknowledged its copy.
    pub fn downstream(&mut self, pkt: &mut Packet, ctx: &mut Ctx<'_>) {
        let Some(conn) = pkt.meta.conn else {
            return;
        };
        if pkt.ingress_port != PORT_MEMNODE || ctx.tables.mirror_rkey.is_empty() {
            return;
        }
        let Some(reach) = covers(pkt) else {
            return;
        };
        let Some((set, backups)) = self.conn_set.read(pkt.id, u32::from(conn)).map(set_of) else {
            return;
        };
        let mut all = true;
        for b in 0..usize::from(backups).min(2) {
            let q = self.bpsn[b].read(pkt.id, u32::from(conn));
            let acked = self.acked[b].read(pkt.id, u32::from(set));
            all &= matches!((acked, q), (Some(a), Some(q)) if lane_covers(a, q));
        }
        let decision = self.conn.rmw(pkt.id, u32::from(conn), |old| {
            let active = old & PSN_VALID != 0 && old & MIRROR_ACTIVE != 0;
            if !active || psn_diff(reach, old & PSN_MASK) < 0 {
                (old, None)
            } else if all {
                (old & !MIRROR_ACTIVE, Some(false))
            } else {
                (old, Some(true))
            }
        });
        match decision {
            Some(Some(true)) => {
                // Hold: remember the furthest-reaching acknowledgement.
                let psn = pkt.bth.psn;
                let newer = self.held.rmw(pkt.id, u32::from(conn), |old| {
                    let old_psn = old & PSN_MASK;
                    if old & PSN_VALID == 0 || psn_diff(psn, old_psn) >= 0 {
                        (psn | PSN_VALID, true)
                    } else {
                        (old, false)
                    }
                });
                if newer == Some(true)
                    && let Some(aeth) = pkt.aeth
                {
                    let _ = self
                        .held_aeth
                        .write(pkt.id, u32::from(conn), aeth_word(&aeth));
                }
                ctx.counters.mirror_write.held += 1;
                pkt.meta.drop = true;
            }
            Some(Some(false)) => ctx.counters.mirror_write.passed += 1,
            _ => {}
        }
    }
}
