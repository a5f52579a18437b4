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
use verbs::worker::{Worker, WorkerConfig};
use verbs::wr::RemoteAddr;

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
    /// CAS attempts (each one either swaps or learns the current value).
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
    /// CPU time the whole process (clients and memory node) spent on the cell.
    pub cpu: Duration,
}

fn make_transport(
    spec: &CellSpec,
    targets: &Targets,
) -> Result<(Box<dyn Transport>, RemoteAddr), String> {
    match spec.transport {
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
                pmtu: spec.pmtu,
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
    let (results, cpu) = crate::cpu::spent_during(|| {
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
        cpu,
    };
    for r in results {
        let r = r?;
        total.ops += r.ops;
        total.elapsed = total.elapsed.max(r.elapsed);
        let _ = total.latency.add(&r.latency);
        total.transport.add(&r.transport);
        total.cas_failures += r.cas_failures;
        total.errors += r.errors;
    }
    Ok(total)
}

fn run_thread(
    spec: CellSpec,
    targets: &Targets,
    thread: usize,
    barrier: &std::sync::Barrier,
) -> Result<CellResult, String> {
    let made = make_transport(&spec, targets);
    // Every thread reaches the barrier, even one whose setup failed, so none waits forever.
    barrier.wait();
    let (transport, base) = made?;
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
    let done = Rc::new(Cell::new(0usize));
    let start = Instant::now();
    let deadline = start + spec.duration;
    let slot_bytes = spec.size.max(64).next_multiple_of(64) as u64;
    for task in 0..spec.depth {
        let qp = qp.clone();
        let (hist, ops, failures, errors, done) = (
            hist.clone(),
            ops.clone(),
            failures.clone(),
            errors.clone(),
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
                let ok = match spec.verb {
                    Verb::Read => qp.read(addr, spec.size as u32).await.is_ok(),
                    Verb::Write => qp.write(addr, payload.clone()).await.is_ok(),
                    Verb::Faa => qp.faa(addr, 1).await.is_ok(),
                    Verb::Cas => match qp.cas(addr, guess, guess.wrapping_add(1)).await {
                        Ok(seen) => {
                            if seen == guess {
                                guess = guess.wrapping_add(1);
                            } else {
                                failures.set(failures.get() + 1);
                                guess = seen;
                            }
                            true
                        }
                        Err(_) => false,
                    },
                };
                let t1 = Instant::now();
                let ns = t1.duration_since(t0).as_nanos() as u64;
                t0 = t1;
                if ok {
                    let _ = hist.borrow_mut().record(ns.max(1));
                    ops.set(ops.get() + 1);
                } else {
                    errors.set(errors.get() + 1);
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
        cpu: Duration::ZERO,
    })
}
