//! Counters of the RPC workers.

use std::sync::atomic::{AtomicU64, Ordering};

use telemetry::family::{Family, Number, labels};

/// The RPC counters of a node (shared by the workers and the data plane).
#[derive(Debug, Default)]
pub struct RpcStats {
    workers: AtomicU64,
    requests: AtomicU64,
    malformed: AtomicU64,
    refused: AtomicU64,
    replies: AtomicU64,
    replies_dropped: AtomicU64,
    receive_errors: AtomicU64,
    reply_failures: AtomicU64,
    failed: AtomicU64,
    ring_requests: AtomicU64,
    ring_polls: AtomicU64,
}

/// A copy of [`RpcStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RpcStatsSnapshot {
    /// Worker threads running.
    pub workers: u64,
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
    /// Requests whose execution panicked (answered with `Failed`; the worker goes on).
    pub failed: u64,
    /// Requests taken off request rings (write-based RPC; counted in `requests` too).
    pub ring_requests: u64,
    /// Polling passes over the request rings.
    pub ring_polls: u64,
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

impl RpcStats {
    /// Sets the number of worker threads running.
    pub fn set_workers(&self, n: usize) {
        self.workers.store(n as u64, Ordering::Relaxed);
    }

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

    /// One request whose execution panicked.
    pub fn on_failed(&self) {
        bump(&self.failed);
    }

    /// One request taken off a ring.
    pub fn on_ring_request(&self) {
        bump(&self.ring_requests);
    }

    /// One polling pass over the rings.
    pub fn on_ring_poll(&self) {
        bump(&self.ring_polls);
    }

    /// A copy of the counters.
    pub fn snapshot(&self) -> RpcStatsSnapshot {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        RpcStatsSnapshot {
            workers: g(&self.workers),
            requests: g(&self.requests),
            malformed: g(&self.malformed),
            refused: g(&self.refused),
            replies: g(&self.replies),
            replies_dropped: g(&self.replies_dropped),
            receive_errors: g(&self.receive_errors),
            reply_failures: g(&self.reply_failures),
            failed: g(&self.failed),
            ring_requests: g(&self.ring_requests),
            ring_polls: g(&self.ring_polls),
        }
    }
}

impl RpcStatsSnapshot {
    /// The counters as metric families (`dmkv_memnode_rpc_*`).
    pub fn families(&self) -> Vec<Family> {
        let done = self
            .requests
            .saturating_sub(self.malformed)
            .saturating_sub(self.refused)
            .saturating_sub(self.failed);
        vec![
            Family::gauge_value(
                "dmkv_memnode_rpc_workers",
                "RPC worker threads running (--rpc-workers)",
                self.workers,
            ),
            Family::counter(
                "dmkv_memnode_rpc_requests_total",
                "RPC requests taken off receive queues, by outcome: done, malformed (answered with an error, memory untouched), refused (key, bounds, rights or alignment; memory untouched), failed (the execution panicked; answered with an error)",
                [
                    ("done", done),
                    ("malformed", self.malformed),
                    ("refused", self.refused),
                    ("failed", self.failed),
                ]
                .into_iter()
                .map(|(o, v)| (labels(&[("outcome", o)]), Number::Int(v)))
                .collect(),
            ),
            Family::counter_value(
                "dmkv_memnode_rpc_replies_total",
                "RPC replies posted as SENDs",
                self.replies,
            ),
            Family::counter_value(
                "dmkv_memnode_rpc_replies_dropped_total",
                "RPC replies that could not be posted (queue pair gone or send queue full)",
                self.replies_dropped,
            ),
            Family::counter_value(
                "dmkv_memnode_rpc_receive_errors_total",
                "RPC receive buffers completed with an error (message too long, aborted)",
                self.receive_errors,
            ),
            Family::counter_value(
                "dmkv_memnode_rpc_reply_failures_total",
                "RPC reply SENDs the client never acknowledged (retries exhausted)",
                self.reply_failures,
            ),
            Family::counter_value(
                "dmkv_memnode_rpc_ring_requests_total",
                "RPC requests taken off write-based request rings (also in dmkv_memnode_rpc_requests_total)",
                self.ring_requests,
            ),
            Family::counter_value(
                "dmkv_memnode_rpc_ring_polls_total",
                "Polling passes of the RPC workers over the request rings",
                self.ring_polls,
            ),
        ]
    }
}
