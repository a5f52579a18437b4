//! Atomic ACK Extended Transport Header (AtomicAckETH), 8 bytes: the original value.

use super::field::{read_u64, write_u64};
use super::{ATOMIC_ACK_ETH_LEN, WireError};

/// A checked zero-copy view of an AtomicAckETH.
///
/// Getters on a view made with [`AtomicAckEth::new_unchecked`] over a short
/// buffer read zeros and setters do nothing; they never panic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtomicAckEth<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> AtomicAckEth<T> {
    /// Wrap a buffer without checking its length.
    pub fn new_unchecked(buffer: T) -> AtomicAckEth<T> {
        AtomicAckEth { buffer }
    }

    /// Wrap a buffer, checking that it holds a whole AtomicAckETH.
    pub fn new_checked(buffer: T) -> Result<AtomicAckEth<T>, WireError> {
        let eth = AtomicAckEth::new_unchecked(buffer);
        eth.check_len()?;
        Ok(eth)
    }

    /// Check that the buffer holds a whole AtomicAckETH.
    pub fn check_len(&self) -> Result<(), WireError> {
        if self.buffer.as_ref().len() < ATOMIC_ACK_ETH_LEN {
            Err(WireError::Truncated)
        } else {
            Ok(())
        }
    }

    /// Return the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The value the remote word held before the atomic operation.
    pub fn original(&self) -> u64 {
        read_u64(self.buffer.as_ref(), 0)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> AtomicAckEth<T> {
    /// Set the original value.
    pub fn set_original(&mut self, value: u64) {
        write_u64(self.buffer.as_mut(), 0, value);
    }
}

/// The meaning of an AtomicAckETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AtomicAckEthRepr {
    /// The value the remote word held before the atomic operation.
    pub original: u64,
}

impl AtomicAckEthRepr {
    /// Parse an AtomicAckETH view.
    pub fn parse<T: AsRef<[u8]>>(eth: &AtomicAckEth<T>) -> Result<AtomicAckEthRepr, WireError> {
        eth.check_len()?;
        Ok(AtomicAckEthRepr {
            original: eth.original(),
        })
    }

    /// Length of the emitted header.
    pub fn buffer_len(&self) -> usize {
        ATOMIC_ACK_ETH_LEN
    }

    /// Write this AtomicAckETH into a view.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, eth: &mut AtomicAckEth<T>) {
        eth.set_original(self.original);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let repr = AtomicAckEthRepr {
            original: 0x0102_0304_0506_0708,
        };
        let mut buf = [0u8; ATOMIC_ACK_ETH_LEN];
        repr.emit(&mut AtomicAckEth::new_unchecked(&mut buf[..]));
        assert_eq!(buf, [1, 2, 3, 4, 5, 6, 7, 8]);
        let back = AtomicAckEthRepr::parse(&AtomicAckEth::new_checked(&buf[..]).unwrap()).unwrap();
        assert_eq!(back, repr);
        assert_eq!(
            AtomicAckEth::new_checked(&buf[..7]).unwrap_err(),
            WireError::Truncated
        );
    }
}
