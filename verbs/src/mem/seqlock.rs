//! Per-line sequence locks: what makes each aligned 64-byte line read and
//! written atomically.
//!
//! Every line of a region has one version word (kept in the same mapping as
//! the data, so the protocol works across processes that share a region
//! file):
//!
//! * **even** version — the line is stable;
//! * **odd** version — a writer owns the line.
//!
//! A writer (a WRITE touching the line, or a CAS / FAA on one of its words)
//! acquires the line by CAS-ing the version from even `v` to `v + 1`, stores
//! its words, and releases by storing `v + 2`. Writers of one line are thus
//! serialized, and an atomic never interleaves with a partial WRITE of the
//! same word.
//!
//! A reader loads the version (retrying while it is odd), loads the words,
//! and re-loads the version; if it changed, it retries. The memory orderings
//! follow Boehm, "Can Seqlocks Get Along with Programming Language Memory
//! Models?" (MSPC 2012): relaxed data accesses bracketed by acquire/release
//! fences. All accesses are atomics, so there is no data race even while a
//! reader observes a line that is being written; it just retries.
//!
//! If a process dies while it owns a line (between acquire and release), the
//! line stays odd and every later access to it spins forever; the region
//! file must then be recreated. Nothing in this crate can die there: the
//! critical sections only load and store words.

use std::sync::atomic::{AtomicU64, Ordering, fence};

/// Spins before the waiting thread starts yielding its time slice (the
/// owner may be preempted on a machine with few cores).
const SPINS_BEFORE_YIELD: u32 = 64;

/// Waits a little; spins first, then yields.
#[inline]
pub(crate) fn backoff(spins: &mut u32) {
    if *spins < SPINS_BEFORE_YIELD {
        *spins += 1;
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

/// Exclusive ownership of one line; releases it (even version) on drop.
pub(crate) struct LineGuard<'a> {
    version: &'a AtomicU64,
    acquired: u64,
}

/// Acquires the line whose version word is `version`.
#[inline]
pub(crate) fn lock(version: &AtomicU64) -> LineGuard<'_> {
    let mut spins = 0;
    loop {
        let v = version.load(Ordering::Relaxed);
        if v & 1 == 0
            && version
                .compare_exchange_weak(v, v.wrapping_add(1), Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        {
            // Orders the odd version before the data stores that follow, so
            // a reader that sees any new word also sees the version change.
            fence(Ordering::Release);
            return LineGuard {
                version,
                acquired: v,
            };
        }
        backoff(&mut spins);
    }
}

impl Drop for LineGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        self.version
            .store(self.acquired.wrapping_add(2), Ordering::Release);
    }
}

/// Runs `load` (which must only perform relaxed loads of the line's words
/// and must be repeatable) until it observed a stable line, and returns its
/// result.
#[inline]
pub(crate) fn read<R>(version: &AtomicU64, mut load: impl FnMut() -> R) -> R {
    let mut spins = 0;
    loop {
        let before = version.load(Ordering::Acquire);
        if before & 1 == 0 {
            let value = load();
            fence(Ordering::Acquire);
            if version.load(Ordering::Relaxed) == before {
                return value;
            }
        }
        backoff(&mut spins);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn lock_bumps_version_by_two() {
        let v = AtomicU64::new(10);
        {
            let _g = lock(&v);
            assert_eq!(v.load(Ordering::Relaxed), 11);
        }
        assert_eq!(v.load(Ordering::Relaxed), 12);
    }

    #[test]
    fn readers_never_see_half_written_pairs() {
        let version = Arc::new(AtomicU64::new(0));
        let words = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let writer = {
            let (version, words) = (version.clone(), words.clone());
            std::thread::spawn(move || {
                for i in 1..=20_000u64 {
                    let _g = lock(&version);
                    words[0].store(i, Ordering::Relaxed);
                    std::hint::spin_loop();
                    words[1].store(i, Ordering::Relaxed);
                }
            })
        };
        let mut last = 0;
        while last < 20_000 {
            let (a, b) = read(&version, || {
                (
                    words[0].load(Ordering::Relaxed),
                    words[1].load(Ordering::Relaxed),
                )
            });
            assert_eq!(a, b, "torn pair");
            assert!(a >= last);
            last = a;
        }
        writer.join().unwrap();
    }
}
