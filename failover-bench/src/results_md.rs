//! The Markdown results page (`--results-md PATH`): the page header, then a section per
//! part that ran — failover time at two and three copies, the cost of more copies, the
//! soak. The program
//! prints the same sections on the console.

use std::fmt::Write as _;

use testbed::results_page::{PageHeader, markdown_table};

use crate::cost::{CostCell, CostConfig};
use crate::failover::{FailoverConfig, FailoverRun};
use crate::index::BenchIndex;
use crate::rereplication::{RereplicationConfig, RereplicationRun};
use crate::soak::{SoakConfig, SoakReport};
use crate::summary::{Spread, ratio, show_ratio};

/// How the repository's page is written.
pub const WRITTEN_BY: &str = "cargo run --release -p failover-bench -- --soak-minutes 2 \
     --kill-every 20 --results-md docs/results/failover-bench.md";

/// How the repository's page of the one-table soak is written (Clover tables).
pub const WRITTEN_BY_SOAK: &str = "cargo run --release -p failover-bench -- soak --one-table \
     --minutes 10 --kill-every 60 --results-md docs/results/failover-soak.md";

/// How the repository's page of the one-table soak of `index` tables is written.
pub fn written_by_soak(index: BenchIndex) -> String {
    match index {
        BenchIndex::Clover => WRITTEN_BY_SOAK.to_owned(),
        other => format!(
            "cargo run --release -p failover-bench -- soak --one-table --index {} \
             --minutes 10 --kill-every 60 --results-md docs/results/failover-soak-{}.md",
            other.name(),
            other.name()
        ),
    }
}

/// The parts of one run, each present when it ran.
#[derive(Clone, Copy, Debug, Default)]
pub struct Parts<'a> {
    /// Failover runs and their settings, one entry per number of copies measured.
    pub failover: &'a [(FailoverConfig, Vec<FailoverRun>)],
    /// Cost cells and their settings.
    pub cost: Option<(&'a CostConfig, &'a [CostCell])>,
    /// The soak and its settings.
    pub soak: Option<(&'a SoakConfig, &'a SoakReport)>,
    /// Re-replication runs and their settings.
    pub rereplication: Option<(&'a RereplicationConfig, &'a [RereplicationRun])>,
}

/// The page: header and every section of `parts`.
pub fn render(header: &PageHeader, parts: &Parts) -> String {
    let soak_only = parts.failover.is_empty()
        && parts.cost.is_none()
        && parts.rereplication.is_none()
        && parts.soak.is_some();
    let mut s = if let (true, Some((config, _))) = (soak_only, parts.soak) {
        header.render(
            "Results: `failover-bench soak`",
            &written_by_soak(config.index),
        )
    } else {
        header.render("Results: `failover-bench`", WRITTEN_BY)
    };
    s.push_str(&sections(parts));
    s
}

/// The sections of `parts`, as the console shows them.
pub fn sections(parts: &Parts) -> String {
    let mut s = String::new();
    if !parts.failover.is_empty() {
        s.push_str(&failover_summary(parts.failover));
    }
    for (c, runs) in parts.failover {
        s.push_str(&failover_section(c, runs));
    }
    if let Some((c, cells)) = parts.cost {
        s.push_str(&cost_section(c, cells));
    }
    if let Some((c, runs)) = parts.rereplication {
        s.push_str(&rereplication_section(c, runs));
    }
    if let Some((c, r)) = parts.soak {
        s.push_str(&soak_section(c, r));
    }
    s
}

