//! Per-rule test vectors: input frames, expected output frames and register snapshots,
//! stored as STF text and pcap under `tests/vectors/` and run against the model.
//!
//! Each case is built here independently of the model (with `verbs::wire`), so a
//! vector checks the model rather than restating it. `ACCEL_P4_BLESS=1 cargo test
//! -p accel-p4 --test vectors` rewrites the files; otherwise the files must equal what
//! the builders produce, and every `*.stf` file must pass.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::time::Duration;

use accel_p4::functions::read_balance::{BalanceAnswerAction, BalanceLaneAction, BalanceSetAction};
use accel_p4::model::{
    AtomicRange, CopyDstAction, CopyReplicaAction, CopySrcAction, FaultPolicy, FillerAction,
    FlowPuntAction, LatchRegion, LockKey, MirrorAckAction, MirrorLaneAction, MirrorRkeyAction,
    MuxAction, RouteAction, RouteKey, TrackedLock,
};
use accel_p4::spec::{self, PORT_CLIENT, PORT_CPU, PORT_MEMNODE};
use accel_p4::stf::{self, Command};
use verbs::wire::{
    AethRepr, AtomicAckEthRepr, AtomicEthRepr, BthRepr, FrameRepr, IcrcPath, NakCode, Opcode,
    PacketRepr, RethRepr, Syndrome, pcap,
};

const CLIENT: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 50_000);
const FRONT: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 100), 4791);
const UPSTREAM: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 100), 50_001);
const MEMNODE: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 4791);
const CLIENT_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const SWITCH_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x64];
const MEMNODE_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
const CLIENT_QPN: u32 = 0x11;
const MEMNODE_QPN: u32 = 0x22;
const CONN: u8 = 3;
const RKEY: u32 = 0xABCD;
const SW_RKEY: u32 = 0x5157;
const SW_BASE: u64 = 0x7000_0000;

fn frame(
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    src: SocketAddrV4,
    dst: SocketAddrV4,
    r: &PacketRepr<'_>,
) -> Vec<u8> {
    let path = IcrcPath::new(src, dst);
    let mut roce = vec![0u8; r.buffer_len()];
    r.emit(&mut roce, &path).expect("emit");
    FrameRepr::build(src_mac, dst_mac, 0x02, &path, &roce)
}

/// A client request as it arrives at the switch.
fn from_client(r: &PacketRepr<'_>) -> Vec<u8> {
    frame(CLIENT_MAC, SWITCH_MAC, CLIENT, FRONT, r)
}

/// The same request as it must leave towards the memnode.
fn to_memnode(r: &PacketRepr<'_>) -> Vec<u8> {
    frame(CLIENT_MAC, SWITCH_MAC, UPSTREAM, MEMNODE, r)
}

/// A memnode response as it arrives at the switch.
fn from_memnode(r: &PacketRepr<'_>) -> Vec<u8> {
    frame(MEMNODE_MAC, SWITCH_MAC, MEMNODE, UPSTREAM, r)
}

/// A response as it must reach the client (forwarded: MACs unchanged).
fn to_client(r: &PacketRepr<'_>) -> Vec<u8> {
    frame(MEMNODE_MAC, SWITCH_MAC, FRONT, CLIENT, r)
}

/// A switch answer (MACs swapped from the request).
fn answer(r: &PacketRepr<'_>) -> Vec<u8> {
    frame(SWITCH_MAC, CLIENT_MAC, FRONT, CLIENT, r)
}

fn request(op: Opcode, psn: u32) -> PacketRepr<'static> {
    PacketRepr::new(BthRepr::new(op, MEMNODE_QPN, psn, true))
}

fn read(psn: u32, va: u64, len: u32) -> PacketRepr<'static> {
    let mut r = request(Opcode::ReadRequest, psn);
    r.reth = Some(RethRepr {
        va,
        rkey: RKEY,
        dma_len: len,
    });
    r
}

fn write(psn: u32, va: u64, data: &'static [u8]) -> PacketRepr<'static> {
    let mut r = request(Opcode::WriteOnly, psn);
    r.reth = Some(RethRepr {
        va,
        rkey: RKEY,
        dma_len: data.len() as u32,
    });
    r.payload = data;
    r
}

fn atomic(
    op: Opcode,
    psn: u32,
    rkey: u32,
    va: u64,
    swap_add: u64,
    compare: u64,
) -> PacketRepr<'static> {
    let mut r = request(op, psn);
    r.atomic_eth = Some(AtomicEthRepr {
        va,
        rkey,
        swap_add,
        compare,
    });
    r
}

fn ack(psn: u32, msn: u32) -> PacketRepr<'static> {
    let mut r = PacketRepr::new(BthRepr::new(Opcode::Acknowledge, CLIENT_QPN, psn, false));
    r.aeth = Some(AethRepr {
        syndrome: Syndrome::Ack { credits: 31 },
        msn,
    });
    r
}

fn nak(psn: u32, msn: u32, code: NakCode) -> PacketRepr<'static> {
    let mut r = ack(psn, msn);
    r.aeth = Some(AethRepr {
        syndrome: Syndrome::Nak(code),
        msn,
    });
    r
}

fn read_response(psn: u32, msn: u32, data: &'static [u8]) -> PacketRepr<'static> {
    let mut r = PacketRepr::new(BthRepr::new(
        Opcode::ReadResponseOnly,
        CLIENT_QPN,
        psn,
        false,
    ));
    r.aeth = Some(AethRepr {
        syndrome: Syndrome::Ack { credits: 31 },
        msn,
    });
    r.payload = data;
    r
}

fn atomic_ack(psn: u32, msn: u32, original: u64) -> PacketRepr<'static> {
    let mut r = ack(psn, msn);
    r.bth.opcode = Opcode::AtomicAcknowledge;
    r.atomic_ack_eth = Some(AtomicAckEthRepr { original });
    r
}

/// Routes for the one connection of every vector, starting at client PSN `psn`.
fn setup(mode: u32, psn: u32) -> Vec<Command> {
    vec![
        Command::Register {
            name: "mode".into(),
            index: 0,
            value: u64::from(mode),
        },
        Command::RouteUp(
            RouteKey {
                src: CLIENT,
                qpn: MEMNODE_QPN,
            },
            RouteAction {
                conn: CONN,
                src: UPSTREAM,
                dst: MEMNODE,
                client_qpn: CLIENT_QPN,
                pmtu_log2: 10,
            },
        ),
        Command::RouteDown(
            RouteKey {
                src: MEMNODE,
                qpn: CLIENT_QPN,
            },
            RouteAction {
                conn: CONN,
                src: FRONT,
                dst: CLIENT,
                client_qpn: 0,
                pmtu_log2: 10,
            },
        ),
        Command::AtomicRange(
            SW_RKEY,
            AtomicRange {
                base_va: SW_BASE,
                slots: 16,
                first_slot: 0,
            },
        ),
        Command::Conn { conn: CONN, psn },
    ]
}

fn pkt(port: u8, frame: Vec<u8>) -> Command {
    Command::Packet { port, frame }
}

fn expect(port: u8, frame: Vec<u8>) -> Command {
    Command::Expect { port, frame }
}

fn reg(name: &str, index: usize, value: u64) -> Command {
    Command::Register {
        name: name.into(),
        index,
        value,
    }
}

const VALID: u64 = spec::PSN_VALID as u64;
const ATOMICS: u32 = spec::mode::SWITCH_ATOMICS;

/// The answer-ring cell of the vectors' connection for client PSN `psn`.
fn ans(psn: u32) -> usize {
    CONN as usize * spec::ANSWER_RING + (psn as usize % spec::ANSWER_RING)
}

