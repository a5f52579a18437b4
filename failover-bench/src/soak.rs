//! The soak: YCSB-A-like reads and updates with data integrity on tables of two copies
//! while memory nodes crash, one every `kill_every`.
//!
//! A table of two copies survives one crash: after it, the sets that held the crashed
//! node have one member left until re-replication gives them a new one (which needs a
//! memory node outside the set), and a second crash there before that would lose data.
//! The soak therefore runs in periods of `kill_every`. Each period
//! writes a fresh table, crashes one memory node in its middle, reads every key back
//! at its end and checks it against what the writers were told, then drops the table
//! and restarts the crashed node under its name with empty memory
//! ([`testbed::Embedded::restart`]). Memory nodes crash in turn, each once per round
//! of as many periods as there are nodes.
//!
//! With [`SoakConfig::one_table`] the soak keeps **one table through every crash**
//! instead, as an operator's table lives: the crashed node restarts under its name with
//! empty memory once the service has failed it over, the metadata service re-replicates
//! the sets that lost it (onto the restarted node or another one), and the next crash
//! comes only after the table reads `healthy` again — a crash of a set's last copy
//! would lose data, which is what two copies promise against one failure at a time.
//! Every key is read back at the end of every period, and the writers' models carry
//! over from period to period, so a write lost by any failover or copy is found.
//!
//! Every key belongs to one writer thread, whose writes use values never reused, so
//! [`KeyModel`] knows which values each key may hold: a read (during the run or at the
//! end) that returns anything else is counted — a lost acknowledged write when some
//! write of the key had been acknowledged.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use kvstore::{Client, KvError};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::cluster::{self, CrashDetection};
use crate::failover::state_name;
use crate::integrity::{KeyModel, WriteOutcome};

/// What the soak does.
#[derive(Clone, Debug)]
pub struct SoakConfig {
    /// How long the soak runs, in minutes (rounded up to whole periods).
    pub minutes: f64,
    /// One crash per this long (the length of a period).
    pub kill_every: Duration,
    /// Memory nodes in the cluster (at least 2).
    pub memnodes: usize,
    /// Bytes of memory per memory node.
    pub capacity: u64,
    /// The metadata service's heartbeat timeout.
    pub heartbeat_timeout: Duration,
    /// How quickly the client gives up on a crashed node.
    pub detection: CrashDetection,
    /// Keys per period's table.
    pub keys: usize,
    /// Writer threads (one session each; each owns every `threads`-th key).
    pub threads: usize,
    /// Share of operations that are reads (YCSB A: 0.5).
    pub read_fraction: f64,
    /// Value length in bytes.
    pub value_len: usize,
    /// Seed of the writers' key and operation choices.
    pub seed: u64,
    /// Keep one table through every crash (re-replicated after each) instead of a fresh
    /// table per period.
    pub one_table: bool,
    /// The index of the soak's tables.
    pub index: crate::index::BenchIndex,
    /// With `one_table`: how long after a crash the table may take to read `healthy`
    /// again before the soak stops (a second crash of a degraded set could lose data).
    pub heal_timeout: Duration,
}

impl SoakConfig {
    /// Periods the soak runs: `minutes` rounded up to whole `kill_every`s (at least 1).
    pub fn periods(&self) -> usize {
        let total = self.minutes.max(0.0) * 60.0;
        let each = self.kill_every.as_secs_f64().max(1e-3);
        ((total / each).ceil() as usize).max(1)
    }
}

/// One crash of the soak.
#[derive(Clone, Debug, PartialEq)]
pub struct CrashRecord {
    /// The period (from 1).
    pub period: usize,
    /// The memnode that crashed.
    pub victim: u64,
    /// When, in seconds since the soak started.
    pub at_s: f64,
    /// The longest operation in flight after the crash, ms: how long the crash
    /// stalled a client (its operations on keys with a copy there wait for the failover).
    pub longest_stall_ms: f64,
    /// The table's state after the period (`degraded`: the service failed the node over).
    pub table_state: String,
    /// With one table: seconds from the crash until the table read `healthy` again
    /// (failed over, the node restarted, its sets re-replicated); `None` otherwise.
    pub healed_after_s: Option<f64>,
    /// With one table: the service was seen to fail the node over (the table read
    /// `degraded`) before the node restarted.
    pub seen_degraded: bool,
}

