//! The 8-byte latch word of in-place tables (the lease that keeps it from leaking is
//! the clients' `kvstore::inplace::latch`).
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
//!
//! The memory node's in-place operations ([`crate::rpc_inplace`]) and the clients
//! (`kvstore::inplace::latch`, which re-exports these) use this one layout, so both run
//! the same protocol.

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
