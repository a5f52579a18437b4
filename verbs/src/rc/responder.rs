//! The responder half of a reliable connection, as a sans-IO state machine.
//!
//! It behaves like an RDMA NIC's responder: requests are executed strictly in
//! PSN order against registered memory; a packet ahead of the expected PSN
//! draws one NAK(PSN sequence error) until the gap is filled; duplicates are
//! handled as IBTA requires (a READ is executed again, an atomic is answered
//! from the saved-results ring and never executed twice, a WRITE is
//! acknowledged again, a SEND is acknowledged again and never delivered twice).
//! Every request is acknowledged (no ACK coalescing).
//!
//! SENDs land in the buffers of an attached [`RecvQueue`]: the first packet of a
//! message takes the oldest posted buffer, the last completes it for the queue's
//! owner. With no buffer posted the first packet draws an RNR NAK (carrying
//! [`RcConfig::min_rnr_timer`]) and the expected PSN stays put, so the requester's
//! retry is executed in sequence. A queue pair without a receive queue refuses SENDs
//! (NAK invalid request); a message longer than its buffer is refused the same way and
//! the buffer completes with [`RecvError::LocalLength`].
//! Access errors are NAKed; unlike hardware, the queue pair stays usable
//! afterwards, so one bad request does not cost a client its connection.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use super::config::RcConfig;
use super::psn::Psn;
use super::stats::ResponderStats;
use crate::mem::{AccessError, AccessFlags, AccessScope, RemoteMemory, ScopedMemory};
use crate::recv::{RecvCompletion, RecvError, RecvQueue};
use crate::wire::{
    AethRepr, AtomicAckEthRepr, BthRepr, IPV4_DF, IcrcPath, NakCode, Opcode, PacketRepr, Syndrome,
    WireError,
};

/// Largest READ a responder serves in one request (larger READs are NAKed as invalid).
pub const MAX_READ: u32 = 1 << 30;

/// Why a responder refused a datagram without answering it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DropReason {
    /// The datagram is not a well-formed RoCEv2 packet.
    #[error("malformed packet: {0}")]
    Malformed(WireError),
    /// The ICRC does not match.
    #[error("bad ICRC")]
    BadIcrc,
    /// The packet is addressed to another queue pair.
    #[error("wrong destination QP")]
    WrongQp,
    /// The opcode is not a request.
    #[error("not a request opcode: {0:?}")]
    NotARequest(Opcode),
}

impl DropReason {
    /// A short label for metrics.
    pub fn label(&self) -> &'static str {
        match self {
            DropReason::Malformed(_) => "malformed",
            DropReason::BadIcrc => "bad_icrc",
            DropReason::WrongQp => "unknown_qpn",
            DropReason::NotARequest(_) => "not_a_request",
        }
    }
}

/// How a message that a duplicate might ask about again was answered.
#[derive(Debug, Clone, Copy)]
enum Outcome {
    /// An atomic executed, with the word's original value.
    Atomic(u64),
    /// The message was refused.
    Nak(NakCode),
}

/// A remembered answer: duplicates of any packet of the message get it again, with the
/// MSN it carried the first time (so cumulative acknowledgement stays exact).
#[derive(Debug, Clone, Copy)]
struct Recent {
    first: Psn,
    npsn: u32,
    outcome: Outcome,
    msn: u32,
}

/// A READ executed the first time, remembered so that a duplicate request is served
/// only for as many bytes of the same memory key (or the rest of them), never longer.
#[derive(Debug, Clone, Copy)]
struct RecentRead {
    first: Psn,
    npsn: u32,
    rkey: u32,
    len: u32,
}

