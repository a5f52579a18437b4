//! The command line, in YCSB's conventions.
//!
//! ```text
//! ycsb                                            (the demo: dmkv, embedded, workload A)
//! ycsb load|run|loadrun BINDING [-P workloadfile]... [-p key=value]... [-threads N]
//!      [-concurrency M] [-target OPS] [-s] [--json FILE] [--no-progress]
//! ycsb -load|-t -db BINDING ...                  (YCSB's Java client form)
//! ycsb compare [-p key=value]... [-threads N] [-concurrency M] [--quick] [--rounds N]
//!      [--json FILE]
//! ycsb switch [-p key=value]... [--rounds N] [--accel-p4 PATH] [--json FILE]
//! ycsb plot RESULTS.json... --out DIR
//! ```
//!
//! `-threads`, `-target` and `-concurrency` set the `threadcount`, `target` and `concurrency`
//! properties; like every `-p`, they win over workload files.

use crate::bindings;
use crate::client::{Phase, RunOptions, run_phase};
use crate::compare::CompareArgs;
use crate::exporter::Exporter;
use crate::measure::RunReport;
use crate::measurement_type::MeasurementConfig;
use crate::pass_through::PassThroughArgs;
use crate::props::Properties;
use crate::report::report_metrics;
use std::path::PathBuf;

pub const USAGE: &str = "\
Usage:
  ycsb                                       the demo: an embedded dmkv cluster (udp on loopback),
                                             workload A loaded and run, YCSB's report
  ycsb load|run|loadrun BINDING [options]    load data, run transactions, or both in one process
  ycsb -load|-t -db BINDING [options]        the same, YCSB's Java client spelling
  ycsb compare [options] [--quick]           redis-server and dmkv side by side (A, B, C, F)
  ycsb switch [options]                      the soft switch's pass-through: workload C direct,
                                             through a switch in process and as a process
  ycsb plot RESULTS.json... --out DIR        throughput-vs-threads and latency-CDF charts (SVG)

Options:
  -P FILE           workload file (Java properties); several are read in order. A missing
                    workloads/workloada ... workloadf is read from the built-in copy
  -p KEY=VALUE      set a property; wins over workload files
  -threads N        OS threads, each with its own binding session (threadcount)
  -concurrency M    concurrent operations per thread (concurrency, default 1)
  -target OPS       throttle to OPS operations per second in total (target)
  -s                print status lines on stderr every status.interval seconds (default 10)
  --json FILE       append this run's results to FILE ({\"runs\": [...]}) for `ycsb plot`
  --results-md FILE write every phase's report as a Markdown results page to FILE (date,
                    machine, command line; replaces FILE). `ycsb --results-md FILE` is the demo
  --no-progress     no progress bar (drawn only when stderr is a terminal)

Report properties (as YCSB): exporter=text|json|jsonarray (or YCSB's class names
  site.ycsb.measurements.exporter.TextMeasurementsExporter, ...JSONMeasurementsExporter,
  ...JSONArrayMeasurementsExporter), exportfile=PATH (default stdout; PATH.load and PATH.run
  when both phases run), measurementtype=hdrhistogram|histogram|timeseries|
  hdrhistogram+histogram, histogram.buckets (1000), timeseries.granularity (ms, 1000).
  With both phases, each report on stdout follows a [PHASE], load / [PHASE], run line.

