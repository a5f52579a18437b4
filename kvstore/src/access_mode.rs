//! How a client reaches a table's index: one-sided verbs, RPCs to the memory node's
//! workers, or Storm's hybrid of the two (Novakovic et al., SYSTOR'19).
//!
//! - [`AccessMode::OneSided`] (default): every operation is one-sided READs, WRITEs
//!   and CASes; the memory node's CPU does nothing.
//! - [`AccessMode::Rpc`]: a RACE operation is one RPC (a SEND on the session's queue pair
//!   to the memory node, executed by its workers next to memory). After a stale
//!   directory cache the entry is read again and the RPC sent once more; other cases
//!   the node hands back (a split in progress, full buckets, another client's
//!   unconfirmed insert of the key) finish one-sided. Needs a
//!   memory node started with `--rpc-workers N` over `udp`, and a table with one copy.
//! - [`AccessMode::Hybrid`]: the first one-sided READ, then RPC when the one-sided
//!   path would need more than [`AccessOptions::hybrid_k`] round trips in all
//!   (fingerprint collisions, contention, retries); otherwise one-sided. Without
//!   workers, or on a replicated table, it stays one-sided.
//!
//! RACE tables have every operation as an RPC. On Clover tables reads use an RPC
//! for the walk from the first node read to the chain's tail, and writes are one
//! RPC: the tail search and the link, or for a key without a chain its creation at
//! the node (`hybrid` links by RPC past k and creates chains one-sided). In-place
//! tables of a pessimistic latch scheme have each probed tuple read or written at the
//! node (one RPC per tuple); `hybrid` goes to the node when it finds a latch held.
//! In-place tables of other schemes refuse `rpc` and run `hybrid` one-sided.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::rpc_transport::RpcTransport;

/// How operations reach a table's index.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum AccessMode {
    /// One-sided verbs only.
    #[default]
    OneSided,
    /// One RPC per operation.
    Rpc,
    /// One-sided first, RPC when one-sided would take more than k round trips.
    Hybrid,
}

impl AccessMode {
    /// Its name in properties and flags: `one-sided`, `rpc`, `hybrid`.
    pub fn name(self) -> &'static str {
        match self {
            AccessMode::OneSided => "one-sided",
            AccessMode::Rpc => "rpc",
            AccessMode::Hybrid => "hybrid",
        }
    }
}

impl fmt::Display for AccessMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for AccessMode {
    type Err = String;

    fn from_str(s: &str) -> Result<AccessMode, String> {
        match s {
            "one-sided" | "onesided" | "one_sided" => Ok(AccessMode::OneSided),
            "rpc" => Ok(AccessMode::Rpc),
            "hybrid" => Ok(AccessMode::Hybrid),
            other => Err(format!(
                "unknown access mode {other:?} (one-sided, rpc or hybrid)"
            )),
        }
    }
}

/// A client's access settings (each table handle may change its mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct AccessOptions {
    /// The mode table handles start with (default one-sided).
    pub mode: AccessMode,
    /// Hybrid: the most round trips an operation takes one-sided before it turns to
    /// an RPC (default 3: a search, and a write without fingerprint collisions or
    /// retries, stay one-sided).
    pub hybrid_k: u32,
    /// How long a call waits for its reply (default 2 s); a call that gets none
    /// fails with `Unavailable` (its effect unknown).
    pub rpc_timeout: Duration,
    /// How RPC requests travel (default SEND; `write`: into the queue pair's request
    /// ring, asked for when the session's queue pairs are created).
    pub transport: RpcTransport,
}

impl Default for AccessOptions {
    fn default() -> AccessOptions {
        AccessOptions {
            mode: AccessMode::OneSided,
            hybrid_k: 3,
            rpc_timeout: Duration::from_secs(2),
            transport: RpcTransport::Send,
        }
    }
}

impl AccessOptions {
    /// With mode `mode`.
    pub fn with_mode(mut self, mode: AccessMode) -> Self {
        self.mode = mode;
        self
    }

    /// With hybrid threshold `k` round trips.
    pub fn with_hybrid_k(mut self, k: u32) -> Self {
        self.hybrid_k = k;
        self
    }

    /// With RPC reply timeout `timeout`.
    pub fn with_rpc_timeout(mut self, timeout: Duration) -> Self {
        self.rpc_timeout = timeout;
        self
    }

    /// With RPC requests traveling by `transport`.
    pub fn with_transport(mut self, transport: RpcTransport) -> Self {
        self.transport = transport;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for m in [AccessMode::OneSided, AccessMode::Rpc, AccessMode::Hybrid] {
            assert_eq!(m.name().parse::<AccessMode>(), Ok(m));
            assert_eq!(m.to_string(), m.name());
        }
        assert!("two-sided".parse::<AccessMode>().is_err());
        assert_eq!(AccessMode::default(), AccessMode::OneSided);
        assert_eq!(AccessOptions::default().hybrid_k, 3);
    }
}
