//! What an operator asks for when starting a copy, and what the switch remembers of it
//! across restarts.

use serde::{Deserialize, Serialize};

pub use dmkv_api::switch_copy::{
    CopyEnd, CopyRequest, CopyState, DEFAULT_CHUNK, DEFAULT_RTO_MS, DEFAULT_WINDOW, MAX_COPY,
    MAX_WINDOW,
};

/// A memnode queue pair the switch created for a copy (deleted when the copy ends or,
/// after a restart, before it resumes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CopyQp {
    /// The memory node's admin URL.
    pub memnode: String,
    /// Its QPN.
    pub qpn: u32,
}

/// A copy as the state file keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CopyRecord {
    /// The copy's id.
    pub id: u64,
    /// What was asked.
    pub request: CopyRequest,
    /// Bytes known acknowledged by the target (a prefix; the checkpoint a restarted
    /// switch resumes from).
    pub checkpoint: u64,
    /// Where it stands.
    pub state: CopyState,
    /// The queue pairs of its current incarnation.
    #[serde(default)]
    pub qps: Vec<CopyQp>,
    /// How many times a restarted switch resumed it.
    #[serde(default)]
    pub resumed: u32,
}
