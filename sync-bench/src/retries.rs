//! Retries per update under contention with SMART's conflict avoidance off and on
//! (SMART, ASPLOS'24, §3.3 and §4.3, Fig. 14: 11.5 retries per update without conflict
//! avoidance, 1.1 with it, at θ = 0.99 and 96 threads).
//!
//! An embedded cluster (one memory node over soft RoCE) holds a Clover table and a RACE
//! table of `keys` keys. `threads` threads, one session each, run `tasks` concurrent
//! update loops per session (100 % updates, keys Zipf-distributed with θ = 0.99 by
//! default) for the cell's duration. What changes between modes is only each session's
//! worker configuration:
//!
//! - **off**: no backoff (a failed CAS is retried at once) and no admission throttle;
//! - **backoff**: truncated exponential backoff with the dynamic limit, no admission
//!   throttle;
//! - **on**: backoff and per-thread admission throttling together (SMART's conflict
//!   avoidance, the library's default).
//!
//! Work-request credits stay off in every mode (they address NIC cache thrashing,
//! which soft RoCE does not have). A retry is a failed link CAS (Clover) or slot CAS
//! (RACE) — an extra round of the write; restarted traversals are counted apart.

use std::cell::Cell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use kvstore::{Client, ClientOptions, KvError, TableSpec, TransportKind};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use testbed::{Embedded, EmbeddedOptions};
use verbs::throttle::{AdmissionConfig, BackoffConfig, CreditConfig};
use verbs::worker::WorkerConfig;

use crate::compare::Zipf;

/// Value bytes of every update.
pub const VALUE_LEN: usize = 64;

/// Which index a cell updates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Index {
    /// Clover chains: an update appends a node and links it to the tail by CAS.
    Clover,
    /// RACE hashing: an update writes a KV block and swings the slot by CAS.
    Race,
}

impl Index {
    /// Name in tables and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Index::Clover => "clover",
            Index::Race => "race",
        }
    }

    fn spec(self) -> TableSpec {
        match self {
            Index::Clover => TableSpec::clover(256),
            Index::Race => TableSpec::race(256),
        }
    }
}

impl std::str::FromStr for Index {
    type Err = String;
    fn from_str(s: &str) -> Result<Index, String> {
        match s {
            "clover" => Ok(Index::Clover),
            "race" => Ok(Index::Race),
            o => Err(format!("unknown index {o:?}: use clover or race")),
        }
    }
}

/// Which conflict-avoidance techniques are on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Neither backoff nor admission throttling.
    Off,
    /// Backoff only.
    Backoff,
    /// Backoff and admission throttling.
    On,
}

