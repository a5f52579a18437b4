//! `failover-bench`: what more copies of a Clover, RACE or in-place table buy and cost,
//! on embedded clusters over soft RoCE (udp on loopback).
//!
//! With no subcommand it measures, in one run, (1) the failover time of tables of every
//! index at two and three copies when a memory node crashes, (2) YCSB workloads A and C
//! on tables of every index at one, two and three copies (throughput, latency, round
//! trips and bytes per operation, and the ratios to one copy), and (3) how fast a
//! replica set that lost a member is re-replicated (MB/s); `--soak-minutes` adds (4) a
//! soak. `failover-bench soak` runs the soak alone:
//! updates with data integrity while a memory node crashes every `--kill-every`
//! seconds. Tables are printed and written as JSON (`--json`) and, with
//! `--results-md PATH`, as a Markdown results page.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use failover_bench::cluster::CrashDetection;
use failover_bench::cost::{self, CostConfig};
use failover_bench::failover::{self, FailoverConfig};
use failover_bench::index::BenchIndex;
use failover_bench::rereplication::{self as rerep, RereplicationConfig};
use failover_bench::results_md::{self, Parts};
use failover_bench::soak::{self, SoakConfig, SoakReport};
use testbed::results_page::{PageHeader, write_page};

/// Measure failover time, the cost of more copies and crash survival of dmkv's
/// replicated Clover, RACE and in-place tables.
///
/// Without a subcommand: (1) failover time — for each index, a client alternates put
/// and get on keys (of a Clover table: homed on one memory node) of a table of two
/// copies, then of three copies, a memory node crashes, and the time to the first
/// successful operation is measured (median, min, max over --runs), with the heartbeat
/// timeout that bounds it and the errors seen meanwhile; (2) cost — YCSB A and C on
/// tables of every index at one, two and three copies in one
/// cluster of three memory nodes: ops/s, p50/p99, round trips and bytes per operation
/// and the two-copies ÷ one-copy and three-copies ÷ one-copy ratios; (3) re-replication
/// — a filled table of two copies loses a member and the metadata service copies its
/// data to a new one: MB/s from the new member joining to its promotion (over --runs).
/// --soak-minutes adds a soak (see
/// `failover-bench soak --help`). Everything runs in this process on embedded clusters
/// over soft RoCE (udp on loopback).
#[derive(Parser, Debug)]
#[command(version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    bench: BenchArgs,
    #[command(flatten)]
    crash: CrashArgs,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Reads and overwrites with data integrity on tables of two copies while a memory
    /// node crashes every --kill-every seconds for --minutes.
    ///
    /// The soak runs in periods of --kill-every seconds: each writes a fresh table, crashes one
    /// memory node in its middle, reads every key back at its end and checks it against
    /// what the writers were told (an acknowledged write must be there; an
    /// OutcomeUnknown write may or may not be), then drops the table and restarts the
    /// crashed node under its name with empty memory. Memory nodes crash in turn, each
    /// once per round of --memnodes periods. Exits with status 1 if any acknowledged
    /// write was lost or any read returned a value no write could have left.
    Soak(SoakArgs),
}

/// The failover and cost parts.
#[derive(Args, Debug)]
struct BenchArgs {
    /// Failover runs per number of copies (each on a new cluster).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Memory nodes of each failover cluster (at least 2; tables of three copies run
    /// on at least 3).
    #[arg(long, default_value_t = 2)]
    memnodes: usize,
    /// Keys homed on the crashed memory node that the failover client uses.
    #[arg(long, default_value_t = 8)]
    keys: usize,
    /// Value length of the failover and soak keys, bytes.
    #[arg(long, default_value_t = 64)]
    value_len: usize,
    /// YCSB records per table.
    #[arg(long, default_value_t = 2000)]
    records: u64,
    /// YCSB operations per run.
    #[arg(long, default_value_t = 20000)]
    operations: u64,
    /// YCSB driver threads (one session each).
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// YCSB operations in flight per thread.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// YCSB key distribution: uniform or zipfian.
    #[arg(long, default_value = "zipfian")]
    distribution: String,
    /// YCSB fields per record.
    #[arg(long, default_value_t = 10)]
    field_count: u64,
    /// YCSB bytes per field.
    #[arg(long, default_value_t = 100)]
    field_length: u64,
    /// Runs of each YCSB cell (the median by throughput is reported).
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Seed of the YCSB generators and the soak's choices.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Skip the failover part.
    #[arg(long)]
    skip_failover: bool,
    /// Skip the cost part.
    #[arg(long)]
    skip_cost: bool,
    /// Skip the re-replication part.
    #[arg(long)]
    skip_rereplication: bool,
    /// MiB of values written to the table whose lost copy is re-replicated.
    #[arg(long, default_value_t = 16)]
    rereplication_fill_mib: u64,
    /// Also run a soak of this many minutes (0: none) with --kill-every, 3 memory nodes,
    /// 64 keys and 2 writer threads.
    #[arg(long, default_value_t = 0.0)]
    soak_minutes: f64,
    /// With --soak-minutes: seconds between crashes.
    #[arg(long, default_value_t = 60.0)]
    kill_every: f64,
    /// With --soak-minutes: one table through every crash, re-replicated after each (see
    /// `failover-bench soak --help`).
    #[arg(long)]
    one_table: bool,
    /// Short run for smoke tests: 1 failover run, 300 records, 1500 operations, 1 repeat.
    #[arg(long)]
    quick: bool,
}

