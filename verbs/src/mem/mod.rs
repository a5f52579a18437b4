//! RDMA memory semantics: registered regions, what READ / WRITE / CAS / FAA
//! guarantee on them, and the responder-side registry of regions.
//!
//! The model follows what RDMA over PCIe provides on x86 hosts (`docs/architecture.md`;
//! Jasny et al., TODS 2025, §1–§4): 8-byte aligned atomics are atomic, every aligned
//! 64-byte line is read and written atomically, WRITEs land lines in
//! ascending address order, and a multi-line READ may observe its lines in
//! any order — selectable per region ([`ReadOrder`]) so the torn-read
//! pitfall can be reproduced on purpose. [`NicLockTable`] optionally models
//! the NIC's atomic lock table (collisions of addresses 4 KiB apart).
//!
//! * [`Region`] — one block of memory (anonymous, huge pages or a shared
//!   file), usable directly by in-process and shared-memory transports;
//! * [`MemoryTable`] — the rkey-addressed registry a memory node serves,
//!   implementing [`RemoteMemory`];
//! * [`AccessScope`] — per-queue-pair memory windows (own key, extents, rights,
//!   expiry) a responder enforces through [`ScopedMemory`].

mod access;
mod error;
mod lock_table;
mod read_order;
mod region;
mod remote;
mod rng;
mod scope;
mod seqlock;
mod storage;
mod table;

pub use access::{AccessFlags, ParseAccessFlagsError};
pub use error::{AccessError, RegionError};
pub use lock_table::{NIC_LOCK_SLOTS, NicLockStats, NicLockTable};
pub use read_order::{LineGap, ParseReadOrderError, ReadOrder};
pub use region::Region;
pub use remote::RemoteMemory;
pub use scope::{AccessScope, MemoryWindow, ScopeViolation, ScopeViolations, ScopedMemory};
pub use storage::{Backing, FORMAT_VERSION, LINE_SIZE, Prefaulted};
pub use table::{BASE_VA_ALIGN, MemoryTable, RegionInfo};
