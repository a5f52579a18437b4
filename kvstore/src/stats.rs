//! What operations cost on the wire: round trips and RoCE bytes, per operation and per session.
//!
//! A round trip is one batch of work requests posted with one doorbell whose
//! completions the operation waited for. Bytes are what the batch puts on the wire
//! as RoCEv2 (BTH through ICRC, both directions) without retransmissions, computed
//! with [`verbs::transport::wire_cost`]; the transport's own counters
//! ([`crate::Session::transport_stats`]) add what loss and retransmission cost.

/// The cost of one operation (or of a sum of operations).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpStats {
    /// Batches awaited (doorbells whose completions the operation waited for).
    pub round_trips: u64,
    /// Work requests posted.
    pub work_requests: u64,
    /// RoCE bytes of the requests.
    pub bytes_sent: u64,
    /// RoCE bytes of the responses.
    pub bytes_received: u64,
    /// Link attempts that failed because another writer linked first.
    pub cas_failures: u64,
    /// Traversals restarted because a pointer failed validation or went stale.
    pub restarts: u64,
    /// Cached tail hints that failed validation (the node moved on or was reused).
    pub stale_hints: u64,
    /// Calls to the metadata service.
    pub metadata_calls: u64,
    /// Link CASes the switch accelerator redirected to the key's tail (and succeeded).
    pub steered_links: u64,
    /// Links of a replicated chain this operation put onto the primary for
    /// another writer whose link every backup already held.
    pub helped_links: u64,
    /// RPCs to memory nodes' workers (each also counts as a round trip).
    pub rpcs: u64,
    /// Operations a `hybrid` client gave up one-sided, finding a latch held, and
    /// handed to the memory node's workers (in-place tables).
    pub handed_to_rpc: u64,
    /// While set, an in-place latch acquisition that finds its latch held gives the
    /// operation up at once (hybrid access). Per operation; not a counter.
    pub(crate) hand_back: bool,
}

impl OpStats {
    /// Field-wise sum.
    pub fn add(&mut self, other: &OpStats) {
        self.round_trips += other.round_trips;
        self.work_requests += other.work_requests;
        self.bytes_sent += other.bytes_sent;
        self.bytes_received += other.bytes_received;
        self.cas_failures += other.cas_failures;
        self.restarts += other.restarts;
        self.stale_hints += other.stale_hints;
        self.metadata_calls += other.metadata_calls;
        self.steered_links += other.steered_links;
        self.helped_links += other.helped_links;
        self.rpcs += other.rpcs;
        self.handed_to_rpc += other.handed_to_rpc;
    }

    /// Bytes in both directions.
    pub fn bytes(&self) -> u64 {
        self.bytes_sent + self.bytes_received
    }
}

/// Totals of a session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionStats {
    /// Table operations finished (successfully or not).
    pub operations: u64,
    /// Those of them that took more than one round trip (an RPC counts as one): the
    /// share of operations the one-sided path cannot finish at once — long chains,
    /// contention, collisions, stale hints.
    pub multi_round_trip_operations: u64,
    /// Their summed cost.
    pub foreground: OpStats,
    /// Work done after operations returned (advancing shortcuts, checking roots).
    pub background: OpStats,
    /// Queue pairs the session made after it opened: to replace one that failed or
    /// idled out, or to reach a memory node it could not reach when it opened.
    pub reconnects: u64,
}
