//! The `local` transport: verbs applied directly to memory this process can address.
//!
//! Used for the embedded mode and unit tests (memory in the same process) and, through
//! [`super::shm`], for memory in a shared-memory file. There is no memory-node CPU on
//! the path: a posted batch is executed in order at the doorbell, with exactly the
//! memory semantics of the RDMA responder (same [`RemoteMemory`] implementation), and
//! its completions are returned by the next poll.
//!
//! Two-sided verbs: a queue pair connected with a [`RecvQueue`]
//! ([`DirectTransport::connect_with_recv`]) delivers each SEND straight into the next
//! buffer posted there, with the semantics of the RC responder: no receive queue
//! means the SEND is refused (remote invalid request), a message longer than the
//! buffer fails both sides (local length error at the receiver), and a SEND that finds
//! no buffer waits the RNR timer and tries again, up to the RNR retry count, while the
//! queue pair's later work requests wait behind it (RC order). A completion's queue
//! pair numbers are the transport's handles.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use super::{QpHandle, Transport, TransportKind, TransportStats, wire_cost};
use crate::mem::{AccessError, AccessFlags, RemoteMemory};
use crate::rc::{MAX_READ, Pmtu, RNR_RETRY_FOREVER, RcConfig, rnr_delay};
use crate::recv::{RecvCompletion, RecvError, RecvQueue};
use crate::wr::{Completion, CompletionError, CompletionValue, PostError, WorkRequest};

/// Send queue depth of a direct queue pair.
pub const DIRECT_QUEUE_DEPTH: usize = 1024;

struct DirectQp {
    mem: Arc<dyn RemoteMemory>,
    recv: Option<RecvQueue>,
    /// Posted, not yet executed (behind a SEND waiting for a receive buffer).
    queue: VecDeque<(u64, WorkRequest)>,
    /// The SEND at the head of `queue` found no buffer: try again at this instant.
    rnr_until: Option<Instant>,
    /// RNR NAKs the SEND at the head of `queue` has drawn.
    rnr_tries: u32,
    done: VecDeque<Completion>,
}

/// A transport whose queue pairs apply verbs directly to a [`RemoteMemory`].
pub struct DirectTransport {
    kind: TransportKind,
    qps: Vec<DirectQp>,
    pmtu: Pmtu,
    rnr_retry: u8,
    min_rnr_timer: u8,
    stats: TransportStats,
}

impl DirectTransport {
    /// An empty `local` transport.
    pub fn local() -> DirectTransport {
        DirectTransport::with_kind(TransportKind::Local)
    }

    pub(crate) fn with_kind(kind: TransportKind) -> DirectTransport {
        DirectTransport {
            kind,
            qps: Vec::new(),
            pmtu: Pmtu::DEFAULT,
            rnr_retry: RcConfig::default().rnr_retry,
            min_rnr_timer: RcConfig::default().min_rnr_timer,
            stats: TransportStats::default(),
        }
    }

    /// Set the RNR retry count and RNR timer code of SENDs (see [`RcConfig::rnr_retry`]
    /// and [`RcConfig::min_rnr_timer`]).
    pub fn set_rnr(&mut self, rnr_retry: u8, min_rnr_timer: u8) {
        self.rnr_retry = rnr_retry.min(RNR_RETRY_FOREVER);
        self.min_rnr_timer = min_rnr_timer & 0x1F;
    }

    /// Add a queue pair to `mem` (SENDs on it are refused: no receive queue).
    pub fn connect(&mut self, mem: Arc<dyn RemoteMemory>) -> QpHandle {
        self.qps.push(DirectQp {
            mem,
            recv: None,
            queue: VecDeque::new(),
            rnr_until: None,
            rnr_tries: 0,
            done: VecDeque::new(),
        });
        self.qps.len() - 1
    }

    /// Add a queue pair to `mem` whose SENDs land in the buffers of `recv`.
    pub fn connect_with_recv(&mut self, mem: Arc<dyn RemoteMemory>, recv: RecvQueue) -> QpHandle {
        let h = self.connect(mem);
        self.set_recv_queue(h, Some(recv));
        h
    }

