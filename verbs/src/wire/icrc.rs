//! The RoCEv2 invariant CRC (ICRC).
//!
//! The ICRC is the standard reflected CRC-32 (as computed by `crc32fast`)
//! over, in order: 8 bytes of `0xFF` (standing in for the InfiniBand LRH),
//! the IPv4 header with TOS, TTL and header checksum set to all ones, the
//! UDP header with its checksum set to `0xFFFF`, the BTH with byte 4
//! (FECN/BECN/reserved) set to `0xFF`, then the extension headers, payload
//! and pad. The 32-bit value is stored little-endian in the last 4 bytes of
//! the packet. This is what ConnectX-5 NICs put on the wire (checked against
//! every frame of `verbs/tests/data/roce-traces/connectx5-clover-2clients.pcap`).

use crc32fast::Hasher;

use super::{BTH_LEN, ICRC_LEN, WireError};

/// Length of an IPv4 header without options.
pub(crate) const IPV4_HEADER_LEN: usize = 20;
/// Length of a UDP header.
pub(crate) const UDP_HEADER_LEN: usize = 8;

/// The 8 bytes of all ones that stand in for the LRH.
const LRH_STAND_IN: [u8; 8] = [0xFF; 8];

/// What precedes the payload in the CRC of a packet without IPv4 options: the LRH
/// stand-in, the IPv4 and UDP headers and the BTH.
const HEAD_LEN: usize = 8 + IPV4_HEADER_LEN + UDP_HEADER_LEN + BTH_LEN;

/// Set the IPv4 fields that routers may change (TOS, TTL, header checksum) to all ones.
pub(crate) fn mask_ipv4(mut header: [u8; IPV4_HEADER_LEN]) -> [u8; IPV4_HEADER_LEN] {
    header[1] = 0xFF;
    header[8] = 0xFF;
    header[10] = 0xFF;
    header[11] = 0xFF;
    header
}

/// Set the UDP checksum to all ones.
pub(crate) fn mask_udp(mut header: [u8; UDP_HEADER_LEN]) -> [u8; UDP_HEADER_LEN] {
    header[6] = 0xFF;
    header[7] = 0xFF;
    header
}

/// CRC over the masked network headers (`masked_ipv4`, IPv4 options as-is,
/// `masked_udp`) followed by the RoCE bytes without ICRC, with BTH byte 4
/// masked. Never panics; a RoCE buffer shorter than a BTH is hashed as is
/// (with byte 4 masked when present).
pub(crate) fn icrc_over(
    masked_ipv4: &[u8; IPV4_HEADER_LEN],
    ipv4_options: &[u8],
    masked_udp: &[u8; UDP_HEADER_LEN],
    roce_without_icrc: &[u8],
) -> u32 {
    let split = roce_without_icrc.len().min(BTH_LEN);
    if ipv4_options.is_empty() && split == BTH_LEN {
        // The usual packet: the headers and the masked BTH in one contiguous block, so
        // the CRC runs as two updates instead of six short ones.
        let (bth, rest) = roce_without_icrc.split_at(BTH_LEN);
        let mut head = [0u8; HEAD_LEN];
        head[..8].copy_from_slice(&LRH_STAND_IN);
        head[8..28].copy_from_slice(masked_ipv4);
        head[28..36].copy_from_slice(masked_udp);
        head[36..].copy_from_slice(bth);
        head[36 + 4] = 0xFF;
        let mut hasher = Hasher::new();
        hasher.update(&head);
        hasher.update(rest);
        return hasher.finalize();
    }
    let mut hasher = Hasher::new();
    hasher.update(&LRH_STAND_IN);
    hasher.update(masked_ipv4);
    hasher.update(ipv4_options);
    hasher.update(masked_udp);
    let (bth, rest) = roce_without_icrc.split_at(split);
    let mut masked_bth = [0u8; BTH_LEN];
    let masked_bth = match masked_bth.get_mut(..split) {
        Some(dst) => {
            dst.copy_from_slice(bth);
            if let Some(b) = dst.get_mut(4) {
                *b = 0xFF;
            }
            &*dst
        }
        None => bth,
    };
    hasher.update(masked_bth);
    hasher.update(rest);
    hasher.finalize()
}