impl RecentRead {
    /// Whether a duplicate READ request at `psn` asks for this READ's bytes from its
    /// `k`-th response packet on (`k` = 0: the whole READ; a requester that resumes a
    /// READ re-requests its remaining packets, with the length shortened by `k` PMTUs):
    /// the same memory key and exactly that length. The address may differ: a switch
    /// that steers READs (Clover read steering) may send a retransmission to the
    /// client's own address where it sent the first copy to the chain's tail, and the
    /// requester may read any address its key covers with a new READ anyway. What a
    /// duplicate can never do is draw more bytes than the READ it repeats.
    fn allows(&self, psn: Psn, rkey: u32, len: u32, pmtu: u32) -> bool {
        let k = psn.distance_from(self.first);
        if k >= self.npsn || rkey != self.rkey {
            return false;
        }
        let skip = u64::from(k) * u64::from(pmtu);
        u64::from(self.len).checked_sub(skip) == Some(u64::from(len))
    }
}

#[derive(Debug)]
enum Outgoing {
    Ack {
        psn: Psn,
        syndrome: Syndrome,
        msn: u32,
    },
    AtomicAck {
        psn: Psn,
        msn: u32,
        original: u64,
    },
    Read {
        first_psn: Psn,
        msn: u32,
        data: Vec<u8>,
        next_packet: u32,
    },
}

#[derive(Debug)]
struct WriteInProgress {
    rkey: u32,
    next_va: u64,
    remaining: u64,
}

/// A SEND whose first packet arrived: the buffer it is landing in.
#[derive(Debug)]
struct SendInProgress {
    wr_id: u64,
    buf: Vec<u8>,
    len: usize,
}

/// The responder side of one RC queue pair.
#[derive(Debug)]
pub struct Responder {
    config: RcConfig,
    local_qpn: u32,
    remote_qpn: u32,
    request_path: IcrcPath,
    response_path: IcrcPath,
    epsn: Psn,
    msn: u32,
    write: Option<WriteInProgress>,
    send: Option<SendInProgress>,
    /// A multi-packet SEND was refused part-way: its remaining packets are skipped
    /// (their number is unknown: SENDs carry no length).
    discarding: bool,
    recv_queue: Option<RecvQueue>,
    nak_outstanding: bool,
    recent: VecDeque<Recent>,
    recent_reads: VecDeque<RecentRead>,
    out: VecDeque<Outgoing>,
    spare: Vec<Vec<u8>>,
    stats: ResponderStats,
    scope: Option<Arc<AccessScope>>,
    /// The time scope windows are judged at (`None`: read the clock per request).
    now: Option<Instant>,
}

impl Responder {
    /// A responder for requests from `remote_qpn` to `local_qpn`, expecting `start_psn` first.
    ///
    /// `request_path` is the IPv4/UDP addressing of the requester's datagrams (for the ICRC);
    /// responses travel the reverse path.
    pub fn new(
        config: RcConfig,
        local_qpn: u32,
        remote_qpn: u32,
        start_psn: u32,
        request_path: IcrcPath,
    ) -> Responder {
        Responder {
            response_path: request_path.reversed(),
            request_path,
            local_qpn,
            remote_qpn,
            epsn: Psn::new(start_psn),
            msn: 0,
            write: None,
            send: None,
            discarding: false,
            recv_queue: None,
            nak_outstanding: false,
            recent: VecDeque::new(),
            recent_reads: VecDeque::new(),
            out: VecDeque::new(),
            spare: Vec::new(),
            stats: ResponderStats::default(),
            scope: None,
            now: None,
            config,
        }
    }

    /// The same responder, sending its responses to `addr` (e.g. the requester's
    /// port 4791, as RoCEv2 NICs do) instead of back to where requests come from.
    pub fn respond_to(mut self, addr: std::net::SocketAddrV4) -> Responder {
        self.response_path = IcrcPath::new(self.request_path.dst, addr);
        self
    }

    /// Restricts (or, with `None`, stops restricting) what this queue pair may touch:
    /// with a scope, every request must carry the scope's key and stay inside its
    /// windows and rights, or it is NAKed (remote access error) without touching memory.
    pub fn set_scope(&mut self, scope: Option<Arc<AccessScope>>) {
        self.scope = scope;
    }

    /// Judge the scope's window expiry as of `now` for the requests handled until the
    /// next call (a receive loop reads the clock once per batch instead of once per
    /// request); `None`: read the clock for every request.
    pub fn set_now(&mut self, now: Option<Instant>) {
        self.now = now;
    }

