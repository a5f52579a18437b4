//! A registered block of memory with the memory semantics of RDMA over PCIe.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use super::read_order::for_each_line;
use super::seqlock;
use super::storage::{Backing, LINE_SIZE, LINE_WORDS, Prefaulted, Storage, W_READ_ORDER};
use super::{AccessError, LineGap, ReadOrder, RegionError};

/// A block of memory that verbs operate on, addressed by byte offset.
///
/// The length is rounded up to a multiple of 64 bytes. The memory is a
/// sequence of `AtomicU64` words; its byte image is little-endian per word
/// (byte `i` is byte `i % 8` of `word[i / 8].to_le_bytes()`), so an atomic
/// sees the 8 bytes at an aligned offset as a little-endian `u64`, as an x86
/// NIC does.
///
/// Semantics (`docs/architecture.md`, memory semantics):
///
/// * [`compare_swap`](Region::compare_swap) and
///   [`fetch_add`](Region::fetch_add) on 8-byte aligned words are atomic;
///   misaligned offsets are refused.
/// * Every aligned 64-byte line is read and written atomically (a per-line
///   seqlock, see the `seqlock` module); atomics take the same line lock, so
///   a READ never observes a line half-written by anything.
/// * A [`write`](Region::write) lands its lines in ascending address order,
///   each line atomically; different lines are not atomic with each other.
/// * A multi-line [`read`](Region::read) observes its lines in the region's
///   [`ReadOrder`], each line atomically. The [`LineGap`] knob can widen the
///   window between two lines on purpose.
/// * Partial-line accesses (unaligned start or length) keep per-line
///   atomicity for the bytes of each line they touch.
///
/// Every method checks bounds (overflow-safe) and returns an
/// [`AccessError`] instead of panicking; a refused access touches nothing.
/// A zero-length read or write at any offset up to and including
/// [`len`](Region::len) succeeds.
///
/// A `Region` serves both the memory node (through
/// [`MemoryTable`](super::MemoryTable)) and client-side transports that
/// apply verbs directly (`local`, `shm`).
#[derive(Debug)]
pub struct Region {
    storage: Storage,
    /// This mapping's [`LineGap`], encoded; process-local, not in the header.
    line_gap: AtomicU64,
}

impl Region {
    fn from_storage(storage: Storage) -> Region {
        Region {
            storage,
            line_gap: AtomicU64::new(LineGap::None.to_code()),
        }
    }

    /// The address of the first data byte, for registering the data with an RDMA NIC
    /// (the `rdma` serving path of a memory node); [`len`](Region::len) bytes follow,
    /// page aligned, mapped for as long as the region lives.
    ///
    /// Whatever writes through this address bypasses the per-line seqlocks: a NIC's
    /// accesses keep the NIC's own (PCIe) atomicity, not this type's. On a
    /// little-endian host the bytes are the byte image described above.
    pub fn data_ptr(&self) -> *mut u8 {
        self.storage.data_ptr()
    }

    /// Zeroed anonymous memory of at least `len` bytes (rounded up to a
    /// multiple of 64). Fails for `len == 0`.
    pub fn anonymous(len: usize) -> Result<Region, RegionError> {
        Storage::anonymous(len).map(Region::from_storage)
    }

    /// Zeroed anonymous memory on 2 MiB huge pages (`MAP_HUGETLB`). Fails
    /// with [`RegionError::HugePagesUnavailable`] when the kernel has no
    /// huge pages reserved; callers can fall back to
    /// [`Region::anonymous`].
    pub fn anonymous_hugepages(len: usize) -> Result<Region, RegionError> {
        Storage::anonymous_hugepages(len).map(Region::from_storage)
    }

    /// Creates a shared region file at `path` (e.g. under `/dev/shm`) with
    /// at least `len` zeroed data bytes. An existing file at `path` is
    /// unlinked first (processes still mapping it keep the old contents).
    ///
    /// The file holds a header, all per-line synchronisation state and the
    /// data (layout in the `storage` module), so other processes that
    /// [`open_file`](Region::open_file) it get the same atomicity guarantees.
    pub fn create_file(path: &Path, len: usize) -> Result<Region, RegionError> {
        Storage::create_file(path, len).map(Region::from_storage)
    }

    /// Maps an existing region file created by
    /// [`create_file`](Region::create_file), validating its header (magic,
    /// format version, layout, size).
    ///
    /// The file must not be truncated by anyone while it is mapped (the
    /// kernel would deliver SIGBUS on access).
    pub fn open_file(path: &Path) -> Result<Region, RegionError> {
        Storage::open_file(path).map(Region::from_storage)
    }

