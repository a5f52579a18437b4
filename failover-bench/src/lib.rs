//! `failover-bench`: what more copies of a Clover, RACE or in-place table buy and cost.
//!
//! * [`failover`] — how long operations on the keys of a crashed memory node stall
//!   until the metadata service fails the node over and the client follows;
//! * [`cost`] — YCSB workloads A and C on tables of every index at one, two and three
//!   copies: throughput, latency and the protocol figures per operation;
//! * [`soak`] — updates with data integrity while memory nodes crash one after
//!   another, restarted with empty memory between crashes;
//! * [`index`] — the indexes measured (Clover, RACE, in-place);
//! * [`integrity`] — which values a key may hold given the outcomes of its writes;
//! * [`cluster`] — the embedded clusters and client options the parts share;
//! * [`summary`] — medians, ranges and ratios;
//! * [`results_md`] — the Markdown results page;
//! * [`json`] — the JSON document `--json PATH` writes.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cluster;
pub mod cost;
pub mod failover;
pub mod index;
pub mod integrity;
pub mod json;
pub mod rereplication;
pub mod results_md;
pub mod soak;
pub mod summary;