    /// Attaches (or, with `None`, detaches) the receive queue SENDs land in. A queue
    /// shared by several responders acts as a shared receive queue. Detaching fails a
    /// SEND in progress ([`RecvError::Aborted`], its buffer returned).
    pub fn set_recv_queue(&mut self, queue: Option<RecvQueue>) {
        self.abort_send(RecvError::Aborted);
        self.recv_queue = queue;
    }

    /// The attached receive queue, if any.
    pub fn recv_queue(&self) -> Option<&RecvQueue> {
        self.recv_queue.as_ref()
    }

    /// The scope requests are checked against, if any.
    pub fn scope(&self) -> Option<&Arc<AccessScope>> {
        self.scope.as_ref()
    }

    /// Our queue pair number.
    pub fn local_qpn(&self) -> u32 {
        self.local_qpn
    }

    /// The requester's queue pair number.
    pub fn remote_qpn(&self) -> u32 {
        self.remote_qpn
    }

    /// The PSN expected next.
    pub fn expected_psn(&self) -> u32 {
        self.epsn.get()
    }

    /// Where responses go (the reverse of the request path).
    pub fn response_path(&self) -> &IcrcPath {
        &self.response_path
    }

    /// Counters.
    pub fn stats(&self) -> &ResponderStats {
        &self.stats
    }

    /// Whether responses are waiting in [`Responder::poll_transmit`].
    pub fn wants_transmit(&self) -> bool {
        !self.out.is_empty()
    }

    /// Process one datagram addressed to this QP, executing it against `mem`. The ICRC
    /// is checked against the request path's header as a UDP socket's peer sends it
    /// (IP id 0, DF): what a receive path that cannot see the IP header has to assume.
    pub fn handle_datagram(
        &mut self,
        datagram: &[u8],
        mem: &dyn RemoteMemory,
    ) -> Result<(), DropReason> {
        self.handle_datagram_sent_with(datagram, 0, IPV4_DF, mem)
    }

    /// [`Responder::handle_datagram`] for a datagram whose real IPv4 identification and
    /// flags word are known (a receive path that sees whole frames): the ICRC is checked
    /// against the header it was actually sent with.
    pub fn handle_datagram_sent_with(
        &mut self,
        datagram: &[u8],
        ip_id: u16,
        ip_flags: u16,
        mem: &dyn RemoteMemory,
    ) -> Result<(), DropReason> {
        let repr = PacketRepr::parse(datagram).map_err(DropReason::Malformed)?;
        self.request_path
            .with_ip_id(ip_id)
            .with_ip_flags(ip_flags)
            .verify(datagram)
            .map_err(|_| DropReason::BadIcrc)?;
        self.handle_packet(&repr, mem)
    }

    /// Process one parsed packet whose ICRC has already been verified.
    pub fn handle_packet(
        &mut self,
        repr: &PacketRepr<'_>,
        mem: &dyn RemoteMemory,
    ) -> Result<(), DropReason> {
        if repr.bth.dest_qpn != self.local_qpn {
            return Err(DropReason::WrongQp);
        }
        // A scoped queue pair executes against its windows only; the scope is shared
        // (not taken out), so a panic while executing cannot leave the queue pair unscoped.
        let scope = self.scope.clone();
        let scoped;
        let mem: &dyn RemoteMemory = match &scope {
            Some(s) => {
                scoped = ScopedMemory::new(s, mem, self.now.unwrap_or_else(Instant::now));
                &scoped
            }
            None => mem,
        };
        let op = repr.bth.opcode;
        if !op.is_request() {
            return Err(DropReason::NotARequest(op));
        }
        let psn = Psn::new(repr.bth.psn);
        let mut d = psn.diff(self.epsn);
        if d > 0 && self.discarding && op.starts_message() {
            // The requester gave up the rest of the refused SEND and went on with its
            // next message: the skipped PSNs belong to the refusal.
            self.skip_refused(d as u32);
            self.epsn = psn;
            d = 0;
        }
        if d > 0 {
            if self.nak_outstanding {
                self.stats.out_of_sequence_dropped += 1;
            } else {
                self.nak_outstanding = true;
                self.stats.naks_sequence += 1;
                self.out.push_back(Outgoing::Ack {
                    psn: self.epsn,
                    syndrome: Syndrome::Nak(NakCode::PsnSequenceError),
                    msn: self.msn,
                });
            }
            return Ok(());
        }
        if d < 0 {
            self.duplicate(psn, repr, mem);
            return Ok(());
        }
        self.nak_outstanding = false;
        self.stats.packets_in_sequence += 1;
        self.in_sequence(psn, repr, mem);
        Ok(())
    }

