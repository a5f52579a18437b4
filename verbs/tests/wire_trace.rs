//! Conformance against real ConnectX-5 RoCEv2 frames.

#[path = "support/trace.rs"]
mod trace;

use std::collections::BTreeMap;

use trace::{FRAMES, SplitMix, frames};
use verbs::wire::{
    BTH_LEN, BthRepr, EthernetFrame, ICRC_LEN, Opcode, PacketRepr, RocePacket, WireError,
    compute_icrc, verify_icrc,
};

/// Offset of the IPv4 header in the trace's (untagged) frames.
const IP_AT: usize = 14;
/// Offset of the UDP header (the trace has no IP options).
const UDP_AT: usize = IP_AT + 20;
/// Offset of the RoCE packet.
const ROCE_AT: usize = UDP_AT + 8;

#[test]
fn trace_has_the_documented_frames_and_opcodes() {
    let frames = frames();
    assert_eq!(frames.len(), FRAMES);
    let mut counts = BTreeMap::new();
    for (i, frame) in frames.iter().enumerate() {
        let parsed = EthernetFrame::parse(frame).unwrap_or_else(|e| panic!("frame {i}: {e}"));
        let repr = PacketRepr::parse(parsed.roce).unwrap_or_else(|e| panic!("frame {i}: {e}"));
        *counts.entry(repr.bth.opcode).or_insert(0) += 1;
    }
    let expected = BTreeMap::from([
        (Opcode::WriteOnly, 11),
        (Opcode::Acknowledge, 11),
        (Opcode::CompareSwap, 9),
        (Opcode::AtomicAcknowledge, 9),
        (Opcode::ReadRequest, 23),
        (Opcode::ReadResponseOnly, 22),
    ]);
    assert_eq!(counts, expected);
}

#[test]
fn trace_follows_connectx_conventions() {
    for (i, frame) in frames().iter().enumerate() {
        let parsed = EthernetFrame::parse(frame).unwrap();
        let repr = PacketRepr::parse(parsed.roce).unwrap();
        let op = repr.bth.opcode;
        let conventional = BthRepr::new(op, repr.bth.dest_qpn, repr.bth.psn, op.is_request());
        assert_eq!(repr.bth, conventional, "frame {i}");
        assert_eq!(parsed.tos(), 0x02, "frame {i}");
        assert!(parsed.dont_fragment(), "frame {i}");
        assert_eq!(parsed.udp_header[6..8], [0, 0], "frame {i}");
        if op == Opcode::WriteOnly {
            assert_eq!(repr.payload.len(), 1024, "frame {i}");
            assert_eq!(repr.reth.map(|r| r.dma_len), Some(1024), "frame {i}");
        }
    }
}

#[test]
fn every_trace_icrc_verifies() {
    for (i, frame) in frames().iter().enumerate() {
        let parsed = EthernetFrame::parse(frame).unwrap();
        parsed
            .verify_icrc()
            .unwrap_or_else(|e| panic!("frame {i}: {e}"));
        let view = RocePacket::new_checked(parsed.roce).unwrap();
        let computed =
            compute_icrc(parsed.ipv4_header, parsed.udp_header, view.without_icrc()).unwrap();
        // The ICRC is stored little-endian.
        assert_eq!(
            computed.to_le_bytes(),
            view.as_bytes()[view.as_bytes().len() - 4..]
        );
        assert_eq!(view.icrc(), computed, "frame {i}");
    }
}

#[test]
fn re_emitting_every_trace_packet_reproduces_its_bytes() {
    for (i, frame) in frames().iter().enumerate() {
        let parsed = EthernetFrame::parse(frame).unwrap();
        let repr = PacketRepr::parse(parsed.roce).unwrap();
        assert_eq!(repr.buffer_len(), parsed.roce.len(), "frame {i}");
        let mut out = vec![0u8; repr.buffer_len()];
        let n = repr
            .emit_for_headers(&mut out, parsed.ipv4_header, parsed.udp_header)
            .unwrap();
        assert_eq!(n, parsed.roce.len(), "frame {i}");
        assert_eq!(out, parsed.roce, "frame {i}");
    }
}