/// Every vector: name, description, commands.
fn cases() -> Vec<(&'static str, &'static str, Vec<Command>)> {
    let mut v = Vec::new();

    let mut c = setup(0, 100);
    c.extend([
        pkt(PORT_CLIENT, from_client(&read(100, 0x1000, 64))),
        expect(PORT_MEMNODE, to_memnode(&read(100, 0x1000, 64))),
        pkt(
            PORT_MEMNODE,
            from_memnode(&read_response(100, 1, &[7u8; 64])),
        ),
        expect(PORT_CLIENT, to_client(&read_response(100, 1, &[7u8; 64]))),
        pkt(PORT_CLIENT, from_client(&write(101, 0x2000, b"hello"))),
        expect(PORT_MEMNODE, to_memnode(&write(101, 0x2000, b"hello"))),
        pkt(PORT_MEMNODE, from_memnode(&ack(101, 2))),
        expect(PORT_CLIENT, to_client(&ack(101, 2))),
        reg("conn_epsn", CONN as usize, 102 | VALID),
        reg("conn_acked", CONN as usize, 102 | VALID),
    ]);
    v.push((
        "forward_rewrites_addresses",
        "a READ and a WRITE go up re-addressed with a recomputed ICRC; responses come back",
        c,
    ));

    let mut c = setup(0, 5);
    let mut bad = from_client(&read(5, 0x1000, 8));
    let n = bad.len();
    bad[n - 1] ^= 0x01;
    let mut stranger = read(5, 0x1000, 8);
    stranger.bth.dest_qpn = 0x99;
    c.extend([
        pkt(PORT_CLIENT, bad),
        pkt(PORT_CLIENT, from_client(&stranger)),
        pkt(PORT_CLIENT, vec![0u8; 20]),
        reg("conn_epsn", CONN as usize, 5 | VALID),
    ]);
    v.push((
        "drop_bad_icrc_unrouted_malformed",
        "a wrong ICRC, an unknown QPN and a runt frame are dropped without touching state",
        c,
    ));

    let mut c = setup(ATOMICS, 200);
    c.extend([
        reg("atomic_word", 2, 5),
        pkt(
            PORT_CLIENT,
            from_client(&atomic(
                Opcode::CompareSwap,
                200,
                SW_RKEY,
                SW_BASE + 16,
                9,
                5,
            )),
        ),
        expect(PORT_CLIENT, answer(&atomic_ack(200, 1, 5))),
        pkt(
            PORT_CLIENT,
            from_client(&atomic(
                Opcode::CompareSwap,
                201,
                SW_RKEY,
                SW_BASE + 16,
                1,
                5,
            )),
        ),
        expect(PORT_CLIENT, answer(&atomic_ack(201, 2, 9))),
        reg("atomic_word", 2, 9),
        reg("conn_epsn", CONN as usize, (2 << 32) | 202 | VALID),
        reg("answer_psn", ans(201), 201 | VALID),
        reg("answer_result", ans(201), 9),
        reg("conn_msn", CONN as usize, 2),
    ]);
    v.push((
        "atomics_cas_answered",
        "CAS on a switch-owned word succeeds then fails, answered in half a round trip",
        c,
    ));

    let mut c = setup(ATOMICS, 300);
    c.extend([
        reg("atomic_word", 1, 0xFFFF_FFFF),
        pkt(
            PORT_CLIENT,
            from_client(&atomic(Opcode::FetchAdd, 300, SW_RKEY, SW_BASE + 8, 1, 0)),
        ),
        expect(PORT_CLIENT, answer(&atomic_ack(300, 1, 0xFFFF_FFFF))),
        pkt(
            PORT_CLIENT,
            from_client(&atomic(
                Opcode::CompareSwap,
                301,
                SW_RKEY,
                SW_BASE + 8,
                0xAAAA_BBBB_CCCC_DDDD,
                0x1_0000_0000,
            )),
        ),
        expect(PORT_CLIENT, answer(&atomic_ack(301, 2, 0x1_0000_0000))),
        reg("atomic_word", 1, 0xAAAA_BBBB_CCCC_DDDD),
    ]);
    v.push((
        "atomics_faa_carry_and_cas_64bit",
        "FAA carries from the lo cell into the hi cell; CAS compares and swaps both halves",
        c,
    ));

    let mut c = setup(ATOMICS, 400);
    let cas = atomic(Opcode::CompareSwap, 400, SW_RKEY, SW_BASE, 1, 0);
    c.extend([
        pkt(PORT_CLIENT, from_client(&cas)),
        expect(PORT_CLIENT, answer(&atomic_ack(400, 1, 0))),
        pkt(PORT_CLIENT, from_client(&cas)),
        expect(PORT_CLIENT, answer(&atomic_ack(400, 1, 0))),
        reg("atomic_word", 0, 1),
        reg(
            "conn_sw",
            CONN as usize,
            ((400 | VALID) << 32) | 400 | VALID,
        ),
    ]);
    v.push((
        "atomics_duplicate_replayed",
        "a retransmitted CAS (same PSN) is answered from answer_result and not re-applied",
        c,
    ));

    let mut c = setup(ATOMICS, 450);
    let cas = atomic(Opcode::CompareSwap, 450, SW_RKEY, SW_BASE, 1, 0);
    let faa = atomic(Opcode::FetchAdd, 451, SW_RKEY, SW_BASE + 8, 5, 0);
    let faa2 = atomic(Opcode::FetchAdd, 452, SW_RKEY, SW_BASE + 8, 5, 0);
    c.extend([
        reg("atomic_word", 1, 10),
        // Three atomics in flight on one queue pair, answered in order.
        pkt(PORT_CLIENT, from_client(&cas)),
        expect(PORT_CLIENT, answer(&atomic_ack(450, 1, 0))),
        pkt(PORT_CLIENT, from_client(&faa)),
        expect(PORT_CLIENT, answer(&atomic_ack(451, 2, 10))),
        pkt(PORT_CLIENT, from_client(&faa2)),
        expect(PORT_CLIENT, answer(&atomic_ack(452, 3, 15))),
        // The first two answers were lost: the requester goes back to 450 and sends
        // all three again. Each is answered with the value its first answer carried,
        // from its own cell of the ring, and nothing is applied twice.
        pkt(PORT_CLIENT, from_client(&cas)),
        expect(PORT_CLIENT, answer(&atomic_ack(450, 3, 0))),
        pkt(PORT_CLIENT, from_client(&faa)),
        expect(PORT_CLIENT, answer(&atomic_ack(451, 3, 10))),
        pkt(PORT_CLIENT, from_client(&faa2)),
        expect(PORT_CLIENT, answer(&atomic_ack(452, 3, 15))),
        reg("atomic_word", 0, 1),
        reg("atomic_word", 1, 20),
        reg("answer_psn", ans(450), 450 | VALID),
        reg("answer_psn", ans(451), 451 | VALID),
        reg("answer_psn", ans(452), 452 | VALID),
        reg("answer_result", ans(450), 0),
        reg("answer_result", ans(451), 10),
        reg("answer_result", ans(452), 15),
        reg(
            "conn_sw",
            CONN as usize,
            ((450 | VALID) << 32) | 452 | VALID,
        ),
        // A retransmission of a PSN the switch never answered (its cell holds nothing)
        // is not replayed: dropped like a deferred request.
        pkt(
            PORT_CLIENT,
            from_client(&atomic(Opcode::FetchAdd, 449, SW_RKEY, SW_BASE + 8, 5, 0)),
        ),
        reg("atomic_word", 1, 20),
    ]);
    v.push((
        "atomics_pipelined_lost_answers_replayed",
        "pipelined atomics whose answers were lost come back behind later answers; each is replayed from its cell of the per-connection answer ring (answer_psn, answer_result), not only the last",
        c,
    ));

    let mut c = setup(ATOMICS, 500);
    c.extend([
        pkt(
            PORT_CLIENT,
            from_client(&atomic(Opcode::FetchAdd, 500, SW_RKEY, SW_BASE, 3, 0)),
        ),
        expect(PORT_CLIENT, answer(&atomic_ack(500, 1, 0))),
        pkt(PORT_CLIENT, from_client(&write(501, 0x2000, b"abcd"))),
        expect(PORT_MEMNODE, to_memnode(&write(500, 0x2000, b"abcd"))),
        pkt(PORT_MEMNODE, from_memnode(&ack(500, 1))),
        expect(PORT_CLIENT, to_client(&ack(501, 2))),
        pkt(PORT_CLIENT, from_client(&read(502, 0x2000, 4))),
        expect(PORT_MEMNODE, to_memnode(&read(501, 0x2000, 4))),
        pkt(PORT_MEMNODE, from_memnode(&read_response(501, 2, b"abcd"))),
        expect(PORT_CLIENT, to_client(&read_response(502, 3, b"abcd"))),
        // A stale duplicate of the first answer's predecessor window is refused.
        reg("conn_epsn", CONN as usize, (1 << 32) | 503 | VALID),
        reg("conn_acked", CONN as usize, 502 | VALID),
        reg("conn_msn", CONN as usize, (2 << 32) | 1),
    ]);
    v.push((
        "atomics_psn_msn_offsets",
        "after a switch answer, forwarded requests go up with PSN-1 and responses come back with PSN+1, MSN+1",
        c,
    ));

    let mut c = setup(ATOMICS, 600);
    let cas = atomic(Opcode::CompareSwap, 601, SW_RKEY, SW_BASE, 1, 0);
    c.extend([
        pkt(PORT_CLIENT, from_client(&write(600, 0x2000, b"wxyz"))),
        expect(PORT_MEMNODE, to_memnode(&write(600, 0x2000, b"wxyz"))),
        // The WRITE is unanswered: answering now would acknowledge it. Dropped.
        pkt(PORT_CLIENT, from_client(&cas)),
        reg("atomic_word", 0, 0),
        pkt(PORT_MEMNODE, from_memnode(&ack(600, 1))),
        expect(PORT_CLIENT, to_client(&ack(600, 1))),
        // The retransmission finds the connection quiet and is answered.
        pkt(PORT_CLIENT, from_client(&cas)),
        expect(PORT_CLIENT, answer(&atomic_ack(601, 2, 0))),
        reg("atomic_word", 0, 1),
    ]);
    v.push((
        "atomics_deferred_until_quiet",
        "an atomic behind an unanswered forwarded request is dropped, then answered on retransmission",
        c,
    ));

    let mut c = setup(ATOMICS, 700);
    c.extend([
        pkt(PORT_CLIENT, from_client(&write(700, 0x2000, b"1234"))),
        expect(PORT_MEMNODE, to_memnode(&write(700, 0x2000, b"1234"))),
        pkt(PORT_MEMNODE, from_memnode(&ack(700, 1))),
        expect(PORT_CLIENT, to_client(&ack(700, 1))),
        pkt(
            PORT_CLIENT,
            from_client(&atomic(Opcode::FetchAdd, 701, SW_RKEY, SW_BASE, 1, 0)),
        ),
        expect(PORT_CLIENT, answer(&atomic_ack(701, 2, 0))),
        // The WRITE retransmitted from before the answer cannot be translated: dropped.
        pkt(PORT_CLIENT, from_client(&write(700, 0x2000, b"1234"))),
        // A late duplicate ACK from before the answer is dropped too.
        pkt(PORT_MEMNODE, from_memnode(&ack(700, 1))),
        // The memnode's sequence NAK after a lost request is translated.
        pkt(PORT_CLIENT, from_client(&read(703, 0x2000, 4))),
        expect(PORT_MEMNODE, to_memnode(&read(702, 0x2000, 4))),
        pkt(
            PORT_MEMNODE,
            from_memnode(&nak(701, 1, NakCode::PsnSequenceError)),
        ),
        expect(
            PORT_CLIENT,
            to_client(&nak(702, 2, NakCode::PsnSequenceError)),
        ),
    ]);
    v.push((
        "atomics_stale_and_sequence_nak",
        "duplicates and responses from before a switch answer are dropped; sequence NAKs are shifted",
        c,
    ));

    let mut c = setup(ATOMICS, 800);
    let mut refused = nak(800, 1, NakCode::InvalidRequest);
    refused.bth.opcode = Opcode::Acknowledge;
    c.extend([
        pkt(
            PORT_CLIENT,
            from_client(&atomic(Opcode::FetchAdd, 800, SW_RKEY, SW_BASE + 4, 1, 0)),
        ),
        expect(PORT_CLIENT, answer(&refused)),
        pkt(
            PORT_CLIENT,
            from_client(&atomic(Opcode::FetchAdd, 801, RKEY, SW_BASE, 1, 0)),
        ),
        expect(
            PORT_MEMNODE,
            to_memnode(&atomic(Opcode::FetchAdd, 800, RKEY, SW_BASE, 1, 0)),
        ),
    ]);
    v.push((
        "atomics_misaligned_refused_other_rkey_forwarded",
        "a misaligned switch-owned atomic gets NAK(invalid request); another rkey is forwarded",
        c,
    ));

    let mut c = setup(0, 900);
    c.push(Command::RouteUp(
        RouteKey {
            src: CLIENT,
            qpn: MEMNODE_QPN,
        },
        RouteAction {
            conn: CONN,
            src: UPSTREAM,
            dst: MEMNODE,
            client_qpn: CLIENT_QPN,
            pmtu_log2: 10,
        },
    ));
    c.extend([
        // The same CAS with mode 0 is forwarded, switch range or not.
        pkt(
            PORT_CLIENT,
            from_client(&atomic(Opcode::CompareSwap, 900, SW_RKEY, SW_BASE, 1, 0)),
        ),
        expect(
            PORT_MEMNODE,
            to_memnode(&atomic(Opcode::CompareSwap, 900, SW_RKEY, SW_BASE, 1, 0)),
        ),
        pkt(PORT_MEMNODE, from_memnode(&atomic_ack(900, 1, 0))),
        expect(PORT_CLIENT, to_client(&atomic_ack(900, 1, 0))),
    ]);
    v.push((
        "atomics_off_forwards",
        "with the mode bit clear, atomics on the switch range go to the memnode",
        c,
    ));

    let always = spec::FAULT_SCALE;
    let mut c = setup(spec::mode::FAULTS, 1000);
    c.extend([
        Command::Seed(42),
        Command::FaultPolicy(
            spec::DIR_UP,
            FaultPolicy {
                duplicate: always,
                ..FaultPolicy::default()
            },
        ),
        Command::FaultPolicy(
            spec::DIR_DOWN,
            FaultPolicy {
                drop: always,
                ..FaultPolicy::default()
            },
        ),
        pkt(PORT_CLIENT, from_client(&read(1000, 0x1000, 8))),
        expect(PORT_MEMNODE, to_memnode(&read(1000, 0x1000, 8))),
        expect(PORT_MEMNODE, to_memnode(&read(1000, 0x1000, 8))),
        pkt(
            PORT_MEMNODE,
            from_memnode(&read_response(1000, 1, b"12345678")),
        ),
    ]);
    v.push((
        "faults_duplicate_up_drop_down",
        "policy 65536/65536: every request is duplicated, every response dropped",
        c,
    ));

    let mut c = setup(spec::mode::FAULTS, 1100);
    c.extend([
        Command::Seed(42),
        Command::FaultPolicy(
            spec::DIR_UP,
            FaultPolicy {
                reorder: always,
                ..FaultPolicy::default()
            },
        ),
        pkt(PORT_CLIENT, from_client(&read(1100, 0x1000, 8))),
        pkt(PORT_CLIENT, from_client(&read(1101, 0x1000, 8))),
        expect(PORT_MEMNODE, to_memnode(&read(1101, 0x1000, 8))),
        expect(PORT_MEMNODE, to_memnode(&read(1100, 0x1000, 8))),
        pkt(PORT_CLIENT, from_client(&read(1102, 0x1000, 8))),
        flush(),
        expect(PORT_MEMNODE, to_memnode(&read(1102, 0x1000, 8))),
    ]);
    v.push((
        "faults_reorder",
        "a held request leaves after the next one; flush releases the last",
        c,
    ));

    v.extend(replace_cases());
    v.extend(latch_cases());
    v.extend(steer_cases());
    v.extend(scope_cases());
    v.extend(copy_cases());
    v.extend(mirror_cases());
    v.extend(balance_cases());
    v.extend(flow_cases());
    v.extend(copy_mcast_cases());
    v
}

/// The copy vectors' target memnode, and the switch's QPNs of a copy's two QPs.
const TARGET: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 3), 4791);
const COPY_SRC_QPN: u32 = 0xE0_0001;
const COPY_DST_QPN: u32 = 0xE0_0003;
const TARGET_QPN: u32 = 0x66;
/// Source PSN of the copy's first byte (the copy's PSNs wrap at 24 bits).
const COPY_SRC_PSN: u32 = 0xFF_FFFE;
const COPY_DST_PSN: u32 = 0x100;
const COPY_DST_VA: u64 = 0x9000_0000;
const COPY_RKEY: u32 = 0x7777;
const COPY_LEN: u64 = 2 * 1024 + 100;

/// A copy in slot 0: responses on the switch's source QP are converted, those on its
/// target QP digested.
fn copy_setup() -> Vec<Command> {
    vec![
        Command::CopySrc(
            RouteKey {
                src: MEMNODE,
                qpn: COPY_SRC_QPN,
            },
            CopySrcAction {
                slot: 0,
                src_psn: COPY_SRC_PSN,
                dst_psn: COPY_DST_PSN,
                dst_va: COPY_DST_VA,
                dst_rkey: COPY_RKEY,
                src: UPSTREAM,
                dst: TARGET,
                dst_qpn: TARGET_QPN,
                pmtu_log2: 10,
                len: COPY_LEN,
            },
        ),
        Command::CopyDst(
            RouteKey {
                src: TARGET,
                qpn: COPY_DST_QPN,
            },
            CopyDstAction {
                slot: 0,
                dst_psn: COPY_DST_PSN,
            },
        ),
    ]
}

/// A READ response packet of the copy as the source sends it to the switch.
fn copy_response(op: Opcode, psn: u32, data: &'static [u8]) -> Vec<u8> {
    let mut r = PacketRepr::new(BthRepr::new(op, COPY_SRC_QPN, psn, false));
    if op != Opcode::ReadResponseMiddle {
        r.aeth = Some(AethRepr {
            syndrome: Syndrome::Ack { credits: 31 },
            msn: 1,
        });
    }
    r.payload = data;
    frame(MEMNODE_MAC, SWITCH_MAC, MEMNODE, UPSTREAM, &r)
}

/// The WRITE ONLY it must become: packet `k` of the copy, to the target.
fn copy_write(k: u32, data: &'static [u8]) -> Vec<u8> {
    let mut r = PacketRepr::new(BthRepr::new(
        Opcode::WriteOnly,
        TARGET_QPN,
        (COPY_DST_PSN + k) & 0xFF_FFFF,
        true,
    ));
    r.reth = Some(RethRepr {
        va: COPY_DST_VA + u64::from(k) * 1024,
        rkey: COPY_RKEY,
        dma_len: data.len() as u32,
    });
    r.payload = data;
    frame(MEMNODE_MAC, SWITCH_MAC, UPSTREAM, TARGET, &r)
}

/// An answer on the switch's target QP.
fn copy_answer(psn: u32, syndrome: Syndrome) -> Vec<u8> {
    let mut r = PacketRepr::new(BthRepr::new(Opcode::Acknowledge, COPY_DST_QPN, psn, false));
    r.aeth = Some(AethRepr { syndrome, msn: 1 });
    frame(MEMNODE_MAC, SWITCH_MAC, TARGET, UPSTREAM, &r)
}