/// The soak subcommand's settings.
#[derive(Args, Debug)]
struct SoakArgs {
    /// How long to run, minutes (rounded up to whole --kill-every periods).
    #[arg(long, default_value_t = 10.0)]
    minutes: f64,
    /// Seconds between crashes.
    #[arg(long, default_value_t = 60.0)]
    kill_every: f64,
    /// Memory nodes (at least 2).
    #[arg(long, default_value_t = 3)]
    memnodes: usize,
    /// Keys per period.
    #[arg(long, default_value_t = 64)]
    keys: usize,
    /// Writer threads (one session each).
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Share of operations that are reads (YCSB A: 0.5).
    #[arg(long, default_value_t = 0.5)]
    read_fraction: f64,
    /// Value length, bytes.
    #[arg(long, default_value_t = 64)]
    value_len: usize,
    /// Seed of the writers' choices.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Keep one table through every crash: after each crash the node restarts with empty
    /// memory, the metadata service re-replicates the sets that lost it, and the next crash
    /// waits until the table reads healthy again (needs 3 or more memory nodes).
    #[arg(long)]
    one_table: bool,
    /// The index of the soak's tables: clover, race or inplace (pessimistic latches).
    #[arg(long, default_value = "clover")]
    index: BenchIndex,
    /// With --one-table: seconds a crashed table may take to read healthy again before
    /// the soak stops (a second crash of a degraded set could lose data).
    #[arg(long, default_value_t = 60.0)]
    heal_timeout_s: f64,
    #[command(flatten)]
    crash: CrashArgs,
    #[command(flatten)]
    output: OutputArgs,
}

/// How crashes are noticed, and the memory nodes' size.
#[derive(Args, Debug)]
struct CrashArgs {
    /// The metadata service's heartbeat timeout, ms: it fails a silent memory node
    /// over after this long (memory nodes heartbeat every third of it).
    #[arg(long, default_value_t = 1000)]
    heartbeat_ms: u64,
    /// First retransmission timeout of the client's queue pairs, ms (it doubles).
    #[arg(long, default_value_t = 5)]
    rc_timeout_ms: u64,
    /// Retransmissions before a queue pair to a silent memory node fails.
    #[arg(long, default_value_t = 4)]
    rc_retries: u32,
    /// Memory per memory node, MiB.
    #[arg(long, default_value_t = 64)]
    capacity_mib: u64,
}

/// Where results go.
#[derive(Args, Debug)]
struct OutputArgs {
    /// Where to write the JSON results (default results/failover-bench.json, or
    /// results/failover-bench-soak.json for the soak).
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// Also write the tables as a Markdown results page (date, machine, command line)
    /// to this file, replacing it.
    #[arg(long, value_name = "PATH")]
    results_md: Option<PathBuf>,
}

impl CrashArgs {
    fn detection(&self) -> CrashDetection {
        CrashDetection {
            timeout: Duration::from_millis(self.rc_timeout_ms.max(1)),
            retries: self.rc_retries,
        }
    }

    fn heartbeat(&self) -> Duration {
        Duration::from_millis(self.heartbeat_ms.max(3))
    }

    fn capacity(&self) -> Result<u64, String> {
        if self.capacity_mib == 0 || self.capacity_mib > 4096 {
            return Err(format!(
                "--capacity-mib {} must be between 1 and 4096",
                self.capacity_mib
            ));
        }
        Ok(self.capacity_mib << 20)
    }
}

