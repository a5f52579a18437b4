//! Whole Ethernet II / IPv4 / UDP frames carrying RoCEv2, as captured on a link.

use std::net::{Ipv4Addr, SocketAddrV4};

use super::field::{read, read_u8, read_u16};
use super::icrc::{IPV4_HEADER_LEN, UDP_HEADER_LEN, verify_icrc};
use super::path::IPPROTO_UDP;
use super::{IcrcPath, ROCE_UDP_PORT, WireError};

/// Length of an Ethernet II header (no VLAN tag).
const ETHERNET_HEADER_LEN: usize = 14;
/// EtherType of IPv4.
const ETHERTYPE_IPV4: u16 = 0x0800;
/// TTL Linux uses by default, and that built frames carry.
const DEFAULT_TTL: u8 = 64;

/// A parsed Ethernet II frame carrying a RoCEv2 datagram, borrowing the frame.
///
/// The RoCE bytes honour the IPv4 total length and UDP length fields;
/// Ethernet padding after the IP packet is ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthernetFrame<'a> {
    /// Destination MAC address.
    pub dst_mac: [u8; 6],
    /// Source MAC address.
    pub src_mac: [u8; 6],
    /// The IPv4 header as on the wire, options included.
    pub ipv4_header: &'a [u8],
    /// The UDP header as on the wire.
    pub udp_header: &'a [u8],
    /// Source address and UDP port.
    pub src: SocketAddrV4,
    /// Destination address and UDP port (4791).
    pub dst: SocketAddrV4,
    /// The UDP payload: the whole RoCEv2 packet, ICRC included.
    pub roce: &'a [u8],
}

/// The result of [`EthernetFrame::parse`].
pub type ParsedFrame<'a> = EthernetFrame<'a>;

impl<'a> EthernetFrame<'a> {
    /// Parse an Ethernet II frame (without FCS) carrying IPv4 (any IHL ≥ 5,
    /// not fragmented), UDP to or from port 4791 and a RoCEv2 packet.
    ///
    /// Hardware sends both directions to 4791; soft RoCE answers from the memory node's
    /// port 4791 to the client's own port, so either side may carry it.
    pub fn parse(frame: &'a [u8]) -> Result<EthernetFrame<'a>, WireError> {
        EthernetFrame::parse_port(frame, ROCE_UDP_PORT)
    }

    /// [`EthernetFrame::parse`] for RoCE on another UDP port (e.g. a memory node
    /// listening on an ephemeral port in tests): `port` must be the source or destination.
    pub fn parse_port(frame: &'a [u8], port: u16) -> Result<EthernetFrame<'a>, WireError> {
        let ip = frame
            .get(ETHERNET_HEADER_LEN..)
            .ok_or(WireError::Truncated)?;
        if read_u16(frame, 12) != ETHERTYPE_IPV4 {
            return Err(WireError::NotIpv4);
        }
        let first = *ip.first().ok_or(WireError::Truncated)?;
        if first >> 4 != 4 {
            return Err(WireError::NotIpv4);
        }
        if ip.len() < IPV4_HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let ihl = usize::from(first & 0x0F) * 4;
        if ihl < IPV4_HEADER_LEN {
            return Err(WireError::BadLength);
        }
        let total_len = usize::from(read_u16(ip, 2));
        if total_len < ihl + UDP_HEADER_LEN {
            return Err(WireError::BadLength);
        }
        let ip = ip.get(..total_len).ok_or(WireError::Truncated)?;
        if read_u8(ip, 9) != IPPROTO_UDP {
            return Err(WireError::NotUdp);
        }
        // More-fragments flag or a non-zero offset: not a whole datagram.
        if read_u16(ip, 6) & 0x3FFF != 0 {
            return Err(WireError::NotRoce);
        }
        let (ipv4_header, ip_payload) = ip.split_at(ihl);
        let udp_len = usize::from(read_u16(ip_payload, 4));
        if udp_len < UDP_HEADER_LEN || udp_len > ip_payload.len() {
            return Err(WireError::BadLength);
        }
        let (udp_header, roce) = ip_payload
            .get(..udp_len)
            .ok_or(WireError::BadLength)?
            .split_at(UDP_HEADER_LEN);
        let dst_port = read_u16(udp_header, 2);
        if dst_port != port && read_u16(udp_header, 0) != port {
            return Err(WireError::NotRoce);
        }
        Ok(EthernetFrame {
            dst_mac: read(frame, 0),
            src_mac: read(frame, 6),
            ipv4_header,
            udp_header,
            src: SocketAddrV4::new(
                Ipv4Addr::from(read::<4>(ipv4_header, 12)),
                read_u16(udp_header, 0),
            ),
            dst: SocketAddrV4::new(Ipv4Addr::from(read::<4>(ipv4_header, 16)), dst_port),
            roce,
        })
    }

    /// What this frame's ICRC covers: its UDP addressing and its real IPv4
    /// identification and flags.
    pub fn path(&self) -> IcrcPath {
        IcrcPath::new(self.src, self.dst)
            .with_ip_id(self.ip_id())
            .with_ip_flags(read_u16(self.ipv4_header, 6))
    }

    /// The representation that [`FrameRepr::emit`] turns back into this frame:
    /// MACs, TOS, TTL, IP id, flags and addressing. For a frame with a 20-byte
    /// IPv4 header, UDP checksum 0 and no Ethernet padding (as RoCEv2 NICs send
    /// them), `self.repr().emit(self.roce)` is the frame, byte for byte.
    pub fn repr(&self) -> FrameRepr {
        FrameRepr {
            src_mac: self.src_mac,
            dst_mac: self.dst_mac,
            tos: self.tos(),
            ttl: self.ttl(),
            path: self.path(),
        }
    }

    /// IPv4 type of service (DSCP and ECN).
    pub fn tos(&self) -> u8 {
        read_u8(self.ipv4_header, 1)
    }

    /// IPv4 time to live.
    pub fn ttl(&self) -> u8 {
        read_u8(self.ipv4_header, 8)
    }

    /// IPv4 identification.
    pub fn ip_id(&self) -> u16 {
        read_u16(self.ipv4_header, 4)
    }

    /// Whether the IPv4 Don't Fragment flag is set.
    pub fn dont_fragment(&self) -> bool {
        read_u16(self.ipv4_header, 6) & 0x4000 != 0
    }

    /// Verify the RoCE packet's ICRC against this frame's real headers.
    pub fn verify_icrc(&self) -> Result<(), WireError> {
        verify_icrc(self.ipv4_header, self.udp_header, self.roce)
    }
}

/// How to wrap RoCE packets into Ethernet frames the way Linux and ConnectX
/// put them on the wire: the path's IP id and flags (IP id 0 and DF for
/// [`IcrcPath::new`]), a correct IPv4 header checksum, UDP checksum 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameRepr {
    /// Source MAC address.
    pub src_mac: [u8; 6],
    /// Destination MAC address.
    pub dst_mac: [u8; 6],
    /// IPv4 type of service (ConnectX uses 0x02: ECN-capable).
    pub tos: u8,
    /// IPv4 time to live.
    pub ttl: u8,
    /// UDP addressing, IP id and flags.
    pub path: IcrcPath,
}

impl FrameRepr {
    /// A frame description with TTL 64.
    pub fn new(src_mac: [u8; 6], dst_mac: [u8; 6], tos: u8, path: IcrcPath) -> FrameRepr {
        FrameRepr {
            src_mac,
            dst_mac,
            tos,
            ttl: DEFAULT_TTL,
            path,
        }
    }