/// The soak's findings.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SoakReport {
    /// Periods run.
    pub periods: usize,
    /// Seconds the soak took.
    pub elapsed_s: f64,
    /// Operations done (reads and writes, during the periods).
    pub operations: u64,
    /// Writes acknowledged.
    pub acknowledged_writes: u64,
    /// Writes that reported `OutcomeUnknown`.
    pub unknown_writes: u64,
    /// Failed operations by `operation kind` (`put outcome_unknown`, `get unavailable`, …).
    pub failed: BTreeMap<String, u64>,
    /// The first error message seen of each kind in `failed`.
    pub failure_examples: BTreeMap<String, String>,
    /// Reads during the run that returned a value the key could not hold.
    pub stale_reads: u64,
    /// Keys whose final value lost an acknowledged write.
    pub lost_acknowledged_writes: u64,
    /// Keys whose final value was one no write could have left (without an acknowledged write).
    pub unexpected_values: u64,
    /// Keys that could not be read back at the end.
    pub unverified_keys: u64,
    /// Keys read back and checked at the end.
    pub verified_keys: u64,
    /// The crashes.
    pub crashes: Vec<CrashRecord>,
    /// Why the soak stopped before its last period (one table that did not heal).
    pub stopped: Option<String>,
}

impl SoakReport {
    /// Crashes after which the table was failed over (reads `degraded`).
    pub fn failovers(&self) -> usize {
        self.crashes
            .iter()
            .filter(|c| c.table_state == "degraded" || c.seen_degraded)
            .count()
    }

    /// Failed operations other than writes reported `OutcomeUnknown`: what a client of
    /// a table of two copies should never see while one memory node at a time fails.
    pub fn failures_besides_outcome_unknown(&self) -> u64 {
        self.failed
            .iter()
            .filter(|(kind, _)| !kind.ends_with("outcome_unknown"))
            .map(|(_, n)| *n)
            .sum()
    }

    /// With one table: the crashes after which the table was whole again.
    pub fn healed(&self) -> usize {
        self.crashes
            .iter()
            .filter(|c| c.healed_after_s.is_some())
            .count()
    }
}

/// What one writer thread did in a period.
#[derive(Default)]
struct WriterTally {
    models: Vec<(Vec<u8>, KeyModel)>,
    operations: u64,
    acknowledged: u64,
    unknown: u64,
    failed: BTreeMap<String, u64>,
    failure_examples: BTreeMap<String, String>,
    stale_reads: u64,
}

/// Shared between a period's writers and the thread that crashes the node.
struct PeriodClock {
    crashed_at: OnceLock<Instant>,
    longest_stall: Mutex<Duration>,
    deadline: Instant,
}