Compare options: -p, -threads, -concurrency as above (defaults: recordcount=100000,
  operationcount=100000, 10 x 100-byte fields, zipfian, 1 thread x 8 concurrent), --quick
  (1000 records, 2000 operations), --workloads a,b,c,f, --json FILE (ycsb-compare.json),
  --results-md FILE (the report as a Markdown results page), --redis-server PATH,
  --rounds N (1: each workload N times, systems in turn, median runs shown, every
  round's ratio listed),
  --no-progress.

Switch options: -p, -threads, -concurrency as above (defaults: recordcount=10000,
  operationcount=100000, zipfian, 1 thread x 8 concurrent), --workload c, --rounds N (5),
  --accel-p4 PATH (default: the accel-p4 binary beside ycsb), --json FILE
  (ycsb-switch.json), --results-md FILE, --no-progress.

Bindings: dmkv (-p dmkv.index=clover|race|inplace, dmkv.latch=SCHEME for inplace,
  dmkv.transport=udp|shm|local, dmkv.metadata=URL
  of a running cluster, else an embedded one; dmkv.table, dmkv.memnodes, dmkv.capacity,
  dmkv.update=merge|overwrite, dmkv.credential_file=PATH [else env DMKV_CREDENTIAL, then
  DMKV_TOKEN] — secrets never go on the command line), memory (alias basic: in-process store),
  redis (-p redis.host, redis.port).
Workload properties use YCSB's names and defaults: recordcount, operationcount,
readproportion, updateproportion, insertproportion, scanproportion,
readmodifywriteproportion, requestdistribution (uniform|zipfian|latest|hotspot|exponential|
sequential), zipfianconstant, fieldcount, fieldlength, insertorder, hotspotdatafraction,
hotspotopnfraction, maxexecutiontime, dataintegrity, hdrhistogram.percentiles, ...
";

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// No arguments: [`demo_args`].
    Demo(BenchArgs),
    Bench(BenchArgs),
    Compare(CompareArgs),
    /// `ycsb switch`.
    Switch(PassThroughArgs),
    Plot {
        inputs: Vec<PathBuf>,
        out: PathBuf,
    },
    Help,
}

/// A load/run invocation.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchArgs {
    pub phases: Vec<Phase>,
    pub binding: String,
    pub props: Properties,
    pub status: bool,
    pub json: Option<PathBuf>,
    /// `--results-md FILE`: write the phases' reports as a Markdown results page.
    pub results_md: Option<PathBuf>,
    pub progress: Option<bool>,
    /// The last `-P` file's name.
    pub workload_label: String,
}

