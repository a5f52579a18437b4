//! Data-plane statistics outside the pipeline: what the soft switch's sockets did
//! ([`crate::switch`] counts them, [`crate::admin`] exports them at `/metrics`).

use std::sync::atomic::AtomicU64;

/// Data-plane statistics outside the pipeline.
#[derive(Debug, Default)]
pub struct IoStats {
    /// Datagrams received.
    pub received: AtomicU64,
    /// Datagrams sent.
    pub sent: AtomicU64,
    /// Send failures.
    pub send_errors: AtomicU64,
    /// Time each packet spent in the pipeline (waiting for it included).
    pub pipeline_latency: telemetry::histogram::Histogram,
}
