//! Zeroing table-owned memory before a table is handed out.
//!
//! A RACE directory area, an in-place tuple area and its latch array are read by
//! clients as "zero means nobody initialised this": a state word of zero, a
//! fingerprint word of zero, empty slots. Memory freed by a dropped table is reused,
//! so the service zeroes every such piece before the table that owns it becomes
//! visible; a table is never created on memory it could not zero.
//!
//! The [`Scrubber`] trait is the mechanism; [`MemnodeScrubber`] asks the memory node
//! that holds the piece (`POST /v1/regions/{rkey}/zero` on its admin API).
//! [`RecordingScrubber`] keeps the requests in memory for tests whose memory nodes
//! are only registrations.

use std::fmt::Debug;
use std::sync::Mutex;

/// One piece of memory to zero.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScrubTarget {
    /// Memnode id.
    pub memnode_id: u64,
    /// Its admin URL.
    pub admin_url: String,
    /// Region rkey.
    pub rkey: u32,
    /// First byte.
    pub va: u64,
    /// Length.
    pub len: u64,
}

/// Zeroes memory on memory nodes.
pub trait Scrubber: Send + Sync + Debug {
    /// Zero `target` entirely, or say why not.
    fn zero(&self, target: &ScrubTarget) -> Result<(), String>;
}

/// Zeroes through the memory node's admin API, presenting the memory node admin token
/// when it has one.
#[derive(Clone, Default)]
pub struct MemnodeScrubber {
    /// The memory node admin token.
    pub token: Option<String>,
}

impl std::fmt::Debug for MemnodeScrubber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemnodeScrubber")
            .field("token", &self.token.as_ref().map(|_| ".."))
            .finish()
    }
}

impl MemnodeScrubber {
    /// A scrubber presenting `token` to the memory nodes.
    pub fn with_token(token: Option<String>) -> MemnodeScrubber {
        MemnodeScrubber { token }
    }
}

impl Scrubber for MemnodeScrubber {
    fn zero(&self, t: &ScrubTarget) -> Result<(), String> {
        let zeroed = dmkv_api::memnode_admin::zero_range_as(
            &t.admin_url,
            self.token.as_deref(),
            t.rkey,
            t.va,
            t.len,
        )
        .map_err(|e| e.to_string())?;
        if zeroed != t.len {
            return Err(format!("zeroed {zeroed} of {} bytes", t.len));
        }
        Ok(())
    }
}

/// Records every request and succeeds (or fails every request with `fail`).
#[derive(Debug, Default)]
pub struct RecordingScrubber {
    /// Requests so far.
    pub requests: Mutex<Vec<ScrubTarget>>,
    /// When set, every request fails with this message (and is still recorded).
    pub fail: Mutex<Option<String>>,
}

impl RecordingScrubber {
    /// The requests so far.
    pub fn requests(&self) -> Vec<ScrubTarget> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

impl Scrubber for RecordingScrubber {
    fn zero(&self, target: &ScrubTarget) -> Result<(), String> {
        if let Ok(mut r) = self.requests.lock() {
            r.push(target.clone());
        }
        match self.fail.lock().ok().and_then(|f| f.clone()) {
            Some(why) => Err(why),
            None => Ok(()),
        }
    }
}
