//! Failover time: a client reads and writes keys homed on a memory node of a table of
//! two or three copies; the node crashes; how long until an operation on those keys succeeds
//! again, and what the operations in between reported.
//!
//! Each run starts its own cluster. A worker thread alternates `put` and `get` over
//! the affected keys on its own session; the main thread crashes the keys' home
//! memory node after a warm-up. The failover time of a run is the time from the
//! crash to the completion of the first successful operation that started after it
//! (reads and writes also separately), counted from the moment the node stopped
//! serving. The metadata service fails the node over once its last heartbeat is
//! older than the heartbeat timeout (nodes heartbeat every third of it), so the
//! failover time follows the timeout.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use dmkv_api::metadata::TableState;
use kvstore::KvError;

use crate::cluster::{self, CrashDetection};
use crate::index::BenchIndex;

/// The table the runs use.
const TABLE: &str = "failover";

/// What the failover runs do.
#[derive(Clone, Debug)]
pub struct FailoverConfig {
    /// The index of the table.
    pub index: BenchIndex,
    /// Runs (each on a new cluster).
    pub runs: usize,
    /// Copies of the table's data (2 or 3).
    pub replication: u32,
    /// Memory nodes per cluster (at least `replication`).
    pub memnodes: usize,
    /// Bytes of memory per memory node.
    pub capacity: u64,
    /// The metadata service's heartbeat timeout (it fails a silent node over then).
    pub heartbeat_timeout: Duration,
    /// How quickly the client gives up on the crashed node.
    pub detection: CrashDetection,
    /// Keys homed on the crashed node that the worker uses.
    pub keys: usize,
    /// Value length in bytes.
    pub value_len: usize,
    /// Operations before the crash.
    pub warmup: Duration,
    /// Successful operations after the crash before a run ends.
    pub successes_after: usize,
    /// A run that sees no success for this long after the crash fails.
    pub give_up_after: Duration,
}

/// What one run observed.
#[derive(Clone, Debug, PartialEq)]
pub struct FailoverRun {
    /// The memnode that crashed.
    pub victim: u64,
    /// Keys homed on it that the worker used.
    pub keys: usize,
    /// Operations that completed before the crash.
    pub ops_before_crash: u64,
    /// From the crash to the first failed operation, ms (the client noticing).
    pub first_error_ms: Option<f64>,
    /// From the crash to the first success of an operation started after it, ms.
    pub failover_ms: f64,
    /// The same for reads only.
    pub first_read_ms: Option<f64>,
    /// The same for writes only.
    pub first_write_ms: Option<f64>,
    /// Operations that reported `OutcomeUnknown` between the crash and the first success.
    pub outcome_unknown: u64,
    /// Operations that reported `Unavailable` in that interval.
    pub unavailable: u64,
    /// Operations that failed otherwise in that interval.
    pub other_errors: u64,
    /// The table's state afterwards (`degraded` once the copies on the victim are gone).
    pub table_state: String,
    /// How long the failover waited for the resynchronisation of the surviving
    /// copies of the sets the victim was the primary of, ms (`None`: there was
    /// none — it was no primary, or a single copy survived).
    pub resync_ms: Option<f64>,
}

/// One finished operation of the worker.
struct Op {
    started: Instant,
    finished: Instant,
    write: bool,
    result: Result<(), KvError>,
}

/// Runs the failover measurement `config.runs` times, one after another.
pub fn measure(config: &FailoverConfig) -> Result<Vec<FailoverRun>, String> {
    if !(2..=3).contains(&config.replication) {
        return Err(format!(
            "failover runs need a table of 2 or 3 copies, not {}",
            config.replication
        ));
    }
    if config.memnodes < config.replication as usize {
        return Err(format!(
            "failover runs need at least {r} memory nodes for tables of {r} copies",
            r = config.replication
        ));
    }
    if config.keys == 0 {
        return Err("failover runs need at least 1 key".into());
    }
    (0..config.runs).map(|i| run_once(config, i)).collect()
}