fn copy_cases() -> Vec<(&'static str, &'static str, Vec<Command>)> {
    let mut v = Vec::new();
    let first = leak((0..1024).map(|i| (i % 251) as u8).collect());
    let middle = leak((0..1024).map(|i| (i % 241) as u8 ^ 0x5A).collect());
    let last = leak((0..100).map(|i| i as u8 ^ 0xC3).collect());

    let mut c = copy_setup();
    c.extend([
        // Reordered: the last packet first. Its PSN alone says where its bytes go.
        pkt(
            PORT_MEMNODE,
            copy_response(Opcode::ReadResponseLast, 0, last),
        ),
        expect(PORT_MEMNODE, copy_write(2, last)),
        pkt(
            PORT_MEMNODE,
            copy_response(Opcode::ReadResponseFirst, COPY_SRC_PSN, first),
        ),
        expect(PORT_MEMNODE, copy_write(0, first)),
        // A duplicate (a re-issued READ's response) maps to the same WRITE.
        pkt(
            PORT_MEMNODE,
            copy_response(Opcode::ReadResponseFirst, COPY_SRC_PSN, first),
        ),
        expect(PORT_MEMNODE, copy_write(0, first)),
        pkt(
            PORT_MEMNODE,
            copy_response(Opcode::ReadResponseMiddle, 0xFF_FFFF, middle),
        ),
        expect(PORT_MEMNODE, copy_write(1, middle)),
        reg("copy_acked", 0, 0),
    ]);
    v.push((
        "copy_read_response_to_write",
        "READ responses on a copy's source QP leave as WRITE ONLYs on its target QP: PSN and address from the response PSN (reordered, duplicated, wrapping at 24 bits)",
        c,
    ));

    let mut c = copy_setup();
    c.extend([
        pkt(
            PORT_MEMNODE,
            copy_answer(COPY_DST_PSN + 1, Syndrome::Ack { credits: 31 }),
        ),
        reg("copy_acked", 0, 2 | VALID),
        // An older ACK does not move it back.
        pkt(
            PORT_MEMNODE,
            copy_answer(COPY_DST_PSN, Syndrome::Ack { credits: 31 }),
        ),
        reg("copy_acked", 0, 2 | VALID),
        // A NAK is digested for the engine, never forwarded.
        pkt(
            PORT_MEMNODE,
            copy_answer(COPY_DST_PSN + 2, Syndrome::Nak(NakCode::PsnSequenceError)),
        ),
        reg("copy_acked", 0, 2 | VALID),
        pkt(
            PORT_MEMNODE,
            copy_answer(COPY_DST_PSN + 2, Syndrome::Ack { credits: 31 }),
        ),
        reg("copy_acked", 0, 3 | VALID),
    ]);
    v.push((
        "copy_target_acks_counted",
        "ACKs on a copy's target QP advance copy_acked (cumulative, never back); ACKs and NAKs are consumed",
        c,
    ));

    let mut c = copy_setup();
    let mut source_nak = PacketRepr::new(BthRepr::new(
        Opcode::Acknowledge,
        COPY_SRC_QPN,
        COPY_SRC_PSN,
        false,
    ));
    source_nak.aeth = Some(AethRepr {
        syndrome: Syndrome::Nak(NakCode::PsnSequenceError),
        msn: 0,
    });
    c.extend([
        // Before the copy's first PSN, and past its length: dropped.
        pkt(
            PORT_MEMNODE,
            copy_response(Opcode::ReadResponseOnly, 0xFF_FFFD, last),
        ),
        pkt(
            PORT_MEMNODE,
            copy_response(Opcode::ReadResponseOnly, 2, first),
        ),
        // A source NAK is digested for the engine, never forwarded.
        pkt(
            PORT_MEMNODE,
            frame(MEMNODE_MAC, SWITCH_MAC, MEMNODE, UPSTREAM, &source_nak),
        ),
        reg("copy_acked", 0, 0),
    ]);
    v.push((
        "copy_stale_responses_dropped",
        "responses outside the copy are dropped; a source NAK is consumed",
        c,
    ));
    v
}

const BACKUP1: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 5), 4791);
const BACKUP2: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 6), 4791);
const MIRROR_ALIAS: u32 = 0xA012_3405;
const MIRROR_SET: u8 = 5;
/// The lanes' QPNs on the backups and the switch's QPNs of them.
const LANE_QPN: [u32; 2] = [0x71, 0x72];
const LANE_SWITCH_QPN: [u32; 2] = [0xE8_0000, 0xE8_0001];
const LANE_RKEY: [u32; 2] = [0xB1, 0xB2];
/// Backup 0's region is 256 MiB above the primary's, backup 1's 256 bytes below.
const LANE_DELTA: [u64; 2] = [0x1000_0000, 0u64.wrapping_sub(0x100)];
/// The lanes' next PSNs (backup 1's wraps at 24 bits).
const LANE_PSN: [u32; 2] = [0x200, 0xFF_FFFF];
const ACTIVE: u64 = spec::MIRROR_ACTIVE as u64;

/// The vectors' connection, with replica set 5 (two backups) installed.
fn mirror_setup() -> Vec<Command> {
    let mut c = setup(0, 100);
    c.push(Command::ConnClient(
        CONN,
        RouteAction {
            conn: CONN,
            src: FRONT,
            dst: CLIENT,
            client_qpn: CLIENT_QPN,
            pmtu_log2: 10,
        },
    ));
    c.push(Command::MirrorRkey(
        MIRROR_ALIAS,
        MirrorRkeyAction {
            set: MIRROR_SET,
            rkey: RKEY,
            backups: 2,
        },
    ));
    for (b, backup) in [BACKUP1, BACKUP2].into_iter().enumerate() {
        c.push(Command::MirrorLane(
            (MIRROR_SET, b as u8),
            MirrorLaneAction {
                src: UPSTREAM,
                dst: backup,
                qpn: LANE_QPN[b],
                rkey: LANE_RKEY[b],
                va_delta: LANE_DELTA[b],
            },
        ));
        c.push(Command::MirrorAck(
            RouteKey {
                src: backup,
                qpn: LANE_SWITCH_QPN[b],
            },
            MirrorAckAction {
                set: MIRROR_SET,
                backup: b as u8,
            },
        ));
        c.push(reg(
            &format!("mirror_next{b}"),
            MIRROR_SET as usize,
            u64::from(LANE_PSN[b]),
        ));
    }
    c
}

/// A replicated WRITE as the client sends it: under the set's alias key.
fn mirrored_write(psn: u32, va: u64, data: &'static [u8]) -> PacketRepr<'static> {
    let mut r = write(psn, va, data);
    if let Some(reth) = r.reth.as_mut() {
        reth.rkey = MIRROR_ALIAS;
    }
    r
}

/// The switch's WRITE of `data` for backup `b` at lane PSN `psn`.
fn lane_write(b: usize, psn: u32, va: u64, data: &'static [u8]) -> Vec<u8> {
    let mut r = PacketRepr::new(BthRepr::new(Opcode::WriteOnly, LANE_QPN[b], psn, true));
    r.reth = Some(RethRepr {
        va: va.wrapping_add(LANE_DELTA[b]),
        rkey: LANE_RKEY[b],
        dma_len: data.len() as u32,
    });
    r.payload = data;
    frame(CLIENT_MAC, SWITCH_MAC, UPSTREAM, [BACKUP1, BACKUP2][b], &r)
}

/// Backup `b`'s ACK of lane PSN `psn`.
fn lane_ack(b: usize, psn: u32) -> Vec<u8> {
    let mut r = PacketRepr::new(BthRepr::new(
        Opcode::Acknowledge,
        LANE_SWITCH_QPN[b],
        psn,
        false,
    ));
    r.aeth = Some(AethRepr {
        syndrome: Syndrome::Ack { credits: 31 },
        msn: 9,
    });
    frame(MEMNODE_MAC, SWITCH_MAC, [BACKUP1, BACKUP2][b], UPSTREAM, &r)
}

fn mirror_cases() -> Vec<(&'static str, &'static str, Vec<Command>)> {
    let mut v = Vec::new();
    let data: &'static [u8] = b"a Clover node, immutable once linked";
    let conn = CONN as usize;
    let set = MIRROR_SET as usize;

    let mut c = mirror_setup();
    c.extend([
        pkt(PORT_CLIENT, from_client(&mirrored_write(100, 0x2000, data))),
        expect(PORT_MEMNODE, to_memnode(&write(100, 0x2000, data))),
        expect(PORT_MEMNODE, lane_write(0, LANE_PSN[0], 0x2000, data)),
        expect(PORT_MEMNODE, lane_write(1, LANE_PSN[1], 0x2000, data)),
        reg("mirror_conn", conn, 100 | VALID | ACTIVE),
        reg("mirror_bpsn0", conn, u64::from(LANE_PSN[0])),
        reg("mirror_bpsn1", conn, u64::from(LANE_PSN[1])),
        reg("mirror_next0", set, 0x201),
        reg("mirror_next1", set, 0),
        // The primary's ACK waits for the backups.
        pkt(PORT_MEMNODE, from_memnode(&ack(100, 1))),
        reg("mirror_held", conn, 100 | VALID),
        pkt(PORT_MEMNODE, lane_ack(0, LANE_PSN[0])),
        reg("mirror_acked0", set, u64::from(LANE_PSN[0]) | VALID),
        reg("mirror_conn", conn, 100 | VALID | ACTIVE),
        // The last backup's ACK becomes the client's held ACK.
        pkt(PORT_MEMNODE, lane_ack(1, LANE_PSN[1])),
        expect(PORT_CLIENT, to_client(&ack(100, 1))),
        reg("mirror_conn", conn, 100 | VALID),
    ]);
    v.push((
        "mirror_write_copied_and_ack_held",
        "a WRITE under a replica set's alias key goes to the primary under its key and to each backup on the switch's lanes (own PSNs, VA shifted); the primary's ACK is held until both backups acknowledged",
        c,
    ));

    let mut c = mirror_setup();
    c.extend([
        pkt(PORT_CLIENT, from_client(&mirrored_write(100, 0x2000, data))),
        expect(PORT_MEMNODE, to_memnode(&write(100, 0x2000, data))),
        expect(PORT_MEMNODE, lane_write(0, LANE_PSN[0], 0x2000, data)),
        expect(PORT_MEMNODE, lane_write(1, LANE_PSN[1], 0x2000, data)),
        pkt(PORT_MEMNODE, lane_ack(0, LANE_PSN[0])),
        // The client's retransmission: copied again, at the same lane PSN, only for
        // the backup that has not acknowledged.
        pkt(PORT_CLIENT, from_client(&mirrored_write(100, 0x2000, data))),
        expect(PORT_MEMNODE, to_memnode(&write(100, 0x2000, data))),
        expect(PORT_MEMNODE, lane_write(1, LANE_PSN[1], 0x2000, data)),
        pkt(PORT_MEMNODE, lane_ack(1, LANE_PSN[1])),
        // Both backups have it: the primary's ACK goes on at once.
        pkt(PORT_MEMNODE, from_memnode(&ack(100, 1))),
        expect(PORT_CLIENT, to_client(&ack(100, 1))),
        // A late retransmission of a complete WRITE: to the primary alone.
        pkt(PORT_CLIENT, from_client(&mirrored_write(100, 0x2000, data))),
        expect(PORT_MEMNODE, to_memnode(&write(100, 0x2000, data))),
        // The next one takes the lanes' next PSNs (backup 1's wrapped to 0).
        pkt(PORT_CLIENT, from_client(&mirrored_write(101, 0x2100, data))),
        expect(PORT_MEMNODE, to_memnode(&write(101, 0x2100, data))),
        expect(PORT_MEMNODE, lane_write(0, LANE_PSN[0] + 1, 0x2100, data)),
        expect(PORT_MEMNODE, lane_write(1, 0, 0x2100, data)),
        reg("mirror_conn", conn, 101 | VALID | ACTIVE),
    ]);
    v.push((
        "mirror_retransmission_copied_again_at_its_lane_psns",
        "a retransmitted replicated WRITE is copied again at the lane PSNs its first copies took, for backups that have not acknowledged; once complete everywhere it goes to the primary alone",
        c,
    ));

    let mut c = mirror_setup();
    c.extend([
        pkt(PORT_CLIENT, from_client(&mirrored_write(100, 0x2000, data))),
        expect(PORT_MEMNODE, to_memnode(&write(100, 0x2000, data))),
        expect(PORT_MEMNODE, lane_write(0, LANE_PSN[0], 0x2000, data)),
        expect(PORT_MEMNODE, lane_write(1, LANE_PSN[1], 0x2000, data)),
        // A second replicated WRITE while one waits: dropped, the connection poisoned.
        pkt(PORT_CLIENT, from_client(&mirrored_write(101, 0x2100, data))),
        reg(
            "mirror_conn",
            conn,
            100 | VALID | ACTIVE | spec::MIRROR_POISONED as u64,
        ),
        // Other requests pass.
        pkt(PORT_CLIENT, from_client(&read(102, 0x1000, 64))),
        expect(PORT_MEMNODE, to_memnode(&read(102, 0x1000, 64))),
        // A READ response is not held (it completes no WRITE).
        pkt(
            PORT_MEMNODE,
            from_memnode(&read_response(102, 2, &[7u8; 64])),
        ),
        expect(PORT_CLIENT, to_client(&read_response(102, 2, &[7u8; 64]))),
    ]);
    v.push((
        "mirror_second_write_poisons_the_connection",
        "a second replicated WRITE on a connection whose WRITE waits for its backups is dropped and the connection's later replicated WRITEs too; READs and their responses pass",
        c,
    ));
    v
}

/// The read alias key of replica set [`MIRROR_SET`] (load-balanced READs).
const BALANCE_ALIAS: u32 = 0xB0A1_0005;
const LB_ANSWERED: u64 = spec::LB_MAP_ANSWERED as u64;

/// The vectors' connection with load-balanced READs of replica set 5 (two backups,
/// both serving unless `serving` says otherwise) and the set's cursor at `cursor`.
fn balance_setup(cursor: u64, serving: u8) -> Vec<Command> {
    let mut c = setup(0, 100);
    c.push(Command::ConnClient(
        CONN,
        RouteAction {
            conn: CONN,
            src: FRONT,
            dst: CLIENT,
            client_qpn: CLIENT_QPN,
            pmtu_log2: 10,
        },
    ));
    c.push(Command::BalanceRkey(
        BALANCE_ALIAS,
        BalanceSetAction {
            set: MIRROR_SET,
            rkey: RKEY,
            backups: 2,
            serving,
        },
    ));
    for (b, backup) in [BACKUP1, BACKUP2].into_iter().enumerate() {
        c.push(Command::BalanceLane(
            (MIRROR_SET, b as u8),
            BalanceLaneAction {
                src: UPSTREAM,
                dst: backup,
                qpn: LANE_QPN[b],
                rkey: LANE_RKEY[b],
                va_delta: LANE_DELTA[b],
            },
        ));
        c.push(Command::BalanceAnswer(
            RouteKey {
                src: backup,
                qpn: LANE_SWITCH_QPN[b],
            },
            BalanceAnswerAction {
                set: MIRROR_SET,
                backup: b as u8,
            },
        ));
        c.push(reg(
            &format!("lb_next{b}"),
            MIRROR_SET as usize,
            u64::from(LANE_PSN[b]),
        ));
    }
    c.push(reg("lb_cursor", MIRROR_SET as usize, cursor));
    c
}

/// A READ as a client marks it balanceable: under the set's read alias key.
fn balanced_read(psn: u32, va: u64, len: u32) -> PacketRepr<'static> {
    keyed(read(psn, va, len), BALANCE_ALIAS)
}

