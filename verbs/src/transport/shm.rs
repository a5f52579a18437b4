//! The `shm` transport: verbs applied directly to a memory node's shared-memory file.
//!
//! A memory node started with `--shm PATH` keeps its region in a file (normally under
//! `/dev/shm`). A client on the same host maps the same file and performs READ, WRITE,
//! CAS and FAA on it itself, with the same per-line and per-word atomicity as the
//! responder (the synchronisation state lives in the file). The memory node spends no
//! CPU on the data path: the deployment resembles CXL-attached memory.

use std::path::PathBuf;
use std::sync::Arc;

use super::local::DirectTransport;
use super::{ConnectError, QpHandle, TransportKind};
use crate::mem::{AccessFlags, MemoryTable, Region, RemoteMemory};

/// Where a shared-memory region is and how it is addressed remotely.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShmTarget {
    /// The region file.
    pub path: PathBuf,
    /// The rkey the memory node registered the region under.
    pub rkey: u32,
    /// The region's base virtual address.
    pub base_va: u64,
}

impl DirectTransport {
    /// An empty `shm` transport.
    pub fn shm() -> DirectTransport {
        DirectTransport::with_kind(TransportKind::Shm)
    }

    /// Map the region file of `target` and add a queue pair to it.
    pub fn connect_shm(&mut self, target: &ShmTarget) -> Result<QpHandle, ConnectError> {
        let mem = open_shm(target)?;
        Ok(self.connect(mem))
    }
}

/// Map a memory node's region file as [`RemoteMemory`] addressed by the node's rkey and VA.
pub fn open_shm(target: &ShmTarget) -> Result<Arc<dyn RemoteMemory>, ConnectError> {
    let region = Region::open_file(&target.path).map_err(|e| ConnectError::Io {
        context: format!("opening shared-memory region {}", target.path.display()),
        source: std::io::Error::other(e.to_string()),
    })?;
    let table = MemoryTable::new();
    table
        .register_with_rkey(
            Arc::new(region),
            target.base_va,
            AccessFlags::ALL,
            target.rkey,
        )
        .map_err(|e| ConnectError::Invalid(e.to_string()))?;
    Ok(Arc::new(table))
}
