//! The RPC worker threads and the queue of queue pairs that have requests waiting.
//!
//! The data plane pushes a queue pair's number into [`ReadyQps`] when a request
//! completed in its receive queue; a worker takes the number, drains that receive
//! queue (executing each request with the queue pair's current access scope and
//! reposting the buffer), posts each reply on the queue pair's reply requester and
//! transmits the reply packets itself on the node's soft-RoCE socket, so a reply
//! does not wait for the data plane's next wake-up. Retransmissions of replies are
//! the data plane's ([`crate::dataplane`] runs the reply timers).
//!
//! A worker executes one request at a time. A memory primitive is one memory operation
//! (one READ, WRITE, CAS or FAA); an index operation ([`super::race`]) changes memory
//! only by CASes of slot words, the last of which is its linearization point (an
//! insert's earlier tentative slot is invisible to readers). So a worker that stops
//! between taking a request and posting its reply leaves the operation either not
//! applied (at most an unconfirmed slot, cleared by clients after their lock timeout)
//! or applied entirely, never half of it; the client sees no reply and times the
//! request out.

use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use dmkv_api::rpc::{self, RPC_MAX_REQUEST, Reply, RpcStatus};
use verbs::mem::{MemoryTable, ScopedMemory};
use verbs::net::{BATCH, BatchSocket};
use verbs::rc::MAX_PACKET;
use verbs::recv::RecvCompletion;

use super::execute::{Outcome, serve_hooked};
use super::ring_poll::PollSchedule;
use super::stats::RpcStats;
use crate::metrics::Metrics;
use crate::qps::QpTable;

/// How long an idle worker sleeps before checking for shutdown.
const IDLE_WAIT: Duration = Duration::from_millis(20);

/// Queue pairs with requests waiting, in the order they were reported.
#[derive(Debug, Default)]
pub struct ReadyQps {
    queue: Mutex<VecDeque<u32>>,
    ready: Condvar,
}

impl ReadyQps {
    fn lock(&self) -> MutexGuard<'_, VecDeque<u32>> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reports that queue pair `qpn` has requests waiting (once is enough until a
    /// worker took it).
    pub fn push(&self, qpn: u32) {
        let mut q = self.lock();
        if !q.contains(&qpn) {
            q.push_back(qpn);
            drop(q);
            self.ready.notify_one();
        }
    }

    /// The next queue pair with work, waiting up to `timeout`.
    pub fn wait(&self, timeout: Duration) -> Option<u32> {
        let mut q = self.lock();
        if let Some(qpn) = q.pop_front() {
            return Some(qpn);
        }
        q = match self.ready.wait_timeout(q, timeout) {
            Ok((g, _)) => g,
            Err(p) => p.into_inner().0,
        };
        q.pop_front()
    }

    /// Queue pairs waiting for a worker.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What every worker shares.
#[derive(Debug, Clone)]
pub struct PoolShared {
    /// The queue pairs (their receive queues, scopes and reply requesters).
    pub qps: Arc<QpTable>,
    /// The registered memory.
    pub memory: Arc<MemoryTable>,
    /// The node's soft-RoCE socket (replies leave from the address requests reach).
    pub socket: Arc<BatchSocket>,
    /// Queue pairs with requests waiting.
    pub ready: Arc<ReadyQps>,
    /// The RPC counters.
    pub stats: Arc<RpcStats>,
    /// The node's counters (replies count as datagrams sent).
    pub metrics: Arc<Metrics>,
    /// Test hook: when set, the next index write that changes a slot stops right
    /// after that change and its worker thread exits without replying, as a worker
    /// that dies in the middle of a request ([`crate::MemnodeHandle::crash_next_rpc_write`]).
    pub crash: Arc<AtomicBool>,
}

/// The running workers.
#[derive(Debug)]
pub struct RpcPool {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    stats: Arc<RpcStats>,
}

impl RpcPool {
    /// Starts `workers` threads.
    pub fn spawn(workers: usize, shared: PoolShared) -> std::io::Result<RpcPool> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut pool = RpcPool {
            stop: stop.clone(),
            threads: Vec::with_capacity(workers),
            stats: shared.stats.clone(),
        };
        for i in 0..workers {
            let (stop, shared) = (stop.clone(), shared.clone());
            let t = std::thread::Builder::new()
                .name(format!("memnode-rpc-{i}"))
                .spawn(move || Worker::new(shared).run(&stop))?;
            pool.threads.push(t);
            pool.stats.set_workers(pool.threads.len());
        }
        Ok(pool)
    }

    /// Workers running.
    pub fn workers(&self) -> usize {
        self.threads.len()
    }

    /// Stops the workers after the request each is executing, and waits for them.
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            if t.join().is_err() {
                tracing::error!("an RPC worker panicked");
            }
        }
        self.stats.set_workers(0);
    }
}

impl Drop for RpcPool {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

pub(super) struct Worker {
    pub(super) shared: PoolShared,
    /// Set when the crash hook stopped this worker: it exits.
    pub(super) dead: bool,
    packets: Vec<Vec<u8>>,
    lens: Vec<(usize, SocketAddrV4)>,
    /// The request taken off a ring.
    pub(super) ring_request: Vec<u8>,
}

impl Worker {
    fn new(shared: PoolShared) -> Worker {
        Worker {
            shared,
            dead: false,
            packets: (0..BATCH).map(|_| vec![0u8; MAX_PACKET]).collect(),
            lens: Vec::with_capacity(BATCH),
            ring_request: Vec::with_capacity(RPC_MAX_REQUEST),
        }
    }

