//! The 8-byte latch word and the lease that keeps it from leaking.
//!
//! ```text
//!  63            48 47                                        1   0
//! ┌────────────────┬──────────────────────────────────────────┬───┐
//! │ reader count   │ owner token of the exclusive holder      │ 1 │  held exclusively
//! ├────────────────┼─────────────────────────────────────┬────┼───┤
//! │ reader count   │ generation                          │ T  │ 0 │  free or shared
//! └────────────────┴─────────────────────────────────────┴────┴───┘
//!                   47                                  2  1    0
//! ```
//!
//! A word that is not held exclusively carries a *generation* and a *torn* bit
//! (T). Both are 0 in memory nobody broke a latch of, so a fresh table's words
//! are 0. Breaking a latch stores a new random generation, which makes the stale decrement of a reader whose
//! count was broken harmless: readers release their count by a CAS that applies
//! only while the word still has the generation they acquired under
//! ([`still_counted`]), never by a blind FAA that could wrap the count of the
//! next generation. Breaking an exclusive holder also sets T: the dead writer may
//! have left part of a WRITE behind, so readers that cannot check a tuple's bytes
//! themselves report it `Corrupt` until a writer has written the whole tuple
//! again. An exclusive holder remembers the free word it latched over and stores
//! it back on release (with T cleared if it wrote the tuple).
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
//! * exclusive: CAS `free → token << 1 | 1` (free: X clear, no readers; the first
//!   try expects 0); released by CAS back to the free word (plus the reader count:
//!   readers may have bumped it while they backed off), or, for exclusive-only
//!   latches, by the last bytes of the data WRITE;
//! * shared: FAA `+2^48`; if the old value had X set the reader undoes it with
//!   FAA `−2^48` (its own increment, still counted) and retries; released by CAS
//!   `w → w − 2^48` while `w` still counts it.

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
/// The torn bit of a word not held exclusively: the last exclusive holder was
/// broken, so the tuple may hold part of its WRITE.
pub const TORN: u64 = 1 << 1;
/// The generation field of a word not held exclusively.
pub const GENERATION: u64 = ((1 << 46) - 1) << 2;

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

/// Whether `word` may be latched exclusively: not held, no readers.
pub const fn is_free(word: u64) -> bool {
    !is_exclusive(word) && readers(word) == 0
}

/// Whether `word` (not held exclusively) says the tuple may be torn.
pub const fn is_torn(word: u64) -> bool {
    !is_exclusive(word) && word & TORN != 0
}

/// The generation and torn bit of a word not held exclusively (0 for an exclusive one).
pub const fn free_part(word: u64) -> u64 {
    if is_exclusive(word) {
        0
    } else {
        word & (GENERATION | TORN)
    }
}

/// The generation field made from `random` (the breaker draws 46 random bits, so a
/// generation an earlier break stored comes back with probability 2^-46); never 0.
pub const fn generation_of(random: u64) -> u64 {
    let g = (random << 2) & GENERATION;
    if g == 0 { 1 << 2 } else { g }
}

/// What breaking the latch `word` of a dead holder leaves, with the breaker's new
/// `generation` ([`generation_of`]): for a dead exclusive holder, the reader counts
/// of bouncing readers (they undo their own increments), and the torn bit; for a
/// leaked reader count, no readers and the torn bit as it was.
pub const fn broken(word: u64, generation: u64) -> u64 {
    if is_exclusive(word) {
        (word & COUNT) | generation | TORN
    } else {
        (word & TORN) | generation
    }
}

/// The word an exclusive holder that latched over the free word `over` stores
/// back on release: the same generation, torn only if it did not write the tuple.
pub const fn released(over: u64, wrote: bool) -> u64 {
    let part = free_part(over);
    if wrote { part & !TORN } else { part }
}

/// Whether the reader whose FAA returned `acquired` (a word not held exclusively)
/// is still counted in `now`: no break came in between (same generation, no
/// exclusive holder, which could only have latched after a break) and the count
/// holds at least one reader.
pub const fn still_counted(acquired: u64, now: u64) -> bool {
    !is_exclusive(now) && (now & GENERATION) == (acquired & GENERATION) && readers(now) > 0
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
        let g = generation_of(0x1234);
        assert_eq!(broken(w2, g), (2 * READER) | g | TORN);
        assert_eq!(broken(3 * READER, g), g);
        assert_eq!(broken((3 * READER) | TORN, g), g | TORN);
        assert!(is_free(g) && is_free(g | TORN) && !is_free(g + READER) && !is_free(w));
        assert!(is_torn(g | TORN) && !is_torn(g) && !is_torn(exclusive(TORN)));
        assert_eq!(released(g | TORN, true), g);
        assert_eq!(released(g | TORN, false), g | TORN);
        assert_eq!(released(0, true), 0);
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

    /// The review's scenario: a live, slow reader's count is broken by a writer; its
    /// late release must not touch the word, whatever happened in between.
    #[test]
    fn a_broken_readers_late_release_changes_nothing() {
        // The slow reader acquired at generation 0.
        let acquired = 0u64;
        let mut word = acquired + READER;
        // A writer waited one lease and broke the count.
        word = broken(word, generation_of(77));
        assert!(!still_counted(acquired, word));
        // A new reader takes it shared: the old reader is still not counted.
        let second = word;
        word += READER;
        assert!(!still_counted(acquired, word));
        assert!(still_counted(second, word));
        // A writer latched, wrote and released over the next generation.
        let over = broken(exclusive(5), generation_of(78));
        assert!(!still_counted(acquired, exclusive(9)));
        assert!(!still_counted(acquired, released(over, true)));
        // Generations never come back to 0.
        assert_ne!(generation_of(0), 0);
        assert_ne!(generation_of(1 << 46), 0);
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
