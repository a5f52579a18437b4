//! `ycsb switch`: what the soft switch costs with no function enabled — YCSB on dmkv
//! directly, through a switch in this process, and through the `accel-p4` switch as a
//! separate process, in interleaved rounds.
//!
//! Every path has its own embedded cluster (metadata service and memory node over `udp`
//! on loopback) and table, loaded once with the same records. Then each round runs the
//! workload (C by default) once on every path, in turn, so the paths see the same machine
//! conditions; the report gives per path the median throughput, READ p50/p99, round
//! trips per operation, processor time per operation (this process and the switch
//! process, from `/proc`), the median of the per-round ratios to the direct path, and the
//! in-process switch's per-packet pipeline time in sub-microsecond buckets.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use accel_p4::switch::SwitchHandle;
use testbed::results_page::{PageHeader, markdown_table};

use crate::bindings::dmkv::{DmkvBinding, DmkvConfig, capacity_for, record_bound};
use crate::client::{Phase, RunOptions, run_phase};
use crate::compare::{machine, workload_props};
use crate::measure::RunReport;
use crate::props::Properties;

/// The settings before `-p` overrides.
pub const DEFAULTS: &[(&str, &str)] = &[
    ("recordcount", "10000"),
    ("operationcount", "100000"),
    ("requestdistribution", "zipfian"),
    ("threadcount", "1"),
    ("concurrency", "8"),
    ("seed", "1"),
    ("hdrhistogram.percentiles", "50,99"),
];

/// How the repository's page is written.
pub const WRITTEN_BY: &str = "cargo build --release -p accel-p4 && cargo run --release -p ycsb -- \
     switch --results-md docs/results/switch-pass-through.md";

/// `ycsb switch` options.
#[derive(Debug, Clone, PartialEq)]
pub struct PassThroughArgs {
    /// `-p`, `-threads`, `-concurrency`: win over the defaults.
    pub overrides: Vec<(String, String)>,
    /// The workload run in every round (`c`).
    pub workload: String,
    /// Rounds (each runs the workload once per path).
    pub rounds: usize,
    /// The `accel-p4` binary for the separate-process path; `None`: the one beside this
    /// program, skipped when there is none.
    pub accel_p4: Option<PathBuf>,
    /// `--json FILE`.
    pub json: PathBuf,
    /// `--results-md FILE`.
    pub results_md: Option<PathBuf>,
    pub progress: Option<bool>,
}

impl Default for PassThroughArgs {
    fn default() -> Self {
        PassThroughArgs {
            overrides: Vec::new(),
            workload: "c".into(),
            rounds: 5,
            accel_p4: None,
            json: PathBuf::from("ycsb-switch.json"),
            results_md: None,
            progress: None,
        }
    }
}

/// An `accel-p4 serve` child on free loopback ports, open admin; killed when dropped.
struct SwitchProcess {
    child: Child,
    admin_url: String,
}

impl SwitchProcess {
    fn start(program: &PathBuf) -> Result<SwitchProcess, String> {
        let mut child = Command::new(program)
            .args([
                "serve",
                "--client-side",
                "127.0.0.1:0",
                "--memnode-side",
                "127.0.0.1:0",
                "--admin",
                "127.0.0.1:0",
                "--insecure-no-auth",
            ])
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", program.display()))?;
        let mut banner = String::new();
        if let Some(out) = child.stdout.take() {
            let _ = BufReader::new(out).read_line(&mut banner);
        }
        let Some(url) = banner
            .split("admin ")
            .nth(1)
            .map(|u| u.trim().to_string())
            .filter(|u| u.starts_with("http"))
        else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "{} printed no banner with its admin URL (got {banner:?})",
                program.display()
            ));
        };
        Ok(SwitchProcess {
            child,
            admin_url: url,
        })
    }
}

impl Drop for SwitchProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Processor seconds (user + system) of process `pid` (`self` for this one), from
/// `/proc/PID/stat` (clock ticks of 1/100 s).
fn cpu_seconds(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start at state (field 3).
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

/// A path to measure: its name, the properties that make it, why it cannot run.
type PathSpec = (&'static str, Vec<(&'static str, String)>, Option<String>);

/// One path's results over the rounds.
#[derive(Debug, Clone)]
pub struct PathRuns {
    /// `direct`, `switch in process`, `switch process`.
    pub name: String,
    /// Why it did not run, if it did not.
    pub unavailable: Option<String>,
    /// One report per round.
    pub runs: Vec<RunReport>,
    /// Processor µs per operation per round: (this process, the switch process).
    pub cpu_us_per_op: Vec<(f64, f64)>,
}

