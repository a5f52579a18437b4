//! Immediate data extended header (ImmDt), 4 bytes. Its representation is a plain `u32`.

use super::field::{read_u32, write_u32};
use super::{IMMDT_LEN, WireError};

/// A checked zero-copy view of an ImmDt header.
///
/// Getters on a view made with [`ImmDt::new_unchecked`] over a short buffer
/// read zeros and setters do nothing; they never panic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImmDt<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ImmDt<T> {
    /// Wrap a buffer without checking its length.
    pub fn new_unchecked(buffer: T) -> ImmDt<T> {
        ImmDt { buffer }
    }

    /// Wrap a buffer, checking that it holds a whole ImmDt.
    pub fn new_checked(buffer: T) -> Result<ImmDt<T>, WireError> {
        let imm = ImmDt::new_unchecked(buffer);
        imm.check_len()?;
        Ok(imm)
    }

    /// Check that the buffer holds a whole ImmDt.
    pub fn check_len(&self) -> Result<(), WireError> {
        if self.buffer.as_ref().len() < IMMDT_LEN {
            Err(WireError::Truncated)
        } else {
            Ok(())
        }
    }

    /// Return the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The immediate value (big-endian on the wire).
    pub fn immediate(&self) -> u32 {
        read_u32(self.buffer.as_ref(), 0)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ImmDt<T> {
    /// Set the immediate value.
    pub fn set_immediate(&mut self, value: u32) {
        write_u32(self.buffer.as_mut(), 0, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let mut buf = [0u8; IMMDT_LEN];
        ImmDt::new_unchecked(&mut buf[..]).set_immediate(0xDEAD_BEEF);
        assert_eq!(buf, [0xDE, 0xAD, 0xBE, 0xEF]);
        assert_eq!(
            ImmDt::new_checked(&buf[..]).unwrap().immediate(),
            0xDEAD_BEEF
        );
        assert_eq!(
            ImmDt::new_checked(&buf[..3]).unwrap_err(),
            WireError::Truncated
        );
    }
}