/// Parse the arguments after the program name.
pub fn parse_args(args: &[String]) -> Result<Command, String> {
    let mut it = args.iter().peekable();
    let Some(first) = it.peek().map(|s| s.as_str()) else {
        return Ok(Command::Demo(demo_args()));
    };
    if first == "--results-md" {
        let [_, path] = args else {
            return Err("--results-md needs a FILE (alone, it runs the demo)".into());
        };
        let mut demo = demo_args();
        demo.results_md = Some(PathBuf::from(path));
        return Ok(Command::Demo(demo));
    }
    if matches!(first, "-h" | "--help" | "help") {
        return Ok(Command::Help);
    }
    if first == "plot" {
        it.next();
        let mut inputs = Vec::new();
        let mut out = None;
        while let Some(a) = it.next() {
            match a.as_str() {
                "--out" | "-o" => out = Some(PathBuf::from(it.next().ok_or("--out needs a DIR")?)),
                _ => inputs.push(PathBuf::from(a)),
            }
        }
        if inputs.is_empty() {
            return Err("plot needs at least one results JSON file".into());
        }
        return Ok(Command::Plot {
            inputs,
            out: out.unwrap_or_else(|| PathBuf::from(".")),
        });
    }

    if first == "switch" {
        it.next();
        let mut c = PassThroughArgs::default();
        while let Some(a) = it.next() {
            let mut value = |name: &str| -> Result<String, String> {
                it.next()
                    .cloned()
                    .ok_or_else(|| format!("{a} needs {name}"))
            };
            match a.trim_start_matches('-') {
                "p" => c.overrides.push(
                    Properties::parse_override(&value("key=value")?).map_err(|e| e.to_string())?,
                ),
                "threads" => c
                    .overrides
                    .push(("threadcount".into(), value("a thread count")?)),
                "concurrency" => c.overrides.push(("concurrency".into(), value("a count")?)),
                "workload" => c.workload = value("a workload letter")?,
                "rounds" => {
                    c.rounds = value("a count")?
                        .parse()
                        .map_err(|_| format!("{a} needs a count"))?
                }
                "accel-p4" => c.accel_p4 = Some(PathBuf::from(value("a path")?)),
                "json" => c.json = PathBuf::from(value("a file")?),
                "results-md" => c.results_md = Some(PathBuf::from(value("a file")?)),
                "no-progress" => c.progress = Some(false),
                "progress" => c.progress = Some(true),
                "h" | "help" => return Ok(Command::Help),
                _ => return Err(format!("unknown switch option {a}")),
            }
        }
        return Ok(Command::Switch(c));
    }

    if first == "compare" {
        it.next();
        let mut c = CompareArgs::default();
        while let Some(a) = it.next() {
            let mut value = |name: &str| -> Result<String, String> {
                it.next()
                    .cloned()
                    .ok_or_else(|| format!("{a} needs {name}"))
            };
            match a.trim_start_matches('-') {
                "p" => c.overrides.push(
                    Properties::parse_override(&value("key=value")?).map_err(|e| e.to_string())?,
                ),
                "threads" => c
                    .overrides
                    .push(("threadcount".into(), value("a thread count")?)),
                "concurrency" => c.overrides.push(("concurrency".into(), value("a count")?)),
                "quick" => c.quick = true,
                "json" => c.json = PathBuf::from(value("a file")?),
                "results-md" => c.results_md = Some(PathBuf::from(value("a file")?)),
                "workloads" => {
                    c.workloads = value("a list like a,b,c,f")?
                        .split(',')
                        .filter(|w| !w.trim().is_empty())
                        .map(|w| w.trim().to_string())
                        .collect()
                }
                "redis-server" => c.redis_server = value("a path")?,
                "rounds" => {
                    let v = value("a number of rounds")?;
                    c.rounds = match v.parse::<usize>() {
                        Ok(n) if n >= 1 => n,
                        _ => {
                            return Err(format!(
                                "--rounds needs a whole number of 1 or more, not {v:?}"
                            ));
                        }
                    };
                }
                "no-progress" => c.progress = Some(false),
                "progress" => c.progress = Some(true),
                "h" | "help" => return Ok(Command::Help),
                _ => return Err(format!("unknown compare option {a}")),
            }
        }
        return Ok(Command::Compare(c));
    }

    let mut phases = Vec::new();
    let mut binding = None;
    match first {
        "load" => phases.push(Phase::Load),
        "run" => phases.push(Phase::Run),
        "loadrun" => phases.extend([Phase::Load, Phase::Run]),
        _ => {}
    }
    if !phases.is_empty() {
        it.next();
        match it.peek() {
            Some(b) if !b.starts_with('-') => binding = it.next().cloned(),
            _ => {}
        }
    }
    let mut files: Vec<String> = Vec::new();
    let mut overrides: Vec<(String, String)> = Vec::new();
    let mut status = false;
    let mut json = None;
    let mut results_md = None;
    let mut progress = None;
    while let Some(a) = it.next() {
        let flag = a.trim_start_matches('-');
        let mut value = |name: &str| -> Result<String, String> {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{a} needs {name}"))
        };
        if !a.starts_with('-') {
            return Err(format!("unexpected argument {a:?}"));
        }
        match flag {
            "P" => files.push(value("a workload file")?),
            "p" => overrides
                .push(Properties::parse_override(&value("key=value")?).map_err(|e| e.to_string())?),
            "threads" => overrides.push(("threadcount".into(), value("a thread count")?)),
            "concurrency" => overrides.push(("concurrency".into(), value("a count")?)),
            "target" => overrides.push(("target".into(), value("ops per second")?)),
            "db" => binding = Some(value("a binding name")?),
            "load" => phases = vec![Phase::Load],
            "t" => phases = vec![Phase::Run],
            "s" => status = true,
            "json" => json = Some(PathBuf::from(value("a file")?)),
            "results-md" => results_md = Some(PathBuf::from(value("a file")?)),
            "no-progress" => progress = Some(false),
            "progress" => progress = Some(true),
            "h" | "help" => return Ok(Command::Help),
            _ => return Err(format!("unknown option {a}")),
        }
    }
    if phases.is_empty() {
        return Err("say which phase: load, run or loadrun (or -load / -t)".into());
    }
    let binding = binding.ok_or("say which binding, e.g. `ycsb load memory ...`")?;
    let mut props = Properties::new();
    for f in &files {
        merge_workload_file(&mut props, f)?;
    }
    for (k, v) in overrides {
        props.set(k, v);
    }
    // Refuse an unknown exporter or measurement type before anything runs.
    Exporter::from_props(&props).map_err(|e| e.to_string())?;
    MeasurementConfig::from_props(&props).map_err(|e| e.to_string())?;
    let workload_label = files
        .last()
        .map(|f| {
            std::path::Path::new(f)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| f.clone())
        })
        .or_else(|| props.get("workload").map(str::to_string))
        .unwrap_or_else(|| "custom".into());
    Ok(Command::Bench(BenchArgs {
        phases,
        binding,
        props,
        status,
        json,
        results_md,
        progress,
        workload_label,
    }))
}

