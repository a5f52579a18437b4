//! The pipeline assembly: the [`Pipeline`] — which stages run, in which order, and the
//! registers each owns; parse → stages → deparse for every frame. The building blocks
//! are in [`crate::model`], the stages in [`crate::functions`].
//!
//! | stage (P4 control) | registers | what it does |
//! |---|---|---|
//! | parser | — | Ethernet/IPv4/UDP/BTH/ext headers; drops frames whose ICRC is wrong |
//! | `Route` | — | `route_up` / `route_down`: connection id, address rewrite, egress port |
//! | `Scope` | — | `conn_scoped`, `conn_window`, `conn_window_last`: requests of connections made with a grant outside their windows get a key no memory has |
//! | classify | — | `tracked_lock`, `latch_region`: requests other functions answer or divert; `mux_down` responses mapped back (`mux_ring`, `mux_resend`, `repl_up`) |
//! | `SwitchAtomics` | `conn_acked`, `conn_epsn`, `conn_sw`, `answer_psn`, `conn_msn`, `atomic_word`, `answer_result` | PSN/MSN translation; answers atomics on switch-owned words; admits intercepted requests; replays any answer still in the per-connection ring |
//! | `AtomicReplace` | `mux_next_psn`, `mux_ring`, `repl_*`, `lock_state`, `lock_word` | tracked atomics → WRITEs on the multiplexed QP; its ACKs → ATOMIC ACKs |
//! | `OptLatch` | `tuple_version`, `client_tuple`, `client_version`, `read_cursor` | latch / version reads answered, every packet of a tuple READ response stamped, write ACKs unlatch |
//! | `WriteSteer` + `SteerCache` | `steer_epsn`, `steer_pend*`, `steer_tail_*`, `steer_cas*` | Clover node WRITEs remembered (version rewritten when behind), link CASes redirected to the committed tail, ATOMIC ACKs commit tails and carry markers |
//! | `ReadSteer` | `steer_addr_tag`, `steer_addr_key`, `steer_addr_ver`, `steer_rd*` | node READs of stale addresses redirected to the committed tail; their responses marked with the address |
//! | `ZeroCopy` (before `Route`) | `copy_acked` | `copy_src` / `copy_dst` / `copy_mcast`: READ responses on a copy's source QP rewritten into WRITEs on its target QP (and, for a multicast copy, one more WRITE per further target); the target's ACKs and NAKs digested for the copy engine |
//! | `FlowPunt` (before `Route`) | — | `flow_punt`: answers on flow rings' control QPs and doorbells go to the CPU port unchanged |
//! | `MirrorWrite` (lanes before `Route`; requests around `Scope`) | `mirror_*` | `mirror_rkey`, `mirror_lane`, `mirror_ack`: replicated WRITEs sent on to the primary and copied to every backup on the switch's lanes; the primary's ACK held until the backups acknowledged |
//! | `ReadBalance` (lane answers before `Route`; requests around `Scope`; the primary's sequence NAKs after `Scope`) | `lb_*` | `balance_rkey`, `balance_lane`, `balance_answer`: READs under a read alias key sent to a member the switch picks, on its read lanes, a filler in their place on the primary; the lane's response rewritten into the client's |
//! | `FaultInject` | `fault_rng` | seeded drop / duplicate / reorder / delay per direction |
//! | deparser | — | re-emits the headers and recomputes the ICRC for the new addressing |

use crate::functions::atomic_replace::AtomicReplace;
use crate::functions::atomics::SwitchAtomics;
use crate::functions::faults::FaultInject;
use crate::functions::flow_punt::FlowPunt;
use crate::functions::forward::Route;
use crate::functions::mirror_write::MirrorWrite;
use crate::functions::opt_latch::OptLatch;
use crate::functions::read_balance::ReadBalance;
use crate::functions::read_steer::ReadSteer;
use crate::functions::scope::Scope;
use crate::functions::write_steer::WriteSteer;
use crate::functions::zero_copy::{CopyDigest, ZeroCopy};
use crate::model::{
    Counters, Ctx, Emitted, Packet, PacketId, ParseError, Register, RegisterAccess, Stage, Tables,
    deparse, parse,
};
use crate::spec::REG_MODE;

