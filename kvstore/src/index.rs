//! The seam between the shell (client, session, table handles) and the indexes.
//!
//! The shell knows nothing of what an index keeps. An index's state lives in slots
//! the shell offers without looking inside:
//!
//! - per session ([`SessionIndex`], found with `SessionCore::index_state`): caches
//!   and bookkeeping of one thread — Clover's tail hints and superseded nodes, the
//!   RACE tables it opened, the asynchronous unlatches of in-place tables;
//! - per client ([`ClientIndex`], found with `ClientInner::shared_state`): what all
//!   sessions of a client share — Clover's chain ids.
//!
//! Each slot holds one object per index kind, made on first use; the shell calls
//! the hooks below where its own operations (quiescing, forgetting hints, memory
//! counters, dropping a table) concern what an index keeps.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;

use crate::alloc::MemoryStats;

/// A future of one session's thread.
pub(crate) type LocalFuture<'a> = Pin<Box<dyn Future<Output = ()> + 'a>>;

/// Which write a table operation asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteKind {
    /// Upsert.
    Put,
    /// Create; fails with `AlreadyExists` when present.
    Insert,
    /// Overwrite; fails with `NotFound` when absent.
    Update,
    /// Remove; fails with `NotFound` when absent.
    Delete,
}

impl WriteKind {
    /// The operation's name in spans.
    pub(crate) fn name(self) -> &'static str {
        match self {
            WriteKind::Put => "put",
            WriteKind::Insert => "insert",
            WriteKind::Update => "update",
            WriteKind::Delete => "delete",
        }
    }
}

/// What an index keeps per session.
pub(crate) trait SessionIndex: Any {
    /// Finish the work that must complete before the session closes its queue pairs
    /// (called by `Session::quiesce`).
    fn quiesce(&self) -> LocalFuture<'_> {
        Box::pin(async {})
    }

    /// Forget cached hints (called by `Session::clear_hints`).
    fn clear_hints(&self) {}

    /// Add what it holds to the session's memory counters.
    fn memory_stats(&self, _stats: &mut MemoryStats) {}
}

/// What an index keeps per client, shared by its sessions.
pub(crate) trait ClientIndex: Any + Send + Sync {
    /// Forget what is kept about table `id` (it was dropped).
    fn forget_table(&self, _id: u64) {}
}