/// Runs the soak, calling `progress` with a line after every period.
pub fn run(config: &SoakConfig, mut progress: impl FnMut(&str)) -> Result<SoakReport, String> {
    if config.memnodes < 2 {
        return Err("the soak needs at least 2 memory nodes for tables of two copies".into());
    }
    if config.one_table && config.memnodes < 3 {
        return Err(
            "the one-table soak needs at least 3 memory nodes: a set that lost a member is \
             re-replicated onto a node outside it"
                .into(),
        );
    }
    if config.threads == 0 || config.keys < config.threads {
        return Err(format!(
            "the soak needs at least one writer thread and one key per thread ({} keys, {} threads)",
            config.keys, config.threads
        ));
    }
    if !(0.0..=1.0).contains(&config.read_fraction) {
        return Err(format!(
            "the read fraction {} is not between 0 and 1",
            config.read_fraction
        ));
    }
    let (mut embedded, client) = cluster::start(
        config.memnodes,
        config.capacity,
        config.heartbeat_timeout,
        config.detection,
    )?;
    let ids = embedded.memnode_ids();
    let started = Instant::now();
    let mut report = SoakReport {
        periods: config.periods(),
        ..SoakReport::default()
    };
    let tuples = (config.keys as u64).saturating_mul(2).max(64);
    let spec = config
        .index
        .spec_for(config.value_len.max(64) as u64, tuples)?;
    if config.one_table {
        client
            .create_replicated_table(ONE_TABLE, &spec, 2)
            .map_err(|e| format!("creating table {ONE_TABLE}: {e}"))?;
    }
    // Each writer's keys and what it was told about them; carried over from period to
    // period when the table is.
    let mut models: Vec<Vec<(Vec<u8>, KeyModel)>> = (0..config.threads)
        .map(|w| writer_keys(config, w))
        .collect();
    for period in 0..report.periods {
        let victim = ids[period % ids.len()];
        let table = if config.one_table {
            ONE_TABLE.to_string()
        } else {
            models = (0..config.threads)
                .map(|w| writer_keys(config, w))
                .collect();
            let table = format!("soak{}", period + 1);
            client
                .create_replicated_table(&table, &spec, 2)
                .map_err(|e| format!("creating table {table}: {e}"))?;
            table
        };
        let load = !config.one_table || period == 0;
        let period_start = Instant::now();
        let clock = PeriodClock {
            crashed_at: OnceLock::new(),
            longest_stall: Mutex::new(Duration::ZERO),
            deadline: period_start + config.kill_every,
        };
        // One table: crash a third of the way in, so that the failover, the restart and
        // the copy all happen under the writers' load.
        let crash_at = if config.one_table {
            config.kill_every / 3
        } else {
            config.kill_every / 2
        };
        let carried = std::mem::take(&mut models);
        let (tallies, restarted, healed_at, seen_degraded) = std::thread::scope(
            |scope| -> Result<(Vec<WriterTally>, bool, Option<Instant>, bool), String> {
                let writers: Vec<_> = carried
                    .into_iter()
                    .enumerate()
                    .map(|(w, keys)| {
                        let (client, table, clock) = (&client, &table, &clock);
                        let seed = config.seed ^ ((period as u64) << 32) ^ w as u64;
                        scope
                            .spawn(move || write(client, table, config, w, keys, load, seed, clock))
                    })
                    .collect();
                std::thread::sleep(
                    (period_start + crash_at).saturating_duration_since(Instant::now()),
                );
                let crashed = embedded.crash(victim);
                let _ = clock.crashed_at.set(Instant::now());
                let mut restarted = false;
                let mut seen_degraded = false;
                if config.one_table && crashed.is_ok() {
                    // Restart the node once the service has taken it out of the table's
                    // sets (or after a few heartbeat timeouts), while the writers run.
                    let give_up = Instant::now() + config.heartbeat_timeout * 5;
                    while Instant::now() < give_up {
                        if table_state(&client, &table) != "healthy" {
                            seen_degraded = true;
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    embedded
                        .restart(victim)
                        .map_err(|e| format!("restarting memnode {victim}: {e}"))?;
                    restarted = true;
                }
                // Watch the table heal while the writers run.
                let mut healed_at = None;
                if restarted {
                    while Instant::now() < clock.deadline {
                        if table_state(&client, &table) == "healthy" {
                            healed_at = Some(Instant::now());
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
                let mut tallies = Vec::new();
                for w in writers {
                    tallies.push(
                        w.join()
                            .map_err(|_| "a soak writer panicked".to_string())??,
                    );
                }
                crashed.map_err(|e| format!("crashing memnode {victim}: {e}"))?;
                Ok((tallies, restarted, healed_at, seen_degraded))
            },
        )?;
        let crash = clock.crashed_at.get().copied();
        let stall = *clock
            .longest_stall
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        // The fresh-table soak reports what its writers' client saw (failed over or not);
        // the one-table soak what the service says now.
        let state = if config.one_table {
            table_state(&client, &table)
        } else {
            client
                .table(&table)
                .map(|t| state_name(t.health.state))
                .unwrap_or_else(|e| format!("unknown ({e})"))
        };
        for t in tallies {
            report.operations += t.operations;
            report.acknowledged_writes += t.acknowledged;
            report.unknown_writes += t.unknown;
            report.stale_reads += t.stale_reads;
            for (k, n) in t.failed {
                *report.failed.entry(k).or_default() += n;
            }
            for (k, m) in t.failure_examples {
                report.failure_examples.entry(k).or_insert(m);
            }
            models.push(t.models);
        }
        let all: Vec<&(Vec<u8>, KeyModel)> = models.iter().flatten().collect();
        verify(&client, &table, &all, &mut report)?;
        let mut healed_after_s = None;
        if config.one_table {
            let crash = crash.unwrap_or(period_start);
            let give_up = crash + config.heal_timeout;
            loop {
                if let Some(at) = healed_at {
                    healed_after_s = Some(at.saturating_duration_since(crash).as_secs_f64());
                    break;
                }
                if table_state(&client, &table) == "healthy" {
                    healed_after_s = Some(crash.elapsed().as_secs_f64());
                    break;
                }
                if Instant::now() >= give_up {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        report.crashes.push(CrashRecord {
            period: period + 1,
            victim,
            at_s: crash.map_or(0.0, |c| c.duration_since(started).as_secs_f64()),
            longest_stall_ms: stall.as_secs_f64() * 1000.0,
            table_state: state,
            healed_after_s,
            seen_degraded,
        });
        if !config.one_table {
            client
                .drop_table(&table)
                .map_err(|e| format!("dropping table {table} after its period: {e}"))?;
        }
        if !restarted {
            embedded
                .restart(victim)
                .map_err(|e| format!("restarting memnode {victim}: {e}"))?;
        }
        let healed = match healed_after_s {
            Some(s) => format!(", healthy again {s:.1} s after the crash"),
            None if config.one_table => ", NOT healthy again".to_string(),
            None => String::new(),
        };
        progress(&format!(
            "period {}/{}: crashed memnode {victim}, longest stall {:.0} ms, table {}{healed}; \
             {} operations so far, {} lost acknowledged writes",
            period + 1,
            report.periods,
            stall.as_secs_f64() * 1000.0,
            report.crashes.last().map_or("", |c| c.table_state.as_str()),
            report.operations,
            report.lost_acknowledged_writes
        ));
        if config.one_table && healed_after_s.is_none() {
            report.elapsed_s = started.elapsed().as_secs_f64();
            report.stopped = Some(format!(
                "the table was not healthy {:.0} s after the crash in period {} ({}): \
                 stopped before a second crash could take a set's last copy",
                config.heal_timeout.as_secs_f64(),
                period + 1,
                healing_state(&client, &table)
            ));
            return Ok(report);
        }
    }
    report.elapsed_s = started.elapsed().as_secs_f64();
    Ok(report)
}

/// What the service says of a table that did not heal: its sets, syncing members,
/// health and the copies running.
fn healing_state(client: &Client, table: &str) -> String {
    let t = match client.metadata().table(table) {
        Ok(t) => format!(
            "replica sets {:?}, syncing {:?}, {} with {} loss record(s)",
            t.replica_sets,
            t.syncing,
            state_name(t.health.state),
            t.health.lost.len()
        ),
        Err(e) => format!("the table could not be read: {e}"),
    };
    let copies = client
        .metadata()
        .request("GET", "/v1/rereplication", None)
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .unwrap_or_else(|e| format!("unknown ({e})"));
    format!("{t}; re-replication: {copies}")
}

/// The table the one-table soak keeps.
const ONE_TABLE: &str = "soak";

/// Writer `writer`'s keys (every `threads`-th), with nothing written yet.
fn writer_keys(config: &SoakConfig, writer: usize) -> Vec<(Vec<u8>, KeyModel)> {
    (0..config.keys)
        .filter(|i| i % config.threads == writer)
        .map(|i| (cluster::key_name(i), KeyModel::new()))
        .collect()
}

/// The table's state as the API spells it, or `unknown (…)`, as the metadata service
/// has it now (not the client's cached description).
fn table_state(client: &Client, table: &str) -> String {
    client
        .metadata()
        .table(table)
        .map(|t| state_name(t.health.state))
        .unwrap_or_else(|e| format!("unknown ({e})"))
}

/// One writer of a period: write every key it owns once (when `load`), then read and
/// update its keys at random until the period's deadline.
#[allow(clippy::too_many_arguments)]
fn write(
    client: &Client,
    table: &str,
    config: &SoakConfig,
    writer: usize,
    keys: Vec<(Vec<u8>, KeyModel)>,
    load: bool,
    seed: u64,
    clock: &PeriodClock,
) -> Result<WriterTally, String> {
    let s = client.session().map_err(|e| format!("session: {e}"))?;
    let t = s
        .table(table)
        .map_err(|e| format!("opening table {table}: {e}"))?;
    let mut tally = WriterTally {
        models: keys,
        ..WriterTally::default()
    };
    let mut rng = SmallRng::seed_from_u64(seed);
    // Values must never repeat across periods either: the period is in the seed's
    // high bits, and the sequence starts from it.
    let mut seq = seed & !0xFFFF_FFFF;
    let mut loaded = if load { 0 } else { tally.models.len() };
    while Instant::now() < clock.deadline {
        let loading = loaded < tally.models.len();
        let i = if loading {
            loaded += 1;
            loaded - 1
        } else {
            rng.random_range(0..tally.models.len())
        };
        let read = !loading && rng.random_bool(config.read_fraction);
        let (key, model) = &mut tally.models[i];
        let started = Instant::now();
        let (op, result) = if read {
            let r = s.block_on(t.get(key));
            if let Ok(v) = &r
                && !model.admits(v.as_deref())
            {
                tally.stale_reads += 1;
            }
            ("get", r.map(|_| ()))
        } else {
            seq += 1;
            let v = cluster::value_for(key, writer, seq, config.value_len);
            let r = s.block_on(t.put(key, &v));
            let outcome = WriteOutcome::of(&r);
            model.record_write(&v, outcome);
            match outcome {
                WriteOutcome::Acknowledged => tally.acknowledged += 1,
                WriteOutcome::Unknown => tally.unknown += 1,
                WriteOutcome::Failed => {}
            }
            ("put", r)
        };
        tally.operations += 1;
        let finished = Instant::now();
        if clock.crashed_at.get().is_some_and(|c| finished >= *c) {
            let mut longest = clock
                .longest_stall
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            *longest = (*longest).max(finished - started);
        }
        if let Err(e) = result {
            let kind = format!("{op} {}", e.kind());
            tally
                .failure_examples
                .entry(kind.clone())
                .or_insert_with(|| e.to_string());
            *tally.failed.entry(kind).or_default() += 1;
        }
    }
    s.quiesce();
    Ok(tally)
}

/// Read every key of `table` back on a new session and check it against its model.
fn verify(
    client: &Client,
    table: &str,
    models: &[&(Vec<u8>, KeyModel)],
    report: &mut SoakReport,
) -> Result<(), String> {
    let s = client.session().map_err(|e| format!("session: {e}"))?;
    let t = s
        .table(table)
        .map_err(|e| format!("opening table {table} to check it: {e}"))?;
    for (key, model) in models {
        let mut read: Result<Option<Vec<u8>>, KvError> = Err(KvError::unavailable("not read"));
        for attempt in 0..5 {
            read = s.block_on(t.get(key));
            if read.is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100 << attempt));
        }
        match read {
            Ok(v) if model.admits(v.as_deref()) => report.verified_keys += 1,
            Ok(_) if model.has_acknowledged_write() => {
                report.verified_keys += 1;
                report.lost_acknowledged_writes += 1;
            }
            Ok(_) => {
                report.verified_keys += 1;
                report.unexpected_values += 1;
            }
            Err(_) => report.unverified_keys += 1,
        }
    }
    s.quiesce();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> SoakConfig {
        SoakConfig {
            minutes: 10.0,
            kill_every: Duration::from_secs(60),
            memnodes: 3,
            capacity: 4 << 20,
            heartbeat_timeout: Duration::from_millis(300),
            detection: CrashDetection::default(),
            keys: 8,
            threads: 2,
            read_fraction: 0.5,
            value_len: 32,
            seed: 1,
            one_table: false,
            index: crate::index::BenchIndex::Clover,
            heal_timeout: Duration::from_secs(10),
        }
    }

    #[test]
    fn periods_round_up_to_whole_kill_intervals() {
        assert_eq!(config().periods(), 10);
        let mut c = config();
        c.minutes = 0.05;
        c.kill_every = Duration::from_secs(2);
        assert_eq!(c.periods(), 2);
        c.minutes = 0.0;
        assert_eq!(c.periods(), 1);
    }

    #[test]
    fn bad_settings_are_refused_before_starting() {
        let mut c = config();
        c.memnodes = 1;
        assert!(
            run(&c, |_| {})
                .unwrap_err()
                .contains("at least 2 memory nodes")
        );
        let mut c = config();
        c.keys = 1;
        assert!(run(&c, |_| {}).unwrap_err().contains("one key per thread"));
        let mut c = config();
        c.read_fraction = 1.5;
        assert!(run(&c, |_| {}).unwrap_err().contains("not between 0 and 1"));
    }

    #[test]
    fn failovers_count_degraded_tables() {
        let crash = |state: &str| CrashRecord {
            period: 1,
            victim: 1,
            at_s: 1.0,
            longest_stall_ms: 10.0,
            table_state: state.into(),
            healed_after_s: None,
            seen_degraded: false,
        };
        let r = SoakReport {
            crashes: vec![crash("degraded"), crash("healthy"), crash("degraded")],
            ..SoakReport::default()
        };
        assert_eq!(r.failovers(), 2);
    }
}
