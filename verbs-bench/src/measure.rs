//! Running one benchmark cell: N threads, each a worker with its own queue pair and
//! `depth` concurrent tasks issuing one verb at a time until the clock runs out.

use std::cell::{Cell, RefCell};
use std::net::SocketAddrV4;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use verbs::mem::RemoteMemory;
use verbs::rc::RcConfig;
use verbs::transport::local::DirectTransport;
use verbs::transport::shm::ShmTarget;
use verbs::transport::udp::UdpTransport;
use verbs::transport::{Transport, TransportKind, TransportStats};
use verbs::worker::{VerbError, Worker, WorkerConfig, WorkerStats};
use verbs::wr::RemoteAddr;

/// How one operation of a cell ended.
enum Outcome {
    /// It completed (a contended increment: it swapped).
    Done,
    /// A contended increment hit the attempt bound.
    GaveUp,
    /// The verb failed.
    Error,
}

impl Outcome {
    fn of(ok: bool) -> Outcome {
        if ok { Outcome::Done } else { Outcome::Error }
    }
}

/// A latency histogram in nanoseconds (1 ns .. 60 s, 3 significant digits).
pub fn histogram() -> Result<Histogram<u64>, String> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).map_err(|e| format!("histogram: {e}"))
}

impl CellResult {
    /// Operations per second over the cell's wall time.
    pub fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Which verb a cell measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// READ of `size` bytes.
    Read,
    /// WRITE of `size` bytes.
    Write,
    /// CAS: uncontended, each attempt (it either swaps or learns the current value);
    /// contended, each increment of the shared word (its failed attempts are retried
    /// through the worker's backoff and admission throttle and counted as failures).
    Cas,
    /// FAA.
    Faa,
}

impl Verb {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Verb::Read => "read",
            Verb::Write => "write",
            Verb::Cas => "cas",
            Verb::Faa => "faa",
        }
    }
}

/// Everything a cell needs to reach memory.
pub struct Targets {
    /// The in-process memory of the `local` transport.
    pub local: Arc<dyn RemoteMemory>,
    /// rkey and base VA of the local region.
    pub local_base: RemoteAddr,
    /// The memory node's shared-memory region.
    pub shm: ShmTarget,
    /// The memory node's admin address (for `udp` queue pairs).
    pub admin: String,
    /// The memory node's soft-RoCE address.
    pub data_addr: SocketAddrV4,
    /// rkey and base VA of the memory node's region.
    pub node_base: RemoteAddr,
}

/// One measurement.
#[derive(Debug, Clone, Copy)]
pub struct CellSpec {
    /// Transport.
    pub transport: TransportKind,
    /// Verb.
    pub verb: Verb,
    /// Payload size (READ/WRITE) or 8.
    pub size: usize,
    /// All tasks hit one word (atomics only).
    pub contended: bool,
    /// Client threads.
    pub threads: usize,
    /// Concurrent operations per thread.
    pub depth: usize,
    /// How long to measure.
    pub duration: Duration,
    /// Whether SMART's credits/backoff/admission are on.
    pub smart: bool,
    /// Path MTU of udp queue pairs.
    pub pmtu: verbs::rc::Pmtu,
}

/// What a cell measured.
#[derive(Debug, Clone)]
pub struct CellResult {
    /// Operations completed.
    pub ops: u64,
    /// Wall time from start until the last operation finished.
    pub elapsed: Duration,
    /// Latency distribution (ns).
    pub latency: Histogram<u64>,
    /// Transport counters over the run (all threads).
    pub transport: TransportStats,
    /// CAS attempts that did not swap.
    pub cas_failures: u64,
    /// Operations that returned an error.
    pub errors: u64,
    /// Contended increments that gave up after the worker's attempt bound (their
    /// attempts are counted as CAS failures).
    pub cas_gave_up: u64,
    /// CPU time the whole process (clients and memory node) spent on the cell.
    pub cpu: Duration,
    /// Of which the memory node's threads.
    pub server_cpu: Duration,
    /// The workers' own counters (CAS helper operations and retries, admission waits).
    pub worker: WorkerStats,
}

