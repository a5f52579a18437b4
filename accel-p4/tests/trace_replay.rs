//! The pipeline model's parser and deparser against the real ConnectX-5 trace (kept in
//! `verbs/tests/data/roce-traces`): a frame the switch does not rewrite leaves exactly
//! as it arrived — IP id, flags, checksum and ICRC included (the NICs number their
//! datagrams, and the ICRC covers the id).

use accel_p4::model::{PacketId, deparse, parse};

const TRACE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../verbs/tests/data/roce-traces/connectx5-clover-2clients.pcap"
);

#[test]
fn every_trace_frame_deparses_to_itself() {
    let records = verbs::wire::pcap::read_file(TRACE).expect("the ConnectX-5 trace");
    assert_eq!(records.len(), 85);
    let mut non_zero_ids = 0;
    for (i, r) in records.iter().enumerate() {
        let pkt =
            parse(PacketId(i as u64), 0, &r.data).unwrap_or_else(|e| panic!("frame {i}: {e:?}"));
        if pkt.ip_id != 0 {
            non_zero_ids += 1;
        }
        let out = deparse(&pkt).expect("deparse");
        assert_eq!(out, r.data, "frame {i}");
    }
    assert_eq!(non_zero_ids, 85, "the NICs number every datagram");
}