    fn nak(&mut self, psn: Psn, code: NakCode, msn: u32) {
        match code {
            NakCode::RemoteAccessError => self.stats.naks_access += 1,
            _ => self.stats.naks_invalid += 1,
        }
        self.out.push_back(Outgoing::Ack {
            psn,
            syndrome: Syndrome::Nak(code),
            msn,
        });
    }

    fn remember(&mut self, first: Psn, npsn: u32, outcome: Outcome) {
        if self.recent.len() >= self.config.atomic_ring.max(1) {
            self.recent.pop_front();
        }
        self.recent.push_back(Recent {
            first,
            npsn: npsn.max(1),
            outcome,
            msn: self.msn,
        });
    }

    /// Refuse the message starting at `first` (`npsn` PSNs long) and remember it, so a
    /// duplicate is refused again instead of being acknowledged.
    fn refuse(&mut self, first: Psn, npsn: u32, code: NakCode) {
        self.remember(first, npsn, Outcome::Nak(code));
        self.nak(first, code, self.msn);
    }

    /// Extend the refusal being discarded by `n` PSNs, so that duplicates of its
    /// remaining packets are refused again rather than acknowledged.
    fn skip_refused(&mut self, n: u32) {
        if let Some(last) = self.recent.back_mut() {
            last.npsn = last.npsn.saturating_add(n);
        }
        self.discarding = false;
    }

    /// Fail the SEND in progress, returning its buffer to the receive queue's owner.
    fn abort_send(&mut self, why: RecvError) {
        if let Some(s) = self.send.take()
            && let Some(q) = &self.recv_queue
        {
            q.complete(RecvCompletion {
                wr_id: s.wr_id,
                qpn: self.local_qpn,
                remote_qpn: self.remote_qpn,
                byte_len: 0,
                imm: None,
                data: s.buf,
                result: Err(why),
            });
        }
    }

    /// Clear any message in progress because a packet broke its sequence.
    fn break_messages(&mut self) {
        self.write = None;
        self.abort_send(RecvError::Aborted);
        self.discarding = false;
    }

    /// Refuse a SEND packet at `psn`; `more` tells whether packets of the message may
    /// follow (they are then skipped until its last one or the next message).
    fn refuse_send(&mut self, psn: Psn, code: NakCode, why: RecvError, more: bool) {
        self.abort_send(why);
        self.refuse(psn, 1, code);
        self.discarding = more;
    }

