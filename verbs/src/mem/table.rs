//! The registry of regions a memory node serves.

use std::sync::{Arc, RwLock, RwLockReadGuard};

use rand::Rng;

use super::rng::with_rng;

use super::{AccessError, AccessFlags, NicLockTable, ReadOrder, Region, RegionError, RemoteMemory};

/// Base addresses must be aligned to a line, so that lines in the virtual
/// address space are the region's lines.
pub const BASE_VA_ALIGN: u64 = 64;

/// Attempts at drawing an unused random rkey before giving up.
const RKEY_ATTEMPTS: usize = 1024;

/// What a registration grants, as a client needs to know it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionInfo {
    /// The remote key (random, non-zero, unique in the table).
    pub rkey: u32,
    /// Virtual address of the first byte.
    pub base_va: u64,
    /// Length in bytes.
    pub len: u64,
    /// Rights granted to remote peers.
    pub flags: AccessFlags,
    /// The region's read order at the time this info was taken.
    pub read_order: ReadOrder,
}

#[derive(Debug)]
struct Entry {
    rkey: u32,
    base_va: u64,
    len: u64,
    flags: AccessFlags,
    region: Arc<Region>,
}

impl Entry {
    fn info(&self) -> RegionInfo {
        RegionInfo {
            rkey: self.rkey,
            base_va: self.base_va,
            len: self.len,
            flags: self.flags,
            read_order: self.region.read_order(),
        }
    }

    /// Checks rights and bounds of `[va, va + len)`; returns the region
    /// offset of `va`.
    fn offset(&self, va: u64, len: u64, needed: AccessFlags) -> Result<u64, AccessError> {
        if !self.flags.contains(needed) {
            return Err(AccessError::AccessDenied { needed });
        }
        let oob = AccessError::OutOfBounds { va, len };
        let offset = va.checked_sub(self.base_va).ok_or(oob.clone())?;
        match offset.checked_add(len) {
            Some(end) if end <= self.len => {}
            _ => return Err(oob),
        }
        if needed.contains(AccessFlags::REMOTE_ATOMIC) && !va.is_multiple_of(8) {
            return Err(AccessError::Misaligned { va });
        }
        Ok(offset)
    }
}

/// The regions a memory node serves, addressed by `(rkey, va)`.
///
/// Checks happen in this order: rkey ([`AccessError::UnknownRkey`]),
/// rights ([`AccessError::AccessDenied`]), bounds
/// ([`AccessError::OutOfBounds`], overflow-safe), and for atomics alignment
/// ([`AccessError::Misaligned`]). Lookups take a shared read lock and do not
/// allocate. With a [`NicLockTable`], every atomic goes through its slot.
#[derive(Debug, Default)]
pub struct MemoryTable {
    entries: RwLock<Vec<Entry>>,
    lock_table: Option<NicLockTable>,
}

impl MemoryTable {
    /// An empty table without a NIC lock table model.
    pub fn new() -> MemoryTable {
        MemoryTable::default()
    }

    /// Routes all atomics through `table` (the NIC's atomic lock table).
    pub fn with_lock_table(mut self, table: NicLockTable) -> MemoryTable {
        self.lock_table = Some(table);
        self
    }

    /// The NIC lock table model, if any (for its counters).
    pub fn lock_table(&self) -> Option<&NicLockTable> {
        self.lock_table.as_ref()
    }

    fn entries(&self) -> RwLockReadGuard<'_, Vec<Entry>> {
        // A panic while holding the lock cannot leave the Vec inconsistent
        // (registration pushes or removes whole entries), so poisoning is
        // ignored.
        self.entries.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers `region` at virtual addresses `[base_va, base_va + len)`
    /// granting `flags`, and returns its info with a fresh random non-zero
    /// rkey. `base_va` must be 64-byte aligned; the range must not wrap
    /// around or overlap another registered region. A region may be
    /// registered several times (at disjoint addresses).
    pub fn register(
        &self,
        region: Arc<Region>,
        base_va: u64,
        flags: AccessFlags,
    ) -> Result<RegionInfo, RegionError> {
        self.insert(region, base_va, flags, None)
    }

