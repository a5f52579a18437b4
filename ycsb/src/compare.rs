//! `ycsb compare`: Redis and dmkv side by side, in one run, on one machine.
//!
//! Starts a `redis-server` on a free loopback port (no persistence) and an embedded dmkv cluster
//! (metadata service + memory node, soft RoCE over `udp` on loopback), loads the same records into
//! Redis and into two dmkv tables (`clover` and `race` indexes), runs workloads A, B, C and F with
//! the same threads, concurrency, seed and request distribution on each, and prints one table:
//! throughput and p50/p99 latency per operation, with the ratios dmkv / Redis measured in the
//! same run (these machines are shared and noisy: only same-run ratios compare). Systems take
//! turns per workload so they see the same machine conditions. With `--rounds N` every workload
//! runs N times, the systems in turn with a different one first each round; the table shows
//! each system's median run and the report lists every round's ratios. A dmkv index the client
//! cannot serve yet is shown as "not available", with the client's reason.

use crate::bindings::dmkv::{DmkvBinding, DmkvConfig, capacity_for, record_bound};
use crate::bindings::redis::RedisBinding;
use crate::bindings::resp::{Conn, Value};
use crate::client::{Phase, RunOptions, run_phase};
use crate::db::{Binding, Status};
use crate::measure::RunReport;
use crate::pass_through::median;
use crate::props::Properties;
use crate::workload::builtin_workload;
use kvstore::IndexKind;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The comparison's settings before `-p` overrides.
pub const DEFAULTS: &[(&str, &str)] = &[
    ("recordcount", "100000"),
    ("operationcount", "100000"),
    ("fieldcount", "10"),
    ("fieldlength", "100"),
    ("requestdistribution", "zipfian"),
    ("threadcount", "1"),
    ("concurrency", "8"),
    ("seed", "1"),
    ("hdrhistogram.percentiles", "50,99"),
];

/// What `--quick` scales down to.
pub const QUICK: &[(&str, &str)] = &[("recordcount", "1000"), ("operationcount", "2000")];

/// `ycsb compare` options.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareArgs {
    /// `-p`, `-threads`, `-concurrency`: win over the defaults and `--quick`.
    pub overrides: Vec<(String, String)>,
    pub quick: bool,
    pub json: PathBuf,
    /// `--results-md FILE`: also write the report as a Markdown results page.
    pub results_md: Option<PathBuf>,
    pub progress: Option<bool>,
    pub workloads: Vec<String>,
    pub redis_server: String,
    /// `--rounds N`: runs of every workload per system (at least 1).
    pub rounds: usize,
}

impl Default for CompareArgs {
    fn default() -> Self {
        CompareArgs {
            overrides: Vec::new(),
            quick: false,
            json: PathBuf::from("ycsb-compare.json"),
            results_md: None,
            progress: None,
            workloads: ["a", "b", "c", "f"].iter().map(|s| s.to_string()).collect(),
            redis_server: "redis-server".into(),
            rounds: 1,
        }
    }
}