/// Compute the ICRC of a RoCEv2 packet from the real IPv4 header (20 bytes
/// or more with options), the UDP header (8 bytes) and the packet bytes
/// without the trailing ICRC (BTH onwards). Masking is applied here; pass
/// the headers as they are on the wire.
pub fn compute_icrc(
    ipv4_header: &[u8],
    udp_header: &[u8],
    roce_without_icrc: &[u8],
) -> Result<u32, WireError> {
    let (fixed, options) = ipv4_header
        .split_first_chunk::<IPV4_HEADER_LEN>()
        .ok_or(WireError::Truncated)?;
    if fixed[0] >> 4 != 4 {
        return Err(WireError::NotIpv4);
    }
    if usize::from(fixed[0] & 0x0F) * 4 != ipv4_header.len() {
        return Err(WireError::BadLength);
    }
    let udp: [u8; UDP_HEADER_LEN] = match udp_header.len() {
        n if n < UDP_HEADER_LEN => return Err(WireError::Truncated),
        UDP_HEADER_LEN => {
            let mut udp = [0u8; UDP_HEADER_LEN];
            udp.copy_from_slice(udp_header);
            udp
        }
        _ => return Err(WireError::BadLength),
    };
    if roce_without_icrc.len() < BTH_LEN {
        return Err(WireError::Truncated);
    }
    Ok(icrc_over(
        &mask_ipv4(*fixed),
        options,
        &mask_udp(udp),
        roce_without_icrc,
    ))
}

/// Offset of the IPv4 identification in the bytes the ICRC covers (after the
/// 8-byte LRH stand-in).
const IP_ID_AT: usize = LRH_STAND_IN.len() + 4;

/// The ICRC that a packet whose ICRC is `icrc` carries when it is sent with the
/// IPv4 identification `to` instead of `from`, everything else unchanged (an
/// IPv4 header without options; `roce_len` is the RoCE length, ICRC included).
///
/// A CRC is affine, so the change depends only on which bits differ and how many
/// bytes follow them: this costs a few dozen operations instead of a CRC over the
/// whole packet. Senders whose datagrams the kernel or the NIC numbers (segmented
/// UDP sends) use it to give each datagram the ICRC of the header it will carry.
pub fn icrc_for_ip_id(icrc: u32, roce_len: usize, from: u16, to: u16) -> u32 {
    if from == to {
        return icrc;
    }
    icrc ^ id_change_delta(roce_len, from ^ to)
}

/// Entries of the per-thread memo of [`id_change_delta`] (direct-mapped).
const DELTA_MEMO: usize = 128;

thread_local! {
    /// (roce_len, id difference, delta) of recent changes: a segmented run's
    /// datagrams share a length and count their ids 1, 2, …, so the same few
    /// deltas recur on every send and every coalesced receive.
    static DELTA_MEMO_SLOTS: [std::cell::Cell<(u32, u16, u32)>; DELTA_MEMO] =
        const { [const { std::cell::Cell::new((u32::MAX, 0, 0)) }; DELTA_MEMO] };
}

/// What XORing the IP id with `diff` does to the ICRC of a `roce_len`-byte packet.
fn id_change_delta(roce_len: usize, diff: u16) -> u32 {
    let len = u32::try_from(roce_len).unwrap_or(u32::MAX - 1);
    let slot = (len as usize)
        .wrapping_mul(31)
        .wrapping_add(usize::from(diff))
        % DELTA_MEMO;
    let hit = DELTA_MEMO_SLOTS.with(|m| {
        let (l, d, v) = m[slot].get();
        (l == len && d == diff).then_some(v)
    });
    if let Some(v) = hit {
        return v;
    }
    // crc(M ^ D) = crc(M) ^ crc(D) ^ crc(0…0) for messages of one length; D and the
    // zeros differ only in the two id bytes, so their CRCs differ by the CRC of that
    // difference shifted over the bytes that follow it.
    let mut delta_prefix = [0u8; IP_ID_AT + 2];
    delta_prefix[IP_ID_AT..].copy_from_slice(&diff.to_be_bytes());
    let zero_prefix = [0u8; IP_ID_AT + 2];
    let difference = crc32fast::hash(&delta_prefix) ^ crc32fast::hash(&zero_prefix);
    let following =
        (IPV4_HEADER_LEN - 6 + UDP_HEADER_LEN + roce_len.saturating_sub(ICRC_LEN)) as u64;
    let mut shifted = Hasher::new_with_initial_len(difference, 0);
    shifted.combine(&Hasher::new_with_initial_len(0, following));
    let v = shifted.finalize();
    DELTA_MEMO_SLOTS.with(|m| m[slot].set((len, diff, v)));
    v
}

/// Rewrite the ICRC stored in `roce` (a whole RoCE packet) for a datagram sent
/// with IPv4 identification `to` instead of `from` (see [`icrc_for_ip_id`]).
/// A packet too short to hold an ICRC is left alone.
pub fn rewrite_icrc_for_ip_id(roce: &mut [u8], from: u16, to: u16) {
    let len = roce.len();
    if len < BTH_LEN + ICRC_LEN {
        return;
    }
    if let Some((_, stored)) = roce.split_last_chunk_mut::<ICRC_LEN>() {
        let icrc = icrc_for_ip_id(u32::from_le_bytes(*stored), len, from, to);
        *stored = icrc.to_le_bytes();
    }
}

