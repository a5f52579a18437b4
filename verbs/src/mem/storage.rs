//! Backings of a region: anonymous memory, huge pages, or a shared file.
//!
//! Every backing is one mapping with the same layout, viewed as `AtomicU64`
//! words (all offsets in bytes, all fields little-endian u64 words):
//!
//! ```text
//! 0     header (64 bytes)
//!         word 0  magic "DMKVMEM\0"
//!         word 1  format version (1)
//!         word 2  data length in bytes (multiple of 64, > 0)
//!         word 3  read order (0 ascending, 1 descending, 2 random); mutable
//!         word 4  number of 64-byte lines (= data length / 64)
//!         word 5  offset of the line versions (= 64)
//!         word 6  offset of the data (first multiple of 4096 after versions)
//!         word 7  total size in bytes (= data offset + data length)
//! 64    line versions: one seqlock word per data line
//! ...   zero padding up to a 4 KiB boundary
//! D     data: data length bytes, as little-endian words
//! ```
//!
//! Because the per-line synchronisation state lives in the mapping, a second
//! process that maps the same file gets exactly the same guarantees.
//! The creator writes the magic last (release), so a concurrent opener never
//! accepts a half-initialised header.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use memmap2::{MmapOptions, MmapRaw};

use super::{ReadOrder, RegionError};

/// Bytes per line, the unit of READ/WRITE atomicity.
pub const LINE_SIZE: u64 = 64;
/// Words per line.
pub(crate) const LINE_WORDS: usize = 8;
/// Magic number in header word 0.
pub(crate) const MAGIC: u64 = u64::from_le_bytes(*b"DMKVMEM\0");
/// The file format this build reads and writes.
pub const FORMAT_VERSION: u64 = 1;
const HEADER_BYTES: u64 = 64;
const DATA_ALIGN: u64 = 4096;
const HUGE_PAGE: u64 = 2 << 20;
/// The smallest page a mapping may use (what [`Storage::prefault`] steps by).
const PAGE_SIZE: u64 = 4096;

const W_MAGIC: usize = 0;
const W_VERSION: usize = 1;
const W_LEN: usize = 2;
pub(crate) const W_READ_ORDER: usize = 3;
const W_LINES: usize = 4;
const W_VERSIONS_OFF: usize = 5;
const W_DATA_OFF: usize = 6;
const W_TOTAL: usize = 7;

/// Where the parts of a region live inside its mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Data length in bytes (multiple of 64).
    pub len: u64,
    /// Number of lines.
    pub lines: u64,
    /// Byte offset of the version words.
    pub versions_off: u64,
    /// Byte offset of the data words.
    pub data_off: u64,
    /// Total mapping size in bytes.
    pub total: u64,
}

impl Layout {
    /// Layout for `len` data bytes (rounded up to whole lines); `None` if it
    /// overflows.
    pub(crate) fn for_len(len: u64) -> Option<Layout> {
        let len = len.checked_next_multiple_of(LINE_SIZE)?;
        let lines = len / LINE_SIZE;
        let versions_off = HEADER_BYTES;
        let versions_end = versions_off.checked_add(lines.checked_mul(8)?)?;
        let data_off = versions_end.checked_next_multiple_of(DATA_ALIGN)?;
        let total = data_off.checked_add(len)?;
        // The whole mapping must be addressable.
        usize::try_from(total).ok()?;
        Some(Layout {
            len,
            lines,
            versions_off,
            data_off,
            total,
        })
    }
}

/// What kind of memory backs a region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backing {
    /// Anonymous private memory (`mmap(MAP_ANONYMOUS)`).
    Anonymous,
    /// Anonymous 2 MiB huge pages (`MAP_HUGETLB`).
    HugePages,
    /// A shared file, e.g. under `/dev/shm`.
    File(PathBuf),
}

/// How [`Region::prefault`](super::Region::prefault) made a region's pages resident.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prefaulted {
    /// The kernel populated them (`MADV_POPULATE_WRITE`, for a file
    /// `MADV_POPULATE_READ`).
    Populated,
    /// The kernel lacks that advice: every page was touched once (an atomic add of
    /// zero, which changes nothing; for a file a load).
    Touched,
}

/// One mapping holding header, line versions and data.
pub(crate) struct Storage {
    map: MmapRaw,
    layout: Layout,
    backing: Backing,
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Storage")
            .field("layout", &self.layout)
            .field("backing", &self.backing)
            .finish()
    }
}

impl Storage {
    fn layout_for(len: usize) -> Result<Layout, RegionError> {
        if len == 0 {
            return Err(RegionError::Empty);
        }
        let len = len as u64;
        Layout::for_len(len).ok_or(RegionError::TooLarge(len))
    }

