//! Experiment 1 — torn reads (Jasny et al., TODS 2025, §1, Fig. 1b).
//!
//! A writer thread keeps rewriting a few blocks, each time filling the payload
//! with one repeated 8-byte version number (its write counter); a reader thread
//! reads the blocks through the scheme under test and checks every word of what
//! the scheme returned. A value whose words differ is a torn read the scheme
//! did not detect. Memory is in-process (`local` transport: both threads apply
//! verbs concurrently) with the region's read order `random` and a line gap that
//! widens the window between the lines of one READ.
//!
//! Block size is the bookend tuple (head, payload, tail, latch): the payload of
//! every scheme is `block − 24` bytes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use kvstore::OpStats;
use kvstore::SchemeSpec;
use kvstore::latch_schemes::IoOptions;
use verbs::mem::{LineGap, ReadOrder};

use crate::setup::Mem;

/// What to measure.
#[derive(Debug, Clone)]
pub struct TornConfig {
    /// Schemes (the bookend demo included, normally).
    pub schemes: Vec<SchemeSpec>,
    /// Block sizes in bytes (multiples of 64, at least 64).
    pub blocks: Vec<usize>,
    /// Reads per (scheme, block).
    pub reads: u64,
    /// Blocks the writer cycles through.
    pub slots: u64,
    /// Read order of the region.
    pub order: ReadOrder,
    /// Pause between the lines of one READ.
    pub gap: LineGap,
}

impl Default for TornConfig {
    fn default() -> TornConfig {
        TornConfig {
            schemes: SchemeSpec::catalog(true),
            blocks: vec![64, 128, 192, 256, 512, 1024, 2048, 4096],
            reads: 1_250_000,
            slots: 2,
            order: ReadOrder::Random,
            gap: LineGap::Spin(64),
        }
    }
}

/// One (scheme, block) measurement.
#[derive(Debug, Clone)]
pub struct TornCell {
    /// Scheme name.
    pub scheme: String,
    /// Whether the scheme is the unsafe demo.
    pub unsafe_demo: bool,
    /// Block size.
    pub block: usize,
    /// Lines of the scheme's tuple.
    pub lines: u64,
    /// Reads returned by the scheme.
    pub reads: u64,
    /// Of them, torn values returned undetected.
    pub torn: u64,
    /// Reads the scheme retried because it detected a conflict.
    pub detected: u64,
    /// Writes the writer finished meanwhile.
    pub writes: u64,
    /// Wall time.
    pub seconds: f64,
}

impl TornCell {
    /// Undetected torn reads per read returned.
    pub fn fraction(&self) -> f64 {
        self.torn as f64 / self.reads.max(1) as f64
    }
}

/// A payload of `len` bytes whose words all hold `v`.
pub fn filled(len: usize, v: u64) -> Vec<u8> {
    let mut p = vec![0u8; len];
    for c in p.chunks_mut(8) {
        let b = v.to_le_bytes();
        c.copy_from_slice(&b[..c.len()]);
    }
    p
}

/// Whether every 8-byte word of `p` is the same.
pub fn uniform(p: &[u8]) -> bool {
    let first = p.get(..8.min(p.len())).unwrap_or_default();
    p.chunks(8).all(|c| c == &first[..c.len()])
}

/// Measure one (scheme, block).
pub fn run_cell(cfg: &TornConfig, spec: &SchemeSpec, block: usize) -> Result<TornCell, String> {
    if block < 64 || !block.is_multiple_of(64) {
        return Err(format!("block size {block} must be a multiple of 64"));
    }
    let payload = block - 24;
    let scheme = spec.build(payload).map_err(|e| e.to_string())?;
    let layout = *scheme.layout();
    let mem = Arc::new(Mem::local(
        layout.area_bytes(cfg.slots),
        cfg.order,
        cfg.gap,
        None,
    )?);
    let stop = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(AtomicU64::new(0));
    // Nobody dies in this experiment, so no latch may be broken as leaked: over the
    // `local` transport a READ is carried out by the reader's own thread, and on a
    // busy machine that thread can be descheduled in the middle of it for longer
    // than the default 500-ms lease; a writer would then break the "leaked" shared
    // latch and write under the reader (a torn value caused by the lease, not by the
    // scheme). The lease is therefore far beyond any pause.
    let options = IoOptions {
        lease: Duration::from_secs(600),
        give_up_after: Duration::from_secs(1200),
        // An optimistic reader that detected a torn read retries at once: the
        // experiment counts reads, and a sleep per detection (tens of µs on this
        // host's timers) would make the large blocks take hours. Latch waiters keep
        // the backoff: without it a spinning reader and writer starve each other.
        max_backoff: if matches!(spec, SchemeSpec::Pessimistic { .. }) {
            IoOptions::default().max_backoff
        } else {
            Duration::ZERO
        },
        ..IoOptions::default()
    };
    let writer = {
        let (mem, stop, writes, spec, options) = (
            mem.clone(),
            stop.clone(),
            writes.clone(),
            *spec,
            options.clone(),
        );
        let slots = cfg.slots;
        std::thread::spawn(move || -> Result<(), String> {
            let scheme = spec.build(payload).map_err(|e| e.to_string())?;
            let (worker, io) = mem.io(scheme.layout(), slots, options)?;
            worker.block_on(async {
                let mut version = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    version += 1;
                    let mut st = OpStats::default();
                    let image = filled(payload, version);
                    scheme
                        .write(
                            &io,
                            version % slots,
                            &mut |_: &[u8]| Some(image.clone()),
                            &mut st,
                        )
                        .await
                        .map_err(|e| e.to_string())?;
                    writes.store(version, Ordering::Relaxed);
                }
                io.flush().await;
                Ok(())
            })
        })
    };
    // Start reading once every block has been written.
    while writes.load(Ordering::Relaxed) < cfg.slots && !writer.is_finished() {
        std::thread::yield_now();
    }
    let (worker, io) = mem.io(&layout, cfg.slots, options)?;
    let started = Instant::now();
    let result = worker.block_on(async {
        let (mut torn, mut detected) = (0u64, 0u64);
        for i in 0..cfg.reads {
            let mut st = OpStats::default();
            let p = scheme
                .read(&io, i % cfg.slots, &mut st)
                .await
                .map_err(|e| e.to_string())?;
            detected += st.restarts;
            if !uniform(&p) {
                torn += 1;
            }
        }
        io.flush().await;
        Ok::<_, String>((torn, detected))
    });
    let seconds = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    writer
        .join()
        .map_err(|_| "the writer thread panicked".to_string())??;
    let (torn, detected) = result?;
    Ok(TornCell {
        scheme: spec.name(),
        unsafe_demo: spec.is_unsafe(),
        block,
        lines: layout.tuple / 64,
        reads: cfg.reads,
        torn,
        detected,
        writes: writes.load(Ordering::Relaxed),
        seconds,
    })
}

/// Measure every (scheme, block), calling `progress` after each.
pub fn run(cfg: &TornConfig, mut progress: impl FnMut(&TornCell)) -> Result<Vec<TornCell>, String> {
    let mut out = Vec::new();
    for spec in &cfg.schemes {
        for &block in &cfg.blocks {
            let c = run_cell(cfg, spec, block)?;
            progress(&c);
            out.push(c);
        }
    }
    Ok(out)
}