impl Mode {
    /// Name in tables and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Off => "off",
            Mode::Backoff => "backoff",
            Mode::On => "on",
        }
    }

    /// The sessions' worker configuration in this mode, with backoff unit `t0` (and
    /// `t_M` = 1024 · `t0`, as by default).
    pub fn worker(self, t0: Duration) -> WorkerConfig {
        let unit = BackoffConfig {
            t0,
            t_max_limit: t0 * 1024,
            ..BackoffConfig::default()
        };
        let (backoff, admission) = match self {
            Mode::Off => (BackoffConfig::disabled(), AdmissionConfig::disabled()),
            Mode::Backoff => (unit, AdmissionConfig::disabled()),
            Mode::On => (unit, AdmissionConfig::default()),
        };
        WorkerConfig {
            credits: CreditConfig::disabled(),
            backoff,
            admission,
            ..WorkerConfig::default()
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Mode, String> {
        match s {
            "off" => Ok(Mode::Off),
            "backoff" => Ok(Mode::Backoff),
            "on" => Ok(Mode::On),
            o => Err(format!("unknown mode {o:?}: use off, backoff or on")),
        }
    }
}

/// One cell.
#[derive(Debug, Clone, Copy)]
pub struct RetriesSpec {
    /// Index.
    pub index: Index,
    /// Conflict avoidance.
    pub mode: Mode,
    /// Backoff unit `t0`, µs (ignored when the mode has no backoff).
    pub t0_us: u64,
    /// Threads (one session each).
    pub threads: usize,
    /// Update loops per session.
    pub tasks: usize,
    /// Zipf exponent of the key choice (0: uniform).
    pub theta: f64,
    /// Measured time.
    pub duration: Duration,
    /// Seed of the key choice.
    pub seed: u64,
}

/// What one cell measured.
#[derive(Debug, Clone, Default)]
pub struct RetriesCell {
    /// Updates that succeeded.
    pub updates: u64,
    /// Updates that failed (e.g. still contended after the attempt bound).
    pub errors: u64,
    /// Wall time (the longest thread).
    pub elapsed: Duration,
    /// Table operations the sessions finished (successes and failures).
    pub operations: u64,
    /// Failed index CASes (link CAS in Clover, slot CAS in RACE) of those operations.
    pub cas_failures: u64,
    /// Traversals they restarted.
    pub restarts: u64,
    /// Round trips (batches awaited) they made.
    pub round_trips: u64,
    /// Work requests they posted.
    pub work_requests: u64,
    /// Packets the sessions' transports sent again (lost or late answers).
    pub retransmissions: u64,
}

impl RetriesCell {
    /// Successful updates per second.
    pub fn ops_per_sec(&self) -> f64 {
        self.updates as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    fn per_op(&self, v: u64) -> f64 {
        v as f64 / self.operations.max(1) as f64
    }

    /// Failed index CASes per update.
    pub fn retries_per_op(&self) -> f64 {
        self.per_op(self.cas_failures)
    }

    /// Restarted traversals per update.
    pub fn restarts_per_op(&self) -> f64 {
        self.per_op(self.restarts)
    }

    /// Work requests per update.
    pub fn verbs_per_op(&self) -> f64 {
        self.per_op(self.work_requests)
    }

    /// Retransmitted packets per update.
    pub fn retransmissions_per_op(&self) -> f64 {
        self.per_op(self.retransmissions)
    }

    /// Round trips per update.
    pub fn round_trips_per_op(&self) -> f64 {
        self.per_op(self.round_trips)
    }
}

/// The cluster, one client per mode and backoff unit, and the two loaded tables.
pub struct Bench {
    _cluster: Embedded,
    clients: Vec<((Mode, u64), Client)>,
    keys: u64,
}

fn key(i: u64) -> Vec<u8> {
    format!("user{i:08}").into_bytes()
}

impl Bench {
    /// Start one memory node of `capacity` bytes over soft RoCE, create and load both
    /// tables with `keys` keys, and connect a client for each (mode, backoff unit in µs)
    /// of `variants`.
    pub fn start(keys: u64, capacity: u64, variants: &[(Mode, u64)]) -> Result<Bench, String> {
        let options = EmbeddedOptions {
            memnodes: 1,
            capacity,
            transport: TransportKind::Udp,
            ..EmbeddedOptions::default()
        };
        let cluster =
            Embedded::start(&options).map_err(|e| format!("starting the cluster: {e}"))?;
        let url = cluster.metadata_url();
        let mut clients = Vec::new();
        for &(mode, t0_us) in variants {
            let mut o = ClientOptions::with_transport(TransportKind::Udp);
            o.connection.worker = mode.worker(Duration::from_micros(t0_us));
            let c = Client::in_process(&url, o, HashMap::new(), Box::new(()))
                .map_err(|e| format!("connecting a client: {e}"))?;
            clients.push(((mode, t0_us), c));
        }
        let Some((_, loader)) = clients.first() else {
            return Err("no modes to measure".into());
        };
        for index in [Index::Clover, Index::Race] {
            loader
                .create_table(index.name(), &index.spec())
                .map_err(|e| format!("creating the {} table: {e}", index.name()))?;
        }
        let s = loader.session().map_err(|e| e.to_string())?;
        for index in [Index::Clover, Index::Race] {
            let t = s.table(index.name()).map_err(|e| e.to_string())?;
            let value = vec![0u8; VALUE_LEN];
            s.block_on(async {
                for i in 0..keys {
                    t.insert(&key(i), &value).await?;
                }
                Ok::<(), KvError>(())
            })
            .map_err(|e| format!("loading the {} table: {e}", index.name()))?;
        }
        s.quiesce();
        Ok(Bench {
            _cluster: cluster,
            clients,
            keys,
        })
    }

    /// Run one cell.
    pub fn run(&self, spec: RetriesSpec) -> Result<RetriesCell, String> {
        let client = self
            .clients
            .iter()
            .find(|(v, _)| *v == (spec.mode, spec.t0_us))
            .map(|(_, c)| c)
            .ok_or_else(|| format!("no client for mode {}", spec.mode.name()))?;
        let zipf = Zipf::new(self.keys, spec.theta);
        let barrier = std::sync::Barrier::new(spec.threads);
        let results: Vec<Result<RetriesCell, String>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..spec.threads)
                .map(|th| {
                    let (client, zipf, barrier) = (client, &zipf, &barrier);
                    scope.spawn(move || {
                        let opened = client
                            .session()
                            .and_then(|s| s.table(spec.index.name()).map(|t| (s, t)))
                            .map_err(|e| format!("opening a session: {e}"));
                        barrier.wait();
                        let (s, t) = opened?;
                        run_session(&s, &t, spec, zipf, th)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err("a thread panicked".into())))
                .collect()
        });
        let mut total = RetriesCell::default();
        for r in results {
            let r = r?;
            total.updates += r.updates;
            total.errors += r.errors;
            total.operations += r.operations;
            total.elapsed = total.elapsed.max(r.elapsed);
            total.cas_failures += r.cas_failures;
            total.restarts += r.restarts;
            total.round_trips += r.round_trips;
            total.work_requests += r.work_requests;
            total.retransmissions += r.retransmissions;
        }
        Ok(total)
    }
}

fn run_session(
    s: &kvstore::Session,
    t: &kvstore::Table,
    spec: RetriesSpec,
    zipf: &Zipf,
    thread: usize,
) -> Result<RetriesCell, String> {
    let before = s.stats();
    let transport_before = s.transport_stats();
    let updates = Rc::new(Cell::new(0u64));
    let errors = Rc::new(Cell::new(0u64));
    let left = Rc::new(Cell::new(spec.tasks));
    let start = Instant::now();
    let deadline = start + spec.duration;
    for task in 0..spec.tasks {
        let (t, updates, errors, left) = (t.clone(), updates.clone(), errors.clone(), left.clone());
        let zipf = zipf.clone();
        let mut rng = SmallRng::seed_from_u64(spec.seed ^ ((thread as u64) << 32) ^ task as u64);
        s.spawn(async move {
            let mut value = vec![0u8; VALUE_LEN];
            let mut n = 0u64;
            while Instant::now() < deadline {
                n += 1;
                value[..8].copy_from_slice(&n.to_le_bytes());
                match t.update(&key(zipf.sample(&mut rng)), &value).await {
                    Ok(()) => updates.set(updates.get() + 1),
                    Err(_) => errors.set(errors.get() + 1),
                }
            }
            left.set(left.get() - 1);
        });
    }
    let l = left.clone();
    let worker = s.worker().clone();
    s.block_on(async move {
        while l.get() > 0 {
            worker.sleep(Duration::from_micros(200)).await;
        }
    });
    let elapsed = start.elapsed();
    s.quiesce();
    let after = s.stats();
    let transport = s.transport_stats().since(&transport_before);
    let (a, b) = (&after.foreground, &before.foreground);
    Ok(RetriesCell {
        updates: updates.get(),
        errors: errors.get(),
        elapsed,
        operations: after.operations.saturating_sub(before.operations),
        cas_failures: a.cas_failures.saturating_sub(b.cas_failures),
        restarts: a.restarts.saturating_sub(b.restarts),
        round_trips: a.round_trips.saturating_sub(b.round_trips),
        work_requests: a.work_requests.saturating_sub(b.work_requests),
        retransmissions: transport.retransmissions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_switch_exactly_their_techniques() {
        let t0 = Duration::from_micros(16);
        let off = Mode::Off.worker(t0);
        assert!(!off.backoff.enabled && !off.admission.enabled && !off.credits.enabled);
        let b = Mode::Backoff.worker(t0);
        assert!(b.backoff.enabled && !b.admission.enabled && !b.credits.enabled);
        let on = Mode::On.worker(t0);
        assert!(on.backoff.enabled && on.admission.enabled && !on.credits.enabled);
        assert_eq!((on.backoff.t0, on.backoff.t_max_limit), (t0, t0 * 1024));
        for m in [Mode::Off, Mode::Backoff, Mode::On] {
            assert_eq!(m.name().parse::<Mode>(), Ok(m));
        }
        for i in [Index::Clover, Index::Race] {
            assert_eq!(i.name().parse::<Index>(), Ok(i));
        }
        assert!("hopscotch".parse::<Index>().is_err());
    }
}
