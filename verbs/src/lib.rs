//! One-sided RDMA verbs for dmkv.
//!
//! This crate owns everything between a client's work request and the bytes
//! of a memory node: the RoCEv2 wire format and its ICRC, the memory
//! semantics that RDMA over PCIe provides, the reliable-connection protocol
//! core (sans-IO), the transports that carry it, and the scale-up techniques
//! (credits, backoff) that keep many threads efficient.
#![forbid(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod conformance;
pub mod mem;
pub mod net;
pub mod rc;
pub mod throttle;
pub mod transport;
pub mod wire;
pub mod worker;
pub mod wr;