/// A transport of `kind` with one queue pair (handle 0) to the benchmark's memory, and
/// where that memory starts.
pub fn open_transport(
    kind: TransportKind,
    pmtu: verbs::rc::Pmtu,
    targets: &Targets,
) -> Result<(Box<dyn Transport + Send>, RemoteAddr), String> {
    match kind {
        TransportKind::Local => {
            let mut t = DirectTransport::local();
            t.connect(targets.local.clone());
            Ok((Box::new(t), targets.local_base))
        }
        TransportKind::Shm => {
            let mut t = DirectTransport::shm();
            t.connect_shm(&targets.shm).map_err(|e| e.to_string())?;
            Ok((Box::new(t), targets.node_base))
        }
        TransportKind::Udp => {
            let config = RcConfig {
                pmtu,
                ..RcConfig::default()
            };
            let mut t =
                UdpTransport::for_remote(targets.data_addr, config).map_err(|e| e.to_string())?;
            memnode::client::connect_udp(&targets.admin, &mut t).map_err(|e| e.to_string())?;
            Ok((Box::new(t), targets.node_base))
        }
        TransportKind::Rdma => Err("the rdma transport is not benchmarked here".into()),
    }
}

/// Run one cell on `spec.threads` OS threads.
pub fn run_cell(spec: CellSpec, targets: &Targets) -> Result<CellResult, String> {
    let start_barrier = Arc::new(std::sync::Barrier::new(spec.threads));
    let (results, cpu, server_cpu) = crate::cpu::split_during(|| {
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..spec.threads)
                .map(|thread| {
                    let barrier = start_barrier.clone();
                    scope.spawn(move || run_thread(spec, targets, thread, &barrier))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err("benchmark thread panicked".into()))
                })
                .collect::<Vec<_>>()
        })
    });
    let mut total = CellResult {
        ops: 0,
        elapsed: Duration::ZERO,
        latency: histogram()?,
        transport: TransportStats::default(),
        cas_failures: 0,
        errors: 0,
        cas_gave_up: 0,
        cpu,
        server_cpu,
        worker: WorkerStats::default(),
    };
    for r in results {
        let r = r?;
        total.ops += r.ops;
        total.elapsed = total.elapsed.max(r.elapsed);
        let _ = total.latency.add(&r.latency);
        total.transport.add(&r.transport);
        total.cas_failures += r.cas_failures;
        total.errors += r.errors;
        total.cas_gave_up += r.cas_gave_up;
        let w = r.worker;
        total.worker.cas_operations += w.cas_operations;
        total.worker.cas_retries += w.cas_retries;
        total.worker.credit_waits += w.credit_waits;
        total.worker.admission_waits += w.admission_waits;
    }
    Ok(total)
}

fn run_thread(
    spec: CellSpec,
    targets: &Targets,
    thread: usize,
    barrier: &std::sync::Barrier,
) -> Result<CellResult, String> {
    let made = open_transport(spec.transport, spec.pmtu, targets);
    // Every thread reaches the barrier, even one whose setup failed, so none waits forever.
    barrier.wait();
    let (transport, base): (Box<dyn Transport>, _) = match made {
        Ok((t, base)) => (t, base),
        Err(e) => return Err(e),
    };
    let config = if spec.smart {
        WorkerConfig::default()
    } else {
        WorkerConfig::baseline()
    };
    measure(transport, base, spec, thread, config)
}