    /// A SEND packet in sequence (the expected PSN already advanced past it).
    fn in_sequence_send(&mut self, psn: Psn, repr: &PacketRepr<'_>) {
        let op = repr.bth.opcode;
        let pmtu = self.config.pmtu.bytes() as usize;
        let first = matches!(
            op,
            Opcode::SendFirst | Opcode::SendOnly | Opcode::SendOnlyImm
        );
        let last = op != Opcode::SendFirst && op != Opcode::SendMiddle;
        let len = repr.payload.len();
        if first {
            if self.write.is_some() || self.send.is_some() {
                // The previous message never finished: refuse both.
                self.break_messages();
                self.refuse_send(psn, NakCode::InvalidRequest, RecvError::Aborted, !last);
                return;
            }
            let shape_ok = if last { len <= pmtu } else { len == pmtu };
            if !shape_ok || self.recv_queue.is_none() {
                self.refuse_send(psn, NakCode::InvalidRequest, RecvError::Aborted, !last);
                return;
            }
            let Some((wr_id, buf)) = self.recv_queue.as_ref().and_then(RecvQueue::take) else {
                // Receiver not ready: the packet is not executed, the expected PSN goes
                // back to it, and later packets are dropped until it is sent again.
                self.epsn = psn;
                self.nak_outstanding = true;
                self.stats.naks_rnr += 1;
                self.out.push_back(Outgoing::Ack {
                    psn,
                    syndrome: Syndrome::RnrNak {
                        timer: self.config.min_rnr_timer & 0x1F,
                    },
                    msn: self.msn,
                });
                return;
            };
            self.send = Some(SendInProgress { wr_id, buf, len: 0 });
        } else {
            if self.discarding {
                if let Some(r) = self.recent.back_mut() {
                    r.npsn = r.npsn.saturating_add(1);
                }
                if last {
                    self.discarding = false;
                }
                return;
            }
            if self.send.is_none() {
                self.write = None;
                self.refuse(psn, 1, NakCode::InvalidRequest);
                return;
            }
            let shape_ok = if last {
                len > 0 && len <= pmtu
            } else {
                len == pmtu
            };
            if !shape_ok {
                self.refuse_send(psn, NakCode::InvalidRequest, RecvError::Aborted, !last);
                return;
            }
        }
        let Some(s) = self.send.as_mut() else {
            return;
        };
        let end = s.len + len;
        let Some(dst) = s.buf.get_mut(s.len..end) else {
            self.refuse_send(psn, NakCode::InvalidRequest, RecvError::LocalLength, !last);
            return;
        };
        dst.copy_from_slice(repr.payload);
        s.len = end;
        if !last {
            return;
        }
        let Some(mut s) = self.send.take() else {
            return;
        };
        s.buf.truncate(s.len);
        self.bump_msn();
        self.stats.sends += 1;
        if let Some(q) = &self.recv_queue {
            q.complete(RecvCompletion {
                wr_id: s.wr_id,
                qpn: self.local_qpn,
                remote_qpn: self.remote_qpn,
                byte_len: s.len as u32,
                imm: repr.immdt,
                data: s.buf,
                result: Ok(()),
            });
        }
        self.ack(psn);
    }

    fn ack(&mut self, psn: Psn) {
        self.out.push_back(Outgoing::Ack {
            psn,
            syndrome: Syndrome::Ack { credits: 0x1F },
            msn: self.msn,
        });
    }

    fn access_nak(e: &AccessError) -> NakCode {
        if e.is_invalid_request() {
            NakCode::InvalidRequest
        } else {
            NakCode::RemoteAccessError
        }
    }

    fn bump_msn(&mut self) {
        self.msn = (self.msn + 1) & 0x00FF_FFFF;
        self.stats.messages += 1;
    }

