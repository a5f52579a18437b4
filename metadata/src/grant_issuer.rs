//! Issuing grants: signed statements that a client may touch a table's memory on one
//! memory node, which the memory node verifies offline (see [`dmkv_api::grant`]).
//!
//! The service signs with the key it shares with the memory nodes (`--grant-key-file`
//! or `$DMKV_GRANT_KEY`, by default derived from the memory node admin token), and
//! each grant expires after the TTL (`--grant-ttl`, 60 s by default): revoking a
//! client's access takes effect within one TTL, when it can no longer get a fresh one.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use dmkv_api::grant::{Grant, GrantAccess, GrantKey, GrantRequest, GrantResponse};

use crate::catalog::{Catalog, CatalogError};

/// Default lifetime of a grant.
pub const DEFAULT_GRANT_TTL: Duration = Duration::from_secs(60);

/// Signs grants.
#[derive(Debug)]
pub struct GrantIssuer {
    key: GrantKey,
    ttl: Duration,
    issued: AtomicU64,
    seed: RandomState,
}

impl Clone for GrantIssuer {
    fn clone(&self) -> GrantIssuer {
        GrantIssuer::new(self.key.clone(), self.ttl)
    }
}

/// Why a grant was not issued.
#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    /// The table or memory node does not exist.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// The grant could not be encoded (a name too long, too many extents).
    #[error("{0}")]
    Encode(String),
}

impl GrantIssuer {
    /// An issuer signing with `key`, grants valid for `ttl`.
    pub fn new(key: GrantKey, ttl: Duration) -> GrantIssuer {
        GrantIssuer {
            key,
            ttl,
            issued: AtomicU64::new(0),
            seed: RandomState::new(),
        }
    }

    /// How long grants are valid.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Sixteen bytes no other grant of this process carries.
    fn nonce(&self) -> [u8; 16] {
        let n = self.issued.fetch_add(1, Ordering::Relaxed);
        let mut h = self.seed.build_hasher();
        h.write_u64(n);
        let a = h.finish();
        h.write_u64(a);
        let b = h.finish();
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&a.to_be_bytes());
        out[8..].copy_from_slice(&(b ^ n).to_be_bytes());
        out
    }

    /// A grant over table `table`'s memory on the memory node `req` names, as of
    /// `now_ms`.
    pub fn issue(
        &self,
        catalog: &Catalog,
        table: &str,
        req: &GrantRequest,
        now_ms: u64,
    ) -> Result<GrantResponse, IssueError> {
        let windows = catalog.table_windows(table, req.memnode_id)?;
        let access = req.access.unwrap_or(GrantAccess::ReadWrite);
        let ttl_ms = u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX);
        let grant = Grant {
            client_id: req.client.clone().unwrap_or_else(|| "client".to_owned()),
            memnode_id: req.memnode_id,
            table: table.to_owned(),
            windows,
            access,
            expires_at_ms: now_ms.saturating_add(ttl_ms),
            nonce: self.nonce(),
        };
        let text = grant
            .sign(&self.key)
            .map_err(|e| IssueError::Encode(e.to_string()))?;
        Ok(GrantResponse {
            grant: text,
            memnode_id: grant.memnode_id,
            table: grant.table,
            windows: grant.windows,
            access,
            expires_at_ms: grant.expires_at_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nonces_differ() {
        let i = GrantIssuer::new(
            GrantKey::from_secret(b"0123456789abcdef").unwrap(),
            DEFAULT_GRANT_TTL,
        );
        let a = i.nonce();
        let b = i.nonce();
        assert_ne!(a, b);
        assert_eq!(i.ttl(), DEFAULT_GRANT_TTL);
    }
}
