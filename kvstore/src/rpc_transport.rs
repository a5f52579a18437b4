//! How a session's RPC requests reach the memory node's workers (Storm compares
//! both, Novakovic et al., SYSTOR'19):
//!
//! - [`RpcTransport::Send`] (default): the request is a SEND on the session's queue
//!   pair, landing in a receive buffer the node posted;
//! - [`RpcTransport::Write`]: the request is one WRITE into the queue pair's own
//!   request ring in memory-node memory, which the node's workers poll. The queue
//!   pair asks for the ring when it is created; a node without rings (or with none
//!   free) gives none, and the session's requests then go by SEND.
//!
//! Replies come back as SENDs on the queue pair either way.

use std::fmt;
use std::str::FromStr;

/// How RPC requests travel to the memory node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum RpcTransport {
    /// A SEND on the queue pair.
    #[default]
    Send,
    /// A WRITE into the queue pair's request ring.
    Write,
}

impl RpcTransport {
    /// Its name in properties and flags: `send`, `write`.
    pub fn name(self) -> &'static str {
        match self {
            RpcTransport::Send => "send",
            RpcTransport::Write => "write",
        }
    }
}

impl fmt::Display for RpcTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for RpcTransport {
    type Err = String;

    fn from_str(s: &str) -> Result<RpcTransport, String> {
        match s {
            "send" => Ok(RpcTransport::Send),
            "write" => Ok(RpcTransport::Write),
            other => Err(format!("unknown RPC transport {other:?} (send or write)")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for t in [RpcTransport::Send, RpcTransport::Write] {
            assert_eq!(t.name().parse::<RpcTransport>(), Ok(t));
            assert_eq!(t.to_string(), t.name());
        }
        assert!("rdma".parse::<RpcTransport>().is_err());
        assert_eq!(RpcTransport::default(), RpcTransport::Send);
    }
}