    fn run(&mut self, stop: &AtomicBool) {
        let rings = self.shared.qps.rings().cloned();
        let mut schedule = PollSchedule::new(Instant::now());
        while !stop.load(Ordering::Relaxed) && !self.dead {
            // While some queue pair owns a request ring, the wait for SENDs is the
            // ring polling schedule's; otherwise the idle wait.
            let polling = rings.as_ref().filter(|r| r.owned() > 0);
            let wait = match polling {
                Some(_) => schedule.next_wait(Instant::now()),
                None => IDLE_WAIT,
            };
            if wait.is_zero() {
                std::thread::yield_now();
            }
            if let Some(qpn) = self.shared.ready.wait(wait) {
                self.serve_qp(qpn, stop);
            }
            if let Some(rings) = polling {
                let executed = self.poll_rings(rings, stop);
                schedule.record(executed > 0, Instant::now());
            }
        }
    }

    /// Executes every request waiting on queue pair `qpn`.
    fn serve_qp(&mut self, qpn: u32, stop: &AtomicBool) {
        let (recv, scope) = {
            let qps = self.shared.qps.lock();
            let Some(entry) = qps.get(&qpn) else { return };
            let Some(rpc) = entry.rpc.as_ref() else {
                return;
            };
            (rpc.recv().clone(), entry.responder.scope().cloned())
        };
        while !stop.load(Ordering::Relaxed) {
            let Some(c) = recv.poll() else { return };
            let RecvCompletion {
                wr_id,
                data,
                result,
                ..
            } = c;
            let mut buf = data;
            if result.is_ok() {
                let Some(reply) = self.execute(qpn, &buf, scope.as_deref()) else {
                    // The hook: this worker dies holding the request (and its buffer).
                    return;
                };
                self.reply(qpn, wr_id, reply);
            } else {
                self.shared.stats.on_receive_error();
            }
            buf.clear();
            buf.resize(RPC_MAX_REQUEST, 0);
            // Fails only when the queue pair's queue is full, which reposting the
            // buffer just taken cannot make it.
            let _ = recv.post_recv(wr_id, buf);
        }
    }

    /// Executes request `message` of queue pair `qpn` seen through its `scope` (none:
    /// the whole memory) and returns the reply, counting the outcome; `None` when the
    /// crash hook stopped this worker in the middle of it (no reply).
    pub(super) fn execute(
        &mut self,
        qpn: u32,
        message: &[u8],
        scope: Option<&verbs::mem::AccessScope>,
    ) -> Option<Vec<u8>> {
        self.shared.stats.on_request();
        let memory = &*self.shared.memory;
        // A bug in execution must cost one request, not the worker (and the
        // receive buffer it holds).
        let executed = std::panic::catch_unwind(AssertUnwindSafe(|| match scope {
            Some(scope) => serve_hooked(
                message,
                &ScopedMemory::new(scope, memory, Instant::now()),
                &self.shared.crash,
            ),
            None => serve_hooked(message, memory, &self.shared.crash),
        }));
        match executed {
            Ok((_, Outcome::Crashed)) => {
                tracing::error!(qpn, "an RPC worker stopped in the middle of a request");
                self.shared.stats.on_failed();
                self.dead = true;
                None
            }
            Ok((reply, outcome)) => {
                match outcome {
                    Outcome::Done | Outcome::Crashed => {}
                    Outcome::Malformed => self.shared.stats.on_malformed(),
                    Outcome::Refused => self.shared.stats.on_refused(),
                }
                Some(reply)
            }
            Err(_) => {
                self.shared.stats.on_failed();
                tracing::error!(qpn, "executing an RPC panicked; it was answered as failed");
                Some(Reply::error(rpc::request_id(message), RpcStatus::Failed).encode())
            }
        }
    }

    /// Posts `reply` on queue pair `qpn` and transmits what its requester has ready.
    pub(super) fn reply(&mut self, qpn: u32, wr_id: u64, reply: Vec<u8>) {
        let now = Instant::now();
        {
            let mut qps = self.shared.qps.lock();
            let Some(entry) = qps.get_mut(&qpn) else {
                self.shared.stats.on_reply_dropped();
                return;
            };
            let to = entry.response_addr;
            let Some(rpc) = entry.rpc.as_mut() else {
                self.shared.stats.on_reply_dropped();
                return;
            };
            if rpc.post_reply(wr_id, reply).is_err() {
                self.shared.stats.on_reply_dropped();
                return;
            }
            self.shared.stats.on_reply();
            while self.lens.len() < self.packets.len() {
                let Some(buf) = self.packets.get_mut(self.lens.len()) else {
                    break;
                };
                match rpc.poll_transmit(now, buf) {
                    Some(n) => self.lens.push((n, to)),
                    None => break,
                }
            }
        }
        self.flush();
    }

    fn flush(&mut self) {
        if self.lens.is_empty() {
            return;
        }
        let unused = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0);
        let datagrams: Vec<(&[u8], SocketAddrV4)> = self
            .lens
            .iter()
            .zip(&self.packets)
            .map(|(&(n, to), b)| (b.get(..n).unwrap_or_default(), to))
            .filter(|(_, to)| *to != unused)
            .collect();
        let count = datagrams.len() as u64;
        let bytes: u64 = datagrams.iter().map(|(b, _)| b.len() as u64).sum();
        match self.shared.socket.send_batch(&datagrams) {
            Ok(_) => self.shared.metrics.on_sent(count, bytes),
            Err(e) => {
                self.shared.metrics.on_send_error(count);
                tracing::warn!(error = %e, "sending RPC replies failed");
            }
        }
        self.lens.clear();
    }
}
