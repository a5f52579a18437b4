//! Scale-up policies from SMART (ASPLOS'24): work-request credits with an
//! adaptive maximum, truncated exponential backoff with a dynamic limit, and
//! per-thread concurrency-depth throttling.
//!
//! Everything here is a per-thread, sans-IO policy object. A worker thread
//! owns its queue pairs and one instance of each policy, and asks them
//! before acting:
//!
//! - [`CreditPool`] — may I post this batch of work requests now? Limits
//!   outstanding work requests per thread to `C_max`, re-chosen every epoch
//!   by measuring candidate values (SMART Algorithm 1, §4.2).
//! - [`Backoff`] — how long should I wait before retrying this failed CAS?
//!   `min(t0 · 2^i, t_max) + jitter`, with `t_max` moving with the retry
//!   rate (§4.3).
//! - [`Admission`] — may another task start an operation? Caps concurrent
//!   operations per thread at `c_max` (§4.3).
//! - [`ConflictAvoidance`] — owns a `Backoff` and an `Admission` and moves
//!   `c_max` and `t_max` together from one retry-rate meter
//!   ([`RetryRate`]).
//!
//! Conventions shared by all of them:
//!
//! - time is always passed in as an [`Instant`](std::time::Instant); no
//!   policy reads the clock, so tests drive them with a simulated clock;
//! - randomness comes from a seeded [`SmallRng`](rand::rngs::SmallRng), so
//!   runs with the same seed are reproducible;
//! - every technique has a `disabled()` configuration that behaves as if
//!   unlimited (credits, admission) or without delay (backoff), so each
//!   can be switched off for ablations;
//! - no input panics: degenerate configurations (empty candidate lists,
//!   zero intervals, zero bounds) are sanitised as documented on each field.

pub mod admission;
pub mod backoff;
pub mod conflict;
pub mod credits;
pub mod retry_rate;

pub use admission::{Admission, AdmissionConfig, AdmissionStats};
pub use backoff::{Backoff, BackoffConfig, BackoffStats, DEFAULT_T0, LimitChange};
pub use conflict::{Adjustment, ConflictAvoidance, ConflictStats};
pub use credits::{
    CMAX_HISTORY_LEN, CreditConfig, CreditPhase, CreditPool, CreditStats, MIN_DELTA,
};
pub use retry_rate::{MIN_WINDOW, RetryRate};
