//! Counters kept by the protocol core: exact, machine-independent protocol figures.

/// Requester-side counters of one queue pair.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequesterStats {
    /// Work requests posted.
    pub posted: u64,
    /// Work requests completed (successfully or not).
    pub completed: u64,
    /// Work requests completed with an error.
    pub failed: u64,
    /// Packets transmitted, including retransmissions.
    pub packets_sent: u64,
    /// Bytes transmitted (RoCE bytes: BTH through ICRC).
    pub bytes_sent: u64,
    /// Packets received and accepted.
    pub packets_received: u64,
    /// Bytes received and accepted.
    pub bytes_received: u64,
    /// Packets transmitted again.
    pub retransmitted_packets: u64,
    /// Retransmission timer expiries.
    pub timeouts: u64,
    /// Go-back-N rewinds (after a NAK, a timeout or an implied loss).
    pub rewinds: u64,
    /// NAKs with PSN sequence error received.
    pub naks_sequence: u64,
    /// NAKs reporting a remote access, invalid request or operational error.
    pub naks_error: u64,
    /// RNR NAKs received (a SEND found no receive buffer posted).
    pub naks_rnr: u64,
    /// Datagrams dropped: malformed, bad ICRC, wrong QP or not a response.
    pub dropped: u64,
    /// Responses ignored as duplicates or stale.
    pub stale_responses: u64,
    /// Acknowledgements whose MSN showed that an earlier request was refused (its NAK
    /// lost): the open WRITEs were sent again instead of being reported done.
    pub msn_mismatches: u64,
}

/// Responder-side counters of one queue pair.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResponderStats {
    /// Request packets accepted in sequence.
    pub packets_in_sequence: u64,
    /// Messages executed (SEND, READ, WRITE, CAS, FAA).
    pub messages: u64,
    /// READ requests executed (first time).
    pub reads: u64,
    /// WRITE messages completed.
    pub writes: u64,
    /// Atomics executed.
    pub atomics: u64,
    /// SEND messages delivered into receive buffers.
    pub sends: u64,
    /// RNR NAKs sent (a SEND started with no receive buffer posted).
    pub naks_rnr: u64,
    /// Duplicate request packets seen.
    pub duplicates: u64,
    /// Duplicate READs executed again (no longer than the READ first executed at their PSN).
    pub duplicate_reads: u64,
    /// Duplicate READ requests refused: another memory key or length than the READ
    /// first executed at their PSN, or too old to be remembered.
    pub duplicate_reads_refused: u64,
    /// Duplicate atomics answered from the saved-results ring.
    pub replayed_atomics: u64,
    /// Duplicate atomics too old for the ring (dropped).
    pub duplicate_atomics_dropped: u64,
    /// NAK(PSN sequence error) sent.
    pub naks_sequence: u64,
    /// NAK(remote access error) sent.
    pub naks_access: u64,
    /// NAK(invalid request) sent.
    pub naks_invalid: u64,
    /// Out-of-sequence packets dropped silently (a NAK was already outstanding).
    pub out_of_sequence_dropped: u64,
    /// Packets sent.
    pub packets_sent: u64,
    /// Bytes sent.
    pub bytes_sent: u64,
}
