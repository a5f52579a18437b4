//! Experiment 2 — latch ablation (Jasny et al., TODS 2025, §3.4, Fig. 8).
//!
//! One thread repeatedly latches a 256-byte tuple exclusively (latch, READ,
//! WRITE, unlatch: a write) or shared (latch, READ, unlatch: a read), for each
//! optimisation level of the pessimistic latch, and for the exclusive-only latch
//! with write-unlatch. Reports acquisitions per second and the round trips,
//! verbs and bytes per acquisition from the operation counters.

use std::time::{Duration, Instant};

use kvstore::OpStats;
use kvstore::latch_schemes::IoOptions;
use kvstore::{Level, Placement, Readers, SchemeSpec};

use crate::setup::Mem;

/// One (scheme, mode) measurement.
#[derive(Debug, Clone)]
pub struct AblationCell {
    /// Scheme name.
    pub scheme: String,
    /// `exclusive` or `shared`.
    pub mode: &'static str,
    /// Acquisitions.
    pub ops: u64,
    /// Acquisitions per second.
    pub ops_per_sec: f64,
    /// Summed cost of the acquisitions.
    pub stats: OpStats,
}

impl AblationCell {
    /// Awaited round trips per acquisition.
    pub fn round_trips_per_op(&self) -> f64 {
        self.stats.round_trips as f64 / self.ops.max(1) as f64
    }
    /// Verbs per acquisition.
    pub fn verbs_per_op(&self) -> f64 {
        self.stats.work_requests as f64 / self.ops.max(1) as f64
    }
}

/// The schemes of the ablation, lowest level first.
pub fn schemes() -> Vec<SchemeSpec> {
    let mut v: Vec<SchemeSpec> = Level::ALL
        .iter()
        .map(|&level| SchemeSpec::Pessimistic {
            readers: Readers::Shared,
            level,
            write_unlatch: false,
            placement: Placement::Embedded,
        })
        .collect();
    for level in [Level::WriteCombining, Level::AsyncUnlatch] {
        v.push(SchemeSpec::Pessimistic {
            readers: Readers::Exclusive,
            level,
            write_unlatch: true,
            placement: Placement::Embedded,
        });
    }
    v
}

/// Measure `spec` on one `tuple`-byte tuple of `mem` for `duration` per mode.
pub fn run_scheme(
    mem: &Mem,
    spec: &SchemeSpec,
    tuple: usize,
    duration: Duration,
) -> Result<Vec<AblationCell>, String> {
    let scheme = spec
        .build(tuple.saturating_sub(8).max(8))
        .map_err(|e| e.to_string())?;
    let (worker, io) = mem.io(scheme.layout(), 1, IoOptions::default())?;
    let payload = scheme.layout().payload;
    worker.block_on(crate::setup::clear(&io, scheme.layout().area_bytes(1)))?;
    let mut out = Vec::new();
    for mode in ["exclusive", "shared"] {
        let cell = worker.block_on(async {
            let mut stats = OpStats::default();
            let mut ops = 0u64;
            let started = Instant::now();
            let value = vec![0xA5u8; payload];
            while started.elapsed() < duration {
                for _ in 0..32 {
                    if mode == "exclusive" {
                        scheme
                            .write(&io, 0, &mut |_: &[u8]| Some(value.clone()), &mut stats)
                            .await
                            .map_err(|e| e.to_string())?;
                    } else {
                        scheme
                            .read(&io, 0, &mut stats)
                            .await
                            .map_err(|e| e.to_string())?;
                    }
                    ops += 1;
                }
            }
            io.flush().await;
            let secs = started.elapsed().as_secs_f64();
            Ok::<_, String>(AblationCell {
                scheme: spec.name(),
                mode,
                ops,
                ops_per_sec: ops as f64 / secs.max(1e-9),
                stats,
            })
        })?;
        out.push(cell);
    }
    Ok(out)
}