/// The copies of the tables whose failover time is measured, one after the other.
const FAILOVER_COPIES: [u32; 2] = [2, 3];

fn kill_interval(seconds: f64) -> Result<Duration, String> {
    if !seconds.is_finite() || seconds < 0.5 {
        return Err(format!(
            "--kill-every {seconds} must be at least 0.5 seconds"
        ));
    }
    Ok(Duration::from_secs_f64(seconds))
}

fn main() {
    let cli = Cli::parse();
    let result = match &cli.command {
        Some(Command::Soak(args)) => run_soak(args),
        None => run_bench(&cli),
    };
    if let Err(e) = result {
        eprintln!("failover-bench: error: {e}");
        std::process::exit(1);
    }
}

fn soak_progress(line: &str) {
    eprintln!("failover-bench: soak {line}");
}

fn run_bench(cli: &Cli) -> Result<(), String> {
    let b = &cli.bench;
    let (mut runs, mut records, mut operations, mut repeat) =
        (b.runs, b.records, b.operations, b.repeat);
    if b.quick {
        (runs, records, operations, repeat) = (1, 300, 1500, 1);
    }
    if runs == 0 && !b.skip_failover {
        return Err("--runs must be at least 1 (or use --skip-failover)".into());
    }
    let capacity = cli.crash.capacity()?;
    let failover_config = |index: BenchIndex, replication: u32| FailoverConfig {
        index,
        runs,
        replication,
        memnodes: b.memnodes.max(replication as usize),
        capacity,
        heartbeat_timeout: cli.crash.heartbeat(),
        detection: cli.crash.detection(),
        keys: b.keys,
        value_len: b.value_len,
        warmup: Duration::from_millis(300),
        successes_after: 20,
        give_up_after: Duration::from_secs(10).max(cli.crash.heartbeat() * 10),
    };
    let cost_config = CostConfig {
        records,
        operations,
        threads: b.threads.max(1),
        concurrency: b.concurrency.max(1),
        distribution: b.distribution.clone(),
        field_count: b.field_count.max(1),
        field_length: b.field_length.max(1),
        repeat: repeat.max(1),
        capacity: capacity.max(128 << 20),
        seed: b.seed,
    };
    let soak_config = (b.soak_minutes > 0.0)
        .then(|| -> Result<SoakConfig, String> {
            Ok(SoakConfig {
                minutes: b.soak_minutes,
                kill_every: kill_interval(b.kill_every)?,
                memnodes: 3,
                capacity,
                heartbeat_timeout: cli.crash.heartbeat(),
                detection: cli.crash.detection(),
                keys: 64,
                threads: 2,
                read_fraction: 0.5,
                value_len: b.value_len,
                seed: b.seed,
                one_table: b.one_table,
                index: BenchIndex::Clover,
                heal_timeout: Duration::from_secs_f64(b.kill_every.max(1.0)),
            })
        })
        .transpose()?;
    let rerep_config = RereplicationConfig {
        runs,
        memnodes: 3,
        capacity: capacity.max(64 << 20),
        heartbeat_timeout: cli.crash.heartbeat(),
        detection: cli.crash.detection(),
        fill_bytes: if b.quick {
            2 << 20
        } else {
            b.rereplication_fill_mib << 20
        },
        value_len: 1024,
        rate_mb: testbed::embedded::REREPLICATION_RATE_MB,
        indexes: BenchIndex::ALL.to_vec(),
    };
    if b.memnodes < 2 && !b.skip_failover {
        return Err("failover runs need at least 2 memory nodes for tables of two copies".into());
    }
    let mut failovers = Vec::new();
    if !b.skip_failover {
        for (index, copies) in BenchIndex::ALL
            .into_iter()
            .flat_map(|i| FAILOVER_COPIES.map(|c| (i, c)))
        {
            let config = failover_config(index, copies);
            eprintln!(
                "failover-bench: failover: {index} table, {copies} copies, {runs} run(s), {} \
                 memory nodes, heartbeat timeout {} ms",
                config.memnodes, cli.crash.heartbeat_ms
            );
            let measured = failover::measure(&config)?;
            failovers.push((config, measured));
        }
    }
    let cells = if b.skip_cost {
        None
    } else {
        eprintln!(
            "failover-bench: cost: YCSB A and C, {records} records, {operations} operations, \
             {repeat} repeat(s), 1, 2 and 3 copies on {} memory nodes",
            cost::MEMNODES
        );
        Some(cost::measure(&cost_config)?)
    };
    let rereplicated = if b.skip_rereplication {
        None
    } else {
        eprintln!(
            "failover-bench: re-replication: {runs} run(s) per index, {} MiB of values, 3 memory \
             nodes",
            rerep_config.fill_bytes >> 20
        );
        Some(rerep::measure(&rerep_config)?)
    };
    let soak_report = match &soak_config {
        Some(c) => {
            eprintln!(
                "failover-bench: soak: {} period(s) of {:.0} s",
                c.periods(),
                c.kill_every.as_secs_f64()
            );
            Some(soak::run(c, soak_progress)?)
        }
        None => None,
    };
    let parts = Parts {
        failover: &failovers,
        cost: cells.as_deref().map(|c| (&cost_config, c)),
        soak: soak_config.as_ref().zip(soak_report.as_ref()),
        rereplication: rereplicated.as_deref().map(|r| (&rerep_config, r)),
    };
    finish(
        &parts,
        &cli.output,
        Path::new("results/failover-bench.json"),
    )?;
    soak_verdict(soak_report.as_ref(), b.one_table)
}