    /// Build a frame (TTL 64) around `roce`, a whole RoCE packet whose ICRC
    /// was computed with `path` (e.g. by `PacketRepr::emit`).
    pub fn build(
        src_mac: [u8; 6],
        dst_mac: [u8; 6],
        tos: u8,
        path: &IcrcPath,
        roce: &[u8],
    ) -> Vec<u8> {
        FrameRepr::new(src_mac, dst_mac, tos, *path).emit(roce)
    }

    /// Length of the frame built around `roce_len` RoCE bytes.
    pub fn buffer_len(roce_len: usize) -> usize {
        ETHERNET_HEADER_LEN + IPV4_HEADER_LEN + UDP_HEADER_LEN + roce_len
    }

    /// Build the frame around `roce` (RoCE packets longer than a datagram
    /// can carry get saturated length fields).
    pub fn emit(&self, roce: &[u8]) -> Vec<u8> {
        let mut frame = Vec::with_capacity(FrameRepr::buffer_len(roce.len()));
        self.emit_into(roce, &mut frame);
        frame
    }

    /// [`FrameRepr::emit`] into `frame` (cleared first), reusing its allocation.
    pub fn emit_into(&self, roce: &[u8], frame: &mut Vec<u8>) {
        frame.clear();
        frame.extend_from_slice(&self.dst_mac);
        frame.extend_from_slice(&self.src_mac);
        frame.extend_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        frame.extend_from_slice(&self.path.ipv4_header(roce.len(), self.tos, self.ttl));
        frame.extend_from_slice(&self.path.udp_header(roce.len()));
        frame.extend_from_slice(roce);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{BthRepr, Opcode, PacketRepr, RethRepr};

    fn path() -> IcrcPath {
        IcrcPath::new(
            SocketAddrV4::new(Ipv4Addr::new(192, 168, 1, 13), 61437),
            SocketAddrV4::new(Ipv4Addr::new(192, 168, 1, 17), 4791),
        )
    }

    fn read_request() -> Vec<u8> {
        let mut repr = PacketRepr::new(BthRepr::new(Opcode::ReadRequest, 0x5434, 7, true));
        repr.reth = Some(RethRepr {
            va: 0x1000,
            rkey: 0x55,
            dma_len: 64,
        });
        let mut roce = vec![0u8; repr.buffer_len()];
        repr.emit(&mut roce, &path()).unwrap();
        roce
    }

    #[test]
    fn built_frames_parse_and_verify() {
        let roce = read_request();
        let frame = FrameRepr::build([1; 6], [2; 6], 0x02, &path(), &roce);
        assert_eq!(frame.len(), FrameRepr::buffer_len(roce.len()));
        let parsed = EthernetFrame::parse(&frame).unwrap();
        assert_eq!(parsed.src_mac, [1; 6]);
        assert_eq!(parsed.dst_mac, [2; 6]);
        assert_eq!(parsed.path(), path());
        assert_eq!(parsed.roce, &roce[..]);
        assert_eq!((parsed.tos(), parsed.ttl(), parsed.ip_id()), (2, 64, 0));
        assert!(parsed.dont_fragment());
        assert_eq!(parsed.udp_header[6..8], [0, 0]);
        parsed.verify_icrc().unwrap();
    }

    #[test]
    fn numbered_frames_keep_their_ip_id_and_flags() {
        let numbered = path().with_ip_id(0xe65d).with_ip_flags(0);
        let mut repr = PacketRepr::new(BthRepr::new(Opcode::ReadRequest, 0x5434, 7, true));
        repr.reth = Some(RethRepr {
            va: 0x1000,
            rkey: 0x55,
            dma_len: 64,
        });
        let mut roce = vec![0u8; repr.buffer_len()];
        repr.emit(&mut roce, &numbered).unwrap();
        let frame = FrameRepr::new([1; 6], [2; 6], 0x02, numbered).emit(&roce);
        let parsed = EthernetFrame::parse(&frame).unwrap();
        assert_eq!((parsed.ip_id(), parsed.dont_fragment()), (0xe65d, false));
        assert_eq!(parsed.path(), numbered);
        parsed.verify_icrc().unwrap();
        parsed.path().verify(parsed.roce).unwrap();
        assert!(path().verify(parsed.roce).is_err());
        assert_eq!(parsed.repr().emit(parsed.roce), frame);
    }

    #[test]
    fn honours_length_fields_and_options() {
        let roce = read_request();
        let mut frame = FrameRepr::build([1; 6], [2; 6], 0, &path(), &roce);
        frame.extend_from_slice(&[0xAA; 6]); // Ethernet padding
        assert_eq!(EthernetFrame::parse(&frame).unwrap().roce, &roce[..]);

        // Insert a 4-byte IPv4 option (NOP NOP NOP EOL): IHL 6.
        let mut opt = frame[..34].to_vec();
        opt[14] = 0x46;
        let total = u16::from_be_bytes([opt[16], opt[17]]) + 4;
        opt[16..18].copy_from_slice(&total.to_be_bytes());
        opt.extend_from_slice(&[1, 1, 1, 0]);
        opt.extend_from_slice(&frame[34..]);
        let parsed = EthernetFrame::parse(&opt).unwrap();
        assert_eq!(parsed.ipv4_header.len(), 24);
        assert_eq!(parsed.roce, &roce[..]);
        // The options are covered by the ICRC, which was computed without them.
        assert!(parsed.verify_icrc().is_err());
    }

    #[test]
    fn rejects_other_traffic() {
        let frame = FrameRepr::build([1; 6], [2; 6], 0, &path(), &read_request());
        let mut f = frame.clone();
        f[12] = 0x86;
        f[13] = 0xDD;
        assert_eq!(EthernetFrame::parse(&f), Err(WireError::NotIpv4));
        let mut f = frame.clone();
        f[14 + 9] = 6;
        assert_eq!(EthernetFrame::parse(&f), Err(WireError::NotUdp));
        let mut f = frame.clone();
        f[14 + 20 + 3] = 0xB8;
        assert_eq!(EthernetFrame::parse(&f), Err(WireError::NotRoce));
        let mut f = frame.clone();
        f[14] = 0x44;
        assert_eq!(EthernetFrame::parse(&f), Err(WireError::BadLength));
        let mut f = frame.clone();
        f[14 + 20 + 5] = 7;
        assert_eq!(EthernetFrame::parse(&f), Err(WireError::BadLength));
        for len in 0..frame.len() {
            assert!(EthernetFrame::parse(&frame[..len]).is_err(), "{len}");
        }
    }
}