/// The switch's READ for backup `b` at lane PSN `psn`.
fn lane_read(b: usize, psn: u32, va: u64, len: u32) -> Vec<u8> {
    let mut r = PacketRepr::new(BthRepr::new(Opcode::ReadRequest, LANE_QPN[b], psn, true));
    r.reth = Some(RethRepr {
        va: va.wrapping_add(LANE_DELTA[b]),
        rkey: LANE_RKEY[b],
        dma_len: len,
    });
    frame(CLIENT_MAC, SWITCH_MAC, UPSTREAM, [BACKUP1, BACKUP2][b], &r)
}

/// The 0-byte WRITE that takes a balanced READ's PSN on the primary.
fn balance_filler(psn: u32, va: u64) -> PacketRepr<'static> {
    let mut r = write(psn, va, b"");
    r.reth = Some(RethRepr {
        va,
        rkey: RKEY,
        dma_len: 0,
    });
    r
}

/// Backup `b`'s READ RESPONSE ONLY at lane PSN `psn`.
fn lane_response(b: usize, psn: u32, data: &'static [u8]) -> Vec<u8> {
    let mut r = read_response(psn, 9, data);
    r.bth.dest_qpn = LANE_SWITCH_QPN[b];
    frame(MEMNODE_MAC, SWITCH_MAC, [BACKUP1, BACKUP2][b], UPSTREAM, &r)
}

/// Backup `b`'s NAK of lane PSN `psn`.
fn lane_nak(b: usize, psn: u32, code: NakCode) -> Vec<u8> {
    let mut r = nak(psn, 9, code);
    r.bth.dest_qpn = LANE_SWITCH_QPN[b];
    frame(MEMNODE_MAC, SWITCH_MAC, [BACKUP1, BACKUP2][b], UPSTREAM, &r)
}

/// `lb_map` / `lb_mapq` cell of the vectors' connection for client PSN `psn`.
fn lb_slot(psn: u32) -> usize {
    ((CONN as usize) << 6) | (psn as usize % spec::LB_MAP_SLOTS)
}

/// `lb_owner*` cell of set 5 for lane PSN `q`.
fn lb_owner(q: u32) -> usize {
    ((MIRROR_SET as usize) << 8) | (q as usize % spec::LB_OWNER_SLOTS)
}

/// `lb_owner*` value: the connection and client PSN `p` (lo), lane PSN `q` (hi).
fn lb_owner_value(p: u32, q: u32) -> u64 {
    (u64::from(q) | VALID) << 32 | u64::from(CONN) | u64::from(p) << 8
}

fn balance_cases() -> Vec<(&'static str, &'static str, Vec<Command>)> {
    let mut v = Vec::new();
    let d0: &'static [u8] = &[0x42; 64];
    let set = MIRROR_SET as usize;
    let member = |m: u64| m << spec::LB_MAP_MEMBER_SHIFT;

    let mut c = balance_setup(0, 0b11);
    c.extend([
        // Round robin from the cursor: the primary, backup 0, backup 1.
        pkt(PORT_CLIENT, from_client(&balanced_read(100, 0x2000, 64))),
        expect(PORT_MEMNODE, to_memnode(&read(100, 0x2000, 64))),
        pkt(PORT_CLIENT, from_client(&balanced_read(101, 0x2040, 64))),
        expect(PORT_MEMNODE, lane_read(0, LANE_PSN[0], 0x2040, 64)),
        expect(PORT_MEMNODE, to_memnode(&balance_filler(101, 0x2040))),
        pkt(PORT_CLIENT, from_client(&balanced_read(102, 0x2080, 64))),
        expect(PORT_MEMNODE, lane_read(1, LANE_PSN[1], 0x2080, 64)),
        expect(PORT_MEMNODE, to_memnode(&balance_filler(102, 0x2080))),
        reg("lb_cursor", set, 0),
        reg("lb_map", lb_slot(100), 100 | VALID),
        reg("lb_map", lb_slot(101), 101 | VALID | member(1)),
        reg("lb_map", lb_slot(102), 102 | VALID | member(2)),
        reg("lb_mapq", lb_slot(101), u64::from(LANE_PSN[0])),
        reg("lb_mapq", lb_slot(102), u64::from(LANE_PSN[1])),
        // Backup 1's lane PSN wrapped at 24 bits.
        reg("lb_next0", set, u64::from(LANE_PSN[0]) + 1),
        reg("lb_next1", set, 0),
        reg(
            "lb_owner0",
            lb_owner(LANE_PSN[0]),
            lb_owner_value(101, LANE_PSN[0]),
        ),
        reg(
            "lb_owner1",
            lb_owner(LANE_PSN[1]),
            lb_owner_value(102, LANE_PSN[1]),
        ),
        reg(
            "lb_fill_key",
            CONN as usize,
            u64::from(MEMNODE_QPN) << 32 | u64::from(RKEY),
        ),
        reg("lb_fill_va", CONN as usize, 0x2080),
        // The answers: the primary's passes; the backups' become the client's at the
        // READs' PSNs; the primary's ACKs of the fillers pass.
        pkt(PORT_MEMNODE, from_memnode(&read_response(100, 1, d0))),
        expect(PORT_CLIENT, to_client(&read_response(100, 1, d0))),
        pkt(PORT_MEMNODE, lane_response(1, LANE_PSN[1], d0)),
        expect(PORT_CLIENT, to_client(&read_response(102, 0, d0))),
        pkt(PORT_MEMNODE, lane_response(0, LANE_PSN[0], d0)),
        expect(PORT_CLIENT, to_client(&read_response(101, 0, d0))),
        pkt(PORT_MEMNODE, from_memnode(&ack(102, 3))),
        expect(PORT_CLIENT, to_client(&ack(102, 3))),
    ]);
    v.push((
        "balance_reads_rotate_over_the_members",
        "READs under a replica set's read alias key go round robin to the primary (under its real key) and to each backup on the switch's read lanes (own PSNs, wrapping at 24 bits; VA shifted; the backup's key), a 0-byte WRITE filler taking each diverted READ's PSN on the primary; the backups' responses leave as the client's at the READs' PSNs",
        c,
    ));

    let mut c = balance_setup(1, 0b11);
    c.extend([
        pkt(PORT_CLIENT, from_client(&balanced_read(101, 0x2040, 64))),
        expect(PORT_MEMNODE, lane_read(0, LANE_PSN[0], 0x2040, 64)),
        expect(PORT_MEMNODE, to_memnode(&balance_filler(101, 0x2040))),
        // The client lost the response and sends the READ again: the same backup at
        // the same lane PSN (the cursor moves on every balanced READ; a
        // retransmission does not take its choice).
        pkt(PORT_CLIENT, from_client(&balanced_read(101, 0x2040, 64))),
        expect(PORT_MEMNODE, lane_read(0, LANE_PSN[0], 0x2040, 64)),
        expect(PORT_MEMNODE, to_memnode(&balance_filler(101, 0x2040))),
        reg("lb_cursor", set, 0),
        reg("lb_next0", set, u64::from(LANE_PSN[0]) + 1),
        // The backup no longer remembers it and refuses it: the next retransmission
        // takes a fresh lane PSN.
        pkt(
            PORT_MEMNODE,
            lane_nak(0, LANE_PSN[0], NakCode::InvalidRequest),
        ),
        reg(
            "lb_map",
            lb_slot(101),
            101 | VALID | member(1) | LB_ANSWERED,
        ),
        pkt(PORT_CLIENT, from_client(&balanced_read(101, 0x2040, 64))),
        expect(PORT_MEMNODE, lane_read(0, LANE_PSN[0] + 1, 0x2040, 64)),
        expect(PORT_MEMNODE, to_memnode(&balance_filler(101, 0x2040))),
        reg("lb_map", lb_slot(101), 101 | VALID | member(1)),
        reg("lb_mapq", lb_slot(101), u64::from(LANE_PSN[0]) + 1),
        pkt(PORT_MEMNODE, lane_response(0, LANE_PSN[0] + 1, d0)),
        expect(PORT_CLIENT, to_client(&read_response(101, 0, d0))),
        // A READ whose PSN is older than its slot's record (101 + 64 took the slot).
        pkt(PORT_CLIENT, from_client(&balanced_read(165, 0x2040, 64))),
        expect(PORT_MEMNODE, lane_read(0, LANE_PSN[0] + 2, 0x2040, 64)),
        expect(PORT_MEMNODE, to_memnode(&balance_filler(165, 0x2040))),
        pkt(PORT_CLIENT, from_client(&balanced_read(101, 0x2040, 64))),
        // Longer than one response packet at the client's MTU: dropped.
        pkt(PORT_CLIENT, from_client(&balanced_read(166, 0x2040, 2048))),
        // An unmarked READ is not balanced.
        pkt(PORT_CLIENT, from_client(&read(167, 0x2040, 64))),
        expect(PORT_MEMNODE, to_memnode(&read(167, 0x2040, 64))),
    ]);
    v.push((
        "balance_retransmission_goes_to_the_same_member",
        "a retransmitted balanced READ goes to the member that served it, at the lane PSN it took while the lane has not answered that PSN; after the backup refused it (a duplicate it no longer remembers) at a fresh lane PSN; a PSN older than its slot's record and a READ longer than one response packet are dropped; an unmarked READ passes",
        c,
    ));

    let mut c = balance_setup(1, 0b10);
    c.extend([
        // Backup 0 is syncing (its serving bit clear): backup 1 is chosen.
        pkt(PORT_CLIENT, from_client(&balanced_read(101, 0x2040, 64))),
        expect(PORT_MEMNODE, lane_read(1, LANE_PSN[1], 0x2040, 64)),
        expect(PORT_MEMNODE, to_memnode(&balance_filler(101, 0x2040))),
        reg("lb_cursor", set, 0),
        // The filler was lost: the primary's sequence NAK at its PSN becomes the filler.
        pkt(
            PORT_MEMNODE,
            from_memnode(&nak(101, 0, NakCode::PsnSequenceError)),
        ),
        expect(
            PORT_MEMNODE,
            frame(
                SWITCH_MAC,
                MEMNODE_MAC,
                UPSTREAM,
                MEMNODE,
                &balance_filler(101, 0x2040),
            ),
        ),
        // A sequence NAK at a PSN the primary served itself goes to the client.
        pkt(PORT_CLIENT, from_client(&balanced_read(102, 0x2080, 64))),
        expect(PORT_MEMNODE, to_memnode(&read(102, 0x2080, 64))),
        pkt(
            PORT_MEMNODE,
            from_memnode(&nak(102, 1, NakCode::PsnSequenceError)),
        ),
        expect(
            PORT_CLIENT,
            to_client(&nak(102, 1, NakCode::PsnSequenceError)),
        ),
    ]);
    v.push((
        "balance_syncing_member_skipped_and_lost_filler_resent",
        "a backup whose serving bit is clear (syncing) is never chosen; the primary's sequence NAK at the PSN of a READ a backup served means the filler was lost and becomes the filler again; a sequence NAK at a PSN the primary served reaches the client",
        c,
    ));
    v
}

