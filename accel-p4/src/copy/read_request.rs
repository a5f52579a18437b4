//! The READ requests the switch issues on a copy's source queue pair (what a Tofino's
//! packet generator would emit), as pipeline packets.

use std::net::SocketAddrV4;

use verbs::wire::{BthRepr, IPV4_DF, Opcode, RethRepr};

use crate::model::{Metadata, Packet, PacketId};
use crate::spec::{DIR_UP, PORT_CPU, PORT_MEMNODE};

/// MAC addresses of generated packets (the soft switch has no link layer).
const GENERATED_SRC_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0xFE];
const GENERATED_DST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];

/// Where a copy's READs go: the switch's address they leave from, the source memnode's
/// soft-RoCE address and its QPN of the switch's QP, and the source bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadTarget {
    /// The switch's memnode-side address.
    pub switch: SocketAddrV4,
    /// The source memnode's soft-RoCE address.
    pub memnode: SocketAddrV4,
    /// The source memnode's QPN of the switch's source QP.
    pub memnode_qpn: u32,
    /// Source address of the copy's first byte.
    pub va: u64,
    /// Source memory key.
    pub rkey: u32,
}

/// A READ of `len` bytes at `offset` into the copy, at source PSN `psn`.
pub fn read_request(target: &ReadTarget, offset: u64, len: u32, psn: u32) -> Packet {
    Packet {
        id: PacketId(0),
        ingress_port: PORT_CPU,
        dst_mac: GENERATED_DST_MAC,
        src_mac: GENERATED_SRC_MAC,
        tos: 0,
        ttl: 64,
        ip_id: 0,
        ip_flags: IPV4_DF,
        src: target.switch,
        dst: target.memnode,
        ingress_src: target.switch,
        ingress_dst: target.memnode,
        bth: BthRepr::new(Opcode::ReadRequest, target.memnode_qpn, psn, true),
        reth: Some(RethRepr {
            va: target.va.wrapping_add(offset),
            rkey: target.rkey,
            dma_len: len,
        }),
        immdt: None,
        atomic_eth: None,
        aeth: None,
        atomic_ack_eth: None,
        payload: Vec::new(),
        meta: Metadata {
            dir: DIR_UP,
            egress_port: PORT_MEMNODE,
            wire_psn: psn,
            ..Metadata::default()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{deparse, parse};

    #[test]
    fn a_generated_read_parses_back_with_a_valid_icrc() {
        let t = ReadTarget {
            switch: "127.0.0.1:4000".parse().expect("addr"),
            memnode: "127.0.0.1:4791".parse().expect("addr"),
            memnode_qpn: 0x12,
            va: 0x1000,
            rkey: 7,
        };
        let frame = deparse(&read_request(&t, 4096, 2048, 99)).expect("deparse");
        let p = parse(PacketId(1), PORT_MEMNODE, &frame).expect("parse");
        assert_eq!(p.bth.opcode, Opcode::ReadRequest);
        assert_eq!(p.bth.psn, 99);
        assert_eq!(
            p.reth,
            Some(RethRepr {
                va: 0x2000,
                rkey: 7,
                dma_len: 2048
            })
        );
        assert_eq!(p.dst, t.memnode);
    }
}
