//! Transports: how a worker thread's queue pairs reach memory.
//!
//! Every transport offers the same verbs with the same semantics; they differ
//! in where the memory is and who moves the bytes:
//! - [`local`]: the memory is in this process; verbs are applied directly (embedded mode).
//! - [`shm`]: the memory is a shared-memory file mapped by a memory node and by clients on the
//!   same host, which apply verbs to it directly with no memory-node CPU (CXL-like).
//! - [`udp`]: soft RoCE — the RC protocol core over UDP sockets to a memory node.
//! - `rdma` (cargo feature `rdma`): real RDMA NICs through libibverbs.
//!
//! A transport instance belongs to one worker thread (it is not `Send` by intent:
//! SMART's thread-aware resource allocation), and serves many tasks on that thread.

pub mod local;
pub mod qpn_map;
#[cfg(feature = "rdma")]
pub mod rdma;
pub mod shm;
pub mod udp;
mod wire_cost;

use std::time::Instant;

pub use wire_cost::{WireCost, wire_cost};

use crate::wr::{Completion, PostError, WorkRequest};

/// Identifies a queue pair within one transport instance.
pub type QpHandle = usize;

/// Which transport carries the verbs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransportKind {
    /// In-process memory.
    Local,
    /// A shared-memory file on this host.
    Shm,
    /// Soft RoCE over UDP.
    Udp,
    /// A real RDMA NIC.
    Rdma,
}

impl TransportKind {
    /// Lower-case name as used on command lines.
    pub fn name(self) -> &'static str {
        match self {
            TransportKind::Local => "local",
            TransportKind::Shm => "shm",
            TransportKind::Udp => "udp",
            TransportKind::Rdma => "rdma",
        }
    }
}

impl std::fmt::Display for TransportKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for TransportKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "local" => Ok(TransportKind::Local),
            "shm" => Ok(TransportKind::Shm),
            "udp" => Ok(TransportKind::Udp),
            "rdma" => Ok(TransportKind::Rdma),
            other => Err(format!(
                "unknown transport {other:?}: choose local, shm, udp or rdma"
            )),
        }
    }
}

/// Counters of one transport instance (all of its queue pairs).
///
/// For `local` and `shm`, packets and bytes are what the same verbs would put on
/// the wire as RoCEv2 (see [`wire_cost`]), so protocol figures compare across transports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TransportStats {
    /// Batches posted (one doorbell each).
    pub doorbells: u64,
    /// Work requests posted.
    pub work_requests: u64,
    /// Work requests completed.
    pub completions: u64,
    /// Work requests completed with an error.
    pub errors: u64,
    /// Packets sent.
    pub packets_sent: u64,
    /// Packets received.
    pub packets_received: u64,
    /// Bytes sent (RoCE bytes, BTH through ICRC).
    pub bytes_sent: u64,
    /// Bytes received.
    pub bytes_received: u64,
    /// Packets retransmitted.
    pub retransmissions: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// NAKs received.
    pub naks: u64,
    /// Datagrams dropped on receive (malformed, bad ICRC, unknown QP).
    pub dropped: u64,
    /// Datagrams sent with one system call batch (`sendmmsg`) beyond the first.
    pub batched_sends: u64,
    /// Datagrams that left as a later segment of a segmented send (`UDP_SEGMENT`,
    /// see [`crate::net::OffloadMode`]): runs that crossed the kernel as one buffer.
    pub segmented_sends: u64,
}

impl TransportStats {
    /// Field-wise difference `self − earlier`, for measuring an interval.
    pub fn since(&self, earlier: &TransportStats) -> TransportStats {
        TransportStats {
            doorbells: self.doorbells - earlier.doorbells,
            work_requests: self.work_requests - earlier.work_requests,
            completions: self.completions - earlier.completions,
            errors: self.errors - earlier.errors,
            packets_sent: self.packets_sent - earlier.packets_sent,
            packets_received: self.packets_received - earlier.packets_received,
            bytes_sent: self.bytes_sent - earlier.bytes_sent,
            bytes_received: self.bytes_received - earlier.bytes_received,
            retransmissions: self.retransmissions - earlier.retransmissions,
            timeouts: self.timeouts - earlier.timeouts,
            naks: self.naks - earlier.naks,
            dropped: self.dropped - earlier.dropped,
            batched_sends: self.batched_sends - earlier.batched_sends,
            segmented_sends: self.segmented_sends - earlier.segmented_sends,
        }
    }

    /// Field-wise sum, for aggregating threads.
    pub fn add(&mut self, other: &TransportStats) {
        self.doorbells += other.doorbells;
        self.work_requests += other.work_requests;
        self.completions += other.completions;
        self.errors += other.errors;
        self.packets_sent += other.packets_sent;
        self.packets_received += other.packets_received;
        self.bytes_sent += other.bytes_sent;
        self.bytes_received += other.bytes_received;
        self.retransmissions += other.retransmissions;
        self.timeouts += other.timeouts;
        self.naks += other.naks;
        self.dropped += other.dropped;
        self.batched_sends += other.batched_sends;
        self.segmented_sends += other.segmented_sends;
    }
}

/// Why a queue pair could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// An I/O error (socket, file).
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The transport is not available on this machine.
    #[error("{0}")]
    Unavailable(String),
    /// The parameters are invalid.
    #[error("invalid connection parameters: {0}")]
    Invalid(String),
}

/// A worker thread's access to remote memory: queue pairs, doorbells and completions.
pub trait Transport {
    /// Which transport this is.
    fn kind(&self) -> TransportKind;

    /// Post a batch of work requests to one queue pair with one doorbell.
    ///
    /// All or nothing: if the batch does not fit in the send queue nothing is posted.
    fn post(&mut self, qp: QpHandle, batch: Vec<(u64, WorkRequest)>) -> Result<(), PostError>;

    /// Post one work request with its own doorbell: [`Transport::post`] of a batch of
    /// one, which transports may do without building the batch.
    fn post_one(&mut self, qp: QpHandle, wr_id: u64, wr: WorkRequest) -> Result<(), PostError> {
        self.post(qp, vec![(wr_id, wr)])
    }

    /// Room left in a queue pair's send queue.
    fn send_queue_room(&self, qp: QpHandle) -> usize;

    /// Make progress without blocking; append finished work requests to `out`.
    fn poll(&mut self, now: Instant, out: &mut Vec<(QpHandle, Completion)>) -> usize;

    /// Block until progress may be possible (a datagram arrived, a timer fired) or `until`.
    fn wait(&mut self, until: Instant);

    /// Counters over all queue pairs.
    fn stats(&self) -> TransportStats;

    /// What `wr` puts on the wire on queue pair `qp` without loss — the packets and
    /// bytes this transport counts for it — at that queue pair's path MTU.
    fn wire_cost(&self, qp: QpHandle, wr: &WorkRequest) -> WireCost;
}
