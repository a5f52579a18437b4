//! The reliable-connection (RC) protocol core: requester and responder as sans-IO state machines.
//!
//! Nothing in this module performs I/O or reads a clock: transports feed datagrams and the
//! current time in and take packets and completions out. That is what lets the same core run
//! over UDP sockets, inside a deterministic network simulation, or behind a switch model.

mod config;
mod psn;
mod requester;
mod responder;
mod stats;

pub use config::{Pmtu, RNR_RETRY_FOREVER, RcConfig, rnr_delay};
pub use psn::{PSN_HALF, Psn};
pub use requester::{QpState, Requester};
pub use responder::{DropReason, MAX_READ, Responder};
pub use stats::{RequesterStats, ResponderStats};

/// Buffer size that holds any packet the core emits (largest PMTU plus headers).
pub const MAX_PACKET: usize = 4096 + 128;
