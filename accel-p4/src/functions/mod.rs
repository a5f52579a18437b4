//! The switch functions, one file each; each is a P4 control block of the same name.
//!
//! * [`forward`] — `Route`: connection lookup and address rewriting (always on);
//! * [`scope`] — `Scope`: requests of connections made with a grant confined to the
//!   grant's windows and rights (always on);
//! * [`atomics`] — `SwitchAtomics`: PSN/MSN translation and switch-resident atomics
//!   (mode bit `switch_atomics`);
//! * [`atomic_replace`] — `AtomicReplace`: atomics on tracked lock words multiplexed
//!   onto one upstream QP, CAS/FAA rewritten to WRITEs of the outcome (mode bit
//!   `atomic_replace`);
//! * [`opt_latch`] — `OptLatch`: switch-held tuple versions, latch and version reads
//!   answered, READ responses stamped valid/invalid, write ACKs unlatch (mode bit
//!   `opt_latch`);
//! * [`write_steer`] — `WriteSteer`: Clover write steering (node version and link CAS
//!   redirected to a tracked key's committed tail; mode bit `write_steer`);
//! * [`read_steer`] — `ReadSteer`: Clover read steering (node READs of stale addresses
//!   redirected to the committed tail; mode bit `read_steer`);
//! * [`steer_cache`] — `SteerCache`: the committed tails and the write cache both
//!   steering functions use;
//! * [`answer`] — the answers switch functions build in place of the memnode's (ACKs,
//!   ATOMIC ACKs, NAKs) and the fillers that take their PSNs, shared by `SwitchAtomics`,
//!   `AtomicReplace` and `OptLatch`;
//! * [`zero_copy`] — `ZeroCopy`: READ responses of switch-initiated copies rewritten into
//!   WRITEs to the copy's target (zero-sided RDMA; table-driven, always on);
//! * [`flow_punt`] — `FlowPunt`: answers on flow rings' control QPs and producers'
//!   doorbells handed to the switch CPU's flow engine (table-driven, always on);
//! * [`mirror_write`] — `MirrorWrite`: switch replication of writes — a client's WRITE
//!   under a replica set's alias key goes to the primary and is copied to every backup
//!   on the switch's own queue pairs; the primary's ACK is held until the backups
//!   acknowledged (table-driven, always on);
//! * [`read_balance`] — `ReadBalance`: READs of replicated immutable data under a
//!   set's read alias key served by a member the switch chooses, on its own read
//!   lanes, the response turned back into the client's (table-driven, always on);
//! * [`read_balance_policy`] — the choice of the replica-set member that serves a
//!   balanced READ (round robin, least outstanding);
//! * [`faults`] — `FaultInject`: seeded drop / duplicate / reorder / delay (mode bit
//!   `faults`, tests only).

pub mod answer;
pub mod atomic_replace;
pub mod atomics;
pub mod faults;
pub mod flow_punt;
pub mod forward;
pub mod mirror_write;
pub mod opt_latch;
pub mod read_balance;
pub mod read_balance_policy;
pub mod read_steer;
pub mod scope;
pub mod steer_cache;
pub mod write_steer;
pub mod zero_copy;
