//! Errors of memory accesses and of region construction / registration.

use std::io;
use std::path::PathBuf;

use super::AccessFlags;

/// Why a memory access (READ, WRITE, CAS, FAA) was refused.
///
/// A refused access never touches memory. Every variant corresponds to the
/// way a hardware responder reacts: all of them are answered with
/// NAK *remote access error*, except a misaligned atomic, which hardware
/// reports as NAK *invalid request* (see [`AccessError::is_invalid_request`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AccessError {
    /// No region with this rkey is registered.
    #[error("unknown rkey {0:#010x}")]
    UnknownRkey(u32),
    /// The range `[va, va + len)` is not entirely inside the region (this
    /// includes ranges whose end overflows `u64`). For region-relative
    /// methods `va` is the offset inside the region.
    #[error("access of {len} bytes at {va:#x} is out of bounds")]
    OutOfBounds {
        /// First address (or region offset) of the access.
        va: u64,
        /// Length of the access in bytes.
        len: u64,
    },
    /// An atomic targeted an address that is not 8-byte aligned.
    #[error("atomic at {va:#x} is not 8-byte aligned")]
    Misaligned {
        /// Address (or region offset) of the atomic.
        va: u64,
    },
    /// The region was not registered with the rights this access needs.
    #[error("region does not grant {needed} access")]
    AccessDenied {
        /// The rights the access needed.
        needed: AccessFlags,
    },
}

impl AccessError {
    /// True if a hardware responder answers this with NAK *invalid request*
    /// (only misaligned atomics); every other error is NAK *remote access
    /// error*.
    pub fn is_invalid_request(&self) -> bool {
        matches!(self, AccessError::Misaligned { .. })
    }

    /// True if a hardware responder answers this with NAK *remote access
    /// error*; the complement of [`AccessError::is_invalid_request`].
    pub fn is_remote_access_error(&self) -> bool {
        !self.is_invalid_request()
    }
}

/// Why a region could not be created, opened or registered.
#[derive(Debug, thiserror::Error)]
pub enum RegionError {
    /// Regions must hold at least one byte.
    #[error("a region must not be empty")]
    Empty,
    /// The requested length does not fit the address space.
    #[error("region length {0} is too large")]
    TooLarge(u64),
    /// Anonymous mapping failed.
    #[error("cannot map {len} bytes of anonymous memory: {source}")]
    Map {
        /// Bytes that were requested.
        len: usize,
        /// The operating system error.
        source: io::Error,
    },
    /// `MAP_HUGETLB` failed: no (or not enough) huge pages are reserved, or
    /// the kernel lacks support. Fall back to [`super::Region::anonymous`].
    #[error(
        "cannot map {len} bytes of 2 MiB huge pages ({source}); reserve pages via /proc/sys/vm/nr_hugepages or use anonymous memory"
    )]
    HugePagesUnavailable {
        /// Bytes that were requested (rounded up to whole huge pages).
        len: usize,
        /// The operating system error.
        source: io::Error,
    },
    /// A file operation on a shared-memory region file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The region file.
        path: PathBuf,
        /// The operating system error.
        source: io::Error,
    },
    /// The file does not start with the region magic number.
    #[error("{}: not a dmkv region file (magic {found:#018x})", path.display())]
    BadMagic {
        /// The region file.
        path: PathBuf,
        /// The first 8 bytes of the file, as a little-endian u64.
        found: u64,
    },
    /// The file was written by an incompatible format version.
    #[error("{}: unsupported region format version {found} (expected {expected})", path.display())]
    UnsupportedVersion {
        /// The region file.
        path: PathBuf,
        /// Version found in the header.
        found: u64,
        /// Version this build understands.
        expected: u64,
    },
    /// The file is shorter than its header (or the header itself) requires.
    #[error("{}: truncated region file ({actual} bytes, need {expected})", path.display())]
    Truncated {
        /// The region file.
        path: PathBuf,
        /// Bytes the header requires.
        expected: u64,
        /// Bytes the file has.
        actual: u64,
    },
    /// The header is inconsistent (bad length, layout or read order).
    #[error("{}: corrupt region header: {reason}", path.display())]
    CorruptHeader {
        /// The region file.
        path: PathBuf,
        /// What is wrong.
        reason: &'static str,
    },
    /// The virtual address range would wrap around the 64-bit address space.
    #[error("region at {base_va:#x} of {len} bytes wraps around the address space")]
    AddressOverflow {
        /// Requested base address.
        base_va: u64,
        /// Region length.
        len: u64,
    },
    /// The base virtual address is not 64-byte aligned.
    #[error("region base address {base_va:#x} is not 64-byte aligned")]
    MisalignedBase {
        /// Requested base address.
        base_va: u64,
    },
    /// The virtual address range overlaps a region already registered.
    #[error("region at {base_va:#x} of {len} bytes overlaps region with rkey {rkey:#010x}")]
    Overlap {
        /// Requested base address.
        base_va: u64,
        /// Region length.
        len: u64,
        /// Rkey of the region it overlaps.
        rkey: u32,
    },
    /// No unused rkey could be found.
    #[error("no free rkey")]
    NoFreeRkey,
}
