//! Base Transport Header (BTH), 12 bytes.
//!
//! ```text
//! byte 0      opcode
//! byte 1      SE(7) MigReq(6) PadCnt(5..4) TVer(3..0)
//! bytes 2-3   P_Key
//! byte 4      FECN(7) BECN(6) reserved(5..0)
//! bytes 5-7   destination QP
//! byte 8      AckReq(7) reserved(6..0)
//! bytes 9-11  PSN
//! ```

use super::field::{read_u8, read_u16, read_u24, write_u8, write_u16, write_u24};
use super::{BTH_LEN, DEFAULT_PKEY, Opcode, PSN_MASK, QPN_MASK, WireError};

/// A checked zero-copy view of a BTH.
///
/// Getters on a view made with [`Bth::new_unchecked`] over a buffer shorter
/// than [`BTH_LEN`] read zeros and setters do nothing; they never panic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bth<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Bth<T> {
    /// Wrap a buffer without checking its length.
    pub fn new_unchecked(buffer: T) -> Bth<T> {
        Bth { buffer }
    }

    /// Wrap a buffer, checking that it holds a whole BTH.
    pub fn new_checked(buffer: T) -> Result<Bth<T>, WireError> {
        let bth = Bth::new_unchecked(buffer);
        bth.check_len()?;
        Ok(bth)
    }

    /// Check that the buffer holds a whole BTH.
    pub fn check_len(&self) -> Result<(), WireError> {
        if self.buffer.as_ref().len() < BTH_LEN {
            Err(WireError::Truncated)
        } else {
            Ok(())
        }
    }

    /// Return the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The raw opcode byte.
    pub fn opcode_byte(&self) -> u8 {
        read_u8(self.buffer.as_ref(), 0)
    }

    /// The decoded opcode.
    pub fn opcode(&self) -> Result<Opcode, WireError> {
        let byte = self.opcode_byte();
        Opcode::from_u8(byte).ok_or(WireError::UnsupportedOpcode(byte))
    }

    /// Solicited event bit.
    pub fn solicited(&self) -> bool {
        read_u8(self.buffer.as_ref(), 1) & 0x80 != 0
    }

    /// Migration request bit.
    pub fn mig_req(&self) -> bool {
        read_u8(self.buffer.as_ref(), 1) & 0x40 != 0
    }

    /// Number of pad bytes (0–3) before the ICRC.
    pub fn pad_count(&self) -> u8 {
        (read_u8(self.buffer.as_ref(), 1) >> 4) & 0x3
    }

    /// Transport header version.
    pub fn tver(&self) -> u8 {
        read_u8(self.buffer.as_ref(), 1) & 0x0F
    }

    /// Partition key.
    pub fn pkey(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 2)
    }

    /// Forward explicit congestion notification bit.
    pub fn fecn(&self) -> bool {
        read_u8(self.buffer.as_ref(), 4) & 0x80 != 0
    }

    /// Backward explicit congestion notification bit.
    pub fn becn(&self) -> bool {
        read_u8(self.buffer.as_ref(), 4) & 0x40 != 0
    }

    /// Destination queue pair number (24 bits).
    pub fn dest_qpn(&self) -> u32 {
        read_u24(self.buffer.as_ref(), 5)
    }

    /// Acknowledge request bit.
    pub fn ack_req(&self) -> bool {
        read_u8(self.buffer.as_ref(), 8) & 0x80 != 0
    }

    /// Packet sequence number (24 bits).
    pub fn psn(&self) -> u32 {
        read_u24(self.buffer.as_ref(), 9)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Bth<T> {
    fn set_bits(&mut self, offset: usize, mask: u8, value: u8) {
        let buf = self.buffer.as_mut();
        let old = read_u8(buf, offset);
        write_u8(buf, offset, (old & !mask) | (value & mask));
    }

    /// Set the raw opcode byte.
    pub fn set_opcode_byte(&mut self, value: u8) {
        write_u8(self.buffer.as_mut(), 0, value);
    }

    /// Set the opcode.
    pub fn set_opcode(&mut self, value: Opcode) {
        self.set_opcode_byte(value.as_u8());
    }

    /// Set the solicited event bit.
    pub fn set_solicited(&mut self, value: bool) {
        self.set_bits(1, 0x80, if value { 0x80 } else { 0 });
    }

    /// Set the migration request bit.
    pub fn set_mig_req(&mut self, value: bool) {
        self.set_bits(1, 0x40, if value { 0x40 } else { 0 });
    }

    /// Set the pad count (low 2 bits of `value`).
    pub fn set_pad_count(&mut self, value: u8) {
        self.set_bits(1, 0x30, value << 4);
    }

    /// Set the transport header version (low 4 bits of `value`).
    pub fn set_tver(&mut self, value: u8) {
        self.set_bits(1, 0x0F, value);
    }

    /// Set the partition key.
    pub fn set_pkey(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), 2, value);
    }

    /// Set the FECN bit.
    pub fn set_fecn(&mut self, value: bool) {
        self.set_bits(4, 0x80, if value { 0x80 } else { 0 });
    }

    /// Set the BECN bit.
    pub fn set_becn(&mut self, value: bool) {
        self.set_bits(4, 0x40, if value { 0x40 } else { 0 });
    }

    /// Set the destination QPN (low 24 bits of `value`).
    pub fn set_dest_qpn(&mut self, value: u32) {
        write_u24(self.buffer.as_mut(), 5, value);
    }

    /// Set the acknowledge request bit.
    pub fn set_ack_req(&mut self, value: bool) {
        self.set_bits(8, 0x80, if value { 0x80 } else { 0 });
    }

    /// Set the PSN (low 24 bits of `value`).
    pub fn set_psn(&mut self, value: u32) {
        write_u24(self.buffer.as_mut(), 9, value);
    }

    /// Zero the reserved bits of bytes 4 and 8.
    pub fn clear_reserved(&mut self) {
        self.set_bits(4, 0x3F, 0);
        self.set_bits(8, 0x7F, 0);
    }
}