    fn in_sequence(&mut self, psn: Psn, repr: &PacketRepr<'_>, mem: &dyn RemoteMemory) {
        let pmtu = self.config.pmtu.bytes() as u64;
        let op = repr.bth.opcode;
        if self.discarding && op.starts_message() {
            // A new message after a refused SEND whose last packet never came.
            self.skip_refused(0);
        }
        if self.send.is_some() && !op.is_send() {
            // A one-sided request inside an unfinished SEND: the SEND is broken.
            self.abort_send(RecvError::Aborted);
        }
        match op {
            Opcode::SendFirst
            | Opcode::SendMiddle
            | Opcode::SendLast
            | Opcode::SendLastImm
            | Opcode::SendOnly
            | Opcode::SendOnlyImm => {
                self.epsn = self.epsn.plus(1);
                self.in_sequence_send(psn, repr);
            }
            Opcode::WriteFirst | Opcode::WriteOnly | Opcode::WriteOnlyImm => {
                self.epsn = self.epsn.plus(1);
                let Some(reth) = repr.reth else {
                    self.refuse(psn, 1, NakCode::InvalidRequest);
                    return;
                };
                let only = op != Opcode::WriteFirst;
                // PSNs the requester gave the whole message (bounded: dma_len is untrusted).
                let span = if only {
                    1
                } else {
                    self.config.pmtu.packets(reth.dma_len as u64).min(1 << 22)
                };
                let len = repr.payload.len() as u64;
                let dma = reth.dma_len as u64;
                let shape_ok = self.write.is_none()
                    && if only {
                        len == dma && len <= pmtu
                    } else {
                        len == pmtu && dma > pmtu
                    };
                if !shape_ok {
                    // Refuse the whole message and skip its remaining packets: the
                    // requester may finish it (as failed) before sending them all.
                    self.write = None;
                    self.epsn = psn.plus(span);
                    self.refuse(psn, span, NakCode::InvalidRequest);
                    return;
                }
                let result = mem
                    .check(reth.rkey, reth.va, dma, AccessFlags::REMOTE_WRITE)
                    .and_then(|()| mem.write(reth.rkey, reth.va, repr.payload));
                if let Err(e) = result {
                    self.write = None;
                    self.epsn = psn.plus(span);
                    self.refuse(psn, span, Self::access_nak(&e));
                    return;
                }
                if only {
                    self.bump_msn();
                    self.stats.writes += 1;
                    self.ack(psn);
                } else {
                    self.write = Some(WriteInProgress {
                        rkey: reth.rkey,
                        next_va: reth.va.wrapping_add(len),
                        remaining: dma - len,
                    });
                }
            }
            Opcode::WriteMiddle | Opcode::WriteLast | Opcode::WriteLastImm => {
                self.epsn = self.epsn.plus(1);
                let last = op != Opcode::WriteMiddle;
                let Some(w) = self.write.as_mut() else {
                    self.refuse(psn, 1, NakCode::InvalidRequest);
                    return;
                };
                let len = repr.payload.len() as u64;
                // Packets of this message still to come after this one.
                let rest = w.remaining.saturating_sub(len).div_ceil(pmtu).min(1 << 22) as u32;
                let shape_ok = if last {
                    len == w.remaining && len <= pmtu && len > 0
                } else {
                    len == pmtu && len < w.remaining
                };
                if !shape_ok {
                    self.write = None;
                    let skip = if last { 0 } else { rest };
                    self.epsn = psn.plus(1 + skip);
                    self.refuse(psn, 1 + skip, NakCode::InvalidRequest);
                    return;
                }
                let (rkey, va) = (w.rkey, w.next_va);
                w.next_va = w.next_va.wrapping_add(len);
                w.remaining -= len;
                if let Err(e) = mem.write(rkey, va, repr.payload) {
                    self.write = None;
                    self.epsn = psn.plus(1 + rest);
                    self.refuse(psn, 1 + rest, Self::access_nak(&e));
                    return;
                }
                if last {
                    self.write = None;
                    self.bump_msn();
                    self.stats.writes += 1;
                    self.ack(psn);
                }
            }
            Opcode::ReadRequest => {
                let Some(reth) = repr.reth else {
                    self.epsn = self.epsn.plus(1);
                    self.refuse(psn, 1, NakCode::InvalidRequest);
                    return;
                };
                let npsn = self.config.pmtu.packets(reth.dma_len as u64);
                self.epsn = self.epsn.plus(npsn);
                if self.write.is_some() {
                    self.write = None;
                    self.refuse(psn, npsn, NakCode::InvalidRequest);
                    return;
                }
                if self.execute_read(psn, reth.rkey, reth.va, reth.dma_len, mem, true) {
                    self.stats.reads += 1;
                    if self.recent_reads.len() >= self.config.max_outstanding.max(16) {
                        self.recent_reads.pop_front();
                    }
                    self.recent_reads.push_back(RecentRead {
                        first: psn,
                        npsn,
                        rkey: reth.rkey,
                        len: reth.dma_len,
                    });
                }
            }
            Opcode::CompareSwap | Opcode::FetchAdd => {
                self.epsn = self.epsn.plus(1);
                let Some(a) = repr.atomic_eth else {
                    self.refuse(psn, 1, NakCode::InvalidRequest);
                    return;
                };
                let outcome = if self.write.is_some() {
                    self.write = None;
                    Outcome::Nak(NakCode::InvalidRequest)
                } else {
                    let r = if op == Opcode::CompareSwap {
                        mem.compare_swap(a.rkey, a.va, a.compare, a.swap_add)
                    } else {
                        mem.fetch_add(a.rkey, a.va, a.swap_add)
                    };
                    match r {
                        Ok(v) => Outcome::Atomic(v),
                        Err(e) => Outcome::Nak(Self::access_nak(&e)),
                    }
                };
                if matches!(outcome, Outcome::Atomic(_)) {
                    self.bump_msn();
                    self.stats.atomics += 1;
                }
                self.remember(psn, 1, outcome);
                self.answer(psn, outcome, self.msn);
            }
            _ => {}
        }
    }

