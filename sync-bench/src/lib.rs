//! Experiments on dmkv's in-place latch schemes ([`kvstore::latch_schemes`]), after
//! Jasny et al., *Synchronizing Disaggregated Data Structures with One-Sided RDMA:
//! Pitfalls, Experiments and Design Guidelines* (ACM TODS 2025; section and figure
//! numbers below are that paper's):
//!
//! 1. [`torn`]: torn reads (§1, Fig. 1b) — how many inconsistent values each
//!    scheme returns undetected while a writer rewrites the same blocks;
//! 2. [`ablation`]: single-thread latch acquisitions per optimisation level
//!    (§3.4, Fig. 8), with round trips per operation;
//! 3. [`compare`]: read-only and write-only throughput of every scheme over tuple
//!    sizes, threads and skew (§4.4–§4.5, Figs. 14–15);
//! 4. [`align`]: uncontended CAS throughput over latch strides with and without
//!    padding under the NIC lock-table model (§3.2, Fig. 5);
//! 5. [`switch`]: through the `accel-p4` soft switch, contended CAS at the memnode vs
//!    switch-resident atomics vs atomic replacement (§5.4, Fig. 22; SwordBox Fig. 10)
//!    and switch-assisted vs software optimistic latching (§5.5, Fig. 26);
//! 6. [`retries`]: failed-CAS retries per update on Clover and RACE tables under
//!    Zipf(0.99) updates with SMART's conflict avoidance (backoff, admission
//!    throttling) off and on (SMART, ASPLOS'24, §4.3, Fig. 14).
//!
//! Each prints a table, writes JSON and draws SVG charts ([`plot`]) and, on request, a
//! Markdown results page ([`results_md`]); the `sync-bench` binary runs them.

pub mod ablation;
pub mod align;
pub mod compare;
pub mod results_md;
pub mod retries;
pub mod retries_report;
pub mod setup;
pub mod switch;
pub mod torn;

/// Median of `v` (0 for an empty slice).
pub fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
