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

/// The latch word's layout and its pure functions, shared with the memory node's
/// in-place operations ([`dmkv_api::latch_word`]).
pub use dmkv_api::latch_word::{
    COUNT, GENERATION, HOLDER, MAX_CLIENT, MAX_OWNER, READER, SEQ_BITS, TORN, X, broken, client,
    exclusive, free_part, generation_of, is_exclusive, is_free, is_torn, readers, released,
    still_counted, token,
};

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
