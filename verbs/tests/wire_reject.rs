//! Malformed packets are rejected with the right error, never a panic.

#[path = "support/trace.rs"]
mod trace;

use std::net::{Ipv4Addr, SocketAddrV4};

use verbs::wire::{
    AethRepr, BTH_LEN, BthRepr, EthernetFrame, ICRC_LEN, IcrcPath, Opcode, PacketRepr, RethRepr,
    RocePacket, Syndrome, WireError, verify_icrc,
};

fn path() -> IcrcPath {
    IcrcPath::new(
        SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 49152),
        SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 4791),
    )
}

/// One RoCE packet (UDP payload) of each opcode in the trace, with its frame.
fn trace_packets() -> Vec<Vec<u8>> {
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for frame in trace::frames() {
        let roce = EthernetFrame::parse(&frame).unwrap().roce.to_vec();
        let op = roce[0];
        if !seen.contains(&op) {
            seen.push(op);
            out.push(frame);
        }
    }
    assert_eq!(out.len(), 6);
    out
}

fn ack(payload_extra: &[u8], pad_count: u8) -> Vec<u8> {
    let mut repr = PacketRepr::new(BthRepr::new(Opcode::Acknowledge, 9, 10, false));
    repr.aeth = Some(AethRepr {
        syndrome: Syndrome::Ack { credits: 31 },
        msn: 1,
    });
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut buf, &path()).unwrap();
    let icrc_at = buf.len() - ICRC_LEN;
    buf.splice(icrc_at..icrc_at, payload_extra.iter().copied());
    buf[1] = (buf[1] & !0x30) | (pad_count << 4);
    let icrc_at = buf.len() - ICRC_LEN;
    let icrc = path().icrc(&buf[..icrc_at]);
    buf[icrc_at..].copy_from_slice(&icrc.to_le_bytes());
    buf
}

#[test]
fn corrupted_icrc_is_reported_with_both_values() {
    for frame in trace_packets() {
        let mut f = frame.clone();
        let last = f.len() - 1;
        f[last] ^= 0x80;
        let parsed = EthernetFrame::parse(&f).unwrap();
        // The parser does not look at the ICRC; verification does.
        PacketRepr::parse(parsed.roce).unwrap();
        let good = u32::from_le_bytes(frame[frame.len() - 4..].try_into().unwrap());
        assert_eq!(
            parsed.verify_icrc(),
            Err(WireError::BadIcrc {
                expected: good,
                found: good ^ 0x8000_0000,
            })
        );
    }
}

#[test]
fn every_truncation_is_rejected() {
    for frame in trace_packets() {
        let parsed = EthernetFrame::parse(&frame).unwrap();
        let roce = parsed.roce;
        let op = Opcode::from_u8(roce[0]).unwrap();
        let headers = BTH_LEN + op.ext_header_len();
        let pad = usize::from((roce[1] >> 4) & 3);
        for len in 0..roce.len() {
            let cut = &roce[..len];
            let parsed_cut = PacketRepr::parse(cut);
            let expected_parse = if len < headers + ICRC_LEN {
                Some(WireError::Truncated)
            } else if len - headers - ICRC_LEN < pad {
                Some(WireError::BadPadCount)
            } else {
                None
            };
            match expected_parse {
                Some(err) => assert_eq!(parsed_cut, Err(err), "{op:?} cut to {len}"),
                // Shorter payload: only the ICRC can tell.
                None => {
                    assert!(op.has_payload(), "{op:?} cut to {len}");
                    assert!(matches!(
                        verify_icrc(parsed.ipv4_header, parsed.udp_header, cut),
                        Err(WireError::BadIcrc { .. })
                    ));
                }
            }
            assert!(RocePacket::new_checked(cut).is_err() || expected_parse.is_none());
        }
        for len in 0..frame.len() {
            assert!(
                EthernetFrame::parse(&frame[..len]).is_err(),
                "frame cut to {len}"
            );
        }
    }
}

