//! The client's side of a write-based RPC request ring: which slot a request goes
//! to, when a slot may be written again, and the WRITE that puts it there.
//!
//! Request `s` (numbered from 1 on this queue pair) goes to slot `(s - 1) % slots`,
//! framed as [`dmkv_api::rpc_ring`] lays it out. The node executes a ring's requests
//! in order and clears a slot before it replies, so slot reuse waits for the reply to
//! the request `slots` numbers earlier. A request whose call gave up before its reply
//! (a timeout, a failed post) may stay in its slot unexecuted forever, which would stall
//! every later request of the ring: the writer is then given up, and the port sends
//! its requests by SEND from there on.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use dmkv_api::memnode::RpcRingInfo;
use dmkv_api::rpc_ring::encode_slot;
use verbs::wr::{RemoteAddr, WorkRequest};

use crate::error::KvError;

/// One queue pair's request ring, as its sender keeps it.
#[derive(Debug)]
pub(crate) struct RingWriter {
    ring: RpcRingInfo,
    /// The sequence number the next request takes.
    next_seq: Cell<u64>,
    /// Requests written (or about to be) whose replies have not been seen: request
    /// id → sequence number.
    outstanding: RefCell<HashMap<u64, u64>>,
    given_up: Cell<bool>,
}

impl RingWriter {
    /// The writer of `ring`, which no request was written to yet.
    pub(crate) fn new(ring: RpcRingInfo) -> RingWriter {
        RingWriter {
            ring,
            next_seq: Cell::new(1),
            outstanding: RefCell::new(HashMap::new()),
            given_up: Cell::new(false),
        }
    }

    /// Whether requests may still go through the ring.
    pub(crate) fn usable(&self) -> bool {
        !self.given_up.get() && self.ring.slots > 0
    }

    /// Stops using the ring (a request in it may never be executed).
    pub(crate) fn give_up(&self) {
        self.given_up.set(true);
    }

    /// Takes the next sequence number for request `id`.
    pub(crate) fn claim(&self, id: u64) -> u64 {
        let seq = self.next_seq.get();
        self.next_seq.set(seq + 1);
        self.outstanding.borrow_mut().insert(id, seq);
        seq
    }

    /// Whether request `seq`'s slot is free: the reply to every request `slots` or
    /// more numbers before it has been seen.
    pub(crate) fn slot_free(&self, seq: u64) -> bool {
        let slots = u64::from(self.ring.slots);
        self.outstanding
            .borrow()
            .values()
            .all(|&q| q.saturating_add(slots) > seq)
    }

    /// The reply to request `id` has arrived.
    pub(crate) fn replied(&self, id: u64) {
        self.outstanding.borrow_mut().remove(&id);
    }

    /// The WRITE placing `message` as request `seq`.
    pub(crate) fn write(&self, seq: u64, message: &[u8]) -> Result<WorkRequest, KvError> {
        let mut image = Vec::with_capacity(message.len() + 20);
        encode_slot(seq, message, &mut image)
            .map_err(|e| KvError::InvalidArgument(format!("an RPC request ring: {e}")))?;
        let slot = (seq - 1) % u64::from(self.ring.slots);
        let va = self.ring.va + slot * u64::from(self.ring.slot_bytes);
        Ok(WorkRequest::write(
            RemoteAddr::new(self.ring.rkey, va),
            image,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dmkv_api::rpc::Request;
    use dmkv_api::rpc_ring::{RingCursor, SlotState};

    fn ring() -> RpcRingInfo {
        RpcRingInfo {
            va: 0x10_0000,
            rkey: 7,
            slots: 2,
            slot_bytes: 4160,
        }
    }

    #[test]
    fn slots_are_reused_only_after_the_earlier_reply() {
        let w = RingWriter::new(ring());
        let (a, b, c) = (w.claim(10), w.claim(11), w.claim(12));
        assert_eq!((a, b, c), (1, 2, 3));
        assert!(w.slot_free(a) && w.slot_free(b));
        assert!(!w.slot_free(c), "slot 0 still holds request 1");
        w.replied(11);
        assert!(!w.slot_free(c));
        w.replied(10);
        assert!(w.slot_free(c));
        w.give_up();
        assert!(!w.usable());
    }

    #[test]
    fn the_write_is_the_slot_image_at_the_slot() {
        let w = RingWriter::new(ring());
        let message = Request::Ping.encode(5);
        for seq in 1..=3u64 {
            let WorkRequest::Write { remote, data, .. } = w.write(seq, &message).unwrap() else {
                panic!("not a WRITE");
            };
            assert_eq!(remote.rkey, 7);
            assert_eq!(remote.va, 0x10_0000 + ((seq - 1) % 2) * 4160);
            let mut cursor = RingCursor::new(1).unwrap();
            for _ in 1..seq {
                cursor.clear(&mut [], 0);
            }
            assert_eq!(
                cursor.inspect(&data),
                SlotState::Ready { len: message.len() }
            );
        }
        assert!(w.write(1, &[]).is_err());
    }
}
