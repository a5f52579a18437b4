//! The body of every error answer of every dmkv HTTP API.

use serde::{Deserialize, Serialize};

/// The body of every error answer: `{"error": "...", "code": "..."}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorBody {
    /// What went wrong, for humans.
    pub error: String,
    /// A stable machine-readable code (`invalid_json`, `table_not_found`,
    /// `qp_not_found`, `out_of_memory`, `unauthorized`, ...).
    pub code: String,
}
