//! The per-function counters the stages keep (names as in [`crate::spec::COUNTERS`];
//! exported at `/metrics`).

use serde::Serialize;

use crate::spec;

/// Counters of forwarding.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ForwardCounters {
    /// Packets sent on after a route hit.
    pub forwarded: u64,
    /// Packets without a route (dropped).
    pub missed: u64,
    /// Frames the parser rejected.
    pub malformed: u64,
    /// Frames with a wrong ICRC.
    pub bad_icrc: u64,
    /// Frames whose headers were rewritten (ICRC recomputed).
    pub rewritten: u64,
}

/// Counters of switch-resident atomics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct AtomicCounters {
    /// Atomics executed on switch-owned words and answered in half a round trip.
    pub answered: u64,
    /// Retransmitted atomics answered from the stored result.
    pub replayed: u64,
    /// Atomics dropped because forwarded requests were still unanswered (the client
    /// retransmits).
    pub deferred: u64,
    /// Duplicates from before the last switch answer, dropped.
    pub stale: u64,
    /// Atomics on switch-owned words refused with NAK(invalid request) (misaligned).
    pub refused: u64,
    /// Packets whose PSN or MSN was shifted by a non-zero offset.
    pub translated: u64,
}

/// Counters of atomic replacement.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ReplaceCounters {
    /// CAS/FAA on tracked words sent up as WRITEs of the outcome computed from the cache.
    pub converted: u64,
    /// Atomics on words without a cached value, sent up unconverted (their answer fills
    /// the cache).
    pub filled: u64,
    /// Multiplexed-QP responses turned into the client's ATOMIC ACK.
    pub answered: u64,
    /// Retransmitted requests answered again from the stored original value.
    pub replayed: u64,
    /// Retransmitted requests still unanswered, re-sent on the multiplexed QP.
    pub resent: u64,
    /// New requests dropped because their connection had a diverted request in flight
    /// (one outstanding request per client QP on tracked words).
    pub held: u64,
    /// Multiplexed-QP responses dropped (NAKs, duplicates, unmapped).
    pub stale: u64,
    /// Fillers sent on clients' own QPs (one per diverted request, and again when the
    /// memnode reports one missing).
    pub fillers: u64,
}

/// Counters of switch-assisted optimistic latching.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct LatchCounters {
    /// Latch requests granted.
    pub latched: u64,
    /// Latch requests refused (the tuple was latched).
    pub latch_refused: u64,
    /// Version reads answered.
    pub versions_read: u64,
    /// Tuple READ responses stamped valid (counted at their first packet; every packet
    /// of a response is stamped).
    pub reads_valid: u64,
    /// Tuple READ responses stamped invalid (counted at their first packet).
    pub reads_invalid: u64,
    /// Write ACKs that released a latch.
    pub unlatched: u64,
    /// Latches the control plane broke because they were held past the lease.
    pub broken: u64,
    /// Tuple WRITEs from a connection not holding the tuple's latch (forwarded).
    pub unlatched_writes: u64,
    /// Fillers sent on clients' own QPs in place of switch answers.
    pub fillers: u64,
    /// Middle/Last READ response packets passed unstamped because the packets before
    /// them were not seen in sequence (a reader rejects such a response).
    pub parts_unstamped: u64,
}

/// Counters of fault injection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct FaultCounters {
    /// Packets dropped.
    pub dropped: u64,
    /// Packets sent twice.
    pub duplicated: u64,
    /// Packets held back behind the next one.
    pub reordered: u64,
    /// Packets delayed.
    pub delayed: u64,
}

/// Counters of Clover write steering.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct WriteSteerCounters {
    /// Link CASes redirected to the committed tail.
    pub steered: u64,
    /// Tracked link CASes passed unchanged (write steering on).
    pub missed: u64,
    /// ATOMIC ACKs of steered CASes whose original value became a marker.
    pub converted: u64,
    /// Node WRITEs whose version was rewritten to follow the committed tail (first
    /// transmissions, and copies of a node whose link CAS was steered).
    pub versioned: u64,
    /// Tails committed (successful tracked link CASes).
    pub committed: u64,
}

/// Counters of Clover read steering.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ReadSteerCounters {
    /// Node READs redirected to the committed tail.
    pub steered: u64,
    /// Tracked-length READs passed unchanged.
    pub missed: u64,
    /// READ responses marked with the address they were read from.
    pub converted: u64,
}