/// Read workload file `f` into `props`; a standard workload file that is not on disk
/// (`workloads/workloadb` run from another directory) is read from the built-in copy.
fn merge_workload_file(props: &mut Properties, f: &str) -> Result<(), String> {
    let path = std::path::Path::new(f);
    if !path.exists()
        && let Some(text) = path
            .file_name()
            .and_then(|n| n.to_str())
            .filter(|n| n.starts_with("workload"))
            .and_then(crate::workload::builtin_workload)
    {
        props.merge_str(text);
        return Ok(());
    }
    props.merge_file(f).map_err(|e| e.to_string())
}

/// Records the demo loads: small enough for a minute on a 2-core machine.
pub const DEMO_RECORDS: u64 = 20_000;
/// Operations the demo runs.
pub const DEMO_OPERATIONS: u64 = 500_000;

/// What `ycsb` with no arguments runs: `ycsb loadrun dmkv -P workloads/workloada` with
/// [`DEMO_RECORDS`] records and [`DEMO_OPERATIONS`] operations, 1 thread with 8 operations in
/// flight, on an embedded cluster over udp.
pub fn demo_args() -> BenchArgs {
    let mut props = Properties::parse_str(
        crate::workload::builtin_workload("workloada").expect("workload A is built in"),
    );
    props.set("recordcount", DEMO_RECORDS.to_string());
    props.set("operationcount", DEMO_OPERATIONS.to_string());
    props.set("threadcount", "1");
    props.set("concurrency", "8");
    props.set("dmkv.transport", "udp");
    BenchArgs {
        phases: vec![Phase::Load, Phase::Run],
        binding: "dmkv".into(),
        props,
        status: false,
        json: None,
        results_md: None,
        progress: None,
        workload_label: "workloada".into(),
    }
}

