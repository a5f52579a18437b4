//! Serving memory through an RDMA NIC, as the admin API sees it: the settings
//! (`--transport rdma`), the scope a caller gets, the errors, and the [`RdmaServing`]
//! trait the NIC path ([`crate::rdma_path`], cargo feature `rdma`) implements.
//!
//! The NIC executes every READ, WRITE and atomic on the node's registered memory; the
//! node's CPU only creates, connects and destroys queue pairs on request (and destroys
//! those whose grant expired).

use std::fmt;
use std::str::FromStr;

use dmkv_api::grant::Grant;
use dmkv_api::memnode_rdma::{CreateRdmaQpRequest, CreateRdmaQpResponse, RdmaQpInfo};

/// The data-plane transports a memory node serves, besides its admin API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ServeTransport {
    /// Soft RoCE (RoCEv2 over UDP) only.
    #[default]
    Udp,
    /// An RDMA NIC (through libibverbs), with the soft-RoCE listener beside it.
    Rdma,
}

impl FromStr for ServeTransport {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "udp" => Ok(ServeTransport::Udp),
            "rdma" => Ok(ServeTransport::Rdma),
            other => Err(format!(
                "unknown transport {other:?}: a memory node serves `udp` (soft RoCE) or `rdma` (an RDMA NIC, beside soft RoCE)"
            )),
        }
    }
}

impl fmt::Display for ServeTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ServeTransport::Udp => "udp",
            ServeTransport::Rdma => "rdma",
        })
    }
}

/// Which NIC, port and GID the node serves RDMA from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RdmaServeConfig {
    /// The device by name (e.g. `mlx5_0`, `rxe0`); empty: the first one listed.
    pub device: String,
    /// The GID table index packets are sourced from; `None` picks one (RoCE v2 with an
    /// IPv4-mapped address first).
    pub gid_index: Option<u8>,
    /// The physical port, numbered from 1.
    pub ib_port: u8,
}

/// Who asks for a queue pair, and so what its memory keys may reach.
#[derive(Debug, Clone)]
pub enum RdmaScope<'a> {
    /// The admin token: the whole region under the region's key.
    WholeRegion,
    /// Grants of one client: each extent under its own key, in a protection domain of
    /// the queue pair's own, with its grant's rights, until the first grant expires.
    Grants(&'a [Grant]),
}

/// Why an RDMA queue pair was not created or destroyed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RdmaQpError {
    /// A field of the request is out of range.
    #[error("{0}")]
    Invalid(String),
    /// The node serves its maximum number of queue pairs.
    #[error("this node serves its maximum of {0} RDMA queue pairs")]
    TooMany(usize),
    /// No such queue pair.
    #[error("no RDMA queue pair {0} ({0:#x}) on this node")]
    NotFound(u32),
    /// The queue pair belongs to another client.
    #[error("RDMA queue pair {qpn} does not belong to client {client:?}")]
    NotOwner {
        /// The queue pair.
        qpn: u32,
        /// Who asked.
        client: String,
    },
    /// The device refused (creating, registering or connecting).
    #[error("RDMA device {device}: {detail}")]
    Device {
        /// The device.
        device: String,
        /// What failed.
        detail: String,
    },
}

/// The NIC side of a memory node: creates, lists and destroys RC responder queue pairs
/// whose requests the NIC serves from the node's registered memory.
pub trait RdmaServing: Send + Sync + fmt::Debug {
    /// The device served from.
    fn device(&self) -> &str;

    /// Create a responder queue pair for `req`'s client queue pair, connect it (RTR,
    /// RTS) and say where it is and what keys reach what memory.
    fn create(
        &self,
        req: &CreateRdmaQpRequest,
        scope: RdmaScope<'_>,
    ) -> Result<CreateRdmaQpResponse, RdmaQpError>;

    /// Every queue pair served.
    fn list(&self) -> Vec<RdmaQpInfo>;

    /// Destroy queue pair `qpn`; with `client`, only if it belongs to that client.
    fn delete(&self, qpn: u32, client: Option<&str>) -> Result<(), RdmaQpError>;

    /// Destroy the queue pairs whose grant expired before `now_ms` (unix ms); returns
    /// how many.
    fn expire(&self, now_ms: u64) -> usize;

    /// Queue pairs served.
    fn len(&self) -> usize;

    /// Whether no queue pair is served.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The error `--transport rdma` gives in a build without the `rdma` feature.
pub fn not_built(device: &str) -> String {
    format!(
        "--transport rdma (device {device}) needs a memnode built with the `rdma` cargo feature (cargo build -p memnode --features rdma); this build serves `udp` (soft RoCE) only: use --transport udp"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transports_parse_and_print() {
        for t in [ServeTransport::Udp, ServeTransport::Rdma] {
            assert_eq!(t.to_string().parse::<ServeTransport>(), Ok(t));
        }
        let e = "ib".parse::<ServeTransport>().unwrap_err();
        assert!(e.contains("udp") && e.contains("rdma"), "{e}");
    }

    #[test]
    fn the_missing_feature_is_named_with_the_alternative() {
        let e = not_built("mlx5_0");
        assert!(
            e.contains("mlx5_0") && e.contains("`rdma`") && e.contains("udp"),
            "{e}"
        );
    }
}