fn run_soak(args: &SoakArgs) -> Result<(), String> {
    let config = SoakConfig {
        minutes: args.minutes,
        kill_every: kill_interval(args.kill_every)?,
        memnodes: args.memnodes,
        capacity: args.crash.capacity()?,
        heartbeat_timeout: args.crash.heartbeat(),
        detection: args.crash.detection(),
        keys: args.keys,
        threads: args.threads,
        read_fraction: args.read_fraction,
        value_len: args.value_len,
        seed: args.seed,
        one_table: args.one_table,
        index: args.index,
        heal_timeout: Duration::from_secs_f64(args.heal_timeout_s.max(0.0)),
    };
    eprintln!(
        "failover-bench: soak: {} table(s), {} period(s) of {:.1} s on {} memory nodes; {}",
        config.index,
        config.periods(),
        config.kill_every.as_secs_f64(),
        config.memnodes,
        if config.one_table {
            "one table of two copies sees every crash; the crashed node restarts with empty \
             memory, and the next crash waits until the table is re-replicated"
        } else {
            "every period uses a fresh table that sees one crash, and the crashed node \
             restarts with empty memory before the next"
        }
    );
    let report = soak::run(&config, soak_progress)?;
    let parts = Parts {
        soak: Some((&config, &report)),
        ..Parts::default()
    };
    finish(
        &parts,
        &args.output,
        Path::new("results/failover-bench-soak.json"),
    )?;
    soak_verdict(Some(&report), config.one_table)
}

/// Print the sections and write the JSON and (if asked) the results page.
fn finish(parts: &Parts, output: &OutputArgs, default_json: &Path) -> Result<(), String> {
    println!("{}", results_md::sections(parts));
    let json = output.json.as_deref().unwrap_or(default_json);
    if let Some(dir) = json.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(&failover_bench::json::document(parts))
        .map_err(|e| e.to_string())?;
    std::fs::write(json, text).map_err(|e| format!("writing {}: {e}", json.display()))?;
    eprintln!("failover-bench: wrote {}", json.display());
    if let Some(path) = &output.results_md {
        write_page(path, &results_md::render(&PageHeader::current(), parts))?;
        eprintln!("failover-bench: wrote {}", path.display());
    }
    Ok(())
}

/// An error when the soak found lost or impossible values, or stopped early; with one
/// table, also when an operation failed with anything but `OutcomeUnknown`.
fn soak_verdict(report: Option<&SoakReport>, one_table: bool) -> Result<(), String> {
    let Some(r) = report else { return Ok(()) };
    if r.lost_acknowledged_writes > 0 || r.unexpected_values > 0 || r.stale_reads > 0 {
        return Err(format!(
            "the soak lost {} acknowledged write(s), found {} value(s) no write could leave and \
             {} impossible read(s)",
            r.lost_acknowledged_writes, r.unexpected_values, r.stale_reads
        ));
    }
    if let Some(why) = &r.stopped {
        return Err(format!("the soak stopped early: {why}"));
    }
    if one_table && r.failures_besides_outcome_unknown() > 0 {
        return Err(format!(
            "{} operation(s) failed with an error other than `OutcomeUnknown`: {:?}",
            r.failures_besides_outcome_unknown(),
            r.failure_examples
        ));
    }
    Ok(())
}