/// `read` with memory key `rkey`.
fn keyed(mut r: PacketRepr<'static>, rkey: u32) -> PacketRepr<'static> {
    if let Some(e) = r.reth.as_mut() {
        e.rkey = rkey;
    }
    if let Some(e) = r.atomic_eth.as_mut() {
        e.rkey = rkey;
    }
    r
}

/// The connection scoped to `windows`: `(start, end, id, read, write)`.
fn scoped(psn: u32, windows: &[(u64, u64, u16, bool, bool)]) -> Vec<Command> {
    let mut c = setup(0, psn);
    c.push(Command::ConnScoped(CONN));
    for &(start, end, id, read, write) in windows {
        c.push(Command::ConnWindow {
            conn: CONN,
            start,
            end,
            action: accel_p4::model::WindowAction { id, read, write },
        });
    }
    c
}

fn scope_cases() -> Vec<(&'static str, &'static str, Vec<Command>)> {
    let mut v = Vec::new();
    let denied = spec::INVALID_RKEY;

    let mut c = scoped(10, &[(0x1000, 0x2000, 1, true, true)]);
    c.extend([
        pkt(PORT_CLIENT, from_client(&read(10, 0x1000, 0x1000))),
        expect(PORT_MEMNODE, to_memnode(&read(10, 0x1000, 0x1000))),
        pkt(PORT_CLIENT, from_client(&write(11, 0x1ffb, b"hello"))),
        expect(PORT_MEMNODE, to_memnode(&write(11, 0x1ffb, b"hello"))),
        pkt(
            PORT_CLIENT,
            from_client(&atomic(Opcode::CompareSwap, 12, RKEY, 0x1ff8, 1, 0)),
        ),
        expect(
            PORT_MEMNODE,
            to_memnode(&atomic(Opcode::CompareSwap, 12, RKEY, 0x1ff8, 1, 0)),
        ),
    ]);
    v.push((
        "scope_inside_window_forwarded",
        "a scoped connection's READ, WRITE and CAS inside its read-write window go up unchanged, up to the window's last byte",
        c,
    ));

    let mut c = scoped(10, &[(0x1000, 0x2000, 1, true, true)]);
    c.extend([
        pkt(PORT_CLIENT, from_client(&read(10, 0x2000, 8))),
        expect(
            PORT_MEMNODE,
            to_memnode(&keyed(read(10, 0x2000, 8), denied)),
        ),
        pkt(PORT_CLIENT, from_client(&read(11, 0xff8, 16))),
        expect(
            PORT_MEMNODE,
            to_memnode(&keyed(read(11, 0xff8, 16), denied)),
        ),
        pkt(PORT_CLIENT, from_client(&write(12, 0x1ffc, b"hello"))),
        expect(
            PORT_MEMNODE,
            to_memnode(&keyed(write(12, 0x1ffc, b"hello"), denied)),
        ),
        pkt(
            PORT_CLIENT,
            from_client(&atomic(Opcode::FetchAdd, 13, RKEY, 0x1ffc, 1, 0)),
        ),
        expect(
            PORT_MEMNODE,
            to_memnode(&atomic(Opcode::FetchAdd, 13, denied, 0x1ffc, 1, 0)),
        ),
        pkt(PORT_CLIENT, from_client(&read(14, 0x9000, 0))),
        expect(
            PORT_MEMNODE,
            to_memnode(&keyed(read(14, 0x9000, 0), denied)),
        ),
    ]);
    v.push((
        "scope_outside_window_key_invalidated",
        "requests reaching outside the window (after it, before it, across its end, a zero-length probe elsewhere) go up with a key no memory has, so the memory node NAKs them at their PSN",
        c,
    ));

    let mut c = scoped(
        20,
        &[
            (0x1000, 0x2000, 1, true, true),
            (0x2000, 0x3000, 2, true, true),
        ],
    );
    c.extend([
        pkt(PORT_CLIENT, from_client(&read(20, 0x1ff0, 32))),
        expect(
            PORT_MEMNODE,
            to_memnode(&keyed(read(20, 0x1ff0, 32), denied)),
        ),
        pkt(PORT_CLIENT, from_client(&read(21, 0x2000, 32))),
        expect(PORT_MEMNODE, to_memnode(&read(21, 0x2000, 32))),
    ]);
    v.push((
        "scope_across_two_windows_denied",
        "a READ whose first and last bytes fall in two adjacent windows is denied (one request, one window); inside the second it passes",
        c,
    ));

    let mut c = scoped(30, &[(0x1000, 0x2000, 7, true, false)]);
    c.extend([
        pkt(PORT_CLIENT, from_client(&read(30, 0x1800, 64))),
        expect(PORT_MEMNODE, to_memnode(&read(30, 0x1800, 64))),
        pkt(PORT_CLIENT, from_client(&write(31, 0x1800, b"x"))),
        expect(
            PORT_MEMNODE,
            to_memnode(&keyed(write(31, 0x1800, b"x"), denied)),
        ),
        pkt(
            PORT_CLIENT,
            from_client(&atomic(Opcode::CompareSwap, 32, RKEY, 0x1800, 1, 0)),
        ),
        expect(
            PORT_MEMNODE,
            to_memnode(&atomic(Opcode::CompareSwap, 32, denied, 0x1800, 1, 0)),
        ),
    ]);
    v.push((
        "scope_read_only_window_refuses_writes_and_atomics",
        "a read-only window lets READs through and denies WRITE and CAS inside it",
        c,
    ));

    let mut c = setup(0, 40);
    c.push(Command::ConnWindow {
        conn: CONN,
        start: 0x1000,
        end: 0x2000,
        action: accel_p4::model::WindowAction {
            id: 1,
            read: true,
            write: false,
        },
    });
    c.extend([
        pkt(PORT_CLIENT, from_client(&write(40, 0x9000, b"admin"))),
        expect(PORT_MEMNODE, to_memnode(&write(40, 0x9000, b"admin"))),
    ]);
    v.push((
        "scope_unscoped_connection_unchecked",
        "a connection not in conn_scoped (made with the admin token) is not checked, whatever windows exist",
        c,
    ));
    v
}

fn flush() -> Command {
    Command::Flush
}

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors")
}

fn pcap_bytes(frames: &[&Vec<u8>]) -> Vec<u8> {
    let mut w = pcap::Writer::new(Vec::new()).expect("pcap header");
    for (i, f) in frames.iter().enumerate() {
        w.write_packet(Duration::from_micros(i as u64), f)
            .expect("pcap record");
    }
    w.into_inner().expect("pcap bytes")
}

/// The STF text and the input/output pcaps of a case.
fn files(name: &str, about: &str, commands: &[Command]) -> (String, Vec<u8>, Vec<u8>) {
    let text = format!(
        "# {name}: {about}\n# Generated by accel-p4/tests/vectors.rs (ACCEL_P4_BLESS=1 to rewrite).\n{}",
        stf::render(commands)
    );
    let inputs: Vec<&Vec<u8>> = commands
        .iter()
        .filter_map(|c| match c {
            Command::Packet { frame, .. } => Some(frame),
            _ => None,
        })
        .collect();
    let outputs: Vec<&Vec<u8>> = commands
        .iter()
        .filter_map(|c| match c {
            Command::Expect { frame, .. } => Some(frame),
            _ => None,
        })
        .collect();
    (text, pcap_bytes(&inputs), pcap_bytes(&outputs))
}

#[test]
fn vectors_pass_against_the_model() {
    for (name, about, commands) in cases() {
        let (text, _, _) = files(name, about, &commands);
        if let Err(e) = stf::run(&text) {
            panic!("{name}: {e}");
        }
    }
}

#[test]
fn stored_vectors_match_their_builders() {
    let bless = std::env::var_os("ACCEL_P4_BLESS").is_some();
    let d = dir();
    std::fs::create_dir_all(&d).expect("vector directory");
    let mut names = Vec::new();
    for (name, about, commands) in cases() {
        let (text, input, output) = files(name, about, &commands);
        for (file, bytes) in [
            (format!("{name}.stf"), text.into_bytes()),
            (format!("{name}.in.pcap"), input),
            (format!("{name}.out.pcap"), output),
        ] {
            let path = d.join(&file);
            if bless {
                std::fs::write(&path, &bytes).expect("write vector");
            } else {
                let stored = std::fs::read(&path).unwrap_or_else(|e| {
                    panic!("{}: {e} (run with ACCEL_P4_BLESS=1)", path.display())
                });
                assert!(
                    stored == bytes,
                    "{} differs from its builder (run with ACCEL_P4_BLESS=1)",
                    path.display()
                );
            }
        }
        names.push(format!("{name}.stf"));
    }
    // No stray vectors.
    let mut stored: Vec<String> = std::fs::read_dir(&d)
        .expect("read vectors")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".stf"))
        .collect();
    stored.sort();
    names.sort();
    assert_eq!(stored, names);
}

#[test]
fn every_stored_stf_file_runs() {
    for entry in std::fs::read_dir(dir()).expect("read vectors") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "stf") {
            let text = std::fs::read_to_string(&path).expect("read stf");
            if let Err(e) = stf::run(&text) {
                panic!("{}: {e}", path.display());
            }
        }
    }
}

#[test]
fn stored_pcaps_hold_the_stf_frames() {
    for (name, _, commands) in cases() {
        let input = pcap::read_file(dir().join(format!("{name}.in.pcap")));
        let Ok(input) = input else { continue };
        let want: Vec<&Vec<u8>> = commands
            .iter()
            .filter_map(|c| match c {
                Command::Packet { frame, .. } => Some(frame),
                _ => None,
            })
            .collect();
        assert_eq!(input.len(), want.len(), "{name}");
        for (rec, f) in input.iter().zip(want) {
            assert_eq!(&rec.data, f, "{name}");
        }
    }
}

// ---- Atomic replacement and optimistic latching ----

const CLIENT2: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 3), 50_000);
const CLIENT2_QPN: u32 = 0x33;
const MEMNODE2_QPN: u32 = 0x44;
const CONN2: u8 = 4;
/// The switch's own QPN as requester of the multiplexed QP.
const MUX_QPN: u32 = 0x900;
/// The memnode's responder QPN of the multiplexed QP.
const MUX_MEMNODE_QPN: u32 = 0x55;
const LOCK_VA: u64 = 0x5000;
const FILLER_VA: u64 = 0x100;
const TUPLES_VA: u64 = 0x1_0000;

/// A second client connection (conn 4), the multiplexed QP 0 and one tracked lock.
fn replace_setup(mode: u32, psn: u32, psn2: u32, mux_psn: u32) -> Vec<Command> {
    let mut c = setup(mode, psn);
    c.extend([
        Command::RouteUp(
            RouteKey {
                src: CLIENT2,
                qpn: MEMNODE2_QPN,
            },
            RouteAction {
                conn: CONN2,
                src: UPSTREAM,
                dst: MEMNODE,
                client_qpn: CLIENT2_QPN,
                pmtu_log2: 10,
            },
        ),
        Command::RouteDown(
            RouteKey {
                src: MEMNODE,
                qpn: CLIENT2_QPN,
            },
            RouteAction {
                conn: CONN2,
                src: FRONT,
                dst: CLIENT2,
                client_qpn: 0,
                pmtu_log2: 10,
            },
        ),
        Command::Conn {
            conn: CONN2,
            psn: psn2,
        },
        Command::MuxUp(
            0,
            MuxAction {
                src: UPSTREAM,
                dst: MEMNODE,
                memnode_qpn: MUX_MEMNODE_QPN,
            },
        ),
        Command::MuxDown(
            RouteKey {
                src: MEMNODE,
                qpn: MUX_QPN,
            },
            0,
        ),
        Command::ConnClient(
            CONN,
            RouteAction {
                conn: CONN,
                src: FRONT,
                dst: CLIENT,
                client_qpn: CLIENT_QPN,
                pmtu_log2: 10,
            },
        ),
        Command::ConnClient(
            CONN2,
            RouteAction {
                conn: CONN2,
                src: FRONT,
                dst: CLIENT2,
                client_qpn: CLIENT2_QPN,
                pmtu_log2: 10,
            },
        ),
        Command::ConnFiller(
            CONN,
            FillerAction {
                rkey: RKEY,
                va: FILLER_VA,
                memnode_qpn: MEMNODE_QPN,
            },
        ),
        Command::ConnFiller(
            CONN2,
            FillerAction {
                rkey: RKEY,
                va: FILLER_VA,
                memnode_qpn: MEMNODE2_QPN,
            },
        ),
        Command::TrackedLock(
            LockKey {
                rkey: RKEY,
                va: LOCK_VA,
            },
            TrackedLock { slot: 0, mux: 0 },
        ),
        Command::LatchRegion(
            RKEY,
            LatchRegion {
                base_va: TUPLES_VA,
                stride_log2: 6,
                tuples: 16,
                first_tuple: 0,
            },
        ),
        reg("mux_next_psn", 0, u64::from(mux_psn) | VALID),
    ]);
    c
}

fn from_client2(r: &PacketRepr<'_>) -> Vec<u8> {
    frame(CLIENT_MAC, SWITCH_MAC, CLIENT2, FRONT, r)
}

fn to_client2(r: &PacketRepr<'_>) -> Vec<u8> {
    frame(MEMNODE_MAC, SWITCH_MAC, FRONT, CLIENT2, r)
}

fn answer2(r: &PacketRepr<'_>) -> Vec<u8> {
    frame(SWITCH_MAC, CLIENT_MAC, FRONT, CLIENT2, r)
}

/// A request of the second client (to its memnode QP).
fn on2(mut r: PacketRepr<'static>) -> PacketRepr<'static> {
    r.bth.dest_qpn = MEMNODE2_QPN;
    r
}

/// A response for the second client.
fn for2(mut r: PacketRepr<'static>) -> PacketRepr<'static> {
    r.bth.dest_qpn = CLIENT2_QPN;
    r
}

fn cas_lock(psn: u32, swap: u64, compare: u64) -> PacketRepr<'static> {
    atomic(Opcode::CompareSwap, psn, RKEY, LOCK_VA, swap, compare)
}

/// What goes up on the multiplexed QP for a converted atomic: an 8-byte WRITE of the
/// outcome.
fn mux_write(psn: u32, value: u64) -> PacketRepr<'static> {
    let data: &'static [u8] = Box::leak(value.to_le_bytes().to_vec().into_boxed_slice());
    let mut r = write(psn, LOCK_VA, data);
    r.bth.dest_qpn = MUX_MEMNODE_QPN;
    r
}

/// The filler that takes a diverted request's PSN on the client's own QP.
fn filler(psn: u32) -> PacketRepr<'static> {
    let mut r = write(psn, FILLER_VA, b"");
    r.reth = Some(RethRepr {
        va: FILLER_VA,
        rkey: RKEY,
        dma_len: 0,
    });
    r
}

/// The memnode's answer on the multiplexed QP.
fn mux_ack(psn: u32, msn: u32) -> PacketRepr<'static> {
    let mut r = ack(psn, msn);
    r.bth.dest_qpn = MUX_QPN;
    r
}

const REPLACE: u32 = spec::mode::ATOMIC_REPLACE;
const CACHED: u64 = spec::LOCK_CACHED as u64;
const FILLER_LAST: u64 = spec::CONN_FILLER_LAST as u64;

