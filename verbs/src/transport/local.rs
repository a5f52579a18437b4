//! The `local` transport: verbs applied directly to memory this process can address.
//!
//! Used for the embedded mode and unit tests (memory in the same process) and, through
//! [`super::shm`], for memory in a shared-memory file. There is no memory-node CPU on
//! the path: a posted batch is executed in order at the doorbell, with exactly the
//! memory semantics of the RDMA responder (same [`RemoteMemory`] implementation), and
//! its completions are returned by the next poll.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use super::{QpHandle, Transport, TransportKind, TransportStats, wire_cost};
use crate::mem::{AccessError, AccessFlags, RemoteMemory};
use crate::rc::{MAX_READ, Pmtu};
use crate::wr::{Completion, CompletionError, CompletionValue, PostError, WorkRequest};

/// Send queue depth of a direct queue pair.
pub const DIRECT_QUEUE_DEPTH: usize = 1024;

struct DirectQp {
    mem: Arc<dyn RemoteMemory>,
    done: VecDeque<Completion>,
}

/// A transport whose queue pairs apply verbs directly to a [`RemoteMemory`].
pub struct DirectTransport {
    kind: TransportKind,
    qps: Vec<DirectQp>,
    pmtu: Pmtu,
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
            stats: TransportStats::default(),
        }
    }

    /// Add a queue pair to `mem`.
    pub fn connect(&mut self, mem: Arc<dyn RemoteMemory>) -> QpHandle {
        self.qps.push(DirectQp {
            mem,
            done: VecDeque::new(),
        });
        self.qps.len() - 1
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

impl Transport for DirectTransport {
    fn wire_cost(&self, _qp: QpHandle, wr: &WorkRequest) -> super::WireCost {
        wire_cost(wr, self.pmtu)
    }

    fn kind(&self) -> TransportKind {
        self.kind
    }

    fn post(&mut self, qp: QpHandle, batch: Vec<(u64, WorkRequest)>) -> Result<(), PostError> {
        let pmtu = self.pmtu;
        let Some(q) = self.qps.get_mut(qp) else {
            return Err(PostError::QpError);
        };
        if q.done.len() + batch.len() > DIRECT_QUEUE_DEPTH {
            return Err(PostError::QueueFull(q.done.len()));
        }
        for (_, wr) in &batch {
            wr.validate()?;
        }
        self.stats.doorbells += 1;
        for (wr_id, wr) in batch {
            let cost = wire_cost(&wr, pmtu);
            self.stats.work_requests += 1;
            self.stats.packets_sent += cost.request_packets;
            self.stats.bytes_sent += cost.request_bytes;
            self.stats.packets_received += cost.response_packets;
            self.stats.bytes_received += cost.response_bytes;
            let result = Self::execute(q.mem.as_ref(), &wr);
            q.done.push_back(Completion {
                wr_id,
                kind: wr.kind(),
                result,
            });
        }
        Ok(())
    }

    fn send_queue_room(&self, qp: QpHandle) -> usize {
        self.qps
            .get(qp)
            .map_or(0, |q| DIRECT_QUEUE_DEPTH.saturating_sub(q.done.len()))
    }

    fn poll(&mut self, _now: Instant, out: &mut Vec<(QpHandle, Completion)>) -> usize {
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
        let now = Instant::now();
        if until > now && self.qps.iter().all(|q| q.done.is_empty()) {
            std::thread::sleep(until - now);
        }
    }

    fn stats(&self) -> TransportStats {
        self.stats
    }
}
