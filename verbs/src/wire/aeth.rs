//! ACK Extended Transport Header (AETH), 4 bytes: syndrome (1) and MSN (3).
//!
//! Syndrome encoding (IBTA): bit 7 reserved (0); bits 6..5 select the kind —
//! `00` ACK (low 5 bits: credit count), `01` RNR NAK (low 5 bits: timer),
//! `11` NAK (low 5 bits: NAK code 0–4); `10` and other NAK codes are reserved.

use super::field::{read_u8, read_u24, write_u8, write_u24};
use super::{AETH_LEN, WireError};

/// A NAK code carried in a NAK syndrome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NakCode {
    /// PSN sequence error (0): the requester must go back to the expected PSN.
    PsnSequenceError,
    /// Invalid request (1).
    InvalidRequest,
    /// Remote access error (2): bad R_Key, address or permission.
    RemoteAccessError,
    /// Remote operational error (3).
    RemoteOperationalError,
    /// Invalid RD request (4).
    InvalidRdRequest,
}

impl NakCode {
    /// Decode the low 5 bits of a NAK syndrome.
    pub fn from_u8(code: u8) -> Option<NakCode> {
        match code {
            0 => Some(NakCode::PsnSequenceError),
            1 => Some(NakCode::InvalidRequest),
            2 => Some(NakCode::RemoteAccessError),
            3 => Some(NakCode::RemoteOperationalError),
            4 => Some(NakCode::InvalidRdRequest),
            _ => None,
        }
    }

    /// The 5-bit code.
    pub fn to_u8(self) -> u8 {
        match self {
            NakCode::PsnSequenceError => 0,
            NakCode::InvalidRequest => 1,
            NakCode::RemoteAccessError => 2,
            NakCode::RemoteOperationalError => 3,
            NakCode::InvalidRdRequest => 4,
        }
    }
}

/// The decoded AETH syndrome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Syndrome {
    /// Positive acknowledgement with a 5-bit credit count (31 = invalid/unlimited).
    Ack {
        /// Credit count (0–31).
        credits: u8,
    },
    /// Receiver-not-ready NAK with a 5-bit timer code.
    RnrNak {
        /// RNR timer code (0–31).
        timer: u8,
    },
    /// Negative acknowledgement.
    Nak(NakCode),
}

impl Syndrome {
    /// Decode a syndrome byte; reserved encodings give [`WireError::BadSyndrome`].
    pub fn from_u8(byte: u8) -> Result<Syndrome, WireError> {
        let low = byte & 0x1F;
        match byte >> 5 {
            0b000 => Ok(Syndrome::Ack { credits: low }),
            0b001 => Ok(Syndrome::RnrNak { timer: low }),
            0b011 => NakCode::from_u8(low)
                .map(Syndrome::Nak)
                .ok_or(WireError::BadSyndrome(byte)),
            _ => Err(WireError::BadSyndrome(byte)),
        }
    }

    /// Encode the syndrome byte (credit and timer values are masked to 5 bits).
    pub fn to_u8(self) -> u8 {
        match self {
            Syndrome::Ack { credits } => credits & 0x1F,
            Syndrome::RnrNak { timer } => 0x20 | (timer & 0x1F),
            Syndrome::Nak(code) => 0x60 | code.to_u8(),
        }
    }
}

