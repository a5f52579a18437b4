//! A whole RoCEv2 packet (the UDP payload):
//! `BTH | extension headers | payload | pad | ICRC`.
//!
//! Extension headers follow the BTH in the order RETH, ImmDt, AtomicETH,
//! AETH, AtomicAckETH; each opcode carries the subset given by
//! [`Opcode::has_reth`] and friends (WRITE ONLY with Immediate: RETH then
//! ImmDt; WRITE LAST and SEND LAST/ONLY with Immediate: ImmDt alone; ATOMIC
//! ACK: AETH then AtomicAckETH; other SENDs: no extension header).

use super::field::{read, write};
use super::icrc::compute_icrc;
use super::{
    AETH_LEN, ATOMIC_ACK_ETH_LEN, ATOMIC_ETH_LEN, Aeth, AethRepr, AtomicAckEth, AtomicAckEthRepr,
    AtomicEth, AtomicEthRepr, BTH_LEN, Bth, BthRepr, ICRC_LEN, IMMDT_LEN, IcrcPath, ImmDt, Opcode,
    RETH_LEN, Reth, RethRepr, WireError,
};

/// The bytes of `out` from `at` on (empty when out of range).
fn rest(out: &mut [u8], at: usize) -> &mut [u8] {
    out.get_mut(at..).unwrap_or_default()
}

/// Largest RoCE packet a UDP datagram over IPv4 can carry.
const MAX_ROCE_LEN: usize = 65_535 - 20 - 8;

/// Where each extension header of an opcode starts, relative to the packet start.
#[derive(Debug, Clone, Copy, Default)]
struct Layout {
    reth: Option<usize>,
    immdt: Option<usize>,
    atomic_eth: Option<usize>,
    aeth: Option<usize>,
    atomic_ack_eth: Option<usize>,
    /// Offset of the payload (end of the headers).
    payload: usize,
}

impl Layout {
    fn of(op: Opcode) -> Layout {
        let mut layout = Layout::default();
        let mut at = BTH_LEN;
        let mut place = |present: bool, len: usize| {
            present.then(|| {
                let start = at;
                at += len;
                start
            })
        };
        layout.reth = place(op.has_reth(), RETH_LEN);
        layout.immdt = place(op.has_immdt(), IMMDT_LEN);
        layout.atomic_eth = place(op.has_atomic_eth(), ATOMIC_ETH_LEN);
        layout.aeth = place(op.has_aeth(), AETH_LEN);
        layout.atomic_ack_eth = place(op.has_atomic_ack_eth(), ATOMIC_ACK_ETH_LEN);
        layout.payload = at;
        layout
    }
}

