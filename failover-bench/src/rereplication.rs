//! Re-replication speed, per index: a table of two copies homed on one memory node
//! is filled, the other member of its replica set crashes, and the metadata service
//! gives the set a new member and copies the data to it. Measured from the moment
//! the new member joins (syncing) to its promotion: the set's memory in MB/s, the
//! bytes written to the new member, the passes, and — RACE and in-place tables,
//! whose last pass runs with the table's writes paused — how long the writes were
//! paused.

use std::time::{Duration, Instant};

use crate::cluster::{CrashDetection, start};
use crate::index::BenchIndex;

/// Settings of the re-replication measurement.
#[derive(Clone, Debug)]
pub struct RereplicationConfig {
    /// Runs, each on a new cluster.
    pub runs: usize,
    /// Memory nodes (at least 3: the set's two and the new member).
    pub memnodes: usize,
    /// Bytes per memory node.
    pub capacity: u64,
    /// The metadata service's heartbeat timeout.
    pub heartbeat_timeout: Duration,
    /// How quickly the client notices a crash.
    pub detection: CrashDetection,
    /// Bytes of values written before the crash.
    pub fill_bytes: u64,
    /// Value length, bytes.
    pub value_len: usize,
    /// The metadata service's copy rate limit, MB/s (what it is started with).
    pub rate_mb: u64,
    /// The indexes measured, `runs` runs each.
    pub indexes: Vec<BenchIndex>,
}

/// One run.
#[derive(Clone, Debug, PartialEq)]
pub struct RereplicationRun {
    /// The table's index.
    pub index: BenchIndex,
    /// How long the table's writes were paused for the last pass, ms (0: not
    /// paused — Clover's copy needs no pause).
    pub paused_ms: f64,
    /// The set's memory (every mirrored extent), bytes.
    pub set_bytes: u64,
    /// Bytes written to the new member.
    pub written_bytes: u64,
    /// Copy passes seen (at least; the last one wrote nothing).
    pub passes: u64,
    /// From the crash to the new member joining, ms.
    pub join_ms: f64,
    /// From joining to promotion, ms.
    pub copy_ms: f64,
    /// `set_bytes` over `copy_ms`, MB/s (10^6 bytes).
    pub mb_per_s: f64,
}

/// Runs the measurement `config.runs` times per index.
pub fn measure(config: &RereplicationConfig) -> Result<Vec<RereplicationRun>, String> {
    let mut out = Vec::new();
    for &index in &config.indexes {
        for _ in 0..config.runs {
            out.push(run_once(config, index)?);
        }
    }
    Ok(out)
}

fn run_once(c: &RereplicationConfig, index: BenchIndex) -> Result<RereplicationRun, String> {
    let (mut embedded, client) = start(
        c.memnodes.max(3),
        c.capacity,
        c.heartbeat_timeout,
        c.detection,
    )?;
    let ids = embedded.memnode_ids();
    let home = *ids.first().ok_or("no memory node")?;
    let meta = client.metadata();
    let keys = c.fill_bytes / c.value_len.max(1) as u64;
    let mut req = index
        .spec_for(c.value_len as u64, 2 * keys + 64)?
        .request("rerep")
        .map_err(|e| e.to_string())?;
    req.memnodes = Some(vec![home]);
    req.replication = Some(2);
    let table = meta
        .create_table(&req)
        .map_err(|e| format!("creating the table: {e}"))?;
    let backup = *table
        .replica_sets
        .first()
        .and_then(|s| s.get(1))
        .ok_or("the table has no backup")?;
    let s = client.session().map_err(|e| e.to_string())?;
    let t = s.table("rerep").map_err(|e| e.to_string())?;
    let value = vec![b'v'; c.value_len];
    for i in 0..keys {
        s.block_on(t.put(format!("key{i:08}").as_bytes(), &value))
            .map_err(|e| format!("filling the table: {e}"))?;
    }
    drop(t);
    drop(s);
    let crashed = Instant::now();
    embedded
        .crash(backup)
        .map_err(|e| format!("crashing memnode {backup}: {e}"))?;
    let give_up = crashed + c.heartbeat_timeout * 4 + Duration::from_secs(60);
    let mut joined = None;
    let mut last = None;
    loop {
        if Instant::now() > give_up {
            return Err("the replica set did not get a new member in time".into());
        }
        let now = Instant::now();
        let t = meta
            .table("rerep")
            .map_err(|e| format!("reading the table: {e}"))?;
        let set = t.replica_sets.first().cloned().unwrap_or_default();
        let syncing = t.syncing.first().is_some_and(|s| !s.is_empty());
        if syncing && joined.is_none() {
            joined = Some(now);
        }
        if let Some(status) = meta
            .request("GET", "/v1/rereplication", None)
            .ok()
            .and_then(|r| serde_json::from_slice::<serde_json::Value>(&r.body).ok())
            .and_then(|v| v["running"].get(0).cloned())
        {
            joined.get_or_insert(now);
            last = Some(status);
        }
        if set.len() == 2 && !set.contains(&backup) && !syncing {
            let joined = joined.unwrap_or(now);
            let copy_ms = now.saturating_duration_since(joined).as_secs_f64() * 1000.0;
            let field = |k: &str| last.as_ref().and_then(|s| s[k].as_u64()).unwrap_or(0);
            let set_bytes = field("bytes_total");
            return Ok(RereplicationRun {
                index,
                paused_ms: crate::cluster::metric(
                    meta,
                    "dmkv_metadata_rereplication_write_paused_seconds_total",
                )? * 1000.0,
                set_bytes,
                written_bytes: crate::cluster::counter(
                    meta,
                    "dmkv_metadata_rereplication_bytes_total",
                )?,
                passes: field("passes") + 1,
                join_ms: joined.saturating_duration_since(crashed).as_secs_f64() * 1000.0,
                copy_ms,
                mb_per_s: if copy_ms > 0.0 {
                    set_bytes as f64 / 1e6 / (copy_ms / 1000.0)
                } else {
                    0.0
                },
            });
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}
