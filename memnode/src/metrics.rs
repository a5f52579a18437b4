//! The node's counters, exposed as metric families (encoded by `prometheus-client` in
//! [`telemetry::exposition`]).
//!
//! Counting invariant (checked by the fuzz test): every datagram received is either
//! dropped for exactly one reason (`dmkv_memnode_datagrams_dropped_total{reason}`) or
//! accepted by a queue pair (`dmkv_memnode_datagrams_accepted_total{outcome}`), so
//! `received = Σ dropped + Σ accepted`.

use std::sync::atomic::{AtomicU64, Ordering};

use telemetry::family::{Family, Labels, Number, labels};

/// Why the data plane dropped a datagram without a responder acting on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropKind {
    /// Shorter than a BTH (12 bytes), or cut by the socket.
    Truncated,
    /// No queue pair with the destination QPN.
    UnknownQpn,
    /// Not a well-formed RoCEv2 packet.
    Malformed,
    /// The ICRC does not match the queue pair's path.
    BadIcrc,
    /// A response or unsupported opcode sent to a responder.
    NotARequest,
    /// Sent from an address other than the one the queue pair was created for.
    WrongSource,
}

impl DropKind {
    /// Every kind, in exposition order.
    pub const ALL: [DropKind; 6] = [
        DropKind::Malformed,
        DropKind::BadIcrc,
        DropKind::UnknownQpn,
        DropKind::Truncated,
        DropKind::NotARequest,
        DropKind::WrongSource,
    ];

    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            DropKind::Truncated => "truncated",
            DropKind::UnknownQpn => "unknown_qpn",
            DropKind::Malformed => "malformed",
            DropKind::BadIcrc => "bad_icrc",
            DropKind::NotARequest => "not_a_request",
            DropKind::WrongSource => "wrong_source",
        }
    }

    /// The kind of a responder's `DropReason::label()`; unknown labels count as malformed.
    pub fn from_label(label: &str) -> DropKind {
        DropKind::ALL
            .into_iter()
            .find(|k| k.label() == label)
            .unwrap_or(DropKind::Malformed)
    }

    fn index(self) -> usize {
        match self {
            DropKind::Malformed => 0,
            DropKind::BadIcrc => 1,
            DropKind::UnknownQpn => 2,
            DropKind::Truncated => 3,
            DropKind::NotARequest => 4,
            DropKind::WrongSource => 5,
        }
    }
}

/// What a responder did with a datagram it accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AcceptOutcome {
    /// The expected PSN: executed (or NAKed for an access error / invalid request).
    InSequence,
    /// An earlier PSN: answered as a duplicate.
    Duplicate,
    /// A PSN ahead of the expected one, answered with NAK(PSN sequence error).
    OutOfSequenceNak,
    /// A PSN ahead while a sequence NAK was outstanding: dropped silently, as hardware does.
    OutOfSequenceDropped,
}

impl AcceptOutcome {
    /// Every outcome, in exposition order.
    pub const ALL: [AcceptOutcome; 4] = [
        AcceptOutcome::InSequence,
        AcceptOutcome::Duplicate,
        AcceptOutcome::OutOfSequenceNak,
        AcceptOutcome::OutOfSequenceDropped,
    ];

    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            AcceptOutcome::InSequence => "in_sequence",
            AcceptOutcome::Duplicate => "duplicate",
            AcceptOutcome::OutOfSequenceNak => "out_of_sequence_nak",
            AcceptOutcome::OutOfSequenceDropped => "out_of_sequence_dropped",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// A verb the responder executed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verb {
    /// RDMA READ.
    Read,
    /// RDMA WRITE.
    Write,
    /// Compare-and-swap.
    Cas,
    /// Fetch-and-add.
    Faa,
}