fn rereplication_section(c: &RereplicationConfig, runs: &[RereplicationRun]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "## Re-replication\n");
    let _ = writeln!(
        s,
        "{} run(s) per index, each on a new embedded cluster of {} memory nodes over soft \
         RoCE: a table of 2 copies homed on one memory node gets {:.1} MiB of {}-byte values \
         (an in-place table: as many tuples), then the other member of its replica set \
         crashes. After the failover (heartbeat timeout {:.0} ms) the metadata service gives \
         the set a new member (syncing), fences the set, and copies the set's memory from the \
         acting primary in passes (read the primary, compare with the new member, write the \
         difference; rate limit {} MB/s of bytes read and written). A Clover set is promoted \
         once a pass writes nothing; a RACE or in-place set once a pass leaves little to \
         copy, after a last pass with the table's writes paused (copy the rest at full speed, \
         then verify). **MB/s is the set's memory over the time from the new member joining \
         to its promotion** (10^6 bytes per second); the copier reads the primary and the \
         new member in 16 KiB READs over one queue pair each. Nothing writes the table \
         during the copy here, so the pause is the 300 ms the copier gives writers to learn \
         of it plus the paused passes. Medians (min–max).\n",
        c.runs,
        c.memnodes.max(3),
        c.fill_bytes as f64 / (1u64 << 20) as f64,
        c.value_len,
        c.heartbeat_timeout.as_secs_f64() * 1000.0,
        c.rate_mb,
    );
    let mut rows = Vec::new();
    for index in BenchIndex::ALL {
        let of: Vec<&RereplicationRun> = runs.iter().filter(|r| r.index == index).collect();
        if of.is_empty() {
            continue;
        }
        let cell = |f: &dyn Fn(&RereplicationRun) -> f64, digits: usize| {
            let v: Vec<f64> = of.iter().map(|r| f(r)).collect();
            match Spread::of(&v) {
                Some(sp) => format!(
                    "{:.*} ({:.*}–{:.*})",
                    digits, sp.median, digits, sp.min, digits, sp.max
                ),
                None => "–".into(),
            }
        };
        let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
        rows.push(vec![
            index.name().to_string(),
            of.len().to_string(),
            cell(&|r| r.mb_per_s, 1),
            cell(&|r| r.copy_ms, 0),
            cell(&|r| r.paused_ms, 0),
            cell(&|r| r.join_ms, 0),
            cell(&|r| mib(r.set_bytes), 1),
            cell(&|r| mib(r.written_bytes), 1),
            cell(&|r| r.passes as f64, 0),
        ]);
    }
    s.push_str(&markdown_table(
        &[
            "index",
            "runs",
            "MB/s",
            "join to promotion, ms",
            "writes paused, ms",
            "crash to join, ms",
            "set memory, MiB",
            "written to the new member, MiB",
            "passes (at least)",
        ],
        &rows,
    ));
    s.push('\n');
    s
}

fn ms(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_string(), |v| format!("{v:.0}"))
}

fn spread_row(name: &str, values: &[f64], digits: usize) -> Vec<String> {
    match Spread::of(values) {
        Some(sp) => vec![
            name.to_string(),
            format!("{:.*}", digits, sp.median),
            format!("{:.*}", digits, sp.min),
            format!("{:.*}", digits, sp.max),
        ],
        None => vec![name.to_string(), "–".into(), "–".into(), "–".into()],
    }
}

