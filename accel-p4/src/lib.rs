//! dmkv switch acceleration.
//!
//! * [`spec`] — opcodes, header layouts, mode bits, registers and tables shared with the
//!   P4 program (`p4/include/spec.p4` is generated from it);
//! * [`model`] — the pipeline model's building blocks: packets, registers, tables, the
//!   stage trait, counters;
//! * [`functions`] — the stages, one file per function;
//! * [`pipeline`] — the assembly: parse → the fixed list of stages → deparse;
//! * [`stf`] — test vectors in a small STF dialect, run against the model;
//! * [`switch`] — the soft switch (UDP middlebox) running the model; [`data_plane`] — its
//!   one thread serving both ports, [`delay_queue`] — frames it holds back; [`io_stats`] —
//!   its socket statistics;
//! * [`copy`] — switch-initiated copies (zero-sided RDMA): requests, the per-copy state
//!   machine, the copy engine;
//! * [`flow`] — producer/consumer rings in registered memory and the flows the switch
//!   runs over them (1:1, load balancing, ordered replication);
//! * [`control`] — the control plane (routes, QP creation through the switch);
//! * [`admin`] — its admin HTTP API; [`client`] — connecting a QP through the switch.
#![warn(missing_docs)]

pub mod admin;
pub mod admin_documents;
pub mod auth;
pub mod client;
pub mod coalescing_peers;
pub mod conn_grants;
pub mod control;
pub mod copy;
pub mod data_plane;
pub mod delay_queue;
pub mod flow;
pub mod functions;
pub mod io_stats;
pub mod latch_lease;
pub mod metrics;
pub mod model;
pub mod pipeline;
pub mod spec;
pub mod stf;
pub mod switch;
