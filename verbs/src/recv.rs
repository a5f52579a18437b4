//! The receiving side of two-sided verbs: a receive queue of posted buffers and the
//! completions of the SENDs that landed in them.
//!
//! A [`RecvQueue`] belongs to whoever consumes messages (an RPC worker, a test, an
//! application thread). Its owner posts buffers with [`RecvQueue::post_recv`] and takes
//! completions with [`RecvQueue::poll`] or [`RecvQueue::wait`]; the responder side of one
//! or more queue pairs (the sans-IO [`crate::rc::Responder`], or a transport acting as
//! one) takes a buffer for every SEND that starts and completes it when the message's
//! last packet arrives. Buffers are consumed in the order they were posted.
//!
//! The queue is a cloneable, thread-safe handle: the responder may run on a data-plane
//! thread while the owner posts and polls from others. Attached to several queue pairs
//! it acts as a shared receive queue (IBA's SRQ): every completion names the queue
//! pair the message arrived on ([`RecvCompletion::qpn`]) so that an answer can be sent
//! back on it.
//!
//! When a SEND starts and no buffer is posted, the responder answers with an RNR NAK
//! (receiver not ready) and the requester tries again after the RNR timer, as many
//! times as its RNR retry count allows ([`crate::rc::RcConfig::rnr_retry`]).

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::wr::PostError;

/// Why a receive buffer completed without a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RecvError {
    /// The message was longer than the buffer (IBA local length error); the sender's
    /// SEND completes with a remote invalid request error.
    #[error("local length error: the message is longer than the receive buffer")]
    LocalLength,
    /// The message was refused part-way through (a malformed packet sequence); the
    /// sender's SEND completes with a remote invalid request error.
    #[error("the message was refused part-way through")]
    Aborted,
    /// The receive queue was flushed (its queue pair went to the error state or was
    /// destroyed) before a message arrived.
    #[error("receive buffer flushed")]
    Flushed,
}

/// A receive buffer that a message landed in (or that failed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecvCompletion {
    /// The owner's identifier, as given to [`RecvQueue::post_recv`].
    pub wr_id: u64,
    /// The queue pair the message arrived on (ours).
    pub qpn: u32,
    /// The sender's queue pair.
    pub remote_qpn: u32,
    /// Bytes of the message (IBA's byte length); 0 on error.
    pub byte_len: u32,
    /// The immediate data of a SEND with Immediate.
    pub imm: Option<u32>,
    /// The buffer: on success exactly the message (`data.len() == byte_len`, the
    /// posted capacity kept for reuse); on error the buffer as it was posted.
    pub data: Vec<u8>,
    /// Whether a message was delivered.
    pub result: Result<(), RecvError>,
}

/// Counters of one receive queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecvStats {
    /// Buffers posted.
    pub posted: u64,
    /// Messages delivered.
    pub delivered: u64,
    /// Buffers completed with an error.
    pub failed: u64,
    /// Times a SEND found no buffer posted (each drew an RNR NAK).
    pub not_ready: u64,
}

#[derive(Debug)]
struct Inner {
    depth: usize,
    posted: VecDeque<(u64, Vec<u8>)>,
    done: VecDeque<RecvCompletion>,
    stats: RecvStats,
}

#[derive(Debug)]
struct Shared {
    inner: Mutex<Inner>,
    ready: Condvar,
}

/// A receive queue: posted buffers in, message completions out (see the module docs).
#[derive(Debug, Clone)]
pub struct RecvQueue {
    shared: Arc<Shared>,
}