/// The whole switch: mode register, tables, stages, counters.
pub struct Pipeline {
    mode: Register<1>,
    /// The match-action tables (the control plane writes them).
    pub tables: Tables,
    route: Route,
    scope: Scope,
    atomics: SwitchAtomics,
    replace: AtomicReplace,
    latch: OptLatch,
    write_steer: WriteSteer,
    read_steer: ReadSteer,
    faults: FaultInject,
    zero_copy: ZeroCopy,
    mirror: MirrorWrite,
    balance: ReadBalance,
    counters: Counters,
    next_id: u64,
    clock_us: u64,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("mode", &self.mode())
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

impl Default for Pipeline {
    fn default() -> Pipeline {
        Pipeline::new()
    }
}

impl Pipeline {
    /// A switch with empty tables, zeroed registers and mode 0 (forwarding only).
    pub fn new() -> Pipeline {
        Pipeline {
            mode: Register::new(&REG_MODE),
            tables: Tables::default(),
            route: Route,
            scope: Scope,
            atomics: SwitchAtomics::new(),
            replace: AtomicReplace::new(),
            latch: OptLatch::new(),
            write_steer: WriteSteer::new(),
            read_steer: ReadSteer::new(),
            faults: FaultInject::new(),
            zero_copy: ZeroCopy::new(),
            mirror: MirrorWrite::new(),
            balance: ReadBalance::new(),
            counters: Counters::default(),
            next_id: 0,
            clock_us: 0,
        }
    }

    /// Set the pipeline clock (µs; the ingress timestamp of the next packets).
    pub fn set_clock_us(&mut self, now_us: u64) {
        self.clock_us = now_us;
    }

    /// The pipeline clock (µs).
    pub fn clock_us(&self) -> u64 {
        self.clock_us
    }

    /// Zero the steering registers except the connections' expected PSNs (the control
    /// plane does this when the tracked keys change).
    pub fn reset_steering(&mut self) {
        for r in self.write_steer.registers_mut() {
            if r.name() != crate::spec::REG_STEER_EPSN.name {
                r.reset();
            }
        }
        for r in self.read_steer.registers_mut() {
            r.reset();
        }
    }

    /// Steering rewrites nothing for `quiet_us` from now (after a restart, packets sent
    /// before it may still be retransmitted).
    pub fn steer_quiet_for(&mut self, quiet_us: u64) {
        self.write_steer
            .set_quiet_until(self.clock_us.saturating_add(quiet_us));
    }

    /// The mode bits.
    pub fn mode(&self) -> u32 {
        self.mode.cp_read(0) as u32
    }

    /// Set the mode bits.
    pub fn set_mode(&mut self, mode: u32) {
        self.mode.cp_write(0, u64::from(mode));
    }

    /// The counters.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// Every register, in pipeline order.
    pub fn registers(&self) -> Vec<&dyn RegisterAccess> {
        let mut v: Vec<&dyn RegisterAccess> = vec![&self.mode];
        v.extend(self.route.registers());
        v.extend(self.atomics.registers());
        v.extend(self.replace.registers());
        v.extend(self.latch.registers());
        v.extend(self.write_steer.registers());
        v.extend(self.read_steer.registers());
        v.extend(self.faults.registers());
        v.extend(self.zero_copy.registers());
        v.extend(self.mirror.registers());
        v.extend(self.balance.registers());
        v
    }

    /// A register by name, for the control plane.
    pub fn register_mut(&mut self, name: &str) -> Option<&mut dyn RegisterAccess> {
        if name == self.mode.name() {
            return Some(&mut self.mode);
        }
        let atomics = self.atomics.registers_mut().into_iter();
        let replace = self.replace.registers_mut().into_iter();
        let latch = self.latch.registers_mut().into_iter();
        let write_steer = self.write_steer.registers_mut().into_iter();
        let read_steer = self.read_steer.registers_mut().into_iter();
        let faults = self.faults.registers_mut().into_iter();
        let zero_copy = self.zero_copy.registers_mut().into_iter();
        let mirror = self.mirror.registers_mut().into_iter();
        let balance = self.balance.registers_mut().into_iter();
        atomics
            .chain(replace)
            .chain(latch)
            .chain(write_steer)
            .chain(read_steer)
            .chain(faults)
            .chain(zero_copy)
            .chain(mirror)
            .chain(balance)
            .find(|r| r.name() == name)
    }

