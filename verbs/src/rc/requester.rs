//! The requester half of a reliable connection, as a sans-IO state machine.
//!
//! The caller feeds it work requests ([`Requester::post`]), received datagrams
//! ([`Requester::handle_datagram`]) and timer expiries ([`Requester::handle_timeout`]),
//! and drains packets to send ([`Requester::poll_transmit`]) and completions
//! ([`Requester::poll_completion`]). Time is always an argument; nothing here
//! reads a clock or touches a socket.
//!
//! Sequencing follows IBTA RC rules: each packet has a 24-bit PSN, a READ of n
//! bytes consumes ceil(n / PMTU) PSNs (one per response packet), WRITEs larger
//! than the PMTU are segmented, AckReq is set on the last packet of each
//! request. Responses are cumulative: a response to PSN p implies that every
//! request before p was executed, so WRITEs before it complete and READs or
//! atomics before it whose responses never arrived are retransmitted
//! (go-back-N). Completions are delivered in posting order.
//!
//! A SEND is sequenced like a WRITE (SEND First/Middle/Last, or Only, with Last and
//! Only carrying ImmDt for SEND with Immediate) and completes on acknowledgement. An
//! RNR NAK (the receiver had no buffer posted) acknowledges everything before its
//! PSN; the requester then pauses for the NAK's RNR timer and sends the message again
//! from its first packet, at most [`RcConfig::rnr_retry`] times for the same message
//! (7: forever) before the SEND completes with
//! [`CompletionError::RnrRetryExceeded`] and the queue pair goes to the error state.

use std::collections::VecDeque;
use std::time::Instant;

use super::config::{RNR_RETRY_FOREVER, RcConfig, rnr_delay};
use super::psn::{PSN_HALF, Psn};
use super::stats::RequesterStats;
use crate::wire::{
    AtomicEthRepr, BthRepr, IcrcPath, NakCode, Opcode, PacketRepr, RethRepr, Syndrome, WireError,
};
use crate::wr::{Completion, CompletionError, CompletionValue, PostError, WorkRequest};

/// Whether the queue pair can carry work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QpState {
    /// Ready to send.
    Ready,
    /// Failed: every outstanding and future request completes as flushed.
    Error,
}

#[derive(Debug)]
struct Entry {
    wr_id: u64,
    wr: WorkRequest,
    first_psn: Psn,
    /// PSNs consumed (response packets for a READ, request packets otherwise).
    npsn: u32,
    /// Packets the requester transmits for it (1 for READ and atomics).
    tx_packets: u32,
    result: Option<Result<CompletionValue, CompletionError>>,
    read_buf: Vec<u8>,
    read_seen: Vec<bool>,
    read_packets: u32,
}

impl Entry {
    fn last_psn(&self) -> Psn {
        self.first_psn.plus(self.npsn.saturating_sub(1))
    }
}

/// The requester side of one RC queue pair.
#[derive(Debug)]
pub struct Requester {
    config: RcConfig,
    local_qpn: u32,
    remote_qpn: u32,
    path: IcrcPath,
    reply_path: IcrcPath,
    state: QpState,
    pending: VecDeque<(u64, WorkRequest)>,
    inflight: VecDeque<Entry>,
    next_psn: Psn,
    /// Highest PSN ever transmitted plus one: packets before it are retransmissions.
    fresh_psn: Psn,
    send_idx: usize,
    send_pkt: u32,
    timer: Option<Instant>,
    retries: u32,
    last_rewind: Option<(Psn, Instant)>,
    completions: VecDeque<Completion>,
    /// After an RNR NAK: no packet is sent before this instant.
    rnr_wait: Option<Instant>,
    /// The PSN the last RNR NAK named and how many RNR NAKs it has drawn.
    rnr_psn: Option<(Psn, u32)>,
    /// Messages the responder executed successfully among those already delivered
    /// (mod 2^24): the base against which an acknowledgement's MSN is checked.
    delivered_ok: u32,
    stats: RequesterStats,
}