/// Counters of the scope check (connections made with a grant).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ScopeCounters {
    /// Requests of scoped connections checked against their windows.
    pub checked: u64,
    /// Requests outside their connection's windows, or needing rights the window does
    /// not give: their memory key was replaced by one no memory has.
    pub denied: u64,
}

/// Counters of zero-sided copies (READ→WRITE conversion).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ZeroCopyCounters {
    /// READ response packets turned into WRITEs to the target.
    pub converted: u64,
    /// Target ACKs of converted WRITEs.
    pub acked: u64,
    /// NAKs from either end of a copy (the copy engine goes back and re-reads).
    pub naks: u64,
    /// Copy responses dropped: outside the copy, or not a READ response / ACK.
    pub stale: u64,
}

/// Counters of the flow rule that hands packets to the switch CPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct FlowPuntCounters {
    /// Ring control answers and doorbells handed to the CPU.
    pub punted: u64,
}

/// Counters of switch replication of writes (`MirrorWrite`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct MirrorCounters {
    /// Replicated WRITEs from clients sent on to their primary (first transmissions).
    pub replicated: u64,
    /// WRITEs the switch made for backups (first transmissions).
    pub copies: u64,
    /// WRITEs made again for backups from a client's retransmission.
    pub recopied: u64,
    /// Primary acknowledgements held back until the backups acknowledged.
    pub held: u64,
    /// Held acknowledgements sent to the client once every backup acknowledged.
    pub released: u64,
    /// Primary acknowledgements of a waiting WRITE sent on at once (the backups had
    /// acknowledged first).
    pub passed: u64,
    /// Retransmissions of replicated WRITEs already complete everywhere, sent to the
    /// primary alone (it answers duplicates).
    pub stale: u64,
    /// Replicated WRITEs dropped: their connection had another one waiting.
    pub busy: u64,
    /// Backup acknowledgements on lanes.
    pub lane_acks: u64,
    /// NAKs and unexpected answers on lanes (dropped; clients' retransmissions repair).
    pub lane_naks: u64,
}

/// Every counter, by function (names as in [`spec::COUNTERS`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Counters {
    /// Forwarding.
    pub forward: ForwardCounters,
    /// Switch-resident atomics.
    pub switch_atomics: AtomicCounters,
    /// Atomic replacement.
    pub atomic_replace: ReplaceCounters,
    /// Optimistic latching.
    pub opt_latch: LatchCounters,
    /// Clover write steering.
    pub write_steer: WriteSteerCounters,
    /// Clover read steering.
    pub read_steer: ReadSteerCounters,
    /// Fault injection.
    pub faults: FaultCounters,
    /// The scope check.
    pub scope: ScopeCounters,
    /// Zero-sided copies.
    pub zero_copy: ZeroCopyCounters,
    /// Flow answers and doorbells to the CPU.
    pub flow_punt: FlowPuntCounters,
    /// Switch replication of writes.
    pub mirror_write: MirrorCounters,
}

impl Counters {
    /// `(function, counter, value)` for every counter.
    pub fn list(&self) -> Vec<(String, String, u64)> {
        let value = serde_json::to_value(self).unwrap_or_default();
        let mut out = Vec::new();
        for (function, names) in spec::COUNTERS {
            for name in *names {
                let v = value[*function][*name].as_u64().unwrap_or(0);
                out.push(((*function).to_owned(), (*name).to_owned(), v));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_follow_the_spec_names() {
        let list = Counters::default().list();
        let n: usize = spec::COUNTERS.iter().map(|(_, c)| c.len()).sum();
        assert_eq!(list.len(), n);
        let value = serde_json::to_value(Counters::default()).unwrap();
        // Every function's counters are listed (and so exported at /metrics).
        for f in value.as_object().unwrap().keys() {
            assert!(
                spec::COUNTERS.iter().any(|(name, _)| name == f),
                "{f} is missing from spec::COUNTERS"
            );
        }
        for (f, names) in spec::COUNTERS {
            assert_eq!(value[*f].as_object().unwrap().len(), names.len(), "{f}");
            for name in *names {
                assert!(value[*f][*name].is_u64(), "{f}.{name}");
            }
        }
    }
}