/// A checked zero-copy view of an AETH.
///
/// Getters on a view made with [`Aeth::new_unchecked`] over a short buffer
/// read zeros and setters do nothing; they never panic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Aeth<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Aeth<T> {
    /// Wrap a buffer without checking its length.
    pub fn new_unchecked(buffer: T) -> Aeth<T> {
        Aeth { buffer }
    }

    /// Wrap a buffer, checking that it holds a whole AETH.
    pub fn new_checked(buffer: T) -> Result<Aeth<T>, WireError> {
        let aeth = Aeth::new_unchecked(buffer);
        aeth.check_len()?;
        Ok(aeth)
    }

    /// Check that the buffer holds a whole AETH.
    pub fn check_len(&self) -> Result<(), WireError> {
        if self.buffer.as_ref().len() < AETH_LEN {
            Err(WireError::Truncated)
        } else {
            Ok(())
        }
    }

    /// Return the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The raw syndrome byte.
    pub fn syndrome_byte(&self) -> u8 {
        read_u8(self.buffer.as_ref(), 0)
    }

    /// The decoded syndrome.
    pub fn syndrome(&self) -> Result<Syndrome, WireError> {
        Syndrome::from_u8(self.syndrome_byte())
    }

    /// Message sequence number (24 bits).
    pub fn msn(&self) -> u32 {
        read_u24(self.buffer.as_ref(), 1)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Aeth<T> {
    /// Set the raw syndrome byte.
    pub fn set_syndrome_byte(&mut self, value: u8) {
        write_u8(self.buffer.as_mut(), 0, value);
    }

    /// Set the syndrome.
    pub fn set_syndrome(&mut self, value: Syndrome) {
        self.set_syndrome_byte(value.to_u8());
    }

    /// Set the MSN (low 24 bits of `value`).
    pub fn set_msn(&mut self, value: u32) {
        write_u24(self.buffer.as_mut(), 1, value);
    }
}

/// The validated meaning of an AETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AethRepr {
    /// ACK, RNR NAK or NAK.
    pub syndrome: Syndrome,
    /// Message sequence number (24 bits).
    pub msn: u32,
}

impl AethRepr {
    /// Parse an AETH view; reserved syndromes are rejected.
    pub fn parse<T: AsRef<[u8]>>(aeth: &Aeth<T>) -> Result<AethRepr, WireError> {
        aeth.check_len()?;
        Ok(AethRepr {
            syndrome: aeth.syndrome()?,
            msn: aeth.msn(),
        })
    }

    /// Length of the emitted header.
    pub fn buffer_len(&self) -> usize {
        AETH_LEN
    }

    /// Write this AETH into a view.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, aeth: &mut Aeth<T>) {
        aeth.set_syndrome(self.syndrome);
        aeth.set_msn(self.msn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_syndrome_byte_decodes_consistently() {
        let mut valid = 0;
        for byte in 0..=255u8 {
            match Syndrome::from_u8(byte) {
                Ok(s) => {
                    valid += 1;
                    assert_eq!(s.to_u8(), byte, "{s:?}");
                }
                Err(e) => assert_eq!(e, WireError::BadSyndrome(byte)),
            }
        }
        // 32 ACK + 32 RNR NAK + 5 NAK codes.
        assert_eq!(valid, 69);
        assert_eq!(Syndrome::from_u8(0x1F), Ok(Syndrome::Ack { credits: 31 }));
        assert_eq!(Syndrome::from_u8(0x2E), Ok(Syndrome::RnrNak { timer: 14 }));
        assert_eq!(
            Syndrome::from_u8(0x60),
            Ok(Syndrome::Nak(NakCode::PsnSequenceError))
        );
        assert_eq!(
            Syndrome::from_u8(0x64),
            Ok(Syndrome::Nak(NakCode::InvalidRdRequest))
        );
        assert_eq!(Syndrome::from_u8(0x65), Err(WireError::BadSyndrome(0x65)));
        assert_eq!(Syndrome::from_u8(0x40), Err(WireError::BadSyndrome(0x40)));
        assert_eq!(Syndrome::from_u8(0x80), Err(WireError::BadSyndrome(0x80)));
    }

    #[test]
    fn repr_round_trips() {
        let syndromes = [
            Syndrome::Ack { credits: 0 },
            Syndrome::Ack { credits: 31 },
            Syndrome::RnrNak { timer: 7 },
            Syndrome::Nak(NakCode::PsnSequenceError),
            Syndrome::Nak(NakCode::InvalidRequest),
            Syndrome::Nak(NakCode::RemoteAccessError),
            Syndrome::Nak(NakCode::RemoteOperationalError),
            Syndrome::Nak(NakCode::InvalidRdRequest),
        ];
        for (i, syndrome) in syndromes.into_iter().enumerate() {
            let repr = AethRepr {
                syndrome,
                msn: 0xFF_FFF0 + i as u32,
            };
            let mut buf = [0u8; AETH_LEN];
            repr.emit(&mut Aeth::new_unchecked(&mut buf[..]));
            let back = AethRepr::parse(&Aeth::new_checked(&buf[..]).unwrap()).unwrap();
            assert_eq!(back, repr);
        }
        assert_eq!(
            Aeth::new_checked(&[0u8; 3][..]).unwrap_err(),
            WireError::Truncated
        );
    }
}
