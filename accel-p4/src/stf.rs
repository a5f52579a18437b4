//! Test vectors in a small STF dialect (in the spirit of p4c's `.stf` files), run
//! against the model.
//!
//! One command per line; `#` starts a comment; numbers are decimal or `0x` hex.
//!
//! ```text
//! register <name> <index> <value>   before the first packet: write the register;
//!                                   after a packet: expect this value (snapshot after)
//! packet <port> <hex>               send an Ethernet frame (no FCS) into <port>
//! expect <port> <hex>               the next frame out of the switch, in order; every
//!                                   frame the last packet produced must be expected
//! flush                             release frames held back by reordering
//! add route_up <ip:port> <qpn> <conn> <src ip:port> <dst ip:port> <client_qpn> <pmtu_log2>
//! add route_down <ip:port> <qpn> <conn> <src ip:port> <dst ip:port>
//! add atomic_range <rkey> <base_va> <slots> <first_slot>
//! add fault_policy <dir> <drop> <duplicate> <reorder> <delay> <delay_us>
//! add tracked_lock <rkey> <va> <slot> <mux>
//! add mux_up <mux> <src ip:port> <dst ip:port> <memnode_qpn>
//! add mux_down <ip:port> <qpn> <mux>
//! add conn_client <conn> <src ip:port> <dst ip:port> <client_qpn>
//! add conn_filler <conn> <rkey> <va> <memnode_qpn>
//! add latch_region <rkey> <base_va> <stride_log2> <tuples> <first_tuple>
//! add steer_key <chain_id> <slot>
//! add steer_class <dma_len>
//! add conn_scoped <conn>
//! add conn_window <conn> <start> <end> <window_id> <read 0|1> <write 0|1>
//! add copy_src <ip:port> <qpn> <slot> <src_psn> <dst_psn> <dst_va> <dst_rkey> <src ip:port> <dst ip:port> <dst_qpn> <pmtu_log2> <len>
//! add copy_dst <ip:port> <qpn> <slot> <dst_psn>
//! add copy_mcast <slot> <replica> <dst_psn> <dst_va> <dst_rkey> <dst ip:port> <dst_qpn>
//! add flow_punt <ip:port> <qpn> <ring>
//! add mirror_rkey <alias> <set> <rkey> <backups>
//! add mirror_lane <set> <backup> <src ip:port> <dst ip:port> <qpn> <rkey> <va_delta>
//! add mirror_ack <ip:port> <qpn> <set> <backup>
//! conn <conn> <psn>                 start tracking a connection (control plane)
//! seed <u64>                        seed the fault generators
//! ```
//!
//! Ports: 0 faces the clients, 1 the memnodes. Pair registers take 64-bit values
//! (`hi << 32 | lo`). Frames are compared byte for byte; expected frames carry the
//! ICRC the switch must have recomputed.

use std::fmt::Write as _;
use std::net::SocketAddrV4;

use crate::functions::read_balance::{BalanceAnswerAction, BalanceLaneAction, BalanceSetAction};
use crate::model::CopyReplicaAction;
use crate::model::{
    AtomicRange, CopyDstAction, CopySrcAction, Emitted, FaultPolicy, FillerAction, FlowPuntAction,
    LatchRegion, LockKey, MirrorAckAction, MirrorLaneAction, MirrorRkeyAction, MuxAction,
    RouteAction, RouteKey, TrackedLock, WindowAction,
};
use crate::pipeline::Pipeline;

