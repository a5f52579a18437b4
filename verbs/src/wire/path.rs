//! The UDP addressing a RoCEv2 datagram travels with, and the IPv4/UDP
//! headers Linux puts on it.

use std::net::SocketAddrV4;

use super::icrc::{
    IPV4_HEADER_LEN, UDP_HEADER_LEN, check, icrc_over, mask_ipv4, mask_udp, split_icrc,
};
use super::{ICRC_LEN, WireError};

/// IP protocol number of UDP.
pub(crate) const IPPROTO_UDP: u8 = 17;
/// IPv4 flags/fragment-offset word with only Don't Fragment set.
pub const IPV4_DF: u16 = 0x4000;

/// What the ICRC of a RoCEv2 datagram covers besides the RoCE bytes: the
/// addressing, and the IPv4 identification and flags, which the ICRC does not
/// mask (only TOS, TTL and the checksums are masked).
///
/// [`IcrcPath::new`] describes a datagram sent from an unconnected UDP socket
/// with DF set, as Linux emits it: IP id 0. A NIC or a sender that numbers its
/// datagrams covers its own IP id; [`IcrcPath::with_ip_id`] describes those.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IcrcPath {
    /// Sender address and UDP port.
    pub src: SocketAddrV4,
    /// Receiver address and UDP port (4791 for RoCEv2).
    pub dst: SocketAddrV4,
    /// IPv4 identification.
    pub ip_id: u16,
    /// IPv4 flags and fragment offset word ([`IPV4_DF`]: Don't Fragment only).
    pub ip_flags: u16,
}

impl IcrcPath {
    /// A path from `src` to `dst` for datagrams with IP id 0 and DF set.
    pub fn new(src: SocketAddrV4, dst: SocketAddrV4) -> IcrcPath {
        IcrcPath {
            src,
            dst,
            ip_id: 0,
            ip_flags: IPV4_DF,
        }
    }

    /// The same path for a datagram with IPv4 identification `ip_id`.
    pub fn with_ip_id(mut self, ip_id: u16) -> IcrcPath {
        self.ip_id = ip_id;
        self
    }

    /// The same path for a datagram with IPv4 flags and fragment offset `ip_flags`.
    pub fn with_ip_flags(mut self, ip_flags: u16) -> IcrcPath {
        self.ip_flags = ip_flags;
        self
    }

    /// Source and destination swapped, for a datagram of the other direction
    /// (IP id 0, DF). Note that on a RoCEv2 fabric both directions of a QP go to
    /// UDP port 4791 (the source port is a per-QP entropy value), so this is the
    /// reply path only when both ends listen on the port they send from.
    pub fn reversed(&self) -> IcrcPath {
        IcrcPath::new(self.dst, self.src)
    }

    /// The IPv4 header of a datagram of `roce_len` RoCE bytes (ICRC included)
    /// on this path: version 4, IHL 5, this path's IP id and flags, protocol
    /// UDP, the given TOS and TTL and a correct header checksum. Lengths
    /// saturate at 65 535.
    pub fn ipv4_header(&self, roce_len: usize, tos: u8, ttl: u8) -> [u8; IPV4_HEADER_LEN] {
        let mut h = self.ipv4_header_unchecksummed(roce_len);
        h[1] = tos;
        h[8] = ttl;
        let checksum = ipv4_checksum(&h);
        h[10..12].copy_from_slice(&checksum.to_be_bytes());
        h
    }

    /// The UDP header for a datagram of `roce_len` RoCE bytes (ICRC
    /// included), with checksum 0 as ConnectX NICs send it.
    pub fn udp_header(&self, roce_len: usize) -> [u8; UDP_HEADER_LEN] {
        let len = u16::try_from(UDP_HEADER_LEN.saturating_add(roce_len)).unwrap_or(u16::MAX);
        let mut h = [0u8; UDP_HEADER_LEN];
        h[0..2].copy_from_slice(&self.src.port().to_be_bytes());
        h[2..4].copy_from_slice(&self.dst.port().to_be_bytes());
        h[4..6].copy_from_slice(&len.to_be_bytes());
        h
    }

