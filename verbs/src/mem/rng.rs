//! A fast per-thread random number generator for read permutations and
//! rkeys, seeded from the OS randomness behind `std`'s `RandomState` (the
//! crate's `rand` build has no OS entropy source of its own).

use std::cell::RefCell;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

use rand::SeedableRng;
use rand::rngs::SmallRng;

/// A fresh unpredictable 64-bit seed.
pub(crate) fn random_seed() -> u64 {
    let mut h = RandomState::new().build_hasher();
    h.write_u64(std::process::id().into());
    h.finish()
}

thread_local! {
    static RNG: RefCell<SmallRng> = RefCell::new(SmallRng::seed_from_u64(random_seed()));
}

/// Runs `f` with this thread's generator.
pub(crate) fn with_rng<R>(f: impl FnOnce(&mut SmallRng) -> R) -> R {
    RNG.with(|rng| f(&mut rng.borrow_mut()))
}