    /// Releases every line lock left taken (an odd line version) by a process that
    /// died while it wrote the line, and returns how many there were.
    ///
    /// Only for the sole user of a region file reopened with
    /// [`open_file`](Region::open_file) (a memory node restarting on its region
    /// file) before it serves anyone: a line locked by a live writer would be
    /// released under it. The line keeps whatever bytes the dead writer stored.
    pub fn release_abandoned_line_locks(&self) -> u64 {
        let mut released = 0;
        for version in self.storage.versions() {
            let v = version.load(Ordering::Acquire);
            if v & 1 == 1 {
                version.store(v.wrapping_add(1), Ordering::Release);
                released += 1;
            }
        }
        released
    }

    /// Makes every page of the region resident now, as registering memory with an
    /// RDMA NIC pins it: later accesses take no first-touch page fault, and in
    /// anonymous memory a WRITE to a page that was only read takes no copy-on-write
    /// fault. Contents are unchanged (a file's pages are read in and stay clean), so
    /// it may be called on a reopened region file and at any time (concurrent
    /// accesses are unaffected). Takes about a second per few GiB; the memory is
    /// committed from then on.
    pub fn prefault(&self) -> Prefaulted {
        self.storage.prefault()
    }

    /// Length in bytes (a multiple of 64).
    pub fn len(&self) -> u64 {
        self.storage.len()
    }

    /// Always false: regions hold at least one line.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What backs this region.
    pub fn backing(&self) -> &Backing {
        self.storage.backing()
    }

    /// The order in which multi-line reads observe lines. For a file region
    /// this is stored in the shared header, so all processes see it.
    pub fn read_order(&self) -> ReadOrder {
        self.storage
            .header()
            .get(W_READ_ORDER)
            .and_then(|w| ReadOrder::from_code(w.load(Ordering::Relaxed)))
            .unwrap_or_default()
    }

    /// Sets the order in which multi-line reads observe lines.
    pub fn set_read_order(&self, order: ReadOrder) {
        if let Some(w) = self.storage.header().get(W_READ_ORDER) {
            w.store(order.to_code(), Ordering::Relaxed);
        }
    }

    /// The pause between two lines of a multi-line read (this mapping only).
    pub fn line_gap(&self) -> LineGap {
        LineGap::from_code(self.line_gap.load(Ordering::Relaxed))
    }

    /// Sets the pause between two lines of a multi-line read, to widen the
    /// window in which a concurrent WRITE can land between them (see
    /// [`LineGap`]). Applies to reads through this `Region` value only.
    pub fn set_line_gap(&self, gap: LineGap) {
        self.line_gap.store(gap.to_code(), Ordering::Relaxed);
    }

