//! Interop with Wireshark's InfiniBand dissector for two-sided verbs: the frames of a
//! SEND/RECV exchange between the requester and responder of the protocol core (SEND
//! Only with and without Immediate, a three-packet SEND with Immediate, a two-packet
//! SEND, an RNR NAK and the retry it causes) are written to a pcap and decoded by
//! tshark as RoCE with exactly the opcodes, QPNs, PSNs, AckReq bits, pad counts,
//! immediate data, syndromes and MSNs the IBA specifies, with no malformed packets.
//! Every frame's ICRC verifies against its IPv4/UDP headers, and tshark reads the same
//! ICRC bytes.
//!
//! Needs tshark (Debian `tshark`; `DMKV_TSHARK` picks the program). Without it the test
//! is skipped loudly, or fails under `DMKV_REQUIRE_INTEROP=1`.

#[path = "support/interop.rs"]
mod interop;

use std::collections::BTreeMap;
use std::net::SocketAddrV4;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use verbs::mem::MemoryTable;
use verbs::rc::{MAX_PACKET, RcConfig, Requester, Responder};
use verbs::recv::RecvQueue;
use verbs::wire::{BthRepr, EthernetFrame, FrameRepr, IcrcPath, PacketRepr, Syndrome, pcap};
use verbs::wr::{CompletionValue, WorkRequest};

const CLIENT_QPN: u32 = 0x00_0123;
const SERVER_QPN: u32 = 0x00_0456;
/// Close to the 24-bit wrap, so the exchange shows PSNs wrapping.
const FIRST_PSN: u32 = 0x00FF_FFFC;
const RNR_TIMER: u8 = 14;

fn path() -> IcrcPath {
    IcrcPath::new(
        "192.168.7.1:49152".parse::<SocketAddrV4>().expect("addr"),
        "192.168.7.2:4791".parse::<SocketAddrV4>().expect("addr"),
    )
}

fn tshark() -> Option<String> {
    let program = std::env::var("DMKV_TSHARK").unwrap_or_else(|_| "tshark".to_owned());
    let mut found = None;
    interop::tool_available(
        || {
            let out = Command::new(&program)
                .args(["-G", "protocols"])
                .stdin(Stdio::null())
                .stderr(Stdio::null())
                .output();
            let ok = out.is_ok_and(|o| {
                o.status.success()
                    && String::from_utf8_lossy(&o.stdout)
                        .lines()
                        .any(|l| l.split('\t').nth(2) == Some("infiniband"))
            });
            if ok {
                found = Some(program.clone());
            }
            ok
        },
        "tshark with the InfiniBand dissector",
    );
    found
}

/// The exchange: every datagram in order, with whether the client sent it.
fn exchange() -> Vec<(bool, Vec<u8>)> {
    let config = RcConfig {
        min_rnr_timer: RNR_TIMER,
        ..RcConfig::default()
    };
    let mut req = Requester::new(config.clone(), CLIENT_QPN, SERVER_QPN, FIRST_PSN, path());
    let mut resp = Responder::new(config, SERVER_QPN, CLIENT_QPN, FIRST_PSN, path());
    let recv = RecvQueue::new(8);
    resp.set_recv_queue(Some(recv.clone()));
    let mem = MemoryTable::new();
    let mut frames = Vec::new();
    let mut buf = vec![0u8; MAX_PACKET];
    let mut now = Instant::now();
    let sends = [
        WorkRequest::send(pattern(61)),
        WorkRequest::send_with_imm(Vec::new(), 0xDEAD_BEEF),
        WorkRequest::send_with_imm(pattern(2500), 0x0102_0304),
        WorkRequest::send(pattern(2048)),
    ];
    for (i, wr) in sends.into_iter().enumerate() {
        req.post(i as u64, wr).expect("post");
        let done = loop {
            if let Some(c) = req.poll_completion() {
                break c;
            }
            while let Some(n) = req.poll_transmit(now, &mut buf) {
                frames.push((true, buf[..n].to_vec()));
                resp.handle_datagram(&buf[..n], &mem).expect("accepted");
            }
            while let Some(n) = resp.poll_transmit(&mut buf) {
                frames.push((false, buf[..n].to_vec()));
                req.handle_datagram(now, &buf[..n]).expect("accepted");
            }
            if recv.posted() == 0 && recv.stats().not_ready > 0 {
                // The first SEND met an empty receive queue; now buffers arrive.
                for b in 0..4 {
                    recv.post_recv(b, vec![0; 4096]).expect("post_recv");
                }
            }
            now = req.poll_timeout().unwrap_or(now).max(now) + Duration::from_micros(1);
            req.handle_timeout(now);
        };
        assert_eq!(done.result, Ok(CompletionValue::Send));
    }
    let imms: Vec<Option<u32>> = std::iter::from_fn(|| recv.poll()).map(|c| c.imm).collect();
    assert_eq!(imms, [None, Some(0xDEAD_BEEF), Some(0x0102_0304), None]);
    frames
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 13 + 5) as u8).collect()
}

