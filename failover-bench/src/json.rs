//! The JSON document `--json PATH` writes: the settings and figures of every part that
//! ran (`failover` for Clover tables of two copies and `failover_r3` for three,
//! `failover_by_index` for every index and number of copies, `cost` with a cell per
//! index, workload and number of copies, `soak`; a part that did not run is `null`).

use serde_json::{Value, json};

use crate::cost::CostCell;
use crate::failover::{FailoverConfig, FailoverRun};
use crate::index::BenchIndex;
use crate::results_md::Parts;
use crate::summary::{Spread, ratio};

fn spread(values: &[f64]) -> Value {
    match Spread::of(values) {
        Some(s) => json!({"median": s.median, "min": s.min, "max": s.max, "count": s.count}),
        None => Value::Null,
    }
}

/// The figures of the failover runs on tables of `c.replication` copies.
fn failover(c: &FailoverConfig, runs: &[FailoverRun]) -> Value {
    let hb = c.heartbeat_timeout.as_secs_f64() * 1000.0;
    let each =
        |f: fn(&FailoverRun) -> Option<f64>| -> Vec<f64> { runs.iter().filter_map(f).collect() };
    json!({
        "index": c.index.name(),
        "replication": c.replication,
        "memnodes": c.memnodes,
        "heartbeat_timeout_ms": hb,
        "detection_bound_ms": c.detection.bound().as_secs_f64() * 1000.0,
        "retransmit_timeout_ms": c.detection.timeout.as_secs_f64() * 1000.0,
        "retries": c.detection.retries,
        "keys": c.keys,
        "failover_ms": spread(&each(|r| Some(r.failover_ms))),
        "first_read_ms": spread(&each(|r| r.first_read_ms)),
        "first_write_ms": spread(&each(|r| r.first_write_ms)),
        "first_error_ms": spread(&each(|r| r.first_error_ms)),
        "failover_over_heartbeat": spread(&runs.iter().filter_map(|r| ratio(r.failover_ms, hb)).collect::<Vec<_>>()),
        "outcome_unknown": runs.iter().map(|r| r.outcome_unknown).sum::<u64>(),
        "unavailable": runs.iter().map(|r| r.unavailable).sum::<u64>(),
        "other_errors": runs.iter().map(|r| r.other_errors).sum::<u64>(),
        "runs": runs.iter().map(|r| json!({
            "victim": r.victim,
            "keys": r.keys,
            "ops_before_crash": r.ops_before_crash,
            "first_error_ms": r.first_error_ms,
            "failover_ms": r.failover_ms,
            "first_read_ms": r.first_read_ms,
            "first_write_ms": r.first_write_ms,
            "outcome_unknown": r.outcome_unknown,
            "unavailable": r.unavailable,
            "other_errors": r.other_errors,
            "table_state": r.table_state,
            "resync_ms": r.resync_ms,
        })).collect::<Vec<_>>(),
    })
}

/// The ratios of the cells of `copies` copies to those of one copy, per workload,
/// for tables of `index`.
fn ratios_to_one_copy(cells: &[CostCell], index: BenchIndex, copies: u32) -> Vec<Value> {
    ["A", "C"]
        .iter()
        .filter_map(|w| {
            let find = |r: u32| {
                cells
                    .iter()
                    .find(|x| x.index == index && x.workload == *w && x.replication == r)
            };
            let (one, more) = (find(1)?, find(copies)?);
            Some(json!({
                "index": index.name(),
                "workload": w,
                "ops_per_sec": ratio(more.ops_per_sec, one.ops_per_sec),
                "read_p50_us": ratio(more.read_p50_us, one.read_p50_us),
                "update_p50_us": more.update_p50_us.zip(one.update_p50_us).and_then(|(a, b)| ratio(a, b)),
                "round_trips_per_op": ratio(more.round_trips_per_op, one.round_trips_per_op),
                "bytes_per_op": ratio(more.bytes_per_op, one.bytes_per_op),
            }))
        })
        .collect()
}