impl Verb {
    /// Every verb, in exposition order.
    pub const ALL: [Verb; 4] = [Verb::Read, Verb::Write, Verb::Cas, Verb::Faa];

    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Verb::Read => "read",
            Verb::Write => "write",
            Verb::Cas => "cas",
            Verb::Faa => "faa",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Why the responder sent a NAK.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NakKind {
    /// PSN sequence error (a gap).
    PsnSequence,
    /// Remote access error (bad rkey, out of bounds, missing rights).
    RemoteAccess,
    /// Invalid request (misaligned atomic, bad lengths, malformed message).
    InvalidRequest,
}

impl NakKind {
    /// Every kind, in exposition order.
    pub const ALL: [NakKind; 3] = [
        NakKind::PsnSequence,
        NakKind::RemoteAccess,
        NakKind::InvalidRequest,
    ];

    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            NakKind::PsnSequence => "psn_sequence",
            NakKind::RemoteAccess => "remote_access",
            NakKind::InvalidRequest => "invalid_request",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The node's counters (lock-free; shared by the data plane and the admin API).
#[derive(Debug, Default)]
pub struct Metrics {
    received: AtomicU64,
    received_bytes: AtomicU64,
    sent: AtomicU64,
    sent_bytes: AtomicU64,
    segmented: AtomicU64,
    sends: AtomicU64,
    send_errors: AtomicU64,
    dropped: [AtomicU64; 6],
    accepted: [AtomicU64; 4],
    messages: [AtomicU64; 4],
    naks: [AtomicU64; 3],
    duplicate_reads: AtomicU64,
    replayed_atomics: AtomicU64,
    duplicate_atomics_dropped: AtomicU64,
    qps: AtomicU64,
    qps_created: AtomicU64,
    qps_deleted: AtomicU64,
    qps_reclaimed: AtomicU64,
    capacity: AtomicU64,
    regions: AtomicU64,
    batch_latency: telemetry::histogram::Histogram,
}

/// A copy of every counter at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MetricsSnapshot {
    /// Datagrams received.
    pub received: u64,
    /// UDP payload bytes received.
    pub received_bytes: u64,
    /// Datagrams sent.
    pub sent: u64,
    /// UDP payload bytes sent.
    pub sent_bytes: u64,
    /// Datagrams sent as a later segment of a segmented send (runs to clients that
    /// coalesce, see `--udp-offload`).
    pub segmented: u64,
    /// Sends of datagrams (one `sendmmsg` each, or one per batch's worth).
    pub sends: u64,
    /// Receive batches processed.
    pub batches: u64,
    /// Sends that failed.
    pub send_errors: u64,
    /// Drops by reason, indexed like [`DropKind::ALL`].
    pub dropped: [u64; 6],
    /// Accepted datagrams by outcome, indexed like [`AcceptOutcome::ALL`].
    pub accepted: [u64; 4],
    /// Messages by verb, indexed like [`Verb::ALL`].
    pub messages: [u64; 4],
    /// NAKs by reason, indexed like [`NakKind::ALL`].
    pub naks: [u64; 3],
    /// Duplicate READs executed again.
    pub duplicate_reads: u64,
    /// Duplicate atomics answered from the saved-results ring.
    pub replayed_atomics: u64,
    /// Duplicate atomics too old for the ring.
    pub duplicate_atomics_dropped: u64,
    /// Queue pairs now.
    pub qps: u64,
    /// Queue pairs created.
    pub qps_created: u64,
    /// Queue pairs deleted.
    pub qps_deleted: u64,
    /// Queue pairs destroyed because they received no request for the idle timeout.
    pub qps_reclaimed: u64,
}

impl MetricsSnapshot {
    /// Drops for one reason.
    pub fn dropped(&self, kind: DropKind) -> u64 {
        self.dropped[kind.index()]
    }

    /// Accepted datagrams with one outcome.
    pub fn accepted(&self, outcome: AcceptOutcome) -> u64 {
        self.accepted[outcome.index()]
    }

    /// Messages of one verb.
    pub fn messages(&self, verb: Verb) -> u64 {
        self.messages[verb.index()]
    }

    /// NAKs of one kind.
    pub fn naks(&self, kind: NakKind) -> u64 {
        self.naks[kind.index()]
    }

    /// All drops.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().sum()
    }

    /// All accepted datagrams.
    pub fn accepted_total(&self) -> u64 {
        self.accepted.iter().sum()
    }
}

fn add(c: &AtomicU64, n: u64) {
    if n != 0 {
        c.fetch_add(n, Ordering::Relaxed);
    }
}