/// What a frame must decode to.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Expected {
    opcode: u8,
    dest_qpn: u32,
    psn: u32,
    ack_req: bool,
    pad: u8,
    imm: Option<u32>,
    /// AETH syndrome byte and MSN.
    aeth: Option<(u8, u32)>,
    payload: usize,
}

fn psn(k: u32) -> u32 {
    (FIRST_PSN + k) & 0x00FF_FFFF
}

fn req(opcode: u8, k: u32, ack_req: bool, payload: usize, imm: Option<u32>) -> Expected {
    Expected {
        opcode,
        dest_qpn: SERVER_QPN,
        psn: psn(k),
        ack_req,
        pad: ((4 - payload % 4) % 4) as u8,
        imm,
        aeth: None,
        payload,
    }
}

fn ack(k: u32, syndrome: u8, msn: u32) -> Expected {
    Expected {
        opcode: 0x11,
        dest_qpn: CLIENT_QPN,
        psn: psn(k),
        ack_req: false,
        pad: 0,
        imm: None,
        aeth: Some((syndrome, msn)),
        payload: 0,
    }
}

/// IBA transport layer (chapter 9): SEND opcodes 0x00–0x05, AckReq on the last packet of a message,
/// ImmDt only on Last/Only with Immediate; RNR NAK syndrome 001 + timer, MSN unchanged;
/// the ACK after a message carries the incremented MSN.
fn expected() -> Vec<Expected> {
    vec![
        req(0x04, 0, true, 61, None),
        ack(0, 0x20 | RNR_TIMER, 0),
        req(0x04, 0, true, 61, None),
        ack(0, 0x1F, 1),
        req(0x05, 1, true, 0, Some(0xDEAD_BEEF)),
        ack(1, 0x1F, 2),
        req(0x00, 2, false, 1024, None),
        req(0x01, 3, false, 1024, None),
        req(0x03, 4, true, 452, Some(0x0102_0304)),
        ack(4, 0x1F, 3),
        req(0x00, 5, false, 1024, None),
        req(0x02, 6, true, 1024, None),
        ack(6, 0x1F, 4),
    ]
}

fn ours(roce: &[u8]) -> Expected {
    let p = PacketRepr::parse(roce).expect("our parser");
    Expected {
        opcode: p.bth.opcode.as_u8(),
        dest_qpn: p.bth.dest_qpn,
        psn: p.bth.psn,
        ack_req: p.bth.ack_req,
        pad: p.bth.pad_count,
        imm: p.immdt,
        aeth: p.aeth.map(|a| (a.syndrome.to_u8(), a.msn)),
        payload: p.payload.len(),
    }
}

const FIELDS: &[&str] = &[
    "infiniband.bth.opcode",
    "infiniband.bth.destqp",
    "infiniband.bth.psn",
    "infiniband.bth.a",
    "infiniband.bth.padcnt",
    "infiniband.bth.p_key",
    "infiniband.immdt",
    "infiniband.aeth.syndrome",
    "infiniband.aeth.msn",
    "data.len",
    "infiniband.invariant.crc",
    "_ws.malformed",
    "_ws.expert.severity",
];

fn decode(tshark: &str, file: &std::path::Path) -> Vec<BTreeMap<&'static str, String>> {
    let mut cmd = Command::new(tshark);
    cmd.args(["-n", "-r"])
        .arg(file)
        .args(["-d", "udp.port==4791,infiniband"])
        .args(["-T", "fields", "-E", "separator=/t"])
        .args(["-E", "occurrence=a", "-E", "aggregator=,"]);
    for f in FIELDS {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().expect("run tshark -r");
    assert!(
        out.status.success(),
        "tshark -r failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("UTF-8")
        .lines()
        .map(|line| {
            let values: Vec<&str> = line.split('\t').collect();
            assert_eq!(values.len(), FIELDS.len(), "tshark line {line:?}");
            FIELDS
                .iter()
                .zip(values)
                .map(|(f, v)| (*f, v.to_owned()))
                .collect()
        })
        .collect()
}

fn num(d: &BTreeMap<&'static str, String>, field: &str) -> Option<u64> {
    let v = d[field].as_str();
    (!v.is_empty()).then(|| {
        match v.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => v.parse(),
        }
        .unwrap_or_else(|e| panic!("{field} = {v:?}: {e}"))
    })
}

fn flag(d: &BTreeMap<&'static str, String>, field: &str) -> bool {
    match d[field].as_str() {
        "1" | "True" | "true" => true,
        "0" | "False" | "false" | "" => false,
        v => panic!("{field} = {v:?} is not a boolean"),
    }
}