impl Requester {
    /// A requester for a connection from `local_qpn` to `remote_qpn`, starting at `start_psn`.
    ///
    /// `path` is the IPv4/UDP addressing of our datagrams to the responder (used for the ICRC);
    /// responses are verified against its reverse.
    pub fn new(
        config: RcConfig,
        local_qpn: u32,
        remote_qpn: u32,
        start_psn: u32,
        path: IcrcPath,
    ) -> Requester {
        let start = Psn::new(start_psn);
        Requester {
            reply_path: path.reversed(),
            path,
            local_qpn,
            remote_qpn,
            state: QpState::Ready,
            pending: VecDeque::new(),
            inflight: VecDeque::new(),
            next_psn: start,
            fresh_psn: start,
            send_idx: 0,
            send_pkt: 0,
            timer: None,
            retries: 0,
            last_rewind: None,
            completions: VecDeque::new(),
            rnr_wait: None,
            rnr_psn: None,
            delivered_ok: 0,
            stats: RequesterStats::default(),
            config,
        }
    }

    /// Our queue pair number.
    pub fn local_qpn(&self) -> u32 {
        self.local_qpn
    }

    /// The responder's queue pair number.
    pub fn remote_qpn(&self) -> u32 {
        self.remote_qpn
    }

    /// The connection's configuration.
    pub fn config(&self) -> &RcConfig {
        &self.config
    }

    /// Ready or error.
    pub fn state(&self) -> QpState {
        self.state
    }

    /// Counters.
    pub fn stats(&self) -> &RequesterStats {
        &self.stats
    }

    /// Work requests posted and not yet returned by [`Requester::poll_completion`].
    pub fn outstanding(&self) -> usize {
        self.pending.len() + self.inflight.len() + self.completions.len()
    }

    /// Whether nothing is left to send or to wait for.
    pub fn is_idle(&self) -> bool {
        self.pending.is_empty() && self.inflight.is_empty()
    }

    /// Queue one work request. Fails if it is invalid, the queue is full or the QP is in error.
    pub fn post(&mut self, wr_id: u64, wr: WorkRequest) -> Result<(), PostError> {
        if self.state == QpState::Error {
            return Err(PostError::QpError);
        }
        wr.validate()?;
        let queued = self.pending.len() + self.inflight.len();
        if queued >= self.config.max_outstanding {
            return Err(PostError::QueueFull(queued));
        }
        self.pending.push_back((wr_id, wr));
        self.stats.posted += 1;
        Ok(())
    }

    /// Room left in the send queue.
    pub fn send_queue_room(&self) -> usize {
        self.config
            .max_outstanding
            .saturating_sub(self.pending.len() + self.inflight.len())
    }

    /// The next completion, in posting order.
    pub fn poll_completion(&mut self) -> Option<Completion> {
        self.completions.pop_front()
    }

    /// When [`Requester::handle_timeout`] should next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match (self.timer, self.rnr_wait) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether [`Requester::poll_transmit`] has something to send.
    pub fn wants_transmit(&self) -> bool {
        self.state == QpState::Ready
            && self.rnr_wait.is_none()
            && (self.send_idx < self.inflight.len()
                || (!self.pending.is_empty() && self.can_admit()))
    }

    fn can_admit(&self) -> bool {
        let Some((_, wr)) = self.pending.front() else {
            return false;
        };
        if self.read_hazard(wr) {
            return false;
        }
        let npsn = self.psns_for(wr);
        let span = match self.inflight.front() {
            Some(front) => self.next_psn.distance_from(front.first_psn),
            None => 0,
        };
        span.saturating_add(npsn) < PSN_HALF
    }

    /// Whether `wr` modifies bytes that an unfinished READ covers.
    ///
    /// A retransmitted READ is executed again by the responder, after anything sent
    /// behind it; if a later WRITE or atomic changed the same bytes, the READ would
    /// return data from its own future. Such a request waits until the READ completes,
    /// as if posted with a fence (IBTA's fence indicator), and only then is sent.
    fn read_hazard(&self, wr: &WorkRequest) -> bool {
        let (target, len) = match wr {
            WorkRequest::Read { .. } | WorkRequest::Send { .. } => return false,
            WorkRequest::Write { remote, data, .. } => (*remote, data.len() as u64),
            WorkRequest::CompareSwap { remote, .. } | WorkRequest::FetchAdd { remote, .. } => {
                (*remote, 8)
            }
        };
        let end = target.va.saturating_add(len);
        self.inflight.iter().any(|e| match &e.wr {
            WorkRequest::Read { remote, len: rlen } if e.result.is_none() => {
                remote.rkey == target.rkey
                    && remote.va < end
                    && target.va < remote.va.saturating_add(*rlen as u64)
            }
            _ => false,
        })
    }

