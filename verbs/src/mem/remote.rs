//! The responder-side view of registered memory.

use std::sync::Arc;

use super::{AccessError, AccessFlags};

/// Registered memory as a remote peer sees it: addressed like RDMA by
/// `(rkey, virtual address)`. Implementations check the rkey, the access
/// rights, the bounds (overflow-safe) and, for atomics, 8-byte alignment,
/// and touch nothing when a check fails.
pub trait RemoteMemory: Send + Sync {
    /// RDMA READ of `buf.len()` bytes at `va` (needs
    /// [`AccessFlags::REMOTE_READ`]).
    fn read(&self, rkey: u32, va: u64, buf: &mut [u8]) -> Result<(), AccessError>;

    /// RDMA WRITE of `data` at `va` (needs [`AccessFlags::REMOTE_WRITE`]).
    fn write(&self, rkey: u32, va: u64, data: &[u8]) -> Result<(), AccessError>;

    /// Atomic compare-and-swap of the 8-byte aligned word at `va`: swaps in
    /// `swap` only if the word equals `compare`; returns the original value
    /// (needs [`AccessFlags::REMOTE_ATOMIC`]).
    fn compare_swap(&self, rkey: u32, va: u64, compare: u64, swap: u64)
    -> Result<u64, AccessError>;

    /// Atomic wrapping fetch-and-add on the 8-byte aligned word at `va`;
    /// returns the original value (needs [`AccessFlags::REMOTE_ATOMIC`]).
    fn fetch_add(&self, rkey: u32, va: u64, add: u64) -> Result<u64, AccessError>;

    /// Validates a whole request of `len` bytes at `va` needing `needed`
    /// rights without touching memory (a responder calls this at the first
    /// packet of a multi-packet request). If `needed` contains
    /// [`AccessFlags::REMOTE_ATOMIC`], `va` must also be 8-byte aligned.
    fn check(&self, rkey: u32, va: u64, len: u64, needed: AccessFlags) -> Result<(), AccessError>;
}

impl<T: RemoteMemory + ?Sized> RemoteMemory for Arc<T> {
    fn read(&self, rkey: u32, va: u64, buf: &mut [u8]) -> Result<(), AccessError> {
        (**self).read(rkey, va, buf)
    }

    fn write(&self, rkey: u32, va: u64, data: &[u8]) -> Result<(), AccessError> {
        (**self).write(rkey, va, data)
    }

    fn compare_swap(
        &self,
        rkey: u32,
        va: u64,
        compare: u64,
        swap: u64,
    ) -> Result<u64, AccessError> {
        (**self).compare_swap(rkey, va, compare, swap)
    }

    fn fetch_add(&self, rkey: u32, va: u64, add: u64) -> Result<u64, AccessError> {
        (**self).fetch_add(rkey, va, add)
    }

    fn check(&self, rkey: u32, va: u64, len: u64, needed: AccessFlags) -> Result<(), AccessError> {
        (**self).check(rkey, va, len, needed)
    }
}