    /// Registers `region` like [`MemoryTable::register`] but under a given
    /// rkey — how a client mirrors a memory node's registration when it maps
    /// the node's shared-memory region itself. The rkey must be non-zero and
    /// not in use.
    pub fn register_with_rkey(
        &self,
        region: Arc<Region>,
        base_va: u64,
        flags: AccessFlags,
        rkey: u32,
    ) -> Result<RegionInfo, RegionError> {
        self.insert(region, base_va, flags, Some(rkey))
    }

    fn insert(
        &self,
        region: Arc<Region>,
        base_va: u64,
        flags: AccessFlags,
        wanted: Option<u32>,
    ) -> Result<RegionInfo, RegionError> {
        let len = region.len();
        if !base_va.is_multiple_of(BASE_VA_ALIGN) {
            return Err(RegionError::MisalignedBase { base_va });
        }
        let end = base_va
            .checked_add(len)
            .ok_or(RegionError::AddressOverflow { base_va, len })?;
        let mut entries = self.entries.write().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = entries
            .iter()
            .find(|e| base_va < e.base_va + e.len && e.base_va < end)
        {
            return Err(RegionError::Overlap {
                base_va,
                len,
                rkey: e.rkey,
            });
        }
        let free = |k: u32| k != 0 && entries.iter().all(|e| e.rkey != k);
        let rkey = match wanted {
            Some(k) if free(k) => k,
            Some(_) => return Err(RegionError::NoFreeRkey),
            None => with_rng(|rng| {
                (0..RKEY_ATTEMPTS)
                    .map(|_| rng.random::<u32>())
                    .find(|&k| free(k))
            })
            .ok_or(RegionError::NoFreeRkey)?,
        };
        let entry = Entry {
            rkey,
            base_va,
            len,
            flags,
            region,
        };
        let info = entry.info();
        entries.push(entry);
        Ok(info)
    }

    /// Removes the registration of `rkey`; false if there was none.
    /// In-flight accesses finish first (they hold the table's read lock).
    pub fn deregister(&self, rkey: u32) -> bool {
        let mut entries = self.entries.write().unwrap_or_else(|e| e.into_inner());
        let before = entries.len();
        entries.retain(|e| e.rkey != rkey);
        entries.len() != before
    }

    /// All registrations, in registration order.
    pub fn regions(&self) -> Vec<RegionInfo> {
        self.entries().iter().map(Entry::info).collect()
    }

    /// The info of `rkey`'s registration.
    pub fn info(&self, rkey: u32) -> Option<RegionInfo> {
        self.entries()
            .iter()
            .find(|e| e.rkey == rkey)
            .map(Entry::info)
    }

    /// The region registered under `rkey`.
    pub fn region(&self, rkey: u32) -> Option<Arc<Region>> {
        self.entries()
            .iter()
            .find(|e| e.rkey == rkey)
            .map(|e| e.region.clone())
    }

    /// Validates the access and runs `op` on the region and offset.
    fn access<R>(
        &self,
        rkey: u32,
        va: u64,
        len: u64,
        needed: AccessFlags,
        op: impl FnOnce(&Region, u64) -> Result<R, AccessError>,
    ) -> Result<R, AccessError> {
        let entries = self.entries();
        let entry = entries
            .iter()
            .find(|e| e.rkey == rkey)
            .ok_or(AccessError::UnknownRkey(rkey))?;
        let offset = entry.offset(va, len, needed)?;
        // The region reports offsets; report addresses instead.
        op(&entry.region, offset).map_err(|e| match e {
            AccessError::OutOfBounds { .. } => AccessError::OutOfBounds { va, len },
            AccessError::Misaligned { .. } => AccessError::Misaligned { va },
            other => other,
        })
    }

    fn atomic(
        &self,
        rkey: u32,
        va: u64,
        op: impl FnOnce(&Region, u64) -> Result<u64, AccessError>,
    ) -> Result<u64, AccessError> {
        self.access(
            rkey,
            va,
            8,
            AccessFlags::REMOTE_ATOMIC,
            |region, offset| match &self.lock_table {
                Some(t) => t.with_slot(va, || op(region, offset)),
                None => op(region, offset),
            },
        )
    }
}

impl RemoteMemory for MemoryTable {
    fn read(&self, rkey: u32, va: u64, buf: &mut [u8]) -> Result<(), AccessError> {
        let len = buf.len() as u64;
        self.access(rkey, va, len, AccessFlags::REMOTE_READ, |r, off| {
            r.read(off, buf)
        })
    }