#[test]
fn our_parser_reads_the_exchange_as_the_spec_says() {
    let frames = exchange();
    let got: Vec<Expected> = frames.iter().map(|(_, b)| ours(b)).collect();
    assert_eq!(got, expected());
    for (from_client, b) in &frames {
        let p = if *from_client {
            path()
        } else {
            path().reversed()
        };
        p.verify(b).expect("ICRC");
    }
    // Beyond the opcode, the BTH follows the conventions the ConnectX-5 frames in
    // `tests/data/roce-traces` show (checked there by `wire_trace.rs`): SE 0, MigReq 1,
    // TVer 0, P_Key 0xFFFF, reserved bytes 0.
    for (_, b) in &frames {
        let p = PacketRepr::parse(b).expect("parse");
        let conventional = BthRepr::new(p.bth.opcode, p.bth.dest_qpn, p.bth.psn, p.bth.ack_req);
        assert_eq!(
            BthRepr {
                pad_count: 0,
                ..p.bth
            },
            conventional
        );
    }
    // No RNR NAK syndrome decodes as anything else.
    assert_eq!(
        Syndrome::from_u8(0x20 | RNR_TIMER),
        Ok(Syndrome::RnrNak { timer: RNR_TIMER })
    );
}

#[test]
fn tshark_decodes_send_frames_as_roce() {
    let Some(tshark) = tshark() else { return };
    let frames = exchange();
    let dir = tempfile::tempdir().expect("tempdir");
    let file = match std::env::var("DMKV_KEEP_CAPTURE") {
        Ok(keep) => std::path::PathBuf::from(keep),
        Err(_) => dir.path().join("send.pcap"),
    };
    let mut writer =
        pcap::Writer::new(std::fs::File::create(&file).expect("create")).expect("pcap");
    let client_mac = [0x02, 0, 0, 0, 0, 1];
    let server_mac = [0x02, 0, 0, 0, 0, 2];
    let mut built = Vec::new();
    for (i, (from_client, roce)) in frames.iter().enumerate() {
        let frame = if *from_client {
            FrameRepr::build(client_mac, server_mac, 0x02, &path(), roce)
        } else {
            FrameRepr::build(server_mac, client_mac, 0x02, &path().reversed(), roce)
        };
        // The frame's own IPv4/UDP headers carry the ICRC.
        EthernetFrame::parse(&frame)
            .expect("frame")
            .verify_icrc()
            .expect("ICRC against the frame's headers");
        writer
            .write_packet(Duration::from_micros(i as u64 * 10), &frame)
            .expect("write");
        built.push(frame);
    }
    writer.flush().expect("flush");
    drop(writer);
    let decoded = decode(&tshark, &file);
    let want = expected();
    assert_eq!(decoded.len(), want.len());
    for (i, ((d, w), frame)) in decoded.iter().zip(&want).zip(&built).enumerate() {
        let ctx = format!("frame {i}: {d:?}");
        assert_eq!(d["_ws.malformed"], "", "{ctx}");
        assert!(!d["_ws.expert.severity"].contains("error"), "{ctx}");
        assert_eq!(
            num(d, "infiniband.bth.opcode"),
            Some(u64::from(w.opcode)),
            "{ctx}"
        );
        assert_eq!(
            num(d, "infiniband.bth.destqp"),
            Some(u64::from(w.dest_qpn)),
            "{ctx}"
        );
        assert_eq!(
            num(d, "infiniband.bth.psn"),
            Some(u64::from(w.psn)),
            "{ctx}"
        );
        assert_eq!(flag(d, "infiniband.bth.a"), w.ack_req, "{ctx}");
        assert_eq!(
            num(d, "infiniband.bth.padcnt"),
            Some(u64::from(w.pad)),
            "{ctx}"
        );
        assert_eq!(num(d, "infiniband.bth.p_key"), Some(0xFFFF), "{ctx}");
        // ImmDt is a byte field (hex without 0x); this tshark lists it twice (the
        // header and its value).
        let imm: Vec<u32> = d["infiniband.immdt"]
            .split(',')
            .filter(|v| !v.is_empty())
            .map(|v| u32::from_str_radix(v, 16).unwrap_or_else(|e| panic!("{ctx}: {e}")))
            .collect();
        assert!(imm.windows(2).all(|p| p[0] == p[1]), "{ctx}");
        assert_eq!(imm.first().copied(), w.imm, "{ctx}");
        assert_eq!(
            num(d, "infiniband.aeth.syndrome"),
            w.aeth.map(|(s, _)| u64::from(s)),
            "{ctx}"
        );
        assert_eq!(
            num(d, "infiniband.aeth.msn"),
            w.aeth.map(|(_, m)| u64::from(m)),
            "{ctx}"
        );
        // The SEND payload goes to the data dissector, with its pad bytes.
        assert_eq!(
            num(d, "data.len").unwrap_or(0),
            (w.payload + usize::from(w.pad)) as u64,
            "{ctx}"
        );
        let tail: [u8; 4] = frame[frame.len() - 4..].try_into().expect("4 bytes");
        assert_eq!(
            num(d, "infiniband.invariant.crc"),
            Some(u64::from(u32::from_be_bytes(tail))),
            "{ctx}"
        );
    }
}
