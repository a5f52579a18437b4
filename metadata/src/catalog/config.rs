//! The catalog's settings and limits, and the lease granule of a region.

use crate::alloc::AllocatorKind;
use crate::placement::PlacementKind;

/// Smallest table value limit.
pub const MIN_VALUE_LIMIT: u64 = 64;
/// Largest table value limit.
pub const MAX_VALUE_LIMIT: u64 = 1 << 20;
/// Smallest configurable chunk size.
pub const MIN_CHUNK_SIZE: u64 = 1 << 20;
/// Largest configurable chunk size.
pub const MAX_CHUNK_SIZE: u64 = 64 << 20;
/// Default chunk size.
pub const DEFAULT_CHUNK_SIZE: u64 = 4 << 20;
/// Largest replication factor of a table.
pub const MAX_REPLICATION: u32 = 3;
/// Smallest lease granularity, for small regions.
pub const MIN_GRANULE: u64 = 4096;

/// Settings of the catalog.
#[derive(Debug, Clone)]
pub struct CatalogConfig {
    /// Lease granularity for regions of at least 16 chunks (power of two, 1–64 MiB).
    pub chunk_size: u64,
    /// After how long without a heartbeat a memnode is unhealthy.
    pub heartbeat_timeout_ms: u64,
    /// How often memnodes are told to heartbeat.
    pub heartbeat_interval_ms: u64,
    /// After how long without a heartbeat a memnode is taken out of replicated
    /// tables' replica sets (its backups take over); 0: the heartbeat timeout.
    pub failover_after_ms: u64,
    /// TTL of a lease that asks for none.
    pub default_lease_ttl_ms: u64,
    /// Shortest TTL accepted.
    pub min_lease_ttl_ms: u64,
    /// Longest TTL accepted.
    pub max_lease_ttl_ms: u64,
    /// Time between a lease's expiry and the reuse of its memory.
    pub grace_ms: u64,
    /// Size of a RACE table's directory.
    pub directory_bytes: u64,
    /// Where in a region a lease goes.
    pub allocator: AllocatorKind,
    /// Which memnode serves a lease.
    pub placement: PlacementKind,
}

impl Default for CatalogConfig {
    fn default() -> CatalogConfig {
        CatalogConfig {
            chunk_size: DEFAULT_CHUNK_SIZE,
            heartbeat_timeout_ms: 3000,
            heartbeat_interval_ms: 1000,
            failover_after_ms: 0,
            default_lease_ttl_ms: 30_000,
            min_lease_ttl_ms: 100,
            max_lease_ttl_ms: 24 * 3600 * 1000,
            grace_ms: 5000,
            directory_bytes: 64 << 10,
            allocator: AllocatorKind::FirstFit,
            placement: PlacementKind::MostFree,
        }
    }
}

impl CatalogConfig {
    /// After how long without a heartbeat a memnode fails over.
    pub fn failover_after(&self) -> u64 {
        if self.failover_after_ms == 0 {
            self.heartbeat_timeout_ms
        } else {
            self.failover_after_ms.max(self.heartbeat_timeout_ms)
        }
    }

    /// Checks the values.
    pub fn validate(&self) -> Result<(), String> {
        if !self.chunk_size.is_power_of_two()
            || !(MIN_CHUNK_SIZE..=MAX_CHUNK_SIZE).contains(&self.chunk_size)
        {
            return Err(format!(
                "chunk size {} must be a power of two from 1 MiB to 64 MiB",
                self.chunk_size
            ));
        }
        if self.heartbeat_timeout_ms == 0 || self.heartbeat_interval_ms == 0 {
            return Err("heartbeat interval and timeout must be positive".into());
        }
        if self.min_lease_ttl_ms == 0
            || self.min_lease_ttl_ms > self.default_lease_ttl_ms
            || self.default_lease_ttl_ms > self.max_lease_ttl_ms
        {
            return Err("lease TTLs must satisfy 0 < min <= default <= max".into());
        }
        if self.directory_bytes == 0 || !self.directory_bytes.is_multiple_of(MIN_GRANULE) {
            return Err("the RACE directory size must be a positive multiple of 4 KiB".into());
        }
        Ok(())
    }
}

/// The lease granularity (and alignment) of a region of `region_len` bytes: the chunk
/// size, or for small regions the power of two that gives at least 16 chunks per
/// region, but never below 4 KiB.
pub fn granule(region_len: u64, chunk_size: u64) -> u64 {
    let sixteenth = (region_len / 16).max(1);
    let pow = 1u64 << (63 - sixteenth.leading_zeros());
    pow.clamp(MIN_GRANULE, chunk_size.max(MIN_GRANULE))
}