/// One row per index and number of copies: the medians of its failover runs.
fn failover_summary(all: &[(FailoverConfig, Vec<FailoverRun>)]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "## Failover time by index\n");
    let _ = writeln!(
        s,
        "The median (min–max) over each configuration's runs of the time from a memory \
         node's crash to the first successful operation started after it, and the median \
         of the first successful write; the sections below give the settings and every \
         run. Reads go to primaries only: where the crashed node held only backups of what \
         the reads touch (always possible for RACE and in-place tables, whose keys have no \
         home of their own), reads go on at once and only writes wait for the failover. \
         When the crashed node was the primary of a set of three copies, the failover first \
         makes the other survivor equal to the member promoted in its place (nobody writes \
         the set meanwhile); the last column is the median time that took, after the \
         heartbeat timeout, and in how many runs it happened (the crashed node may have \
         held no primary, and with two copies there is no other survivor).\n"
    );
    let rows: Vec<Vec<String>> = all
        .iter()
        .map(|(c, runs)| {
            let hb = c.heartbeat_timeout.as_secs_f64() * 1000.0;
            let first: Vec<f64> = runs.iter().map(|r| r.failover_ms).collect();
            let (median, range) = match Spread::of(&first) {
                Some(sp) => (
                    format!("{:.0}", sp.median),
                    format!("{:.0}–{:.0}", sp.min, sp.max),
                ),
                None => ("–".into(), "–".into()),
            };
            let over: Vec<f64> = runs
                .iter()
                .filter_map(|r| ratio(r.failover_ms, hb))
                .collect();
            let writes: Vec<f64> = runs.iter().filter_map(|r| r.first_write_ms).collect();
            vec![
                c.index.name().to_string(),
                c.replication.to_string(),
                runs.len().to_string(),
                median,
                range,
                Spread::of(&writes).map_or_else(|| "–".into(), |sp| format!("{:.0}", sp.median)),
                Spread::of(&over).map_or_else(|| "–".into(), |sp| format!("{:.2}", sp.median)),
                runs.iter()
                    .map(|r| r.outcome_unknown)
                    .sum::<u64>()
                    .to_string(),
                runs.iter().map(|r| r.unavailable).sum::<u64>().to_string(),
                {
                    let resync: Vec<f64> = runs.iter().filter_map(|r| r.resync_ms).collect();
                    Spread::of(&resync).map_or_else(
                        || "–".into(),
                        |sp| format!("{:.0} ({}/{})", sp.median, resync.len(), runs.len()),
                    )
                },
            ]
        })
        .collect();
    s.push_str(&markdown_table(
        &[
            "index",
            "copies",
            "runs",
            "first success ms",
            "range ms",
            "first write ms",
            "÷ heartbeat timeout",
            "OutcomeUnknown",
            "Unavailable",
            "survivor resync ms (runs)",
        ],
        &rows,
    ));
    let _ = writeln!(s);
    s
}

fn failover_section(c: &FailoverConfig, runs: &[FailoverRun]) -> String {
    let mut s = String::new();
    let hb = c.heartbeat_timeout.as_secs_f64() * 1000.0;
    let _ = writeln!(
        s,
        "## Failover time ({}, {} copies)\n",
        c.index.name(),
        c.replication
    );
    let keys = if c.index.keys_have_homes() {
        format!("{} keys homed on one memory node", c.keys)
    } else {
        format!(
            "{} keys (their buckets, values or tuples may have a copy on any memory node)",
            c.keys
        )
    };
    let _ = writeln!(
        s,
        "{} runs, each on a new embedded cluster of {} memory nodes over soft RoCE (udp on \
         loopback), on a {} table of {} copies. One client thread alternates `put` and `get` on \
         {keys}; a memory node crashes (stops serving and heartbeating at once). **Heartbeat timeout: \
         {hb:.0} ms** — the metadata service fails a memory node over once its last heartbeat \
         is older than that; nodes heartbeat every third of it, so the failover starts between \
         two thirds of the timeout and the whole timeout after the crash. The client gives up on a silent memory node after \
         at most {:.0} ms (retransmission timeout {} ms, {} retries), then asks the service for \
         the table every 50 ms until its replica sets change. Times are from the moment the node \
         stopped serving to the \
         end of the first successful operation that started after it.\n",
        runs.len(),
        c.memnodes,
        c.index.name(),
        c.replication,
        c.detection.bound().as_secs_f64() * 1000.0,
        c.detection.timeout.as_millis(),
        c.detection.retries,
    );
    let pick = |f: &dyn Fn(&FailoverRun) -> Option<f64>| -> Vec<f64> {
        runs.iter().filter_map(f).collect::<Vec<f64>>()
    };
    let rows = vec![
        spread_row("first success, ms", &pick(&|r| Some(r.failover_ms)), 0),
        spread_row("first successful read, ms", &pick(&|r| r.first_read_ms), 0),
        spread_row(
            "first successful write, ms",
            &pick(&|r| r.first_write_ms),
            0,
        ),
        spread_row(
            "first failed operation, ms",
            &pick(&|r| r.first_error_ms),
            0,
        ),
        spread_row(
            "first success ÷ heartbeat timeout",
            &pick(&|r| ratio(r.failover_ms, hb)),
            2,
        ),
        spread_row(
            "`OutcomeUnknown` in between",
            &pick(&|r| Some(r.outcome_unknown as f64)),
            0,
        ),
        spread_row(
            "`Unavailable` in between",
            &pick(&|r| Some(r.unavailable as f64)),
            0,
        ),
    ];
    s.push_str(&markdown_table(&["figure", "median", "min", "max"], &rows));
    let _ = writeln!(s);
    let rows: Vec<Vec<String>> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            vec![
                (i + 1).to_string(),
                r.victim.to_string(),
                r.keys.to_string(),
                r.ops_before_crash.to_string(),
                ms(r.first_error_ms),
                ms(Some(r.failover_ms)),
                ms(r.first_read_ms),
                ms(r.first_write_ms),
                r.outcome_unknown.to_string(),
                r.unavailable.to_string(),
                r.other_errors.to_string(),
                r.table_state.clone(),
            ]
        })
        .collect();
    s.push_str(&markdown_table(
        &[
            "run",
            "crashed memnode",
            "keys",
            "ops before",
            "first error ms",
            "first success ms",
            "first read ms",
            "first write ms",
            "OutcomeUnknown",
            "Unavailable",
            "other errors",
            "table after",
        ],
        &rows,
    ));
    let _ = writeln!(s);
    s
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_string(), |v| format!("{v:.0}"))
}

