//! Property tests: the parsers never panic, valid representations round-trip.

#[path = "support/trace.rs"]
mod trace;

use std::net::{Ipv4Addr, SocketAddrV4};

use proptest::prelude::*;
use trace::SplitMix;
use verbs::wire::{
    AethRepr, AtomicAckEthRepr, AtomicEthRepr, BthRepr, EthernetFrame, FrameRepr, IcrcPath,
    NakCode, Opcode, PSN_MASK, PacketRepr, QPN_MASK, RethRepr, RocePacket, Syndrome, pcap,
};

fn opcode() -> impl Strategy<Value = Opcode> {
    proptest::sample::select(Opcode::ALL.to_vec())
}

fn syndrome() -> impl Strategy<Value = Syndrome> {
    prop_oneof![
        (0u8..32).prop_map(|credits| Syndrome::Ack { credits }),
        (0u8..32).prop_map(|timer| Syndrome::RnrNak { timer }),
        proptest::sample::select(vec![
            NakCode::PsnSequenceError,
            NakCode::InvalidRequest,
            NakCode::RemoteAccessError,
            NakCode::RemoteOperationalError,
            NakCode::InvalidRdRequest,
        ])
        .prop_map(Syndrome::Nak),
    ]
}

fn path() -> impl Strategy<Value = IcrcPath> {
    (any::<[u8; 4]>(), any::<u16>(), any::<[u8; 4]>()).prop_map(|(src, sport, dst)| {
        IcrcPath::new(
            SocketAddrV4::new(Ipv4Addr::from(src), sport),
            SocketAddrV4::new(Ipv4Addr::from(dst), 4791),
        )
    })
}

/// Everything a packet needs except the payload bytes it borrows.
#[derive(Debug, Clone)]
struct Owned {
    bth: BthRepr,
    reth: RethRepr,
    immdt: u32,
    atomic_eth: AtomicEthRepr,
    aeth: AethRepr,
    atomic_ack_eth: AtomicAckEthRepr,
    payload: Vec<u8>,
}

impl Owned {
    fn repr(&self) -> PacketRepr<'_> {
        let op = self.bth.opcode;
        let mut bth = self.bth;
        let payload: &[u8] = if op.has_payload() { &self.payload } else { &[] };
        bth.pad_count = ((4 - payload.len() % 4) % 4) as u8;
        PacketRepr {
            bth,
            reth: op.has_reth().then_some(self.reth),
            immdt: op.has_immdt().then_some(self.immdt),
            atomic_eth: op.has_atomic_eth().then_some(self.atomic_eth),
            aeth: op.has_aeth().then_some(self.aeth),
            atomic_ack_eth: op.has_atomic_ack_eth().then_some(self.atomic_ack_eth),
            payload,
        }
    }
}

