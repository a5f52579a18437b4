//! The slot layout of a write-based RPC request ring, and the reader's cursor.
//!
//! A request ring is a run of equal slots in memory-node memory, written by exactly
//! one client queue pair with RDMA WRITEs and polled by the node's workers. The
//! request inside a slot is framed exactly as a SEND-carried one ([`crate::rpc`]);
//! the slot wraps it in a head and a tail, both carrying the request's sequence
//! number, big-endian:
//!
//! ```text
//! sequence u64 | request length u32 | request (length bytes) | sequence u64
//! ```
//!
//! Sequence numbers start at 1 and request `s` lives in slot `(s - 1) % slots`, so the
//! reader knows which slot to look at and which number to expect there. The whole
//! image is one WRITE, whose bytes land in ascending address order: once the tail
//! holds the expected number, every byte before it has landed. The reader takes a
//! slot only when the head and the tail both hold the number it expects and the
//! length is a possible request length; a slot still being written, or written by a
//! duplicated or late WRITE of an earlier lap (whose number is smaller), is left
//! alone. After executing a request the reader clears the bytes it used
//! ([`RingCursor::clear`]), so a later lap never reads a stale length as its own.
//!
//! The sender must not reuse a slot before the reply to its previous request has
//! come back (at most `slots` requests outstanding per ring).
//!
//! What this does not guard against: a ring's own writer placing, inside a request's
//! data, a word equal to a future sequence number at exactly the place a later,
//! half-landed request's stale length points to. Only the ring's own queue pair can
//! write the ring, so such a request can only disturb that queue pair's own requests.

use crate::rpc::{RPC_HEADER_LEN, RPC_MAX_REQUEST};

/// Bytes a slot adds around a request: head sequence, length, tail sequence.
pub const RING_SLOT_OVERHEAD: usize = 8 + 4 + 8;

/// Bytes of one slot: the largest request plus its head and tail, rounded up to a
/// 64-byte line.
pub const RPC_RING_SLOT_BYTES: usize = (RPC_MAX_REQUEST + RING_SLOT_OVERHEAD).div_ceil(64) * 64;

const _: () = assert!(RPC_RING_SLOT_BYTES >= RPC_MAX_REQUEST + RING_SLOT_OVERHEAD);
const _: () = assert!(RPC_RING_SLOT_BYTES.is_multiple_of(64));

/// Why a request cannot be placed in a slot.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RingError {
    /// The request is shorter than a request header or longer than the largest request.
    #[error("request of {0} bytes does not fit a ring slot")]
    BadLength(usize),
    /// Sequence number 0 is never used (it marks a cleared slot).
    #[error("sequence number 0 is not a request's")]
    ZeroSequence,
    /// A ring has at least one slot.
    #[error("a ring needs at least one slot")]
    NoSlots,
}

/// The slot (0-based) that request `seq` (1-based) occupies in a ring of `slots` slots.
pub fn slot_index(seq: u64, slots: u32) -> Result<u32, RingError> {
    if slots == 0 {
        return Err(RingError::NoSlots);
    }
    if seq == 0 {
        return Err(RingError::ZeroSequence);
    }
    // The remainder is below `slots`, so it fits a u32.
    Ok(((seq - 1) % u64::from(slots)) as u32)
}

/// Appends to `out` the bytes one WRITE places at the start of request `seq`'s slot.
pub fn encode_slot(seq: u64, request: &[u8], out: &mut Vec<u8>) -> Result<(), RingError> {
    if seq == 0 {
        return Err(RingError::ZeroSequence);
    }
    let len = request.len();
    if !(RPC_HEADER_LEN..=RPC_MAX_REQUEST).contains(&len) {
        return Err(RingError::BadLength(len));
    }
    out.reserve(len + RING_SLOT_OVERHEAD);
    out.extend_from_slice(&seq.to_be_bytes());
    // `len` is at most RPC_MAX_REQUEST, far below u32::MAX.
    out.extend_from_slice(&(len as u32).to_be_bytes());
    out.extend_from_slice(request);
    out.extend_from_slice(&seq.to_be_bytes());
    Ok(())
}

/// What the reader finds in the slot it expects the next request in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotState {
    /// No complete request with the expected number (yet).
    Pending,
    /// The request with the expected number is complete at
    /// `slot[RING_REQUEST_OFFSET..RING_REQUEST_OFFSET + len]`.
    Ready {
        /// Its length in bytes.
        len: usize,
    },
}