    /// Attach (or detach) the receive queue SENDs on `qp` land in.
    pub fn set_recv_queue(&mut self, qp: QpHandle, recv: Option<RecvQueue>) {
        if let Some(q) = self.qps.get_mut(qp) {
            q.recv = recv;
        }
    }

    /// Deliver a SEND into the next buffer of `recv`; `None`: no buffer posted.
    fn deliver_send(
        recv: Option<&RecvQueue>,
        qpn: u32,
        data: &[u8],
        imm: Option<u32>,
    ) -> Option<Result<CompletionValue, CompletionError>> {
        let Some(recv) = recv else {
            return Some(Err(CompletionError::RemoteInvalidRequest));
        };
        let (wr_id, mut buf) = recv.take()?;
        let mut done = RecvCompletion {
            wr_id,
            qpn,
            remote_qpn: qpn,
            byte_len: 0,
            imm: None,
            data: Vec::new(),
            result: Err(RecvError::LocalLength),
        };
        let result = match buf.get_mut(..data.len()) {
            Some(dst) => {
                dst.copy_from_slice(data);
                buf.truncate(data.len());
                done.byte_len = data.len() as u32;
                done.imm = imm;
                done.result = Ok(());
                Ok(CompletionValue::Send)
            }
            None => Err(CompletionError::RemoteInvalidRequest),
        };
        done.data = buf;
        recv.complete(done);
        Some(result)
    }

    /// The doorbell of `n` work requests just queued on `qp`: counted, then executed.
    fn ring(&mut self, qp: QpHandle, n: usize) {
        self.stats.doorbells += 1;
        self.stats.work_requests += n as u64;
        self.drain(qp, None);
    }

    /// Execute what `qp` has queued, in order, until a SEND finds no receive buffer.
    ///
    /// `now` is read from the clock (when not given) only if an RNR timer needs it.
    fn drain(&mut self, h: QpHandle, now: Option<Instant>) {
        let now = || now.unwrap_or_else(Instant::now);
        let pmtu = self.pmtu;
        let (retry, timer) = (self.rnr_retry, self.min_rnr_timer);
        let Some(q) = self.qps.get_mut(h) else {
            return;
        };
        if q.rnr_until.is_some_and(|t| now() < t) {
            return;
        }
        q.rnr_until = None;
        while let Some((wr_id, wr)) = q.queue.pop_front() {
            let result = match &wr {
                WorkRequest::Send { data, imm, .. } => {
                    match Self::deliver_send(q.recv.as_ref(), h as u32, data, *imm) {
                        Some(r) => r,
                        None => {
                            q.rnr_tries += 1;
                            // An RNR NAK on the wire: the first packet and the NAK.
                            let cost = wire_cost(&WorkRequest::send(Vec::new()), pmtu);
                            self.stats.packets_sent += 1;
                            self.stats.packets_received += 1;
                            self.stats.bytes_received += cost.response_bytes;
                            let forever = retry == RNR_RETRY_FOREVER;
                            if forever || q.rnr_tries <= u32::from(retry) {
                                q.queue.push_front((wr_id, wr));
                                q.rnr_until = Some(now() + rnr_delay(timer));
                                return;
                            }
                            Err(CompletionError::RnrRetryExceeded)
                        }
                    }
                }
                other => Self::execute(q.mem.as_ref(), other),
            };
            q.rnr_tries = 0;
            let cost = wire_cost(&wr, pmtu);
            self.stats.packets_sent += cost.request_packets;
            self.stats.bytes_sent += cost.request_bytes;
            self.stats.packets_received += cost.response_packets;
            self.stats.bytes_received += cost.response_bytes;
            q.done.push_back(Completion {
                wr_id,
                kind: wr.kind(),
                result,
            });
        }
    }