fn run_once(config: &FailoverConfig, run: usize) -> Result<FailoverRun, String> {
    let (mut embedded, client) = cluster::start(
        config.memnodes,
        config.capacity,
        config.heartbeat_timeout,
        config.detection,
    )?;
    let ids = embedded.memnode_ids();
    let victim = ids[run % ids.len()];
    client
        .create_replicated_table(TABLE, &config.index.spec(256)?, config.replication)
        .map_err(|e| format!("creating the replicated table: {e}"))?;
    // Write enough keys that `keys` of them are homed on the victim, then pick those.
    let candidates: Vec<Vec<u8>> = (0..config.keys * config.memnodes * 4)
        .map(cluster::key_name)
        .collect();
    {
        let s = client.session().map_err(|e| format!("session: {e}"))?;
        let t = s
            .table(TABLE)
            .map_err(|e| format!("opening the table: {e}"))?;
        for k in &candidates {
            let v = cluster::value_for(k, 0, 0, config.value_len);
            s.block_on(t.put(k, &v))
                .map_err(|e| format!("writing the keys before the crash: {e}"))?;
        }
        s.quiesce();
    }
    let keys = keys_for(config, &client, victim, candidates)?;
    if keys.is_empty() {
        return Err(format!("no key of the table is homed on memnode {victim}"));
    }
    let crashed_at: OnceLock<Instant> = OnceLock::new();
    let done = AtomicBool::new(false);
    let stop = AtomicBool::new(false);
    let ops = std::thread::scope(|scope| -> Result<Vec<Op>, String> {
        let worker = scope.spawn(|| work(&client, &keys, config, &crashed_at, &done, &stop));
        std::thread::sleep(config.warmup);
        // The clock starts once the node is gone: an operation that started earlier
        // may still have been served.
        let crashed = embedded.crash(victim);
        let at = Instant::now();
        let _ = crashed_at.set(at);
        let deadline = at + config.give_up_after;
        while !done.load(Ordering::Acquire) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        stop.store(true, Ordering::Release);
        let ops = worker
            .join()
            .map_err(|_| "the failover worker panicked".to_string())??;
        crashed.map_err(|e| format!("crashing memnode {victim}: {e}"))?;
        Ok(ops)
    })?;
    let crash = *crashed_at
        .get()
        .ok_or_else(|| "the crash time was not recorded".to_string())?;
    let state = client
        .table(TABLE)
        .map(|t| state_name(t.health.state))
        .unwrap_or_else(|e| format!("unknown ({e})"));
    let meta = client.metadata();
    let resync_ms = match cluster::counter(meta, "dmkv_metadata_failover_resyncs_total")? {
        0 => None,
        _ => Some(cluster::metric(meta, "dmkv_metadata_failover_resync_seconds_total")? * 1000.0),
    };
    let mut r = summarize(&ops, crash, victim, keys.len(), state).ok_or_else(|| {
        format!(
            "run {}: no operation on the keys of crashed memnode {victim} succeeded within {:?}",
            run + 1,
            config.give_up_after
        )
    })?;
    r.resync_ms = resync_ms;
    Ok(r)
}

/// The keys the worker uses: those homed on `victim` when the index's keys have
/// homes, else the first `config.keys` written.
fn keys_for(
    config: &FailoverConfig,
    client: &kvstore::Client,
    victim: u64,
    candidates: Vec<Vec<u8>>,
) -> Result<Vec<Vec<u8>>, String> {
    if !config.index.keys_have_homes() {
        return Ok(candidates.into_iter().take(config.keys).collect());
    }
    let homes = cluster::homes(client, TABLE, &candidates)?;
    Ok(candidates
        .into_iter()
        .filter(|k| homes.get(k) == Some(&victim))
        .take(config.keys)
        .collect())
}

/// The worker: alternate put and get over `keys` until told to stop or until
/// `config.successes_after` operations started after the crash succeeded.
fn work(
    client: &kvstore::Client,
    keys: &[Vec<u8>],
    config: &FailoverConfig,
    crashed_at: &OnceLock<Instant>,
    done: &AtomicBool,
    stop: &AtomicBool,
) -> Result<Vec<Op>, String> {
    let s = client.session().map_err(|e| format!("session: {e}"))?;
    let t = s
        .table(TABLE)
        .map_err(|e| format!("opening the table: {e}"))?;
    let mut ops = Vec::new();
    let mut successes_after = 0;
    let mut seq = 1u64;
    while !stop.load(Ordering::Acquire) {
        let key = &keys[(seq as usize / 2) % keys.len()];
        let write = seq.is_multiple_of(2);
        let started = Instant::now();
        let result = if write {
            let v = cluster::value_for(key, 0, seq, config.value_len);
            s.block_on(t.put(key, &v))
        } else {
            s.block_on(t.get(key)).map(|_| ())
        };
        let finished = Instant::now();
        if result.is_ok() && crashed_at.get().is_some_and(|c| started >= *c) {
            successes_after += 1;
        }
        ops.push(Op {
            started,
            finished,
            write,
            result,
        });
        seq += 1;
        if successes_after >= config.successes_after {
            done.store(true, Ordering::Release);
            break;
        }
    }
    s.quiesce();
    Ok(ops)
}