/// Split a RoCE packet into the bytes the ICRC covers and the stored ICRC value.
pub(crate) fn split_icrc(roce_with_icrc: &[u8]) -> Result<(&[u8], u32), WireError> {
    if roce_with_icrc.len() < BTH_LEN + ICRC_LEN {
        return Err(WireError::Truncated);
    }
    let (covered, stored) = roce_with_icrc
        .split_last_chunk::<ICRC_LEN>()
        .ok_or(WireError::Truncated)?;
    Ok((covered, u32::from_le_bytes(*stored)))
}

/// Compare a computed ICRC with the stored one.
pub(crate) fn check(expected: u32, found: u32) -> Result<(), WireError> {
    if expected == found {
        Ok(())
    } else {
        Err(WireError::BadIcrc { expected, found })
    }
}

/// Verify the ICRC stored in the last 4 bytes of `roce_with_icrc` against the
/// real IPv4 and UDP headers it travelled with.
pub fn verify_icrc(
    ipv4_header: &[u8],
    udp_header: &[u8],
    roce_with_icrc: &[u8],
) -> Result<(), WireError> {
    let (covered, found) = split_icrc(roce_with_icrc)?;
    check(compute_icrc(ipv4_header, udp_header, covered)?, found)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first ACK of the ConnectX-5 trace.
    const IP: [u8; 20] = [
        0x45, 0x02, 0x00, 0x30, 0xe6, 0x2b, 0x40, 0x00, 0x40, 0x11, 0xd1, 0x20, 0xc0, 0xa8, 0x01,
        0x0d, 0xc0, 0xa8, 0x01, 0x11,
    ];
    const UDP: [u8; 8] = [0xef, 0xfd, 0x12, 0xb7, 0x00, 0x1c, 0x00, 0x00];
    const ROCE: [u8; 20] = [
        0x11, 0x40, 0xff, 0xff, 0x00, 0x00, 0x8d, 0x7c, 0x00, 0x00, 0x0c, 0x71, 0x00, 0x00, 0x00,
        0x01, 0x04, 0x57, 0x5c, 0x2d,
    ];

    #[test]
    fn the_contiguous_head_gives_the_crc_of_the_whole_covered_message() {
        // Reference: one CRC over the concatenation, BTH byte 4 masked by hand.
        let ip = mask_ipv4(std::array::from_fn(|i| (i as u8).wrapping_mul(37)));
        let udp = mask_udp(std::array::from_fn(|i| (i as u8).wrapping_mul(11)));
        for len in [0, 4, 11, 12, 13, 28, 80, 127, 128, 300, 1036] {
            let roce: Vec<u8> = (0..len)
                .map(|i| (i as u8).wrapping_mul(29) ^ 0x5A)
                .collect();
            let mut whole = Vec::new();
            whole.extend_from_slice(&LRH_STAND_IN);
            whole.extend_from_slice(&ip);
            whole.extend_from_slice(&udp);
            whole.extend_from_slice(&roce);
            if len > 4 {
                whole[8 + IPV4_HEADER_LEN + UDP_HEADER_LEN + 4] = 0xFF;
            }
            assert_eq!(
                icrc_over(&ip, &[], &udp, &roce),
                crc32fast::hash(&whole),
                "{len}"
            );
        }
    }

    #[test]
    fn another_ip_id_gives_the_icrc_of_the_other_header() {
        // The trace ACK carries IP id 0xe62b: move it to other ids and back.
        for (seed, to) in [(1u64, 0u16), (2, 1), (3, 0xe62c), (4, 0xFFFF), (5, 0x8000)] {
            let mut ip = IP;
            ip[4..6].copy_from_slice(&to.to_be_bytes());
            let expected = compute_icrc(&ip, &UDP, &ROCE[..16]).unwrap();
            let moved = icrc_for_ip_id(0x2d5c_5704, ROCE.len(), 0xe62b, to);
            assert_eq!(moved, expected, "case {seed}");
            assert_eq!(icrc_for_ip_id(moved, ROCE.len(), to, 0xe62b), 0x2d5c_5704);
        }
        let mut roce = ROCE;
        rewrite_icrc_for_ip_id(&mut roce, 0xe62b, 7);
        let mut ip = IP;
        ip[4..6].copy_from_slice(&7u16.to_be_bytes());
        verify_icrc(&ip, &UDP, &roce).unwrap();
        // Too short to hold an ICRC: untouched.
        let mut short = [1u8; 8];
        rewrite_icrc_for_ip_id(&mut short, 0, 1);
        assert_eq!(short, [1u8; 8]);
    }

    #[test]
    fn another_ip_id_works_for_every_length() {
        let mut payload = vec![0u8; 4200];
        for (i, b) in payload.iter_mut().enumerate() {
            *b = (i * 31 % 251) as u8;
        }
        for len in [16usize, 17, 64, 100, 1024, 1500, 4096] {
            let covered = &payload[..len];
            let mut ip = IP;
            let total = (20 + 8 + len + 4) as u16;
            ip[2..4].copy_from_slice(&total.to_be_bytes());
            let mut udp = UDP;
            udp[4..6].copy_from_slice(&((8 + len + 4) as u16).to_be_bytes());
            ip[4..6].copy_from_slice(&0u16.to_be_bytes());
            let at_zero = compute_icrc(&ip, &udp, covered).unwrap();
            for id in [1u16, 2, 63, 0x1234] {
                ip[4..6].copy_from_slice(&id.to_be_bytes());
                let direct = compute_icrc(&ip, &udp, covered).unwrap();
                assert_eq!(
                    icrc_for_ip_id(at_zero, len + 4, 0, id),
                    direct,
                    "len {len} id {id}"
                );
            }
        }
    }

    /// The per-thread memo of id deltas never answers for another length or id: many
    /// (length, id) pairs, several landing in one slot, each asked twice, agree with
    /// the ICRC computed over the whole header.
    #[test]
    fn memoised_id_changes_match_the_full_computation() {
        let payload: Vec<u8> = (0..700usize).map(|i| (i * 13 % 256) as u8).collect();
        for round in 0..2 {
            for len in (16usize..700).step_by(37) {
                let covered = &payload[..len];
                let mut ip = IP;
                ip[2..4].copy_from_slice(&((20 + 8 + len + 4) as u16).to_be_bytes());
                let mut udp = UDP;
                udp[4..6].copy_from_slice(&((8 + len + 4) as u16).to_be_bytes());
                ip[4..6].copy_from_slice(&0u16.to_be_bytes());
                let at_zero = compute_icrc(&ip, &udp, covered).unwrap();
                for id in (1u16..300).step_by(23) {
                    ip[4..6].copy_from_slice(&id.to_be_bytes());
                    let direct = compute_icrc(&ip, &udp, covered).unwrap();
                    assert_eq!(
                        icrc_for_ip_id(at_zero, len + 4, 0, id),
                        direct,
                        "round {round} len {len} id {id}"
                    );
                }
            }
        }
    }

    #[test]
    fn reproduces_a_connectx_icrc_stored_little_endian() {
        let icrc = compute_icrc(&IP, &UDP, &ROCE[..16]).unwrap();
        assert_eq!(icrc, 0x2d5c_5704);
        verify_icrc(&IP, &UDP, &ROCE).unwrap();
    }

    #[test]
    fn masked_fields_do_not_matter_and_others_do() {
        let mut ip = IP;
        ip[1] = 0x00;
        ip[8] = 0x01;
        ip[10] = 0x12;
        let mut udp = UDP;
        udp[6] = 0x34;
        let mut roce = ROCE;
        roce[4] = 0xC0;
        verify_icrc(&ip, &udp, &roce).unwrap();
        roce[5] ^= 1;
        assert!(matches!(
            verify_icrc(&ip, &udp, &roce),
            Err(WireError::BadIcrc {
                found: 0x2d5c_5704,
                ..
            })
        ));
    }

    #[test]
    fn rejects_malformed_headers() {
        assert_eq!(
            compute_icrc(&IP[..19], &UDP, &ROCE[..16]),
            Err(WireError::Truncated)
        );
        let mut ip = IP;
        ip[0] = 0x65;
        assert_eq!(compute_icrc(&ip, &UDP, &ROCE), Err(WireError::NotIpv4));
        ip[0] = 0x46;
        assert_eq!(compute_icrc(&ip, &UDP, &ROCE), Err(WireError::BadLength));
        assert_eq!(
            compute_icrc(&IP, &UDP[..7], &ROCE),
            Err(WireError::Truncated)
        );
        assert_eq!(
            compute_icrc(&IP, &ROCE[..9], &ROCE),
            Err(WireError::BadLength)
        );
        assert_eq!(
            compute_icrc(&IP, &UDP, &ROCE[..11]),
            Err(WireError::Truncated)
        );
        assert_eq!(
            verify_icrc(&IP, &UDP, &ROCE[..15]),
            Err(WireError::Truncated)
        );
    }
}
