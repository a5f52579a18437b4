//! Interop with scapy's independent RoCEv2 implementation (`scapy.contrib.roce`).
//!
//! `scapy/icrc_vectors.py` builds frames with scapy, which computes the ICRC
//! itself; we parse them and recompute the ICRC. Then frames we build are
//! fed back to scapy, which recomputes their ICRC. Needs python3 with scapy
//! (Debian `python3-scapy`); `DMKV_PYTHON` picks the interpreter.

#[path = "support/interop.rs"]
mod interop;

use std::collections::HashMap;
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::{Command, Stdio};

use verbs::wire::{
    AethRepr, AtomicAckEthRepr, AtomicEthRepr, BthRepr, EthernetFrame, FrameRepr, IcrcPath,
    NakCode, Opcode, PacketRepr, RethRepr, Syndrome, compute_icrc,
};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/scapy/icrc_vectors.py");

/// The first interpreter that can import scapy's RoCE module: `DMKV_PYTHON`
/// if set, else `python3` on the PATH, else the system `/usr/bin/python3`
/// (where Debian's python3-scapy lives even when another python3 comes first).
fn python_with_scapy() -> Option<String> {
    let candidates: Vec<String> = match std::env::var("DMKV_PYTHON") {
        Ok(python) => vec![python],
        Err(_) => vec!["python3".to_owned(), "/usr/bin/python3".to_owned()],
    };
    candidates.into_iter().find(|python| {
        Command::new(python)
            .args(["-c", "import scapy.contrib.roce"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

fn python() -> Option<String> {
    let mut found = None;
    let available = interop::tool_available(
        || {
            found = python_with_scapy();
            found.is_some()
        },
        "python3 with scapy (scapy.contrib.roce)",
    );
    if available { found } else { None }
}

/// Run the script in `mode`, feeding `stdin`, and return its stdout lines.
fn run_script(python: &str, mode: &str, stdin: &str) -> Vec<String> {
    let mut child = Command::new(python)
        .args([SCRIPT, mode])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the scapy script");
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(stdin.as_bytes())
        .expect("write to the scapy script");
    let out = child.wait_with_output().expect("wait for the scapy script");
    assert!(
        out.status.success(),
        "scapy script failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf-8 output")
        .lines()
        .map(str::to_owned)
        .collect()
}

/// `name key=value ...` → (name, fields).
fn fields(line: &str) -> (String, HashMap<String, String>) {
    let mut words = line.split_whitespace();
    let name = words.next().expect("a name").to_owned();
    let map = words
        .map(|w| {
            let (k, v) = w.split_once('=').expect("key=value");
            (k.to_owned(), v.to_owned())
        })
        .collect();
    (name, map)
}

fn num(map: &HashMap<String, String>, key: &str) -> u64 {
    map.get(key)
        .unwrap_or_else(|| panic!("field {key} missing"))
        .parse()
        .unwrap_or_else(|e| panic!("field {key}: {e}"))
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn scapy_frames_parse_and_their_icrc_matches_ours() {
    let Some(python) = python() else { return };
    let lines = run_script(&python, "gen", "");
    assert!(lines.len() >= 10, "too few vectors: {lines:?}");
    for line in &lines {
        let (name, f) = fields(line);
        let frame = hex(&f["frame"]);
        let parsed = EthernetFrame::parse(&frame).unwrap_or_else(|e| panic!("{name}: {e}"));
        let repr = PacketRepr::parse(parsed.roce).unwrap_or_else(|e| panic!("{name}: {e}"));
        let covered = &parsed.roce[..parsed.roce.len() - 4];
        let ours = compute_icrc(parsed.ipv4_header, parsed.udp_header, covered).unwrap();
        assert_eq!(u64::from(ours), num(&f, "icrc"), "{name}: ICRC");
        parsed
            .verify_icrc()
            .unwrap_or_else(|e| panic!("{name}: {e}"));

        let bth = repr.bth;
        assert_eq!(u64::from(bth.opcode.as_u8()), num(&f, "opcode"), "{name}");
        assert_eq!(u64::from(bth.dest_qpn), num(&f, "dqpn"), "{name}");
        assert_eq!(u64::from(bth.psn), num(&f, "psn"), "{name}");
        assert_eq!(u64::from(bth.ack_req), num(&f, "ackreq"), "{name}");
        let padcount = f.get("padcount").map_or(0, |_| num(&f, "padcount"));
        assert_eq!(u64::from(bth.pad_count), padcount, "{name}");
        if let Some(reth) = repr.reth {
            assert_eq!(reth.va, num(&f, "va"), "{name}");
            assert_eq!(u64::from(reth.rkey), num(&f, "rkey"), "{name}");
            assert_eq!(u64::from(reth.dma_len), num(&f, "dmalen"), "{name}");
        }
        if let Some(atomic) = repr.atomic_eth {
            assert_eq!(atomic.va, num(&f, "va"), "{name}");
            assert_eq!(u64::from(atomic.rkey), num(&f, "rkey"), "{name}");
            assert_eq!(atomic.swap_add, num(&f, "swap"), "{name}");
            assert_eq!(atomic.compare, num(&f, "compare"), "{name}");
        }
        if let Some(aeth) = repr.aeth {
            assert_eq!(
                u64::from(aeth.syndrome.to_u8()),
                num(&f, "syndrome"),
                "{name}"
            );
            assert_eq!(u64::from(aeth.msn), num(&f, "msn"), "{name}");
        }
        if let Some(ack) = repr.atomic_ack_eth {
            assert_eq!(ack.original, num(&f, "original"), "{name}");
        }
        if let Some(imm) = repr.immdt {
            assert_eq!(u64::from(imm), num(&f, "imm"), "{name}");
        }
        let payload = f.get("payload").map(|p| hex(p)).unwrap_or_default();
        assert_eq!(repr.payload, &payload[..], "{name}: payload");
        // Every header the script declared was found.
        for (key, present) in [
            ("dmalen", repr.reth.is_some()),
            ("swap", repr.atomic_eth.is_some()),
            ("syndrome", repr.aeth.is_some()),
            ("original", repr.atomic_ack_eth.is_some()),
            ("imm", repr.immdt.is_some()),
        ] {
            assert_eq!(f.contains_key(key), present, "{name}: {key}");
        }
    }
}

/// Packets of every opcode, built by us.
fn our_packets() -> Vec<(String, Vec<u8>, BthRepr)> {
    let client = SocketAddrV4::new(Ipv4Addr::new(192, 168, 1, 13), 61437);
    let server = SocketAddrV4::new(Ipv4Addr::new(192, 168, 1, 17), 4791);
    let request_path = IcrcPath::new(client, server);
    // As in the ConnectX trace, responses go to port 4791 too, from the
    // QP's source port.
    let response_path = IcrcPath::new(
        SocketAddrV4::new(*server.ip(), client.port()),
        SocketAddrV4::new(*client.ip(), 4791),
    );
    let data: Vec<u8> = (0u8..=255).cycle().take(1030).collect();
    let mut out = Vec::new();
    for (i, op) in Opcode::ALL.into_iter().enumerate() {
        for len in [0usize, 7, 1024, 1030] {
            if len != 0 && !op.has_payload() {
                continue;
            }
            let bth = BthRepr::new(op, 0x5434 + i as u32, 0xFF_FFF0 + i as u32, op.is_request());
            let mut repr = PacketRepr::new(bth);
            repr.payload = &data[..len];
            if op.has_reth() {
                repr.reth = Some(RethRepr {
                    va: 0x7f00_0000_0000 + i as u64 * 64,
                    rkey: 0x1234,
                    dma_len: len as u32,
                });
            }
            if op.has_immdt() {
                repr.immdt = Some(0xABCD_0000 + i as u32);
            }
            if op.has_atomic_eth() {
                repr.atomic_eth = Some(AtomicEthRepr {
                    va: 0x1008,
                    rkey: 0x55,
                    swap_add: u64::MAX - i as u64,
                    compare: i as u64,
                });
            }
            if op.has_aeth() {
                let syndrome = match i % 3 {
                    0 => Syndrome::Ack { credits: 31 },
                    1 => Syndrome::Nak(NakCode::PsnSequenceError),
                    _ => Syndrome::RnrNak { timer: 1 },
                };
                repr.aeth = Some(AethRepr { syndrome, msn: 77 });
            }
            if op.has_atomic_ack_eth() {
                repr.atomic_ack_eth = Some(AtomicAckEthRepr { original: 0xFEED });
            }
            let path = if op.is_request() {
                request_path
            } else {
                response_path
            };
            let mut roce = vec![0u8; repr.buffer_len()];
            repr.emit(&mut roce, &path).expect("emit");
            let frame = FrameRepr::build(
                [0x02, 0, 0, 0, 0, 1],
                [0x02, 0, 0, 0, 0, 2],
                0x02,
                &path,
                &roce,
            );
            out.push((format!("{op:?}_{len}"), frame, repr.bth));
        }
    }
    out
}

#[test]
fn scapy_agrees_with_the_icrc_of_our_frames() {
    let Some(python) = python() else { return };
    let mut packets = our_packets();
    // A frame with a corrupted ICRC must be caught, or this test proves nothing.
    let mut corrupt = packets[0].clone();
    corrupt.0 = "corrupted".to_owned();
    let last = corrupt.1.len() - 1;
    corrupt.1[last] ^= 1;
    packets.push(corrupt);
    let stdin: String = packets
        .iter()
        .map(|(name, frame, _)| format!("{name} {}\n", to_hex(frame)))
        .collect();
    let lines = run_script(&python, "check", &stdin);
    assert_eq!(lines.len(), packets.len(), "{lines:?}");
    for (line, (name, frame, bth)) in lines.iter().zip(&packets) {
        let (got_name, f) = fields(line);
        assert_eq!(&got_name, name);
        let stored = u32::from_le_bytes(frame[frame.len() - 4..].try_into().unwrap());
        if name == "corrupted" {
            assert_eq!(
                num(&f, "icrc_ok"),
                0,
                "scapy accepted a corrupted ICRC: {line}"
            );
            assert_eq!(num(&f, "scapy_icrc"), u64::from(stored ^ 0x0100_0000));
            continue;
        }
        assert_eq!(num(&f, "icrc_ok"), 1, "scapy disagrees: {line}");
        assert_eq!(num(&f, "scapy_icrc"), u64::from(stored), "{name}");
        assert_eq!(num(&f, "opcode"), u64::from(bth.opcode.as_u8()), "{name}");
        assert_eq!(num(&f, "dqpn"), u64::from(bth.dest_qpn), "{name}");
        assert_eq!(num(&f, "psn"), u64::from(bth.psn), "{name}");
        assert_eq!(num(&f, "ackreq"), u64::from(bth.ack_req), "{name}");
        assert_eq!(num(&f, "migreq"), 1, "{name}");
        assert_eq!(num(&f, "pkey"), 0xFFFF, "{name}");
        assert_eq!(num(&f, "version"), 0, "{name}");
        let parsed = EthernetFrame::parse(frame).unwrap();
        let repr = PacketRepr::parse(parsed.roce).unwrap();
        assert_eq!(num(&f, "padcount"), u64::from(repr.bth.pad_count), "{name}");
    }
}