fn replace_cases() -> Vec<(&'static str, &'static str, Vec<Command>)> {
    let mut v = Vec::new();

    let mut c = replace_setup(REPLACE, 200, 500, 1000);
    c.extend([
        reg("lock_state", 0, CACHED),
        reg("lock_word", 0, 0),
        // A acquires: CAS(0 -> 1) becomes WRITE(1) on the multiplexed QP.
        pkt(PORT_CLIENT, from_client(&cas_lock(200, 1, 0))),
        expect(PORT_MEMNODE, to_memnode(&mux_write(1000, 1))),
        expect(PORT_MEMNODE, to_memnode(&filler(200))),
        // B tries: the cache says 1, so the CAS fails and WRITE(1) keeps the word.
        pkt(PORT_CLIENT, from_client2(&on2(cas_lock(500, 1, 0)))),
        expect(PORT_MEMNODE, to_memnode(&mux_write(1001, 1))),
        expect(PORT_MEMNODE, to_memnode(&on2(filler(500)))),
        pkt(PORT_MEMNODE, from_memnode(&mux_ack(1000, 1))),
        expect(PORT_CLIENT, to_client(&atomic_ack(200, 1, 0))),
        pkt(PORT_MEMNODE, from_memnode(&mux_ack(1001, 2))),
        expect(PORT_CLIENT, to_client2(&for2(atomic_ack(500, 1, 1)))),
        // A releases: CAS(1 -> 0) becomes WRITE(0).
        pkt(PORT_CLIENT, from_client(&cas_lock(201, 0, 1))),
        expect(PORT_MEMNODE, to_memnode(&mux_write(1002, 0))),
        expect(PORT_MEMNODE, to_memnode(&filler(201))),
        // The filler's ACK is dropped.
        pkt(PORT_MEMNODE, from_memnode(&ack(201, 2))),
        pkt(PORT_MEMNODE, from_memnode(&mux_ack(1002, 3))),
        expect(PORT_CLIENT, to_client(&atomic_ack(201, 2, 1))),
        reg("lock_word", 0, 0),
        reg("mux_next_psn", 0, 1003 | VALID),
        // No PSN offsets: the fillers kept the client QPs in step (the last one's ACK
        // need not be awaited: CONN_FILLER_LAST).
        reg("conn_epsn", CONN as usize, 202 | VALID | FILLER_LAST),
        reg("conn_epsn", CONN2 as usize, 501 | VALID | FILLER_LAST),
        reg("repl_orig", CONN2 as usize, 1),
    ]);
    v.push((
        "replace_cas_to_write_and_back",
        "CAS on a tracked word from two connections: WRITEs of the cached outcome on one multiplexed QP, ACKs back as ATOMIC ACKs with the original",
        c,
    ));

    let mut c = replace_setup(REPLACE, 200, 500, 1000);
    c.extend([
        // No cached value: the first CAS goes up as itself and its answer fills the cache.
        pkt(PORT_CLIENT, from_client(&cas_lock(200, 1, 0))),
        expect(
            PORT_MEMNODE,
            to_memnode(&{
                let mut r = cas_lock(1000, 1, 0);
                r.bth.dest_qpn = MUX_MEMNODE_QPN;
                r
            }),
        ),
        expect(PORT_MEMNODE, to_memnode(&filler(200))),
        pkt(
            PORT_MEMNODE,
            from_memnode(&{
                let mut r = atomic_ack(1000, 1, 0);
                r.bth.dest_qpn = MUX_QPN;
                r
            }),
        ),
        expect(PORT_CLIENT, to_client(&atomic_ack(200, 1, 0))),
        reg("lock_state", 0, CACHED),
        reg("lock_word", 0, 1),
        pkt(PORT_CLIENT, from_client2(&on2(cas_lock(500, 1, 0)))),
        expect(PORT_MEMNODE, to_memnode(&mux_write(1001, 1))),
        expect(PORT_MEMNODE, to_memnode(&on2(filler(500)))),
    ]);
    v.push((
        "replace_fill_then_convert",
        "an atomic on an uncached tracked word goes up unconverted; its ATOMIC ACK fills the cache and the next CAS is converted",
        c,
    ));

    let mut c = replace_setup(REPLACE, 200, 500, 1000);
    c.extend([
        reg("lock_state", 0, CACHED),
        pkt(PORT_CLIENT, from_client(&cas_lock(200, 1, 0))),
        expect(PORT_MEMNODE, to_memnode(&mux_write(1000, 1))),
        expect(PORT_MEMNODE, to_memnode(&filler(200))),
        // Closed loop: a new request behind the diverted one is held (dropped).
        pkt(PORT_CLIENT, from_client(&read(201, 0x2000, 8))),
        // The retransmitted CAS re-sends the same WRITE and filler.
        pkt(PORT_CLIENT, from_client(&cas_lock(200, 1, 0))),
        expect(PORT_MEMNODE, to_memnode(&mux_write(1000, 1))),
        expect(PORT_MEMNODE, to_memnode(&filler(200))),
        pkt(PORT_MEMNODE, from_memnode(&mux_ack(1000, 1))),
        expect(PORT_CLIENT, to_client(&atomic_ack(200, 1, 0))),
        // A duplicate ACK finds nothing pending: dropped.
        pkt(PORT_MEMNODE, from_memnode(&mux_ack(1000, 1))),
        // The held READ's retransmission goes up on the client's QP with its own PSN
        // (the filler took 200 there), before the filler's ACK came back.
        pkt(PORT_CLIENT, from_client(&read(201, 0x2000, 8))),
        expect(PORT_MEMNODE, to_memnode(&read(201, 0x2000, 8))),
        pkt(
            PORT_MEMNODE,
            from_memnode(&read_response(201, 2, b"abcdefgh")),
        ),
        expect(PORT_CLIENT, to_client(&read_response(201, 2, b"abcdefgh"))),
        // A CAS retransmitted after its answer is answered again by the switch (with
        // the connection's current MSN, as switch-atomic replays are).
        pkt(PORT_CLIENT, from_client(&cas_lock(200, 1, 0))),
        expect(PORT_CLIENT, answer(&atomic_ack(200, 2, 0))),
        reg("lock_word", 0, 1),
        reg("mux_next_psn", 0, 1001 | VALID),
    ]);
    v.push((
        "replace_closed_loop_resend_replay",
        "one request in flight per client QP: later requests are held; a retransmission re-sends the same WRITE, or is answered from the stored original once answered",
        c,
    ));

    let mut c = replace_setup(REPLACE, 200, 500, 1000);
    c.extend([
        reg("lock_state", 0, CACHED),
        pkt(PORT_CLIENT, from_client(&cas_lock(200, 1, 0))),
        expect(PORT_MEMNODE, to_memnode(&mux_write(1000, 1))),
        expect(PORT_MEMNODE, to_memnode(&filler(200))),
        pkt(PORT_CLIENT, from_client2(&on2(cas_lock(500, 1, 0)))),
        expect(PORT_MEMNODE, to_memnode(&mux_write(1001, 1))),
        expect(PORT_MEMNODE, to_memnode(&on2(filler(500)))),
        // The ACK of 1000 is lost; 1001's arrives.
        pkt(PORT_MEMNODE, from_memnode(&mux_ack(1001, 2))),
        expect(PORT_CLIENT, to_client2(&for2(atomic_ack(500, 1, 1)))),
        // A retransmits; the re-sent WRITE is a duplicate at the memnode, which answers
        // with a cumulative ACK for its latest PSN: that answers A.
        pkt(PORT_CLIENT, from_client(&cas_lock(200, 1, 0))),
        expect(PORT_MEMNODE, to_memnode(&mux_write(1000, 1))),
        expect(PORT_MEMNODE, to_memnode(&filler(200))),
        pkt(PORT_MEMNODE, from_memnode(&mux_ack(1001, 2))),
        expect(PORT_CLIENT, to_client(&atomic_ack(200, 1, 0))),
        // A sequence NAK on the multiplexed QP is dropped.
        pkt(
            PORT_MEMNODE,
            from_memnode(&{
                let mut r = nak(1002, 2, NakCode::PsnSequenceError);
                r.bth.dest_qpn = MUX_QPN;
                r
            }),
        ),
        reg("mux_resend", 0, 0),
        // A sequence NAK saying A's filler never arrived sends the filler again.
        pkt(
            PORT_MEMNODE,
            from_memnode(&nak(200, 0, NakCode::PsnSequenceError)),
        ),
        expect(PORT_MEMNODE, {
            frame(SWITCH_MAC, MEMNODE_MAC, UPSTREAM, MEMNODE, &filler(200))
        }),
    ]);
    v.push((
        "replace_cumulative_ack_after_resend",
        "a re-sent WRITE the memnode already executed is answered by its cumulative ACK; sequence NAKs on the multiplexed QP are dropped",
        c,
    ));

    // A restarted switch: routes reinstalled, connection registers not initialised
    // (they are learnt from traffic), the lock word not cached.
    let mut c: Vec<Command> = replace_setup(REPLACE, 200, 500, 1000)
        .into_iter()
        .filter(|cmd| !matches!(cmd, Command::Conn { conn, .. } if *conn == CONN))
        .collect();
    c.extend([
        // The previous incarnation sent the filler for A's CAS 200; the memnode's ACK
        // of it arrives first and passes (nothing says it answers a filler).
        pkt(PORT_MEMNODE, from_memnode(&ack(200, 7))),
        expect(PORT_CLIENT, to_client(&ack(200, 7))),
        reg("conn_acked", CONN as usize, 201 | VALID),
        // A's retransmitted CAS: the memnode has answered its PSN already, so nothing
        // else would ever let it through; it is admitted again (cache fill on the
        // multiplexed QP, filler re-sent as a duplicate).
        pkt(PORT_CLIENT, from_client(&cas_lock(200, 1, 0))),
        expect(
            PORT_MEMNODE,
            to_memnode(&{
                let mut r = cas_lock(1000, 1, 0);
                r.bth.dest_qpn = MUX_MEMNODE_QPN;
                r
            }),
        ),
        expect(PORT_MEMNODE, to_memnode(&filler(200))),
        // The duplicate filler's cumulative ACK is dropped; the answer comes back.
        pkt(PORT_MEMNODE, from_memnode(&ack(200, 7))),
        pkt(
            PORT_MEMNODE,
            from_memnode(&{
                let mut r = atomic_ack(1000, 1, 0);
                r.bth.dest_qpn = MUX_QPN;
                r
            }),
        ),
        expect(PORT_CLIENT, to_client(&atomic_ack(200, 8, 0))),
        reg("lock_state", 0, CACHED),
        reg("lock_word", 0, 1),
        // A later request is no longer admitted that way: the registers are learnt.
        reg("conn_epsn", CONN as usize, 201 | VALID | FILLER_LAST),
    ]);
    v.push((
        "replace_restart_filler_answered_first",
        "after a restart, a diverted request whose filler the memnode already answered is admitted again instead of waiting forever",
        c,
    ));

    let mut c = replace_setup(0, 200, 500, 1000);
    c.extend([
        pkt(PORT_CLIENT, from_client(&cas_lock(200, 1, 0))),
        expect(PORT_MEMNODE, to_memnode(&cas_lock(200, 1, 0))),
    ]);
    v.push((
        "replace_off_forwards",
        "with the mode bit clear, a CAS on a tracked word goes up on the client's own QP",
        c,
    ));
    v
}

const LATCH: u32 = spec::mode::OPT_LATCH;

fn tuple_va(t: u64) -> u64 {
    TUPLES_VA + t * 64
}

fn latch_cas(psn: u32, t: u64) -> PacketRepr<'static> {
    atomic(Opcode::CompareSwap, psn, RKEY, tuple_va(t), 1, 0)
}

fn leak(v: Vec<u8>) -> &'static [u8] {
    Box::leak(v.into_boxed_slice())
}

fn tuple_bytes(stamp: u64, fill: u8) -> &'static [u8] {
    let mut v = stamp.to_le_bytes().to_vec();
    v.extend(std::iter::repeat_n(fill, 56));
    leak(v)
}

/// A READ response packet `op` (First, Middle, Last) of the vectors' connection.
fn read_part(op: Opcode, psn: u32, msn: u32, data: &'static [u8]) -> PacketRepr<'static> {
    let mut r = read_response(psn, msn, data);
    r.bth.opcode = op;
    if op == Opcode::ReadResponseMiddle {
        r.aeth = None;
    }
    r
}

/// `len` bytes: the stamp word, then `fill`.
fn part_bytes(stamp: u64, fill: u8, len: usize) -> &'static [u8] {
    let mut v = stamp.to_le_bytes().to_vec();
    v.extend(std::iter::repeat_n(fill, len - 8));
    leak(v)
}

