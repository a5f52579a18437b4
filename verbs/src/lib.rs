//! RDMA verbs for dmkv: one-sided READ, WRITE, CAS and FAA, and two-sided SEND/RECV.
//!
//! This crate owns everything between a client's work request and the bytes
//! of a memory node: the RoCEv2 wire format and its ICRC, the memory
//! semantics that RDMA over PCIe provides, the reliable-connection protocol
//! core (sans-IO), the transports that carry it, and the scale-up techniques
//! (credits, backoff) that keep many threads efficient.
//!
//! Two-sided verbs: a requester posts [`wr::WorkRequest::Send`] (optionally with 32
//! bits of immediate data) and gets a completion when the responder acknowledges it;
//! the responder side delivers the message into the next buffer its owner posted to a
//! [`recv::RecvQueue`], with the byte length, immediate data and queue pair number in
//! a [`recv::RecvCompletion`]. A SEND that finds no buffer is answered with an RNR NAK
//! and retried after the RNR timer ([`rc::RcConfig::rnr_retry`]).
#![forbid(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod conformance;
pub mod mem;
pub mod net;
pub mod rc;
pub mod recv;
pub mod throttle;
pub mod transport;
pub mod wire;
pub mod worker;
pub mod wr;