/// One STF command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Write (before packets) or expect (after) a register cell.
    Register {
        /// Register name.
        name: String,
        /// Cell index.
        index: usize,
        /// Value.
        value: u64,
    },
    /// Inject a frame.
    Packet {
        /// Ingress port.
        port: u8,
        /// Frame bytes.
        frame: Vec<u8>,
    },
    /// Expect a frame.
    Expect {
        /// Egress port.
        port: u8,
        /// Frame bytes.
        frame: Vec<u8>,
    },
    /// Release held frames.
    Flush,
    /// Add a `route_up` entry.
    RouteUp(RouteKey, RouteAction),
    /// Add a `route_down` entry.
    RouteDown(RouteKey, RouteAction),
    /// Add an `atomic_range` entry.
    AtomicRange(u32, AtomicRange),
    /// Add a `fault_policy` entry.
    FaultPolicy(u32, FaultPolicy),
    /// Add a `tracked_lock` entry.
    TrackedLock(LockKey, TrackedLock),
    /// Add a `mux_up` entry.
    MuxUp(u8, MuxAction),
    /// Add a `mux_down` entry.
    MuxDown(RouteKey, u8),
    /// Add a `conn_client` entry.
    ConnClient(u8, RouteAction),
    /// Add a `conn_filler` entry.
    ConnFiller(u8, FillerAction),
    /// Add a `copy_src` entry (zero-sided copies).
    CopySrc(RouteKey, CopySrcAction),
    /// Add a `copy_dst` entry (zero-sided copies).
    CopyDst(RouteKey, CopyDstAction),
    /// Add a `copy_mcast` entry (one more target of a multicast copy).
    CopyMcast((u8, u8), CopyReplicaAction),
    /// Add a `flow_punt` entry (flow ring control QPs and doorbells).
    FlowPunt(RouteKey, FlowPuntAction),
    /// Add a `mirror_rkey` entry (switch replication of writes: alias key → set).
    MirrorRkey(u32, MirrorRkeyAction),
    /// Add a `mirror_lane` entry ((set, backup) → the backup's addressing).
    MirrorLane((u8, u8), MirrorLaneAction),
    /// Add a `mirror_ack` entry (a lane's answers → (set, backup)).
    MirrorAck(RouteKey, MirrorAckAction),
    /// Add a `balance_rkey` entry (load-balanced READs: read alias key → set).
    BalanceRkey(u32, BalanceSetAction),
    /// Add a `balance_lane` entry ((set, backup) → the read lane's addressing).
    BalanceLane((u8, u8), BalanceLaneAction),
    /// Add a `balance_answer` entry (a read lane's answers → (set, backup)).
    BalanceAnswer(RouteKey, BalanceAnswerAction),
    /// Add a `latch_region` entry.
    LatchRegion(u32, LatchRegion),
    /// Add a `steer_keys` entry (chain id → slot).
    SteerKey(u64, u16),
    /// Add a `steer_classes` entry.
    SteerClass(u32),
    /// Add a `conn_scoped` entry.
    ConnScoped(u8),
    /// Add a window to `conn_window` (and `conn_window_last`): `[start, end)` of a
    /// connection.
    ConnWindow {
        /// The connection.
        conn: u8,
        /// First address.
        start: u64,
        /// One past the last address.
        end: u64,
        /// The window's id and rights.
        action: WindowAction,
    },
    /// Initialise a connection's registers.
    Conn {
        /// Connection id.
        conn: u8,
        /// First client PSN.
        psn: u32,
    },
    /// Seed the fault generators.
    Seed(u64),
}

/// A parse or run failure, with its 1-based line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct StfError {
    /// Line number (0 when the failure is at the end of the file).
    pub line: usize,
    /// What went wrong.
    pub message: String,
}

fn err(line: usize, message: impl Into<String>) -> StfError {
    StfError {
        line,
        message: message.into(),
    }
}

fn num(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(&h.replace('_', ""), 16).ok(),
        None => s.replace('_', "").parse().ok(),
    }
}

/// Lower-case hex of `bytes`.
pub fn to_hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

