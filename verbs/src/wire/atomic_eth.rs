//! Atomic Extended Transport Header (AtomicETH), 28 bytes:
//! VA (8), R_Key (4), swap or add data (8), compare data (8).

use super::field::{read_u32, read_u64, write_u32, write_u64};
use super::{ATOMIC_ETH_LEN, WireError};

/// A checked zero-copy view of an AtomicETH.
///
/// Getters on a view made with [`AtomicEth::new_unchecked`] over a short
/// buffer read zeros and setters do nothing; they never panic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtomicEth<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> AtomicEth<T> {
    /// Wrap a buffer without checking its length.
    pub fn new_unchecked(buffer: T) -> AtomicEth<T> {
        AtomicEth { buffer }
    }

    /// Wrap a buffer, checking that it holds a whole AtomicETH.
    pub fn new_checked(buffer: T) -> Result<AtomicEth<T>, WireError> {
        let eth = AtomicEth::new_unchecked(buffer);
        eth.check_len()?;
        Ok(eth)
    }

    /// Check that the buffer holds a whole AtomicETH.
    pub fn check_len(&self) -> Result<(), WireError> {
        if self.buffer.as_ref().len() < ATOMIC_ETH_LEN {
            Err(WireError::Truncated)
        } else {
            Ok(())
        }
    }

    /// Return the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Remote virtual address of the 8-byte word.
    pub fn va(&self) -> u64 {
        read_u64(self.buffer.as_ref(), 0)
    }

    /// Remote key.
    pub fn rkey(&self) -> u32 {
        read_u32(self.buffer.as_ref(), 8)
    }

    /// Swap value (CmpSwap) or addend (FetchAdd).
    pub fn swap_add(&self) -> u64 {
        read_u64(self.buffer.as_ref(), 12)
    }

    /// Compare value (CmpSwap only).
    pub fn compare(&self) -> u64 {
        read_u64(self.buffer.as_ref(), 20)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> AtomicEth<T> {
    /// Set the remote virtual address.
    pub fn set_va(&mut self, value: u64) {
        write_u64(self.buffer.as_mut(), 0, value);
    }

    /// Set the remote key.
    pub fn set_rkey(&mut self, value: u32) {
        write_u32(self.buffer.as_mut(), 8, value);
    }

    /// Set the swap value or addend.
    pub fn set_swap_add(&mut self, value: u64) {
        write_u64(self.buffer.as_mut(), 12, value);
    }

    /// Set the compare value.
    pub fn set_compare(&mut self, value: u64) {
        write_u64(self.buffer.as_mut(), 20, value);
    }
}

/// The meaning of an AtomicETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AtomicEthRepr {
    /// Remote virtual address of the 8-byte word.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Swap value (CmpSwap) or addend (FetchAdd).
    pub swap_add: u64,
    /// Compare value (CmpSwap only).
    pub compare: u64,
}

impl AtomicEthRepr {
    /// Parse an AtomicETH view.
    pub fn parse<T: AsRef<[u8]>>(eth: &AtomicEth<T>) -> Result<AtomicEthRepr, WireError> {
        eth.check_len()?;
        Ok(AtomicEthRepr {
            va: eth.va(),
            rkey: eth.rkey(),
            swap_add: eth.swap_add(),
            compare: eth.compare(),
        })
    }

    /// Length of the emitted header.
    pub fn buffer_len(&self) -> usize {
        ATOMIC_ETH_LEN
    }

    /// Write this AtomicETH into a view.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, eth: &mut AtomicEth<T>) {
        eth.set_va(self.va);
        eth.set_rkey(self.rkey);
        eth.set_swap_add(self.swap_add);
        eth.set_compare(self.compare);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_in_wire_order() {
        let repr = AtomicEthRepr {
            va: 0x0102_0304_0506_0708,
            rkey: 0x090A_0B0C,
            swap_add: 0x0D0E_0F10_1112_1314,
            compare: 0x1516_1718_191A_1B1C,
        };
        let mut buf = [0u8; ATOMIC_ETH_LEN];
        repr.emit(&mut AtomicEth::new_unchecked(&mut buf[..]));
        assert_eq!(buf, core::array::from_fn(|i| i as u8 + 1));
        let back = AtomicEthRepr::parse(&AtomicEth::new_checked(&buf[..]).unwrap()).unwrap();
        assert_eq!(back, repr);
        assert_eq!(
            AtomicEth::new_checked(&buf[..ATOMIC_ETH_LEN - 1]).unwrap_err(),
            WireError::Truncated
        );
    }
}
