//! Counters of the RPC workers.

use std::sync::atomic::{AtomicU64, Ordering};

/// The RPC counters of a node (shared by the workers and the data plane).
#[derive(Debug, Default)]
pub struct RpcStats {
    requests: AtomicU64,
    malformed: AtomicU64,
    refused: AtomicU64,
    replies: AtomicU64,
    replies_dropped: AtomicU64,
    receive_errors: AtomicU64,
    reply_failures: AtomicU64,
}

/// A copy of [`RpcStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RpcStatsSnapshot {
    /// Request messages taken off receive queues.
    pub requests: u64,
    /// Requests that did not parse (answered with an error reply).
    pub malformed: u64,
    /// Requests whose memory access was refused (key, bounds, rights, alignment).
    pub refused: u64,
    /// Replies posted.
    pub replies: u64,
    /// Replies that could not be posted (the queue pair was gone or its send queue full).
    pub replies_dropped: u64,
    /// Receive buffers that completed with an error (message too long, aborted).
    pub receive_errors: u64,
    /// Reply SENDs that completed with an error (the client never acknowledged).
    pub reply_failures: u64,
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

impl RpcStats {
    /// One request taken.
    pub fn on_request(&self) {
        bump(&self.requests);
    }

    /// One malformed request.
    pub fn on_malformed(&self) {
        bump(&self.malformed);
    }

    /// One refused access.
    pub fn on_refused(&self) {
        bump(&self.refused);
    }

    /// One reply posted.
    pub fn on_reply(&self) {
        bump(&self.replies);
    }

    /// One reply not posted.
    pub fn on_reply_dropped(&self) {
        bump(&self.replies_dropped);
    }

    /// One receive buffer completed with an error.
    pub fn on_receive_error(&self) {
        bump(&self.receive_errors);
    }

    /// One reply SEND completed with an error.
    pub fn on_reply_failure(&self) {
        bump(&self.reply_failures);
    }

    /// A copy of the counters.
    pub fn snapshot(&self) -> RpcStatsSnapshot {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        RpcStatsSnapshot {
            requests: g(&self.requests),
            malformed: g(&self.malformed),
            refused: g(&self.refused),
            replies: g(&self.replies),
            replies_dropped: g(&self.replies_dropped),
            receive_errors: g(&self.receive_errors),
            reply_failures: g(&self.reply_failures),
        }
    }
}