fn from_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Parse an STF text into `(line, command)` pairs.
pub fn parse(text: &str) -> Result<Vec<(usize, Command)>, StfError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let body = raw.split('#').next().unwrap_or("").trim();
        if body.is_empty() {
            continue;
        }
        let w: Vec<&str> = body.split_whitespace().collect();
        let n = |k: usize| -> Result<u64, StfError> {
            w.get(k)
                .and_then(|s| num(s))
                .ok_or_else(|| err(line, format!("field {k} must be a number: {body}")))
        };
        let a = |k: usize| -> Result<SocketAddrV4, StfError> {
            w.get(k)
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| err(line, format!("field {k} must be ip:port: {body}")))
        };
        let hex = |k: usize| -> Result<Vec<u8>, StfError> {
            w.get(k)
                .and_then(|s| from_hex(s))
                .ok_or_else(|| err(line, "bad hex frame"))
        };
        let cmd = match (w[0], w.get(1).copied()) {
            ("register", _) => Command::Register {
                name: w
                    .get(1)
                    .ok_or_else(|| err(line, "register name"))?
                    .to_string(),
                index: n(2)? as usize,
                value: n(3)?,
            },
            ("packet", _) => Command::Packet {
                port: n(1)? as u8,
                frame: hex(2)?,
            },
            ("expect", _) => Command::Expect {
                port: n(1)? as u8,
                frame: hex(2)?,
            },
            ("flush", _) => Command::Flush,
            ("conn", _) => Command::Conn {
                conn: n(1)? as u8,
                psn: n(2)? as u32,
            },
            ("seed", _) => Command::Seed(n(1)?),
            ("add", Some("route_up")) => Command::RouteUp(
                RouteKey {
                    src: a(2)?,
                    qpn: n(3)? as u32,
                },
                RouteAction {
                    conn: n(4)? as u8,
                    src: a(5)?,
                    dst: a(6)?,
                    client_qpn: n(7)? as u32,
                    pmtu_log2: n(8)? as u8,
                },
            ),
            ("add", Some("route_down")) => Command::RouteDown(
                RouteKey {
                    src: a(2)?,
                    qpn: n(3)? as u32,
                },
                RouteAction {
                    conn: n(4)? as u8,
                    src: a(5)?,
                    dst: a(6)?,
                    client_qpn: 0,
                    pmtu_log2: 10,
                },
            ),
            ("add", Some("atomic_range")) => Command::AtomicRange(
                n(2)? as u32,
                AtomicRange {
                    base_va: n(3)?,
                    slots: n(4)? as u32,
                    first_slot: n(5)? as u32,
                },
            ),
            ("add", Some("fault_policy")) => Command::FaultPolicy(
                n(2)? as u32,
                FaultPolicy {
                    drop: n(3)? as u32,
                    duplicate: n(4)? as u32,
                    reorder: n(5)? as u32,
                    delay: n(6)? as u32,
                    delay_us: n(7)? as u32,
                },
            ),
            ("add", Some("tracked_lock")) => Command::TrackedLock(
                LockKey {
                    rkey: n(2)? as u32,
                    va: n(3)?,
                },
                TrackedLock {
                    slot: n(4)? as u32,
                    mux: n(5)? as u8,
                },
            ),
            ("add", Some("mux_up")) => Command::MuxUp(
                n(2)? as u8,
                MuxAction {
                    src: a(3)?,
                    dst: a(4)?,
                    memnode_qpn: n(5)? as u32,
                },
            ),
            ("add", Some("mux_down")) => Command::MuxDown(
                RouteKey {
                    src: a(2)?,
                    qpn: n(3)? as u32,
                },
                n(4)? as u8,
            ),
            ("add", Some("conn_client")) => Command::ConnClient(
                n(2)? as u8,
                RouteAction {
                    conn: n(2)? as u8,
                    src: a(3)?,
                    dst: a(4)?,
                    client_qpn: n(5)? as u32,
                    pmtu_log2: 10,
                },
            ),
            ("add", Some("copy_src")) => Command::CopySrc(
                RouteKey {
                    src: a(2)?,
                    qpn: n(3)? as u32,
                },
                CopySrcAction {
                    slot: n(4)? as u8,
                    src_psn: n(5)? as u32,
                    dst_psn: n(6)? as u32,
                    dst_va: n(7)?,
                    dst_rkey: n(8)? as u32,
                    src: a(9)?,
                    dst: a(10)?,
                    dst_qpn: n(11)? as u32,
                    pmtu_log2: n(12)? as u8,
                    len: n(13)?,
                },
            ),
            ("add", Some("copy_dst")) => Command::CopyDst(
                RouteKey {
                    src: a(2)?,
                    qpn: n(3)? as u32,
                },
                CopyDstAction {
                    slot: n(4)? as u8,
                    dst_psn: n(5)? as u32,
                },
            ),
            ("add", Some("copy_mcast")) => Command::CopyMcast(
                (n(2)? as u8, n(3)? as u8),
                CopyReplicaAction {
                    dst_psn: n(4)? as u32,
                    dst_va: n(5)?,
                    dst_rkey: n(6)? as u32,
                    dst: a(7)?,
                    dst_qpn: n(8)? as u32,
                },
            ),
            ("add", Some("mirror_rkey")) => Command::MirrorRkey(
                n(2)? as u32,
                MirrorRkeyAction {
                    set: n(3)? as u8,
                    rkey: n(4)? as u32,
                    backups: n(5)? as u8,
                },
            ),
            ("add", Some("mirror_lane")) => Command::MirrorLane(
                (n(2)? as u8, n(3)? as u8),
                MirrorLaneAction {
                    src: a(4)?,
                    dst: a(5)?,
                    qpn: n(6)? as u32,
                    rkey: n(7)? as u32,
                    va_delta: n(8)?,
                },
            ),
            ("add", Some("mirror_ack")) => Command::MirrorAck(
                RouteKey {
                    src: a(2)?,
                    qpn: n(3)? as u32,
                },
                MirrorAckAction {
                    set: n(4)? as u8,
                    backup: n(5)? as u8,
                },
            ),
            ("add", Some("balance_rkey")) => Command::BalanceRkey(
                n(2)? as u32,
                BalanceSetAction {
                    set: n(3)? as u8,
                    rkey: n(4)? as u32,
                    backups: n(5)? as u8,
                    serving: n(6)? as u8,
                },
            ),
            ("add", Some("balance_lane")) => Command::BalanceLane(
                (n(2)? as u8, n(3)? as u8),
                BalanceLaneAction {
                    src: a(4)?,
                    dst: a(5)?,
                    qpn: n(6)? as u32,
                    rkey: n(7)? as u32,
                    va_delta: n(8)?,
                },
            ),
            ("add", Some("balance_answer")) => Command::BalanceAnswer(
                RouteKey {
                    src: a(2)?,
                    qpn: n(3)? as u32,
                },
                BalanceAnswerAction {
                    set: n(4)? as u8,
                    backup: n(5)? as u8,
                },
            ),
            ("add", Some("flow_punt")) => Command::FlowPunt(
                RouteKey {
                    src: a(2)?,
                    qpn: n(3)? as u32,
                },
                FlowPuntAction { ring: n(4)? as u16 },
            ),
            ("add", Some("conn_filler")) => Command::ConnFiller(
                n(2)? as u8,
                FillerAction {
                    rkey: n(3)? as u32,
                    va: n(4)?,
                    memnode_qpn: n(5)? as u32,
                },
            ),
            ("add", Some("latch_region")) => Command::LatchRegion(
                n(2)? as u32,
                LatchRegion {
                    base_va: n(3)?,
                    stride_log2: n(4)? as u8,
                    tuples: n(5)? as u32,
                    first_tuple: n(6)? as u32,
                },
            ),
            ("add", Some("steer_key")) => Command::SteerKey(n(2)?, n(3)? as u16),
            ("add", Some("steer_class")) => Command::SteerClass(n(2)? as u32),
            ("add", Some("conn_scoped")) => Command::ConnScoped(n(2)? as u8),
            ("add", Some("conn_window")) => Command::ConnWindow {
                conn: n(2)? as u8,
                start: n(3)?,
                end: n(4)?,
                action: WindowAction {
                    id: n(5)? as u16,
                    read: n(6)? != 0,
                    write: n(7)? != 0,
                },
            },
            _ => return Err(err(line, format!("unknown command: {body}"))),
        };
        out.push((line, cmd));
    }
    Ok(out)
}