    fn answer(&mut self, psn: Psn, outcome: Outcome, msn: u32) {
        match outcome {
            Outcome::Atomic(original) => {
                self.out
                    .push_back(Outgoing::AtomicAck { psn, msn, original })
            }
            Outcome::Nak(code) => self.nak(psn, code, msn),
        }
    }

    /// Execute a READ and queue its response (or a NAK). `first` marks a request seen
    /// for the first time, which completes a message (bumps the MSN) when it succeeds.
    fn execute_read(
        &mut self,
        psn: Psn,
        rkey: u32,
        va: u64,
        len: u32,
        mem: &dyn RemoteMemory,
        first: bool,
    ) -> bool {
        let refuse = |me: &mut Self, code: NakCode| {
            if first {
                let span = me.config.pmtu.packets(len as u64);
                me.refuse(psn, span, code);
            } else {
                me.nak(psn, code, me.msn);
            }
        };
        if len > MAX_READ {
            refuse(self, NakCode::InvalidRequest);
            return false;
        }
        // Validate before allocating: a refused READ costs nothing, however long it claims to be.
        if let Err(e) = mem.check(rkey, va, len as u64, AccessFlags::REMOTE_READ) {
            refuse(self, Self::access_nak(&e));
            return false;
        }
        let mut data = self.spare.pop().unwrap_or_default();
        data.clear();
        data.resize(len as usize, 0);
        if let Err(e) = mem.read(rkey, va, &mut data) {
            self.spare.push(data);
            refuse(self, Self::access_nak(&e));
            return false;
        }
        if first {
            self.bump_msn();
        }
        self.out.push_back(Outgoing::Read {
            first_psn: psn,
            msn: self.msn,
            data,
            next_packet: 0,
        });
        true
    }

    fn duplicate(&mut self, psn: Psn, repr: &PacketRepr<'_>, mem: &dyn RemoteMemory) {
        self.stats.duplicates += 1;
        let remembered = self
            .recent
            .iter()
            .rev()
            .find(|r| psn.distance_from(r.first) < r.npsn)
            .copied();
        if let Some(r) = remembered {
            // Answer exactly as the first time: a refused message is refused again (never
            // acknowledged), an atomic is answered from its saved result (never re-executed).
            match (r.outcome, repr.bth.opcode) {
                (Outcome::Atomic(_), Opcode::CompareSwap | Opcode::FetchAdd) => {
                    self.stats.replayed_atomics += 1;
                    self.answer(psn, r.outcome, r.msn);
                }
                // One NAK per retransmitted message: for its first packet or the one
                // asking for an acknowledgement, not for every packet in between.
                (Outcome::Nak(_), _) if psn == r.first || repr.bth.ack_req => {
                    self.answer(r.first, r.outcome, r.msn)
                }
                _ => {}
            }
            return;
        }
        match repr.bth.opcode {
            Opcode::ReadRequest => {
                let Some(reth) = repr.reth else {
                    return;
                };
                let pmtu = self.config.pmtu.bytes();
                let original = self
                    .recent_reads
                    .iter()
                    .rev()
                    .any(|r| r.allows(psn, reth.rkey, reth.dma_len, pmtu));
                if original {
                    self.stats.duplicate_reads += 1;
                    self.execute_read(psn, reth.rkey, reth.va, reth.dma_len, mem, false);
                } else {
                    // Not the READ this queue pair executed at that PSN (another key or
                    // length, or too old to be remembered): refused, never executed.
                    self.stats.duplicate_reads_refused += 1;
                    self.nak(psn, NakCode::InvalidRequest, self.msn);
                }
            }
            Opcode::CompareSwap | Opcode::FetchAdd => self.stats.duplicate_atomics_dropped += 1,
            Opcode::WriteOnly
            | Opcode::WriteOnlyImm
            | Opcode::WriteLast
            | Opcode::WriteLastImm
            | Opcode::SendOnly
            | Opcode::SendOnlyImm
            | Opcode::SendLast
            | Opcode::SendLastImm => {
                // A SEND is acknowledged again but never delivered twice. Cumulative:
                // everything before the expected PSN was executed, and the MSN counts
                // the messages among them that succeeded.
                self.ack(self.epsn.minus(1));
            }
            _ => {}
        }
    }