    /// Checks that `[offset, offset + len)` lies inside the region.
    pub fn check_range(&self, offset: u64, len: u64) -> Result<(), AccessError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len() => Ok(()),
            _ => Err(AccessError::OutOfBounds { va: offset, len }),
        }
    }

    /// Checks that an 8-byte atomic at `offset` is in bounds and aligned.
    pub fn check_atomic(&self, offset: u64) -> Result<(), AccessError> {
        self.check_range(offset, 8)?;
        if !offset.is_multiple_of(8) {
            return Err(AccessError::Misaligned { va: offset });
        }
        Ok(())
    }

    /// Reads `buf.len()` bytes at `offset`, observing lines in the region's
    /// [`read_order`](Region::read_order).
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), AccessError> {
        self.read_with_order(offset, buf, self.read_order())
    }

    /// Reads `buf.len()` bytes at `offset`, observing lines in `order`; each
    /// line is atomic, lines are not atomic with each other.
    pub fn read_with_order(
        &self,
        offset: u64,
        buf: &mut [u8],
        order: ReadOrder,
    ) -> Result<(), AccessError> {
        let len = buf.len() as u64;
        self.check_range(offset, len)?;
        if len == 0 {
            return Ok(());
        }
        let end = offset + len; // checked above
        let first = offset / LINE_SIZE;
        let lines = (end - 1) / LINE_SIZE - first + 1;
        let gap = self.line_gap();
        let (versions, data) = (self.storage.versions(), self.storage.data());
        let mut started = false;
        for_each_line::<AccessError>(order, lines, |i| {
            if started {
                gap.pause();
            }
            started = true;
            let line = first + i;
            let (lo, hi) = clip(line, offset, end);
            let (w0, w1) = ((lo / 8) as usize, hi.div_ceil(8) as usize);
            let (Some(version), Some(words)) = (versions.get(line as usize), data.get(w0..w1))
            else {
                return Err(AccessError::OutOfBounds { va: offset, len });
            };
            let src = (lo - w0 as u64 * 8) as usize;
            let dst = (lo - offset) as usize;
            let n = (hi - lo) as usize;
            if src == 0 && n.is_multiple_of(8) {
                // Whole words (every line of an aligned read): load them straight
                // into the caller's buffer; a retried read rewrites them all.
                if let Some(d) = buf.get_mut(dst..dst + n) {
                    seqlock::read(version, || {
                        for (chunk, w) in d.chunks_exact_mut(8).zip(words) {
                            chunk.copy_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
                        }
                    });
                }
                return Ok(());
            }
            let mut tmp = [0u64; LINE_WORDS];
            seqlock::read(version, || {
                for (t, w) in tmp.iter_mut().zip(words) {
                    *t = w.load(Ordering::Relaxed);
                }
            });
            let mut bytes = [0u8; LINE_SIZE as usize];
            for (chunk, t) in bytes.chunks_exact_mut(8).zip(&tmp) {
                chunk.copy_from_slice(&t.to_le_bytes());
            }
            if let (Some(d), Some(s)) = (buf.get_mut(dst..dst + n), bytes.get(src..src + n)) {
                d.copy_from_slice(s);
            }
            Ok(())
        })
    }

    /// Writes `data` at `offset`: lines land in ascending address order,
    /// each line atomically.
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<(), AccessError> {
        let len = data.len() as u64;
        self.check_range(offset, len)?;
        if len == 0 {
            return Ok(());
        }
        let end = offset + len; // checked above
        let (versions, words) = (self.storage.versions(), self.storage.data());
        for line in offset / LINE_SIZE..=(end - 1) / LINE_SIZE {
            let (lo, hi) = clip(line, offset, end);
            let Some(version) = versions.get(line as usize) else {
                return Err(AccessError::OutOfBounds { va: offset, len });
            };
            let _guard = seqlock::lock(version);
            let mut w = lo / 8;
            while w * 8 < hi {
                let (ws, we) = (w * 8, w * 8 + 8);
                let (a, b) = (lo.max(ws), hi.min(we));
                if let (Some(word), Some(src)) = (
                    words.get(w as usize),
                    data.get((a - offset) as usize..(b - offset) as usize),
                ) {
                    let mut bytes = if a == ws && b == we {
                        [0u8; 8]
                    } else {
                        word.load(Ordering::Relaxed).to_le_bytes()
                    };
                    bytes[(a - ws) as usize..(b - ws) as usize].copy_from_slice(src);
                    word.store(u64::from_le_bytes(bytes), Ordering::Relaxed);
                }
                w += 1;
            }
        }
        Ok(())
    }

    /// Runs `op` on the aligned word at `offset` while holding its line.
    fn with_word<R>(
        &self,
        offset: u64,
        op: impl FnOnce(&AtomicU64) -> R,
    ) -> Result<R, AccessError> {
        self.check_atomic(offset)?;
        let (Some(version), Some(word)) = (
            self.storage.versions().get((offset / LINE_SIZE) as usize),
            self.storage.data().get((offset / 8) as usize),
        ) else {
            return Err(AccessError::OutOfBounds { va: offset, len: 8 });
        };
        let _guard = seqlock::lock(version);
        Ok(op(word))
    }

    /// Atomic compare-and-swap of the 8-byte aligned word at `offset`:
    /// stores `swap` if the word equals `compare`; returns the original.
    pub fn compare_swap(&self, offset: u64, compare: u64, swap: u64) -> Result<u64, AccessError> {
        self.with_word(offset, |w| {
            let old = w.load(Ordering::Relaxed);
            if old == compare {
                w.store(swap, Ordering::Relaxed);
            }
            old
        })
    }

    /// Atomic wrapping fetch-and-add on the 8-byte aligned word at
    /// `offset`; returns the original.
    pub fn fetch_add(&self, offset: u64, add: u64) -> Result<u64, AccessError> {
        self.with_word(offset, |w| {
            let old = w.load(Ordering::Relaxed);
            w.store(old.wrapping_add(add), Ordering::Relaxed);
            old
        })
    }

    /// Reads the 8-byte aligned word at `offset` (little-endian) atomically.
    pub fn load_word(&self, offset: u64) -> Result<u64, AccessError> {
        self.check_atomic(offset)?;
        let (Some(version), Some(word)) = (
            self.storage.versions().get((offset / LINE_SIZE) as usize),
            self.storage.data().get((offset / 8) as usize),
        ) else {
            return Err(AccessError::OutOfBounds { va: offset, len: 8 });
        };
        Ok(seqlock::read(version, || word.load(Ordering::Relaxed)))
    }

    /// Writes the 8-byte aligned word at `offset` (little-endian)
    /// atomically; serialized with atomics and writes of its line.
    pub fn store_word(&self, offset: u64, value: u64) -> Result<(), AccessError> {
        self.with_word(offset, |w| w.store(value, Ordering::Relaxed))
    }
}

