//! The peers whose sockets receive coalesced buffers: clients and memory nodes that
//! said so when their connection through the switch was made (see
//! `verbs::net::OffloadMode`). The data plane segments runs of datagrams only to them,
//! and only when its own socket [may](verbs::net::BatchSocket::may_segment_to).

use std::collections::HashSet;
use std::net::SocketAddrV4;
use std::sync::RwLock;

use crate::control::Route;

/// The addresses runs may be segmented to, rebuilt from the routes whenever they
/// change (so a route's removal takes its peers with it).
#[derive(Debug, Default)]
pub struct CoalescingPeers {
    peers: RwLock<HashSet<SocketAddrV4>>,
}

impl CoalescingPeers {
    /// Replaces the set with the peers `routes` name as coalescing.
    pub fn rebuild<'a>(&self, routes: impl IntoIterator<Item = &'a Route>) {
        let mut set = HashSet::new();
        for r in routes {
            if r.coalesce_client {
                set.insert(r.client);
            }
            if r.coalesce_memnode {
                set.insert(r.memnode);
            }
        }
        *self.peers.write().unwrap_or_else(|p| p.into_inner()) = set;
    }

    /// Marks, for each destination of `dsts`, whether it receives coalesced buffers.
    pub fn mark(&self, dsts: impl Iterator<Item = SocketAddrV4>, out: &mut Vec<bool>) {
        out.clear();
        let set = self.peers.read().unwrap_or_else(|p| p.into_inner());
        if set.is_empty() {
            return;
        }
        out.extend(dsts.map(|d| set.contains(&d)));
    }

    /// Whether `peer` receives coalesced buffers.
    pub fn contains(&self, peer: SocketAddrV4) -> bool {
        self.peers
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&peer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(client: &str, memnode: &str, c: bool, m: bool) -> Route {
        Route {
            conn: None,
            client: client.parse().unwrap(),
            client_qpn: 1,
            client_psn: 0,
            memnode: memnode.parse().unwrap(),
            memnode_qpn: 2,
            pmtu: 1024,
            coalesce_client: c,
            coalesce_memnode: m,
        }
    }

    #[test]
    fn only_peers_that_said_so_are_marked_and_removal_unmarks() {
        let peers = CoalescingPeers::default();
        let a = route("127.0.0.1:1000", "127.0.0.1:4791", true, true);
        let b = route("127.0.0.1:1001", "127.0.0.1:4791", false, true);
        peers.rebuild([&a, &b]);
        let mut marks = Vec::new();
        let dsts = [a.client, b.client, a.memnode];
        peers.mark(dsts.into_iter(), &mut marks);
        assert_eq!(marks, vec![true, false, true]);
        peers.rebuild([&b]);
        assert!(!peers.contains(a.client) && peers.contains(b.memnode));
        peers.rebuild([]);
        peers.mark(dsts.into_iter(), &mut marks);
        assert!(marks.is_empty(), "no peer: nothing marked");
    }
}
