//! What a work request costs on the wire as RoCEv2, computed without sending it.

use crate::rc::Pmtu;
use crate::wire::{
    AETH_LEN, ATOMIC_ACK_ETH_LEN, ATOMIC_ETH_LEN, BTH_LEN, ICRC_LEN, IMMDT_LEN, RETH_LEN,
};
use crate::wr::WorkRequest;

/// Packets and bytes a work request puts on the wire in each direction (no loss).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WireCost {
    /// Request packets.
    pub request_packets: u64,
    /// Request bytes (BTH through ICRC).
    pub request_bytes: u64,
    /// Response packets.
    pub response_packets: u64,
    /// Response bytes.
    pub response_bytes: u64,
}

fn padded(n: u64) -> u64 {
    n.div_ceil(4) * 4
}

/// The RoCEv2 packets and bytes of `wr` at `pmtu`, as the RC protocol core would send them.
pub fn wire_cost(wr: &WorkRequest, pmtu: Pmtu) -> WireCost {
    let hdr = (BTH_LEN + ICRC_LEN) as u64;
    let m = pmtu.bytes() as u64;
    match wr {
        WorkRequest::Read { len, .. } => {
            let len = *len as u64;
            let pkts = pmtu.packets(len) as u64;
            // First/Last/Only carry an AETH; Middle packets do not.
            let aeths = if pkts == 1 { 1 } else { 2 };
            let full = len / m;
            let tail = len % m;
            WireCost {
                request_packets: 1,
                request_bytes: hdr + RETH_LEN as u64,
                response_packets: pkts,
                response_bytes: pkts * hdr + aeths * AETH_LEN as u64 + full * m + padded(tail),
            }
        }
        WorkRequest::Write { data, .. } => {
            let len = data.len() as u64;
            let pkts = pmtu.packets(len) as u64;
            let full = len / m;
            let tail = len % m;
            WireCost {
                request_packets: pkts,
                request_bytes: pkts * hdr + RETH_LEN as u64 + full * m + padded(tail),
                response_packets: 1,
                response_bytes: hdr + AETH_LEN as u64,
            }
        }
        WorkRequest::Send { data, imm, .. } => {
            let len = data.len() as u64;
            let pkts = pmtu.packets(len) as u64;
            let full = len / m;
            let tail = len % m;
            // Only the Last (or Only) packet of a SEND with Immediate carries ImmDt.
            let immdt = if imm.is_some() { IMMDT_LEN as u64 } else { 0 };
            WireCost {
                request_packets: pkts,
                request_bytes: pkts * hdr + immdt + full * m + padded(tail),
                response_packets: 1,
                response_bytes: hdr + AETH_LEN as u64,
            }
        }
        WorkRequest::CompareSwap { .. } | WorkRequest::FetchAdd { .. } => WireCost {
            request_packets: 1,
            request_bytes: hdr + ATOMIC_ETH_LEN as u64,
            response_packets: 1,
            response_bytes: hdr + (AETH_LEN + ATOMIC_ACK_ETH_LEN) as u64,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wr::RemoteAddr;

    #[test]
    fn sizes_match_the_headers() {
        let a = RemoteAddr::new(1, 0);
        let pmtu = Pmtu::DEFAULT;
        let r = wire_cost(&WorkRequest::read(a, 64), pmtu);
        assert_eq!((r.request_bytes, r.response_bytes), (32, 84));
        let w = wire_cost(&WorkRequest::write(a, vec![0; 1024]), pmtu);
        assert_eq!(
            (w.request_packets, w.request_bytes, w.response_bytes),
            (1, 1056, 20)
        );
        let c = wire_cost(&WorkRequest::cas(a, 0, 1), pmtu);
        assert_eq!((c.request_bytes, c.response_bytes), (44, 28));
        let big = wire_cost(&WorkRequest::read(a, 2500), pmtu);
        assert_eq!(big.response_packets, 3);
        assert_eq!(big.response_bytes, 3 * 16 + 8 + 2500);
        let send = wire_cost(&WorkRequest::send_with_imm(vec![0; 2049], 7), pmtu);
        // SEND First (1024) + Middle (1024) + Last with Immediate (1 byte, 3 pad, ImmDt).
        assert_eq!(
            (
                send.request_packets,
                send.request_bytes,
                send.response_bytes
            ),
            (3, 3 * 16 + 4 + 2048 + 4, 20)
        );
        let empty = wire_cost(&WorkRequest::send(Vec::new()), pmtu);
        assert_eq!((empty.request_packets, empty.request_bytes), (1, 16));
    }
}
