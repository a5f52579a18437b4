//! The responder half of a reliable connection, as a sans-IO state machine.
//!
//! It behaves like an RDMA NIC's responder: requests are executed strictly in
//! PSN order against registered memory; a packet ahead of the expected PSN
//! draws one NAK(PSN sequence error) until the gap is filled; duplicates are
//! handled as IBTA requires (a READ is executed again, an atomic is answered
//! from the saved-results ring and never executed twice, a WRITE is
//! acknowledged again). Every request is acknowledged (no ACK coalescing).
//! Access errors are NAKed; unlike hardware, the queue pair stays usable
//! afterwards, so one bad request does not cost a client its connection.

use std::collections::VecDeque;

use super::config::RcConfig;
use super::psn::Psn;
use super::stats::ResponderStats;
use crate::mem::{AccessError, AccessFlags, RemoteMemory};
use crate::wire::{
    AethRepr, AtomicAckEthRepr, BthRepr, IcrcPath, NakCode, Opcode, PacketRepr, Syndrome, WireError,
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

#[derive(Debug, Clone, Copy)]
enum AtomicOutcome {
    Done(u64),
    Nak(NakCode),
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
    failed: bool,
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
    nak_outstanding: bool,
    atomic_results: VecDeque<(Psn, AtomicOutcome)>,
    out: VecDeque<Outgoing>,
    spare: Vec<Vec<u8>>,
    stats: ResponderStats,
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
            nak_outstanding: false,
            atomic_results: VecDeque::new(),
            out: VecDeque::new(),
            spare: Vec::new(),
            stats: ResponderStats::default(),
            config,
        }
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

    /// Process one datagram addressed to this QP, executing it against `mem`.
    pub fn handle_datagram(
        &mut self,
        datagram: &[u8],
        mem: &dyn RemoteMemory,
    ) -> Result<(), DropReason> {
        let repr = PacketRepr::parse(datagram).map_err(DropReason::Malformed)?;
        self.request_path
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
        let op = repr.bth.opcode;
        if !op.is_request() {
            return Err(DropReason::NotARequest(op));
        }
        let psn = Psn::new(repr.bth.psn);
        let d = psn.diff(self.epsn);
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

    fn nak(&mut self, psn: Psn, code: NakCode) {
        match code {
            NakCode::RemoteAccessError => self.stats.naks_access += 1,
            _ => self.stats.naks_invalid += 1,
        }
        self.out.push_back(Outgoing::Ack {
            psn,
            syndrome: Syndrome::Nak(code),
            msn: self.msn,
        });
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
        match op {
            Opcode::WriteFirst | Opcode::WriteOnly | Opcode::WriteOnlyImm => {
                self.epsn = self.epsn.plus(1);
                let Some(reth) = repr.reth else {
                    self.nak(psn, NakCode::InvalidRequest);
                    return;
                };
                let only = op != Opcode::WriteFirst;
                let len = repr.payload.len() as u64;
                let dma = reth.dma_len as u64;
                let shape_ok = self.write.is_none()
                    && if only {
                        len == dma && len <= pmtu
                    } else {
                        len == pmtu && dma > pmtu
                    };
                if !shape_ok {
                    self.write = None;
                    if !only {
                        self.write = Some(WriteInProgress {
                            rkey: reth.rkey,
                            next_va: reth.va,
                            remaining: 0,
                            failed: true,
                        });
                    }
                    self.nak(psn, NakCode::InvalidRequest);
                    return;
                }
                let result = mem
                    .check(reth.rkey, reth.va, dma, AccessFlags::REMOTE_WRITE)
                    .and_then(|()| mem.write(reth.rkey, reth.va, repr.payload));
                if let Err(e) = result {
                    if !only {
                        self.write = Some(WriteInProgress {
                            rkey: reth.rkey,
                            next_va: reth.va,
                            remaining: 0,
                            failed: true,
                        });
                    }
                    self.nak(psn, Self::access_nak(&e));
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
                        failed: false,
                    });
                }
            }
            Opcode::WriteMiddle | Opcode::WriteLast | Opcode::WriteLastImm => {
                self.epsn = self.epsn.plus(1);
                let last = op != Opcode::WriteMiddle;
                let Some(w) = self.write.as_mut() else {
                    self.nak(psn, NakCode::InvalidRequest);
                    return;
                };
                if w.failed {
                    // The message was already refused at its first packet: swallow the rest.
                    if last {
                        self.write = None;
                    }
                    return;
                }
                let len = repr.payload.len() as u64;
                let shape_ok = if last {
                    len == w.remaining && len <= pmtu && len > 0
                } else {
                    len == pmtu && len < w.remaining
                };
                if !shape_ok {
                    self.write = None;
                    self.nak(psn, NakCode::InvalidRequest);
                    return;
                }
                let (rkey, va) = (w.rkey, w.next_va);
                w.next_va = w.next_va.wrapping_add(len);
                w.remaining -= len;
                if let Err(e) = mem.write(rkey, va, repr.payload) {
                    self.write = None;
                    self.nak(psn, Self::access_nak(&e));
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
                    self.nak(psn, NakCode::InvalidRequest);
                    return;
                };
                let npsn = self.config.pmtu.packets(reth.dma_len as u64);
                self.epsn = self.epsn.plus(npsn);
                if self.write.is_some() {
                    self.write = None;
                    self.nak(psn, NakCode::InvalidRequest);
                    return;
                }
                if self.execute_read(psn, reth.rkey, reth.va, reth.dma_len, mem, true) {
                    self.stats.reads += 1;
                }
            }
            Opcode::CompareSwap | Opcode::FetchAdd => {
                self.epsn = self.epsn.plus(1);
                let Some(a) = repr.atomic_eth else {
                    self.nak(psn, NakCode::InvalidRequest);
                    return;
                };
                let outcome = if self.write.is_some() {
                    self.write = None;
                    AtomicOutcome::Nak(NakCode::InvalidRequest)
                } else {
                    let r = if op == Opcode::CompareSwap {
                        mem.compare_swap(a.rkey, a.va, a.compare, a.swap_add)
                    } else {
                        mem.fetch_add(a.rkey, a.va, a.swap_add)
                    };
                    match r {
                        Ok(v) => AtomicOutcome::Done(v),
                        Err(e) => AtomicOutcome::Nak(Self::access_nak(&e)),
                    }
                };
                if matches!(outcome, AtomicOutcome::Done(_)) {
                    self.bump_msn();
                    self.stats.atomics += 1;
                }
                if self.atomic_results.len() >= self.config.atomic_ring.max(1) {
                    self.atomic_results.pop_front();
                }
                self.atomic_results.push_back((psn, outcome));
                self.answer_atomic(psn, outcome);
            }
            _ => {}
        }
    }

    fn answer_atomic(&mut self, psn: Psn, outcome: AtomicOutcome) {
        match outcome {
            AtomicOutcome::Done(original) => self.out.push_back(Outgoing::AtomicAck {
                psn,
                msn: self.msn,
                original,
            }),
            AtomicOutcome::Nak(code) => self.nak(psn, code),
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
        if len > MAX_READ {
            self.nak(psn, NakCode::InvalidRequest);
            return false;
        }
        // Validate before allocating: a refused READ costs nothing, however long it claims to be.
        if let Err(e) = mem.check(rkey, va, len as u64, AccessFlags::REMOTE_READ) {
            self.nak(psn, Self::access_nak(&e));
            return false;
        }
        let mut data = self.spare.pop().unwrap_or_default();
        data.clear();
        data.resize(len as usize, 0);
        if let Err(e) = mem.read(rkey, va, &mut data) {
            self.spare.push(data);
            self.nak(psn, Self::access_nak(&e));
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
        match repr.bth.opcode {
            Opcode::ReadRequest => {
                if let Some(reth) = repr.reth {
                    self.stats.duplicate_reads += 1;
                    self.execute_read(psn, reth.rkey, reth.va, reth.dma_len, mem, false);
                }
            }
            Opcode::CompareSwap | Opcode::FetchAdd => {
                let found = self
                    .atomic_results
                    .iter()
                    .rev()
                    .find(|(p, _)| *p == psn)
                    .map(|(_, o)| *o);
                match found {
                    Some(outcome) => {
                        self.stats.replayed_atomics += 1;
                        self.answer_atomic(psn, outcome);
                    }
                    None => self.stats.duplicate_atomics_dropped += 1,
                }
            }
            Opcode::WriteOnly | Opcode::WriteOnlyImm | Opcode::WriteLast | Opcode::WriteLastImm => {
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