/// Append `report` to the `{"runs": [...]}` file at `path`.
pub fn append_json(path: &std::path::Path, report: &RunReport) -> Result<(), String> {
    let mut doc: serde_json::Value = match std::fs::read_to_string(path) {
        Ok(text) if !text.trim().is_empty() => serde_json::from_str(&text)
            .map_err(|e| format!("{} is not a results file: {e}", path.display()))?,
        _ => serde_json::json!({ "runs": [] }),
    };
    let runs = doc
        .get_mut("runs")
        .and_then(|r| r.as_array_mut())
        .ok_or_else(|| format!("{} has no \"runs\" array", path.display()))?;
    runs.push(serde_json::to_value(report).map_err(|e| e.to_string())?);
    let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
    std::fs::write(path, text + "\n").map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Run the command line; returns the exit code.
pub fn main_with(args: &[String]) -> i32 {
    let cmd = match parse_args(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ycsb: {e}\n\n{USAGE}");
            return 2;
        }
    };
    match cmd {
        Command::Help => {
            print!("{USAGE}");
            0
        }
        Command::Plot { inputs, out } => match crate::plot::plot_files(&inputs, &out) {
            Ok(files) => {
                for f in files {
                    println!("{}", f.display());
                }
                0
            }
            Err(e) => {
                eprintln!("ycsb plot: {e}");
                1
            }
        },
        Command::Demo(b) => {
            eprintln!(
                "ycsb: no arguments, so the demo: `ycsb loadrun dmkv -P workloads/workloada -p \
                 recordcount={DEMO_RECORDS} -p operationcount={DEMO_OPERATIONS} -threads 1 \
                 -concurrency 8` on an embedded dmkv cluster (metadata service and a memory node \
                 on 127.0.0.1, soft RoCE over udp). `ycsb --help` shows the rest."
            );
            match bench(&b) {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("ycsb: {e}");
                    1
                }
            }
        }
        Command::Bench(b) => match bench(&b) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("ycsb: {e}");
                1
            }
        },
        Command::Switch(c) => match crate::pass_through::run(&c) {
            Ok(pt) => {
                print!("{}", pt.report());
                let page = |h: &testbed::results_page::PageHeader| pt.page(h);
                write_outputs(
                    "ycsb switch",
                    c.results_md.as_deref(),
                    page,
                    &c.json,
                    pt.to_json(),
                )
            }
            Err(e) => {
                eprintln!("ycsb switch: {e}");
                1
            }
        },
        Command::Compare(c) => match crate::compare::run(&c) {
            Ok(cmp) => {
                print!("{}", cmp.report());
                let page = |h: &testbed::results_page::PageHeader| {
                    crate::results_md::render_compare(h, &cmp)
                };
                write_outputs(
                    "ycsb compare",
                    c.results_md.as_deref(),
                    page,
                    &c.json,
                    cmp.to_json(),
                )
            }
            Err(e) => {
                eprintln!("ycsb compare: {e}");
                1
            }
        },
    }
}

/// Writes a measuring command's results page (when asked) and its JSON; the exit
/// status (1 when either could not be written, `what` naming the command).
fn write_outputs(
    what: &str,
    results_md: Option<&std::path::Path>,
    page: impl FnOnce(&testbed::results_page::PageHeader) -> String,
    json: &std::path::Path,
    doc: serde_json::Value,
) -> i32 {
    if let Some(path) = results_md {
        let page = page(&testbed::results_page::PageHeader::current());
        if let Err(e) = testbed::results_page::write_page(path, &page) {
            eprintln!("{what}: {e}");
            return 1;
        }
        println!("results page: {}", path.display());
    }
    let text = serde_json::to_string_pretty(&doc).unwrap_or_default();
    match std::fs::write(json, text + "\n") {
        Ok(()) => {
            println!("results: {}", json.display());
            0
        }
        Err(e) => {
            eprintln!("{what}: cannot write {}: {e}", json.display());
            1
        }
    }
}

/// The line that names a phase before its report on stdout when one invocation runs both.
pub fn phase_line(phase: Phase) -> String {
    format!("[PHASE], {}", phase.name())
}

/// Where `exportfile=PATH` puts a phase's report when one invocation runs both: `PATH.load`,
/// `PATH.run`.
pub fn phase_export_path(file: &std::path::Path, phase: Phase) -> PathBuf {
    let mut s = file.as_os_str().to_os_string();
    s.push(".");
    s.push(phase.name());
    PathBuf::from(s)
}