/// Render commands back to STF text (one per line).
pub fn render(commands: &[Command]) -> String {
    let mut s = String::new();
    for c in commands {
        let _ = match c {
            Command::Register { name, index, value } => {
                writeln!(s, "register {name} {index} 0x{value:x}")
            }
            Command::Packet { port, frame } => writeln!(s, "packet {port} {}", to_hex(frame)),
            Command::Expect { port, frame } => writeln!(s, "expect {port} {}", to_hex(frame)),
            Command::Flush => writeln!(s, "flush"),
            Command::Conn { conn, psn } => writeln!(s, "conn {conn} {psn}"),
            Command::Seed(v) => writeln!(s, "seed {v}"),
            Command::RouteUp(k, a) => writeln!(
                s,
                "add route_up {} 0x{:x} {} {} {} 0x{:x} {}",
                k.src, k.qpn, a.conn, a.src, a.dst, a.client_qpn, a.pmtu_log2
            ),
            Command::RouteDown(k, a) => writeln!(
                s,
                "add route_down {} 0x{:x} {} {} {}",
                k.src, k.qpn, a.conn, a.src, a.dst
            ),
            Command::AtomicRange(rkey, r) => writeln!(
                s,
                "add atomic_range 0x{rkey:x} 0x{:x} {} {}",
                r.base_va, r.slots, r.first_slot
            ),
            Command::FaultPolicy(dir, p) => writeln!(
                s,
                "add fault_policy {dir} {} {} {} {} {}",
                p.drop, p.duplicate, p.reorder, p.delay, p.delay_us
            ),
            Command::TrackedLock(k, t) => writeln!(
                s,
                "add tracked_lock 0x{:x} 0x{:x} {} {}",
                k.rkey, k.va, t.slot, t.mux
            ),
            Command::MuxUp(m, a) => writeln!(
                s,
                "add mux_up {m} {} {} 0x{:x}",
                a.src, a.dst, a.memnode_qpn
            ),
            Command::MuxDown(k, m) => {
                writeln!(s, "add mux_down {} 0x{:x} {m}", k.src, k.qpn)
            }
            Command::ConnClient(c, a) => writeln!(
                s,
                "add conn_client {c} {} {} 0x{:x}",
                a.src, a.dst, a.client_qpn
            ),
            Command::CopySrc(k, c) => writeln!(
                s,
                "add copy_src {} 0x{:x} {} 0x{:x} 0x{:x} 0x{:x} 0x{:x} {} {} 0x{:x} {} {}",
                k.src,
                k.qpn,
                c.slot,
                c.src_psn,
                c.dst_psn,
                c.dst_va,
                c.dst_rkey,
                c.src,
                c.dst,
                c.dst_qpn,
                c.pmtu_log2,
                c.len
            ),
            Command::CopyDst(k, c) => writeln!(
                s,
                "add copy_dst {} 0x{:x} {} 0x{:x}",
                k.src, k.qpn, c.slot, c.dst_psn
            ),
            Command::CopyMcast((slot, r), c) => writeln!(
                s,
                "add copy_mcast {slot} {r} 0x{:x} 0x{:x} 0x{:x} {} 0x{:x}",
                c.dst_psn, c.dst_va, c.dst_rkey, c.dst, c.dst_qpn
            ),
            Command::FlowPunt(k, f) => {
                writeln!(s, "add flow_punt {} 0x{:x} {}", k.src, k.qpn, f.ring)
            }
            Command::MirrorRkey(alias, m) => writeln!(
                s,
                "add mirror_rkey 0x{alias:x} {} 0x{:x} {}",
                m.set, m.rkey, m.backups
            ),
            Command::MirrorLane((set, b), l) => writeln!(
                s,
                "add mirror_lane {set} {b} {} {} 0x{:x} 0x{:x} 0x{:x}",
                l.src, l.dst, l.qpn, l.rkey, l.va_delta
            ),
            Command::MirrorAck(k, m) => writeln!(
                s,
                "add mirror_ack {} 0x{:x} {} {}",
                k.src, k.qpn, m.set, m.backup
            ),
            Command::BalanceRkey(alias, b) => writeln!(
                s,
                "add balance_rkey 0x{alias:x} {} 0x{:x} {} {}",
                b.set, b.rkey, b.backups, b.serving
            ),
            Command::BalanceLane((set, b), l) => writeln!(
                s,
                "add balance_lane {set} {b} {} {} 0x{:x} 0x{:x} 0x{:x}",
                l.src, l.dst, l.qpn, l.rkey, l.va_delta
            ),
            Command::BalanceAnswer(k, b) => writeln!(
                s,
                "add balance_answer {} 0x{:x} {} {}",
                k.src, k.qpn, b.set, b.backup
            ),
            Command::ConnFiller(c, f) => writeln!(
                s,
                "add conn_filler {c} 0x{:x} 0x{:x} 0x{:x}",
                f.rkey, f.va, f.memnode_qpn
            ),
            Command::LatchRegion(rkey, r) => writeln!(
                s,
                "add latch_region 0x{rkey:x} 0x{:x} {} {} {}",
                r.base_va, r.stride_log2, r.tuples, r.first_tuple
            ),
            Command::SteerKey(k, slot) => writeln!(s, "add steer_key 0x{k:x} {slot}"),
            Command::SteerClass(c) => writeln!(s, "add steer_class {c}"),
            Command::ConnScoped(c) => writeln!(s, "add conn_scoped {c}"),
            Command::ConnWindow {
                conn,
                start,
                end,
                action,
            } => writeln!(
                s,
                "add conn_window {conn} 0x{start:x} 0x{end:x} {} {} {}",
                action.id,
                u8::from(action.read),
                u8::from(action.write)
            ),
        };
    }
    s
}