#[test]
fn payload_on_an_ack_is_unexpected() {
    PacketRepr::parse(&ack(&[], 0)).unwrap();
    path().verify(&ack(&[1, 2, 3, 4], 0)).unwrap();
    assert_eq!(
        PacketRepr::parse(&ack(&[1, 2, 3, 4], 0)),
        Err(WireError::UnexpectedPayload)
    );
    // Pad bytes on an opcode without payload.
    assert_eq!(
        PacketRepr::parse(&ack(&[0], 1)),
        Err(WireError::BadPadCount)
    );
    // A pad count larger than what follows the headers.
    assert_eq!(PacketRepr::parse(&ack(&[], 1)), Err(WireError::BadPadCount));
    assert_eq!(
        PacketRepr::parse(&ack(&[0, 0], 3)),
        Err(WireError::BadPadCount)
    );
}

#[test]
fn pad_count_larger_than_the_payload_is_rejected() {
    let mut repr = PacketRepr::new(BthRepr::new(Opcode::WriteOnly, 1, 2, true));
    repr.reth = Some(RethRepr {
        va: 0,
        rkey: 1,
        dma_len: 0,
    });
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut buf, &path()).unwrap();
    assert_eq!(PacketRepr::parse(&buf).unwrap().payload, b"");
    buf[1] |= 0x10;
    assert_eq!(PacketRepr::parse(&buf), Err(WireError::BadPadCount));
    assert_eq!(
        RocePacket::new_checked(&buf[..]).unwrap_err(),
        WireError::BadPadCount
    );
}

#[test]
fn bad_version_unknown_opcode_and_reserved_syndrome() {
    for frame in trace_packets() {
        let roce = EthernetFrame::parse(&frame).unwrap().roce.to_vec();
        for tver in 1..16u8 {
            let mut r = roce.clone();
            r[1] = (r[1] & 0xF0) | tver;
            assert_eq!(
                PacketRepr::parse(&r),
                Err(WireError::UnsupportedTransportVersion(tver))
            );
        }
        for byte in 0..=255u8 {
            if Opcode::from_u8(byte).is_none() {
                let mut r = roce.clone();
                r[0] = byte;
                assert_eq!(
                    PacketRepr::parse(&r),
                    Err(WireError::UnsupportedOpcode(byte))
                );
            }
        }
        let op = Opcode::from_u8(roce[0]).unwrap();
        if op.has_aeth() {
            let mut r = roce.clone();
            r[BTH_LEN] = 0x45;
            assert_eq!(PacketRepr::parse(&r), Err(WireError::BadSyndrome(0x45)));
        }
    }
}

#[test]
fn frames_of_other_protocols_are_rejected() {
    let frame = trace_packets().remove(0);
    let mut f = frame.clone();
    f[12..14].copy_from_slice(&[0x86, 0xDD]);
    assert_eq!(EthernetFrame::parse(&f), Err(WireError::NotIpv4));
    let mut f = frame.clone();
    f[14] = 0x65;
    assert_eq!(EthernetFrame::parse(&f), Err(WireError::NotIpv4));
    let mut f = frame.clone();
    f[14 + 9] = 6;
    assert_eq!(EthernetFrame::parse(&f), Err(WireError::NotUdp));
    let mut f = frame.clone();
    f[14 + 22..14 + 24].copy_from_slice(&53u16.to_be_bytes());
    assert_eq!(EthernetFrame::parse(&f), Err(WireError::NotRoce));
    let mut f = frame.clone();
    f[14 + 6] |= 0x20; // more fragments
    assert_eq!(EthernetFrame::parse(&f), Err(WireError::NotRoce));
    let mut f = frame.clone();
    f[14 + 2..14 + 4].copy_from_slice(&20u16.to_be_bytes());
    assert_eq!(EthernetFrame::parse(&f), Err(WireError::BadLength));
    let mut f = frame;
    f[14 + 24..14 + 26].copy_from_slice(&0xFFFFu16.to_be_bytes());
    assert_eq!(EthernetFrame::parse(&f), Err(WireError::BadLength));
}