    fn psns_for(&self, wr: &WorkRequest) -> u32 {
        match wr {
            WorkRequest::Read { len, .. } => self.config.pmtu.packets(*len as u64),
            WorkRequest::Write { data, .. } | WorkRequest::Send { data, .. } => {
                self.config.pmtu.packets(data.len() as u64)
            }
            WorkRequest::CompareSwap { .. } | WorkRequest::FetchAdd { .. } => 1,
        }
    }

    /// Write the next packet to send into `buf` and return its length.
    ///
    /// `buf` must hold a full packet: PMTU + 64 bytes is always enough.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        if self.state == QpState::Error {
            return None;
        }
        if let Some(until) = self.rnr_wait {
            if now < until {
                return None;
            }
            self.rnr_wait = None;
        }
        if self.send_idx >= self.inflight.len() {
            if !self.can_admit() {
                return None;
            }
            let (wr_id, wr) = self.pending.pop_front()?;
            let npsn = self.psns_for(&wr);
            let tx_packets = match wr {
                WorkRequest::Write { .. } | WorkRequest::Send { .. } => npsn,
                _ => 1,
            };
            self.inflight.push_back(Entry {
                wr_id,
                wr,
                first_psn: self.next_psn,
                npsn,
                tx_packets,
                result: None,
                read_buf: Vec::new(),
                read_seen: Vec::new(),
                read_packets: 0,
            });
            self.next_psn = self.next_psn.plus(npsn);
            self.send_idx = self.inflight.len() - 1;
            self.send_pkt = 0;
        }
        let pmtu = self.config.pmtu.bytes() as usize;
        let idx = self.send_idx;
        let pkt = self.send_pkt;
        let entry = self.inflight.get_mut(idx)?;
        let psn = entry.first_psn.plus(pkt);
        let last = pkt + 1 >= entry.tx_packets;
        let mut repr = PacketRepr {
            bth: BthRepr::new(Opcode::ReadRequest, self.remote_qpn, psn.get(), last),
            reth: None,
            immdt: None,
            atomic_eth: None,
            aeth: None,
            atomic_ack_eth: None,
            payload: &[],
        };
        match &entry.wr {
            WorkRequest::Send { data, imm, .. } => {
                let start = (pkt as usize).saturating_mul(pmtu).min(data.len());
                let end = start.saturating_add(pmtu).min(data.len());
                repr.payload = data.get(start..end).unwrap_or(&[]);
                repr.bth.opcode = match (pkt == 0, last, imm.is_some()) {
                    (true, true, false) => Opcode::SendOnly,
                    (true, true, true) => Opcode::SendOnlyImm,
                    (true, false, _) => Opcode::SendFirst,
                    (false, false, _) => Opcode::SendMiddle,
                    (false, true, false) => Opcode::SendLast,
                    (false, true, true) => Opcode::SendLastImm,
                };
                if last {
                    repr.immdt = *imm;
                }
            }
            WorkRequest::Read { remote, len } => {
                repr.reth = Some(RethRepr {
                    va: remote.va,
                    rkey: remote.rkey,
                    dma_len: *len,
                });
            }
            WorkRequest::Write { remote, data, .. } => {
                let start = (pkt as usize).saturating_mul(pmtu).min(data.len());
                let end = start.saturating_add(pmtu).min(data.len());
                repr.payload = data.get(start..end).unwrap_or(&[]);
                repr.bth.opcode = match (pkt == 0, last) {
                    (true, true) => Opcode::WriteOnly,
                    (true, false) => Opcode::WriteFirst,
                    (false, false) => Opcode::WriteMiddle,
                    (false, true) => Opcode::WriteLast,
                };
                if pkt == 0 {
                    repr.reth = Some(RethRepr {
                        va: remote.va,
                        rkey: remote.rkey,
                        dma_len: data.len() as u32,
                    });
                }
            }
            WorkRequest::CompareSwap {
                remote,
                compare,
                swap,
            } => {
                repr.bth.opcode = Opcode::CompareSwap;
                repr.atomic_eth = Some(AtomicEthRepr {
                    va: remote.va,
                    rkey: remote.rkey,
                    swap_add: *swap,
                    compare: *compare,
                });
            }
            WorkRequest::FetchAdd { remote, add } => {
                repr.bth.opcode = Opcode::FetchAdd;
                repr.atomic_eth = Some(AtomicEthRepr {
                    va: remote.va,
                    rkey: remote.rkey,
                    swap_add: *add,
                    compare: 0,
                });
            }
        }
        let len = repr.emit(buf, &self.path).ok()?;
        if last {
            self.send_idx += 1;
            self.send_pkt = 0;
        } else {
            self.send_pkt += 1;
        }
        if psn.before(self.fresh_psn) {
            self.stats.retransmitted_packets += 1;
        } else {
            self.fresh_psn = psn.plus(1);
        }
        self.stats.packets_sent += 1;
        self.stats.bytes_sent += len as u64;
        if self.timer.is_none() {
            self.timer = Some(now + self.config.retransmit_timeout);
        }
        Some(len)
    }

    /// The retransmission timer: if it has expired, go back to the oldest unfinished
    /// request, or fail the QP once the retry budget is spent.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.rnr_wait.is_some_and(|until| now >= until) {
            self.rnr_wait = None;
        }
        let Some(deadline) = self.timer else {
            return;
        };
        if now < deadline || self.state == QpState::Error {
            return;
        }
        if self.inflight.is_empty() {
            self.timer = None;
            return;
        }
        self.stats.timeouts += 1;
        self.retries += 1;
        if self.retries > self.config.max_retries {
            self.fail(CompletionError::RetryExceeded);
            return;
        }
        if let Some(idx) = self.inflight.iter().position(|e| e.result.is_none()) {
            self.rewind(idx, 0, now, true);
        }
        // Exponential backoff between timeouts without progress (capped at 64×): a
        // lost packet is still resent after one timeout, but a responder that is
        // merely descheduled for a while (a busy host) is given time before the
        // queue pair gives up — with the defaults about 1.9 s instead of 80 ms.
        let factor = 1u32 << self.retries.min(6);
        self.timer = Some(now + self.config.retransmit_timeout.saturating_mul(factor));
    }

    /// Move the QP to the error state, failing everything outstanding.
    fn fail(&mut self, first: CompletionError) {
        self.state = QpState::Error;
        self.timer = None;
        self.rnr_wait = None;
        let mut reason = first;
        for entry in self.inflight.drain(..) {
            let result = match entry.result {
                Some(r) => r,
                None => {
                    let r = Err(reason);
                    reason = CompletionError::Flushed;
                    r
                }
            };
            if result.is_err() {
                self.stats.failed += 1;
            }
            self.stats.completed += 1;
            self.completions.push_back(Completion {
                wr_id: entry.wr_id,
                kind: entry.wr.kind(),
                result,
            });
        }
        for (wr_id, wr) in self.pending.drain(..) {
            self.stats.failed += 1;
            self.stats.completed += 1;
            self.completions.push_back(Completion {
                wr_id,
                kind: wr.kind(),
                result: Err(CompletionError::Flushed),
            });
        }
        self.send_idx = 0;
        self.send_pkt = 0;
    }

    /// Go back to packet `pkt` of entry `idx` (go-back-N), unless we just did.
    fn rewind(&mut self, idx: usize, pkt: u32, now: Instant, forced: bool) {
        let Some(entry) = self.inflight.get(idx) else {
            return;
        };
        let target = entry.first_psn.plus(pkt);
        let already_behind = self.send_idx < idx || (self.send_idx == idx && self.send_pkt <= pkt);
        if already_behind {
            return;
        }
        if !forced && let Some((psn, at)) = self.last_rewind {
            let recent = now.saturating_duration_since(at) < self.config.retransmit_timeout / 2;
            if psn == target && recent {
                return;
            }
        }
        self.last_rewind = Some((target, now));
        self.stats.rewinds += 1;
        self.send_idx = idx;
        self.send_pkt = pkt;
    }

    /// Process one received datagram (the UDP payload: BTH through ICRC).
    ///
    /// Malformed datagrams, a bad ICRC, the wrong destination QP or a request
    /// opcode are dropped, counted and reported as an error; they never change state.
    pub fn handle_datagram(&mut self, now: Instant, datagram: &[u8]) -> Result<(), WireError> {
        let repr = match PacketRepr::parse(datagram) {
            Ok(r) => r,
            Err(e) => {
                self.stats.dropped += 1;
                return Err(e);
            }
        };
        if let Err(e) = self.reply_path.verify(datagram) {
            self.stats.dropped += 1;
            return Err(e);
        }
        if repr.bth.dest_qpn != self.local_qpn || repr.bth.opcode.is_request() {
            self.stats.dropped += 1;
            return Err(WireError::NotRoce);
        }
        self.stats.packets_received += 1;
        self.stats.bytes_received += datagram.len() as u64;
        if self.state == QpState::Error {
            return Ok(());
        }
        self.handle_response(now, &repr);
        self.deliver(now);
        Ok(())
    }

    /// Index of the in-flight entry whose PSN range holds `psn`.
    fn find(&self, psn: Psn) -> Option<usize> {
        let front = self.inflight.front()?;
        let rel = psn.distance_from(front.first_psn);
        if rel >= self.next_psn.distance_from(front.first_psn) {
            return None;
        }
        // Entries are contiguous in PSN order: binary search on their offsets.
        let (mut lo, mut hi) = (0usize, self.inflight.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            let e = &self.inflight[mid];
            let start = e.first_psn.distance_from(front.first_psn);
            if rel < start {
                hi = mid;
            } else if rel >= start + e.npsn {
                lo = mid + 1;
            } else {
                return Some(mid);
            }
        }
        None
    }

    /// Whether a plain acknowledgement completes this verb (WRITE and SEND; READs and
    /// atomics need their response).
    fn acked_by_ack(wr: &WorkRequest) -> bool {
        matches!(wr, WorkRequest::Write { .. } | WorkRequest::Send { .. })
    }

    /// An acknowledgement says the responder executed everything before entry `idx`, and
    /// its MSN says how many messages (since the connection began) succeeded. If every
    /// unfinished entry before `idx` succeeding would give exactly that MSN, the WRITEs
    /// and SENDs among them are done. If not, one of them was refused and its NAK was
    /// lost: the WRITEs and SENDs stay open and are sent again, and the responder
    /// answers their duplicates as it did the first time — so a refused WRITE or SEND is
    /// never reported as done.
    ///
    /// READs and atomics before `idx` are never completed here (they need their data);
    /// if their responses were lost the retransmission timer recovers them.
    fn implied_ack_checked(&mut self, idx: usize, msn: u32, now: Instant) {
        let mut expected = self.delivered_ok;
        let mut first_open_write = None;
        for (i, e) in self.inflight.iter().enumerate().take(idx) {
            match &e.result {
                Some(Ok(_)) | Some(Err(CompletionError::BadResponse)) | None => {
                    expected = expected.wrapping_add(1);
                }
                Some(Err(_)) => {}
            }
            if e.result.is_none() && Self::acked_by_ack(&e.wr) && first_open_write.is_none() {
                first_open_write = Some(i);
            }
        }
        let Some(open) = first_open_write else {
            return;
        };
        if expected & 0x00FF_FFFF == msn & 0x00FF_FFFF {
            for e in self.inflight.iter_mut().take(idx) {
                if e.result.is_none() {
                    match e.wr {
                        WorkRequest::Write { .. } => e.result = Some(Ok(CompletionValue::Write)),
                        WorkRequest::Send { .. } => e.result = Some(Ok(CompletionValue::Send)),
                        _ => {}
                    }
                }
            }
        } else {
            self.stats.msn_mismatches += 1;
            self.rewind(open, 0, now, false);
        }
    }

    fn handle_response(&mut self, now: Instant, repr: &PacketRepr<'_>) {
        let psn = Psn::new(repr.bth.psn);
        let op = repr.bth.opcode;
        match op {
            Opcode::Acknowledge => {
                let Some(aeth) = repr.aeth else { return };
                match aeth.syndrome {
                    Syndrome::Ack { .. } => self.cumulative_ack(psn, aeth.msn, now),
                    Syndrome::RnrNak { timer } => self.rnr_nak(psn, timer, aeth.msn, now),
                    Syndrome::Nak(NakCode::PsnSequenceError) => {
                        self.stats.naks_sequence += 1;
                        // The responder executed everything before `psn` and expects `psn`.
                        self.cumulative_ack(psn.minus(1), aeth.msn, now);
                        if let Some(idx) = self.find(psn) {
                            let pkt = psn.distance_from(self.inflight[idx].first_psn);
                            let pkt = if self.inflight[idx].tx_packets == 1 {
                                0
                            } else {
                                pkt
                            };
                            self.rewind(idx, pkt, now, false);
                        }
                    }
                    Syndrome::Nak(code) => {
                        self.stats.naks_error += 1;
                        let Some(idx) = self.find(psn) else {
                            self.stats.stale_responses += 1;
                            return;
                        };
                        self.implied_ack_checked(idx, aeth.msn, now);
                        let err = match code {
                            NakCode::RemoteAccessError => CompletionError::RemoteAccess,
                            NakCode::RemoteOperationalError => CompletionError::RemoteOperational,
                            _ => CompletionError::RemoteInvalidRequest,
                        };
                        let e = &mut self.inflight[idx];
                        if e.result.is_none() {
                            e.result = Some(Err(err));
                        }
                    }
                }
            }
            Opcode::AtomicAcknowledge => {
                let (Some(ack), Some(idx)) = (repr.atomic_ack_eth, self.find(psn)) else {
                    self.stats.stale_responses += 1;
                    return;
                };
                let e = &mut self.inflight[idx];
                let is_atomic = matches!(
                    e.wr,
                    WorkRequest::CompareSwap { .. } | WorkRequest::FetchAdd { .. }
                );
                if !is_atomic {
                    e.result = Some(Err(CompletionError::BadResponse));
                } else if e.result.is_none() {
                    e.result = Some(Ok(CompletionValue::Atomic(ack.original)));
                } else {
                    self.stats.stale_responses += 1;
                }
            }
            Opcode::ReadResponseFirst
            | Opcode::ReadResponseMiddle
            | Opcode::ReadResponseLast
            | Opcode::ReadResponseOnly => self.read_response(psn, repr),
            _ => {}
        }
    }

    /// An RNR NAK for the message starting at `psn`: everything before it was executed;
    /// wait for the RNR timer and send the message again, or give up once the RNR
    /// retry count is spent.
    fn rnr_nak(&mut self, psn: Psn, timer: u8, msn: u32, now: Instant) {
        self.stats.naks_rnr += 1;
        self.cumulative_ack(psn.minus(1), msn, now);
        let Some(idx) = self.find(psn) else {
            self.stats.stale_responses += 1;
            return;
        };
        let entry = &self.inflight[idx];
        if entry.result.is_some() || entry.first_psn != psn {
            // Only the first packet of a message can find the receiver not ready.
            self.stats.stale_responses += 1;
            return;
        }
        if self.rnr_wait.is_some() && self.rnr_psn.is_some_and(|(p, _)| p == psn) {
            // A second copy of the NAK we are already waiting out: not another try.
            self.stats.stale_responses += 1;
            return;
        }
        let count = match self.rnr_psn {
            Some((p, n)) if p == psn => n + 1,
            _ => 1,
        };
        self.rnr_psn = Some((psn, count));
        let limit = u32::from(self.config.rnr_retry.min(RNR_RETRY_FOREVER));
        if limit != u32::from(RNR_RETRY_FOREVER) && count > limit {
            self.inflight[idx].result = Some(Err(CompletionError::RnrRetryExceeded));
            self.deliver(now);
            self.fail(CompletionError::Flushed);
            return;
        }
        // The responder is alive and answered: not a transport retry.
        self.retries = 0;
        self.rewind(idx, 0, now, true);
        let until = now + rnr_delay(timer);
        self.rnr_wait = Some(until);
        self.timer = Some(until + self.config.retransmit_timeout);
    }

    fn cumulative_ack(&mut self, psn: Psn, msn: u32, now: Instant) {
        let Some(front) = self.inflight.front() else {
            self.stats.stale_responses += 1;
            return;
        };
        // Ignore acknowledgements of PSNs we have not sent or that are older than the window.
        let rel = psn.distance_from(front.first_psn);
        if rel >= self.next_psn.distance_from(front.first_psn) {
            self.stats.stale_responses += 1;
            return;
        }
        let mut upto = 0;
        for e in self.inflight.iter() {
            if e.last_psn().distance_from(front.first_psn) <= rel {
                upto += 1;
            } else {
                break;
            }
        }
        self.implied_ack_checked(upto, msn, now);
    }

    fn read_response(&mut self, psn: Psn, repr: &PacketRepr<'_>) {
        let Some(idx) = self.find(psn) else {
            self.stats.stale_responses += 1;
            return;
        };
        let pmtu = self.config.pmtu.bytes() as usize;
        let e = &mut self.inflight[idx];
        let WorkRequest::Read { len, .. } = e.wr else {
            e.result = Some(Err(CompletionError::BadResponse));
            return;
        };
        if e.result.is_some() {
            self.stats.stale_responses += 1;
            return;
        }
        let pkt = psn.distance_from(e.first_psn);
        let total = e.npsn;
        let op = repr.bth.opcode;
        let starts = matches!(op, Opcode::ReadResponseFirst | Opcode::ReadResponseOnly);
        let ends = matches!(op, Opcode::ReadResponseLast | Opcode::ReadResponseOnly);
        let expected_len = if pkt + 1 == total {
            len as usize - (total as usize - 1) * pmtu
        } else {
            pmtu
        };
        let shape_ok = starts == (pkt == 0)
            && ends == (pkt + 1 == total)
            && repr.payload.len() == expected_len;
        if !shape_ok {
            e.result = Some(Err(CompletionError::BadResponse));
            return;
        }
        if total == 1 {
            // One packet carries it all: no reassembly state, one allocation.
            e.result = Some(Ok(CompletionValue::Read(repr.payload.to_vec())));
            return;
        }
        if e.read_seen.len() != total as usize {
            e.read_seen = vec![false; total as usize];
            e.read_buf = vec![0; len as usize];
            e.read_packets = 0;
        }
        if e.read_seen[pkt as usize] {
            self.stats.stale_responses += 1;
            return;
        }
        let start = pkt as usize * pmtu;
        if let Some(dst) = e.read_buf.get_mut(start..start + repr.payload.len()) {
            dst.copy_from_slice(repr.payload);
        }
        e.read_seen[pkt as usize] = true;
        e.read_packets += 1;
        if e.read_packets == total {
            e.read_seen = Vec::new();
            e.result = Some(Ok(CompletionValue::Read(std::mem::take(&mut e.read_buf))));
        }
    }

    /// Hand finished entries at the head of the queue to the completion queue.
    fn deliver(&mut self, now: Instant) {
        let mut progressed = false;
        while let Some(front) = self.inflight.front() {
            if front.result.is_none() {
                break;
            }
            let Some(e) = self.inflight.pop_front() else {
                break;
            };
            progressed = true;
            if self.send_idx == 0 {
                // We were (re)sending the entry that just finished: move on to the next one.
                self.send_pkt = 0;
            } else {
                self.send_idx -= 1;
            }
            let result = e.result.unwrap_or(Err(CompletionError::BadResponse));
            if matches!(result, Ok(_) | Err(CompletionError::BadResponse)) {
                // The responder counted it as a success in its MSN.
                self.delivered_ok = self.delivered_ok.wrapping_add(1) & 0x00FF_FFFF;
            }
            if result.is_err() {
                self.stats.failed += 1;
            }
            self.stats.completed += 1;
            self.completions.push_back(Completion {
                wr_id: e.wr_id,
                kind: e.wr.kind(),
                result,
            });
        }
        if progressed {
            self.retries = 0;
            if let Some((psn, _)) = self.rnr_psn
                && self.find(psn).is_none()
            {
                // The message the RNR NAKs were about is done: a new count starts.
                self.rnr_psn = None;
            }
            self.timer = if self.inflight.is_empty() {
                None
            } else {
                Some(now + self.config.retransmit_timeout)
            };
        }
    }
}