fn get(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

impl Metrics {
    /// Zeroed counters.
    pub fn new() -> Metrics {
        Metrics::default()
    }

    /// A datagram of `bytes` bytes arrived.
    pub fn on_received(&self, bytes: usize) {
        add(&self.received, 1);
        add(&self.received_bytes, bytes as u64);
    }

    /// Datagrams were handed to the kernel, in one send.
    pub fn on_sent(&self, datagrams: u64, bytes: u64) {
        add(&self.sends, 1);
        add(&self.sent, datagrams);
        add(&self.sent_bytes, bytes);
    }

    /// `datagrams` of those sent left as later segments of segmented sends.
    pub fn on_segmented(&self, datagrams: u64) {
        add(&self.segmented, datagrams);
    }

    /// Sending failed for `datagrams` datagrams.
    pub fn on_send_error(&self, datagrams: u64) {
        add(&self.send_errors, datagrams);
    }

    /// A datagram was dropped.
    pub fn on_dropped(&self, kind: DropKind) {
        add(&self.dropped[kind.index()], 1);
    }

    /// A datagram was accepted by a responder.
    pub fn on_accepted(&self, outcome: AcceptOutcome) {
        add(&self.accepted[outcome.index()], 1);
    }

    /// A message was executed.
    pub fn on_message(&self, verb: Verb, n: u64) {
        add(&self.messages[verb.index()], n);
    }

    /// NAKs were queued.
    pub fn on_nak(&self, kind: NakKind, n: u64) {
        add(&self.naks[kind.index()], n);
    }

    /// Duplicate handling happened.
    pub fn on_duplicates(&self, reads: u64, replayed_atomics: u64, atomics_dropped: u64) {
        add(&self.duplicate_reads, reads);
        add(&self.replayed_atomics, replayed_atomics);
        add(&self.duplicate_atomics_dropped, atomics_dropped);
    }

    /// A queue pair was created; `now` is the current count.
    pub fn on_qp_created(&self, now: usize) {
        add(&self.qps_created, 1);
        self.qps.store(now as u64, Ordering::Relaxed);
    }

    /// A queue pair was deleted; `now` is the current count.
    pub fn on_qp_deleted(&self, now: usize) {
        add(&self.qps_deleted, 1);
        self.qps.store(now as u64, Ordering::Relaxed);
    }

    /// Idle queue pairs were destroyed; `now` is the current count.
    pub fn on_qps_reclaimed(&self, reclaimed: usize, now: usize) {
        add(&self.qps_reclaimed, reclaimed as u64);
        self.qps.store(now as u64, Ordering::Relaxed);
    }

    /// Records the registered memory.
    pub fn set_memory(&self, capacity: u64, regions: usize) {
        self.capacity.store(capacity, Ordering::Relaxed);
        self.regions.store(regions as u64, Ordering::Relaxed);
    }

    /// A receive batch took `d` to process (execute its messages, send the responses).
    pub fn on_batch(&self, d: std::time::Duration) {
        self.batch_latency.observe(d);
    }

    /// Receive batches processed.
    pub fn batches(&self) -> u64 {
        self.batch_latency.count()
    }

    /// Copies every counter.
    pub fn snapshot(&self) -> MetricsSnapshot {
        MetricsSnapshot {
            received: get(&self.received),
            received_bytes: get(&self.received_bytes),
            sent: get(&self.sent),
            sent_bytes: get(&self.sent_bytes),
            segmented: get(&self.segmented),
            sends: get(&self.sends),
            batches: self.batches(),
            send_errors: get(&self.send_errors),
            dropped: self.dropped.each_ref().map(get),
            accepted: self.accepted.each_ref().map(get),
            messages: self.messages.each_ref().map(get),
            naks: self.naks.each_ref().map(get),
            duplicate_reads: get(&self.duplicate_reads),
            replayed_atomics: get(&self.replayed_atomics),
            duplicate_atomics_dropped: get(&self.duplicate_atomics_dropped),
            qps: get(&self.qps),
            qps_created: get(&self.qps_created),
            qps_deleted: get(&self.qps_deleted),
            qps_reclaimed: get(&self.qps_reclaimed),
        }
    }

    /// Every counter and gauge as metric families (the admin API's `/metrics` adds its
    /// own and encodes them).
    pub fn families(&self) -> Vec<Family> {
        let s = self.snapshot();
        fn by<K: Copy>(
            label: &str,
            kinds: &[K],
            name: impl Fn(K) -> &'static str,
            value: impl Fn(K) -> u64,
        ) -> Vec<(Labels, Number)> {
            kinds
                .iter()
                .map(|k| (labels(&[(label, name(*k))]), Number::Int(value(*k))))
                .collect()
        }
        vec![
            Family::counter_value(
                "dmkv_memnode_datagrams_received_total",
                "UDP datagrams received on the soft-RoCE port",
                s.received,
            ),
            Family::counter_value(
                "dmkv_memnode_received_bytes_total",
                "UDP payload bytes received on the soft-RoCE port",
                s.received_bytes,
            ),
            Family::counter_value(
                "dmkv_memnode_datagrams_sent_total",
                "UDP datagrams (responses, ACKs, NAKs) sent",
                s.sent,
            ),
            Family::counter_value(
                "dmkv_memnode_sent_bytes_total",
                "UDP payload bytes sent",
                s.sent_bytes,
            ),
            Family::counter_value(
                "dmkv_memnode_segmented_datagrams_total",
                "Datagrams sent as a later segment of one segmented send (UDP offload)",
                s.segmented,
            ),
            Family::counter_value(
                "dmkv_memnode_send_errors_total",
                "Datagrams the kernel refused to send",
                s.send_errors,
            ),
            Family::counter(
                "dmkv_memnode_datagrams_dropped_total",
                "Datagrams dropped without an answer, by reason",
                by("reason", &DropKind::ALL, DropKind::label, |k| s.dropped(k)),
            ),
            Family::counter(
                "dmkv_memnode_datagrams_accepted_total",
                "Datagrams accepted by a queue pair's responder, by PSN outcome",
                by("outcome", &AcceptOutcome::ALL, AcceptOutcome::label, |o| {
                    s.accepted(o)
                }),
            ),
            Family::counter(
                "dmkv_memnode_messages_total",
                "Messages executed against memory, by verb",
                by("verb", &Verb::ALL, Verb::label, |v| s.messages(v)),
            ),
            Family::counter(
                "dmkv_memnode_naks_total",
                "NAKs sent, by reason",
                by("reason", &NakKind::ALL, NakKind::label, |k| s.naks(k)),
            ),
            Family::counter_value(
                "dmkv_memnode_retransmitted_requests_total",
                "Request packets received again (client retransmissions): the accepted datagrams with outcome duplicate",
                s.accepted(AcceptOutcome::Duplicate),
            ),
            Family::counter_value(
                "dmkv_memnode_duplicate_reads_total",
                "Duplicate READ requests executed again",
                s.duplicate_reads,
            ),
            Family::counter_value(
                "dmkv_memnode_replayed_atomics_total",
                "Duplicate atomics answered from the saved-results ring",
                s.replayed_atomics,
            ),
            Family::counter_value(
                "dmkv_memnode_duplicate_atomics_dropped_total",
                "Duplicate atomics too old for the saved-results ring (dropped)",
                s.duplicate_atomics_dropped,
            ),
            Family::gauge_value(
                "dmkv_memnode_queue_pairs",
                "Queue pairs currently served",
                s.qps,
            ),
            Family::counter_value(
                "dmkv_memnode_queue_pairs_created_total",
                "Queue pairs created",
                s.qps_created,
            ),
            Family::counter_value(
                "dmkv_memnode_queue_pairs_deleted_total",
                "Queue pairs deleted",
                s.qps_deleted,
            ),
            Family::counter_value(
                "dmkv_memnode_queue_pairs_reclaimed_total",
                "Queue pairs destroyed because they received no request for the idle timeout (clients that crashed or left)",
                s.qps_reclaimed,
            ),
            Family::gauge_value(
                "dmkv_memnode_region_capacity_bytes",
                "Bytes of registered memory",
                get(&self.capacity),
            ),
            Family::gauge_value(
                "dmkv_memnode_regions",
                "Registered regions",
                get(&self.regions),
            ),
            self.batch_latency.family(
                "dmkv_memnode_batch_duration_seconds",
                "Time to process one receive batch of datagrams: execute its messages and send the responses",
            ),
        ]
    }
}
