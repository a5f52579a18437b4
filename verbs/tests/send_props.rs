//! Property tests for SEND packets: the requester segments any message as the IBA
//! grammar requires (SEND Only, or First, Middle…, Last; ImmDt and AckReq on the last
//! packet only), every packet re-emits byte for byte, the responder reassembles any
//! segmentation exactly once whatever duplicates it sees, and no sequence of SEND
//! packets, however malformed, makes it panic or deliver more than was posted.

use std::net::SocketAddrV4;
use std::time::Instant;

use proptest::prelude::*;
use verbs::mem::MemoryTable;
use verbs::rc::{MAX_PACKET, Pmtu, RcConfig, Requester, Responder};
use verbs::recv::RecvQueue;
use verbs::wire::{BthRepr, IcrcPath, Opcode, PSN_MASK, PacketRepr};
use verbs::wr::WorkRequest;

fn path() -> IcrcPath {
    IcrcPath::new(
        "10.1.0.1:50000".parse::<SocketAddrV4>().expect("addr"),
        "10.1.0.2:4791".parse::<SocketAddrV4>().expect("addr"),
    )
}

fn pmtu() -> impl Strategy<Value = u32> {
    proptest::sample::select(vec![256u32, 512, 1024, 2048, 4096])
}

/// The packets a fresh requester emits for one SEND.
fn segment(data: &[u8], imm: Option<u32>, pmtu: u32, start: u32) -> Vec<Vec<u8>> {
    let config = RcConfig {
        pmtu: Pmtu::new(pmtu).expect("pmtu"),
        ..RcConfig::default()
    };
    let mut req = Requester::new(config, 1, 2, start, path());
    let wr = match imm {
        Some(imm) => WorkRequest::send_with_imm(data.to_vec(), imm),
        None => WorkRequest::send(data.to_vec()),
    };
    req.post(0, wr).expect("post");
    let mut buf = vec![0u8; MAX_PACKET];
    let mut out = Vec::new();
    while let Some(n) = req.poll_transmit(Instant::now(), &mut buf) {
        out.push(buf[..n].to_vec());
    }
    out
}

fn responder(pmtu: u32, start: u32, recv: &RecvQueue) -> Responder {
    let config = RcConfig {
        pmtu: Pmtu::new(pmtu).expect("pmtu"),
        ..RcConfig::default()
    };
    let mut r = Responder::new(config, 2, 1, start, path());
    r.set_recv_queue(Some(recv.clone()));
    r
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn sends_segment_by_the_iba_grammar(
        data in proptest::collection::vec(any::<u8>(), 0..9000),
        imm in proptest::option::of(any::<u32>()),
        pmtu in pmtu(),
        start in 0..=PSN_MASK,
    ) {
        let packets = segment(&data, imm, pmtu, start);
        let n = Pmtu::new(pmtu).expect("pmtu").packets(data.len() as u64) as usize;
        prop_assert_eq!(packets.len(), n);
        let mut joined = Vec::new();
        for (k, bytes) in packets.iter().enumerate() {
            let p = PacketRepr::parse(bytes).expect("parse");
            path().verify(bytes).expect("ICRC");
            let last = k + 1 == n;
            let want = match (k == 0, last, imm.is_some()) {
                (true, true, false) => Opcode::SendOnly,
                (true, true, true) => Opcode::SendOnlyImm,
                (true, false, _) => Opcode::SendFirst,
                (false, false, _) => Opcode::SendMiddle,
                (false, true, false) => Opcode::SendLast,
                (false, true, true) => Opcode::SendLastImm,
            };
            prop_assert_eq!(p.bth.opcode, want);
            prop_assert_eq!(p.bth.psn, (start + k as u32) & PSN_MASK);
            prop_assert_eq!(p.bth.dest_qpn, 2);
            prop_assert_eq!(p.bth.ack_req, last);
            prop_assert_eq!(p.immdt, if last { imm } else { None });
            prop_assert!(p.reth.is_none() && p.aeth.is_none());
            if !last {
                prop_assert_eq!(p.payload.len(), pmtu as usize);
            }
            // Re-emitting the parsed packet gives the same bytes.
            let mut again = vec![0u8; p.buffer_len()];
            let len = p.emit(&mut again, &path()).expect("emit");
            prop_assert_eq!(&again[..len], &bytes[..]);
            joined.extend_from_slice(p.payload);
        }
        prop_assert_eq!(joined, data);
    }

    #[test]
    fn the_responder_reassembles_once_despite_duplicates(
        data in proptest::collection::vec(any::<u8>(), 0..6000),
        imm in proptest::option::of(any::<u32>()),
        pmtu in pmtu(),
        start in 0..=PSN_MASK,
        dups in proptest::collection::vec(any::<prop::sample::Index>(), 0..8),
    ) {
        let packets = segment(&data, imm, pmtu, start);
        let recv = RecvQueue::new(4);
        recv.post_recv(7, vec![0; 6000]).expect("post");
        recv.post_recv(8, vec![0; 6000]).expect("post");
        let mut resp = responder(pmtu, start, &recv);
        let mem = MemoryTable::new();
        let mut dups = dups.into_iter();
        for (k, bytes) in packets.iter().enumerate() {
            resp.handle_datagram(bytes, &mem).expect("accepted");
            // A duplicate of an earlier (or this) packet.
            if let Some(i) = dups.next() {
                let again = &packets[i.index(k + 1)];
                resp.handle_datagram(again, &mem).expect("accepted");
            }
        }
        let got = recv.poll().expect("delivered");
        prop_assert_eq!(got.wr_id, 7);
        prop_assert_eq!(&got.data, &data);
        prop_assert_eq!(got.imm, imm);
        prop_assert_eq!(got.byte_len as usize, data.len());
        prop_assert!(recv.poll().is_none(), "delivered twice");
        prop_assert_eq!(recv.posted(), 1);
        prop_assert_eq!(resp.stats().sends, 1);
        prop_assert_eq!(resp.expected_psn(), (start + packets.len() as u32) & PSN_MASK);
    }

    #[test]
    fn arbitrary_send_sequences_never_panic_or_overdeliver(
        steps in proptest::collection::vec(
            (0u8..6, 0u32..8, 0usize..1100, any::<bool>(), any::<u32>()),
            0..40,
        ),
        buffers in 0usize..4,
    ) {
        let recv = RecvQueue::new(8);
        for b in 0..buffers {
            recv.post_recv(b as u64, vec![0; 1500]).expect("post");
        }
        let mut resp = responder(256, 100, &recv);
        let mem = MemoryTable::new();
        let payload = vec![0xA5u8; 1100];
        let mut out = vec![0u8; MAX_PACKET];
        for (op, psn_off, len, ack, imm) in steps {
            let op = Opcode::from_u8(op).expect("a SEND opcode");
            let mut repr = PacketRepr::new(BthRepr::new(op, 2, 100 + psn_off, ack));
            repr.payload = &payload[..len];
            if op.has_immdt() {
                repr.immdt = Some(imm);
            }
            let mut bytes = vec![0u8; repr.buffer_len()];
            let n = repr.emit(&mut bytes, &path()).expect("emit");
            resp.handle_datagram(&bytes[..n], &mem).expect("accepted");
            while resp.poll_transmit(&mut out).is_some() {}
        }
        let mut delivered = 0;
        while let Some(c) = recv.poll() {
            prop_assert!(c.data.len() <= 1500);
            delivered += 1;
        }
        // Every buffer is completed (message or error), still posted, or holding the
        // one message in progress.
        let accounted = delivered + recv.posted();
        prop_assert!(accounted <= buffers && accounted + 1 >= buffers);
    }
}