/// Run STF text against a fresh pipeline. `mode` lines are plain `register mode 0 ..`.
pub fn run(text: &str) -> Result<Pipeline, StfError> {
    let commands = parse(text)?;
    let mut p = Pipeline::new();
    let mut pending: std::collections::VecDeque<Emitted> = Default::default();
    let mut sent_any = false;
    let check_drained = |pending: &std::collections::VecDeque<Emitted>, line: usize| {
        if let Some(e) = pending.front() {
            return Err(err(
                line,
                format!(
                    "{} unexpected frame(s); first on port {}: {}",
                    pending.len(),
                    e.port,
                    to_hex(&e.frame)
                ),
            ));
        }
        Ok(())
    };
    for (line, cmd) in commands {
        match cmd {
            Command::Packet { port, frame } => {
                check_drained(&pending, line)?;
                sent_any = true;
                pending.extend(p.process(port, &frame));
            }
            Command::Flush => {
                check_drained(&pending, line)?;
                pending.extend(p.flush());
            }
            Command::Expect { port, frame } => {
                let got = pending
                    .pop_front()
                    .ok_or_else(|| err(line, "expected a frame, the switch sent none"))?;
                if got.port != port || got.frame != frame {
                    return Err(err(
                        line,
                        format!(
                            "frame mismatch\n  want port {port}: {}\n  got  port {}: {}",
                            to_hex(&frame),
                            got.port,
                            to_hex(&got.frame)
                        ),
                    ));
                }
            }
            Command::Register { name, index, value } => {
                let Some(reg) = p.register_mut(&name) else {
                    return Err(err(line, format!("no register {name}")));
                };
                if sent_any {
                    let got = reg.cp_read(index);
                    if got != value {
                        return Err(err(
                            line,
                            format!("register {name}[{index}] = 0x{got:x}, want 0x{value:x}"),
                        ));
                    }
                } else {
                    reg.cp_write(index, value);
                }
            }
            Command::RouteUp(k, a) => {
                p.tables
                    .route_up
                    .insert(k, a)
                    .map_err(|e| err(line, e.to_string()))?;
            }
            Command::RouteDown(k, a) => {
                p.tables
                    .route_down
                    .insert(k, a)
                    .map_err(|e| err(line, e.to_string()))?;
            }
            Command::AtomicRange(k, a) => {
                p.tables
                    .atomic_range
                    .insert(k, a)
                    .map_err(|e| err(line, e.to_string()))?;
            }
            Command::FaultPolicy(k, a) => {
                p.tables
                    .fault_policy
                    .insert(k, a)
                    .map_err(|e| err(line, e.to_string()))?;
            }
            Command::TrackedLock(k, a) => {
                p.tables
                    .tracked_lock
                    .insert(k, a)
                    .map_err(|e| err(line, e.to_string()))?;
            }
            Command::MuxUp(k, a) => {
                p.tables
                    .mux_up
                    .insert(k, a)
                    .map_err(|e| err(line, e.to_string()))?;
            }
            Command::MuxDown(k, a) => {
                p.tables
                    .mux_down
                    .insert(k, a)
                    .map_err(|e| err(line, e.to_string()))?;
            }
            Command::ConnClient(k, a) => {
                p.tables
                    .conn_client
                    .insert(k, a)
                    .map_err(|e| err(line, e.to_string()))?;
            }
            Command::CopySrc(k, a) => {
                p.tables
                    .copy_src
                    .insert(k, a)
                    .map_err(|e| err(line, e.to_string()))?;
            }
            Command::CopyDst(k, a) => {
                p.tables
                    .copy_dst
                    .insert(k, a)
                    .map_err(|e| err(line, e.to_string()))?;
            }
            Command::CopyMcast(k, a) => {
                p.tables
                    .copy_mcast
                    .insert(k, a)
                    .map_err(|e| err(line, e.to_string()))?;
            }
            Command::FlowPunt(k, a) => {
                p.tables
                    .flow_punt
                    .insert(k, a)
                    .map_err(|e| err(line, e.to_string()))?;
            }
            Command::MirrorRkey(k, a) => {
                p.tables
                    .mirror_rkey
                    .insert(k, a)
                    .map_err(|e| err(line, e.to_string()))?;
            }
            Command::MirrorLane(k, a) => {
                p.tables
                    .mirror_lane
                    .insert(k, a)
                    .map_err(|e| err(line, e.to_string()))?;
            }
            Command::MirrorAck(k, a) => {
                p.tables
                    .mirror_ack
                    .insert(k, a)
                    .map_err(|e| err(line, e.to_string()))?;
            }
            Command::BalanceRkey(k, a) => {
                p.read_balance_mut().balance_rkey.insert(k, a);
            }
            Command::BalanceLane(k, a) => {
                p.read_balance_mut().balance_lane.insert(k, a);
            }
            Command::BalanceAnswer(k, a) => {
                p.read_balance_mut().balance_answer.insert(k, a);
            }
            Command::ConnFiller(k, a) => {
                p.tables
                    .conn_filler
                    .insert(k, a)
                    .map_err(|e| err(line, e.to_string()))?;
            }
            Command::LatchRegion(k, a) => {
                p.tables
                    .latch_region
                    .insert(k, a)
                    .map_err(|e| err(line, e.to_string()))?;
            }
            Command::ConnScoped(c) => {
                p.tables
                    .conn_scoped
                    .insert(c, ())
                    .map_err(|e| err(line, e.to_string()))?;
            }
            Command::ConnWindow {
                conn,
                start,
                end,
                action,
            } => {
                p.tables
                    .conn_window
                    .insert(conn, start, end, action)
                    .map_err(|e| err(line, e.to_string()))?;
            }
            Command::SteerKey(k, slot) => {
                p.tables
                    .steer_keys
                    .insert(k, slot)
                    .map_err(|e| err(line, e.to_string()))?;
            }
            Command::SteerClass(c) => {
                p.tables
                    .steer_classes
                    .insert(c, ())
                    .map_err(|e| err(line, e.to_string()))?;
            }
            Command::Conn { conn, psn } => p.init_connection(conn, psn),
            Command::Seed(s) => p.seed_faults(s),
        }
    }
    check_drained(&pending, 0)?;
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_render_round_trip() {
        let text = "\
# a comment
register mode 0 0x8
add route_up 10.0.0.1:5000 0x12 3 10.0.0.9:7001 10.0.0.2:4791 0x34 10
add route_down 10.0.0.2:4791 0x34 3 10.0.0.9:7000 10.0.0.1:5000
add atomic_range 0x55 0x1000 8 0
add fault_policy 0 1 2 3 4 5
conn 3 100
seed 7
packet 0 00ff
expect 1 00ff
flush
";
        let cmds: Vec<_> = parse(text).unwrap().into_iter().map(|(_, c)| c).collect();
        let again: Vec<_> = parse(&render(&cmds))
            .unwrap()
            .into_iter()
            .map(|(_, c)| c)
            .collect();
        assert_eq!(cmds, again);
        assert_eq!(cmds.len(), 10);
        assert!(parse("bogus 1").is_err());
        assert!(parse("packet 0 abc").is_err());
    }
}