    /// Write the next response packet into `buf` and return its length.
    ///
    /// `buf` must hold PMTU + 64 bytes.
    pub fn poll_transmit(&mut self, buf: &mut [u8]) -> Option<usize> {
        let pmtu = self.config.pmtu.bytes() as usize;
        let front = self.out.front_mut()?;
        let mut bth = BthRepr::new(Opcode::Acknowledge, self.remote_qpn, 0, false);
        let mut repr = PacketRepr {
            bth,
            reth: None,
            immdt: None,
            atomic_eth: None,
            aeth: None,
            atomic_ack_eth: None,
            payload: &[],
        };
        let mut finished = true;
        match front {
            Outgoing::Ack { psn, syndrome, msn } => {
                bth.psn = psn.get();
                repr.bth = bth;
                repr.aeth = Some(AethRepr {
                    syndrome: *syndrome,
                    msn: *msn,
                });
            }
            Outgoing::AtomicAck { psn, msn, original } => {
                bth.opcode = Opcode::AtomicAcknowledge;
                bth.psn = psn.get();
                repr.bth = bth;
                repr.aeth = Some(AethRepr {
                    syndrome: Syndrome::Ack { credits: 0x1F },
                    msn: *msn,
                });
                repr.atomic_ack_eth = Some(AtomicAckEthRepr {
                    original: *original,
                });
            }
            Outgoing::Read {
                first_psn,
                msn,
                data,
                next_packet,
            } => {
                let total = self.config.pmtu.packets(data.len() as u64);
                let k = *next_packet;
                let start = (k as usize).saturating_mul(pmtu).min(data.len());
                let end = start.saturating_add(pmtu).min(data.len());
                bth.opcode = match (k == 0, k + 1 == total) {
                    (true, true) => Opcode::ReadResponseOnly,
                    (true, false) => Opcode::ReadResponseFirst,
                    (false, true) => Opcode::ReadResponseLast,
                    (false, false) => Opcode::ReadResponseMiddle,
                };
                bth.psn = first_psn.plus(k).get();
                repr.bth = bth;
                if bth.opcode != Opcode::ReadResponseMiddle {
                    repr.aeth = Some(AethRepr {
                        syndrome: Syndrome::Ack { credits: 0x1F },
                        msn: *msn,
                    });
                }
                repr.payload = data.get(start..end).unwrap_or(&[]);
                *next_packet += 1;
                finished = *next_packet >= total;
            }
        }
        let written = repr.emit(buf, &self.response_path).ok();
        if finished
            && let Some(Outgoing::Read { data, .. }) = self.out.pop_front()
            && self.spare.len() < 8
            && data.capacity() <= 1 << 20
        {
            self.spare.push(data);
        }
        let len = written?;
        self.stats.packets_sent += 1;
        self.stats.bytes_sent += len as u64;
        Some(len)
    }
}
