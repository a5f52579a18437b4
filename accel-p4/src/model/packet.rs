//! Parse and deparse: Ethernet/IPv4/UDP/RoCEv2 frames ↔ a [`Packet`] with headers and
//! per-packet metadata, reusing `verbs::wire`'s checked views and reprs.

use std::net::SocketAddrV4;

use verbs::wire::{
    AethRepr, AtomicAckEthRepr, AtomicEthRepr, BthRepr, EthernetFrame, FrameRepr, IcrcPath,
    PacketRepr, RethRepr, WireError,
};

use super::register::PacketId;

/// Why a frame did not make it through the parser.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseError {
    /// Not an option-free IPv4/UDP frame carrying a well-formed RoCEv2 packet.
    Malformed(WireError),
    /// The ICRC does not match the frame's headers.
    BadIcrc,
}

/// Per-packet metadata (P4 `meta`), set by the stages.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metadata {
    /// Connection id from the route tables.
    pub conn: Option<u8>,
    /// `DIR_UP` or `DIR_DOWN`.
    pub dir: u32,
    /// Output port.
    pub egress_port: u8,
    /// Drop the packet.
    pub drop: bool,
    /// The client's QPN (for switch answers), from `route_up`.
    pub client_qpn: u32,
    /// log2 of the connection's path MTU, from `route_up`.
    pub pmtu_log2: u8,
    /// The switch answered the packet itself (it goes back out the ingress port).
    pub answered: bool,
    /// Emit this many extra copies (fault injection).
    pub duplicate: bool,
    /// Hold the packet until the next one in its direction (fault injection).
    pub hold: bool,
    /// Delay before sending, in microseconds (fault injection).
    pub delay_us: u32,
    /// The BTH PSN as the packet arrived (before any translation).
    pub wire_psn: u32,
    /// A request a later stage answers or diverts (set from table lookups before
    /// `SwitchAtomics`, which decides whether it may go now).
    pub intercept: Option<Intercept>,
    /// `SwitchAtomics` admitted the intercepted request: the MSN its answer carries.
    pub answer: Option<AnswerSlot>,
    /// The multiplexed upstream QP a response arrived on (atomic replacement).
    pub mux: Option<u8>,
    /// A multiplexed QP's response mapped back to its client connection: `SwitchAtomics`
    /// gives it the client PSN and MSN.
    pub converted: bool,
    /// A sequence NAK for a diverted request's filler: turn it into the filler again.
    pub resend_filler: bool,
    /// A READ response of a switch-initiated copy, rewritten into a WRITE to its target
    /// (zero-sided copies).
    pub copy: bool,
    /// A second packet the pipeline emits after this one (a diverted request's filler).
    pub extra: Option<Box<Packet>>,
    /// A replicated WRITE (switch replication of writes): its set, from `mirror_rkey`.
    pub mirror: Option<MirrorTag>,
}

/// What `MirrorWrite` decided for a replicated WRITE on its way to the primary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MirrorTag {
    /// The replica set.
    pub set: u8,
    /// The primary's real memory key (the RETH carries it from `MirrorWrite` on).
    pub rkey: u32,
    /// Backups the set has.
    pub backups: u8,
    /// What the backups get: nothing yet decided, copies at new lane PSNs, copies at
    /// the lane PSNs the first transmission took, or nothing.
    pub copies: MirrorCopies,
}

/// Which copies of a replicated WRITE the backups get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MirrorCopies {
    /// Not decided yet (before the scope check).
    Undecided,
    /// A first transmission: copies at the lanes' next PSNs.
    Fresh,
    /// A client's retransmission of the waiting WRITE: copies again at the PSNs the
    /// first transmission took, for the backups that have not acknowledged.
    Again,
    /// None (a retransmission of a WRITE already complete everywhere).
    None,
}

/// A request that a function other than forwarding handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Intercept {
    /// An atomic on a tracked lock word (atomic replacement).
    Divert {
        /// Cache slot.
        slot: u32,
        /// Multiplexed QP.
        mux: u8,
    },
    /// A CAS on a tuple's latch word (optimistic latching): answered by the switch.
    Latch {
        /// Tuple id.
        tuple: u32,
    },
    /// An 8-byte READ of a tuple's version word: answered by the switch.
    ReadVersion {
        /// Tuple id.
        tuple: u32,
    },
}

/// `SwitchAtomics`' verdict on an intercepted request it admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnswerSlot {
    /// MSN of the answer.
    pub msn: u32,
    /// A retransmission of the last admitted request (answer it again, do not re-apply).
    pub replay: bool,
    /// The connection still has a diverted request in flight (atomic replacement).
    pub pending: bool,
    /// The request's memnode-side PSN on the client's own QP.
    pub upstream_psn: u32,
}