/// A `redis-server` child on a free loopback port; killed when dropped.
pub struct RedisServer {
    child: Child,
    pub port: u16,
    pub version: String,
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn not_installed(program: &str, why: impl std::fmt::Display) -> String {
    format!(
        "cannot run {program} ({why}): the comparison needs a local Redis server; install it \
         with `apt-get install redis-server` (Debian/Ubuntu), or point --redis-server at one"
    )
}

impl RedisServer {
    /// Start `program` on a free port of 127.0.0.1 without persistence; wait for PING.
    pub fn start(program: &str) -> Result<RedisServer, String> {
        let out = Command::new(program)
            .arg("--version")
            .output()
            .map_err(|e| not_installed(program, e))?;
        if !out.status.success() {
            return Err(not_installed(program, "`--version` failed"));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let version = text
            .split_whitespace()
            .find_map(|w| w.strip_prefix("v="))
            .unwrap_or("unknown")
            .to_string();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free loopback port: {e}"))?
            .port();
        let child = Command::new(program)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| not_installed(program, e))?;
        let mut server = RedisServer {
            child,
            port,
            version,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(mut c) = Conn::connect("127.0.0.1", port)
                && c.call(&[b"PING"]) == Ok(Value::Simple("PONG".into()))
            {
                return Ok(server);
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(format!("{program} exited at startup ({status})"));
            }
            if Instant::now() > deadline {
                return Err(format!("{program} did not answer PING on port {port}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// One system's results.
#[derive(Debug, Clone)]
pub struct SystemRuns {
    pub name: String,
    /// Why the system could not run, if it could not.
    pub unavailable: Option<String>,
    /// The load: the round with the median throughput.
    pub load: Option<RunReport>,
    /// Every load round's throughput (records/s), in round order.
    pub load_throughputs: Vec<f64>,
    /// One run per workload, in [`Comparison::workloads`] order: the round with the median
    /// throughput.
    pub runs: Vec<RunReport>,
    /// Per workload, the throughput of every round, in round order.
    pub round_throughputs: Vec<Vec<f64>>,
}

/// The systems of round `round` in the order they take their turns: a different one
/// first each round.
fn turn(available: &[usize], round: usize) -> Vec<usize> {
    available
        .iter()
        .cycle()
        .skip(round % available.len().max(1))
        .take(available.len())
        .copied()
        .collect()
}

/// Says on stderr what `system` does now (`what`: "loading", "workloadc on"), with the
/// round when there are several.
fn say(what: &str, system: &str, round: usize, rounds: usize) {
    if rounds > 1 {
        eprintln!("compare: {what} {system} (round {} of {rounds})", round + 1);
    } else {
        eprintln!("compare: {what} {system}");
    }
}

/// Empty the Redis server on `port` on loopback (`FLUSHALL`) before a load round.
fn flush_redis(port: u16) -> Result<(), String> {
    let mut conn = crate::bindings::resp::Conn::connect("127.0.0.1", port)
        .map_err(|e| format!("redis: connecting to flush it: {e}"))?;
    match conn.call(&[b"FLUSHALL"]) {
        Ok(crate::bindings::resp::Value::Error(e)) | Err(e) => Err(format!("redis: FLUSHALL: {e}")),
        Ok(_) => Ok(()),
    }
}

/// Everything one `ycsb compare` measured.
#[derive(Debug, Clone)]
pub struct Comparison {
    pub date: String,
    pub machine: String,
    pub redis_version: String,
    pub workloads: Vec<String>,
    pub settings: Properties,
    pub systems: Vec<SystemRuns>,
    /// Rounds per workload.
    pub rounds: usize,
}

/// One row of the table: a workload's operation (or `all`) on every system.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Row {
    pub workload: String,
    pub op: String,
    /// Per system (same order as the systems): ops/s, p50 µs, p99 µs; `None` when not available.
    pub cells: Vec<Option<Cell>>,
}

#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Cell {
    pub ops_per_sec: f64,
    pub p50_us: Option<u64>,
    pub p99_us: Option<u64>,
}

pub(crate) fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    format!("{cpus} CPUs ({model})")
}

/// Operations that are not failures: `OK`, and for the hash-less scan-free workloads nothing else.
fn failures(r: &RunReport) -> u64 {
    r.ops
        .iter()
        .filter(|o| o.name != "VERIFY" && o.name != "CLEANUP")
        .flat_map(|o| o.returns.iter())
        .filter(|(s, _)| s != Status::Ok.name())
        .map(|(_, n)| n)
        .sum()
}

/// The run with the median throughput (the lower middle one of an even count) and every
/// run's throughput in the order given; `None` for no runs.
pub(crate) fn median_run(runs: Vec<RunReport>) -> Option<(RunReport, Vec<f64>)> {
    let all: Vec<f64> = runs.iter().map(|r| r.throughput).collect();
    let m = median(all.clone())?;
    let pick = all.iter().position(|t| t.total_cmp(&m).is_eq())?;
    runs.into_iter().nth(pick).map(|r| (r, all))
}

impl SystemRuns {
    /// A system with nothing measured yet (`unavailable`: why it cannot run).
    pub(crate) fn new(name: String, unavailable: Option<String>) -> SystemRuns {
        SystemRuns {
            name,
            unavailable,
            load: None,
            load_throughputs: Vec::new(),
            runs: Vec::new(),
            round_throughputs: Vec::new(),
        }
    }

    /// Operations that did not return OK, over the load and every run.
    pub fn failed_operations(&self) -> u64 {
        self.load.iter().chain(&self.runs).map(failures).sum()
    }
}

pub(crate) fn workload_props(name: &str, base: &Properties) -> Result<Properties, String> {
    let text = builtin_workload(name).ok_or_else(|| {
        format!("unknown workload {name:?}: choose among a, b, c, d, f (e needs scans)")
    })?;
    let mut p = Properties::parse_str(text);
    for (k, v) in base.iter() {
        p.set(k.clone(), v.clone());
    }
    Ok(p)
}

/// Run the comparison.
pub fn run(args: &CompareArgs) -> Result<Comparison, String> {
    let mut base = Properties::new();
    for (k, v) in DEFAULTS {
        base.set(*k, *v);
    }
    if args.quick {
        for (k, v) in QUICK {
            base.set(*k, *v);
        }
    }
    for (k, v) in &args.overrides {
        base.set(k.clone(), v.clone());
    }
    let workloads: Vec<String> = args
        .workloads
        .iter()
        .map(|w| {
            let w = w.trim().to_ascii_lowercase();
            if w.len() == 1 {
                format!("workload{w}")
            } else {
                w
            }
        })
        .collect();
    if workloads.iter().any(|w| w == "workloade") {
        return Err("workload E scans in key order, which dmkv's hash indexes cannot do".into());
    }
    let load_props = workload_props("workloada", &base)?;

    let redis = RedisServer::start(&args.redis_server)?;
    let mut rprops = load_props.clone();
    rprops.set("redis.host", "127.0.0.1");
    rprops.set("redis.port", redis.port.to_string());

    // One embedded dmkv cluster over udp holds both tables.
    let mut dprops = load_props.clone();
    if !dprops.contains("dmkv.transport") {
        dprops.set("dmkv.transport", "udp");
    }
    if !dprops.contains("dmkv.capacity") {
        let e = |e: crate::props::PropError| e.to_string();
        let records = dprops.get_u64("recordcount", 0).map_err(e)?;
        let ops = dprops.get_u64("operationcount", 0).map_err(e)?;
        let threads = dprops.get_u64("threadcount", 1).map_err(e)?;
        let bound = record_bound(&dprops).map_err(|e| e.to_string())?;
        // Two tables; workloads A, B, C, F insert nothing (D does). Every load round
        // after the first loads a new table while the last one's records wait out the
        // grace period of the leases that hold them.
        let loads = args.rounds.max(1) as u64 + 1;
        let objects = 2 * (loads * records.max(1000) + ops * workloads.len() as u64 / 20);
        dprops.set(
            "dmkv.capacity",
            capacity_for(objects, bound, 2 * threads).to_string(),
        );
    }
    let config = DmkvConfig::from_props(&dprops).map_err(|e| e.to_string())?;
    // `_switch` (dmkv.switch=true) lives as long as the client.
    let (client, _switch) = config.connect().map_err(|e| e.to_string())?;
    let table_config = |index: IndexKind| DmkvConfig {
        index: Some(index),
        table: format!("usertable_{}", index.as_str()),
        ..config.clone()
    };

    let mut bindings: Vec<Option<Box<dyn Binding>>> = Vec::new();
    let mut systems: Vec<SystemRuns> = Vec::new();
    let mut props_of: Vec<Properties> = Vec::new();
    // The index of each dmkv system (Redis: none), to start it afresh between loads.
    let mut indexes: Vec<Option<IndexKind>> = vec![None];
    bindings.push(Some(Box::new(RedisBinding::new(&rprops))));
    systems.push(SystemRuns::new("redis".into(), None));
    props_of.push(rprops.clone());
    // A binding of the table of `index`, created when absent, that a session opens.
    let dmkv_binding = |index: IndexKind| {
        DmkvBinding::with_client(client.clone(), table_config(index))
            .map_err(|e| e.to_string())
            .and_then(|b| b.check().map(|()| b).map_err(|e| e.to_string()))
    };
    for index in [IndexKind::Clover, IndexKind::Race] {
        let name = format!("dmkv-{}", index.as_str());
        match dmkv_binding(index) {
            Ok(b) => {
                bindings.push(Some(Box::new(b)));
                systems.push(SystemRuns::new(name, None));
            }
            Err(e) if index == IndexKind::Clover => return Err(format!("{name}: {e}")),
            Err(e) => {
                bindings.push(None);
                systems.push(SystemRuns::new(name, Some(e)));
            }
        }
        indexes.push(Some(index));
        props_of.push(dprops.clone());
    }

    let opts = |phase: Phase, label: &str| {
        let mut o = RunOptions::new(phase);
        if let Some(p) = args.progress {
            o.progress = p;
        }
        o.workload_label = label.to_string();
        o
    };
    let rounds = args.rounds.max(1);
    let available: Vec<usize> = (0..bindings.len())
        .filter(|&i| bindings[i].is_some())
        .collect();
    // Loads take turns too: each round every system loads the records again into an
    // empty store (Redis flushed, the dmkv table dropped and created anew).
    let mut loads: Vec<Vec<RunReport>> = vec![Vec::new(); bindings.len()];
    for round in 0..rounds {
        for i in turn(&available, round) {
            if round > 0 {
                match indexes[i] {
                    None => flush_redis(redis.port)?,
                    Some(index) => {
                        let table = table_config(index).table;
                        bindings[i] = None;
                        client
                            .drop_table(&table)
                            .map_err(|e| format!("{}: dropping {table}: {e}", systems[i].name))?;
                        let b =
                            dmkv_binding(index).map_err(|e| format!("{}: {e}", systems[i].name))?;
                        bindings[i] = Some(Box::new(b));
                    }
                }
            }
            let Some(b) = &bindings[i] else { continue };
            say("loading", &systems[i].name, round, rounds);
            let r = run_phase(&**b, &props_of[i], &opts(Phase::Load, "load"))
                .map_err(|e| format!("{}: load: {e}", systems[i].name))?;
            loads[i].push(r);
        }
    }
    for (i, runs) in loads.into_iter().enumerate() {
        if let Some((median, all)) = median_run(runs) {
            systems[i].load = Some(median);
            systems[i].load_throughputs = all;
        }
    }
    for w in &workloads {
        let wp = workload_props(w, &base)?;
        let mut reports: Vec<Vec<RunReport>> = vec![Vec::new(); bindings.len()];
        for round in 0..rounds {
            for i in turn(&available, round) {
                let Some(b) = &bindings[i] else { continue };
                let mut p = wp.clone();
                for key in [
                    "redis.host",
                    "redis.port",
                    "dmkv.transport",
                    "dmkv.capacity",
                ] {
                    if let Some(v) = props_of[i].get(key) {
                        p.set(key, v.to_string());
                    }
                }
                say(&format!("{w} on"), &systems[i].name, round, rounds);
                let r = run_phase(&**b, &p, &opts(Phase::Run, w))
                    .map_err(|e| format!("{}: {w}: {e}", systems[i].name))?;
                reports[i].push(r);
            }
        }
        for (i, runs) in reports.into_iter().enumerate() {
            if let Some((median, all)) = median_run(runs) {
                systems[i].runs.push(median);
                systems[i].round_throughputs.push(all);
            }
        }
    }
    drop(bindings);
    drop(client);
    Ok(Comparison {
        date: crate::client::timestamp()[..10].to_string(),
        machine: machine(),
        redis_version: redis.version.clone(),
        workloads,
        settings: base,
        systems,
        rounds,
    })
}

fn percentile(r: &crate::measure::OpReport, p: f64) -> Option<u64> {
    r.percentiles.iter().find(|(q, _)| *q == p).map(|(_, v)| *v)
}

/// Operation blocks shown in the table, in this order.
const OPS: &[&str] = &["READ", "UPDATE", "INSERT", "READ-MODIFY-WRITE", "DELETE"];

impl Comparison {
    /// The table's rows: per workload, `all` (throughput) then each operation.
    pub fn rows(&self) -> Vec<Row> {
        let mut rows = Vec::new();
        for (wi, w) in self.workloads.iter().enumerate() {
            fn run(s: &SystemRuns, wi: usize) -> Option<&RunReport> {
                s.runs.get(wi).filter(|_| s.unavailable.is_none())
            }
            let short = w.trim_start_matches("workload").to_ascii_uppercase();
            rows.push(Row {
                workload: short.clone(),
                op: "all".into(),
                cells: self
                    .systems
                    .iter()
                    .map(|s| {
                        run(s, wi).map(|r| Cell {
                            ops_per_sec: r.throughput,
                            p50_us: None,
                            p99_us: None,
                        })
                    })
                    .collect(),
            });
            for op in OPS {
                let present = self
                    .systems
                    .iter()
                    .filter_map(|s| run(s, wi))
                    .any(|r| r.ops.iter().any(|o| o.name == *op));
                if !present {
                    continue;
                }
                rows.push(Row {
                    workload: short.clone(),
                    op: op.to_string(),
                    cells: self
                        .systems
                        .iter()
                        .map(|s| {
                            let r = run(s, wi)?;
                            let o = r.ops.iter().find(|o| o.name == *op)?;
                            let secs = (r.runtime_ms as f64 / 1000.0).max(1e-9);
                            Some(Cell {
                                ops_per_sec: o.operations as f64 / secs,
                                p50_us: percentile(o, 50.0),
                                p99_us: percentile(o, 99.0),
                            })
                        })
                        .collect(),
                });
            }
        }
        rows
    }

    /// The table as Markdown (readable as text too).
    pub fn table(&self) -> String {
        let na = "not available";
        let mut header = vec!["workload".to_string(), "op".to_string()];
        for s in &self.systems {
            header.push(format!("{} ops/s", s.name));
            header.push("p50/p99 µs".into());
        }
        let dmkv: Vec<usize> = (1..self.systems.len()).collect();
        for &i in &dmkv {
            let n = self.systems[i].name.trim_start_matches("dmkv-");
            header.push(format!("{n}÷redis ops/s"));
            header.push("p50/p99".into());
        }
        let ratio = |a: f64, b: f64| {
            if b > 0.0 {
                format!("{:.2}", a / b)
            } else {
                "-".into()
            }
        };
        let lat = |c: &Cell| match (c.p50_us, c.p99_us) {
            (Some(a), Some(b)) => format!("{a} / {b}"),
            _ => String::new(),
        };
        let mut lines = vec![header];
        for row in self.rows() {
            let mut line = vec![row.workload.clone(), row.op.clone()];
            for c in &row.cells {
                match c {
                    Some(c) => {
                        line.push(format!("{:.0}", c.ops_per_sec));
                        line.push(lat(c));
                    }
                    None => {
                        line.push(na.into());
                        line.push(String::new());
                    }
                }
            }
            for &i in &dmkv {
                match (&row.cells[0], &row.cells[i]) {
                    (Some(r), Some(d)) => {
                        line.push(ratio(d.ops_per_sec, r.ops_per_sec));
                        line.push(match (d.p50_us, r.p50_us, d.p99_us, r.p99_us) {
                            (Some(a), Some(b), Some(c), Some(e)) => format!(
                                "{} / {}",
                                ratio(a as f64, b as f64),
                                ratio(c as f64, e as f64)
                            ),
                            _ => String::new(),
                        });
                    }
                    _ => {
                        line.push("n/a".into());
                        line.push(String::new());
                    }
                }
            }
            lines.push(line);
        }
        let cols = lines[0].len();
        let width: Vec<usize> = (0..cols)
            .map(|c| {
                lines
                    .iter()
                    .map(|l| l[c].chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let fmt = |l: &[String]| {
            let cells: Vec<String> = l
                .iter()
                .enumerate()
                .map(|(c, s)| {
                    let pad = width[c] - s.chars().count();
                    if c < 2 {
                        format!("{s}{}", " ".repeat(pad))
                    } else {
                        format!("{}{s}", " ".repeat(pad))
                    }
                })
                .collect();
            format!("| {} |", cells.join(" | "))
        };
        let mut out = fmt(&lines[0]) + "\n";
        let rule: Vec<String> = (0..cols)
            .map(|c| {
                if c < 2 {
                    "-".repeat(width[c] + 2)
                } else {
                    format!("{}:", "-".repeat(width[c] + 1))
                }
            })
            .collect();
        out += &format!("|{}|\n", rule.join("|"));
        for l in &lines[1..] {
            out += &(fmt(l) + "\n");
        }
        out
    }

    /// The header, table and notes printed by `ycsb compare`.
    pub fn report(&self) -> String {
        let s = &self.settings;
        let get = |k: &str| s.get(k).unwrap_or("?").to_string();
        let mut out = format!(
            "YCSB side by side, {date}, {machine}\n\
             {records} records ({fields} fields x {len} B), {ops} operations per workload, {dist} \
             requests, {threads} thread(s) x {conc} concurrent operations each, seed {seed}\n\
             redis: redis-server {rv} on 127.0.0.1 (no persistence), {conc} commands pipelined \
             per connection\n\
             dmkv: embedded cluster (metadata service + memory node) over {transport} on \
             127.0.0.1, tables usertable_clover and usertable_race\n\n",
            date = self.date,
            machine = self.machine,
            records = get("recordcount"),
            fields = get("fieldcount"),
            len = get("fieldlength"),
            ops = get("operationcount"),
            dist = get("requestdistribution"),
            threads = get("threadcount"),
            conc = get("concurrency"),
            seed = get("seed"),
            rv = self.redis_version,
            transport = s.get("dmkv.transport").unwrap_or("udp"),
        );
        out += &self.table();
        out += "\nops/s: operations of that type per second of the run; p50/p99: latency \
                percentiles; ratios are dmkv / redis from this run (ops/s: higher is better for \
                dmkv, latency: lower is).\n";
        out += &self.round_notes();
        for sys in &self.systems {
            if let Some(why) = &sys.unavailable {
                out += &format!("{}: not available: {why}\n", sys.name);
            } else {
                let load = sys.load.as_ref().map_or(0.0, |l| l.throughput);
                out += &format!(
                    "{}: load {:.0} records/s{}; failed operations: {}\n",
                    sys.name,
                    load,
                    if self.rounds > 1 {
                        " (median round)"
                    } else {
                        ""
                    },
                    sys.failed_operations()
                );
            }
        }
        out
    }

    /// With several rounds: what the table shows, and every round's all-operations ratio of
    /// each dmkv system to Redis, per workload. Empty with one round.
    pub fn round_notes(&self) -> String {
        if self.rounds <= 1 {
            return String::new();
        }
        let mut out = format!(
            "{} rounds of the load and of every workload, the systems in turn (a different one \
             first each round; each load into an empty store); the table and the load figures \
             show each system's median run. Ratio to redis (all operations), round by round:\n",
            self.rounds
        );
        let Some(redis) = self.systems.first() else {
            return out;
        };
        let ratio_line = |label: &str, sys: &SystemRuns, mine: &[f64], base: &[f64]| {
            let ratios: Vec<f64> = mine
                .iter()
                .zip(base)
                .filter(|(_, b)| **b > 0.0)
                .map(|(d, b)| d / b)
                .collect();
            let listed: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
            let median = median(ratios).map_or("-".to_string(), |m| format!("{m:.2}"));
            format!(
                "- {label} {}÷redis: {} (median {median})\n",
                sys.name.trim_start_matches("dmkv-"),
                listed.join(", ")
            )
        };
        for sys in self.systems.iter().skip(1) {
            if !sys.load_throughputs.is_empty() {
                out += &ratio_line("load", sys, &sys.load_throughputs, &redis.load_throughputs);
            }
        }
        for (wi, w) in self.workloads.iter().enumerate() {
            let short = w.trim_start_matches("workload").to_ascii_uppercase();
            let Some(base) = redis.round_throughputs.get(wi) else {
                continue;
            };
            for sys in self.systems.iter().skip(1) {
                let Some(mine) = sys.round_throughputs.get(wi) else {
                    continue;
                };
                out += &ratio_line(&short, sys, mine, base);
            }
        }
        out
    }

    /// Everything as JSON; `runs` holds every phase's report, so `ycsb plot` reads the file.
    pub fn to_json(&self) -> serde_json::Value {
        let runs: Vec<&RunReport> = self
            .systems
            .iter()
            .flat_map(|s| s.load.iter().chain(&s.runs))
            .collect();
        serde_json::json!({
            "date": self.date,
            "machine": self.machine,
            "redis_version": self.redis_version,
            "workloads": self.workloads,
            "rounds": self.rounds,
            "settings": self.settings.iter().collect::<std::collections::BTreeMap<_, _>>(),
            "systems": self.systems.iter().map(|s| serde_json::json!({
                "name": s.name,
                "available": s.unavailable.is_none(),
                "reason": s.unavailable,
                "failed_operations": s.failed_operations(),
                "round_throughputs": s.round_throughputs,
                "load_throughputs": s.load_throughputs,
            })).collect::<Vec<_>>(),
            "rows": self.rows(),
            "runs": runs,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::OpReport;

    fn report(system: &str, throughput: f64, ops: &[(&str, u64, u64, u64)]) -> RunReport {
        RunReport {
            system: system.into(),
            phase: "run".into(),
            workload: "workloadb".into(),
            threads: 1,
            concurrency: 1,
            target: 0.0,
            runtime_ms: 1000,
            operations: ops.iter().map(|o| o.1).sum(),
            throughput,
            ops: ops
                .iter()
                .map(|(name, n, p50, p99)| OpReport {
                    name: name.to_string(),
                    operations: *n,
                    average_us: 0.0,
                    min_us: 0,
                    max_us: 0,
                    percentiles: vec![(50.0, *p50), (99.0, *p99)],
                    returns: vec![("OK".into(), *n)],
                    cdf: Vec::new(),
                    exact: None,
                })
                .collect(),
            protocol: None,
            properties: Default::default(),
            measurement_type: Default::default(),
        }
    }

    #[test]
    fn table_has_ratios_and_unavailable_systems() {
        let c = Comparison {
            date: "2026-11-21".into(),
            machine: "2 CPUs".into(),
            redis_version: "7.0.15".into(),
            workloads: vec!["workloadb".into()],
            settings: Properties::new(),
            systems: vec![
                SystemRuns {
                    runs: vec![report("redis", 1000.0, &[("READ", 950, 100, 200)])],
                    ..SystemRuns::new("redis".into(), None)
                },
                SystemRuns {
                    runs: vec![report("dmkv-clover", 2000.0, &[("READ", 1900, 50, 400)])],
                    ..SystemRuns::new("dmkv-clover".into(), None)
                },
                SystemRuns::new("dmkv-race".into(), Some("unsupported: race".into())),
            ],
            rounds: 1,
        };
        let t = c.table();
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4, "{t}");
        let cells = |l: &str| -> Vec<String> {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect()
        };
        assert_eq!(
            cells(lines[2]),
            [
                "B",
                "all",
                "1000",
                "",
                "2000",
                "",
                "not available",
                "",
                "2.00",
                "",
                "n/a",
                ""
            ]
        );
        assert_eq!(
            cells(lines[3]),
            [
                "B",
                "READ",
                "950",
                "100 / 200",
                "1900",
                "50 / 400",
                "not available",
                "",
                "2.00",
                "0.50 / 2.00",
                "n/a",
                ""
            ]
        );
        assert!(lines[1].starts_with("|----------|------|---"), "{t}");
        let r = c.report();
        assert!(
            r.contains("dmkv-race: not available: unsupported: race"),
            "{r}"
        );
        assert!(
            r.contains("dmkv-clover: load 0 records/s; failed operations: 0"),
            "{r}"
        );
        let j = c.to_json();
        assert_eq!(j["systems"][2]["available"], false);
        assert_eq!(j["runs"].as_array().unwrap().len(), 2);
        assert_eq!(j["rows"][1]["cells"][1]["p99_us"], 400);
    }

    #[test]
    fn the_median_round_is_shown_and_every_rounds_ratio_listed() {
        let runs = |sys: &str, t: &[f64]| -> Vec<RunReport> {
            t.iter()
                .map(|&x| report(sys, x, &[("READ", x as u64, 10, 20)]))
                .collect()
        };
        let (m, all) = median_run(runs("redis", &[100.0, 300.0, 200.0])).unwrap();
        assert_eq!(m.throughput, 200.0);
        assert_eq!(all, [100.0, 300.0, 200.0]);
        let (m, _) = median_run(runs("redis", &[40.0, 10.0, 30.0, 20.0])).unwrap();
        assert_eq!(m.throughput, 20.0, "the lower middle of an even count");
        assert!(median_run(Vec::new()).is_none());
        let system = |name: &str, t: &[f64]| {
            let (median, all) = median_run(runs(name, t)).unwrap();
            let (load, loads) = median_run(runs(name, &[t[0] / 2.0, t[1] / 2.0, t[2]])).unwrap();
            SystemRuns {
                load: Some(load),
                load_throughputs: loads,
                runs: vec![median],
                round_throughputs: vec![all],
                ..SystemRuns::new(name.into(), None)
            }
        };
        let c = Comparison {
            date: "2026-11-29".into(),
            machine: "2 CPUs".into(),
            redis_version: "7.0.15".into(),
            workloads: vec!["workloadc".into()],
            settings: Properties::new(),
            systems: vec![
                system("redis", &[100.0, 200.0, 100.0]),
                system("dmkv-race", &[150.0, 100.0, 90.0]),
            ],
            rounds: 3,
        };
        let t = c.table();
        // Medians: redis 100 of (100, 200, 100), race 100 of (150, 100, 90).
        let all = t.lines().find(|l| l.contains("| all ")).unwrap_or_default();
        let cells: Vec<&str> = all.split('|').map(str::trim).collect();
        assert_eq!(
            cells.get(3..8),
            Some(&["100", "", "100", "", "1.00"][..]),
            "{t}"
        );
        let notes = c.round_notes();
        assert!(
            notes.starts_with("3 rounds of the load and of every workload"),
            "{notes}"
        );
        // Loads: redis (50, 100, 100), race (75, 50, 90).
        assert!(
            notes.contains("- load race÷redis: 1.50, 0.50, 0.90 (median 0.90)"),
            "{notes}"
        );
        assert!(
            c.report()
                .contains("dmkv-race: load 75 records/s (median round)"),
            "{}",
            c.report()
        );
        assert!(
            notes.contains("- C race÷redis: 1.50, 0.50, 0.90 (median 0.90)"),
            "{notes}"
        );
        assert!(c.report().contains(&notes));
        let j = c.to_json();
        assert_eq!(j["rounds"], 3);
        assert_eq!(j["systems"][1]["round_throughputs"][0][2], 90.0);
        assert_eq!(j["systems"][1]["load_throughputs"][1], 50.0);
        let one = Comparison { rounds: 1, ..c };
        assert_eq!(one.round_notes(), "");
    }

    #[test]
    fn missing_redis_server_says_how_to_install_it() {
        let e = RedisServer::start("/nonexistent/redis-server")
            .err()
            .unwrap();
        assert!(e.contains("apt-get install redis-server"), "{e}");
    }
}