fn latch_cases() -> Vec<(&'static str, &'static str, Vec<Command>)> {
    use accel_p4::functions::opt_latch::stamp;
    let mut v = Vec::new();
    let holder = |conn: u8| (u64::from(conn) + 1) << 23;

    let mut c = replace_setup(LATCH, 300, 500, 0);
    c.extend([
        // A latches tuple 1: answered by the switch with the version before (even).
        // Its filler takes PSN 300 on A's own QP.
        pkt(PORT_CLIENT, from_client(&latch_cas(300, 1))),
        expect(PORT_CLIENT, answer(&atomic_ack(300, 1, 0))),
        expect(PORT_MEMNODE, to_memnode(&filler(300))),
        reg("tuple_version", 1, 1 | holder(CONN)),
        // B is refused: the version it gets is odd.
        pkt(PORT_CLIENT, from_client2(&on2(latch_cas(500, 1)))),
        expect(PORT_CLIENT, answer2(&for2(atomic_ack(500, 1, 1)))),
        expect(PORT_MEMNODE, to_memnode(&on2(filler(500)))),
        // A's retransmitted latch request is answered from the state, not re-applied.
        pkt(PORT_CLIENT, from_client(&latch_cas(300, 1))),
        expect(PORT_CLIENT, answer(&atomic_ack(300, 1, 0))),
        // A writes the tuple: forwarded with its own PSN (no offset); the filler's ACK
        // is dropped; the WRITE's ACK unlatches (version 2).
        pkt(
            PORT_CLIENT,
            from_client(&write(301, tuple_va(1), tuple_bytes(0, 7))),
        ),
        expect(
            PORT_MEMNODE,
            to_memnode(&write(301, tuple_va(1), tuple_bytes(0, 7))),
        ),
        reg("tuple_version", 1, 1 | holder(CONN)),
        pkt(PORT_MEMNODE, from_memnode(&ack(300, 1))),
        pkt(PORT_MEMNODE, from_memnode(&ack(301, 2))),
        expect(PORT_CLIENT, to_client(&ack(301, 2))),
        reg("tuple_version", 1, 2),
        // A duplicate ACK changes nothing.
        pkt(PORT_MEMNODE, from_memnode(&ack(301, 2))),
        expect(PORT_CLIENT, to_client(&ack(301, 2))),
        reg("tuple_version", 1, 2),
    ]);
    v.push((
        "latch_write_unlatch",
        "latch requests answered by the switch (granted even, refused odd, retransmission answered from state); the WRITE's ACK unlatches",
        c,
    ));

    let mut c = replace_setup(LATCH, 300, 500, 0);
    c.extend([
        // Two latch requests in flight on A's queue pair: both answered (the second
        // need not wait for the first one's filler to be acknowledged).
        pkt(PORT_CLIENT, from_client(&latch_cas(300, 1))),
        expect(PORT_CLIENT, answer(&atomic_ack(300, 1, 0))),
        expect(PORT_MEMNODE, to_memnode(&filler(300))),
        pkt(PORT_CLIENT, from_client(&latch_cas(301, 2))),
        expect(PORT_CLIENT, answer(&atomic_ack(301, 2, 0))),
        expect(PORT_MEMNODE, to_memnode(&filler(301))),
        // The first answer was lost: the requester sends both again. The first is
        // still in the answer ring although it is not the last answer, and is answered
        // from the tuple's state (latched by A: granted); no new filler goes up.
        pkt(PORT_CLIENT, from_client(&latch_cas(300, 1))),
        expect(PORT_CLIENT, answer(&atomic_ack(300, 2, 0))),
        pkt(PORT_CLIENT, from_client(&latch_cas(301, 2))),
        expect(PORT_CLIENT, answer(&atomic_ack(301, 2, 0))),
        reg("tuple_version", 1, 1 | holder(CONN)),
        reg("tuple_version", 2, 1 | holder(CONN)),
        reg("answer_psn", ans(300), 300 | VALID),
        reg("answer_psn", ans(301), 301 | VALID),
    ]);
    v.push((
        "latch_pipelined_lost_answer_replayed",
        "two latch requests in flight on one queue pair; the first one's answer is lost and its retransmission, behind the second answer, is found in the answer ring and answered from the tuple's state",
        c,
    ));

    let mut c = replace_setup(LATCH, 300, 500, 0);
    c.extend([
        reg("tuple_version", 2, 4),
        // A READ of tuple 2 goes up; its response is stamped valid with version 4.
        pkt(PORT_CLIENT, from_client(&read(300, tuple_va(2), 64))),
        expect(PORT_MEMNODE, to_memnode(&read(300, tuple_va(2), 64))),
        pkt(
            PORT_MEMNODE,
            from_memnode(&read_response(300, 1, tuple_bytes(0, 9))),
        ),
        expect(
            PORT_CLIENT,
            to_client(&read_response(300, 1, tuple_bytes(stamp(true, 4, 64), 9))),
        ),
        // Another READ; B latches the tuple before the response: stamped invalid.
        pkt(PORT_CLIENT, from_client(&read(301, tuple_va(2), 64))),
        expect(PORT_MEMNODE, to_memnode(&read(301, tuple_va(2), 64))),
        pkt(PORT_CLIENT, from_client2(&on2(latch_cas(500, 2)))),
        expect(PORT_CLIENT, answer2(&for2(atomic_ack(500, 1, 4)))),
        expect(PORT_MEMNODE, to_memnode(&on2(filler(500)))),
        pkt(
            PORT_MEMNODE,
            from_memnode(&read_response(301, 2, tuple_bytes(0, 9))),
        ),
        expect(
            PORT_CLIENT,
            to_client(&read_response(301, 2, tuple_bytes(stamp(false, 4, 64), 9))),
        ),
        // A reads the version word (8 bytes): answered by the switch, odd (latched).
        pkt(PORT_CLIENT, from_client(&read(302, tuple_va(2), 8))),
        expect(
            PORT_CLIENT,
            answer(&read_response(302, 3, leak(5u64.to_le_bytes().to_vec()))),
        ),
        expect(PORT_MEMNODE, to_memnode(&filler(302))),
        reg("tuple_version", 2, 5 | holder(CONN2)),
    ]);
    v.push((
        "latch_read_stamped_and_version_read",
        "tuple READ responses carry the stamp (valid, then invalid after a concurrent latch) over their first 8 bytes; a version READ is answered by the switch",
        c,
    ));

    // Tuples of 4 KiB (stride 2^12); a 3 KiB READ at path MTU 1024 comes back as First,
    // Middle and Last.
    let mut c = replace_setup(LATCH, 300, 500, 0);
    let big = |t: u64| TUPLES_VA + t * 4096;
    let part =
        |op, psn, stamp_word, fill| read_part(op, psn, 1, part_bytes(stamp_word, fill, 1024));
    use Opcode::{
        ReadResponseFirst as First, ReadResponseLast as Last, ReadResponseMiddle as Middle,
    };
    c.extend([
        Command::LatchRegion(
            RKEY,
            LatchRegion {
                base_va: TUPLES_VA,
                stride_log2: 12,
                tuples: 16,
                first_tuple: 0,
            },
        ),
        reg("tuple_version", 3, 4),
        pkt(PORT_CLIENT, from_client(&read(300, big(3), 3072))),
        expect(PORT_MEMNODE, to_memnode(&read(300, big(3), 3072))),
        // Every packet is stamped over its first 8 bytes, with its own length; the
        // Middle and Last find the READ through read_cursor.
        pkt(PORT_MEMNODE, from_memnode(&part(First, 300, 0, 1))),
        expect(
            PORT_CLIENT,
            to_client(&part(First, 300, stamp(true, 4, 1024), 1)),
        ),
        reg("read_cursor", CONN as usize, (301 << 32) | 300 | VALID),
        pkt(PORT_MEMNODE, from_memnode(&part(Middle, 301, 0, 1))),
        expect(
            PORT_CLIENT,
            to_client(&part(Middle, 301, stamp(true, 4, 1024), 1)),
        ),
        // B latches the tuple before the Last passes: the Last is stamped invalid (the
        // First's valid stamp does not speak for it).
        pkt(
            PORT_CLIENT,
            from_client2(&on2(atomic(Opcode::CompareSwap, 500, RKEY, big(3), 1, 0))),
        ),
        expect(PORT_CLIENT, answer2(&for2(atomic_ack(500, 1, 4)))),
        expect(PORT_MEMNODE, to_memnode(&on2(filler(500)))),
        pkt(PORT_MEMNODE, from_memnode(&part(Last, 302, 0, 1))),
        expect(
            PORT_CLIENT,
            to_client(&part(Last, 302, stamp(false, 4, 1024), 1)),
        ),
        reg("read_cursor", CONN as usize, 0),
        // The READ executed again (retransmitted): every packet of the new execution is
        // judged against the version the READ first saw, so all are invalid.
        pkt(PORT_MEMNODE, from_memnode(&part(First, 300, 0, 2))),
        expect(
            PORT_CLIENT,
            to_client(&part(First, 300, stamp(false, 4, 1024), 2)),
        ),
        // A Last whose predecessor the switch did not see passes unstamped (the
        // reader rejects a response with an unstamped packet).
        pkt(PORT_MEMNODE, from_memnode(&part(Last, 302, 0, 2))),
        expect(PORT_CLIENT, to_client(&part(Last, 302, 0, 2))),
        reg("read_cursor", CONN as usize, (301 << 32) | 300 | VALID),
        reg(
            "client_version",
            CONN as usize * spec::LATCH_PER_CONN + 300 % spec::LATCH_PER_CONN,
            4,
        ),
        reg("tuple_version", 3, 5 | holder(CONN2)),
    ]);
    v.push((
        "latch_multi_packet_read_stamped_per_packet",
        "every packet of a multi-packet tuple READ response carries its own stamp (version then and now, and the packet length); Middle/Last find their READ through read_cursor and pass unstamped out of sequence",
        c,
    ));
    v
}

// ---- Clover write and read steering ----

const CHAIN: u64 = 0xC0FFEE;
const X_VA: u64 = 0x8_0000_1000; // the committed tail
const T_VA: u64 = 0x8_0000_0400; // the writer's (stale) predecessor
const N_VA: u64 = 0x8_0000_2000; // the new node
const X_VER: u32 = 7;
const T_VER: u32 = 5;
const HS: u64 = 1 << 63;

fn gen_hdr(generation: u64) -> u64 {
    generation << 46
}

/// A 64-byte Clover node: header, chain id, lengths, class 0, version, a CRC field
/// (the switch does not look at it), key "k" and value "v".
fn node(header: u64, chain: u64, version: u32) -> &'static [u8] {
    let mut b = Vec::with_capacity(64);
    b.extend_from_slice(&header.to_le_bytes());
    b.extend_from_slice(&chain.to_le_bytes());
    b.extend_from_slice(&1u16.to_le_bytes());
    b.extend_from_slice(&[0, 0]);
    b.extend_from_slice(&1u32.to_le_bytes());
    b.extend_from_slice(&version.to_le_bytes());
    b.extend_from_slice(&[0xAA; 4]);
    b.extend_from_slice(b"kv");
    b.resize(64, 0);
    leak(b)
}

/// Tracking of `CHAIN` in slot 0, class 64, the connection in step at PSN 100, the
/// committed tail X (version 7) and the write cache entry of the stale node T.
fn steer_setup(mode: u32) -> Vec<Command> {
    use accel_p4::functions::write_steer::{addr_cell, addr_tag};
    let mut c = setup(mode, 100);
    let tag = addr_tag(T_VA, MEMNODE);
    c.extend([
        Command::SteerKey(CHAIN, 0),
        Command::SteerClass(64),
        reg("steer_epsn", CONN as usize, VALID | 100),
        reg("steer_tail_va", 0, X_VA),
        reg("steer_tail_hdr", 0, gen_hdr(5)),
        reg("steer_tail_ver", 0, u64::from(X_VER)),
        reg("steer_addr_tag", addr_cell(tag) as usize, u64::from(tag)),
        reg("steer_addr_key", addr_cell(tag) as usize, 1),
        reg("steer_addr_ver", addr_cell(tag) as usize, u64::from(T_VER)),
    ]);
    c
}

/// The `steer_*` ring cell of the test connection's `psn`.
fn ring(psn: u32) -> usize {
    accel_p4::functions::write_steer::ring_slot(CONN, psn) as usize
}

/// The link of the new node (generation 9, some line) as the client's swap has it.
fn link_bits() -> u64 {
    HS | (9 << 38) | 0x80
}

fn steer_cases() -> Vec<(&'static str, &'static str, Vec<Command>)> {
    use accel_p4::functions::write_steer::{MARK_STEER_FAILED, steered_success};
    let steer = spec::mode::WRITE_STEER | spec::mode::READ_STEER;
    let t_hdr = gen_hdr(3);
    let x_hdr = gen_hdr(5);
    let n_hdr = gen_hdr(9);
    let cas =
        |va: u64, cmp: u64| atomic(Opcode::CompareSwap, 101, RKEY, va, cmp | link_bits(), cmp);
    // The writer read T (version 5) and links its node N after it; the committed tail
    // is X (version 7): N's WRITE goes up as version 8...
    let behind_write = || {
        vec![
            pkt(
                PORT_CLIENT,
                from_client(&write(100, N_VA, node(n_hdr, CHAIN, T_VER + 1))),
            ),
            expect(
                PORT_MEMNODE,
                to_memnode(&write(100, N_VA, node(n_hdr, CHAIN, X_VER + 1))),
            ),
        ]
    };
    // ...and its link CAS goes to X.
    let behind_write_steered_cas = || {
        let mut c = behind_write();
        c.extend([
            pkt(PORT_CLIENT, from_client(&cas(T_VA, t_hdr))),
            expect(PORT_MEMNODE, to_memnode(&cas(X_VA, x_hdr))),
        ]);
        c
    };
    let mut v = Vec::new();

    // Write steering, success.
    let mut c = steer_setup(steer);
    c.extend(behind_write_steered_cas());
    c.extend([
        pkt(PORT_MEMNODE, from_memnode(&ack(100, 1))),
        expect(PORT_CLIENT, to_client(&ack(100, 1))),
        pkt(PORT_MEMNODE, from_memnode(&atomic_ack(101, 2, x_hdr))),
        expect(
            PORT_CLIENT,
            to_client(&atomic_ack(101, 2, steered_success(x_hdr, X_VA))),
        ),
        reg("steer_tail_va", 0, N_VA),
        reg("steer_tail_hdr", 0, n_hdr),
        reg("steer_tail_ver", 0, u64::from(X_VER + 1)),
    ]);
    v.push((
        "steer_write_versioned_cas_steered",
        "a tracked node WRITE behind the committed tail gets the tail's version + 1; its CAS goes to the tail; the ACK commits the node and carries the steered-success marker",
        c,
    ));

    // Write steering, the steered CAS fails.
    let mut c = steer_setup(steer);
    c.extend(behind_write_steered_cas());
    c.extend([
        pkt(
            PORT_MEMNODE,
            from_memnode(&atomic_ack(101, 1, x_hdr | HS | 0x40)),
        ),
        expect(
            PORT_CLIENT,
            to_client(&atomic_ack(101, 1, MARK_STEER_FAILED)),
        ),
        reg("steer_tail_va", 0, X_VA),
        reg("steer_tail_ver", 0, u64::from(X_VER)),
    ]);
    v.push((
        "steer_cas_failed_marked",
        "a steered CAS that fails reaches the client as the steered-failure marker; the cache keeps the tail",
        c,
    ));

    // Read steering.
    let mut c = steer_setup(steer);
    c.extend([
        pkt(PORT_CLIENT, from_client(&read(100, T_VA, 64))),
        expect(PORT_MEMNODE, to_memnode(&read(100, X_VA, 64))),
        pkt(
            PORT_MEMNODE,
            from_memnode(&read_response(100, 1, node(x_hdr, CHAIN, X_VER))),
        ),
        expect(
            PORT_CLIENT,
            to_client(&read_response(
                100,
                1,
                node(x_hdr | (X_VA >> 6), CHAIN, X_VER),
            )),
        ),
    ]);
    v.push((
        "steer_read_redirected_and_marked",
        "a node READ of a stale address of a tracked key goes to the committed tail; the response carries the address it was read from",
        c,
    ));

    // A steered CAS's WRITE retransmitted: the copy gets the first one's version.
    let mut c = steer_setup(steer);
    c.extend(behind_write_steered_cas());
    // The WRITE was lost beyond the switch: the client sends both again, and the copy
    // of the WRITE goes up as version 8 too.
    c.extend(behind_write());
    c.extend([
        pkt(PORT_CLIENT, from_client(&cas(T_VA, t_hdr))),
        expect(PORT_MEMNODE, to_memnode(&cas(T_VA, t_hdr))),
        reg("steer_epsn", CONN as usize, VALID | 102),
    ]);
    v.push((
        "steer_retransmitted_write_keeps_version",
        "a retransmitted node WRITE whose link CAS was steered carries the version the first transmission was given (whichever copy executes, a late steered CAS finds it); the retransmitted CAS passes unchanged",
        c,
    ));

    // A WRITE retransmitted before its CAS went by: the CAS is not steered.
    let mut c = steer_setup(steer);
    c.extend(behind_write());
    c.extend([
        pkt(
            PORT_CLIENT,
            from_client(&write(100, N_VA, node(n_hdr, CHAIN, T_VER + 1))),
        ),
        expect(
            PORT_MEMNODE,
            to_memnode(&write(100, N_VA, node(n_hdr, CHAIN, T_VER + 1))),
        ),
        pkt(PORT_CLIENT, from_client(&cas(T_VA, t_hdr))),
        expect(PORT_MEMNODE, to_memnode(&cas(T_VA, t_hdr))),
        reg("steer_pend", CONN as usize, 0),
    ]);
    v.push((
        "steer_write_copy_unpends_cas",
        "a node WRITE sent again before its link CAS went by drops the pending record: the CAS passes unchanged, whichever copy of the WRITE executes",
        c,
    ));

    // A steered READ retransmitted: the copy reads the address asked for, unmarked.
    let mut c = steer_setup(steer);
    c.extend([
        pkt(PORT_CLIENT, from_client(&read(100, T_VA, 64))),
        expect(PORT_MEMNODE, to_memnode(&read(100, X_VA, 64))),
        pkt(PORT_CLIENT, from_client(&read(100, T_VA, 64))),
        expect(PORT_MEMNODE, to_memnode(&read(100, T_VA, 64))),
        pkt(
            PORT_MEMNODE,
            from_memnode(&read_response(100, 1, node(t_hdr, CHAIN, T_VER))),
        ),
        expect(
            PORT_CLIENT,
            to_client(&read_response(100, 1, node(t_hdr, CHAIN, T_VER))),
        ),
        reg("steer_rd", ring(100), 0),
    ]);
    v.push((
        "steer_read_retransmission_unmarked",
        "a retransmitted READ of a steered one is not steered and removes its record, so the response from the address asked for is not marked with the tail's",
        c,
    ));

    // Misses: an untracked key's WRITE, a READ of an unknown address, a retransmission.
    let mut c = steer_setup(steer);
    c.extend([
        pkt(
            PORT_CLIENT,
            from_client(&write(100, N_VA, node(n_hdr, CHAIN + 1, 1))),
        ),
        expect(
            PORT_MEMNODE,
            to_memnode(&write(100, N_VA, node(n_hdr, CHAIN + 1, 1))),
        ),
        pkt(PORT_CLIENT, from_client(&read(101, 0x9_0000_0000, 64))),
        expect(PORT_MEMNODE, to_memnode(&read(101, 0x9_0000_0000, 64))),
        pkt(PORT_CLIENT, from_client(&read(100, T_VA, 64))),
        expect(PORT_MEMNODE, to_memnode(&read(100, T_VA, 64))),
        reg("steer_epsn", CONN as usize, VALID | 102),
    ]);
    v.push((
        "steer_misses_pass_unchanged",
        "an untracked key's node WRITE, a READ of an address the write cache does not know and a retransmitted READ pass unchanged",
        c,
    ));
    v
}

