//! Why a catalog operation failed.

use crate::store::StoreError;

/// Why a catalog operation failed; each maps to one HTTP status.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The request is well-formed but invalid (422).
    #[error("{0}")]
    Invalid(String),
    /// Something named does not exist (404); `code` names what.
    #[error("{message}")]
    NotFound {
        /// `memnode_not_found`, `lease_not_found`, `table_not_found`, `chain_not_found`,
        /// `tail_not_found`.
        code: &'static str,
        /// Message.
        message: String,
    },
    /// The request conflicts with the state (409).
    #[error("{message}")]
    Conflict {
        /// `table_exists`, `memnode_conflict`, `memnode_unhealthy`, `memnode_draining`,
        /// `memnode_in_use`, `table_not_lost`, `wrong_index`,
        /// `lease_owned_by_table`, `not_a_data_lease`, `too_few_memnodes`, `replica_set_lost`.
        code: &'static str,
        /// Message.
        message: String,
    },
    /// The lease expired (410).
    #[error("{0}")]
    Expired(String),
    /// No memnode has room (507).
    #[error("{0}")]
    OutOfMemory(String),
    /// No healthy memnode is registered (503).
    #[error("{0}")]
    NoMemnodes(String),
    /// Memory for the table could not be zeroed on its memnode (503); nothing was
    /// changed.
    #[error("{0}")]
    Scrub(String),
    /// Persistence failed (500); nothing was changed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A [`CatalogError::NotFound`].
pub(super) fn not_found(code: &'static str, message: String) -> CatalogError {
    CatalogError::NotFound { code, message }
}

/// A [`CatalogError::Conflict`].
pub(super) fn conflict(code: &'static str, message: String) -> CatalogError {
    CatalogError::Conflict { code, message }
}

/// `memnode_not_found`: no memnode `id`.
pub(super) fn memnode_not_found(id: u64) -> CatalogError {
    not_found(
        "memnode_not_found",
        format!("no memnode {id} is registered (re-register with POST /v1/memnodes)"),
    )
}