/// Everything one `ycsb switch` measured.
#[derive(Debug, Clone)]
pub struct PassThrough {
    pub date: String,
    pub machine: String,
    pub workload: String,
    pub settings: Properties,
    pub paths: Vec<PathRuns>,
    /// The in-process switch's pipeline time per packet: (upper bound s, packets).
    pub pipeline_buckets: Vec<(f64, u64)>,
    /// Its total pipeline time (s) and packets.
    pub pipeline_sum: (f64, u64),
}

/// The median of `v`, the lower middle value of an even count; `None` for none.
pub(crate) fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[(v.len() - 1) / 2])
}

fn read_percentile(r: &RunReport, p: f64) -> Option<f64> {
    r.ops
        .iter()
        .find(|o| o.name == "READ")
        .and_then(|o| o.percentiles.iter().find(|(q, _)| *q == p))
        .map(|(_, v)| *v as f64)
}

/// Run the measurement.
pub fn run(args: &PassThroughArgs) -> Result<PassThrough, String> {
    let mut base = Properties::new();
    for (k, v) in DEFAULTS {
        base.set(*k, *v);
    }
    for (k, v) in &args.overrides {
        base.set(k.clone(), v.clone());
    }
    base.set("dmkv.transport", "udp");
    let workload = format!("workload{}", args.workload.trim().to_ascii_lowercase());
    let run_props = workload_props(&workload, &base)?;
    let mut load_props = workload_props("workloada", &base)?;
    if !load_props.contains("dmkv.capacity") {
        let e = |e: crate::props::PropError| e.to_string();
        let records = load_props.get_u64("recordcount", 0).map_err(e)?;
        let threads = load_props.get_u64("threadcount", 1).map_err(e)?;
        let bound = record_bound(&load_props).map_err(|e| e.to_string())?;
        let capacity = capacity_for(2 * records.max(1000), bound, 2 * threads);
        load_props.set("dmkv.capacity", capacity.to_string());
    }
    let capacity = load_props.get("dmkv.capacity").map(str::to_owned);

    let accel_p4 = args.accel_p4.clone().or_else(|| {
        let beside = std::env::current_exe().ok()?.with_file_name("accel-p4");
        beside.exists().then_some(beside)
    });
    let process = accel_p4.as_ref().map(SwitchProcess::start);

    let mut specs: Vec<PathSpec> = vec![
        ("direct", vec![("dmkv.switch", "false".into())], None),
        (
            "switch in process",
            vec![("dmkv.switch", "true".into())],
            None,
        ),
    ];
    let child_pid = match &process {
        Some(Ok(p)) => {
            specs.push((
                "switch process",
                vec![("dmkv.switch.url", p.admin_url.clone())],
                None,
            ));
            Some(p.child.id().to_string())
        }
        Some(Err(e)) => {
            specs.push(("switch process", Vec::new(), Some(e.clone())));
            None
        }
        None => {
            specs.push((
                "switch process",
                Vec::new(),
                Some("no accel-p4 binary beside ycsb (cargo build --release -p accel-p4)".into()),
            ));
            None
        }
    };

    let opts = |phase: Phase| {
        let mut o = RunOptions::new(phase);
        if let Some(p) = args.progress {
            o.progress = p;
        }
        o.workload_label = if phase == Phase::Load {
            "load".into()
        } else {
            workload.clone()
        };
        o
    };
    let mut bindings: Vec<Option<DmkvBinding>> = Vec::new();
    let mut handles: Vec<Option<Arc<SwitchHandle>>> = Vec::new();
    let mut paths: Vec<PathRuns> = Vec::new();
    for (name, extra, unavailable) in specs {
        let mut path = PathRuns {
            name: name.into(),
            unavailable,
            runs: Vec::new(),
            cpu_us_per_op: Vec::new(),
        };
        let mut binding = None;
        let mut handle = None;
        if path.unavailable.is_none() {
            let mut p = load_props.clone();
            for (k, v) in &extra {
                p.set(*k, v.clone());
            }
            let made = DmkvConfig::from_props(&p)
                .map_err(|e| e.to_string())
                .and_then(|config| {
                    let (client, switch) = config.connect().map_err(|e| e.to_string())?;
                    let b = DmkvBinding::with_client(client, config).map_err(|e| e.to_string())?;
                    b.check().map_err(|e| e.to_string())?;
                    eprintln!("switch: loading {name}");
                    run_phase(&b, &p, &opts(Phase::Load)).map_err(|e| format!("load: {e}"))?;
                    Ok((b, switch))
                });
            match made {
                Ok((b, s)) => {
                    binding = Some(b);
                    handle = s;
                }
                Err(e) => path.unavailable = Some(e),
            }
        }
        bindings.push(binding);
        handles.push(handle);
        paths.push(path);
    }
    if paths.first().and_then(|p| p.unavailable.as_ref()).is_some() {
        return Err(format!(
            "the direct path did not start: {}",
            paths[0].unavailable.clone().unwrap_or_default()
        ));
    }

    // The in-process switch's histogram counts the rounds only.
    let pipeline_before = handles
        .iter()
        .flatten()
        .next()
        .map(|h| h.io_stats().pipeline_latency.value());
    for round in 1..=args.rounds.max(1) {
        for (i, b) in bindings.iter().enumerate() {
            let Some(b) = b else { continue };
            let mut p = run_props.clone();
            if let Some(c) = &capacity {
                p.set("dmkv.capacity", c.clone());
            }
            eprintln!("switch: round {round}, {}", paths[i].name);
            let child = if paths[i].name == "switch process" {
                child_pid.as_deref()
            } else {
                None
            };
            let cpu = |pid: Option<&str>| pid.and_then(cpu_seconds).unwrap_or(0.0);
            let (self_before, child_before) = (cpu(Some("self")), cpu(child));
            let r = run_phase(b, &p, &opts(Phase::Run))
                .map_err(|e| format!("{}: {e}", paths[i].name))?;
            let ops = r.operations.max(1) as f64;
            paths[i].cpu_us_per_op.push((
                (cpu(Some("self")) - self_before) * 1e6 / ops,
                (cpu(child) - child_before) * 1e6 / ops,
            ));
            paths[i].runs.push(r);
        }
    }
    let (pipeline_buckets, pipeline_sum) = match (
        pipeline_before,
        handles
            .iter()
            .flatten()
            .next()
            .map(|h| h.io_stats().pipeline_latency.value()),
    ) {
        (Some(before), Some(after)) => (
            after
                .buckets
                .iter()
                .zip(before.buckets.iter())
                .map(|((le, a), (_, b))| (*le, a.saturating_sub(*b)))
                .collect(),
            (
                after.sum - before.sum,
                after.count.saturating_sub(before.count),
            ),
        ),
        _ => (Vec::new(), (0.0, 0)),
    };
    drop(bindings);
    drop(handles);
    drop(process);
    Ok(PassThrough {
        date: crate::client::timestamp()[..10].to_string(),
        machine: machine(),
        workload,
        settings: base,
        paths,
        pipeline_buckets,
        pipeline_sum,
    })
}

