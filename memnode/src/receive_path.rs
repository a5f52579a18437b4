//! Which socket the data plane reads requests from.

use std::fmt;
use std::str::FromStr;

/// How the data plane receives soft-RoCE requests. Responses always leave through
/// the node's UDP socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReceivePath {
    /// A UDP socket: payloads only, so each request's ICRC is checked against the
    /// header a Linux UDP socket sends (IP id 0, DF). Interoperates with soft-RoCE
    /// peers that send from UDP sockets (dmkv's clients, the kernel's rxe without
    /// offload); drops valid requests from senders that number their datagrams
    /// (RoCE NICs, scapy's defaults). Needs no privileges.
    #[default]
    Udp,
    /// A packet socket on the listen address's interface: whole frames, so each
    /// request's ICRC is checked against the IPv4 header it was actually sent with
    /// (any IP id, any flags). The UDP socket is kept for sending and discards what
    /// it receives. Needs `CAP_NET_RAW`.
    Packet,
}

impl ReceivePath {
    /// The name used by `--receive`.
    pub fn name(self) -> &'static str {
        match self {
            ReceivePath::Udp => "udp",
            ReceivePath::Packet => "packet",
        }
    }
}

impl fmt::Display for ReceivePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ReceivePath {
    type Err = String;

    fn from_str(s: &str) -> Result<ReceivePath, String> {
        match s {
            "udp" => Ok(ReceivePath::Udp),
            "packet" => Ok(ReceivePath::Packet),
            other => Err(format!(
                "unknown receive path {other:?}: use udp (UDP socket, no privileges) or \
                 packet (packet socket that sees the real IP header, needs CAP_NET_RAW)"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_ones_explain() {
        for p in [ReceivePath::Udp, ReceivePath::Packet] {
            assert_eq!(p.name().parse::<ReceivePath>(), Ok(p));
        }
        let err = "raw".parse::<ReceivePath>().unwrap_err();
        assert!(err.contains("udp") && err.contains("packet"), "{err}");
    }
}
