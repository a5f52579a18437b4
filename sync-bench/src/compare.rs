//! Experiment 3 — scheme comparison (Jasny et al., TODS 2025, §4.4–§4.5, Figs. 14–15).
//!
//! `threads` threads (one worker and queue pair each) run read-only or
//! write-only operations through one scheme on a table of `slots` tuples, picking
//! tuples uniformly or Zipf-distributed (θ = 0.99, 1.5, 2: slot 0 hottest).
//! Reports throughput and, per operation, round trips, verbs, bytes and
//! optimistic restarts / latch retries.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kvstore::OpStats;
use kvstore::SchemeSpec;
use kvstore::latch_schemes::IoOptions;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::setup::Mem;

/// A key distribution over `n` slots.
#[derive(Debug, Clone)]
pub struct Zipf {
    /// Cumulative probabilities of ranks 0..n (empty: uniform).
    cdf: Vec<f64>,
    n: u64,
}

impl Zipf {
    /// Zipf with exponent `theta` over `n` ranks (`theta == 0`: uniform).
    pub fn new(n: u64, theta: f64) -> Zipf {
        if theta <= 0.0 {
            return Zipf {
                cdf: Vec::new(),
                n: n.max(1),
            };
        }
        let mut cdf = Vec::with_capacity(n as usize);
        let mut sum = 0.0;
        for i in 1..=n.max(1) {
            sum += 1.0 / (i as f64).powf(theta);
            cdf.push(sum);
        }
        for c in &mut cdf {
            *c /= sum;
        }
        Zipf { cdf, n: n.max(1) }
    }

    /// Draw a rank.
    pub fn sample(&self, rng: &mut impl Rng) -> u64 {
        if self.cdf.is_empty() {
            return rng.random_range(0..self.n);
        }
        let u: f64 = rng.random();
        (self.cdf.partition_point(|&c| c < u) as u64).min(self.n - 1)
    }
}

/// One cell of the comparison.
#[derive(Debug, Clone, Copy)]
pub struct CompareSpec {
    /// Scheme.
    pub scheme: SchemeSpec,
    /// Payload bytes.
    pub size: usize,
    /// Threads.
    pub threads: usize,
    /// Zipf exponent (0 = uniform).
    pub theta: f64,
    /// Writes (true) or reads.
    pub write: bool,
    /// Tuples in the table.
    pub slots: u64,
    /// Measurement time.
    pub duration: Duration,
}

/// What a cell measured.
#[derive(Debug, Clone)]
pub struct CompareCell {
    /// The cell.
    pub spec: CompareSpec,
    /// Operations finished.
    pub ops: u64,
    /// Operations per second (all threads).
    pub ops_per_sec: f64,
    /// Summed cost.
    pub stats: OpStats,
    /// Operations that failed (e.g. gave up under contention).
    pub errors: u64,
}

/// Run one cell on `mem`.
pub fn run_cell(mem: &Arc<Mem>, c: CompareSpec) -> Result<CompareCell, String> {
    let scheme = c.scheme.build(c.size).map_err(|e| e.to_string())?;
    let layout = *scheme.layout();
    {
        let (worker, io) = mem.io(&layout, c.slots, IoOptions::default())?;
        worker.block_on(crate::setup::clear(&io, layout.area_bytes(c.slots)))?;
    }
    let threads: Vec<_> = (0..c.threads)
        .map(|t| {
            let mem = mem.clone();
            std::thread::spawn(move || -> Result<(u64, OpStats, u64, f64), String> {
                let scheme = c.scheme.build(c.size).map_err(|e| e.to_string())?;
                let (worker, io) = mem.io(&layout, c.slots, IoOptions::default())?;
                let zipf = Zipf::new(c.slots, c.theta);
                let mut rng = SmallRng::seed_from_u64(0x5eed ^ t as u64);
                let value = vec![t as u8; c.size];
                worker.block_on(async {
                    let (mut ops, mut errors) = (0u64, 0u64);
                    let mut stats = OpStats::default();
                    let started = Instant::now();
                    while started.elapsed() < c.duration {
                        for _ in 0..16 {
                            let slot = zipf.sample(&mut rng);
                            let r = if c.write {
                                scheme
                                    .write(
                                        &io,
                                        slot,
                                        &mut |_: &[u8]| Some(value.clone()),
                                        &mut stats,
                                    )
                                    .await
                                    .map(|_| ())
                            } else {
                                scheme.read(&io, slot, &mut stats).await.map(|_| ())
                            };
                            match r {
                                Ok(()) => ops += 1,
                                Err(_) => errors += 1,
                            }
                        }
                    }
                    io.flush().await;
                    Ok((ops, stats, errors, started.elapsed().as_secs_f64()))
                })
            })
        })
        .collect();
    let (mut ops, mut errors, mut secs) = (0u64, 0u64, 0f64);
    let mut stats = OpStats::default();
    for h in threads {
        let (o, s, e, t) = h.join().map_err(|_| "a thread panicked".to_string())??;
        ops += o;
        errors += e;
        stats.add(&s);
        secs = secs.max(t);
    }
    Ok(CompareCell {
        spec: c,
        ops,
        ops_per_sec: ops as f64 / secs.max(1e-9),
        stats,
        errors,
    })
}
