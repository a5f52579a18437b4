//! The node's memory: allocating the region and registering it for remote access.

use std::sync::Arc;

use verbs::mem::{AccessFlags, Backing, MemoryTable, NicLockTable, Region, RegionError};

use crate::api::RegionDescriptor;
use crate::config::MemnodeConfig;
use crate::region_file::{self, IDENTITY_FORMAT, RegionFileError, RegionIdentity};

/// The memory a node serves: its registration table and what was registered.
#[derive(Debug, Clone)]
pub struct NodeMemory {
    /// The rkey-addressed table the responders execute verbs against.
    pub table: Arc<MemoryTable>,
    /// The region (for in-process inspection, e.g. by tests).
    pub region: Arc<Region>,
    /// Whether huge pages were asked for but unavailable (a normal-page region was used).
    pub hugepage_fallback: bool,
    /// The region's instance id (`--region-file`: kept across restarts; 0 = none).
    pub instance: u64,
    /// Whether the region is a region file from an earlier run, mapped with its data.
    pub reopened: bool,
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
    /// The region file (`--region-file`) could not be used.
    #[error(transparent)]
    RegionFile(#[from] RegionFileError),
}

/// Make `region` resident now (`--prefault`), saying how long it took.
fn prefault(region: &Region) {
    let started = std::time::Instant::now();
    let how = region.prefault();
    tracing::info!(
        mib = region.len() >> 20,
        ms = started.elapsed().as_millis() as u64,
        method = ?how,
        "memory made resident (--prefault)"
    );
}

impl NodeMemory {
    /// Allocates the region `config` describes and registers it with all rights.
    ///
    /// `--shm PATH` gives a file-backed region; `--hugepages` tries 2 MiB pages and falls
    /// back to normal anonymous memory (logging a warning); otherwise anonymous memory.
    /// With `--prefault` the region is made resident before it is returned.
    pub fn allocate(config: &MemnodeConfig) -> Result<NodeMemory, MemoryError> {
        let memory = match &config.region_file {
            Some(path) => NodeMemory::from_region_file(config, path)?,
            None => NodeMemory::map(config)?,
        };
        if config.prefault {
            prefault(&memory.region);
        }
        Ok(memory)
    }

    /// The region of `--shm PATH`, of huge pages or of anonymous memory, registered.
    fn map(config: &MemnodeConfig) -> Result<NodeMemory, MemoryError> {
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
            instance: 0,
            reopened: false,
        })
    }

    /// `--region-file PATH`: reopens the file with its data under its recorded rkey
    /// and base VA, or creates it and records its new identity.
    fn from_region_file(
        config: &MemnodeConfig,
        path: &std::path::Path,
    ) -> Result<NodeMemory, MemoryError> {
        let opened = region_file::open_or_create(
            path,
            config.capacity,
            config.base_va,
            config.name.as_deref(),
        )?;
        if opened.released_locks > 0 {
            tracing::warn!(
                lines = opened.released_locks,
                "released line locks a write interrupted by the previous run left taken"
            );
        }
        opened.region.set_read_order(config.read_order);
        let region = Arc::new(opened.region);
        let mut table = MemoryTable::new();
        if let Some(hold) = config.lock_table_hold {
            table = table.with_lock_table(NicLockTable::new(hold));
        }
        let (instance, reopened) = match &opened.identity {
            Some(id) => {
                table
                    .register_with_rkey(region.clone(), id.base_va, AccessFlags::ALL, id.rkey)
                    .map_err(MemoryError::Register)?;
                (id.instance, true)
            }
            None => {
                let info = table
                    .register(region.clone(), config.base_va, AccessFlags::ALL)
                    .map_err(MemoryError::Register)?;
                let identity = RegionIdentity {
                    format: IDENTITY_FORMAT,
                    instance: region_file::new_instance(),
                    rkey: info.rkey,
                    base_va: info.base_va,
                    len: info.len,
                    name: config.name.clone(),
                };
                region_file::write_identity(path, &identity)?;
                (identity.instance, false)
            }
        };
        Ok(NodeMemory {
            table: Arc::new(table),
            region,
            hugepage_fallback: false,
            instance,
            reopened,
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
                    instance: self.instance,
                }
            })
            .collect()
    }
}