    fn execute(
        mem: &dyn RemoteMemory,
        wr: &WorkRequest,
    ) -> Result<CompletionValue, CompletionError> {
        let map = |e: AccessError| {
            if e.is_invalid_request() {
                CompletionError::RemoteInvalidRequest
            } else {
                CompletionError::RemoteAccess
            }
        };
        match wr {
            // SENDs are delivered by `drain`, which knows the receive queue.
            WorkRequest::Send { .. } => Err(CompletionError::RemoteInvalidRequest),
            WorkRequest::Read { remote, len } => {
                if *len > MAX_READ {
                    return Err(CompletionError::RemoteInvalidRequest);
                }
                mem.check(
                    remote.rkey,
                    remote.va,
                    *len as u64,
                    AccessFlags::REMOTE_READ,
                )
                .map_err(map)?;
                let mut buf = vec![0u8; *len as usize];
                mem.read(remote.rkey, remote.va, &mut buf).map_err(map)?;
                Ok(CompletionValue::Read(buf))
            }
            WorkRequest::Write { remote, data, .. } => {
                mem.check(
                    remote.rkey,
                    remote.va,
                    data.len() as u64,
                    AccessFlags::REMOTE_WRITE,
                )
                .map_err(map)?;
                mem.write(remote.rkey, remote.va, data).map_err(map)?;
                Ok(CompletionValue::Write)
            }
            WorkRequest::CompareSwap {
                remote,
                compare,
                swap,
            } => mem
                .compare_swap(remote.rkey, remote.va, *compare, *swap)
                .map(CompletionValue::Atomic)
                .map_err(map),
            WorkRequest::FetchAdd { remote, add } => mem
                .fetch_add(remote.rkey, remote.va, *add)
                .map(CompletionValue::Atomic)
                .map_err(map),
        }
    }
}

/// Queue pair `qp` of `qps`, if its send queue has room for `n` more work requests.
fn with_room(qps: &mut [DirectQp], qp: QpHandle, n: usize) -> Result<&mut DirectQp, PostError> {
    let q = qps.get_mut(qp).ok_or(PostError::QpError)?;
    let queued = q.done.len() + q.queue.len();
    if queued + n > DIRECT_QUEUE_DEPTH {
        return Err(PostError::QueueFull(queued));
    }
    Ok(q)
}

impl Transport for DirectTransport {
    fn wire_cost(&self, _qp: QpHandle, wr: &WorkRequest) -> super::WireCost {
        wire_cost(wr, self.pmtu)
    }

    fn kind(&self) -> TransportKind {
        self.kind
    }

    fn post(&mut self, qp: QpHandle, batch: Vec<(u64, WorkRequest)>) -> Result<(), PostError> {
        let q = with_room(&mut self.qps, qp, batch.len())?;
        for (_, wr) in &batch {
            wr.validate()?;
        }
        let n = batch.len();
        q.queue.extend(batch);
        self.ring(qp, n);
        Ok(())
    }

    fn post_one(&mut self, qp: QpHandle, wr_id: u64, wr: WorkRequest) -> Result<(), PostError> {
        let q = with_room(&mut self.qps, qp, 1)?;
        wr.validate()?;
        q.queue.push_back((wr_id, wr));
        self.ring(qp, 1);
        Ok(())
    }

    fn send_queue_room(&self, qp: QpHandle) -> usize {
        self.qps.get(qp).map_or(0, |q| {
            DIRECT_QUEUE_DEPTH.saturating_sub(q.done.len() + q.queue.len())
        })
    }

    fn poll(&mut self, now: Instant, out: &mut Vec<(QpHandle, Completion)>) -> usize {
        for h in 0..self.qps.len() {
            if self.qps[h].rnr_until.is_some() {
                self.drain(h, Some(now));
            }
        }
        let mut n = 0;
        for (h, q) in self.qps.iter_mut().enumerate() {
            while let Some(c) = q.done.pop_front() {
                self.stats.completions += 1;
                if c.result.is_err() {
                    self.stats.errors += 1;
                }
                out.push((h, c));
                n += 1;
            }
        }
        n
    }

    fn wait(&mut self, until: Instant) {
        // Nothing arrives asynchronously: completions exist as soon as a batch is posted.
        // (Only a SEND waiting out an RNR timer becomes ready later.)
        let now = Instant::now();
        let until = self
            .qps
            .iter()
            .filter_map(|q| q.rnr_until)
            .fold(until, Instant::min);
        if until > now && self.qps.iter().all(|q| q.done.is_empty()) {
            std::thread::sleep(until - now);
        }
    }

    fn stats(&self) -> TransportStats {
        self.stats
    }
}
