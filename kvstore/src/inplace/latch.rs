//! The 8-byte latch word and the lease that keeps it from leaking.
//!
//! ```text
//!  63            48 47                                        1   0
//! ┌────────────────┬──────────────────────────────────────────┬───┐
//! │ reader count   │ owner token of the exclusive holder      │ X │
//! └────────────────┴──────────────────────────────────────────┴───┘
//! ```
//!
//! The owner token is a client id (31 bits) and a sequence number of that client's
//! acquisitions (16 bits, [`token`]): every acquisition stores a word no earlier
//! acquisition of the same client stored recently. The lease relies on it: a
//! waiter breaks a latch whose holder part stays unchanged for the lease, and a
//! live client that re-acquires the latch right after releasing it (another task
//! of the same session, or its next operation on the same queue pair, which
//! executes right behind the asynchronous unlatch) must change the word, or a
//! waiter that never happens to see the latch free takes it for dead and breaks
//! it while it is held.
//!
//! * exclusive: CAS `0 → token << 1 | 1`; released by CAS back to the reader
//!   count alone (readers may have bumped the count while they backed off), or,
//!   for exclusive-only latches, by the last bytes of the data WRITE;
//! * shared: FAA `+2^48`; if the old value had X set the reader undoes it with
//!   FAA `−2^48` and retries; released by FAA `−2^48`. The count is a wrapping
//!   16-bit field at the top, so a decrement can never borrow into the owner.

use std::time::{Duration, Instant};

/// The exclusive bit.
pub const X: u64 = 1;
/// One shared reader.
pub const READER: u64 = 1 << 48;
/// The reader-count field.
pub const COUNT: u64 = 0xFFFF << 48;
/// The exclusive bit and owner token.
pub const HOLDER: u64 = !COUNT;
/// Largest owner token (47 bits).
pub const MAX_OWNER: u64 = (1 << 47) - 1;
/// Bits of an owner token that number one client's acquisitions.
pub const SEQ_BITS: u32 = 16;
/// Largest client id of an owner token (31 bits).
pub const MAX_CLIENT: u64 = MAX_OWNER >> SEQ_BITS;

/// The owner token of acquisition `seq` (taken modulo 2^16) by client `client`
/// (1 ..= [`MAX_CLIENT`]).
pub const fn token(client: u64, seq: u64) -> u64 {
    (client & MAX_CLIENT) << SEQ_BITS | (seq & ((1 << SEQ_BITS) - 1))
}

/// The client id of the exclusive holder in `word` (meaningful when
/// [`is_exclusive`]).
pub const fn client(word: u64) -> u64 {
    (word & HOLDER) >> (1 + SEQ_BITS)
}

/// The word an exclusive holder with `owner` (1 ..= [`MAX_OWNER`]) stores.
pub const fn exclusive(owner: u64) -> u64 {
    (owner & MAX_OWNER) << 1 | X
}

/// Whether `word` is held exclusively.
pub const fn is_exclusive(word: u64) -> bool {
    word & X != 0
}

/// Shared readers counted in `word`.
pub const fn readers(word: u64) -> u64 {
    word >> 48
}

/// What breaking the latch `word` of a dead holder leaves: the exclusive part is
/// cleared (live readers keep their counts); a leaked reader count is cleared.
pub const fn broken(word: u64) -> u64 {
    if is_exclusive(word) { word & COUNT } else { 0 }
}

/// Watches one latch word across retries: reports when it has stayed unchanged
/// (its holder part, when held exclusively; all of it otherwise) for the lease.
#[derive(Debug, Default)]
pub struct LeaseWatch {
    seen: Option<(u64, Instant)>,
}

impl LeaseWatch {
    /// Note `word` was observed; true if it should now be broken.
    pub fn expired(&mut self, word: u64, lease: Duration) -> bool {
        if word == 0 {
            self.seen = None;
            return false;
        }
        let key = if is_exclusive(word) {
            word & HOLDER
        } else {
            word
        };
        let now = Instant::now();
        match self.seen {
            Some((k, at)) if k == key => now.duration_since(at) >= lease,
            _ => {
                self.seen = Some((key, now));
                false
            }
        }
    }

    /// Forget the watched value (after breaking it or acquiring).
    pub fn reset(&mut self) {
        self.seen = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding() {
        let w = exclusive(5);
        assert!(is_exclusive(w));
        assert_eq!(readers(w), 0);
        let w2 = w.wrapping_add(2 * READER);
        assert_eq!(readers(w2), 2);
        assert_eq!(w2 & HOLDER, w);
        assert_eq!(broken(w2), 2 * READER);
        assert_eq!(broken(3 * READER), 0);
        // A decrement of an empty count wraps within the count field.
        let z = w.wrapping_sub(READER);
        assert_eq!(z & HOLDER, w);
        assert_eq!(exclusive(MAX_OWNER + 2) & COUNT, 0);
    }

    #[test]
    fn tokens() {
        let a = exclusive(token(MAX_CLIENT, 7));
        let b = exclusive(token(MAX_CLIENT, 8));
        assert_ne!(a & HOLDER, b & HOLDER);
        assert_eq!((client(a), client(b)), (MAX_CLIENT, MAX_CLIENT));
        assert_eq!(client(exclusive(token(3, 1 << 16))), 3);
        assert_eq!(token(3, 1 << 16), token(3, 0));
        assert_eq!(client(a + 5 * READER), MAX_CLIENT);
        assert_eq!(a & COUNT, 0);
    }

    #[test]
    fn lease_watch() {
        let mut l = LeaseWatch::default();
        let w = exclusive(9);
        assert!(!l.expired(w, Duration::ZERO));
        // Readers bouncing the count do not renew an exclusive holder's lease.
        assert!(l.expired(w + READER, Duration::ZERO));
        assert!(!l.expired(exclusive(10), Duration::ZERO));
        assert!(!l.expired(0, Duration::ZERO));
        assert!(!l.expired(READER, Duration::from_secs(60)));
        assert!(!l.expired(READER, Duration::from_secs(60)));
    }
}