/// The document for `parts`.
pub fn document(parts: &Parts) -> Value {
    let failover_of = |copies: u32| {
        parts
            .failover
            .iter()
            .find(|(c, _)| c.index == BenchIndex::Clover && c.replication == copies)
            .map(|(c, runs)| failover(c, runs))
    };
    let cost = parts.cost.map(|(c, cells)| {
        json!({
            "memnodes": crate::cost::MEMNODES,
            "records": c.records,
            "operations": c.operations,
            "threads": c.threads,
            "concurrency": c.concurrency,
            "distribution": c.distribution,
            "field_count": c.field_count,
            "field_length": c.field_length,
            "repeat": c.repeat,
            "cells": cells.iter().map(|x| json!({
                "index": x.index.name(),
                "workload": x.workload,
                "replication": x.replication,
                "ops_per_sec": x.ops_per_sec,
                "ops_per_sec_min": x.throughput.min,
                "ops_per_sec_max": x.throughput.max,
                "read_p50_us": x.read_p50_us,
                "read_p99_us": x.read_p99_us,
                "update_p50_us": x.update_p50_us,
                "update_p99_us": x.update_p99_us,
                "round_trips_per_op": x.round_trips_per_op,
                "bytes_per_op": x.bytes_per_op,
                "retries_per_op": x.retries_per_op,
                "failed": x.failed,
            })).collect::<Vec<_>>(),
            "r2_over_r1": ratios_to_one_copy(cells, BenchIndex::Clover, 2),
            "r3_over_r1": ratios_to_one_copy(cells, BenchIndex::Clover, 3),
            "ratios_by_index": BenchIndex::ALL
                .iter()
                .flat_map(|&i| [2, 3].map(|r| json!({
                    "index": i.name(),
                    "replication": r,
                    "over_r1": ratios_to_one_copy(cells, i, r),
                })))
                .collect::<Vec<_>>(),
        })
    });
    let soak = parts.soak.map(|(c, r)| {
        json!({
            "replication": 2,
            "memnodes": c.memnodes,
            "heartbeat_timeout_ms": c.heartbeat_timeout.as_secs_f64() * 1000.0,
            "kill_every_s": c.kill_every.as_secs_f64(),
            "minutes": c.minutes,
            "keys": c.keys,
            "threads": c.threads,
            "read_fraction": c.read_fraction,
            "value_len": c.value_len,
            "seed": c.seed,
            "periods": r.periods,
            "elapsed_s": r.elapsed_s,
            "operations": r.operations,
            "acknowledged_writes": r.acknowledged_writes,
            "unknown_writes": r.unknown_writes,
            "failed": r.failed,
            "failed_total": r.failed.values().sum::<u64>(),
            "failure_examples": r.failure_examples,
            "stale_reads": r.stale_reads,
            "lost_acknowledged_writes": r.lost_acknowledged_writes,
            "unexpected_values": r.unexpected_values,
            "unverified_keys": r.unverified_keys,
            "verified_keys": r.verified_keys,
            "failovers": r.failovers(),
            "one_table": c.one_table,
            "index": c.index.name(),
            "heal_timeout_s": c.heal_timeout.as_secs_f64(),
            "healed": r.healed(),
            "stopped": r.stopped,
            "crashes": r.crashes.iter().map(|c| json!({
                "period": c.period,
                "victim": c.victim,
                "at_s": c.at_s,
                "longest_stall_ms": c.longest_stall_ms,
                "table_state": c.table_state,
                "healed_after_s": c.healed_after_s,
                "seen_degraded": c.seen_degraded,
            })).collect::<Vec<_>>(),
        })
    });
    let rereplication = parts.rereplication.map(|(c, runs)| {
        json!({
            "memnodes": c.memnodes.max(3),
            "fill_bytes": c.fill_bytes,
            "value_len": c.value_len,
            "rate_limit_mb_per_s": c.rate_mb,
            "runs": runs.iter().map(|r| json!({
                "index": r.index.name(),
                "paused_ms": r.paused_ms,
                "mb_per_s": r.mb_per_s,
                "copy_ms": r.copy_ms,
                "join_ms": r.join_ms,
                "set_bytes": r.set_bytes,
                "written_bytes": r.written_bytes,
                "passes": r.passes,
            })).collect::<Vec<_>>(),
        })
    });
    json!({
        "benchmark": "failover-bench",
        "cores": std::thread::available_parallelism().map_or(1, |n| n.get()),
        "failover": failover_of(2),
        "failover_r3": failover_of(3),
        "failover_by_index": parts
            .failover
            .iter()
            .map(|(c, runs)| failover(c, runs))
            .collect::<Vec<_>>(),
        "cost": cost,
        "soak": soak,
        "rereplication": rereplication,
    })
}