fn bench(b: &BenchArgs) -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !args.is_empty() {
        eprintln!("Command line: {}", args.join(" "));
    }
    let binding: Box<dyn crate::db::Binding> = if b.binding == "dmkv" {
        let d = bindings::dmkv::DmkvBinding::new(&b.props).map_err(|e| e.to_string())?;
        eprintln!("{}", d.describe());
        if d.config().metadata.is_none() && b.phases.len() == 1 {
            eprintln!(
                "dmkv: note: the embedded cluster lives only as long as this process; use \
                 `loadrun` (or -p dmkv.metadata=URL of a running cluster) to run on loaded data"
            );
        }
        Box::new(d)
    } else {
        bindings::by_name(&b.binding, &b.props).map_err(|e| e.to_string())?
    };
    let exporter = Exporter::from_props(&b.props).map_err(|e| e.to_string())?;
    MeasurementConfig::from_props(&b.props).map_err(|e| e.to_string())?;
    let exportfile = b.props.get("exportfile").map(PathBuf::from);
    let labelled = b.phases.len() > 1;
    let mut reports = Vec::new();
    for &phase in &b.phases {
        let mut opts = RunOptions::new(phase);
        opts.status = b.status;
        if let Some(p) = b.progress {
            opts.progress = p;
        }
        opts.workload_label = b.workload_label.clone();
        let report = run_phase(&*binding, &b.props, &opts).map_err(|e| e.to_string())?;
        let text = exporter.render(&report_metrics(&report));
        match &exportfile {
            None => {
                if labelled {
                    println!("{}", phase_line(phase));
                }
                print!("{text}");
            }
            Some(file) => {
                let path = if labelled {
                    phase_export_path(file, phase)
                } else {
                    file.clone()
                };
                if let Err(e) = std::fs::write(&path, &text) {
                    // Keep the figures: print them rather than lose the run.
                    print!("{text}");
                    return Err(format!("cannot write exportfile {}: {e}", path.display()));
                }
                eprintln!(
                    "ycsb: {} report written to {}",
                    phase.name(),
                    path.display()
                );
            }
        }
        if let Some(path) = &b.json {
            append_json(path, &report)?;
        }
        reports.push(report);
    }
    if let Some(path) = &b.results_md {
        let page =
            crate::results_md::render_runs(&testbed::results_page::PageHeader::current(), &reports);
        testbed::results_page::write_page(path, &page)?;
        eprintln!("ycsb: wrote {}", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn ycsb_and_java_forms() {
        let Command::Bench(b) = parse_args(&args(
            "run redis -p recordcount=5 -threads 4 -target 100 -s",
        ))
        .unwrap() else {
            panic!()
        };
        assert_eq!(b.phases, vec![Phase::Run]);
        assert_eq!(b.binding, "redis");
        assert_eq!(b.props.get("threadcount"), Some("4"));
        assert_eq!(b.props.get("target"), Some("100"));
        assert_eq!(b.props.get("recordcount"), Some("5"));
        assert!(b.status);
        let Command::Bench(b) = parse_args(&args("-load -db basic -p a=b=c")).unwrap() else {
            panic!()
        };
        assert_eq!(b.phases, vec![Phase::Load]);
        assert_eq!(b.binding, "basic");
        assert_eq!(b.props.get("a"), Some("b=c"));
        assert!(parse_args(&args("run memory -x")).is_err());
        assert!(parse_args(&args("memory")).is_err());
    }

    #[test]
    fn results_md_flag() {
        let Command::Bench(b) = parse_args(&args(
            "loadrun memory --results-md out/y.md -p recordcount=5",
        ))
        .unwrap() else {
            panic!()
        };
        assert_eq!(b.results_md, Some(PathBuf::from("out/y.md")));
        let Command::Demo(d) = parse_args(&args("--results-md y.md")).unwrap() else {
            panic!()
        };
        assert_eq!(d.results_md, Some(PathBuf::from("y.md")));
        assert_eq!(d.binding, "dmkv");
        assert!(parse_args(&args("--results-md")).is_err());
        assert!(parse_args(&args("--results-md y.md -threads 2")).is_err());
        let Command::Compare(c) = parse_args(&args("compare --quick --results-md c.md")).unwrap()
        else {
            panic!()
        };
        assert_eq!(c.results_md, Some(PathBuf::from("c.md")));
        assert!(parse_args(&args("run memory --results-md")).is_err());
    }

    #[test]
    fn demo_and_compare() {
        let Command::Demo(d) = parse_args(&[]).unwrap() else {
            panic!()
        };
        assert_eq!(d.binding, "dmkv");
        assert_eq!(d.phases, vec![Phase::Load, Phase::Run]);
        assert_eq!(d.props.get("readproportion"), Some("0.5"));
        assert_eq!(d.props.get("recordcount"), Some("20000"));
        assert_eq!(parse_args(&args("--help")).unwrap(), Command::Help);
        let Command::Compare(c) = parse_args(&args(
            "compare --quick -threads 2 -p operationcount=10 --workloads b,c --json x.json",
        ))
        .unwrap() else {
            panic!()
        };
        assert!(c.quick);
        assert_eq!(c.workloads, ["b", "c"]);
        assert_eq!(c.json, PathBuf::from("x.json"));
        assert_eq!(
            c.overrides,
            [
                ("threadcount".to_string(), "2".to_string()),
                ("operationcount".to_string(), "10".to_string())
            ]
        );
        assert!(parse_args(&args("compare --bogus")).is_err());
        assert_eq!(c.rounds, 1);
        let Command::Compare(c) = parse_args(&args("compare --rounds 3")).unwrap() else {
            panic!()
        };
        assert_eq!(c.rounds, 3);
        for bad in [
            "compare --rounds 0",
            "compare --rounds x",
            "compare --rounds",
        ] {
            assert!(parse_args(&args(bad)).is_err(), "{bad}");
        }
        let Command::Switch(s) = parse_args(&args(
            "switch --rounds 3 -p recordcount=100 --accel-p4 /x/accel-p4 --results-md s.md",
        ))
        .unwrap() else {
            panic!()
        };
        assert_eq!(s.rounds, 3);
        assert_eq!(s.workload, "c");
        assert_eq!(s.accel_p4, Some(PathBuf::from("/x/accel-p4")));
        assert_eq!(s.results_md, Some(PathBuf::from("s.md")));
        assert_eq!(
            s.overrides,
            [("recordcount".to_string(), "100".to_string())]
        );
        assert!(parse_args(&args("switch --rounds many")).is_err());
        // A standard workload file that is not on disk comes from the built-in copy.
        let Command::Bench(b) =
            parse_args(&args("run memory -P /nonexistent/workloads/workloadc")).unwrap()
        else {
            panic!()
        };
        assert_eq!(b.props.get("readproportion"), Some("1"));
        assert!(parse_args(&args("run memory -P /nonexistent/mine")).is_err());
    }

    #[test]
    fn unknown_exporters_and_measurement_types_are_refused_before_running() {
        let e = parse_args(&args("loadrun memory -p exporter=site.ycsb.Nope")).unwrap_err();
        assert!(e.contains("exporter=site.ycsb.Nope"), "{e}");
        let e = parse_args(&args("run memory -p measurementtype=raw")).unwrap_err();
        assert!(e.contains("measurementtype=raw"), "{e}");
        assert!(
            parse_args(&args(
                "run memory -p exporter=jsonarray -p measurementtype=timeseries"
            ))
            .is_ok()
        );
        assert_eq!(
            phase_export_path(std::path::Path::new("out/r.json"), Phase::Load),
            PathBuf::from("out/r.json.load")
        );
        assert_eq!(phase_line(Phase::Run), "[PHASE], run");
    }
}
