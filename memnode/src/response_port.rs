//! Which UDP port a queue pair's responses are sent to.

use std::fmt;
use std::net::SocketAddrV4;
use std::str::FromStr;

use verbs::wire::ROCE_UDP_PORT;

/// Where responses go on the client's host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ResponsePort {
    /// Back to the port the client's requests come from: what a requester behind a
    /// UDP socket on an ephemeral port (dmkv's clients, several on one host) needs.
    /// Tools that recognise RoCEv2 by destination port 4791 (stock scapy, some
    /// dissectors) do not decode these responses as RoCE.
    #[default]
    Client,
    /// To UDP port 4791, as RoCEv2 NICs send both directions of a queue pair: for
    /// peers that receive on 4791 (a NIC, a tool). dmkv's own clients do not listen
    /// there and cannot use a node in this mode.
    Roce,
}

impl ResponsePort {
    /// The name used by `--response-port`.
    pub fn name(self) -> &'static str {
        match self {
            ResponsePort::Client => "client",
            ResponsePort::Roce => "roce",
        }
    }

    /// Where the responses to requests from `client` go.
    pub fn response_addr(self, client: SocketAddrV4) -> SocketAddrV4 {
        match self {
            ResponsePort::Client => client,
            ResponsePort::Roce => SocketAddrV4::new(*client.ip(), ROCE_UDP_PORT),
        }
    }
}

impl fmt::Display for ResponsePort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ResponsePort {
    type Err = String;

    fn from_str(s: &str) -> Result<ResponsePort, String> {
        match s {
            "client" => Ok(ResponsePort::Client),
            "roce" | "4791" => Ok(ResponsePort::Roce),
            other => Err(format!(
                "unknown response port {other:?}: use client (the port requests come from) \
                 or roce (UDP port 4791, as RoCEv2 NICs send)"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn client_keeps_the_port_and_roce_uses_4791() {
        let c = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 7), 51234);
        assert_eq!(ResponsePort::Client.response_addr(c), c);
        assert_eq!(
            ResponsePort::Roce.response_addr(c),
            SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 7), 4791)
        );
        for p in [ResponsePort::Client, ResponsePort::Roce] {
            assert_eq!(p.name().parse::<ResponsePort>(), Ok(p));
        }
        assert!("nic".parse::<ResponsePort>().unwrap_err().contains("4791"));
    }
}