/// The validated meaning of a BTH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BthRepr {
    /// Operation code.
    pub opcode: Opcode,
    /// Solicited event.
    pub solicited: bool,
    /// Migration request (ConnectX sets it: BTH byte 1 = 0x40).
    pub mig_req: bool,
    /// Pad bytes before the ICRC (0–3). `PacketRepr::emit` recomputes it.
    pub pad_count: u8,
    /// Transport header version; only 0 is accepted.
    pub tver: u8,
    /// Partition key.
    pub pkey: u16,
    /// Forward explicit congestion notification.
    pub fecn: bool,
    /// Backward explicit congestion notification.
    pub becn: bool,
    /// Destination QPN (24 bits).
    pub dest_qpn: u32,
    /// Acknowledge request.
    pub ack_req: bool,
    /// Packet sequence number (24 bits).
    pub psn: u32,
}

impl BthRepr {
    /// A BTH with the conventions ConnectX NICs use: MigReq set, default
    /// P_Key, version 0, no congestion bits, not solicited, no pad.
    /// `dest_qpn` and `psn` are masked to 24 bits.
    pub fn new(opcode: Opcode, dest_qpn: u32, psn: u32, ack_req: bool) -> BthRepr {
        BthRepr {
            opcode,
            solicited: false,
            mig_req: true,
            pad_count: 0,
            tver: 0,
            pkey: DEFAULT_PKEY,
            fecn: false,
            becn: false,
            dest_qpn: dest_qpn & QPN_MASK,
            ack_req,
            psn: psn & PSN_MASK,
        }
    }