/// Offset of the request inside a slot.
pub const RING_REQUEST_OFFSET: usize = 8 + 4;

/// The reader's position in one ring: which request it expects next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RingCursor {
    slots: u32,
    next_seq: u64,
}

impl RingCursor {
    /// A cursor at the start of a fresh (zeroed) ring of `slots` slots.
    pub fn new(slots: u32) -> Result<RingCursor, RingError> {
        if slots == 0 {
            return Err(RingError::NoSlots);
        }
        Ok(RingCursor { slots, next_seq: 1 })
    }

    /// The sequence number of the request expected next.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The slot the request expected next occupies.
    pub fn next_slot(&self) -> u32 {
        // next_seq starts at 1 and only grows; slots is non-zero.
        ((self.next_seq - 1) % u64::from(self.slots)) as u32
    }

    /// Looks at `slot`, the bytes of [`RingCursor::next_slot`], for the expected request.
    pub fn inspect(&self, slot: &[u8]) -> SlotState {
        let expected = self.next_seq.to_be_bytes();
        let Some(head) = slot.get(..8) else {
            return SlotState::Pending;
        };
        if head != expected {
            return SlotState::Pending;
        }
        let Some(len_bytes) = slot.get(8..RING_REQUEST_OFFSET) else {
            return SlotState::Pending;
        };
        let mut len_word = [0u8; 4];
        len_word.copy_from_slice(len_bytes);
        let len = u32::from_be_bytes(len_word) as usize;
        if !(RPC_HEADER_LEN..=RPC_MAX_REQUEST).contains(&len) {
            return SlotState::Pending;
        }
        let tail_at = RING_REQUEST_OFFSET + len;
        match slot.get(tail_at..tail_at + 8) {
            Some(tail) if tail == expected => SlotState::Ready { len },
            _ => SlotState::Pending,
        }
    }

