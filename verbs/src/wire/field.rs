//! Big-endian field access that never panics.
//!
//! The view types check their buffer length once in `new_checked`; these
//! helpers additionally make every getter and setter total, so a view built
//! with `new_unchecked` over a short buffer reads zeros and ignores writes
//! instead of panicking.

/// Read `N` bytes at `offset`, or zeros when the buffer is too short.
pub(crate) fn read<const N: usize>(buf: &[u8], offset: usize) -> [u8; N] {
    let mut out = [0u8; N];
    if let Some(src) = offset.checked_add(N).and_then(|end| buf.get(offset..end)) {
        out.copy_from_slice(src);
    }
    out
}

/// Write `bytes` at `offset`; does nothing when the buffer is too short.
pub(crate) fn write<const N: usize>(buf: &mut [u8], offset: usize, bytes: [u8; N]) {
    if let Some(dst) = offset
        .checked_add(N)
        .and_then(|end| buf.get_mut(offset..end))
    {
        dst.copy_from_slice(&bytes);
    }
}

/// Read one byte (0 when out of range).
pub(crate) fn read_u8(buf: &[u8], offset: usize) -> u8 {
    buf.get(offset).copied().unwrap_or(0)
}

/// Write one byte (ignored when out of range).
pub(crate) fn write_u8(buf: &mut [u8], offset: usize, value: u8) {
    if let Some(b) = buf.get_mut(offset) {
        *b = value;
    }
}

/// Read a big-endian `u16`.
pub(crate) fn read_u16(buf: &[u8], offset: usize) -> u16 {
    u16::from_be_bytes(read(buf, offset))
}

/// Write a big-endian `u16`.
pub(crate) fn write_u16(buf: &mut [u8], offset: usize, value: u16) {
    write(buf, offset, value.to_be_bytes());
}

/// Read a big-endian 24-bit value.
pub(crate) fn read_u24(buf: &[u8], offset: usize) -> u32 {
    let [a, b, c] = read::<3>(buf, offset);
    u32::from_be_bytes([0, a, b, c])
}

/// Write the low 24 bits of `value` big-endian.
pub(crate) fn write_u24(buf: &mut [u8], offset: usize, value: u32) {
    let [_, a, b, c] = value.to_be_bytes();
    write(buf, offset, [a, b, c]);
}

/// Read a big-endian `u32`.
pub(crate) fn read_u32(buf: &[u8], offset: usize) -> u32 {
    u32::from_be_bytes(read(buf, offset))
}

/// Write a big-endian `u32`.
pub(crate) fn write_u32(buf: &mut [u8], offset: usize, value: u32) {
    write(buf, offset, value.to_be_bytes());
}

/// Read a big-endian `u64`.
pub(crate) fn read_u64(buf: &[u8], offset: usize) -> u64 {
    u64::from_be_bytes(read(buf, offset))
}

/// Write a big-endian `u64`.
pub(crate) fn write_u64(buf: &mut [u8], offset: usize, value: u64) {
    write(buf, offset, value.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_buffers_read_zero_and_ignore_writes() {
        let mut buf = [1u8, 2, 3];
        assert_eq!(read_u32(&buf, 0), 0);
        assert_eq!(read_u24(&buf, 0), 0x010203);
        assert_eq!(read_u16(&buf, usize::MAX), 0);
        write_u64(&mut buf, 0, u64::MAX);
        write_u8(&mut buf, 3, 9);
        assert_eq!(buf, [1, 2, 3]);
        write_u24(&mut buf, 0, 0xAABB_CCDD);
        assert_eq!(buf, [0xBB, 0xCC, 0xDD]);
    }
}