fn cost_section(c: &CostConfig, cells: &[CostCell]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "## Throughput and cost of more copies\n");
    let _ = writeln!(
        s,
        "YCSB workloads A (50 % reads, 50 % updates) and C (reads only) through the `ycsb` \
         crate's dmkv binding on one embedded cluster of {} memory nodes over soft RoCE: Clover, \
         RACE and in-place (latch scheme `{}`) tables of 1, 2 and 3 copies side by side, {} records of {} × {} bytes each, {} operations \
         per run, {} distributed keys, {} threads × {} operations in flight. Updates replace the record \
         (one `put`). Each cell ran {} time(s), alternating the tables; the median run by \
         throughput is shown. Round trips are those operations awaited; bytes are RoCE bytes \
         both ways from the sessions' transports (they include background work); retries are \
         failed link CASes, restarted traversals, retransmissions and reconnects.\n",
        crate::cost::MEMNODES,
        crate::index::INPLACE_SCHEME,
        c.records,
        c.field_count,
        c.field_length,
        c.operations,
        c.distribution,
        c.threads,
        c.concurrency,
        c.repeat.max(1),
    );
    let rows: Vec<Vec<String>> = cells
        .iter()
        .map(|x| {
            vec![
                x.workload.to_string(),
                x.index.name().to_string(),
                x.replication.to_string(),
                format!("{:.0}", x.ops_per_sec),
                format!("{:.0}–{:.0}", x.throughput.min, x.throughput.max),
                format!("{:.0}", x.read_p50_us),
                format!("{:.0}", x.read_p99_us),
                opt(x.update_p50_us),
                opt(x.update_p99_us),
                format!("{:.2}", x.round_trips_per_op),
                format!("{:.0}", x.bytes_per_op),
                format!("{:.3}", x.retries_per_op),
                x.failed.to_string(),
            ]
        })
        .collect();
    s.push_str(&markdown_table(
        &[
            "workload",
            "index",
            "copies",
            "ops/s",
            "ops/s range",
            "read p50 µs",
            "read p99 µs",
            "update p50 µs",
            "update p99 µs",
            "round trips/op",
            "bytes/op",
            "retries/op",
            "failed",
        ],
        &rows,
    ));
    let _ = writeln!(s, "\nTwo and three copies ÷ one copy:\n");
    let mut rows = Vec::new();
    for (w, index) in ["A", "C"]
        .into_iter()
        .flat_map(|w| BenchIndex::ALL.map(|i| (w, i)))
    {
        for copies in [2, 3] {
            let find = |r: u32| {
                cells
                    .iter()
                    .find(|x| x.index == index && x.workload == w && x.replication == r)
            };
            let (Some(one), Some(more)) = (find(1), find(copies)) else {
                continue;
            };
            let both = |f: fn(&CostCell) -> Option<f64>| match (f(more), f(one)) {
                (Some(a), Some(b)) => show_ratio(ratio(a, b)),
                _ => "–".to_string(),
            };
            rows.push(vec![
                w.to_string(),
                index.name().to_string(),
                format!("{copies} ÷ 1"),
                both(|x| Some(x.ops_per_sec)),
                both(|x| Some(x.read_p50_us)),
                both(|x| x.update_p50_us),
                both(|x| x.update_p99_us),
                both(|x| Some(x.round_trips_per_op)),
                both(|x| Some(x.bytes_per_op)),
            ]);
        }
    }
    s.push_str(&markdown_table(
        &[
            "workload",
            "index",
            "copies",
            "ops/s",
            "read p50",
            "update p50",
            "update p99",
            "round trips/op",
            "bytes/op",
        ],
        &rows,
    ));
    let _ = writeln!(s);
    s
}