impl PathRuns {
    fn throughputs(&self) -> Vec<f64> {
        self.runs.iter().map(|r| r.throughput).collect()
    }
}

impl PassThrough {
    /// Median of the per-round ratios of path `i`'s throughput to the direct path's.
    pub fn ratio_to_direct(&self, i: usize) -> Option<f64> {
        let direct = self.paths.first()?.throughputs();
        let mine = self.paths.get(i)?.throughputs();
        median(
            mine.iter()
                .zip(direct.iter())
                .filter(|(_, d)| **d > 0.0)
                .map(|(m, d)| m / d)
                .collect(),
        )
    }

    /// The results table (Markdown).
    pub fn table(&self) -> String {
        let f0 = |x: Option<f64>| x.map_or("–".to_string(), |v| format!("{v:.0}"));
        let f1 = |x: Option<f64>| x.map_or("–".to_string(), |v| format!("{v:.1}"));
        let f2 = |x: Option<f64>| x.map_or("–".to_string(), |v| format!("{v:.2}"));
        let rows: Vec<Vec<String>> = self
            .paths
            .iter()
            .enumerate()
            .map(|(i, p)| {
                if let Some(why) = &p.unavailable {
                    let mut row = vec![p.name.clone(), format!("not run: {why}")];
                    row.resize(9, String::new());
                    return row;
                }
                let per = |f: &dyn Fn(&RunReport) -> Option<f64>| {
                    median(p.runs.iter().filter_map(f).collect())
                };
                vec![
                    p.name.clone(),
                    f0(median(p.throughputs())),
                    if i == 0 {
                        "1".into()
                    } else {
                        f2(self.ratio_to_direct(i))
                    },
                    f0(per(&|r| read_percentile(r, 50.0))),
                    f0(per(&|r| read_percentile(r, 99.0))),
                    f2(per(&|r| r.protocol.as_ref().map(|x| x.round_trips_per_op))),
                    f1(median(p.cpu_us_per_op.iter().map(|c| c.0).collect())),
                    if p.name == "switch process" {
                        f1(median(p.cpu_us_per_op.iter().map(|c| c.1).collect()))
                    } else {
                        "–".into()
                    },
                    p.throughputs()
                        .iter()
                        .map(|t| format!("{t:.0}"))
                        .collect::<Vec<_>>()
                        .join(" "),
                ]
            })
            .collect();
        markdown_table(
            &[
                "path",
                "ops/s (median)",
                "÷ direct (median of rounds)",
                "READ p50 µs",
                "READ p99 µs",
                "round trips / op",
                "CPU µs / op, ycsb process",
                "CPU µs / op, switch process",
                "ops/s per round",
            ],
            &rows,
        )
    }