impl RecvQueue {
    /// An empty receive queue holding at most `depth` posted buffers.
    pub fn new(depth: usize) -> RecvQueue {
        RecvQueue {
            shared: Arc::new(Shared {
                inner: Mutex::new(Inner {
                    depth: depth.max(1),
                    posted: VecDeque::new(),
                    done: VecDeque::new(),
                    stats: RecvStats::default(),
                }),
                ready: Condvar::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // The state stays consistent across a panic elsewhere (every update is one
        // push or pop), so a poisoned lock is still usable.
        self.shared
            .inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Post a receive buffer: the next SEND that starts lands in it, up to
    /// `buffer.len()` bytes (a longer message fails with [`RecvError::LocalLength`]).
    pub fn post_recv(&self, wr_id: u64, buffer: Vec<u8>) -> Result<(), PostError> {
        let mut inner = self.lock();
        if inner.posted.len() >= inner.depth {
            return Err(PostError::QueueFull(inner.posted.len()));
        }
        inner.posted.push_back((wr_id, buffer));
        inner.stats.posted += 1;
        Ok(())
    }

    /// Buffers posted and not yet taken by a message.
    pub fn posted(&self) -> usize {
        self.lock().posted.len()
    }

    /// Completions waiting to be polled.
    pub fn ready(&self) -> usize {
        self.lock().done.len()
    }

    /// Counters.
    pub fn stats(&self) -> RecvStats {
        self.lock().stats
    }

    /// The next completion, in the order messages finished.
    pub fn poll(&self) -> Option<RecvCompletion> {
        self.lock().done.pop_front()
    }

    /// The next completion, waiting up to `timeout` for one.
    pub fn wait(&self, timeout: Duration) -> Option<RecvCompletion> {
        let deadline = Instant::now() + timeout;
        let mut inner = self.lock();
        loop {
            if let Some(c) = inner.done.pop_front() {
                return Some(c);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            inner = match self.shared.ready.wait_timeout(inner, left) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    /// Complete every posted buffer as [`RecvError::Flushed`] (the queue's queue
    /// pairs are gone): the owner gets its buffers back.
    pub fn flush(&self) {
        let mut inner = self.lock();
        while let Some((wr_id, data)) = inner.posted.pop_front() {
            inner.stats.failed += 1;
            inner.done.push_back(RecvCompletion {
                wr_id,
                qpn: 0,
                remote_qpn: 0,
                byte_len: 0,
                imm: None,
                data,
                result: Err(RecvError::Flushed),
            });
        }
        drop(inner);
        self.shared.ready.notify_all();
    }

    /// Take the oldest posted buffer for a message that starts (`None`: receiver not
    /// ready, counted).
    pub fn take(&self) -> Option<(u64, Vec<u8>)> {
        let mut inner = self.lock();
        let next = inner.posted.pop_front();
        if next.is_none() {
            inner.stats.not_ready += 1;
        }
        next
    }

    /// Take the oldest posted buffer without counting an RNR event (for a transport
    /// that hands buffers to a NIC ahead of any message).
    pub fn pop_posted(&self) -> Option<(u64, Vec<u8>)> {
        self.lock().posted.pop_front()
    }

    /// Hand a finished buffer to the owner.
    pub fn complete(&self, completion: RecvCompletion) {
        let mut inner = self.lock();
        if completion.result.is_ok() {
            inner.stats.delivered += 1;
        } else {
            inner.stats.failed += 1;
        }
        inner.done.push_back(completion);
        drop(inner);
        self.shared.ready.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(wr_id: u64, data: Vec<u8>) -> RecvCompletion {
        RecvCompletion {
            wr_id,
            qpn: 1,
            remote_qpn: 2,
            byte_len: data.len() as u32,
            imm: None,
            data,
            result: Ok(()),
        }
    }

    #[test]
    fn buffers_are_taken_in_posting_order_up_to_the_depth() {
        let q = RecvQueue::new(2);
        q.post_recv(10, vec![0; 8]).unwrap();
        q.post_recv(11, vec![0; 16]).unwrap();
        assert_eq!(q.post_recv(12, vec![0; 4]), Err(PostError::QueueFull(2)));
        assert_eq!(q.take().map(|(id, b)| (id, b.len())), Some((10, 8)));
        assert_eq!(q.take().map(|(id, b)| (id, b.len())), Some((11, 16)));
        assert_eq!(q.take(), None);
        assert_eq!(q.stats().not_ready, 1);
        assert_eq!(q.stats().posted, 2);
    }

    #[test]
    fn completions_reach_a_waiting_owner_on_another_thread() {
        let q = RecvQueue::new(4);
        let waiter = {
            let q = q.clone();
            std::thread::spawn(move || q.wait(Duration::from_secs(10)))
        };
        std::thread::sleep(Duration::from_millis(5));
        q.complete(done(7, b"hi".to_vec()));
        let got = waiter.join().unwrap().expect("a completion");
        assert_eq!((got.wr_id, got.data.as_slice()), (7, &b"hi"[..]));
        assert_eq!(q.wait(Duration::from_millis(1)), None);
        assert_eq!(q.stats().delivered, 1);
    }

    #[test]
    fn flushing_returns_every_posted_buffer() {
        let q = RecvQueue::new(4);
        q.post_recv(1, vec![9; 3]).unwrap();
        q.post_recv(2, vec![8; 5]).unwrap();
        q.flush();
        let a = q.poll().unwrap();
        let b = q.poll().unwrap();
        assert_eq!(
            (a.wr_id, a.result, a.data),
            (1, Err(RecvError::Flushed), vec![9; 3])
        );
        assert_eq!((b.wr_id, b.data.len()), (2, 5));
        assert_eq!(q.posted(), 0);
        assert_eq!(q.stats().failed, 2);
    }
}