    /// Marks the expected request executed: clears the `len`-byte request's slot
    /// image at the start of `slot` and expects the next number.
    pub fn clear(&mut self, slot: &mut [u8], len: usize) {
        let used = (len + RING_SLOT_OVERHEAD).min(slot.len());
        slot[..used].fill(0);
        self.next_seq += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(tag: u8, len: usize) -> Vec<u8> {
        let mut r = vec![tag; len];
        r[0] = crate::rpc::RPC_VERSION;
        r
    }

    fn image(seq: u64, req: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        encode_slot(seq, req, &mut out).unwrap();
        out
    }

    #[test]
    fn slot_holds_a_largest_request() {
        let img = image(1, &request(7, RPC_MAX_REQUEST));
        assert!(img.len() <= RPC_RING_SLOT_BYTES);
    }

    #[test]
    fn bad_lengths_and_numbers_are_refused() {
        let mut out = Vec::new();
        assert_eq!(
            encode_slot(1, &[0; RPC_HEADER_LEN - 1], &mut out),
            Err(RingError::BadLength(RPC_HEADER_LEN - 1))
        );
        assert_eq!(
            encode_slot(1, &vec![0; RPC_MAX_REQUEST + 1], &mut out),
            Err(RingError::BadLength(RPC_MAX_REQUEST + 1))
        );
        assert_eq!(
            encode_slot(0, &[0; RPC_HEADER_LEN], &mut out),
            Err(RingError::ZeroSequence)
        );
        assert!(out.is_empty());
        assert_eq!(RingCursor::new(0), Err(RingError::NoSlots));
        assert_eq!(slot_index(1, 0), Err(RingError::NoSlots));
        assert_eq!(slot_index(0, 4), Err(RingError::ZeroSequence));
    }

    #[test]
    fn a_complete_request_is_ready_and_read_back() {
        let cursor = RingCursor::new(4).unwrap();
        let req = request(9, 40);
        let mut slot = vec![0u8; RPC_RING_SLOT_BYTES];
        let img = image(1, &req);
        slot[..img.len()].copy_from_slice(&img);
        assert_eq!(cursor.inspect(&slot), SlotState::Ready { len: 40 });
        assert_eq!(
            &slot[RING_REQUEST_OFFSET..RING_REQUEST_OFFSET + 40],
            &req[..]
        );
    }

    /// Every prefix of a WRITE that has not reached its tail is ignored, over a
    /// cleared slot and over a slot whose previous lap left a longer request behind
    /// (as a late duplicate of that lap would).
    #[test]
    fn half_written_slots_are_never_ready() {
        let slots = 2;
        let mut cursor = RingCursor::new(slots).unwrap();
        let mut slot = vec![0u8; RPC_RING_SLOT_BYTES];
        // Lap 1: request 1 in slot 0, executed and cleared.
        let first = image(1, &request(0xAB, 300));
        slot[..first.len()].copy_from_slice(&first);
        let SlotState::Ready { len } = cursor.inspect(&slot) else {
            panic!("request 1 not ready");
        };
        cursor.clear(&mut slot, len);
        // Request 2 lives in the other slot; pretend it ran.
        cursor.next_seq += 1;
        assert_eq!(cursor.next_slot(), 0);
        // A late duplicate of request 1 lands after the clear.
        slot[..first.len()].copy_from_slice(&first);
        assert_eq!(cursor.inspect(&slot), SlotState::Pending);
        // Request 3 (shorter) lands byte by byte, over the duplicate and over zeros.
        let third = image(3, &request(0x3C, 20));
        for base in [slot.clone(), vec![0u8; RPC_RING_SLOT_BYTES]] {
            for landed in 0..third.len() {
                let mut s = base.clone();
                s[..landed].copy_from_slice(&third[..landed]);
                assert_eq!(cursor.inspect(&s), SlotState::Pending, "{landed} bytes");
            }
            let mut s = base.clone();
            s[..third.len()].copy_from_slice(&third);
            assert_eq!(cursor.inspect(&s), SlotState::Ready { len: 20 });
        }
    }

    #[test]
    fn an_executed_request_is_not_taken_again() {
        let mut cursor = RingCursor::new(1).unwrap();
        let mut slot = vec![0u8; RPC_RING_SLOT_BYTES];
        let img = image(1, &request(1, 30));
        slot[..img.len()].copy_from_slice(&img);
        assert_eq!(cursor.inspect(&slot), SlotState::Ready { len: 30 });
        cursor.clear(&mut slot, 30);
        assert!(slot.iter().all(|b| *b == 0));
        // The same WRITE again (a retransmission) is not request 2.
        slot[..img.len()].copy_from_slice(&img);
        assert_eq!(cursor.inspect(&slot), SlotState::Pending);
        assert_eq!(cursor.next_seq(), 2);
    }

    #[test]
    fn requests_wrap_around_the_ring_in_order() {
        let slots = 3u32;
        let mut cursor = RingCursor::new(slots).unwrap();
        let mut ring = vec![vec![0u8; RPC_RING_SLOT_BYTES]; slots as usize];
        let mut executed = Vec::new();
        for seq in 1..=10u64 {
            let idx = slot_index(seq, slots).unwrap() as usize;
            assert_eq!(idx as u32, cursor.next_slot());
            let req = request(seq as u8, RPC_HEADER_LEN + seq as usize);
            let img = image(seq, &req);
            ring[idx][..img.len()].copy_from_slice(&img);
            // A slot further ahead is not looked at out of order.
            let SlotState::Ready { len } = cursor.inspect(&ring[idx]) else {
                panic!("request {seq} not ready");
            };
            executed.push(ring[idx][RING_REQUEST_OFFSET..RING_REQUEST_OFFSET + len].to_vec());
            cursor.clear(&mut ring[idx], len);
            assert_eq!(req, executed[executed.len() - 1]);
        }
        assert_eq!(executed.len(), 10);
        assert_eq!(cursor.next_seq(), 11);
    }

    #[test]
    fn a_request_written_ahead_of_its_turn_waits() {
        let cursor = RingCursor::new(4).unwrap();
        let mut slot = vec![0u8; RPC_RING_SLOT_BYTES];
        // Request 5 (slot 0's second lap) while request 1 is expected there.
        let img = image(5, &request(5, 16));
        slot[..img.len()].copy_from_slice(&img);
        assert_eq!(cursor.inspect(&slot), SlotState::Pending);
    }

    #[test]
    fn short_buffers_are_pending_not_a_panic() {
        let cursor = RingCursor::new(1).unwrap();
        let img = image(1, &request(1, 16));
        for cut in 0..img.len() {
            assert_eq!(cursor.inspect(&img[..cut]), SlotState::Pending);
        }
        assert_eq!(cursor.inspect(&img), SlotState::Ready { len: 16 });
    }
}