/// A checked zero-copy view of a whole RoCEv2 packet (a UDP payload).
///
/// [`RocePacket::new_checked`] guarantees a supported opcode, all of its
/// extension headers, a pad count no larger than the bytes after the
/// headers, and the ICRC. Accessors on an unchecked view never panic: they
/// return empty slices or zeros where the buffer is too short.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RocePacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> RocePacket<T> {
    /// Wrap a buffer without checking it.
    pub fn new_unchecked(buffer: T) -> RocePacket<T> {
        RocePacket { buffer }
    }

    /// Wrap a buffer, checking its lengths (see [`RocePacket::check_len`]).
    pub fn new_checked(buffer: T) -> Result<RocePacket<T>, WireError> {
        let packet = RocePacket::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Check that the buffer holds a BTH with a supported opcode, the
    /// extension headers of that opcode, the pad bytes and the ICRC.
    pub fn check_len(&self) -> Result<(), WireError> {
        let len = self.buffer.as_ref().len();
        if len < BTH_LEN + ICRC_LEN {
            return Err(WireError::Truncated);
        }
        let op = self.opcode()?;
        let data_start = BTH_LEN + op.ext_header_len();
        let data_len = len
            .checked_sub(data_start + ICRC_LEN)
            .ok_or(WireError::Truncated)?;
        if usize::from(self.bth().pad_count()) > data_len {
            return Err(WireError::BadPadCount);
        }
        Ok(())
    }

    /// Return the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The whole packet.
    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// The BTH.
    pub fn bth(&self) -> Bth<&[u8]> {
        Bth::new_unchecked(self.slice(0, BTH_LEN))
    }

    /// The decoded opcode.
    pub fn opcode(&self) -> Result<Opcode, WireError> {
        self.bth().opcode()
    }

    fn layout(&self) -> Option<Layout> {
        self.opcode().ok().map(Layout::of)
    }

    fn slice(&self, start: usize, len: usize) -> &[u8] {
        let buf = self.buffer.as_ref();
        start
            .checked_add(len)
            .and_then(|end| buf.get(start..end))
            .unwrap_or(&[])
    }

    /// Length of BTH plus extension headers (just the BTH for an unknown opcode).
    pub fn header_len(&self) -> usize {
        self.layout().map_or(BTH_LEN, |l| l.payload)
    }

    /// The RETH, if the opcode carries one.
    pub fn reth(&self) -> Option<Reth<&[u8]>> {
        let at = self.layout()?.reth?;
        Some(Reth::new_unchecked(self.slice(at, RETH_LEN)))
    }

    /// The ImmDt, if the opcode carries one.
    pub fn immdt(&self) -> Option<ImmDt<&[u8]>> {
        let at = self.layout()?.immdt?;
        Some(ImmDt::new_unchecked(self.slice(at, IMMDT_LEN)))
    }

    /// The AtomicETH, if the opcode carries one.
    pub fn atomic_eth(&self) -> Option<AtomicEth<&[u8]>> {
        let at = self.layout()?.atomic_eth?;
        Some(AtomicEth::new_unchecked(self.slice(at, ATOMIC_ETH_LEN)))
    }

    /// The AETH, if the opcode carries one.
    pub fn aeth(&self) -> Option<Aeth<&[u8]>> {
        let at = self.layout()?.aeth?;
        Some(Aeth::new_unchecked(self.slice(at, AETH_LEN)))
    }

    /// The AtomicAckETH, if the opcode carries one.
    pub fn atomic_ack_eth(&self) -> Option<AtomicAckEth<&[u8]>> {
        let at = self.layout()?.atomic_ack_eth?;
        Some(AtomicAckEth::new_unchecked(
            self.slice(at, ATOMIC_ACK_ETH_LEN),
        ))
    }

    /// Length of payload plus pad (bytes between the headers and the ICRC).
    fn data_len(&self) -> usize {
        self.buffer
            .as_ref()
            .len()
            .saturating_sub(self.header_len() + ICRC_LEN)
    }

    fn payload_len(&self) -> usize {
        self.data_len()
            .saturating_sub(usize::from(self.bth().pad_count()))
    }

    /// The payload, without pad and ICRC.
    pub fn payload(&self) -> &[u8] {
        self.slice(self.header_len(), self.payload_len())
    }

    /// The pad bytes.
    pub fn pad(&self) -> &[u8] {
        let start = self.header_len() + self.payload_len();
        self.slice(start, self.data_len() - self.payload_len())
    }

    /// Everything the ICRC covers: the packet without its last 4 bytes.
    pub fn without_icrc(&self) -> &[u8] {
        let buf = self.buffer.as_ref();
        buf.get(..buf.len().saturating_sub(ICRC_LEN)).unwrap_or(&[])
    }

    /// The ICRC stored in the last 4 bytes (little-endian on the wire).
    pub fn icrc(&self) -> u32 {
        let buf = self.buffer.as_ref();
        u32::from_le_bytes(read(buf, buf.len().saturating_sub(ICRC_LEN)))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> RocePacket<T> {
    /// A mutable view of the BTH.
    pub fn bth_mut(&mut self) -> Bth<&mut [u8]> {
        let buf = self.buffer.as_mut();
        let end = buf.len().min(BTH_LEN);
        Bth::new_unchecked(buf.get_mut(..end).unwrap_or_default())
    }

    /// The payload, mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.header_len();
        let len = self.payload_len();
        let buf = self.buffer.as_mut();
        start
            .checked_add(len)
            .and_then(|end| buf.get_mut(start..end))
            .unwrap_or_default()
    }

    /// Store an ICRC value in the last 4 bytes.
    pub fn set_icrc(&mut self, value: u32) {
        let buf = self.buffer.as_mut();
        let at = buf.len().saturating_sub(ICRC_LEN);
        if buf.len() >= ICRC_LEN {
            write(buf, at, value.to_le_bytes());
        }
    }

    /// Recompute and store the ICRC for a datagram sent on `path` (after a rewrite).
    pub fn fill_icrc(&mut self, path: &IcrcPath) {
        let icrc = path.icrc(self.without_icrc());
        self.set_icrc(icrc);
    }
}

/// The validated meaning of a whole RoCEv2 packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketRepr<'a> {
    /// Base transport header.
    pub bth: BthRepr,
    /// RETH (WRITE FIRST/ONLY, READ REQUEST).
    pub reth: Option<RethRepr>,
    /// Immediate data (WRITE LAST/ONLY and SEND LAST/ONLY with Immediate).
    pub immdt: Option<u32>,
    /// AtomicETH (CmpSwap, FetchAdd).
    pub atomic_eth: Option<AtomicEthRepr>,
    /// AETH (READ RESPONSE FIRST/LAST/ONLY, ACK, ATOMIC ACK).
    pub aeth: Option<AethRepr>,
    /// AtomicAckETH (ATOMIC ACK).
    pub atomic_ack_eth: Option<AtomicAckEthRepr>,
    /// Payload, without pad and ICRC.
    pub payload: &'a [u8],
}

