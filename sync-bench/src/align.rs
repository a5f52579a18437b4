//! Experiment 4 — latch alignment (Jasny et al., TODS 2025, §3.2, Fig. 5).
//!
//! Threads latch and unlatch (two CAS) private latches — uncontended — placed
//! at a stride of 64 B … 4 KiB (the latches of back-to-back tuples), with and
//! without 8 bytes of padding between tuples, and in a separate latch array,
//! with the memory's model of the NIC's atomic lock table on: atomics whose
//! addresses share their low 12 bits share a lock slot and are serialised. Each
//! thread cycles over `latches` of its own latches. Reports CAS per second and
//! the lock-table collisions per CAS (exact: how often an atomic found its slot
//! taken by another latch's atomic).
//!
//! Memory is in-process (`local`): its threads apply atomics concurrently, as a
//! NIC's processing units do. (The `udp` memory node applies all verbs on one
//! data-plane thread, so its lock table never sees two atomics at once.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use kvstore::latch_schemes::IoOptions;
use kvstore::{Level, Placement, Readers, SchemeSpec};
use verbs::mem::{LineGap, NicLockTable, ReadOrder};
use verbs::wr::WorkRequest;

use crate::setup::Mem;

/// One measurement.
#[derive(Debug, Clone)]
pub struct AlignCell {
    /// Tuple stride before padding.
    pub stride: u64,
    /// Placement.
    pub placement: &'static str,
    /// Threads.
    pub threads: usize,
    /// CAS completed.
    pub cas: u64,
    /// CAS per second.
    pub cas_per_sec: f64,
    /// Lock-table collisions per CAS.
    pub collisions_per_cas: f64,
}

/// Measure `placement` at `stride` with `threads` threads of `latches` latches each.
pub fn run_cell(
    stride: u64,
    placement: Placement,
    threads: usize,
    latches: u64,
    hold: Duration,
    duration: Duration,
) -> Result<AlignCell, String> {
    let spec = SchemeSpec::Pessimistic {
        readers: Readers::Shared,
        level: Level::Basic,
        write_unlatch: false,
        placement,
    };
    let scheme = spec
        .build((stride as usize).saturating_sub(8).max(8))
        .map_err(|e| e.to_string())?;
    let layout = *scheme.layout();
    let slots = latches * threads as u64;
    let mem = Arc::new(Mem::local(
        layout.area_bytes(slots),
        ReadOrder::Ascending,
        LineGap::None,
        Some(NicLockTable::new(hold)),
    )?);
    let hs: Vec<_> = (0..threads)
        .map(|t| {
            let mem = mem.clone();
            std::thread::spawn(move || -> Result<(u64, f64), String> {
                let (worker, io) = mem.io(&layout, slots, IoOptions::default())?;
                let addrs = (0..latches)
                    .map(|i| io.latch_addr(&layout, i * threads as u64 + t as u64))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| e.to_string())?;
                let qp = io.qp().clone();
                let mine = io.fresh_latch_word();
                worker.block_on(async {
                    let mut n = 0u64;
                    let started = Instant::now();
                    'outer: loop {
                        for &a in &addrs {
                            qp.cas(a, 0, mine).await.map_err(|e| e.to_string())?;
                            qp.execute(vec![WorkRequest::cas(a, mine, 0)])
                                .await
                                .map_err(|e| e.to_string())?;
                            n += 2;
                            if n.is_multiple_of(64) && started.elapsed() >= duration {
                                break 'outer;
                            }
                        }
                    }
                    Ok((n, started.elapsed().as_secs_f64()))
                })
            })
        })
        .collect();
    let (mut cas, mut secs) = (0u64, 0f64);
    for h in hs {
        let (n, s) = h.join().map_err(|_| "a thread panicked".to_string())??;
        cas += n;
        secs = secs.max(s);
    }
    let collisions = mem.lock_table().map_or(0, |l| l.stats().collisions);
    Ok(AlignCell {
        stride,
        placement: placement.token(),
        threads,
        cas,
        cas_per_sec: cas as f64 / secs.max(1e-9),
        collisions_per_cas: collisions as f64 / cas.max(1) as f64,
    })
}