/// The bytes `[lo, hi)` of `line` that the access `[offset, end)` touches.
fn clip(line: u64, offset: u64, end: u64) -> (u64, u64) {
    let start = line * LINE_SIZE;
    (offset.max(start), end.min(start + LINE_SIZE))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How many of the `len` bytes at `ptr` are in resident pages.
    fn resident_pages(ptr: *mut u8, len: usize) -> usize {
        let page = 4096;
        let mut vec = vec![0u8; len.div_ceil(page)];
        // SAFETY: `ptr` is the page-aligned start of a live mapping of at least
        // `len` bytes and `vec` has one byte per page of it, as mincore(2) requires.
        let rc = unsafe { libc::mincore(ptr.cast(), len, vec.as_mut_ptr()) };
        assert_eq!(rc, 0, "mincore: {}", std::io::Error::last_os_error());
        vec.iter().filter(|v| **v & 1 == 1).count()
    }

    #[test]
    fn prefault_makes_every_page_resident_and_keeps_the_contents() {
        let len = 8 << 20;
        let r = Region::anonymous(len).unwrap();
        r.write(3 * 4096 + 5, b"kept").unwrap();
        r.store_word(len as u64 - 8, 0xDEAD_BEEF).unwrap();
        assert!(resident_pages(r.data_ptr(), len) < len / 4096 / 2);
        let how = r.prefault();
        assert!(matches!(how, Prefaulted::Populated | Prefaulted::Touched));
        assert_eq!(resident_pages(r.data_ptr(), len), len / 4096);
        let mut b = [0u8; 4];
        r.read(3 * 4096 + 5, &mut b).unwrap();
        assert_eq!(&b, b"kept");
        assert_eq!(r.load_word(len as u64 - 8).unwrap(), 0xDEAD_BEEF);
        assert_eq!(r.load_word(4096).unwrap(), 0);
    }

    #[test]
    fn prefault_of_a_reopened_file_keeps_what_it_holds() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("region");
        let len = 1 << 20;
        {
            let r = Region::create_file(&path, len).unwrap();
            r.write(70_000, b"persisted").unwrap();
        }
        let r = Region::open_file(&path).unwrap();
        r.prefault();
        assert_eq!(resident_pages(r.data_ptr(), len), len / 4096);
        let mut b = [0u8; 9];
        r.read(70_000, &mut b).unwrap();
        assert_eq!(&b, b"persisted");
    }

    #[test]
    fn byte_image_is_little_endian_per_word() {
        let r = Region::anonymous(64).unwrap();
        r.store_word(8, 0x0807_0605_0403_0201).unwrap();
        let mut b = [0u8; 8];
        r.read(8, &mut b).unwrap();
        assert_eq!(b, [1, 2, 3, 4, 5, 6, 7, 8]);
        r.write(16, &[0xAA, 0xBB]).unwrap();
        assert_eq!(r.load_word(16).unwrap(), 0xBBAA);
        assert_eq!(r.fetch_add(16, 1).unwrap(), 0xBBAA);
        assert_eq!(r.load_word(16).unwrap(), 0xBBAB);
    }

    proptest::proptest! {
        /// Reads of any range, in any line order, return what a byte-array model
        /// holds after the same writes (word-aligned lines are copied straight into
        /// the caller's buffer, partial ones through a line image).
        #[test]
        fn reads_match_a_byte_model(
            writes in proptest::collection::vec((0u64..300, proptest::collection::vec(proptest::prelude::any::<u8>(), 0..150)), 0..12),
            reads in proptest::collection::vec((0u64..320, 0usize..330), 1..12),
        ) {
            let r = Region::anonymous(320).unwrap();
            let mut model = vec![0u8; 320];
            for (at, data) in &writes {
                let end = (*at as usize + data.len()).min(320);
                let data = &data[..end - *at as usize];
                r.write(*at, data).unwrap();
                model[*at as usize..end].copy_from_slice(data);
            }
            for (i, (at, len)) in reads.iter().enumerate() {
                let len = (*len).min(320 - *at as usize);
                let order = [ReadOrder::Ascending, ReadOrder::Descending, ReadOrder::Random][i % 3];
                let mut back = vec![0xEEu8; len];
                r.read_with_order(*at, &mut back, order).unwrap();
                proptest::prop_assert_eq!(&back[..], &model[*at as usize..*at as usize + len]);
            }
        }
    }

    #[test]
    fn rounds_up_to_lines() {
        assert_eq!(Region::anonymous(1).unwrap().len(), 64);
        assert_eq!(Region::anonymous(64).unwrap().len(), 64);
        assert_eq!(Region::anonymous(65).unwrap().len(), 128);
    }

    #[test]
    fn partial_and_spanning_writes() {
        let r = Region::anonymous(256).unwrap();
        let data: Vec<u8> = (0..200u8).collect();
        r.write(3, &data).unwrap();
        let mut back = vec![0u8; 256];
        for order in [
            ReadOrder::Ascending,
            ReadOrder::Descending,
            ReadOrder::Random,
        ] {
            r.read_with_order(0, &mut back, order).unwrap();
            assert_eq!(&back[..3], &[0, 0, 0]);
            assert_eq!(&back[3..203], &data[..]);
            assert!(back[203..].iter().all(|&b| b == 0));
            let mut mid = [0u8; 70];
            r.read_with_order(61, &mut mid, order).unwrap();
            assert_eq!(&mid[..], &back[61..131]);
        }
    }

    #[test]
    fn errors_and_zero_length() {
        let r = Region::anonymous(128).unwrap();
        let mut b = [0u8; 1];
        assert!(r.read(128, &mut []).is_ok());
        assert!(r.write(128, &[]).is_ok());
        assert_eq!(
            r.read(129, &mut []),
            Err(AccessError::OutOfBounds { va: 129, len: 0 })
        );
        assert_eq!(
            r.read(128, &mut b),
            Err(AccessError::OutOfBounds { va: 128, len: 1 })
        );
        assert_eq!(
            r.write(u64::MAX, &[1]),
            Err(AccessError::OutOfBounds {
                va: u64::MAX,
                len: 1
            })
        );
        assert_eq!(r.fetch_add(4, 1), Err(AccessError::Misaligned { va: 4 }));
        assert_eq!(r.compare_swap(120, 0, 1), Ok(0));
        assert_eq!(
            r.compare_swap(124, 0, 1),
            Err(AccessError::OutOfBounds { va: 124, len: 8 })
        );
        assert_eq!(
            r.load_word(u64::MAX - 7),
            Err(AccessError::OutOfBounds {
                va: u64::MAX - 7,
                len: 8
            })
        );
        assert_eq!(r.store_word(9, 1), Err(AccessError::Misaligned { va: 9 }));
    }

    #[test]
    fn settings() {
        let r = Region::anonymous(64).unwrap();
        assert_eq!(r.read_order(), ReadOrder::Ascending);
        r.set_read_order(ReadOrder::Random);
        assert_eq!(r.read_order(), ReadOrder::Random);
        assert_eq!(r.line_gap(), LineGap::None);
        r.set_line_gap(LineGap::Spin(5));
        assert_eq!(r.line_gap(), LineGap::Spin(5));
        assert_eq!(r.backing(), &Backing::Anonymous);
    }

    #[test]
    fn abandoned_line_locks_are_released_and_the_bytes_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("region");
        let r = Region::create_file(&path, 256).unwrap();
        r.write(64, &[7u8; 64]).unwrap();
        // A writer that died holding line 1: its version stays odd.
        std::mem::forget(seqlock::lock(&r.storage.versions()[1]));
        drop(r);
        let r = Region::open_file(&path).unwrap();
        assert_eq!(r.release_abandoned_line_locks(), 1);
        assert_eq!(r.release_abandoned_line_locks(), 0);
        let mut b = [0u8; 64];
        r.read(64, &mut b).unwrap();
        assert_eq!(b, [7u8; 64]);
        r.write(64, &[9u8; 8]).unwrap();
        assert_eq!(r.load_word(64).unwrap(), u64::from_le_bytes([9; 8]));
    }

    #[test]
    fn cas_swaps_only_if_equal() {
        let r = Region::anonymous(64).unwrap();
        assert_eq!(r.compare_swap(0, 1, 5).unwrap(), 0);
        assert_eq!(r.load_word(0).unwrap(), 0);
        assert_eq!(r.compare_swap(0, 0, 5).unwrap(), 0);
        assert_eq!(r.load_word(0).unwrap(), 5);
        r.store_word(0, u64::MAX).unwrap();
        assert_eq!(r.fetch_add(0, 2).unwrap(), u64::MAX);
        assert_eq!(r.load_word(0).unwrap(), 1);
    }
}