fn measure(
    transport: Box<dyn Transport>,
    base: RemoteAddr,
    spec: CellSpec,
    thread: usize,
    config: WorkerConfig,
) -> Result<CellResult, String> {
    let worker = Worker::new(transport, config);
    let qp = worker.qp(0);
    let before = worker.transport_stats();
    let hist = Rc::new(RefCell::new(histogram()?));
    let ops = Rc::new(Cell::new(0u64));
    let failures = Rc::new(Cell::new(0u64));
    let errors = Rc::new(Cell::new(0u64));
    let gave_up = Rc::new(Cell::new(0u64));
    let done = Rc::new(Cell::new(0usize));
    let start = Instant::now();
    let deadline = start + spec.duration;
    let slot_bytes = spec.size.max(64).next_multiple_of(64) as u64;
    for task in 0..spec.depth {
        let qp = qp.clone();
        let (hist, ops, failures, errors, gave_up, done) = (
            hist.clone(),
            ops.clone(),
            failures.clone(),
            errors.clone(),
            gave_up.clone(),
            done.clone(),
        );
        let slot = (thread * spec.depth + task) as u64;
        let addr = if spec.contended {
            base
        } else {
            base.offset(4096 + slot * slot_bytes.max(64))
        };
        worker.spawn(async move {
            let payload = vec![0xA5u8; spec.size];
            let mut guess = 0u64;
            // One clock read per operation: its end is the next one's start.
            let mut t0 = Instant::now();
            while t0 < deadline {
                let outcome = match spec.verb {
                    Verb::Read => Outcome::of(qp.read(addr, spec.size as u32).await.is_ok()),
                    Verb::Write => Outcome::of(qp.write(addr, payload.clone()).await.is_ok()),
                    Verb::Faa => Outcome::of(qp.faa(addr, 1).await.is_ok()),
                    // Contended: one increment of the shared word per operation, through
                    // the worker's CAS helper, so its retries pass SMART's backoff and
                    // admission throttle when they are on (`--no-smart` turns both off and
                    // the helper retries at once).
                    Verb::Cas if spec.contended => {
                        match qp
                            .cas_update(addr, guess, |v| Some(v.wrapping_add(1)))
                            .await
                        {
                            Ok(Some(done)) => {
                                guess = done.new;
                                failures.set(failures.get() + u64::from(done.attempts - 1));
                                Outcome::Done
                            }
                            // Every attempt failed: the increment gives up (and the
                            // word's value seen last is the next guess).
                            Err(VerbError::Contended { attempts, last }) => {
                                failures.set(failures.get() + u64::from(attempts));
                                guess = last;
                                Outcome::GaveUp
                            }
                            Ok(None) | Err(_) => Outcome::Error,
                        }
                    }
                    Verb::Cas => match qp.cas(addr, guess, guess.wrapping_add(1)).await {
                        Ok(seen) => {
                            if seen == guess {
                                guess = guess.wrapping_add(1);
                            } else {
                                failures.set(failures.get() + 1);
                                guess = seen;
                            }
                            Outcome::Done
                        }
                        Err(_) => Outcome::Error,
                    },
                };
                let t1 = Instant::now();
                let ns = t1.duration_since(t0).as_nanos() as u64;
                t0 = t1;
                match outcome {
                    Outcome::Done => {
                        let _ = hist.borrow_mut().record(ns.max(1));
                        ops.set(ops.get() + 1);
                    }
                    Outcome::GaveUp => gave_up.set(gave_up.get() + 1),
                    Outcome::Error => errors.set(errors.get() + 1),
                }
            }
            done.set(done.get() + 1);
        });
    }
    let depth = spec.depth;
    let w = worker.clone();
    worker.block_on(async move {
        while done.get() < depth {
            w.sleep(Duration::from_micros(200)).await;
        }
    });
    let elapsed = start.elapsed();
    let transport = worker.transport_stats().since(&before);
    let latency = hist.borrow().clone();
    Ok(CellResult {
        ops: ops.get(),
        elapsed,
        latency,
        transport,
        cas_failures: failures.get(),
        errors: errors.get(),
        cas_gave_up: gave_up.get(),
        cpu: Duration::ZERO,
        server_cpu: Duration::ZERO,
        worker: worker.stats(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use verbs::mem::{AccessFlags, MemoryTable, Region};

    fn contended(smart: bool) {
        let table = MemoryTable::new();
        let info = table
            .register(
                Arc::new(Region::anonymous(1 << 16).unwrap()),
                0x1000_0000,
                AccessFlags::ALL,
            )
            .unwrap();
        let mem: Arc<dyn RemoteMemory> = Arc::new(table);
        let mut t = DirectTransport::local();
        t.connect(mem.clone());
        let base = RemoteAddr::new(info.rkey, info.base_va);
        let spec = CellSpec {
            transport: TransportKind::Local,
            verb: Verb::Cas,
            size: 8,
            contended: true,
            threads: 1,
            depth: 4,
            duration: Duration::from_millis(30),
            smart,
            pmtu: verbs::rc::Pmtu::DEFAULT,
        };
        let config = if smart {
            WorkerConfig::default()
        } else {
            WorkerConfig::baseline()
        };
        let r = measure(Box::new(t), base, spec, 0, config).unwrap();
        assert_eq!(r.errors, 0);
        assert!(r.ops > 0);
        // Every operation is one increment of the shared word, however many attempts
        // it took: the word holds the operation count.
        let word = mem.fetch_add(base.rkey, base.va, 0).unwrap();
        assert_eq!(word, r.ops, "smart {smart}: {r:?}");
        // The four tasks start from the same guess: three of them fail at least once,
        // and each failure is retried (counted), not reported as an operation.
        assert!(r.cas_failures >= 3, "smart {smart}: {r:?}");
        // An increment that gives up after the attempt bound swapped nothing: all of its
        // attempts are failures (the worker counts all but its first as retries).
        assert_eq!(
            r.worker.cas_operations,
            r.ops + r.cas_gave_up,
            "smart {smart}"
        );
        assert_eq!(
            r.worker.cas_retries + r.cas_gave_up,
            r.cas_failures,
            "smart {smart}"
        );
    }

    #[test]
    fn contended_cas_increments_through_the_worker_helper_with_and_without_smart() {
        contended(true);
        contended(false);
    }
}