    /// A register by name, read-only.
    pub fn register(&self, name: &str) -> Option<&dyn RegisterAccess> {
        self.registers().into_iter().find(|r| r.name() == name)
    }

    /// Zero the per-connection registers of `conn` and start tracking it at client PSN
    /// `psn` (the control plane does this when it installs the connection's routes).
    pub fn init_connection(&mut self, conn: u8, psn: u32) {
        self.atomics.init_connection(conn, psn);
        self.latch.init_connection(conn);
        self.mirror.init_connection(conn);
        self.balance.init_connection(conn);
    }

    /// Load-balanced READs: its tables, counters and lanes.
    pub fn read_balance(&self) -> &ReadBalance {
        &self.balance
    }

    /// Load-balanced READs, for the control plane.
    pub fn read_balance_mut(&mut self) -> &mut ReadBalance {
        &mut self.balance
    }

    /// Start the lane to backup `backup` of replica set `set` at PSN `psn` (switch
    /// replication of writes).
    pub fn init_mirror_lane(&mut self, set: u8, backup: u8, psn: u32) {
        self.mirror.init_lane(set, backup, psn);
    }

    /// Start the multiplexed QP `mux` at upstream PSN `psn` (atomic replacement).
    pub fn init_mux(&mut self, mux: u8, psn: u32) {
        self.replace.init_mux(mux, psn);
    }

    /// Forget the cached value of lock slot `slot` (atomic replacement).
    pub fn invalidate_lock(&mut self, slot: u32) {
        self.replace.invalidate(slot);
    }

    /// Set the versions of tuples `[first, first + count)` (optimistic latching; odd
    /// means latched by nobody: refused until set even again).
    pub fn set_tuple_versions(&mut self, first: u32, count: u32, version: u32) {
        self.latch.set_versions(first, count, version);
    }

    /// Control plane: `(tuple, cell)` of the tuples in `[first, first + count)` that a
    /// connection holds latched.
    pub fn held_latches(&self, first: u32, count: u32) -> Vec<(u32, u32)> {
        self.latch.held(first, count)
    }

    /// Control plane: break the latch of tuple `t` if its cell is still `cell`.
    pub fn break_latch(&mut self, t: u32, cell: u32) -> bool {
        let broke = self.latch.break_latch(t, cell);
        if broke {
            self.counters.opt_latch.broken += 1;
        }
        broke
    }

    /// Start copy slot `slot` with nothing acknowledged (zero-sided copies).
    pub fn init_copy(&mut self, slot: u8) {
        self.zero_copy.init_copy(slot);
    }

    /// The copy digests reported since the last call (zero-sided copies).
    pub fn take_copy_digests(&mut self) -> Vec<CopyDigest> {
        self.zero_copy.take_digests()
    }

    /// Send a packet the switch generates itself (a copy's READ request; the packet
    /// generator of a Tofino): it passes fault injection like any packet leaving
    /// towards the memnodes, and is deparsed.
    pub fn generate(&mut self, mut pkt: Packet) -> Vec<Emitted> {
        self.next_id += 1;
        pkt.id = PacketId(self.next_id);
        let mode = self.mode.read(pkt.id, 0).unwrap_or(0);
        let mut ctx = Ctx {
            mode,
            tables: &self.tables,
            counters: &mut self.counters,
        };
        self.faults.apply(&mut pkt, &mut ctx);
        if pkt.meta.drop {
            return Vec::new();
        }
        let Ok(frame) = deparse(&pkt) else {
            self.counters.forward.malformed += 1;
            return Vec::new();
        };
        let emitted = Emitted {
            port: pkt.meta.egress_port,
            frame,
            delay_us: pkt.meta.delay_us,
        };
        self.faults.egress(&pkt.meta, emitted)
    }

    /// Seed the fault-injection generators.
    pub fn seed_faults(&mut self, seed: u64) {
        self.faults.seed(seed);
    }