fn soak_section(c: &SoakConfig, r: &SoakReport) -> String {
    let mut s = String::new();
    if c.one_table {
        let _ = writeln!(
            s,
            "## Soak: one table through every crash, with data integrity ({} table, 2 copies)\n",
            c.index
        );
        let _ = writeln!(
            s,
            "{} memory nodes over soft RoCE, heartbeat timeout {:.0} ms; {} writer threads on {} \
             keys ({:.0} % reads, the rest overwrites of {}-byte values) of **one** table of two \
             copies, one memory node crashed every {:.0} s for {} periods. A third of the way \
             into each period a memory node crashes; once the metadata service has failed it \
             over, it restarts under its name with empty memory, while the writers go on. At \
             the end of the period every key is read back on a new session and checked \
             against the outcomes of every write since the start of the soak (an \
             `OutcomeUnknown` write may or may not have taken effect); the next crash comes \
             only once the table reads healthy again (its sets re-replicated, at most {:.0} s \
             after the crash). Memory nodes crash in turn. The longest stall is the longest \
             operation in flight after a crash.\n",
            c.memnodes,
            c.heartbeat_timeout.as_secs_f64() * 1000.0,
            c.threads,
            c.keys,
            c.read_fraction * 100.0,
            c.value_len,
            c.kill_every.as_secs_f64(),
            r.periods,
            c.heal_timeout.as_secs_f64(),
        );
        if let Some(why) = &r.stopped {
            let _ = writeln!(s, "**The soak stopped early:** {why}.\n");
        }
    } else {
        let _ = writeln!(
            s,
            "## Soak: crashes with data integrity ({} tables, 2 copies)\n",
            c.index
        );
        let _ = writeln!(
            s,
            "{} memory nodes over soft RoCE, heartbeat timeout {:.0} ms; {} writer threads on {} \
             keys ({:.0} % reads, the rest overwrites of {}-byte values), one memory node crashed \
             every {:.0} s for {} periods. Each period writes a fresh table, crashes one memory \
             node in its middle, reads every key back at its end on a new session and checks it \
             against the writes' outcomes (an `OutcomeUnknown` write may or may not have taken \
             effect), then drops the table and restarts the crashed node under its name with \
             empty memory. Memory nodes crash in turn, each once per {} periods. The longest \
             stall is the longest operation in flight after a crash: operations on keys with a \
             copy on the crashed node wait for the failover. (`--one-table` keeps one table \
             through every crash instead.)\n",
            c.memnodes,
            c.heartbeat_timeout.as_secs_f64() * 1000.0,
            c.threads,
            c.keys,
            c.read_fraction * 100.0,
            c.value_len,
            c.kill_every.as_secs_f64(),
            r.periods,
            c.memnodes,
        );
    }
    let failed: u64 = r.failed.values().sum();
    let rows = vec![
        vec!["duration, s".to_string(), format!("{:.0}", r.elapsed_s)],
        vec!["operations".into(), r.operations.to_string()],
        vec![
            "acknowledged writes".into(),
            r.acknowledged_writes.to_string(),
        ],
        vec![
            "`OutcomeUnknown` writes".into(),
            r.unknown_writes.to_string(),
        ],
        vec!["failed operations".into(), failed.to_string()],
        vec!["crashes".into(), r.crashes.len().to_string()],
        vec![
            "failovers (table seen degraded after the crash)".into(),
            r.failovers().to_string(),
        ],
        vec![
            "crashes after which the table was healthy again".into(),
            if c.one_table {
                r.healed().to_string()
            } else {
                "– (a fresh table per period)".into()
            },
        ],
        vec![
            "keys checked at the end".into(),
            r.verified_keys.to_string(),
        ],
        vec![
            "keys that could not be read back".into(),
            r.unverified_keys.to_string(),
        ],
        vec![
            "**lost acknowledged writes**".into(),
            format!("**{}**", r.lost_acknowledged_writes),
        ],
        vec![
            "values no write could leave".into(),
            r.unexpected_values.to_string(),
        ],
        vec![
            "reads of impossible values during the run".into(),
            r.stale_reads.to_string(),
        ],
    ];
    s.push_str(&markdown_table(&["figure", "value"], &rows));
    if !r.failed.is_empty() {
        let _ = writeln!(s, "\nFailed operations by kind:\n");
        let rows: Vec<Vec<String>> = r
            .failed
            .iter()
            .map(|(k, n)| {
                let example = r
                    .failure_examples
                    .get(k)
                    .map(|m| m.replace('|', "/"))
                    .unwrap_or_default();
                vec![format!("`{k}`"), n.to_string(), example]
            })
            .collect();
        s.push_str(&markdown_table(
            &["operation and error", "count", "first message"],
            &rows,
        ));
    }
    let _ = writeln!(s, "\nCrashes:\n");
    let rows: Vec<Vec<String>> = r
        .crashes
        .iter()
        .map(|c| {
            vec![
                c.period.to_string(),
                c.victim.to_string(),
                format!("{:.1}", c.at_s),
                format!("{:.0}", c.longest_stall_ms),
                c.table_state.clone(),
                c.healed_after_s
                    .map_or_else(|| "–".to_string(), |h| format!("{h:.1}")),
            ]
        })
        .collect();
    s.push_str(&markdown_table(
        &[
            "period",
            "crashed memnode",
            "at s",
            "longest stall ms",
            "table after",
            "healthy again after s",
        ],
        &rows,
    ));
    let _ = writeln!(s);
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::CrashDetection;
    use std::collections::BTreeMap;
    use std::time::Duration;

    fn failover_config() -> FailoverConfig {
        FailoverConfig {
            index: BenchIndex::Clover,
            runs: 2,
            replication: 2,
            memnodes: 2,
            capacity: 1 << 20,
            heartbeat_timeout: Duration::from_millis(1000),
            detection: CrashDetection::default(),
            keys: 4,
            value_len: 16,
            warmup: Duration::ZERO,
            successes_after: 1,
            give_up_after: Duration::from_secs(1),
        }
    }

    fn run(ms: f64) -> FailoverRun {
        FailoverRun {
            victim: 1,
            keys: 4,
            ops_before_crash: 10,
            first_error_ms: Some(150.0),
            failover_ms: ms,
            first_read_ms: Some(ms),
            first_write_ms: None,
            outcome_unknown: 1,
            unavailable: 3,
            other_errors: 0,
            table_state: "degraded".into(),
            resync_ms: Some(12.0),
        }
    }

    fn cell(workload: &'static str, replication: u32, ops: f64, rt: f64) -> CostCell {
        CostCell {
            index: BenchIndex::Clover,
            workload,
            replication,
            ops_per_sec: ops,
            read_p50_us: 100.0,
            read_p99_us: 300.0,
            update_p50_us: (workload == "A").then_some(150.0 * replication as f64),
            update_p99_us: (workload == "A").then_some(400.0),
            round_trips_per_op: rt,
            bytes_per_op: 1000.0,
            retries_per_op: 0.0,
            failed: 0,
            throughput: Spread::of(&[ops]).unwrap(),
        }
    }

    #[test]
    fn every_section_renders() {
        let fc3 = FailoverConfig {
            replication: 3,
            memnodes: 3,
            ..failover_config()
        };
        let race = FailoverConfig {
            index: BenchIndex::Race,
            ..failover_config()
        };
        let failovers = [
            (failover_config(), vec![run(1200.0), run(1400.0)]),
            (fc3, vec![run(1100.0)]),
            (race, vec![run(900.0)]),
        ];
        let cc = CostConfig {
            records: 100,
            operations: 1000,
            threads: 2,
            concurrency: 4,
            distribution: "zipfian".into(),
            field_count: 10,
            field_length: 100,
            repeat: 3,
            capacity: 1 << 20,
            seed: 1,
        };
        let inplace = |w, r, ops, rt| CostCell {
            index: BenchIndex::InPlace,
            ..cell(w, r, ops, rt)
        };
        let cells = [
            inplace("A", 1, 500.0, 4.0),
            inplace("A", 2, 400.0, 5.0),
            cell("A", 1, 1000.0, 2.0),
            cell("A", 2, 800.0, 2.5),
            cell("A", 3, 700.0, 3.0),
            cell("C", 1, 2000.0, 1.0),
            cell("C", 2, 2000.0, 1.0),
            cell("C", 3, 1000.0, 1.0),
        ];
        let sc = SoakConfig {
            minutes: 1.0,
            kill_every: Duration::from_secs(30),
            memnodes: 3,
            capacity: 1 << 20,
            heartbeat_timeout: Duration::from_millis(1000),
            detection: CrashDetection::default(),
            keys: 16,
            threads: 2,
            read_fraction: 0.5,
            value_len: 64,
            seed: 1,
            one_table: false,
            index: BenchIndex::Clover,
            heal_timeout: Duration::from_secs(30),
        };
        let soak = SoakReport {
            periods: 2,
            elapsed_s: 61.0,
            operations: 5000,
            acknowledged_writes: 2400,
            unknown_writes: 2,
            failed: BTreeMap::from([("put outcome_unknown".to_string(), 2)]),
            failure_examples: BTreeMap::from([(
                "put outcome_unknown".to_string(),
                "sent, not confirmed | lost".to_string(),
            )]),
            verified_keys: 32,
            crashes: vec![crate::soak::CrashRecord {
                period: 1,
                victim: 1,
                at_s: 15.0,
                longest_stall_ms: 1100.0,
                table_state: "degraded".into(),
                healed_after_s: None,
                seen_degraded: false,
            }],
            ..SoakReport::default()
        };
        let rc = RereplicationConfig {
            runs: 1,
            memnodes: 3,
            capacity: 64 << 20,
            heartbeat_timeout: Duration::from_millis(1000),
            detection: CrashDetection::default(),
            fill_bytes: 8 << 20,
            value_len: 1024,
            rate_mb: 64,
            indexes: vec![BenchIndex::Race],
        };
        let rr = vec![RereplicationRun {
            index: BenchIndex::Race,
            paused_ms: 40.0,
            set_bytes: 16 << 20,
            written_bytes: 9 << 20,
            passes: 2,
            join_ms: 1200.0,
            copy_ms: 500.0,
            mb_per_s: 33.6,
        }];
        let header = PageHeader::fixed("failover-bench --results-md out.md");
        let page = render(
            &header,
            &Parts {
                failover: &failovers,
                cost: Some((&cc, &cells)),
                soak: Some((&sc, &soak)),
                rereplication: Some((&rc, &rr)),
            },
        );
        assert!(page.starts_with(&header.render("Results: `failover-bench`", WRITTEN_BY)));
        assert!(page.contains("**Heartbeat timeout: 1000 ms**"), "{page}");
        assert!(page.contains("## Re-replication"), "{page}");
        assert!(
            page.contains("| race | 1 | 33.6 (33.6–33.6) | 500 (500–500) | 40 (40–40) |"),
            "{page}"
        );
        assert!(
            page.contains("| first success, ms | 1300 | 1200 | 1400 |\n"),
            "{page}"
        );
        assert!(
            page.contains("| first success ÷ heartbeat timeout | 1.30 | 1.20 | 1.40 |\n"),
            "{page}"
        );
        assert!(
            page.contains("| first successful write, ms | – | – | – |\n"),
            "{page}"
        );
        assert!(
            page.contains("| 1 | 1 | 4 | 10 | 150 | 1200 | 1200 | – | 1 | 3 | 0 | degraded |\n"),
            "{page}"
        );
        assert!(
            page.contains(
                "| A | clover | 2 ÷ 1 | 0.80× | 1.00× | 2.00× | 1.00× | 1.25× | 1.00× |\n"
            ),
            "{page}"
        );
        assert!(
            page.contains(
                "| A | clover | 3 ÷ 1 | 0.70× | 1.00× | 3.00× | 1.00× | 1.50× | 1.00× |\n"
            ),
            "{page}"
        );
        assert!(
            page.contains("| C | clover | 2 ÷ 1 | 1.00× | 1.00× | – | – | 1.00× | 1.00× |\n"),
            "{page}"
        );
        assert!(
            page.contains("| C | clover | 3 ÷ 1 | 0.50× | 1.00× | – | – | 1.00× | 1.00× |\n"),
            "{page}"
        );
        assert!(
            page.contains("## Failover time (clover, 2 copies)"),
            "{page}"
        );
        assert!(
            page.contains("## Failover time (clover, 3 copies)"),
            "{page}"
        );
        assert!(page.contains("## Failover time (race, 2 copies)"), "{page}");
        assert!(
            page.contains("| race | 2 | 1 | 900 | 900–900 | – | 0.90 | 1 | 3 | 12 (1/1) |\n"),
            "{page}"
        );
        assert!(
            page.contains(
                "| A | inplace | 2 ÷ 1 | 0.80× | 1.00× | 2.00× | 1.00× | 1.25× | 1.00× |\n"
            ),
            "{page}"
        );
        assert!(
            page.contains(
                "embedded cluster of 3 memory nodes over soft RoCE: Clover, RACE and in-place"
            ),
            "{page}"
        );
        assert!(
            page.contains("| **lost acknowledged writes** | **0** |\n"),
            "{page}"
        );
        assert!(
            page.contains("| `put outcome_unknown` | 2 | sent, not confirmed / lost |\n"),
            "{page}"
        );
        assert!(
            page.contains("| 1 | 1 | 15.0 | 1100 | degraded | – |\n"),
            "{page}"
        );
        // Parts that did not run leave no section.
        let only_soak = sections(&Parts {
            soak: Some((&sc, &soak)),
            ..Parts::default()
        });
        assert!(only_soak.starts_with("## Soak"), "{only_soak}");
        assert!(!only_soak.contains("## Failover time"));
        let soak_page = render(
            &header,
            &Parts {
                soak: Some((&sc, &soak)),
                ..Parts::default()
            },
        );
        assert!(
            soak_page
                .starts_with(&header.render("Results: `failover-bench soak`", WRITTEN_BY_SOAK)),
            "{soak_page}"
        );
        let mut race = sc.clone();
        race.index = BenchIndex::Race;
        let race_page = render(
            &header,
            &Parts {
                soak: Some((&race, &soak)),
                ..Parts::default()
            },
        );
        assert!(
            race_page.contains("soak --one-table --index race")
                && race_page.contains("docs/results/failover-soak-race.md"),
            "{race_page}"
        );
    }
}
