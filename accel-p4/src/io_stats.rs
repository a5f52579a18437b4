//! Data-plane statistics outside the pipeline: what the soft switch's sockets did
//! ([`crate::switch`] counts them, [`crate::admin`] exports them at `/metrics`).

use std::sync::atomic::AtomicU64;

/// Data-plane statistics outside the pipeline.
#[derive(Debug)]
pub struct IoStats {
    /// Datagrams received.
    pub received: AtomicU64,
    /// Datagrams sent.
    pub sent: AtomicU64,
    /// Send failures.
    pub send_errors: AtomicU64,
    /// Datagrams sent as a later segment of a segmented send (runs to peers that
    /// receive coalesced buffers).
    pub segmented: AtomicU64,
    /// Time each packet spent in the pipeline (parse, stages, deparse), in
    /// sub-microsecond buckets ([`telemetry::histogram::PER_PACKET_BUCKETS`]).
    pub pipeline_latency: telemetry::histogram::Histogram,
}

impl Default for IoStats {
    fn default() -> IoStats {
        IoStats {
            received: AtomicU64::new(0),
            sent: AtomicU64::new(0),
            send_errors: AtomicU64::new(0),
            segmented: AtomicU64::new(0),
            pipeline_latency: telemetry::histogram::Histogram::new(
                telemetry::histogram::PER_PACKET_BUCKETS,
            ),
        }
    }
}
