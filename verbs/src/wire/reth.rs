//! RDMA Extended Transport Header (RETH), 16 bytes: VA (8), R_Key (4), DMA length (4).

use super::field::{read_u32, read_u64, write_u32, write_u64};
use super::{RETH_LEN, WireError};

/// A checked zero-copy view of a RETH.
///
/// Getters on a view made with [`Reth::new_unchecked`] over a short buffer
/// read zeros and setters do nothing; they never panic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reth<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Reth<T> {
    /// Wrap a buffer without checking its length.
    pub fn new_unchecked(buffer: T) -> Reth<T> {
        Reth { buffer }
    }

    /// Wrap a buffer, checking that it holds a whole RETH.
    pub fn new_checked(buffer: T) -> Result<Reth<T>, WireError> {
        let reth = Reth::new_unchecked(buffer);
        reth.check_len()?;
        Ok(reth)
    }

    /// Check that the buffer holds a whole RETH.
    pub fn check_len(&self) -> Result<(), WireError> {
        if self.buffer.as_ref().len() < RETH_LEN {
            Err(WireError::Truncated)
        } else {
            Ok(())
        }
    }

    /// Return the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Remote virtual address.
    pub fn va(&self) -> u64 {
        read_u64(self.buffer.as_ref(), 0)
    }

    /// Remote key.
    pub fn rkey(&self) -> u32 {
        read_u32(self.buffer.as_ref(), 8)
    }

    /// Length of the whole RDMA transfer in bytes.
    pub fn dma_len(&self) -> u32 {
        read_u32(self.buffer.as_ref(), 12)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Reth<T> {
    /// Set the remote virtual address.
    pub fn set_va(&mut self, value: u64) {
        write_u64(self.buffer.as_mut(), 0, value);
    }

    /// Set the remote key.
    pub fn set_rkey(&mut self, value: u32) {
        write_u32(self.buffer.as_mut(), 8, value);
    }

    /// Set the DMA length.
    pub fn set_dma_len(&mut self, value: u32) {
        write_u32(self.buffer.as_mut(), 12, value);
    }
}

/// The meaning of a RETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RethRepr {
    /// Remote virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Length of the whole RDMA transfer in bytes.
    pub dma_len: u32,
}

impl RethRepr {
    /// Parse a RETH view.
    pub fn parse<T: AsRef<[u8]>>(reth: &Reth<T>) -> Result<RethRepr, WireError> {
        reth.check_len()?;
        Ok(RethRepr {
            va: reth.va(),
            rkey: reth.rkey(),
            dma_len: reth.dma_len(),
        })
    }

    /// Length of the emitted header.
    pub fn buffer_len(&self) -> usize {
        RETH_LEN
    }

    /// Write this RETH into a view.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, reth: &mut Reth<T>) {
        reth.set_va(self.va);
        reth.set_rkey(self.rkey);
        reth.set_dma_len(self.dma_len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_big_endian() {
        let repr = RethRepr {
            va: 0x0102_0304_0506_0708,
            rkey: 0x090A_0B0C,
            dma_len: 0x0D0E_0F10,
        };
        let mut buf = [0u8; RETH_LEN];
        repr.emit(&mut Reth::new_unchecked(&mut buf[..]));
        assert_eq!(buf, core::array::from_fn(|i| i as u8 + 1));
        let back = RethRepr::parse(&Reth::new_checked(&buf[..]).unwrap()).unwrap();
        assert_eq!(back, repr);
        assert_eq!(
            Reth::new_checked(&buf[..RETH_LEN - 1]).unwrap_err(),
            WireError::Truncated
        );
    }
}