    /// Run one frame arriving on `port` through the pipeline.
    pub fn process(&mut self, port: u8, frame: &[u8]) -> Vec<Emitted> {
        self.next_id += 1;
        let id = PacketId(self.next_id);
        let mode = self.mode.read(id, 0).unwrap_or(0);
        let mut pkt = match parse(id, port, frame) {
            Ok(p) => p,
            Err(ParseError::Malformed(_)) => {
                self.counters.forward.malformed += 1;
                return Vec::new();
            }
            Err(ParseError::BadIcrc) => {
                self.counters.forward.bad_icrc += 1;
                return Vec::new();
            }
        };
        let mut ctx = Ctx {
            mode,
            tables: &self.tables,
            counters: &mut self.counters,
        };
        let traced = tracing::enabled!(tracing::Level::TRACE);
        // A copy's responses are the copy's alone: converted or consumed, never routed;
        // a flow's control answers and doorbells go to the CPU.
        let copy = self.zero_copy.apply(&mut pkt, &mut ctx)
            || FlowPunt.apply(&mut pkt, &mut ctx)
            || self.mirror.lane_answer(&mut pkt, &mut ctx)
            || self.balance.lane_answer(&mut pkt, &mut ctx);
        let replicas = self.zero_copy.take_replicas();
        // The fixed stage order; a dropped packet skips the rest.
        if !copy {
            apply(&mut self.route, &mut pkt, &mut ctx, traced);
        }
        let mut balance_tag = None;
        if !pkt.meta.drop && !copy {
            MirrorWrite::classify(&mut pkt, &ctx);
            balance_tag = self.balance.classify(&mut pkt);
            apply(&mut self.scope, &mut pkt, &mut ctx, traced);
        }
        // A balanced READ that leaves on a read lane skips the later stages.
        let copy = copy
            || (!pkt.meta.drop
                && match balance_tag {
                    Some(tag) => self.balance.upstream(&mut pkt, tag),
                    None => self.balance.downstream(&mut pkt),
                });
        if !pkt.meta.drop && !copy {
            if pkt.meta.mirror.is_some() {
                self.mirror.upstream(&mut pkt, &mut ctx);
            } else {
                self.mirror.downstream(&mut pkt, &mut ctx);
            }
        }
        if !pkt.meta.drop && !copy {
            // Table lookups that classify requests, and the multiplexed-QP map.
            AtomicReplace::classify(&mut pkt, &ctx);
            OptLatch::classify(&mut pkt, &ctx);
            self.replace.map_down(&mut pkt, &mut ctx);
        }
        if !pkt.meta.drop && !copy {
            apply(&mut self.atomics, &mut pkt, &mut ctx, traced);
        }
        if !pkt.meta.drop && !copy {
            apply(&mut self.replace, &mut pkt, &mut ctx, traced);
        }
        if !pkt.meta.drop && !copy {
            apply(&mut self.latch, &mut pkt, &mut ctx, traced);
        }
        if !pkt.meta.drop && !pkt.meta.answered && !copy {
            let now = self.clock_us;
            let before = traced.then_some(*ctx.counters);
            let info = self.write_steer.apply(&mut pkt, &mut ctx, now);
            if let Some(b) = before {
                decided("WriteSteer", &pkt, &b, ctx.counters);
            }
            let before = traced.then_some(*ctx.counters);
            self.read_steer
                .apply(&mut pkt, &mut ctx, info, &mut self.write_steer.cache, now);
            if let Some(b) = before {
                decided("ReadSteer", &pkt, &b, ctx.counters);
            }
        }
        if !pkt.meta.drop {
            apply(&mut self.faults, &mut pkt, &mut ctx, traced);
        }
        // The backups' copies follow from the decision at ingress, whatever becomes of
        // the primary's packet (a loss there is repaired by the client's retransmission).
        let mut copies = Vec::new();
        if let Some(tag) = pkt.meta.mirror {
            for backup in 0..tag.backups {
                copies.extend(self.mirror_copy(&pkt, backup, mode));
            }
        }
        for replica in replicas {
            copies.extend(self.copy_replica(replica, mode));
        }
        if pkt.meta.drop {
            return copies;
        }
        let Ok(out) = deparse(&pkt) else {
            self.counters.forward.malformed += 1;
            return Vec::new();
        };
        if !pkt.meta.answered {
            self.counters.forward.forwarded += 1;
        }
        if out != frame {
            self.counters.forward.rewritten += 1;
        }
        let emitted = Emitted {
            port: pkt.meta.egress_port,
            frame: out,
            delay_us: pkt.meta.delay_us,
        };
        let extra = pkt.meta.extra.take();
        let mut frames = self.faults.egress(&pkt.meta, emitted);
        if let Some(extra) = extra
            && let Ok(frame) = deparse(&extra)
        {
            let e = Emitted {
                port: extra.meta.egress_port,
                frame,
                delay_us: pkt.meta.delay_us,
            };
            frames.extend(self.faults.egress(&pkt.meta, e));
        }
        frames.extend(copies);
        frames
    }

