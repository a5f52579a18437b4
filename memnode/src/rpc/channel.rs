//! The two-sided half of one memory-node queue pair: the receive queue client SENDs
//! land in, and the requester that sends the replies back.
//!
//! An RC queue pair is bidirectional: the node's responder (one-sided verbs and
//! incoming SENDs) answers the client's requester, and this channel's requester sends
//! replies to the client's responder, starting at its own PSN ([`RpcChannel::psn`],
//! reported to the client in the queue pair's info as `rpc_psn`). Acknowledgements of
//! the replies arrive on the same queue pair and go to [`RpcChannel::handle_response`].

use std::time::Instant;

use dmkv_api::rpc::RPC_MAX_REQUEST;
use verbs::rc::{MAX_PACKET, RcConfig, Requester};
use verbs::recv::RecvQueue;
use verbs::wire::IcrcPath;
use verbs::wr::{PostError, WorkRequest};

use super::stats::RpcStats;

/// Receive buffers posted per queue pair: requests a client may have outstanding
/// before its SENDs draw RNR NAKs.
pub const RPC_RECV_DEPTH: usize = 16;

/// The receive queue and reply requester of one queue pair.
#[derive(Debug)]
pub struct RpcChannel {
    recv: RecvQueue,
    requester: Requester,
    psn: u32,
}

impl RpcChannel {
    /// The channel of node queue pair `qpn` connected to client queue pair
    /// `client_qpn`, sending replies from `psn` on `path` (node → client), with
    /// [`RPC_RECV_DEPTH`] buffers posted.
    pub fn new(config: RcConfig, qpn: u32, client_qpn: u32, psn: u32, path: IcrcPath) -> Self {
        let recv = RecvQueue::new(RPC_RECV_DEPTH);
        for i in 0..RPC_RECV_DEPTH {
            // Cannot fail: the queue holds exactly this many.
            let _ = recv.post_recv(i as u64, vec![0; RPC_MAX_REQUEST]);
        }
        RpcChannel {
            recv,
            requester: Requester::new(config, qpn, client_qpn, psn, path),
            psn,
        }
    }

    /// The receive queue requests land in.
    pub fn recv(&self) -> &RecvQueue {
        &self.recv
    }

    /// The first PSN of the replies.
    pub fn psn(&self) -> u32 {
        self.psn
    }

    /// Posts a reply message.
    pub fn post_reply(&mut self, wr_id: u64, reply: Vec<u8>) -> Result<(), PostError> {
        self.requester.post(wr_id, WorkRequest::send(reply))
    }

    /// Hands an acknowledgement (or NAK) from the client to the reply requester;
    /// counts replies that failed.
    pub fn handle_response(
        &mut self,
        now: Instant,
        datagram: &[u8],
        stats: &RpcStats,
    ) -> Result<(), verbs::wire::WireError> {
        let r = self.requester.handle_datagram(now, datagram);
        self.reap(stats);
        r
    }

    /// Fires the retransmission timer if it is due.
    pub fn handle_timeout(&mut self, now: Instant, stats: &RpcStats) {
        if self.requester.poll_timeout().is_some_and(|t| t <= now) {
            self.requester.handle_timeout(now);
            self.reap(stats);
        }
    }

    /// Whether replies wait to be transmitted.
    pub fn wants_transmit(&self) -> bool {
        self.requester.wants_transmit()
    }

    /// The next reply packet to transmit, written into `buf` (at least
    /// [`MAX_PACKET`] bytes); its length.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        if buf.len() < MAX_PACKET {
            return None;
        }
        self.requester.poll_transmit(now, buf)
    }

    /// Takes the reply completions, counting failures (a failed reply means the
    /// client stopped acknowledging; the client times its request out).
    fn reap(&mut self, stats: &RpcStats) {
        while let Some(c) = self.requester.poll_completion() {
            if c.result.is_err() {
                stats.on_reply_failure();
            }
        }
    }
}