/// A table state as the API spells it (`healthy`, `degraded`, `lost`).
pub fn state_name(state: TableState) -> String {
    format!("{state:?}").to_lowercase()
}

fn ms_since(crash: Instant, t: Instant) -> f64 {
    t.saturating_duration_since(crash).as_secs_f64() * 1000.0
}

/// The run's figures from the worker's operations; `None` when no operation started
/// after the crash succeeded.
fn summarize(
    ops: &[Op],
    crash: Instant,
    victim: u64,
    keys: usize,
    table_state: String,
) -> Option<FailoverRun> {
    let first_ok = |write: Option<bool>| {
        ops.iter()
            .filter(|o| o.started >= crash && o.result.is_ok())
            .filter(|o| write.is_none_or(|w| o.write == w))
            .map(|o| o.finished)
            .min()
    };
    let recovered = first_ok(None)?;
    let in_between = ops
        .iter()
        .filter(|o| o.finished >= crash && o.finished <= recovered);
    let (mut unknown, mut unavailable, mut other) = (0, 0, 0);
    for o in in_between {
        match &o.result {
            Ok(()) => {}
            Err(KvError::OutcomeUnknown(_)) => unknown += 1,
            Err(KvError::Unavailable(_)) => unavailable += 1,
            Err(_) => other += 1,
        }
    }
    Some(FailoverRun {
        victim,
        keys,
        ops_before_crash: ops.iter().filter(|o| o.finished < crash).count() as u64,
        first_error_ms: ops
            .iter()
            .filter(|o| o.finished >= crash && o.result.is_err())
            .map(|o| o.finished)
            .min()
            .map(|t| ms_since(crash, t)),
        failover_ms: ms_since(crash, recovered),
        first_read_ms: first_ok(Some(false)).map(|t| ms_since(crash, t)),
        first_write_ms: first_ok(Some(true)).map(|t| ms_since(crash, t)),
        outcome_unknown: unknown,
        unavailable,
        other_errors: other,
        table_state,
        resync_ms: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kvstore::Cause;

    fn op(crash: Instant, start_ms: u64, end_ms: u64, write: bool, r: Result<(), KvError>) -> Op {
        Op {
            started: crash + Duration::from_millis(start_ms),
            finished: crash + Duration::from_millis(end_ms),
            write,
            result: r,
        }
    }

    #[test]
    fn failover_time_is_the_first_success_started_after_the_crash() {
        let base = Instant::now();
        let crash = base + Duration::from_millis(100);
        let ops = vec![
            op(base, 0, 1, true, Ok(())),
            // Started before the crash, finished after it: not a recovery.
            op(base, 99, 150, false, Ok(())),
            op(
                base,
                150,
                300,
                true,
                Err(KvError::OutcomeUnknown(Cause::new("qp"))),
            ),
            op(base, 300, 500, false, Err(KvError::unavailable("down"))),
            op(base, 500, 900, false, Ok(())),
            op(base, 900, 950, true, Ok(())),
        ];
        let r = summarize(&ops, crash, 3, 2, "degraded".into()).unwrap();
        assert_eq!(r.failover_ms, 800.0);
        assert_eq!(r.first_read_ms, Some(800.0));
        assert_eq!(r.first_write_ms, Some(850.0));
        assert_eq!(r.first_error_ms, Some(200.0));
        assert_eq!(
            (r.outcome_unknown, r.unavailable, r.other_errors),
            (1, 1, 0)
        );
        assert_eq!(r.ops_before_crash, 1);
        assert_eq!((r.victim, r.keys), (3, 2));
        // Without a success after the crash there is no failover time.
        assert!(summarize(&ops[..4], crash, 3, 2, String::new()).is_none());
    }

    #[test]
    fn too_few_memnodes_or_copies_are_refused() {
        let mut config = FailoverConfig {
            index: BenchIndex::Clover,
            runs: 1,
            replication: 2,
            memnodes: 1,
            capacity: 1 << 20,
            heartbeat_timeout: Duration::from_millis(300),
            detection: CrashDetection::default(),
            keys: 1,
            value_len: 16,
            warmup: Duration::ZERO,
            successes_after: 1,
            give_up_after: Duration::from_secs(1),
        };
        let e = measure(&config).unwrap_err();
        assert!(e.contains("at least 2 memory nodes"), "{e}");
        config.replication = 3;
        config.memnodes = 2;
        let e = measure(&config).unwrap_err();
        assert!(
            e.contains("at least 3 memory nodes for tables of 3 copies"),
            "{e}"
        );
        config.replication = 1;
        let e = measure(&config).unwrap_err();
        assert!(e.contains("2 or 3 copies, not 1"), "{e}");
    }
}