    fn write(&self, rkey: u32, va: u64, data: &[u8]) -> Result<(), AccessError> {
        let len = data.len() as u64;
        self.access(rkey, va, len, AccessFlags::REMOTE_WRITE, |r, off| {
            r.write(off, data)
        })
    }

    fn compare_swap(
        &self,
        rkey: u32,
        va: u64,
        compare: u64,
        swap: u64,
    ) -> Result<u64, AccessError> {
        self.atomic(rkey, va, |r, off| r.compare_swap(off, compare, swap))
    }

    fn fetch_add(&self, rkey: u32, va: u64, add: u64) -> Result<u64, AccessError> {
        self.atomic(rkey, va, |r, off| r.fetch_add(off, add))
    }

    fn check(&self, rkey: u32, va: u64, len: u64, needed: AccessFlags) -> Result<(), AccessError> {
        self.access(rkey, va, len, needed, |_, _| Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(len: usize) -> Arc<Region> {
        Arc::new(Region::anonymous(len).unwrap())
    }

    #[test]
    fn register_assigns_unique_nonzero_rkeys() {
        let t = MemoryTable::new();
        let mut keys = std::collections::HashSet::new();
        for i in 0..100u64 {
            let info = t.register(region(64), i * 4096, AccessFlags::ALL).unwrap();
            assert_ne!(info.rkey, 0);
            assert!(keys.insert(info.rkey));
            assert_eq!(info.len, 64);
            assert_eq!(t.info(info.rkey), Some(info));
        }
        assert_eq!(t.regions().len(), 100);
    }

    #[test]
    fn register_rejects_overlap_wrap_and_misaligned_base() {
        let t = MemoryTable::new();
        let a = t.register(region(128), 4096, AccessFlags::ALL).unwrap();
        assert!(matches!(
            t.register(region(64), 4096 + 64, AccessFlags::ALL),
            Err(RegionError::Overlap { rkey, .. }) if rkey == a.rkey
        ));
        assert!(matches!(
            t.register(region(8192), 0, AccessFlags::ALL),
            Err(RegionError::Overlap { .. })
        ));
        // Adjacent on both sides is fine.
        t.register(region(4096), 0, AccessFlags::ALL).unwrap();
        t.register(region(64), 4096 + 128, AccessFlags::ALL)
            .unwrap();
        assert!(matches!(
            t.register(region(64), u64::MAX - 63, AccessFlags::ALL),
            Err(RegionError::AddressOverflow { .. })
        ));
        // Ending exactly at 2^64 - 64 is fine.
        t.register(region(64), u64::MAX - 127, AccessFlags::ALL)
            .unwrap();
        assert!(matches!(
            t.register(region(64), 1 << 40 | 8, AccessFlags::ALL),
            Err(RegionError::MisalignedBase { .. })
        ));
    }

    #[test]
    fn deregister_and_lookup() {
        let t = MemoryTable::new();
        let r = region(64);
        let info = t.register(r.clone(), 0, AccessFlags::REMOTE_READ).unwrap();
        assert!(Arc::ptr_eq(&t.region(info.rkey).unwrap(), &r));
        r.set_read_order(ReadOrder::Descending);
        assert_eq!(t.regions()[0].read_order, ReadOrder::Descending);
        assert!(t.deregister(info.rkey));
        assert!(!t.deregister(info.rkey));
        assert!(t.region(info.rkey).is_none());
        assert_eq!(
            t.read(info.rkey, 0, &mut [0u8; 8]),
            Err(AccessError::UnknownRkey(info.rkey))
        );
    }

    #[test]
    fn lock_table_sees_atomics() {
        let t = MemoryTable::new().with_lock_table(NicLockTable::default());
        let info = t.register(region(8192), 1 << 20, AccessFlags::ALL).unwrap();
        t.fetch_add(info.rkey, (1 << 20) + 8, 1).unwrap();
        t.compare_swap(info.rkey, (1 << 20) + 16, 0, 1).unwrap();
        // Failed checks never reach the NIC's atomic unit.
        t.fetch_add(info.rkey, (1 << 20) + 4, 1).unwrap_err();
        assert_eq!(t.lock_table().unwrap().stats().acquisitions, 2);
    }
}