fn owned() -> impl Strategy<Value = Owned> {
    let bth = (
        opcode(),
        any::<[bool; 5]>(),
        any::<u16>(),
        0..=QPN_MASK,
        0..=PSN_MASK,
    )
        .prop_map(
            |(opcode, [solicited, mig_req, fecn, becn, ack_req], pkey, dest_qpn, psn)| BthRepr {
                opcode,
                solicited,
                mig_req,
                pad_count: 0,
                tver: 0,
                pkey,
                fecn,
                becn,
                dest_qpn,
                ack_req,
                psn,
            },
        );
    let reth = (any::<u64>(), any::<u32>(), any::<u32>())
        .prop_map(|(va, rkey, dma_len)| RethRepr { va, rkey, dma_len });
    let atomic = (any::<u64>(), any::<u32>(), any::<u64>(), any::<u64>()).prop_map(
        |(va, rkey, swap_add, compare)| AtomicEthRepr {
            va,
            rkey,
            swap_add,
            compare,
        },
    );
    let aeth = (syndrome(), 0..=PSN_MASK).prop_map(|(syndrome, msn)| AethRepr { syndrome, msn });
    (
        bth,
        reth,
        any::<u32>(),
        atomic,
        aeth,
        any::<u64>(),
        proptest::collection::vec(any::<u8>(), 0..300),
    )
        .prop_map(
            |(bth, reth, immdt, atomic_eth, aeth, original, payload)| Owned {
                bth,
                reth,
                immdt,
                atomic_eth,
                aeth,
                atomic_ack_eth: AtomicAckEthRepr { original },
                payload,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn packet_parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        if let Ok(repr) = PacketRepr::parse(&bytes) {
            prop_assert!(repr.payload.len() <= bytes.len());
            prop_assert!(repr.buffer_len() <= bytes.len() + 3);
        }
        let view = RocePacket::new_unchecked(&bytes[..]);
        let _ = (view.payload(), view.pad(), view.icrc(), view.aeth().map(|a| a.msn()));
    }

    #[test]
    fn packet_parse_of_plausible_headers_never_panics(
        op in opcode(),
        byte1 in any::<u8>(),
        rest in proptest::collection::vec(any::<u8>(), 0..80),
    ) {
        let mut bytes = vec![op.as_u8(), byte1];
        bytes.extend_from_slice(&rest);
        let _ = PacketRepr::parse(&bytes);
    }

    #[test]
    fn valid_reprs_round_trip(owned in owned(), path in path()) {
        let repr = owned.repr();
        let mut buf = vec![0u8; repr.buffer_len()];
        let n = repr.emit(&mut buf, &path).unwrap();
        prop_assert_eq!(n, buf.len());
        prop_assert_eq!(PacketRepr::parse(&buf).unwrap(), repr);
        path.verify(&buf).unwrap();
        let frame = FrameRepr::build([2; 6], [4; 6], 0x02, &path, &buf);
        let parsed = EthernetFrame::parse(&frame).unwrap();
        prop_assert_eq!(parsed.roce, &buf[..]);
        parsed.verify_icrc().unwrap();
    }

    #[test]
    fn frame_parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..1600)) {
        let _ = EthernetFrame::parse(&bytes).map(|f| (f.verify_icrc(), PacketRepr::parse(f.roce)));
    }

    #[test]
    fn frame_parse_of_ipv4_udp_never_panics(
        ihl in 0u8..16,
        total in any::<u16>(),
        udp_len in any::<u16>(),
        body in proptest::collection::vec(any::<u8>(), 0..200),
    ) {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x08, 0x00, 0x40 | ihl, 0]);
        f.extend_from_slice(&total.to_be_bytes());
        f.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
        f.extend_from_slice(&[0x12, 0x34, 0x12, 0xB7]);
        f.extend_from_slice(&udp_len.to_be_bytes());
        f.extend_from_slice(&[0, 0]);
        f.extend_from_slice(&body);
        let _ = EthernetFrame::parse(&f).map(|f| (f.verify_icrc(), PacketRepr::parse(f.roce)));
    }

    #[test]
    fn pcap_parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = pcap::parse(&bytes);
    }

    #[test]
    fn pcap_parse_of_valid_headers_never_panics(
        big_endian in any::<bool>(),
        nanos in any::<bool>(),
        records in proptest::collection::vec(any::<u8>(), 0..256),
    ) {
        let magic: u32 = if nanos { pcap::MAGIC_NANOS } else { pcap::MAGIC_MICROS };
        let word = |v: u32| if big_endian { v.to_be_bytes() } else { v.to_le_bytes() };
        let mut bytes = word(magic).to_vec();
        bytes.extend_from_slice(&[0; 12]);
        bytes.extend_from_slice(&word(65535));
        bytes.extend_from_slice(&word(1));
        bytes.extend_from_slice(&records);
        let _ = pcap::parse(&bytes);
    }
}

/// Seeded mutations of the real trace frames: byte flips, truncations and
/// extensions (trailing Ethernet padding). Nothing may panic; frames that
/// still parse are verified and re-emitted.
#[test]
fn mutated_trace_frames_never_panic() {
    let frames = trace::frames();
    let mut rng = SplitMix(0x005E_ED0F_D44B);
    let mut accepted = 0;
    for round in 0..4000 {
        let original = &frames[round % frames.len()];
        let mut f = original.clone();
        match rng.below(4) {
            0 => {
                for _ in 0..=rng.below(4) {
                    let at = rng.below(f.len());
                    f[at] ^= 1 << rng.below(8);
                }
            }
            1 => f.truncate(rng.below(f.len())),
            2 => {
                let extra = rng.below(64);
                f.extend((0..extra).map(|_| rng.next_u64() as u8));
            }
            _ => {
                let at = 14 + rng.below(60);
                if at < f.len() {
                    f[at] = rng.next_u64() as u8;
                }
            }
        }
        let Ok(parsed) = EthernetFrame::parse(&f) else {
            continue;
        };
        let _ = (parsed.path(), parsed.tos(), parsed.ttl());
        let verified = parsed.verify_icrc();
        if let Ok(repr) = PacketRepr::parse(parsed.roce) {
            let mut out = vec![0u8; repr.buffer_len()];
            let _ = repr.emit_for_headers(&mut out, parsed.ipv4_header, parsed.udp_header);
            if verified.is_ok() {
                accepted += 1;
            }
        }
    }
    assert!(
        accepted > 0,
        "no mutated frame survived; the corpus is too aggressive"
    );
}
