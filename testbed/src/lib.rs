//! What dmkv's tests, benchmarks and tools stand on, outside the client library:
//!
//! * [`embedded`] — an in-process cluster (metadata service and memory nodes) and a
//!   client of it ([`embedded_client`]);
//! * [`relay`] — a fault-injecting UDP relay between sessions and memory nodes;
//! * [`history`] — histories of key-value operations as clients observed them;
//! * [`lincheck`] — a linearizability checker for those histories;
//! * [`rdma`] — whether tests can run on an RDMA device, and their skip;
//! * [`workload`] — a concurrent workload on hot keys that records a history;
//! * [`results_page`] — the Markdown results pages the benchmarks write on request.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cpu_time;
pub mod embedded;
pub mod history;
pub mod lincheck;
pub mod median;
pub mod plot;
pub mod rdma;
pub mod relay;
pub mod results_page;
pub mod table_watch;
pub mod workload;

pub use embedded::{
    Embedded, EmbeddedOptions, Security, embedded_client, embedded_client_with,
    embedded_client_with_rpc_workers,
};
