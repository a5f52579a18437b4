//! The answers the switch builds, shared by the functions that answer requests
//! themselves (`SwitchAtomics`, `AtomicReplace`, `OptLatch`): ACK-carrying responses,
//! ATOMIC ACKs and NAKs sent back out of the ingress port, the client's ATOMIC ACK made
//! from a response on the switch's own QP, and the *filler* — a 0-byte WRITE that takes
//! an answered or diverted request's PSN on the client's own QP so the memnode's QP
//! stays in step.

use verbs::wire::{
    AethRepr, AtomicAckEthRepr, BthRepr, IPV4_DF, NakCode, Opcode, RethRepr, Syndrome,
};

use crate::model::{FillerAction, Packet, RouteAction};
use crate::spec::{DIR_DOWN, PORT_CLIENT};

/// A filler: a 0-byte WRITE at memnode-side PSN `psn` on the client's own QP, with
/// `pkt`'s addressing.
pub(crate) fn filler_of(pkt: &Packet, target: &FillerAction, psn: u32) -> Packet {
    let mut f = pkt.clone();
    let mut bth = BthRepr::new(Opcode::WriteOnly, target.memnode_qpn, psn, true);
    bth.pkey = pkt.bth.pkey;
    f.bth = bth;
    f.reth = Some(RethRepr {
        va: target.va,
        rkey: target.rkey,
        dma_len: 0,
    });
    f.immdt = None;
    f.atomic_eth = None;
    f.aeth = None;
    f.atomic_ack_eth = None;
    f.payload.clear();
    f.meta.extra = None;
    new_datagram(&mut f);
    f
}

/// A packet the switch makes up (an answer, a filler) is a datagram of its own: IP id
/// 0 and DF, as a UDP socket sends, not the id of the packet it was made from.
fn new_datagram(pkt: &mut Packet) {
    pkt.ip_id = 0;
    pkt.ip_flags = IPV4_DF;
}

/// Turn the request in `pkt` into an ATOMIC ACKNOWLEDGE carrying `original`, sent back
/// out of the ingress port.
pub fn answer_atomic(pkt: &mut Packet, msn: u32, original: u64) {
    answer(pkt, Opcode::AtomicAcknowledge, msn);
    pkt.atomic_ack_eth = Some(AtomicAckEthRepr { original });
}

/// Turn the request in `pkt` into a switch answer with `opcode` (an ACK-carrying
/// response), addressed back to the requester.
pub fn answer(pkt: &mut Packet, opcode: Opcode, msn: u32) {
    let client_qpn = pkt.meta.client_qpn;
    ack_headers(pkt, opcode, client_qpn, msn);
    pkt.immdt = None;
    pkt.atomic_eth = None;
    pkt.atomic_ack_eth = None;
    pkt.src = pkt.ingress_dst;
    pkt.dst = pkt.ingress_src;
    std::mem::swap(&mut pkt.src_mac, &mut pkt.dst_mac);
    pkt.meta.egress_port = PORT_CLIENT;
    pkt.meta.dir = DIR_DOWN;
    pkt.meta.answered = true;
}

/// Turn the memnode's response in `pkt` (on a QP of the switch's own) into the ATOMIC
/// ACKNOWLEDGE carrying `original` for the client that `client` routes to.
pub fn atomic_ack_for(pkt: &mut Packet, client: &RouteAction, msn: u32, original: u64) {
    ack_headers(pkt, Opcode::AtomicAcknowledge, client.client_qpn, msn);
    pkt.atomic_ack_eth = Some(AtomicAckEthRepr { original });
    pkt.src = client.src;
    pkt.dst = client.dst;
    pkt.meta.egress_port = PORT_CLIENT;
}

/// The headers every answer has: a BTH with `opcode` for QP `dest_qpn` (PSN and
/// partition key kept), no RETH and no payload, an AETH saying ACK with `msn`.
fn ack_headers(pkt: &mut Packet, opcode: Opcode, dest_qpn: u32, msn: u32) {
    let mut bth = BthRepr::new(opcode, dest_qpn, pkt.bth.psn, false);
    bth.pkey = pkt.bth.pkey;
    pkt.bth = bth;
    pkt.reth = None;
    pkt.payload.clear();
    pkt.aeth = Some(AethRepr {
        syndrome: Syndrome::Ack { credits: 31 },
        msn,
    });
    new_datagram(pkt);
}

/// Turn the request in `pkt` into a NAK with `code` (an ACKNOWLEDGE whose syndrome is
/// the NAK), addressed back to the requester.
pub fn answer_nak(pkt: &mut Packet, code: NakCode, msn: u32) {
    answer(pkt, Opcode::Acknowledge, msn);
    pkt.aeth = Some(AethRepr {
        syndrome: Syndrome::Nak(code),
        msn,
    });
}