    /// Parse a checked BTH view; rejects unknown opcodes and versions other than 0.
    pub fn parse<T: AsRef<[u8]>>(bth: &Bth<T>) -> Result<BthRepr, WireError> {
        bth.check_len()?;
        let opcode = bth.opcode()?;
        let tver = bth.tver();
        if tver != 0 {
            return Err(WireError::UnsupportedTransportVersion(tver));
        }
        Ok(BthRepr {
            opcode,
            solicited: bth.solicited(),
            mig_req: bth.mig_req(),
            pad_count: bth.pad_count(),
            tver,
            pkey: bth.pkey(),
            fecn: bth.fecn(),
            becn: bth.becn(),
            dest_qpn: bth.dest_qpn(),
            ack_req: bth.ack_req(),
            psn: bth.psn(),
        })
    }

    /// Length of the emitted header.
    pub fn buffer_len(&self) -> usize {
        BTH_LEN
    }

    /// Write this BTH into a view (reserved bits zero, wide fields masked).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, bth: &mut Bth<T>) {
        bth.set_opcode(self.opcode);
        bth.set_solicited(self.solicited);
        bth.set_mig_req(self.mig_req);
        bth.set_pad_count(self.pad_count);
        bth.set_tver(self.tver);
        bth.set_pkey(self.pkey);
        bth.set_fecn(self.fecn);
        bth.set_becn(self.becn);
        bth.set_dest_qpn(self.dest_qpn);
        bth.set_ack_req(self.ack_req);
        bth.set_psn(self.psn);
        bth.clear_reserved();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// First BTH of the ConnectX-5 trace (a WRITE ONLY).
    const TRACE_BTH: [u8; 12] = [
        0x0a, 0x40, 0xff, 0xff, 0x00, 0x00, 0x54, 0x34, 0x80, 0x00, 0x0c, 0x71,
    ];

    #[test]
    fn parses_a_connectx_bth() {
        let repr = BthRepr::parse(&Bth::new_checked(&TRACE_BTH[..]).unwrap()).unwrap();
        assert_eq!(repr, BthRepr::new(Opcode::WriteOnly, 0x5434, 0x0c71, true));
        let mut out = [0u8; 12];
        repr.emit(&mut Bth::new_unchecked(&mut out[..]));
        assert_eq!(out, TRACE_BTH);
    }

    #[test]
    fn every_opcode_and_field_round_trips() {
        for op in Opcode::ALL {
            for (i, (flag, pad)) in [(false, 0u8), (true, 1), (false, 2), (true, 3)]
                .into_iter()
                .enumerate()
            {
                let repr = BthRepr {
                    opcode: op,
                    solicited: flag,
                    mig_req: !flag,
                    pad_count: pad,
                    tver: 0,
                    pkey: 0x1234 ^ i as u16,
                    fecn: flag,
                    becn: !flag,
                    dest_qpn: 0xAB_CDEF >> i,
                    ack_req: flag,
                    psn: PSN_MASK - i as u32,
                };
                let mut buf = [0xAAu8; BTH_LEN];
                repr.emit(&mut Bth::new_unchecked(&mut buf[..]));
                let back = BthRepr::parse(&Bth::new_checked(&buf[..]).unwrap()).unwrap();
                assert_eq!(back, repr);
            }
        }
    }

    #[test]
    fn new_masks_to_24_bits() {
        let repr = BthRepr::new(Opcode::Acknowledge, 0xFF12_3456, 0x0100_0001, false);
        assert_eq!(repr.dest_qpn, 0x12_3456);
        assert_eq!(repr.psn, 1);
    }

    #[test]
    fn rejects_bad_version_opcode_and_short_buffers() {
        let mut buf = TRACE_BTH;
        buf[1] = 0x41;
        let err = BthRepr::parse(&Bth::new_unchecked(&buf[..])).unwrap_err();
        assert_eq!(err, WireError::UnsupportedTransportVersion(1));
        buf[1] = 0x40;
        buf[0] = 0x15;
        let err = BthRepr::parse(&Bth::new_unchecked(&buf[..])).unwrap_err();
        assert_eq!(err, WireError::UnsupportedOpcode(0x15));
        for len in 0..BTH_LEN {
            assert_eq!(
                Bth::new_checked(&TRACE_BTH[..len]).unwrap_err(),
                WireError::Truncated
            );
        }
    }
}
