//! What an operator asks for when starting a copy, and what the switch remembers of it
//! across restarts.

use serde::{Deserialize, Serialize};

use super::job::CopyState;

/// Bytes per READ when the request does not say (16 PMTUs of 1024 bytes).
pub const DEFAULT_CHUNK: u32 = 16 * 1024;
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CopyRequest {
    /// Where the bytes are.
    pub source: CopyEnd,
    /// Where they go.
    pub target: CopyEnd,
    /// How many bytes (1 ..= 1 GiB).
    pub len: u64,
    /// Bytes per READ (a multiple of 1024; default 16 KiB).
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
        if chunk == 0 || !chunk.is_multiple_of(1024) || chunk > 1 << 20 {
            return Err(format!(
                "chunk {chunk} must be a non-zero multiple of 1024 bytes, at most 1 MiB"
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
        r.chunk = Some(2048);
        r.window = Some(17);
        assert!(r.checked().is_err());
    }
}