/// The switch's QPN of a flow ring's control QP on `MEMNODE`, and a producer's
/// doorbell QPN on the switch.
const FLOW_CTL_QPN: u32 = 0xF0_0101;
const DOORBELL_QPN: u32 = 0xF0_0200;

fn flow_cases() -> Vec<(&'static str, &'static str, Vec<Command>)> {
    let mut v = Vec::new();
    let head_word: &'static [u8] = leak(42u64.to_le_bytes().to_vec());

    // A ring's control QP on MEMNODE, and a producer's doorbell from CLIENT.
    let mut c = vec![
        Command::FlowPunt(
            RouteKey {
                src: MEMNODE,
                qpn: FLOW_CTL_QPN,
            },
            FlowPuntAction { ring: 0 },
        ),
        Command::FlowPunt(
            RouteKey {
                src: CLIENT,
                qpn: DOORBELL_QPN,
            },
            FlowPuntAction { ring: 1 },
        ),
    ];
    // The answer to a head READ, and the ACK of a tail WRITE: to the CPU, unchanged.
    let mut head = PacketRepr::new(BthRepr::new(
        Opcode::ReadResponseOnly,
        FLOW_CTL_QPN,
        0x10,
        false,
    ));
    head.aeth = Some(AethRepr {
        syndrome: Syndrome::Ack { credits: 31 },
        msn: 1,
    });
    head.payload = head_word;
    let mut tail_ack =
        PacketRepr::new(BthRepr::new(Opcode::Acknowledge, FLOW_CTL_QPN, 0x11, false));
    tail_ack.aeth = Some(AethRepr {
        syndrome: Syndrome::Ack { credits: 31 },
        msn: 2,
    });
    // A doorbell: an 8-byte WRITE ONLY carrying the producer's new head.
    let mut doorbell = PacketRepr::new(BthRepr::new(Opcode::WriteOnly, DOORBELL_QPN, 7, false));
    doorbell.reth = Some(RethRepr {
        va: 0,
        rkey: 0,
        dma_len: 8,
    });
    doorbell.payload = head_word;
    // The same memnode on a QPN no flow owns: not punted (and not routed: dropped).
    let mut other = head;
    other.bth.dest_qpn = FLOW_CTL_QPN + 1;
    c.extend([
        pkt(PORT_MEMNODE, from_memnode(&head)),
        expect(PORT_CPU, from_memnode(&head)),
        pkt(PORT_MEMNODE, from_memnode(&tail_ack)),
        expect(PORT_CPU, from_memnode(&tail_ack)),
        pkt(PORT_CLIENT, from_client(&doorbell)),
        expect(PORT_CPU, from_client(&doorbell)),
        pkt(PORT_MEMNODE, from_memnode(&other)),
    ]);
    v.push((
        "flow_control_answers_and_doorbells_punted",
        "answers on a flow ring's control QP and a producer's doorbell go to the CPU port unchanged; other QPNs are not punted",
        c,
    ));

    // A lane moving two items one after the other: the control plane points the
    // lane's copy_src entry at the second item (next PSNs, the next consumer slot); a
    // late response of the first item then falls before the entry and is dropped.
    let item: &'static [u8] = leak((0..700).map(|i| (i % 199) as u8 ^ 0x3C).collect());
    let mut c = copy_setup();
    let first_slot_va = COPY_DST_VA;
    let lane = |src_psn: u32, dst_psn: u32, dst_va: u64| {
        Command::CopySrc(
            RouteKey {
                src: MEMNODE,
                qpn: COPY_SRC_QPN,
            },
            CopySrcAction {
                slot: 0,
                src_psn,
                dst_psn,
                dst_va,
                dst_rkey: COPY_RKEY,
                src: UPSTREAM,
                dst: TARGET,
                dst_qpn: TARGET_QPN,
                pmtu_log2: 10,
                len: 700,
            },
        )
    };
    let lane_write = |psn: u32, va: u64| {
        let mut r = PacketRepr::new(BthRepr::new(Opcode::WriteOnly, TARGET_QPN, psn, true));
        r.reth = Some(RethRepr {
            va,
            rkey: COPY_RKEY,
            dma_len: item.len() as u32,
        });
        r.payload = item;
        frame(MEMNODE_MAC, SWITCH_MAC, UPSTREAM, TARGET, &r)
    };
    let second_slot_va = first_slot_va + 1024;
    c.extend([
        lane(COPY_SRC_PSN, COPY_DST_PSN, first_slot_va),
        pkt(
            PORT_MEMNODE,
            copy_response(Opcode::ReadResponseOnly, COPY_SRC_PSN, item),
        ),
        expect(PORT_MEMNODE, lane_write(COPY_DST_PSN, first_slot_va)),
        // The first item is acknowledged; the lane moves on to the second.
        lane(0xFF_FFFF, COPY_DST_PSN + 1, second_slot_va),
        pkt(
            PORT_MEMNODE,
            copy_response(Opcode::ReadResponseOnly, COPY_SRC_PSN, item),
        ),
        pkt(
            PORT_MEMNODE,
            copy_response(Opcode::ReadResponseOnly, 0xFF_FFFF, item),
        ),
        expect(PORT_MEMNODE, lane_write(COPY_DST_PSN + 1, second_slot_va)),
        // The lane's copy_dst entry counts from the second item's first PSN: the
        // second item's ACK counts one packet, a late ACK of the first item nothing.
        Command::CopyDst(
            RouteKey {
                src: TARGET,
                qpn: COPY_DST_QPN,
            },
            CopyDstAction {
                slot: 0,
                dst_psn: COPY_DST_PSN + 1,
            },
        ),
        pkt(
            PORT_MEMNODE,
            copy_answer(COPY_DST_PSN + 1, Syndrome::Ack { credits: 31 }),
        ),
        reg("copy_acked", 0, 1 | VALID),
        pkt(
            PORT_MEMNODE,
            copy_answer(COPY_DST_PSN, Syndrome::Ack { credits: 31 }),
        ),
        reg("copy_acked", 0, 1 | VALID),
    ]);
    v.push((
        "flow_lane_entry_rewritten_per_item",
        "a lane's copy_src entry is pointed at each item in turn: the new item's response goes to its own slot, a late response of the previous item is dropped",
        c,
    ));
    v
}

/// The further targets of the multicast copy vectors: (memnode, its QPN of the
/// switch's target QP, the switch's QPN, first target PSN, slot address, memory key).
const MCAST_TARGETS: [(SocketAddrV4, u32, u32, u32, u64, u32); 2] = [
    (
        SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 4), 4791),
        0x67,
        0xE0_0005,
        0xFF_FFFF,
        0xA000_0000,
        0x8888,
    ),
    (
        SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 5), 4791),
        0x68,
        0xE0_0007,
        0x2000,
        0xB000_0400,
        0x9999,
    ),
];

/// The WRITE ONLY replica `r` (1 up) of packet `k` of the multicast copy.
fn mcast_write(r: usize, k: u32, data: &'static [u8]) -> Vec<u8> {
    let (dst, qpn, _, psn, va, rkey) = MCAST_TARGETS[r - 1];
    let mut w = PacketRepr::new(BthRepr::new(
        Opcode::WriteOnly,
        qpn,
        (psn + k) & 0xFF_FFFF,
        true,
    ));
    w.reth = Some(RethRepr {
        va: va + u64::from(k) * 1024,
        rkey,
        dma_len: data.len() as u32,
    });
    w.payload = data;
    frame(MEMNODE_MAC, SWITCH_MAC, UPSTREAM, dst, &w)
}

/// The copy of slot 0 multicast: two more targets (`copy_mcast` replicas 1 and 2),
/// each with its own `copy_dst` entry and slot (1 and 2).
fn copy_mcast_setup() -> Vec<Command> {
    let mut c = copy_setup();
    for (i, &(dst, dst_qpn, switch_qpn, dst_psn, dst_va, dst_rkey)) in
        MCAST_TARGETS.iter().enumerate()
    {
        let r = i as u8 + 1;
        c.push(Command::CopyMcast(
            (0, r),
            CopyReplicaAction {
                dst_psn,
                dst_va,
                dst_rkey,
                dst,
                dst_qpn,
            },
        ));
        c.push(Command::CopyDst(
            RouteKey {
                src: dst,
                qpn: switch_qpn,
            },
            CopyDstAction { slot: r, dst_psn },
        ));
    }
    c
}

fn copy_mcast_cases() -> Vec<(&'static str, &'static str, Vec<Command>)> {
    let mut v = Vec::new();
    let first = leak((0..1024).map(|i| (i % 239) as u8 ^ 0x11).collect());
    let last = leak((0..100).map(|i| i as u8 ^ 0x77).collect());

    let mut c = copy_mcast_setup();
    c.extend([
        // Reordered: the last packet first; every target gets its WRITE of it.
        pkt(
            PORT_MEMNODE,
            copy_response(Opcode::ReadResponseLast, 0, last),
        ),
        expect(PORT_MEMNODE, copy_write(2, last)),
        expect(PORT_MEMNODE, mcast_write(1, 2, last)),
        expect(PORT_MEMNODE, mcast_write(2, 2, last)),
        pkt(
            PORT_MEMNODE,
            copy_response(Opcode::ReadResponseFirst, COPY_SRC_PSN, first),
        ),
        expect(PORT_MEMNODE, copy_write(0, first)),
        expect(PORT_MEMNODE, mcast_write(1, 0, first)),
        expect(PORT_MEMNODE, mcast_write(2, 0, first)),
        // A re-READ's response re-sends every replica at the same PSNs and addresses.
        pkt(
            PORT_MEMNODE,
            copy_response(Opcode::ReadResponseFirst, COPY_SRC_PSN, first),
        ),
        expect(PORT_MEMNODE, copy_write(0, first)),
        expect(PORT_MEMNODE, mcast_write(1, 0, first)),
        expect(PORT_MEMNODE, mcast_write(2, 0, first)),
        // Responses outside the copy: no replica either.
        pkt(
            PORT_MEMNODE,
            copy_response(Opcode::ReadResponseOnly, 0xFF_FFFD, last),
        ),
    ]);
    v.push((
        "copy_mcast_response_to_every_target",
        "a multicast copy's READ response leaves as one WRITE ONLY per target: the copy_src target, then each copy_mcast replica at its own PSN and address from the same response PSN (reordered, duplicated, wrapping at 24 bits)",
        c,
    ));

    let mut c = copy_mcast_setup();
    let answer = |r: usize, k: u32, syndrome: Syndrome| {
        let (dst, _, switch_qpn, psn, _, _) = MCAST_TARGETS[r - 1];
        let mut a = PacketRepr::new(BthRepr::new(
            Opcode::Acknowledge,
            switch_qpn,
            (psn + k) & 0xFF_FFFF,
            false,
        ));
        a.aeth = Some(AethRepr { syndrome, msn: 1 });
        frame(MEMNODE_MAC, SWITCH_MAC, dst, UPSTREAM, &a)
    };
    c.extend([
        // Each target's ACKs count in its own slot.
        pkt(PORT_MEMNODE, answer(1, 1, Syndrome::Ack { credits: 31 })),
        reg("copy_acked", 1, 2 | VALID),
        reg("copy_acked", 2, 0),
        pkt(PORT_MEMNODE, answer(2, 0, Syndrome::Ack { credits: 31 })),
        reg("copy_acked", 1, 2 | VALID),
        reg("copy_acked", 2, 1 | VALID),
        reg("copy_acked", 0, 0),
        pkt(
            PORT_MEMNODE,
            answer(2, 1, Syndrome::Nak(NakCode::PsnSequenceError)),
        ),
        reg("copy_acked", 2, 1 | VALID),
    ]);
    v.push((
        "copy_mcast_targets_acked_apart",
        "the targets of a multicast copy answer on their own QPs: each one's ACKs advance its own copy_acked slot; NAKs are consumed",
        c,
    ));
    v
}
