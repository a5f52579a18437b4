//! The switch's memnode-to-memnode copies (`POST /v1/copies`, `GET /v1/copies/{id}` on
//! its admin API): what is asked, how it stands, and the calls that make them. The
//! switch issues the READs and turns their responses into WRITEs; no CPU on either
//! memory node takes part (`docs/zero-sided.md`).

use serde::{Deserialize, Serialize};

use crate::error::ClientError;
use crate::http::{HttpClient, json};

/// Bytes per READ when the request does not say (16 PMTUs of 1024 bytes).
pub const DEFAULT_CHUNK: u32 = 16 * 1024;
/// Smallest chunk: one 64-byte line per READ.
pub const MIN_CHUNK: u32 = 64;
/// READs in flight per copy when the request does not say.
pub const DEFAULT_WINDOW: u32 = 8;
/// Most READs in flight per copy: a memnode remembers its last 16 READs, and a re-issued
/// READ must be one it remembers.
pub const MAX_WINDOW: u32 = 16;
/// Largest copy (the PSN offset of its last packet must stay within half the 24-bit
/// PSN space).
pub const MAX_COPY: u64 = 1 << 30;
/// Retransmission timeout when the request does not say, in milliseconds.
pub const DEFAULT_RTO_MS: u64 = 20;

/// One end of a copy: a memory node and the bytes there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CopyEnd {
    /// The memory node's admin URL (the switch creates its queue pair there).
    pub memnode: String,
    /// Address of the first byte.
    pub va: u64,
    /// Memory key covering the bytes.
    pub rkey: u32,
}

/// `POST /v1/copies`: copy `len` bytes from `source` to `target`, memnode to memnode,
/// with READs the switch issues and WRITEs it makes of their responses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CopyRequest {
    /// Where the bytes are.
    pub source: CopyEnd,
    /// Where they go.
    pub target: CopyEnd,
    /// How many bytes (1 ..= 1 GiB).
    pub len: u64,
    /// Bytes per READ: a power of two from 64 to 512, or a multiple of 1024 (the path
    /// MTU); default 16 KiB.
    #[serde(default)]
    pub chunk: Option<u32>,
    /// READs in flight (1 ..= 16; default 8).
    #[serde(default)]
    pub window: Option<u32>,
    /// Retransmission timeout in milliseconds (default 20).
    #[serde(default)]
    pub rto_ms: Option<u64>,
}

impl CopyRequest {
    /// Checks the sizes; returns (chunk bytes, window, timeout in ms).
    pub fn checked(&self) -> Result<(u32, u32, u64), String> {
        if self.len == 0 || self.len > MAX_COPY {
            return Err(format!(
                "len {} is out of range: 1 ..= {MAX_COPY} bytes",
                self.len
            ));
        }
        let chunk = self.chunk.unwrap_or(DEFAULT_CHUNK);
        let small = chunk.is_power_of_two() && (MIN_CHUNK..1024).contains(&chunk);
        if !(small || (chunk != 0 && chunk.is_multiple_of(1024) && chunk <= 1 << 20)) {
            return Err(format!(
                "chunk {chunk} must be a power of two from {MIN_CHUNK} to 512 bytes, or a \
                 non-zero multiple of 1024 bytes, at most 1 MiB"
            ));
        }
        let window = self.window.unwrap_or(DEFAULT_WINDOW);
        if window == 0 || window > MAX_WINDOW {
            return Err(format!(
                "window {window} is out of range: 1 ..= {MAX_WINDOW}"
            ));
        }
        let rto = self.rto_ms.unwrap_or(DEFAULT_RTO_MS);
        if rto == 0 || rto > 60_000 {
            return Err(format!("rto_ms {rto} is out of range: 1 ..= 60000"));
        }
        Ok((chunk, window, rto))
    }
}

/// Where a copy stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum CopyState {
    /// READs and WRITEs are under way.
    Running,
    /// Every byte was acknowledged by the target.
    Done,
    /// The copy stopped: a memnode refused a request for a reason retrying cannot fix.
    Failed(String),
}

/// A copy's progress, as the admin API reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CopyStatus {
    /// The copy's id.
    pub id: u64,
    /// What was asked.
    pub request: CopyRequest,
    /// Where it stands.
    pub state: CopyState,
    /// Bytes acknowledged by the target (a prefix of the copy).
    pub bytes_done: u64,
    /// READs issued by this incarnation.
    pub reads: u64,
    /// Of which re-issued (go-back after a NAK or a timeout).
    pub rereads: u64,
    /// Times this incarnation went back to an earlier chunk.
    pub go_backs: u64,
    /// How many times a restarted switch resumed it.
    pub resumed: u32,
    /// The offset this incarnation resumed from.
    pub resumed_from: u64,
}

/// `POST /v1/copies` on the switch at `switch_admin`, presenting `credential` (the
/// memory node admin token the switch was started with): the copy's first status.
pub fn start_copy_as(
    switch_admin: &str,
    credential: Option<&str>,
    req: &CopyRequest,
) -> Result<CopyStatus, ClientError> {
    HttpClient::new(switch_admin)?
        .with_token(credential.map(str::to_owned))
        .call("POST", "/v1/copies", Some(&json(req)?), &[201])
}

/// `GET /v1/copies/{id}` on the switch at `switch_admin`, presenting `credential`.
pub fn copy_status_as(
    switch_admin: &str,
    credential: Option<&str>,
    id: u64,
) -> Result<CopyStatus, ClientError> {
    HttpClient::new(switch_admin)?
        .with_token(credential.map(str::to_owned))
        .call("GET", &format!("/v1/copies/{id}"), None, &[200])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(len: u64) -> CopyRequest {
        let end = CopyEnd {
            memnode: "http://127.0.0.1:1".into(),
            va: 0,
            rkey: 1,
        };
        CopyRequest {
            source: end.clone(),
            target: end,
            len,
            chunk: None,
            window: None,
            rto_ms: None,
        }
    }

    #[test]
    fn sizes_are_checked() {
        assert_eq!(
            req(1).checked(),
            Ok((DEFAULT_CHUNK, DEFAULT_WINDOW, DEFAULT_RTO_MS))
        );
        assert!(req(0).checked().is_err());
        assert!(req(MAX_COPY + 1).checked().is_err());
        let mut r = req(10);
        r.chunk = Some(1000);
        assert!(r.checked().is_err());
        for bad in [0, 32, 96, 1536, (1 << 20) + 1024] {
            r.chunk = Some(bad);
            assert!(r.checked().is_err(), "{bad}");
        }
        for good in [64, 128, 256, 512, 1024, 3072, 1 << 20] {
            r.chunk = Some(good);
            assert!(r.checked().is_ok(), "{good}");
        }
        r.chunk = Some(2048);
        r.window = Some(17);
        assert!(r.checked().is_err());
    }
}