    /// The ICRC of a packet (BTH onwards, without the ICRC) sent on this
    /// path. Cheap: builds the masked headers on the stack and runs one CRC.
    pub fn icrc(&self, roce_without_icrc: &[u8]) -> u32 {
        let roce_len = roce_without_icrc.len().saturating_add(ICRC_LEN);
        // TOS, TTL and checksum are masked, so their values do not matter.
        let ip = mask_ipv4(self.ipv4_header_unchecksummed(roce_len));
        let udp = mask_udp(self.udp_header(roce_len));
        icrc_over(&ip, &[], &udp, roce_without_icrc)
    }

    /// Verify the ICRC stored in the last 4 bytes of `roce` for this path.
    pub fn verify(&self, roce: &[u8]) -> Result<(), WireError> {
        let (covered, found) = split_icrc(roce)?;
        check(self.icrc(covered), found)
    }

    /// [`IcrcPath::ipv4_header`] without the checksum computation (masked anyway).
    fn ipv4_header_unchecksummed(&self, roce_len: usize) -> [u8; IPV4_HEADER_LEN] {
        let total = IPV4_HEADER_LEN
            .saturating_add(UDP_HEADER_LEN)
            .saturating_add(roce_len);
        let total = u16::try_from(total).unwrap_or(u16::MAX);
        let mut h = [0u8; IPV4_HEADER_LEN];
        h[0] = 0x45;
        h[2..4].copy_from_slice(&total.to_be_bytes());
        h[4..6].copy_from_slice(&self.ip_id.to_be_bytes());
        h[6..8].copy_from_slice(&self.ip_flags.to_be_bytes());
        h[9] = IPPROTO_UDP;
        h[12..16].copy_from_slice(&self.src.ip().octets());
        h[16..20].copy_from_slice(&self.dst.ip().octets());
        h
    }
}

/// The Internet checksum of an IPv4 header whose checksum field is zero.
pub(crate) fn ipv4_checksum(header: &[u8]) -> u16 {
    let mut sum: u32 = header
        .chunks(2)
        .map(|pair| match pair {
            [a, b] => u32::from(u16::from_be_bytes([*a, *b])),
            [a] => u32::from(*a) << 8,
            _ => 0,
        })
        .sum();
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::compute_icrc;
    use std::net::Ipv4Addr;

    fn path() -> IcrcPath {
        IcrcPath::new(
            SocketAddrV4::new(Ipv4Addr::new(192, 168, 1, 13), 61437),
            SocketAddrV4::new(Ipv4Addr::new(192, 168, 1, 17), 4791),
        )
    }

    #[test]
    fn headers_look_like_linux() {
        let ip = path().ipv4_header(20, 0x02, 64);
        assert_eq!(&ip[..10], &[0x45, 0x02, 0, 48, 0, 0, 0x40, 0, 64, 17]);
        // A header with a correct checksum sums to zero.
        assert_eq!(ipv4_checksum(&ip), 0);
        let udp = path().udp_header(20);
        assert_eq!(udp, [0xef, 0xfd, 0x12, 0xb7, 0, 28, 0, 0]);
    }

    #[test]
    fn icrc_equals_the_one_over_real_headers() {
        let roce = [
            0x11, 0x40, 0xff, 0xff, 0x00, 0x00, 0x8d, 0x7c, 0x00, 0x00, 0x0c, 0x71, 0, 0, 0, 0,
        ];
        let p = path();
        let real = compute_icrc(&p.ipv4_header(20, 0x02, 64), &p.udp_header(20), &roce).unwrap();
        assert_eq!(p.icrc(&roce), real);
        assert_ne!(p.reversed().icrc(&roce), real);
        let mut packet = roce.to_vec();
        packet.extend_from_slice(&real.to_le_bytes());
        p.verify(&packet).unwrap();
        assert!(p.reversed().verify(&packet).is_err());
        // The IP id and flags are covered.
        assert!(p.with_ip_id(1).verify(&packet).is_err());
        assert!(p.with_ip_flags(0).verify(&packet).is_err());
        let numbered = p.with_ip_id(0xe65d).with_ip_flags(0);
        let real = compute_icrc(
            &numbered.ipv4_header(20, 0x02, 64),
            &numbered.udp_header(20),
            &roce,
        )
        .unwrap();
        assert_eq!(numbered.icrc(&roce), real);
        assert_eq!(p.verify(&packet[..15]), Err(WireError::Truncated));
    }
}