#[test]
fn single_byte_flips_in_the_covered_region_break_the_icrc() {
    let mut rng = SplitMix(0x00D4_4B5E_ED00_0001);
    let mut checked = 0;
    for (i, frame) in frames().iter().enumerate() {
        let roce_end = ROCE_AT + EthernetFrame::parse(frame).unwrap().roce.len();
        let covered_end = roce_end - ICRC_LEN;
        // Every BTH and extension-header byte except the masked BTH byte 4,
        // plus a seeded sample of the payload and the last covered byte.
        let mut positions: Vec<usize> = (ROCE_AT..(ROCE_AT + 44).min(covered_end)).collect();
        positions.extend((0..8).map(|_| ROCE_AT + rng.below(covered_end - ROCE_AT)));
        positions.push(covered_end - 1);
        // Unmasked IPv4 and UDP fields are covered too.
        positions.extend([
            IP_AT + 2,
            IP_AT + 3,
            IP_AT + 4,
            IP_AT + 6,
            IP_AT + 9,
            IP_AT + 12,
        ]);
        positions.extend([IP_AT + 19, UDP_AT, UDP_AT + 3, UDP_AT + 5]);
        positions.retain(|&p| p != ROCE_AT + 4);
        for pos in positions {
            let mut f = frame.clone();
            f[pos] ^= 1 << rng.below(8);
            let result = verify_icrc(
                &f[IP_AT..UDP_AT],
                &f[UDP_AT..ROCE_AT],
                &f[ROCE_AT..roce_end],
            );
            assert!(
                matches!(result, Err(WireError::BadIcrc { .. })),
                "frame {i}: flipping byte {pos} gave {result:?}"
            );
            checked += 1;
        }
    }
    assert!(checked > FRAMES * 40);
}

#[test]
fn masked_fields_do_not_change_the_icrc() {
    let mut rng = SplitMix(7);
    for (i, frame) in frames().iter().enumerate() {
        let roce_end = ROCE_AT + EthernetFrame::parse(frame).unwrap().roce.len();
        let mut f = frame.clone();
        // TOS, TTL, header checksum, UDP checksum, BTH byte 4 (FECN/BECN/reserved).
        for pos in [
            IP_AT + 1,
            IP_AT + 8,
            IP_AT + 10,
            IP_AT + 11,
            UDP_AT + 6,
            UDP_AT + 7,
            ROCE_AT + 4,
        ] {
            f[pos] = rng.next_u64() as u8;
        }
        verify_icrc(
            &f[IP_AT..UDP_AT],
            &f[UDP_AT..ROCE_AT],
            &f[ROCE_AT..roce_end],
        )
        .unwrap_or_else(|e| panic!("frame {i}: {e}"));
        // And the parser still accepts the frame (congestion bits are just flags).
        let parsed = EthernetFrame::parse(&f).unwrap();
        parsed.verify_icrc().unwrap();
        PacketRepr::parse(parsed.roce).unwrap();
    }
}

#[test]
fn trace_bth_is_twelve_bytes_before_the_extension_headers() {
    // Guards the fixed offsets the tests above use.
    let frames = frames();
    let parsed = EthernetFrame::parse(&frames[0]).unwrap();
    assert_eq!(parsed.ipv4_header.len(), 20);
    assert_eq!(
        parsed.roce.as_ptr() as usize - frames[0].as_ptr() as usize,
        ROCE_AT
    );
    assert_eq!(
        RocePacket::new_checked(parsed.roce)
            .unwrap()
            .bth()
            .into_inner()
            .len(),
        BTH_LEN
    );
}

#[test]
fn every_trace_frame_survives_parse_and_emit_unchanged() {
    for (i, frame) in frames().iter().enumerate() {
        let parsed = EthernetFrame::parse(frame).unwrap();
        // The ICRC checks out against the representation's path (real IP id and flags).
        parsed
            .path()
            .verify(parsed.roce)
            .unwrap_or_else(|e| panic!("frame {i}: {e}"));
        // Whole frame: headers, IP id, flags and checksum kept.
        assert_eq!(&parsed.repr().emit(parsed.roce), frame, "frame {i}");
        // And with the RoCE packet re-emitted from its representation over that path.
        let repr = PacketRepr::parse(parsed.roce).unwrap();
        let mut roce = vec![0u8; repr.buffer_len()];
        repr.emit(&mut roce, &parsed.path()).unwrap();
        assert_eq!(&parsed.repr().emit(&roce), frame, "frame {i}");
    }
}