impl<'a> PacketRepr<'a> {
    /// A packet with `bth` and no extension headers or payload; fill in the
    /// fields its opcode needs.
    pub fn new(bth: BthRepr) -> PacketRepr<'a> {
        PacketRepr {
            bth,
            reth: None,
            immdt: None,
            atomic_eth: None,
            aeth: None,
            atomic_ack_eth: None,
            payload: &[],
        }
    }

    /// Parse a whole UDP payload. Checks lengths, opcode, transport version,
    /// extension headers, pad count and the absence of payload on opcodes
    /// that carry none. Does not check the ICRC (see [`IcrcPath::verify`]
    /// and [`super::verify_icrc`]).
    pub fn parse(bytes: &'a [u8]) -> Result<PacketRepr<'a>, WireError> {
        let packet = RocePacket::new_checked(bytes)?;
        let bth = BthRepr::parse(&packet.bth())?;
        let op = bth.opcode;
        if !op.has_payload() {
            if bth.pad_count != 0 {
                return Err(WireError::BadPadCount);
            }
            if packet.data_len() != 0 {
                return Err(WireError::UnexpectedPayload);
            }
        }
        let start = packet.header_len();
        let payload = start
            .checked_add(packet.payload_len())
            .and_then(|end| bytes.get(start..end))
            .ok_or(WireError::Truncated)?;
        let reth = packet.reth().map(|v| RethRepr::parse(&v)).transpose()?;
        let immdt = packet
            .immdt()
            .map(|v| v.check_len().map(|()| v.immediate()))
            .transpose()?;
        let atomic_eth = packet
            .atomic_eth()
            .map(|v| AtomicEthRepr::parse(&v))
            .transpose()?;
        let aeth = packet.aeth().map(|v| AethRepr::parse(&v)).transpose()?;
        let atomic_ack_eth = packet
            .atomic_ack_eth()
            .map(|v| AtomicAckEthRepr::parse(&v))
            .transpose()?;
        Ok(PacketRepr {
            bth,
            reth,
            immdt,
            atomic_eth,
            aeth,
            atomic_ack_eth,
            payload,
        })
    }

    /// Number of pad bytes `emit` writes: the payload rounded up to 4 bytes.
    pub fn pad_len(&self) -> usize {
        (4 - self.payload.len() % 4) % 4
    }

    /// Bytes `emit` writes: BTH, extension headers, payload, pad and ICRC.
    pub fn buffer_len(&self) -> usize {
        BTH_LEN + self.bth.opcode.ext_header_len() + self.payload.len() + self.pad_len() + ICRC_LEN
    }

    /// Check that the extension headers match the opcode exactly, that only
    /// opcodes with payload carry one, and that the version is 0.
    pub fn check(&self) -> Result<(), WireError> {
        let op = self.bth.opcode;
        if self.bth.tver != 0 {
            return Err(WireError::UnsupportedTransportVersion(self.bth.tver));
        }
        let headers = [
            ("RETH", op.has_reth(), self.reth.is_some()),
            ("ImmDt", op.has_immdt(), self.immdt.is_some()),
            ("AtomicETH", op.has_atomic_eth(), self.atomic_eth.is_some()),
            ("AETH", op.has_aeth(), self.aeth.is_some()),
            (
                "AtomicAckETH",
                op.has_atomic_ack_eth(),
                self.atomic_ack_eth.is_some(),
            ),
        ];
        for (name, required, present) in headers {
            match (required, present) {
                (true, false) => return Err(WireError::MissingHeader(name)),
                (false, true) => return Err(WireError::UnexpectedHeader(name)),
                _ => {}
            }
        }
        if !op.has_payload() && !self.payload.is_empty() {
            return Err(WireError::UnexpectedPayload);
        }
        if self.buffer_len() > MAX_ROCE_LEN {
            return Err(WireError::BadLength);
        }
        Ok(())
    }

    /// Emit the packet for a datagram sent on `path`: headers, payload, zero
    /// pad (the BTH pad count is set from the payload length, overriding
    /// `bth.pad_count`) and the ICRC. Returns the number of bytes written.
    pub fn emit(&self, buf: &mut [u8], path: &IcrcPath) -> Result<usize, WireError> {
        self.emit_with_icrc_fn(buf, |covered| Ok(path.icrc(covered)))
    }

    /// Emit the packet with the ICRC computed over given real IPv4 and UDP
    /// headers (as captured on the wire) instead of a path's.
    pub fn emit_for_headers(
        &self,
        buf: &mut [u8],
        ipv4_header: &[u8],
        udp_header: &[u8],
    ) -> Result<usize, WireError> {
        self.emit_with_icrc_fn(buf, |covered| {
            compute_icrc(ipv4_header, udp_header, covered)
        })
    }

    /// Emit the packet, asking `icrc` for the ICRC of the bytes it covers
    /// (everything before the last 4 bytes).
    pub fn emit_with_icrc_fn(
        &self,
        buf: &mut [u8],
        icrc: impl FnOnce(&[u8]) -> Result<u32, WireError>,
    ) -> Result<usize, WireError> {
        self.check()?;
        let len = self.buffer_len();
        let out = buf.get_mut(..len).ok_or(WireError::BufferTooSmall)?;
        let layout = Layout::of(self.bth.opcode);
        let mut bth = self.bth;
        // pad_len() is at most 3.
        bth.pad_count = self.pad_len() as u8;
        bth.emit(&mut Bth::new_unchecked(&mut *out));
        if let (Some(repr), Some(at)) = (self.reth, layout.reth) {
            repr.emit(&mut Reth::new_unchecked(rest(out, at)));
        }
        if let (Some(value), Some(at)) = (self.immdt, layout.immdt) {
            ImmDt::new_unchecked(rest(out, at)).set_immediate(value);
        }
        if let (Some(repr), Some(at)) = (self.atomic_eth, layout.atomic_eth) {
            repr.emit(&mut AtomicEth::new_unchecked(rest(out, at)));
        }
        if let (Some(repr), Some(at)) = (self.aeth, layout.aeth) {
            repr.emit(&mut Aeth::new_unchecked(rest(out, at)));
        }
        if let (Some(repr), Some(at)) = (self.atomic_ack_eth, layout.atomic_ack_eth) {
            repr.emit(&mut AtomicAckEth::new_unchecked(rest(out, at)));
        }
        // `out` is exactly `len` bytes, so both ranges are in bounds.
        let data = rest(out, layout.payload);
        let payload_len = self.payload.len();
        if let Some(dst) = data.get_mut(..payload_len) {
            dst.copy_from_slice(self.payload);
        }
        if let Some(pad) = data.get_mut(payload_len..payload_len + self.pad_len()) {
            pad.fill(0);
        }
        let covered_len = len - ICRC_LEN;
        let value = icrc(out.get(..covered_len).unwrap_or_default())?;
        write(out, covered_len, value.to_le_bytes());
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{NakCode, Syndrome};
    use std::net::{Ipv4Addr, SocketAddrV4};

    fn path() -> IcrcPath {
        IcrcPath::new(
            SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 50_000),
            SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 4791),
        )
    }

    /// A valid representation of every opcode, with a payload of `payload` where allowed.
    pub(crate) fn sample(op: Opcode, payload: &[u8]) -> PacketRepr<'_> {
        let mut repr = PacketRepr::new(BthRepr::new(op, 0x12_3456, 0xFF_FFFE, op.is_request()));
        if op.has_reth() {
            repr.reth = Some(RethRepr {
                va: 0x7f00_dead_beef_0040,
                rkey: 0x1234_5678,
                dma_len: payload.len() as u32,
            });
        }
        if op.has_immdt() {
            repr.immdt = Some(0xCAFE_F00D);
        }
        if op.has_atomic_eth() {
            repr.atomic_eth = Some(AtomicEthRepr {
                va: 0x1000,
                rkey: 7,
                swap_add: 0xAAAA,
                compare: 0xBBBB,
            });
        }
        if op.has_aeth() {
            repr.aeth = Some(AethRepr {
                syndrome: Syndrome::Ack { credits: 31 },
                msn: 42,
            });
        }
        if op.has_atomic_ack_eth() {
            repr.atomic_ack_eth = Some(AtomicAckEthRepr { original: 0xBBBB });
        }
        if op.has_payload() {
            repr.payload = payload;
        }
        repr
    }

    #[test]
    fn every_opcode_round_trips_with_every_pad() {
        let data: Vec<u8> = (0..=255).collect();
        for op in Opcode::ALL {
            for len in [0usize, 1, 2, 3, 4, 5, 64, 255] {
                let mut repr = sample(op, &data[..len]);
                repr.bth.pad_count = repr.pad_len() as u8;
                let mut buf = vec![0xEEu8; repr.buffer_len() + 3];
                let n = repr.emit(&mut buf, &path()).unwrap();
                assert_eq!(n, repr.buffer_len());
                let bytes = &buf[..n];
                assert_eq!(bytes.len() % 4, 0, "{op:?} {len}");
                let back = PacketRepr::parse(bytes).unwrap();
                assert_eq!(back, repr, "{op:?} {len}");
                path().verify(bytes).unwrap();
                let view = RocePacket::new_checked(bytes).unwrap();
                assert!(view.pad().iter().all(|b| *b == 0));
                assert_eq!(view.pad().len(), repr.pad_len());
                assert_eq!(view.icrc(), path().icrc(view.without_icrc()));
            }
        }
    }

    #[test]
    fn emit_overrides_pad_count_and_checks_headers() {
        let mut repr = sample(Opcode::WriteOnly, b"abcde");
        repr.bth.pad_count = 0;
        let mut buf = [0u8; 64];
        let n = repr.emit(&mut buf, &path()).unwrap();
        assert_eq!(Bth::new_unchecked(&buf[..]).pad_count(), 3);
        assert_eq!(n, 12 + 16 + 5 + 3 + 4);
        assert_eq!(
            repr.emit(&mut buf[..n - 1], &path()),
            Err(WireError::BufferTooSmall)
        );
        let mut missing = repr;
        missing.reth = None;
        assert_eq!(
            missing.emit(&mut buf, &path()),
            Err(WireError::MissingHeader("RETH"))
        );
        let mut extra = repr;
        extra.aeth = Some(AethRepr {
            syndrome: Syndrome::Nak(NakCode::RemoteAccessError),
            msn: 0,
        });
        assert_eq!(
            extra.emit(&mut buf, &path()),
            Err(WireError::UnexpectedHeader("AETH"))
        );
        let mut ack = sample(Opcode::Acknowledge, b"");
        ack.payload = b"x";
        assert_eq!(
            ack.emit(&mut buf, &path()),
            Err(WireError::UnexpectedPayload)
        );
    }

    #[test]
    fn view_setters_and_fill_icrc() {
        let repr = sample(Opcode::ReadResponseOnly, b"12345678");
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut buf, &path()).unwrap();
        let mut view = RocePacket::new_checked(&mut buf[..]).unwrap();
        view.payload_mut().copy_from_slice(b"87654321");
        view.bth_mut().set_psn(5);
        assert!(matches!(
            path().verify(view.as_bytes()),
            Err(WireError::BadIcrc { .. })
        ));
        view.fill_icrc(&path());
        path().verify(view.as_bytes()).unwrap();
        let back = PacketRepr::parse(&buf).unwrap();
        assert_eq!(back.payload, b"87654321");
        assert_eq!(back.bth.psn, 5);
    }

    #[test]
    fn unchecked_views_of_short_buffers_do_not_panic() {
        for len in 0..40 {
            let bytes = vec![0x0Au8; len];
            let view = RocePacket::new_unchecked(&bytes[..]);
            let _ = (
                view.payload(),
                view.pad(),
                view.icrc(),
                view.without_icrc(),
                view.reth().map(|r| r.va()),
                view.header_len(),
            );
            let mut owned = bytes.clone();
            let mut view = RocePacket::new_unchecked(&mut owned[..]);
            view.set_icrc(1);
            view.payload_mut().fill(1);
            view.bth_mut().set_psn(1);
        }
    }
}
