//! Re-replication documents: a replica set that lost a member (to a failure, or to a
//! drain) gets a new one, which joins as a *syncing* member, has the set's data
//! copied to it from the acting primary, and is then promoted
//! (`GET /v1/tables/{name}` → `rereplication`, `GET /v1/rereplication`,
//! `GET /v1/memnodes/{id}` → `drain_progress`).

use serde::{Deserialize, Serialize};

/// Where a re-replication stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum RereplicationState {
    /// The new member joined as syncing; the queue pairs of the set were fenced
    /// and the copy has not made its first pass yet.
    #[default]
    Starting,
    /// Copy passes run (read the primary, compare, write the difference).
    Copying,
    /// No byte was copied for longer than the stall threshold.
    Stalled,
    /// A full pass wrote nothing: the member is being promoted.
    Promoting,
}

impl RereplicationState {
    /// The JSON name.
    pub fn as_str(self) -> &'static str {
        match self {
            RereplicationState::Starting => "starting",
            RereplicationState::Copying => "copying",
            RereplicationState::Stalled => "stalled",
            RereplicationState::Promoting => "promoting",
        }
    }
}

/// One running re-replication: a syncing member of one replica set of a table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RereplicationStatus {
    /// The table.
    pub table: String,
    /// The home memnode of the replica set (its position in `memnodes`).
    pub home: u64,
    /// The acting primary the data is copied from.
    pub source: u64,
    /// The new (syncing) member the data is copied to.
    pub target: u64,
    /// Why: `failover` (a member was lost), `drain` (a member is draining),
    /// `move` (a member was asked to hand its copy over, `POST
    /// /v1/tables/{name}/moves`) or `rejoin` (the target held copies of the table
    /// before; only the difference is written).
    pub reason: String,
    /// Bytes of the set's memory compared in the current pass.
    pub bytes_compared: u64,
    /// Bytes of the set's memory (every mirrored extent on the primary).
    pub bytes_total: u64,
    /// Bytes written to the new member so far, over all passes.
    pub bytes_copied: u64,
    /// Passes finished.
    pub passes: u64,
    /// Bytes the switch copied primary → new member before the passes (the
    /// metadata service's `switch` copy engine; 0 with the `cpu` engine).
    #[serde(default)]
    pub switch_bytes: u64,
    /// When it started (Unix ms).
    pub started_ms: u64,
    /// When it last compared or copied anything (Unix ms).
    pub progress_ms: u64,
    /// Where it stands.
    pub state: RereplicationState,
    /// The last error (a pass that failed is retried), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `POST /v1/tables/{name}/moves`: move member `from` of replica set `set` to another
/// memnode (rebalancing). The new member joins as syncing, is copied to like any
/// re-replication (by the switch with the metadata service's `switch` copy engine),
/// and `from` leaves the set when it is promoted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct MoveCopyRequest {
    /// The replica set (its position in the table's `replica_sets`).
    pub set: usize,
    /// The member that hands its copy over.
    pub from: u64,
    /// The memnode that takes it (absent: one is picked as for a failover).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<u64>,
}

/// `GET /v1/rereplication`: every running re-replication.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RereplicationList {
    /// Running re-replications, by table and home.
    pub running: Vec<RereplicationStatus>,
}

/// How far the drain of a memnode got (`GET /v1/memnodes/{id}` → `drain_progress`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DrainProgress {
    /// Replica sets of replicated tables that still hold a copy on the memnode.
    pub replica_sets_left: u64,
    /// Of those, sets whose new member is being synchronised now.
    pub moving: u64,
    /// Unreplicated tables with data on it: their data is not moved (drop them,
    /// or delete the memnode with `?force=true` to accept losing it).
    pub unreplicated_tables: Vec<String>,
    /// Whether every copy was moved and nothing else lives there: `DELETE` succeeds.
    pub done: bool,
}