/// A parsed packet: headers as the pipeline sees them, plus metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    /// Which packet this is (for the one-access-per-register rule).
    pub id: PacketId,
    /// Port it arrived on.
    pub ingress_port: u8,
    /// Ethernet destination.
    pub dst_mac: [u8; 6],
    /// Ethernet source.
    pub src_mac: [u8; 6],
    /// IPv4 TOS.
    pub tos: u8,
    /// IPv4 TTL.
    pub ttl: u8,
    /// IPv4 identification (covered by the ICRC; kept so the packet leaves as it came).
    pub ip_id: u16,
    /// IPv4 flags and fragment offset word (covered by the ICRC).
    pub ip_flags: u16,
    /// IPv4 source and UDP source port.
    pub src: SocketAddrV4,
    /// IPv4 destination and UDP destination port.
    pub dst: SocketAddrV4,
    /// Where it came from, as received (for answers).
    pub ingress_src: SocketAddrV4,
    /// Where it was sent to, as received.
    pub ingress_dst: SocketAddrV4,
    /// BTH.
    pub bth: BthRepr,
    /// RETH.
    pub reth: Option<RethRepr>,
    /// ImmDt.
    pub immdt: Option<u32>,
    /// AtomicETH.
    pub atomic_eth: Option<AtomicEthRepr>,
    /// AETH.
    pub aeth: Option<AethRepr>,
    /// AtomicAckETH.
    pub atomic_ack_eth: Option<AtomicAckEthRepr>,
    /// Payload (no pad, no ICRC).
    pub payload: Vec<u8>,
    /// Metadata.
    pub meta: Metadata,
}

/// Offset of the UDP destination port in an option-free frame.
fn udp_dst_port(frame: &[u8]) -> Option<u16> {
    let ihl = usize::from(*frame.get(14)? & 0x0F) * 4;
    let at = 14 + ihl + 2;
    Some(u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]))
}

/// Parse an Ethernet frame arriving on `port`, verifying its ICRC against the frame's
/// own IPv4/UDP headers.
pub fn parse(id: PacketId, port: u8, frame: &[u8]) -> Result<Packet, ParseError> {
    let dport = udp_dst_port(frame).ok_or(ParseError::Malformed(WireError::Truncated))?;
    let eth = EthernetFrame::parse_port(frame, dport).map_err(ParseError::Malformed)?;
    if eth.ipv4_header.len() != 20 {
        return Err(ParseError::Malformed(WireError::BadLength));
    }
    let repr = PacketRepr::parse(eth.roce).map_err(ParseError::Malformed)?;
    eth.verify_icrc().map_err(|_| ParseError::BadIcrc)?;
    Ok(Packet {
        id,
        ingress_port: port,
        dst_mac: eth.dst_mac,
        src_mac: eth.src_mac,
        tos: eth.tos(),
        ttl: eth.ttl(),
        ip_id: eth.path().ip_id,
        ip_flags: eth.path().ip_flags,
        src: eth.src,
        dst: eth.dst,
        ingress_src: eth.src,
        ingress_dst: eth.dst,
        bth: repr.bth,
        reth: repr.reth,
        immdt: repr.immdt,
        atomic_eth: repr.atomic_eth,
        aeth: repr.aeth,
        atomic_ack_eth: repr.atomic_ack_eth,
        payload: repr.payload.to_vec(),
        meta: Metadata {
            wire_psn: repr.bth.psn,
            ..Metadata::default()
        },
    })
}

/// Deparse: emit the headers and payload, recompute the ICRC over the (possibly
/// rewritten) IPv4/UDP addressing and the packet's IP id and flags, and wrap the
/// frame the way Linux and ConnectX do (correct IPv4 checksum, UDP checksum 0). A
/// frame parsed and deparsed unchanged comes out byte for byte as it came in.
pub fn deparse(pkt: &Packet) -> Result<Vec<u8>, WireError> {
    let repr = PacketRepr {
        bth: pkt.bth,
        reth: pkt.reth,
        immdt: pkt.immdt,
        atomic_eth: pkt.atomic_eth,
        aeth: pkt.aeth,
        atomic_ack_eth: pkt.atomic_ack_eth,
        payload: &pkt.payload,
    };
    let path = IcrcPath::new(pkt.src, pkt.dst)
        .with_ip_id(pkt.ip_id)
        .with_ip_flags(pkt.ip_flags);
    let mut roce = vec![0u8; repr.buffer_len()];
    repr.emit(&mut roce, &path)?;
    let mut frame = FrameRepr::new(pkt.src_mac, pkt.dst_mac, pkt.tos, path);
    frame.ttl = pkt.ttl;
    Ok(frame.emit(&roce))
}