    /// The in-process switch's per-packet pipeline time (Markdown).
    pub fn histogram_table(&self) -> String {
        let total: u64 = self.pipeline_buckets.iter().map(|(_, n)| n).sum();
        let mut cumulative = 0;
        let rows: Vec<Vec<String>> = self
            .pipeline_buckets
            .iter()
            .map(|(le, n)| {
                cumulative += n;
                let bound = if le.is_finite() {
                    format!("≤ {:.0} ns", le * 1e9)
                } else {
                    "more".to_string()
                };
                vec![
                    bound,
                    n.to_string(),
                    format!("{:.1} %", 100.0 * cumulative as f64 / total.max(1) as f64),
                ]
            })
            .collect();
        markdown_table(&["pipeline time", "packets", "cumulative"], &rows)
    }

    /// The report: settings, the table, the histogram, notes (Markdown).
    pub fn report(&self) -> String {
        let s = &self.settings;
        let get = |k: &str| s.get(k).unwrap_or("?").to_string();
        let mean_ns = if self.pipeline_sum.1 > 0 {
            self.pipeline_sum.0 * 1e9 / self.pipeline_sum.1 as f64
        } else {
            0.0
        };
        let rounds = self.paths.first().map_or(0, |p| p.runs.len());
        format!(
            "YCSB {workload} on a Clover table, {records} records, {ops} operations per run, \
             {dist} requests, {threads} thread(s) × {conc} concurrent, soft RoCE (`udp`) on \
             loopback, {rounds} rounds; each round runs every path once, in turn. Machine: \
             {machine}; {date}.\n\n{table}\n\
             The switch runs with no function enabled (mode 0): it re-addresses every packet \
             and recomputes its ICRC, nothing else. \"÷ direct\" is the median of the \
             per-round ratios. CPU per operation is processor time (user + system, from \
             `/proc`, 10 ms ticks) over the run divided by its operations; the ycsb process \
             holds the client, the memory node and, for \"switch in process\", the switch.\n\n\
             ### Pipeline time per packet (the switch in process, all rounds)\n\n\
             {count} packets, mean {mean_ns:.0} ns (parse, ICRC check, the stages, deparse \
             with the new ICRC; socket time not included).\n\n{hist}",
            workload = self.workload,
            records = get("recordcount"),
            ops = get("operationcount"),
            dist = get("requestdistribution"),
            threads = get("threadcount"),
            conc = get("concurrency"),
            machine = self.machine,
            date = self.date,
            table = self.table(),
            count = self.pipeline_sum.1,
            hist = self.histogram_table(),
        )
    }

    /// The figures as JSON.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "date": self.date,
            "machine": self.machine,
            "workload": self.workload,
            "settings": self.settings.iter().collect::<std::collections::BTreeMap<_, _>>(),
            "paths": self.paths.iter().enumerate().map(|(i, p)| serde_json::json!({
                "name": p.name,
                "unavailable": p.unavailable,
                "ops_per_sec": p.throughputs(),
                "ratio_to_direct": self.ratio_to_direct(i),
                "read_p99_us": p.runs.iter().map(|r| read_percentile(r, 99.0)).collect::<Vec<_>>(),
                "cpu_us_per_op": p.cpu_us_per_op,
            })).collect::<Vec<_>>(),
            "pipeline_seconds_buckets": self.pipeline_buckets.iter()
                .map(|(le, n)| serde_json::json!({"le": if le.is_finite() { Some(*le) } else { None }, "packets": n}))
                .collect::<Vec<_>>(),
        })
    }

    /// The results page.
    pub fn page(&self, header: &PageHeader) -> String {
        let mut s = header.render("Results: the soft switch's pass-through", WRITTEN_BY);
        s.push_str(&self.report());
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_takes_the_lower_middle() {
        assert_eq!(median(vec![]), None);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), Some(2.0));
    }

    #[test]
    fn reads_this_process_cpu_time() {
        let t = cpu_seconds("self").expect("cpu time of this process");
        assert!(t >= 0.0);
        assert!(cpu_seconds("not-a-pid").is_none());
    }
}
