//! A minimal classic pcap reader and writer for Ethernet captures.
//!
//! The reader accepts both byte orders and both the microsecond and the
//! nanosecond magic, and only link type Ethernet (1). The writer produces
//! little-endian microsecond files with link type Ethernet. Malformed input
//! gives an error, never a panic.

use std::io::{self, Write};
use std::path::Path;
use std::time::Duration;

use thiserror::Error;

/// Link type of Ethernet II frames.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// Magic number of microsecond-resolution files.
pub const MAGIC_MICROS: u32 = 0xA1B2_C3D4;
/// Magic number of nanosecond-resolution files.
pub const MAGIC_NANOS: u32 = 0xA1B2_3C4D;
/// Snapshot length the writer declares.
pub const SNAPLEN: u32 = 65_535;

const GLOBAL_HEADER_LEN: usize = 24;
const RECORD_HEADER_LEN: usize = 16;

/// Why a pcap file could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum PcapError {
    /// The file ends inside a header or a record.
    #[error("pcap file truncated")]
    Truncated,
    /// The file does not start with a pcap magic number.
    #[error("not a classic pcap file (magic {0:#010x})")]
    BadMagic(u32),
    /// The capture is not of Ethernet frames.
    #[error("unsupported pcap link type {0} (only Ethernet, 1, is supported)")]
    UnsupportedLinkType(u32),
    /// A record's timestamp fraction is out of range.
    #[error("pcap record timestamp fraction out of range")]
    BadTimestamp,
}

impl From<PcapError> for io::Error {
    fn from(err: PcapError) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, err)
    }
}

/// One captured frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PcapRecord {
    /// Capture time since the Unix epoch.
    pub timestamp: Duration,
    /// Length of the frame on the wire (may exceed `data.len()` if truncated by the snap length).
    pub orig_len: u32,
    /// The captured bytes.
    pub data: Vec<u8>,
}

/// Read and parse a pcap file.
pub fn read_file(path: impl AsRef<Path>) -> io::Result<Vec<PcapRecord>> {
    let bytes = std::fs::read(path)?;
    Ok(parse(&bytes)?)
}

fn u32_at(bytes: &[u8], at: usize, big_endian: bool) -> Result<u32, PcapError> {
    let raw: [u8; 4] = at
        .checked_add(4)
        .and_then(|end| bytes.get(at..end))
        .and_then(|s| s.try_into().ok())
        .ok_or(PcapError::Truncated)?;
    Ok(if big_endian {
        u32::from_be_bytes(raw)
    } else {
        u32::from_le_bytes(raw)
    })
}

/// Parse the bytes of a classic pcap file.
pub fn parse(bytes: &[u8]) -> Result<Vec<PcapRecord>, PcapError> {
    let magic = u32_at(bytes, 0, false)?;
    let (big_endian, nanos) = match magic {
        MAGIC_MICROS => (false, false),
        MAGIC_NANOS => (false, true),
        m if m.swap_bytes() == MAGIC_MICROS => (true, false),
        m if m.swap_bytes() == MAGIC_NANOS => (true, true),
        m => return Err(PcapError::BadMagic(m)),
    };
    if bytes.len() < GLOBAL_HEADER_LEN {
        return Err(PcapError::Truncated);
    }
    let link_type = u32_at(bytes, 20, big_endian)?;
    if link_type != LINKTYPE_ETHERNET {
        return Err(PcapError::UnsupportedLinkType(link_type));
    }
    let mut records = Vec::new();
    let mut at = GLOBAL_HEADER_LEN;
    while at < bytes.len() {
        let secs = u32_at(bytes, at, big_endian)?;
        let frac = u32_at(bytes, at + 4, big_endian)?;
        let incl_len = u32_at(bytes, at + 8, big_endian)?;
        let orig_len = u32_at(bytes, at + 12, big_endian)?;
        let start = at + RECORD_HEADER_LEN;
        let end = usize::try_from(incl_len)
            .ok()
            .and_then(|len| start.checked_add(len))
            .ok_or(PcapError::Truncated)?;
        let data = bytes.get(start..end).ok_or(PcapError::Truncated)?;
        let nanos_part = if nanos {
            frac
        } else {
            frac.checked_mul(1_000).ok_or(PcapError::BadTimestamp)?
        };
        if nanos_part >= 1_000_000_000 {
            return Err(PcapError::BadTimestamp);
        }
        records.push(PcapRecord {
            timestamp: Duration::new(u64::from(secs), nanos_part),
            orig_len,
            data: data.to_vec(),
        });
        at = end;
    }
    Ok(records)
}

