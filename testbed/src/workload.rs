//! A concurrent key-value workload on hot keys that records a history for the
//! linearizability checker ([`crate::lincheck`]).

use std::cell::Cell;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use kvstore::{AccessMode, Client, KvError, SessionStats, Table};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::history::{History, Op, Outcome};

/// Shape of a workload.
#[derive(Debug, Clone, Copy)]
pub struct Workload {
    /// Threads, one session each.
    pub threads: usize,
    /// Tasks per session.
    pub tasks: usize,
    /// Operations per task.
    pub ops_per_task: usize,
    /// Hot keys the operations pick from.
    pub keys: usize,
    /// Seed of the tasks' generators.
    pub seed: u64,
}

/// What a workload run produced.
pub struct Run {
    /// Every operation with an outcome the specification constrains.
    pub history: History,
    /// Each session's counters.
    pub stats: Vec<SessionStats>,
    /// Operations that failed in a way that leaves their effect open (e.g.
    /// `Unavailable`); they are left pending in the history.
    pub errors: Vec<String>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn outcome(op: &Op, r: &Result<Option<Vec<u8>>, KvError>) -> Option<Outcome> {
    match (op, r) {
        (Op::Get, Ok(Some(v))) => Some(Outcome::Value(v.clone())),
        (_, Ok(_)) => Some(Outcome::Ok),
        (_, Err(KvError::NotFound)) => Some(Outcome::NotFound),
        (Op::Insert(_), Err(KvError::AlreadyExists)) => Some(Outcome::AlreadyExists),
        // Unavailable, Contended, ...: the operation may or may not have taken effect.
        _ => None,
    }
}

async fn apply(t: &Table, key: &[u8], op: &Op) -> Result<Option<Vec<u8>>, KvError> {
    match op {
        // An absent key is recorded as the history's `NotFound` outcome.
        Op::Get => t.get(key).await?.map(Some).ok_or(KvError::NotFound),
        Op::Put(v) => t.put(key, v).await.map(|_| None),
        Op::Insert(v) => t.insert(key, v).await.map(|_| None),
        Op::Update(v) => t.update(key, v).await.map(|_| None),
        Op::Delete => t.delete(key).await.map(|_| None),
    }
}

/// Run `w` against `table`: `threads` sessions with `tasks` tasks each, random
/// operations on `keys` hot keys, unique values; returns the history.
pub fn run(client: &Client, table: &str, w: Workload) -> Run {
    run_with_values(client, table, w, 0)
}

/// [`run`] with every value padded to `value_len` bytes by repeating its unique
/// tag (so values span several lines and a torn value is never a written one).
pub fn run_with_values(client: &Client, table: &str, w: Workload, value_len: usize) -> Run {
    run_inner(&[(client.clone(), None)], table, w, value_len)
}

/// [`run`] with session `i`'s table handle set to access mode `modes[i % len]`
/// ([`kvstore::Table::set_access`]), so one-sided, RPC and hybrid clients share the
/// table. A mode the table refuses ends that session (an error in the run).
pub fn run_with_access(client: &Client, table: &str, w: Workload, modes: &[AccessMode]) -> Run {
    let sessions: Vec<_> = modes.iter().map(|&m| (client.clone(), Some(m))).collect();
    if sessions.is_empty() {
        return run(client, table, w);
    }
    run_inner(&sessions, table, w, 0)
}

/// [`run_with_access`] with session `i` opened by client `clients[i % len].0` in
/// mode `clients[i % len].1`, so clients with different options (e.g. RPC
/// transports) share the table. `clients` must not be empty.
pub fn run_with_clients(clients: &[(Client, AccessMode)], table: &str, w: Workload) -> Run {
    let sessions: Vec<_> = clients.iter().map(|(c, m)| (c.clone(), Some(*m))).collect();
    run_inner(&sessions, table, w, 0)
}

fn run_inner(
    sessions: &[(Client, Option<AccessMode>)],
    table: &str,
    w: Workload,
    value_len: usize,
) -> Run {
    let history = Arc::new(Mutex::new(History::new()));
    let errors = Arc::new(Mutex::new(Vec::new()));
    let base = Instant::now();
    let now = move || base.elapsed().as_nanos() as u64;
    let mut handles = Vec::new();
    for th in 0..w.threads {
        let Some((client, mode)) = sessions.get(th % sessions.len().max(1)).cloned() else {
            lock(&errors).push("no client to open a session with".to_owned());
            break;
        };
        let history = history.clone();
        let errors = errors.clone();
        let table = table.to_owned();
        handles.push(std::thread::spawn(move || {
            let opened = client.session().and_then(|s| {
                let t = s.table(&table)?;
                if let Some(mode) = mode {
                    t.set_access(mode)?;
                }
                Ok((s, t))
            });
            let (s, t) = match opened {
                Ok(st) => st,
                Err(e) => {
                    lock(&errors).push(format!("opening a session on {table}: {e}"));
                    return SessionStats::default();
                }
            };
            let left = Rc::new(Cell::new(w.tasks));
            for task in 0..w.tasks {
                let t = t.clone();
                let history = history.clone();
                let errors = errors.clone();
                let left = left.clone();
                let client_id = (th * w.tasks + task) as u64;
                let mut rng = SmallRng::seed_from_u64(w.seed ^ (client_id << 20));
                s.spawn(async move {
                    for i in 0..w.ops_per_task {
                        let key = format!("hot{}", rng.random_range(0..w.keys)).into_bytes();
                        let tag = format!("c{client_id}-{i};").into_bytes();
                        let mut value = tag.clone();
                        while value.len() < value_len {
                            value.extend_from_slice(&tag);
                        }
                        if value_len > 0 {
                            value.truncate(value_len);
                        }
                        let op = match rng.random_range(0..100) {
                            0..40 => Op::Get,
                            40..60 => Op::Put(value),
                            60..72 => Op::Insert(value),
                            72..88 => Op::Update(value),
                            _ => Op::Delete,
                        };
                        let id = lock(&history).invoke(client_id, key.clone(), op.clone(), now());
                        let r = apply(&t, &key, &op).await;
                        let at = now();
                        match outcome(&op, &r) {
                            Some(o) => {
                                if let Err(e) = lock(&history).respond(id, at, o) {
                                    lock(&errors).push(format!("recording {op}: {e}"));
                                }
                            }
                            None => lock(&errors).push(format!(
                                "{op} on {:?}: {r:?}",
                                String::from_utf8_lossy(&key)
                            )),
                        }
                    }
                    left.set(left.get() - 1);
                });
            }
            let l = left.clone();
            let worker = s.worker().clone();
            s.block_on(async move {
                while l.get() > 0 {
                    worker.sleep(std::time::Duration::from_micros(100)).await;
                }
            });
            s.quiesce();
            s.stats()
        }));
    }
    let stats = handles
        .into_iter()
        .map(|h| {
            h.join().unwrap_or_else(|_| {
                lock(&errors).push("a worker thread panicked".into());
                SessionStats::default()
            })
        })
        .collect();
    let history = Arc::try_unwrap(history)
        .map(|m| m.into_inner().unwrap_or_else(|p| p.into_inner()))
        .unwrap_or_else(|a| lock(&a).clone());
    let errors = lock(&errors).clone();
    Run {
        history,
        stats,
        errors,
    }
}
