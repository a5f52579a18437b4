//! Zero-sided data movement measured (`zero-bench`): copies of memory between two
//! memory nodes, driven by the soft switch (READ responses turned into WRITEs, no CPU
//! at either memory node's side of the protocol and none at a client) against the
//! same copies driven by a client's CPU (READ into the client, WRITE out of it), over
//! item sizes from one 64-byte line to 64 KiB: bandwidth, and CPU seconds per GB
//! copied at each memory node, at the switch and at the client. Every component runs
//! in a process of its own so that its CPU time is its own.

pub mod charts;
pub mod child;
pub mod copy_run;
pub mod cpu_driven;
pub mod report;
pub mod switch_driven;