/// Writes a little-endian, microsecond, Ethernet pcap file.
#[derive(Debug)]
pub struct Writer<W: Write> {
    out: W,
}

impl<W: Write> Writer<W> {
    /// Start a capture: writes the global header.
    pub fn new(mut out: W) -> io::Result<Writer<W>> {
        let mut header = Vec::with_capacity(GLOBAL_HEADER_LEN);
        header.extend_from_slice(&MAGIC_MICROS.to_le_bytes());
        header.extend_from_slice(&2u16.to_le_bytes()); // version 2.4
        header.extend_from_slice(&4u16.to_le_bytes());
        header.extend_from_slice(&0i32.to_le_bytes()); // thiszone
        header.extend_from_slice(&0u32.to_le_bytes()); // sigfigs
        header.extend_from_slice(&SNAPLEN.to_le_bytes());
        header.extend_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        out.write_all(&header)?;
        Ok(Writer { out })
    }

    /// Append one frame captured at `timestamp` (since the Unix epoch;
    /// seconds beyond `u32::MAX` are an error). Frames longer than the snap
    /// length are truncated in the file and keep their original length.
    pub fn write_packet(&mut self, timestamp: Duration, data: &[u8]) -> io::Result<()> {
        let secs = u32::try_from(timestamp.as_secs()).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "pcap timestamp beyond u32 seconds",
            )
        })?;
        let orig_len = u32::try_from(data.len()).unwrap_or(u32::MAX);
        let captured = data.get(..SNAPLEN as usize).unwrap_or(data);
        let mut header = [0u8; RECORD_HEADER_LEN];
        header[0..4].copy_from_slice(&secs.to_le_bytes());
        header[4..8].copy_from_slice(&timestamp.subsec_micros().to_le_bytes());
        header[8..12].copy_from_slice(&(captured.len() as u32).to_le_bytes());
        header[12..16].copy_from_slice(&orig_len.to_le_bytes());
        self.out.write_all(&header)?;
        self.out.write_all(captured)
    }

    /// Flush the underlying writer.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// Flush and return the underlying writer.
    pub fn into_inner(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_and_reads_back() {
        let mut w = Writer::new(Vec::new()).unwrap();
        w.write_packet(Duration::new(5, 123_456_000), b"frame one")
            .unwrap();
        w.write_packet(Duration::from_secs(6), b"").unwrap();
        let bytes = w.into_inner().unwrap();
        assert_eq!(bytes.len(), 24 + 16 + 9 + 16);
        let records = parse(&bytes).unwrap();
        assert_eq!(records.len(), 2);
        assert_eq!(records[0].timestamp, Duration::new(5, 123_456_000));
        assert_eq!(records[0].data, b"frame one");
        assert_eq!(records[0].orig_len, 9);
        assert!(records[1].data.is_empty());
        for len in 0..bytes.len() {
            let r = parse(&bytes[..len]);
            if len == 24 || len == 24 + 16 + 9 {
                assert!(r.is_ok());
            } else {
                assert_eq!(r, Err(PcapError::Truncated), "{len}");
            }
        }
    }

    #[test]
    fn reads_big_endian_nanosecond_files() {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&MAGIC_NANOS.to_be_bytes());
        bytes.extend_from_slice(&[0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0]);
        bytes.extend_from_slice(&SNAPLEN.to_be_bytes());
        bytes.extend_from_slice(&LINKTYPE_ETHERNET.to_be_bytes());
        for v in [7u32, 999_999_999, 2, 60] {
            bytes.extend_from_slice(&v.to_be_bytes());
        }
        bytes.extend_from_slice(&[0xAB, 0xCD]);
        let records = parse(&bytes).unwrap();
        assert_eq!(records[0].timestamp, Duration::new(7, 999_999_999));
        assert_eq!(records[0].orig_len, 60);
        assert_eq!(records[0].data, [0xAB, 0xCD]);
    }

    #[test]
    fn rejects_other_files() {
        assert_eq!(parse(b"GIF89a..."), Err(PcapError::BadMagic(0x3846_4947)));
        let mut bytes = Writer::new(Vec::new()).unwrap().into_inner().unwrap();
        bytes[20] = 101;
        assert_eq!(parse(&bytes), Err(PcapError::UnsupportedLinkType(101)));
        let mut w = Writer::new(Vec::new()).unwrap();
        w.write_packet(Duration::ZERO, b"x").unwrap();
        let mut bytes = w.into_inner().unwrap();
        bytes[28..32].copy_from_slice(&1_000_000u32.to_le_bytes());
        assert_eq!(parse(&bytes), Err(PcapError::BadTimestamp));
    }
}