    /// The copy of replicated WRITE `orig` for backup `backup`, through fault injection
    /// and deparsed (a replica of the packet, with a packet id of its own).
    fn mirror_copy(&mut self, orig: &Packet, backup: u8, mode: u32) -> Vec<Emitted> {
        self.next_id += 1;
        let id = PacketId(self.next_id);
        let mut ctx = Ctx {
            mode,
            tables: &self.tables,
            counters: &mut self.counters,
        };
        let Some(mut copy) = self.mirror.copy_for(orig, backup, id, &mut ctx) else {
            return Vec::new();
        };
        self.faults.apply(&mut copy, &mut ctx);
        if copy.meta.drop {
            return Vec::new();
        }
        let Ok(frame) = deparse(&copy) else {
            self.counters.forward.malformed += 1;
            return Vec::new();
        };
        let emitted = Emitted {
            port: copy.meta.egress_port,
            frame,
            delay_us: copy.meta.delay_us,
        };
        self.faults.egress(&copy.meta, emitted)
    }

    /// A multicast copy's replica WRITE, with a packet id of its own, through fault
    /// injection and deparsed.
    fn copy_replica(&mut self, mut copy: Packet, mode: u32) -> Vec<Emitted> {
        self.next_id += 1;
        copy.id = PacketId(self.next_id);
        let mut ctx = Ctx {
            mode,
            tables: &self.tables,
            counters: &mut self.counters,
        };
        self.faults.apply(&mut copy, &mut ctx);
        if copy.meta.drop {
            return Vec::new();
        }
        let Ok(frame) = deparse(&copy) else {
            self.counters.forward.malformed += 1;
            return Vec::new();
        };
        let emitted = Emitted {
            port: copy.meta.egress_port,
            frame,
            delay_us: copy.meta.delay_us,
        };
        self.faults.egress(&copy.meta, emitted)
    }

    /// Release packets held back by reordering (the switch calls this when idle).
    pub fn flush(&mut self) -> Vec<Emitted> {
        self.faults.flush()
    }
}

/// Run `stage` on `pkt`; when `traced`, a `TRACE` event says what the function decided:
/// its name, the packet's connection, drop / answer / egress / delay, and the counters
/// that moved (`function.counter`, comma-separated).
fn apply<S: Stage>(stage: &mut S, pkt: &mut Packet, ctx: &mut Ctx<'_>, traced: bool) {
    if !traced {
        stage.apply(pkt, ctx);
        return;
    }
    let before = *ctx.counters;
    stage.apply(pkt, ctx);
    decided(stage.name(), pkt, &before, ctx.counters);
}

/// The `TRACE` event of function `function`'s decision on `pkt` (counters `before` it ran
/// and `after`).
fn decided(function: &'static str, pkt: &Packet, before: &Counters, after: &Counters) {
    let moved: Vec<String> = before
        .list()
        .into_iter()
        .zip(after.list())
        .filter(|(b, a)| a.2 > b.2)
        .map(|(_, (f, c, _))| format!("{f}.{c}"))
        .collect();
    tracing::trace!(
        function,
        conn = pkt.meta.conn.map(i64::from).unwrap_or(-1),
        opcode = ?pkt.bth.opcode,
        psn = pkt.bth.psn,
        drop = pkt.meta.drop,
        answered = pkt.meta.answered,
        egress_port = pkt.meta.egress_port,
        delay_us = pkt.meta.delay_us,
        counters = %moved.join(","),
        "switch function decision"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec;

    #[test]
    fn registers_match_the_spec() {
        let p = Pipeline::new();
        let names: Vec<_> = p.registers().iter().map(|r| r.name()).collect();
        let spec_names: Vec<_> = spec::REGISTERS.iter().map(|r| r.name).collect();
        assert_eq!(names, spec_names);
        for r in p.registers() {
            assert_eq!(r.dump().len(), r.spec().size);
        }
    }
}
