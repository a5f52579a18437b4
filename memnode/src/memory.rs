//! The node's memory: allocating the region and registering it for remote access.

use std::sync::Arc;

use verbs::mem::{AccessFlags, Backing, MemoryTable, NicLockTable, Region, RegionError};

use crate::api::RegionDescriptor;
use crate::config::MemnodeConfig;

/// The memory a node serves: its registration table and what was registered.
#[derive(Debug, Clone)]
pub struct NodeMemory {
    /// The rkey-addressed table the responders execute verbs against.
    pub table: Arc<MemoryTable>,
    /// The region (for in-process inspection, e.g. by tests).
    pub region: Arc<Region>,
    /// Whether huge pages were asked for but unavailable (a normal-page region was used).
    pub hugepage_fallback: bool,
}

/// The memory could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// The shared-memory file could not be created.
    #[error("cannot create the shared-memory region file {path}: {source}")]
    Shm {
        /// The file.
        path: String,
        /// Why.
        source: RegionError,
    },
    /// Anonymous memory could not be mapped.
    #[error("cannot allocate {capacity} bytes of memory: {source}")]
    Alloc {
        /// Bytes asked for.
        capacity: u64,
        /// Why.
        source: RegionError,
    },
    /// The region could not be registered.
    #[error("cannot register the region: {0}")]
    Register(RegionError),
}

impl NodeMemory {
    /// Allocates the region `config` describes and registers it with all rights.
    ///
    /// `--shm PATH` gives a file-backed region; `--hugepages` tries 2 MiB pages and falls
    /// back to normal anonymous memory (logging a warning); otherwise anonymous memory.
    pub fn allocate(config: &MemnodeConfig) -> Result<NodeMemory, MemoryError> {
        let len = usize::try_from(config.capacity).map_err(|_| MemoryError::Alloc {
            capacity: config.capacity,
            source: RegionError::TooLarge(config.capacity),
        })?;
        let mut hugepage_fallback = false;
        let region = if let Some(path) = &config.shm {
            Region::create_file(path, len).map_err(|source| MemoryError::Shm {
                path: path.display().to_string(),
                source,
            })?
        } else if config.hugepages {
            match Region::anonymous_hugepages(len) {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(
                        error = %e,
                        "huge pages unavailable; falling back to normal anonymous memory"
                    );
                    hugepage_fallback = true;
                    Region::anonymous(len).map_err(|source| MemoryError::Alloc {
                        capacity: config.capacity,
                        source,
                    })?
                }
            }
        } else {
            Region::anonymous(len).map_err(|source| MemoryError::Alloc {
                capacity: config.capacity,
                source,
            })?
        };
        region.set_read_order(config.read_order);
        let region = Arc::new(region);
        let mut table = MemoryTable::new();
        if let Some(hold) = config.lock_table_hold {
            table = table.with_lock_table(NicLockTable::new(hold));
        }
        table
            .register(region.clone(), config.base_va, AccessFlags::ALL)
            .map_err(MemoryError::Register)?;
        Ok(NodeMemory {
            table: Arc::new(table),
            region,
            hugepage_fallback,
        })
    }

    /// Bytes registered.
    pub fn capacity(&self) -> u64 {
        self.table.regions().iter().map(|r| r.len).sum()
    }

    /// The registered regions, as clients see them.
    pub fn descriptors(&self) -> Vec<RegionDescriptor> {
        self.table
            .regions()
            .into_iter()
            .map(|info| {
                let backing = self
                    .table
                    .region(info.rkey)
                    .map(|r| r.backing().clone())
                    .unwrap_or(Backing::Anonymous);
                let (backing, path) = match backing {
                    Backing::Anonymous => ("anonymous", None),
                    Backing::HugePages => ("hugepages", None),
                    Backing::File(p) => ("file", Some(p.display().to_string())),
                };
                RegionDescriptor {
                    rkey: info.rkey,
                    base_va: info.base_va,
                    len: info.len,
                    flags: info.flags.to_string(),
                    read_order: info.read_order.to_string(),
                    backing: backing.to_owned(),
                    path,
                }
            })
            .collect()
    }
}