    /// Zeroed anonymous memory.
    pub(crate) fn anonymous(len: usize) -> Result<Storage, RegionError> {
        let layout = Self::layout_for(len)?;
        let size = layout.total as usize; // checked by Layout::for_len
        let map = MmapOptions::new()
            .len(size)
            .map_anon()
            .map_err(|source| RegionError::Map { len: size, source })?;
        Ok(Self::init(map.into(), layout, Backing::Anonymous))
    }

    /// Zeroed anonymous 2 MiB huge pages.
    pub(crate) fn anonymous_hugepages(len: usize) -> Result<Storage, RegionError> {
        let layout = Self::layout_for(len)?;
        let size = layout
            .total
            .checked_next_multiple_of(HUGE_PAGE)
            .and_then(|s| usize::try_from(s).ok())
            .ok_or(RegionError::TooLarge(len as u64))?;
        let map = MmapOptions::new()
            .len(size)
            .huge(Some(21))
            .map_anon()
            .map_err(|source| RegionError::HugePagesUnavailable { len: size, source })?;
        Ok(Self::init(map.into(), layout, Backing::HugePages))
    }

    /// Creates (replacing any existing file) a zeroed region file.
    pub(crate) fn create_file(path: &Path, len: usize) -> Result<Storage, RegionError> {
        let layout = Self::layout_for(len)?;
        let io_err = |source: io::Error| RegionError::Io {
            path: path.to_owned(),
            source,
        };
        // Unlink rather than truncate: processes that still map an old file
        // keep their (now private) inode instead of faulting on SIGBUS.
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(e)),
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(io_err)?;
        file.set_len(layout.total).map_err(io_err)?;
        let map = MmapRaw::map_raw(&file).map_err(io_err)?;
        Ok(Self::init(map, layout, Backing::File(path.to_owned())))
    }

    /// Maps an existing region file and validates its header.
    pub(crate) fn open_file(path: &Path) -> Result<Storage, RegionError> {
        let p = || path.to_owned();
        let io_err = |source: io::Error| RegionError::Io { path: p(), source };
        let file: File = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(io_err)?;
        let size = file.metadata().map_err(io_err)?.len();
        if size < HEADER_BYTES {
            return Err(RegionError::Truncated {
                path: p(),
                expected: HEADER_BYTES,
                actual: size,
            });
        }
        let map = MmapRaw::map_raw(&file).map_err(io_err)?;
        let header_only = Layout {
            len: 0,
            lines: 0,
            versions_off: HEADER_BYTES,
            data_off: HEADER_BYTES,
            total: HEADER_BYTES,
        };
        let storage = Storage {
            map,
            layout: header_only,
            backing: Backing::File(p()),
        };
        let h = storage.header();
        let magic = h[W_MAGIC].load(Ordering::Acquire);
        if magic != MAGIC {
            return Err(RegionError::BadMagic {
                path: p(),
                found: magic,
            });
        }
        let version = h[W_VERSION].load(Ordering::Relaxed);
        if version != FORMAT_VERSION {
            return Err(RegionError::UnsupportedVersion {
                path: p(),
                found: version,
                expected: FORMAT_VERSION,
            });
        }
        let corrupt = |reason| RegionError::CorruptHeader { path: p(), reason };
        let len = h[W_LEN].load(Ordering::Relaxed);
        if len == 0 || !len.is_multiple_of(LINE_SIZE) {
            return Err(corrupt("data length is zero or not a multiple of 64"));
        }
        let layout = Layout::for_len(len).ok_or_else(|| corrupt("data length too large"))?;
        if h[W_LINES].load(Ordering::Relaxed) != layout.lines
            || h[W_VERSIONS_OFF].load(Ordering::Relaxed) != layout.versions_off
            || h[W_DATA_OFF].load(Ordering::Relaxed) != layout.data_off
            || h[W_TOTAL].load(Ordering::Relaxed) != layout.total
        {
            return Err(corrupt("layout fields do not match the data length"));
        }
        if ReadOrder::from_code(h[W_READ_ORDER].load(Ordering::Relaxed)).is_none() {
            return Err(corrupt("unknown read order"));
        }
        if size < layout.total {
            return Err(RegionError::Truncated {
                path: p(),
                expected: layout.total,
                actual: size,
            });
        }
        Ok(Storage { layout, ..storage })
    }

    fn init(map: MmapRaw, layout: Layout, backing: Backing) -> Storage {
        let storage = Storage {
            map,
            layout,
            backing,
        };
        let h = storage.header();
        h[W_VERSION].store(FORMAT_VERSION, Ordering::Relaxed);
        h[W_LEN].store(layout.len, Ordering::Relaxed);
        h[W_READ_ORDER].store(ReadOrder::default().to_code(), Ordering::Relaxed);
        h[W_LINES].store(layout.lines, Ordering::Relaxed);
        h[W_VERSIONS_OFF].store(layout.versions_off, Ordering::Relaxed);
        h[W_DATA_OFF].store(layout.data_off, Ordering::Relaxed);
        h[W_TOTAL].store(layout.total, Ordering::Relaxed);
        h[W_MAGIC].store(MAGIC, Ordering::Release);
        storage
    }

    /// The whole mapping (up to `layout.total`) as words.
    fn words(&self) -> &[AtomicU64] {
        let words = (self.layout.total / 8) as usize;
        debug_assert!(words * 8 <= self.map.len());
        // SAFETY: the mapping is page aligned (so 8-byte aligned, as
        // `AtomicU64` requires), at least `layout.total` bytes long (checked
        // at construction: anonymous maps are created with that length, files
        // are checked against it), and stays mapped for the lifetime of
        // `self.map`, which outlives the returned borrow. `AtomicU64` has the
        // size and alignment of `u64` and every bit pattern is valid. The
        // memory is only ever accessed through atomic operations (by this
        // process and by any other process mapping the same file), so
        // creating a shared slice of atomics over it is sound; mutation
        // through `&AtomicU64` is interior mutability.
        unsafe { std::slice::from_raw_parts(self.map.as_mut_ptr().cast::<AtomicU64>(), words) }
    }

    /// Makes every page of the mapping resident now, as registering memory with an
    /// RDMA NIC pins it, so that no access later takes a first-touch page fault.
    /// Contents are unchanged. Anonymous memory is populated writable
    /// (`MADV_POPULATE_WRITE`), so that a WRITE to a page a READ touched first takes
    /// no copy-on-write fault either; a file's pages are read in
    /// (`MADV_POPULATE_READ`), which leaves them clean, so nothing is written back
    /// for it. Where the kernel lacks these (before Linux 5.14) every page is
    /// touched once instead: an atomic add of zero, or for a file a load.
    pub(crate) fn prefault(&self) -> Prefaulted {
        let file = matches!(self.backing, Backing::File(_));
        #[cfg(target_os = "linux")]
        {
            let advice = if file {
                memmap2::Advice::PopulateRead
            } else {
                memmap2::Advice::PopulateWrite
            };
            if self.map.advise(advice).is_ok() {
                return Prefaulted::Populated;
            }
        }
        let page_words = PAGE_SIZE as usize / 8;
        for word in self.words().iter().step_by(page_words) {
            if file {
                word.load(Ordering::Relaxed);
            } else {
                word.fetch_add(0, Ordering::Relaxed);
            }
        }
        Prefaulted::Touched
    }

    /// The eight header words.
    pub(crate) fn header(&self) -> &[AtomicU64] {
        self.words().get(..LINE_WORDS).unwrap_or(&[])
    }

    /// One version word per line.
    pub(crate) fn versions(&self) -> &[AtomicU64] {
        let start = (self.layout.versions_off / 8) as usize;
        let end = start + self.layout.lines as usize;
        self.words().get(start..end).unwrap_or(&[])
    }

    /// The data words.
    pub(crate) fn data(&self) -> &[AtomicU64] {
        let start = (self.layout.data_off / 8) as usize;
        let end = start + (self.layout.len / 8) as usize;
        self.words().get(start..end).unwrap_or(&[])
    }

    /// The first data byte (page aligned; `len()` bytes follow).
    pub(crate) fn data_ptr(&self) -> *mut u8 {
        self.data().as_ptr().cast::<u8>().cast_mut()
    }

    /// Data length in bytes.
    pub(crate) fn len(&self) -> u64 {
        self.layout.len
    }

    /// The kind of backing.
    pub(crate) fn backing(&self) -> &Backing {
        &self.backing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_rounds_and_aligns() {
        let l = Layout::for_len(1).unwrap();
        assert_eq!(l.len, 64);
        assert_eq!(l.lines, 1);
        assert_eq!(l.data_off, 4096);
        assert_eq!(l.total, 4096 + 64);
        let l = Layout::for_len(64 * 600).unwrap();
        assert_eq!(l.data_off, 8192); // 64 + 600 * 8 = 4864 -> 8192
        assert!(Layout::for_len(u64::MAX).is_none());
        assert!(Layout::for_len(u64::MAX - 100).is_none());
    }

    #[test]
    fn anonymous_is_zeroed_with_header() {
        let s = Storage::anonymous(100).unwrap();
        assert_eq!(s.len(), 128);
        assert_eq!(s.versions().len(), 2);
        assert_eq!(s.data().len(), 16);
        assert!(s.data().iter().all(|w| w.load(Ordering::Relaxed) == 0));
        assert_eq!(s.header()[W_MAGIC].load(Ordering::Relaxed), MAGIC);
        assert!(matches!(Storage::anonymous(0), Err(RegionError::Empty)));
        assert!(matches!(
            Storage::anonymous(usize::MAX),
            Err(RegionError::TooLarge(_))
        ));
    }
}
